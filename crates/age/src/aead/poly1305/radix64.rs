//! Poly1305's arithmetic in radix 2^64: two 64-bit limbs and a small
//! third, for 64-bit cores with a 64×64→128 multiplier (aarch64: `mul` +
//! `umulh`). As in radix 2^32, the clamped r1 is a multiple of 4, so the
//! products that wrap past 2^130 fold back as r1 + r1/4.

use super::{Arithmetic, clamped_words};
use crate::ct::barrier64;

/// h and r in radix 2^64.
pub(crate) struct Radix64 {
    r0: u64,
    r1: u64,
    /// r1 + r1/4: what h1·r1 (at 2^128) folds back to.
    s1: u64,
    h: [u64; 3],
}

impl Drop for Radix64 {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.r0);
        zeroize::Zeroize::zeroize(&mut self.r1);
        zeroize::Zeroize::zeroize(&mut self.s1);
        zeroize::Zeroize::zeroize(&mut self.h);
    }
}

fn le64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

fn mul(a: u64, b: u64) -> u128 {
    u128::from(a) * u128::from(b)
}

impl Arithmetic for Radix64 {
    fn new(r: &[u8; 16]) -> Self {
        let [w0, w1, w2, w3] = clamped_words(r);
        let r0 = u64::from(w0) | u64::from(w1) << 32;
        let r1 = u64::from(w2) | u64::from(w3) << 32;
        Radix64 {
            r0,
            r1,
            s1: r1 + (r1 >> 2),
            h: [0; 3],
        }
    }

    // Out of line, like `tag`: checked for branches in the board binary
    // (scripts/cross/ct-functions.txt).
    #[inline(never)]
    fn blocks(&mut self, data: &[u8]) {
        let (r0, r1, s1) = (self.r0, self.r1, self.s1);
        let [mut h0, mut h1, mut h2] = self.h;
        for m in data.chunks_exact(16) {
            // h += m + 2^128 (h2 stays below 8).
            let t = u128::from(h0) + u128::from(le64(m));
            h0 = t as u64;
            let t = u128::from(h1) + u128::from(le64(&m[8..])) + (t >> 64);
            h1 = t as u64;
            h2 += (t >> 64) as u64 + 1;
            // h · r: h1·r1 and h2·r1 sit at 2^128 and 2^192, folded with s1;
            // each sum stays below 2^126.
            let d0 = mul(h0, r0) + mul(h1, s1);
            let d1 = mul(h0, r1) + mul(h1, r0) + u128::from(h2 * s1) + (d0 >> 64);
            let d2 = h2 * r0 + (d1 >> 64) as u64;
            // Fold what is above 2^130 back in, times 5.
            let c = (d2 >> 2) + (d2 & !3);
            let t = u128::from(d0 as u64) + u128::from(c);
            h0 = t as u64;
            let t = u128::from(d1 as u64) + (t >> 64);
            h1 = t as u64;
            h2 = (d2 & 3) + (t >> 64) as u64;
        }
        self.h = [h0, h1, h2];
    }

    #[inline(never)]
    fn tag(&self, s: &[u8; 16]) -> [u8; 16] {
        let [h0, h1, h2] = self.h;
        // h < 2p here (h2 reaches 4 only with h0 and h1 small after a
        // carry), so h mod p is h or h − p. g = h + 5 − 2^130: h ≥ p
        // exactly when g reaches 2^130, and then g's low 128 bits are
        // those of h − p.
        let t = u128::from(h0) + 5;
        let g0 = t as u64;
        let t = u128::from(h1) + (t >> 64);
        let g1 = t as u64;
        let g2 = h2 + (t >> 64) as u64;
        let take_g = barrier64(0u64.wrapping_sub(g2 >> 2));
        let h0 = (h0 & !take_g) | (g0 & take_g);
        let h1 = (h1 & !take_g) | (g1 & take_g);
        let sum = (u128::from(h0) | u128::from(h1) << 64).wrapping_add(u128::from_le_bytes(*s));
        sum.to_le_bytes()
    }
}
