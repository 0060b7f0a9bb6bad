//! Client side of aesd: a library to run jobs, plus the `aesload` load
//! generator and the `aescrypt` file tool built on it.
//!
//! # Layout
//!
//! * [`connection`]: [`Client`], a handshaken connection to a server.
//! * [`job`]: [`Client::run_job`]: one job from any async reader to any
//!   async writer, full duplex, with a [`JobReport`] of bytes and times
//!   (and [`Client::run_job_observed`] for live queue/start events).
//! * [`key_source`]: which key source a job uses; the client's own
//!   PBKDF2 (key source 2: the password never leaves the client).
//! * [`error`]: [`ClientError`], why an operation failed.
//! * [`password`]: password and access-token files, read as
//!   `openssl -pass file:` reads a password.
//! * [`pattern`]: seeded test data, so large transfers need no files.
//! * [`verify`]: [`VerifyingSink`](verify::VerifyingSink), which decrypts a
//!   result on an independent code path and compares it with the input.
//! * [`sizes`]: byte sizes like `2M` or `5MB`.
//! * [`distribution`]: weighted size lists and their seeded draws.
//! * [`durations`]: `10s`/`500ms` durations and the `--warmup` rule.
//! * [`suites`]: the study's suites (basic 1–3, large, thousand,
//!   drowning) as load plans.
//! * [`load`]: the load run behind `aesload`: batches or open-loop
//!   arrivals, round-robin over servers.
//! * [`record`]: what a run produced: one [`Transfer`](record::Transfer)
//!   per client with intended start, server-measured times, outcome.
//! * [`progress`]: live counters and the stderr progress display.
//! * [`percentiles`]: p50/p90/p99/max from an HdrHistogram.
//! * [`report`]: the run's summary, the study's table, per-server rows.
//! * [`server_metrics`]: `--metrics-url`: the server's CPU, memory, jobs
//!   and temperature sampled from its Prometheus endpoint during a run.
//! * [`output`]: the `--json` document and `--csv` rows.
//! * [`plot`]: the `--plot` SVG.
//! * [`compare`]: `aesload compare`: runs (and the study's published
//!   figures) side by side, as the study's table and as an SVG.
//! * [`testkit`]: helpers shared by the integration tests.

pub mod atomic_output;
pub mod compare;
pub mod connection;
pub mod distribution;
pub mod durations;
pub mod error;
pub mod job;
pub mod key_source;
pub mod load;
pub mod output;
pub mod password;
pub mod pattern;
pub mod percentiles;
pub mod plot;
pub mod printable;
pub mod progress;
pub mod record;
pub mod report;
pub mod server_metrics;
pub mod sizes;
pub mod suites;
pub mod verify;

pub use connection::Client;
pub use error::ClientError;
pub use job::{DEFAULT_ITERATIONS, JobEvent, JobReport, JobSpec};
pub use key_source::KeyDerivation;
pub mod testkit;
