//! Whether the kernel reports the Zkne and Zknd extensions on every CPU,
//! through the `riscv_hwprobe` system call (Linux 6.4 and later).
//!
//! Why `unsafe`: a raw system call with a pointer to one key-value pair,
//! which the kernel reads and writes; nothing else is touched.
#![allow(unsafe_code)]

/// `__NR_riscv_hwprobe` (asm-generic numbering, riscv32 and riscv64).
const SYS_RISCV_HWPROBE: libc::c_long = 258;
/// `RISCV_HWPROBE_KEY_IMA_EXT_0`.
const KEY_IMA_EXT_0: i64 = 4;
/// `RISCV_HWPROBE_EXT_ZKND`.
const EXT_ZKND: u64 = 1 << 11;
/// `RISCV_HWPROBE_EXT_ZKNE`.
const EXT_ZKNE: u64 = 1 << 12;

/// `struct riscv_hwprobe`.
#[repr(C)]
struct Pair {
    key: i64,
    value: u64,
}

/// `Some(true)` when every CPU has Zkne and Zknd, `Some(false)` when the
/// kernel says otherwise, `None` when it does not answer (a kernel before
/// 6.4, or qemu-user 7.2, which lacks the system call).
pub fn zkne_and_zknd() -> Option<bool> {
    let mut pair = Pair {
        key: KEY_IMA_EXT_0,
        value: 0,
    };
    // SAFETY: one key-value pair that the kernel reads and writes, borrowed
    // for the call; no CPU set (all CPUs) and no flags, as documented.
    let status = unsafe {
        libc::syscall(
            SYS_RISCV_HWPROBE,
            &mut pair as *mut Pair,
            1usize,
            0usize,
            core::ptr::null_mut::<libc::c_void>(),
            0u32,
        )
    };
    // The kernel sets the key to -1 when it does not know it.
    (status == 0 && pair.key == KEY_IMA_EXT_0)
        .then_some(pair.value & (EXT_ZKND | EXT_ZKNE) == EXT_ZKND | EXT_ZKNE)
}
