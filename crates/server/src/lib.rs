//! aesd: a streaming AES-256-CBC encryption server for small Linux boards.
//!
//! Clients stream a file over a framed TCP protocol (crate `aesd-proto`);
//! aesd encrypts or decrypts it in the `openssl enc -aes-256-cbc -salt
//! -pbkdf2` format (or age) and streams the result back while the input
//! still arrives.
//!
//! What a connection and its jobs do is aesd-core's: the protocol state
//! machine and the job transform, without I/O. This crate is their driver:
//! sockets, TLS, the PROXY header, the connection caps, admission, the
//! worker threads, timers, metrics and logs. Of aesd's crates it depends
//! on `aesd-proto` (with its tokio frame I/O), `aesd-core` and
//! `aesd-vexriscv` (the AES instruction's start-up probe and self-test),
//! `aesd-cli` (the command-line pieces every binary shares); never on the client, the load generator or the test helpers (its tests
//! use `aesd-client`, `aesd-pattern`, `aesd-testkit` and `aesd-age` as
//! dev-dependencies).
//!
//! Its public face is small: [`Server`] (bind, serve, or run in the
//! background as a [`RunningServer`], whose [`ServerState`] shows slots,
//! connections, workers and metrics), [`start_loopback`] for an
//! in-process server, [`Config`] with [`ConfigLayer`] (and the `caps` it
//! states; resolving the settings reads no file, the files they name are
//! read afterwards into [`Secrets`]), the `cli` the `aesd`
//! binary runs, and `tls_init` (`--tls-self-signed`).
//!
//! # Layout
//!
//! * `cli`: the `aesd` command (the binary is only its `main`); with
//!   aescrypt and aesload it shares the `aesd-cli` crate's pieces
//!   (`--generate`; no core dumps: a crash leaves no passwords or keys on
//!   disk).
//! * `caps`: fixed limits that are not settings.
//! * `settings`: the table declaring every setting once (name, type, help,
//!   default, allowed values), which makes `ConfigLayer` and `Config`.
//! * `config`: settings from flags, a TOML file and the environment,
//!   resolved and checked.
//! * `server`: the listener, accept loop and graceful shutdown.
//! * `accept`: the one way a connection comes in: PROXY header → caps →
//!   TLS → driver.
//! * `driver`: drives one connection's state machine (aesd-core's
//!   `Connection`): its reads, writes, work, admission and deadlines.
//! * `outgoing`: the frame on its way out, written without a copy.
//! * `shared`: what every connection shares.
//! * `tls`: TLS on the job port (`tls-cert`, `tls-key`).
//! * `tls_init`: `--tls-self-signed DIR`: a key, a certificate and its pin.
//! * `tls_accept`: a TLS connection's handshake, rate-limited per client
//!   (`handshake_rate`) and bounded (`tls_gate`), on a thread of its own,
//!   never on the async runtime's threads.
//! * `tls_thread`: that thread of its own, which runs every handshake
//!   (owned by the shared state, handed each handshake by `tls_accept`).
//! * `auth`: the optional pre-shared access token read from its file,
//!   with failures slowed down per client address.
//! * `admission`: the bounded FIFO queue in front of the active slots.
//! * `limits`: caps on open connections, in total and per client.
//! * `log_limit`: log lines about clients, rate-limited per client.
//! * `client_id`: who a client is for the per-client limits (an IPv4
//!   address, an IPv6 prefix).
//! * `input_rate`: the minimum input rate of a running job.
//! * `low_water`: the receive low-water mark while a payload is read (one
//!   wake per frame, not per TCP segment; the crate's only unsafe call).
//! * `kdf_budget`: how much PBKDF2 (key source 1) one client may make
//!   the server run per minute.
//! * `client_buckets`: token buckets per client in a bounded table (the
//!   PBKDF2 budget, the TLS handshake rate).
//! * `proxy`: the PROXY protocol header from trusted load balancers
//!   (`trusted-proxies`), which says which client a connection is for.
//! * `pool`: the worker threads that do all cryptographic work, so the
//!   async reactor only moves bytes; CBC encryption chunks through
//!   aesd-core's lane engine, several jobs' chains together.
//! * `backend`: which AES runs (`aes-backend`): VexRiscv's AES
//!   instruction after a start-up self-test, or software.
//! * `error`: why a connection failed (the driver's errors beside the
//!   state machine's) and what the client is told.
//! * `fd_limit`: the open-file limit raised at start, `max-connections`
//!   kept within it.
//! * `metrics`: Prometheus metrics and the `/metrics` endpoint.
//! * `wide_counter`: 64-bit counters on every target (riscv32 included),
//!   for the metrics and the worker pool's lane counts.
//! * `shutdown`: the stop and abort stages of a graceful shutdown.
//! * `keyring_state`: the keyring (`--keyring`, `--dev`): not
//!   initialised, sealed or unsealed, every change stored before it is
//!   answered; shared by the HTTP API and the binary port.
//! * `mlock`: `--mlock`, memory locked while aesd holds a keyring.
//! * `transit_seal`: auto-unseal (`--seal-transit-*`): the root key
//!   wrapped by another server's Transit key, a small blocking HTTP/1.1
//!   client, the retry loop.
//! * `named_keys`: the binary port's by-name key source (key source 5)
//!   on that keyring, with the HTTP API's token and policy check.
//! * `etcd`: the keyring of a fleet in etcd (`--keyring etcd://...`):
//!   a small v3 JSON client, the store (a transaction per change) and
//!   the watch that loads other boards' changes.
//! * `http`: the HTTP/1.1 API (`--http-listen`) with OpenBao's endpoints
//!   for init, unseal, policies, tokens and transit keys (the `bao` CLI
//!   administers aesd).
//! * `api_start`: starting the keyring and its HTTP API from the
//!   settings (cargo feature `http-api`, the default; without it
//!   `api_absent.rs` takes its place and refuses those settings).
//! * `readiness`: telling a supervisor aesd listens (`--pid-file`,
//!   systemd's `NOTIFY_SOCKET`).
//! * `audit_file`, `audit_chain`: the audit log's file (`--audit-log`,
//!   rotation) and its hash chain; `job_audit`: the by-name jobs' lines.
//! * `verify_audit`: `aesd verify-audit FILE...`, checking the chain
//!   with the running aesd (`bao_client`: its HTTP API, as `BAO_ADDR`
//!   and `BAO_TOKEN` name it).

