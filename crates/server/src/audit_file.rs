//! The audit log's file (`--audit-log FILE`): opened append-only with
//! mode 0600, one `write` per line, and reopened when the path no longer
//! names the file held (logrotate renamed or removed it): every line
//! checks the path's inode first, so no signal is needed. A line that
//! cannot be written in full is an error: the caller refuses the request.
//!
//! Every line is chained to the keyed line before it ([`crate::audit_chain`])
//! under the one lock that orders the writes. After a start, a rename or
//! removal, a truncation, or a rotation of its own (`--audit-log-max-bytes`:
//! FILE → FILE.1 → ... → FILE.N, the oldest dropped), the next line is
//! preceded by an anchor line naming the last keyed line's MAC. At start
//! that MAC is read back from the end of FILE (or of FILE.1 when FILE is
//! empty or missing), so a restart continues the chain.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use aesd_keyring::SecretKey;
use serde_json::json;

use crate::audit_chain::{self, ChainKey, ChainValue, Link};

/// How much of a file's end is read at a time when looking for its last
/// keyed line at start.
const TAIL_BLOCK: u64 = 64 << 10;

/// The size bound of `--audit-log-max-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// A line that would take the file past this many bytes goes to a
    /// new file first (a line longer than this alone is still written).
    pub max_bytes: u64,
    /// Rotated files kept (FILE.1 ... FILE.keep); at least 1.
    pub keep: u32,
}

/// The audit log's file, shared by every request.
#[derive(Debug)]
pub struct AuditFile {
    path: PathBuf,
    rotation: Option<Rotation>,
    inner: Mutex<Inner>,
}

/// The file and the chain, under the one lock.
#[derive(Debug)]
struct Inner {
    held: Option<Held>,
    /// The last keyed line's MAC (none: no keyed line yet).
    previous: Option<Link>,
    /// Why an anchor line must come before the next line, if one must.
    anchor: Option<&'static str>,
    /// The chain key, with the salt it was derived from.
    key: Option<(SecretKey, ChainKey)>,
}

/// The open file, the identity (device, inode) it had when opened and
/// the size it has after the last write.
#[derive(Debug)]
struct Held {
    file: File,
    identity: (u64, u64),
    len: u64,
}

impl AuditFile {
    /// Opens (creates) `path` now, so a path that cannot be written stops
    /// aesd at start rather than its first request; reads back where the
    /// chain stands (the last keyed line's MAC).
    pub fn open(path: &Path, rotation: Option<Rotation>) -> io::Result<Self> {
        let held = open_append(path)?;
        let mut previous = last_link(&held.file)?;
        if previous.is_none() && held.len == 0 {
            previous = match File::open(numbered(path, 1)) {
                Ok(older) => last_link(&older)?,
                Err(_) => None,
            };
        }
        Ok(AuditFile {
            path: path.to_owned(),
            rotation,
            inner: Mutex::new(Inner {
                held: Some(held),
                previous,
                anchor: Some("start"),
                key: None,
            }),
        })
    }

