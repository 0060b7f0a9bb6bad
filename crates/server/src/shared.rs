//! What every connection of a server shares.
//!
//! [`Shared`] is built once by [`crate::server::Server::bind`]; the
//! listener and the connections' drivers only read it. The protocol state
//! machine of each connection gets only its [`Settings`], the part of the
//! configuration it obeys.

use std::net::IpAddr;
use std::sync::Arc;

use aesd_core::connection::Settings;
use aesd_core::job::JobLimits;

use crate::admission::{Admission, PerClientCaps};
use crate::auth::FailureThrottle;
use crate::client_id::ClientId;
use crate::config::{Config, Secrets};
use crate::handshake_rate::HandshakeRate;
use crate::kdf_budget::KdfBudget;
use crate::limits::ConnectionLimits;
use crate::log_limit::LogLimiter;
use crate::metrics::{LiveCollector, Metrics};
use crate::pool::WorkerPool;
use crate::shutdown::Shutdown;
use crate::tls::TlsIdentity;
use crate::tls_gate::HandshakeGate;
use crate::tls_thread::HandshakeThread;

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
    /// What each connection's protocol state machine obeys.
    pub settings: Arc<Settings>,
    /// The keyring of by-name jobs, once attached.
    pub named_keys: Arc<crate::named_keys::KeyringKeys>,
    /// TLS handshakes each client may still start.
    pub tls_rate: HandshakeRate,
    /// The thread TLS handshakes run on (when the job port speaks TLS).
    pub tls_thread: Option<HandshakeThread>,
    /// The job port's TLS identity, when it speaks TLS.
    pub tls: Option<TlsIdentity>,
}

impl Shared {
    /// The state for `config`: starts the worker pool (and, with TLS, the
    /// handshake thread), sets up admission, the connection caps and the
    /// metrics.
    pub fn new(config: Config, secrets: Secrets) -> std::io::Result<Shared> {
        let pool = WorkerPool::new(config.workers, aesd_core::LANES)?;
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
        let named_keys = Arc::new(crate::named_keys::KeyringKeys::default());
        let settings = Arc::new(Settings {
            named_keys: Some(Arc::clone(&named_keys) as Arc<dyn aesd_core::named_key::NamedKeys>),
            spare_buffers: Arc::new(aesd_core::chunk::SpareBuffers::for_chunk_size(
                config.chunk_size,
            )),
            server_name: format!("aesd {}", env!("CARGO_PKG_VERSION")),
            chunk_size: config.chunk_size,
            access_token: secrets
                .access_token
                .as_ref()
                .map(|token| token.token().clone()),
            handshake_timeout: config.handshake_timeout,
            idle_timeout: config.idle_timeout,
            max_jobs: config.max_jobs_per_connection,
            job: JobLimits {
                max_file_size: config.max_file_size,
                iterations: (config.min_iter, config.max_iter),
            },
        });
        let tls_thread = match secrets.tls {
            Some(_) => Some(HandshakeThread::start()?),
            None => None,
        };
        Ok(Shared {
            settings,
            named_keys,
            pool,
            admission,
            shutdown: Shutdown::new(),
            auth_failures: FailureThrottle::new(config.auth_failure_delay),
            kdf_budget: KdfBudget::new(config.kdf_budget).with_total(config.kdf_budget_total),
            log_limit: LogLimiter::default(),
            tls_handshakes: Arc::default(),
            tls_rate: HandshakeRate::new(config.tls_handshake_rate),
            tls_thread,
            tls: secrets.tls,
            config,
            metrics,
            connections,
        })
    }

    /// The key the per-client limits know `addr` by (`client-ipv6-prefix`).
    pub fn client_id(&self, addr: IpAddr) -> ClientId {
        ClientId::of(addr, self.config.client_ipv6_prefix)
    }
}
