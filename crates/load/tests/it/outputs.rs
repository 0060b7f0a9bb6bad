//! aesload's `--json/--csv/--plot` outputs by the one output rule (the
//! client library's `output` module): files replaced whole, symlinks
//! followed, devices and FIFOs written through, `-` for stdout, paths
//! checked before the run; and a stdout that closes early.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use aesd_testkit::TempDir;

/// A one-client run of 64 KiB against the embedded server, quiet.
const SMALL_RUN: &[&str] = &["--clients", "1", "--size", "64K", "--iter", "1", "--quiet"];

fn aesload(extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(SMALL_RUN)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run aesload")
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn is_json_document(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|value| {
        value["tool"]
            .as_str()
            .is_some_and(|tool| tool.starts_with("aesload"))
    })
}

#[test]
fn regular_new_and_symlinked_outputs_are_replaced_whole_and_links_stay() {
    let dir = TempDir::new("aesload-out-files");
    let existing = dir.join("old.json");
    std::fs::write(&existing, b"old").expect("write");
    let new_csv = dir.join("new.csv");
    std::fs::create_dir(dir.join("real")).expect("mkdir");
    let target = dir.join("real").join("plot.svg");
    std::fs::write(&target, b"old").expect("write");
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let output = aesload(&[
        "--json",
        &path(&existing),
        "--csv",
        &path(&new_csv),
        "--plot",
        &path(&link),
    ]);
    assert_success(&output);
    assert!(is_json_document(&std::fs::read(&existing).expect("json")));
    let csv = std::fs::read_to_string(&new_csv).expect("csv");
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("lstat")
            .file_type()
            .is_symlink(),
        "the link is still a link"
    );
    assert!(
        std::fs::read_to_string(&target)
            .expect("svg")
            .starts_with("<svg")
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.join(""))
        .expect("ls")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["link.svg", "new.csv", "old.json", "real"],
        "no temporary files"
    );
}

#[test]
fn a_character_device_and_a_fifo_are_written_through() {
    let dir = TempDir::new("aesload-out-nodes");
    let device = dir.join("null");
    let made = Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|status| status.success());
    let fifo = dir.join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).expect("read the fifo"))
    };
    let mut args = vec!["--json".to_owned(), path(&fifo)];
    if made {
        args.extend(["--csv".to_owned(), path(&device)]);
    } else {
        eprintln!("mknod needs root: the device part is skipped");
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = aesload(&args);
    assert_success(&output);
    assert!(is_json_document(&reader.join().expect("reader")));
    let fifo_type = std::fs::symlink_metadata(&fifo).expect("lstat").file_type();
    assert!(fifo_type.is_fifo(), "the FIFO is still a FIFO");
    if made {
        let device_type = std::fs::symlink_metadata(&device)
            .expect("lstat")
            .file_type();
        assert!(device_type.is_char_device(), "the device is still a device");
    }
}

#[test]
fn dash_is_stdout_and_the_report_moves_to_stderr() {
    let dir = TempDir::new("aesload-out-dash");
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(SMALL_RUN)
        .args(["--json", "-"])
        .current_dir(dir.join(""))
        .output()
        .expect("run aesload");
    assert_success(&output);
    assert!(
        is_json_document(&output.stdout),
        "stdout is the JSON alone:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("Transfers Verified"));
    assert!(!dir.join("-").exists(), "no file named -");
}

#[test]
fn bad_output_paths_fail_before_the_run() {
    let dir = TempDir::new("aesload-out-bad");
    let missing = dir.join("no/such/dir/x.json");
    let output = aesload(&["--json", &path(&missing)]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim(),
        format!(
            "aesload: cannot write {}: directory {} does not exist",
            missing.display(),
            dir.join("no/such/dir").display()
        )
    );
    assert!(
        output.stdout.is_empty(),
        "nothing ran: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let output = aesload(&["--csv", &path(&dir.join(""))]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is a directory"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = aesload(&["--json", "-", "--csv", "-"]);
    assert_eq!(output.status.code(), Some(2));
}

/// `aesload ... | head -1`: stdout closes after the first line; no panic,
/// and the run's files are still written.
#[test]
fn a_stdout_closed_early_ends_quietly() {
    let dir = TempDir::new("aesload-out-pipe");
    let json = dir.join("run.json");
    let script = format!(
        "set -o pipefail; '{}' {} --json '{}' | head -1",
        env!("CARGO_BIN_EXE_aesload"),
        SMALL_RUN.join(" "),
        json.display()
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
    assert!(is_json_document(&std::fs::read(&json).expect("json")));
}

/// stdout on a full disk (/dev/full): one line on stderr and exit 1.
#[test]
fn a_stdout_that_cannot_be_written_is_one_line_and_exit_1() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("no /dev/full: skipped");
        return;
    };
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(SMALL_RUN)
        .stdout(full)
        .output()
        .expect("run aesload");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "aesload: cannot write to stdout: No space left on device (os error 28)"
    );
}

/// A stdout whose reader is gone before aesload starts: every write
/// fails with a broken pipe, deterministically.
#[test]
fn a_stdout_with_no_reader_ends_quietly() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(SMALL_RUN)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run aesload");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "quiet: {stderr}");
    assert_eq!(output.status.code(), Some(0));
}
