//! The AES data flow on bit planes, generic over the plane type: SubBytes
//! as a Boolean circuit, MixColumns from a frame's two neighbour maps, and
//! the byte-wise bit transposition that packs blocks into planes.
//!
//! Why generic: the same code runs twice. In the crate the planes are
//! machine words ([`super::Word`]: `u32` on 32-bit targets, `u64` on
//! 64-bit ones), and each function compiles to
//! the straight-line logic of the fixsliced AES. The build script
//! (`build/`) includes this file as it is and runs it on values that record
//! each operation, which gives the riscv32 kernel its instructions
//! (`build/kernel.rs`): one definition of the circuits for both.
//! So this file uses nothing but `core`, and only XOR, AND and shifts by
//! constants on the planes.

use core::ops::{BitAnd, BitXor, Shl, Shr};

/// What the circuits need of a plane: XOR and AND, copied freely.
pub trait Plane: Copy + BitXor<Output = Self> + BitAnd<Output = Self> {}

impl<T: Copy + BitXor<Output = T> + BitAnd<Output = T>> Plane for T {}

/// SubBytes on the 8 planes (plane `j` holds bit `j`): Boyar, Peralta and
/// Calik's 113-gate circuit for the AES S-box (the top linear layer and
/// non-linear middle of Boyar and Peralta's "A new combinational logic
/// minimization technique with applications to cryptology", SEA 2010, with
/// the shorter bottom linear layer of the same authors' later circuit
/// minimization work): a top linear layer of 23 XORs, a non-linear middle
/// of 32 ANDs and 30 XORs, a bottom linear layer of 28 XORs. Its 4 NOT
/// gates (S1, S2, S6 and S7 are XNORs) are left out: the caller folds
/// them into the round keys (`NOT_PLANES` in `fixslice.rs`).
#[inline(always)]
pub fn sub_bytes<T: Plane>(state: &mut [T; 8]) {
    // The circuit numbers bits from the most significant: U0 = bit 7.
    let u0 = state[7];
    let u1 = state[6];
    let u2 = state[5];
    let u3 = state[4];
    let u4 = state[3];
    let u5 = state[2];
    let u6 = state[1];
    let u7 = state[0];

    // Top linear layer: the 22 inputs y1..y21 (and U7) of the middle.
    let y14 = u3 ^ u5;
    let y13 = u0 ^ u6;
    let y9 = u0 ^ u3;
    let y8 = u0 ^ u5;
    let t0 = u1 ^ u2;
    let y1 = t0 ^ u7;
    let y4 = y1 ^ u3;
    let y12 = y13 ^ y14;
    let y2 = y1 ^ u0;
    let y5 = y1 ^ u6;
    let y3 = y5 ^ y8;
    let t1 = u4 ^ y12;
    let y15 = t1 ^ u5;
    let y20 = t1 ^ u1;
    let y6 = y15 ^ u7;
    let y10 = y15 ^ t0;
    let y11 = y20 ^ y9;
    let y7 = u7 ^ y11;
    let y17 = y10 ^ y11;
    let y19 = y10 ^ y8;
    let y16 = t0 ^ y11;
    let y21 = y13 ^ y16;
    let y18 = u0 ^ y16;

    // Middle: inversion in GF(2^4)^2, shared by all outputs.
    let t2 = y12 & y15;
    let t3 = y3 & y6;
    let t4 = t3 ^ t2;
    let t5 = y4 & u7;
    let t6 = t5 ^ t2;
    let t7 = y13 & y16;
    let t8 = y5 & y1;
    let t9 = t8 ^ t7;
    let t10 = y2 & y7;
    let t11 = t10 ^ t7;
    let t12 = y9 & y11;
    let t13 = y14 & y17;
    let t14 = t13 ^ t12;
    let t15 = y8 & y10;
    let t16 = t15 ^ t12;
    let t17 = t4 ^ y20;
    let t18 = t6 ^ t16;
    let t19 = t9 ^ t14;
    let t20 = t11 ^ t16;
    let t21 = t17 ^ t14;
    let t22 = t18 ^ y19;
    let t23 = t19 ^ y21;
    let t24 = t20 ^ y18;
    let t25 = t21 ^ t22;
    let t26 = t21 & t23;
    let t27 = t24 ^ t26;
    let t28 = t25 & t27;
    let t29 = t28 ^ t22;
    let t30 = t23 ^ t24;
    let t31 = t22 ^ t26;
    let t32 = t31 & t30;
    let t33 = t32 ^ t24;
    let t34 = t23 ^ t33;
    let t35 = t27 ^ t33;
    let t36 = t24 & t35;
    let t37 = t36 ^ t34;
    let t38 = t27 ^ t36;
    let t39 = t29 & t38;
    let t40 = t25 ^ t39;
    let t41 = t40 ^ t37;
    let t42 = t29 ^ t33;
    let t43 = t29 ^ t40;
    let t44 = t33 ^ t37;
    let t45 = t42 ^ t41;
    let z0 = t44 & y15;
    let z1 = t37 & y6;
    let z2 = t33 & u7;
    let z3 = t43 & y16;
    let z4 = t40 & y1;
    let z5 = t29 & y7;
    let z6 = t42 & y11;
    let z7 = t45 & y17;
    let z8 = t41 & y10;
    let z9 = t44 & y12;
    let z10 = t37 & y3;
    let z11 = t33 & y4;
    let z12 = t43 & y13;
    let z13 = t40 & y5;
    let z14 = t29 & y2;
    let z15 = t42 & y9;
    let z16 = t45 & y14;
    let z17 = t41 & y8;

    // Bottom linear layer (28 XORs).
    let c1 = z15 ^ z16;
    let c2 = z10 ^ c1;
    let c3 = z9 ^ c2;
    let c4 = z0 ^ z2;
    let c5 = z1 ^ z0;
    let c6 = z3 ^ z4;
    let c7 = z12 ^ c4;
    let c8 = z7 ^ c6;
    let c9 = z8 ^ c7;
    let c10 = c8 ^ c9;
    let c11 = c6 ^ c5;
    let c12 = z3 ^ z5;
    let c13 = z13 ^ c1;
    let c14 = c4 ^ c12;
    let c16 = z6 ^ c8;
    let c17 = z14 ^ c10;
    let c18 = c13 ^ c14;
    let c20 = z15 ^ c16;
    let c21 = c2 ^ z11;
    let c26 = c17 ^ c20;

    // S1, S2, S6 and S7 are XNORs in the circuit: here XORs, their
    // complement comes with the round keys (NOT_PLANES).
    let s3 = c3 ^ c11;
    state[7] = c3 ^ c16;
    state[6] = s3 ^ c16;
    state[5] = c26 ^ z17;
    state[4] = s3;
    state[3] = c14 ^ s3;
    state[2] = c21 ^ c17;
    state[1] = c10 ^ c18;
    state[0] = z12 ^ c18;
}

