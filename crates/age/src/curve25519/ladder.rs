//! The Montgomery ladder of RFC 7748 (section 5): X25519 with any
//! u-coordinate, 255 steps of one differential addition and one doubling,
//! the two points swapped by a mask, never by a branch.

use super::field::Fe;

/// (A − 2)/4 for Curve25519 (A = 486662).
const A24: u32 = 121_665;

/// k·P for the u-coordinate `u` of P and the clamped scalar `k`, as a
/// fraction x/z (z = 0 for the point at infinity); secrets wiped.
pub(crate) fn ladder(k: &[u8; 32], u: &Fe) -> (Fe, Fe) {
    let x1 = *u;
    let mut x2 = Fe::ONE;
    let mut z2 = Fe::ZERO;
    let mut x3 = x1;
    let mut z3 = Fe::ONE;
    let mut swap = 0u32;
    for t in (0..255).rev() {
        let bit = u32::from(k[t / 8] >> (t % 8)) & 1;
        swap ^= bit;
        Fe::conditional_swap(&mut x2, &mut x3, swap);
        Fe::conditional_swap(&mut z2, &mut z3, swap);
        swap = bit;

        let a = x2.add(&z2);
        let aa = a.square();
        let b = x2.sub(&z2);
        let bb = b.square();
        let e = aa.sub(&bb);
        let c = x3.add(&z3);
        let d = x3.sub(&z3);
        let da = d.mul(&a);
        let cb = c.mul(&b);
        x3 = da.add(&cb).square();
        z3 = x1.mul(&da.sub(&cb).square());
        x2 = aa.mul(&bb);
        z2 = e.mul(&aa.add(&e.mul_small(A24)));
    }
    Fe::conditional_swap(&mut x2, &mut x3, swap);
    Fe::conditional_swap(&mut z2, &mut z3, swap);
    zeroize::Zeroize::zeroize(&mut x3);
    zeroize::Zeroize::zeroize(&mut z3);
    (x2, z2)
}
