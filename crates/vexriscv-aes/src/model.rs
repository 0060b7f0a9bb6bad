//! A software model of VexRiscv's AES instruction (`AesPlugin`), as real
//! cores have it.
//!
//! Which plugin version: the one every VexRiscv core has had since the
//! plugin's second week ("AesPlugin is now little endian"): VexRiscv master,
//! the VexRiscv inside LiteX's SMP cluster, and the copy inside PyPI's
//! `pythondata-cpu-vexriscv` wheel (1.0.1.post407,
//! `verilog/ext/VexRiscv/src/main/scala/vexriscv/plugin/AesPlugin.scala`),
//! which is the reference this model was written from and checked against.
//! How it was checked: the tests below compare the ROM with entries of
//! that file's tables; `scripts/bench/vexriscv-cycles.sh` runs the CBC
//! kernels of [`crate::hardware`] on a VexRiscv core generated from that
//! very source (`soc/vexriscv/generate.sh`) against FIPS-197 and SP 800-38A
//! answers. (The plugin's first commit used custom-1, `0x2b`, and
//! big-endian tables; no released core decodes that.)
//!
//! * encoding: R-type, opcode `0001011` (custom-0, 0x0b), funct3 `000`
//!   (the plugin's mask `-----------------000-----0001011`); instruction
//!   bit 25 (funct7 bit 0) = decrypt, bit 26 (funct7 bit 1) = last round,
//!   bits 28..29 (funct7 bits 3..4) = which byte of rs2 is used; bits 27,
//!   30 and 31 are not decoded (written 0 here);
//! * a 512-word ROM: bank 0 holds, for each byte `x`, `S(x)`, `2·S(x)`,
//!   `3·S(x)` in its bytes 0..2 and `S⁻¹(x)` in byte 3; bank 1 holds
//!   `0e·S⁻¹(x)`, `09·`, `0d·`, `0b·` in bytes 0..3. Decryption rounds
//!   other than the last read bank 1, all else bank 0;
//! * the ROM word's bytes are picked per output byte (`remap`), rotated by
//!   the byte select (`wordDesuffle`); in a last round only the output byte
//!   at the byte select's position survives; the result is XORed into rs1.
//!
//! Read with little-endian column words (row `r` of an AES column in byte
//! `r`, what `lw` gives for the column's 4 bytes in memory order), byte
//! select `r` takes row `r` and the result is that row's contribution to
//! the whole column: MixColumns(S(·)) for encryption, InvMixColumns(S⁻¹(·))
//! for decryption, S or S⁻¹ alone (at byte `r`) in the last round.
//!
//! The ROM is computed here from GF(2⁸) arithmetic (no table is copied);
//! tests check entries against the Scala source's tables. The model is for
//! tests and for trap-and-emulate in test builds: it reads tables indexed by
//! data, so it is not constant time and never runs in the shipped server.

/// funct7 bit: decryption.
pub const DECRYPT: u32 = 1;
/// funct7 bit: last round.
pub const LAST_ROUND: u32 = 2;
/// funct7 shift of the 2-bit byte select.
pub const BYTE_SELECT_SHIFT: u32 = 3;

/// The major opcode of the instruction (custom-0).
pub const OPCODE: u32 = 0b000_1011;

/// The bits the plugin decodes (funct3 and the major opcode) and their
/// value: `insn & DECODE_MASK == DECODE_MATCH` is the AES instruction.
pub const DECODE_MASK: u32 = 0x0000_707f;
/// See [`DECODE_MASK`].
pub const DECODE_MATCH: u32 = OPCODE;

/// Whether `insn` is the AES instruction, as the plugin decodes it.
pub const fn is_aes(insn: u32) -> bool {
    insn & DECODE_MASK == DECODE_MATCH
}

/// Whether `insn` is one of the ratified RV32 scalar AES instructions
/// (Zkne `aes32esi`/`aes32esmi`, Zknd `aes32dsi`/`aes32dsmi`): major
/// opcode OP (0x33), funct3 0, bits 29..25 `10001`, `10011`, `10101` or
/// `10111`, bits 31..30 the byte select. They compute what the plugin's
/// four forms compute for the same byte select (see
/// `crate::hardware::Zkne`).
pub const fn is_zkne(insn: u32) -> bool {
    let op = (insn >> 25) & 0x1f;
    insn & 0x707f == 0x33 && (op == 0x11 || op == 0x13 || op == 0x15 || op == 0x17)
}

