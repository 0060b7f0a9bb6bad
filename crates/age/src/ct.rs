//! Value barriers for constant time (the technique of `subtle`'s
//! `black_box`): a carry, borrow or mask made from secret data goes
//! through [`barrier`], after which the compiler can no longer see that it
//! is 0 or 1 (or 0 or all ones), so it cannot turn the arithmetic that
//! uses it back into a branch ("add 1 only if there is a carry", "skip the
//! rest of the chain once the carry is 0"): exactly what LLVM had done to
//! the field arithmetic (issue 36). `scripts/cross/ct-branches.py` checks
//! the compiled board binaries for the result.

/// `value`, opaque to the optimiser: [`core::hint::black_box`], which
/// passes it through an empty inline-assembly statement at run time (a
/// store and a load on riscv32) and is the identity at compile time, so
/// the `const fn` field arithmetic can still build its tables.
#[cfg_attr(not(target_arch = "riscv32"), allow(dead_code))]
#[inline(always)]
pub(crate) const fn barrier(value: u32) -> u32 {
    core::hint::black_box(value)
}

/// [`barrier`] for a 64-bit value.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
#[inline(always)]
pub(crate) const fn barrier64(value: u64) -> u64 {
    core::hint::black_box(value)
}
