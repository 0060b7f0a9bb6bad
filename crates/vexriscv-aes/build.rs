//! Writes the CBC kernels of the AES instruction path as riscv32 assembly
//! (`$OUT_DIR/kernels.S`, included by `src/hardware.rs` on riscv32 only).
//!
//! Why generated: a kernel is 14 unrolled rounds of 20 to 36 instructions
//! whose registers, byte selects and ShiftRows columns follow from a few
//! rules; writing them out by hand would hide those rules in 700 lines.
//!
//! The words a kernel keeps in registers are AES columns, little-endian
//! (row `r` in byte `r`): what plain `lw`/`sw` give for the bytes in
//! memory, and the layout the plugin's tables have (the plugin version real
//! cores have: custom-0, little-endian; `src/model.rs`). So the data and
//! the round keys are used as loaded, with no byte shuffling: a round is
//! 4 round-key loads and 16 AES instructions. Columns are interleaved
//! within a round, so no instruction needs the result of the one before
//! it (the plugin writes its result late, from the memory stage).

//!
//! The same kernels are written twice: for VexRiscv's AesPlugin (custom-0,
//! `.insn r 0x0b, ...`) and for the ratified scalar AES instructions of
//! Zkne/Zknd (`aes32esmi`, `aes32esi`, `aes32dsmi`, `aes32dsi`, assembled
//! by LLVM with `.option arch, +zkne, +zknd`). Both compute the same thing
//! for a byte select: a row's contribution to a little-endian column.

use std::path::PathBuf;
use std::{env, fs};

/// Appends one line of assembly to a `String`.
macro_rules! emit {
    ($out:expr, $($format:tt)*) => {{
        $out.push_str(&format!($($format)*));
        $out.push('\n');
    }};
}

/// AES-256 rounds.
const ROUNDS: usize = 14;

/// The state's registers: a round reads one set and writes the other, so
/// round 1 reads `SET_A` and round 14 writes it. Between blocks `SET_B`
/// is free for loading the next block.
const SET_A: [&str; 4] = ["a4", "a5", "a6", "a7"];
const SET_B: [&str; 4] = ["t0", "t1", "t2", "t3"];
/// Round key 0, kept in callee-saved registers for the whole call.
const KEY0: [&str; 4] = ["s10", "s11", "t4", "t5"];

/// Which instruction set a kernel is written for.
#[derive(Clone, Copy)]
enum Isa {
    /// VexRiscv's AesPlugin: custom-0, funct3 0, funct7 = byte select << 3
    /// | last round << 1 | decrypt.
    VexRiscv,
    /// Zkne (encryption) and Zknd (decryption), RV32 scalar forms.
    Zkne,
}

impl Isa {
    /// The symbol prefix of the kernels.
    fn prefix(self) -> &'static str {
        match self {
            Isa::VexRiscv => "aesd_vexriscv",
            Isa::Zkne => "aesd_zkne",
        }
    }

    /// One AES instruction: `rd ^= contribution of byte `byte_select` of
    /// `rs2``.
    fn instruction(
        self,
        out: &mut String,
        rd: &str,
        rs2: &str,
        byte_select: usize,
        last: bool,
        decrypt: bool,
    ) {
        match self {
            Isa::VexRiscv => {
                let funct7 = byte_select << 3 | usize::from(last) << 1 | usize::from(decrypt);
                emit!(out, "    .insn r 0x0b, 0, {funct7}, {rd}, {rd}, {rs2}");
            }
            Isa::Zkne => {
                let mnemonic = match (decrypt, last) {
                    (false, false) => "aes32esmi",
                    (false, true) => "aes32esi",
                    (true, false) => "aes32dsmi",
                    (true, true) => "aes32dsi",
                };
                emit!(out, "    {mnemonic} {rd}, {rd}, {rs2}, {byte_select}");
            }
        }
    }
}

/// The 14 rounds: input (round key 0 already added) in `SET_A`, output in
/// `SET_A`; `a0` points at the schedule.
fn rounds(out: &mut String, isa: Isa, decrypt: bool) {
    for round in 1..=ROUNDS {
        let (from, to) = if round % 2 == 1 {
            (SET_A, SET_B)
        } else {
            (SET_B, SET_A)
        };
        let last = round == ROUNDS;
        emit!(out, "    # round {round}");
        for (c, register) in to.iter().enumerate() {
            emit!(out, "    lw {register}, {}(a0)", 16 * round + 4 * c);
        }
        for row in 0..4 {
            for (c, register) in to.iter().enumerate() {
                // ShiftRows takes row `row` of column c + row; InvShiftRows
                // of column c - row. Byte select `row` reads that row.
                let column = if decrypt {
                    (c + 4 - row) % 4
                } else {
                    (c + row) % 4
                };
                isa.instruction(out, register, from[column], row, last, decrypt);
            }
        }
    }
}

fn function_start(out: &mut String, name: &str, doc: &str) {
    emit!(out, "# {doc}");
    emit!(out, ".section .text.{name},\"ax\",@progbits");
    emit!(out, ".globl {name}");
    emit!(out, ".p2align 2");
    emit!(out, ".type {name},@function");
    emit!(out, "{name}:");
}

