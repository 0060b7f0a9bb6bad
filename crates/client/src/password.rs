//! Reading a password file the way `openssl enc -pass file:FILE` does:
//! the first line, without its line ending.

use std::path::{Path, PathBuf};

use aesd_proto::Password;
use aesd_proto::limits::MAX_PASSWORD_LEN;

/// A password file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read.
    #[error("cannot read password file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The first line is empty.
    #[error("password file {0} is empty (its first line is the password)")]
    Empty(PathBuf),
    /// The password is over the protocol's limit.
    #[error("password in {path} is {len} bytes; the limit is {MAX_PASSWORD_LEN}")]
    TooLong {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
}

/// Reads the password from the first line of `path`.
pub fn read_password_file(path: &Path) -> Result<Password, PasswordError> {
    let bytes =
        zeroize::Zeroizing::new(std::fs::read(path).map_err(|source| PasswordError::Read {
            path: path.to_owned(),
            source,
        })?);
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(PasswordError::Empty(path.to_owned()));
    }
    if line.len() > MAX_PASSWORD_LEN {
        return Err(PasswordError::TooLong {
            path: path.to_owned(),
            len: line.len(),
        });
    }
    Ok(Password::new(line.to_vec()))
}

/// A warning when the file can be read by users other than its owner.
pub fn permission_warning(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o044 != 0 {
            return Some(format!(
                "warning: password file {} is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(name: &str, content: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("aesd-pw-{}-{name}", std::process::id()));
        std::fs::write(&path, content).expect("write");
        path
    }

    #[test]
    fn first_line_without_its_ending() {
        let path = file_with("crlf", b"hunter2\r\nignored\n");
        assert_eq!(
            read_password_file(&path).expect("reads").as_bytes(),
            b"hunter2"
        );
        let path = file_with("plain", b"hunter2");
        assert_eq!(
            read_password_file(&path).expect("reads").as_bytes(),
            b"hunter2"
        );
    }

    #[test]
    fn empty_and_missing_files_are_errors() {
        let path = file_with("empty", b"\nsecond");
        assert!(matches!(
            read_password_file(&path),
            Err(PasswordError::Empty(_))
        ));
        let missing = Path::new("/nonexistent/aesd-password");
        assert!(matches!(
            read_password_file(missing),
            Err(PasswordError::Read { .. })
        ));
    }
}
