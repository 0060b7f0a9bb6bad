//! X25519 with the base point (u = 9) through the birationally equivalent
//! twisted Edwards curve −x² + y² = 1 + d·x²·y² (Ed25519's), where a table
//! of multiples of the base point turns the 255 ladder steps into 64
//! additions and 4 doublings: the scalar in 64 signed radix-16 digits,
//! each addition taking (digit)·16^i·B from a row of 8 precomputed points,
//! read whole and picked by masks (constant time). The result maps back as
//! u = (1 + y)/(1 − y) = (Z + Y)/(Z − Y).
//!
//! The table (32 rows of 8 points, 24 KiB) is computed by the compiler
//! from the curve's definition with the same field code (`const fn`), so
//! no constant here is copied from elsewhere; a compile-time assertion
//! checks that the base point maps to u = 9.

use super::field::Fe;
use crate::ct::barrier;

/// A point in extended coordinates: x = X/Z, y = Y/Z, x·y = T/Z.
#[derive(Clone, Copy)]
pub(crate) struct Extended {
    x: Fe,
    y: Fe,
    z: Fe,
    t: Fe,
}

/// An affine point ready to be added: y + x, y − x and 2d·x·y.
#[derive(Clone, Copy)]
struct Niels {
    y_plus_x: Fe,
    y_minus_x: Fe,
    xy2d: Fe,
}

/// −121665/121666.
const D: Fe = Fe::from_small(121_665)
    .neg()
    .mul(&Fe::from_small(121_666).invert());
const D2: Fe = D.mul_small(2);

impl Extended {
    const IDENTITY: Extended = Extended {
        x: Fe::ZERO,
        y: Fe::ONE,
        z: Fe::ONE,
        t: Fe::ZERO,
    };

    /// Becomes the sum of two points whose (Y + X)·(y + x)-style products
    /// are `a`, `b`, `c` and whose 2·Z1·Z2 is `d` (the shared tail of the
    /// additions, "add-2008-hwcd-3" for a = −1). In place: a returned point
    /// cost a 128-byte memcpy per addition.
    const fn set_sum(&mut self, a: Fe, b: Fe, c: Fe, d: Fe) {
        let e = a.sub(&b);
        let f = d.sub(&c);
        let g = d.add(&c);
        let h = a.add(&b);
        self.x = e.mul(&f);
        self.y = g.mul(&h);
        self.z = f.mul(&g);
        self.t = e.mul(&h);
    }

    /// self += an affine point (7 multiplications).
    fn add_niels(&mut self, q: &Niels) {
        let a = self.y.add(&self.x).mul(&q.y_plus_x);
        let b = self.y.sub(&self.x).mul(&q.y_minus_x);
        let c = self.t.mul(&q.xy2d);
        let d = self.z.add(&self.z);
        self.set_sum(a, b, c, d);
    }

    /// self + other, both extended (compile time: the table).
    const fn add(&self, other: &Extended) -> Extended {
        let a = self.y.add(&self.x).mul(&other.y.add(&other.x));
        let b = self.y.sub(&self.x).mul(&other.y.sub(&other.x));
        let c = self.t.mul(&D2).mul(&other.t);
        let z = self.z.mul(&other.z);
        let d = z.add(&z);
        let mut sum = Extended::IDENTITY;
        sum.set_sum(a, b, c, d);
        sum
    }

    /// 2·self ("dbl-2008-hwcd" for a = −1).
    const fn double(&self) -> Extended {
        let xx = self.x.square();
        let yy = self.y.square();
        let zz = self.z.square();
        let xy = self.x.mul(&self.y);
        // x3 = 2xy/(y² − x²), y3 = (y² + x²)/(2z² − y² + x²).
        let e = xy.add(&xy);
        let g = yy.sub(&xx);
        let h = yy.add(&xx);
        let f = zz.add(&zz).add(&xx).sub(&yy);
        Extended {
            x: e.mul(&f),
            y: g.mul(&h),
            z: f.mul(&g),
            t: e.mul(&h),
        }
    }

    /// The Montgomery u-coordinate as a fraction: (Z + Y)/(Z − Y).
    pub(crate) const fn montgomery_u(&self) -> (Fe, Fe) {
        (self.z.add(&self.y), self.z.sub(&self.y))
    }
}

