//! Illegal-instruction handling on riscv32 Linux: the start-up probe, and
//! (feature `emulate`, test builds only) trap-and-emulate.
//!
//! Why `unsafe`: a SIGILL handler is installed with `sigaction` and reads
//! and writes the interrupted thread's registers in the `ucontext` the
//! kernel passes to it; both are FFI and raw-pointer work the compiler
//! cannot check. The handlers only touch the saved registers (pc and the
//! instruction's rd), read the instruction at the saved pc (its first 2
//! bytes, then the next 2 when its length bits say it has 4; it trapped,
//! so it is mapped), use atomics, and call nothing that is
//! not async-signal-safe.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

use crate::model;

/// Byte offset of the general registers in the riscv32 Linux `ucontext`
/// (uc_flags, uc_link, uc_stack: 20 bytes; uc_sigmask padded to 128 bytes;
/// uc_mcontext aligned to 16): `__gregs[0]` is the pc, `__gregs[i]` is
/// register x`i`.
const GREGS_OFFSET: usize = 160;

/// Whether an AES instruction trapped while the probe ran.
static TRAPPED: AtomicBool = AtomicBool::new(false);

/// The registers saved in a handler's `ucontext`.
///
/// # Safety
/// `context` must be the third argument of an `SA_SIGINFO` handler.
unsafe fn registers<'a>(context: *mut libc::c_void) -> &'a mut [u32; 32] {
    // SAFETY: the kernel's riscv32 ucontext holds 32 saved registers at
    // GREGS_OFFSET, 4-byte aligned, live for the handler's duration.
    unsafe { &mut *(context.cast::<u8>().add(GREGS_OFFSET).cast::<[u32; 32]>()) }
}

/// The instruction at `pc` (2-byte aligned with compressed code): its
/// first 16-bit parcel is read first, and the second only when the length
/// bits (the low two, both 1) say the instruction has 4 bytes. A 2-byte
/// instruction (returned zero-extended: never an AES instruction, whose low
/// bits are 11) at the end of the last mapped page would otherwise make
/// the handler itself fault reading past it.
///
/// # Safety
/// `pc` must be the saved pc of the trapping instruction.
unsafe fn instruction_at(pc: u32) -> u32 {
    let at = pc as usize as *const u16;
    // SAFETY: the instruction that raised SIGILL is mapped at pc, at least
    // its first parcel.
    let low = unsafe { core::ptr::read_unaligned(at) };
    if low & 0b11 != 0b11 {
        return u32::from(low);
    }
    // SAFETY: the length bits say a 4-byte instruction, all of it mapped.
    let high = unsafe { core::ptr::read_unaligned(at.add(1)) };
    u32::from(low) | u32::from(high) << 16
}

/// Whether `insn` is an AES instruction the probe may skip: VexRiscv's
/// (custom-0, funct3 0, as the plugin decodes it) or Zkne/Zknd's.
fn is_aes(insn: u32) -> bool {
    model::is_aes(insn) || model::is_zkne(insn)
}

#[cfg_attr(feature = "emulate", allow(dead_code))]
extern "C" fn skip_and_record(
    _signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: installed with SA_SIGINFO, so `context` is the ucontext.
    let registers = unsafe { registers(context) };
    // SAFETY: registers[0] is the trapping instruction's pc.
    let insn = unsafe { instruction_at(registers[0]) };
    if is_aes(insn) {
        TRAPPED.store(true, Ordering::SeqCst);
        registers[0] = registers[0].wrapping_add(4);
    } else {
        reset_to_default();
    }
}

/// Restores the default SIGILL action: returning re-executes the
/// instruction, which then ends the process as it would have.
fn reset_to_default() {
    // SAFETY: SIG_DFL for SIGILL is always valid; signal() is
    // async-signal-safe.
    unsafe {
        libc::signal(libc::SIGILL, libc::SIG_DFL);
    }
}

/// Installs `handler` for SIGILL; returns the previous action.
fn install(
    handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
) -> Option<libc::sigaction> {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
    // the handler has the SA_SIGINFO signature.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = core::mem::zeroed();
        (libc::sigaction(libc::SIGILL, &action, &mut previous) == 0).then_some(previous)
    }
}

fn restore(previous: &libc::sigaction) {
    // SAFETY: `previous` came from sigaction.
    unsafe {
        libc::sigaction(libc::SIGILL, previous, core::ptr::null_mut());
    }
}

/// Runs `self_test` (which executes the AES instruction) with a SIGILL
/// handler that skips the instruction if the CPU lacks it; returns whether
/// no instruction trapped and the self-test passed. Never crashes on a CPU
/// without the instruction. Not for concurrent use: run it once at
/// start-up, before other threads execute the instruction.
pub fn probe(self_test: impl FnOnce() -> bool) -> Probe {
    TRAPPED.store(false, Ordering::SeqCst);
    // A test build that emulates the instruction probes an emulated CPU.
    #[cfg(feature = "emulate")]
    let handler = emulate;
    #[cfg(not(feature = "emulate"))]
    let handler = skip_and_record;
    let Some(previous) = install(handler) else {
        return Probe::NoHandler;
    };
    let passed = self_test();
    restore(&previous);
    match (TRAPPED.load(Ordering::SeqCst), passed) {
        (true, _) => Probe::Trapped,
        (false, false) => Probe::WrongAnswer,
        (false, true) => Probe::Works,
    }
}

/// What [`probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The instruction ran and gave the known answers.
    Works,
    /// The CPU raised an illegal-instruction exception: no AES instruction.
    Trapped,
    /// The instruction ran but gave wrong answers.
    WrongAnswer,
    /// The SIGILL handler could not be installed (so nothing was run).
    NoHandler,
}

#[cfg(feature = "emulate")]
extern "C" fn emulate(
    _signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: installed with SA_SIGINFO, so `context` is the ucontext.
    let registers = unsafe { registers(context) };
    // SAFETY: registers[0] is the trapping instruction's pc.
    let insn = unsafe { instruction_at(registers[0]) };
    if model::is_zkne(insn) {
        // Only VexRiscv's instruction is emulated: a Zkne probe still sees
        // a CPU without Zkne.
        TRAPPED.store(true, Ordering::SeqCst);
        registers[0] = registers[0].wrapping_add(4);
        return;
    }
    if !model::is_aes(insn) {
        reset_to_default();
        return;
    }
    let read = |index: u32| {
        if index == 0 {
            0
        } else {
            registers[index as usize]
        }
    };
    let result =
        crate::model::execute(insn >> 25, read((insn >> 15) & 31), read((insn >> 20) & 31));
    let rd = ((insn >> 7) & 31) as usize;
    if rd != 0 {
        registers[rd] = result;
    }
    registers[0] = registers[0].wrapping_add(4);
}

/// Test builds only (feature `emulate`): executes every AES instruction
/// that traps with the [model](crate::model), so the riscv32 machine code of
/// the instruction path runs under qemu-user, which lacks the instruction.
/// Returns whether the handler was installed.
#[cfg(feature = "emulate")]
pub fn install_emulator() -> bool {
    install(emulate).is_some()
}
