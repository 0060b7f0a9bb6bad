//! A bounded pool of worker threads for CPU work (PBKDF2, AES).
//!
//! The tokio reactor threads only move bytes; every cryptographic step is
//! sent here and awaited. A job never has more than one piece of work in
//! flight, so the pool's backlog is bounded by the number of admitted jobs.
//!
//! The queue holds two kinds of work, in one FIFO: closures ([`WorkerPool::run`])
//! and encryptions with a chunk to encrypt ([`EncryptLane`], a
//! [`Feed`]). A worker that takes an encryption runs the
//! [lane engine](crate::lanes), which encrypts it together with the
//! encryptions of other jobs queued before the oldest waiting closure.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::cipher::ChunkBuf;
use crate::job::core::EncryptCore;
use crate::lanes::{self, Backlog, Feed, LaneDone, LaneQueue, LaneStats};
use crate::metrics::wide::WideAtomic;
use prometheus_client::metrics::counter::Atomic;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// The pool's workers are gone, or the task panicked.
#[derive(Debug, thiserror::Error)]
#[error("worker pool task failed: the task panicked or the pool has shut down")]
pub struct PoolError;

/// One piece of queued work.
enum Work {
    Task(Task),
    Lane(Arc<Feed>),
}

/// The FIFO the workers take work from.
#[derive(Default)]
struct Queue {
    work: VecDeque<Work>,
    closed: bool,
}

/// What the workers share.
struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
    busy_micros: WideAtomic,
    lane_stats: LaneStats,
    lanes: usize,
}

/// A fixed set of named worker threads fed from one FIFO.
pub struct WorkerPool {
    inner: Arc<Inner>,
    workers: usize,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("workers", &self.workers)
            .field("lanes", &self.inner.lanes)
            .finish()
    }
}

/// What a task returned and how long it took from submission (including
/// waiting for a free worker) to completion.
pub struct Timed<T> {
    /// The task's result.
    pub value: T,
    /// Submission to completion.
    pub elapsed: Duration,
}

impl WorkerPool {
    /// Starts `workers` threads (at least one), each encrypting up to
    /// `lanes` jobs' chunks together (at least one).
    pub fn new(workers: usize, lanes: usize) -> std::io::Result<Arc<Self>> {
        let workers = workers.max(1);
        let inner = Arc::new(Inner {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            busy_micros: WideAtomic::default(),
            lane_stats: LaneStats::default(),
            lanes: lanes.max(1),
        });
        for index in 0..workers {
            let inner = Arc::clone(&inner);
            thread::Builder::new()
                .name(format!("aesd-worker-{index}"))
                .spawn(move || worker_loop(&inner))?;
        }
        Ok(Arc::new(WorkerPool { inner, workers }))
    }

    /// How many worker threads run.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// How many jobs' chunks one worker encrypts together.
    pub fn lanes(&self) -> usize {
        self.inner.lanes
    }

    /// Time all workers together spent running tasks.
    pub fn busy_time(&self) -> Duration {
        Duration::from_micros(self.inner.busy_micros.get())
    }

    /// Blocks encrypted by the lane engine, and blocks it could have
    /// encrypted in the same calls with every lane busy.
    pub fn lane_blocks(&self) -> (u64, u64) {
        let stats = &self.inner.lane_stats;
        (stats.used_blocks.get(), stats.offered_blocks.get())
    }

    /// Blocks the lane engine could have encrypted in the same calls had
    /// every encryption job with data had a lane (at most every lane).
    pub fn lane_fillable_blocks(&self) -> u64 {
        self.inner.lane_stats.fillable_blocks.get()
    }

    /// The backlog of an encryption job, for the lane statistics (see
    /// [`Backlog`]).
    pub fn backlog(&self) -> Backlog<'_> {
        self.inner.lane_stats.backlog()
    }

    /// Runs `task` on a worker and waits for its result without blocking
    /// the async runtime.
    pub async fn run<T, F>(&self, task: F) -> Result<Timed<T>, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let submitted = Instant::now();
        let (done_tx, done_rx) = oneshot::channel();
        let inner = Arc::clone(&self.inner);
        let job: Task = Box::new(move || {
            let started = Instant::now();
            let value = task();
            // Counted before the result is delivered, so a caller that
            // reads busy_time() after run() returns sees this task.
            inner.count_busy(started);
            let _ = done_tx.send(value);
        });
        self.submit(Work::Task(job))?;
        let value = done_rx.await.map_err(|_| PoolError)?;
        Ok(Timed {
            value,
            elapsed: submitted.elapsed(),
        })
    }

    /// A job's encryption on the lane engine: chunks submitted to it are
    /// encrypted in order (as [`EncryptCore::update`]), in a lane beside
    /// other jobs' chunks.
    pub fn encryption(&self, core: EncryptCore) -> EncryptLane<'_> {
        let (feed, done) = Feed::new(core);
        EncryptLane {
            pool: self,
            feed,
            done,
            in_flight: 0,
            busy_since: None,
            busy: Duration::ZERO,
        }
    }

    fn submit(&self, work: Work) -> Result<(), PoolError> {
        let mut queue = self.inner.queue.lock().map_err(|_| PoolError)?;
        if queue.closed {
            return Err(PoolError);
        }
        queue.work.push_back(work);
        drop(queue);
        self.inner.ready.notify_one();
        Ok(())
    }

    /// Stops the workers once the work already queued is done.
    pub fn close(&self) {
        if let Ok(mut queue) = self.inner.queue.lock() {
            queue.closed = true;
        }
        self.inner.ready.notify_all();
    }
}

