//! The riscv32 kernel: 2-lane CBC encryption with the fixsliced AES-256,
//! as one assembly function.
//!
//! ```text
//! aesd_cipher_fixslice_cbc2(record, chain, lane0, lane1, blocks)
//! ```
//!
//! encrypts `blocks` blocks of each lane in place (`lane1 == lane0` for
//! one lane: lane 1 then shadows lane 0's blocks and its stores come
//! first, so lane 0's ciphertext is what stays), `chain` holding the two
//! chaining values (lane 0's 4 words, then lane 1's) before and after.
//!
//! # Layout
//!
//! ```text
//! entry:  save registers; the chain into registers; no block -> done
//! pack:   x = plaintext ^ chain, transposed into planes; ARK 0; j turn
//! even:   v > 0 -> final
//!         MixColumns frame 2; ARK                    (falls into turn)
//! turn:   S-box; MixColumns frame 1 or 3 (shifts, mask from the record); ARK
//!         S-box; v >= 0 -> even
//! odd:    MixColumns frame 0; ARK; j turn
//! final:  ARK 14; planes back to words; ShiftRows twice; store;
//!         more blocks -> pack
//! done:   the chain stored, registers restored, return
//! ```
//!
//! A turn is two rounds, so the code holds the S-box twice and each
//! MixColumns once (about 3.5 KiB: a 4 KiB instruction cache holds the
//! whole loop). Frames 1 and 3 differ only in their shift amounts and one
//! mask, which the record supplies per turn (`srl`/`sll` by registers), so
//! one piece of code serves both; frames 2 and 0 differ in structure and
//! are chosen by a branch on the turn's word `v` (0: frame 2 follows; -1:
//! frame 0 follows; 1: last turn, round 14 done: the last turn takes the
//! even turns' way, so only it pays for the exit test's misprediction). The ciphertext of a
//! block stays in registers from `final` through `pack`, where it is XORed
//! into the next plaintext.
//!
//! # The record (built by `src/cbc/rv32.rs`, words)
//!
//! ```text
//! 0..8      round key 0
//! 8 + 20t   turn t (0..7): round key 2t+1 (8), round key 2t+2 (8),
//!           shift right, shift left, mask of frame 1 or 3, v
//! ```
//!
//! Registers: the 8 planes live in `PLANES` between regions, `K` points at
//! the current turn's part of the record, `s11` holds 0x0f0f0f0f for the
//! whole call (MixColumns frames 1, 2, 3 and the transposition). The S-box
//! needs 25 more registers; every other value goes where the allocator
//! puts it (`schedule.rs`), and no region spills.

use std::fmt::Write;

use crate::circuit;
use crate::program::{
    Region, Val, add_immediate, branch, input, kept, load, order, output, replaces, rotate_right,
    shift_left, shift_right, store,
};
use crate::schedule::{Compiled, compile};

/// The function's symbol.
pub const SYMBOL: &str = "aesd_cipher_fixslice_cbc2";

/// Every register the kernel may use (not sp, gp, tp, zero), in the
/// allocator's order of preference.
const REGISTERS: [&str; 28] = [
    "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4",
    "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6", "ra",
];
/// The planes between regions (plane j in PLANES[j]); between blocks, the
/// chaining values (lane l's column c in PLANES[l + 2c]).
const PLANES: [&str; 8] = ["s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5"];
/// The record pointer.
const K: &str = "t6";
/// 0x0f0f0f0f, for the whole call.
const NIBBLES: &str = "s11";
/// The turn's `v`, from the second S-box to `odd`.
const V: &str = "t5";
/// 0x55555555 and 0x33333333, from `final` to `pack`.
const MASKS: [&str; 2] = ["t2", "t3"];

/// Callee-saved registers (and ra), saved at the bottom of the frame.
const SAVED: [&str; 13] = [
    "ra", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11",
];
/// Stack slots above them: lane pointers (the current block), the end of
/// lane 0, the chain pointer, three masks.
const P0: i32 = 52;
const P1: i32 = 56;
const END: i32 = 60;
const CHAIN: i32 = 64;
const M55: i32 = 68;
const M33: i32 = 72;
const MFF00: i32 = 76;
const FRAME: i32 = 80;

/// Words of the record before the first turn (round key 0).
pub const RECORD_HEAD: usize = 8;
/// Words of the record per turn.
pub const TURN_WORDS: usize = 20;
/// Turns per block.
pub const TURNS: usize = 7;
/// In a turn: the words after its two round keys.
pub const SHIFT_RIGHT: usize = 16;
pub const SHIFT_LEFT: usize = 17;
pub const MASK: usize = 18;
pub const NEXT: usize = 19;
const TURN_BYTES: i32 = 4 * TURN_WORDS as i32;

