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
//! worker threads, timers, metrics and logs.
//!
//! # Layout
//!
//! * [`config`]: settings from flags, a TOML file and the environment.
//! * [`defaults`]: every setting's default, as a named constant and as shown.
//! * [`server`]: the listener, accept loop and graceful shutdown.
//! * [`accept`]: the one way a connection comes in: PROXY header → caps →
//!   TLS → driver.
//! * [`driver`]: drives one connection's state machine (aesd-core's
//!   `Connection`): its reads, writes, work, admission and deadlines.
//! * [`outgoing`]: the frame on its way out, written without a copy.
//! * [`shared`]: what every connection shares.
//! * [`tls`]: TLS on the job port (`tls-cert`, `tls-key`).
//! * [`tls_init`]: `--tls-self-signed DIR`: a key, a certificate and its pin.
//! * [`auth`]: the optional pre-shared access token read from its file,
//!   with failures slowed down per client address.
//! * [`admission`]: the bounded FIFO queue in front of the active slots.
//! * [`limits`]: caps on open connections, in total and per client.
//! * [`log_limit`]: log lines about clients, rate-limited per client.
//! * [`client_key`]: who a client is for the per-client limits (an IPv4
//!   address, an IPv6 prefix).
//! * [`input_rate`]: the minimum input rate of a running job.
//! * [`kdf_budget`]: how much PBKDF2 (key source 1) one client may make
//!   the server run per minute.
//! * [`proxy`]: the PROXY protocol header from trusted load balancers
//!   (`trusted-proxies`), which says which client a connection is for.
//! * [`pool`]: the worker threads that do all cryptographic work, so the
//!   async reactor only moves bytes; CBC encryption chunks through
//!   aesd-core's lane engine, several jobs' chains together.
//! * [`backend`]: which AES runs (`aes-backend`): VexRiscv's AES
//!   instruction after a start-up self-test, or software.
//! * [`error`]: why a connection failed (the driver's errors beside the
//!   state machine's) and what the client is told.
//! * [`fd_limit`]: the open-file limit raised at start, `max-connections`
//!   kept within it.
//! * [`metrics`]: Prometheus metrics and the `/metrics` endpoint.
//! * [`shutdown`]: the stop and abort stages of a graceful shutdown.
//! * [`secrets`]: no core dumps (a crash leaves no passwords or keys on disk).
//! * [`readiness`]: telling a supervisor aesd listens (`--pid-file`,
//!   systemd's `NOTIFY_SOCKET`).

pub mod accept;
pub mod admission;
pub mod auth;
pub mod backend;
pub mod client_key;
pub mod config;
pub mod defaults;
pub mod driver;
pub mod error;
pub mod fd_limit;
pub mod input_rate;
pub mod kdf_budget;
pub mod limits;
pub mod log_limit;
pub mod metrics;
pub mod outgoing;
pub mod pool;
pub mod proxy;
pub mod readiness;
pub mod secrets;
pub mod server;
pub mod shared;
pub mod shutdown;
pub mod tls;
pub mod tls_gate;
pub mod tls_init;

pub use config::{Config, ConfigLayer};
pub use server::{RunningServer, Server, ServerError, StartError, start_loopback};
