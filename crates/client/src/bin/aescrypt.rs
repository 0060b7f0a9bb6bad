//! `aescrypt`: encrypt or decrypt one file through an aesd server.
//!
//! The default output is the `openssl enc -aes-256-cbc -salt -pbkdf2`
//! format, so `openssl enc -d -aes-256-cbc -pbkdf2 -pass file:FILE` reads
//! what `aescrypt encrypt` writes, and `aescrypt decrypt` reads what openssl
//! writes. `--format age` (or `-r`) writes age v1, which `age -d` reads; an
//! age file decrypts with `--identity`, the file key unwrapped here.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use aesd_age::{Identity, Recipient, parse_identities, parse_recipients};
use aesd_cli::error_line::error_line;
use aesd_cli::generate::{self, Generate, unless_generating};
use aesd_cli::output::OutputPath;
use aesd_cli::pass_source::{PassError, PassSource, prompt_password};
use aesd_cli::password::read_token_file;
use aesd_client::ConnectOptions;
use aesd_client::connection::{parse_idle_timeout, parse_server_address};
use aesd_client::tls::TlsArgs;
use aesd_client::{AgeSpec, Client, DEFAULT_ITERATIONS, JobSpec, KeyDerivation};
use aesd_proto::Operation;
use aesd_proto::Password;
use anyhow::{Context, Result, bail};
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};
use tokio::io::{AsyncRead, AsyncWriteExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FileFormat {
    /// openssl enc -aes-256-cbc -salt -pbkdf2 (a password; no integrity)
    Openssl,
    /// age v1 (X25519 recipients, authenticated)
    Age,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// Plaintext in, openssl-compatible ciphertext out.
    Encrypt,
    /// openssl-compatible ciphertext in, plaintext out.
    Decrypt,
}

/// Encrypt or decrypt a file through an aesd server: `openssl enc -aes-256-cbc -pbkdf2` or age v1
#[derive(Debug, Parser)]
#[command(
    name = "aescrypt",
    version,
    override_usage = "aescrypt encrypt|decrypt --server HOST:PORT -i IN -o OUT [OPTIONS]",
    after_help = "Exit status: 0, 1 on any error, 2 on bad arguments, 130 on SIGINT. \
More: aescrypt --help, or the man page (aescrypt --generate man).",
    after_long_help = "\
Exit status: 0 on success; 1 with a one-line reason on any error (server \
unreachable, wrong password or corrupted input, bad password file, missing or \
wrong access token...).

Output to a file (or a new path) is written to a new temporary file beside \
it (a random name, created exclusively, mode 600), synced to disk and renamed \
over OUT only when the job succeeded and the server's byte counts match this \
client's; a failed job removes it and leaves OUT untouched. A symlink is \
followed (its target is replaced, the link stays); a device, FIFO or socket \
is written straight through; a directory is refused. OUT is checked before \
any work. Output to stdout (-o -), a device or a FIFO is streamed: on failure \
the bytes already written may be incomplete, and the exit status is 1.

Formats: openssl (the default) is AES-256-CBC as openssl enc writes it: \
a password, no integrity (a changed file decrypts to changed data). age \
(--format age, or -r/-R) is age v1: the server makes a fresh file key, \
wraps it to each recipient's X25519 public key and streams 64 KiB \
ChaCha20-Poly1305 chunks; a changed, cut or reordered file fails to decrypt \
and no unauthenticated byte is written. To decrypt an age file, aescrypt \
reads its header, unwraps the file key with --identity (age-keygen's file) \
and sends the server only that key: the identity never leaves this machine. \
Passphrase-encrypted (age -p) files and identities are not supported.