/// Byte offset of word `w` of a turn.
fn word(w: usize) -> i32 {
    4 * w as i32
}

/// What every region starts from: the planes (between blocks: the
/// chaining value) in PLANES, the record pointer, and the stack pointer
/// and the nibble mask, which no region changes.
struct Start {
    planes: [Val; 8],
    k: Val,
    sp: Val,
    nibbles: Val,
}

/// A region's [`Start`]; `moves_k`: the region gives K a new value
/// (otherwise K is only read).
fn start(moves_k: bool) -> Start {
    let planes = PLANES.map(input);
    let k = if moves_k { input(K) } else { kept(K) };
    Start {
        planes,
        k,
        sp: kept("sp"),
        nibbles: kept(NIBBLES),
    }
}

/// The planes to their registers at the end.
fn planes_out(planes: [Val; 8]) {
    for (value, reg) in planes.into_iter().zip(PLANES) {
        output(value, reg);
    }
}

/// AddRoundKey with the 8 words at `offset` from `k`.
fn add_round_key(planes: [Val; 8], k: Val, offset: i32) -> [Val; 8] {
    let mut j = 0;
    planes.map(|plane| {
        let key = load(k, offset + 4 * j);
        j += 1;
        plane ^ key
    })
}

/// `l` where `mask` is 0, `r` where it is 1.
fn merge(l: Val, r: Val, mask: Val) -> Val {
    l ^ ((l ^ r) & mask)
}

/// Every byte rotated right by 4 (xor-merge of the two shifts).
fn swap_nibbles(x: Val, nibbles: Val) -> Val {
    merge(x << 4, x >> 4, nibbles)
}

/// One S-box region; `then` records what ends it.
fn sbox_region(name: &'static str, then: impl FnOnce(Val)) -> Region {
    Region::record(name, || {
        let Start { mut planes, k, .. } = start(false);
        circuit::sub_bytes(&mut planes);
        planes_out(planes);
        then(k);
    })
}

/// MixColumns of frame 1 or 3 (shifts and mask from the record) and the
/// turn's first AddRoundKey.
fn frames_1_3() -> Region {
    Region::record("mix 1/3", || {
        let Start {
            mut planes,
            k,
            nibbles,
            ..
        } = start(false);
        let right = load(k, word(SHIFT_RIGHT));
        let left = load(k, word(SHIFT_LEFT));
        let mask = load(k, word(MASK));
        let below =
            |x: Val| rotate_right(merge(shift_left(x, left), shift_right(x, right), mask), 8);
        let two_below = |x: Val| rotate_right(swap_nibbles(x, nibbles), 16);
        circuit::mix_columns(&mut planes, below, two_below);
        planes_out(add_round_key(planes, k, 0));
    })
}

/// MixColumns of frame 2 or 0, the turn's second AddRoundKey, and the
/// step to the next turn.
fn frame_2_or_0(frame: u32) -> Region {
    Region::record(if frame == 2 { "mix 2" } else { "mix 0" }, || {
        let Start {
            mut planes,
            k,
            nibbles,
            ..
        } = start(true);
        if frame == 2 {
            let below = |x: Val| rotate_right(swap_nibbles(x, nibbles), 8);
            circuit::mix_columns(&mut planes, below, |x| rotate_right(x, 16));
        } else {
            circuit::mix_columns(&mut planes, |x| rotate_right(x, 8), |x| rotate_right(x, 16));
        }
        planes_out(add_round_key(planes, k, 32));
        let next = add_immediate(k, TURN_BYTES);
        replaces(next, k);
        output(next, K);
    })
}

/// The transposition's masks.
fn masks(sp: Val, nibbles: Val) -> [Val; 3] {
    [load(sp, M55), load(sp, M33), nibbles]
}

