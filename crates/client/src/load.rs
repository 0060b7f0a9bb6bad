//! The load generator behind `aesload`: clients in batches, every result
//! verified.
//!
//! A plan of N clients runs in batches of C (the study's "chunks"): a
//! batch starts together and the next starts when all of its transfers are
//! done. Each client opens its own connection, encrypts a seeded pattern
//! of its drawn size and verifies the result independently.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aesd_proto::{Operation, Password};
use tokio::task::JoinSet;

use crate::connection::Client;
use crate::job::{JobReport, JobSpec};
use crate::pattern::{Pattern, PatternSource, splitmix64};
use crate::verify::VerifyingSink;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Number of transfers (one client each).
    pub clients: usize,
    /// Clients started together; the next batch waits for this one.
    pub batch: usize,
    /// File sizes to draw from (uniformly, seeded).
    pub sizes: Vec<u64>,
    /// Seed for sizes and data.
    pub seed: u64,
    /// PBKDF2 iterations per job.
    pub iterations: u32,
    /// Password for every job.
    pub password: Password,
}

impl LoadPlan {
    /// The file size client `index` sends.
    pub fn size_of(&self, index: usize) -> u64 {
        let draw = splitmix64(self.seed ^ splitmix64(index as u64));
        self.sizes[(draw % self.sizes.len() as u64) as usize]
    }

    /// The seed of client `index`'s data.
    pub fn data_seed(&self, index: usize) -> u64 {
        splitmix64(self.seed.wrapping_add(index as u64).wrapping_mul(0x9e37))
    }

    /// The client indices of each batch, in order.
    pub fn batches(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let batch = self.batch.max(1);
        (0..self.clients)
            .step_by(batch)
            .map(move |start| start..(start + batch).min(self.clients))
    }

    /// Total bytes the plan sends.
    pub fn total_bytes(&self) -> u64 {
        (0..self.clients).map(|index| self.size_of(index)).sum()
    }
}

/// How one transfer ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The result decrypted to exactly what was sent.
    Verified,
    /// The job failed or its result did not verify.
    Failed {
        /// Short stable kind (`busy`, `connection`, `verify`...).
        kind: String,
        /// What happened.
        message: String,
    },
}

/// One client's transfer.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// Client index.
    pub client: usize,
    /// Batch index.
    pub batch: usize,
    /// Bytes it sent (or meant to).
    pub size: u64,
    /// When it started, from the start of the run.
    pub started_at: Duration,
    /// The job's figures (absent when the job itself failed).
    pub report: Option<JobReport>,
    /// Verified or failed.
    pub outcome: Outcome,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct LoadRun {
    /// First start to last completion.
    pub duration: Duration,
    /// Every transfer, by client index.
    pub transfers: Vec<Transfer>,
}

/// Live counters for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    inner: Mutex<ProgressCounts>,
}

/// A snapshot of [`Progress`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ProgressCounts {
    /// Transfers running now.
    pub active: usize,
    /// Transfers finished (verified or failed).
    pub done: usize,
    /// Transfers failed.
    pub failed: usize,
    /// Input bytes of finished transfers.
    pub bytes: u64,
}

impl Progress {
    /// The counts now.
    pub fn snapshot(&self) -> ProgressCounts {
        self.inner.lock().map(|counts| *counts).unwrap_or_default()
    }

    fn update(&self, change: impl FnOnce(&mut ProgressCounts)) {
        if let Ok(mut counts) = self.inner.lock() {
            change(&mut counts);
        }
    }
}

/// Runs the plan against `server` (`host:port`).
pub async fn run_load(server: &str, plan: &LoadPlan, progress: Arc<Progress>) -> LoadRun {
    let started = Instant::now();
    let mut transfers = Vec::with_capacity(plan.clients);
    for (batch, range) in plan.batches().enumerate() {
        let mut running = JoinSet::new();
        for client in range {
            let server = server.to_owned();
            let spec = JobSpec {
                operation: Operation::Encrypt,
                password: plan.password.clone(),
                iterations: plan.iterations,
            };
            let size = plan.size_of(client);
            let seed = plan.data_seed(client);
            let progress = Arc::clone(&progress);
            running.spawn(async move {
                let started_at = started.elapsed();
                progress.update(|counts| counts.active += 1);
                let (report, outcome) = transfer(&server, &spec, seed, size).await;
                progress.update(|counts| {
                    counts.active -= 1;
                    counts.done += 1;
                    if outcome == Outcome::Verified {
                        counts.bytes += size;
                    } else {
                        counts.failed += 1;
                    }
                });
                Transfer {
                    client,
                    batch,
                    size,
                    started_at,
                    report,
                    outcome,
                }
            });
        }
        while let Some(joined) = running.join_next().await {
            match joined {
                Ok(transfer) => transfers.push(transfer),
                Err(err) => tracing::error!("a client task failed: {err}"),
            }
        }
    }
    transfers.sort_by_key(|transfer| transfer.client);
    LoadRun {
        duration: started.elapsed(),
        transfers,
    }
}

/// One client: connect, encrypt `size` bytes of the seeded pattern,
/// verify the result.
pub async fn transfer(
    server: &str,
    spec: &JobSpec,
    seed: u64,
    size: u64,
) -> (Option<JobReport>, Outcome) {
    let failed = |kind: &str, message: String| Outcome::Failed {
        kind: kind.to_owned(),
        message,
    };
    let mut client = match Client::connect(server).await {
        Ok(client) => client,
        Err(err) => return (None, failed(err.kind(), err.to_string())),
    };
    let mut source = PatternSource::new(seed, size);
    let mut sink = VerifyingSink::new(
        spec.password.as_bytes(),
        spec.iterations,
        Pattern::new(seed),
        size,
    );
    let report = match client.run_job(spec, &mut source, &mut sink).await {
        Ok(report) => report,
        Err(err) => return (None, failed(err.kind(), err.to_string())),
    };
    client.close().await;
    let outcome = match sink.finish() {
        Ok(_) => Outcome::Verified,
        Err(err) => failed("verify", err.to_string()),
    };
    (Some(report), outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(clients: usize, batch: usize) -> LoadPlan {
        LoadPlan {
            clients,
            batch,
            sizes: vec![2, 5, 10, 20],
            seed: 1,
            iterations: 1000,
            password: Password::new(b"pw".to_vec()),
        }
    }

    #[test]
    fn batches_cover_every_client_once_in_order() {
        let ranges: Vec<_> = plan(25, 10).batches().collect();
        assert_eq!(ranges, vec![0..10, 10..20, 20..25]);
        assert_eq!(
            plan(3, 0).batches().count(),
            3,
            "batch 0 means one at a time"
        );
    }

    #[test]
    fn sizes_are_drawn_from_the_list_reproducibly_and_all_appear() {
        let plan = plan(100, 10);
        let sizes: Vec<u64> = (0..100).map(|i| plan.size_of(i)).collect();
        assert!(sizes.iter().all(|size| plan.sizes.contains(size)));
        for size in &plan.sizes {
            assert!(sizes.contains(size), "size {size} never drawn");
        }
        assert_eq!(sizes, (0..100).map(|i| plan.size_of(i)).collect::<Vec<_>>());
        let mut other = plan.clone();
        other.seed = 2;
        assert_ne!(
            sizes,
            (0..100).map(|i| other.size_of(i)).collect::<Vec<_>>()
        );
    }
}
