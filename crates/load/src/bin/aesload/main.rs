//! `aesload`: the load generator. Runs the study's suites (or any mix of
//! clients, batches, sizes and arrival rate) against one or more aesd
//! servers (or an embedded one), verifies every result and prints the
//! study's table; JSON, CSV and an SVG plot on request. `aesload compare`
//! lays earlier runs' JSON (and the study's published figures) side by
//! side.

//!
//! The binary is this dispatcher over its modules:
//!
//! * [`args`]: the command line ([`Args`](args::Args)) and its value
//!   parsers.
//! * [`commands`]: the subcommands, `aesload compare` and `aesload merge`.
//! * [`plan`]: the load plans the arguments describe, and the line that
//!   says what each runs.
//! * [`run`]: a load run, from the password to the exit status.
//! * [`signals`]: SIGINT/SIGTERM during a run.
//! * [`embedded`]: the embedded server of a run without `--server`.
//! * [`outputs`]: the study's table, `--json`, `--csv` and `--plot`.

mod args;
mod commands;
mod embedded;
mod outputs;
mod plan;
mod run;
mod signals;

use std::process::ExitCode;

use aesd_cli::error_line::error_line;
use aesd_cli::generate;
use aesd_load::console;
use clap::{CommandFactory, Parser};

use crate::args::{Args, Command};
use crate::run::RunEnd;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(kind) = args.generate {
        return generate::print(kind, Args::command());
    }
    match &args.command {
        Some(Command::Compare(compare)) => {
            return subcommand_status("compare", commands::run_compare(compare));
        }
        Some(Command::Merge(merge)) => {
            return subcommand_status("merge", commands::run_merge(merge));
        }
        None => {}
    }
    // Before the run reads its password or, with its embedded server,
    // holds that server's secrets: a crash must not leave them in a core
    // file (compare and merge read only reports).
    if let Err(err) = aesd_cli::secrets::disable_core_dumps() {
        eprintln!("aesload: warning: {err}; a crash could leave secrets in a core file");
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AESLOAD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("aesload: cannot start the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run::run(args)) {
        Ok(RunEnd::Verified) => stdout_status(ExitCode::SUCCESS),
        Ok(RunEnd::Failed) => ExitCode::FAILURE,
        Ok(RunEnd::Interrupted) => ExitCode::from(signals::EXIT_INTERRUPTED),
        Err(err) => {
            eprintln!("aesload: {}", error_line(err.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// `status`, or 1 after saying in one line why stdout could not be
/// written (a closed pipe is not an error: `aesload ... | head -1`).
fn stdout_status(status: ExitCode) -> ExitCode {
    match console::stdout_error() {
        Some(error) => {
            eprintln!("aesload: {error}");
            ExitCode::FAILURE
        }
        None => status,
    }
}

/// A subcommand's exit status: [`stdout_status`] when it succeeded, else
/// 2 after its error in one line.
fn subcommand_status(name: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => stdout_status(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("aesload {name}: {}", error_line(err.as_ref()));
            ExitCode::from(2)
        }
    }
}
