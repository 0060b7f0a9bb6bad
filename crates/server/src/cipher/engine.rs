//! Which AES runs a job's CBC encryption, and several chains at once.
//!
//! * [`Engine::Fixsliced`]: aesd's own constant-time fixsliced AES-256
//!   (`aesd-cipher`), which encrypts up to [`aesd_cipher::LANES`] chains
//!   with different keys in one call: the boards (rv32 and rv64 cores
//!   without AES instructions, the Raspberry Pi 4's Cortex-A72).
//! * [`Engine::Hardware`]: the CPU's AES instructions through the `aes`
//!   crate (AES-NI, ARMv8 crypto), one chain after the other: development
//!   machines and servers, where they are many times faster than any
//!   software AES.
//!
//! The choice is made once per process ([`Engine::detect`]).

use std::sync::OnceLock;

use aes::Aes256;
use aesd_cipher::KeySchedule;
use aesd_cipher::cbc::CbcLane;
use cbc::cipher::{Array, BlockModeEncrypt, KeyIvInit};

use super::BLOCK;

type CbcEncryptor = cbc::Encryptor<Aes256>;

#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
cpufeatures::new!(cpu_aes, "aes");

/// Whether the CPU has AES instructions the `aes` crate uses.
fn cpu_has_aes() -> bool {
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
    /// The CPU's AES instructions, one chain at a time.
    Hardware,
}

impl Engine {
    /// The engine of this process: the CPU's AES instructions when it has
    /// them (and the build was not told to use software AES with
    /// `--cfg aes_backend="soft"`, as the Raspberry Pi builds measured
    /// under qemu are), the fixsliced AES otherwise.
    pub fn detect() -> Engine {
        static ENGINE: OnceLock<Engine> = OnceLock::new();
        *ENGINE.get_or_init(|| {
            if cfg!(aes_backend = "soft") || !cpu_has_aes() {
                Engine::Fixsliced
            } else {
                Engine::Hardware
            }
        })
    }

    /// Chains encrypted together per call.
    pub fn lanes(self) -> usize {
        match self {
            Engine::Fixsliced => aesd_cipher::LANES,
            // One at a time; the lane engine still groups them (harmless).
            Engine::Hardware => aesd_cipher::LANES,
        }
    }

    /// A name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Fixsliced => "fixsliced",
            Engine::Hardware => "cpu-aes",
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
    /// For [`Engine::Hardware`].
    Hardware(Box<CbcEncryptor>),
}

impl Chain {
    /// A chain for `key` and `iv` on this process's engine.
    pub fn new(key: &[u8; 32], iv: &[u8; 16]) -> Chain {
        Self::with_engine(Engine::detect(), key, iv)
    }

    /// A chain on a given engine ([`Engine::Hardware`] falls back to the
    /// `aes` crate's own software AES on a CPU without AES instructions).
    pub fn with_engine(engine: Engine, key: &[u8; 32], iv: &[u8; 16]) -> Chain {
        match engine {
            Engine::Fixsliced => Chain::Fixsliced {
                key: Box::new(KeySchedule::new(key)),
                iv: *iv,
            },
            Engine::Hardware => Chain::Hardware(Box::new(CbcEncryptor::new(key.into(), iv.into()))),
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if let Chain::Fixsliced { iv, .. } = self {
            zeroize::Zeroize::zeroize(iv);
        }
    }
}

/// Continues each chain over its whole blocks, the fixsliced ones together
/// (up to [`aesd_cipher::LANES`] per call).
pub fn encrypt_chains(chains: &mut [(&mut Chain, &mut [u8])]) {
    let mut lanes: Vec<CbcLane<'_>> = Vec::with_capacity(aesd_cipher::LANES);
    for (chain, data) in chains.iter_mut() {
        match &mut **chain {
            Chain::Fixsliced { key, iv } => {
                if lanes.len() == aesd_cipher::LANES {
                    aesd_cipher::cbc::encrypt_lanes(&mut lanes);
                    lanes.clear();
                }
                lanes.push(CbcLane { key, iv, data });
            }
            Chain::Hardware(cipher) => {
                let (blocks, rest) = Array::slice_as_chunks_mut(data);
                debug_assert!(rest.is_empty());
                cipher.encrypt_blocks(blocks);
            }
        }
    }
    if !lanes.is_empty() {
        aesd_cipher::cbc::encrypt_lanes(&mut lanes);
    }
}
