//! Which AES runs a job's CBC encryption, and several chains at once.
//!
//! * [`Engine::Fixsliced`]: aesd's own constant-time fixsliced AES-256
//!   (`aesd-cipher`), which encrypts up to [`aesd_cipher::LANES`] chains
//!   with different keys in one call: the boards (rv32 and rv64 cores
//!   without AES instructions, the Raspberry Pi 4's Cortex-A72).
//! * [`Engine::CpuAes`]: the CPU's AES instructions (x86-64's AES-NI,
//!   ARMv8's AES extension) through `aesd-cipher`'s `cpu_aes` kernels, the
//!   rounds of up to 4 chains interleaved (one chain alone runs at the
//!   instruction's latency).
//!   Development machines and servers, where they are many times faster
//!   than any software AES.
//! * [`Engine::VexRiscv`]: VexRiscv's AES instruction (`aesd-vexriscv`,
//!   the AesPlugin as real cores have it: custom-0), the board's SoC with
//!   `--aes-instruction`; [`Engine::Zkne`]: the ratified scalar AES
//!   instructions (Zkne/Zknd) of RISC-V cores that have them. Both run
//!   `aesd-vexriscv`'s CBC kernels, one chain per call. Only used after the
//!   start-up probe passed (the server's `backend`); on other architectures they
//!   run the instruction's software model (tests only).
//!
//! The choice is made once per process ([`Engine::select`] at start-up,
//! else [`Engine::detect`]).

use std::sync::OnceLock;

use smallvec::SmallVec;

use aes::Aes256;
use aesd_cipher::KeySchedule;
use aesd_cipher::cbc::CbcLane;
use aesd_vexriscv::Aes256Key as VexKey;
use cbc::cipher::{Array, BlockModeDecrypt, BlockModeEncrypt, KeyIvInit};

use aesd_cipher::cbc::BLOCK;

type CbcEncryptor = cbc::Encryptor<Aes256>;
type CbcDecryptor = cbc::Decryptor<Aes256>;

/// Who executes VexRiscv's AES instruction: the CPU on riscv32, the
/// software model elsewhere (never selected there but by tests).
#[cfg(target_arch = "riscv32")]
pub type VexInsn = aesd_vexriscv::hardware::Hardware;
/// Who executes VexRiscv's AES instruction: the CPU on riscv32, the
/// software model elsewhere (never selected there but by tests).
#[cfg(not(target_arch = "riscv32"))]
pub type VexInsn = aesd_vexriscv::insn::Model;
/// Who executes the Zkne/Zknd instructions: the CPU on riscv32, the same
/// software model elsewhere (they compute what VexRiscv's instruction
/// computes; tests only).
#[cfg(target_arch = "riscv32")]
pub type ZkneInsn = aesd_vexriscv::hardware::Zkne;
/// Who executes the Zkne/Zknd instructions: the CPU on riscv32, the same
/// software model elsewhere (they compute what VexRiscv's instruction
/// computes; tests only).
#[cfg(not(target_arch = "riscv32"))]
pub type ZkneInsn = aesd_vexriscv::insn::Model;

/// Which scalar AES instructions a chain runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsnSet {
    /// VexRiscv's AesPlugin (custom-0).
    VexRiscv,
    /// Zkne/Zknd (`aes32esmi`...).
    Zkne,
}

impl InsnSet {
    /// The key expanded through these instructions.
    fn expand(self, key: &[u8; 32]) -> Box<VexKey> {
        Box::new(match self {
            InsnSet::VexRiscv => VexKey::new::<VexInsn>(key),
            InsnSet::Zkne => VexKey::new::<ZkneInsn>(key),
        })
    }

