//! Shamir secret sharing of the 32-byte root key over GF(2^8) (the AES
//! field, x^8 + x^4 + x^3 + x + 1), k of n, as OpenBao splits its root
//! key: each byte of the secret is the constant term of its own random
//! polynomial of degree k - 1, and share i holds the polynomials' values
//! at x = i. Any k shares give the secret back by Lagrange interpolation
//! at 0; k - 1 shares are consistent with every secret, so they reveal
//! nothing.
//!
//! Constant time: multiplication is bitwise (eight masked shift-and-add
//! rounds, no log/exp tables), inversion is a fixed chain of
//! multiplications (a^254), and no branch depends on a secret byte. The
//! share indexes are public.
//!
//! A share is 33 bytes, the 32 values then the index (OpenBao's layout),
//! shown as standard base64 (OpenBao's `keys_base64`) or hex (`keys`).

use thiserror::Error;
use zeroize::Zeroizing;

use crate::{Entropy, KeyringError};

/// Bytes of the shared secret (the root key).
pub const SECRET_LEN: usize = 32;
/// Bytes of an encoded share: the values, then the index.
pub const SHARE_LEN: usize = SECRET_LEN + 1;

/// Why shares could not be made or combined.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShamirError {
    /// Threshold and share count outside 1 <= k <= n <= 255, or k = 1 with
    /// n > 1 (OpenBao's rule: one share alone must not be enough when
    /// there are several).
    #[error(
        "invalid threshold {threshold} of {shares} shares (need 2 <= threshold <= shares <= 255, or 1 of 1)"
    )]
    InvalidParameters {
        /// k.
        threshold: u8,
        /// n.
        shares: u8,
    },
    /// Fewer shares than the threshold.
    #[error("{given} shares given, {threshold} needed")]
    NotEnoughShares {
        /// How many were given.
        given: usize,
        /// How many are needed.
        threshold: usize,
    },
    /// Two shares with the same index.
    #[error("share index {0} given twice")]
    DuplicateIndex(u8),
    /// A share that is not 33 bytes of base64 or hex, or has index 0.
    #[error("malformed share: {0}")]
    Malformed(&'static str),
    /// The random source failed.
    #[error("random source failed: {0}")]
    Entropy(String),
}

/// One share of the root key. `Debug` shows the index only.
#[derive(Clone, PartialEq, Eq)]
pub struct Share {
    index: u8,
    values: Zeroizing<[u8; SECRET_LEN]>,
}

impl core::fmt::Debug for Share {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Share {{ index: {}, values: <redacted> }}", self.index)
    }
}

impl Share {
    /// The share's x coordinate (1..=255).
    pub fn index(&self) -> u8 {
        self.index
    }

    /// The 33-byte encoding: the values, then the index.
    pub fn to_bytes(&self) -> Zeroizing<[u8; SHARE_LEN]> {
        let mut out = Zeroizing::new([0; SHARE_LEN]);
        out[..SECRET_LEN].copy_from_slice(&self.values[..]);
        out[SECRET_LEN] = self.index;
        out
    }

    /// Standard base64 of [`Share::to_bytes`], as OpenBao's
    /// `keys_base64`.
    pub fn to_base64(&self) -> Zeroizing<String> {
        crate::secret_text::base64(&self.to_bytes()[..])
    }

    /// Hex of [`Share::to_bytes`], as OpenBao's `keys`.
    pub fn to_hex(&self) -> Zeroizing<String> {
        crate::secret_text::hex(&self.to_bytes()[..])
    }

    /// Decodes a share from its 33 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ShamirError> {
        let bytes: &[u8; SHARE_LEN] = bytes
            .try_into()
            .map_err(|_| ShamirError::Malformed("not 33 bytes"))?;
        let index = bytes[SECRET_LEN];
        if index == 0 {
            return Err(ShamirError::Malformed("index 0"));
        }
        let mut values = Zeroizing::new([0; SECRET_LEN]);
        values.copy_from_slice(&bytes[..SECRET_LEN]);
        Ok(Share { index, values })
    }

    /// Decodes a share as `sys/unseal`'s `key` takes it: 66 hex digits or
    /// standard base64 of 33 bytes (surrounding whitespace ignored). The
    /// form is told by the length alone and decoded in constant time.
    pub fn parse(text: &str) -> Result<Self, ShamirError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * SHARE_LEN {
            crate::secret_text::hex_exact::<SHARE_LEN>(text)
        } else {
            crate::secret_text::base64_exact::<SHARE_LEN>(text)
        }
        .map_err(|err| match err {
            crate::secret_text::BadText::Length => ShamirError::Malformed("not 33 bytes"),
            crate::secret_text::BadText::Alphabet => {
                ShamirError::Malformed("neither hex nor base64")
            }
        })?;
        Share::from_bytes(&bytes[..])
    }
}

