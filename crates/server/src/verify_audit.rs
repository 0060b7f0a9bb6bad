//! `aesd verify-audit FILE [FILE...]`: checks the audit log's hash chain
//! ([`crate::audit_chain`]) across the files given, oldest first. The
//! chain key never leaves aesd: the running, unsealed aesd named by
//! `BAO_ADDR` checks the MACs (`sys/audit-chain/verify`, a root token in
//! `BAO_TOKEN`), batch by batch, and answers only which line is the first
//! that does not verify. Exit 0: intact; 1: the first bad line is named
//! (by file and line number, and why); 2: usage, file or connection
//! errors.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::audit_chain::{self, ChainValue, Link};
use crate::bao_client::{BaoClient, BaoError};

/// Keyed lines sent per request.
const BATCH: usize = 2048;

/// What `--help` says.
const HELP: &str = "\
Usage: aesd verify-audit FILE [FILE...]

Checks the hash chain of aesd's audit log (--audit-log): every line ends with
\"chain\":\"hmac-sha256:HEX\", an HMAC over the line and the keyed line before it,
under a key derived from the keyring's audit salt that never leaves aesd. Give
the files oldest first (FILE.2 FILE.1 FILE); the chain runs across them.

The running, unsealed aesd that wrote them checks the MACs: BAO_ADDR names its
HTTP API (default http://127.0.0.1:8200; plain HTTP), BAO_TOKEN a token with
update and sudo on sys/audit-chain/verify (the root token). Only whether each
MAC matches comes back, never a MAC or the key.

Exit status:
  0  intact: every keyed line verifies, in order, none missing
  1  the first bad line is named (FILE line N) and why: not JSON, no chain
     member, a MAC mismatch (this line was changed, or a line before it was
     removed, inserted or moved), an anchor naming another previous line
     (a file or lines missing, or files out of order), an incomplete last line
  2  usage error, a file that cannot be read, aesd unreachable or refusing
     (sealed, a token without sudo)

Lines written while aesd was sealed carry \"chain\":\"sealed\" (no key then):
they are counted and reported as not verifiable. Lines removed from the end
of the newest file cannot be told from a log that ends there.";

/// A line that fails, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The file.
    pub file: PathBuf,
    /// Its line number, from 1.
    pub line: u64,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {}: {}",
            self.file.display(),
            self.line,
            self.why
        )
    }
}

/// What a whole run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every keyed line verified.
    Intact {
        /// Lines read.
        lines: u64,
        /// Keyed lines verified.
        keyed: u64,
        /// Lines written while sealed (not verifiable).
        sealed: u64,
    },
    /// The first bad line.
    Bad(BadLine),
}

/// Why a run could not come to a verdict.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A file could not be read.
    #[error("{}: {err}", path.display())]
    File {
        /// Which.
        path: PathBuf,
        /// Why.
        err: std::io::Error,
    },
    /// aesd could not check a batch.
    #[error(transparent)]
    Bao(#[from] BaoError),
    /// aesd's answer is not what `sys/audit-chain/verify` gives.
    #[error("aesd's answer to sys/audit-chain/verify is malformed: {0}")]
    Answer(String),
}

/// Checks batches of keyed lines: the index of the first whose MAC does
/// not follow (`previous` the MAC before the batch).
pub trait BatchCheck {
    /// The first mismatch in `entries` (digest, claimed MAC), if any.
    fn first_mismatch(
        &mut self,
        previous: Option<&Link>,
        entries: &[(Link, Link)],
    ) -> Result<Option<usize>, VerifyError>;
}

/// The running aesd checks them (`sys/audit-chain/verify`).
impl BatchCheck for BaoClient {
    fn first_mismatch(
        &mut self,
        previous: Option<&Link>,
        entries: &[(Link, Link)],
    ) -> Result<Option<usize>, VerifyError> {
        let mut hex = String::with_capacity(entries.len() * 128);
        for (digest, mac) in entries {
            hex.push_str(&audit_chain::to_hex(digest));
            hex.push_str(&audit_chain::to_hex(mac));
        }
        let answer = self.post(
            "sys/audit-chain/verify",
            &json!({
                "previous": previous.map(|l| audit_chain::to_hex(l)).unwrap_or_default(),
                "entries": hex,
            }),
        )?;
        let data = &answer["data"];
        match &data["first_mismatch"] {
            Value::Null if data["verified"].as_u64() == Some(entries.len() as u64) => Ok(None),
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n < entries.len())
                .map(Some)
                .ok_or_else(|| VerifyError::Answer(answer.to_string())),
            _ => Err(VerifyError::Answer(answer.to_string())),
        }
    }
}

