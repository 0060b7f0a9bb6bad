//! CBC encryption of several chains at once with the CPU's AES
//! instructions (x86-64's AES-NI, ARMv8's AES extension), each chain with
//! its own key.
//!
//! One CBC chain is serial: each block waits for the previous ciphertext,
//! so a single chain runs at the latency of the AES round instruction (3–4
//! cycles on current cores) while the unit could start one or two rounds
//! every cycle. [`encrypt_lanes`] interleaves the rounds of up to
//! [`CPU_AES_LANES`] independent chains (the blocks of concurrent jobs, as
//! the server's lane engine hands them over), so their latencies overlap.
//! The instructions take the same time whatever the data and key: constant
//! time, like the fixsliced AES of the boards.
//!
//! # Layout
//!
//! * this module: the expanded key ([`CpuAesKey`], made only on a CPU that
//!   has the instructions), and the grouping of lanes of unequal length;
//! * `x86_64` / `aarch64`: the kernel of each architecture, the rounds of
//!   `N` chains interleaved.
//!
//! # Unsafe code
//!
//! The kernels are `#[target_feature(enable = "aes")]` functions; calling
//! one is `unsafe` because on a CPU without the instructions it would
//! execute illegal instructions. A [`CpuAesKey`] is only ever made after
//! the CPU was found to have them ([`CpuAesKey::new`] returns `None`
//! otherwise), and every call into a kernel goes through keys, so the one
//! `unsafe` block of [`encrypt_lanes`] rests on that check. No pointer is
//! used: blocks move between byte arrays and registers by value
//! (`bytemuck::cast`).
#![allow(unsafe_code)]

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
use aarch64::encrypt_interleaved;
#[cfg(target_arch = "x86_64")]
use x86_64::encrypt_interleaved;

use zeroize::Zeroize;

use crate::cbc::{BLOCK, CbcLane};
use crate::fixslice::Block;

#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpu_aes, "aes", "sse2");
#[cfg(target_arch = "aarch64")]
cpufeatures::new!(cpu_aes, "aes");

/// Chains encrypted together per call.
pub const CPU_AES_LANES: usize = 4;

/// AES-256's 15 round keys (FIPS-197 byte order), for the CPU's
/// instructions.
pub struct CpuAesKey {
    round_keys: [Block; 15],
}

impl Drop for CpuAesKey {
    fn drop(&mut self) {
        self.round_keys.zeroize();
    }
}

impl CpuAesKey {
    /// Expands `key` (with the fixsliced AES's constant-time S-box), or
    /// `None` if this CPU has no AES instructions (the caller then uses a
    /// software AES).
    pub fn new(key: &[u8; 32]) -> Option<Self> {
        cpu_aes::get().then(|| CpuAesKey {
            round_keys: crate::fixslice::expand(key),
        })
    }

    /// Round key `round` (0 to 14).
    #[inline(always)]
    fn round(&self, round: usize) -> &Block {
        &self.round_keys[round]
    }
}

/// Encrypts up to [`CPU_AES_LANES`] chains together, each with its own
/// key, IV (continued: the last ciphertext block on return) and data (whole
/// blocks; lanes may differ in length: the busy lanes run together until
/// the shortest is done, then the others go on with fewer lanes).
///
/// # Panics
/// If more than [`CPU_AES_LANES`] lanes are given or a lane's data is not
/// a multiple of 16 bytes (callers hand over whole blocks only).
pub fn encrypt_lanes(lanes: &mut [CbcLane<'_, CpuAesKey>]) {
    assert!(lanes.len() <= CPU_AES_LANES, "more chains than lanes");
    assert!(
        lanes.iter().all(|lane| lane.data.len() % BLOCK == 0),
        "CBC data must be whole blocks"
    );
    let mut done = 0;
    loop {
        let Some(shortest) = lanes
            .iter()
            .map(|lane| lane.data.len())
            .filter(|&len| len > done)
            .min()
        else {
            return;
        };
        let mut busy = lanes.iter_mut().filter(|lane| lane.data.len() > done);
        let slots: [Option<&mut CbcLane<'_, CpuAesKey>>; CPU_AES_LANES] =
            core::array::from_fn(|_| busy.next());
        let range = done..shortest;
        // SAFETY: every lane carries a `CpuAesKey`, which exists only if the
        // CPU has the AES instructions (`CpuAesKey::new`).
        unsafe {
            match slots {
                [Some(a), None, None, None] => encrypt_interleaved([a], range),
                [Some(a), Some(b), None, None] => encrypt_interleaved([a, b], range),
                [Some(a), Some(b), Some(c), None] => encrypt_interleaved([a, b, c], range),
                [Some(a), Some(b), Some(c), Some(d)] => encrypt_interleaved([a, b, c, d], range),
                _ => {}
            }
        }
        done = shortest;
    }
}