    /// The path given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (a compact JSON object) with its chain member (a
    /// MAC under the key derived from `salt`, or `sealed` without one)
    /// and a newline, with one `write` (after an anchor line when one is
    /// due): the file is reopened first if the path names another file or
    /// none, and rotated if the line would take it past the size bound.
    /// A failed or short write is an error, and the chain does not move.
    pub fn append(&self, line: &[u8], salt: Option<&SecretKey>) -> io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let inner = &mut *inner;
        let key = salt.map(|salt| chain_key(&mut inner.key, salt));
        let current = std::fs::metadata(&self.path)
            .ok()
            .map(|m| ((m.dev(), m.ino()), m.len()));
        match (&mut inner.held, current) {
            (Some(held), Some((identity, len))) if held.identity == identity => {
                if len < held.len {
                    // Truncated in place (copytruncate, or by hand).
                    inner.anchor.get_or_insert("truncated");
                }
                held.len = len;
            }
            _ => {
                // Renamed, removed or replaced: a new file at the path.
                inner.held = None;
                inner.held = Some(open_append(&self.path)?);
                inner.anchor.get_or_insert("reopened");
            }
        }
        let mut previous = inner.previous;
        let mut buffer = Vec::with_capacity(line.len() + 200);
        let anchor_line = |why: &str, previous: Option<&Link>| {
            let anchor = json!({
                "time": crate::http::rfc3339_now(),
                "type": audit_chain::ANCHOR_TYPE,
                "event": why,
                "previous": previous.map(|link| audit_chain::to_hex(link)),
                "pid": std::process::id(),
            });
            serde_json::to_vec(&anchor).expect("a JSON object serialises")
        };
        let mut anchor = inner.anchor;
        if let (Some(rotation), Some(held)) = (self.rotation, &inner.held)
            && held.len > 0
            && held.len + line.len() as u64 + 120 > rotation.max_bytes
        {
            self.rotate(rotation)?;
            inner.held = Some(open_append(&self.path)?);
            anchor = Some("rotated");
        }
        if let Some(why) = anchor {
            let (sealed, link) = audit_chain::seal_line(
                &anchor_line(why, previous.as_ref()),
                key,
                previous.as_ref(),
            );
            buffer.extend_from_slice(&sealed);
            buffer.push(b'\n');
            previous = link.or(previous);
        }
        let (sealed, link) = audit_chain::seal_line(line, key, previous.as_ref());
        buffer.extend_from_slice(&sealed);
        buffer.push(b'\n');
        previous = link.or(previous);
        let Some(open) = inner.held.as_mut() else {
            return Err(io::Error::other("audit log not open"));
        };
        let written = open.file.write(&buffer)?;
        open.len += written as u64;
        if written != buffer.len() {
            // The chain does not move: the torn line stays in the file,
            // and the verifier names it.
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {written} of {} bytes", buffer.len()),
            ));
        }
        inner.previous = previous;
        inner.anchor = None;
        Ok(())
    }

    /// FILE.(keep-1) → FILE.keep ... FILE → FILE.1.
    fn rotate(&self, rotation: Rotation) -> io::Result<()> {
        for n in (1..rotation.keep.max(1)).rev() {
            match std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1)) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(&self.path, 1))
    }
}

/// The chain key for `salt`, derived once per salt.
fn chain_key<'a>(cache: &'a mut Option<(SecretKey, ChainKey)>, salt: &SecretKey) -> &'a ChainKey {
    use subtle::ConstantTimeEq;
    let fresh = match cache {
        Some((cached, _)) => !bool::from(cached.expose().ct_eq(salt.expose())),
        None => true,
    };
    if fresh {
        *cache = Some((salt.clone(), ChainKey::derive(salt)));
    }
    &cache.as_ref().expect("set just above").1
}

/// `path` with `.n` after it.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn open_append(path: &Path) -> io::Result<Held> {
    let file = OpenOptions::new()
        .append(true)
        .read(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::other("is a directory"));
    }
    Ok(Held {
        identity: (meta.dev(), meta.ino()),
        len: meta.len(),
        file,
    })
}

