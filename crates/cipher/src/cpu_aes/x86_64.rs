//! The AES-NI kernel: the rounds of `N` CBC chains interleaved.

use core::arch::x86_64::{__m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_xor_si128};
use core::ops::Range;

use super::CpuAesKey;
use crate::cbc::CbcLane;
use crate::fixslice::Block;

/// Round key `round` of `key` in a register.
#[inline(always)]
fn round_key(key: &CpuAesKey, round: usize) -> __m128i {
    bytemuck::cast(*key.round(round))
}

/// Encrypts the blocks `range` of `N` lanes, the chains' rounds interleaved.
#[target_feature(enable = "aes")]
pub(super) fn encrypt_interleaved<const N: usize>(
    mut lanes: [&mut CbcLane<'_, CpuAesKey>; N],
    range: Range<usize>,
) {
    let keys: [&CpuAesKey; N] = lanes.each_ref().map(|lane| lane.key);
    let mut chains: [__m128i; N] = lanes.each_ref().map(|lane| bytemuck::cast(*lane.iv));
    let blocks = lanes
        .each_mut()
        .map(|lane| bytemuck::cast_slice_mut::<u8, Block>(&mut lane.data[range.clone()]));
    let count = range.len() / 16;
    for b in 0..count {
        for l in 0..N {
            let plain: __m128i = bytemuck::cast(blocks[l][b]);
            chains[l] = _mm_xor_si128(_mm_xor_si128(plain, chains[l]), round_key(keys[l], 0));
        }
        for round in 1..14 {
            for l in 0..N {
                chains[l] = _mm_aesenc_si128(chains[l], round_key(keys[l], round));
            }
        }
        for l in 0..N {
            chains[l] = _mm_aesenclast_si128(chains[l], round_key(keys[l], 14));
            blocks[l][b] = bytemuck::cast(chains[l]);
        }
    }
    for (lane, chain) in lanes.iter_mut().zip(chains.iter_mut()) {
        *lane.iv = bytemuck::cast(*chain);
        *chain = bytemuck::cast([0u8; 16]);
    }
}
