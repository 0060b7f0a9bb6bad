//! Poly1305 (RFC 8439) as ChaCha20-Poly1305 uses it with no associated
//! data: the ciphertext zero-padded to whole 16-byte blocks, then the
//! lengths block. The padding and the lengths are here, once; the
//! arithmetic modulo 2^130 − 5 comes in the radix that suits the core:
//!
//! - [`Radix32`]: four 32-bit limbs and a small fifth, 32×32→64
//!   multiplications (riscv32imac: `mul` + `mulhu`);
//! - [`Radix64`]: two 64-bit limbs and a small third, 64×64→128
//!   multiplications (aarch64: `mul` + `umulh`), four products per block
//!   where a 26-bit radix needs 25.
//!
//! Constant time: no branch and no memory address depends on the key or
//! the data.

#[cfg_attr(not(target_arch = "riscv32"), allow(dead_code))]
mod radix32;
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
mod radix64;

pub(crate) use radix32::Radix32;
pub(crate) use radix64::Radix64;

use super::le32;

/// Poly1305's arithmetic on whole 16-byte blocks, each with the 2^128 bit
/// set (the AEAD pads its last block with zeros, so every block is whole).
/// Implementations wipe their state when dropped.
pub(crate) trait Arithmetic {
    /// The accumulator for the key's `r` (its first 16 bytes), clamped.
    fn new(r: &[u8; 16]) -> Self;

    /// h = (h + block + 2^128) · r for each block of `data` (a multiple of
    /// 16 bytes long), partly reduced.
    fn blocks(&mut self, data: &[u8]);

    /// The tag: h fully reduced modulo 2^130 − 5, plus `s` (the key's last
    /// 16 bytes), modulo 2^128.
    fn tag(&self, s: &[u8; 16]) -> [u8; 16];
}

/// The AEAD's tag over `ciphertext` (no associated data) under the
/// one-time `key` (r ‖ s).
pub(crate) fn aead_tag<A: Arithmetic>(key: &[u8; 32], ciphertext: &[u8]) -> [u8; 16] {
    let (r, s) = key.split_at(16);
    let mut poly = A::new(r.try_into().expect("16 bytes"));
    let whole = ciphertext.len() - ciphertext.len() % 16;
    let (blocks, tail) = ciphertext.split_at(whole);
    poly.blocks(blocks);
    if !tail.is_empty() {
        let mut last = [0u8; 16];
        last[..tail.len()].copy_from_slice(tail);
        poly.blocks(&last);
        zeroize::Zeroize::zeroize(&mut last);
    }
    // The lengths: no associated data (0), then the ciphertext's.
    let mut lengths = [0u8; 16];
    lengths[8..].copy_from_slice(&(ciphertext.len() as u64).to_le_bytes());
    poly.blocks(&lengths);
    poly.tag(s.try_into().expect("16 bytes"))
}

/// The clamped `r` as four little-endian words (RFC 8439: the top four
/// bits of each word and the bottom two of words 1..3 cleared).
fn clamped_words(r: &[u8; 16]) -> [u32; 4] {
    const CLAMP: [u32; 4] = [0x0fff_ffff, 0x0fff_fffc, 0x0fff_fffc, 0x0fff_fffc];
    core::array::from_fn(|i| le32(&r[4 * i..]) & CLAMP[i])
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use poly1305::universal_hash::{KeyInit, UniversalHash};

    use super::*;

    /// RustCrypto's Poly1305 over the same padded input and lengths.
    fn reference(key: &[u8; 32], ciphertext: &[u8]) -> [u8; 16] {
        let mut mac = poly1305::Poly1305::new(&(*key).into());
        mac.update_padded(ciphertext);
        let mut lengths = [0u8; 16];
        lengths[8..].copy_from_slice(&(ciphertext.len() as u64).to_le_bytes());
        mac.update_padded(&lengths);
        mac.finalize().into()
    }

    /// Keys and messages at the edges of the arithmetic: the largest
    /// clamped r, s all ones, blocks of all ones (h close to 2^130 and to
    /// p after each block), and a pseudo-random spread; each radix gives
    /// RustCrypto's tag, aligned or not.
    fn agrees_with_rustcrypto<A: Arithmetic>() {
        let mut keys: Vec<[u8; 32]> = [0x00u8, 0xff, 0x5a, 0x80]
            .iter()
            .map(|&fill| [fill; 32])
            .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20 {
            keys.push(core::array::from_fn(|_| next() as u8));
        }
        for (k, key) in keys.iter().enumerate() {
            for len in (0..70).chain([255, 256, 1000, 4096]) {
                let fill = key[k % 32];
                let message: Vec<u8> = (0..len)
                    .map(|i| match k % 3 {
                        0 => 0xff,
                        1 => fill ^ (i as u8),
                        _ => next() as u8,
                    })
                    .collect();
                let want = reference(key, &message);
                assert_eq!(aead_tag::<A>(key, &message), want, "key {k} len {len}");
                let mut shifted = alloc::vec![0u8; len + 1];
                shifted[1..].copy_from_slice(&message);
                assert_eq!(
                    aead_tag::<A>(key, &shifted[1..]),
                    want,
                    "key {k} len {len}, unaligned"
                );
            }
        }
    }

    /// With r = 1, two blocks c1 (chosen) and c2 = 0 end, after the
    /// lengths block, at h = c1 + 32·2^64 + 3·2^128 exactly: c1 picks h
    /// from 2^130 − 8 to 2^130 − 1, on both sides of p = 2^130 − 5, where
    /// only the final reduction decides the tag.
    fn reduces_a_final_value_at_p<A: Arithmetic>() {
        let mut key = [0x5au8; 32];
        key[..16].copy_from_slice(&1u128.to_le_bytes());
        for below in 1..=8u128 {
            let c1 = u128::MAX - (32 << 64) - (below - 1); // 2^128 − 32·2^64 − below
            let mut ciphertext = [0u8; 32];
            ciphertext[..16].copy_from_slice(&c1.to_le_bytes());
            assert_eq!(
                aead_tag::<A>(&key, &ciphertext),
                reference(&key, &ciphertext),
                "h = 2^130 − {below}"
            );
        }
    }

    #[test]
    fn radix32_reduces_a_final_value_at_p() {
        reduces_a_final_value_at_p::<Radix32>();
    }

    #[test]
    fn radix64_reduces_a_final_value_at_p() {
        reduces_a_final_value_at_p::<Radix64>();
    }

    #[test]
    fn radix32_agrees_with_rustcrypto_at_the_edges() {
        agrees_with_rustcrypto::<Radix32>();
    }

    #[test]
    fn radix64_agrees_with_rustcrypto_at_the_edges() {
        agrees_with_rustcrypto::<Radix64>();
    }
}
