//! The lane engine: CBC encryption of several jobs at once on one worker.
//!
//! CBC encryption is serial within a file (each block needs the previous
//! ciphertext), but the software AES works on several blocks per call (2 on
//! 32-bit targets, 4 on 64-bit) and an AES instruction has a result latency
//! that a second, independent chain hides. So chunks of *different* jobs
//! are encrypted together, one job per lane, in the submit/flush style of
//! multi-buffer crypto libraries:
//!
//! * a job's encryption is a [`Feed`]: its CBC chain and the chunks it
//!   submitted, in order. A feed whose chain is free and that has a chunk
//!   is queued in the worker pool ([`crate::pool::EncryptLane`]); the
//!   worker that takes it starts an engine run;
//! * the engine encrypts all busy lanes together, [`SLICE_BYTES`] at a
//!   time (or less, for the shortest remaining chunk), and between slices
//!   fills free lanes with feeds queued meanwhile;
//! * a lane whose chunk is done hands it back to its job at once and, when
//!   nothing else waits in the pool's queue, goes on with the job's next
//!   chunk if the job has submitted it: a job that keeps its chunks coming
//!   keeps its lane, without a round trip through its task for every chunk
//!   (which left the other lane alone meanwhile). When something else waits
//!   (another feed, a task), the lane gives the chain back and the job's
//!   next chunk queues behind it;
//! * a lone job runs alone: nothing ever waits for a partner, so no job
//!   waits longer than one slice to join, and a job that arrives when all
//!   lanes are busy waits at most until a lane's chunk is done.
//!
//! Fairness with other work (decryption, key derivation): the engine only
//! takes feeds queued *before* the oldest waiting task, and a lane goes on
//! with its job only while the queue is empty, so a task waits at most for
//! the lanes already running to finish their chunks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::cipher::{ChunkBuf, EncryptStream, encrypt_lanes};
use crate::job::core::EncryptCore;
use crate::metrics::wide::WideAtomic;
use prometheus_client::metrics::counter::Atomic;

/// Bytes each lane encrypts between two looks at the queue: small enough
/// that a new job joins quickly (about 2.6 ms of a 100 MHz core for two
/// lanes in software), large enough that looking costs nothing measurable.
pub const SLICE_BYTES: usize = 2048;

/// A chunk the engine has encrypted.
#[derive(Debug)]
pub struct LaneDone {
    /// The encrypted chunk (whole blocks; the rest is carried in the chain).
    pub buf: ChunkBuf,
    /// Submission to completion.
    pub elapsed: Duration,
}

/// A job's encryption as the engine takes it: its CBC chain, when no lane
/// holds it, and the chunks submitted and not yet begun, in order.
pub struct Feed {
    state: Mutex<FeedState>,
}

struct FeedState {
    /// The chain, at home; `None` while a lane holds it.
    core: Option<EncryptCore>,
    /// Chunks submitted, not begun, with their submission time.
    pending: VecDeque<(ChunkBuf, Instant)>,
    /// The feed waits in the pool's queue (and must not be queued twice).
    queued: bool,
    /// Where encrypted chunks go back to the job; `None` once a lane
    /// holding the chain was lost (a panic), so the job learns of it.
    done: Option<mpsc::UnboundedSender<LaneDone>>,
}

impl Feed {
    /// A feed for `core`, and where its encrypted chunks come back.
    pub fn new(core: EncryptCore) -> (Arc<Feed>, mpsc::UnboundedReceiver<LaneDone>) {
        let (done, chunks) = mpsc::unbounded_channel();
        let feed = Arc::new(Feed {
            state: Mutex::new(FeedState {
                core: Some(core),
                pending: VecDeque::new(),
                queued: false,
                done: Some(done),
            }),
        });
        (feed, chunks)
    }

    fn state(&self) -> MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a chunk; true when the feed must now be queued in the pool
    /// (its chain is at home and it was not queued yet).
    pub fn push(&self, buf: ChunkBuf) -> bool {
        let mut state = self.state();
        state.pending.push_back((buf, Instant::now()));
        let queue = state.core.is_some() && !state.queued;
        state.queued |= queue;
        queue
    }

