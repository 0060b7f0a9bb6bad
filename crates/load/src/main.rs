//! `aesload`: the load generator. Runs the study's suites (or any mix of
//! clients, batches, sizes and arrival rate) against one or more aesd
//! servers (or an embedded one), verifies every result and prints the
//! study's table; JSON, CSV and an SVG plot on request. `aesload compare`
//! lays earlier runs' JSON (and the study's published figures) side by
//! side.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_client::connection::parse_server_address;
use aesd_client::error_line::error_line;
use aesd_client::generate::{Generate, generate};
use aesd_client::output::OutputPath;
use aesd_client::pass_source::PassSource;
use aesd_client::password::read_token_file;
use aesd_client::tls::TlsArgs;
use aesd_client::{DEFAULT_ITERATIONS, KeyDerivation};
use aesd_load::compare::{self, plot as compare_plot, table::compare_table};
use aesd_load::distribution::SizeDist;
use aesd_load::durations::{Warmup, parse_duration};
use aesd_load::interrupt::Interrupt;
use aesd_load::load::{Arrival, LoadFormat, LoadPlan, run_load_until};
use aesd_load::merge::{self, ShardDocument};
use aesd_load::output::{csv, json, write_file};
use aesd_load::plot;
use aesd_load::progress::{DisplayMode, Progress, display, finish_display};
use aesd_load::record::{RunParameters, SuiteRun};
use aesd_load::report::{Summary, server_table, study_table};
use aesd_load::server_metrics::{self, MetricsUrl, ServerSample};
use aesd_load::shard::Shard;
use aesd_load::sizes::{human_bytes, parse_size};
use aesd_load::start::StartAt;
use aesd_load::suites::{DEFAULT_SEED, Suite, SuiteError, SuiteOptions, custom_plan};
use aesd_load::{console, out, outln};
use aesd_proto::{AuthToken, Password};
use aesd_server::ConfigLayer;
use anyhow::{Context, Result, bail};
use clap::{CommandFactory, Parser};

/// Password used when no --password-file is given (load tests only).
const DEFAULT_LOAD_PASSWORD: &[u8] = b"aesload-test-password";

/// Failed transfers listed on stderr per suite (the rest are counted).
const LISTED_FAILURES: usize = 10;

/// Load generator for aesd: the study's suites or N clients in batches
/// of C, every result verified
#[derive(Debug, Parser)]
#[command(
    name = "aesload",
    version,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    after_help = "Exit status: 0 all verified, 1 any failed, 2 bad arguments, 130 interrupted. \
More: aesload --help, or the man page (aesload --generate man).",
    after_long_help = "\
Without --server, aesload starts an embedded aesd on 127.0.0.1 (ephemeral port) \
and runs against it, so it works out of the box.

