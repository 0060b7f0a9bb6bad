//! Writes the riscv32 kernel of the 2-lane fixsliced CBC encryption
//! (`$OUT_DIR/fixslice_rv32.S`, included by `src/cbc/rv32.rs` on riscv32
//! only) and its record layout (`$OUT_DIR/fixslice_rv32_layout.rs`).
//!
//! Why generated: the kernel is about 930 instructions whose order and
//! registers follow from a few rules (VexRiscv's result latencies, 28
//! registers, a 4 KiB instruction cache): `kernel.rs` describes the
//! function, `program.rs` records its regions by running the crate's own
//! circuits (`src/fixslice/circuit.rs`) on recording values,
//! `schedule.rs` orders and allocates them. Generated on every target (it
//! takes a fraction of a second), so a host build already checks it.
//! `AESD_KERNEL_REPORT=1` prints its instructions per block pair as a
//! build warning.

#[path = "../src/fixslice/circuit.rs"]
mod circuit;
mod kernel;
mod program;
mod schedule;

use std::path::PathBuf;
use std::{env, fs};

fn main() {
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=src/fixslice/circuit.rs");
    println!("cargo:rerun-if-env-changed=AESD_KERNEL_REPORT");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (assembly, report) = kernel::assembly();
    fs::write(out.join("fixslice_rv32.S"), assembly).expect("write the kernel");
    fs::write(out.join("fixslice_rv32_layout.rs"), kernel::layout()).expect("write the layout");
    if env::var_os("AESD_KERNEL_REPORT").is_some() {
        println!(
            "cargo:warning=riscv32 kernel: {} instructions per block pair",
            report.per_block_pair
        );
    }
}
