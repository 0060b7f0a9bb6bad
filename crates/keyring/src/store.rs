//! Where sealed keyrings are kept, behind one small trait that a
//! directory ([`DirStore`], `--keyring DIR`), memory ([`MemoryStore`],
//! `--dev`) and etcd (aesd-server's `etcd` module: a transaction
//! comparing the generation) all implement: read the newest generation;
//! store generation N + 1 only if the newest is still N.
//!
//! The directory store is crash-safe: a generation is written to a
//! temporary file, fsynced, renamed to its final name and the directory
//! fsynced, so after `kill -9` or a power loss the directory holds the
//! old generation or the new one, never a torn one; a reader ignores
//! temporary files and checks each candidate's SHA-256 trailer, header
//! and generation before taking it. A directory it creates is mode 0700,
//! its files 0600 (sealed, but nobody else's business).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::sealed::{self, MAX_SEALED_LEN};

/// The newest good sealed keyring a store holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its generation.
    pub generation: u64,
    /// The sealed bytes ([`crate::sealed`]).
    pub sealed: Vec<u8>,
    /// Newer generations that were present but unusable (torn, corrupt),
    /// newest first: the server reports them loudly.
    pub skipped: Vec<Skipped>,
}

/// A generation the reader passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The generation its name claims.
    pub generation: u64,
    /// Why it was not taken.
    pub reason: String,
}

/// Why a store could not read or write.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Another writer stored a generation first (compare-and-put lost):
    /// reload and retry.
    #[error("keyring generation {generation} cannot be stored: the newest stored is {newest}")]
    Conflict {
        /// The generation offered.
        generation: u64,
        /// The newest generation the store holds.
        newest: u64,
    },
    /// An I/O step failed (full disk, read-only directory, permissions);
    /// the previous generation is kept.
    #[error("keyring store: {step} {path}: {source}")]
    Io {
        /// What was being done.
        step: &'static str,
        /// On which file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Generations are present but none is readable: refused rather than
    /// taken for an empty store (which would invite a new `init`).
    #[error("keyring store holds generations but none is readable: {}", describe(.0))]
    NothingReadable(Vec<Skipped>),
    /// The store cannot be reached (a network store: every endpoint down,
    /// timed out, or without quorum); the stored keyring is unchanged as
    /// far as this writer knows.
    #[error("keyring store {store} is unreachable: {reason}")]
    Unavailable {
        /// Which store (its endpoints, never a credential).
        store: String,
        /// What failed, per endpoint.
        reason: String,
    },
    /// The store answered with something that is not a keyring
    /// generation this build can take (a malformed reply, a generation
    /// that disagrees with its sealed header).
    #[error("keyring store {store}: {reason}")]
    Invalid {
        /// Which store.
        store: String,
        /// What is wrong.
        reason: String,
    },
    /// A sealed keyring above [`MAX_SEALED_LEN`].
    #[error("sealed keyring of {0} bytes is above the 8 MiB limit")]
    TooLarge(usize),
}