impl Inner {
    fn count_busy(&self, started: Instant) {
        self.busy_micros
            .inc_by(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
    }
    /// The next piece of work; `None` once the pool is closed and drained.
    fn next(&self) -> Option<Work> {
        let mut queue = self.queue.lock().ok()?;
        loop {
            if let Some(work) = queue.work.pop_front() {
                return Some(work);
            }
            if queue.closed {
                return None;
            }
            queue = self.ready.wait(queue).ok()?;
        }
    }
}

impl LaneQueue for &Inner {
    /// Up to `max` encryptions from the front of the queue, stopping at the
    /// first closure (it has waited longer than anything behind it).
    fn take_feeds(&mut self, max: usize) -> Vec<Arc<Feed>> {
        let Ok(mut queue) = self.queue.lock() else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        while taken.len() < max && matches!(queue.work.front(), Some(Work::Lane(_))) {
            if let Some(Work::Lane(feed)) = queue.work.pop_front() {
                taken.push(feed);
            }
        }
        taken
    }

    fn others_waiting(&mut self) -> bool {
        self.queue.lock().is_ok_and(|queue| !queue.work.is_empty())
    }

    fn requeue(&mut self, feed: Arc<Feed>) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.work.push_back(Work::Lane(feed));
        }
        self.ready.notify_one();
    }
}

/// A job's encryption on the lane engine ([`WorkerPool::encryption`]):
/// submitted chunks come back encrypted, in order, from
/// [`EncryptLane::next`]; several may be in flight, so the job's lane can
/// go on with its next chunk while the last one travels back to it.
pub struct EncryptLane<'p> {
    pool: &'p WorkerPool,
    feed: Arc<Feed>,
    done: mpsc::UnboundedReceiver<LaneDone>,
    in_flight: usize,
    busy_since: Option<Instant>,
    busy: Duration,
}

impl EncryptLane<'_> {
    /// Submits the next chunk (queues the encryption for a worker when no
    /// lane holds it).
    pub fn submit(&mut self, buf: ChunkBuf) -> Result<(), PoolError> {
        if self.feed.push(buf) {
            self.pool.submit(Work::Lane(Arc::clone(&self.feed)))?;
        }
        self.in_flight += 1;
        self.busy_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Chunks submitted and not yet back.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The next encrypted chunk (cancel safe); an error when the pool lost
    /// it (a worker panicked, or the pool shut down).
    pub async fn next(&mut self) -> Result<ChunkBuf, PoolError> {
        let done = self.done.recv().await.ok_or(PoolError)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0
            && let Some(since) = self.busy_since.take()
        {
            self.busy += since.elapsed();
        }
        Ok(done.buf)
    }

    /// Once every chunk is back: the encryption's chain and the time
    /// chunks were in flight (submission to completion, waiting for a
    /// worker included, overlapping chunks counted once).
    pub fn finish(self) -> Result<(EncryptCore, Duration), PoolError> {
        let core = self.feed.take_core().ok_or(PoolError)?;
        Ok((core, self.busy))
    }
}

impl Drop for EncryptLane<'_> {
    /// A job that stops early: the chunks not begun are not encrypted.
    fn drop(&mut self) {
        self.feed.abandon();
    }
}

fn worker_loop(inner: &Inner) {
    while let Some(work) = inner.next() {
        // A panicking task drops its result sender (a lane run, those of
        // its lanes), so its caller gets a PoolError; the worker lives on.
        let _ = catch_unwind(AssertUnwindSafe(|| match work {
            // The closure counts its own busy time (see `run`).
            Work::Task(task) => task(),
            Work::Lane(first) => {
                let started = Instant::now();
                let mut queue = inner;
                lanes::run(first, inner.lanes, &inner.lane_stats, &mut queue);
                inner.count_busy(started);
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_run_on_worker_threads() {
        let pool = WorkerPool::new(2, 2).expect("pool");
        let name = pool
            .run(|| thread::current().name().map(str::to_owned))
            .await
            .expect("runs");
        assert!(name.value.expect("named").starts_with("aesd-worker-"));
    }

    #[tokio::test]
    async fn a_panicking_task_is_an_error_and_the_pool_survives() {
        let pool = WorkerPool::new(1, 2).expect("pool");
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.run(|| 41 + 1).await.expect("runs").value, 42);
    }

    #[tokio::test]
    async fn busy_time_counts_task_execution() {
        let pool = WorkerPool::new(1, 2).expect("pool");
        pool.run(|| thread::sleep(Duration::from_millis(30)))
            .await
            .expect("runs");
        assert!(pool.busy_time() >= Duration::from_millis(30));
    }

    #[tokio::test]
    async fn a_closed_pool_refuses_work() {
        let pool = WorkerPool::new(1, 2).expect("pool");
        pool.close();
        assert!(pool.run(|| ()).await.is_err());
    }
}
