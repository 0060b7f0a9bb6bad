//! Arithmetic modulo p = 2^255 − 19 for 32-bit cores, in radix 2^32:
//! eight full 32-bit words, any value below 2^256 standing for itself
//! modulo p (results are reduced modulo 2^256 − 38 = 2p, lazily; only
//! [`Fe::to_bytes`] reduces fully). On riscv32imac a 32×32→64 product is
//! `mul` + `mulhu`; a product of two elements is 64 of them summed column
//! by column in three words, each column's top words carried into the next
//! (that chain keeps the compiler from interleaving the columns and
//! spilling registers), then folded: 2^256 ≡ 38.
//!
//! Measured on riscv32 against radix 2^25.5 (ten limbs of 26 and 25 bits,
//! u64 column sums; a first version of this file): 632 instructions a
//! multiplication instead of 868, 462 a squaring instead of 490; additions
//! cost more (carries), the ladder less overall (docs/performance.md, "age
//! on the boards").
//!
//! Everything is `const fn`: the fixed-base table is computed by the
//! compiler with the same code (see `edwards.rs`). Constant time: no
//! branch and no memory address depends on a value.

use crate::ct::barrier;

/// A field element: eight little-endian 32-bit words, below 2^256,
/// standing for its value modulo p.
#[derive(Clone, Copy)]
pub(crate) struct Fe(pub(crate) [u32; 8]);

/// (c0, c1, c2) + a·b: a column sum in three words.
#[inline(always)]
const fn mac(c: [u32; 3], a: u32, b: u32) -> [u32; 3] {
    let p = a as u64 * b as u64;
    let lo = p as u32;
    let c0 = c[0].wrapping_add(lo);
    // The high word is at most 2^32 − 2: adding the carry cannot overflow.
    let hi = (p >> 32) as u32 + (c0 < lo) as u32;
    let c1 = c[1].wrapping_add(hi);
    [c0, c1, c[2] + (c1 < hi) as u32]
}

/// A 512-bit value (16 words) folded below 2^256: low + 38·high, then the
/// word that overflows, times 38, once more (twice at most).
#[inline(always)]
const fn reduce(w: [u32; 16]) -> Fe {
    let mut r = [0u32; 8];
    let mut t = 0u64;
    let mut i = 0;
    while i < 8 {
        // Below 39·2^32: the carry stays below 39.
        t = w[i] as u64 + 38 * w[i + 8] as u64 + (t >> 32);
        r[i] = t as u32;
        i += 1;
    }
    fold_carry(r, (t >> 32) as u32)
}

/// r + 38·carry (carry < 2^26), below 2^256: when the addition overflows,
/// what is left is below 38·carry, so a second 38 fits in word 0. Carries
/// as explicit compares of u32 words (riscv32 has no carry flag): with u64
/// sums, as first written, additions and subtractions cost about 50 K more
/// instructions per age header.
#[inline(always)]
const fn fold_carry(mut r: [u32; 8], carry: u32) -> Fe {
    let add = 38 * carry;
    r[0] = r[0].wrapping_add(add);
    let mut c = barrier((r[0] < add) as u32);
    let mut i = 1;
    while i < 8 {
        r[i] = r[i].wrapping_add(c);
        c = barrier((r[i] < c) as u32);
        i += 1;
    }
    r[0] = r[0].wrapping_add(38 * c);
    Fe(r)
}

impl Fe {
    pub(crate) const ZERO: Fe = Fe([0; 8]);
    pub(crate) const ONE: Fe = Fe([1, 0, 0, 0, 0, 0, 0, 0]);

    /// The element a small integer stands for.
    pub(crate) const fn from_small(value: u32) -> Fe {
        Fe([value, 0, 0, 0, 0, 0, 0, 0])
    }

