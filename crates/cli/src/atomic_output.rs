//! Writing a result file so that it appears whole or not at all.
//!
//! The output goes to a new temporary file beside the destination, with
//! an unpredictable name, created exclusively (`O_CREAT | O_EXCL`: it is
//! never an existing file or a symlink someone placed there) and readable
//! by its owner only. [`TempOutput::commit`] syncs it to disk, renames it
//! over the destination and syncs the directory; dropping an uncommitted
//! [`TempOutput`] removes the temporary file and leaves the destination as
//! it was.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// How many random names are tried before giving up (a name is taken only
/// if someone else created it in between).
const ATTEMPTS: usize = 8;

/// A temporary file on its way to becoming `destination`.
#[derive(Debug)]
pub struct TempOutput {
    path: PathBuf,
    destination: PathBuf,
    committed: bool,
}

impl TempOutput {
    /// Creates the temporary file in `destination`'s directory (mode
    /// 0600, exclusively) and returns it with its open file.
    pub fn create(destination: &Path) -> io::Result<(TempOutput, File)> {
        let dir = parent_dir(destination);
        let base = destination
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let path = dir.join(format!(".{base}.{}.tmp", random_suffix()?));
            match open_exclusive(&path) {
                Ok(file) => {
                    let temp = TempOutput {
                        path,
                        destination: destination.to_owned(),
                        committed: false,
                    };
                    return Ok((temp, file));
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
    }

    /// The temporary file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs `file` (the one [`TempOutput::create`] returned) to disk,
    /// renames it over the destination and syncs the directory.
    pub fn commit(mut self, file: File) -> io::Result<()> {
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.path, &self.destination)?;
        self.committed = true;
        File::open(parent_dir(&self.destination))?.sync_all()
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates `path` for writing, mode 0600; fails if anything exists there,
/// a symlink included (which is not followed).
fn open_exclusive(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// The directory `path` is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// 16 random hex digits.
fn random_suffix() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_testkit::TempDir;
    use std::io::Write;

    #[test]
    fn the_temporary_file_is_private_and_renamed_over_the_destination() {
        let dir = TempDir::new("atomic-output");
        let dest = dir.join("out.bin");
        std::fs::write(&dest, b"old").expect("write");
        let (temp, mut file) = TempOutput::create(&dest).expect("create");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(temp.path())
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(temp.path().parent(), dest.parent());
        file.write_all(b"new").expect("write");
        let path = temp.path().to_owned();
        temp.commit(file).expect("commit");
        assert_eq!(std::fs::read(&dest).expect("read"), b"new");
        assert!(!path.exists());
    }

    #[test]
    fn names_differ_and_a_dropped_file_is_removed_leaving_the_destination() {
        let dir = TempDir::new("atomic-output");
        let dest = dir.join("out.bin");
        std::fs::write(&dest, b"old").expect("write");
        let (a, _fa) = TempOutput::create(&dest).expect("create");
        let (b, _fb) = TempOutput::create(&dest).expect("create");
        assert_ne!(a.path(), b.path());
        let (pa, pb) = (a.path().to_owned(), b.path().to_owned());
        drop((a, b));
        assert!(!pa.exists() && !pb.exists());
        assert_eq!(std::fs::read(&dest).expect("read"), b"old");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_temporary_name_is_never_followed() {
        let dir = TempDir::new("atomic-output");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").expect("write");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        // Were the random name guessed and a symlink placed there, the
        // exclusive open fails instead of opening the symlink's target.
        let err = open_exclusive(&link).expect_err("a symlink must not be opened");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        // And a destination that is a symlink is replaced, not written through.
        let (temp, mut file) = TempOutput::create(&link).expect("create");
        assert!(
            !std::fs::symlink_metadata(temp.path())
                .expect("stat")
                .file_type()
                .is_symlink()
        );
        file.write_all(b"x").expect("write");
        temp.commit(file).expect("commit");
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        assert_eq!(std::fs::read(&link).expect("read"), b"x");
    }
}
