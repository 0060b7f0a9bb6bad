//! PBKDF2-HMAC-SHA256 in slices, for key source 1.
//!
//! At 10 000 iterations the derivation costs about 185 million
//! instructions on the rv32 VexRiscv (2.5 s at 100 MHz). Run in one piece it
//! would hold a worker that long even if the client has left or the server
//! is shutting down, and a client could make the server burn it for nothing
//! by sending a begin and hanging up. So the derivation is a state machine
//! that runs at most a given number of iterations per call; the job runs a
//! slice at a time on the worker pool and stops between slices when the
//! job is cancelled.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroize;

use super::{DerivedKey, SALT_LEN};

type HmacSha256 = Hmac<Sha256>;

/// Iterations per slice: about 3.7 million instructions on the rv32 board
/// (a few tens of milliseconds at 100 MHz).
pub const SLICE_ITERATIONS: u32 = 200;

/// Bytes of output: the AES-256 key and the CBC IV.
const OUTPUT_LEN: usize = 48;

/// Bytes of one HMAC-SHA256 output (one PBKDF2 block).
const BLOCK_LEN: usize = 32;

/// A PBKDF2-HMAC-SHA256 derivation of key and IV (48 bytes: two blocks) as
/// `openssl enc -pbkdf2` does it, resumable between slices.
pub struct SlicedPbkdf2 {
    /// HMAC keyed with the password (its pads already hashed).
    keyed: HmacSha256,
    salt: [u8; SALT_LEN],
    iterations: u32,
    /// Block being computed (1 or 2).
    block: u32,
    /// Iterations of this block done so far.
    done: u32,
    /// The previous U of this block.
    previous: [u8; BLOCK_LEN],
    /// The running XOR of this block's Us.
    sum: [u8; BLOCK_LEN],
    output: [u8; OUTPUT_LEN],
}

impl Drop for SlicedPbkdf2 {
    fn drop(&mut self) {
        self.previous.zeroize();
        self.sum.zeroize();
        self.output.zeroize();
    }
}

impl SlicedPbkdf2 {
    /// Starts a derivation (`iterations` of at least 1; 0 is taken as 1).
    pub fn new(password: &[u8], salt: &[u8; SALT_LEN], iterations: u32) -> Self {
        let keyed = <HmacSha256 as KeyInit>::new_from_slice(password)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        SlicedPbkdf2 {
            keyed,
            salt: *salt,
            iterations: iterations.max(1),
            block: 1,
            done: 0,
            previous: [0; BLOCK_LEN],
            sum: [0; BLOCK_LEN],
            output: [0; OUTPUT_LEN],
        }
    }

    /// Runs up to `budget` iterations; returns the key and IV once the
    /// derivation is complete (and `None` while it is not).
    pub fn run(&mut self, budget: u32) -> Option<DerivedKey> {
        let mut budget = budget.max(1);
        while self.block <= 2 {
            while self.done < self.iterations && budget > 0 {
                let mut mac = self.keyed.clone();
                if self.done == 0 {
                    mac.update(&self.salt);
                    mac.update(&self.block.to_be_bytes());
                } else {
                    mac.update(&self.previous);
                }
                self.previous.copy_from_slice(&mac.finalize().into_bytes());
                for (sum, byte) in self.sum.iter_mut().zip(self.previous) {
                    *sum ^= byte;
                }
                self.done += 1;
                budget -= 1;
            }
            if self.done < self.iterations {
                return None;
            }
            let start = (self.block as usize - 1) * BLOCK_LEN;
            let end = (start + BLOCK_LEN).min(OUTPUT_LEN);
            self.output[start..end].copy_from_slice(&self.sum[..end - start]);
            self.sum = [0; BLOCK_LEN];
            self.done = 0;
            self.block += 1;
        }
        let mut derived = DerivedKey {
            key: [0; 32],
            iv: [0; 16],
        };
        derived.key.copy_from_slice(&self.output[..32]);
        derived.iv.copy_from_slice(&self.output[32..]);
        Some(derived)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openssl_enc::derive_key;

    #[test]
    fn slices_of_any_size_give_openssl_s_key_and_iv() {
        let salt = [0, 1, 2, 3, 4, 5, 6, 7];
        for slice in [1, 7, 100, 9_999, 10_000, u32::MAX] {
            let mut derivation = SlicedPbkdf2::new(b"password", &salt, 10_000);
            let derived = loop {
                if let Some(derived) = derivation.run(slice) {
                    break derived;
                }
            };
            // `openssl enc -aes-256-cbc -pbkdf2 -iter 10000 -k password
            // -S 0001020304050607 -P`
            assert_eq!(
                hex::encode(derived.key),
                "6827bd488a4c5d38d28131175369843dc41c73284eff746252231b58fe384b1e",
                "slice {slice}"
            );
            assert_eq!(hex::encode(derived.iv), "77532013c6cb46fda992eda58456ddee");
        }
    }

    #[test]
    fn matches_the_one_piece_derivation_for_odd_counts() {
        for iterations in [1, 2, 3, 1000, 1001] {
            let salt = [iterations as u8; 8];
            let mut derivation = SlicedPbkdf2::new(b"pw", &salt, iterations);
            let mut calls = 0;
            let derived = loop {
                calls += 1;
                if let Some(derived) = derivation.run(SLICE_ITERATIONS) {
                    break derived;
                }
            };
            let whole = derive_key(b"pw", &salt, iterations);
            assert_eq!(derived.key, whole.key, "{iterations}");
            assert_eq!(derived.iv, whole.iv, "{iterations}");
            let expected_calls = (2 * iterations).div_ceil(SLICE_ITERATIONS).max(1);
            assert!(calls <= expected_calls + 1, "{iterations}: {calls} calls");
        }
    }
}