/// Where a keyed line waiting in a batch is.
struct Pending {
    entries: Vec<(Link, Link)>,
    places: Vec<(usize, u64)>,
    /// The MAC the batch follows.
    start: Option<Link>,
}

/// The run's state across files.
struct Run<'a, C: BatchCheck> {
    check: &'a mut C,
    files: &'a [PathBuf],
    pending: Pending,
    /// The last keyed line's claimed MAC (verified once its batch is).
    previous: Option<Link>,
    lines: u64,
    keyed: u64,
    sealed: u64,
}

impl<C: BatchCheck> Run<'_, C> {
    /// Sends the pending batch: the first bad line in it, if any.
    fn flush(&mut self) -> Result<Option<BadLine>, VerifyError> {
        if self.pending.entries.is_empty() {
            return Ok(None);
        }
        let found = self
            .check
            .first_mismatch(self.pending.start.as_ref(), &self.pending.entries)?;
        self.keyed += found.unwrap_or(self.pending.entries.len()) as u64;
        let bad = found.map(|index| {
            let (file, line) = self.pending.places[index];
            BadLine {
                file: self.files[file].clone(),
                line,
                why: "MAC mismatch: this line was changed, or a line before it was removed, inserted or moved".to_owned(),
            }
        });
        self.pending.entries.clear();
        self.pending.places.clear();
        self.pending.start = self.previous;
        Ok(bad)
    }

    /// A line found bad on its own: first any earlier line of the batch.
    fn bad(&mut self, file: usize, line: u64, why: String) -> Result<Verdict, VerifyError> {
        if let Some(earlier) = self.flush()? {
            return Ok(Verdict::Bad(earlier));
        }
        Ok(Verdict::Bad(BadLine {
            file: self.files[file].clone(),
            line,
            why,
        }))
    }
}

/// Checks `files` in order with `check`.
pub fn verify(files: &[PathBuf], check: &mut impl BatchCheck) -> Result<Verdict, VerifyError> {
    let mut run = Run {
        check,
        files,
        pending: Pending {
            entries: Vec::with_capacity(BATCH),
            places: Vec::with_capacity(BATCH),
            start: None,
        },
        previous: None,
        lines: 0,
        keyed: 0,
        sealed: 0,
    };
    for (index, path) in files.iter().enumerate() {
        let failed = |err| VerifyError::File {
            path: path.clone(),
            err,
        };
        let file = File::open(path).map_err(failed)?;
        // What is there now: lines aesd appends meanwhile (the requests
        // of this very check among them) are left for the next run.
        let len = file.metadata().map_err(failed)?.len();
        let mut reader = BufReader::new(file.take(len));
        let mut line = Vec::new();
        let mut number = 0u64;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).map_err(failed)? == 0 {
                break;
            }
            number += 1;
            run.lines += 1;
            let Some(text) = line.strip_suffix(b"\n") else {
                return run.bad(
                    index,
                    number,
                    "incomplete line (no newline at its end)".into(),
                );
            };
            let Ok(parsed) = serde_json::from_slice::<Value>(text) else {
                return run.bad(index, number, "not JSON".into());
            };
            let (body, value) = match audit_chain::split_line(text) {
                Ok(split) => split,
                Err(err) => return run.bad(index, number, err.to_string()),
            };
            if parsed["type"] == audit_chain::ANCHOR_TYPE {
                let named = match &parsed["previous"] {
                    Value::Null => None,
                    Value::String(hex) => Some(audit_chain::from_hex(hex.as_bytes())),
                    _ => Some(None),
                };
                let first = index == 0 && number == 1;
                match named {
                    Some(None) => {
                        return run.bad(index, number, "anchor with a malformed previous".into());
                    }
                    Some(Some(link)) if first => {
                        run.previous = Some(link);
                        run.pending.start = Some(link);
                    }
                    named if !first && named.flatten() != run.previous => {
                        return run.bad(
                            index,
                            number,
                            "anchor names another previous line than the chain's: lines or a file missing before it, or files out of order".into(),
                        );
                    }
                    _ => {}
                }
            }
            match value {
                ChainValue::Sealed => run.sealed += 1,
                ChainValue::Mac(mac) => {
                    run.pending.entries.push((audit_chain::digest(&body), mac));
                    run.pending.places.push((index, number));
                    run.previous = Some(mac);
                    if run.pending.entries.len() == BATCH
                        && let Some(bad) = run.flush()?
                    {
                        return Ok(Verdict::Bad(bad));
                    }
                }
            }
        }
    }
    if let Some(bad) = run.flush()? {
        return Ok(Verdict::Bad(bad));
    }
    Ok(Verdict::Intact {
        lines: run.lines,
        keyed: run.keyed,
        sealed: run.sealed,
    })
}