Example:
  aescrypt encrypt --server 127.0.0.1:7878 -i big.bin -o big.bin.enc     # prompts twice
  aescrypt encrypt --server 127.0.0.1:7878 --pass file:pw.txt -i big.bin -o big.bin.enc
  openssl enc -d -aes-256-cbc -pbkdf2 -pass file:pw.txt -in big.bin.enc -out big.bin.check
  age-keygen -o key.txt
  aescrypt encrypt --server 127.0.0.1:7878 -r age1... -i big.bin -o big.bin.age
  aescrypt decrypt --server 127.0.0.1:7878 --identity key.txt -i big.bin.age -o big.bin"
)]
struct Args {
    /// encrypt or decrypt
    #[arg(value_enum, hide_possible_values = true)]
    mode: Mode,
    /// Server address, HOST:PORT
    #[arg(long, value_name = "HOST:PORT", env = "AESD_SERVER", value_parser = parse_server_address)]
    server: String,
    /// Password: pass:PW, env:VAR, file:PATH, fd:N or stdin [default: prompt]
    #[arg(
        long_help = "Password source, as openssl -pass: pass:PASSWORD, env:VAR, file:PATH (its first line), \
                       fd:N (the first line read from descriptor N) or stdin (its first line; with -i - the \
                       data follows it) [default: prompt on the terminal, twice to encrypt]"
    )]
    #[arg(long, value_name = "SOURCE", conflicts_with = "password_file")]
    pass: Option<PassSource>,
    /// File whose first line is the password: the same as --pass file:FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    password_file: Option<PathBuf>,
    /// The server's access token file, for a server started with --token-file
    #[arg(
        long_help = "File whose first line is the server's access token (16 to 256 bytes), for a server \
                       started with --token-file [default: none]"
    )]
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
    /// File format: openssl or age [default: openssl; age with -r, -R or --identity]
    #[arg(
        long_help = "File format: openssl (openssl enc -aes-256-cbc -salt -pbkdf2, with a password) or age \
                       (age v1, to X25519 recipients) [default: openssl; age when -r, -R or --identity is given]"
    )]
    #[arg(long, value_name = "FORMAT", hide_possible_values = true)]
    format: Option<FileFormat>,
    /// age: encrypt to this recipient (age1...), repeatable
    #[arg(
        long_help = "age: encrypt to this recipient's public key (age1..., as age-keygen prints it); \
                       repeatable, 1 to 32 recipients in all with -R"
    )]
    #[arg(short = 'r', long = "recipient", value_name = "AGE1", value_parser = parse_recipient)]
    recipients: Vec<Recipient>,
    /// age: encrypt to the recipients listed in FILE (one age1... per line, # comments), repeatable
    #[arg(
        short = 'R',
        long = "recipients-file",
        value_name = "FILE",
        hide_short_help = true
    )]
    recipients_files: Vec<PathBuf>,
    /// age: decrypt with the identities in FILE (age-keygen's format), repeatable
    #[arg(
        long_help = "age: decrypt with the identities in FILE (AGE-SECRET-KEY-1... lines, as age-keygen \
                       writes them; # comments); repeatable. Only the file key it unwraps is sent"
    )]
    #[arg(long = "identity", value_name = "FILE")]
    identities: Vec<PathBuf>,
    /// PBKDF2 iterations (openssl -iter; at least 1); must match on decrypt
    #[arg(long_help = "PBKDF2 iterations (openssl -iter; at least 1); must match on decrypt")]
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Where the key is derived from the password: `client` (the password never leaves this
    /// machine; needs a server that accepts derived keys), `server` (the password is sent, also
    /// without TLS), or `auto` (client when the server accepts it; otherwise the password only
    /// under TLS: without TLS that is an error, so a flipped welcome flag cannot get it sent)
    #[arg(
        long,
        value_name = "WHERE",
        default_value = "auto",
        hide_short_help = true
    )]
    key_derivation: KeyDerivation,
    /// Seconds of server silence (or connecting) before failing
    #[arg(
        long_help = "Fail when the server sends nothing (or takes no input) for this many seconds during the \
                       job, and when connecting or the server's welcome takes longer (a peer that accepts the \
                       connection but sends no welcome is not an aesd); waiting in the server's queue after a \
                       `queued` answer is not limited"
    )]
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_idle_timeout)]
    timeout: Duration,
    /// Encrypt to a terminal anyway (refused otherwise: binary output there is
    /// unreadable and can garble the terminal)
    #[arg(long, hide_short_help = true)]
    to_terminal: bool,
    /// Print the job's figures to stderr
    #[arg(
        long_help = "Print the job's figures (bytes, total/queue/processing/network time) to stderr"
    )]
    #[arg(short, long)]
    verbose: bool,
    /// Print a man page or a shell completion script (from these definitions) and exit
    #[arg(long, value_name = "KIND", exclusive = true, hide_short_help = true)]
    generate: Option<Generate>,
}

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
            if matches!(args.mode, Mode::Encrypt) && !args.to_terminal && is_terminal(&output) {
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
        result = run(args, output, key) => return result.map(|()| Ended::Done),
        _ = int.recv() => ("interrupted", 130),
        _ = term.recv() => ("terminated", 143),
    };
    eprintln!("aescrypt: {name}");
    Ok(Ended::Signal(code))
}

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What a job is keyed with.
enum JobKey {
    /// The openssl format's password.
    Password(Password),
    /// age's recipients (encryption) or identities (decryption).
    Age(AgeSpec),
}

