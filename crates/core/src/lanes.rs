//! The lane engine: CBC encryption of several jobs at once on one thread.
//!
//! CBC encryption is serial within a file (each block needs the previous
//! ciphertext), but the software AES works on several blocks per call (2 on
//! 32-bit targets, 4 on 64-bit) and an AES instruction has a result latency
//! that a second, independent chain hides. So chunks of *different* jobs
//! are encrypted together, one job per lane, in the submit/flush style of
//! multi-buffer crypto libraries:
//!
//! * a job's encryption is a [`Feed`]: its CBC chain (anything that is a
//!   [`LaneChain`]) and the chunks it submitted, in order. A feed whose
//!   chain is free and that has a chunk is queued (the server's worker
//!   pool; the in-memory driver's queue, [`crate::memory`]); whoever takes
//!   it starts an engine run ([`run`]);
//! * the engine encrypts all busy lanes together, [`SLICE_BYTES`] at a
//!   time (or less, for the shortest remaining chunk), and between slices
//!   fills free lanes with feeds queued meanwhile;
//! * a lane whose chunk is done hands it back to its job at once (the
//!   feed's done chunks, and its waker) and, when nothing else waits in the
//!   queue, goes on with the job's next chunk if the job has submitted it:
//!   a job that keeps its chunks coming keeps its lane, without a round
//!   trip through its driver for every chunk (which left the other lane
//!   alone meanwhile). When something else waits (another feed, other
//!   work), the lane gives the chain back and the job's next chunk queues
//!   behind it;
//! * a lone job runs alone: nothing ever waits for a partner, so no job
//!   waits longer than one slice to join, and a job that arrives when all
//!   lanes are busy waits at most until a lane's chunk is done.
//!
//! Fairness with other work (decryption, key derivation): the engine only
//! takes feeds queued *before* the oldest waiting other work
//! ([`LaneQueue::take_feeds`]), and a lane goes on with its job only while
//! the queue is empty, so other work waits at most for the lanes already
//! running to finish their chunks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::chunk::ChunkBuf;
use crate::engine::{Chain, encrypt_chains};

/// Bytes each lane encrypts between two looks at the queue: small enough
/// that a new job joins quickly (about 2.6 ms of a 100 MHz core for two
/// lanes in software), large enough that looking costs nothing measurable.
pub const SLICE_BYTES: usize = 2048;

/// A CBC chain as the lane engine takes it: chunks are readied in order
/// ([`LaneChain::begin_chunk`]), then their whole blocks continue the chain.
pub trait LaneChain: Send {
    /// Readies `buf` (the bytes carried from the chunk before in front, a
    /// partial last block carried to the next): afterwards it is whole
    /// blocks of plaintext. Called once per chunk, in order, when the
    /// chunk takes a lane.
    fn begin_chunk(&mut self, buf: &mut ChunkBuf);

    /// The chain the readied bytes continue.
    fn chain(&mut self) -> &mut Chain;
}

impl LaneChain for crate::openssl_enc::EncryptStream {
    fn begin_chunk(&mut self, buf: &mut ChunkBuf) {
        crate::openssl_enc::EncryptStream::begin_chunk(self, buf);
    }

    fn chain(&mut self) -> &mut Chain {
        crate::openssl_enc::EncryptStream::chain(self)
    }
}

/// Called when a feed has encrypted chunks to hand back (or lost its chain):
/// wakes the job's driver.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// A job's encryption as the engine takes it: its CBC chain, when no lane
/// holds it, the chunks submitted and not yet begun, in order, and the
/// chunks encrypted and not yet taken back.
pub struct Feed<C> {
    state: Mutex<FeedState<C>>,
    waker: Option<Waker>,
}

struct FeedState<C> {
    /// The chain, at home; `None` while a lane holds it.
    chain: Option<C>,
    /// Chunks submitted, not begun.
    pending: VecDeque<ChunkBuf>,
    /// Chunks encrypted, in order, not yet taken back.
    done: Vec<ChunkBuf>,
    /// The feed waits in the queue (and must not be queued twice).
    queued: bool,
    /// A lane holding the chain was lost (a panic): the job's chunks will
    /// not all come back.
    lost: bool,
}

impl<C> std::fmt::Debug for Feed<C> {
    /// The feed's shape only: it holds keys and plaintext.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed").finish_non_exhaustive()
    }
}

/// A lane holding a feed's chain was lost (a panic in the engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the lane engine lost a job's encryption (a worker panicked)")]
pub struct LaneLost;

