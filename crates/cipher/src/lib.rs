//! aesd's cipher core, `no_std` and without allocation (the `alloc`
//! feature only adds constructors of heap-backed chunk buffers): what a
//! board runs per byte.
//!
//! It depends on no other aesd crate: `zeroize`, `bytemuck` and, on x86-64
//! and aarch64, `cpufeatures`; with the `kdf` feature also `pbkdf2`,
//! `hmac` and `sha2`.
//!
//! # Layout
//!
//! * [`fixslice`]: constant-time fixsliced AES-256 encryption whose lanes
//!   (2 on 32-bit targets, 4 on 64-bit) carry different keys: the blocks
//!   of several independent CBC chains are encrypted in one call.
//! * [`cbc`]: CBC encryption of up to [`LANES`] chains at once
//!   ([`cbc::encrypt_lanes`]), each with its own key, IV and data. On
//!   riscv32 its loop over aligned words is one assembly function
//!   (`cbc::rv32`), written by the crate's build script (`build/`) from
//!   the same circuits: the board's software path.
//! * [`stream`]: the `openssl enc -salt` file format over chunks of any
//!   size (carried partial blocks, the held-back last block, PKCS#7
//!   padding, the `Salted__` header) and [`stream::ChunkBuf`], the
//!   in-place chunk buffer: whatever AES runs the CBC chain.
//! * `kdf` (feature `kdf`): the format's key derivation, PBKDF2-HMAC-SHA256
//!   to an AES-256 key and CBC IV as `openssl enc -pbkdf2` derives them.
//! * `cpu_aes` (x86-64 and aarch64 only): the same multi-lane CBC with the
//!   CPU's AES instructions (AES-NI, ARMv8's AES extension), the rounds of
//!   up to 4 chains interleaved (development machines and servers).
//!
//! The crate's only `unsafe` code: the calls into `cpu_aes`'s kernels (each
//! guarded by the CPU check) and into the riscv32 kernel (`cbc::rv32`:
//! raw pointers to the buffers its safe wrapper borrows).
//!
//! Why it exists: CBC encryption is serial within a file, so a bitsliced
//! AES that works on several blocks per call wastes all but one lane on a
//! single chain. aesd's server encrypts the chains of concurrent jobs
//! together (its lane engine) through [`cbc::encrypt_lanes`].
#![cfg_attr(not(test), no_std)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod cbc;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod cpu_aes;
pub mod fixslice;
#[cfg(feature = "kdf")]
pub mod kdf;
pub mod stream;

pub use fixslice::{Block, KeySchedule, LANES};
