//! The audit log's file (`--audit-log FILE`): opened append-only with
//! mode 0600, one `write` per line, and reopened when the path no longer
//! names the file held (logrotate renamed or removed it): every line
//! checks the path's inode first, so no signal is needed. A line that
//! cannot be written in full is an error: the caller refuses the request.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The audit log's file, shared by every request.
#[derive(Debug)]
pub struct AuditFile {
    path: PathBuf,
    held: Mutex<Option<Held>>,
}

/// The open file and the identity (device, inode) it had when opened.
#[derive(Debug)]
struct Held {
    file: File,
    identity: (u64, u64),
}

impl AuditFile {
    /// Opens (creates) `path` now, so a path that cannot be written stops
    /// aesd at start rather than its first request.
    pub fn open(path: &Path) -> io::Result<Self> {
        let held = open_append(path)?;
        Ok(AuditFile {
            path: path.to_owned(),
            held: Mutex::new(Some(held)),
        })
    }

    /// The path given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (a newline is added) with one `write`: the file is
    /// reopened first if the path names another file or none. A failed
    /// or short write is an error.
    pub fn append(&self, line: &[u8]) -> io::Result<()> {
        let mut buffer = Vec::with_capacity(line.len() + 1);
        buffer.extend_from_slice(line);
        buffer.push(b'\n');
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let current = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if held.as_ref().map(|h| h.identity) != current || current.is_none() {
            // Renamed, removed or replaced: a new file at the path.
            *held = None;
            *held = Some(open_append(&self.path)?);
        }
        let Some(open) = held.as_mut() else {
            return Err(io::Error::other("audit log not open"));
        };
        let written = open.file.write(&buffer)?;
        if written != buffer.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {written} of {} bytes", buffer.len()),
            ));
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<Held> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::other("is a directory"));
    }
    Ok(Held {
        identity: (meta.dev(), meta.ino()),
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::AuditFile;

    #[test]
    fn lines_are_appended_and_a_renamed_file_is_followed_by_a_new_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(&path).expect("open");
        log.append(b"one").expect("append");
        std::fs::rename(&path, dir.path().join("audit.log.1")).expect("rename");
        log.append(b"two").expect("append");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("audit.log.1")).expect("old"),
            "one\n"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("new"), "two\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_path_replaced_by_a_directory_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(&path).expect("open");
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("mkdir");
        assert!(log.append(b"line").is_err());
    }
}