    /// CBC-encrypts the lanes through these instructions' kernels.
    fn encrypt_lanes(self, lanes: &mut [aesd_vexriscv::aes::CbcLane<'_>]) {
        match self {
            InsnSet::VexRiscv => aesd_vexriscv::aes::cbc_encrypt_lanes::<VexInsn>(lanes),
            InsnSet::Zkne => aesd_vexriscv::aes::cbc_encrypt_lanes::<ZkneInsn>(lanes),
        }
    }

    /// CBC-decrypts whole blocks through these instructions' kernels.
    fn decrypt(self, key: &VexKey, iv: &mut [u8; BLOCK], data: &mut [u8]) {
        match self {
            InsnSet::VexRiscv => aesd_vexriscv::aes::cbc_decrypt::<VexInsn>(key, iv, data),
            InsnSet::Zkne => aesd_vexriscv::aes::cbc_decrypt::<ZkneInsn>(key, iv, data),
        }
    }
}

/// The engine chosen at start-up, if one was.
static SELECTED: OnceLock<Engine> = OnceLock::new();

#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
cpufeatures::new!(cpu_aes, "aes");

/// Whether the CPU has AES instructions the `aes` crate uses.
pub fn cpu_has_aes() -> bool {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
    {
        cpu_aes::get()
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// The AES that encrypts CBC chains in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// aesd's fixsliced AES, several chains per call.
    Fixsliced,
    /// The CPU's AES instructions, chains interleaved.
    CpuAes,
    /// VexRiscv's AES instruction, one chain per kernel call.
    VexRiscv,
    /// The Zkne/Zknd instructions, one chain per kernel call.
    Zkne,
}

impl Engine {
    /// The engine of this process: the CPU's AES instructions when it has
    /// them (and the build was not told to use software AES with
    /// `--cfg aes_backend="soft"`, as the Raspberry Pi builds measured
    /// under qemu are), the fixsliced AES otherwise.
    pub fn detect() -> Engine {
        *SELECTED.get_or_init(Self::software)
    }

    /// The best engine without VexRiscv's instruction: the CPU's AES
    /// instructions if it has them, else the fixsliced AES.
    pub fn software() -> Engine {
        if cfg!(aes_backend = "soft") || !cpu_has_aes() {
            Engine::Fixsliced
        } else {
            Engine::CpuAes
        }
    }

    /// Makes `engine` this process's engine; returns the engine in use
    /// (another one if jobs already ran with it).
    pub fn select(engine: Engine) -> Engine {
        *SELECTED.get_or_init(|| engine)
    }

    /// Chains encrypted together per call.
    pub fn lanes(self) -> usize {
        match self {
            Engine::Fixsliced => aesd_cipher::LANES,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Engine::CpuAes => aesd_cipher::cpu_aes::CPU_AES_LANES,
            // No AES instructions here: never selected.
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            Engine::CpuAes => aesd_cipher::LANES,
            Engine::VexRiscv | Engine::Zkne => 2,
        }
    }

    /// A name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Fixsliced => "fixsliced",
            Engine::CpuAes => "cpu-aes",
            Engine::VexRiscv => "vexriscv",
            Engine::Zkne => "zkne",
        }
    }

    /// The scalar AES instructions of the engine, if it runs on them.
    pub fn insn_set(self) -> Option<InsnSet> {
        match self {
            Engine::VexRiscv => Some(InsnSet::VexRiscv),
            Engine::Zkne => Some(InsnSet::Zkne),
            Engine::Fixsliced | Engine::CpuAes => None,
        }
    }
}

/// One CBC encryption chain: key and chaining value.
pub enum Chain {
    /// For [`Engine::Fixsliced`].
    Fixsliced {
        /// The expanded key.
        key: Box<KeySchedule>,
        /// The chaining value.
        iv: [u8; BLOCK],
    },
    /// For [`Engine::CpuAes`] on a CPU without AES instructions (tests
    /// only): RustCrypto's `aes` crate, in its software AES.
    RustCrypto(Box<CbcEncryptor>),
    /// For [`Engine::CpuAes`]: the CPU's AES instructions (x86-64,
    /// aarch64), several chains interleaved.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    CpuAes {
        /// The expanded key.
        key: Box<aesd_cipher::cpu_aes::CpuAesKey>,
        /// The chaining value.
        iv: [u8; BLOCK],
    },
    /// For [`Engine::VexRiscv`] and [`Engine::Zkne`].
    Insn {
        /// Which instructions.
        set: InsnSet,
        /// The expanded key.
        key: Box<VexKey>,
        /// The chaining value.
        iv: [u8; BLOCK],
    },
}

