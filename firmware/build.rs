//! Compiles OpenSSL's own AES and CBC code and turns the build-time settings
//! into constants (`$OUT_DIR/params.rs`):
//!
//! * `AESD_FW_CORE`: the core the firmware runs on, `imac` (default: plain
//!   rv32imac; the software workloads and OpenSSL) or `imac-aes` (rv32imac
//!   with VexRiscv's AesPlugin: the instruction path's checks and
//!   workloads).
//! * `AESD_FW_BYTES`: bytes per AES workload (default 1024; a positive
//!   multiple of 16).
//! * `AESD_FW_PBKDF2_ITERATIONS`: iterations of the PBKDF2 workload, 64
//!   (default) or 1000 (the two with a known answer in src/lib.rs).
//! * `AESD_FW_UART_BASE`: the LiteX UART's CSR base address (from the
//!   simulation's csr.json; default 0xf0001800, LiteX's sim SoC).
//! * `AESD_FW_CORRUPT`: the name of one check whose expected value is
//!   corrupted on purpose, to show that a wrong answer fails the run
//!   (empty: none).
//!
//! OpenSSL's files (`crypto/aes/aes_core.c`, `crypto/aes/aes_cbc.c`,
//! `crypto/modes/cbc128.c`) come from the `openssl-src` crate (nothing of
//! OpenSSL is in this repository); `c/openssl-config` stands in for the
//! headers OpenSSL's Configure would generate, and for the bare-metal
//! target `c/freestanding` for the few C library headers they include. They
//! are compiled `-O3` (OpenSSL's release flags for `linux32-riscv32`), with
//! the RISC-V GCC (`riscv64-unknown-elf-gcc -march=rv32imac -mabi=ilp32`
//! unless `CC_riscv32imac_unknown_none_elf` says otherwise), and the binary
//! is linked with link.x.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it"));
    let bare = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none");
    for file in ["c", "link.x"] {
        println!("cargo:rerun-if-changed={file}");
    }
    for var in [
        "AESD_FW_CORE",
        "AESD_FW_BYTES",
        "AESD_FW_PBKDF2_ITERATIONS",
        "AESD_FW_UART_BASE",
        "AESD_FW_CORRUPT",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let openssl = openssl_src::source_dir();
    let mut c = cc::Build::new();
    for file in [
        "crypto/aes/aes_core.c",
        "crypto/aes/aes_cbc.c",
        "crypto/modes/cbc128.c",
    ] {
        c.file(openssl.join(file));
    }
    c.include(manifest.join("c/openssl-config"))
        .include(openssl.join("include"))
        .include(&openssl)
        .define("NDEBUG", None)
        .warnings(false)
        // OpenSSL's release optimisation, whatever the Rust profile.
        .opt_level(3);
    if bare {
        let target = env::var("TARGET").expect("cargo sets it").replace('-', "_");
        if env::var_os(format!("CC_{target}")).is_none() && env::var_os("TARGET_CC").is_none() {
            c.compiler("riscv64-unknown-elf-gcc");
        }
        c.include(manifest.join("c/freestanding"))
            .flag("-march=rv32imac")
            .flag("-mabi=ilp32")
            .flag("-ffreestanding");
    }
    c.compile("openssl_aes");

    if bare {
        println!(
            "cargo:rustc-link-arg-bins=-T{}",
            manifest.join("link.x").display()
        );
    }

    let bytes = setting("AESD_FW_BYTES", 1024);
    assert!(
        bytes > 0 && bytes % 16 == 0,
        "AESD_FW_BYTES must be a positive multiple of 16, not {bytes}"
    );
    let iterations = setting("AESD_FW_PBKDF2_ITERATIONS", 64);
    assert!(
        iterations == 64 || iterations == 1000,
        "AESD_FW_PBKDF2_ITERATIONS must be 64 or 1000 (the known answers), not {iterations}"
    );
    let uart = setting("AESD_FW_UART_BASE", 0xf000_1800);
    let corrupt = env::var("AESD_FW_CORRUPT").unwrap_or_default();
    let core = match env::var("AESD_FW_CORE").as_deref() {
        Ok("") | Ok("imac") | Err(_) => "Imac",
        Ok("imac-aes") => "ImacAes",
        Ok(other) => panic!("AESD_FW_CORE must be imac or imac-aes, not {other}"),
    };
    fs::write(
        out.join("params.rs"),
        format!(
            "/// Bytes per AES workload.\npub const BYTES: usize = {bytes};\n\
             /// Iterations of the PBKDF2 workload.\npub const PBKDF2_ITERATIONS: u32 = {iterations};\n\
             /// The LiteX UART's CSR base address.\npub const UART_BASE: usize = {uart:#x};\n\
             /// The check whose expected value is corrupted on purpose (empty: none).\n\
             pub const CORRUPT: &str = {corrupt:?};\n\
             /// The core the firmware is built for.\n\
             pub const CORE: crate::Core = crate::Core::{core};\n"
        ),
    )
    .expect("write params.rs");
}

/// A numeric setting from the environment (decimal or 0x hex).
fn setting(var: &str, default: usize) -> usize {
    match env::var(var) {
        Ok(text) if !text.is_empty() => {
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => usize::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{var}={text} is not a number"))
        }
        _ => default,
    }
}
