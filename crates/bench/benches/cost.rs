//! `cost`: runs one fixed workload of [`aesd_bench::cost`] and exits, so
//! that `scripts/bench/icount.sh` can count the guest instructions it
//! executes under qemu-user. A bench target (`harness = false`) rather than
//! a binary, so that `cargo bench --no-run --target T` builds it beside
//! `throughput` and no ordinary build or test compiles it.
//!
//! ```text
//! cost encrypt BYTES [--chunk BYTES]     EncryptStream, in place, + padding
//! cost decrypt BYTES [--chunk BYTES]     DecryptStream, in place, + padding check
//! cost pbkdf2 ITERATIONS                 one derive_key (0: none)
//! cost job BYTES [--chunk BYTES] [--iter N] [--jobs N]   whole encryption jobs, framed
//! cost check                             self-check of every workload
//! ```
//!
//! Without a workload it runs the self-check: that is what `cargo bench`
//! (which adds `--bench`, and passes criterion's options given after `--`,
//! ignored here) and `cargo test --benches` (no arguments) do with it.

use std::process::ExitCode;

use aesd_bench::cost::{DEFAULT_CHUNK, DEFAULT_JOB_ITERATIONS, Workload, self_check};

const USAGE: &str = "\
usage: cost WORKLOAD [OPTIONS]

Runs one workload once, single-threaded, and prints what it did (for
instruction counting under qemu-user: scripts/bench/icount.sh).

workloads:
  encrypt BYTES   encrypt BYTES through the server's EncryptStream in place, then pad
  decrypt BYTES   decrypt a file of BYTES (a multiple of 16) through DecryptStream
  pbkdf2 ITER     derive one key and IV with ITER PBKDF2-HMAC-SHA256 iterations (0: none)
  job BYTES       whole encryption jobs through the server's connection state machine:
                  hello, begin frame, data frames, end frame in; welcome, started,
                  data and done frames out (key derivation included)
  check           check every workload's output on small sizes (also the default
                  without a workload, as cargo bench and cargo test --benches run it)
  BYTES and ITER of 0 are the baselines (same start-up, no per-byte work).
  Sizes take K and M suffixes (powers of 1024): 64K, 1M.

options:
  --chunk BYTES   chunk (data frame) size, a multiple of 16 up to 1M (default 64K)
  --iter N        job: PBKDF2 iterations (default 10000)
  --jobs N        job: N jobs of BYTES at once, one connection each, their CBC chains
                  encrypted together by the lane engine (default 1)
  --bench         ignored (cargo bench passes it); with it, arguments that are not a
                  workload (criterion's options and filters) mean the check
  -h, --help      this help

exit status: 0 done, 1 the workload failed, 2 bad usage";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Run(Workload),
    Check,
    Help,
}