/// `aesd verify-audit ARGS...` (the arguments after the subcommand).
pub fn main(args: &[std::ffi::OsString]) -> ExitCode {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{HELP}");
        return ExitCode::SUCCESS;
    }
    if let Some(flag) = args
        .iter()
        .find(|a| a.to_str().is_some_and(|a| a.starts_with('-') && a != "-"))
    {
        eprintln!(
            "aesd verify-audit: unknown option {}\n\n{HELP}",
            Path::new(flag).display()
        );
        return ExitCode::from(2);
    }
    if args.is_empty() {
        eprintln!("aesd verify-audit: no FILE given\n\n{HELP}");
        return ExitCode::from(2);
    }
    let files: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    let mut client = match BaoClient::from_env() {
        Ok(client) => client,
        Err(err) => {
            eprintln!("aesd verify-audit: {err}");
            return ExitCode::from(2);
        }
    };
    match verify(&files, &mut client) {
        Ok(Verdict::Intact {
            lines,
            keyed,
            sealed,
        }) => {
            println!(
                "intact: {lines} lines in {} file(s); {keyed} chained lines verified by aesd at {}; {sealed} written while sealed (no MAC: not verifiable)",
                files.len(),
                client.addr()
            );
            ExitCode::SUCCESS
        }
        Ok(Verdict::Bad(bad)) => {
            println!("TAMPERED: {bad}");
            ExitCode::from(1)
        }
        Err(err) => {
            eprintln!("aesd verify-audit: {err}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit_chain::ChainKey;
    use crate::audit_file::AuditFile;
    use aesd_keyring::SecretKey;

    /// Checks as aesd does, with the key at hand, counting requests.
    struct Local(ChainKey, usize);

    impl BatchCheck for Local {
        fn first_mismatch(
            &mut self,
            previous: Option<&Link>,
            entries: &[(Link, Link)],
        ) -> Result<Option<usize>, VerifyError> {
            self.1 += 1;
            let mut previous = previous.copied();
            for (index, (digest, mac)) in entries.iter().enumerate() {
                if !self.0.verify(previous.as_ref(), digest, mac) {
                    return Ok(Some(index));
                }
                previous = Some(*mac);
            }
            Ok(None)
        }
    }

    fn salt() -> SecretKey {
        SecretKey::from_bytes([3; 32])
    }

    fn local() -> Local {
        Local(ChainKey::derive(&salt()), 0)
    }

    /// A log of `n` keyed lines (and a sealed one after the third).
    fn log(dir: &Path, n: usize) -> PathBuf {
        let path = dir.join("audit.log");
        let file = AuditFile::open(&path, None).expect("open");
        for i in 0..n {
            file.append(format!(r#"{{"n":{i}}}"#).as_bytes(), Some(&salt()))
                .expect("append");
            if i == 2 {
                file.append(br#"{"sealed":1}"#, None).expect("append");
            }
        }
        path
    }

    fn edit(path: &Path, change: impl FnOnce(&mut Vec<String>)) {
        let text = std::fs::read_to_string(path).expect("read");
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        change(&mut lines);
        std::fs::write(path, lines.join("\n") + "\n").expect("write");
    }

    fn bad_line(path: &Path) -> (u64, String) {
        match verify(&[path.to_owned()], &mut local()).expect("verdict") {
            Verdict::Bad(bad) => (bad.line, bad.why),
            intact => panic!("not caught: {intact:?}"),
        }
    }

    #[test]
    fn an_intact_log_verifies_in_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = log(dir.path(), BATCH + 10);
        let mut check = local();
        let verdict = verify(&[path], &mut check).expect("verdict");
        assert_eq!(
            verdict,
            Verdict::Intact {
                lines: BATCH as u64 + 12,
                keyed: BATCH as u64 + 11,
                sealed: 1
            }
        );
        assert_eq!(check.1, 2, "two batches");
    }

    #[test]
    fn a_changed_byte_a_removed_line_and_swapped_lines_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = log(dir.path(), 8);
        let pristine = std::fs::read(&path).expect("read");
        // Line 6 (after the anchor, n=0..2 and the sealed line): n=3.
        edit(&path, |lines| {
            lines[5] = lines[5].replace("\"n\":3", "\"n\":9")
        });
        let (line, why) = bad_line(&path);
        assert_eq!(line, 6);
        assert!(why.starts_with("MAC mismatch"), "{why}");
        std::fs::write(&path, &pristine).expect("restore");
        edit(&path, |lines| {
            lines.remove(3);
        });
        assert_eq!(bad_line(&path).0, 5, "the keyed line after the removed one");
        std::fs::write(&path, &pristine).expect("restore");
        edit(&path, |lines| lines.swap(6, 7));
        assert_eq!(bad_line(&path).0, 7);
        std::fs::write(&path, &pristine).expect("restore");
        edit(&path, |lines| lines[2].push('x'));
        assert_eq!(bad_line(&path), (3, "not JSON".to_owned()));
        std::fs::write(&path, &pristine).expect("restore");
        // A sealed line is not verifiable: changing it is not caught
        // (what the docs say), but removing its chain member is.
        edit(&path, |lines| {
            lines[4] = lines[4].replace(",\"chain\":\"sealed\"", "");
        });
        assert_eq!(bad_line(&path).0, 5);
        std::fs::write(&path, &pristine).expect("restore");
        assert!(matches!(
            verify(std::slice::from_ref(&path), &mut local()).expect("verdict"),
            Verdict::Intact { .. }
        ));
        // Another key: the first keyed line fails.
        let mut other = Local(ChainKey::derive(&SecretKey::from_bytes([4; 32])), 0);
        match verify(&[path], &mut other).expect("verdict") {
            Verdict::Bad(bad) => assert_eq!(bad.line, 1),
            intact => panic!("{intact:?}"),
        }
    }

    #[test]
    fn files_out_of_order_or_missing_are_caught_at_the_anchor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let file = AuditFile::open(&path, None).expect("open");
        let mut rotated = Vec::new();
        for round in 1..=3 {
            file.append(format!(r#"{{"round":{round}}}"#).as_bytes(), Some(&salt()))
                .expect("append");
            let old = dir.path().join(format!("audit.log.{round}"));
            std::fs::rename(&path, &old).expect("rename");
            rotated.push(old);
        }
        file.append(br#"{"round":4}"#, Some(&salt()))
            .expect("append");
        rotated.push(path);
        let intact = verify(&rotated, &mut local()).expect("verdict");
        assert!(
            matches!(intact, Verdict::Intact { keyed: 8, .. }),
            "{intact:?}"
        );
        // From the second file on: its anchor says where it starts.
        assert!(matches!(
            verify(&rotated[1..], &mut local()).expect("verdict"),
            Verdict::Intact { .. }
        ));
        let missing = [rotated[0].clone(), rotated[2].clone()];
        match verify(&missing, &mut local()).expect("verdict") {
            Verdict::Bad(bad) => {
                assert_eq!((bad.file.clone(), bad.line), (rotated[2].clone(), 1));
                assert!(bad.why.starts_with("anchor"), "{bad}");
            }
            intact => panic!("{intact:?}"),
        }
        let swapped = [rotated[1].clone(), rotated[0].clone()];
        assert!(matches!(
            verify(&swapped, &mut local()).expect("verdict"),
            Verdict::Bad(_)
        ));
    }
}
