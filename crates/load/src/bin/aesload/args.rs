//! The command line: [`Args`], its subcommands' arguments and the
//! value parsers of its flags.

use std::path::PathBuf;
use std::time::Duration;

use aesd_cli::generate::Generate;
use aesd_cli::key_args::KeyArgs;
use aesd_cli::pass_source::PassSource;
use aesd_client::DEFAULT_ITERATIONS;
use aesd_client::KeyDerivation;
use aesd_client::connection::parse_server_address;
use aesd_client::tls::TlsArgs;
use aesd_load::distribution::SizeDist;
use aesd_load::durations::{Warmup, parse_duration};
use aesd_load::server_metrics::MetricsUrl;
use aesd_load::shard::Shard;
use aesd_load::sizes::parse_size;
use aesd_load::start::StartAt;
use aesd_load::suites::{DEFAULT_SEED, Suite, SuiteError};
use clap::Parser;

use crate::embedded::EMBEDDED_CHUNK_SIZE;

/// Load generator for aesd: the study's suites or N clients in batches
/// of C, every result verified
#[derive(Debug, Parser)]
#[command(
    name = "aesload",
    version,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    mut_arg("token_file", |arg| arg.hide_short_help(true)),
    after_help = "Exit status: 0 all verified, 1 any failed, 2 bad arguments or refused start, 130 interrupted.",
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

By name (--key NAME): every job encrypts under the key NAME of the server's keyring \
(age v1 with one aesd-key stanza) and is verified by decrypting it by name through the \
server on a second connection, at the same time, and comparing every byte; the server \
does both jobs. Against --server, --token-file (or AESD_TOKEN_FILE) names the keyring \
token, which needs update on transit/encrypt/NAME and transit/decrypt/NAME; a trial job \
on each server first refuses the run clearly when the key does not exist (unknown_key), \
the token is refused (bad_key_token, permission_denied) or the keyring is sealed (sealed). \
The embedded server gets a keyring as aesd --dev makes one: in memory, unsealed, lost at \
exit, the key NAME created (aes256-gcm96), its root token the one in --token-file if \
given, else a random one aesload uses.