    /// The chain, once no lane holds it.
    pub fn take_core(&self) -> Option<EncryptCore> {
        self.state().core.take()
    }

    /// Drops the chunks not begun (the job gave up).
    pub fn abandon(&self) {
        self.state().pending.clear();
    }
}

/// How full the lanes were: the metrics show `used / offered` (of every
/// lane) and `used / fillable` (of the lanes the jobs with data could fill).
#[derive(Debug, Default)]
pub struct LaneStats {
    /// Blocks encrypted.
    pub used_blocks: WideAtomic,
    /// Blocks that could have been encrypted in the same calls had every
    /// lane been busy (calls × lanes × blocks per lane).
    pub offered_blocks: WideAtomic,
    /// Blocks that could have been encrypted in the same calls had every
    /// encryption job with data had a lane of this engine, as far as the
    /// lanes go: per call, the jobs with data (see [`Backlog`]) less those
    /// in other workers' lanes, at most every lane, at least the lanes
    /// busy.
    pub fillable_blocks: WideAtomic,
    /// Encryption jobs with chunks read from their clients and not yet
    /// encrypted (see [`Backlog`]).
    pub loaded: AtomicUsize,
    /// Lanes busy in all engines (workers) together.
    pub in_lanes: AtomicUsize,
}

/// An encryption's chunks read from its client and not yet encrypted.
/// While it has any, the job has data: it could fill a lane, and an
/// engine call without it leaves a lane empty that it could have filled
/// (counted in [`LaneStats::fillable_blocks`]). A job whose client is slow
/// to send has none meanwhile, and its empty lane counts against nobody.
#[derive(Debug)]
pub struct Backlog<'a> {
    stats: &'a LaneStats,
    chunks: AtomicUsize,
}