impl<C: LaneChain> Feed<C> {
    /// A feed for `chain`; `waker` is called whenever encrypted chunks are
    /// ready to take back ([`Feed::take_done`]).
    pub fn new(chain: C, waker: Option<Waker>) -> Feed<C> {
        Feed {
            state: Mutex::new(FeedState {
                chain: Some(chain),
                pending: VecDeque::new(),
                done: Vec::new(),
                queued: false,
                lost: false,
            }),
            waker,
        }
    }

    fn state(&self) -> MutexGuard<'_, FeedState<C>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a chunk; true when the feed must now be queued (its chain is
    /// at home and it was not queued yet).
    pub fn push(&self, buf: ChunkBuf) -> bool {
        let mut state = self.state();
        state.pending.push_back(buf);
        let queue = state.chain.is_some() && !state.queued && !state.lost;
        state.queued |= queue;
        queue
    }

    /// The chunks encrypted since the last call, in order; an error once a
    /// lane holding the chain was lost.
    pub fn take_done(&self) -> Result<Vec<ChunkBuf>, LaneLost> {
        let mut state = self.state();
        if state.lost {
            return Err(LaneLost);
        }
        Ok(std::mem::take(&mut state.done))
    }

    /// The chain, once no lane holds it.
    pub fn take_chain(&self) -> Option<C> {
        self.state().chain.take()
    }

    /// Drops the chunks not begun (the job gave up).
    pub fn abandon(&self) {
        self.state().pending.clear();
    }

    fn wake(&self) {
        if let Some(waker) = &self.waker {
            waker();
        }
    }
}

/// How full the lanes were: `used / offered` (of every lane) and
/// `used / fillable` (of the lanes the jobs with data could fill).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LaneCounts {
    /// Blocks encrypted.
    pub used_blocks: u64,
    /// Blocks that could have been encrypted in the same calls had every
    /// lane been busy (calls × lanes × blocks per lane).
    pub offered_blocks: u64,
    /// Blocks that could have been encrypted in the same calls had every
    /// encryption job with data had a lane of this engine, as far as the
    /// lanes go: per call, the jobs with data (see [`Backlog`]) less those
    /// in other engines' lanes, at most every lane, at least the lanes
    /// busy.
    pub fillable_blocks: u64,
}

impl LaneCounts {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: LaneCounts) {
        self.used_blocks += other.used_blocks;
        self.offered_blocks += other.offered_blocks;
        self.fillable_blocks += other.fillable_blocks;
    }
}

/// What all engines (the workers) and all encryption jobs share, for the
/// fillable lanes: the jobs with data and the lanes busy.
#[derive(Debug, Default)]
pub struct LaneLoad {
    /// Encryption jobs with chunks read from their clients and not yet
    /// encrypted (see [`Backlog`]).
    loaded: AtomicUsize,
    /// Lanes busy in all engines together.
    in_lanes: AtomicUsize,
}

impl LaneLoad {
    /// Encryption jobs with data now.
    pub fn jobs_with_data(&self) -> usize {
        self.loaded.load(Ordering::Relaxed)
    }

    /// Lanes busy in all engines now.
    pub fn lanes_busy(&self) -> usize {
        self.in_lanes.load(Ordering::Relaxed)
    }

    /// The counts of one call of an engine with `busy` of its `max_lanes`
    /// lanes busy, `blocks` blocks each.
    fn count_call(&self, busy: usize, max_lanes: usize, blocks: u64) -> LaneCounts {
        let present = self.loaded.load(Ordering::Relaxed);
        let elsewhere = self.in_lanes.load(Ordering::Relaxed).saturating_sub(busy);
        let fillable = present
            .saturating_sub(elsewhere)
            .clamp(busy, max_lanes.max(busy));
        LaneCounts {
            used_blocks: blocks * busy as u64,
            offered_blocks: blocks * max_lanes as u64,
            fillable_blocks: blocks * fillable as u64,
        }
    }
}

/// An encryption's chunks read from its client and not yet encrypted.
/// While it has any, the job has data: it could fill a lane, and an
/// engine call without it leaves a lane empty that it could have filled
/// (counted in [`LaneCounts::fillable_blocks`]). A job whose client is slow
/// to send has none meanwhile, and its empty lane counts against nobody.
#[derive(Debug)]
pub struct Backlog {
    load: Arc<LaneLoad>,
    chunks: usize,
}