    /// The element of 32 little-endian bytes, bit 255 ignored (RFC 7748:
    /// u-coordinates are taken modulo 2^255, then reduced modulo p by the
    /// arithmetic).
    pub(crate) const fn from_bytes(bytes: &[u8; 32]) -> Fe {
        let mut words = [0u32; 8];
        let mut i = 0;
        while i < 8 {
            words[i] = u32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ]);
            i += 1;
        }
        words[7] &= 0x7fff_ffff;
        Fe(words)
    }

    /// The canonical 32-byte encoding (fully reduced modulo p).
    #[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
    pub(crate) const fn to_bytes(self) -> [u8; 32] {
        // Below 2^256: fold bit 255 (2^255 ≡ 19), then the value is below
        // 2^255 + 19 < 2p; subtract p when value + 19 reaches 2^255.
        let mut r = self.0;
        let top = barrier(r[7] >> 31);
        r[7] &= 0x7fff_ffff;
        let mut t = r[0] as u64 + 19 * top as u64;
        r[0] = t as u32;
        let mut i = 1;
        while i < 8 {
            t = r[i] as u64 + (t >> 32);
            r[i] = t as u32;
            i += 1;
        }
        let mut g = [0u32; 8];
        let mut t = r[0] as u64 + 19;
        g[0] = t as u32;
        let mut i = 1;
        while i < 8 {
            t = r[i] as u64 + (t >> 32);
            g[i] = t as u32;
            i += 1;
        }
        let take_g = barrier(0u32.wrapping_sub(g[7] >> 31));
        g[7] &= 0x7fff_ffff;
        let mut bytes = [0u8; 32];
        let mut i = 0;
        while i < 8 {
            let word = (r[i] & !take_g) | (g[i] & take_g);
            let le = word.to_le_bytes();
            bytes[4 * i] = le[0];
            bytes[4 * i + 1] = le[1];
            bytes[4 * i + 2] = le[2];
            bytes[4 * i + 3] = le[3];
            i += 1;
        }
        bytes
    }

    /// self + other.
    #[inline(always)]
    pub(crate) const fn add(&self, other: &Fe) -> Fe {
        let mut r = [0u32; 8];
        let mut carry = 0u32;
        let mut i = 0;
        while i < 8 {
            let sum = self.0[i].wrapping_add(other.0[i]);
            let first = (sum < self.0[i]) as u32;
            r[i] = sum.wrapping_add(carry);
            // At most one of the two carries: a sum that wrapped is below
            // 2^32 − 1, so adding 1 does not wrap again.
            carry = barrier(first | (r[i] < sum) as u32);
            i += 1;
        }
        fold_carry(r, carry)
    }

    /// self − other: a borrow out of the top word means 2^256 too much,
    /// that is 38 too much; taking 38 away can borrow once more, and then
    /// the words are large enough for a second 38.
    #[inline(always)]
    pub(crate) const fn sub(&self, other: &Fe) -> Fe {
        let mut r = [0u32; 8];
        let mut borrow = 0u32;
        let mut i = 0;
        while i < 8 {
            let difference = self.0[i].wrapping_sub(other.0[i]);
            let first = (self.0[i] < other.0[i]) as u32;
            r[i] = difference.wrapping_sub(borrow);
            borrow = barrier(first | (difference < borrow) as u32);
            i += 1;
        }
        let take = 38 * borrow;
        let mut borrow = barrier((r[0] < take) as u32);
        r[0] = r[0].wrapping_sub(take);
        let mut i = 1;
        while i < 8 {
            let word = r[i];
            r[i] = word.wrapping_sub(borrow);
            borrow = barrier((word < borrow) as u32);
            i += 1;
        }
        r[0] = r[0].wrapping_sub(38 * borrow);
        Fe(r)
    }

    /// −self.
    pub(crate) const fn neg(&self) -> Fe {
        Fe::ZERO.sub(self)
    }

    /// self · other: 64 products summed column by column, then folded.
    /// Written out: as two nested loops the compiler did not unroll them,
    /// and a multiplication took 1627 instructions on riscv32 instead of
    /// 632.
    #[inline(never)]
    pub(crate) const fn mul(&self, other: &Fe) -> Fe {
        let a = self.0;
        let b = other.0;
        let mut w = [0u32; 16];
        let c = [0u32; 3];
        // Column 0.
        let c = mac(c, a[0], b[0]);
        w[0] = c[0];
        let c = [c[1], c[2], 0];
        // Column 1.
        let c = mac(c, a[0], b[1]);
        let c = mac(c, a[1], b[0]);
        w[1] = c[0];
        let c = [c[1], c[2], 0];
        // Column 2.
        let c = mac(c, a[0], b[2]);
        let c = mac(c, a[1], b[1]);
        let c = mac(c, a[2], b[0]);
        w[2] = c[0];
        let c = [c[1], c[2], 0];
        // Column 3.
        let c = mac(c, a[0], b[3]);
        let c = mac(c, a[1], b[2]);
        let c = mac(c, a[2], b[1]);
        let c = mac(c, a[3], b[0]);
        w[3] = c[0];
        let c = [c[1], c[2], 0];
        // Column 4.
        let c = mac(c, a[0], b[4]);
        let c = mac(c, a[1], b[3]);
        let c = mac(c, a[2], b[2]);
        let c = mac(c, a[3], b[1]);
        let c = mac(c, a[4], b[0]);
        w[4] = c[0];
        let c = [c[1], c[2], 0];
        // Column 5.
        let c = mac(c, a[0], b[5]);
        let c = mac(c, a[1], b[4]);
        let c = mac(c, a[2], b[3]);
        let c = mac(c, a[3], b[2]);
        let c = mac(c, a[4], b[1]);
        let c = mac(c, a[5], b[0]);
        w[5] = c[0];
        let c = [c[1], c[2], 0];
        // Column 6.
        let c = mac(c, a[0], b[6]);
        let c = mac(c, a[1], b[5]);
        let c = mac(c, a[2], b[4]);
        let c = mac(c, a[3], b[3]);
        let c = mac(c, a[4], b[2]);
        let c = mac(c, a[5], b[1]);
        let c = mac(c, a[6], b[0]);
        w[6] = c[0];
        let c = [c[1], c[2], 0];
        // Column 7.
        let c = mac(c, a[0], b[7]);
        let c = mac(c, a[1], b[6]);
        let c = mac(c, a[2], b[5]);
        let c = mac(c, a[3], b[4]);
        let c = mac(c, a[4], b[3]);
        let c = mac(c, a[5], b[2]);
        let c = mac(c, a[6], b[1]);
        let c = mac(c, a[7], b[0]);
        w[7] = c[0];
        let c = [c[1], c[2], 0];
        // Column 8.
        let c = mac(c, a[1], b[7]);
        let c = mac(c, a[2], b[6]);
        let c = mac(c, a[3], b[5]);
        let c = mac(c, a[4], b[4]);
        let c = mac(c, a[5], b[3]);
        let c = mac(c, a[6], b[2]);
        let c = mac(c, a[7], b[1]);
        w[8] = c[0];
        let c = [c[1], c[2], 0];
        // Column 9.
        let c = mac(c, a[2], b[7]);
        let c = mac(c, a[3], b[6]);
        let c = mac(c, a[4], b[5]);
        let c = mac(c, a[5], b[4]);
        let c = mac(c, a[6], b[3]);
        let c = mac(c, a[7], b[2]);
        w[9] = c[0];
        let c = [c[1], c[2], 0];
        // Column 10.
        let c = mac(c, a[3], b[7]);
        let c = mac(c, a[4], b[6]);
        let c = mac(c, a[5], b[5]);
        let c = mac(c, a[6], b[4]);
        let c = mac(c, a[7], b[3]);
        w[10] = c[0];
        let c = [c[1], c[2], 0];
        // Column 11.
        let c = mac(c, a[4], b[7]);
        let c = mac(c, a[5], b[6]);
        let c = mac(c, a[6], b[5]);
        let c = mac(c, a[7], b[4]);
        w[11] = c[0];
        let c = [c[1], c[2], 0];
        // Column 12.
        let c = mac(c, a[5], b[7]);
        let c = mac(c, a[6], b[6]);
        let c = mac(c, a[7], b[5]);
        w[12] = c[0];
        let c = [c[1], c[2], 0];
        // Column 13.
        let c = mac(c, a[6], b[7]);
        let c = mac(c, a[7], b[6]);
        w[13] = c[0];
        let c = [c[1], c[2], 0];
        // Column 14.
        let c = mac(c, a[7], b[7]);
        w[14] = c[0];
        let c = [c[1], c[2], 0];
        w[15] = c[0];
        reduce(w)
    }

    /// self²: the 28 products of two different words once (x), then
    /// 2x + the 8 squares, then folded.
    #[inline(never)]
    pub(crate) const fn square(&self) -> Fe {
        let a = self.0;
        let mut x = [0u32; 16];
        let c = [0u32; 3];
        // Column 1.
        let c = mac(c, a[0], a[1]);
        x[1] = c[0];
        let c = [c[1], c[2], 0];
        // Column 2.
        let c = mac(c, a[0], a[2]);
        x[2] = c[0];
        let c = [c[1], c[2], 0];
        // Column 3.
        let c = mac(c, a[0], a[3]);
        let c = mac(c, a[1], a[2]);
        x[3] = c[0];
        let c = [c[1], c[2], 0];
        // Column 4.
        let c = mac(c, a[0], a[4]);
        let c = mac(c, a[1], a[3]);
        x[4] = c[0];
        let c = [c[1], c[2], 0];
        // Column 5.
        let c = mac(c, a[0], a[5]);
        let c = mac(c, a[1], a[4]);
        let c = mac(c, a[2], a[3]);
        x[5] = c[0];
        let c = [c[1], c[2], 0];
        // Column 6.
        let c = mac(c, a[0], a[6]);
        let c = mac(c, a[1], a[5]);
        let c = mac(c, a[2], a[4]);
        x[6] = c[0];
        let c = [c[1], c[2], 0];
        // Column 7.
        let c = mac(c, a[0], a[7]);
        let c = mac(c, a[1], a[6]);
        let c = mac(c, a[2], a[5]);
        let c = mac(c, a[3], a[4]);
        x[7] = c[0];
        let c = [c[1], c[2], 0];
        // Column 8.
        let c = mac(c, a[1], a[7]);
        let c = mac(c, a[2], a[6]);
        let c = mac(c, a[3], a[5]);
        x[8] = c[0];
        let c = [c[1], c[2], 0];
        // Column 9.
        let c = mac(c, a[2], a[7]);
        let c = mac(c, a[3], a[6]);
        let c = mac(c, a[4], a[5]);
        x[9] = c[0];
        let c = [c[1], c[2], 0];
        // Column 10.
        let c = mac(c, a[3], a[7]);
        let c = mac(c, a[4], a[6]);
        x[10] = c[0];
        let c = [c[1], c[2], 0];
        // Column 11.
        let c = mac(c, a[4], a[7]);
        let c = mac(c, a[5], a[6]);
        x[11] = c[0];
        let c = [c[1], c[2], 0];
        // Column 12.
        let c = mac(c, a[5], a[7]);
        x[12] = c[0];
        let c = [c[1], c[2], 0];
        // Column 13.
        let c = mac(c, a[6], a[7]);
        x[13] = c[0];
        let c = [c[1], c[2], 0];
        x[14] = c[0];
        let mut w = [0u32; 16];
        let mut t = 0u64;
        let mut i = 0;
        while i < 8 {
            let d = a[i] as u64 * a[i] as u64;
            let low = if i == 0 { 0 } else { x[2 * i - 1] >> 31 };
            t = ((x[2 * i] << 1 | low) as u64) + (d as u32 as u64) + (t >> 32);
            w[2 * i] = t as u32;
            t = ((x[2 * i + 1] << 1 | x[2 * i] >> 31) as u64) + (d >> 32) + (t >> 32);
            w[2 * i + 1] = t as u32;
            i += 1;
        }
        reduce(w)
    }

    /// self² repeated `n` times (n ≥ 1).
    pub(crate) const fn square_times(&self, n: u32) -> Fe {
        let mut x = self.square();
        let mut i = 1;
        while i < n {
            x = x.square();
            i += 1;
        }
        x
    }

    /// self · `small` (`small` < 2^26).
    pub(crate) const fn mul_small(&self, small: u32) -> Fe {
        let mut r = [0u32; 8];
        let mut t = 0u64;
        let mut i = 0;
        while i < 8 {
            t = self.0[i] as u64 * small as u64 + (t >> 32);
            r[i] = t as u32;
            i += 1;
        }
        fold_carry(r, (t >> 32) as u32)
    }

    /// (self^(2^250 − 1), self^11): the common start of the exponent
    /// chains below (the usual one: 250 squarings, 9 multiplications).
    const fn pow_2_250_minus_1(&self) -> (Fe, Fe) {
        let z = self;
        let z2 = z.square();
        let z9 = z2.square_times(2).mul(z);
        let z11 = z9.mul(&z2);
        let z_5_0 = z11.square().mul(&z9); // z^(2^5 − 1)
        let z_10_0 = z_5_0.square_times(5).mul(&z_5_0);
        let z_20_0 = z_10_0.square_times(10).mul(&z_10_0);
        let z_40_0 = z_20_0.square_times(20).mul(&z_20_0);
        let z_50_0 = z_40_0.square_times(10).mul(&z_10_0);
        let z_100_0 = z_50_0.square_times(50).mul(&z_50_0);
        let z_200_0 = z_100_0.square_times(100).mul(&z_100_0);
        (z_200_0.square_times(50).mul(&z_50_0), z11)
    }

    /// self^(p − 2) = 1/self (0 for 0): 254 squarings and 11
    /// multiplications, the same for every input.
    #[inline(never)] // checked for branches (scripts/cross/ct-functions.txt)
    pub(crate) const fn invert(&self) -> Fe {
        let (z_250_0, z11) = self.pow_2_250_minus_1();
        // (2^250 − 1)·2^5 + 11 = 2^255 − 21 = p − 2.
        z_250_0.square_times(5).mul(&z11)
    }

    /// self^((p − 5)/8) = self^(2^252 − 3), for square roots.
    pub(crate) const fn pow_p58(&self) -> Fe {
        let (z_250_0, _) = self.pow_2_250_minus_1();
        // (2^250 − 1)·4 + 1 = 2^252 − 3.
        z_250_0.square_times(2).mul(self)
    }

    /// Whether self ≡ other (compile-time use only: not constant time).
    pub(crate) const fn equals(&self, other: &Fe) -> bool {
        let a = self.to_bytes();
        let b = other.to_bytes();
        let mut i = 0;
        while i < 32 {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Swaps `a` and `b` when `swap` is 1, leaves them when it is 0,
    /// without a branch.
    #[inline(always)]
    pub(crate) fn conditional_swap(a: &mut Fe, b: &mut Fe, swap: u32) {
        let mask = barrier(0u32.wrapping_sub(swap));
        for i in 0..8 {
            let t = mask & (a.0[i] ^ b.0[i]);
            a.0[i] ^= t;
            b.0[i] ^= t;
        }
    }

    /// `b` where `take` is 1, `a` where it is 0, without a branch.
    #[inline(always)]
    pub(crate) fn select(a: &Fe, b: &Fe, take: u32) -> Fe {
        let mut out = *a;
        Fe::assign_if(&mut out, b, take);
        out
    }

    /// Sets `a` to `b` where `take` is 1, leaves it where it is 0, without
    /// a branch.
    #[inline(always)]
    pub(crate) fn assign_if(a: &mut Fe, b: &Fe, take: u32) {
        let mask = barrier(0u32.wrapping_sub(take));
        for i in 0..8 {
            a.0[i] ^= mask & (a.0[i] ^ b.0[i]);
        }
    }
}

impl zeroize::Zeroize for Fe {
    fn zeroize(&mut self) {
        self.0.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// p − 1 as bytes.
    const P_MINUS_1: [u8; 32] = {
        let mut b = [0xff; 32];
        b[0] = 0xec;
        b[31] = 0x7f;
        b
    };

    #[test]
    fn encoding_reduces_modulo_p() {
        let mut p = P_MINUS_1;
        p[0] = 0xed;
        assert_eq!(Fe::from_bytes(&p).to_bytes(), [0; 32], "p is 0");
        assert_eq!(Fe::from_bytes(&P_MINUS_1).to_bytes(), P_MINUS_1);
        // Bit 255 is ignored: 2^256 − 1 reads as 2^255 − 1 = p + 18.
        let mut eighteen = [0u8; 32];
        eighteen[0] = 18;
        assert_eq!(Fe::from_bytes(&[0xff; 32]).to_bytes(), eighteen);
        // Words up to 2^256 − 1 (what the arithmetic may hold): 2^256 − 1
        // = 2p + 37.
        let mut thirty_seven = [0u8; 32];
        thirty_seven[0] = 37;
        assert_eq!(Fe([u32::MAX; 8]).to_bytes(), thirty_seven);
        let minus_one = Fe::from_bytes(&P_MINUS_1);
        assert_eq!(minus_one.add(&Fe::ONE).to_bytes(), [0; 32]);
        assert_eq!(minus_one.mul(&minus_one).to_bytes(), Fe::ONE.to_bytes());
        assert_eq!(Fe::ONE.neg().to_bytes(), P_MINUS_1);
    }

    /// Values at the edges of the representation, where every carry and
    /// fold runs: 0, 1, 19, p − 1, p, p + 18, 2^255, 2p, 2^256 − 38 … − 1,
    /// and words of all ones or alternating patterns.
    fn edge_values() -> alloc::vec::Vec<Fe> {
        let mut values = alloc::vec![
            Fe::ZERO,
            Fe::ONE,
            Fe::from_small(19),
            Fe::from_small(38),
            Fe::from_bytes(&P_MINUS_1),
        ];
        let p = Fe([0xffff_ffed, !0, !0, !0, !0, !0, !0, 0x7fff_ffff]);
        values.push(p);
        values.push(Fe([0xffff_ffff, !0, !0, !0, !0, !0, !0, 0x7fff_ffff])); // p + 18
        values.push(Fe([0, 0, 0, 0, 0, 0, 0, 0x8000_0000])); // 2^255
        values.push(Fe([0xffff_ffda, !0, !0, !0, !0, !0, !0, !0])); // 2p
        for below in [1u32, 2, 19, 37, 38, 39] {
            values.push(Fe([0u32.wrapping_sub(below), !0, !0, !0, !0, !0, !0, !0]));
        }
        values.push(Fe([0x5555_5555; 8]));
        values.push(Fe([0xaaaa_aaaa; 8]));
        values.push(Fe([!0, 0, !0, 0, !0, 0, !0, 0]));
        values.push(Fe([0, !0, 0, !0, 0, !0, 0, !0]));
        values
    }

    /// The operations agree with each other on the edge values: a·b = b·a,
    /// a·a = a², (a + b)·c = a·c + b·c, (a − b) + b = a, a·k = a·(k as an
    /// element), a·(1/a) = 1; each result is reduced again through
    /// further operations, so a wrong carry anywhere shows.
    #[test]
    fn identities_hold_at_the_edges() {
        let values = edge_values();
        let eq = |x: Fe, y: Fe| x.to_bytes() == y.to_bytes();
        for a in &values {
            assert!(eq(a.mul(a), a.square()));
            assert!(eq(a.mul_small(121_665), a.mul(&Fe::from_small(121_665))));
            if a.to_bytes() != [0; 32] {
                assert!(eq(a.mul(&a.invert()), Fe::ONE));
            }
            for b in &values {
                assert!(eq(a.mul(b), b.mul(a)));
                assert!(eq(a.sub(b).add(b), *a));
                assert!(eq(a.add(b).sub(a), *b));
                assert!(eq(a.sub(b), b.sub(a).neg()));
                for c in values.iter().step_by(3) {
                    assert!(eq(a.add(b).mul(c), a.mul(c).add(&b.mul(c))));
                    assert!(eq(a.sub(b).mul(c), a.mul(c).sub(&b.mul(c))));
                }
            }
        }
        assert_eq!(Fe::ZERO.invert().to_bytes(), [0; 32]);
    }
}