/// MixColumns in one frame, given that frame's neighbour maps: `below(x)`
/// is the plane of the byte one row below (in the same column of the true
/// state), `two_below(x)` two rows below. out = 2·(a ⊕ a₁) ⊕ a₁ ⊕ a₂ ⊕ a₃
/// where aₖ is the byte k rows below; with t = a ⊕ a₁ that is
/// xtime(t) ⊕ a₁ ⊕ t₂. Plane by plane, keeping few values live: xtime(t)
/// feeds t₇ into planes 0, 1, 3 and 4 and t_{j-1} into plane j. One call
/// of each map per plane (plane 7's `below` is reused).
#[inline(always)]
pub fn mix_columns<T: Plane>(
    state: &mut [T; 8],
    mut below: impl FnMut(T) -> T,
    mut two_below: impl FnMut(T) -> T,
) {
    let below7 = below(state[7]);
    let t7 = state[7] ^ below7;
    let mut previous = t7;
    for (j, plane) in state.iter_mut().enumerate() {
        let a = *plane;
        let (a1, t) = if j == 7 {
            (below7, t7)
        } else {
            let a1 = below(a);
            (a1, a ^ a1)
        };
        let mut out = a1 ^ two_below(t) ^ previous;
        if j == 1 || j == 3 || j == 4 {
            out = out ^ t7;
        }
        *plane = out;
        previous = t;
    }
}

/// Transposes, in each byte slot of the 8 words, the 8 × 8 bit matrix
/// (word index × bit index): afterwards bit `m` of word `j` is what bit `j`
/// of word `m` was. Its own inverse. `masks` are 0x55555555, 0x33333333
/// and 0x0f0f0f0f (as planes: the caller's constants or registers).
#[inline(always)]
pub fn transpose_bytes<T>(x: &mut [T; 8], masks: [T; 3])
where
    T: Plane + Shl<u32, Output = T> + Shr<u32, Output = T>,
{
    for (stage, mask) in masks.into_iter().enumerate() {
        let step = 1 << stage;
        let shift = step as u32;
        for base in (0..8).step_by(2 * step) {
            for i in base..base + step {
                // Exchange the bits of x[i + step] selected by
                // `mask << shift` with the bits of x[i] selected by `mask`.
                let t = ((x[i] >> shift) ^ x[i + step]) & mask;
                x[i + step] = x[i + step] ^ t;
                x[i] = x[i] ^ (t << shift);
            }
        }
    }
}
