//! X25519 (RFC 7748) written for riscv32imac, where curve25519-dalek's
//! 32-bit field arithmetic made the two multiplications of an age
//! encryption (the ephemeral share and the shared secret) most of a job's
//! fixed cost (docs/performance.md, "age on the boards"):
//!
//! - `field`: arithmetic modulo 2^255 − 19 in radix 2^32, 32×32→64
//!   products (`mul` + `mulhu`) summed column by column;
//! - `ladder`: the Montgomery ladder for any u-coordinate (the shared
//!   secret; also an identity's unwrapping);
//! - `edwards`: the base point's multiples through Ed25519's curve and a
//!   compile-time table (the ephemeral share);
//! - here: clamping, encodings, and the share and the shared secret of one
//!   ephemeral secret finished with a single inversion.
//!
//! Constant time: the scalar's bits and digits only ever become masks; the
//! table is read whole; inversion is a fixed chain. Only riscv32 uses this
//! code; the other targets keep x25519-dalek (its 64-bit arithmetic is
//! faster there). Tested on every target against RFC 7748's vectors
//! (iterated too), Wycheproof's X25519 set and x25519-dalek.

mod edwards;
mod field;
mod ladder;

use field::Fe;
use zeroize::Zeroize;

/// The scalar as RFC 7748 uses it: low 3 bits cleared, bit 255 cleared,
/// bit 254 set.
fn clamp(scalar: &[u8; 32]) -> [u8; 32] {
    let mut k = *scalar;
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
    k
}

/// X25519(`scalar`, `u`): the u-coordinate of clamp(scalar)·P.
#[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
pub(crate) fn x25519(scalar: &[u8; 32], u: &[u8; 32]) -> [u8; 32] {
    let mut k = clamp(scalar);
    let (mut x, mut z) = ladder::ladder(&k, &Fe::from_bytes(u));
    let shared = x.mul(&z.invert()).to_bytes();
    k.zeroize();
    x.zeroize();
    z.zeroize();
    shared
}

/// X25519(`scalar`, 9): the public key of a secret.
#[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
pub(crate) fn x25519_base(scalar: &[u8; 32]) -> [u8; 32] {
    let mut k = clamp(scalar);
    let mut point = edwards::base_multiple(&k);
    let (mut n, mut d) = point.montgomery_u();
    let public = n.mul(&d.invert()).to_bytes();
    k.zeroize();
    point.zeroize();
    n.zeroize();
    d.zeroize();
    public
}

/// (X25519(`scalar`, 9), X25519(`scalar`, `u`)): an ephemeral secret's
/// share and its shared secret with the holder of `u`, with one inversion
/// for both (1/(a·b) times b is 1/a, times a is 1/b).
#[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
pub(crate) fn x25519_share_and_shared(scalar: &[u8; 32], u: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
    let mut k = clamp(scalar);
    let mut point = edwards::base_multiple(&k);
    let (mut share_n, mut share_d) = point.montgomery_u();
    let (mut shared_n, shared_d) = ladder::ladder(&k, &Fe::from_bytes(u));
    // A low-order u gives z = 0 (the shared secret 0, which age refuses):
    // then 1 stands in for z, so the share's inverse is still right, and
    // the numerator 0 keeps the shared secret 0.
    let z_is_zero = is_zero(&shared_d);
    let mut shared_d = Fe::select(&shared_d, &Fe::ONE, z_is_zero);
    shared_n = Fe::select(&shared_n, &Fe::ZERO, z_is_zero);
    let mut inverse = share_d.mul(&shared_d).invert();
    let share = share_n.mul(&shared_d).mul(&inverse).to_bytes();
    let shared = shared_n.mul(&share_d).mul(&inverse).to_bytes();
    for fe in [
        &mut share_n,
        &mut share_d,
        &mut shared_n,
        &mut shared_d,
        &mut inverse,
    ] {
        fe.zeroize();
    }
    k.zeroize();
    point.zeroize();
    (share, shared)
}

/// 1 if `fe` ≡ 0, else 0, without a branch.
fn is_zero(fe: &Fe) -> u32 {
    let bytes = fe.to_bytes();
    let any = bytes.iter().fold(0u32, |acc, &b| acc | u32::from(b));
    (any.wrapping_sub(1) >> 31) & 1
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    fn hex32(text: &str) -> [u8; 32] {
        let bytes: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        bytes.try_into().expect("32 bytes")
    }

    /// RFC 7748, section 5.2: the two single vectors.
    #[test]
    fn rfc7748_vectors() {
        let cases = [
            (
                "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
                "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
                "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552",
            ),
            (
                "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
                "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
                "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957",
            ),
        ];
        for (scalar, u, out) in cases {
            assert_eq!(x25519(&hex32(scalar), &hex32(u)), hex32(out));
        }
    }

    /// RFC 7748, section 5.2: k = u = 9, then k ← X25519(k, u), u ← old k,
    /// after 1 and 1,000 iterations (the 1,000,000 one takes too long for
    /// a test under qemu).
    #[test]
    fn rfc7748_iterated() {
        let mut k = hex32("0900000000000000000000000000000000000000000000000000000000000000");
        let mut u = k;
        for i in 1..=1000 {
            let next = x25519(&k, &u);
            u = k;
            k = next;
            if i == 1 {
                assert_eq!(
                    k,
                    hex32("422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079")
                );
            }
        }
        assert_eq!(
            k,
            hex32("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")
        );
    }

    /// RFC 7748, section 6.1: Alice's and Bob's public keys and their
    /// shared secret, through the base-point path and the combined one.
    #[test]
    fn rfc7748_diffie_hellman() {
        let alice = hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let alice_public =
            hex32("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        let bob = hex32("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
        let bob_public = hex32("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
        let shared = hex32("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        assert_eq!(x25519_base(&alice), alice_public);
        assert_eq!(x25519_base(&bob), bob_public);
        assert_eq!(x25519(&alice, &bob_public), shared);
        assert_eq!(
            x25519_share_and_shared(&alice, &bob_public),
            (alice_public, shared)
        );
        assert_eq!(
            x25519_share_and_shared(&bob, &alice_public),
            (bob_public, shared)
        );
    }

    /// Wycheproof's X25519 vectors through the ladder, with the share and
    /// the shared secret of the combined function checked against it and
    /// the base-point path on the way.
    #[test]
    fn wycheproof_x25519_vectors() {
        crate::x25519::tests::check_wycheproof_x25519(|secret, public| {
            let shared = x25519(secret, public);
            assert_eq!(
                x25519_share_and_shared(secret, public),
                (x25519_base(secret), shared)
            );
            shared
        });
    }

    /// x25519-dalek agrees on pseudo-random secrets and points (the
    /// points: public keys, and arbitrary 32-byte strings), and on scalars
    /// at the edges (all zeros, all ones: clamping decides).
    #[test]
    fn agrees_with_x25519_dalek() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || -> [u8; 32] {
            core::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
        };
        let mut scalars: Vec<[u8; 32]> = (0..30).map(|_| next()).collect();
        scalars.extend([[0u8; 32], [0xff; 32]]);
        for secret in scalars {
            let public = x25519_dalek::x25519(secret, x25519_dalek::X25519_BASEPOINT_BYTES);
            assert_eq!(x25519_base(&secret), public);
            for u in [public, next(), [0xff; 32]] {
                let want = x25519_dalek::x25519(secret, u);
                assert_eq!(x25519(&secret, &u), want);
                assert_eq!(x25519_share_and_shared(&secret, &u), (public, want));
            }
        }
    }
}
