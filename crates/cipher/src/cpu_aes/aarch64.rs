//! The ARMv8 AES kernel: the rounds of `N` CBC chains interleaved.
//!
//! `AESE` is AddRoundKey then SubBytes and ShiftRows, `AESMC` MixColumns;
//! so round `r` (1 to 13) is `AESMC(AESE(state, k[r-1]))` and the last one
//! `AESE(state, k[13]) ^ k[14]`.

use core::arch::aarch64::{uint8x16_t, vaeseq_u8, vaesmcq_u8, veorq_u8};
use core::ops::Range;

use super::CpuAesKey;
use crate::cbc::CbcLane;
use crate::fixslice::Block;

/// Round key `round` of `key` in a register.
#[inline(always)]
fn round_key(key: &CpuAesKey, round: usize) -> uint8x16_t {
    bytemuck::cast(*key.round(round))
}

/// Encrypts the blocks `range` of `N` lanes, the chains' rounds interleaved.
#[target_feature(enable = "aes")]
pub(super) fn encrypt_interleaved<const N: usize>(
    mut lanes: [&mut CbcLane<'_, CpuAesKey>; N],
    range: Range<usize>,
) {
    let keys: [&CpuAesKey; N] = lanes.each_ref().map(|lane| lane.key);
    let mut chains: [uint8x16_t; N] = lanes.each_ref().map(|lane| bytemuck::cast(*lane.iv));
    let blocks = lanes
        .each_mut()
        .map(|lane| bytemuck::cast_slice_mut::<u8, Block>(&mut lane.data[range.clone()]));
    let count = range.len() / 16;
    for b in 0..count {
        for l in 0..N {
            let plain: uint8x16_t = bytemuck::cast(blocks[l][b]);
            chains[l] = veorq_u8(plain, chains[l]);
        }
        for round in 0..13 {
            for l in 0..N {
                chains[l] = vaesmcq_u8(vaeseq_u8(chains[l], round_key(keys[l], round)));
            }
        }
        for l in 0..N {
            let last = vaeseq_u8(chains[l], round_key(keys[l], 13));
            chains[l] = veorq_u8(last, round_key(keys[l], 14));
            blocks[l][b] = bytemuck::cast(chains[l]);
        }
    }
    for (lane, chain) in lanes.iter_mut().zip(chains.iter_mut()) {
        *lane.iv = bytemuck::cast(*chain);
        *chain = bytemuck::cast([0u8; 16]);
    }
}
