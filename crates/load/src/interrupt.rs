//! Stopping a load run early (aesload's SIGINT/SIGTERM): first no new
//! clients start, then, after a grace period, the running transfers are
//! cancelled. The run still returns what completed, so the report and
//! the `--json`/`--csv` files are written (marked `interrupted`).
//!
//! [`Interrupt`] is the sending side (the signal handler's);
//! [`StopSignal`] is what the run watches.

use tokio::sync::watch;

/// How far a run has been told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunState {
    /// Running normally.
    Running,
    /// Start no more clients; let the running ones finish.
    Stopping,
    /// Cancel the running transfers too.
    Cancelled,
}

/// Tells a run to stop; see the [module](self).
#[derive(Debug)]
pub struct Interrupt {
    state: watch::Sender<RunState>,
}

/// A run's view of its [`Interrupt`].
#[derive(Debug, Clone)]
pub struct StopSignal {
    state: watch::Receiver<RunState>,
}

impl Interrupt {
    /// A new interrupt and the signal a run watches.
    pub fn new() -> (Interrupt, StopSignal) {
        let (state, watched) = watch::channel(RunState::Running);
        (Interrupt { state }, StopSignal { state: watched })
    }

    /// Start no more clients.
    pub fn stop(&self) {
        self.state
            .send_if_modified(|state| raise(state, RunState::Stopping));
    }

    /// Cancel the running transfers too.
    pub fn cancel(&self) {
        self.state
            .send_if_modified(|state| raise(state, RunState::Cancelled));
    }

    /// Whether [`Interrupt::stop`] was called.
    pub fn stopped(&self) -> bool {
        *self.state.borrow() >= RunState::Stopping
    }
}

fn raise(state: &mut RunState, to: RunState) -> bool {
    let raised = *state < to;
    *state = (*state).max(to);
    raised
}

impl StopSignal {
    /// A signal that never fires (a run nobody interrupts).
    pub fn never() -> StopSignal {
        // With the interrupt gone, the state stays `Running` and
        // `reached` waits forever.
        let (_, signal) = Interrupt::new();
        signal
    }

    /// The state now.
    pub fn state(&self) -> RunState {
        *self.state.borrow()
    }

    /// Waits until the run is told to stop at least as far as `state`.
    pub async fn reached(&mut self, state: RunState) {
        if self.state.wait_for(|now| *now >= state).await.is_err() {
            // The interrupt is gone: it can never fire.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_then_cancel_are_seen_in_order_and_never_go_back() {
        let (interrupt, mut signal) = Interrupt::new();
        assert_eq!(signal.state(), RunState::Running);
        interrupt.stop();
        signal.reached(RunState::Stopping).await;
        assert_eq!(signal.state(), RunState::Stopping);
        interrupt.cancel();
        interrupt.stop();
        signal.reached(RunState::Cancelled).await;
        assert_eq!(signal.state(), RunState::Cancelled);
        assert!(interrupt.stopped());
    }

    #[test]
    fn never_stays_running() {
        assert_eq!(StopSignal::never().state(), RunState::Running);
    }
}
