//! Poly1305's arithmetic in radix 2^32: four 32-bit limbs and a small
//! fifth, for 32-bit cores whose multiplier gives 64-bit products in two
//! instructions (riscv32imac: `mul` + `mulhu`). The clamped key allows it:
//! r1..r3 are multiples of 4, so a product that wraps past 2^130 folds
//! back as r + r/4 without a multiplication by 5. Blocks are read as whole
//! words when they are word-aligned (the payload's chunk buffers are),
//! byte by byte otherwise.

use super::{Arithmetic, clamped_words};
use crate::aead::le32;
use crate::ct::barrier;

/// h and r in radix 2^32.
pub(crate) struct Radix32 {
    r: [u32; 4],
    /// r1..r3 + r/4: what a product past 2^130 folds back to.
    s: [u32; 3],
    h: [u32; 5],
}

impl Drop for Radix32 {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.r);
        zeroize::Zeroize::zeroize(&mut self.s);
        zeroize::Zeroize::zeroize(&mut self.h);
    }
}

impl Arithmetic for Radix32 {
    fn new(r: &[u8; 16]) -> Self {
        let r = clamped_words(r);
        Radix32 {
            s: [r[1] + (r[1] >> 2), r[2] + (r[2] >> 2), r[3] + (r[3] >> 2)],
            r,
            h: [0; 5],
        }
    }

    // Out of line, like `tag`: checked for branches in the board binary
    // (scripts/cross/ct-functions.txt).
    #[inline(never)]
    fn blocks(&mut self, data: &[u8]) {
        match bytemuck::try_cast_slice::<u8, u32>(data) {
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
                for m in data.chunks_exact(16) {
                    self.block([le32(&m[0..]), le32(&m[4..]), le32(&m[8..]), le32(&m[12..])]);
                }
            }
        }
    }

    #[inline(never)]
    fn tag(&self, s: &[u8; 16]) -> [u8; 16] {
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
        let take_g = barrier((g4 >> 31).wrapping_sub(1));
        let pick = |h: u32, g: u32| (h & !take_g) | (g & take_g);
        let h = [pick(h0, g0), pick(h1, g1), pick(h2, g2), pick(h3, g3)];
        let mut tag = [0u8; 16];
        let mut carry = 0u64;
        for i in 0..4 {
            carry = u64::from(h[i]) + u64::from(le32(&s[4 * i..])) + (carry >> 32);
            tag[4 * i..4 * i + 4].copy_from_slice(&(carry as u32).to_le_bytes());
        }
        tag
    }
}

impl Radix32 {
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
}
