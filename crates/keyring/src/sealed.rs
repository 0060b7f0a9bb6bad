//! The keyring at rest: serialised (JSON) and sealed with AES-256-GCM
//! under the 256-bit root key. The header, public and bound into the
//! associated data, carries the format version, the Shamir threshold and
//! share count (so a sealed server can report them) and the generation
//! (so a file of one generation cannot pass for another).
//!
//! ```text
//!  offset  len  field
//!       0    8  magic "AESDKRNG"
//!       8    1  format version (1)
//!       9    1  cipher (1 = AES-256-GCM)
//!      10    1  threshold k
//!      11    1  shares n
//!      12    8  generation, big-endian (1, 2, ...)
//!      20   12  nonce (random)
//!      32    -  AES-256-GCM(root key, nonce, aad = bytes 0..20, JSON) || tag
//! ```
//!
//! The root key never leaves memory in the clear: [`initialize`] makes it
//! and splits it into shares, [`crate::unseal::Unsealer`] combines them.
//! A random nonce per generation: far below 2^32 seals per root key.

use serde::{Deserialize, Serialize};
use thiserror::Error;
use zeroize::Zeroizing;

use crate::aead::{self, KeyType, NONCE_LEN, TAG_LEN};
use crate::policy::PolicyStore;
use crate::shamir::{self, ShamirError, Share};
use crate::token::TokenStore;
use crate::{Entropy, Keyring, KeyringError, SecretKey};

/// The first 8 bytes of a sealed keyring.
pub const MAGIC: &[u8; 8] = b"AESDKRNG";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Cipher byte for AES-256-GCM.
pub const CIPHER_AES256_GCM: u8 = 1;
/// Bytes of the header (the associated data).
pub const HEADER_LEN: usize = 20;
/// The largest sealed keyring written or read (the keyring's limits keep
/// the keys under 1.5 MB, the policies' and tokens' about 3 MB;
/// a larger file is refused before it is parsed).
pub const MAX_SEALED_LEN: usize = 8 << 20;

/// Why a sealed keyring could not be made or opened.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SealError {
    /// Not a sealed keyring: wrong magic, too short or too long.
    #[error("not a sealed keyring: {0}")]
    Malformed(&'static str),
    /// A format version or cipher this build does not read.
    #[error(
        "sealed keyring format {format} cipher {cipher} is not supported (this build reads format 1 cipher 1)"
    )]
    Unsupported {
        /// The format byte.
        format: u8,
        /// The cipher byte.
        cipher: u8,
    },
    /// The root key (from the shares given) does not open the keyring: a
    /// wrong or corrupt share, shares of another keyring, or a changed
    /// file.
    #[error(
        "the shares do not open the keyring (a wrong or corrupt share, or shares of another keyring)"
    )]
    SharesDoNotOpen,
    /// The contents would seal to more than [`MAX_SEALED_LEN`].
    #[error("the keyring's contents ({0} bytes of JSON) are above the 8 MiB limit")]
    TooLarge(usize),
    /// Opened, but the contents break the keyring's rules (written by
    /// another program or a bug).
    #[error("the keyring opened but its contents are invalid: {0}")]
    InvalidContents(String),
    /// Shamir parameters or shares refused.
    #[error(transparent)]
    Shamir(#[from] ShamirError),
    /// The random source failed.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
}

/// The threshold and share count of the root key's split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealConfig {
    /// k: shares needed to unseal.
    pub threshold: u8,
    /// n: shares made.
    pub shares: u8,
}

/// The public header of a sealed keyring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedHeader {
    /// The split's parameters.
    pub config: SealConfig,
    /// The keyring's generation.
    pub generation: u64,
}

/// The 256-bit root key. `Debug` prints no byte of it.
#[derive(Clone)]
pub struct RootKey(SecretKey);

impl core::fmt::Debug for RootKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RootKey(<redacted>)")
    }
}

impl RootKey {
    /// Wraps root key bytes (the auto-unseal path and tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        RootKey(SecretKey::from_bytes(bytes))
    }

    /// Takes root key bytes already in a wiping container (from
    /// [`shamir::combine`]).
    pub fn from_zeroizing(bytes: Zeroizing<[u8; 32]>) -> Self {
        RootKey(SecretKey::from_zeroizing(bytes))
    }
}

/// What is sealed: the keyring, the ACL policies and the tokens (as
/// hashes). Later additions are new optional fields. Unknown fields are
/// refused, so an older build never reads a newer keyring and drops what
/// it does not know when it writes the next generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contents {
    /// The keys.
    pub keyring: Keyring,
    /// ACL policies by name.
    #[serde(default)]
    pub policies: PolicyStore,
    /// Tokens by hash.
    #[serde(default)]
    pub tokens: TokenStore,
    /// The audit log's HMAC key (the salt of its `hmac-sha256:` values),
    /// made at `sys/init`; a keyring sealed before audit logging has none
    /// and gets one on its next write.
    #[serde(default)]
    pub audit_salt: Option<SecretKey>,
}

/// Makes a fresh root key and its shares (`sys/init`).
pub fn initialize(
    config: SealConfig,
    entropy: &mut dyn Entropy,
) -> Result<(RootKey, Vec<Share>), SealError> {
    let root = SecretKey::generate(entropy)?;
    let shares = shamir::split(root.expose(), config.threshold, config.shares, entropy)?;
    Ok((RootKey(root), shares))
}

fn header_bytes(header: &SealedHeader) -> [u8; HEADER_LEN] {
    let mut out = [0; HEADER_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8] = FORMAT_VERSION;
    out[9] = CIPHER_AES256_GCM;
    out[10] = header.config.threshold;
    out[11] = header.config.shares;
    out[12..20].copy_from_slice(&header.generation.to_be_bytes());
    out
}