/// The 32-bit instruction word for `funct7`, `rd`, `rs1` and `rs2`.
pub const fn encode(funct7: u32, rd: u32, rs1: u32, rs2: u32) -> u32 {
    (funct7 & 0x7f) << 25 | (rs2 & 31) << 20 | (rs1 & 31) << 15 | (rd & 31) << 7 | OPCODE
}

/// Multiplication in GF(2⁸) modulo x⁸ + x⁴ + x³ + x + 1.
const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        let carry = a & 0x80;
        a <<= 1;
        if carry != 0 {
            a ^= 0x1b;
        }
        b >>= 1;
    }
    product
}

/// The AES S-box: inverse in GF(2⁸) (0 maps to 0), then the affine map.
const fn sbox(x: u8) -> u8 {
    // x^254 is the inverse (x^255 = 1 for x != 0).
    let mut inverse = 1u8;
    let mut i = 0;
    while i < 254 {
        inverse = gf_mul(inverse, x);
        i += 1;
    }
    if x == 0 {
        inverse = 0;
    }
    let b = inverse;
    b ^ b.rotate_left(1) ^ b.rotate_left(2) ^ b.rotate_left(3) ^ b.rotate_left(4) ^ 0x63
}

const fn sbox_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        table[x] = sbox(x as u8);
        x += 1;
    }
    table
}

const fn inverse_table(sbox: &[u8; 256]) -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        table[sbox[x] as usize] = x as u8;
        x += 1;
    }
    table
}

/// The S-box.
pub const SBOX: [u8; 256] = sbox_table();
/// The inverse S-box.
pub const SBOX_INV: [u8; 256] = inverse_table(&SBOX);

const fn rom() -> [u32; 512] {
    let mut rom = [0u32; 512];
    let mut x = 0;
    while x < 256 {
        let s = SBOX[x];
        let i = SBOX_INV[x];
        // Bank 0: s | 2s | 3s | S⁻¹ (bytes 0..3).
        rom[x] =
            s as u32 | (gf_mul(s, 2) as u32) << 8 | (gf_mul(s, 3) as u32) << 16 | (i as u32) << 24;
        // Bank 1: 0e·i | 09·i | 0d·i | 0b·i (bytes 0..3).
        rom[256 + x] = gf_mul(i, 0x0e) as u32
            | (gf_mul(i, 0x09) as u32) << 8
            | (gf_mul(i, 0x0d) as u32) << 16
            | (gf_mul(i, 0x0b) as u32) << 24;
        x += 1;
    }
    rom
}

/// The plugin's ROM (bank 0, then bank 1).
pub const ROM: [u32; 512] = rom();

