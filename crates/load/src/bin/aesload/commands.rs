//! The subcommands: `aesload merge` (a sharded run's documents into
//! one) and `aesload compare` (runs side by side).

use aesd_cli::output::OutputPath;
use aesd_load::compare::{self, plot as compare_plot, table::compare_table};
use aesd_load::merge::{self, ShardDocument};
use aesd_load::output::json;
use aesd_load::report::Summary;
use aesd_load::{console, out, outln};
use anyhow::{Context, Result};

use crate::args::{CompareArgs, MergeArgs};
use crate::outputs::{PerServer, print_tables, write_output};

/// `aesload merge`: the merged table on stdout, the document on request.
pub(crate) fn run_merge(args: &MergeArgs) -> Result<()> {
    let output = args.json.as_deref().map(OutputPath::check).transpose()?;
    if output.as_ref().is_some_and(OutputPath::is_stdout) {
        console::report_to_stderr();
    }
    let mut shards = Vec::with_capacity(args.files.len());
    for file in &args.files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let document: json::Document = serde_json::from_str(&text)
            .with_context(|| format!("{} is not an aesload --json document", file.display()))?;
        shards.push(ShardDocument {
            file: file.display().to_string(),
            document,
        });
    }
    let merged = merge::merge(&shards)?;
    outln!(
        "aesload merge: {} shards: {}",
        merged.merged_from.len(),
        merged.merged_from.join(", ")
    );
    if let Some(bind) = &merged.parameters.bind {
        outln!("source addresses: {bind}");
    }
    outln!("servers: {}", merged.parameters.servers.join(", "));
    let columns: Vec<(&str, Summary)> = merged
        .suites
        .iter()
        .map(|suite| (suite.name.as_str(), merge::summary_of(&suite.summary)))
        .collect();
    let per_server: Vec<PerServer> = match merged.parameters.servers.len() > 1 {
        true => merged
            .suites
            .iter()
            .map(|suite| {
                let (servers, summaries) = suite
                    .per_server
                    .iter()
                    .map(|server| (server.server.clone(), merge::summary_of(&server.summary)))
                    .unzip();
                (suite.name.as_str(), servers, summaries)
            })
            .collect(),
        false => Vec::new(),
    };
    print_tables(&columns, &per_server);
    if let Some(output) = &output {
        write_output("json", output, merged.to_json()?.as_bytes())?;
    }
    Ok(())
}

/// `aesload compare`: the table on stdout, the plot on request.
pub(crate) fn run_compare(args: &CompareArgs) -> Result<()> {
    let plot_output = args.plot.as_deref().map(OutputPath::check).transpose()?;
    if plot_output.as_ref().is_some_and(OutputPath::is_stdout) {
        console::report_to_stderr();
    }
    let mut runs = Vec::new();
    for file in &args.files {
        runs.extend(compare::load(file)?);
    }
    let runs = compare::prepare(runs, &args.suite)?;
    for warning in compare::warnings(&runs) {
        eprintln!("aesload compare: warning: {warning}");
    }
    out!("{}", compare_table(&runs));
    if let Some(output) = &plot_output {
        write_output("plot", output, compare_plot::render(&runs).as_bytes())?;
    }
    Ok(())
}