impl Chain {
    /// A chain for `key` and `iv` on this process's engine.
    pub fn new(key: &[u8; 32], iv: &[u8; 16]) -> Chain {
        Self::with_engine(Engine::detect(), key, iv)
    }

    /// A chain on a given engine ([`Engine::CpuAes`] falls back to the
    /// `aes` crate's own software AES on a CPU without AES instructions).
    pub fn with_engine(engine: Engine, key: &[u8; 32], iv: &[u8; 16]) -> Chain {
        match engine {
            Engine::Fixsliced => Chain::Fixsliced {
                key: Box::new(KeySchedule::new(key)),
                iv: *iv,
            },
            Engine::CpuAes => {
                #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
                if let Some(key) = aesd_cipher::cpu_aes::CpuAesKey::new(key) {
                    return Chain::CpuAes {
                        key: Box::new(key),
                        iv: *iv,
                    };
                }
                Chain::RustCrypto(Box::new(CbcEncryptor::new(key.into(), iv.into())))
            }
            Engine::VexRiscv | Engine::Zkne => {
                let set = if engine == Engine::Zkne {
                    InsnSet::Zkne
                } else {
                    InsnSet::VexRiscv
                };
                Chain::Insn {
                    set,
                    key: set.expand(key),
                    iv: *iv,
                }
            }
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        match self {
            Chain::Fixsliced { iv, .. } | Chain::Insn { iv, .. } => zeroize::Zeroize::zeroize(iv),
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Chain::CpuAes { iv, .. } => zeroize::Zeroize::zeroize(iv),
            Chain::RustCrypto(_) => {}
        }
    }
}

/// One CBC decryption chain (whole blocks in place; the blocks of a chain
/// are independent, so every backend fills its lanes from this one).
pub enum DecryptChain {
    /// The `aes` crate: the CPU's AES instructions, or its fixsliced AES
    /// (2 or 4 blocks per call).
    Soft(Box<CbcDecryptor>),
    /// VexRiscv's AES instruction or Zkne/Zknd.
    Insn {
        /// Which instructions.
        set: InsnSet,
        /// The expanded key.
        key: Box<VexKey>,
        /// The chaining value.
        iv: [u8; BLOCK],
    },
}

impl DecryptChain {
    /// A chain for `key` and `iv` on this process's engine.
    pub fn new(key: &[u8; 32], iv: &[u8; 16]) -> DecryptChain {
        match Engine::detect().insn_set() {
            Some(set) => DecryptChain::Insn {
                set,
                key: set.expand(key),
                iv: *iv,
            },
            None => DecryptChain::Soft(Box::new(CbcDecryptor::new(key.into(), iv.into()))),
        }
    }

