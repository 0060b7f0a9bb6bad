//! Keeping a process's secrets (passwords, keys, identities, plaintext in
//! its buffers) out of core dumps: every binary calls
//! [`disable_core_dumps`] before it reads a secret.
//!
//! It sets the core file size limit to 0 (soft and hard, so nothing the
//! process runs can raise it again) and marks the process not dumpable
//! (`prctl(PR_SET_DUMPABLE, 0)`): a crash writes no core file, and other
//! processes of the same user cannot attach to it with ptrace or read its
//! memory through `/proc/PID/mem`. Through `rustix`, without unsafe code.

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

#[cfg(test)]
mod tests {
    use rustix::process::{dumpable_behavior, getrlimit};

    use super::*;

    #[test]
    fn afterwards_the_process_writes_no_core_and_is_not_dumpable() {
        disable_core_dumps().expect("allowed for any process");
        let limit = getrlimit(Resource::Core);
        assert_eq!((limit.current, limit.maximum), (Some(0), Some(0)));
        assert_eq!(
            dumpable_behavior().expect("readable"),
            DumpableBehavior::NotDumpable
        );
    }
}