impl Niels {
    const IDENTITY: Niels = Niels {
        y_plus_x: Fe::ONE,
        y_minus_x: Fe::ONE,
        xy2d: Fe::ZERO,
    };

    /// The affine form of `p`, given 1/Z.
    const fn from_extended(p: &Extended, z_inverse: &Fe) -> Niels {
        let x = p.x.mul(z_inverse);
        let y = p.y.mul(z_inverse);
        Niels {
            y_plus_x: y.add(&x),
            y_minus_x: y.sub(&x),
            xy2d: x.mul(&y).mul(&D2),
        }
    }

    /// Becomes −self where `negate` is 1 (x negated: y + x and y − x
    /// swap, x·y changes sign), stays where it is 0, without a branch.
    fn negate_if(&mut self, negate: u32) {
        Fe::conditional_swap(&mut self.y_plus_x, &mut self.y_minus_x, negate);
        let minus = self.xy2d.neg();
        Fe::assign_if(&mut self.xy2d, &minus, negate);
    }
}

/// The base point: y = 4/5 and the even x (Ed25519's, mapping to u = 9).
const fn base_point() -> Extended {
    let y = Fe::from_small(4).mul(&Fe::from_small(5).invert());
    // x² = (y² − 1)/(d·y² + 1): x = u·v³·(u·v⁷)^((p − 5)/8), times √−1 if
    // that squares to −u/v instead.
    let yy = y.square();
    let u = yy.sub(&Fe::ONE);
    let v = D.mul(&yy).add(&Fe::ONE);
    let v3 = v.square().mul(&v);
    let v7 = v3.square().mul(&v);
    let mut x = u.mul(&v3).mul(&u.mul(&v7).pow_p58());
    if !v.mul(&x.square()).equals(&u) {
        x = x.mul(&sqrt_minus_one());
    }
    if x.to_bytes()[0] & 1 == 1 {
        x = x.neg();
    }
    Extended {
        x,
        y,
        z: Fe::ONE,
        t: x.mul(&y),
    }
}

/// √−1 = 2^((p − 1)/4), by square-and-multiply (compile time only).
const fn sqrt_minus_one() -> Fe {
    // (p − 1)/4 = 2^253 − 5.
    let mut exponent = [0xffu8; 32];
    exponent[0] = 0xfb;
    exponent[31] = 0x1f;
    let two = Fe::from_small(2);
    let mut result = Fe::ONE;
    let mut bit = 256;
    while bit > 0 {
        bit -= 1;
        result = result.square();
        if (exponent[bit / 8] >> (bit % 8)) & 1 == 1 {
            result = result.mul(&two);
        }
    }
    result
}

/// Rows of the table: row i holds 1·256^i·B … 8·256^i·B.
const ROWS: usize = 32;
const PER_ROW: usize = 8;

/// The table, affine. The Z coordinates are inverted together
/// (Montgomery's trick: one inversion for all 256).
static TABLE: [[Niels; PER_ROW]; ROWS] = {
    let mut points = [[Extended::IDENTITY; PER_ROW]; ROWS];
    let mut row_base = base_point();
    let mut i = 0;
    while i < ROWS {
        let mut p = row_base;
        let mut j = 0;
        while j < PER_ROW {
            points[i][j] = p;
            p = p.add(&row_base);
            j += 1;
        }
        let mut k = 0;
        while k < 8 {
            row_base = row_base.double();
            k += 1;
        }
        i += 1;
    }
    // prefix[n] = Z_0 · … · Z_(n−1).
    let mut prefix = [Fe::ONE; ROWS * PER_ROW + 1];
    let mut n = 0;
    while n < ROWS * PER_ROW {
        prefix[n + 1] = prefix[n].mul(&points[n / PER_ROW][n % PER_ROW].z);
        n += 1;
    }
    let mut inverse = prefix[ROWS * PER_ROW].invert(); // 1/(Z_0 · … · Z_(n−1))
    let mut table = [[Niels::IDENTITY; PER_ROW]; ROWS];
    let mut n = ROWS * PER_ROW;
    while n > 0 {
        n -= 1;
        let p = &points[n / PER_ROW][n % PER_ROW];
        table[n / PER_ROW][n % PER_ROW] = Niels::from_extended(p, &inverse.mul(&prefix[n]));
        inverse = inverse.mul(&p.z);
    }
    table
};

