//! CBC encryption of several chains at once with x86-64's AES instructions
//! (AES-NI), each chain with its own key.
//!
//! One CBC chain is serial: each block waits for the previous ciphertext,
//! so a single chain runs at the latency of `aesenc` (3–4 cycles a round on
//! current cores) while the unit could start one or two rounds every
//! cycle. [`encrypt_lanes`] interleaves the rounds of up to
//! [`AESNI_LANES`] independent chains (the blocks of concurrent jobs, as
//! the server's lane engine hands them over), so their latencies overlap.
//! The instructions take the same time whatever the data and key: constant
//! time, like the fixsliced AES of the boards.
//!
//! # Unsafe code
//!
//! The kernels are `#[target_feature(enable = "aes")]` functions; calling
//! one is `unsafe` because on a CPU without AES-NI it would execute illegal
//! instructions. An [`AesniKey`] is only ever made after the CPU was found
//! to have them ([`AesniKey::new`] returns `None` otherwise), and every call
//! into a kernel goes through a key, so each of the two `unsafe` blocks
//! below rests on that one check. No pointer is used: blocks move between
//! byte arrays and registers by value (`bytemuck::cast`).
#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_aeskeygenassist_si128, _mm_shuffle_epi32,
    _mm_slli_si128, _mm_xor_si128,
};

use zeroize::Zeroize;

use crate::cbc::{BLOCK, CbcLane};
use crate::fixslice::Block;

cpufeatures::new!(cpu_aesni, "aes", "sse2");

/// Chains encrypted together per call.
pub const AESNI_LANES: usize = 4;

/// AES-256's 15 round keys, for the CPU's instructions.
pub struct AesniKey {
    round_keys: [Block; 15],
}

impl Drop for AesniKey {
    fn drop(&mut self) {
        self.round_keys.zeroize();
    }
}

impl AesniKey {
    /// Expands `key`, or `None` if this CPU has no AES instructions (the
    /// caller then uses a software AES).
    pub fn new(key: &[u8; 32]) -> Option<Self> {
        if !cpu_aesni::get() {
            return None;
        }
        // SAFETY: the CPU has AES-NI (checked just above), the only
        // requirement of a `target_feature(enable = "aes")` function.
        let round_keys = unsafe { expand_key(key) };
        Some(AesniKey { round_keys })
    }

    #[inline(always)]
    fn round(&self, round: usize) -> __m128i {
        bytemuck::cast(self.round_keys[round])
    }
}

/// `x ^ x<<32 ^ x<<64 ^ x<<96`: the running XOR of a round key's words.
#[target_feature(enable = "sse2")]
fn spread_words(x: __m128i) -> __m128i {
    let mut x = x;
    let mut shifted = x;
    for _ in 0..3 {
        shifted = _mm_slli_si128::<4>(shifted);
        x = _mm_xor_si128(x, shifted);
    }
    x
}

/// The next even round key: `previous_even`'s words chained, XOR the
/// rotated, substituted last word of `previous_odd` and the round constant.
#[target_feature(enable = "aes")]
fn next_even<const RCON: i32>(previous_even: __m128i, previous_odd: __m128i) -> __m128i {
    let assist = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<RCON>(previous_odd));
    _mm_xor_si128(spread_words(previous_even), assist)
}

/// The next odd round key: `previous_odd`'s words chained, XOR the
/// substituted (not rotated) last word of `even`.
#[target_feature(enable = "aes")]
fn next_odd(previous_odd: __m128i, even: __m128i) -> __m128i {
    let assist = _mm_shuffle_epi32::<0xaa>(_mm_aeskeygenassist_si128::<0>(even));
    _mm_xor_si128(spread_words(previous_odd), assist)
}

/// AES-256 key expansion (FIPS-197 5.2) with `aeskeygenassist`.
#[target_feature(enable = "aes")]
fn expand_key(key: &[u8; 32]) -> [Block; 15] {
    let [low, high]: [Block; 2] = bytemuck::cast(*key);
    let mut keys: [__m128i; 15] = [bytemuck::cast(low); 15];
    keys[1] = bytemuck::cast(high);
    keys[2] = next_even::<0x01>(keys[0], keys[1]);
    keys[3] = next_odd(keys[1], keys[2]);
    keys[4] = next_even::<0x02>(keys[2], keys[3]);
    keys[5] = next_odd(keys[3], keys[4]);
    keys[6] = next_even::<0x04>(keys[4], keys[5]);
    keys[7] = next_odd(keys[5], keys[6]);
    keys[8] = next_even::<0x08>(keys[6], keys[7]);
    keys[9] = next_odd(keys[7], keys[8]);
    keys[10] = next_even::<0x10>(keys[8], keys[9]);
    keys[11] = next_odd(keys[9], keys[10]);
    keys[12] = next_even::<0x20>(keys[10], keys[11]);
    keys[13] = next_odd(keys[11], keys[12]);
    keys[14] = next_even::<0x40>(keys[12], keys[13]);
    let mut out = [[0u8; 16]; 15];
    for (slot, key) in out.iter_mut().zip(keys.iter_mut()) {
        *slot = bytemuck::cast(*key);
        *key = bytemuck::cast([0u8; 16]);
    }
    out
}

/// Encrypts the blocks `range` of `N` lanes, the chains' rounds interleaved.
#[target_feature(enable = "aes")]
fn encrypt_interleaved<const N: usize>(
    mut lanes: [&mut CbcLane<'_, AesniKey>; N],
    range: core::ops::Range<usize>,
) {
    let keys: [&AesniKey; N] = lanes.each_ref().map(|lane| lane.key);
    let mut chains: [__m128i; N] = lanes.each_ref().map(|lane| bytemuck::cast(*lane.iv));
    let blocks = lanes
        .each_mut()
        .map(|lane| bytemuck::cast_slice_mut::<u8, Block>(&mut lane.data[range.clone()]));
    let count = range.len() / BLOCK;
    for b in 0..count {
        for l in 0..N {
            let plain: __m128i = bytemuck::cast(blocks[l][b]);
            chains[l] = _mm_xor_si128(_mm_xor_si128(plain, chains[l]), keys[l].round(0));
        }
        for round in 1..14 {
            for l in 0..N {
                chains[l] = _mm_aesenc_si128(chains[l], keys[l].round(round));
            }
        }
        for l in 0..N {
            chains[l] = _mm_aesenclast_si128(chains[l], keys[l].round(14));
            blocks[l][b] = bytemuck::cast(chains[l]);
        }
    }
    for (lane, chain) in lanes.iter_mut().zip(chains.iter_mut()) {
        *lane.iv = bytemuck::cast(*chain);
        *chain = bytemuck::cast([0u8; 16]);
    }
}

/// Encrypts up to [`AESNI_LANES`] chains together, each with its own key,
/// IV (continued: the last ciphertext block on return) and data (whole
/// blocks, lanes may differ in length: the busy lanes run together until
/// the shortest is done, then the others go on with fewer lanes).
///
/// # Panics
/// If more than [`AESNI_LANES`] lanes are given or a lane's data is not a
/// multiple of 16 bytes (callers hand over whole blocks only).
pub fn encrypt_lanes(lanes: &mut [CbcLane<'_, AesniKey>]) {
    assert!(lanes.len() <= AESNI_LANES, "more chains than lanes");
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
        let slots: [Option<&mut CbcLane<'_, AesniKey>>; AESNI_LANES] =
            core::array::from_fn(|_| busy.next());
        let range = done..shortest;
        // SAFETY: every lane carries an `AesniKey`, which exists only if the
        // CPU has AES-NI (`AesniKey::new`).
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
