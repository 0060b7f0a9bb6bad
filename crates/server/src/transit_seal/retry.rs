//! The auto-unseal loop: a thread that, while the keyring is sealed under
//! the transit seal (and no operator sealed it with `sys/seal`), asks the
//! other server to decrypt the root key; after a failure it waits, from
//! [`FIRST_DELAY`] doubling up to [`MAX_DELAY`], and tries again. Each
//! failure is logged with its reason and shown by `sys/seal-status`.

use std::sync::Arc;
use std::time::Duration;

use crate::keyring_state::{AutoUnseal, KeyringState};

/// The wait after the first failure.
pub const FIRST_DELAY: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
/// How often a keyring with nothing to do is looked at again (another
/// board's `sys/init` may arrive through a shared store).
const IDLE: Duration = Duration::from_secs(1);

/// Starts the loop for `state` (its transit seal set).
pub fn spawn(state: Arc<KeyringState>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("auto-unseal".into())
        .spawn(move || run(&state))
        .map(drop)
}

fn run(state: &KeyringState) {
    let mut delay = FIRST_DELAY;
    loop {
        match state.try_auto_unseal() {
            AutoUnseal::NothingToDo => {
                delay = FIRST_DELAY;
                std::thread::sleep(IDLE);
            }
            AutoUnseal::Unsealed { generation } => {
                delay = FIRST_DELAY;
                tracing::info!(
                    generation,
                    "keyring unsealed by the transit seal (auto-unseal)"
                );
            }
            AutoUnseal::Failed { attempts, error } => {
                tracing::warn!(
                    attempts,
                    reason = error.kind,
                    "auto-unseal failed, the keyring stays sealed; retrying in {} ms: {}",
                    delay.as_millis(),
                    error.message
                );
                std::thread::sleep(delay);
                delay = (delay * 2).min(MAX_DELAY);
            }
        }
    }
}
