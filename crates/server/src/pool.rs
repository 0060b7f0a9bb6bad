//! A bounded pool of worker threads for CPU work (PBKDF2, AES).
//!
//! The tokio reactor threads only move bytes; every cryptographic step is
//! sent here and awaited. A job never has more than one task in flight,
//! so the pool's backlog is bounded by the number of admitted jobs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::metrics::wide::WideAtomic;
use prometheus_client::metrics::counter::Atomic;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// The pool's workers are gone, or the task panicked.
#[derive(Debug, thiserror::Error)]
#[error("worker pool task failed: the task panicked or the pool has shut down")]
pub struct PoolError;

/// A fixed set of named worker threads fed from one FIFO.
pub struct WorkerPool {
    sender: Mutex<Option<mpsc::Sender<Task>>>,
    workers: usize,
    busy_micros: Arc<WideAtomic>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("workers", &self.workers)
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
    /// Starts `workers` threads (at least one).
    pub fn new(workers: usize) -> std::io::Result<Arc<Self>> {
        let workers = workers.max(1);
        let (sender, receiver) = mpsc::channel::<Task>();
        let receiver = Arc::new(Mutex::new(receiver));
        for index in 0..workers {
            let receiver = Arc::clone(&receiver);
            thread::Builder::new()
                .name(format!("aesd-worker-{index}"))
                .spawn(move || worker_loop(&receiver))?;
        }
        Ok(Arc::new(WorkerPool {
            sender: Mutex::new(Some(sender)),
            workers,
            busy_micros: Arc::new(WideAtomic::default()),
        }))
    }

    /// How many worker threads run.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Time all workers together spent running tasks.
    pub fn busy_time(&self) -> Duration {
        Duration::from_micros(self.busy_micros.get())
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
        let busy = Arc::clone(&self.busy_micros);
        let job: Task = Box::new(move || {
            let started = Instant::now();
            let value = task();
            // Counted before the result is delivered, so a caller that
            // reads busy_time() after run() returns sees this task.
            busy.inc_by(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            let _ = done_tx.send(value);
        });
        {
            let sender = self.sender.lock().map_err(|_| PoolError)?;
            sender
                .as_ref()
                .ok_or(PoolError)?
                .send(job)
                .map_err(|_| PoolError)?;
        }
        let value = done_rx.await.map_err(|_| PoolError)?;
        Ok(Timed {
            value,
            elapsed: submitted.elapsed(),
        })
    }

    /// Stops the workers once the tasks already queued are done.
    pub fn close(&self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
    }
}

fn worker_loop(receiver: &Mutex<mpsc::Receiver<Task>>) {
    loop {
        let task = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok(task) = task else { return };
        // A panicking task drops its result sender, so its caller gets a
        // PoolError; the worker itself lives on.
        let _ = catch_unwind(AssertUnwindSafe(task));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_run_on_worker_threads() {
        let pool = WorkerPool::new(2).expect("pool");
        let name = pool
            .run(|| thread::current().name().map(str::to_owned))
            .await
            .expect("runs");
        assert!(name.value.expect("named").starts_with("aesd-worker-"));
    }

    #[tokio::test]
    async fn a_panicking_task_is_an_error_and_the_pool_survives() {
        let pool = WorkerPool::new(1).expect("pool");
        assert!(pool.run(|| panic!("boom")).await.is_err());
        assert_eq!(pool.run(|| 41 + 1).await.expect("runs").value, 42);
    }

    #[tokio::test]
    async fn busy_time_counts_task_execution() {
        let pool = WorkerPool::new(1).expect("pool");
        pool.run(|| thread::sleep(Duration::from_millis(30)))
            .await
            .expect("runs");
        assert!(pool.busy_time() >= Duration::from_millis(30));
    }

    #[tokio::test]
    async fn a_closed_pool_refuses_work() {
        let pool = WorkerPool::new(1).expect("pool");
        pool.close();
        assert!(pool.run(|| ()).await.is_err());
    }
}
