//! The firmware's workloads and checks, independent of the machine: the
//! bare-metal binary (src/main.rs) runs them on the simulated VexRiscv with
//! its cycle and instruction counters; `cargo test` runs them on the host.
//!
//! Output, one line each (parsed by scripts/bench/vexriscv-cycles.sh):
//!
//! ```text
//! INFO core=<imac|imac-aes> bytes=<n> pbkdf2_iterations=<k> lanes=<LANES>
//! CHECK <name> ok                         (or FAIL check=<name> got=<hex> want=<hex>)
//! RESULT workload=<name> bytes=<n> cycles=<c> instret=<i> [iterations=<k>]
//! DONE ok                                 (or DONE fail: a check failed)
//! ```
//!
//! Every output is checked: the ciphers against FIPS-197 C.3 and NIST SP
//! 800-38A F.2.5/F.2.6, PBKDF2 against RFC 7914 and a known answer for the
//! workload's own parameters, and each bulk result against an independent
//! implementation (aesd's AES, in software or on the AES instruction,
//! against OpenSSL's own `aes_core.c`; decryption against the original
//! plaintext).
//!
//! Which workloads run depends on the core the firmware is built for
//! ([`Core`]): on the plain `imac` core, aesd's software AES (1 and 2
//! lanes), the `aes` crate's decryption, OpenSSL's C AES and PBKDF2, and a
//! check that the AES instruction traps there; on `imac-aes` (VexRiscv with
//! the AesPlugin), the instruction's probe and self-test and aesd's
//! instruction-path CBC kernels (1 and 2 chains, decryption).
#![cfg_attr(not(test), no_std)]

use core::fmt::{self, Write};

use aesd_cipher::cbc::{self as lanes, CbcLane};
use aesd_cipher::{Block, KeySchedule};
use aesd_vexriscv::AesInstruction;
use cbc::cipher::{Array, BlockModeDecrypt, KeyIvInit};

/// Build-time settings (build.rs).
pub mod params {
    include!(concat!(env!("OUT_DIR"), "/params.rs"));
}
mod instruction;
pub mod openssl;

/// The core the firmware is built for (`AESD_FW_CORE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    /// VexRiscv "imac" as LiteX's pythondata package ships it: no AES
    /// instruction.
    Imac,
    /// The same configuration with VexRiscv's AesPlugin.
    ImacAes,
}

impl Core {
    /// The name the benchmark's JSON rows use.
    pub fn name(self) -> &'static str {
        match self {
            Core::Imac => "imac",
            Core::ImacAes => "imac-aes",
        }
    }
}

/// The machine's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Clock cycles (`mcycle`).
    pub cycles: u64,
    /// Retired instructions (`minstret`).
    pub instret: u64,
}

/// What a run does besides the buffer size.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// The core the firmware is built for.
    pub core: Core,
    /// Whether the AES instruction trapped (illegal instruction) when the
    /// machine probed it with a trap handler in place.
    pub aes_instruction_traps: bool,
    /// Iterations of the PBKDF2 workload: 64 or 1000.
    pub pbkdf2_iterations: u32,
    /// The check whose expected value is corrupted on purpose ("": none).
    pub corrupt: &'a str,
}

/// Three buffers of the same length (a multiple of 16 bytes), best aligned
/// to 4 bytes as aesd's own buffers are (its word path).
pub struct Buffers<'a> {
    /// The first chain's data.
    pub x: &'a mut [u8],
    /// The second chain's data.
    pub y: &'a mut [u8],
    /// The reference implementation's data.
    pub z: &'a mut [u8],
}

