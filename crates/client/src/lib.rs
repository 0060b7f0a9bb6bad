//! Client side of aesd: a library to run jobs, plus the `aesload` load
//! generator and the `aescrypt` file tool built on it.
//!
//! # Layout
//!
//! * [`connection`]: [`Client`], a handshaken connection to a server.
//! * [`job`]: [`Client::run_job`]: one job from any async reader to any
//!   async writer, full duplex, with a [`JobReport`] of bytes and times.
//! * [`error`]: [`ClientError`], why an operation failed.
//! * [`password`]: password files, read as `openssl -pass file:` does.
//! * [`pattern`]: seeded test data, so large transfers need no files.
//! * [`verify`]: [`VerifyingSink`](verify::VerifyingSink), which decrypts a
//!   result on an independent code path and compares it with the input.
//! * [`load`]: the batched load run behind `aesload`.
//! * [`report`]: the run's summary in the study's table.
//! * [`sizes`]: byte sizes like `2M` or `5MB`.

pub mod connection;
pub mod error;
pub mod job;
pub mod load;
pub mod password;
pub mod pattern;
pub mod report;
pub mod sizes;
pub mod verify;

pub use connection::Client;
pub use error::ClientError;
pub use job::{DEFAULT_ITERATIONS, JobReport, JobSpec};
pub mod testkit;