    /// Decrypts whole blocks in place, continuing the chain.
    pub fn decrypt(&mut self, data: &mut [u8]) {
        match self {
            DecryptChain::Soft(cipher) => {
                let (blocks, rest) = Array::slice_as_chunks_mut(data);
                debug_assert!(rest.is_empty());
                cipher.decrypt_blocks(blocks);
            }
            DecryptChain::Insn { set, key, iv } => set.decrypt(key, iv, data),
        }
    }
}

impl Drop for DecryptChain {
    fn drop(&mut self) {
        if let DecryptChain::Insn { iv, .. } = self {
            zeroize::Zeroize::zeroize(iv);
        }
    }
}

/// Continues each chain over its whole blocks, the fixsliced ones together
/// (up to [`aesd_cipher::LANES`] per call), those on the CPU's AES
/// instructions too (up to `CPU_AES_LANES`).
///
/// Allocates nothing for up to two chains on the AES instruction (the
/// lists of lanes are on the stack): it runs once per slice of every chunk.
pub fn encrypt_chains(chains: &mut [(&mut Chain, &mut [u8])]) {
    let mut lanes: SmallVec<[CbcLane<'_>; aesd_cipher::LANES]> = SmallVec::new();
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    let mut cpu_lanes: SmallVec<
        [CbcLane<'_, aesd_cipher::cpu_aes::CpuAesKey>; aesd_cipher::cpu_aes::CPU_AES_LANES],
    > = SmallVec::new();
    let mut insn_lanes: SmallVec<[aesd_vexriscv::aes::CbcLane<'_>; 2]> = SmallVec::new();
    let mut insn_set: Option<InsnSet> = None;
    for (chain, data) in chains.iter_mut() {
        match &mut **chain {
            Chain::Fixsliced { key, iv } => {
                if lanes.len() == aesd_cipher::LANES {
                    aesd_cipher::cbc::encrypt_lanes(&mut lanes);
                    lanes.clear();
                }
                lanes.push(CbcLane { key, iv, data });
            }
            Chain::RustCrypto(cipher) => {
                let (blocks, rest) = Array::slice_as_chunks_mut(data);
                debug_assert!(rest.is_empty());
                cipher.encrypt_blocks(blocks);
            }
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Chain::CpuAes { key, iv } => {
                if cpu_lanes.len() == aesd_cipher::cpu_aes::CPU_AES_LANES {
                    aesd_cipher::cpu_aes::encrypt_lanes(&mut cpu_lanes);
                    cpu_lanes.clear();
                }
                cpu_lanes.push(CbcLane { key, iv, data });
            }
            Chain::Insn { set, key, iv } => {
                if let Some(current) = insn_set.filter(|current| current != set) {
                    current.encrypt_lanes(&mut insn_lanes);
                    insn_lanes.clear();
                }
                insn_set = Some(*set);
                insn_lanes.push(aesd_vexriscv::aes::CbcLane { key, iv, data })
            }
        }
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if !cpu_lanes.is_empty() {
        aesd_cipher::cpu_aes::encrypt_lanes(&mut cpu_lanes);
    }
    if let Some(set) = insn_set {
        set.encrypt_lanes(&mut insn_lanes);
    }
    if !lanes.is_empty() {
        aesd_cipher::cbc::encrypt_lanes(&mut lanes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `aes` crate's CBC over all of `data` in one go.
    fn reference(key: &[u8; 32], iv: &[u8; 16], data: &[u8]) -> Vec<u8> {
        let mut out = data.to_vec();
        let (blocks, _) = Array::slice_as_chunks_mut(&mut out);
        CbcEncryptor::new(key.into(), iv.into()).encrypt_blocks(blocks);
        out
    }

    /// Every engine, with 1 to 5 chains of different lengths continued over
    /// two calls (so lone chains, full calls and a partial last call occur),
    /// gives the reference's ciphertext.
    #[test]
    fn every_engine_and_grouping_matches_the_reference() {
        for engine in [
            Engine::Fixsliced,
            Engine::CpuAes,
            Engine::VexRiscv,
            Engine::Zkne,
        ] {
            for count in 1..=5u8 {
                let keys: Vec<[u8; 32]> = (0..count)
                    .map(|c| core::array::from_fn(|i| (i as u8) ^ c.wrapping_mul(37)))
                    .collect();
                let ivs: Vec<[u8; 16]> = (0..count)
                    .map(|c| core::array::from_fn(|i| (i as u8).wrapping_mul(c + 3)))
                    .collect();
                let plains: Vec<Vec<u8>> = (0..count as usize)
                    .map(|c| (0..16 * (c + 2)).map(|i| (i * 13 + c) as u8).collect())
                    .collect();
                let mut chains: Vec<Chain> = keys
                    .iter()
                    .zip(&ivs)
                    .map(|(key, iv)| Chain::with_engine(engine, key, iv))
                    .collect();
                let mut outputs = plains.clone();
                // First call: one block of each chain; second: the rest.
                for part in [0..16, 16..usize::MAX] {
                    let mut calls: Vec<(&mut Chain, &mut [u8])> = chains
                        .iter_mut()
                        .zip(outputs.iter_mut())
                        .map(|(chain, out)| {
                            let end = part.end.min(out.len());
                            (chain, &mut out[part.start..end])
                        })
                        .collect();
                    encrypt_chains(&mut calls);
                }
                for c in 0..count as usize {
                    assert_eq!(
                        outputs[c],
                        reference(&keys[c], &ivs[c], &plains[c]),
                        "{} with {count} chains: chain {c}",
                        engine.name()
                    );
                }
            }
        }
    }
}
