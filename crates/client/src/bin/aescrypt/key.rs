//! The job's key: the openssl format's password, or age's recipients and
//! identities read from their files, or an age file's passphrase.

use std::io::IsTerminal;
use std::path::Path;

use aesd_age::passphrase::is_passphrase_header;
use aesd_age::{
    ARMOR_BEGIN, ArmorDecoder, Header, HeaderReader, Identity, MAX_HEADER_LEN, parse_identities,
    parse_recipients,
};
use aesd_cli::pass_source::{PassError, PassSource, prompt_password};
use aesd_client::AgeSpec;
use aesd_proto::Password;
use anyhow::{Context, Result, bail};

use crate::args::{Args, FileFormat, Mode, operation};
use crate::paths::is_stdio;

/// What a job is keyed with.
pub(crate) enum JobKey {
    /// The openssl format's password.
    Password(Password),
    /// age's recipients (encryption) or identities (decryption).
    Age(AgeSpec),
    /// A key of the server's keyring, by name, and the keyring token.
    ByName {
        /// The key's name.
        name: String,
        /// The keyring token (from --token-file).
        token: aesd_proto::Secret,
    },
}

/// The job's key: the password (openssl), or the recipients or
/// identities read from their files, or a passphrase (age). Decrypting
/// with the default format, an input file that is an age file is taken
/// as one: a passphrase file (age -p) asks for its passphrase as openssl
/// files ask for their password; a file for identities is refused here,
/// naming --identity, before a password is asked for.
pub(crate) fn job_key(args: &Args, format: FileFormat) -> Result<JobKey> {
    if let Some(by_name) = args.keys.by_name("aescrypt")? {
        return Ok(JobKey::ByName {
            name: by_name.name,
            token: by_name.token,
        });
    }
    let decrypt = matches!(args.mode, Mode::Decrypt);
    if format == FileFormat::Openssl {
        if decrypt && let Some(header) = input_age_header(&args.input) {
            if header.is_some_and(|header| is_passphrase_header(&header)) {
                return passphrase_key(args);
            }
            bail!(
                "{} is an age file: decrypt it with --identity FILE",
                args.input.display()
            );
        }
        return Ok(JobKey::Password(password(args)?));
    }
    let password_flags = args.pass.is_some() || args.password_file.is_some();
    if (decrypt && args.identities.is_empty()) || (!decrypt && password_flags) {
        return passphrase_key(args);
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
        passphrase: None,
        armor: args.armor,
    }))
}

/// An age job with a passphrase (age -p files), read from the password
/// sources (asked on the terminal once to decrypt, twice to encrypt).
fn passphrase_key(args: &Args) -> Result<JobKey> {
    let passphrase = password(args).map_err(|err| match err {
        PassError::NoSource => anyhow::anyhow!(
            "no key for the age file: give --identity FILE, or for a passphrase file (age -p) \
             --pass SOURCE or --password-file FILE, or run on a terminal to be prompted"
        ),
        err => err.into(),
    })?;
    Ok(JobKey::Age(AgeSpec {
        operation: operation(args.mode),
        recipients: Vec::new(),
        identities: Vec::new(),
        passphrase: Some(passphrase),
        armor: args.armor,
    }))
}

/// When the regular file at `path` starts like an age file (binary or
/// armored): `Some`, with its header when that reads (the first 128 KiB
/// hold any header aesd reads, armored too). Stdin and other inputs are
/// not read ahead: `None`.
fn input_age_header(path: &Path) -> Option<Option<Header>> {
    use std::io::Read;
    if is_stdio(path) {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut prefix = Vec::new();
    let _ = file
        .take(2 * MAX_HEADER_LEN as u64)
        .read_to_end(&mut prefix);
    let start = prefix
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(prefix.len());
    let armored = prefix[start..].starts_with(ARMOR_BEGIN);
    if !armored && !(prefix.len() >= 22 && aesd_client::age_job::is_age(&prefix[..22])) {
        return None;
    }
    let binary = if armored {
        let mut decoder = ArmorDecoder::new();
        let mut out = Vec::new();
        // A fault past the header shows in the job; the header is what
        // decoded before it.
        let _ = decoder.push(&prefix, &mut out);
        out
    } else {
        prefix
    };
    Some(
        HeaderReader::new()
            .push(&binary)
            .ok()
            .flatten()
            .map(|(header, _)| header),
    )
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
