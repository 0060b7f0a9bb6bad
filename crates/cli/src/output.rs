//! Where a program's output goes: one rule for every binary (`aescrypt
//! -o`, `aesload --json/--csv/--plot`, `aesload compare --plot`).
//!
//! * `-` is standard output.
//! * A regular file, or a path where nothing exists yet, is written
//!   through a [`TempOutput`]: a new private temporary file, synced and
//!   renamed into place only when the output is complete.
//! * A symlink is followed: its target is what gets replaced (the
//!   temporary file goes in the target's directory), the link stays.
//! * A character or block device, a FIFO or a socket is opened and
//!   written straight through: it is never renamed over.
//! * A directory is refused.
//!
//! [`OutputPath::check`] applies the rule and checks the path (the
//! directory exists and a file can be created in it) before any work
//! starts, so a long run never ends by failing to save its results.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::atomic_output::TempOutput;

/// How many symlinks are followed before giving up (as Linux's `ELOOP`).
const MAX_SYMLINKS: usize = 40;

/// An output path that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path names a directory.
    #[error("{0} is a directory")]
    IsDirectory(PathBuf),
    /// The directory the file would go in does not exist (or is not a
    /// directory).
    #[error("cannot write {path}: directory {dir} does not exist")]
    NoDirectory {
        /// The output path.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// Symlinks lead in a loop or too deep.
    #[error("cannot write {0}: too many levels of symbolic links")]
    SymlinkLoop(PathBuf),
    /// The file (or its temporary file) could not be created, opened,
    /// written, synced or renamed.
    #[error("cannot write {path}: {error}")]
    Io {
        /// The output path.
        path: PathBuf,
        /// The operating system's reason (printed once, in this message).
        error: io::Error,
    },
}

impl OutputError {
    /// The I/O error behind this one, if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            OutputError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// What kind of destination an output path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputKind {
    /// `-`: standard output.
    Stdout,
    /// A regular file or a new path (`target`: where the symlinks, if
    /// any, lead), replaced whole through a temporary file.
    Replace {
        /// The file that is created or replaced.
        target: PathBuf,
    },
    /// A device, FIFO or socket (`target`: where the symlinks lead),
    /// written straight through.
    WriteThrough {
        /// The node written to.
        target: PathBuf,
    },
}

/// An output path, checked and classified by [`OutputPath::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPath {
    /// The path as the user gave it (for messages).
    path: PathBuf,
    kind: OutputKind,
}

impl OutputPath {
    /// Classifies `path` and checks that it can be written: not a
    /// directory, and for a file its directory exists and takes a new
    /// file (a temporary file is created and removed there).
    pub fn check(path: &Path) -> Result<OutputPath, OutputError> {
        if path.as_os_str() == "-" {
            return Ok(OutputPath {
                path: path.to_owned(),
                kind: OutputKind::Stdout,
            });
        }
        let target = resolve_symlinks(path)?;
        let io_error = |error| OutputError::Io {
            path: path.to_owned(),
            error,
        };
        let kind = match std::fs::metadata(&target) {
            Ok(meta) if meta.is_dir() => return Err(OutputError::IsDirectory(path.to_owned())),
            Ok(meta) if meta.is_file() => OutputKind::Replace { target },
            Ok(_) => OutputKind::WriteThrough { target },
            Err(err) if err.kind() == io::ErrorKind::NotFound => OutputKind::Replace { target },
            Err(err) => return Err(io_error(err)),
        };
        if let OutputKind::Replace { target } = &kind {
            let dir = parent_dir(target);
            if !std::fs::metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
                return Err(OutputError::NoDirectory {
                    path: path.to_owned(),
                    dir,
                });
            }
            // The only honest test that a file can be created there (as
            // root, permission bits say yes on a read-only file system).
            TempOutput::create(target).map_err(io_error)?;
        }
        Ok(OutputPath {
            path: path.to_owned(),
            kind,
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of destination it is.
    pub fn kind(&self) -> &OutputKind {
        &self.kind
    }

    /// Whether this is standard output.
    pub fn is_stdout(&self) -> bool {
        self.kind == OutputKind::Stdout
    }

    /// Opens the destination for writing: a temporary file beside the
    /// target, the node itself, or standard output. Opening a FIFO waits
    /// for its reader.
    pub fn open(&self) -> Result<OutputFile, OutputError> {
        let io_error = |error| OutputError::Io {
            path: self.path.clone(),
            error,
        };
        let sink = match &self.kind {
            OutputKind::Stdout => Sink::Stdout(io::stdout()),
            OutputKind::Replace { target } => {
                let (temp, file) = TempOutput::create(target).map_err(io_error)?;
                Sink::Temp(temp, file)
            }
            OutputKind::WriteThrough { target } => Sink::Direct(
                OpenOptions::new()
                    .write(true)
                    .open(target)
                    .map_err(io_error)?,
            ),
        };
        Ok(OutputFile {
            path: self.path.clone(),
            sink,
        })
    }

    /// Writes `bytes` whole: opens, writes, and commits.
    pub fn write_all(&self, bytes: &[u8]) -> Result<(), OutputError> {
        let mut file = self.open()?;
        file.write_all(bytes).map_err(|error| OutputError::Io {
            path: self.path.clone(),
            error,
        })?;
        file.commit()
    }
}

/// An open output; [`OutputFile::commit`] completes it. Dropped
/// uncommitted, a temporary file is removed and the destination is left
/// as it was (a device or FIFO keeps what was written).
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    Stdout(io::Stdout),
    Temp(TempOutput, File),
    Direct(File),
}

impl OutputFile {
    /// For a temporary file, its path (so a caller that must leave at
    /// once, on a signal, can remove it).
    pub fn temporary_path(&self) -> Option<&Path> {
        match &self.sink {
            Sink::Temp(temp, _) => Some(temp.path()),
            _ => None,
        }
    }