Exit status: 0 when every transfer verified; 1 when any failed (or stdout could not be \
written); 2 on bad arguments, or when the run cannot start (an output, an address, or a \
by-name trial job the server refuses); 130 when interrupted.

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
  aesload --key payroll --suite basic2 --scale 0.1
  aesload --server 10.0.0.5:7878 --key payroll --token-file tok --suite all --scale 0.05
  aesload --server 10.0.0.5:7878 --suite large --shard 0/3 --start-at 2026-11-25T18:00:00Z --json s0.json
  aesload merge s0.json s1.json s2.json --json run.json
  aesload compare docs/study-baseline.json#study-dual-core before.json after.json --plot cmp.svg"
)]
pub(crate) struct Args {
    /// Another task instead of a load run
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Servers to load, comma-separated [default: an embedded one]
    #[arg(
        long_help = "Servers to load, comma-separated; clients go round-robin [default: an embedded server on 127.0.0.1]"
    )]
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',', value_parser = parse_server_address)]
    pub(crate) server: Vec<String>,
    /// Study suite(s): basic1..3, large, thousand, drowning, a list, all
    #[arg(
        long_help = "Study suite(s): basic1, basic2, basic3, large, thousand, drowning, a comma list, or all"
    )]
    #[arg(long, value_name = "NAME", value_parser = parse_suites)]
    pub(crate) suite: Option<Suites>,
    /// Number of clients [default: 1, or the suite's]
    #[arg(
        long_help = "Number of clients (one transfer each; at least 1) [default: 1, or the suite's]"
    )]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub(crate) clients: Option<usize>,
    /// Clients started together [default: all, or the suite's]
    #[arg(
        long_help = "Clients started together; the next batch starts when this one is done (at least 1) \
                       [default: all at once, or the suite's]"
    )]
    #[arg(long, value_name = "C", value_parser = at_least_one)]
    pub(crate) chunk: Option<usize>,
    /// Size of every file [default: 10M, or the suite's]
    #[arg(long, value_name = "SIZE", conflicts_with = "sizes", value_parser = parse_size, hide_short_help = true)]
    pub(crate) size: Option<u64>,
    /// File sizes drawn per client: 2M,5M or 2M:5,5M:3 [default: 10M]
    #[arg(
        long_help = "Sizes to draw from per client (seeded), comma-separated, each optionally SIZE:WEIGHT \
                       [default: 10M, or the suite's]"
    )]
    #[arg(long, value_name = "LIST")]
    pub(crate) sizes: Option<SizeDist>,
    /// Multiply every file size by F (e.g. 0.05)
    #[arg(
        long_help = "Multiply every file size by F (e.g. 0.05 to try the suites on a small machine)"
    )]
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = positive_number)]
    pub(crate) scale: f64,
    /// Open loop: new clients per second, whatever completes [drowning: 20]
    #[arg(long, value_name = "R", value_parser = positive_number)]
    pub(crate) rate: Option<f64>,
    /// Open loop: how long clients keep arriving (clients = rate × duration) [drowning: 10s]
    #[arg(long, value_name = "TIME", value_parser = parse_duration, hide_short_help = true)]
    pub(crate) duration: Option<Duration>,
    /// Leave the start out of the results: a time (5s) or a number of transfers (10)
    #[arg(
        long,
        value_name = "TIME|N",
        default_value = "0",
        hide_short_help = true
    )]
    pub(crate) warmup: Warmup,
    /// Seed for the size draw and the data (the default makes basic2 draw the study's 84.93 MB)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEED, hide_short_help = true)]
    pub(crate) seed: u64,
    /// Password: pass:PW, env:VAR, file:PATH, fd:N or stdin
    #[arg(
        long_help = "The jobs' password, as openssl -pass: pass:PASSWORD, env:VAR, file:PATH, fd:N or stdin \
                       [default: a fixed test password]"
    )]
    #[arg(long, value_name = "SOURCE", conflicts_with_all = ["password_file", "key"])]
    pub(crate) pass: Option<PassSource>,
    /// File whose first line is the password: the same as --pass file:FILE
    #[arg(
        long,
        value_name = "FILE",
        hide_short_help = true,
        conflicts_with = "key"
    )]
    pub(crate) password_file: Option<PathBuf>,
    /// --key NAME (by name) and --token-file FILE (the access token, or the keyring token)
    #[command(flatten)]
    pub(crate) keys: KeyArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    /// The embedded server speaks TLS with this PEM certificate chain (needs
    /// --embedded-tls-key; connect with --tls-ca naming the certificate or its CA)
    #[arg(
        long,
        value_name = "FILE",
        requires = "embedded_tls_key",
        hide_short_help = true
    )]
    pub(crate) embedded_tls_cert: Option<PathBuf>,
    /// The private key of --embedded-tls-cert
    #[arg(
        long,
        value_name = "FILE",
        requires = "embedded_tls_cert",
        hide_short_help = true
    )]
    pub(crate) embedded_tls_key: Option<PathBuf>,
    /// Fail a transfer when its server sends nothing (or takes no input) for this many seconds
    /// during the job, or when connecting or the welcome takes longer (a peer that sends no
    /// welcome is not an aesd); waiting in the queue after a `queued` answer is not limited
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = aesd_client::connection::parse_idle_timeout, hide_short_help = true)]
    pub(crate) timeout: std::time::Duration,
    /// PBKDF2 iterations per job (at least 1)
    #[arg(long_help = "PBKDF2 iterations per job (openssl -iter; at least 1)")]
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) iterations: u32,
    /// Where each job's key is derived from the password: `client` (the password never leaves
    /// aesload; the server does no PBKDF2), `server` (key source 1: the password is sent), or
    /// `auto` (client when the server accepts it)
    #[arg(
        long,
        value_name = "WHERE",
        default_value = "auto",
        hide_short_help = true
    )]
    pub(crate) key_derivation: KeyDerivation,
    /// The jobs' file format: openssl or age [default: openssl]
    #[arg(
        long_help = "The jobs' file format: openssl (openssl enc -aes-256-cbc -pbkdf2, with --pass) or age \
                       (age v1 to an X25519 identity aesload makes for the run; every result is decrypted with \
                       it by aesload's own verifier: the header through aesd-age, the payload with RustCrypto's \
                       ChaCha20-Poly1305 directly) [default: openssl]"
    )]
    #[arg(long, value_name = "FORMAT", value_parser = ["openssl", "age"], hide_short_help = true,
          conflicts_with = "key")]
    pub(crate) format: Option<String>,
    /// Embedded server only: worker threads [default: one per core]
    #[arg(long, value_name = "N", value_parser = at_least_one, hide_short_help = true)]
    pub(crate) workers: Option<usize>,
    /// Embedded server only: jobs processed at once [default: 2 × workers]
    #[arg(long, value_name = "N", value_parser = at_least_one, hide_short_help = true)]
    pub(crate) max_active: Option<usize>,
    /// Embedded server only: its largest data frame, and so the size of the chunks aesload
    /// sends and the server encrypts (4096..1048576). Larger than aesd's default (65536, sized
    /// for the boards' memory): on a host, fewer frames mean fewer wake-ups per byte
    #[arg(long, value_name = "BYTES", default_value_t = EMBEDDED_CHUNK_SIZE,
          value_parser = clap::value_parser!(u32).range(4096..=1_048_576), hide_short_help = true)]
    pub(crate) embedded_chunk_size: u32,
    /// Write every parameter, summary and transfer as JSON
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write one row per transfer as CSV
    #[arg(long, value_name = "FILE")]
    pub(crate) csv: Option<PathBuf>,
    /// Draw per-transfer times and throughput over time as SVG
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Sample a server's Prometheus endpoint during the run
    #[arg(
        long_help = "Sample this server's Prometheus endpoint (aesd --metrics-listen) once a second during the \
                       run: its CPU, memory, active and queued jobs and temperature go into --json and --plot"
    )]
    #[arg(long, value_name = "URL", hide_short_help = true)]
    pub(crate) metrics_url: Option<MetricsUrl>,
    /// Run only part I of N of the clients (client j is shard j mod N's), for several processes
    /// or machines; `aesload merge` joins their --json files
    #[arg(long, value_name = "I/N", hide_short_help = true)]
    pub(crate) shard: Option<Shard>,
    /// Start at this wall-clock time (RFC 3339, e.g. 2026-11-25T18:00:00Z, or Unix seconds),
    /// so shards start together; a time more than 10 s past is refused
    #[arg(
        long,
        value_name = "TIME",
        conflicts_with = "start_in",
        hide_short_help = true
    )]
    pub(crate) start_at: Option<StartAt>,
    /// Start after this long (e.g. 30s)
    #[arg(long, value_name = "TIME", value_parser = parse_duration, hide_short_help = true)]
    pub(crate) start_in: Option<Duration>,
    /// Connect from this local address (e.g. 127.0.0.2): aesd's per-client limits count
    /// clients by address
    #[arg(long, value_name = "ADDR", hide_short_help = true)]
    pub(crate) bind: Option<std::net::IpAddr>,
    /// No progress display on stderr
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// Print a man page or a shell completion script (from these definitions) and exit
    #[arg(long, value_name = "KIND", exclusive = true, hide_short_help = true)]
    pub(crate) generate: Option<Generate>,
}