// Without the cargo feature `http-api` nothing starts the keyring, its
// HTTP API or their stores (`api_absent.rs` refuses their settings), and
// what only they use is unreachable: the linker drops it. Such a build is
// for the keyless board and for measuring what the API costs; it is
// checked in the test command but not linted for dead code.
#![cfg_attr(not(feature = "http-api"), allow(dead_code, unused_imports))]

mod accept;
mod admission;
#[cfg(not(feature = "http-api"))]
#[path = "api_absent.rs"]
mod api_start;
#[cfg(feature = "http-api")]
mod api_start;
mod audit_chain;
mod audit_file;
mod auth;
mod backend;
mod bao_client;
pub mod cli;
mod client_buckets;
mod client_id;
pub mod config;
mod driver;
mod error;
mod etcd;
mod fd_limit;
mod handshake_rate;
mod http;
mod http_client;
mod input_rate;
mod job_audit;
mod kdf_budget;
mod keyring_state;
mod limits;
mod log_limit;
mod low_water;
mod metrics;
mod mlock;
mod named_keys;
mod outgoing;
mod pool;
mod proxy;
mod readiness;
mod server;
mod settings;
mod shared;
mod shutdown;
mod tls;
mod tls_accept;
mod tls_client;
mod tls_gate;
pub mod tls_init;
mod tls_thread;
mod transit_seal;
mod verify_audit;
mod wide_counter;

pub use config::{Cli, Config, ConfigError, ConfigLayer, Secrets, TlsFiles};
pub use server::{
    DevKeyringError, Occupancy, RunningServer, Server, ServerError, ServerState, StartError,
    start_loopback,
};

/// Fixed limits the server applies that are not settings (documented in
/// docs/hardening.md; stated here for monitoring and tests).
pub mod caps {
    /// Log lines about one client per window of the log limiter; past
    /// them, one summary line per window.
    pub use crate::log_limit::LINES_PER_WINDOW as LOG_LINES_PER_WINDOW;
    /// Scrapes of `/metrics` served at once, in total.
    pub use crate::metrics::http::MAX_CONNECTIONS as METRICS_CONNECTIONS;
    /// Scrapes of `/metrics` served at once from one client.
    pub use crate::metrics::http::MAX_PER_CLIENT as METRICS_CONNECTIONS_PER_CLIENT;
    pub use crate::tls_accept::REFUSAL_ALERT as TLS_REFUSAL_ALERT;
    /// TLS handshakes in progress at once from one client.
    pub use crate::tls_gate::MAX_PER_CLIENT as TLS_HANDSHAKES_PER_CLIENT;
}