/// After round 14: the last AddRoundKey, the planes back to words, the
/// ciphertext stored, the lanes' pointers moved on; back to `pack` while
/// lane 0 has blocks. The ciphertext (the next chaining value) and two
/// masks stay in registers.
fn finish_block() -> Region {
    Region::record("final", || {
        let Start {
            planes,
            k,
            sp,
            nibbles,
        } = start(false);
        let mut x = add_round_key(planes, k, 32);
        let masks = masks(sp, nibbles);
        output(masks[0], MASKS[0]);
        output(masks[1], MASKS[1]);
        circuit::transpose_bytes(&mut x, masks);
        // Frame 2 back to the AES byte order: rows 1 and 3 (bytes 1 and
        // 3) of columns c and c + 2 change places (word lane + 2c).
        let rows_1_3 = load(sp, MFF00);
        for lane in 0..2 {
            for c in 0..2 {
                let (a, b) = (lane + 2 * c, lane + 2 * (c + 2));
                let swap = (x[a] ^ x[b]) & rows_1_3;
                x[a] = x[a] ^ swap;
                x[b] = x[b] ^ swap;
            }
        }
        let p0 = load(sp, P0);
        let p1 = load(sp, P1);
        // (Loads go before the stores: the scheduler keeps memory order.)
        let end = load(sp, END);
        // Lane 1 first: with one lane it shadows lane 0's block.
        for c in 0..4 {
            store(x[2 * c + 1], p1, 4 * c as i32);
        }
        for c in 0..4 {
            store(x[2 * c], p0, 4 * c as i32);
        }
        let next0 = add_immediate(p0, 16);
        store(next0, sp, P0);
        store(add_immediate(p1, 16), sp, P1);
        planes_out(x);
        branch("bne", &[next0, end], "pack");
    })
}

/// A block's start: the plaintext XOR the chaining value, transposed into
/// planes, and AddRoundKey 0; the record pointer back to turn 0.
fn start_block() -> Region {
    Region::record("pack", || {
        let Start {
            planes: chain,
            k,
            sp,
            nibbles,
        } = start(true);
        let masks = [input(MASKS[0]), input(MASKS[1]), nibbles];
        let p0 = load(sp, P0);
        let p1 = load(sp, P1);
        // One lane's block, then the other's: the two buffers may share
        // the lines of a direct-mapped data cache.
        let lane0: Vec<Val> = (0..4).map(|c| load(p0, 4 * c)).collect();
        let lane1: Vec<Val> = (0..4).map(|c| load(p1, 4 * c)).collect();
        for &word in &lane1 {
            order(&lane0, word);
        }
        let mut x: [Val; 8] = std::array::from_fn(|m| {
            let plain = if m % 2 == 0 {
                lane0[m / 2]
            } else {
                lane1[m / 2]
            };
            chain[m] ^ plain
        });
        circuit::transpose_bytes(&mut x, masks);
        let first = add_immediate(k, -(TURNS as i32 - 1) * TURN_BYTES);
        replaces(first, k);
        output(first, K);
        planes_out(add_round_key(x, first, -32));
    })
}

/// The function's prologue: registers saved, arguments and masks in the
/// frame, the chain in PLANES (lane l's column c in PLANES[l + 2c]), K at
/// the last turn (where `final` leaves it), to `done` if there is no
/// block.
fn prologue(out: &mut Vec<String>) {
    out.push(format!("addi sp, sp, -{FRAME}"));
    for (i, reg) in SAVED.iter().enumerate() {
        out.push(format!("sw {reg}, {}(sp)", 4 * i));
    }
    // a0 record, a1 chain, a2 lane 0, a3 lane 1, a4 blocks.
    out.push("slli a4, a4, 4".into());
    out.push("add a4, a4, a2".into());
    for (reg, slot) in [("a1", CHAIN), ("a2", P0), ("a3", P1), ("a4", END)] {
        out.push(format!("sw {reg}, {slot}(sp)"));
    }
    for (slot, value) in [
        (M55, 0x5555_5555u32),
        (M33, 0x3333_3333),
        (MFF00, 0xff00_ff00),
    ] {
        out.push(format!("li t0, {value}"));
        out.push(format!("sw t0, {slot}(sp)"));
    }
    out.push(format!("li {NIBBLES}, {}", 0x0f0f_0f0fu32));
    out.push(format!(
        "addi {K}, a0, {}",
        4 * RECORD_HEAD as i32 + (TURNS as i32 - 1) * TURN_BYTES
    ));
    out.push("mv t1, a1".into());
    out.push("sub t0, a4, a2".into());
    for (m, reg) in PLANES.iter().enumerate() {
        out.push(format!("lw {reg}, {}(t1)", 16 * (m % 2) + 4 * (m / 2)));
    }
    out.push(format!("lw {}, {M55}(sp)", MASKS[0]));
    out.push(format!("lw {}, {M33}(sp)", MASKS[1]));
    out.push("beqz t0, done".into());
}

/// The epilogue: the chain stored, registers restored.
fn epilogue(out: &mut Vec<String>) {
    out.push(format!("lw t0, {CHAIN}(sp)"));
    for (m, reg) in PLANES.iter().enumerate() {
        out.push(format!("sw {reg}, {}(t0)", 16 * (m % 2) + 4 * (m / 2)));
    }
    for (i, reg) in SAVED.iter().enumerate() {
        out.push(format!("lw {reg}, {}(sp)", 4 * i));
    }
    out.push(format!("addi sp, sp, {FRAME}"));
    out.push("ret".into());
}

