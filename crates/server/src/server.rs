//! The listener: accepts connections and runs the graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use crate::accept::accept;
pub use crate::admission::Occupancy;
use crate::config::{Config, Secrets};
use crate::log_limit;
use crate::metrics;
use crate::shared::Shared;

/// The server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics address could not be bound.
    #[error("cannot listen for metrics on {addr}: {source}")]
    MetricsBind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Worker threads could not be started.
    #[error("cannot start worker threads: {0}")]
    Workers(std::io::Error),
    /// A file the settings name could not be used (`tls-cert`, `tls-key`,
    /// `token-file`).
    #[error(transparent)]
    Secrets(#[from] crate::config::ConfigError),
}

/// A bound server, ready to serve.
pub struct Server {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Server {
    /// Reads the files the settings name ([`Config::load_secrets`]), binds
    /// the listen address and starts the worker pool.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        let secrets = config.load_secrets()?;
        Server::bind_with(config, secrets).await
    }

    /// Binds the listen address and starts the worker pool, with the
    /// secrets already read from the settings' files.
    pub async fn bind_with(config: Config, secrets: Secrets) -> Result<Server, ServerError> {
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| ServerError::MetricsBind { addr, source })?,
            ),
            None => None,
        };
        let shared = Arc::new(Shared::new(config, secrets).map_err(ServerError::Workers)?);
        Ok(Server {
            listener,
            metrics_listener,
            shared,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.shared.config.listen)
    }

    /// The address of the metrics endpoint, when enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok())
    }

    /// Makes `state` the keyring of the port's by-name jobs (key source
    /// 5); before, they fail `sealed`.
    pub(crate) fn attach_keyring(&self, state: Arc<crate::keyring_state::KeyringState>) {
        self.shared.named_keys.attach(state);
    }

    /// Records the port's by-name jobs in the audit log `file`.
    pub(crate) fn attach_audit(&self, file: Arc<crate::audit_file::AuditFile>) {
        self.shared.named_keys.attach_audit(file);
    }

    /// What the server's state looks like (for monitoring and tests).
    pub fn state(&self) -> ServerState {
        ServerState(Arc::clone(&self.shared))
    }

    /// Serves until `signal` resolves, then shuts down gracefully: stops
    /// accepting, tells queued jobs, gives running jobs the grace period,
    /// then cuts off what is left with a ShuttingDown error.
    pub async fn serve(self, signal: impl Future<Output = ()>) {
        self.serve_until(signal, std::future::pending()).await;
    }

    /// [`Server::serve`], and when `hurry` resolves during the grace period
    /// (a second SIGINT or SIGTERM), the running jobs are cut off at once
    /// (ShuttingDown, as when the grace ends) instead of at its end.
    pub async fn serve_until(
        self,
        signal: impl Future<Output = ()>,
        hurry: impl Future<Output = ()>,
    ) {
        let Server {
            listener,
            metrics_listener,
            shared,
        } = self;
        let tracker = TaskTracker::new();
        if let Some(metrics_listener) = metrics_listener {
            tokio::spawn(metrics::http::serve(
                metrics_listener,
                Arc::clone(&shared.metrics),
                shared.shutdown.clone(),
                metrics::http::ScrapeAccess {
                    connections: Arc::clone(&shared.connections),
                    ipv6_prefix: shared.config.client_ipv6_prefix,
                    allow: shared.config.metrics_allow.clone(),
                },
            ));
        }
        // Summaries of the log lines left out per client, once a window.
        tokio::spawn({
            let shared = Arc::clone(&shared);
            async move {
                let mut tick = tokio::time::interval(log_limit::WINDOW);
                loop {
                    tokio::select! {
                        () = shared.shutdown.stopping() => break,
                        _ = tick.tick() => {
                            for summary in shared.log_limit.flush(std::time::Instant::now()) {
                                summary.log();
                            }
                        }
                    }
                }
            }
        });
        tokio::pin!(signal);
        loop {
            tokio::select! {
                () = &mut signal => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => accept(stream, peer, &shared, &tracker),
                    Err(err) => {
                        // Out of descriptors or similar: keep serving the
                        // connections we have and try again shortly.
                        error!("accept failed: {err}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }
        drop(listener);
        let grace = shared.config.shutdown_grace;
        let occupancy = shared.admission.occupancy();
        info!(
            active = occupancy.active,
            waiting = occupancy.waiting,
            "shutting down: {:.1} s grace for running jobs (interrupt again to cut them off now)",
            grace.as_secs_f64()
        );
        shared.shutdown.stop();
        tracker.close();
        let cut_off = tokio::select! {
            ended = tokio::time::timeout(grace, tracker.wait()) => match ended {
                Ok(()) => None,
                Err(_) => Some("grace period over"),
            },
            () = hurry => Some("interrupted again"),
        };
        if let Some(why) = cut_off {
            warn!("{why}: cutting off the jobs still running");
            shared.shutdown.abort();
            if tokio::time::timeout(Duration::from_secs(5), tracker.wait())
                .await
                .is_err()
            {
                warn!("some connections did not close within 5 s of the cut-off");
            }
        }
        shared.pool.close();
        info!("shut down");
    }

    /// Runs the server on the current runtime in the background.
    pub fn spawn(self) -> RunningServer {
        let addr = self.local_addr();
        let metrics_addr = self.metrics_addr();
        let shared = Arc::clone(&self.shared);
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(self.serve(async {
            let _ = stop_rx.await;
        }));
        RunningServer {
            addr,
            metrics_addr,
            shared,
            stop: Some(stop_tx),
            task,
        }
    }
}

/// A read-only view of a server's state while it runs: its slots and
/// queue, connections, workers, metrics and settings (for monitoring and
/// tests; the same figures `/metrics` shows).
#[derive(Clone)]
pub struct ServerState(Arc<Shared>);

impl ServerState {
    /// Jobs holding a slot and jobs waiting, now.
    pub fn occupancy(&self) -> Occupancy {
        self.0.admission.occupancy()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.0.connections.open()
    }

    /// Time all workers together spent running cryptographic work.
    pub fn worker_busy_time(&self) -> std::time::Duration {
        self.0.pool.busy_time()
    }

    /// How many jobs' chains one worker encrypts together.
    pub fn lanes(&self) -> usize {
        self.0.pool.lanes()
    }

    /// Blocks the lane engine encrypted, and blocks it could have in the
    /// same calls with every lane busy.
    pub fn lane_blocks(&self) -> (u64, u64) {
        self.0.pool.lane_blocks()
    }

    /// The Prometheus text `/metrics` serves.
    pub fn metrics_text(&self) -> String {
        self.0.metrics.encode()
    }

    /// The metrics themselves (the HTTP API counts its requests there).
    pub fn metrics(&self) -> Arc<metrics::Metrics> {
        Arc::clone(&self.0.metrics)
    }

    /// The effective settings.
    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// The delay the next failed authentication from `addr` would wait
    /// (`auth-failure-delay`, doubled per recent failure of its client).
    pub fn auth_failure_delay(&self, addr: std::net::IpAddr) -> std::time::Duration {
        self.0.auth_failures.next_delay(self.0.client_id(addr))
    }
}

/// [`RunningServer::attach_dev_keyring`] could not make or attach the
/// keyring.
#[derive(Debug, thiserror::Error)]
pub enum DevKeyringError {
    /// The in-memory keyring could not be made (e.g. a root token ID
    /// that is not a valid token).
    #[error("cannot make the in-memory keyring: {0}")]
    Keyring(String),
    /// A key could not be created (an invalid name).
    #[error("cannot create key {name:?}: {reason}")]
    CreateKey {
        /// The key's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The server's by-name jobs have a keyring already.
    #[error("the server has a keyring already")]
    AlreadyAttached,
}

impl From<crate::keyring_state::StateError> for DevKeyringError {
    fn from(err: crate::keyring_state::StateError) -> Self {
        DevKeyringError::Keyring(err.to_string())
    }
}

/// [`start_loopback`] could not start the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The settings are not valid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The server could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// A server in this process on 127.0.0.1 (an ephemeral port) with
/// `layer` over the defaults, running in the background on the current
/// tokio runtime: aesload's embedded server, and the tests'.
pub async fn start_loopback(
    layer: crate::config::ConfigLayer,
) -> Result<RunningServer, StartError> {
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let config = Config::resolve(crate::config::ConfigLayer {
        listen: Some(listen),
        ..layer
    })?;
    let secrets = config.load_secrets()?;
    Ok(Server::bind_with(config, secrets).await?.spawn())
}

/// A server running in the background (embedded in aesload, or in tests).
pub struct RunningServer {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of its metrics endpoint, when enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// What its state looks like (for monitoring and tests).
    pub fn state(&self) -> ServerState {
        ServerState(Arc::clone(&self.shared))
    }

    /// Gives its by-name jobs a keyring as `aesd --dev` makes one: in
    /// memory (lost when the process ends), unsealed, with the root token
    /// `root_token_id` (or a random one) and the keys `keys` created
    /// (OpenBao's default type, aes256-gcm96). Returns the root token.
    /// aesload's embedded server with `--key`; a server has one keyring,
    /// so a second call changes nothing and fails.
    pub fn attach_dev_keyring(
        &self,
        root_token_id: Option<&str>,
        keys: &[&str],
    ) -> Result<zeroize::Zeroizing<String>, DevKeyringError> {
        use crate::keyring_state::{KeyringState, now};
        if self.shared.named_keys.is_attached() {
            return Err(DevKeyringError::AlreadyAttached);
        }
        let dev = KeyringState::dev(root_token_id)?;
        for name in keys {
            dev.state.change(|open| {
                open.keyring
                    .create(
                        name,
                        aesd_keyring::KeyType::default(),
                        now(),
                        &mut aesd_keyring::OsEntropy,
                    )
                    .map_err(|err| DevKeyringError::CreateKey {
                        name: (*name).to_owned(),
                        reason: err.to_string(),
                    })
            })?;
        }
        self.shared.named_keys.attach(Arc::new(dev.state));
        Ok(dev.root_token)
    }

    /// Shuts it down gracefully and waits until it has stopped.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}