fn describe(skipped: &[Skipped]) -> String {
    skipped
        .iter()
        .map(|s| format!("generation {}: {}", s.generation, s.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Storage for sealed keyrings with compare-and-put on the generation.
pub trait KeyringStore {
    /// The newest good generation, or `None` when nothing was ever
    /// stored ([`StoreError::NothingReadable`] when something was but
    /// none of it is good).
    fn load_newest(&self) -> Result<Option<Stored>, StoreError>;

    /// Stores `sealed` as `generation`, only if the newest stored
    /// generation is `generation - 1` (0: none); otherwise
    /// [`StoreError::Conflict`]. On an error the store is unchanged,
    /// except when the last step fails (the directory's fsync after the
    /// rename): then the new generation may or may not survive a power
    /// loss, and the caller reloads ([`KeyringStore::load_newest`] says
    /// which) before writing again.
    fn put(&self, generation: u64, sealed: &[u8]) -> Result<(), StoreError>;
}

/// An in-memory store (`--dev`, tests).
#[derive(Debug, Default)]
pub struct MemoryStore {
    newest: Mutex<Option<(u64, Vec<u8>)>>,
}

impl KeyringStore for MemoryStore {
    fn load_newest(&self) -> Result<Option<Stored>, StoreError> {
        let guard = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        Ok(guard.as_ref().map(|(generation, sealed)| Stored {
            generation: *generation,
            sealed: sealed.clone(),
            skipped: Vec::new(),
        }))
    }

    fn put(&self, generation: u64, sealed: &[u8]) -> Result<(), StoreError> {
        if sealed.len() > MAX_SEALED_LEN {
            return Err(StoreError::TooLarge(sealed.len()));
        }
        let mut guard = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        let newest = guard.as_ref().map_or(0, |(g, _)| *g);
        if generation != newest + 1 {
            return Err(StoreError::Conflict { generation, newest });
        }
        *guard = Some((generation, sealed.to_vec()));
        Ok(())
    }
}

/// How many committed generations a directory keeps (the newest and one
/// before it, the fallback if the newest is ever damaged).
pub const KEEP_GENERATIONS: usize = 2;

const TRAILER_LEN: usize = 32;

/// Sealed keyrings as files in a directory: `keyring-<generation, 20
/// digits>.sealed`, each the sealed bytes followed by their SHA-256;
/// `.keyring-<generation>.tmp` while being written; `.lock` held during a
/// write, so processes sharing the directory take turns.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
}

/// Where a write stops in the crash tests (the process "dies" there).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Half the temporary file written.
    PartialWrite,
    /// Temporary file written, not fsynced.
    BeforeSync,
    /// Temporary file fsynced, not renamed.
    BeforeRename,
    /// Renamed, directory not fsynced.
    BeforeDirSync,
}

fn io_err(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { step, path, source }
}

impl DirStore {
    /// A store in `dir` (created if missing).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io_err("creating directory", &dir))?;
        Ok(DirStore { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn final_path(&self, generation: u64) -> PathBuf {
        self.dir.join(format!("keyring-{generation:020}.sealed"))
    }

    fn temp_path(&self, generation: u64) -> PathBuf {
        self.dir.join(format!(".keyring-{generation:020}.tmp"))
    }

    /// Committed generations by name, newest first, and stale temporary
    /// files.
    fn scan(&self) -> Result<(Vec<u64>, Vec<PathBuf>), StoreError> {
        let mut generations = Vec::new();
        let mut temps = Vec::new();
        let entries = fs::read_dir(&self.dir).map_err(io_err("listing", &self.dir))?;
        for entry in entries {
            let entry = entry.map_err(io_err("listing", &self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(digits) = name
                .strip_prefix("keyring-")
                .and_then(|rest| rest.strip_suffix(".sealed"))
            {
                if digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()) {
                    if let Ok(generation) = digits.parse::<u64>() {
                        generations.push(generation);
                    }
                }
            } else if name.starts_with(".keyring-") && name.ends_with(".tmp") {
                temps.push(entry.path());
            }
        }
        generations.sort_unstable_by(|a, b| b.cmp(a));
        Ok((generations, temps))
    }

    fn read_checked(&self, generation: u64) -> Result<Vec<u8>, String> {
        let path = self.final_path(generation);
        let file = File::open(&path).map_err(|e| format!("open: {e}"))?;
        let mut bytes = Vec::new();
        file.take((MAX_SEALED_LEN + TRAILER_LEN + 1) as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("read: {e}"))?;
        if bytes.len() > MAX_SEALED_LEN + TRAILER_LEN {
            return Err("larger than a sealed keyring can be".into());
        }
        if bytes.len() < TRAILER_LEN {
            return Err(format!("torn: {} bytes", bytes.len()));
        }
        let (sealed, trailer) = bytes.split_at(bytes.len() - TRAILER_LEN);
        if Sha256::digest(sealed).as_slice() != trailer {
            return Err("torn or corrupt: SHA-256 trailer does not match".into());
        }
        let header = sealed::read_header(sealed).map_err(|e| e.to_string())?;
        if header.generation != generation {
            return Err(format!(
                "header says generation {}, file name {generation}",
                header.generation
            ));
        }
        bytes.truncate(bytes.len() - TRAILER_LEN);
        Ok(bytes)
    }

    fn lock(&self) -> Result<File, StoreError> {
        let path = self.dir.join(".lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_err("opening lock file", &path))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(io::Error::from)
            .map_err(io_err("locking", &path))?;
        Ok(file)
    }

    fn sync_dir(&self) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("fsync of directory", &self.dir))
    }

    /// [`KeyringStore::put`], stopping at `crash` as a killed process
    /// would (nothing cleaned up).
    #[doc(hidden)]
    pub fn put_until(
        &self,
        generation: u64,
        sealed: &[u8],
        crash: Option<CrashPoint>,
    ) -> Result<(), StoreError> {
        if sealed.len() > MAX_SEALED_LEN {
            return Err(StoreError::TooLarge(sealed.len()));
        }
        let _lock = self.lock()?;
        let (generations, temps) = self.scan()?;
        // Under the lock no one else is writing: temporary files are
        // leftovers of a crash.
        for temp in temps {
            let _ = fs::remove_file(temp);
        }
        let newest = generations.first().copied().unwrap_or(0);
        if generation != newest + 1 {
            return Err(StoreError::Conflict { generation, newest });
        }
        let temp = self.temp_path(generation);
        let result = self.write_temp(&temp, sealed, crash);
        if crash.is_some_and(|c| c != CrashPoint::BeforeDirSync) {
            return result;
        }
        if let Err(err) = result {
            let _ = fs::remove_file(&temp);
            return Err(err);
        }
        let path = self.final_path(generation);
        if let Err(source) = fs::rename(&temp, &path) {
            let _ = fs::remove_file(&temp);
            return Err(StoreError::Io {
                step: "renaming into place",
                path,
                source,
            });
        }
        if crash == Some(CrashPoint::BeforeDirSync) {
            return Ok(());
        }
        self.sync_dir()?;
        for old in generations.iter().skip(KEEP_GENERATIONS - 1) {
            let _ = fs::remove_file(self.final_path(*old));
        }
        Ok(())
    }

    fn write_temp(
        &self,
        temp: &Path,
        sealed: &[u8],
        crash: Option<CrashPoint>,
    ) -> Result<(), StoreError> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp)
            .map_err(io_err("creating", temp))?;
        if crash == Some(CrashPoint::PartialWrite) {
            return file
                .write_all(&sealed[..sealed.len() / 2])
                .map_err(io_err("writing", temp));
        }
        let digest = Sha256::digest(sealed);
        file.write_all(sealed)
            .and_then(|()| file.write_all(&digest))
            .map_err(io_err("writing", temp))?;
        if crash == Some(CrashPoint::BeforeSync) {
            return Ok(());
        }
        file.sync_all().map_err(io_err("fsync", temp))?;
        Ok(())
    }
}

impl KeyringStore for DirStore {
    fn load_newest(&self) -> Result<Option<Stored>, StoreError> {
        let (generations, _) = self.scan()?;
        let mut skipped = Vec::new();
        for generation in generations {
            match self.read_checked(generation) {
                Ok(sealed) => {
                    return Ok(Some(Stored {
                        generation,
                        sealed,
                        skipped,
                    }));
                }
                Err(reason) => skipped.push(Skipped { generation, reason }),
            }
        }
        if skipped.is_empty() {
            Ok(None)
        } else {
            Err(StoreError::NothingReadable(skipped))
        }
    }

    fn put(&self, generation: u64, sealed: &[u8]) -> Result<(), StoreError> {
        self.put_until(generation, sealed, None)
    }
}
