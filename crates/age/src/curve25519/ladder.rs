//! The Montgomery ladder of RFC 7748 (section 5): X25519 with any
//! u-coordinate, one differential addition and one doubling per bit, the
//! two points swapped by a mask, never by a branch.
//!
//! The scalar is clamped, so two ends of the ladder are known: bit 254 is
//! 1, so the first step's result (P, 2P) is set directly (a doubling, no
//! addition), and bits 2..0 are 0, so the last three steps are doublings
//! alone (their additions' results would be thrown away). The same
//! operations run for every scalar.

use super::field::Fe;

/// (A − 2)/4 for Curve25519 (A = 486662).
const A24: u32 = 121_665;

/// 2·(x : z), given a = x + z and b = x − z.
#[inline(always)]
fn double(a: &Fe, b: &Fe) -> (Fe, Fe) {
    let aa = a.square();
    let bb = b.square();
    let e = aa.sub(&bb);
    (aa.mul(&bb), e.mul(&aa.add(&e.mul_small(A24))))
}

/// k·P for the u-coordinate `u` of P and the clamped scalar `k` (bits
/// 2..0 clear, bit 254 set), as a fraction x/z (z = 0 for the point at
/// infinity); secrets wiped.
// Out of line: checked for branches in the board binary
// (scripts/cross/ct-functions.txt).
#[inline(never)]
pub(crate) fn ladder(k: &[u8; 32], u: &Fe) -> (Fe, Fe) {
    debug_assert!(k[0] & 7 == 0 && k[31] >> 6 == 1, "a clamped scalar");
    let x1 = *u;
    // After bit 254: P and 2P.
    let mut x2 = x1;
    let mut z2 = Fe::ONE;
    let (mut x3, mut z3) = double(&x1.add(&Fe::ONE), &x1.sub(&Fe::ONE));
    let mut swap = 0u32;
    for t in (3..254).rev() {
        let bit = u32::from(k[t / 8] >> (t % 8)) & 1;
        swap ^= bit;
        Fe::conditional_swap(&mut x2, &mut x3, swap);
        Fe::conditional_swap(&mut z2, &mut z3, swap);
        swap = bit;

        let a = x2.add(&z2);
        let b = x2.sub(&z2);
        let c = x3.add(&z3);
        let d = x3.sub(&z3);
        let da = d.mul(&a);
        let cb = c.mul(&b);
        x3 = da.add(&cb).square();
        z3 = x1.mul(&da.sub(&cb).square());
        (x2, z2) = double(&a, &b);
    }
    Fe::conditional_swap(&mut x2, &mut x3, swap);
    Fe::conditional_swap(&mut z2, &mut z3, swap);
    // Bits 2..0.
    for _ in 0..3 {
        (x2, z2) = double(&x2.add(&z2), &x2.sub(&z2));
    }
    zeroize::Zeroize::zeroize(&mut x3);
    zeroize::Zeroize::zeroize(&mut z3);
    (x2, z2)
}