fn operation(mode: Mode) -> Operation {
    match mode {
        Mode::Encrypt => Operation::Encrypt,
        Mode::Decrypt => Operation::Decrypt,
    }
}

/// `-r age1...`.
fn parse_recipient(text: &str) -> Result<Recipient, String> {
    Recipient::parse(text).map_err(|err| err.to_string())
}

/// The file format asked for, checked against the flags given.
fn file_format(args: &Args) -> Result<FileFormat, String> {
    let age_flags = !args.recipients.is_empty()
        || !args.recipients_files.is_empty()
        || !args.identities.is_empty();
    let format = args.format.unwrap_or(if age_flags {
        FileFormat::Age
    } else {
        FileFormat::Openssl
    });
    let password_flags = args.pass.is_some() || args.password_file.is_some();
    match (format, args.mode) {
        (FileFormat::Openssl, _) if age_flags => {
            Err("-r, -R and --identity are for --format age".into())
        }
        (FileFormat::Age, _) if password_flags => Err(
            "--format age takes recipients (-r, -R) or identities (--identity), not a password"
                .into(),
        ),
        (FileFormat::Age, Mode::Encrypt) if !args.identities.is_empty() => {
            Err("--identity decrypts; encrypt to -r age1... (age-keygen -y FILE prints it)".into())
        }
        (FileFormat::Age, Mode::Encrypt)
            if args.recipients.is_empty() && args.recipients_files.is_empty() =>
        {
            Err("--format age encrypt needs a recipient: -r age1... or -R FILE".into())
        }
        (FileFormat::Age, Mode::Decrypt)
            if !args.recipients.is_empty() || !args.recipients_files.is_empty() =>
        {
            Err("-r and -R encrypt; decrypt with --identity FILE".into())
        }
        (FileFormat::Age, Mode::Decrypt) if args.identities.is_empty() => {
            Err("--format age decrypt needs --identity FILE".into())
        }
        _ => Ok(format),
    }
}

/// The job's key: the password (openssl), or the recipients or
/// identities read from their files (age). An openssl decryption of an
/// input that is an age file is refused here, before a password is asked
/// for.
fn job_key(args: &Args, format: FileFormat) -> Result<JobKey> {
    if format == FileFormat::Openssl {
        if matches!(args.mode, Mode::Decrypt) && input_is_age(&args.input) {
            bail!(
                "{} is an age file: decrypt it with --identity FILE",
                args.input.display()
            );
        }
        return Ok(JobKey::Password(password(args)?));
    }
    let mut recipients = args.recipients.clone();
    for path in &args.recipients_files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read recipients file {}", path.display()))?;
        recipients
            .extend(parse_recipients(&text).with_context(|| format!("in {}", path.display()))?);
    }
    if recipients.len() > aesd_proto::MAX_AGE_RECIPIENTS {
        bail!(
            "{} recipients: an age encryption through aesd names at most {}",
            recipients.len(),
            aesd_proto::MAX_AGE_RECIPIENTS
        );
    }
    let mut identities: Vec<Identity> = Vec::new();
    for path in &args.identities {
        let text = zeroize::Zeroizing::new(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read identity file {}", path.display()))?,
        );
        identities
            .extend(parse_identities(&text).with_context(|| format!("in {}", path.display()))?);
    }
    Ok(JobKey::Age(AgeSpec {
        operation: operation(args.mode),
        recipients,
        identities,
    }))
}

/// Whether the output is a terminal (stdout, or a device such as /dev/tty).
fn is_terminal(output: &OutputPath) -> bool {
    if output.is_stdout() {
        return std::io::stdout().is_terminal();
    }
    let is_device = std::fs::metadata(output.path()).is_ok_and(|meta| {
        use std::os::unix::fs::FileTypeExt;
        meta.file_type().is_char_device()
    });
    is_device
        && std::fs::OpenOptions::new()
            .write(true)
            .open(output.path())
            .is_ok_and(|device| device.is_terminal())
}