impl Backlog {
    /// The backlog of one encryption job, empty.
    pub fn new(load: Arc<LaneLoad>) -> Backlog {
        Backlog { load, chunks: 0 }
    }

    /// A chunk was read from the client.
    pub fn read(&mut self) {
        if self.chunks == 0 {
            self.load.loaded.fetch_add(1, Ordering::Relaxed);
        }
        self.chunks += 1;
    }

    /// A chunk came back encrypted.
    pub fn encrypted(&mut self) {
        if self.chunks == 1 {
            self.load.loaded.fetch_sub(1, Ordering::Relaxed);
        }
        self.chunks = self.chunks.saturating_sub(1);
    }
}

impl Drop for Backlog {
    fn drop(&mut self) {
        if self.chunks > 0 {
            self.load.loaded.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The queue of feeds (and other work) as the engine sees it.
pub trait LaneQueue<C> {
    /// Up to `max` feeds from the front of the queue, stopping at the
    /// first other work (it has waited longer than anything behind it).
    fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed<C>>>;
    /// Whether anything waits in the queue.
    fn others_waiting(&mut self) -> bool;
    /// Queues `feed` again, at the back.
    fn requeue(&mut self, feed: Arc<Feed<C>>);
}

/// One occupied lane: a job's chain and its current chunk.
struct Lane<C: LaneChain> {
    feed: Arc<Feed<C>>,
    /// The chain; `None` only once handed back (see `Drop`).
    chain: Option<C>,
    /// The chunk being encrypted.
    chunk: Option<ChunkBuf>,
    /// Bytes of the chunk encrypted so far.
    done: usize,
}

/// What a lane does once its chunk is done.
enum Next<C> {
    /// Go on with the job's next chunk.
    Continue,
    /// Give the chain back; the feed must be queued again if set.
    Release(Option<Arc<Feed<C>>>),
}

impl<C: LaneChain> Lane<C> {
    /// The lane of a queued feed: its chain and first pending chunk.
    fn take(feed: Arc<Feed<C>>) -> Option<Lane<C>> {
        let mut state = feed.state();
        state.queued = false;
        let mut buf = state.pending.pop_front()?;
        let Some(mut chain) = state.chain.take() else {
            state.pending.push_front(buf);
            return None;
        };
        chain.begin_chunk(&mut buf);
        drop(state);
        Some(Lane {
            feed,
            chain: Some(chain),
            chunk: Some(buf),
            done: 0,
        })
    }

    fn remaining(&self) -> usize {
        self.chunk.as_ref().map_or(0, |buf| buf.len() - self.done)
    }

    /// The chain and the part of the chunk to encrypt next (`len` bytes).
    fn slice(&mut self, len: usize) -> Option<(&mut Chain, &mut [u8])> {
        let range = self.done..self.done + len;
        self.done += len;
        let buf = self.chunk.as_mut()?;
        Some((self.chain.as_mut()?.chain(), &mut buf.as_mut_slice()[range]))
    }

    /// Hands the finished chunk back; then either begins the job's next
    /// chunk in this lane (`keep` and one is pending) or gives the chain
    /// back (queuing the feed again if chunks are pending).
    fn finish(&mut self, keep: bool) -> Next<C> {
        let finished = self.chunk.take();
        let mut state = self.feed.state();
        let next = match state.pending.pop_front() {
            Some(mut buf) if keep => {
                if let Some(chain) = self.chain.as_mut() {
                    chain.begin_chunk(&mut buf);
                }
                self.chunk = Some(buf);
                self.done = 0;
                Next::Continue
            }
            other => {
                if let Some(pending) = other {
                    state.pending.push_front(pending);
                }
                state.chain = self.chain.take();
                let requeue = !state.pending.is_empty() && !state.queued;
                state.queued |= requeue;
                Next::Release(requeue.then(|| Arc::clone(&self.feed)))
            }
        };
        if let Some(buf) = finished {
            state.done.push(buf);
        }
        drop(state);
        self.feed.wake();
        next
    }
}

impl<C: LaneChain> Drop for Lane<C> {
    /// A lane dropped with the chain still in it (a panic in the engine):
    /// the job's chunks will never all come back, so it is told.
    fn drop(&mut self) {
        if self.chain.is_some() {
            self.feed.state().lost = true;
            self.feed.wake();
        }
    }
}

/// Runs lanes until none is left: starts with `first` (a feed taken from
/// the queue), and takes further queued feeds between slices. `load` is
/// shared by every engine and job (see [`LaneCounts::fillable_blocks`]).
/// Returns how full the lanes were.
pub fn run<C: LaneChain>(
    first: Arc<Feed<C>>,
    max_lanes: usize,
    load: &LaneLoad,
    queue: &mut impl LaneQueue<C>,
) -> LaneCounts {
    let max_lanes = max_lanes.max(1);
    let mut counts = LaneCounts::default();
    let mut lanes: SmallVec<[Lane<C>; INLINE_LANES]> = SmallVec::new();
    join(&mut lanes, load, [first]);
    loop {
        if lanes.len() < max_lanes {
            let feeds = queue.take_feeds(max_lanes - lanes.len());
            join(&mut lanes, load, feeds);
        }
        // Hand back chunks that are done (or had no whole block at all):
        // go on with the job's next one while nobody else waits.
        let mut index = 0;
        while index < lanes.len() {
            if lanes[index].remaining() > 0 {
                index += 1;
                continue;
            }
            let keep = !queue.others_waiting();
            match lanes[index].finish(keep) {
                Next::Continue => {}
                Next::Release(requeue) => {
                    load.in_lanes.fetch_sub(1, Ordering::Relaxed);
                    lanes.swap_remove(index);
                    if let Some(feed) = requeue {
                        queue.requeue(feed);
                    }
                }
            }
        }
        let Some(shortest) = lanes.iter().map(Lane::remaining).min() else {
            return counts;
        };
        let len = shortest.min(SLICE_BYTES);
        let mut slices: SmallVec<[(&mut Chain, &mut [u8]); INLINE_LANES]> = lanes
            .iter_mut()
            .filter_map(|lane| lane.slice(len))
            .collect();
        encrypt_chains(&mut slices);
        let blocks = (len / crate::BLOCK) as u64;
        counts.add(load.count_call(slices.len(), max_lanes, blocks));
    }
}

/// How many lanes [`run`] keeps on the stack (more go to the heap): the
/// engine runs once per chunk and slices it, and a heap list per call made
/// musl's allocator map and unmap pages several times a chunk.
const INLINE_LANES: usize = 4;

/// Takes the feeds' chains into lanes.
fn join<C: LaneChain>(
    lanes: &mut SmallVec<[Lane<C>; INLINE_LANES]>,
    load: &LaneLoad,
    feeds: impl IntoIterator<Item = Arc<Feed<C>>>,
) {
    for lane in feeds.into_iter().filter_map(Lane::take) {
        load.in_lanes.fetch_add(1, Ordering::Relaxed);
        lanes.push(lane);
    }
}

/// A simple queue of feeds and nothing else (the in-memory driver's, the
/// tests'): feeds in the order they were queued.
pub struct FeedQueue<C> {
    feeds: VecDeque<Arc<Feed<C>>>,
}

impl<C> Default for FeedQueue<C> {
    fn default() -> Self {
        FeedQueue {
            feeds: VecDeque::new(),
        }
    }
}

impl<C: LaneChain> FeedQueue<C> {
    /// Queues `feed` at the back.
    pub fn push(&mut self, feed: Arc<Feed<C>>) {
        self.feeds.push_back(feed);
    }

    /// Runs engines of `max_lanes` lanes until the queue is empty (as a
    /// pool's workers would, one after another); how full the lanes were.
    pub fn drain(&mut self, max_lanes: usize, load: &LaneLoad) -> LaneCounts {
        let mut counts = LaneCounts::default();
        while let Some(first) = self.feeds.pop_front() {
            counts.add(run(first, max_lanes, load, self));
        }
        counts
    }

    /// Whether no feed waits.
    pub fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }
}

impl<C: LaneChain> LaneQueue<C> for FeedQueue<C> {
    fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed<C>>> {
        let take = max.min(self.feeds.len());
        self.feeds.drain(..take).collect()
    }

    fn others_waiting(&mut self) -> bool {
        !self.feeds.is_empty()
    }

    fn requeue(&mut self, feed: Arc<Feed<C>>) {
        self.feeds.push_back(feed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openssl_enc::EncryptStream;

    fn stream(seed: u8) -> EncryptStream {
        EncryptStream::with_key(&[seed; 32], &[seed ^ 0x55; 16], &[seed; 8]).0
    }

    fn chunk(len: usize, seed: u8) -> ChunkBuf {
        let mut buf = ChunkBuf::with_capacity(len.max(1));
        for (i, byte) in buf.payload_mut(len).iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(31) ^ seed;
        }
        buf
    }

    /// What one job alone gets: `update` on the same chunks.
    fn alone(seed: u8, lens: &[usize]) -> Vec<u8> {
        let mut stream = stream(seed);
        let mut out = Vec::new();
        for &len in lens {
            let mut buf = chunk(len, seed);
            stream.update(&mut buf);
            out.extend_from_slice(buf.as_slice());
        }
        out
    }

    /// The queue of a pool, without threads: feeds, and maybe other work
    /// waiting in front of them.
    #[derive(Default)]
    struct TestQueue {
        feeds: VecDeque<Arc<Feed<EncryptStream>>>,
        task_waiting: bool,
        requeued: usize,
    }

    impl LaneQueue<EncryptStream> for TestQueue {
        fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed<EncryptStream>>> {
            if self.task_waiting {
                return Vec::new();
            }
            let take = max.min(self.feeds.len());
            self.feeds.drain(..take).collect()
        }

        fn others_waiting(&mut self) -> bool {
            self.task_waiting || !self.feeds.is_empty()
        }

        fn requeue(&mut self, feed: Arc<Feed<EncryptStream>>) {
            self.requeued += 1;
            self.feeds.push_back(feed);
        }
    }

    /// A job: its feed (queued in `queue` when its first chunk needs it)
    /// with the chunks of `lens` submitted.
    fn job(queue: &mut TestQueue, seed: u8, lens: &[usize]) -> Arc<Feed<EncryptStream>> {
        let feed = Arc::new(Feed::new(stream(seed), None));
        for &len in lens {
            if feed.push(chunk(len, seed)) {
                queue.feeds.push_back(Arc::clone(&feed));
            }
        }
        feed
    }

    /// Runs engines (of `lanes` lanes) until the queue is empty, as the
    /// pool's workers would.
    fn drain(queue: &mut TestQueue, lanes: usize, load: &LaneLoad) -> LaneCounts {
        let mut counts = LaneCounts::default();
        while let Some(first) = queue.feeds.pop_front() {
            counts.add(run(first, lanes, load, queue));
        }
        counts
    }

    fn received(feed: &Feed<EncryptStream>) -> Vec<u8> {
        let mut out = Vec::new();
        for buf in feed.take_done().expect("not lost") {
            out.extend_from_slice(buf.as_slice());
        }
        out
    }

    /// Three jobs with chunks of different lengths, two lanes: every job's
    /// ciphertext is what it gets alone, whichever lanes it shared.
    #[test]
    fn jobs_sharing_lanes_get_the_ciphertext_they_get_alone() {
        let plans: [(u8, &[usize]); 3] = [
            (1, &[4096, 100, 7000, 5]),
            (2, &[16, 5000]),
            (3, &[33, 8192, 1]),
        ];
        let mut queue = TestQueue::default();
        let jobs: Vec<_> = plans
            .iter()
            .map(|(seed, lens)| job(&mut queue, *seed, lens))
            .collect();
        let load = LaneLoad::default();
        let counts = drain(&mut queue, 2, &load);
        for (index, (seed, lens)) in plans.iter().enumerate() {
            assert!(received(&jobs[index]) == alone(*seed, lens), "job {index}");
            assert!(
                jobs[index].take_chain().is_some(),
                "job {index}'s chain came home"
            );
        }
        let (used, offered) = (counts.used_blocks, counts.offered_blocks);
        assert!(used > 0 && used <= offered, "{used} of {offered}");
        // Some slices ran two lanes at once (one lane alone is exactly half).
        assert!(used * 2 > offered, "{used} of {offered}");
        assert_eq!(load.lanes_busy(), 0);
    }

    /// Two jobs whose next chunks are there when their lanes finish one,
    /// nobody else waiting: each keeps its lane from its first chunk to its
    /// last (no chunk goes back through the queue), so every engine call
    /// runs both lanes.
    #[test]
    fn a_lane_keeps_its_job_while_nobody_else_waits() {
        let mut queue = TestQueue::default();
        let load = LaneLoad::default();
        let a = job(&mut queue, 4, &[4096; 4]);
        let b = job(&mut queue, 5, &[4096; 4]);
        let counts = drain(&mut queue, 2, &load);
        assert_eq!(queue.requeued, 0, "no chunk went back through the queue");
        assert_eq!(received(&a), alone(4, &[4096; 4]));
        assert_eq!(received(&b), alone(5, &[4096; 4]));
        assert_eq!(
            counts.used_blocks, counts.offered_blocks,
            "both lanes, always"
        );
    }

    /// Other work waiting in the queue: lanes give their jobs back at the
    /// end of their chunks (the rest of each job queues behind it) and the
    /// engine stops, so that work waits at most for one chunk.
    #[test]
    fn a_waiting_task_makes_lanes_give_their_jobs_back() {
        let mut queue = TestQueue::default();
        let load = LaneLoad::default();
        let a = job(&mut queue, 6, &[4096; 3]);
        let b = job(&mut queue, 7, &[4096; 3]);
        let first = queue.feeds.pop_front().expect("queued");
        let second = queue.feeds.pop_front().expect("queued");
        queue.feeds.push_back(second);
        queue.task_waiting = true;
        run(first, 2, &load, &mut queue);
        assert_eq!(received(&a).len(), 4096, "one chunk, then back");
        assert!(received(&b).is_empty(), "behind the task");
        assert_eq!(queue.requeued, 1, "the rest of the job queues again");
        assert!(a.take_chain().is_some(), "the chain is at home");
    }

    /// The fillable lanes are the jobs with data (less those in other
    /// engines' lanes), at most every lane, at least the busy ones: a lone
    /// chunk while two encryptions have data fills half of what it could.
    #[test]
    fn fillable_lanes_follow_the_jobs_with_data() {
        let lone = |load: &LaneLoad| {
            let mut queue = TestQueue::default();
            let _job = job(&mut queue, 7, &[4096]);
            drain(&mut queue, 4, load)
        };
        let load = Arc::new(LaneLoad::default());
        let counts = lone(&load);
        assert_eq!(
            counts.fillable_blocks, counts.used_blocks,
            "nobody with data"
        );
        let mut first = Backlog::new(Arc::clone(&load));
        let mut second = Backlog::new(Arc::clone(&load));
        first.read();
        second.read();
        second.read();
        let counts = lone(&load);
        assert_eq!(counts.fillable_blocks, 2 * counts.used_blocks);
        assert_eq!(counts.offered_blocks, 4 * counts.used_blocks);
        second.encrypted();
        assert_eq!(load.jobs_with_data(), 2, "one chunk left");
        second.encrypted();
        drop(first);
        assert_eq!(load.jobs_with_data(), 0, "no data left");
        // The other job in another engine's lane: nothing more to fill here.
        let load = Arc::new(LaneLoad::default());
        let (mut first, mut second) = (
            Backlog::new(Arc::clone(&load)),
            Backlog::new(Arc::clone(&load)),
        );
        first.read();
        second.read();
        load.in_lanes.store(1, Ordering::Relaxed);
        let counts = lone(&load);
        assert_eq!(counts.fillable_blocks, counts.used_blocks);
        assert_eq!(load.lanes_busy(), 1, "lanes given back");
    }

    #[test]
    fn a_lone_job_runs_without_waiting_for_a_partner() {
        let load = LaneLoad::default();
        let mut queue = TestQueue::default();
        let feed = job(&mut queue, 9, &[3000]);
        let counts = drain(&mut queue, 2, &load);
        assert_eq!(received(&feed), alone(9, &[3000]));
        assert_eq!(counts.used_blocks * 2, counts.offered_blocks);
    }

    /// A job that gave up: its chunks not begun are dropped, the engine
    /// encrypts none of them.
    #[test]
    fn an_abandoned_jobs_pending_chunks_are_not_encrypted() {
        let load = LaneLoad::default();
        let mut queue = TestQueue::default();
        let feed = job(&mut queue, 3, &[4096; 3]);
        feed.abandon();
        let counts = drain(&mut queue, 2, &load);
        assert_eq!(counts.used_blocks, 0);
        assert!(received(&feed).is_empty());
        assert!(feed.take_chain().is_some());
    }

    /// Every chunk handed back wakes the job's driver.
    #[test]
    fn finished_chunks_wake_the_job() {
        let woken = Arc::new(AtomicUsize::new(0));
        let waker: Waker = {
            let woken = Arc::clone(&woken);
            Arc::new(move || {
                woken.fetch_add(1, Ordering::Relaxed);
            })
        };
        let feed = Arc::new(Feed::new(stream(2), Some(waker)));
        let mut queue = TestQueue::default();
        for _ in 0..3 {
            if feed.push(chunk(4096, 2)) {
                queue.feeds.push_back(Arc::clone(&feed));
            }
        }
        drain(&mut queue, 2, &LaneLoad::default());
        assert_eq!(woken.load(Ordering::Relaxed), 3);
        assert_eq!(received(&feed), alone(2, &[4096; 3]));
    }
}
