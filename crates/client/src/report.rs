//! The summary of a load run and the table in the study's shape.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::load::{LoadRun, Outcome};

/// Figures of a run, as the study reported them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Input bytes of the transfers that completed and verified.
    pub bytes_processed: u64,
    /// First start to last completion.
    pub duration: Duration,
    /// `bytes_processed / duration`.
    pub throughput_bytes_per_sec: f64,
    /// Sum of the transfers' network time.
    pub total_network: Duration,
    /// Sum of the transfers' processing time (measured by the server).
    pub total_processing: Duration,
    /// Sum of the transfers' queue time (measured by the server).
    pub total_queue: Duration,
    /// Transfers run.
    pub transfers: usize,
    /// Transfers whose result verified.
    pub verified: usize,
    /// Transfers that failed, by kind.
    pub failures: BTreeMap<String, usize>,
}

impl Summary {
    /// Summarises a run.
    pub fn of(run: &LoadRun) -> Summary {
        let mut summary = Summary {
            bytes_processed: 0,
            duration: run.duration,
            throughput_bytes_per_sec: 0.0,
            total_network: Duration::ZERO,
            total_processing: Duration::ZERO,
            total_queue: Duration::ZERO,
            transfers: run.transfers.len(),
            verified: 0,
            failures: BTreeMap::new(),
        };
        for transfer in &run.transfers {
            if let Some(report) = &transfer.report {
                summary.total_network += report.network;
                summary.total_processing += report.processing;
                summary.total_queue += report.queue;
            }
            match &transfer.outcome {
                Outcome::Verified => {
                    summary.verified += 1;
                    summary.bytes_processed += transfer.size;
                }
                Outcome::Failed { kind, .. } => {
                    *summary.failures.entry(kind.clone()).or_default() += 1;
                }
            }
        }
        let secs = run.duration.as_secs_f64();
        if secs > 0.0 {
            summary.throughput_bytes_per_sec = summary.bytes_processed as f64 / secs;
        }
        summary
    }

    /// Transfers that failed.
    pub fn failed(&self) -> usize {
        self.failures.values().sum()
    }

    fn average(&self, total: Duration) -> Duration {
        match u32::try_from(self.transfers) {
            Ok(count) if count > 0 => total / count,
            _ => Duration::ZERO,
        }
    }

    /// The study's table (MB = 10^6 bytes, as the study printed them).
    pub fn table(&self) -> String {
        let mut rows: Vec<(&str, String)> = vec![
            (
                "Total Bytes Processed (MB)",
                format!("{:.2}", self.bytes_processed as f64 / 1e6),
            ),
            (
                "Average Bytes Processed (MB/s)",
                format!("{:.2}", self.throughput_bytes_per_sec / 1e6),
            ),
            ("Test Duration (s)", secs(self.duration)),
            ("Total Network Time (s)", secs(self.total_network)),
            ("Total Processing Time (s)", secs(self.total_processing)),
            ("Total Queue Time (s)", secs(self.total_queue)),
            (
                "Avg Network Time (s)",
                secs(self.average(self.total_network)),
            ),
            (
                "Avg Processing Time (s)",
                secs(self.average(self.total_processing)),
            ),
            ("Avg Queue Time (s)", secs(self.average(self.total_queue))),
            (
                "Transfers Verified",
                format!("{} / {}", self.verified, self.transfers),
            ),
        ];
        for (kind, count) in &self.failures {
            rows.push(("Failed", format!("{count} ({kind})")));
        }
        let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (name, value) in rows {
            let _ = writeln!(out, "{name:<width$}  {value:>12}");
        }
        out
    }
}

fn secs(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Transfer;

    fn transfer(client: usize, size: u64, outcome: Outcome) -> Transfer {
        Transfer {
            client,
            batch: 0,
            size,
            started_at: Duration::ZERO,
            report: None,
            outcome,
        }
    }

    #[test]
    fn only_verified_bytes_count_and_failures_are_grouped() {
        let run = LoadRun {
            duration: Duration::from_secs(2),
            transfers: vec![
                transfer(0, 4_000_000, Outcome::Verified),
                transfer(
                    1,
                    1_000_000,
                    Outcome::Failed {
                        kind: "busy".into(),
                        message: "full".into(),
                    },
                ),
            ],
        };
        let summary = Summary::of(&run);
        assert_eq!(summary.bytes_processed, 4_000_000);
        assert_eq!(summary.throughput_bytes_per_sec, 2_000_000.0);
        assert_eq!(summary.failed(), 1);
        let table = summary.table();
        assert!(
            table.contains("Average Bytes Processed (MB/s)          2.00"),
            "{table}"
        );
        assert!(table.contains("1 (busy)"), "{table}");
    }
}
