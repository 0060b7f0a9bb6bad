//! AES-256 on VexRiscv's AES instruction (`AesPlugin`), `no_std`.
//!
//! It depends on no other aesd crate: `zeroize`, and `libc` on riscv32 Linux
//! (the SIGILL probe and handler, the kernel's hwprobe).
//!
//! # Layout
//!
//! * [`model`]: the instruction in software, from the plugin's Scala
//!   source: its encoding (custom-0), ROM and byte shuffling
//!   (little-endian), as every released VexRiscv core has them; the module
//!   says which plugin version and how it was checked on generated RTL.
//! * [`insn`]: [`AesInstruction`], the four forms of the instruction, and
//!   the [`Model`](insn::Model) that executes them in software.
//! * [`hardware`] (riscv32): the instruction on the CPU, through inline
//!   assembly, and the CBC kernels in assembly that the CPU runs per byte
//!   (written out by `build.rs`), for VexRiscv's AesPlugin (`Hardware`) and
//!   for the ratified Zkne/Zknd instructions (`Zkne`), which compute the
//!   same contributions in another encoding.
//! * [`hwprobe`] (riscv32 Linux): whether the kernel reports Zkne/Zknd.
//! * [`aes`]: AES-256 key expansion, encryption and decryption (one block
//!   or two interleaved) and CBC, generic over [`AesInstruction`].
//! * [`sigill`] (riscv32 Linux): the start-up probe that never crashes on a
//!   CPU without the instructions, and (feature `emulate`, test builds)
//!   trap-and-emulate of VexRiscv's instruction with the model.
//!
//! `hardware`, `hwprobe` and `sigill` hold the crate's only `unsafe` code.
//! * [`self_test`]: the known-answer test a backend must pass before use.
//!
//! Why it exists: the study's SoC had this instruction and its OpenSSL used
//! it (3.39 MB/s AES-256-CBC at 100 MHz, about 4x the software path); a
//! round costs 16 instructions instead of hundreds of bitsliced ones.
#![cfg_attr(not(test), no_std)]

pub mod aes;
#[cfg(target_arch = "riscv32")]
pub mod hardware;
#[cfg(all(target_arch = "riscv32", target_os = "linux"))]
pub mod hwprobe;
pub mod insn;
pub mod model;
#[cfg(all(target_arch = "riscv32", target_os = "linux"))]
pub mod sigill;

pub use aes::Aes256Key;

/// Word-aligned bytes, as the CPU's CBC kernels take them.
#[repr(align(4))]
struct Aligned<const N: usize>([u8; N]);

/// The FIPS-197 C.3 known answer (AES-256, key 00..1f, plaintext
/// 00112233..ff) in both directions, through `I`, one block alone and as
/// the first block of a three-block CBC chain with a zero IV (through the
/// CBC path the server uses, the CPU's kernels included): what aesd checks
/// before it uses the instruction.
pub fn self_test<I: AesInstruction>() -> bool {
    let key: [u8; 32] = core::array::from_fn(|i| i as u8);
    let plain: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(0x11));
    let expected: [u8; 16] = [
        0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49, 0x60,
        0x89,
    ];
    let key = Aes256Key::new::<I>(&key);
    let cipher = aes::encrypt::<I>(&key, &aes::load(&plain));
    let back = aes::decrypt::<I>(&key, &cipher);
    let mut out = [0u8; 16];
    aes::store(&cipher, &mut out);
    let mut round_trip = [0u8; 16];
    aes::store(&back, &mut round_trip);
    let mut chain = Aligned([0u8; 48]);
    for block in chain.0.chunks_exact_mut(16) {
        block.copy_from_slice(&plain);
    }
    let mut iv = [0u8; 16];
    aes::cbc_encrypt_lanes::<I>(&mut [aes::CbcLane {
        key: &key,
        iv: &mut iv,
        data: &mut chain.0,
    }]);
    let chained_ok = chain.0[..16] == expected && iv[..] == chain.0[32..];
    let mut iv = [0u8; 16];
    aes::cbc_decrypt::<I>(&key, &mut iv, &mut chain.0);
    let chain_round_trip = chain.0.chunks_exact(16).all(|block| block == plain);
    out == expected && round_trip == plain && chained_ok && chain_round_trip
}
pub use insn::AesInstruction;

#[cfg(test)]
mod tests;