Suites (the study's; sizes in MiB, its \"MB\"): basic1 = 1 × 100M; basic2 = 10 clients, \
sizes 2M/5M/10M/20M with weights .5/.3/.2/.1; basic3 = 20 and large = 100 clients in \
batches of 10, each batch repeating basic2's sizes; thousand = 1000 clients in batches \
of 50 over 10M/50M/100M; drowning = open loop, --rate clients/s (default 20) for \
--duration (default 10s). all = every suite, one column each. --clients, --chunk, \
--sizes and --scale apply on top of a suite.

Sizes: K/M/G and KiB/MiB/GiB are powers of 1024, KB/MB/GB powers of 1000; \
--sizes 2M:5,5M:3 gives relative weights. The table prints MB as 10^6 bytes, like the study.

Exit status: 0 when every transfer verified; 1 when any failed (or stdout could not be \
written); 2 on bad arguments; 130 when interrupted.

Interrupts: the first SIGINT/SIGTERM starts no more clients, gives the running ones 3 s, \
cancels the rest, prints the table and writes --json/--csv/--plot (the JSON marked \
\"interrupted\": true); a second one exits at once. --json/--csv/--plot FILE: a file is \
replaced whole, a symlink's target likewise, a device or FIFO written through, - is stdout \
(the report then goes to stderr); paths are checked before the run.

Examples:
  aesload --suite all --scale 0.05
  aesload --clients 100 --chunk 10 --sizes 2M,5M,10M,20M
  aesload --suite drowning --rate 50 --duration 30s --warmup 5s --json run.json --plot run.svg
  aesload --server 192.168.1.50:7878,192.168.1.51:7878 --suite large
  aesload --server 10.0.0.5:7878 --suite large --shard 0/3 --start-at 2026-11-25T18:00:00Z --json s0.json
  aesload merge s0.json s1.json s2.json --json run.json
  aesload compare docs/study-baseline.json#study-dual-core before.json after.json --plot cmp.svg"
)]
struct Args {
    /// Another task instead of a load run
    #[command(subcommand)]
    command: Option<Command>,
    /// Servers to load, comma-separated [default: an embedded one]
    #[arg(
        long_help = "Servers to load, comma-separated; clients go round-robin [default: an embedded server on 127.0.0.1]"
    )]
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',', value_parser = parse_server_address)]
    server: Vec<String>,
    /// Study suite(s): basic1..3, large, thousand, drowning, a list, all
    #[arg(
        long_help = "Study suite(s): basic1, basic2, basic3, large, thousand, drowning, a comma list, or all"
    )]
    #[arg(long, value_name = "NAME", value_parser = parse_suites)]
    suite: Option<Suites>,
    /// Number of clients [default: 1, or the suite's]
    #[arg(
        long_help = "Number of clients (one transfer each; at least 1) [default: 1, or the suite's]"
    )]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    clients: Option<usize>,
    /// Clients started together [default: all, or the suite's]
    #[arg(
        long_help = "Clients started together; the next batch starts when this one is done (at least 1) \
                       [default: all at once, or the suite's]"
    )]
    #[arg(long, value_name = "C", value_parser = at_least_one)]
    chunk: Option<usize>,
    /// Size of every file [default: 10M, or the suite's]
    #[arg(long, value_name = "SIZE", conflicts_with = "sizes", value_parser = parse_size, hide_short_help = true)]
    size: Option<u64>,
    /// File sizes drawn per client: 2M,5M or 2M:5,5M:3 [default: 10M]
    #[arg(
        long_help = "Sizes to draw from per client (seeded), comma-separated, each optionally SIZE:WEIGHT \
                       [default: 10M, or the suite's]"
    )]
    #[arg(long, value_name = "LIST")]
    sizes: Option<SizeDist>,
    /// Multiply every file size by F (e.g. 0.05)
    #[arg(
        long_help = "Multiply every file size by F (e.g. 0.05 to try the suites on a small machine)"
    )]
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = positive_number)]
    scale: f64,
    /// Open loop: new clients per second, whatever completes [drowning: 20]
    #[arg(long, value_name = "R", value_parser = positive_number)]
    rate: Option<f64>,
    /// Open loop: how long clients keep arriving (clients = rate × duration) [drowning: 10s]
    #[arg(long, value_name = "TIME", value_parser = parse_duration, hide_short_help = true)]
    duration: Option<Duration>,
    /// Leave the start out of the results: a time (5s) or a number of transfers (10)
    #[arg(
        long,
        value_name = "TIME|N",
        default_value = "0",
        hide_short_help = true
    )]
    warmup: Warmup,
    /// Seed for the size draw and the data (the default makes basic2 draw the study's 84.93 MB)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEED, hide_short_help = true)]
    seed: u64,
    /// Password: pass:PW, env:VAR, file:PATH, fd:N or stdin
    #[arg(
        long_help = "The jobs' password, as openssl -pass: pass:PASSWORD, env:VAR, file:PATH, fd:N or stdin \
                       [default: a fixed test password]"
    )]
    #[arg(long, value_name = "SOURCE", conflicts_with = "password_file")]
    pass: Option<PassSource>,
    /// File whose first line is the password: the same as --pass file:FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    password_file: Option<PathBuf>,
    /// File whose first line is the access token (16 to 256 bytes) of servers started with
    /// --token-file; the embedded server then requires it too [default: no token]
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
    /// The embedded server speaks TLS with this PEM certificate chain (needs
    /// --embedded-tls-key; connect with --tls-ca naming the certificate or its CA)
    #[arg(
        long,
        value_name = "FILE",
        requires = "embedded_tls_key",
        hide_short_help = true
    )]
    embedded_tls_cert: Option<PathBuf>,
    /// The private key of --embedded-tls-cert
    #[arg(
        long,
        value_name = "FILE",
        requires = "embedded_tls_cert",
        hide_short_help = true
    )]
    embedded_tls_key: Option<PathBuf>,
    /// Fail a transfer when its server sends nothing (or takes no input) for this many seconds
    /// during the job, or when connecting or the welcome takes longer (a peer that sends no
    /// welcome is not an aesd); waiting in the queue after a `queued` answer is not limited
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = aesd_client::connection::parse_idle_timeout, hide_short_help = true)]
    timeout: std::time::Duration,
    /// PBKDF2 iterations per job (at least 1)
    #[arg(long_help = "PBKDF2 iterations per job (openssl -iter; at least 1)")]
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Where each job's key is derived from the password: `client` (the password never leaves
    /// aesload; the server does no PBKDF2), `server` (key source 1: the password is sent), or
    /// `auto` (client when the server accepts it)
    #[arg(
        long,
        value_name = "WHERE",
        default_value = "auto",
        hide_short_help = true
    )]
    key_derivation: KeyDerivation,
    /// The jobs' file format: openssl or age [default: openssl]
    #[arg(
        long_help = "The jobs' file format: openssl (openssl enc -aes-256-cbc -pbkdf2, with --pass) or age \
                       (age v1 to an X25519 identity aesload makes for the run; every result is decrypted with \
                       it by aesload's own verifier: the header through aesd-age, the payload with RustCrypto's \
                       ChaCha20-Poly1305 directly) [default: openssl]"
    )]
    #[arg(long, value_name = "FORMAT", value_parser = ["openssl", "age"], hide_short_help = true)]
    format: Option<String>,
    /// Embedded server only: worker threads [default: one per core]
    #[arg(long, value_name = "N", value_parser = at_least_one, hide_short_help = true)]
    workers: Option<usize>,
    /// Embedded server only: jobs processed at once [default: 2 × workers]
    #[arg(long, value_name = "N", value_parser = at_least_one, hide_short_help = true)]
    max_active: Option<usize>,
    /// Embedded server only: its largest data frame, and so the size of the chunks aesload
    /// sends and the server encrypts (4096..1048576). Larger than aesd's default (65536, sized
    /// for the boards' memory): on a host, fewer frames mean fewer wake-ups per byte
    #[arg(long, value_name = "BYTES", default_value_t = EMBEDDED_CHUNK_SIZE,
          value_parser = clap::value_parser!(u32).range(4096..=1_048_576), hide_short_help = true)]
    embedded_chunk_size: u32,
    /// Write every parameter, summary and transfer as JSON
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one row per transfer as CSV
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw per-transfer times and throughput over time as SVG
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Sample a server's Prometheus endpoint during the run
    #[arg(
        long_help = "Sample this server's Prometheus endpoint (aesd --metrics-listen) once a second during the \
                       run: its CPU, memory, active and queued jobs and temperature go into --json and --plot"
    )]
    #[arg(long, value_name = "URL", hide_short_help = true)]
    metrics_url: Option<MetricsUrl>,
    /// Run only part I of N of the clients (client j is shard j mod N's), for several processes
    /// or machines; `aesload merge` joins their --json files
    #[arg(long, value_name = "I/N", hide_short_help = true)]
    shard: Option<Shard>,
    /// Start at this wall-clock time (RFC 3339, e.g. 2026-11-25T18:00:00Z, or Unix seconds),
    /// so shards start together; a time more than 10 s past is refused
    #[arg(
        long,
        value_name = "TIME",
        conflicts_with = "start_in",
        hide_short_help = true
    )]
    start_at: Option<StartAt>,
    /// Start after this long (e.g. 30s)
    #[arg(long, value_name = "TIME", value_parser = parse_duration, hide_short_help = true)]
    start_in: Option<Duration>,
    /// Connect from this local address (e.g. 127.0.0.2): aesd's per-client limits count
    /// clients by address
    #[arg(long, value_name = "ADDR", hide_short_help = true)]
    bind: Option<std::net::IpAddr>,
    /// No progress display on stderr
    #[arg(short, long)]
    quiet: bool,
    /// Print a man page or a shell completion script (from these definitions) and exit
    #[arg(long, value_name = "KIND", exclusive = true, hide_short_help = true)]
    generate: Option<Generate>,
}

