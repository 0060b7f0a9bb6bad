//! What a load run produced: one [`Transfer`] per client, with the times
//! a report needs, grouped into runs of a suite.
//!
//! Times are measured from the run's start. A transfer's total time
//! counts from its *intended* start (its batch's start, or its arrival
//! time in an open-loop run), not from when the load generator got round
//! to it, so waiting caused by the load itself is never hidden
//! (no coordinated omission).

use std::time::{Duration, SystemTime};

use crate::durations::Warmup;
use crate::load::LoadPlan;
use aesd_client::job::JobReport;

/// How one transfer ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The result decrypted to exactly what was sent.
    Verified,
    /// The job failed or its result did not verify.
    Failed {
        /// Short stable kind (`busy`, `connect`, `connection`, `verify`...).
        kind: String,
        /// What happened.
        message: String,
    },
}

/// One client's transfer.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// Client index, in intended start order.
    pub client: usize,
    /// Index of the server it went to (in the run's server list).
    pub server: usize,
    /// Batch index (closed-loop runs; `None` in open loop).
    pub batch: Option<usize>,
    /// Bytes it sent (or meant to).
    pub size: u64,
    /// When it was meant to start: its batch's start, or its arrival
    /// time in open loop.
    pub scheduled: Duration,
    /// When its task actually began (later than `scheduled` when the
    /// load generator fell behind).
    pub dispatched: Duration,
    /// When it ended, verified or failed.
    pub finished: Duration,
    /// The job's figures (absent when the job itself failed).
    pub report: Option<JobReport>,
    /// Verified or failed.
    pub outcome: Outcome,
}

impl Transfer {
    /// Intended start to end: what a user of the server would have
    /// waited.
    pub fn total(&self) -> Duration {
        self.finished.saturating_sub(self.scheduled)
    }

    /// Intended start to actual start (the load generator's own delay).
    pub fn dispatch_delay(&self) -> Duration {
        self.dispatched.saturating_sub(self.scheduled)
    }

    /// Waiting for admission, as measured by the server.
    pub fn queue(&self) -> Option<Duration> {
        self.report.as_ref().map(|report| report.queue)
    }

    /// Cryptographic work, as measured by the server.
    pub fn processing(&self) -> Option<Duration> {
        self.report.as_ref().map(|report| report.processing)
    }

    /// The rest of the total: `total − queue − processing` (connecting,
    /// moving bytes, and any dispatch delay).
    pub fn network(&self) -> Option<Duration> {
        let report = self.report.as_ref()?;
        Some(
            self.total()
                .saturating_sub(report.queue)
                .saturating_sub(report.processing),
        )
    }

    /// Whether the result verified.
    pub fn verified(&self) -> bool {
        self.outcome == Outcome::Verified
    }

    /// The failure's kind and message, when it failed.
    pub fn failure(&self) -> Option<(&str, &str)> {
        match &self.outcome {
            Outcome::Verified => None,
            Outcome::Failed { kind, message } => Some((kind, message)),
        }
    }
}

/// A finished run of one plan.
#[derive(Debug, Clone)]
pub struct LoadRun {
    /// Start of the run to the last completion.
    pub duration: Duration,
    /// The wall-clock time of the run's start, from which every
    /// transfer's times count (the shards of a run line up by it).
    pub started_at: SystemTime,
    /// Every transfer, by client index.
    pub transfers: Vec<Transfer>,
}

/// One suite's plan and what running it produced.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    /// The suite's name (`basic1`... or `custom`).
    pub name: String,
    /// What was run.
    pub plan: LoadPlan,
    /// What happened.
    pub run: LoadRun,
}

/// The settings shared by every suite of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct RunParameters {
    /// Servers, in round-robin order (`host:port`).
    pub servers: Vec<String>,
    /// Whether the server is aesload's own embedded one.
    pub embedded: bool,
    /// Seed of the size draws and the data.
    pub seed: u64,
    /// Factor applied to every file size.
    pub scale: f64,
    /// PBKDF2 iterations per job.
    pub iterations: u32,
    /// The jobs' file format: `openssl` or `age`.
    pub format: &'static str,
    /// What the results leave out.
    pub warmup: Warmup,
    /// The part of the run this process ran.
    pub shard: crate::shard::Shard,
    /// The local address connections came from (`--bind`).
    pub bind: Option<std::net::IpAddr>,
    /// When the invocation started (the origin of the server metrics'
    /// times).
    pub started_at: std::time::SystemTime,
}
