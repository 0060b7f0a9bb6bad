//! `aescrypt`: encrypt or decrypt one file through an aesd server.
//!
//! The output is the `openssl enc -aes-256-cbc -salt -pbkdf2` format, so
//! `openssl enc -d -aes-256-cbc -pbkdf2 -pass file:FILE` reads what
//! `aescrypt encrypt` writes, and `aescrypt decrypt` reads what openssl
//! writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use aesd_client::ConnectOptions;
use aesd_client::atomic_output::TempOutput;
use aesd_client::connection::parse_idle_timeout;
use aesd_client::password::{read_password_file, read_token_file};
use aesd_client::tls::TlsArgs;
use aesd_client::{Client, DEFAULT_ITERATIONS, JobSpec, KeyDerivation};
use aesd_proto::Operation;
use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use tokio::io::AsyncRead;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Plaintext in, openssl-compatible ciphertext out.
    Encrypt,
    /// openssl-compatible ciphertext in, plaintext out.
    Decrypt,
}

/// Encrypt or decrypt a file through an aesd server (AES-256-CBC,
/// byte-compatible with `openssl enc -aes-256-cbc -salt -pbkdf2`).
#[derive(Debug, Parser)]
#[command(
    name = "aescrypt",
    version,
    after_help = "\
Exit status: 0 on success; 1 with a one-line reason on any error (server \
unreachable, wrong password or corrupted input, bad password file, missing or \
wrong access token...).

Output to a file is written to a new temporary file beside it (a random \
name, created exclusively, mode 600), synced to disk and renamed over OUT \
only when the job succeeded and the server's byte counts match this \
client's; a failed job removes it and leaves OUT untouched. Output to stdout (-o -) is streamed: on failure the bytes already \
written may be incomplete, and the exit status is 1.

Example:
  aescrypt encrypt --server 127.0.0.1:7878 --password-file pw.txt -i big.bin -o big.bin.enc
  openssl enc -d -aes-256-cbc -pbkdf2 -pass file:pw.txt -in big.bin.enc -out big.bin.check"
)]
struct Args {
    /// encrypt or decrypt
    #[arg(value_enum)]
    mode: Mode,
    /// Server address, HOST:PORT
    #[arg(long, value_name = "HOST:PORT", env = "AESD_SERVER")]
    server: String,
    /// File whose first line is the password (as openssl -pass file:FILE)
    #[arg(long, value_name = "FILE")]
    password_file: PathBuf,
    /// File whose first line is the server's access token (16 to 256 bytes), for a server
    /// started with --token-file [default: none]
    #[arg(long, value_name = "FILE", env = "AESD_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
    /// Input file, or - for stdin
    #[arg(short = 'i', long = "in", value_name = "IN")]
    input: PathBuf,
    /// Output file, or - for stdout
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    output: PathBuf,
    /// PBKDF2 iterations (openssl -iter); must match on decrypt
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS)]
    iterations: u32,
    /// Where the key is derived from the password: `client` (the password never leaves this
    /// machine; needs a server that accepts derived keys), `server` (the password is sent), or
    /// `auto` (client when the server accepts it)
    #[arg(long, value_name = "WHERE", default_value = "auto")]
    key_derivation: KeyDerivation,
    /// Fail when the server sends nothing (or takes no input) for this many seconds during the
    /// job; waiting in the server's queue after a `queued` answer is not limited
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_idle_timeout)]
    timeout: Duration,
    /// Print the job's figures (bytes, total/queue/processing/network time) to stderr
    #[arg(short, long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
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
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("aescrypt: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

async fn run(args: &Args) -> Result<()> {
    let password = read_password_file(&args.password_file, "aescrypt")?;
    let spec = JobSpec {
        operation: match args.mode {
            Mode::Encrypt => Operation::Encrypt,
            Mode::Decrypt => Operation::Decrypt,
        },
        password,
        iterations: args.iterations,
        key_derivation: args.key_derivation,
    };
    let mut input: Box<dyn AsyncRead + Unpin> = if is_stdio(&args.input) {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(&args.input)
                .await
                .with_context(|| format!("cannot open input {}", args.input.display()))?,
        )
    };
    if !is_stdio(&args.output) && args.output == args.input {
        bail!(
            "input and output are the same file: {}",
            args.output.display()
        );
    }
    let token = match &args.token_file {
        Some(path) => Some(read_token_file(path, "aescrypt")?),
        None => None,
    };
    let options = ConnectOptions {
        token,
        tls: args.tls.settings()?,
    };
    let mut client = Client::connect_with(&args.server, &options).await?;
    if let Some(warning) = client.cleartext_warning() {
        eprintln!("aescrypt: {warning}");
    }
    client.set_idle_timeout(args.timeout);
    let report = if is_stdio(&args.output) {
        let mut stdout = tokio::io::stdout();
        client.run_job(&spec, &mut input, &mut stdout).await?
    } else {
        write_via(&args.output, &mut client, &spec, &mut input).await?
    };
    client.close().await;
    if args.verbose {
        eprintln!(
            "aescrypt: {} bytes in, {} bytes out; total {:.6} s = queue {:.6} s + processing {:.6} s + network {:.6} s",
            report.bytes_sent,
            report.bytes_received,
            report.total.as_secs_f64(),
            report.queue.as_secs_f64(),
            report.processing.as_secs_f64(),
            report.network.as_secs_f64()
        );
    }
    Ok(())
}

/// Runs the job into a temporary file beside `output` and renames it over
/// `output` once the job succeeded; on any failure the temporary file is
/// removed (by [`TempOutput`]'s drop) and `output` is untouched.
async fn write_via(
    output: &Path,
    client: &mut Client,
    spec: &JobSpec,
    input: &mut (dyn AsyncRead + Unpin),
) -> Result<aesd_client::JobReport> {
    let (temp, file) = TempOutput::create(output)
        .with_context(|| format!("cannot create a temporary file beside {}", output.display()))?;
    let mut writer = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
    let report = client.run_job(spec, &mut &mut *input, &mut writer).await?;
    let file = writer.into_inner().into_std().await;
    temp.commit(file)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Args::command().debug_assert();
        let args = Args::try_parse_from([
            "aescrypt",
            "encrypt",
            "--server",
            "h:1",
            "--password-file",
            "p",
            "-i",
            "-",
            "-o",
            "-",
        ])
        .expect("parses");
        assert_eq!(args.iterations, DEFAULT_ITERATIONS);
        assert_eq!(args.timeout, aesd_client::connection::DEFAULT_IDLE_TIMEOUT);
    }
}