/// A command line that cannot be run.
#[derive(Debug, PartialEq, Eq)]
enum UsageError {
    /// A workload name that does not exist.
    UnknownWorkload(String),
    /// A workload or option without its value.
    MissingValue(&'static str),
    /// A value that is not a number (or size).
    BadNumber { what: &'static str, value: String },
    /// An option or argument that does not belong.
    Unexpected(String),
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::UnknownWorkload(name) => write!(f, "unknown workload {name:?}"),
            UsageError::MissingValue(what) => write!(f, "{what} needs a value"),
            UsageError::BadNumber { what, value } => {
                write!(f, "{what}: {value:?} is not a number")
            }
            UsageError::Unexpected(arg) => write!(f, "unexpected argument {arg:?}"),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(command) => command,
        Err(error) => {
            eprintln!("cost: {error} (try --help)");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Help => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Command::Check => match self_check() {
            Ok(lines) => {
                for line in lines {
                    println!("cost check: {line}");
                }
                println!("cost check: ok");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("cost check: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Run(workload) => match workload.run() {
            Ok(outcome) => {
                println!(
                    "{} in={} out={}",
                    describe(&workload),
                    outcome.input,
                    outcome.output
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("cost: {}: {error}", describe(&workload));
                ExitCode::FAILURE
            }
        },
    }
}

fn describe(workload: &Workload) -> String {
    match workload {
        Workload::Encrypt { bytes, chunk } => format!("encrypt bytes={bytes} chunk={chunk}"),
        Workload::Decrypt { bytes, chunk } => format!("decrypt bytes={bytes} chunk={chunk}"),
        Workload::Pbkdf2 { iterations } => format!("pbkdf2 iterations={iterations}"),
        Workload::Job {
            bytes,
            chunk,
            iterations,
            jobs,
        } => format!("job bytes={bytes} chunk={chunk} iterations={iterations} jobs={jobs}"),
    }
}

fn parse(args: &[String]) -> Result<Command, UsageError> {
    let by_cargo_bench = args.iter().any(|arg| arg == "--bench");
    let mut rest = args.iter().filter(|arg| *arg != "--bench");
    let Some(name) = rest.next() else {
        return Ok(Command::Check);
    };
    let mut value = |what| rest.next().ok_or(UsageError::MissingValue(what));
    let command = match name.as_str() {
        "-h" | "--help" => return Ok(Command::Help),
        "check" => Command::Check,
        "encrypt" => Command::Run(Workload::Encrypt {
            bytes: size("encrypt BYTES", value("encrypt")?)?,
            chunk: DEFAULT_CHUNK,
        }),
        "decrypt" => Command::Run(Workload::Decrypt {
            bytes: size("decrypt BYTES", value("decrypt")?)?,
            chunk: DEFAULT_CHUNK,
        }),
        "pbkdf2" => Command::Run(Workload::Pbkdf2 {
            iterations: number("pbkdf2 ITER", value("pbkdf2")?)?,
        }),
        "job" => Command::Run(Workload::Job {
            bytes: size("job BYTES", value("job")?)?,
            chunk: DEFAULT_CHUNK,
            iterations: DEFAULT_JOB_ITERATIONS,
            jobs: 1,
        }),
        // `cargo bench` with criterion options or a filter: not for us.
        _ if by_cargo_bench => return Ok(Command::Check),
        other if other.starts_with('-') => return Err(UsageError::Unexpected(other.into())),
        other => return Err(UsageError::UnknownWorkload(other.into())),
    };
    let mut command = command;
    while let Some(option) = rest.next() {
        let mut value = |what| rest.next().ok_or(UsageError::MissingValue(what));
        match (option.as_str(), &mut command) {
            ("-h" | "--help", _) => return Ok(Command::Help),
            (
                "--chunk",
                Command::Run(
                    Workload::Encrypt { chunk, .. }
                    | Workload::Decrypt { chunk, .. }
                    | Workload::Job { chunk, .. },
                ),
            ) => {
                let bytes = size("--chunk", value("--chunk")?)?;
                *chunk = usize::try_from(bytes).map_err(|_| UsageError::BadNumber {
                    what: "--chunk",
                    value: bytes.to_string(),
                })?;
            }
            ("--iter", Command::Run(Workload::Job { iterations, .. })) => {
                *iterations = number("--iter", value("--iter")?)?;
            }
            ("--jobs", Command::Run(Workload::Job { jobs, .. })) => {
                *jobs = number("--jobs", value("--jobs")?)?;
            }
            (other, _) => return Err(UsageError::Unexpected(other.into())),
        }
    }
    Ok(command)
}

/// A byte count: digits with an optional K or M suffix (powers of 1024).
fn size(what: &'static str, text: &str) -> Result<u64, UsageError> {
    let bad = || UsageError::BadNumber {
        what,
        value: text.into(),
    };
    let (digits, scale) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 1024),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1024 * 1024),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(bad)
}

/// A plain decimal number.
fn number<T: std::str::FromStr>(what: &'static str, text: &str) -> Result<T, UsageError> {
    text.parse().map_err(|_| UsageError::BadNumber {
        what,
        value: text.into(),
    })
}
