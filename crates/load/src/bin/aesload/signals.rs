//! SIGINT/SIGTERM during a load run: the first stops it gracefully, the
//! second exits at once.

use std::sync::Arc;
use std::time::Duration;

use aesd_load::interrupt::Interrupt;

/// Exit status after an interrupt (128 + SIGINT, as shells report it).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// How long running transfers may go on after the first SIGINT/SIGTERM
/// before they are cancelled.
const INTERRUPT_GRACE: Duration = Duration::from_secs(3);

/// Waits for SIGINT/SIGTERM: the first stops the run (no new clients;
/// running transfers get [`INTERRUPT_GRACE`], then are cancelled), the
/// second exits at once.
pub(crate) async fn watch_signals(interrupt: Arc<Interrupt>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("cannot catch SIGINT/SIGTERM: an interrupt ends aesload without a report");
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!(
        "\naesload: interrupted: no new clients; running transfers have {} s to finish (interrupt again to quit at once)",
        INTERRUPT_GRACE.as_secs()
    );
    interrupt.stop();
    let again = tokio::select! {
        _ = int.recv() => true,
        _ = term.recv() => true,
        () = tokio::time::sleep(INTERRUPT_GRACE) => false,
    };
    if !again {
        eprintln!("aesload: grace period over: cancelling the running transfers");
        interrupt.cancel();
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    eprintln!("\naesload: interrupted again: exiting without a report");
    std::process::exit(i32::from(EXIT_INTERRUPTED));
}
