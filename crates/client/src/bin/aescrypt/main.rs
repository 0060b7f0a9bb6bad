//! `aescrypt`: encrypt or decrypt one file through an aesd server.
//!
//! The default output is the `openssl enc -aes-256-cbc -salt -pbkdf2`
//! format, so `openssl enc -d -aes-256-cbc -pbkdf2 -pass file:FILE` reads
//! what `aescrypt encrypt` writes, and `aescrypt decrypt` reads what openssl
//! writes. `--format age` (or `-r`) writes age v1, which `age -d` reads; an
//! age file decrypts with `--identity`, the file key unwrapped here.
//!
//! The binary's modules: [`args`] (the command line), [`key`] (the job's
//! key), [`paths`] (input and output checks), [`job`] (the run).

mod args;
mod job;
mod key;
mod paths;

use std::process::ExitCode;

use aesd_cli::error_line::error_line;
use aesd_cli::generate::{self, Generate, unless_generating};
use aesd_cli::output::OutputPath;
use anyhow::{Context, Result, bail};
use clap::{CommandFactory, FromArgMatches};

use crate::args::{Args, Mode, file_format};
use crate::key::{JobKey, job_key};
use crate::paths::{check_input, is_terminal};

fn main() -> ExitCode {
    let matches = unless_generating(Args::command()).get_matches();
    if let Some(kind) = matches.get_one::<Generate>("generate").copied() {
        return generate::print(kind, Args::command());
    }
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    // Before any secret is read (the password, identities): a crash must
    // not leave them in a core file.
    if let Err(err) = aesd_cli::secrets::disable_core_dumps() {
        eprintln!("aescrypt: warning: {err}; a crash could leave secrets in a core file");
    }
    let format = match file_format(&args) {
        Ok(format) => format,
        Err(message) => {
            eprintln!("aescrypt: {message}");
            return ExitCode::from(2);
        }
    };
    // Checked before anything else: a bad -o fails before the password
    // is typed and before any transfer.
    let prepared = OutputPath::check(&args.output)
        .map_err(anyhow::Error::from)
        .and_then(|output| {
            check_input(&args.input)?;
            if matches!(args.mode, Mode::Encrypt | Mode::Rewrap)
                && !args.to_terminal
                && is_terminal(&output)
            {
                bail!(
                    "refusing to write encrypted (binary) output to a terminal: redirect it \
                     (> FILE or | ...), give -o FILE, or force it with --to-terminal"
                );
            }
            Ok((output, job_key(&args, format)?))
        });
    let (output, key) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            eprintln!("aescrypt: {}", error_line(err.as_ref()));
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("aescrypt: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let ended = runtime.block_on(run_until_signal(&args, output, key));
    // Without waiting for blocking tasks: after a signal, the stdin reader
    // may be blocked in a read that never returns (a terminal, an open
    // pipe).
    runtime.shutdown_background();
    match ended {
        Ok(Ended::Done) => ExitCode::SUCCESS,
        Ok(Ended::Signal(code)) => ExitCode::from(code),
        // `aescrypt -o - | head`: the reader closed the pipe on purpose.
        // Ends quietly, with the status a process killed by SIGPIPE has
        // (what `cat` or `openssl enc` give there).
        Err(err) if closed_pipe(&err) => ExitCode::from(128 + 13),
        Err(err) => {
            eprintln!("aescrypt: {}", error_line(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Whether `err` comes from writing to a pipe whose reader has gone.
fn closed_pipe(err: &anyhow::Error) -> bool {
    let broken = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(broken)
            || matches!(
                cause.downcast_ref::<aesd_client::ClientError>(),
                Some(aesd_client::ClientError::Output(io)) if broken(io)
            )
    })
}

/// How aescrypt's run ended, when not by an error.
enum Ended {
    /// The job is done.
    Done,
    /// SIGINT (exit 130) or SIGTERM (143) stopped it.
    Signal(u8),
}

/// [`run`], stopped by SIGINT or SIGTERM: dropping the job removes its
/// temporary output file (OUT is left as it was).
async fn run_until_signal(args: &Args, output: OutputPath, key: JobKey) -> Result<Ended> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
    let (name, code) = tokio::select! {
        result = job::run(args, output, key) => return result.map(|()| Ended::Done),
        _ = int.recv() => ("interrupted", 130),
        _ = term.recv() => ("terminated", 143),
    };
    eprintln!("aescrypt: {name}");
    Ok(Ended::Signal(code))
}
