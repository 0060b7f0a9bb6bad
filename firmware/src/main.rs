//! The firmware: on riscv32imac-unknown-none-elf it starts from the ROM of
//! LiteX's simulation SoC (link.x), runs `aesd_firmware::run` with the
//! machine's `mcycle`/`minstret` counters and prints on the LiteX UART; on
//! the host (`cargo run`) it runs the same checks without counters.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod bare {
    use core::fmt::{self, Write};
    use core::ptr::{read_volatile, write_volatile};

    use aesd_firmware::params::{BYTES, CORE, CORRUPT, PBKDF2_ITERATIONS, UART_BASE};
    use aesd_firmware::{Buffers, Counters, Settings, run};
    use aesd_vexriscv::hardware::Hardware;

    // Start-up: stack at the top of the RAM, traps to `trap`, .data copied
    // from the ROM, .bss zeroed, then `firmware_main`. Interrupts stay off.
    core::arch::global_asm!(
        r#"
        .section .text.start, "ax"
        .global _start
    _start:
        la sp, _stack_top
        la t0, _trap
        csrw mtvec, t0
        la t0, _sidata
        la t1, _sdata
        la t2, _edata
    1:
        bgeu t1, t2, 2f
        lw t3, 0(t0)
        sw t3, 0(t1)
        addi t0, t0, 4
        addi t1, t1, 4
        j 1b
    2:
        la t1, _sbss
        la t2, _ebss
    3:
        bgeu t1, t2, 4f
        sw zero, 0(t1)
        addi t1, t1, 4
        j 3b
    4:
        call firmware_main
    5:
        j 5b

        .balign 4
    _trap:
        la sp, _stack_top
        csrr a0, mcause
        csrr a1, mepc
        csrr a2, mtval
        call firmware_trap
    6:
        j 6b
        "#
    );

    /// The LiteX CSR UART (32-bit CSRs): rxtx at +0, txfull at +4.
    struct Uart;

    impl Write for Uart {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            for byte in text.bytes() {
                // SAFETY: UART_BASE is the UART's CSR block in the SoC's I/O
                // region (csr.json of the simulation build); these are its
                // txfull and rxtx registers.
                unsafe {
                    while read_volatile((UART_BASE + 4) as *const u32) != 0 {}
                    write_volatile(UART_BASE as *mut u32, u32::from(byte));
                }
            }
            Ok(())
        }
    }

    /// A 64-bit counter from its two halves (read again if the low half
    /// wrapped in between).
    macro_rules! counter64 {
        ($lo:literal, $hi:literal) => {{
            loop {
                let (hi, lo, again): (u32, u32, u32);
                // SAFETY: reading the machine counters has no side effect.
                unsafe {
                    core::arch::asm!(
                        concat!("csrr {0}, ", $hi),
                        concat!("csrr {1}, ", $lo),
                        concat!("csrr {2}, ", $hi),
                        out(reg) hi, out(reg) lo, out(reg) again,
                        options(nomem, nostack),
                    );
                }
                if hi == again {
                    break (u64::from(hi) << 32) | u64::from(lo);
                }
            }
        }};
    }

    fn counters() -> Counters {
        Counters {
            cycles: counter64!("mcycle", "mcycleh"),
            instret: counter64!("minstret", "minstreth"),
        }
    }

    /// Executes one AES instruction (custom-0, last encryption round, byte
    /// select 0) with a trap handler of its own in `mtvec`: the handler
    /// skips the instruction and reports the trap. Returns whether it
    /// trapped (the core has no AES instruction) and, if not, whether its
    /// result was S(0x53) = 0xed in byte 0 XORed into rs1.
    fn probe_aes_instruction() -> (bool, bool) {
        let (trapped, result): (u32, u32);
        // SAFETY: mtvec is replaced only for these instructions and put
        // back; the handler (4-byte aligned, direct mode) only advances
        // mepc past the 4-byte instruction and sets `trapped`; interrupts
        // are off, so nothing else can trap in between.
        unsafe {
            core::arch::asm!(
                "csrr {saved}, mtvec",
                "la {scratch}, 2f",
                "csrw mtvec, {scratch}",
                "li {trapped}, 0",
                "li {result}, 0x01020300",
                "li {scratch}, 0x53",
                ".insn r 0x0b, 0, 2, {result}, {result}, {scratch}",
                "j 3f",
                ".balign 4",
                "2:",
                "csrr {scratch}, mepc",
                "addi {scratch}, {scratch}, 4",
                "csrw mepc, {scratch}",
                "li {trapped}, 1",
                "mret",
                "3:",
                "csrw mtvec, {saved}",
                saved = out(reg) _,
                scratch = out(reg) _,
                trapped = out(reg) trapped,
                result = out(reg) result,
                options(nostack),
            );
        }
        (trapped != 0, result == 0x0102_03ed)
    }

    #[repr(C, align(16))]
    struct Memory {
        x: [u8; BYTES],
        y: [u8; BYTES],
        z: [u8; BYTES],
    }

    // In .bss: zeroed by _start.
    static mut MEMORY: Memory = Memory {
        x: [0; BYTES],
        y: [0; BYTES],
        z: [0; BYTES],
    };

    #[unsafe(no_mangle)]
    extern "C" fn firmware_main() -> ! {
        let memory = &raw mut MEMORY;
        // SAFETY: the only reference to MEMORY, taken once (no interrupts,
        // one hart).
        let memory = unsafe { &mut *memory };
        let _ = writeln!(Uart, "\nSTART aesd-firmware");
        let (traps, right) = probe_aes_instruction();
        if !traps && !right {
            let _ = writeln!(
                Uart,
                "FAIL probe: the AES instruction ran and gave a wrong result"
            );
        }
        run::<_, Hardware>(
            &mut Uart,
            &counters,
            Buffers {
                x: &mut memory.x,
                y: &mut memory.y,
                z: &mut memory.z,
            },
            &Settings {
                core: CORE,
                aes_instruction_traps: traps || !right,
                pbkdf2_iterations: PBKDF2_ITERATIONS,
                corrupt: CORRUPT,
            },
        );
        loop {
            core::hint::spin_loop();
        }
    }

    #[unsafe(no_mangle)]
    extern "C" fn firmware_trap(mcause: u32, mepc: u32, mtval: u32) -> ! {
        let _ = writeln!(
            Uart,
            "\nFAIL trap mcause={mcause:#x} mepc={mepc:#x} mtval={mtval:#x}\nDONE fail"
        );
        loop {
            core::hint::spin_loop();
        }
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let _ = writeln!(Uart, "\nFAIL panic {info}\nDONE fail");
        loop {
            core::hint::spin_loop();
        }
    }
}

/// On the host: the same run, without counters (every count is 0), the
/// AES instruction executed by its model.
#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    use aesd_firmware::params::{BYTES, CORE, CORRUPT, PBKDF2_ITERATIONS};
    use aesd_firmware::{Buffers, Core, Counters, Settings, run};
    use aesd_vexriscv::insn::Model;

    struct Stdout;
    impl core::fmt::Write for Stdout {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            print!("{text}");
            Ok(())
        }
    }
    let (mut x, mut y, mut z) = (vec![0u8; BYTES], vec![0u8; BYTES], vec![0u8; BYTES]);
    let ok = run::<_, Model>(
        &mut Stdout,
        &Counters::default,
        Buffers {
            x: &mut x,
            y: &mut y,
            z: &mut z,
        },
        &Settings {
            core: CORE,
            aes_instruction_traps: CORE == Core::Imac,
            pbkdf2_iterations: PBKDF2_ITERATIONS,
            corrupt: CORRUPT,
        },
    );
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