/// Reads the public header (no key needed).
pub fn read_header(sealed: &[u8]) -> Result<SealedHeader, SealError> {
    if sealed.len() > MAX_SEALED_LEN {
        return Err(SealError::Malformed("longer than 8 MiB"));
    }
    if sealed.len() < HEADER_LEN + NONCE_LEN + TAG_LEN {
        return Err(SealError::Malformed("too short"));
    }
    if &sealed[..8] != MAGIC {
        return Err(SealError::Malformed("wrong magic"));
    }
    if sealed[8] != FORMAT_VERSION || sealed[9] != CIPHER_AES256_GCM {
        return Err(SealError::Unsupported {
            format: sealed[8],
            cipher: sealed[9],
        });
    }
    let mut generation = [0; 8];
    generation.copy_from_slice(&sealed[12..20]);
    Ok(SealedHeader {
        config: SealConfig {
            threshold: sealed[10],
            shares: sealed[11],
        },
        generation: u64::from_be_bytes(generation),
    })
}

/// [`Contents`] borrowed, for writing (the same fields).
#[derive(Serialize)]
pub struct ContentsRef<'a> {
    /// The keys.
    pub keyring: &'a Keyring,
    /// ACL policies by name.
    pub policies: &'a PolicyStore,
    /// Tokens by hash.
    pub tokens: &'a TokenStore,
    /// The audit log's HMAC key, if made yet (left out when not, so a
    /// keyring without one is written as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_salt: Option<&'a SecretKey>,
}

/// Seals `contents` as generation `header.generation`.
pub fn seal(
    contents: ContentsRef<'_>,
    root: &RootKey,
    header: SealedHeader,
    entropy: &mut dyn Entropy,
) -> Result<Vec<u8>, SealError> {
    let json = to_json(&contents)?;
    let mut nonce = [0; NONCE_LEN];
    entropy.fill(&mut nonce)?;
    let aad = header_bytes(&header);
    let body = aead::seal(KeyType::Aes256Gcm96, &root.0, &nonce, &aad, &json)?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&aad);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Counts bytes written, keeping none.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The contents' JSON in a buffer allocated once at its exact length
/// (counted first), so the key material in it is never copied by a
/// reallocation and left unwiped.
fn to_json(contents: &ContentsRef<'_>) -> Result<Zeroizing<Vec<u8>>, SealError> {
    let invalid = |err: serde_json::Error| SealError::InvalidContents(err.to_string());
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, contents).map_err(invalid)?;
    if counter.0 > MAX_SEALED_LEN - HEADER_LEN - NONCE_LEN - TAG_LEN {
        return Err(SealError::TooLarge(counter.0));
    }
    let mut json = Zeroizing::new(Vec::with_capacity(counter.0));
    serde_json::to_writer(&mut *json, contents).map_err(invalid)?;
    Ok(json)
}

/// Opens a sealed keyring with `root`.
pub fn open(sealed: &[u8], root: &RootKey) -> Result<(SealedHeader, Contents), SealError> {
    let header = read_header(sealed)?;
    let (aad, body) = sealed.split_at(HEADER_LEN);
    let json = aead::open(KeyType::Aes256Gcm96, &root.0, aad, body)
        .map_err(|_| SealError::SharesDoNotOpen)?;
    let contents: Contents =
        serde_json::from_slice(&json).map_err(|err| SealError::InvalidContents(err.to_string()))?;
    contents
        .keyring
        .check()
        .map_err(SealError::InvalidContents)?;
    Ok((header, contents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAX_KEYS, MAX_TOTAL_VERSIONS, MAX_VERSIONS_PER_KEY, OsEntropy};

    /// A keyring at its limits, with the longest names: the JSON buffer is
    /// allocated once at its exact length (never reallocated, so never
    /// copied unwiped) and the sealed keyring fits [`MAX_SEALED_LEN`].
    #[test]
    fn a_full_keyring_fits_its_buffer_and_the_size_limit() {
        let mut ring = Keyring::new();
        let names: Vec<String> = (0..MAX_KEYS).map(|i| format!("{i:0>128}")).collect();
        for name in &names {
            ring.create(name, KeyType::ChaCha20Poly1305, u64::MAX, &mut OsEntropy)
                .expect("create");
        }
        let mut total = MAX_KEYS;
        'fill: for name in &names {
            for _ in 1..MAX_VERSIONS_PER_KEY {
                if total == MAX_TOTAL_VERSIONS {
                    break 'fill;
                }
                ring.rotate(name, u64::MAX, &mut OsEntropy).expect("rotate");
                total += 1;
            }
        }
        let none = Contents::default();
        let contents = ContentsRef {
            keyring: &ring,
            policies: &none.policies,
            tokens: &none.tokens,
            audit_salt: None,
        };
        let json = to_json(&contents).expect("json");
        assert_eq!(json.capacity(), json.len(), "reallocated");
        let root = RootKey::from_bytes([1; 32]);
        let header = SealedHeader {
            config: SealConfig {
                threshold: 2,
                shares: 3,
            },
            generation: 1,
        };
        let sealed = seal(contents, &root, header, &mut OsEntropy).expect("seal");
        assert!(sealed.len() <= MAX_SEALED_LEN, "{} bytes", sealed.len());
        let (_, back) = open(&sealed, &root).expect("open");
        assert_eq!(back.keyring, ring);
        println!(
            "full keyring: {} keys, {total} versions, {} bytes sealed",
            MAX_KEYS,
            sealed.len()
        );
    }
}