/// Tasks other than a load run.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
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
pub(crate) struct MergeArgs {
    /// The shards' aesload --json files, every shard of one run once, in any order
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// Write the merged run as JSON (the --json document, its shard null)
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
}

/// `aesload compare`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// aesload --json files; baseline files such as docs/study-baseline.json (every run in
    /// them), or BASELINE#RUN for one of its runs. The first file's run is the reference of
    /// the ratios
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<String>,
    /// Only these suites, comma-separated [default: every suite of any file]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(crate) suite: Vec<String>,
    /// Draw the runs side by side as SVG (throughput, duration, queue and processing time)
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,
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
pub(crate) struct Suites(pub(crate) Vec<Suite>);

/// `--suite`: one suite, a comma list, or `all`.
fn parse_suites(text: &str) -> Result<Suites, SuiteError> {
    Suite::parse_list(text).map(Suites)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

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

    /// The docs/aesload.md flag table (the first table after `heading`): each
    /// row's long flags (every `--name` in its first cell) and its
    /// default cell.
    fn readme_flags(heading: &str) -> Vec<(Vec<String>, String)> {
        doc_flags("docs/aesload.md", heading)
    }

    /// [`readme_flags`] of another file (from the workspace root).
    fn doc_flags(file: &str, heading: &str) -> Vec<(Vec<String>, String)> {
        aesd_testkit::doc_table_rows(file, heading, "| flag")
            .into_iter()
            .map(|cells| {
                let flags = cells[0]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .filter(|word| word.starts_with("--"))
                    .map(|word| word.trim_start_matches('-').to_owned())
                    .collect();
                (flags, cells[1].clone())
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
        let long_only = [
            "--metrics-url",
            "--embedded-chunk-size",
            "--generate",
            "--seed",
            "--shard",
            "--start-at",
            "--start-in",
            "--bind",
        ];
        let problems = aesd_cli::help::summary_problems(Args::command(), &long_only);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
