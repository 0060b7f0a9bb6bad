//! A request's nonces from one read of the random source: a batch of 100
//! encryptions made one `getrandom` call per nonce (part of the kernel's
//! share of a batch item, docs/performance.md). The pool fetches the
//! bytes for all of a request's nonces at once and hands each fill the
//! next unused bytes: a byte is never handed out twice, and a pool that
//! runs out fetches fresh bytes (never reuses old ones).

use aesd_keyring::{Entropy, KeyringError, OsEntropy};
use zeroize::Zeroizing;

/// Bytes of one Transit nonce (AES-GCM's 96 bits).
pub const NONCE_LEN: usize = 12;

/// The most bytes one fetch reads (the nonces of 4096 items).
const MAX_FETCH: usize = 4096 * NONCE_LEN;

/// Random bytes for a request's nonces, fetched from `S` in one read.
#[derive(Debug)]
pub struct NoncePool<S: Entropy = OsEntropy> {
    source: S,
    bytes: Zeroizing<Vec<u8>>,
    /// The first byte not yet handed out.
    next: usize,
    /// How many bytes the next fetch reads.
    fetch: usize,
}

impl NoncePool<OsEntropy> {
    /// A pool for `items` nonces from the operating system's CSPRNG
    /// (nothing is read until the first fill).
    pub fn for_items(items: usize) -> Self {
        NoncePool::with_source(OsEntropy, items)
    }
}

impl<S: Entropy> NoncePool<S> {
    /// A pool for `items` nonces read from `source`.
    pub fn with_source(source: S, items: usize) -> Self {
        NoncePool {
            source,
            bytes: Zeroizing::new(Vec::new()),
            next: 0,
            fetch: items.saturating_mul(NONCE_LEN).clamp(NONCE_LEN, MAX_FETCH),
        }
    }
}

impl<S: Entropy> Entropy for NoncePool<S> {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
        if self.bytes.len() - self.next < out.len() {
            let mut fresh = Zeroizing::new(vec![0; self.fetch.max(out.len())]);
            self.source.fill(&mut fresh)?;
            self.bytes = fresh;
            self.next = 0;
        }
        let end = self.next + out.len();
        out.copy_from_slice(&self.bytes[self.next..end]);
        self.next = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source whose bytes are a counter (so every byte's place in the
    /// stream is known), counting its reads.
    struct Counter {
        next: u32,
        reads: usize,
    }

    impl Entropy for Counter {
        fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
            self.reads += 1;
            for byte in out.chunks_mut(4) {
                byte.copy_from_slice(&self.next.to_be_bytes()[..byte.len()]);
                self.next += 1;
            }
            Ok(())
        }
    }

    fn stream(bytes: usize) -> Vec<u8> {
        let mut all = vec![0; bytes];
        Counter { next: 0, reads: 0 }
            .fill(&mut all)
            .expect("counter");
        all
    }

    #[test]
    fn a_batch_s_nonces_are_disjoint_slices_of_one_read() {
        let mut pool = NoncePool::with_source(Counter { next: 0, reads: 0 }, 100);
        let nonces: Vec<[u8; NONCE_LEN]> = (0..100)
            .map(|_| {
                let mut nonce = [0; NONCE_LEN];
                pool.fill(&mut nonce).expect("fill");
                nonce
            })
            .collect();
        assert_eq!(pool.source.reads, 1, "one read for the batch");
        let all = stream(100 * NONCE_LEN);
        for (index, nonce) in nonces.iter().enumerate() {
            assert_eq!(
                nonce[..],
                all[index * NONCE_LEN..(index + 1) * NONCE_LEN],
                "nonce {index} is not the {index}th slice of the read"
            );
        }
        let mut distinct = nonces.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), nonces.len(), "a nonce repeats");
    }

    #[test]
    fn an_exhausted_pool_reads_fresh_bytes() {
        let mut pool = NoncePool::with_source(Counter { next: 0, reads: 0 }, 2);
        let mut nonces = vec![0; 5 * NONCE_LEN];
        for nonce in nonces.chunks_mut(NONCE_LEN) {
            pool.fill(nonce).expect("fill");
        }
        // Three reads of 24 bytes; every byte handed out once, in order.
        assert_eq!(pool.source.reads, 3);
        assert_eq!(nonces, stream(5 * NONCE_LEN));
        // A fill larger than the pool's fetch still gets fresh bytes.
        let mut big = [0; 3 * NONCE_LEN];
        pool.fill(&mut big).expect("fill");
        assert_eq!(big[..], stream(9 * NONCE_LEN)[6 * NONCE_LEN..]);
    }
}
