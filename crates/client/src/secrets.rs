//! Keeping aescrypt's secrets (the password, age identities, derived keys,
//! plaintext) out of core dumps, as aesd does at start-up: the core file
//! size limit set to 0 (soft and hard) and the process marked not dumpable
//! (`prctl(PR_SET_DUMPABLE, 0)`), so a crash writes no core file and other
//! processes of the same user cannot attach to it or read its memory
//! through `/proc/PID/mem`. Through `rustix`, without unsafe code.

use rustix::process::{DumpableBehavior, Resource, Rlimit, set_dumpable_behavior, setrlimit};

/// Why core dumps could not be turned off.
#[derive(Debug, thiserror::Error)]
pub enum NoCoreDumpsError {
    /// The core file size limit could not be set to 0.
    #[error("cannot set the core file size limit to 0: {0}")]
    Limit(std::io::Error),
    /// The process could not be marked not dumpable.
    #[error("cannot mark the process not dumpable (PR_SET_DUMPABLE): {0}")]
    Dumpable(std::io::Error),
}

/// Turns core dumps off for this process (see the module documentation).
pub fn disable_core_dumps() -> Result<(), NoCoreDumpsError> {
    let none = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    setrlimit(Resource::Core, none).map_err(|err| NoCoreDumpsError::Limit(err.into()))?;
    set_dumpable_behavior(DumpableBehavior::NotDumpable)
        .map_err(|err| NoCoreDumpsError::Dumpable(err.into()))?;
    Ok(())
}
