//! `aesload`, the load generator: the study's load suites (and custom
//! plans) against one or more aesd servers, or a server embedded in the
//! process, with every result verified; its reports, plots and
//! comparisons. Jobs run through the client library (`aesd-client`); the
//! crate also depends on `aesd-server` (the embedded server, when no
//! `--server` is given), `aesd-pattern` (test data and the verifier),
//! `aesd-age` (age headers of `--format age`, whose payload it checks with
//! RustCrypto's AEAD directly) and `aesd-proto`.
//!
//! The `aesload` binary (`src/bin/aesload/`) is a dispatcher over its own
//! modules: the arguments, the subcommands, the plans, the run, the
//! signals, the embedded server and the outputs; everything else is here.
//!
//! # Layout
//!
//! * [`pattern`], [`verify`]: seeded test data, so large transfers need no
//!   files, and [`VerifyingSink`](verify::VerifyingSink), which decrypts a
//!   result on an independent code path and compares it with the input
//!   (the `aesd-pattern` crate's, shared with the tests and benches).
//! * [`by_name`]: `--key NAME`: by-name transfers (a key of the
//!   server's keyring), each verified by a decryption by name on a second
//!   connection; the trial job that checks key, token and seal first.
//! * [`sizes`]: byte sizes like `2M` or `5MB`.
//! * [`distribution`]: weighted size lists and their seeded draws.
//! * [`durations`]: `10s`/`500ms` durations and the `--warmup` rule.
//! * [`shard`]: `--shard I/N`, which of a run's clients this process
//!   runs.
//! * [`start`]: `--start-at`/`--start-in`, so the shards start together.
//! * [`suites`]: the study's suites (basic 1–3, large, thousand,
//!   drowning) as load plans.
//! * [`interrupt`]: stopping a run early (SIGINT/SIGTERM): no new
//!   clients, then the running ones cancelled after a grace period.
//! * [`load`]: the load run behind `aesload`: batches or open-loop
//!   arrivals, round-robin over servers.
//! * [`record`]: what a run produced: one [`Transfer`](record::Transfer)
//!   per client with intended start, server-measured times, outcome.
//! * [`progress`]: live counters and the stderr progress display.
//! * [`histogram`]: latency HdrHistograms and their lossless JSON form.
//! * [`percentiles`]: p50/p90/p99/max from an HdrHistogram.
//! * [`report`]: the run's summary, the study's table, per-server rows.
//! * [`server_metrics`]: `--metrics-url`: the server's CPU, memory, jobs
//!   and temperature sampled from its Prometheus endpoint during a run.
//! * [`output`]: the `--json` document and `--csv` rows.
//! * [`merge`]: `aesload merge`: the shards of a run into one document.
//! * [`console`]: the report on stdout: a closed pipe ends it quietly,
//!   other write errors are kept for one line at the end.
//! * [`plot`]: the `--plot` SVG.
//! * [`compare`]: `aesload compare`: runs (and the study's published
//!   figures) side by side, as the study's table and as an SVG.

mod absorbing;
pub mod by_name;
pub mod compare;
pub mod console;
pub mod distribution;
pub mod durations;
pub mod histogram;
pub mod interrupt;
pub mod load;
pub mod merge;
pub mod output;
pub use aesd_pattern::{pattern, verify};
pub mod percentiles;
pub mod plot;
pub mod progress;
pub mod record;
pub mod report;
pub mod server_metrics;
pub mod shard;
pub mod sizes;
pub mod start;
pub mod suites;
pub mod verify_age;