/// What the generator reports about the kernel (build script warnings on
/// request, and the instruction count per block pair in the docs).
pub struct Report {
    /// Instructions per block pair (one block per lane).
    pub per_block_pair: usize,
}

/// The kernel's assembly text.
pub fn assembly() -> (String, Report) {
    let free: Vec<&'static str> = REGISTERS
        .iter()
        .copied()
        .filter(|&r| r != K && r != NIBBLES)
        .collect();
    let compiled = |region: Region| -> Compiled {
        let out = compile(&region, &free);
        assert_eq!(out.stalls, 0, "region {} stalls", region.name);
        out
    };
    let pack = compiled(start_block());
    let even = compiled(frame_2_or_0(2));
    let first_sbox = compiled(sbox_region("s-box 1", |_| {}));
    let mix13 = compiled(frames_1_3());
    let second_sbox = compiled(sbox_region("s-box 2", |k| {
        let v = load(k, word(NEXT));
        output(v, V);
        branch("bgez", &[v], "even");
    }));
    let odd = compiled(frame_2_or_0(0));
    let last = compiled(finish_block());

    let mut sections: Vec<(Option<&str>, Vec<String>)> = Vec::new();
    let mut head = Vec::new();
    prologue(&mut head);
    sections.push((None, head));
    let mut with_jump = pack.lines.clone();
    with_jump.push("j turn".into());
    sections.push((Some("pack"), with_jump));
    let mut even_lines = vec![format!("bnez {V}, final")];
    even_lines.extend(even.lines.iter().cloned());
    sections.push((Some("even"), even_lines));
    sections.push((Some("turn"), first_sbox.lines.clone()));
    sections.push((None, mix13.lines.clone()));
    sections.push((None, second_sbox.lines.clone()));
    let mut odd_lines = odd.lines.clone();
    odd_lines.push("j turn".into());
    sections.push((Some("odd"), odd_lines));
    sections.push((Some("final"), last.lines.clone()));
    let mut tail = Vec::new();
    epilogue(&mut tail);
    sections.push((Some("done"), tail));

    let local = |line: &str| -> String {
        let mut line = line.to_string();
        for label in ["pack", "even", "turn", "odd", "final", "done"] {
            // Labels only ever end a line (branch targets).
            if line.ends_with(&format!(" {label}")) {
                line.truncate(line.len() - label.len());
                line.push_str(&format!(".L{SYMBOL}_{label}"));
            }
        }
        line
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        ".text\n.p2align 2\n.globl {SYMBOL}\n.type {SYMBOL}, @function\n{SYMBOL}:"
    );
    for (label, lines) in &sections {
        if let Some(label) = label {
            let _ = writeln!(text, ".L{SYMBOL}_{label}:");
        }
        for line in lines {
            let _ = writeln!(text, "    {}", local(line));
        }
    }
    let _ = writeln!(text, ".size {SYMBOL}, .-{SYMBOL}");

    // Per block pair: the block's start and end, 7 turns of two S-boxes
    // and frame 1/3, three of frame 2 (with the exit test), three of frame
    // 0 (with their jump), the last turn's exit test.
    let turn = first_sbox.lines.len() + mix13.lines.len() + second_sbox.lines.len();
    let per_block_pair = pack.lines.len()
        + 1
        + last.lines.len()
        + TURNS * turn
        + 3 * (even.lines.len() + 1)
        + 3 * (odd.lines.len() + 1)
        + 1;
    (text, Report { per_block_pair })
}

/// The record's layout for `src/cbc/rv32.rs`, as Rust constants.
pub fn layout() -> String {
    format!(
        "/// Words of the record before the first turn (round key 0).\n\
         const RECORD_HEAD: usize = {RECORD_HEAD};\n\
         /// Words of the record per turn.\n\
         const TURN_WORDS: usize = {TURN_WORDS};\n\
         /// Turns per block.\n\
         const TURNS: usize = {TURNS};\n\
         /// In a turn: the shift right of frame 1 or 3.\n\
         const SHIFT_RIGHT: usize = {SHIFT_RIGHT};\n\
         /// In a turn: the shift left of frame 1 or 3.\n\
         const SHIFT_LEFT: usize = {SHIFT_LEFT};\n\
         /// In a turn: the mask of frame 1 or 3.\n\
         const MASK: usize = {MASK};\n\
         /// In a turn: 0 (frame 2 follows), -1 (frame 0 follows), 1 (last).\n\
         const NEXT: usize = {NEXT};\n"
    )
}
