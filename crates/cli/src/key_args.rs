//! `--key NAME` and `--token-file FILE`, the flags of by-name jobs (a key
//! of the server's keyring, key source 5) that `aescrypt` and `aesload`
//! share: one file holds the port's access token, or with `--key` the
//! keyring token (`bao token create` prints it), and each binary reads it
//! here the same way.

use std::path::PathBuf;

use aesd_proto::secret_file::SecretFileError;
use aesd_proto::{AuthToken, Secret};

use crate::password::{read_key_token_file, read_token_file};

/// The by-name flags, flattened into a binary's arguments.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KeyArgs {
    /// Access token file (the keyring token with --key)
    #[arg(
        long_help = "File whose first line is the server's access token (16 to 256 bytes), for a server \
                       started with --token-file; with --key, the keyring token instead (1 to 512 bytes, as \
                       bao token create prints it) [default: none]"
    )]
    #[arg(long, value_name = "FILE", env = "AESD_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// By name: jobs under the key NAME of the server's keyring
    #[arg(
        long_help = "By name: the jobs run under the key NAME of the server's keyring (1 to 128 bytes; its \
                       latest version encrypts; the keyring token in --token-file). The files are age v1 whose \
                       header holds one `-> aesd-key NAME VERSION` stanza"
    )]
    #[arg(long = "key", value_name = "NAME")]
    pub key: Option<String>,
}

/// A by-name job's key and the token it runs under.
#[derive(Debug, Clone)]
pub struct ByName {
    /// The key's name in the server's keyring.
    pub name: String,
    /// The keyring token.
    pub token: Secret,
}

impl KeyArgs {
    /// `--key NAME` with the keyring token read from `--token-file`;
    /// `None` without `--key` or without a token file (the caller says
    /// which it needs). `program` prefixes the warning printed when
    /// others can read the file.
    pub fn by_name(&self, program: &str) -> Result<Option<ByName>, SecretFileError> {
        let (Some(name), Some(path)) = (&self.key, &self.token_file) else {
            return Ok(None);
        };
        Ok(Some(ByName {
            name: name.clone(),
            token: read_key_token_file(path, program)?,
        }))
    }

    /// The port's access token from `--token-file`, when there is no
    /// `--key` (with it, the file holds the keyring token).
    pub fn access_token(&self, program: &str) -> Result<Option<AuthToken>, SecretFileError> {
        match (&self.key, &self.token_file) {
            (None, Some(path)) => read_token_file(path, program).map(Some),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Probe {
        #[command(flatten)]
        keys: KeyArgs,
    }

    #[test]
    fn the_file_is_the_access_token_without_key_and_the_keyring_token_with_it() {
        let dir = aesd_testkit::TempDir::new("key-args");
        let short = dir.secret_file("short", "root");
        let long = dir.secret_file("long", "0123456789abcdef0123");
        let path = |p: &std::path::Path| p.display().to_string();
        let keyed = Probe::try_parse_from(["p", "--key", "payroll", "--token-file", &path(&short)])
            .expect("parses");
        let by_name = keyed.keys.by_name("test").expect("read").expect("by name");
        assert_eq!(
            (by_name.name.as_str(), by_name.token.as_bytes()),
            ("payroll", &b"root"[..])
        );
        assert!(keyed.keys.access_token("test").expect("read").is_none());
        let plain = Probe::try_parse_from(["p", "--token-file", &path(&long)]).expect("parses");
        assert!(plain.keys.by_name("test").expect("nothing read").is_none());
        let access = plain
            .keys
            .access_token("test")
            .expect("read")
            .expect("a token");
        assert_eq!(access.as_bytes(), b"0123456789abcdef0123");
        // A 4-byte access token is refused: the rule of the port's tokens.
        let refused = Probe::try_parse_from(["p", "--token-file", &path(&short)]).expect("parses");
        assert!(refused.keys.access_token("test").is_err());
    }
}
