//! Keeping a process's secrets out of swap: every page locked in memory
//! (`mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)`, as Vault does
//! unless `disable_mlock`), pages locked as they are first touched so a
//! thread's reserved stack costs nothing until it is used.
//!
//! Only when it cannot fail later: with `MCL_FUTURE`, every later mapping
//! counts against `RLIMIT_MEMLOCK`, and a mapping over it fails (an
//! allocation failure, an abort). So memory is locked only when that limit
//! is unlimited or the process has `CAP_IPC_LOCK` (which lifts it; read
//! from `/proc/self/status`);
//! otherwise [`lock_all_memory`] says why and locks nothing. Through
//! `rustix`, without unsafe code.

use rustix::mm::{MlockAllFlags, mlockall};
use rustix::process::{Resource, getrlimit};

/// Why memory was not locked.
#[derive(Debug, thiserror::Error)]
pub enum MemoryLockError {
    /// `RLIMIT_MEMLOCK` is bounded and the process lacks `CAP_IPC_LOCK`:
    /// locking every future page would make allocations fail past it.
    #[error(
        "RLIMIT_MEMLOCK is {limit} bytes and the process lacks CAP_IPC_LOCK, so memory is not locked (secrets may be swapped out): raise the limit (systemd LimitMEMLOCK=infinity, ulimit -l unlimited) or grant CAP_IPC_LOCK"
    )]
    NotAllowed {
        /// The soft limit, in bytes.
        limit: u64,
    },
    /// `mlockall` itself failed.
    #[error("mlockall failed, memory is not locked: {0}")]
    Failed(std::io::Error),
}

/// Whether this process may lock all of its memory for good: an
/// unlimited `RLIMIT_MEMLOCK`, or `CAP_IPC_LOCK`.
pub fn may_lock_all() -> Result<(), MemoryLockError> {
    let limit = getrlimit(Resource::Memlock).current;
    let Some(limit) = limit else {
        return Ok(());
    };
    if has_ipc_lock() {
        return Ok(());
    }
    Err(MemoryLockError::NotAllowed { limit })
}

/// `CAP_IPC_LOCK`'s bit in the capability sets.
const CAP_IPC_LOCK: u32 = 14;

/// Whether the process's effective capabilities hold `CAP_IPC_LOCK`
/// (`CapEff` in `/proc/self/status`; rustix's `capget` does not build for
/// riscv32 musl). Unreadable: taken as not.
fn has_ipc_lock() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let caps = status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))?;
            u64::from_str_radix(caps.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Locks every page of the process, now and later, when
/// [`may_lock_all`] allows it.
pub fn lock_all_memory() -> Result<(), MemoryLockError> {
    may_lock_all()?;
    mlockall(MlockAllFlags::CURRENT | MlockAllFlags::FUTURE | MlockAllFlags::ONFAULT)
        .map_err(|err| MemoryLockError::Failed(err.into()))
}

/// The process's locked memory in KiB (`VmLck` in `/proc/self/status`),
/// where the kernel shows it.
pub fn locked_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmLck:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where allowed, the pages are locked afterwards (VmLck grows with a
    /// buffer touched after the call); where not, the refusal names the
    /// limit the process really has and nothing is locked.
    #[test]
    fn memory_is_locked_where_allowed_and_the_refusal_says_why() {
        match lock_all_memory() {
            Ok(()) => {
                let buffer = vec![7u8; 1 << 20];
                let locked = locked_kib().expect("VmLck in /proc/self/status");
                assert!(locked >= 1024, "VmLck {locked} kB after a 1 MiB buffer");
                assert_eq!(buffer[1 << 19], 7);
            }
            Err(MemoryLockError::NotAllowed { limit }) => {
                assert_eq!(getrlimit(Resource::Memlock).current, Some(limit));
                assert_eq!(locked_kib(), Some(0));
            }
            Err(err) => panic!("{err}"),
        }
    }
}
