//! The summary of a load run and the tables printed from it: the study's
//! table (one column per suite, as the study laid them side by side)
//! with percentiles and failures, and a breakdown per server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use crate::durations::Warmup;
use crate::histogram::LatencyHistogram;
use crate::percentiles::Percentiles;
use crate::record::{LoadRun, SuiteRun, Transfer};

/// Figures of a run, as the study reported them, plus percentiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Input bytes of the transfers that completed and verified.
    pub bytes_processed: u64,
    /// The measured window: first intended start to last completion of
    /// the transfers kept (the study's "test duration").
    pub duration: Duration,
    /// `bytes_processed / duration`.
    pub throughput_bytes_per_sec: f64,
    /// Sum of the transfers' network time.
    pub total_network: Duration,
    /// Sum of the transfers' processing time (measured by the server).
    pub total_processing: Duration,
    /// Sum of the transfers' queue time (measured by the server).
    pub total_queue: Duration,
    /// Transfers with the server's figures (the averages' divisor).
    pub measured: usize,
    /// Transfers kept (the warm-up left out).
    pub transfers: usize,
    /// Transfers whose result verified.
    pub verified: usize,
    /// Transfers that failed, by kind.
    pub failures: BTreeMap<String, usize>,
    /// Transfers left out as warm-up.
    pub warmup_excluded: usize,
    /// Total time (intended start to end) of the verified transfers.
    pub total_time: Percentiles,
    /// Queue time of the verified transfers.
    pub queue_time: Percentiles,
    /// The histogram behind `total_time` (what `aesload merge` adds up).
    pub total_histogram: LatencyHistogram,
    /// The histogram behind `queue_time`.
    pub queue_histogram: LatencyHistogram,
    /// The measured window, from the run's start: first intended start
    /// and last end (`None` when not known: no transfers, or several
    /// suites together).
    pub window: Option<(Duration, Duration)>,
    /// Transfers the plan had, when the run was interrupted before it
    /// started them all (`None`: every planned transfer ran). The table
    /// and the plot mark such a run.
    pub planned: Option<usize>,
}

impl Summary {
    /// Summarises `transfers`, measured over `duration`.
    pub fn from_transfers<'a>(
        transfers: impl IntoIterator<Item = &'a Transfer>,
        duration: Duration,
    ) -> Summary {
        let mut summary = Summary {
            bytes_processed: 0,
            duration,
            throughput_bytes_per_sec: 0.0,
            total_network: Duration::ZERO,
            total_processing: Duration::ZERO,
            total_queue: Duration::ZERO,
            measured: 0,
            transfers: 0,
            verified: 0,
            failures: BTreeMap::new(),
            warmup_excluded: 0,
            total_time: Percentiles::default(),
            queue_time: Percentiles::default(),
            total_histogram: LatencyHistogram::new(),
            queue_histogram: LatencyHistogram::new(),
            window: None,
            planned: None,
        };
        for transfer in transfers {
            summary.transfers += 1;
            if let (Some(queue), Some(processing), Some(network)) =
                (transfer.queue(), transfer.processing(), transfer.network())
            {
                summary.measured += 1;
                summary.total_network += network;
                summary.total_processing += processing;
                summary.total_queue += queue;
            }
            match transfer.failure() {
                None => {
                    summary.verified += 1;
                    summary.bytes_processed += transfer.size;
                    summary.total_histogram.record(transfer.total());
                    if let Some(queue) = transfer.queue() {
                        summary.queue_histogram.record(queue);
                    }
                }
                Some((kind, _)) => *summary.failures.entry(kind.to_owned()).or_default() += 1,
            }
        }
        summary.total_time = summary.total_histogram.percentiles();
        summary.queue_time = summary.queue_histogram.percentiles();
        let secs = duration.as_secs_f64();
        if secs > 0.0 {
            summary.throughput_bytes_per_sec = summary.bytes_processed as f64 / secs;
        }
        summary
    }

    /// Summarises a run, leaving out its warm-up.
    pub fn of(run: &LoadRun, warmup: Warmup) -> Summary {
        let kept = kept(run, warmup);
        let bounds = bounds(&kept);
        let mut summary = Summary::from_transfers(kept.iter().copied(), window(&kept));
        summary.warmup_excluded = run.transfers.len() - kept.len();
        summary.window = bounds;
        summary
    }

    /// One summary per server (`servers` of them, by index), each over
    /// the whole run's window, so their throughputs add up to the run's.
    pub fn per_server(run: &LoadRun, warmup: Warmup, servers: usize) -> Vec<Summary> {
        let kept = kept(run, warmup);
        let duration = window(&kept);
        let bounds = bounds(&kept);
        (0..servers)
            .map(|server| {
                let mut summary = Summary::from_transfers(
                    kept.iter()
                        .copied()
                        .filter(|transfer| transfer.server == server),
                    duration,
                );
                summary.window = bounds;
                summary
            })
            .collect()
    }

    /// Several suites together: all their kept transfers over the sum of
    /// their windows (they ran one after another).
    pub fn overall(runs: &[SuiteRun], warmup: Warmup) -> Summary {
        let mut all = Vec::new();
        let mut duration = Duration::ZERO;
        for suite in runs {
            let kept = kept(&suite.run, warmup);
            duration += window(&kept);
            all.extend(kept);
        }
        let excluded = runs
            .iter()
            .map(|suite| suite.run.transfers.len())
            .sum::<usize>()
            - all.len();
        let mut summary = Summary::from_transfers(all, duration);
        summary.warmup_excluded = excluded;
        summary
    }

    /// The planned number of transfers, when the run was interrupted with
    /// fewer of them run.
    pub fn interrupted_of(&self) -> Option<usize> {
        self.planned
    }

    /// Marks the run as interrupted when fewer than `planned` transfers
    /// ran.
    pub fn with_planned(mut self, planned: usize) -> Summary {
        self.planned = (planned > self.transfers + self.warmup_excluded).then_some(planned);
        self
    }

    /// Transfers that failed.
    pub fn failed(&self) -> usize {
        self.failures.values().sum()
    }

    /// Average of `total` over the measured transfers.
    pub fn average(&self, total: Duration) -> Duration {
        match u32::try_from(self.measured) {
            Ok(count) if count > 0 => total / count,
            _ => Duration::ZERO,
        }
    }
}

