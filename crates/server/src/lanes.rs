//! The lane engine: CBC encryption of several jobs at once on one worker.
//!
//! CBC encryption is serial within a file (each block needs the previous
//! ciphertext), but the software AES works on several blocks per call (2 on
//! 32-bit targets, 4 on 64-bit) and an AES instruction has a result latency
//! that a second, independent chain hides. So chunks of *different* jobs
//! are encrypted together, one job per lane, in the submit/flush style of
//! multi-buffer crypto libraries:
//!
//! * a job's chunk joins a free lane ([`WorkerPool::encrypt_chunk`]
//!   submits it; the worker that takes it starts an engine run);
//! * the engine encrypts all busy lanes together, [`SLICE_BYTES`] at a
//!   time (or less, for the shortest remaining chunk), and between slices
//!   fills free lanes with chunks that were submitted meanwhile;
//! * a lane whose chunk is done hands it back to its job at once, which
//!   submits its next chunk (it rejoins at the next slice);
//! * a lone job runs alone: nothing ever waits for a partner, so no job
//!   waits longer than one slice to join, and a job that arrives when all
//!   lanes are busy waits at most until a lane's chunk is done.
//!
//! Fairness with other work (decryption, key derivation): the engine only
//! takes chunks queued *before* the oldest waiting task, so a task waits
//! at most for the lanes already running to finish their chunks.
//!
//! [`WorkerPool::encrypt_chunk`]: crate::pool::WorkerPool::encrypt_chunk

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::cipher::{ChunkBuf, EncryptStream, encrypt_lanes};
use crate::job::core::EncryptCore;
use crate::metrics::wide::WideAtomic;
use prometheus_client::metrics::counter::Atomic;

/// Bytes each lane encrypts between two looks at the queue: small enough
/// that a new job joins quickly (about 2.6 ms of a 100 MHz core for two
/// lanes in software), large enough that looking costs nothing measurable.
pub const SLICE_BYTES: usize = 2048;

/// A job's chunk waiting for, or occupying, a lane.
pub struct LaneJob {
    /// The job's encryption (its CBC chain).
    pub core: EncryptCore,
    /// The chunk, encrypted in place.
    pub buf: ChunkBuf,
    /// When the job submitted it (its processing time starts here).
    pub submitted: Instant,
    /// Where the encrypted chunk goes back to the job.
    pub reply: oneshot::Sender<LaneDone>,
}

/// A chunk the engine has encrypted.
pub struct LaneDone {
    /// The job's encryption, its CBC chain continued.
    pub core: EncryptCore,
    /// The encrypted chunk (whole blocks; the rest is carried in `stream`).
    pub buf: ChunkBuf,
    /// Submission to completion.
    pub elapsed: Duration,
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

/// One occupied lane.
struct Lane {
    job: LaneJob,
    /// Bytes of `job.buf` encrypted so far.
    done: usize,
}

impl Lane {
    fn new(mut job: LaneJob) -> Self {
        job.core.begin_chunk(&mut job.buf);
        Lane { job, done: 0 }
    }

    fn remaining(&self) -> usize {
        self.job.buf.len() - self.done
    }

