//! A request's nonces from as few reads of the random source as it can: a
//! batch of 100 encryptions made one `getrandom` call per nonce (part of
//! the kernel's share of a batch item), and single encryptions one call
//! each (a syscall in four of a 1 KiB request's, docs/performance.md). The
//! pool fetches the bytes for many nonces at once and hands each fill the
//! next unused bytes: a byte is never handed out twice, and a pool that
//! runs out fetches fresh bytes (never reuses old ones). Each thread keeps
//! one pool across its requests ([`NoncePool::with_thread_pool`]), so no
//! two threads ever share bytes; what a pool holds is at most
//! [`MIN_FETCH`] bytes between requests. Nonces are public (every
//! ciphertext carries its own): holding the next few in memory reveals
//! nothing that the ciphertexts made with them will not.

use std::cell::RefCell;

use aesd_keyring::{Entropy, KeyringError, OsEntropy};
use zeroize::Zeroizing;

/// Bytes of one Transit nonce (AES-GCM's 96 bits).
pub const NONCE_LEN: usize = 12;

/// The fewest bytes a fetch reads (the nonces of 32 items), and the most a
/// thread's pool keeps between requests: single encryptions on one thread
/// share one read in 32.
pub const MIN_FETCH: usize = 32 * NONCE_LEN;

/// The most bytes one fetch reads (the nonces of 4096 items).
const MAX_FETCH: usize = 4096 * NONCE_LEN;

thread_local! {
    /// This thread's pool, kept between its requests.
    static THREAD_POOL: RefCell<NoncePool> = RefCell::new(NoncePool::for_items(0));
}

/// Random bytes for nonces, fetched from `S` a request's worth (at least
/// [`MIN_FETCH`]) at a time.
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

    /// Runs `run` with this thread's pool, sized for a request of `items`
    /// nonces (one read for all of them when the pool has too few left).
    /// Afterwards a pool grown beyond [`MIN_FETCH`] for a big batch drops
    /// (and wipes) its bytes, so a thread holds at most that much.
    pub fn with_thread_pool<R>(items: usize, run: impl FnOnce(&mut NoncePool) -> R) -> R {
        THREAD_POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            pool.size_for(items);
            let result = run(&mut pool);
            pool.shrink();
            result
        })
    }
}

impl<S: Entropy> NoncePool<S> {
    /// A pool for `items` nonces read from `source`.
    pub fn with_source(source: S, items: usize) -> Self {
        NoncePool {
            source,
            bytes: Zeroizing::new(Vec::new()),
            next: 0,
            fetch: fetch_for(items),
        }
    }

    /// The next fetch reads enough for `items` nonces.
    pub fn size_for(&mut self, items: usize) {
        self.fetch = fetch_for(items);
    }

    /// Drops the bytes left when there are more than [`MIN_FETCH`] of
    /// them (never handed out, wiped as they go).
    fn shrink(&mut self) {
        if self.bytes.len() > MIN_FETCH {
            self.bytes = Zeroizing::new(Vec::new());
            self.next = 0;
        }
    }
}

/// How many bytes a fetch for `items` nonces reads.
fn fetch_for(items: usize) -> usize {
    items.saturating_mul(NONCE_LEN).clamp(MIN_FETCH, MAX_FETCH)
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
        let per_read = MIN_FETCH / NONCE_LEN;
        let mut nonces = vec![0; (2 * per_read + 1) * NONCE_LEN];
        for nonce in nonces.chunks_mut(NONCE_LEN) {
            pool.fill(nonce).expect("fill");
        }
        // Three reads of MIN_FETCH bytes; every byte handed out once, in order.
        assert_eq!(pool.source.reads, 3);
        assert_eq!(nonces, stream(nonces.len()));
        // A fill larger than what is left gets fresh bytes, not the rest.
        let mut big = vec![0; MIN_FETCH];
        pool.fill(&mut big).expect("fill");
        assert_eq!(pool.source.reads, 4);
        assert_eq!(big[..], stream(4 * MIN_FETCH)[3 * MIN_FETCH..]);
    }

    #[test]
    fn single_requests_share_a_read_and_a_big_batch_s_rest_is_dropped() {
        let mut pool = NoncePool::with_source(Counter { next: 0, reads: 0 }, 0);
        let mut seen = Vec::new();
        // Request after request of one nonce, as a thread's pool serves them.
        for _ in 0..MIN_FETCH / NONCE_LEN {
            pool.size_for(1);
            let mut nonce = [0; NONCE_LEN];
            pool.fill(&mut nonce).expect("fill");
            pool.shrink();
            seen.extend_from_slice(&nonce);
        }
        assert_eq!(pool.source.reads, 1, "32 single requests, one read");
        assert_eq!(seen, stream(MIN_FETCH));
        // A batch of 100 when the pool is spent: one read for all of it.
        pool.size_for(100);
        let mut batch = vec![0; 100 * NONCE_LEN];
        for nonce in batch.chunks_mut(NONCE_LEN) {
            pool.fill(nonce).expect("fill");
        }
        assert_eq!(pool.source.reads, 2);
        assert_eq!(batch[..], stream(MIN_FETCH + 100 * NONCE_LEN)[MIN_FETCH..]);
        // 100 nonces fill the read exactly; a batch of 150 leaves more
        // than MIN_FETCH behind, which is dropped, not kept.
        pool.size_for(150);
        let mut nonce = [0; NONCE_LEN];
        pool.fill(&mut nonce).expect("fill");
        assert_eq!(pool.bytes.len(), 150 * NONCE_LEN);
        pool.shrink();
        assert!(pool.bytes.is_empty(), "a batch's rest is kept");
        pool.size_for(1);
        pool.fill(&mut nonce).expect("fill");
        assert_eq!(pool.source.reads, 4, "the next request reads fresh bytes");
        assert_eq!(
            nonce[..],
            stream(MIN_FETCH + 250 * NONCE_LEN + MIN_FETCH)[MIN_FETCH + 250 * NONCE_LEN..]
                [..NONCE_LEN]
        );
    }

    #[test]
    fn a_thread_s_pool_hands_out_distinct_nonces_across_requests() {
        let mut nonces: Vec<[u8; NONCE_LEN]> = Vec::new();
        for _ in 0..100 {
            NoncePool::with_thread_pool(1, |pool| {
                let mut nonce = [0; NONCE_LEN];
                pool.fill(&mut nonce).expect("fill");
                nonces.push(nonce);
            });
        }
        let held = THREAD_POOL.with(|pool| pool.borrow().bytes.len());
        assert!(held <= MIN_FETCH, "the thread's pool holds {held} bytes");
        let mut distinct = nonces.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), nonces.len(), "a nonce repeats");
    }
}