/// The transfers of `run` outside the warm-up.
fn kept(run: &LoadRun, warmup: Warmup) -> Vec<&Transfer> {
    run.transfers
        .iter()
        .filter(|transfer| !warmup.excludes(transfer))
        .collect()
}

/// First intended start to last end of `transfers`.
fn window(transfers: &[&Transfer]) -> Duration {
    match bounds(transfers) {
        Some((start, end)) => end.saturating_sub(start),
        None => Duration::ZERO,
    }
}

/// The first intended start and the last end of `transfers`.
fn bounds(transfers: &[&Transfer]) -> Option<(Duration, Duration)> {
    let start = transfers.iter().map(|transfer| transfer.scheduled).min()?;
    let end = transfers.iter().map(|transfer| transfer.finished).max()?;
    Some((start, end.max(start)))
}

pub(crate) fn secs(duration: Duration) -> String {
    format!("{:.3}", duration.as_secs_f64())
}

fn megabytes(bytes: f64) -> String {
    format!("{:.2}", bytes / 1e6)
}

/// Lays out rows of cells: the first column left-aligned, the others
/// right-aligned, each as wide as its widest cell.
pub(crate) fn layout(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            let width = widths[column];
            let _ = match column {
                0 => write!(line, "{cell:<width$}"),
                _ => write!(line, "  {cell:>width$}"),
            };
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// What a table shows where nothing was measured.
pub const NOT_MEASURED: &str = "n/a";

/// The study's table, one column per `(name, summary)`: its six rows
/// (MB = 10^6 bytes, as the study printed them), then queue totals,
/// verification, percentiles of total and queue time, and failures by
/// kind.
pub fn study_table(columns: &[(&str, &Summary)]) -> String {
    type Cell = fn(&Summary) -> String;
    let mut rows: Vec<(String, Cell)> = vec![
        ("Total Bytes Processed (MB)".into(), |s| {
            megabytes(s.bytes_processed as f64)
        }),
        ("Avg Bytes per Second (MB/s)".into(), |s| {
            megabytes(s.throughput_bytes_per_sec)
        }),
        ("Test Duration (s)".into(), |s| secs(s.duration)),
        ("Total Network Time (s)".into(), |s| secs(s.total_network)),
        ("Total Processing Time (s)".into(), |s| {
            secs(s.total_processing)
        }),
        ("Avg Queue Time (s)".into(), |s| {
            secs(s.average(s.total_queue))
        }),
        ("Total Queue Time (s)".into(), |s| secs(s.total_queue)),
        ("Transfers Verified".into(), |s| match s.interrupted_of() {
            Some(planned) => format!(
                "{} / {} (interrupted: {planned} planned)",
                s.verified, s.transfers
            ),
            None => format!("{} / {}", s.verified, s.transfers),
        }),
        ("Total Time p50 (s)".into(), |s| secs(s.total_time.p50)),
        ("Total Time p90 (s)".into(), |s| secs(s.total_time.p90)),
        ("Total Time p99 (s)".into(), |s| secs(s.total_time.p99)),
        ("Total Time max (s)".into(), |s| secs(s.total_time.max)),
        ("Queue Time p50 (s)".into(), |s| secs(s.queue_time.p50)),
        ("Queue Time p90 (s)".into(), |s| secs(s.queue_time.p90)),
        ("Queue Time p99 (s)".into(), |s| secs(s.queue_time.p99)),
        ("Queue Time max (s)".into(), |s| secs(s.queue_time.max)),
    ];
    if columns
        .iter()
        .any(|(_, summary)| summary.warmup_excluded > 0)
    {
        rows.push(("Warm-up Excluded".into(), |s| s.warmup_excluded.to_string()));
    }
    let mut table = vec![
        std::iter::once(String::new())
            .chain(columns.iter().map(|(name, _)| (*name).to_owned()))
            .collect::<Vec<_>>(),
    ];
    for (index, (name, cell)) in rows.iter().enumerate() {
        if index == 6 || index == 8 {
            table.push(vec![String::new()]);
        }
        // With no verified transfer nothing was measured: "n/a", not a
        // row of zeros (the duration and the count still mean something).
        let always = index == 2 || index == 7 || index >= 16;
        table.push(
            std::iter::once(name.clone())
                .chain(
                    columns
                        .iter()
                        .map(|(_, summary)| match always || summary.verified > 0 {
                            true => cell(summary),
                            false => NOT_MEASURED.to_owned(),
                        }),
                )
                .collect(),
        );
    }
    let kinds: BTreeSet<&String> = columns
        .iter()
        .flat_map(|(_, summary)| summary.failures.keys())
        .collect();
    if !kinds.is_empty() {
        table.push(vec![String::new()]);
    }
    for kind in kinds {
        table.push(
            std::iter::once(format!("Failed ({kind})"))
                .chain(columns.iter().map(|(_, summary)| {
                    summary.failures.get(kind).copied().unwrap_or(0).to_string()
                }))
                .collect(),
        );
    }
    layout(&table)
}

/// One row per server: transfers, bytes, throughput and percentiles.
pub fn server_table(servers: &[String], summaries: &[Summary]) -> String {
    let mut rows = vec![
        [
            "server",
            "verified",
            "MB",
            "MB/s",
            "total p50 (s)",
            "total p99 (s)",
            "queue p50 (s)",
            "failed",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for (server, summary) in servers.iter().zip(summaries) {
        rows.push(vec![
            server.clone(),
            format!("{} / {}", summary.verified, summary.transfers),
            megabytes(summary.bytes_processed as f64),
            megabytes(summary.throughput_bytes_per_sec),
            secs(summary.total_time.p50),
            secs(summary.total_time.p99),
            secs(summary.queue_time.p50),
            summary.failed().to_string(),
        ]);
    }
    layout(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;
    use aesd_client::job::JobReport;
    use aesd_proto::Done;

    fn transfer(client: usize, server: usize, size: u64, outcome: Outcome) -> Transfer {
        let ms = Duration::from_millis;
        Transfer {
            client,
            server,
            batch: Some(0),
            size,
            scheduled: ms(100 * client as u64),
            dispatched: ms(100 * client as u64 + 10),
            finished: ms(100 * client as u64 + 1000),
            report: Some(JobReport {
                bytes_sent: size,
                bytes_received: size + 32,
                total: ms(900),
                queue: ms(200),
                processing: ms(500),
                network: ms(200),
                queue_positions: vec![],
                done: Done {
                    bytes_in: size,
                    bytes_out: size + 32,
                    queue_us: 200_000,
                    processing_us: 500_000,
                },
            }),
            outcome,
        }
    }

    /// The last cell of the row that starts with `name`.
    fn value<'a>(table: &'a str, name: &str) -> &'a str {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().last())
            .unwrap_or_default()
    }

    fn busy() -> Outcome {
        Outcome::Failed {
            kind: "busy".into(),
            message: "full".into(),
        }
    }

    fn run() -> LoadRun {
        LoadRun {
            duration: Duration::from_millis(1200),
            started_at: std::time::UNIX_EPOCH,
            transfers: vec![
                transfer(0, 0, 4_000_000, Outcome::Verified),
                transfer(1, 1, 1_000_000, busy()),
                transfer(2, 0, 2_000_000, Outcome::Verified),
            ],
        }
    }

    #[test]
    fn only_verified_bytes_count_and_failures_are_grouped() {
        let summary = Summary::of(&run(), Warmup::None);
        assert_eq!(summary.bytes_processed, 6_000_000);
        assert_eq!(summary.duration, Duration::from_millis(1200));
        assert_eq!(summary.throughput_bytes_per_sec, 5_000_000.0);
        assert_eq!(summary.failed(), 1);
        // network = total (from the intended start) − queue − processing
        assert_eq!(summary.total_network, Duration::from_millis(900));
        assert_eq!(
            summary.average(summary.total_queue),
            Duration::from_millis(200)
        );
        assert_eq!(summary.total_time.max, Duration::from_secs(1));
        let table = study_table(&[("basic2", &summary)]);
        assert_eq!(
            value(&table, "Avg Bytes per Second (MB/s)"),
            "5.00",
            "{table}"
        );
        assert_eq!(value(&table, "Failed (busy)"), "1", "{table}");
    }

    #[test]
    fn the_warmup_shrinks_the_window_and_is_counted() {
        let summary = Summary::of(&run(), Warmup::Transfers(1));
        assert_eq!(summary.transfers, 2);
        assert_eq!(summary.warmup_excluded, 1);
        assert_eq!(summary.bytes_processed, 2_000_000);
        assert_eq!(
            summary.duration,
            Duration::from_millis(1100),
            "100 ms → 1200 ms"
        );
        assert!(study_table(&[("x", &summary)]).contains("Warm-up Excluded"));
    }

    #[test]
    fn per_server_summaries_add_up_to_the_whole() {
        let whole = Summary::of(&run(), Warmup::None);
        let parts = Summary::per_server(&run(), Warmup::None, 2);
        assert_eq!(parts[0].transfers + parts[1].transfers, 3);
        assert_eq!(parts[0].bytes_processed, 6_000_000);
        assert_eq!(parts[1].failed(), 1);
        let sum: f64 = parts.iter().map(|part| part.throughput_bytes_per_sec).sum();
        assert_eq!(sum, whole.throughput_bytes_per_sec);
        let table = server_table(&["a:1".into(), "b:2".into()], &parts);
        assert!(
            table
                .lines()
                .nth(2)
                .is_some_and(|line| line.starts_with("b:2")),
            "{table}"
        );
    }

    #[test]
    fn suites_sit_side_by_side() {
        let summary = Summary::of(&run(), Warmup::None);
        let table = study_table(&[("basic1", &summary), ("large", &summary)]);
        let header = table.lines().next().expect("header");
        assert!(header.trim_start().starts_with("basic1") && header.ends_with("large"));
        let row = table
            .lines()
            .find(|line| line.starts_with("Transfers Verified"))
            .expect("row");
        assert_eq!(row.matches("2 / 3").count(), 2, "{row}");
    }

    /// An interrupted run that ran fewer transfers than planned says so
    /// in the Transfers Verified row; one that ran them all does not.
    #[test]
    fn an_interrupted_run_is_marked_in_the_table() {
        let summary = Summary::of(&run(), Warmup::None);
        let cut = study_table(&[("basic2", &summary.clone().with_planned(10))]);
        let row = cut
            .lines()
            .find(|line| line.starts_with("Transfers Verified"))
            .expect("row");
        assert!(row.ends_with("2 / 3 (interrupted: 10 planned)"), "{row}");
        let whole = study_table(&[("basic2", &summary.with_planned(3))]);
        assert!(!whole.contains("interrupted"), "{whole}");
    }

    #[test]
    fn nothing_measured_reads_n_a_not_zero() {
        let run = LoadRun {
            duration: Duration::from_secs(1),
            started_at: std::time::UNIX_EPOCH,
            transfers: vec![transfer(0, 0, 1_000_000, busy())],
        };
        let summary = Summary::of(&run, Warmup::None);
        let table = study_table(&[("basic1", &summary)]);
        for row in [
            "Total Bytes Processed (MB)",
            "Avg Bytes per Second (MB/s)",
            "Avg Queue Time (s)",
            "Total Time p50 (s)",
            "Queue Time max (s)",
        ] {
            assert_eq!(value(&table, row), NOT_MEASURED, "{row}:\n{table}");
        }
        assert_eq!(value(&table, "Transfers Verified"), "1");
        assert_eq!(value(&table, "Failed (busy)"), "1");
    }
}
