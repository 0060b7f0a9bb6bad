//! Where a job password comes from, as `openssl -pass` takes it:
//! `pass:PASSWORD`, `env:VAR`, `file:PATH` (the first line), `fd:N` (the
//! first line read from an open file descriptor), `stdin` (the first line
//! of standard input); or typed at a terminal prompt, without echo.
//!
//! Every source gives a password of 1 to 1024 bytes without its line
//! ending; `pass:` puts the password in the process list and shell
//! history, as with openssl, so it is for tests and throwaway data.

use std::io::{self, BufRead, Read};
use std::path::PathBuf;
use std::str::FromStr;

use aesd_proto::Password;
use aesd_proto::limits::MAX_PASSWORD_LEN;
use zeroize::Zeroizing;

use crate::password::{SecretFileError, read_password_file};

/// The forms `--pass` accepts, for messages and help.
pub const PASS_FORMS: &str = "pass:PASSWORD, env:VAR, file:PATH, fd:N or stdin";

/// A password source named on the command line (`--pass`). Its `Debug`
/// does not print a literal password.
#[derive(Clone, PartialEq, Eq)]
pub enum PassSource {
    /// `pass:PASSWORD`: the password itself.
    Literal(String),
    /// `env:VAR`: the environment variable's value.
    Env(String),
    /// `file:PATH` (and `--password-file PATH`): the file's first line.
    File(PathBuf),
    /// `fd:N`: the first line read from file descriptor N.
    Fd(u32),
    /// `stdin`: the first line of standard input.
    Stdin,
}

impl std::fmt::Debug for PassSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PassSource::Literal(_) => f.write_str("Literal(<password>)"),
            PassSource::Env(var) => f.debug_tuple("Env").field(var).finish(),
            PassSource::File(path) => f.debug_tuple("File").field(path).finish(),
            PassSource::Fd(fd) => f.debug_tuple("Fd").field(fd).finish(),
            PassSource::Stdin => f.write_str("Stdin"),
        }
    }
}

/// A `--pass` value that is none of [`PASS_FORMS`]. The value itself is
/// not repeated (a mistyped `pas:secret`, or a bare password, would be
/// printed in a terminal and in logs): only its length, and the kind when
/// it is a known one with a bad argument (`fd:x`, `env:`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the --pass value ({len} bytes{kind}, not shown: it may hold the password) is not a password source: use {PASS_FORMS}"
)]
pub struct PassSourceSyntaxError {
    len: usize,
    kind: &'static str,
}

impl FromStr for PassSource {
    type Err = PassSourceSyntaxError;

    fn from_str(text: &str) -> Result<PassSource, PassSourceSyntaxError> {
        let kind = match text.split_once(':').map(|(kind, _)| kind) {
            Some("env") => ", env: without a variable name",
            Some("file") => ", file: without a path",
            Some("fd") => ", fd: without a descriptor number",
            Some("stdin") => ", stdin takes no argument",
            _ => "",
        };
        let invalid = || PassSourceSyntaxError {
            len: text.len(),
            kind,
        };
        if text == "stdin" {
            return Ok(PassSource::Stdin);
        }
        let (kind, value) = text.split_once(':').ok_or_else(invalid)?;
        match kind {
            "pass" => Ok(PassSource::Literal(value.to_owned())),
            "env" if !value.is_empty() => Ok(PassSource::Env(value.to_owned())),
            "file" if !value.is_empty() => Ok(PassSource::File(PathBuf::from(value))),
            "fd" => value.parse().map(PassSource::Fd).map_err(|_| invalid()),
            _ => Err(invalid()),
        }
    }
}

