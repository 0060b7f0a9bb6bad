//! Reproducible test data: a seeded pseudo-random byte stream.
//!
//! aesload sends a [`PatternSource`] and checks the decrypted result
//! against a [`Pattern`] with the same seed, so no file is ever held in
//! memory or on disk, whatever its size.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// An endless seeded byte sequence, 8 bytes per step: word `i` is
/// `z ^ (z >> 32)` with `z = base + i·γ` (SplitMix64's increment γ, odd;
/// `base` from the seed). Both steps are bijections, so no two words of
/// one sequence are equal within 2^64 words (a repeated or reordered piece
/// of output cannot go unnoticed), and each word depends only on its index,
/// with no multiplication: filling a buffer runs in SIMD registers at
/// several bytes per cycle, and aesload generates and checks every byte it
/// sends on the same cores as the server it measures. (The data need not
/// look random: AES-CBC does not care, and the check compares every byte.)
#[derive(Debug, Clone)]
pub struct Pattern {
    base: u64,
    index: u64,
    word: [u8; 8],
    used: usize,
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Pattern {
    /// The sequence for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Pattern {
            base: splitmix64(seed),
            index: 0,
            word: [0; 8],
            used: 8,
        }
    }

    /// Fills `out` with the next bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut out = out;
        // Drain the partial word first, then whole words, then a tail.
        while self.used < 8 && !out.is_empty() {
            out[0] = self.word[self.used];
            self.used += 1;
            out = &mut out[1..];
        }
        let mut words = out.chunks_exact_mut(8);
        let mut index = self.index;
        for word in &mut words {
            word.copy_from_slice(&self.word_at(index).to_le_bytes());
            index += 1;
        }
        self.index = index;
        let tail = words.into_remainder();
        if !tail.is_empty() {
            self.word = self.word_at(self.index).to_le_bytes();
            self.index += 1;
            tail.copy_from_slice(&self.word[..tail.len()]);
            self.used = tail.len();
        }
    }

    #[inline(always)]
    fn word_at(&self, index: u64) -> u64 {
        // A Weyl sequence (odd increment: a bijection of the index), then
        // x ^ x>>32 (invertible: the high half is kept and gives the low).
        let z = self.base.wrapping_add(index.wrapping_mul(GAMMA));
        z ^ (z >> 32)
    }
}

/// SplitMix64: turns a counter or seed into a well-mixed 64-bit value.
pub fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The first `len` bytes of a [`Pattern`], as an async reader.
#[derive(Debug, Clone)]
pub struct PatternSource {
    pattern: Pattern,
    remaining: u64,
}

impl PatternSource {
    /// `len` bytes of the pattern for `seed`.
    pub fn new(seed: u64, len: u64) -> Self {
        PatternSource {
            pattern: Pattern::new(seed),
            remaining: len,
        }
    }
}

impl AsyncRead for PatternSource {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(buf.remaining());
        let slot = buf.initialize_unfilled_to(n);
        self.pattern.fill(slot);
        buf.advance(n);
        self.remaining -= n as u64;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_does_not_depend_on_how_it_is_read() {
        let mut whole = vec![0u8; 1000];
        Pattern::new(7).fill(&mut whole);
        let mut pieces = vec![0u8; 1000];
        let mut pattern = Pattern::new(7);
        let mut offset = 0;
        for step in [1, 3, 8, 13, 64, 5].iter().cycle() {
            let end = (offset + step).min(1000);
            pattern.fill(&mut pieces[offset..end]);
            offset = end;
            if offset == 1000 {
                break;
            }
        }
        assert_eq!(whole, pieces);
    }

    #[test]
    fn no_word_repeats_within_a_sequence() {
        let mut bytes = vec![0u8; 8 * 65_536];
        Pattern::new(9).fill(&mut bytes);
        let mut words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
            .collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), 65_536);
    }

    #[test]
    fn seeds_give_different_data() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        Pattern::new(1).fill(&mut a);
        Pattern::new(2).fill(&mut b);
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn the_source_yields_exactly_its_length() {
        use tokio::io::AsyncReadExt;
        let mut data = Vec::new();
        PatternSource::new(3, 100_001)
            .read_to_end(&mut data)
            .await
            .expect("reads");
        assert_eq!(data.len(), 100_001);
        let mut expected = vec![0u8; 100_001];
        Pattern::new(3).fill(&mut expected);
        assert_eq!(data, expected);
    }
}
