//! `--mlock`: aesd's memory locked (no key swapped out) while it holds a
//! keyring, as Vault does unless `disable_mlock`; the locking itself is
//! aesd-cli's (`memory_lock`), shared with the other binaries.

use std::fmt;
use std::str::FromStr;

use aesd_cli::memory_lock::{self, MemoryLockError};

/// Whether to lock aesd's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MlockMode {
    /// Lock when aesd holds a keyring and the limits allow it; warn when
    /// they do not.
    #[default]
    Auto,
    /// As `auto`, but aesd does not start when it cannot lock.
    On,
    /// Never lock.
    Off,
}

impl FromStr for MlockMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(MlockMode::Auto),
            "on" => Ok(MlockMode::On),
            "off" => Ok(MlockMode::Off),
            other => Err(format!("{other:?}: expected auto, on or off")),
        }
    }
}

impl fmt::Display for MlockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MlockMode::Auto => "auto",
            MlockMode::On => "on",
            MlockMode::Off => "off",
        })
    }
}

/// Applies `mode` once the settings are read, before any key is loaded:
/// `holds_keys` when aesd serves a keyring (`--keyring`, `--dev`,
/// `--http-listen`). An error only with `on`.
pub fn apply(mode: MlockMode, holds_keys: bool) -> Result<(), MemoryLockError> {
    if mode == MlockMode::Off || !holds_keys {
        return Ok(());
    }
    match memory_lock::lock_all_memory() {
        Ok(()) => {
            tracing::info!("memory locked (mlockall): the keyring's keys are never swapped out");
            Ok(())
        }
        Err(err) if mode == MlockMode::Auto => {
            tracing::warn!("{err} (--mlock on makes this fatal, --mlock off silences it)");
            Ok(())
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_and_print_back() {
        for mode in [MlockMode::Auto, MlockMode::On, MlockMode::Off] {
            assert_eq!(mode.to_string().parse::<MlockMode>(), Ok(mode));
        }
        assert!("yes".parse::<MlockMode>().is_err());
    }
}