/// The password could not be had from its source.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// `env:VAR` names a variable that is not set (or not UTF-8).
    #[error("environment variable {0} (--pass env:{0}) is not set")]
    EnvUnset(String),
    /// The password file could not be used.
    #[error(transparent)]
    File(#[from] SecretFileError),
    /// Reading file descriptor N or stdin failed.
    #[error("cannot read the password from {from}: {error}")]
    Read {
        /// `fd:N` or `stdin`.
        from: String,
        /// Why (said once, here).
        error: io::Error,
    },
    /// The password is empty or longer than the protocol allows.
    #[error("the password from {from} is {len} bytes; it must be 1 to {MAX_PASSWORD_LEN} bytes")]
    Length {
        /// Where it came from.
        from: String,
        /// Its length.
        len: usize,
    },
    /// The terminal prompt failed.
    #[error("cannot read the password from the terminal: {0}")]
    Prompt(io::Error),
    /// The two passwords typed at the prompt differ.
    #[error("the passwords typed do not match")]
    Mismatch,
    /// No source was given and stdin is not a terminal to prompt on.
    #[error(
        "no password: give --pass ({PASS_FORMS}) or --password-file, or run on a terminal to be prompted"
    )]
    NoSource,
}

impl PassSource {
    /// The password, from this source; `program` prefixes the warning
    /// printed when a password file is readable by others.
    pub fn read(&self, program: &str) -> Result<Password, PassError> {
        let password = self.read_as_openssl(program)?;
        if password.as_bytes().ends_with(b"\r") {
            eprintln!("{program}: {}", carriage_return_warning(self));
        }
        Ok(password)
    }

    /// The password, read exactly as `openssl enc -pass` reads the same
    /// source: a file, descriptor or stdin gives its first line without
    /// the `\n` (a `\r` before it stays).
    fn read_as_openssl(&self, program: &str) -> Result<Password, PassError> {
        match self {
            PassSource::Literal(text) => checked("pass:", text.as_bytes().to_vec()),
            PassSource::Env(var) => match std::env::var(var) {
                Ok(value) => checked(&format!("env:{var}"), value.into_bytes()),
                Err(_) => Err(PassError::EnvUnset(var.clone())),
            },
            PassSource::File(path) => Ok(read_password_file(path, program)?),
            PassSource::Fd(fd) => {
                let from = format!("fd:{fd}");
                // /dev/fd/N reopens descriptor N: no unsafe descriptor
                // adoption, and the descriptor itself stays open.
                let file = std::fs::File::open(format!("/dev/fd/{fd}")).map_err(|error| {
                    PassError::Read {
                        from: from.clone(),
                        error,
                    }
                })?;
                first_line(&from, &mut io::BufReader::new(file))
            }
            PassSource::Stdin => first_line("stdin", &mut io::stdin().lock()),
        }
    }
}

/// Asks for the password on the terminal without echo; with `confirm`,
/// twice (encryption: a typo would make the file unreadable).
pub fn prompt_password(confirm: bool) -> Result<Password, PassError> {
    let first =
        Zeroizing::new(rpassword::prompt_password("password: ").map_err(PassError::Prompt)?);
    if confirm {
        let again = Zeroizing::new(
            rpassword::prompt_password("password again: ").map_err(PassError::Prompt)?,
        );
        if *first != *again {
            return Err(PassError::Mismatch);
        }
    }
    checked("the terminal", first.as_bytes().to_vec())
}

/// The first line of `reader` (at most the longest password and its line
/// ending are read, so what follows stays for the next reader: `--pass
/// stdin -i -` reads the password, then the data).
fn first_line(from: &str, reader: &mut impl BufRead) -> Result<Password, PassError> {
    let mut line = Zeroizing::new(Vec::new());
    reader
        .take(MAX_PASSWORD_LEN as u64 + 2)
        .read_until(b'\n', &mut line)
        .map_err(|error| PassError::Read {
            from: from.to_owned(),
            error,
        })?;
    // As openssl: the \n goes, a \r before it stays.
    let text = line.strip_suffix(b"\n").unwrap_or(&line);
    checked(from, text.to_vec())
}

/// What is said when a password ends with `\r`: kept, as openssl keeps
/// it, which is rarely what its writer meant.
fn carriage_return_warning(source: &PassSource) -> String {
    let from = match source {
        PassSource::Literal(_) => "pass:".to_owned(),
        PassSource::Env(var) => format!("env:{var}"),
        PassSource::File(path) => format!("file:{}", path.display()),
        PassSource::Fd(fd) => format!("fd:{fd}"),
        PassSource::Stdin => "stdin".to_owned(),
    };
    format!(
        "warning: the password from {from} ends with a carriage return (\\r: a CRLF line ending?); \
         it is kept, as openssl enc -pass keeps it, so both derive the same key. If it was not \
         meant, remove it (e.g. sed -i 's/\\r$//' FILE) before encrypting"
    )
}