    fn finish(self) {
        let LaneJob {
            core,
            buf,
            submitted,
            reply,
        } = self.job;
        // A job that gave up (its connection failed) dropped the receiver.
        let _ = reply.send(LaneDone {
            core,
            buf,
            elapsed: submitted.elapsed(),
        });
    }
}

/// Runs lanes until none is left: starts with `first`, and calls `refill`
/// between slices for up to the given number of further chunks.
pub fn run(
    first: LaneJob,
    max_lanes: usize,
    stats: &LaneStats,
    mut refill: impl FnMut(usize) -> Vec<LaneJob>,
) {
    let max_lanes = max_lanes.max(1);
    let mut lanes: Vec<Lane> = Vec::with_capacity(max_lanes);
    lanes.push(Lane::new(first));
    stats.in_lanes.fetch_add(1, Ordering::Relaxed);
    loop {
        if lanes.len() < max_lanes {
            let joined = refill(max_lanes - lanes.len());
            stats.in_lanes.fetch_add(joined.len(), Ordering::Relaxed);
            lanes.extend(joined.into_iter().map(Lane::new));
        }
        // Hand back chunks that are done (or had no whole block at all).
        let mut index = 0;
        while index < lanes.len() {
            if lanes[index].remaining() == 0 {
                stats.in_lanes.fetch_sub(1, Ordering::Relaxed);
                lanes.swap_remove(index).finish();
            } else {
                index += 1;
            }
        }
        let Some(shortest) = lanes.iter().map(Lane::remaining).min() else {
            return;
        };
        let len = shortest.min(SLICE_BYTES);
        let mut slices: Vec<(&mut EncryptStream, &mut [u8])> = lanes
            .iter_mut()
            .map(|lane| {
                let range = lane.done..lane.done + len;
                lane.done += len;
                (
                    lane.job.core.chain(),
                    &mut lane.job.buf.as_mut_slice()[range],
                )
            })
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

    fn submit(core: EncryptCore, buf: ChunkBuf) -> (LaneJob, oneshot::Receiver<LaneDone>) {
        let (reply, done) = oneshot::channel();
        (
            LaneJob {
                core,
                buf,
                submitted: Instant::now(),
                reply,
            },
            done,
        )
    }

    /// Three jobs with chunks of different lengths, two lanes: every job's
    /// ciphertext is what it gets alone, whichever lanes it shared.
    #[test]
    fn jobs_sharing_lanes_get_the_ciphertext_they_get_alone() {
        let plans: [(u8, &[usize]); 3] = [
            (1, &[4096, 100, 7000]),
            (2, &[16, 5000]),
            (3, &[33, 8192, 1]),
        ];
        let mut streams: Vec<Option<EncryptCore>> =
            plans.iter().map(|(seed, _)| Some(stream(*seed))).collect();
        let mut outputs = vec![Vec::new(); plans.len()];
        let rounds = plans.iter().map(|(_, lens)| lens.len()).max().unwrap_or(0);
        let stats = LaneStats::default();
        for round in 0..rounds {
            let mut pending = Vec::new();
            let mut receivers = Vec::new();
            for (index, (seed, lens)) in plans.iter().enumerate() {
                if let Some(&len) = lens.get(round) {
                    let stream = streams[index].take().expect("stream");
                    let (job, done) = submit(stream, chunk(len, *seed));
                    pending.push(job);
                    receivers.push((index, done));
                }
            }
            let first = pending.remove(0);
            run(first, 2, &stats, |free| {
                let take = free.min(pending.len());
                pending.drain(..take).collect()
            });
            for (index, mut done) in receivers {
                let done = done.try_recv().expect("every chunk handed back");
                outputs[index].extend_from_slice(done.buf.as_slice());
                streams[index] = Some(done.core);
            }
        }
        for (index, (seed, lens)) in plans.iter().enumerate() {
            assert!(outputs[index] == alone(*seed, lens), "job {index}");
        }
        let used = stats.used_blocks.get();
        let offered = stats.offered_blocks.get();
        assert!(used > 0 && used <= offered, "{used} of {offered}");
        // Some slices ran two lanes at once (one lane alone is exactly half).
        assert!(used * 2 > offered, "{used} of {offered}");
    }

    /// The fillable lanes are the jobs with data (less those in other
    /// engines' lanes), at most every lane, at least the busy ones: a lone
    /// chunk while two encryptions have data fills half of what it could.
    #[test]
    fn fillable_lanes_follow_the_jobs_with_data() {
        let stats = LaneStats::default();
        let (job, _done) = submit(stream(7), chunk(4096, 7));
        run(job, 4, &stats, |_| Vec::new());
        assert_eq!(
            stats.fillable_blocks.get(),
            stats.used_blocks.get(),
            "nobody present"
        );
        let stats = LaneStats::default();
        let first = stats.backlog();
        let second = stats.backlog();
        first.read();
        second.read();
        second.read();
        let (job, _done) = submit(stream(7), chunk(4096, 7));
        run(job, 4, &stats, |_| Vec::new());
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
        let (job, _done) = submit(stream(7), chunk(4096, 7));
        run(job, 4, &stats, |_| Vec::new());
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
        let (job, mut done) = submit(stream(9), chunk(3000, 9));
        let mut asked = 0;
        run(job, 2, &stats, |_| {
            asked += 1;
            Vec::new()
        });
        let done = done.try_recv().expect("handed back");
        assert_eq!(done.buf.as_slice(), &alone(9, &[3000])[..]);
        assert!(asked >= 2, "looked for partners between slices");
        assert_eq!(stats.used_blocks.get() * 2, stats.offered_blocks.get());
    }
}
