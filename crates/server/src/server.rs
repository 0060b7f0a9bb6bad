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

use crate::config::Config;
use crate::error::JobError;
use crate::log_limit;
use crate::metrics;
use crate::proxy;
use crate::session;
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
}

/// A bound server, ready to serve.
pub struct Server {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the listen address and starts the worker pool.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
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
        let shared = Arc::new(Shared::new(config).map_err(ServerError::Workers)?);
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

    /// State shared with the connections (for metrics and tests).
    pub fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// Serves until `signal` resolves, then shuts down gracefully: stops
    /// accepting, tells queued jobs, gives running jobs the grace period,
    /// then cuts off what is left with a ShuttingDown error.
    pub async fn serve(self, signal: impl Future<Output = ()>) {
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
                metrics::http::Admission {
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
                    // A trusted proxy's connection is admitted under the
                    // client address its PROXY header carries, once read.
                    Ok((stream, peer)) if shared.config.trusted_proxies.contains(peer.ip()) => {
                        tracker.spawn(proxy::serve(stream, peer, Arc::clone(&shared)));
                    }
                    Ok((stream, peer)) => match shared.connections.admit(shared.client_key(peer.ip())) {
                        Ok(slot) => {
                            tracker.spawn(session::serve(stream, peer, Arc::clone(&shared), slot));
                        }
                        Err(refused) => {
                            tracker.spawn(session::refuse(
                                stream,
                                peer,
                                JobError::ConnectionsFull(refused),
                                Arc::clone(&shared),
                            ));
                        }
                    },
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
            "shutting down: {:.1} s grace for running jobs",
            grace.as_secs_f64()
        );
        shared.shutdown.stop();
        tracker.close();
        if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
            warn!("grace period over: cutting off the jobs still running");
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
        let shared = self.shared();
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

    /// Its shared state.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Shuts it down gracefully and waits until it has stopped.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}
