//! Latency percentiles (p50, p90, p99, max) of a set of durations.
//!
//! Averages hide the slow transfers a user notices; the report adds
//! percentiles of total and queue time. They come from an HdrHistogram
//! at microsecond resolution with 3 significant digits (a percentile is
//! within 0.1 % of the exact value); the maximum is exact. The histogram
//! itself is [`LatencyHistogram`](crate::histogram::LatencyHistogram),
//! which also makes [`Percentiles::of`] (so this module imports nothing of
//! the crate's).

use std::time::Duration;

/// Percentiles of a set of durations (all zero when it is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// Number of values.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest value (exact).
    pub max: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_a_thousand_ms() {
        let values = (1..=1000).map(Duration::from_millis);
        let p = Percentiles::of(values);
        assert_eq!(p.count, 1000);
        let near = |got: Duration, ms: f64| (got.as_secs_f64() * 1000.0 - ms).abs() <= ms * 0.001;
        assert!(near(p.p50, 500.0), "{p:?}");
        assert!(near(p.p90, 900.0), "{p:?}");
        assert!(near(p.p99, 990.0), "{p:?}");
        assert_eq!(p.max, Duration::from_millis(1000));
    }

    #[test]
    fn no_values_give_zeros() {
        assert_eq!(Percentiles::of([]), Percentiles::default());
    }
}