// FIPS-197 appendix C.3 (AES-256).
const FIPS_KEY: [u8; 32] =
    hex32(*b"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
const FIPS_PLAIN: Block = hex16(*b"00112233445566778899aabbccddeeff");
const FIPS_CIPHER: Block = hex16(*b"8ea2b7ca516745bfeafc49904b496089");

// NIST SP 800-38A F.2.5 / F.2.6 (CBC-AES256).
const SP_KEY: [u8; 32] =
    hex32(*b"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
const SP_IV: Block = hex16(*b"000102030405060708090a0b0c0d0e0f");
const SP_PLAIN: [Block; 4] = [
    hex16(*b"6bc1bee22e409f96e93d7e117393172a"),
    hex16(*b"ae2d8a571e03ac9c9eb76fac45af8e51"),
    hex16(*b"30c81c46a35ce411e5fbc1191a0a52ef"),
    hex16(*b"f69f2445df4f9b17ad2b417be66c3710"),
];
const SP_CIPHER: [Block; 4] = [
    hex16(*b"f58c4c04d6e5f1ba779eabfb5f7bfbd6"),
    hex16(*b"9cfc4e967edb808d679f777bc6702c7d"),
    hex16(*b"39f23369a9d9bacfa530e26304231461"),
    hex16(*b"b2eb05e2c39be9fcda6c19078c6a9d1b"),
];

// RFC 7914 section 11: PBKDF2-HMAC-SHA256, P = "passwd", S = "salt", c = 1.
const RFC7914_DK: [u8; 64] = [
    0x55, 0xac, 0x04, 0x6e, 0x56, 0xe3, 0x08, 0x9f, 0xec, 0x16, 0x91, 0xc2, 0x25, 0x44, 0xb6, 0x05,
    0xf9, 0x41, 0x85, 0x21, 0x6d, 0xde, 0x04, 0x65, 0xe6, 0x8b, 0x9d, 0x57, 0xc2, 0x0d, 0xac, 0xbc,
    0x49, 0xca, 0x9c, 0xcc, 0xf1, 0x79, 0xb6, 0x45, 0x99, 0x16, 0x64, 0xb3, 0x9d, 0x77, 0xef, 0x31,
    0x7c, 0x71, 0xb8, 0x45, 0xb1, 0xe3, 0x0b, 0xd5, 0x09, 0x11, 0x20, 0x41, 0xd3, 0xa1, 0x97, 0x83,
];

// The PBKDF2 workload: 48 bytes (key and IV, as `openssl enc -pbkdf2`
// derives them), answers from Python's hashlib.pbkdf2_hmac.
const PBKDF2_PASSWORD: &[u8] = b"aesd firmware";
const PBKDF2_SALT: &[u8; 8] = b"saltsalt";
const PBKDF2_64: [u8; 48] = hex48(
    *b"80178fd083c3c56163dcdf2f208a28bfcd3fffa897a0f74cd211d07dc22bf57ca1b8f48273c371ea11b619de12f12740",
);
const PBKDF2_1000: [u8; 48] = hex48(
    *b"9f9608cff2bfd7d3373edcff348778977fc3272252a6a4380741720c8987e4a9b3d4402a44b4a7603dcff0078e5662c1",
);

// The bulk workloads' keys, IVs and plaintext seeds (arbitrary).
const KEY1: [u8; 32] = *b"aesd cycles per byte: first key!";
const KEY2: [u8; 32] = *b"aesd cycles per byte: second key";
const IV1: Block = *b"first chain's iv";
const IV2: Block = *b"second chain iv.";
const SEED1: u32 = 0x1234_5678;
const SEED2: u32 = 0x9abc_def1;

const fn nibble(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("not a hex digit"),
    }
}

const fn hex<const N: usize, const H: usize>(text: [u8; H]) -> [u8; N] {
    assert!(H == 2 * N);
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = (nibble(text[2 * i]) << 4) | nibble(text[2 * i + 1]);
        i += 1;
    }
    out
}

const fn hex16(text: [u8; 32]) -> [u8; 16] {
    hex(text)
}

const fn hex32(text: [u8; 64]) -> [u8; 32] {
    hex(text)
}

const fn hex48(text: [u8; 96]) -> [u8; 48] {
    hex(text)
}

/// Fills `buf` with a fixed pseudo-random sequence (xorshift32).
pub fn fill(buf: &mut [u8], seed: u32) {
    let mut state = seed;
    for chunk in buf.chunks_mut(4) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Runs `work` between two readings of the counters; returns the difference.
fn measure(counters: &dyn Fn() -> Counters, work: impl FnOnce()) -> Counters {
    let before = counters();
    work();
    let after = counters();
    Counters {
        cycles: after.cycles.wrapping_sub(before.cycles),
        instret: after.instret.wrapping_sub(before.instret),
    }
}

/// Writes the output lines and keeps track of the checks.
struct Report<'a, W: Write> {
    out: &'a mut W,
    corrupt: &'a str,
    corrupted: bool,
    ok: bool,
}