/// What the instruction writes to rd, for `funct7`, rs1 and rs2.
pub fn execute(funct7: u32, rs1: u32, rs2: u32) -> u32 {
    let decrypt = funct7 & DECRYPT != 0;
    let last = funct7 & LAST_ROUND != 0;
    let byte_select = ((funct7 >> BYTE_SELECT_SHIFT) & 3) as usize;
    let bank = u32::from(decrypt && !last);
    let address = (bank << 8) | ((rs2 >> (8 * byte_select)) & 0xff);
    let data = ROM[address as usize].to_le_bytes();
    // Which ROM byte each output position takes before the rotation, by
    // (decrypt, last round): the plugin's `remap`.
    let remap: [usize; 4] = match (decrypt, last) {
        (false, false) => [2, 0, 0, 1],
        (false, true) => [0, 0, 0, 0],
        (true, false) => [3, 2, 1, 0],
        (true, true) => [3, 3, 3, 3],
    };
    let mut output = [0u8; 4];
    for (position, byte) in output.iter_mut().enumerate() {
        // The plugin's `wordDesuffle`: output byte p takes remap entry
        // (3 - p + byte select) mod 4.
        let pick = remap[(3 + byte_select - position) % 4];
        let kept = !last || position == byte_select;
        *byte = if kept { data[pick] } else { 0 };
    }
    u32::from_le_bytes(output) ^ rs1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of the plugin's own tables (AesPlugin.scala: TE0, TD0,
    /// SBOX_INV), which the computed ROM must reproduce.
    #[test]
    fn rom_matches_the_scala_tables() {
        // TE0[0..4] = 0xa5c663, 0x84f87c, 0x99ee77, 0x8df67b; last: 0x3a2c16.
        for (x, te0) in [
            (0, 0xa5c663),
            (1, 0x84f87c),
            (2, 0x99ee77),
            (3, 0x8df67b),
            (255, 0x3a2c16),
        ] {
            assert_eq!(ROM[x] & 0x00ff_ffff, te0, "TE0[{x}]");
        }
        // SBOX_INV[0..4] = 0x52, 0x09, 0x6a, 0xd5; last: 0x7d.
        for (x, inv) in [(0, 0x52), (1, 0x09), (2, 0x6a), (3, 0xd5), (255, 0x7d)] {
            assert_eq!(ROM[x] >> 24, inv, "SBOX_INV[{x}]");
        }
        // TD0[0..4] = 0x50a7f451, 0x5365417e, 0xc3a4171a, 0x965e273a; last: 0x4257b8d0.
        for (x, td0) in [
            (0, 0x50a7_f451),
            (1, 0x5365_417e),
            (2, 0xc3a4_171a),
            (3, 0x965e_273a),
            (255, 0x4257_b8d0),
        ] {
            assert_eq!(ROM[256 + x], td0, "TD0[{x}]");
        }
    }

    #[test]
    fn last_round_places_one_s_box_byte_and_keeps_rs1() {
        for select in 0..4 {
            let funct7 = LAST_ROUND | (select << BYTE_SELECT_SHIFT);
            let rs2 = 0x0053_00ff_u32.rotate_left(8 * select);
            let byte = (rs2 >> (8 * select)) & 0xff;
            let expected = u32::from(SBOX[byte as usize]) << (8 * select);
            assert_eq!(execute(funct7, 0, rs2), expected, "select {select}");
            assert_eq!(execute(funct7, 0x1234_5678, rs2), expected ^ 0x1234_5678);
            let inverse = u32::from(SBOX_INV[byte as usize]) << (8 * select);
            assert_eq!(execute(funct7 | DECRYPT, 0, rs2), inverse);
        }
    }

    /// The plugin's own description of its encoding:
    /// `--SS-LDXXXXXYYYYY000ZZZZZ0001011` (SS byte select, L last round,
    /// D decrypt, X rs2, Y rs1, Z rd).
    #[test]
    fn encoding_is_the_plugins() {
        let funct7 = DECRYPT | LAST_ROUND | (2 << BYTE_SELECT_SHIFT);
        let insn = encode(funct7, 5, 6, 7);
        assert_eq!(
            insn, 0b0010_0110_0111_0011_0000_0010_1000_1011,
            "{insn:#034b}"
        );
        assert!(is_aes(insn));
        // Bits the plugin does not decode may be anything.
        assert!(is_aes(insn | 1 << 27 | 3 << 30));
        // The first version's custom-1 (0x2b) and other funct3 are not it.
        assert!(!is_aes((insn & !0x7f) | 0x2b));
        assert!(!is_aes(insn | 1 << 12));
    }

    /// With little-endian column words, byte select r reads row r and an
    /// encryption round adds that row's MixColumns(S(x)) column; a
    /// decryption round InvMixColumns(S⁻¹(x)).
    #[test]
    fn rounds_give_a_rows_contribution_to_a_little_endian_column() {
        let x = 0x53u8;
        let (s, i) = (SBOX[x as usize], SBOX_INV[x as usize]);
        let mix = [gf_mul(s, 2), s, s, gf_mul(s, 3)];
        let inv = [
            gf_mul(i, 0x0e),
            gf_mul(i, 0x09),
            gf_mul(i, 0x0d),
            gf_mul(i, 0x0b),
        ];
        for row in 0..4u32 {
            let rs2 = u32::from(x) << (8 * row) | 0x0101_0101 & !(0xff << (8 * row));
            let rotate = |column: [u8; 4]| u32::from_le_bytes(column).rotate_left(8 * row);
            assert_eq!(
                execute(row << BYTE_SELECT_SHIFT, 0, rs2),
                rotate(mix),
                "row {row}"
            );
            assert_eq!(
                execute(DECRYPT | row << BYTE_SELECT_SHIFT, 0, rs2),
                rotate(inv),
                "row {row}"
            );
        }
    }
}
