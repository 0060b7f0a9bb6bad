//! The job's key: the openssl format's password, or age's recipients and
//! identities read from their files.

use std::io::IsTerminal;
use std::path::Path;

use aesd_age::{Identity, parse_identities, parse_recipients};
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
/// identities read from their files (age). An openssl decryption of an
/// input that is an age file is refused here, before a password is asked
/// for.
pub(crate) fn job_key(args: &Args, format: FileFormat) -> Result<JobKey> {
    if let (Some(name), Some(path)) = (&args.key, &args.token_file) {
        return Ok(JobKey::ByName {
            name: name.clone(),
            token: aesd_cli::password::read_key_token_file(path, "aescrypt")?,
        });
    }
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