impl<W: Write> Report<'_, W> {
    fn line(&mut self, args: fmt::Arguments<'_>) {
        // A console that fails cannot be reported on anyway.
        let _ = self.out.write_fmt(args);
        let _ = self.out.write_char('\n');
    }

    /// Compares `got` with `want`; with `name` the corrupted check, with
    /// `want` whose first byte is flipped.
    fn check(&mut self, name: &str, got: &[u8], want: &[u8]) {
        let corrupted = name == self.corrupt;
        self.corrupted |= corrupted;
        let first_ok = match (got.first(), want.first()) {
            (Some(g), Some(w)) => *g == if corrupted { *w ^ 1 } else { *w },
            _ => !corrupted,
        };
        if got.len() == want.len()
            && first_ok
            && got[1.min(got.len())..] == want[1.min(want.len())..]
        {
            self.line(format_args!("CHECK {name} ok"));
        } else {
            self.ok = false;
            self.line(format_args!(
                "FAIL check={name} got={} want={}{}",
                Hex(got, false),
                Hex(want, corrupted),
                if corrupted {
                    " (expected value corrupted on purpose)"
                } else {
                    ""
                }
            ));
        }
    }

    fn result(
        &mut self,
        workload: &str,
        bytes: usize,
        counted: Counters,
        extra: fmt::Arguments<'_>,
    ) {
        self.line(format_args!(
            "RESULT workload={workload} bytes={bytes} cycles={} instret={}{extra}",
            counted.cycles, counted.instret
        ));
    }
}

/// The first 16 bytes in hex (then "..."); with `.1`, the first byte
/// flipped as a corrupted expected value is.
struct Hex<'a>(&'a [u8], bool);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().take(16).enumerate() {
            let byte = if i == 0 && self.1 { byte ^ 1 } else { *byte };
            write!(f, "{byte:02x}")?;
        }
        if self.0.len() > 16 {
            f.write_str("...")?;
        }
        Ok(())
    }
}

fn decrypt(key: &[u8; 32], iv: &Block, data: &mut [u8]) {
    // As aesd-server's DecryptChain::Soft: the `aes` crate through `cbc`.
    let mut decryptor = cbc::Decryptor::<aes::Aes256>::new(key.into(), iv.into());
    let (blocks, rest) = Array::slice_as_chunks_mut(data);
    debug_assert!(rest.is_empty());
    decryptor.decrypt_blocks(blocks);
}

/// Runs every check and workload of the core, writing the lines to `out`;
/// true if every check passed. `I` executes the AES instruction (the CPU on
/// the `imac-aes` core, the model on the host).
pub fn run<W: Write, I: AesInstruction>(
    out: &mut W,
    counters: &dyn Fn() -> Counters,
    buffers: Buffers<'_>,
    settings: &Settings<'_>,
) -> bool {
    let mut report = Report {
        out,
        corrupt: settings.corrupt,
        corrupted: false,
        ok: true,
    };
    let n = buffers.x.len();
    assert!(
        n > 0 && n % 16 == 0 && buffers.y.len() == n && buffers.z.len() == n,
        "three buffers of the same whole number of blocks"
    );
    report.line(format_args!(
        "INFO core={} bytes={n} pbkdf2_iterations={} lanes={}",
        settings.core.name(),
        settings.pbkdf2_iterations,
        aesd_cipher::LANES
    ));
    match settings.core {
        Core::Imac => {
            // The instruction must trap on a core without the plugin: the
            // probe tells the cores apart.
            report.check(
                "probe-imac-traps",
                &[u8::from(settings.aes_instruction_traps)],
                &[1],
            );
            known_answers(&mut report);
            workloads(&mut report, counters, buffers, settings);
        }
        Core::ImacAes => {
            report.check(
                "probe-aes-runs",
                &[u8::from(settings.aes_instruction_traps)],
                &[0],
            );
            // Executing the instruction where it traps would end the run.
            if !settings.aes_instruction_traps {
                instruction::known_answers::<W, I>(&mut report);
                instruction::workloads::<W, I>(&mut report, counters, buffers);
            }
        }
    }
    if !settings.corrupt.is_empty() && !report.corrupted {
        report.ok = false;
        report.line(format_args!(
            "FAIL corrupt={}: no check of that name",
            settings.corrupt
        ));
    }
    let ok = report.ok;
    report.line(format_args!("DONE {}", if ok { "ok" } else { "fail" }));
    ok
}

