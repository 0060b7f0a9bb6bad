//! A software model of VexRiscv's AES instruction (`AesPlugin`).
//!
//! Written from the plugin's Scala source (SpinalHDL/VexRiscv,
//! `src/main/scala/vexriscv/plugin/AesPlugin.scala`):
//!
//! * encoding: R-type, opcode `0101011` (custom-1, 0x2b), funct3 `000`;
//!   funct7 bit 0 (instruction bit 25) = decrypt, bit 1 (26) = last round,
//!   bit 2 (27) = endianness (not implemented by the plugin: 0), bits 3..4
//!   (28..29) = which byte of rs2 is used;
//! * a 512-word ROM: bank 0 holds, for each byte `x`, `3·S(x)`, `S(x)`,
//!   `2·S(x)` in its bytes 0..2 and `S⁻¹(x)` in byte 3; bank 1 holds the
//!   decryption T-table (`0b·S⁻¹(x)`, `0d·`, `09·`, `0e·` in bytes 0..3).
//!   Decryption rounds other than the last read bank 1, all else bank 0;
//! * the ROM word's bytes are picked per output byte (`remap`), rotated by
//!   the byte select (`wordDesuffle`); in a last round only the output byte
//!   at the byte select's position survives; the result is XORed into rs1.
//!
//! Read with words whose byte 3 (most significant) is row 0 of an AES
//! column, byte select `3 - r` takes row `r` and the result is that row's
//! contribution to the whole column: MixColumns(S(·)) for encryption,
//! InvMixColumns(S⁻¹(·)) for decryption, S or S⁻¹ alone in the last round.
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

/// The major opcode of the instruction (custom-1).
pub const OPCODE: u32 = 0b010_1011;

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
        // Bank 0: 3s | s | 2s | S⁻¹ (bytes 0..3).
        rom[x] =
            gf_mul(s, 3) as u32 | (s as u32) << 8 | (gf_mul(s, 2) as u32) << 16 | (i as u32) << 24;
        // Bank 1: 0b·i | 0d·i | 09·i | 0e·i (bytes 0..3).
        rom[256 + x] = gf_mul(i, 0x0b) as u32
            | (gf_mul(i, 0x0d) as u32) << 8
            | (gf_mul(i, 0x09) as u32) << 16
            | (gf_mul(i, 0x0e) as u32) << 24;
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
    let byte_select = (funct7 >> BYTE_SELECT_SHIFT) & 3;
    let bank = u32::from(decrypt && !last);
    let address = (bank << 8) | ((rs2 >> (8 * byte_select)) & 0xff);
    let data = ROM[address as usize].to_le_bytes();
    // Which ROM byte each output position takes, before the rotation.
    let remap: [usize; 4] = match (decrypt, last) {
        (false, false) => [0, 1, 1, 2],
        (false, true) => [1, 1, 1, 1],
        (true, false) => [0, 1, 2, 3],
        (true, true) => [3, 3, 3, 3],
    };
    let mut output = [0u8; 4];
    for (position, byte) in output.iter_mut().enumerate() {
        let pick = remap[(position + 3 - byte_select as usize) % 4];
        let kept = !last || position == byte_select as usize;
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
        // TE0[0..4] = 0xc663a5, 0xf87c84, 0xee7799, 0xf67b8d; last: 0x2c163a.
        for (x, te0) in [
            (0, 0xc663a5),
            (1, 0xf87c84),
            (2, 0xee7799),
            (3, 0xf67b8d),
            (255, 0x2c163a),
        ] {
            assert_eq!(ROM[x] & 0x00ff_ffff, te0, "TE0[{x}]");
        }
        // SBOX_INV[0..4] = 0x52, 0x09, 0x6a, 0xd5; last: 0x7d.
        for (x, inv) in [(0, 0x52), (1, 0x09), (2, 0x6a), (3, 0xd5), (255, 0x7d)] {
            assert_eq!(ROM[x] >> 24, inv, "SBOX_INV[{x}]");
        }
        // TD0[0..4] = 0x51f4a750, 0x7e416553, 0x1a17a4c3, 0x3a275e96; last: 0xd0b85742.
        for (x, td0) in [
            (0, 0x51f4_a750),
            (1, 0x7e41_6553),
            (2, 0x1a17_a4c3),
            (3, 0x3a27_5e96),
            (255, 0xd0b8_5742),
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
}
