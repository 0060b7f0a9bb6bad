//! `aesload compare`: runs side by side, in the study's table and a plot.
//!
//! A run is one aesload `--json` document (labelled with its file name) or
//! one configuration of a baseline file: the study's published per-suite
//! figures ([`Baseline`], shipped as `docs/study-baseline.json`). Every
//! run contributes one column per suite it ran.
//!
//! * [`table`]: the study's rows, one column per run per suite, and the
//!   ratios to the first run of each suite.
//! * [`plot`]: the same figures as grouped bars, in SVG.

pub mod plot;
pub mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::output::json::{Document, SummaryJson};
use crate::suites::Suite;

/// One suite's figures, as the study reported them (the first six) plus
/// what an aesload run adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Bytes of the verified transfers.
    pub bytes_processed: f64,
    /// Bytes per second: `bytes_processed / duration_s`.
    pub throughput_bytes_per_sec: f64,
    /// The test's duration, seconds.
    pub duration_s: f64,
    /// Sum of the transfers' network time, seconds.
    pub total_network_s: f64,
    /// Sum of the transfers' processing time, seconds.
    pub total_processing_s: f64,
    /// Average queue time, seconds.
    pub avg_queue_s: f64,
    /// Transfers verified (aesload runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<usize>,
    /// Transfers counted (aesload runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfers: Option<usize>,
    /// Median total time of a transfer, seconds (aesload runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_time_p50_s: Option<f64>,
    /// 99th percentile of the total time, seconds (aesload runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_time_p99_s: Option<f64>,
}

impl From<&SummaryJson> for Figures {
    fn from(summary: &SummaryJson) -> Figures {
        Figures {
            bytes_processed: summary.bytes_processed as f64,
            throughput_bytes_per_sec: summary.throughput_bytes_per_sec,
            duration_s: summary.duration_s,
            total_network_s: summary.total_network_s,
            total_processing_s: summary.total_processing_s,
            avg_queue_s: summary.avg_queue_s,
            verified: Some(summary.verified),
            transfers: Some(summary.transfers),
            total_time_p50_s: Some(summary.total_time_s.p50),
            total_time_p99_s: Some(summary.total_time_s.p99),
        }
    }
}

/// One run: a label and its figures per suite, in the order it ran them.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file name (without `.json`), or the baseline configuration.
    pub label: String,
    /// `(suite name, figures)`.
    pub suites: Vec<(String, Figures)>,
    /// The `--scale` its file sizes were run at (published figures: 1).
    pub scale: f64,
}

/// A baseline file: published figures of earlier runs, numbers only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// What the figures are (free text).
    pub baseline: String,
    /// Where they come from (free text).
    #[serde(default)]
    pub source: String,
    /// How the units were converted (free text).
    #[serde(default)]
    pub units: String,
    /// One entry per configuration.
    pub runs: Vec<BaselineRun>,
}

/// One configuration of a [`Baseline`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineRun {
    /// Its label in the table (e.g. `study-dual-core`).
    pub name: String,
    /// Figures per suite name (`basic1`, `basic2`...).
    pub suites: BTreeMap<String, Figures>,
}

/// A file could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is neither an aesload document nor a baseline.
    #[error("{path}: not an aesload --json document or a baseline file: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        message: String,
    },
    /// `FILE#NAME` named a configuration the baseline does not have.
    #[error("{path} has no run named `{name}` (it has: {available})")]
    UnknownRun {
        /// The baseline file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The names it has.
        available: String,
    },
    /// Nothing is left to compare (no file, or no suite after `--suite`).
    #[error("nothing to compare: {0}")]
    Empty(&'static str),
}

/// Reads `spec`: an aesload `--json` file (one run), a baseline file (all
/// its runs) or `BASELINE#NAME` (one of them).
pub fn load(spec: &str) -> Result<Vec<Run>, CompareError> {
    let (path, name) = match spec.rsplit_once('#') {
        Some((path, name)) if !Path::new(spec).exists() => (Path::new(path), Some(name)),
        _ => (Path::new(spec), None),
    };
    let text = std::fs::read_to_string(path).map_err(|source| CompareError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &text, name)
}

