//! aescrypt's command line: the arguments, the file format and mode, and
//! the checks of the flags against each other.

use std::path::PathBuf;
use std::time::Duration;

use aesd_age::Recipient;
use aesd_cli::generate::Generate;
use aesd_cli::key_args::KeyArgs;
use aesd_cli::pass_source::PassSource;
use aesd_client::connection::{parse_idle_timeout, parse_server_address};
use aesd_client::tls::TlsArgs;
use aesd_client::{DEFAULT_ITERATIONS, KeyDerivation};
use aesd_proto::Operation;
use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FileFormat {
    /// openssl enc -aes-256-cbc -salt -pbkdf2 (a password; no integrity)
    Openssl,
    /// age v1 (X25519 recipients, authenticated)
    Age,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Mode {
    /// Plaintext in, openssl-compatible ciphertext out.
    Encrypt,
    /// openssl-compatible ciphertext in, plaintext out.
    Decrypt,
    /// A by-name file in, the same file with its header rewrapped by the
    /// key's latest version out (--key; only the header is sent).
    Rewrap,
}

/// Encrypt or decrypt a file through an aesd server: `openssl enc -aes-256-cbc -pbkdf2` or age v1
#[derive(Debug, Parser)]
#[command(
    name = "aescrypt",
    version,
    override_usage = "aescrypt encrypt|decrypt|rewrap --server HOST:PORT -i IN -o OUT [OPTIONS]",
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
and no unauthenticated byte is written; --armor writes it ASCII-armored \
(age -a). To decrypt an age file, aescrypt reads its header, unwraps the \
file key with --identity (age-keygen's file) and sends the server only that \
key: the identity never leaves this machine. An armored file is recognised \
and unarmored as it is read (strictly: 64-column lines, canonical base64, \
only whitespace around the armor; a fault is named with its line). A \
passphrase file (age -p, scrypt) decrypts with the password sources above \
(--pass, --password-file, or the prompt) instead of --identity, and \
--format age encrypt with --pass or --password-file (no -r) writes one; the \
scrypt work runs here, never on the server (it encrypts to a one-time key \
made here, whose stanza aescrypt replaces by the passphrase's). A work factor \
above 2^22 (age's own limit) is refused before any work; aescrypt writes \
2^18, as age does.

By name (--key NAME, with the keyring token in --token-file): the server keeps the key (its keyring, administered with the bao CLI). encrypt writes an age v1 file whose header holds one `-> aesd-key NAME VERSION` stanza: a fresh file key wrapped by the key's latest version. decrypt sends the whole file; rewrap sends the header only and writes the new header (wrapped by the latest version) followed by the payload bytes unchanged. The token's policies must grant update on transit/encrypt/NAME, transit/decrypt/NAME or transit/rewrap/NAME. Refusals: sealed, unknown_key, key_version_retired (below min_decryption_version), key_version_not_created, permission_denied, bad_key_token (a missing, wrong, revoked or expired token), audit_failed (the server's --audit-log cannot be written: no by-name job runs until it can). With --key, --token-file is the keyring token, not the port's access token (a port that requires both is not supported yet). With --local (encrypt and decrypt), only the header crosses the network: encrypt asks the server for a data key (a fresh file key and its by-name header; the token needs update on transit/datakey/plaintext/NAME) and encrypts the payload here; decrypt sends the file's header to be unwrapped (transit/decrypt/NAME) and decrypts the payload here. The files are the same format either way, so a file made with --local decrypts without it and the other way round. Use it over a slow link or for a large file; the trade-off: the file key is on this machine while the file is processed.

Example:
  aescrypt encrypt --server 127.0.0.1:7878 -i big.bin -o big.bin.enc     # prompts twice
  aescrypt encrypt --server 127.0.0.1:7878 --pass file:pw.txt -i big.bin -o big.bin.enc
  openssl enc -d -aes-256-cbc -pbkdf2 -pass file:pw.txt -in big.bin.enc -out big.bin.check
  age-keygen -o key.txt
  aescrypt encrypt --server 127.0.0.1:7878 -r age1... -i big.bin -o big.bin.age
  aescrypt decrypt --server 127.0.0.1:7878 --identity key.txt -i big.bin.age -o big.bin
  aescrypt encrypt --server 127.0.0.1:7878 -r age1... --armor -i notes.txt -o notes.txt.age
  aescrypt encrypt --server 127.0.0.1:7878 --format age --pass file:pw.txt -i s.txt -o s.age
  aescrypt decrypt --server 127.0.0.1:7878 -i s.age -o s.txt    # age -p files too: prompts
  aescrypt encrypt --server 127.0.0.1:7878 --key payroll --token-file tok -i a.bin -o a.bin.age
  aescrypt rewrap --server 127.0.0.1:7878 --key payroll --token-file tok -i a.bin.age -o a.new
  aescrypt encrypt --server 127.0.0.1:7878 --key payroll --token-file tok --local -i a.bin -o a.bin.age"
)]
pub(crate) struct Args {
    /// encrypt, decrypt or rewrap (rewrap: by name, --key)
    #[arg(value_enum, hide_possible_values = true)]
    pub(crate) mode: Mode,
    /// Server address, HOST:PORT
    #[arg(long, value_name = "HOST:PORT", env = "AESD_SERVER", value_parser = parse_server_address)]
    pub(crate) server: String,
    /// Password: pass:PW, env:VAR, file:PATH, fd:N or stdin [default: prompt]
    #[arg(
        long_help = "Password source, as openssl -pass: pass:PASSWORD, env:VAR, file:PATH (its first line), \
                       fd:N (the first line read from descriptor N) or stdin (its first line; with -i - the \
                       data follows it) [default: prompt on the terminal, twice to encrypt]. With --format age, \
                       the passphrase of a passphrase file (age -p)"
    )]
    #[arg(long, value_name = "SOURCE", conflicts_with = "password_file")]
    pub(crate) pass: Option<PassSource>,
    /// File whose first line is the password: the same as --pass file:FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub(crate) password_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) keys: KeyArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    /// Input file, or - for stdin
    #[arg(short = 'i', long = "in", value_name = "IN")]
    pub(crate) input: PathBuf,
    /// Output file, or - for stdout
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    pub(crate) output: PathBuf,
    /// File format: openssl or age [default: openssl; age with -r, -R, --identity or -a]
    #[arg(
        long_help = "File format: openssl (openssl enc -aes-256-cbc -salt -pbkdf2, with a password) or age \
                       (age v1, to X25519 recipients or a passphrase) [default: openssl; age when -r, -R, --identity or \
                       --armor is given, or when decrypting an input file that is an age file]"
    )]
    #[arg(long, value_name = "FORMAT", hide_possible_values = true)]
    pub(crate) format: Option<FileFormat>,
    /// age: encrypt to this recipient (age1...), repeatable
    #[arg(
        long_help = "age: encrypt to this recipient's public key (age1..., as age-keygen prints it); \
                       repeatable, 1 to 32 recipients in all with -R"
    )]
    #[arg(short = 'r', long = "recipient", value_name = "AGE1", value_parser = parse_recipient)]
    pub(crate) recipients: Vec<Recipient>,
    /// age: encrypt to the recipients listed in FILE (one age1... per line, # comments), repeatable
    #[arg(
        short = 'R',
        long = "recipients-file",
        value_name = "FILE",
        hide_short_help = true
    )]
    pub(crate) recipients_files: Vec<PathBuf>,
    /// age: write the encryption ASCII-armored (age -a: PEM text, 64 columns)
    #[arg(
        long_help = "age: write the encryption ASCII-armored, as age -a does (-----BEGIN AGE ENCRYPTED \
                       FILE-----, base64 in 64-column lines, -----END AGE ENCRYPTED FILE-----): text that \
                       survives e-mail and copy-paste, a third larger. Decrypting needs no flag: an armored \
                       input is recognised"
    )]
    #[arg(short = 'a', long, hide_short_help = true)]
    pub(crate) armor: bool,
    /// age: decrypt with the identities in FILE (age-keygen's format), repeatable
    #[arg(
        long_help = "age: decrypt with the identities in FILE (AGE-SECRET-KEY-1... lines, as age-keygen \
                       writes them; # comments); repeatable. Only the file key it unwraps is sent"
    )]
    #[arg(long = "identity", value_name = "FILE")]
    pub(crate) identities: Vec<PathBuf>,
    /// By name: encrypt or decrypt the payload here; only the header crosses the network
    #[arg(
        long_help = "By name (--key): encrypt or decrypt the payload on this machine; only the header \
                       crosses the network (encrypt: a data key from the server, which needs update on \
                       transit/datakey/plaintext/NAME; decrypt: the header's file key unwrapped by the \
                       server, which needs update on transit/decrypt/NAME). The file is the same as without \
                       --local. For a slow link or a large file; the trade-off: the file key is on this \
                       machine while the file is processed"
    )]
    #[arg(long, hide_short_help = true)]
    pub(crate) local: bool,
    /// PBKDF2 iterations (openssl -iter; at least 1); must match on decrypt
    #[arg(long_help = "PBKDF2 iterations (openssl -iter; at least 1); must match on decrypt")]
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) iterations: u32,
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
    pub(crate) key_derivation: KeyDerivation,
    /// Seconds of server silence (or connecting) before failing
    #[arg(
        long_help = "Fail when the server sends nothing (or takes no input) for this many seconds during the \
                       job, and when connecting or the server's welcome takes longer (a peer that accepts the \
                       connection but sends no welcome is not an aesd); waiting in the server's queue after a \
                       `queued` answer is not limited"
    )]
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_idle_timeout)]
    pub(crate) timeout: Duration,
    /// Encrypt to a terminal anyway (refused otherwise: binary output there is
    /// unreadable and can garble the terminal)
    #[arg(long, hide_short_help = true)]
    pub(crate) to_terminal: bool,
    /// Print the job's figures to stderr
    #[arg(
        long_help = "Print the job's figures (bytes, total/queue/processing/network time) to stderr"
    )]
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Print a man page or a shell completion script (from these definitions) and exit
    #[arg(long, value_name = "KIND", exclusive = true, hide_short_help = true)]
    pub(crate) generate: Option<Generate>,
}

