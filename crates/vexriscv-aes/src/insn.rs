//! Who executes the AES instruction: the [`Model`] (any target) or the CPU
//! ([`Hardware`](crate::hardware::Hardware), riscv32 only).

use crate::aes::{self, Aes256Key, CbcLane};
use crate::model::{self, BYTE_SELECT_SHIFT, DECRYPT, LAST_ROUND};

/// The four forms of the instruction, each with its byte select `BS`
/// (0..=3, the byte of rs2 used). Each returns rd.
pub trait AesInstruction {
    /// Encryption round: rs1 ⊕ MixColumns contribution of S(rs2 byte BS).
    fn enc<const BS: u32>(rs1: u32, rs2: u32) -> u32;
    /// Last encryption round: rs1 ⊕ S(rs2 byte BS) at byte BS.
    fn enc_last<const BS: u32>(rs1: u32, rs2: u32) -> u32;
    /// Decryption round: rs1 ⊕ InvMixColumns contribution of S⁻¹(byte BS).
    fn dec<const BS: u32>(rs1: u32, rs2: u32) -> u32;
    /// Last decryption round: rs1 ⊕ S⁻¹(rs2 byte BS) at byte BS.
    fn dec_last<const BS: u32>(rs1: u32, rs2: u32) -> u32;

    /// CBC-encrypts whole-block lanes in place: by default the generic
    /// rounds in Rust ([`aes::generic_cbc_encrypt_lanes`]); the CPU
    /// overrides it with its assembly kernel.
    fn cbc_encrypt_lanes(lanes: &mut [CbcLane<'_>])
    where
        Self: Sized,
    {
        aes::generic_cbc_encrypt_lanes::<Self>(lanes);
    }

    /// CBC-decrypts whole blocks in place: by default the generic rounds
    /// ([`aes::generic_cbc_decrypt`]); the CPU overrides it.
    fn cbc_decrypt(key: &Aes256Key, iv: &mut [u8; 16], data: &mut [u8])
    where
        Self: Sized,
    {
        aes::generic_cbc_decrypt::<Self>(key, iv, data);
    }
}

/// The software model of the instruction (for tests and emulation; not
/// constant time).
pub struct Model;

impl AesInstruction for Model {
    fn enc<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        model::execute(BS << BYTE_SELECT_SHIFT, rs1, rs2)
    }
    fn enc_last<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        model::execute(LAST_ROUND | (BS << BYTE_SELECT_SHIFT), rs1, rs2)
    }
    fn dec<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        model::execute(DECRYPT | (BS << BYTE_SELECT_SHIFT), rs1, rs2)
    }
    fn dec_last<const BS: u32>(rs1: u32, rs2: u32) -> u32 {
        model::execute(DECRYPT | LAST_ROUND | (BS << BYTE_SELECT_SHIFT), rs1, rs2)
    }
}
