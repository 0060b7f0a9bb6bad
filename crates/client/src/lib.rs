//! The aesd client library: run jobs against an aesd server, plus the
//! `aescrypt` file tool built on it.
//!
//! Of aesd's crates it depends on the protocol (`aesd-proto`, with its
//! tokio frame I/O), `aesd-cipher` (the openssl enc format's header
//! constants and key derivation, for key source 2) and `aesd-age` (age
//! recipients, identities and headers); never on the core or the server. The load generator (`aesload`, crate `aesd-load`) and the
//! integration tests' helpers (crate `aesd-testkit`) are built on top of it.
//!
//! # Layout
//!
//! * [`connection`]: [`Client`], a handshaken connection to a server.
//! * [`job`]: [`Client::run_job`]: one job from any async reader to any
//!   async writer, full duplex, with a [`JobReport`] of bytes and times
//!   (and [`Client::run_job_observed`] for live queue/start events).
//! * [`age_job`]: age (format 2) jobs: recipients to encrypt, the file
//!   key unwrapped here with the identity or passphrase (`age -p`) to
//!   decrypt.
//! * [`armor_io`]: ASCII-armored age files (`age -a`) read and written as
//!   streams.
//! * [`by_name`]: by-name jobs (key source 5) under a key of the
//!   server's keyring, the keyring token, header-only rewrap, data keys
//!   and unwrapping a header's file key.
//! * [`local`]: by-name files encrypted and decrypted on this machine,
//!   only their header sent ([`Client::encrypt_locally`]).
//! * [`key_source`]: which key source a job uses; the client's own
//!   PBKDF2 (key source 2: the password never leaves the client).
//! * [`tls`]: TLS to servers started with `--tls-cert` ([`ConnectOptions`]).
//! * [`cert_pin`]: pinned server certificates (`--tls-ca` with the server's
//!   own certificate, `--tls-pin sha256:...`).
//! * [`error`]: [`ClientError`], why an operation failed.
//! * [`printable`]: server text made safe to print (control characters
//!   escaped).
//!
//! The command-line pieces `aescrypt` shares with `aesd` and `aesload`
//! (`--pass`, password files, `-o`, `--generate`, error lines, no core
//! dumps) are the `aesd-cli` crate's, which this library does not use.

pub mod age_job;
pub mod armor_io;
pub mod by_name;
pub mod cert_pin;
pub mod connection;
pub mod error;
pub mod job;
pub mod key_source;
pub mod local;
pub mod printable;
mod rewrap;
pub mod tls;

pub use age_job::AgeSpec;
pub use by_name::{DataKey, Unwrapped, WrappedDataKey};
pub use connection::{Client, ConnectOptions};
pub use error::ClientError;
pub use job::{DEFAULT_ITERATIONS, JobEvent, JobReport, JobSpec};
pub use key_source::KeyDerivation;
pub use local::LocalReport;
