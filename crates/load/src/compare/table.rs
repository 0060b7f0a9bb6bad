//! The comparison table: the study's rows (MB = 10^6 bytes, as the study
//! printed them) with one column per run per suite, then the same rows as
//! ratios to the first run of each suite.

use super::{Column, Figures, Run, columns};
use crate::report::layout;

/// A row: its name and how to read its value from a column's figures.
type Row = (&'static str, fn(&Figures) -> Option<f64>);

/// The study's six rows, then what aesload adds (blank for baselines).
const ROWS: [Row; 9] = [
    ("Total Bytes Processed (MB)", |f| {
        Some(f.bytes_processed / 1e6)
    }),
    ("Avg Bytes per Second (MB/s)", |f| {
        Some(f.throughput_bytes_per_sec / 1e6)
    }),
    ("Test Duration (s)", |f| Some(f.duration_s)),
    ("Total Network Time (s)", |f| Some(f.total_network_s)),
    ("Total Processing Time (s)", |f| Some(f.total_processing_s)),
    ("Avg Queue Time (s)", |f| Some(f.avg_queue_s)),
    ("Transfers Verified", |f| f.verified.map(|v| v as f64)),
    ("Total Time p50 (s)", |f| f.total_time_p50_s),
    ("Total Time p99 (s)", |f| f.total_time_p99_s),
];

/// Where a blank line separates the study's rows from aesload's.
const STUDY_ROWS: usize = 6;

/// The table of `runs` (prepared with [`super::prepare`]), then the
/// ratios to the first run of each suite when any suite has two runs.
pub fn compare_table(runs: &[Run]) -> String {
    let columns = columns(runs);
    let all: Vec<&Column> = columns.iter().collect();
    let mut table = header(&all);
    for (index, (name, value)) in ROWS.iter().enumerate() {
        if index == STUDY_ROWS {
            table.push(vec![String::new()]);
        }
        let mut row = vec![(*name).to_owned()];
        for column in &columns {
            row.push(match (index, value(column.figures)) {
                (6, Some(_)) => format!(
                    "{} / {}",
                    column.figures.verified.unwrap_or(0),
                    column.figures.transfers.unwrap_or(0)
                ),
                (0 | 1, Some(value)) => format!("{value:.2}"),
                (_, Some(value)) => format!("{value:.3}"),
                (_, None) => "-".to_owned(),
            });
        }
        table.push(row);
    }
    let mut out = layout(&table);
    let ratios = ratio_columns(&columns);
    if !ratios.is_empty() {
        out.push_str("\nRatio to the first run of each suite (× first; throughput above 1 is faster, times below 1 are shorter):\n");
        let shown: Vec<&Column> = ratios.iter().map(|(column, _)| *column).collect();
        let mut table = header(&shown);
        for (index, (name, value)) in ROWS.iter().enumerate() {
            if index >= STUDY_ROWS && index != 7 && index != 8 {
                continue;
            }
            let mut row = vec![(*name).to_owned()];
            for (column, first) in &ratios {
                row.push(match (value(column.figures), value(first.figures)) {
                    (Some(value), Some(first)) if first != 0.0 => ratio(value / first),
                    _ => "-".to_owned(),
                });
            }
            table.push(row);
        }
        out.push_str(&layout(&table));
    }
    out
}

/// `×` and the ratio, with two significant digits when it is small.
fn ratio(value: f64) -> String {
    let digits = match value.abs() {
        v if v >= 100.0 => 0,
        v if v >= 0.0995 || v == 0.0 => 2,
        v => (-v.log10()).ceil() as usize + 1,
    };
    format!("×{value:.digits$}")
}

/// Two header rows: the suite over each column, the run under it.
fn header(columns: &[&Column]) -> Vec<Vec<String>> {
    let mut suites = vec![String::new()];
    let mut runs = vec![String::new()];
    let mut previous = "";
    for column in columns {
        suites.push(match column.suite == previous {
            true => String::new(),
            false => column.suite.to_owned(),
        });
        previous = column.suite;
        runs.push(column.run.to_owned());
    }
    vec![suites, runs]
}

/// Every column that is not the first of its suite, with that first one.
fn ratio_columns<'a>(columns: &'a [Column<'a>]) -> Vec<(&'a Column<'a>, &'a Column<'a>)> {
    let mut pairs = Vec::new();
    for (index, column) in columns.iter().enumerate() {
        let first = columns
            .iter()
            .find(|other| other.suite == column.suite)
            .expect("the column itself");
        if !std::ptr::eq(first, &columns[index]) {
            pairs.push((column, first));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::run;

    /// The cells of the row that starts with `name`.
    fn cells<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .map(|line| line[name.len()..].split_whitespace().collect())
            .unwrap_or_default()
    }

    #[test]
    fn one_column_per_run_per_suite_with_ratios() {
        let runs = vec![
            run("study", &[("basic2", 400_000.0), ("large", 400_000.0)]),
            run("aesd", &[("basic2", 1_200_000.0), ("large", 2_000_000.0)]),
        ];
        let table = compare_table(&runs);
        let header: Vec<&str> = table
            .lines()
            .next()
            .expect("suites")
            .split_whitespace()
            .collect();
        assert_eq!(header, ["basic2", "large"]);
        let labels: Vec<&str> = table
            .lines()
            .nth(1)
            .expect("runs")
            .split_whitespace()
            .collect();
        assert_eq!(labels, ["study", "aesd", "study", "aesd"]);
        assert_eq!(
            cells(&table, "Avg Bytes per Second (MB/s)")[..4],
            ["0.40", "1.20", "0.40", "2.00"]
        );
        assert_eq!(
            cells(&table, "Transfers Verified")[..4],
            ["-", "-", "-", "-"]
        );
        let ratios = &table[table.find("Ratio").expect("ratio table")..];
        assert_eq!(
            cells(ratios, "Avg Bytes per Second (MB/s)"),
            ["×3.00", "×5.00"]
        );
        assert_eq!(cells(ratios, "Test Duration (s)"), ["×1.00", "×1.00"]);
    }

    #[test]
    fn small_ratios_keep_two_significant_digits() {
        assert_eq!(ratio(3.0), "×3.00");
        assert_eq!(ratio(397.8), "×398");
        assert_eq!(ratio(0.00033), "×0.00033");
        assert_eq!(ratio(0.05), "×0.050");
        assert_eq!(ratio(0.0), "×0.00");
        assert_eq!(
            ratio(84.93 / 849.35),
            "×0.10",
            "rounding does not add a digit"
        );
    }

    #[test]
    fn a_single_run_has_no_ratio_table_and_verified_counts_show() {
        let mut runs = vec![run("only", &[("basic1", 1e6)])];
        runs[0].suites[0].1.verified = Some(1);
        runs[0].suites[0].1.transfers = Some(1);
        let table = compare_table(&runs);
        assert!(!table.contains("Ratio"), "{table}");
        assert_eq!(cells(&table, "Transfers Verified"), ["1", "/", "1"]);
    }
}