fn known_answers<W: Write>(report: &mut Report<'_, W>) {
    let fips = KeySchedule::new(&FIPS_KEY);
    let sp = KeySchedule::new(&SP_KEY);

    // One block with a zero IV is one AES encryption.
    let mut block = FIPS_PLAIN;
    lanes::encrypt(&fips, &mut [0; 16], &mut block);
    report.check("fips197-aesd", &block, &FIPS_CIPHER);

    // Two lanes, two keys: the FIPS block and SP 800-38A's first block.
    let (mut a, mut b) = (FIPS_PLAIN, SP_PLAIN[0]);
    let (mut iv_a, mut iv_b) = ([0; 16], SP_IV);
    lanes::encrypt_lanes(&mut [
        CbcLane {
            key: &fips,
            iv: &mut iv_a,
            data: &mut a,
        },
        CbcLane {
            key: &sp,
            iv: &mut iv_b,
            data: &mut b,
        },
    ]);
    report.check("fips197-aesd-lane0", &a, &FIPS_CIPHER);
    report.check("sp800-38a-aesd-lane1", &b, &SP_CIPHER[0]);

    let mut block = [0; 16];
    openssl::Key::encrypt(&FIPS_KEY).encrypt_block(&FIPS_PLAIN, &mut block);
    report.check("fips197-openssl", &block, &FIPS_CIPHER);

    let mut block = FIPS_CIPHER;
    decrypt(&FIPS_KEY, &[0; 16], &mut block);
    report.check("fips197-aes-decrypt", &block, &FIPS_PLAIN);

    let plain: [u8; 64] = SP_PLAIN.as_flattened().try_into().expect("64 bytes");
    let cipher: [u8; 64] = SP_CIPHER.as_flattened().try_into().expect("64 bytes");
    let mut data = plain;
    let mut iv = SP_IV;
    lanes::encrypt(&sp, &mut iv, &mut data);
    report.check("sp800-38a-aesd", &data, &cipher);
    report.check("sp800-38a-aesd-iv", &iv, &SP_CIPHER[3]);

    let mut data = plain;
    let mut iv = SP_IV;
    openssl::Key::encrypt(&SP_KEY).cbc(&mut iv, &mut data);
    report.check("sp800-38a-openssl", &data, &cipher);
    report.check("sp800-38a-openssl-iv", &iv, &SP_CIPHER[3]);

    let mut data = cipher;
    let mut iv = SP_IV;
    openssl::Key::decrypt(&SP_KEY).cbc(&mut iv, &mut data);
    report.check("sp800-38a-openssl-decrypt", &data, &plain);

    let mut data = cipher;
    decrypt(&SP_KEY, &SP_IV, &mut data);
    report.check("sp800-38a-aes-decrypt", &data, &plain);

    let mut dk = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(b"passwd", b"salt", 1, &mut dk);
    report.check("rfc7914-pbkdf2", &dk, &RFC7914_DK);
}