// The base point is Curve25519's u = 9.
const _: () = {
    let (u, w) = base_point().montgomery_u();
    assert!(u.mul(&w.invert()).equals(&Fe::from_small(9)));
};

/// digit·256^row·B from the table (digit in −8..=8), reading the whole
/// row into `point`: each coordinate is the OR of every candidate's masked
/// by whether it is the one (at most one mask is all ones), plus 1 in y + x
/// and y − x when the digit is 0 (the identity).
fn table_point(row: usize, digit: i8, point: &mut Niels) {
    let negative = barrier((digit as u8 >> 7) as u32);
    let magnitude = digit.unsigned_abs() as u32;
    let masks: [u32; PER_ROW] = core::array::from_fn(|j| {
        // All ones when magnitude == j + 1, without a comparison branch.
        let diff = magnitude ^ (j as u32 + 1);
        barrier(0u32.wrapping_sub((diff.wrapping_sub(1) >> 31) & 1))
    });
    let zero = barrier((magnitude.wrapping_sub(1) >> 31) & 1);
    let candidates = &TABLE[row];
    point.y_plus_x = pick(candidates, &masks, |n| &n.y_plus_x, zero);
    point.y_minus_x = pick(candidates, &masks, |n| &n.y_minus_x, zero);
    point.xy2d = pick(candidates, &masks, |n| &n.xy2d, 0);
    point.negate_if(negative);
}

/// One coordinate of the candidates, OR-ed under their masks, plus `base`
/// (one coordinate at a time: eight words stay in registers).
#[inline(always)]
fn pick(
    candidates: &[Niels; PER_ROW],
    masks: &[u32; PER_ROW],
    coordinate: impl Fn(&Niels) -> &Fe,
    base: u32,
) -> Fe {
    let mut words = [0u32; 8];
    words[0] = base;
    for (candidate, &mask) in candidates.iter().zip(masks) {
        for (word, &value) in words.iter_mut().zip(&coordinate(candidate).0) {
            *word |= mask & value;
        }
    }
    Fe(words)
}

/// k·B for the clamped scalar `k` (below 2^255).
// Out of line: a symbol of its own in the board binary, whose code
// scripts/cross/ct-branches.py checks for branches (ct-functions.txt).
#[inline(never)]
pub(crate) fn base_multiple(k: &[u8; 32]) -> Extended {
    // 64 digits in −8..=8: k = Σ digit_i·16^i.
    let mut digits = [0i8; 64];
    for (i, byte) in k.iter().enumerate() {
        digits[2 * i] = (byte & 15) as i8;
        digits[2 * i + 1] = (byte >> 4) as i8;
    }
    let mut carry = 0i8;
    for digit in digits.iter_mut().take(63) {
        *digit += carry;
        carry = (*digit + 8) >> 4;
        *digit -= carry << 4;
    }
    digits[63] += carry;
    // Odd digits first (they carry one more factor 16), then 16·that, then
    // the even digits.
    let mut h = Extended::IDENTITY;
    let mut point = Niels::IDENTITY;
    for i in (1..64).step_by(2) {
        table_point(i / 2, digits[i], &mut point);
        h.add_niels(&point);
    }
    for _ in 0..4 {
        h = h.double();
    }
    for i in (0..64).step_by(2) {
        table_point(i / 2, digits[i], &mut point);
        h.add_niels(&point);
    }
    zeroize::Zeroize::zeroize(&mut digits);
    zeroize::Zeroize::zeroize(&mut point);
    h
}

impl zeroize::Zeroize for Extended {
    fn zeroize(&mut self) {
        self.x.zeroize();
        self.y.zeroize();
        self.z.zeroize();
        self.t.zeroize();
    }
}

impl zeroize::Zeroize for Niels {
    fn zeroize(&mut self) {
        self.y_plus_x.zeroize();
        self.y_minus_x.zeroize();
        self.xy2d.zeroize();
    }
}