/// The MAC of the last keyed line of `file`, read backwards from its end
/// a block at a time (sealed lines after it are passed over).
fn last_link(file: &File) -> io::Result<Option<Link>> {
    let mut file = file;
    let len = file.metadata()?.len();
    let mut end = len;
    // Bytes of a line cut by the block's start, carried to the next block.
    let mut carry: Vec<u8> = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(TAIL_BLOCK);
        let mut block = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&carry);
        let mut lines: Vec<&[u8]> = block.split(|&b| b == b'\n').collect();
        // The first piece may be cut (unless the block starts the file).
        let cut = if start > 0 {
            Some(lines.remove(0))
        } else {
            None
        };
        for line in lines.iter().rev() {
            if let Ok((_, ChainValue::Mac(link))) = audit_chain::split_line(line) {
                return Ok(Some(link));
            }
        }
        carry = cut.map(<[u8]>::to_vec).unwrap_or_default();
        end = start;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::{AuditFile, Rotation, numbered};
    use crate::audit_chain::{self, ChainKey, ChainValue, Link};
    use aesd_keyring::SecretKey;
    use serde_json::Value;
    use std::path::Path;

    fn salt() -> SecretKey {
        SecretKey::from_bytes([5; 32])
    }

    /// The lines of `path`, checked as a verifier would from `previous`:
    /// the parsed lines and the last link.
    fn check(path: &Path, mut previous: Option<Link>) -> (Vec<Value>, Option<Link>) {
        let key = ChainKey::derive(&salt());
        let text = std::fs::read_to_string(path).expect("read");
        let mut all = Vec::new();
        for line in text.lines() {
            let parsed: Value = serde_json::from_str(line).expect("JSON");
            let (body, value) = audit_chain::split_line(line.as_bytes()).expect("chain");
            if parsed["type"] == audit_chain::ANCHOR_TYPE {
                assert_eq!(
                    parsed["previous"].as_str(),
                    previous.as_ref().map(|l| audit_chain::to_hex(l)).as_deref(),
                    "{line}"
                );
            }
            if let ChainValue::Mac(link) = value {
                assert!(
                    key.verify(previous.as_ref(), &audit_chain::digest(&body), &link),
                    "{line}"
                );
                previous = Some(link);
            }
            all.push(parsed);
        }
        (all, previous)
    }

    #[test]
    fn lines_are_chained_and_a_renamed_file_is_followed_by_an_anchored_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(&path, None).expect("open");
        log.append(br#"{"n":1}"#, Some(&salt())).expect("append");
        log.append(br#"{"n":2}"#, None).expect("append sealed");
        log.append(br#"{"n":3}"#, Some(&salt())).expect("append");
        std::fs::rename(&path, numbered(&path, 1)).expect("rename");
        log.append(br#"{"n":4}"#, Some(&salt())).expect("append");
        let (old, last) = check(&numbered(&path, 1), None);
        assert_eq!(old[0]["event"], "start");
        assert_eq!(old[0]["previous"], Value::Null);
        assert_eq!(old[2]["chain"], "sealed");
        assert_eq!(old.len(), 4);
        let (new, _) = check(&path, last);
        assert_eq!(new[0]["event"], "reopened");
        assert_eq!(new[1]["n"], 4);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Negative control: the new file alone, from the log's start,
        // does not verify (its anchor names the old file's last line).
        let caught = std::panic::catch_unwind(|| check(&path, None));
        assert!(caught.is_err());
    }

    #[test]
    fn a_restart_continues_the_chain_from_the_files_last_keyed_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(&path, None).expect("open");
        log.append(br#"{"n":1}"#, Some(&salt())).expect("append");
        log.append(br#"{"n":2}"#, None).expect("append sealed");
        drop(log);
        let log = AuditFile::open(&path, None).expect("reopen");
        log.append(br#"{"n":3}"#, Some(&salt())).expect("append");
        let (all, _) = check(&path, None);
        assert_eq!(all[3]["event"], "start");
        assert!(all[3]["previous"].is_string(), "{}", all[3]);
        // Rotated away while stopped: FILE.1's last line is the anchor.
        std::fs::rename(&path, numbered(&path, 1)).expect("rename");
        let (_, last) = check(&numbered(&path, 1), None);
        let log = AuditFile::open(&path, None).expect("fresh file");
        log.append(br#"{"n":4}"#, Some(&salt())).expect("append");
        check(&path, last);
    }

    #[test]
    fn the_size_bound_rotates_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_bytes: 400,
            keep: 2,
        };
        let log = AuditFile::open(&path, Some(rotation)).expect("open");
        for n in 0..12 {
            log.append(format!(r#"{{"n":{n}}}"#).as_bytes(), Some(&salt()))
                .expect("append");
        }
        assert!(!numbered(&path, 3).exists(), "only two kept");
        let mut previous = None;
        let mut seen = Vec::new();
        for file in [numbered(&path, 2), numbered(&path, 1), path.clone()] {
            let bytes = std::fs::metadata(&file).expect("exists").len();
            assert!(bytes <= rotation.max_bytes, "{} is {bytes}", file.display());
            let text = std::fs::read_to_string(&file).expect("read");
            let first: Value =
                serde_json::from_str(text.lines().next().expect("a line")).expect("JSON");
            if previous.is_none() {
                previous = first["previous"]
                    .as_str()
                    .and_then(|h| audit_chain::from_hex(h.as_bytes()));
            }
            let (all, last) = check(&file, previous);
            seen.extend(all.iter().filter_map(|l| l["n"].as_u64()));
            previous = last;
        }
        assert_eq!(seen.last(), Some(&11));
        assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
    }

    #[test]
    fn a_path_replaced_by_a_directory_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(&path, None).expect("open");
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("mkdir");
        assert!(log.append(b"{}", None).is_err());
    }
}