fn workloads<W: Write>(
    report: &mut Report<'_, W>,
    counters: &dyn Fn() -> Counters,
    buffers: Buffers<'_>,
    settings: &Settings<'_>,
) {
    let Buffers { x, y, z } = buffers;
    let n = x.len();
    let k1 = KeySchedule::new(&KEY1);
    let k2 = KeySchedule::new(&KEY2);
    let o1 = openssl::Key::encrypt(&KEY1);
    let o2 = openssl::Key::encrypt(&KEY2);

    // aesd's CBC encryption, one chain (one of the fixsliced AES's lanes busy).
    fill(x, SEED1);
    let mut iv_x = IV1;
    let counted = measure(counters, || lanes::encrypt(&k1, &mut iv_x, x));
    report.result("aesd-encrypt-1lane", n, counted, format_args!(""));

    // OpenSSL's own AES-256-CBC (AES_cbc_encrypt) on the same data: the
    // same ciphertext.
    fill(z, SEED1);
    let mut iv_z = IV1;
    let counted = measure(counters, || o1.cbc(&mut iv_z, z));
    report.result("openssl-aes-cbc-encrypt", n, counted, format_args!(""));
    report.check("bulk-1lane-vs-openssl", x, z);
    report.check("bulk-1lane-vs-openssl-iv", &iv_x, &iv_z);

    // OpenSSL's decryption of it (AES_set_decrypt_key, AES_cbc_encrypt).
    let d1 = openssl::Key::decrypt(&KEY1);
    let mut iv_z = IV1;
    let counted = measure(counters, || d1.cbc(&mut iv_z, z));
    report.result("openssl-aes-cbc-decrypt", n, counted, format_args!(""));
    fill(y, SEED1);
    report.check("bulk-openssl-decrypt-roundtrip", z, y);

    // Two chains with different keys together (aesd's lane engine).
    fill(x, SEED1);
    fill(y, SEED2);
    let (mut iv_x, mut iv_y) = (IV1, IV2);
    let counted = measure(counters, || {
        lanes::encrypt_lanes(&mut [
            CbcLane {
                key: &k1,
                iv: &mut iv_x,
                data: x,
            },
            CbcLane {
                key: &k2,
                iv: &mut iv_y,
                data: y,
            },
        ])
    });
    report.result("aesd-encrypt-2lanes", 2 * n, counted, format_args!(""));
    fill(z, SEED1);
    let mut iv_z = IV1;
    o1.cbc(&mut iv_z, z);
    report.check("bulk-2lanes-lane0-vs-openssl", x, z);
    fill(z, SEED2);
    let mut iv_z = IV2;
    o2.cbc(&mut iv_z, z);
    report.check("bulk-2lanes-lane1-vs-openssl", y, z);
    report.check("bulk-2lanes-lane1-vs-openssl-iv", &iv_y, &iv_z);

    // CBC decryption as aesd-server does it in software (the `aes` crate).
    let counted = measure(counters, || decrypt(&KEY2, &IV2, y));
    report.result("aes-crate-decrypt", n, counted, format_args!(""));
    fill(z, SEED2);
    report.check("bulk-decrypt-roundtrip", y, z);

    // PBKDF2-HMAC-SHA256: 48 bytes (two blocks) per `openssl enc -pbkdf2`.
    let iterations = settings.pbkdf2_iterations;
    let mut dk = [0u8; 48];
    let counted = measure(counters, || {
        pbkdf2::pbkdf2_hmac::<sha2::Sha256>(PBKDF2_PASSWORD, PBKDF2_SALT, iterations, &mut dk)
    });
    report.result(
        "pbkdf2-hmac-sha256",
        dk.len(),
        counted,
        format_args!(" iterations={iterations}"),
    );
    let want = match iterations {
        64 => Some(&PBKDF2_64),
        1000 => Some(&PBKDF2_1000),
        _ => None,
    };
    match want {
        Some(want) => report.check("pbkdf2-workload", &dk, want),
        None => {
            report.ok = false;
            report.line(format_args!(
                "FAIL check=pbkdf2-workload no known answer for {iterations} iterations"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_vexriscv::insn::Model;

    /// The run on the host: the instruction executed by its model; the
    /// instruction traps exactly on the plain core (what the bare-metal
    /// probe finds on the RTL).
    fn run_on_host(bytes: usize, core: Core, settings: &Settings<'_>) -> (bool, String) {
        run_with_probe(bytes, core, core == Core::Imac, settings)
    }

    /// The run on the host with what the probe found given.
    fn run_with_probe(
        bytes: usize,
        core: Core,
        traps: bool,
        settings: &Settings<'_>,
    ) -> (bool, String) {
        let (mut x, mut y, mut z) = (vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]);
        let mut out = String::new();
        let ok = run::<_, Model>(
            &mut out,
            &Counters::default,
            Buffers {
                x: &mut x,
                y: &mut y,
                z: &mut z,
            },
            &Settings {
                core,
                aes_instruction_traps: traps,
                ..*settings
            },
        );
        (ok, out)
    }

    fn settings(iterations: u32, corrupt: &str) -> Settings<'_> {
        Settings {
            core: Core::Imac,
            aes_instruction_traps: true,
            pbkdf2_iterations: iterations,
            corrupt,
        }
    }

    #[test]
    fn every_check_passes_and_every_workload_reports() {
        for iterations in [64, 1000] {
            let (ok, out) = run_on_host(1024, Core::Imac, &settings(iterations, ""));
            assert!(ok, "{out}");
            assert!(!out.contains("FAIL"), "{out}");
            assert!(out.ends_with("DONE ok\n"), "{out}");
            for workload in [
                "aesd-encrypt-1lane bytes=1024",
                "openssl-aes-cbc-encrypt bytes=1024",
                "openssl-aes-cbc-decrypt bytes=1024",
                "aesd-encrypt-2lanes bytes=2048",
                "aes-crate-decrypt bytes=1024",
                "pbkdf2-hmac-sha256 bytes=48",
            ] {
                assert!(
                    out.contains(&format!("RESULT workload={workload} ")),
                    "{workload}: {out}"
                );
            }
            assert!(!out.contains("insn"), "no instruction workload: {out}");
        }
    }

    #[test]
    fn the_aes_core_runs_the_instruction_path_and_checks_it() {
        let (ok, out) = run_on_host(1024, Core::ImacAes, &settings(64, ""));
        assert!(ok, "{out}");
        assert!(out.starts_with("INFO core=imac-aes "), "{out}");
        for check in [
            "probe-aes-runs",
            "insn-self-test",
            "fips197-insn",
            "sp800-38a-insn-decrypt",
            "bulk-insn-2chains-chain1-vs-openssl",
            "bulk-insn-decrypt-roundtrip",
        ] {
            assert!(out.contains(&format!("CHECK {check} ok")), "{check}: {out}");
        }
        for workload in [
            "aesd-insn-encrypt-1chain bytes=1024",
            "aesd-insn-encrypt-2chains bytes=2048",
            "aesd-insn-decrypt bytes=1024",
        ] {
            assert!(
                out.contains(&format!("RESULT workload={workload} ")),
                "{workload}: {out}"
            );
        }
    }

    #[test]
    fn a_probe_that_disagrees_with_the_core_fails_the_run() {
        // The plain core where the instruction ran, the AES core where it
        // trapped: both are wrong builds or wrong netlists.
        for (core, traps, check) in [
            (Core::Imac, false, "probe-imac-traps"),
            (Core::ImacAes, true, "probe-aes-runs"),
        ] {
            let (ok, out) = run_with_probe(64, core, traps, &settings(64, ""));
            assert!(!ok, "{out}");
            assert!(out.contains(&format!("FAIL check={check} ")), "{out}");
        }
    }

    #[test]
    fn a_corrupted_expected_value_fails_the_run() {
        for (core, name) in [
            (Core::Imac, "fips197-aesd"),
            (Core::Imac, "fips197-openssl"),
            (Core::Imac, "bulk-2lanes-lane0-vs-openssl"),
            (Core::Imac, "pbkdf2-workload"),
            (Core::ImacAes, "fips197-insn"),
            (Core::ImacAes, "bulk-insn-1chain-vs-openssl"),
        ] {
            let (ok, out) = run_on_host(256, core, &settings(64, name));
            assert!(!ok, "{name}: {out}");
            assert!(
                out.contains(&format!("FAIL check={name} ")),
                "{name}: {out}"
            );
            assert_eq!(
                out.matches("FAIL").count(),
                1,
                "{name}: only that check: {out}"
            );
            assert!(out.ends_with("DONE fail\n"), "{out}");
        }
    }

    #[test]
    fn corrupting_a_check_that_does_not_exist_fails_too() {
        let (ok, out) = run_on_host(256, Core::Imac, &settings(64, "no-such-check"));
        assert!(!ok);
        assert!(out.contains("FAIL corrupt=no-such-check"), "{out}");
    }

    #[test]
    fn openssl_matches_the_aes_crate_on_random_keys_and_lengths() {
        use cbc::cipher::BlockModeEncrypt;
        for round in 0..50u32 {
            let mut key = [0u8; 32];
            let mut iv = [0u8; 16];
            fill(&mut key, round + 1);
            fill(&mut iv, round + 1000);
            let len = 16 * (round as usize % 9);
            let mut data = vec![0u8; len];
            fill(&mut data, round + 5000);
            let plain = data.clone();
            let mut expected = data.clone();
            let mut reference = cbc::Encryptor::<aes::Aes256>::new(&key.into(), &iv.into());
            let (blocks, _) = Array::slice_as_chunks_mut(&mut expected);
            reference.encrypt_blocks(blocks);
            let mut chain = iv;
            openssl::Key::encrypt(&key).cbc(&mut chain, &mut data);
            assert_eq!(data, expected, "round {round}");
            if len > 0 {
                assert_eq!(
                    chain[..],
                    expected[len - 16..],
                    "round {round}: chaining value"
                );
            }
            let mut chain = iv;
            openssl::Key::decrypt(&key).cbc(&mut chain, &mut data);
            assert_eq!(data, plain, "round {round}: decryption");
        }
    }
}
