//! The two stages of a graceful shutdown.
//!
//! `stop` fires first: no new connections or jobs, waiting jobs are told
//! the server is shutting down, idle connections close. `abort` fires when
//! the grace period is over: jobs still running are cut off with a
//! ShuttingDown error frame (never silently truncated).

use tokio_util::sync::CancellationToken;

/// Shared shutdown state.
#[derive(Clone, Default)]
pub struct Shutdown {
    stop: CancellationToken,
    abort: CancellationToken,
}

impl Shutdown {
    /// A shutdown that has not started.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the shutdown: stop taking work.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Ends the grace period: cut off running jobs.
    pub fn abort(&self) {
        self.stop.cancel();
        self.abort.cancel();
    }

    /// Resolves when the shutdown starts.
    pub async fn stopping(&self) {
        self.stop.cancelled().await;
    }

    /// Resolves when running jobs must be cut off.
    pub async fn aborting(&self) {
        self.abort.cancelled().await;
    }
}
