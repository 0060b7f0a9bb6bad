//! Password and access-token files: the first line. A password is read
//! exactly as `openssl enc -pass file:FILE` reads it: only the `\n` is
//! dropped, a `\r` before it (a CRLF file) stays part of the password, so
//! that both tools derive the same key (see [`crate::pass_source`], which
//! warns about it). A token drops `\n` or `\r\n`.

use std::path::Path;

use aesd_proto::limits::{MAX_PASSWORD_LEN, MAX_TOKEN_LEN, MIN_TOKEN_LEN};
pub use aesd_proto::secret_file::SecretFileError;
use aesd_proto::secret_file::{read_secret_file, read_secret_file_as_openssl};
use aesd_proto::{AuthToken, Password};

/// Reads a job password (1 to 1024 bytes) from the first line of `path`,
/// without its `\n` (a `\r` stays, as openssl keeps it);
/// `program` prefixes the warning printed on stderr when others can read
/// the file.
pub fn read_password_file(path: &Path, program: &str) -> Result<Password, SecretFileError> {
    warn_if_readable(path, "password", program);
    read_secret_file_as_openssl(path, "password", 1, MAX_PASSWORD_LEN)
}

/// Reads the server's access token (16 to 256 bytes) from the first line
/// of `path`; `program` prefixes the warning printed on stderr when others
/// can read the file.
pub fn read_token_file(path: &Path, program: &str) -> Result<AuthToken, SecretFileError> {
    warn_if_readable(path, "access token", program);
    read_secret_file(path, "access token", MIN_TOKEN_LEN, MAX_TOKEN_LEN)
}

/// Reads a keyring token (1 to 512 bytes: OpenBao's tokens, or a dev
/// root token such as `root`) from the first line of `path`, for by-name
/// jobs; `program` prefixes the warning printed when others can read it.
pub fn read_key_token_file(
    path: &Path,
    program: &str,
) -> Result<aesd_proto::Secret, SecretFileError> {
    warn_if_readable(path, "keyring token", program);
    read_secret_file(
        path,
        "keyring token",
        1,
        aesd_proto::limits::MAX_KEY_TOKEN_LEN,
    )
}

fn warn_if_readable(path: &Path, what: &str, program: &str) {
    // A directory or a missing file gets the read error alone, not a
    // mode warning first.
    if !std::fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
        return;
    }
    if let Some(warning) = aesd_proto::secret_file::permission_warning(path, what) {
        eprintln!("{program}: {warning}");
    }
}
