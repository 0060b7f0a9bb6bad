//! ChaCha20 (RFC 8439) written for 32-bit cores without SIMD: the
//! riscv32imac VexRiscv. The state is 16 words of registers; each block
//! is 80 quarter rounds of 20 instructions there (rv32imac has no rotate,
//! so each rotation is three). Data are read as whole words when they are
//! word-aligned (the payload's chunk buffers are), byte by byte otherwise.
//!
//! Constant time: no branch and no memory address depends on the key or
//! the data.

use zeroize::Zeroizing;

use super::{KeyStream, le32};

/// ChaCha20 under a key, for any nonce.
pub(crate) struct ScalarChaCha {
    key: [u32; 8],
}

impl Drop for ScalarChaCha {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

impl KeyStream for ScalarChaCha {
    fn new(key: &[u8; 32]) -> Self {
        ScalarChaCha {
            key: core::array::from_fn(|i| le32(&key[4 * i..])),
        }
    }

    fn poly_key(&self, nonce: &[u8; 12]) -> Zeroizing<[u8; 32]> {
        let mut block = block(&self.state(nonce, 0));
        let mut key = Zeroizing::new([0u8; 32]);
        for (bytes, word) in key.chunks_exact_mut(4).zip(&block[..8]) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        zeroize::Zeroize::zeroize(&mut block);
        key
    }

    fn apply(&self, nonce: &[u8; 12], data: &mut [u8]) {
        self.xor_keystream(nonce, 1, data);
    }
}

impl ScalarChaCha {
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
    #[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
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
