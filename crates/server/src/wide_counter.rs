//! A 64-bit counter on every target.
//!
//! prometheus-client's default counter is 32 bits wide where the target
//! has no native 64-bit atomics (riscv32), so byte counters would wrap at
//! 4 GiB there. [`WideAtomic`] stores the value in a `portable-atomic`
//! `AtomicU64`, which falls back to a lock-free sequence lock on riscv32.

use portable_atomic::{AtomicU64, Ordering};
use prometheus_client::metrics::counter::{Atomic, Counter};

/// Storage for a 64-bit counter on any target.
#[derive(Debug, Default)]
pub struct WideAtomic(AtomicU64);

impl Atomic<u64> for WideAtomic {
    fn inc(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }

    fn inc_by(&self, v: u64) -> u64 {
        self.0.fetch_add(v, Ordering::Relaxed)
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter that does not wrap at 4 GiB on 32-bit targets.
pub type WideCounter = Counter<u64, WideAtomic>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counters_do_not_wrap_at_4_gib() {
        let counter = WideCounter::default();
        counter.inc_by(u64::from(u32::MAX));
        counter.inc_by(u64::from(u32::MAX));
        counter.inc();
        assert_eq!(counter.get(), 2 * u64::from(u32::MAX) + 1);
        assert!(counter.get() > u64::from(u32::MAX), "wrapped at 32 bits");
    }
}