pub(crate) fn operation(mode: Mode) -> Operation {
    match mode {
        Mode::Encrypt => Operation::Encrypt,
        Mode::Decrypt => Operation::Decrypt,
        Mode::Rewrap => Operation::Rewrap,
    }
}

/// `-r age1...`.
fn parse_recipient(text: &str) -> Result<Recipient, String> {
    Recipient::parse(text).map_err(|err| err.to_string())
}

/// The file format asked for, checked against the flags given.
pub(crate) fn file_format(args: &Args) -> Result<FileFormat, String> {
    let age_flags = !args.recipients.is_empty()
        || !args.recipients_files.is_empty()
        || !args.identities.is_empty()
        || args.armor;
    let format = args.format.unwrap_or(if age_flags {
        FileFormat::Age
    } else {
        FileFormat::Openssl
    });
    let password_flags = args.pass.is_some() || args.password_file.is_some();
    if args.keys.key.is_some() {
        if age_flags || password_flags || args.format == Some(FileFormat::Openssl) {
            return Err(
                "--key uses the server's keyring key: no password, -r, -R, --identity or --armor, no --format openssl"
                    .into(),
            );
        }
        if args.keys.token_file.is_none() {
            return Err("--key needs the keyring token: --token-file FILE".into());
        }
        if args.local && matches!(args.mode, Mode::Rewrap) {
            return Err(
                "--local is for encrypt and decrypt: a rewrap sends only the header already".into(),
            );
        }
        return Ok(FileFormat::Age);
    }
    if args.local {
        return Err("--local is by name: --key NAME --token-file FILE".into());
    }
    match (format, args.mode) {
        (_, Mode::Rewrap) => Err("rewrap is by name: --key NAME --token-file FILE".into()),
        (FileFormat::Openssl, _) if age_flags => {
            Err("-r, -R, --identity and --armor are for --format age".into())
        }
        (FileFormat::Age, Mode::Encrypt)
            if password_flags
                && (!args.recipients.is_empty() || !args.recipients_files.is_empty()) =>
        {
            Err(
                "recipients (-r, -R) and a passphrase (--pass, --password-file) both given: a \
                 passphrase file (age -p) has the passphrase alone; choose one"
                    .into(),
            )
        }
        (FileFormat::Age, Mode::Decrypt) if password_flags && !args.identities.is_empty() => Err(
            "--identity and a passphrase (--pass, --password-file) both given: an age file is \
             for identities or for a passphrase (age -p); give what it needs"
                .into(),
        ),
        (FileFormat::Age, Mode::Decrypt) if args.armor => Err(
            "--armor armors an encryption; decrypting, an armored input is recognised without it"
                .into(),
        ),
        (FileFormat::Age, Mode::Encrypt) if !args.identities.is_empty() => {
            Err("--identity decrypts; encrypt to -r age1... (age-keygen -y FILE prints it)".into())
        }
        (FileFormat::Age, Mode::Encrypt)
            if args.recipients.is_empty()
                && args.recipients_files.is_empty()
                && !password_flags =>
        {
            Err(
                "--format age encrypt needs a recipient (-r age1... or -R FILE), or a passphrase \
                 (--pass SOURCE or --password-file FILE) for a passphrase file (age -p)"
                    .into(),
            )
        }
        (FileFormat::Age, Mode::Decrypt)
            if !args.recipients.is_empty() || !args.recipients_files.is_empty() =>
        {
            Err("-r and -R encrypt; decrypt with --identity FILE".into())
        }
        _ => Ok(format),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_cli::generate::unless_generating;
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
            "--armor",
            "--key-derivation",
            "--tls-server-name",
            "--generate",
            "--local",
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