fn checked(from: &str, bytes: Vec<u8>) -> Result<Password, PassError> {
    let bytes = Zeroizing::new(bytes);
    if !(1..=MAX_PASSWORD_LEN).contains(&bytes.len()) {
        return Err(PassError::Length {
            from: from.to_owned(),
            len: bytes.len(),
        });
    }
    Ok(Password::new(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_others_are_refused() {
        let parse = |text: &str| text.parse::<PassSource>();
        assert_eq!(parse("pass:a:b"), Ok(PassSource::Literal("a:b".into())));
        assert_eq!(parse("env:PW"), Ok(PassSource::Env("PW".into())));
        assert_eq!(parse("file:/p"), Ok(PassSource::File("/p".into())));
        assert_eq!(parse("fd:3"), Ok(PassSource::Fd(3)));
        assert_eq!(parse("stdin"), Ok(PassSource::Stdin));
        for bad in [
            "", "pw.txt", "file:", "env:", "fd:x", "fd:-1", "stdin:", "foo:bar",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(
                err.to_string().contains("is not a password source"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_malformed_source_and_a_literal_password_are_never_printed() {
        for bad in ["pas:hunter2-secret", "hunter2-secret", "fd:hunter2-secret"] {
            let err = bad.parse::<PassSource>().expect_err(bad);
            for shown in [err.to_string(), format!("{err:?}")] {
                assert!(!shown.contains("hunter2"), "{shown}");
            }
            let text = err.to_string();
            assert!(text.contains(&format!("{} bytes", bad.len())), "{text}");
        }
        let err = "fd:x".parse::<PassSource>().expect_err("fd:x");
        assert!(
            err.to_string().contains("fd: without a descriptor number"),
            "{err}"
        );
        let literal: PassSource = "pass:hunter2-secret".parse().expect("a literal");
        let debug = format!("{literal:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("Literal"),
            "{debug}"
        );
    }

    #[test]
    fn the_first_line_without_its_ending_and_the_rest_left() {
        let mut input = io::Cursor::new(b"s3cret\nDATA".to_vec());
        let password = first_line("stdin", &mut input).expect("a password");
        assert_eq!(password.as_bytes(), b"s3cret");
        // openssl -pass stdin/fd: keeps the \r of a CRLF line.
        let crlf = first_line("stdin", &mut io::Cursor::new(b"s3cret\r\nDATA".to_vec()))
            .expect("a password");
        assert_eq!(crlf.as_bytes(), b"s3cret\r");
        let mut rest = Vec::new();
        input.read_to_end(&mut rest).expect("read");
        assert_eq!(rest, b"DATA");
        let err = first_line("fd:3", &mut io::Cursor::new(b"\n".to_vec())).expect_err("empty");
        assert_eq!(
            err.to_string(),
            "the password from fd:3 is 0 bytes; it must be 1 to 1024 bytes"
        );
        let long = vec![b'x'; MAX_PASSWORD_LEN + 5];
        assert!(first_line("stdin", &mut io::Cursor::new(long)).is_err());
    }

    #[test]
    fn pass_and_env_sources() {
        let password = PassSource::Literal("pw".into()).read("t").expect("pass:");
        assert_eq!(password.as_bytes(), b"pw");
        assert!(PassSource::Literal(String::new()).read("t").is_err());
        let err = PassSource::Env("AESD_TEST_SURELY_UNSET_VARIABLE".into())
            .read("t")
            .expect_err("unset");
        assert_eq!(
            err.to_string(),
            "environment variable AESD_TEST_SURELY_UNSET_VARIABLE (--pass env:AESD_TEST_SURELY_UNSET_VARIABLE) is not set"
        );
    }
}
