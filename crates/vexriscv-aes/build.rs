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
/// round 1 reads `SET_A` and round 14 writes it.
const SET_A: [&str; 4] = ["a4", "a5", "a6", "a7"];
const SET_B: [&str; 4] = ["t0", "t1", "t2", "t3"];

/// The AES instruction's major opcode (custom-0) as `.insn r` takes it.
const OPCODE: &str = "0x0b";

/// The instruction's funct7: byte select << 3 | last round << 1 | decrypt.
fn funct7(byte_select: usize, last: bool, decrypt: bool) -> usize {
    byte_select << 3 | usize::from(last) << 1 | usize::from(decrypt)
}

/// The 14 rounds: input (round key 0 already added) in `SET_A`, output in
/// `SET_A`; `a0` points at the schedule.
fn rounds(out: &mut String, decrypt: bool) {
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
                emit!(
                    out,
                    "    .insn r {OPCODE}, 0, {}, {register}, {register}, {}",
                    funct7(row, last, decrypt),
                    from[column]
                );
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

/// `aesd_vexriscv_cbc_encrypt(schedule a0, chain a1, data a2, blocks a3)`:
/// whole blocks in place; the chain (4 little-endian words) is read at the
/// start and written back at the end.
fn encrypt(out: &mut String) {
    let name = "aesd_vexriscv_cbc_encrypt";
    function_start(out, name, "CBC encryption, one chain, in place.");
    emit!(out, "    beqz a3, 2f");
    emit!(out, "    slli a3, a3, 4");
    emit!(out, "    add a3, a3, a2");
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a1)", 4 * c);
    }
    emit!(out, "1:");
    // State = plaintext ^ chain ^ round key 0.
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    lw t4, {}(a2)", 4 * c);
        emit!(out, "    xor {register}, {register}, t4");
        emit!(out, "    lw t5, {}(a0)", 4 * c);
        emit!(out, "    xor {register}, {register}, t5");
    }
    rounds(out, false);
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    sw {register}, {}(a2)", 4 * c);
    }
    emit!(out, "    addi a2, a2, 16");
    emit!(out, "    bltu a2, a3, 1b");
    for (c, register) in SET_A.iter().enumerate() {
        emit!(out, "    sw {register}, {}(a1)", 4 * c);
    }
    emit!(out, "2:");
    emit!(out, "    ret");
    function_end(out, name);
}

/// `aesd_vexriscv_cbc_decrypt(schedule a0, chain a1, data a2, blocks a3)`:
/// as [`encrypt`], with the decryption schedule. The previous and the
/// current ciphertext block live in callee-saved registers s2..s9.
fn decrypt(out: &mut String) {
    let name = "aesd_vexriscv_cbc_decrypt";
    let previous = ["s2", "s3", "s4", "s5"];
    let current = ["s6", "s7", "s8", "s9"];
    function_start(out, name, "CBC decryption, one chain, in place.");
    emit!(out, "    beqz a3, 2f");
    emit!(out, "    addi sp, sp, -32");
    for (i, register) in previous.iter().chain(&current).enumerate() {
        emit!(out, "    sw {register}, {}(sp)", 4 * i);
    }
    emit!(out, "    slli a3, a3, 4");
    emit!(out, "    add a3, a3, a2");
    for (c, register) in previous.iter().enumerate() {
        emit!(out, "    lw {register}, {}(a1)", 4 * c);
    }
    emit!(out, "1:");
    // State = ciphertext ^ round key 0; the ciphertext is kept.
    for (c, (register, kept)) in SET_A.iter().zip(current).enumerate() {
        emit!(out, "    lw {kept}, {}(a2)", 4 * c);
        emit!(out, "    lw t4, {}(a0)", 4 * c);
        emit!(out, "    xor {register}, {kept}, t4");
    }
    rounds(out, true);
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
    for (i, register) in previous.iter().chain(&current).enumerate() {
        emit!(out, "    lw {register}, {}(sp)", 4 * i);
    }
    emit!(out, "    addi sp, sp, 32");
    emit!(out, "2:");
    emit!(out, "    ret");
    function_end(out, name);
}

fn main() {
    let mut out = String::from("# Generated by crates/vexriscv-aes/build.rs.\n");
    encrypt(&mut out);
    decrypt(&mut out);
    let path = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("kernels.S");
    fs::write(&path, out).expect("write kernels.S");
    println!("cargo:rerun-if-changed=build.rs");
}