/// Tasks other than a load run.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Lay earlier runs (--json files) and the study side by side
    ///
    /// Print the study's table with one column per run per suite, and each
    /// run's ratio to the first run of the suite; --plot draws them side by
    /// side. Exit status: 0, or 2 when a file cannot be read.
    Compare(CompareArgs),
    /// Merge the --json files of a run's shards (--shard I/N) into one report
    ///
    /// Check that the files are every shard of one run (the same suites, seed, scale and
    /// iterations, each shard once), then print the study's table of the whole run: totals
    /// summed, percentiles from the shards' histograms added together, throughput over the
    /// union of the shards' windows. --json writes the merged document, which `aesload
    /// compare` reads like any run. Exit status: 0, or 2 when the files cannot be merged.
    Merge(MergeArgs),
}

/// `aesload merge`'s arguments.
#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// The shards' aesload --json files, every shard of one run once, in any order
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write the merged run as JSON (the --json document, its shard null)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `aesload merge`: the merged table on stdout, the document on request.
fn run_merge(args: &MergeArgs) -> Result<()> {
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
    let summaries: Vec<Summary> = merged
        .suites
        .iter()
        .map(|suite| merge::summary_of(&suite.summary))
        .collect();
    let columns: Vec<(&str, &Summary)> = merged
        .suites
        .iter()
        .zip(&summaries)
        .map(|(suite, summary)| (suite.name.as_str(), summary))
        .collect();
    outln!();
    out!("{}", study_table(&columns));
    if merged.parameters.servers.len() > 1 {
        for suite in &merged.suites {
            let (servers, per_server): (Vec<String>, Vec<Summary>) = suite
                .per_server
                .iter()
                .map(|server| (server.server.clone(), merge::summary_of(&server.summary)))
                .unzip();
            outln!("\n{} per server:", suite.name);
            out!("{}", server_table(&servers, &per_server));
        }
    }
    if let Some(output) = &output {
        write_file(output, merged.to_json()?.as_bytes())?;
        if !output.is_stdout() {
            outln!("json: {}", output.path().display());
        }
    }
    Ok(())
}

