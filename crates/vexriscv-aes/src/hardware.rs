//! The instruction on the CPU: the only `unsafe` code of the crate.
//!
//! Why `unsafe`: Rust has no intrinsic for a vendor's custom instruction,
//! so it is emitted with inline assembly (`.insn r 0x2b, 0, funct7, rd,
//! rs1, rs2`), and inline assembly is `unsafe` by definition. Each use
//! reads two registers and writes one, touches no memory and no other
//! state (`pure, nomem, nostack`), so it cannot break memory safety. It
//! may only be run on a CPU that has the instruction: callers establish
//! that first ([`crate::probe`]), otherwise the CPU raises an
//! illegal-instruction exception (SIGILL).
#![allow(unsafe_code)]

use crate::insn::AesInstruction;

/// The CPU's AES instruction (VexRiscv with `AesPlugin`).
pub struct Hardware;

macro_rules! insn {
    ($name:ident, $funct7:literal) => {
        #[inline(always)]
        fn $name(rs1: u32, rs2: u32) -> u32 {
            let rd: u32;
            // SAFETY: see the module documentation.
            unsafe {
                core::arch::asm!(
                    concat!(".insn r 0x2b, 0, ", $funct7, ", {rd}, {rs1}, {rs2}"),
                    rd = lateout(reg) rd,
                    rs1 = in(reg) rs1,
                    rs2 = in(reg) rs2,
                    options(pure, nomem, nostack),
                );
            }
            rd
        }
    };
}

// funct7 = byte select << 3 | last round << 1 | decrypt.
insn!(enc0, "0");
insn!(enc1, "8");
insn!(enc2, "16");
insn!(enc3, "24");
insn!(enc_last0, "2");
insn!(enc_last1, "10");
insn!(enc_last2, "18");
insn!(enc_last3, "26");
insn!(dec0, "1");
insn!(dec1, "9");
insn!(dec2, "17");
insn!(dec3, "25");
insn!(dec_last0, "3");
insn!(dec_last1, "11");
insn!(dec_last2, "19");
insn!(dec_last3, "27");

impl AesInstruction for Hardware {
    #[inline(always)]
    fn enc<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        match BS {
            0 => enc0(rs1, rs2),
            1 => enc1(rs1, rs2),
            2 => enc2(rs1, rs2),
            _ => enc3(rs1, rs2),
        }
    }
    #[inline(always)]
    fn enc_last<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        match BS {
            0 => enc_last0(rs1, rs2),
            1 => enc_last1(rs1, rs2),
            2 => enc_last2(rs1, rs2),
            _ => enc_last3(rs1, rs2),
        }
    }
    #[inline(always)]
    fn dec<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        match BS {
            0 => dec0(rs1, rs2),
            1 => dec1(rs1, rs2),
            2 => dec2(rs1, rs2),
            _ => dec3(rs1, rs2),
        }
    }
    #[inline(always)]
    fn dec_last<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        match BS {
            0 => dec_last0(rs1, rs2),
            1 => dec_last1(rs1, rs2),
            2 => dec_last2(rs1, rs2),
            _ => dec_last3(rs1, rs2),
        }
    }
}
