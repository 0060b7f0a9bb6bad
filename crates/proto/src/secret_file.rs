//! Secrets kept in files: a job password (`openssl enc -pass file:FILE`
//! reads the same way) or a pre-shared access token. The secret is the
//! file's first line, without its line ending (`\n` or `\r\n`).

use std::path::{Path, PathBuf};

use crate::message::Secret;

/// A secret file could not be used. `what` names the secret ("password",
/// "access token").
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The file could not be read.
    #[error("cannot read {what} file {path}: {source}")]
    Read {
        /// The kind of secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The first line is empty.
    #[error("{what} file {path} is empty (its first line is the {what})")]
    Empty {
        /// The kind of secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The first line is shorter or longer than allowed.
    #[error("{what} in {path} is {len} bytes; it must be {min} to {max} bytes")]
    Length {
        /// The kind of secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
        /// The least allowed.
        min: usize,
        /// The most allowed.
        max: usize,
    },
}

/// Reads the secret `what` from the first line of `path`, without its
/// line ending (`\n` or `\r\n`); it must be `min..=max` bytes long.
pub fn read_secret_file(
    path: &Path,
    what: &'static str,
    min: usize,
    max: usize,
) -> Result<Secret, SecretFileError> {
    read_first_line(path, what, min, max, true)
}

/// Reads the secret `what` from the first line of `path` as `openssl
/// -pass file:` does: only the `\n` that ends the line is dropped (a `\r`
/// before it stays part of the secret); it must be `min..=max` bytes long.
pub fn read_secret_file_as_openssl(
    path: &Path,
    what: &'static str,
    min: usize,
    max: usize,
) -> Result<Secret, SecretFileError> {
    read_first_line(path, what, min, max, false)
}

fn read_first_line(
    path: &Path,
    what: &'static str,
    min: usize,
    max: usize,
    strip_cr: bool,
) -> Result<Secret, SecretFileError> {
    let bytes =
        zeroize::Zeroizing::new(std::fs::read(path).map_err(|source| SecretFileError::Read {
            what,
            path: path.to_owned(),
            source,
        })?);
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = match line.strip_suffix(b"\r") {
        Some(stripped) if strip_cr => stripped,
        _ => line,
    };
    if line.is_empty() {
        return Err(SecretFileError::Empty {
            what,
            path: path.to_owned(),
        });
    }
    if !(min..=max).contains(&line.len()) {
        return Err(SecretFileError::Length {
            what,
            path: path.to_owned(),
            len: line.len(),
            min,
            max,
        });
    }
    Ok(Secret::new(line.to_vec()))
}

/// A warning when the secret file `path` can be read by users other than
/// its owner (group or world read bit set).
pub fn permission_warning(path: &Path, what: &str) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o044 != 0 {
            return Some(format!(
                "warning: {what} file {} is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary file, removed when the test is done with it.
    struct TempFile(PathBuf);

    impl std::ops::Deref for TempFile {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for TempFile {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn file_with(name: &str, content: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("aesd-secret-{}-{name}", std::process::id()));
        std::fs::write(&path, content).expect("write");
        TempFile(path)
    }

    #[test]
    fn first_line_without_its_ending() {
        let path = file_with("crlf", b"hunter2\r\nignored\n");
        let secret = read_secret_file(&path, "password", 1, 1024).expect("reads");
        assert_eq!(secret.as_bytes(), b"hunter2");
        let path = file_with("plain", b"hunter2");
        let secret = read_secret_file(&path, "password", 1, 1024).expect("reads");
        assert_eq!(secret.as_bytes(), b"hunter2");
    }

    #[test]
    fn empty_missing_and_out_of_range_files_are_errors() {
        let path = file_with("empty", b"\nsecond");
        assert!(matches!(
            read_secret_file(&path, "password", 1, 1024),
            Err(SecretFileError::Empty { .. })
        ));
        let missing = Path::new("/nonexistent/aesd-password");
        assert!(matches!(
            read_secret_file(missing, "password", 1, 1024),
            Err(SecretFileError::Read { .. })
        ));
        let path = file_with("short", b"short token\n");
        let err = read_secret_file(&path, "access token", 16, 256).unwrap_err();
        assert!(matches!(err, SecretFileError::Length { len: 11, .. }));
        assert!(err.to_string().contains("16 to 256"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn world_readable_files_are_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let path = file_with("mode", b"secret\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let warning = permission_warning(&path, "access token").expect("warned");
        assert!(warning.contains("access token file"), "{warning}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(permission_warning(&path, "access token"), None);
    }
}
