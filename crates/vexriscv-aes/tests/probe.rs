//! Under plain qemu-user (no AES instruction, no emulator) the probe
//! reports a trap instead of dying of SIGILL, and the process goes on.
#![cfg(all(target_arch = "riscv32", target_os = "linux", not(feature = "emulate")))]

use aesd_vexriscv::hardware::Hardware;
use aesd_vexriscv::self_test;
use aesd_vexriscv::sigill::{Probe, probe};

#[test]
fn a_cpu_without_the_instruction_is_detected_not_fatal() {
    assert_eq!(probe(self_test::<Hardware>), Probe::Trapped);
    // Twice: the previous SIGILL action was restored and can be replaced again.
    assert_eq!(probe(self_test::<Hardware>), Probe::Trapped);
}
