//! What a run leaves: the study's table on stdout, failed transfers on
//! stderr, and the `--json`, `--csv` and `--plot` files (their paths
//! checked before the run).

use std::path::PathBuf;

use aesd_cli::output::OutputPath;
use aesd_load::output::{csv, json, write_file};
use aesd_load::plot;
use aesd_load::record::{RunParameters, SuiteRun};
use aesd_load::report::{Summary, server_table, study_table};
use aesd_load::server_metrics::ServerSample;
use aesd_load::sizes::human_bytes;
use aesd_load::{console, out, outln};
use anyhow::{Result, bail};

use crate::args::Args;

/// Failed transfers listed on stderr per suite (the rest are counted).
const LISTED_FAILURES: usize = 10;

/// The `--json`, `--csv` and `--plot` outputs, checked before the run.
pub(crate) struct Outputs {
    pub(crate) json: Option<OutputPath>,
    pub(crate) csv: Option<OutputPath>,
    pub(crate) plot: Option<OutputPath>,
}

impl Outputs {
    /// Checks every output path (see [`OutputPath::check`]); at most one
    /// may be `-`, and then the report goes to stderr.
    pub(crate) fn check(args: &Args) -> Result<Outputs> {
        let check = |path: &Option<PathBuf>| path.as_deref().map(OutputPath::check).transpose();
        let outputs = Outputs {
            json: check(&args.json)?,
            csv: check(&args.csv)?,
            plot: check(&args.plot)?,
        };
        let to_stdout = [&outputs.json, &outputs.csv, &outputs.plot]
            .into_iter()
            .flatten()
            .filter(|output| output.is_stdout())
            .count();
        if to_stdout > 1 {
            bail!("only one of --json, --csv and --plot can be - (stdout)");
        }
        if to_stdout == 1 {
            console::report_to_stderr();
        }
        Ok(outputs)
    }
}

/// The study's table on stdout (one column per suite), per-server rows
/// when there are several servers, failed transfers on stderr.
pub(crate) fn report(runs: &[SuiteRun], parameters: &RunParameters, interrupted: bool) {
    let columns: Vec<(&str, Summary)> = runs
        .iter()
        .map(|suite| {
            let summary = Summary::of(&suite.run, parameters.warmup);
            let summary = match interrupted {
                true => summary.with_planned(suite.plan.own_clients().count()),
                false => summary,
            };
            (suite.name.as_str(), summary)
        })
        .collect();
    let per_server: Vec<PerServer> = match parameters.servers.len() > 1 {
        true => runs
            .iter()
            .map(|suite| {
                let summaries =
                    Summary::per_server(&suite.run, parameters.warmup, parameters.servers.len());
                (suite.name.as_str(), parameters.servers.clone(), summaries)
            })
            .collect(),
        false => Vec::new(),
    };
    print_tables(&columns, &per_server);
    for suite in runs {
        let failed: Vec<_> = suite
            .run
            .transfers
            .iter()
            .filter_map(|transfer| Some((transfer, transfer.failure()?)))
            .collect();
        for (transfer, (kind, message)) in failed.iter().take(LISTED_FAILURES) {
            eprintln!(
                "aesload: {} client {} ({}, {}) failed [{kind}]: {message}",
                suite.name,
                transfer.client,
                human_bytes(transfer.size),
                parameters.servers[transfer.server],
            );
        }
        if failed.len() > LISTED_FAILURES {
            eprintln!(
                "aesload: {}: {} more failed transfers (see --json or --csv)",
                suite.name,
                failed.len() - LISTED_FAILURES
            );
        }
    }
}

/// One line on what `--metrics-url` saw.
pub(crate) fn describe_server_samples(samples: &[ServerSample], failures: usize) {
    let peak = |value: fn(&ServerSample) -> Option<f64>| {
        samples.iter().filter_map(value).fold(f64::NAN, f64::max)
    };
    // A figure no sample had reads "n/a" (a failed --metrics-url gives
    // no samples at all), never NaN.
    let shown = |value: f64, digits: usize, unit: &str| match value.is_nan() {
        true => "n/a".to_owned(),
        false => format!("{value:.digits$}{unit}"),
    };
    outln!(
        "server metrics: {} samples ({failures} failed scrapes), peak CPU {}, peak RSS {}, peak active {} / queued {} jobs{}",
        samples.len(),
        shown(peak(|s| s.cpu_percent), 0, " %"),
        shown(peak(|s| s.resident_bytes) / 1_048_576.0, 1, " MiB"),
        shown(peak(|s| s.active_jobs), 0, ""),
        shown(peak(|s| s.queued_jobs), 0, ""),
        match peak(|s| s.temperature_c) {
            t if t.is_nan() => String::new(),
            t => format!(", peak temperature {t:.1} °C"),
        }
    );
}

/// Writes the `--json`, `--csv` and `--plot` files of a run, each named
/// on stdout once written (unless it is stdout).
pub(crate) fn write_outputs(
    outputs: &Outputs,
    runs: &[SuiteRun],
    parameters: &RunParameters,
    server_samples: Vec<ServerSample>,
    interrupted: bool,
) -> Result<()> {
    let document = json::Document::new(parameters, runs)
        .with_server_metrics(server_samples)
        .interrupted(interrupted);
    if let Some(output) = &outputs.json {
        write_output("json", output, document.to_json()?.as_bytes())?;
    }
    if let Some(output) = &outputs.csv {
        write_output("csv", output, csv::to_csv(&document).as_bytes())?;
    }
    if let Some(output) = &outputs.plot {
        let svg = plot::render(
            runs,
            parameters.warmup,
            &document.server_metrics,
            interrupted,
        );
        write_output("plot", output, svg.as_bytes())?;
    }
    Ok(())
}

/// A suite's name, its servers and their summaries: its per-server table.
pub(crate) type PerServer<'a> = (&'a str, Vec<String>, Vec<Summary>);

/// The study's table on stdout, one column per suite (its name and
/// summary), then each suite's per-server table (`per_server`: empty for
/// a run against one server).
pub(crate) fn print_tables(columns: &[(&str, Summary)], per_server: &[PerServer]) {
    let columns: Vec<(&str, &Summary)> = columns.iter().map(|(name, s)| (*name, s)).collect();
    outln!();
    out!("{}", study_table(&columns));
    for (suite, servers, summaries) in per_server {
        outln!("\n{suite} per server:");
        out!("{}", server_table(servers, summaries));
    }
}

/// Writes `bytes` to `output` ([`write_file`]), then names the file on
/// stdout as `LABEL: PATH` (unless the output is stdout itself).
pub(crate) fn write_output(label: &str, output: &OutputPath, bytes: &[u8]) -> Result<()> {
    write_file(output, bytes)?;
    if !output.is_stdout() {
        outln!("{label}: {}", output.path().display());
    }
    Ok(())
}