impl Backlog<'_> {
    /// A chunk was read from the client.
    pub fn read(&self) {
        if self.chunks.fetch_add(1, Ordering::Relaxed) == 0 {
            self.stats.loaded.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A chunk came back encrypted.
    pub fn encrypted(&self) {
        if self.chunks.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.stats.loaded.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Backlog<'_> {
    fn drop(&mut self) {
        if *self.chunks.get_mut() > 0 {
            self.stats.loaded.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl LaneStats {
    /// The backlog of one encryption job, empty.
    pub fn backlog(&self) -> Backlog<'_> {
        Backlog {
            stats: self,
            chunks: AtomicUsize::new(0),
        }
    }

    /// Counts one call of an engine with `busy` of its `max_lanes` lanes
    /// busy, `blocks` blocks each.
    fn count_call(&self, busy: usize, max_lanes: usize, blocks: u64) {
        let present = self.loaded.load(Ordering::Relaxed);
        let elsewhere = self.in_lanes.load(Ordering::Relaxed).saturating_sub(busy);
        let fillable = present
            .saturating_sub(elsewhere)
            .clamp(busy, max_lanes.max(busy));
        self.used_blocks.inc_by(blocks * busy as u64);
        self.offered_blocks.inc_by(blocks * max_lanes as u64);
        self.fillable_blocks.inc_by(blocks * fillable as u64);
    }
}

/// The pool's queue as the engine sees it.
pub trait LaneQueue {
    /// Up to `max` feeds from the front of the queue, stopping at the
    /// first task (it has waited longer than anything behind it).
    fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed>>;
    /// Whether anything waits in the queue.
    fn others_waiting(&mut self) -> bool;
    /// Queues `feed` again, at the back.
    fn requeue(&mut self, feed: Arc<Feed>);
}

/// One occupied lane: a job's chain and its current chunk.
struct Lane {
    feed: Arc<Feed>,
    /// The chain; `None` only once handed back (see `Drop`).
    core: Option<EncryptCore>,
    /// The chunk being encrypted and when it was submitted.
    chunk: Option<(ChunkBuf, Instant)>,
    /// Bytes of the chunk encrypted so far.
    done: usize,
}

/// What a lane does once its chunk is done.
enum Next {
    /// Go on with the job's next chunk.
    Continue,
    /// Give the chain back; the feed must be queued again if set.
    Release(Option<Arc<Feed>>),
}

impl Lane {
    /// The lane of a queued feed: its chain and first pending chunk.
    fn take(feed: Arc<Feed>) -> Option<Lane> {
        let mut state = feed.state();
        state.queued = false;
        let (mut buf, submitted) = state.pending.pop_front()?;
        let Some(mut core) = state.core.take() else {
            state.pending.push_front((buf, submitted));
            return None;
        };
        core.begin_chunk(&mut buf);
        drop(state);
        Some(Lane {
            feed,
            core: Some(core),
            chunk: Some((buf, submitted)),
            done: 0,
        })
    }

    fn remaining(&self) -> usize {
        self.chunk
            .as_ref()
            .map_or(0, |(buf, _)| buf.len() - self.done)
    }

    /// The chain and the part of the chunk to encrypt next (`len` bytes).
    fn slice(&mut self, len: usize) -> Option<(&mut EncryptStream, &mut [u8])> {
        let range = self.done..self.done + len;
        self.done += len;
        let (buf, _) = self.chunk.as_mut()?;
        Some((self.core.as_mut()?.chain(), &mut buf.as_mut_slice()[range]))
    }

    /// Hands the finished chunk back; then either begins the job's next
    /// chunk in this lane (`keep` and one is pending) or gives the chain
    /// back (queuing the feed again if chunks are pending).
    fn finish(&mut self, keep: bool) -> Next {
        let finished = self.chunk.take();
        let mut state = self.feed.state();
        let next = match state.pending.pop_front() {
            Some((mut buf, submitted)) if keep => {
                if let Some(core) = self.core.as_mut() {
                    core.begin_chunk(&mut buf);
                }
                self.chunk = Some((buf, submitted));
                self.done = 0;
                Next::Continue
            }
            other => {
                if let Some(pending) = other {
                    state.pending.push_front(pending);
                }
                state.core = self.core.take();
                let requeue = !state.pending.is_empty() && !state.queued;
                state.queued |= requeue;
                Next::Release(requeue.then(|| Arc::clone(&self.feed)))
            }
        };
        let done_tx = state.done.clone();
        drop(state);
        // A job that gave up (its connection failed) dropped the receiver.
        if let (Some(done_tx), Some((buf, submitted))) = (done_tx, finished) {
            let _ = done_tx.send(LaneDone {
                buf,
                elapsed: submitted.elapsed(),
            });
        }
        next
    }
}

impl Drop for Lane {
    /// A lane dropped with the chain still in it (a panic in the engine):
    /// the job's chunks will never come back, so its channel is closed.
    fn drop(&mut self) {
        if self.core.is_some() {
            self.feed.state().done = None;
        }
    }
}

/// Runs lanes until none is left: starts with `first` (a feed taken from
/// the queue), and takes further queued feeds between slices.
pub fn run(first: Arc<Feed>, max_lanes: usize, stats: &LaneStats, queue: &mut impl LaneQueue) {
    let max_lanes = max_lanes.max(1);
    let mut lanes: Vec<Lane> = Vec::with_capacity(max_lanes);
    let join = |lanes: &mut Vec<Lane>, feeds: Vec<Arc<Feed>>| {
        for lane in feeds.into_iter().filter_map(Lane::take) {
            stats.in_lanes.fetch_add(1, Ordering::Relaxed);
            lanes.push(lane);
        }
    };
    join(&mut lanes, vec![first]);
    loop {
        if lanes.len() < max_lanes {
            let feeds = queue.take_feeds(max_lanes - lanes.len());
            join(&mut lanes, feeds);
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
                    stats.in_lanes.fetch_sub(1, Ordering::Relaxed);
                    lanes.swap_remove(index);
                    if let Some(feed) = requeue {
                        queue.requeue(feed);
                    }
                }
            }
        }
        let Some(shortest) = lanes.iter().map(Lane::remaining).min() else {
            return;
        };
        let len = shortest.min(SLICE_BYTES);
        let mut slices: Vec<(&mut EncryptStream, &mut [u8])> = lanes
            .iter_mut()
            .filter_map(|lane| lane.slice(len))
            .collect();
        encrypt_lanes(&mut slices);
        let blocks = (len / crate::cipher::BLOCK) as u64;
        stats.count_call(slices.len(), max_lanes, blocks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cipher::{ChunkBuf, EncryptStream};

    fn stream(seed: u8) -> EncryptCore {
        EncryptCore::new(EncryptStream::with_key(&[seed; 32], &[seed ^ 0x55; 16], &[seed; 8]).0)
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

    /// The pool's queue, without threads: feeds, and maybe a task waiting
    /// in front of them.
    #[derive(Default)]
    struct TestQueue {
        feeds: VecDeque<Arc<Feed>>,
        task_waiting: bool,
        requeued: usize,
    }

    impl LaneQueue for TestQueue {
        fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed>> {
            if self.task_waiting {
                return Vec::new();
            }
            let take = max.min(self.feeds.len());
            self.feeds.drain(..take).collect()
        }

        fn others_waiting(&mut self) -> bool {
            self.task_waiting || !self.feeds.is_empty()
        }

        fn requeue(&mut self, feed: Arc<Feed>) {
            self.requeued += 1;
            self.feeds.push_back(feed);
        }
    }

    /// A job: its feed (queued in `queue` when its first chunk needs it)
    /// with the chunks of `lens` submitted, and where they come back.
    fn job(
        queue: &mut TestQueue,
        seed: u8,
        lens: &[usize],
    ) -> (Arc<Feed>, mpsc::UnboundedReceiver<LaneDone>) {
        let (feed, done) = Feed::new(stream(seed));
        for &len in lens {
            if feed.push(chunk(len, seed)) {
                queue.feeds.push_back(Arc::clone(&feed));
            }
        }
        (feed, done)
    }

    /// Runs engines (of `lanes` lanes) until the queue is empty, as the
    /// pool's workers would.
    fn drain(queue: &mut TestQueue, lanes: usize, stats: &LaneStats) {
        while let Some(first) = queue.feeds.pop_front() {
            run(first, lanes, stats, queue);
        }
    }

    fn received(done: &mut mpsc::UnboundedReceiver<LaneDone>) -> Vec<u8> {
        let mut out = Vec::new();
        while let Ok(chunk) = done.try_recv() {
            out.extend_from_slice(chunk.buf.as_slice());
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
        let mut jobs: Vec<_> = plans
            .iter()
            .map(|(seed, lens)| job(&mut queue, *seed, lens))
            .collect();
        let stats = LaneStats::default();
        drain(&mut queue, 2, &stats);
        for (index, (seed, lens)) in plans.iter().enumerate() {
            let (feed, done) = &mut jobs[index];
            assert!(received(done) == alone(*seed, lens), "job {index}");
            assert!(feed.take_core().is_some(), "job {index}'s chain came home");
        }
        let used = stats.used_blocks.get();
        let offered = stats.offered_blocks.get();
        assert!(used > 0 && used <= offered, "{used} of {offered}");
        // Some slices ran two lanes at once (one lane alone is exactly half).
        assert!(used * 2 > offered, "{used} of {offered}");
        assert_eq!(stats.in_lanes.load(Ordering::Relaxed), 0);
    }

    /// Two jobs whose next chunks are there when their lanes finish one,
    /// nobody else waiting: each keeps its lane from its first chunk to its
    /// last (no chunk goes back through the queue), so every engine call
    /// runs both lanes.
    #[test]
    fn a_lane_keeps_its_job_while_nobody_else_waits() {
        let mut queue = TestQueue::default();
        let stats = LaneStats::default();
        let (_a, mut done_a) = job(&mut queue, 4, &[4096; 4]);
        let (_b, mut done_b) = job(&mut queue, 5, &[4096; 4]);
        drain(&mut queue, 2, &stats);
        assert_eq!(queue.requeued, 0, "no chunk went back through the queue");
        assert_eq!(received(&mut done_a), alone(4, &[4096; 4]));
        assert_eq!(received(&mut done_b), alone(5, &[4096; 4]));
        assert_eq!(
            stats.used_blocks.get(),
            stats.offered_blocks.get(),
            "both lanes, always"
        );
    }

    /// A task waiting in the queue: lanes give their jobs back at the end of
    /// their chunks (the rest of each job queues behind the task) and the
    /// engine stops, so the task waits at most for one chunk.
    #[test]
    fn a_waiting_task_makes_lanes_give_their_jobs_back() {
        let mut queue = TestQueue::default();
        let stats = LaneStats::default();
        let (a, mut done_a) = job(&mut queue, 6, &[4096; 3]);
        let (_b, mut done_b) = job(&mut queue, 7, &[4096; 3]);
        let first = queue.feeds.pop_front().expect("queued");
        let second = queue.feeds.pop_front().expect("queued");
        queue.feeds.push_back(second);
        queue.task_waiting = true;
        run(first, 2, &stats, &mut queue);
        assert_eq!(received(&mut done_a).len(), 4096, "one chunk, then back");
        assert!(received(&mut done_b).is_empty(), "behind the task");
        assert_eq!(queue.requeued, 1, "the rest of the job queues again");
        assert!(a.take_core().is_some(), "the chain is at home");
    }

    /// The fillable lanes are the jobs with data (less those in other
    /// engines' lanes), at most every lane, at least the busy ones: a lone
    /// chunk while two encryptions have data fills half of what it could.
    #[test]
    fn fillable_lanes_follow_the_jobs_with_data() {
        let lone = |stats: &LaneStats| {
            let mut queue = TestQueue::default();
            let _job = job(&mut queue, 7, &[4096]);
            drain(&mut queue, 4, stats);
        };
        let stats = LaneStats::default();
        lone(&stats);
        assert_eq!(
            stats.fillable_blocks.get(),
            stats.used_blocks.get(),
            "nobody with data"
        );
        let stats = LaneStats::default();
        let first = stats.backlog();
        let second = stats.backlog();
        first.read();
        second.read();
        second.read();
        lone(&stats);
        assert_eq!(stats.fillable_blocks.get(), 2 * stats.used_blocks.get());
        assert_eq!(stats.offered_blocks.get(), 4 * stats.used_blocks.get());
        second.encrypted();
        assert_eq!(stats.loaded.load(Ordering::Relaxed), 2, "one chunk left");
        second.encrypted();
        drop(first);
        assert_eq!(stats.loaded.load(Ordering::Relaxed), 0, "no data left");
        // The other job in another worker's lane: nothing more to fill here.
        let stats = LaneStats::default();
        let (first, second) = (stats.backlog(), stats.backlog());
        first.read();
        second.read();
        stats.in_lanes.store(1, Ordering::Relaxed);
        lone(&stats);
        assert_eq!(stats.fillable_blocks.get(), stats.used_blocks.get());
        assert_eq!(
            stats.in_lanes.load(Ordering::Relaxed),
            1,
            "lanes given back"
        );
    }

    #[test]
    fn a_lone_job_runs_without_waiting_for_a_partner() {
        let stats = LaneStats::default();
        let mut queue = TestQueue::default();
        let (_feed, mut done) = job(&mut queue, 9, &[3000]);
        drain(&mut queue, 2, &stats);
        assert_eq!(received(&mut done), alone(9, &[3000]));
        assert_eq!(stats.used_blocks.get() * 2, stats.offered_blocks.get());
    }

    /// A job that gave up: its chunks not begun are dropped, the engine
    /// encrypts none of them.
    #[test]
    fn an_abandoned_jobs_pending_chunks_are_not_encrypted() {
        let stats = LaneStats::default();
        let mut queue = TestQueue::default();
        let (feed, mut done) = job(&mut queue, 3, &[4096; 3]);
        feed.abandon();
        drain(&mut queue, 2, &stats);
        assert_eq!(stats.used_blocks.get(), 0);
        assert!(received(&mut done).is_empty());
        assert!(feed.take_core().is_some());
    }
}