    /// Splits off the open file to write through another API (an async
    /// one); [`PendingOutput::commit`] takes it back. Standard output has
    /// no file: `None`.
    pub fn into_file(self) -> (PendingOutput, Option<File>) {
        let (pending, file) = match self.sink {
            Sink::Stdout(_) => (Pending::Stdout, None),
            Sink::Temp(temp, file) => (Pending::Temp(temp), Some(file)),
            Sink::Direct(file) => (Pending::Direct, Some(file)),
        };
        let pending = PendingOutput {
            path: self.path,
            pending,
        };
        (pending, file)
    }

    /// Flushes the output; a temporary file is synced, renamed over its
    /// target and the directory synced.
    pub fn commit(self) -> Result<(), OutputError> {
        let (pending, file) = self.into_file();
        pending.commit(file)
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Sink::Stdout(out) => out.write(buf),
            Sink::Temp(_, file) | Sink::Direct(file) => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Stdout(out) => out.flush(),
            Sink::Temp(_, file) | Sink::Direct(file) => file.flush(),
        }
    }
}

/// An [`OutputFile`] whose file is being written elsewhere
/// ([`OutputFile::into_file`]).
#[derive(Debug)]
pub struct PendingOutput {
    path: PathBuf,
    pending: Pending,
}

#[derive(Debug)]
enum Pending {
    Stdout,
    Temp(TempOutput),
    Direct,
}

impl PendingOutput {
    /// For a temporary file, its path.
    pub fn temporary_path(&self) -> Option<&Path> {
        match &self.pending {
            Pending::Temp(temp) => Some(temp.path()),
            _ => None,
        }
    }

    /// Completes the output with the file [`OutputFile::into_file`] gave.
    pub fn commit(self, file: Option<File>) -> Result<(), OutputError> {
        let io_error = |error| OutputError::Io {
            path: self.path.clone(),
            error,
        };
        match (self.pending, file) {
            (Pending::Temp(temp), Some(file)) => temp.commit(file).map_err(io_error),
            (Pending::Direct, Some(mut file)) => file.flush().map_err(io_error),
            (Pending::Stdout, _) => io::stdout().flush().map_err(io_error),
            (_, None) => Err(io_error(io::Error::other(
                "the output file was not given back",
            ))),
        }
    }
}

/// Follows `path`'s symlinks (a dangling one included) to the path they
/// lead to; `path` itself when it is no symlink.
fn resolve_symlinks(path: &Path) -> Result<PathBuf, OutputError> {
    let mut current = path.to_owned();
    for _ in 0..MAX_SYMLINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|error| OutputError::Io {
                    path: path.to_owned(),
                    error,
                })?;
                current = match link.is_absolute() {
                    true => link,
                    false => parent_dir(&current).join(link),
                };
            }
            _ => return Ok(current),
        }
    }
    Err(OutputError::SymlinkLoop(path.to_owned()))
}

