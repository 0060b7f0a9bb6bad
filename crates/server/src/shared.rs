//! What every connection of a server shares, and the narrow views of it
//! that a job's stages get.
//!
//! [`Shared`] is built once by [`crate::server::Server::bind`]; the
//! listener, sessions and jobs only read it. A job's stages do not see all
//! of it: [`Shared::job_context`] hands them the pool, admission, shutdown
//! and metrics, and [`JobLimits`], the settings a job obeys.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::admission::{Admission, PerClientCaps};
use crate::auth::FailureThrottle;
use crate::client_key::ClientKey;
use crate::config::Config;
use crate::handshake_rate::HandshakeRate;
use crate::kdf_budget::KdfBudget;
use crate::limits::ConnectionLimits;
use crate::log_limit::LogLimiter;
use crate::metrics::{LiveCollector, Metrics};
use crate::pool::WorkerPool;
use crate::shutdown::Shutdown;
use crate::tls_accept::HandshakeThread;
use crate::tls_gate::HandshakeGate;

/// State every connection shares.
pub struct Shared {
    /// Effective settings.
    pub config: Config,
    /// CPU workers.
    pub pool: Arc<WorkerPool>,
    /// Admission queue.
    pub admission: Arc<Admission>,
    /// Shutdown stages.
    pub shutdown: Shutdown,
    /// Name and version sent in the welcome frame.
    pub name: String,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Open connection counts and caps.
    pub connections: Arc<ConnectionLimits>,
    /// Delays for failed authentications, per client address.
    pub auth_failures: FailureThrottle,
    /// PBKDF2 iterations each client may still make the server run.
    pub kdf_budget: KdfBudget,
    /// Log lines about each client, rate-limited.
    pub log_limit: LogLimiter,
    /// TLS handshakes in progress, bounded in all and per client.
    pub tls_handshakes: Arc<HandshakeGate>,
    /// TLS handshakes each client may still start.
    pub tls_rate: HandshakeRate,
    /// The thread TLS handshakes run on (when the job port speaks TLS).
    pub tls_thread: Option<HandshakeThread>,
}

impl Shared {
    /// The state for `config`: starts the worker pool (and, with TLS, the
    /// handshake thread), sets up admission, the connection caps and the
    /// metrics.
    pub fn new(config: Config) -> std::io::Result<Shared> {
        let pool = WorkerPool::new(config.workers, crate::cipher::LANES)?;
        let admission = Admission::new(
            config.max_active,
            config.max_queue,
            PerClientCaps {
                active: config.max_active_per_client,
                waiting: config.max_queued_per_client,
            },
        );
        let metrics = Metrics::new(LiveCollector {
            admission: Arc::clone(&admission),
            pool: Arc::clone(&pool),
            limits: (config.max_active, config.max_queue),
            sensor: config.temperature.resolve(),
        });
        let connections =
            ConnectionLimits::new(config.max_connections, config.max_connections_per_client);
        let tls_thread = match config.tls {
            Some(_) => Some(HandshakeThread::start()?),
            None => None,
        };
        Ok(Shared {
            pool,
            admission,
            shutdown: Shutdown::new(),
            name: format!("aesd {}", env!("CARGO_PKG_VERSION")),
            auth_failures: FailureThrottle::new(config.auth_failure_delay),
            kdf_budget: KdfBudget::new(config.kdf_budget).with_total(config.kdf_budget_total),
            log_limit: LogLimiter::default(),
            tls_handshakes: Arc::default(),
            tls_rate: HandshakeRate::new(config.tls_handshake_rate),
            tls_thread,
            config,
            metrics,
            connections,
        })
    }

    /// The key the per-client limits know `addr` by (`client-ipv6-prefix`).
    pub fn client_key(&self, addr: IpAddr) -> ClientKey {
        ClientKey::of(addr, self.config.client_ipv6_prefix)
    }

    /// What a job's stages use of the server.
    pub fn job_context(&self) -> JobContext<'_> {
        JobContext {
            pool: &self.pool,
            admission: &self.admission,
            shutdown: &self.shutdown,
            metrics: &self.metrics,
            kdf_budget: &self.kdf_budget,
            limits: JobLimits::of(&self.config),
        }
    }
}

/// The parts of the server a job uses, and nothing else.
#[derive(Clone, Copy)]
pub struct JobContext<'a> {
    /// The workers that run the cryptography.
    pub pool: &'a WorkerPool,
    /// The queue in front of the active slots.
    pub admission: &'a Arc<Admission>,
    /// Stopping (queued jobs leave) and aborting (running jobs are cut off).
    pub shutdown: &'a Shutdown,
    /// Where the job counts its bytes and times.
    pub metrics: &'a Metrics,
    /// The clients' PBKDF2 budgets.
    pub kdf_budget: &'a KdfBudget,
    /// The settings a job obeys.
    pub limits: JobLimits,
}

/// The settings a job obeys.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    /// Largest data frame, and the size of the job's chunk buffers.
    pub chunk_size: u32,
    /// Longest silence (client not sending, or not reading the output).
    pub idle_timeout: Duration,
    /// Most input one job may send.
    pub max_file_size: u64,
    /// PBKDF2 iteration counts a job may ask for.
    pub iterations: (u32, u32),
    /// Slowest input a running job may send, bytes per second (0: off).
    pub min_input_rate: u32,
    /// Waiting time over which the input rate is measured.
    pub input_rate_window: Duration,
}

impl JobLimits {
    /// The limits `config` sets.
    pub fn of(config: &Config) -> JobLimits {
        JobLimits {
            chunk_size: config.chunk_size,
            idle_timeout: config.idle_timeout,
            max_file_size: config.max_file_size,
            iterations: (config.min_iterations, config.max_iterations),
            min_input_rate: config.min_input_rate,
            input_rate_window: config.input_rate_window,
        }
    }
}