/// Checks, before a password is asked for or a server contacted, that the
/// input is something a job can read to its end: a file, a FIFO or socket
/// (streamed, as stdin), a device. A directory, or an input that cannot be
/// opened, is an error that says so.
fn check_input(path: &Path) -> Result<()> {
    if is_stdio(path) {
        return Ok(());
    }
    let metadata =
        std::fs::metadata(path).with_context(|| format!("cannot open input {}", path.display()))?;
    if metadata.is_file() {
        // Opened here to be refused before the password prompt when
        // unreadable; a FIFO is not (its open waits for a writer, and
        // the job opens it).
        std::fs::File::open(path)
            .with_context(|| format!("cannot open input {}", path.display()))?;
    }
    if metadata.is_dir() {
        bail!(
            "input {} is a directory: aescrypt encrypts one file or stream (for a directory, \
             archive it: tar -C {} -c . | aescrypt ... -i -)",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

/// Whether the regular file at `path` starts like an age file (stdin and
/// other inputs are not read ahead).
fn input_is_age(path: &Path) -> bool {
    use std::io::Read;
    if is_stdio(path) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut prefix = Vec::new();
    let armor = aesd_age::ARMOR_BEGIN;
    let _ = file.take(armor.len() as u64).read_to_end(&mut prefix);
    (prefix.len() >= 22 && aesd_client::age_job::is_age(&prefix[..22])) || prefix == armor
}

/// The job's password: from --pass or --password-file, else prompted on
/// the terminal (twice to encrypt), else an error.
fn password(args: &Args) -> Result<Password, PassError> {
    let source = match (&args.pass, &args.password_file) {
        (Some(source), _) => Some(source.clone()),
        (None, Some(path)) => Some(PassSource::File(path.clone())),
        (None, None) => None,
    };
    match source {
        Some(source) => source.read("aescrypt"),
        None if std::io::stdin().is_terminal() => {
            prompt_password(matches!(args.mode, Mode::Encrypt))
        }
        None => Err(PassError::NoSource),
    }
}

async fn run(args: &Args, output: OutputPath, key: JobKey) -> Result<()> {
    let spec = match key {
        JobKey::Password(password) => Spec::Openssl(JobSpec {
            operation: operation(args.mode),
            password,
            iterations: args.iterations,
            key_derivation: args.key_derivation,
        }),
        JobKey::Age(spec) => Spec::Age(spec),
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
    if !output.is_stdout() && args.output == args.input {
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
        bind: None,
    };
    let mut client = Client::connect_within(&args.server, &options, args.timeout).await?;
    if let Some(warning) = client.cleartext_warning() {
        eprintln!("aescrypt: {warning}");
    }
    client.set_idle_timeout(args.timeout);
    let report = if output.is_stdout() {
        let mut stdout = tokio::io::stdout();
        spec.run(&mut client, &mut input, &mut stdout).await?
    } else {
        write_via(&output, &mut client, &spec, &mut input).await?
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

/// Runs the job into `output` (a file through a temporary file renamed
/// over it once the job succeeded, a device or FIFO straight through); on
/// any failure a temporary file is removed and a file output untouched.
async fn write_via(
    output: &OutputPath,
    client: &mut Client,
    spec: &Spec,
    input: &mut (dyn AsyncRead + Unpin),
) -> Result<aesd_client::JobReport> {
    let (pending, file) = output.open()?.into_file();
    let file = file.context("the output has no file")?;
    let mut writer = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
    let report = spec.run(client, &mut &mut *input, &mut writer).await?;
    writer
        .flush()
        .await
        .with_context(|| format!("cannot write {}", output.path().display()))?;
    let file = writer.into_inner().into_std().await;
    pending.commit(Some(file))?;
    Ok(report)
}

/// The job to run, in its format.
enum Spec {
    Openssl(JobSpec),
    Age(AgeSpec),
}

impl Spec {
    async fn run<R, W>(
        &self,
        client: &mut Client,
        input: &mut R,
        output: &mut W,
    ) -> Result<aesd_client::JobReport, aesd_client::ClientError>
    where
        R: AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        match self {
            Spec::Openssl(spec) => client.run_job(spec, input, output).await,
            Spec::Age(spec) => {
                client
                    .run_age_job_observed(spec, input, output, |_| {})
                    .await
            }
        }
    }
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

    #[test]
    fn short_help_fits_30_lines_and_long_help_has_everything() {
        let long_only = [
            "--password-file",
            "--key-derivation",
            "--tls-server-name",
            "--generate",
        ];
        let problems = aesd_cli::help::summary_problems(Args::command(), &long_only);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn generate_needs_no_other_argument_and_takes_none() {
        let parse = |argv: &[&str]| unless_generating(Args::command()).try_get_matches_from(argv);
        let matches = parse(&["aescrypt", "--generate", "man"]).expect("alone");
        assert_eq!(
            matches.get_one::<Generate>("generate"),
            Some(&Generate::Man)
        );
        assert!(parse(&["aescrypt", "--generate", "man", "encrypt"]).is_err());
        assert!(
            parse(&["aescrypt", "encrypt", "--server", "h:1", "-i", "-"]).is_err(),
            "-o is required"
        );
    }
}
