//! The negative control of scripts/cross/ct-branches.py (`--control`):
//! compiled alone for a board target, the check must FAIL on the first
//! function (a branch on a secret bit, the kind of code the check is
//! there to catch) and pass the second (the same work under a mask: a
//! loop's back edge only), saying which and why.
#![no_std]

/// Work the optimiser cannot merge into a select: a call.
#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn ct_control_work(x: u32) -> u32 {
    x.rotate_left(7).wrapping_mul(0x9e37_79b9) ^ x
}

/// Calls the work only for the 1 bits of `secret`: its running time tells
/// the secret's bits (the check must reject it).
#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn ct_control_branch_on_secret(mut acc: u32, secret: u32) -> u32 {
    for i in 0..32 {
        if (secret >> i) & 1 == 1 {
            acc = ct_control_work(acc);
        }
    }
    acc
}

/// The same result, the work done for every bit and kept under a mask
/// that goes through a value barrier (the check must accept it: at most
/// one back edge). Without the barrier, LLVM turns the mask back into a
/// branch on riscv32 (no conditional move), as it did in the field
/// arithmetic.
#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn ct_control_masked(mut acc: u32, secret: u32) -> u32 {
    for i in 0..32 {
        let mask = core::hint::black_box(0u32.wrapping_sub((secret >> i) & 1));
        let worked = ct_control_work(acc);
        acc = (worked & mask) | (acc & !mask);
    }
    acc
}
