//! aesd: a streaming AES-256-CBC encryption server for small Linux boards.
//!
//! Clients stream a file over a framed TCP protocol (crate `aesd-proto`);
//! aesd encrypts or decrypts it in the `openssl enc -aes-256-cbc -salt
//! -pbkdf2` format and streams the result back while the input still
//! arrives.
//!
//! # Layout
//!
//! * [`config`]: settings from flags, a TOML file and the environment.
//! * [`defaults`]: every setting's default, as a named constant and as shown.
//! * [`server`]: the listener, accept loop and graceful shutdown.
//! * [`shared`]: what every connection shares, and the narrow view of it
//!   a job's stages get.
//! * [`session`]: one connection: handshake, then jobs one after another.
//! * [`tls`]: TLS on the job port (`tls-cert`, `tls-key`).
//! * [`tls_init`]: `--tls-self-signed DIR`: a key, a certificate and its pin.
//! * [`tls_accept`]: a TLS connection's handshake, rate-limited per client
//!   ([`handshake_rate`]) and bounded ([`tls_gate`]), on a thread of its
//!   own, never on the async runtime's threads.
//! * [`auth`]: the optional pre-shared access token, compared in constant
//!   time, with failures slowed down per client address.
//! * [`job`]: one job: admission, then the read → cipher → write pipeline;
//!   [`job::core`], the job's state and transitions without I/O (also
//!   driven by the `cost` benchmark and a fuzz target).
//! * [`admission`]: the bounded FIFO queue in front of the active slots.
//! * [`limits`]: caps on open connections, in total and per client.
//! * [`log_limit`]: log lines about clients, rate-limited per client.
//! * [`client_key`]: who a client is for the per-client limits (an IPv4
//!   address, an IPv6 prefix).
//! * [`input_rate`]: the minimum input rate of a running job.
//! * [`kdf_budget`]: how much PBKDF2 (key source 1) one client may make
//!   the server run per minute.
//! * [`client_buckets`]: token buckets per client in a bounded table (the
//!   PBKDF2 budget, the TLS handshake rate).
//! * [`proxy`]: the PROXY protocol header from trusted load balancers
//!   (`trusted-proxies`), which says which client a connection is for.
//! * [`pool`]: the worker threads that do all cryptographic work, so the
//!   async reactor only moves bytes.
//! * [`lanes`]: the lane engine: a worker encrypts several jobs' CBC
//!   chains together, one lane each.
//! * [`cipher`]: the `openssl enc` format, streamed in place.
//! * [`backend`]: which AES runs (`aes-backend`): VexRiscv's AES
//!   instruction after a start-up self-test, or software.
//! * [`error`]: why a job failed and what the client is told.
//! * [`fd_limit`]: the open-file limit raised at start, `max-connections`
//!   kept within it.
//! * [`metrics`]: Prometheus metrics and the `/metrics` endpoint.
//! * [`shutdown`]: the stop and abort stages of a graceful shutdown.
//! * [`secrets`]: no core dumps (a crash leaves no passwords or keys on disk).
//! * [`readiness`]: telling a supervisor aesd listens (`--pid-file`,
//!   systemd's `NOTIFY_SOCKET`).

pub mod admission;
pub mod auth;
pub mod backend;
pub mod cipher;
pub mod client_buckets;
pub mod client_key;
pub mod config;
pub mod defaults;
pub mod error;
pub mod fd_limit;
pub mod handshake_rate;
pub mod input_rate;
pub mod job;
pub mod kdf_budget;
pub mod lanes;
pub mod limits;
pub mod log_limit;
pub mod metrics;
pub mod pool;
pub mod proxy;
pub mod readiness;
pub mod secrets;
pub mod server;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod tls;
pub mod tls_accept;
pub mod tls_gate;
pub mod tls_init;

pub use config::{Config, ConfigLayer};
pub use server::{RunningServer, Server, ServerError};