/// [`load`] on text already read.
pub fn parse(path: &Path, text: &str, name: Option<&str>) -> Result<Vec<Run>, CompareError> {
    let parse_error = |message: String| CompareError::Parse {
        path: path.to_owned(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|err| parse_error(err.to_string()))?;
    if value.get("baseline").is_some() {
        let baseline: Baseline =
            serde_json::from_value(value).map_err(|err| parse_error(err.to_string()))?;
        let runs: Vec<Run> = baseline
            .runs
            .iter()
            .filter(|run| name.is_none_or(|name| run.name == name))
            .map(|run| Run {
                label: run.name.clone(),
                suites: ordered(run.suites.clone().into_iter().collect()),
                scale: 1.0,
            })
            .collect();
        if runs.is_empty() {
            return Err(CompareError::UnknownRun {
                path: path.to_owned(),
                name: name.unwrap_or_default().to_owned(),
                available: baseline
                    .runs
                    .iter()
                    .map(|run| run.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        return Ok(runs);
    }
    let document: Document =
        serde_json::from_value(value).map_err(|err| parse_error(err.to_string()))?;
    let label = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    Ok(vec![Run {
        label,
        suites: document
            .suites
            .iter()
            .map(|suite| (suite.name.clone(), Figures::from(&suite.summary)))
            .collect(),
        scale: document.parameters.scale,
    }])
}

/// Suites in the study's order (basic1 … drowning), then any others.
fn ordered(mut suites: Vec<(String, Figures)>) -> Vec<(String, Figures)> {
    suites.sort_by_key(|(name, _)| rank(name));
    suites
}

/// Where a suite goes among the columns: the study's order first.
pub fn rank(suite: &str) -> usize {
    Suite::ALL
        .iter()
        .position(|known| known.name() == suite)
        .unwrap_or(Suite::ALL.len())
}

/// Makes labels unique (`run`, `run-2`...), keeps only the suites in
/// `only` (all when empty), and drops runs left without a suite.
pub fn prepare(runs: Vec<Run>, only: &[String]) -> Result<Vec<Run>, CompareError> {
    if runs.is_empty() {
        return Err(CompareError::Empty("give at least one file"));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let runs: Vec<Run> = runs
        .into_iter()
        .map(|mut run| {
            let count = seen.entry(run.label.clone()).or_default();
            *count += 1;
            if *count > 1 {
                run.label = format!("{}-{count}", run.label);
            }
            run.suites
                .retain(|(suite, _)| only.is_empty() || only.contains(suite));
            run
        })
        .filter(|run| !run.suites.is_empty())
        .collect();
    match runs.is_empty() {
        true => Err(CompareError::Empty(
            "no run has any of the suites asked for",
        )),
        false => Ok(runs),
    }
}

/// What makes `runs` unfit to compare as they are: different `--scale`s
/// (durations and throughputs of different amounts of data), and suites
/// some runs lack (their cells stay empty). One line each, for stderr.
pub fn warnings(runs: &[Run]) -> Vec<String> {
    let mut warnings = Vec::new();
    let scales: Vec<String> = runs
        .iter()
        .map(|run| format!("{} {}", run.label, run.scale))
        .collect();
    if runs.iter().any(|run| run.scale != runs[0].scale) {
        warnings.push(format!(
            "the runs were made at different --scale ({}): their sizes differ, so durations and ratios compare different amounts of data",
            scales.join(", ")
        ));
    }
    for suite in suite_names(runs) {
        let missing: Vec<&str> = runs
            .iter()
            .filter(|run| run.suites.iter().all(|(name, _)| *name != suite))
            .map(|run| run.label.as_str())
            .collect();
        if !missing.is_empty() {
            warnings.push(format!(
                "suite {suite} is missing from {}: its ratios leave them out",
                missing.join(", ")
            ));
        }
    }
    warnings
}

/// The suites of `runs`, each once, in column order.
pub fn suite_names(runs: &[Run]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for run in runs {
        for (suite, _) in &run.suites {
            if !names.contains(suite) {
                names.push(suite.clone());
            }
        }
    }
    names.sort_by_key(|name| rank(name));
    names
}

/// One column: a run's figures for one suite.
pub struct Column<'a> {
    /// The suite.
    pub suite: &'a str,
    /// The run's label.
    pub run: &'a str,
    /// Its figures.
    pub figures: &'a Figures,
}

/// Every (suite, run) pair that has figures: grouped by suite, runs in
/// the order given.
pub fn columns(runs: &[Run]) -> Vec<Column<'_>> {
    let mut columns = Vec::new();
    for suite in suite_names(runs) {
        for run in runs {
            if let Some((name, figures)) = run.suites.iter().find(|(name, _)| *name == suite) {
                columns.push(Column {
                    suite: name,
                    run: &run.label,
                    figures,
                });
            }
        }
    }
    columns
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Figures with the given throughput and duration; the rest derived.
    pub(crate) fn figures(throughput: f64, duration: f64) -> Figures {
        Figures {
            bytes_processed: throughput * duration,
            throughput_bytes_per_sec: throughput,
            duration_s: duration,
            total_network_s: duration / 2.0,
            total_processing_s: duration / 2.0,
            avg_queue_s: 0.5,
            verified: None,
            transfers: None,
            total_time_p50_s: None,
            total_time_p99_s: None,
        }
    }

    pub(crate) fn run(label: &str, suites: &[(&str, f64)]) -> Run {
        Run {
            label: label.into(),
            suites: suites
                .iter()
                .map(|(name, throughput)| ((*name).to_owned(), figures(*throughput, 10.0)))
                .collect(),
            scale: 1.0,
        }
    }

    #[test]
    fn different_scales_and_missing_suites_are_warned_about() {
        let a = run("a", &[("basic1", 1.0), ("basic2", 1.0)]);
        let b = run("b", &[("basic1", 2.0), ("basic2", 1.0)]);
        assert!(warnings(&[a.clone(), b.clone()]).is_empty());
        let small = Run {
            scale: 0.05,
            ..b.clone()
        };
        let said = warnings(&[a.clone(), small]);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("different --scale (a 1, b 0.05)"),
            "{said:?}"
        );
        let partial = run("c", &[("basic1", 2.0)]);
        let said = warnings(&[a, partial]);
        assert_eq!(
            said,
            ["suite basic2 is missing from c: its ratios leave them out"]
        );
    }

    #[test]
    fn baselines_load_whole_or_by_name() {
        let text = r#"{"baseline": "study", "runs": [
            {"name": "a", "suites": {"large": {"bytes_processed": 1, "throughput_bytes_per_sec": 2,
              "duration_s": 3, "total_network_s": 4, "total_processing_s": 5, "avg_queue_s": 6},
              "basic1": {"bytes_processed": 1, "throughput_bytes_per_sec": 2,
              "duration_s": 3, "total_network_s": 4, "total_processing_s": 5, "avg_queue_s": 6}}},
            {"name": "b", "suites": {}}]}"#;
        let path = Path::new("study.json");
        let all = parse(path, text, None).expect("baseline");
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].suites[0].0, "basic1",
            "study order, not alphabetical"
        );
        assert_eq!(all[0].suites[1].1.avg_queue_s, 6.0);
        let one = parse(path, text, Some("b")).expect("one run");
        assert_eq!(one[0].label, "b");
        let err = parse(path, text, Some("c")).unwrap_err();
        assert!(err.to_string().contains("a, b"), "{err}");
        assert!(matches!(
            parse(path, "{\"x\": 1}", None),
            Err(CompareError::Parse { .. })
        ));
    }

    #[test]
    fn the_shipped_study_baseline_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/study-baseline.json");
        let runs = load(&path.display().to_string()).expect("docs/study-baseline.json");
        assert_eq!(runs.len(), 5);
        for run in &runs {
            let suites: Vec<&str> = run.suites.iter().map(|(name, _)| name.as_str()).collect();
            assert_eq!(
                suites,
                ["basic1", "basic2", "basic3", "large"],
                "{}",
                run.label
            );
            for (suite, figures) in &run.suites {
                // The study's throughput is its bytes over its duration.
                let derived = figures.bytes_processed / figures.duration_s;
                let error = (derived / figures.throughput_bytes_per_sec - 1.0).abs();
                assert!(error < 0.02, "{} {suite}: {error}", run.label);
            }
        }
        let dual = load(&format!("{}#study-improved-dual-core", path.display())).expect("one");
        assert_eq!(dual[0].suites[1].1.throughput_bytes_per_sec, 406_060.0);
    }

    #[test]
    fn labels_become_unique_and_suites_filter() {
        let runs = vec![
            run("run", &[("basic2", 1.0), ("large", 2.0)]),
            run("run", &[("large", 3.0)]),
            run("other", &[("basic1", 4.0)]),
        ];
        let only = vec!["large".to_owned()];
        let prepared = prepare(runs, &only).expect("two runs left");
        let labels: Vec<&str> = prepared.iter().map(|run| run.label.as_str()).collect();
        assert_eq!(labels, ["run", "run-2"]);
        assert!(matches!(prepare(vec![], &[]), Err(CompareError::Empty(_))));
        let none = prepare(vec![run("x", &[("basic1", 1.0)])], &only);
        assert!(matches!(none, Err(CompareError::Empty(_))));
    }

    #[test]
    fn columns_group_by_suite_in_the_study_order() {
        let runs = vec![
            run("A", &[("large", 1.0), ("basic2", 2.0)]),
            run("B", &[("basic2", 3.0), ("custom", 4.0)]),
        ];
        let columns: Vec<(&str, &str)> = columns(&runs)
            .iter()
            .map(|column| (column.suite, column.run))
            .collect();
        assert_eq!(
            columns,
            [
                ("basic2", "A"),
                ("basic2", "B"),
                ("large", "A"),
                ("custom", "B")
            ]
        );
    }
}
