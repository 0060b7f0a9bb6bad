//! Open files: aesd needs one descriptor per connection, and BusyBox init
//! leaves the soft limit at 1024 (the default `max-connections`). At start
//! aesd raises its soft `RLIMIT_NOFILE` to the hard limit, and lowers
//! `max-connections` to what the limit leaves after [`RESERVED_FDS`] for
//! everything else (listeners, the metrics endpoint's scrapes, the
//! runtime's own descriptors, the log, files read at run time), saying so
//! in the log. Without this, connections past the limit made `accept`
//! fail with `EMFILE` over and over while new clients hung.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but client connections.
pub const RESERVED_FDS: u64 = 64;

/// The open-file limit before and after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit aesd was started with (`None`: unlimited).
    pub before: Option<u64>,
    /// The soft limit now.
    pub now: Option<u64>,
}

/// Raises the soft open-file limit to the hard limit. A failure leaves the
/// limit as it was (it is reported as unchanged).
pub fn raise() -> FdLimit {
    let limit = getrlimit(Resource::Nofile);
    let before = limit.current;
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_err() {
            return FdLimit {
                before,
                now: before,
            };
        }
    }
    FdLimit {
        before,
        now: getrlimit(Resource::Nofile).current,
    }
}

/// The connections aesd can hold at once under a soft limit of `limit`
/// descriptors: `wanted` (`max-connections`), or less when the limit
/// leaves fewer after [`RESERVED_FDS`] (at least 1).
pub fn connections_within(limit: Option<u64>, wanted: usize) -> usize {
    let Some(limit) = limit else {
        return wanted;
    };
    let room = usize::try_from(limit.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
    wanted.min(room).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_clamped_to_what_the_limit_leaves() {
        assert_eq!(connections_within(Some(1024), 1024), 960);
        assert_eq!(connections_within(Some(4096), 1024), 1024);
        assert_eq!(connections_within(None, 1024), 1024);
        assert_eq!(connections_within(Some(10), 1024), 1);
    }
}