/// The directory `path` is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_testkit::TempDir;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_regular_file_is_replaced_and_no_temporary_file_stays() {
        let dir = TempDir::new("output-regular");
        let dest = dir.join("out.json");
        std::fs::write(&dest, b"old").expect("write");
        let output = OutputPath::check(&dest).expect("check");
        assert_eq!(
            output.kind(),
            &OutputKind::Replace {
                target: dest.clone()
            }
        );
        assert_eq!(entries(&dir.join("")), ["out.json"], "the probe is removed");
        output.write_all(b"new").expect("write");
        assert_eq!(std::fs::read(&dest).expect("read"), b"new");
        assert_eq!(entries(&dir.join("")), ["out.json"]);
    }

    #[test]
    fn a_new_path_is_created_and_an_uncommitted_one_is_not() {
        let dir = TempDir::new("output-new");
        let dest = dir.join("new.csv");
        let output = OutputPath::check(&dest).expect("check");
        let mut file = output.open().expect("open");
        file.write_all(b"half").expect("write");
        drop(file);
        assert!(entries(&dir.join("")).is_empty(), "nothing left behind");
        output.write_all(b"whole").expect("write");
        assert_eq!(std::fs::read(&dest).expect("read"), b"whole");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_stays_and_its_target_is_replaced_in_the_target_directory() {
        let dir = TempDir::new("output-symlink");
        std::fs::create_dir(dir.join("real")).expect("mkdir");
        let target = dir.join("real").join("data.bin");
        std::fs::write(&target, b"old").expect("write");
        let link = dir.join("link.bin");
        std::os::unix::fs::symlink("real/data.bin", &link).expect("symlink");
        let output = OutputPath::check(&link).expect("check");
        let file = output.open().expect("open");
        let temp = file.temporary_path().expect("a temporary file").to_owned();
        assert_eq!(temp.parent(), target.parent(), "beside the target");
        let mut file = file;
        file.write_all(b"new").expect("write");
        file.commit().expect("commit");
        let meta = std::fs::symlink_metadata(&link).expect("lstat");
        assert!(meta.file_type().is_symlink(), "the link stays a link");
        assert_eq!(std::fs::read(&target).expect("read"), b"new");
        // A dangling link creates its target.
        let dangling = dir.join("dangling");
        std::os::unix::fs::symlink("real/created.bin", &dangling).expect("symlink");
        OutputPath::check(&dangling)
            .expect("check")
            .write_all(b"x")
            .expect("write");
        assert_eq!(
            std::fs::read(dir.join("real/created.bin")).expect("read"),
            b"x"
        );
        assert!(
            std::fs::symlink_metadata(&dangling)
                .expect("lstat")
                .file_type()
                .is_symlink()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_is_an_error() {
        let dir = TempDir::new("output-loop");
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::os::unix::fs::symlink(&b, &a).expect("symlink");
        std::os::unix::fs::symlink(&a, &b).expect("symlink");
        let err = OutputPath::check(&a).expect_err("a loop");
        assert!(matches!(err, OutputError::SymlinkLoop(_)), "{err}");
    }

    #[test]
    fn a_directory_and_a_missing_directory_are_refused_at_check() {
        let dir = TempDir::new("output-dir");
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let err = OutputPath::check(&sub).expect_err("a directory");
        assert_eq!(err.to_string(), format!("{} is a directory", sub.display()));
        let missing = dir.join("no/such/dir/x.json");
        let err = OutputPath::check(&missing).expect_err("missing directory");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot write {}: directory {} does not exist",
                missing.display(),
                dir.join("no/such/dir").display()
            )
        );
    }

    #[test]
    fn dash_is_stdout() {
        let output = OutputPath::check(Path::new("-")).expect("check");
        assert!(output.is_stdout());
        assert!(!Path::new("-").exists(), "no file named -");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_is_written_through() {
        let dir = TempDir::new("output-fifo");
        let fifo = dir.join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        let output = OutputPath::check(&fifo).expect("check");
        assert_eq!(
            output.kind(),
            &OutputKind::WriteThrough {
                target: fifo.clone()
            }
        );
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).expect("read the fifo"))
        };
        output.write_all(b"through the pipe").expect("write");
        assert_eq!(reader.join().expect("reader"), b"through the pipe");
        let meta = std::fs::symlink_metadata(&fifo).expect("lstat");
        use std::os::unix::fs::FileTypeExt;
        assert!(meta.file_type().is_fifo(), "still a FIFO");
    }

    /// A character device made with mknod (as root; skipped otherwise,
    /// saying so): the 1:3 node, which is what /dev/null is.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_character_device_is_written_through_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = TempDir::new("output-chardev");
        let node = dir.join("null");
        let made = std::process::Command::new("mknod")
            .arg(&node)
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|status| status.success());
        if !made {
            eprintln!("skipped: mknod needs root");
            return;
        }
        let output = OutputPath::check(&node).expect("check");
        assert!(matches!(output.kind(), OutputKind::WriteThrough { .. }));
        output.write_all(b"discarded").expect("write");
        let meta = std::fs::symlink_metadata(&node).expect("lstat");
        assert!(meta.file_type().is_char_device(), "still a device");
        assert_eq!(entries(&dir.join("")), ["null"]);
    }
}
