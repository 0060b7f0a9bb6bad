//! Latency histograms that travel: an HdrHistogram of durations (in
//! microseconds, 3 significant digits) with its exact maximum, written to
//! the `--json` document without loss, so the shards of a run merge into
//! exactly the histogram one process would have recorded.
//!
//! The encoding ([`HistogramJson`]) lists each non-empty bucket as
//! `[value, count]`, `value` being the highest value the bucket holds:
//! recording `count` times `value` into an empty histogram of the same
//! precision fills the same bucket, so decoding gives back an equal
//! histogram (a test holds this). It is HdrHistogram's V2 format's content
//! in plain JSON, needing no compression or base64 crate on the boards.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::percentiles::Percentiles;

/// Significant digits of every latency histogram (a percentile is within
/// 0.1 % of the exact value).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A histogram could not be decoded or merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistogramError {
    /// Written with another precision than [`SIGNIFICANT_DIGITS`].
    #[error("a histogram with {found} significant digits (aesload records {SIGNIFICANT_DIGITS})")]
    Precision {
        /// The precision written.
        found: u8,
    },
    /// A bucket could not be recorded (a value beyond any histogram's
    /// reach, or counts that overflow).
    #[error("a histogram bucket [{value}, {count}] cannot be recorded")]
    Bucket {
        /// The bucket's value, in microseconds.
        value: u64,
        /// Its count.
        count: u64,
    },
}

/// Durations recorded at microsecond resolution, and their exact maximum.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    max: Duration,
}

/// A [`LatencyHistogram`] in the `--json` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramJson {
    /// The histogram's precision ([`SIGNIFICANT_DIGITS`]).
    pub significant_digits: u8,
    /// The exact largest value, in nanoseconds (0 when empty).
    pub max_ns: u64,
    /// `[value in µs, count]` per non-empty bucket, by value.
    pub counts: Vec<[u64; 2]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            // Auto-resizing from 1 µs: any value fits.
            histogram: Histogram::new(SIGNIFICANT_DIGITS)
                .expect("3 significant digits are within HdrHistogram's range"),
            max: Duration::ZERO,
        }
    }

    /// Records one duration.
    pub fn record(&mut self, value: Duration) {
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        // `record` grows the histogram; past its reach, clamp.
        if self.histogram.record(micros).is_err() {
            self.histogram.saturating_record(micros);
        }
        self.max = self.max.max(value);
    }

    /// A histogram of `values`.
    pub fn of(values: impl IntoIterator<Item = Duration>) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::new();
        for value in values {
            histogram.record(value);
        }
        histogram
    }

    /// Adds every value of `other` (the result is the histogram of both
    /// sets of values).
    pub fn add(&mut self, other: &LatencyHistogram) {
        // Both auto-resize with the same precision: addition cannot fail
        // short of counts overflowing u64, where it saturates.
        if self.histogram.add(&other.histogram).is_err() {
            for bucket in other.histogram.iter_recorded() {
                self.histogram
                    .saturating_record_n(bucket.value_iterated_to(), bucket.count_at_value());
            }
        }
        self.max = self.max.max(other.max);
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether no value was recorded.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// p50, p90, p99 (each at most the exact maximum) and the maximum.
    pub fn percentiles(&self) -> Percentiles {
        if self.histogram.is_empty() {
            return Percentiles::default();
        }
        let at = |quantile: f64| {
            Duration::from_micros(self.histogram.value_at_quantile(quantile)).min(self.max)
        };
        Percentiles {
            count: self.histogram.len(),
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: self.max,
        }
    }

    /// The lossless JSON form.
    pub fn to_json(&self) -> HistogramJson {
        HistogramJson {
            significant_digits: self.histogram.sigfig(),
            max_ns: u64::try_from(self.max.as_nanos()).unwrap_or(u64::MAX),
            counts: self
                .histogram
                .iter_recorded()
                .map(|bucket| [bucket.value_iterated_to(), bucket.count_at_value()])
                .collect(),
        }
    }

    /// Back from [`LatencyHistogram::to_json`].
    pub fn from_json(json: &HistogramJson) -> Result<LatencyHistogram, HistogramError> {
        if json.significant_digits != SIGNIFICANT_DIGITS {
            return Err(HistogramError::Precision {
                found: json.significant_digits,
            });
        }
        let mut histogram = LatencyHistogram::new();
        for &[value, count] in &json.counts {
            histogram
                .histogram
                .record_n(value, count)
                .map_err(|_| HistogramError::Bucket { value, count })?;
        }
        histogram.max = Duration::from_nanos(json.max_ns);
        Ok(histogram)
    }
}

impl Percentiles {
    /// The percentiles of `values` (through a [`LatencyHistogram`]).
    pub fn of(values: impl IntoIterator<Item = Duration>) -> Percentiles {
        LatencyHistogram::of(values).percentiles()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spread of durations from 1 µs to about 11 minutes, some repeated.
    fn samples(seed: u64, count: usize) -> Vec<Duration> {
        (0..count as u64)
            .map(|i| {
                let mixed = crate::pattern::splitmix64(seed ^ i);
                Duration::from_nanos(1_000 + mixed % 10u64.pow(3 + (mixed % 9) as u32))
            })
            .collect()
    }

    #[test]
    fn the_json_form_decodes_to_an_equal_histogram() {
        let histogram = LatencyHistogram::of(samples(1, 5000));
        let json = histogram.to_json();
        let text = serde_json::to_string(&json).expect("serialises");
        let back: HistogramJson = serde_json::from_str(&text).expect("parses");
        let decoded = LatencyHistogram::from_json(&back).expect("decodes");
        assert_eq!(decoded, histogram);
        assert_eq!(decoded.percentiles(), histogram.percentiles());
        assert_eq!(decoded.len(), 5000);
    }

    #[test]
    fn merged_histograms_equal_the_histogram_of_all_values() {
        let parts = [samples(2, 700), samples(3, 1), samples(4, 2000), vec![]];
        let mut merged = LatencyHistogram::new();
        for part in &parts {
            // Through the JSON form, as `aesload merge` reads them.
            let json = LatencyHistogram::of(part.iter().copied()).to_json();
            merged.add(&LatencyHistogram::from_json(&json).expect("decodes"));
        }
        let all = LatencyHistogram::of(parts.iter().flatten().copied());
        assert_eq!(merged, all);
        assert_eq!(merged.percentiles(), all.percentiles());
        assert_eq!(
            merged.percentiles().max,
            *parts.iter().flatten().max().expect("values")
        );
    }

    #[test]
    fn a_foreign_precision_is_refused() {
        let mut json = LatencyHistogram::of([Duration::from_millis(5)]).to_json();
        json.significant_digits = 2;
        assert_eq!(
            LatencyHistogram::from_json(&json),
            Err(HistogramError::Precision { found: 2 })
        );
    }
}