fn function_end(out: &mut String, name: &str) {
    emit!(out, ".size {name}, .-{name}");
}

/// Saves the callee-saved registers among `registers` on the stack.
fn save(out: &mut String, registers: &[&str]) {
    let saved: Vec<&&str> = registers.iter().filter(|r| r.starts_with('s')).collect();
    let frame = (4 * saved.len()).div_ceil(16) * 16;
    emit!(out, "    addi sp, sp, -{frame}");
    for (i, register) in saved.iter().enumerate() {
        emit!(out, "    sw {register}, {}(sp)", 4 * i);
    }
}

/// Restores what [`save`] saved.
fn restore(out: &mut String, registers: &[&str]) {
    let saved: Vec<&&str> = registers.iter().filter(|r| r.starts_with('s')).collect();
    let frame = (4 * saved.len()).div_ceil(16) * 16;
    for (i, register) in saved.iter().enumerate() {
        emit!(out, "    lw {register}, {}(sp)", 4 * i);
    }
    emit!(out, "    addi sp, sp, {frame}");
}

/// `<prefix>_cbc_encrypt(schedule a0, chain a1, data a2, blocks a3)`:
/// whole blocks in place; the chain (4 little-endian words) is read at the
/// start and written back at the end. Round key 0 stays in registers; a
/// block's words are loaded together before they are used (no load-use
/// stall).
fn encrypt(out: &mut String, isa: Isa) {
    let name = format!("{}_cbc_encrypt", isa.prefix());
    function_start(out, &name, "CBC encryption, one chain, in place.");
    emit!(out, "    beqz a3, 2f");
    save(out, &KEY0);
    emit!(out, "    slli a3, a3, 4");
    emit!(out, "    add a3, a3, a2");
    for (c, register) in KEY0.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a0)", 4 * c);
    }
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a1)", 4 * c);
    }
    emit!(out, "1:");
    // State = plaintext ^ chain ^ round key 0.
    for (c, register) in SET_B.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a2)", 4 * c);
    }
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    xor {register}, {register}, {}", KEY0[c]);
    }
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    xor {register}, {register}, {}", SET_B[c]);
    }
    rounds(out, isa, false);
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    sw {register}, {}(a2)", 4 * c);
    }
    emit!(out, "    addi a2, a2, 16");
    emit!(out, "    bltu a2, a3, 1b");
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    sw {register}, {}(a1)", 4 * c);
    }
    restore(out, &KEY0);
    emit!(out, "2:");
    emit!(out, "    ret");
    function_end(out, &name);
}

/// `<prefix>_cbc_decrypt(schedule a0, chain a1, data a2, blocks a3)`: as
/// [`encrypt`], with the decryption schedule. The previous and the current
/// ciphertext block live in callee-saved registers s2..s9, round key 0 in
/// [`KEY0`].
fn decrypt(out: &mut String, isa: Isa) {
    let name = format!("{}_cbc_decrypt", isa.prefix());
    let previous = ["s2", "s3", "s4", "s5"];
    let current = ["s6", "s7", "s8", "s9"];
    let kept: Vec<&str> = previous
        .iter()
        .chain(&current)
        .chain(&KEY0)
        .copied()
        .collect();
    function_start(out, &name, "CBC decryption, one chain, in place.");
    emit!(out, "    beqz a3, 2f");
    save(out, &kept);
    emit!(out, "    slli a3, a3, 4");
    emit!(out, "    add a3, a3, a2");
    for (c, register) in KEY0.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a0)", 4 * c);
    }
    for (c, register) in previous.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a1)", 4 * c);
    }
    emit!(out, "1:");
    // State = ciphertext ^ round key 0; the ciphertext is kept.
    for (c, register) in current.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a2)", 4 * c);
    }
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    xor {register}, {}, {}", current[c], KEY0[c]);
    }
    rounds(out, isa, true);
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    xor {register}, {register}, {}", previous[c]);
        emit!(out, "    sw {register}, {}(a2)", 4 * c);
        emit!(out, "    mv {}, {}", previous[c], current[c]);
    }
    emit!(out, "    addi a2, a2, 16");
    emit!(out, "    bltu a2, a3, 1b");
    for (c, register) in previous.iter().enumerate() {
        emit!(out, "    sw {register}, {}(a1)", 4 * c);
    }
    restore(out, &kept);
    emit!(out, "2:");
    emit!(out, "    ret");
    function_end(out, &name);
}

fn main() {
    let mut out = String::from("# Generated by crates/vexriscv-aes/build.rs.\n");
    encrypt(&mut out, Isa::VexRiscv);
    decrypt(&mut out, Isa::VexRiscv);
    // The Zkne/Zknd mnemonics need the extensions enabled for the assembler
    // (only here: the rest of the binary stays rv32imac).
    emit!(out, ".option push");
    emit!(out, ".option arch, +zkne, +zknd");
    encrypt(&mut out, Isa::Zkne);
    decrypt(&mut out, Isa::Zkne);
    emit!(out, ".option pop");
    let path = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("kernels.S");
    fs::write(&path, out).expect("write kernels.S");
    println!("cargo:rerun-if-changed=build.rs");
}