/// Multiplication in GF(2^8) mod x^8 + x^4 + x^3 + x + 1, without tables
/// or branches.
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub(crate) fn gf_mul(mut a: u8, b: u8) -> u8 {
    let mut product = 0u8;
    for bit in 0..8 {
        let take = 0u8.wrapping_sub((b >> bit) & 1);
        product ^= a & take;
        let carry = 0u8.wrapping_sub(a >> 7);
        a = (a << 1) ^ (0x1b & carry);
    }
    product
}

/// The inverse in GF(2^8), a^254 (0 for 0), by a fixed chain of
/// multiplications.
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub(crate) fn gf_inv(a: u8) -> u8 {
    // 254 = 0b1111_1110: square, then multiply by a, seven times over.
    let mut result = a;
    for _ in 0..6 {
        result = gf_mul(gf_mul(result, result), a);
    }
    gf_mul(result, result)
}

fn check_parameters(threshold: u8, shares: u8) -> Result<(), ShamirError> {
    let ok = threshold >= 1 && threshold <= shares && (threshold >= 2 || shares == 1);
    if ok {
        Ok(())
    } else {
        Err(ShamirError::InvalidParameters { threshold, shares })
    }
}

/// Splits `secret` into `shares` shares (indexes 1..=shares), any
/// `threshold` of which give it back.
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub fn split(
    secret: &[u8; SECRET_LEN],
    threshold: u8,
    shares: u8,
    entropy: &mut dyn Entropy,
) -> Result<Vec<Share>, ShamirError> {
    check_parameters(threshold, shares)?;
    // coefficients[byte][degree - 1] for degrees 1..threshold.
    let mut coefficients = Zeroizing::new(vec![0u8; SECRET_LEN * usize::from(threshold - 1)]);
    entropy.fill(&mut coefficients).map_err(|err| match err {
        KeyringError::Entropy(msg) => ShamirError::Entropy(msg),
        other => ShamirError::Entropy(other.to_string()),
    })?;
    let degree = usize::from(threshold - 1);
    Ok((1..=shares)
        .map(|x| {
            let mut values = Zeroizing::new([0; SECRET_LEN]);
            for (byte, value) in values.iter_mut().enumerate() {
                // Horner from the highest coefficient down to the secret.
                let row = &coefficients[byte * degree..(byte + 1) * degree];
                let mut acc = 0u8;
                for &c in row.iter().rev() {
                    acc = gf_mul(acc, x) ^ c;
                }
                *value = gf_mul(acc, x) ^ secret[byte];
            }
            Share { index: x, values }
        })
        .collect())
}

