//! A fixed workload on the AES instruction path, for counting instructions
//! under qemu-user with the emulator (scripts/bench/vexriscv-icount.sh).
//!
//! `vexriscv_count WORKLOAD N`:
//! * `calibrate N`, `calibrate2 N`: a loop of N iterations with one, and
//!   with two, AES instructions (their difference is what one trapped and
//!   emulated instruction costs the count);
//! * `encrypt N`: CBC encryption of one chain of N bytes;
//! * `encrypt2 N`: two chains of N bytes each, interleaved (per byte of both);
//! * `decrypt N`: CBC decryption of N bytes (two blocks interleaved).
//!
//! It prints the time counter's ticks the workload took on stderr (`ticks
//! N`, read with `rdtime` before and after it, the buffers already written):
//! on the simulated board (soc/sim/, where the counter ticks once per clock
//! cycle and the instruction is the core's own) the workload's cycles in user
//! space; under qemu-user the host's ticks, which mean nothing.
//!
//! riscv32 Linux with the `emulate` feature only.

#[cfg(all(target_arch = "riscv32", target_os = "linux", feature = "emulate"))]
fn main() {
    use aesd_vexriscv::aes::{Aes256Key, CbcLane, cbc_decrypt, cbc_encrypt_lanes};
    use aesd_vexriscv::hardware::Hardware;
    use aesd_vexriscv::insn::AesInstruction;
    use aesd_vexriscv::sigill::install_emulator;

    let args: Vec<String> = std::env::args().collect();
    let (Some(workload), Some(n)) = (
        args.get(1),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: vexriscv_count calibrate|encrypt|encrypt2|decrypt N");
        std::process::exit(2);
    };
    assert!(install_emulator(), "SIGILL handler");
    let key = Aes256Key::new::<Hardware>(&[7; 32]);
    let other = Aes256Key::new::<Hardware>(&[9; 32]);
    let mut a = vec![0x5au8; n - n % 16];
    let mut b = a.clone();
    let (mut iv_a, mut iv_b) = ([1u8; 16], [2u8; 16]);
    let mut sink = 0u32;
    let start = time_counter();
    match workload.as_str() {
        "calibrate" => {
            for i in 0..n {
                sink = Hardware::enc::<0>(sink, i as u32);
            }
        }
        "calibrate2" => {
            for i in 0..n {
                sink = Hardware::enc::<0>(sink, i as u32);
                sink = Hardware::enc::<1>(sink, i as u32);
            }
        }
        "encrypt" => cbc_encrypt_lanes::<Hardware>(&mut [CbcLane {
            key: &key,
            iv: &mut iv_a,
            data: &mut a,
        }]),
        "encrypt2" => cbc_encrypt_lanes::<Hardware>(&mut [
            CbcLane {
                key: &key,
                iv: &mut iv_a,
                data: &mut a,
            },
            CbcLane {
                key: &other,
                iv: &mut iv_b,
                data: &mut b,
            },
        ]),
        "decrypt" => cbc_decrypt::<Hardware>(&key, &mut iv_a, &mut a),
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2);
        }
    }
    let ticks = time_counter() - start;
    // Keep the results alive.
    println!("{:08x} {:02x}{:02x}", sink, iv_a[0], iv_b[0]);
    eprintln!("ticks {ticks}");
}

/// The `time` counter (`rdtime`/`rdtimeh`, read again until its high half
/// holds still).
#[cfg(all(target_arch = "riscv32", target_os = "linux", feature = "emulate"))]
#[allow(unsafe_code)] // two CSR reads, as the crate's instruction wrappers do
fn time_counter() -> u64 {
    loop {
        let (high, low, again): (u32, u32, u32);
        // SAFETY: reads of the user-readable time CSR; no memory is touched.
        unsafe {
            core::arch::asm!("rdtimeh {0}", "rdtime {1}", "rdtimeh {2}",
                out(reg) high, out(reg) low, out(reg) again, options(nomem, nostack));
        }
        if high == again {
            return (u64::from(high) << 32) | u64::from(low);
        }
    }
}

#[cfg(not(all(target_arch = "riscv32", target_os = "linux", feature = "emulate")))]
fn main() {
    eprintln!("vexriscv_count runs on riscv32 Linux with the emulate feature");
    std::process::exit(2);
}