/// `aesload compare`'s arguments.
#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// aesload --json files; baseline files such as docs/study-baseline.json (every run in
    /// them), or BASELINE#RUN for one of its runs. The first file's run is the reference of
    /// the ratios
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Only these suites, comma-separated [default: every suite of any file]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    suite: Vec<String>,
    /// Draw the runs side by side as SVG (throughput, duration, queue and processing time)
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// `aesload compare`: the table on stdout, the plot on request.
fn run_compare(args: &CompareArgs) -> Result<()> {
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
        write_file(output, compare_plot::render(&runs).as_bytes())?;
        if !output.is_stdout() {
            outln!("plot: {}", output.path().display());
        }
    }
    Ok(())
}

/// A count that must be at least 1 (`--clients`, `--chunk`, ...).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(count) => Ok(count),
        Err(err) => Err(err.to_string()),
    }
}

/// A finite number above 0 (`--scale`, `--rate`).
fn positive_number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
        Ok(_) => Err("must be a number above 0".to_owned()),
        Err(err) => Err(err.to_string()),
    }
}

/// The suites named by `--suite`.
#[derive(Debug, Clone, PartialEq)]
struct Suites(Vec<Suite>);

fn parse_suites(text: &str) -> Result<Suites, SuiteError> {
    Suite::parse_list(text).map(Suites)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(kind) = args.generate {
        return match generate(kind, Args::command(), &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("aesload: cannot write to stdout: {err}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Compare(compare)) = &args.command {
        return match run_compare(compare) {
            Ok(()) => stdout_status(ExitCode::SUCCESS),
            Err(err) => {
                eprintln!("aesload compare: {}", error_line(err.as_ref()));
                ExitCode::from(2)
            }
        };
    }
    if let Some(Command::Merge(merge)) = &args.command {
        return match run_merge(merge) {
            Ok(()) => stdout_status(ExitCode::SUCCESS),
            Err(err) => {
                eprintln!("aesload merge: {}", error_line(err.as_ref()));
                ExitCode::from(2)
            }
        };
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
    match runtime.block_on(run(args)) {
        Ok(RunEnd::Verified) => stdout_status(ExitCode::SUCCESS),
        Ok(RunEnd::Failed) => ExitCode::FAILURE,
        Ok(RunEnd::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Err(err) => {
            eprintln!("aesload: {}", error_line(err.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// How a load run ended.
enum RunEnd {
    /// Every transfer verified.
    Verified,
    /// Some transfer failed.
    Failed,
    /// SIGINT or SIGTERM stopped it (its report was still written).
    Interrupted,
}

/// Exit status after an interrupt (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// How long running transfers may go on after the first SIGINT/SIGTERM
/// before they are cancelled.
const INTERRUPT_GRACE: Duration = Duration::from_secs(3);

/// Waits for SIGINT/SIGTERM: the first stops the run (no new clients;
/// running transfers get [`INTERRUPT_GRACE`], then are cancelled), the
/// second exits at once.
async fn watch_signals(interrupt: Arc<Interrupt>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("cannot catch SIGINT/SIGTERM: an interrupt ends aesload without a report");
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!(
        "\naesload: interrupted: no new clients; running transfers have {} s to finish (interrupt again to quit at once)",
        INTERRUPT_GRACE.as_secs()
    );
    interrupt.stop();
    let again = tokio::select! {
        _ = int.recv() => true,
        _ = term.recv() => true,
        () = tokio::time::sleep(INTERRUPT_GRACE) => false,
    };
    if !again {
        eprintln!("aesload: grace period over: cancelling the running transfers");
        interrupt.cancel();
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    eprintln!("\naesload: interrupted again: exiting without a report");
    std::process::exit(i32::from(EXIT_INTERRUPTED));
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

/// The `--json`, `--csv` and `--plot` outputs, checked before the run.
struct Outputs {
    json: Option<OutputPath>,
    csv: Option<OutputPath>,
    plot: Option<OutputPath>,
}

impl Outputs {
    /// Checks every output path (see [`OutputPath::check`]); at most one
    /// may be `-`, and then the report goes to stderr.
    fn check(args: &Args) -> Result<Outputs> {
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

/// The plans to run, by name, from the arguments.
fn plans(
    args: &Args,
    password: Password,
    token: Option<AuthToken>,
) -> Result<Vec<(String, LoadPlan)>> {
    let options = SuiteOptions {
        scale: args.scale,
        seed: args.seed,
        iterations: args.iterations,
        key_derivation: args.key_derivation,
        password,
        token,
        tls: args.tls.settings()?,
        idle_timeout: args.timeout,
        clients: args.clients,
        chunk: args.chunk,
        sizes: match (&args.size, &args.sizes) {
            (Some(size), _) => Some(SizeDist::fixed(*size)),
            (None, sizes) => sizes.clone(),
        },
        rate: args.rate,
        duration: args.duration,
    };
    let plans: Vec<(String, LoadPlan)> = match &args.suite {
        Some(Suites(suites)) => suites
            .iter()
            .map(|suite| (suite.name().to_owned(), suite.plan(&options)))
            .collect(),
        None => vec![("custom".to_owned(), custom_plan(&options))],
    };
    // One identity for the whole run (age): the recipient of every job.
    let format = match args.format.as_deref() {
        Some("age") => LoadFormat::fresh_age().context("cannot make an age identity")?,
        _ => LoadFormat::Openssl,
    };
    let plans: Vec<(String, LoadPlan)> = plans
        .into_iter()
        .map(|(name, mut plan)| {
            plan.shard = args.shard.unwrap_or(Shard::WHOLE);
            plan.bind = args.bind;
            plan.format = format.clone();
            (name, plan)
        })
        .collect();
    let open_loop = plans
        .iter()
        .any(|(_, plan)| matches!(plan.arrival, Arrival::Rate(_)));
    if args.duration.is_some() && !open_loop {
        bail!("--duration applies to open-loop runs: give --rate, or --suite drowning");
    }
    Ok(plans)
}

/// Warns on stderr, once per server, when a server is not on this host and
/// the jobs (password or key and IV, and the files) would cross the network
/// without TLS. A name that does not resolve is left to the run's errors.
async fn warn_cleartext(servers: &[String]) {
    for server in servers {
        let first = tokio::net::lookup_host(server.as_str())
            .await
            .ok()
            .and_then(|mut addrs| addrs.next());
        if let Some(warning) = first.and_then(aesd_client::connection::cleartext_warning) {
            eprintln!("aesload: {server}: {warning}");
        }
    }
}

async fn run(args: Args) -> Result<RunEnd> {
    let outputs = Outputs::check(&args)?;
    // A stale --start-at is refused before anything starts.
    let start_at = match (&args.start_at, args.start_in) {
        (Some(start), _) => {
            start.wait_from(std::time::SystemTime::now())?;
            Some(start.time)
        }
        (None, Some(delay)) => Some(std::time::SystemTime::now() + delay),
        (None, None) => None,
    };
    // A --bind address this host does not have would fail every transfer.
    if let Some(bind) = args.bind {
        std::net::TcpListener::bind((bind, 0)).with_context(|| {
            format!("cannot connect from --bind {bind}: not usable on this host")
        })?;
    }
    let password = match (&args.pass, &args.password_file) {
        (Some(source), _) => source.read("aesload")?,
        (None, Some(path)) => PassSource::File(path.clone()).read("aesload")?,
        (None, None) => Password::new(DEFAULT_LOAD_PASSWORD.to_vec()),
    };
    let token = match &args.token_file {
        Some(path) => Some(read_token_file(path, "aesload")?),
        None => None,
    };
    let plans = plans(&args, password, token)?;

    let embedded = match args.server.is_empty() {
        true => Some(start_embedded(&args, &plans).await?),
        false => None,
    };
    let servers = match &embedded {
        Some(server) => vec![server.addr().to_string()],
        None => args.server.clone(),
    };
    for (name, plan) in &plans {
        outln!("aesload: {name}: {}", describe(plan));
        if !plan.shard.is_whole() {
            outln!(
                "shard {}: {} of its clients, {:.2} MB",
                plan.shard,
                plan.own_clients().count(),
                plan.own_bytes() as f64 / 1e6
            );
        }
    }
    if let Some(bind) = args.bind {
        outln!("connecting from {bind}");
    }
    outln!(
        "settings: seed {}, scale {}, PBKDF2 {} iterations, warm-up {}",
        args.seed,
        args.scale,
        args.iterations,
        args.warmup
    );
    match &embedded {
        Some(server) => {
            let state = server.state();
            let config = state.config();
            outln!(
                "server: embedded aesd on {} ({} workers, {} active slots, queue {}, chunks of {} bytes)",
                server.addr(),
                config.workers,
                config.max_active,
                config.max_queue,
                config.chunk_size
            );
        }
        None if servers.len() == 1 => outln!("server: {}", servers[0]),
        None => outln!("servers (round-robin): {}", servers.join(", ")),
    }
    if embedded.is_none() && args.tls.settings()?.is_none() {
        warn_cleartext(&servers).await;
    }

    if let Some(start_at) = start_at {
        let wait = start_at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        if !args.quiet {
            eprintln!(
                "aesload: starting in {:.1} s (at {:.3}, Unix time)",
                wait.as_secs_f64(),
                aesd_load::start::unix_seconds(start_at)
            );
        }
        tokio::time::sleep(wait).await;
    }
    let (interrupt, stop) = Interrupt::new();
    let interrupt = Arc::new(interrupt);
    tokio::spawn(watch_signals(Arc::clone(&interrupt)));
    let started = Instant::now();
    let started_at = std::time::SystemTime::now();
    let mode = match std::io::stderr().is_terminal() {
        true => DisplayMode::Terminal,
        false => DisplayMode::Lines,
    };
    let (stop_sampling, sampling_stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = args.metrics_url.clone().map(|url| {
        tokio::spawn(server_metrics::sample_until(url, started, async {
            let _ = sampling_stopped.await;
        }))
    });
    let mut runs = Vec::with_capacity(plans.len());
    for (name, plan) in plans {
        if interrupt.stopped() {
            break;
        }
        let progress = Arc::new(Progress::default());
        let display =
            (!args.quiet).then(|| tokio::spawn(display(Arc::clone(&progress), name.clone(), mode)));
        let run = run_load_until(&servers, &plan, progress, stop.clone()).await;
        if let Some(display) = display {
            display.abort();
            let _ = display.await;
            finish_display(mode);
            let summary = Summary::of(&run, args.warmup);
            eprintln!(
                "aesload: {name} done: {} of {} verified in {:.2} s",
                summary.verified,
                summary.transfers,
                run.duration.as_secs_f64()
            );
        }
        runs.push(SuiteRun { name, plan, run });
    }
    let _ = stop_sampling.send(());
    let server_samples = match sampler {
        Some(sampler) => {
            let (samples, failures) = sampler.await.unwrap_or_default();
            describe_server_samples(&samples, failures);
            samples
        }
        None => Vec::new(),
    };
    if let Some(server) = embedded {
        server.shutdown().await;
    }
    let parameters = RunParameters {
        servers,
        embedded: args.server.is_empty(),
        seed: args.seed,
        scale: args.scale,
        iterations: args.iterations,
        format: if args.format.as_deref() == Some("age") {
            "age"
        } else {
            "openssl"
        },
        warmup: args.warmup,
        shard: args.shard.unwrap_or(Shard::WHOLE),
        bind: args.bind,
        started_at,
    };
    let interrupted = interrupt.stopped();
    report(&runs, &parameters, interrupted);
    write_outputs(&outputs, &runs, &parameters, server_samples, interrupted)?;
    if !args.quiet {
        eprintln!(
            "aesload: finished in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let verified = runs.iter().all(|suite| {
        suite
            .run
            .transfers
            .iter()
            .all(|transfer| transfer.verified())
    });
    Ok(match (interrupted, verified) {
        (true, _) => RunEnd::Interrupted,
        (false, true) => RunEnd::Verified,
        (false, false) => RunEnd::Failed,
    })
}

/// The study's table on stdout (one column per suite), per-server rows
/// when there are several servers, failed transfers on stderr.
fn report(runs: &[SuiteRun], parameters: &RunParameters, interrupted: bool) {
    let summaries: Vec<Summary> = runs
        .iter()
        .map(|suite| {
            let summary = Summary::of(&suite.run, parameters.warmup);
            match interrupted {
                true => summary.with_planned(suite.plan.own_clients().count()),
                false => summary,
            }
        })
        .collect();
    let columns: Vec<(&str, &Summary)> = runs
        .iter()
        .zip(&summaries)
        .map(|(suite, summary)| (suite.name.as_str(), summary))
        .collect();
    outln!();
    out!("{}", study_table(&columns));
    if parameters.servers.len() > 1 {
        for suite in runs {
            let per_server =
                Summary::per_server(&suite.run, parameters.warmup, parameters.servers.len());
            outln!("\n{} per server:", suite.name);
            out!("{}", server_table(&parameters.servers, &per_server));
        }
    }
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
fn describe_server_samples(samples: &[ServerSample], failures: usize) {
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

fn write_outputs(
    outputs: &Outputs,
    runs: &[SuiteRun],
    parameters: &RunParameters,
    server_samples: Vec<ServerSample>,
    interrupted: bool,
) -> Result<()> {
    let document = json::Document::new(parameters, runs)
        .with_server_metrics(server_samples)
        .interrupted(interrupted);
    let written = |label: &str, output: &OutputPath| {
        if !output.is_stdout() {
            outln!("{label}: {}", output.path().display());
        }
    };
    if let Some(output) = &outputs.json {
        write_file(output, document.to_json()?.as_bytes())?;
        written("json", output);
    }
    if let Some(output) = &outputs.csv {
        write_file(output, csv::to_csv(&document).as_bytes())?;
        written("csv", output);
    }
    if let Some(output) = &outputs.plot {
        write_file(
            output,
            plot::render(
                runs,
                parameters.warmup,
                &document.server_metrics,
                interrupted,
            )
            .as_bytes(),
        )?;
        written("plot", output);
    }
    Ok(())
}

/// One line saying what a plan runs.
fn describe(plan: &LoadPlan) -> String {
    let arrival = match plan.arrival {
        Arrival::Batches(_) if plan.clients <= 1 => String::new(),
        Arrival::Batches(batch) if batch >= plan.clients => " together".to_owned(),
        Arrival::Batches(batch) => format!(" in batches of {batch}"),
        Arrival::Rate(rate) => format!(
            " arriving at {rate}/s for {:.1} s (open loop, offering {:.2} MB/s)",
            plan.clients as f64 / rate,
            rate * plan.sizes.mean() / 1e6
        ),
    };
    let sizes: Vec<String> = match plan.sizes.sizes() {
        [size] => vec![human_bytes(*size)],
        sizes => sizes
            .iter()
            .enumerate()
            .map(|(index, size)| {
                format!(
                    "{} ({:.0}%)",
                    human_bytes(*size),
                    plan.sizes.probability(index) * 100.0
                )
            })
            .collect(),
    };
    let period = match plan.size_period {
        Some(period) => format!(", the same sizes every {period} clients"),
        None => String::new(),
    };
    let clients = match plan.clients {
        1 => "1 client".to_owned(),
        count => format!("{count} clients"),
    };
    // Sizes in powers of 1024 as given (the study's "100 MB" was 100
    // MiB); the total also in MB (10^6), the table's and live line's unit.
    format!(
        "{clients}{arrival}, sizes {}{period}; {:.2} MB ({}) in total",
        sizes.join(", "),
        plan.total_bytes() as f64 / 1e6,
        human_bytes(plan.total_bytes())
    )
}

/// The embedded server's chunk size: 256 KiB (`aesload --suite large` on
/// a 2-core host: 726 MB/s against 657 with aesd's 64 KiB; 1 MiB did no
/// better than 256 KiB; docs/performance.md).
const EMBEDDED_CHUNK_SIZE: u32 = 262_144;

/// An aesd on 127.0.0.1 (ephemeral port) with room in its queue for
/// every client that may wait at once, so an embedded run never sees
/// `busy`: a whole batch, or every client of an open-loop run.
async fn start_embedded(
    args: &Args,
    plans: &[(String, LoadPlan)],
) -> Result<aesd_server::RunningServer> {
    let waiting = plans
        .iter()
        .map(|(_, plan)| match plan.arrival {
            Arrival::Batches(batch) => batch,
            Arrival::Rate(_) => plan.clients,
        })
        .max()
        .unwrap_or(0);
    let defaults =
        aesd_server::Config::resolve(ConfigLayer::default()).context("aesd's default settings")?;
    aesd_server::start_loopback(ConfigLayer {
        workers: args.workers,
        max_active: args.max_active,
        max_queue: Some(waiting.max(64)),
        // Every load client comes from 127.0.0.1: one "client" for the
        // per-client caps, which would otherwise shape the load.
        max_active_per_client: Some(1 << 20),
        max_queued_per_client: Some(1 << 20),
        min_input_rate: Some(0),
        chunk_size: Some(args.embedded_chunk_size),
        token_file: args.token_file.clone(),
        tls_cert: args.embedded_tls_cert.clone(),
        tls_key: args.embedded_tls_key.clone(),
        // Every job comes from 127.0.0.1: no PBKDF2 budget per client.
        kdf_budget: Some(0),
        min_iter: Some(1),
        max_iter: Some(args.iterations.max(defaults.max_iter)),
        ..ConfigLayer::default()
    })
    .await
    .context("starting the embedded server")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["aesload", "--sizes", "2M,5M", "--clients", "3"])
            .expect("parses");
        assert_eq!(
            args.sizes.map(|sizes| sizes.sizes().to_vec()),
            Some(vec![2 << 20, 5 << 20])
        );
        assert!(Args::try_parse_from(["aesload", "--size", "1M", "--sizes", "2M"]).is_err());
        let args = Args::try_parse_from([
            "aesload", "--suite", "all", "--server", "a:1,b:2", "--warmup", "5s",
        ])
        .expect("parses");
        assert_eq!(args.suite, Some(Suites(Suite::ALL.to_vec())));
        assert_eq!(args.server, vec!["a:1", "b:2"]);
        assert_eq!(args.warmup, Warmup::Time(Duration::from_secs(5)));
        assert!(Args::try_parse_from(["aesload", "--suite", "basic9"]).is_err());
        let args = Args::try_parse_from([
            "aesload",
            "compare",
            "a.json",
            "b.json",
            "--suite",
            "basic2,large",
            "--plot",
            "c.svg",
        ])
        .expect("compare parses");
        let Some(Command::Compare(compare)) = args.command else {
            panic!("not compare: {args:?}");
        };
        assert_eq!(compare.files, ["a.json", "b.json"]);
        assert_eq!(compare.suite, ["basic2", "large"]);
        assert!(
            Args::try_parse_from(["aesload", "compare"]).is_err(),
            "files are required"
        );
        assert!(Args::try_parse_from(["aesload", "--clients", "2", "compare", "a.json"]).is_err());
    }

    #[test]
    fn nonsense_settings_are_refused() {
        let plans_of = |argv: &[&str]| {
            let args = Args::try_parse_from(argv).expect("parses");
            plans(&args, Password::new(b"pw".to_vec()), None)
        };
        assert!(plans_of(&["aesload", "--duration", "5s"]).is_err());
        for refused in [
            &["aesload", "--scale", "0"][..],
            &["aesload", "--rate=-1"],
            &["aesload", "--rate", "NaN"],
            &["aesload", "--clients", "0"],
            &["aesload", "--chunk", "0"],
            &["aesload", "--iter", "0"],
            &["aesload", "--workers", "0"],
            &["aesload", "--max-active", "0"],
            &["aesload", "--embedded-chunk-size", "100"],
            &["aesload", "--server", "127.0.0.1"],
            &["aesload", "--server", "a:1,b"],
        ] {
            let err = Args::try_parse_from(refused).expect_err("refused at parse time");
            assert_eq!(err.exit_code(), 2, "{refused:?}");
        }
        let all = plans_of(&["aesload", "--suite", "all", "--scale", "0.01"]).expect("valid");
        assert_eq!(all.len(), 6);
        let custom = plans_of(&["aesload", "--rate", "4", "--duration", "2s"]).expect("valid");
        assert_eq!(custom[0].1.clients, 8);
    }

    /// The docs/aesload.md flag table (the first table after `heading`): each
    /// row's long flags (every `--name` in its first cell) and its
    /// default cell.
    fn readme_flags(heading: &str) -> Vec<(Vec<String>, String)> {
        doc_flags("docs/aesload.md", heading)
    }

    /// [`readme_flags`] of another file (from the workspace root).
    fn doc_flags(file: &str, heading: &str) -> Vec<(Vec<String>, String)> {
        let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(&path).expect(file);
        let section = readme
            .split_once(heading)
            .unwrap_or_else(|| panic!("{file} has no {heading:?}"))
            .1;
        section
            .lines()
            .skip_while(|line| !line.starts_with("| flag"))
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let line = line.replace("\\|", "/");
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let flags = cells[1]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .filter(|word| word.starts_with("--"))
                    .map(|word| word.trim_start_matches('-').to_owned())
                    .collect();
                (flags, cells[2].to_owned())
            })
            .collect()
    }

    /// Where the sharding flags and `aesload merge` are documented.
    const SHARDING_DOC: &str = "docs/sharded-load.md";

    /// The docs/aesload.md table and `--help` list the same flags, and a
    /// default `--help` shows is in its default cell.
    fn assert_readme_matches(command: &clap::Command, heading: &str) {
        assert_documented(command, readme_flags(heading), heading);
    }

    /// `command`'s flags are those of the `documented` table rows.
    fn assert_documented(
        command: &clap::Command,
        readme: Vec<(Vec<String>, String)>,
        heading: &str,
    ) {
        let documented: std::collections::BTreeSet<&str> = readme
            .iter()
            .flat_map(|(flags, _)| flags.iter().map(String::as_str))
            .collect();
        let in_help: std::collections::BTreeSet<&str> = command
            .get_arguments()
            .filter(|arg| !arg.is_hide_set())
            .filter_map(|arg| arg.get_long())
            .filter(|long| !matches!(*long, "help" | "version"))
            .collect();
        assert_eq!(
            documented, in_help,
            "docs/aesload.md {heading:?} against --help"
        );
        for arg in command.get_arguments() {
            let (Some(long), [default, ..]) = (arg.get_long(), arg.get_default_values()) else {
                continue;
            };
            let default = default.to_string_lossy();
            let (_, cell) = readme
                .iter()
                .find(|(flags, _)| flags.iter().any(|flag| flag == long))
                .unwrap_or_else(|| panic!("--{long} is not in docs/aesload.md"));
            assert!(
                cell.contains(default.as_ref()),
                "--{long}: --help's default {default:?}, the docs' {cell:?}"
            );
        }
    }

    #[test]
    fn the_readme_tables_match_help() {
        let command = Args::command();
        // The sharding flags are documented with the rest of sharding.
        let mut documented = readme_flags("# aesload: ");
        documented.extend(doc_flags(SHARDING_DOC, "### aesload sharding flags\n"));
        assert_documented(&command, documented, "### aesload");
        let merge = command.find_subcommand("merge").expect("merge").clone();
        assert_documented(
            &merge,
            doc_flags(SHARDING_DOC, "### aesload merge\n"),
            "### aesload merge",
        );
        let compare = command.find_subcommand("compare").expect("compare").clone();
        assert_readme_matches(&compare, "## aesload compare\n");
    }

    #[test]
    fn short_help_fits_30_lines_and_long_help_has_everything() {
        let short = Args::command().render_help().to_string();
        assert!(
            short.lines().count() <= 30,
            "-h is {} lines:\n{short}",
            short.lines().count()
        );
        let long = Args::command().render_long_help().to_string();
        for flag in [
            "--metrics-url",
            "--embedded-chunk-size",
            "--generate",
            "--seed",
            "--shard",
            "--start-at",
            "--start-in",
            "--bind",
        ] {
            let listed = short
                .lines()
                .any(|line| line.trim_start().starts_with(flag));
            assert!(!listed, "{flag} in -h");
            assert!(long.contains(flag), "{flag} missing from --help");
        }
    }
}