/// Combines shares into the secret by Lagrange interpolation at 0. Any
/// set of distinct shares gives *a* value; only `threshold` shares of one
/// split give the secret, so the caller checks the result (the root key
/// must open the keyring).
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub fn combine(
    shares: &[Share],
    threshold: usize,
) -> Result<Zeroizing<[u8; SECRET_LEN]>, ShamirError> {
    if shares.len() < threshold || shares.is_empty() {
        return Err(ShamirError::NotEnoughShares {
            given: shares.len(),
            threshold,
        });
    }
    for (i, a) in shares.iter().enumerate() {
        if shares[..i].iter().any(|b| b.index == a.index) {
            return Err(ShamirError::DuplicateIndex(a.index));
        }
    }
    let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
    for share in shares {
        // basis = prod_{j != i} x_j / (x_j - x_i); public (indexes only).
        let mut basis = 1u8;
        for other in shares.iter().filter(|o| o.index != share.index) {
            basis = gf_mul(
                basis,
                gf_mul(other.index, gf_inv(other.index ^ share.index)),
            );
        }
        for (out, &y) in secret.iter_mut().zip(share.values.iter()) {
            *out ^= gf_mul(y, basis);
        }
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OsEntropy;

    /// Slow reference multiplication: Russian peasant with branches.
    fn reference_mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 == 1 {
                p ^= a;
            }
            let hi = a & 0x80 != 0;
            a <<= 1;
            if hi {
                a ^= 0x1b;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn field_arithmetic_matches_the_reference_and_aes_known_values() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(gf_mul(a, b), reference_mul(a, b), "{a} * {b}");
            }
        }
        // FIPS 197, section 4.2: {57} * {83} = {c1}, {57} * {13} = {fe}.
        assert_eq!(gf_mul(0x57, 0x83), 0xc1);
        assert_eq!(gf_mul(0x57, 0x13), 0xfe);
        assert_eq!(gf_inv(0), 0);
        for a in 1..=255u8 {
            assert_eq!(gf_mul(a, gf_inv(a)), 1, "inverse of {a}");
        }
        // The AES S-box's inverse step: {53}^-1 = {ca} (FIPS 197, 5.1.1).
        assert_eq!(gf_inv(0x53), 0xca);
    }

    fn secret() -> [u8; 32] {
        core::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11))
    }

    #[test]
    fn every_k_subset_gives_the_secret_back() {
        let shares = split(&secret(), 3, 5, &mut OsEntropy).expect("split");
        assert_eq!(shares.len(), 5);
        for a in 0..5 {
            for b in a + 1..5 {
                for c in b + 1..5 {
                    let subset = [shares[a].clone(), shares[c].clone(), shares[b].clone()];
                    assert_eq!(
                        *combine(&subset, 3).expect("combine"),
                        secret(),
                        "{a}{b}{c}"
                    );
                }
            }
        }
        let all = combine(&shares, 3).expect("all five");
        assert_eq!(*all, secret());
    }

    #[test]
    fn k_minus_1_shares_are_refused_and_reveal_nothing() {
        let shares = split(&secret(), 3, 5, &mut OsEntropy).expect("split");
        assert_eq!(
            combine(&shares[..2], 3),
            Err(ShamirError::NotEnoughShares {
                given: 2,
                threshold: 3
            })
        );
        // Perfect secrecy: for two fixed shares, every candidate value of
        // a secret byte is matched by exactly one third share value, so
        // the two shares rule nothing out. Checked for byte 0 by
        // interpolating with each possible third share at x = 3.
        let mut seen = [false; 256];
        for y in 0..=255u8 {
            let mut third = shares[2].clone();
            third.values[0] = y;
            let got = combine(&[shares[0].clone(), shares[1].clone(), third], 3).expect("combine");
            seen[usize::from(got[0])] = true;
        }
        assert!(seen.iter().all(|&s| s), "some secret byte unreachable");
    }

    #[test]
    fn a_changed_share_gives_another_secret() {
        let shares = split(&secret(), 2, 3, &mut OsEntropy).expect("split");
        let mut bad = shares[1].clone();
        bad.values[5] ^= 1;
        let got = combine(&[shares[0].clone(), bad], 2).expect("combine");
        assert_ne!(*got, secret());
        assert_eq!(got[..5], secret()[..5]);
    }

    #[test]
    fn parameters_duplicates_and_malformed_shares_refused() {
        for (k, n) in [(0, 3), (4, 3), (1, 3), (0, 0), (2, 1)] {
            assert_eq!(
                split(&secret(), k, n, &mut OsEntropy).map(|_| ()),
                Err(ShamirError::InvalidParameters {
                    threshold: k,
                    shares: n
                })
            );
        }
        let one = split(&secret(), 1, 1, &mut OsEntropy).expect("1 of 1");
        assert_eq!(*combine(&one, 1).expect("combine"), secret());
        let shares = split(&secret(), 2, 255, &mut OsEntropy).expect("2 of 255");
        assert_eq!(shares[254].index(), 255);
        assert_eq!(
            combine(&[shares[3].clone(), shares[3].clone()], 2),
            Err(ShamirError::DuplicateIndex(4))
        );
        assert_eq!(
            Share::parse("AAAA"),
            Err(ShamirError::Malformed("not 33 bytes"))
        );
        assert_eq!(
            Share::parse("not base64!"),
            Err(ShamirError::Malformed("neither hex nor base64"))
        );
        assert_eq!(
            Share::from_bytes(&[0; 33]),
            Err(ShamirError::Malformed("index 0"))
        );
    }

    #[test]
    fn base64_and_hex_forms_round_trip_and_debug_hides_values() {
        let shares = split(&secret(), 2, 2, &mut OsEntropy).expect("split");
        for share in &shares {
            let b64 = share.to_base64();
            assert_eq!(b64.len(), 44);
            assert_eq!(&Share::parse(&b64).expect("base64"), share);
            let hex = share.to_hex();
            assert_eq!(hex.len(), 66);
            assert_eq!(&Share::parse(&hex).expect("hex"), share);
            assert_eq!(&Share::parse(&hex.to_uppercase()).expect("HEX"), share);
            let debug = format!("{share:?}");
            assert!(debug.contains("redacted") && !debug.contains(&**b64));
        }
    }
}
