//! `aescrypt -o` by the one output rule (the library's `output` module):
//! a regular or new file is replaced whole, a symlink's target is
//! replaced and the link stays, a character device or FIFO is written
//! through, `-` is stdout, and a bad path is refused before any work.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use aesd_testkit::{
    AesdProcess, TempDir, aesd_binary, metrics_text, openssl_decrypt_file, pattern_bytes,
};

fn path(path: &Path) -> String {
    path.display().to_string()
}

/// `aescrypt encrypt` of `input` to `output` through `addr`.
fn encrypt(addr: &str, password: &Path, input: &Path, output: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(["encrypt", "--server", addr, "--password-file"])
        .arg(password)
        .arg("-i")
        .arg(input)
        .args(["-o", output, "--iter", "1000"])
        .stdin(Stdio::null())
        .output()
        .expect("run aescrypt")
}

fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The plaintext openssl decrypts `encrypted` to.
fn decrypted(dir: &TempDir, password: &Path, encrypted: &Path) -> Vec<u8> {
    let plain = dir.join("decrypted");
    openssl_decrypt_file(password, 1000, encrypted, &plain);
    std::fs::read(&plain).expect("read decrypted")
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
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
    names
}

struct Fixture {
    dir: TempDir,
    password: PathBuf,
    input: PathBuf,
    plain: Vec<u8>,
}

fn fixture(label: &str) -> Fixture {
    let dir = TempDir::new(label);
    let password = dir.password_file("outputs");
    let input = dir.join("plain");
    let plain = pattern_bytes(3, 70_001);
    std::fs::write(&input, &plain).expect("write");
    Fixture {
        dir,
        password,
        input,
        plain,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_new_paths_and_symlinks_are_replaced_whole() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    tokio::task::spawn_blocking(move || {
        let f = fixture("aescrypt-out-files");
        let existing = f.dir.join("existing.enc");
        std::fs::write(&existing, b"old").expect("write");
        assert_success(&encrypt(&addr, &f.password, &f.input, &path(&existing)));
        assert_eq!(decrypted(&f.dir, &f.password, &existing), f.plain);

        let new = f.dir.join("new.enc");
        assert_success(&encrypt(&addr, &f.password, &f.input, &path(&new)));
        assert_eq!(decrypted(&f.dir, &f.password, &new), f.plain);

        std::fs::create_dir(f.dir.join("real")).expect("mkdir");
        let target = f.dir.join("real").join("target.enc");
        std::fs::write(&target, b"old").expect("write");
        let link = f.dir.join("link.enc");
        std::os::unix::fs::symlink("real/target.enc", &link).expect("symlink");
        assert_success(&encrypt(&addr, &f.password, &f.input, &path(&link)));
        let link_type = std::fs::symlink_metadata(&link).expect("lstat").file_type();
        assert!(link_type.is_symlink(), "the link stays");
        assert_eq!(decrypted(&f.dir, &f.password, &target), f.plain);
        assert_eq!(
            names(&f.dir.join("real")),
            ["target.enc"],
            "no temporary file"
        );
    })
    .await
    .expect("test");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_device_a_fifo_and_stdout_are_written_through() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    tokio::task::spawn_blocking(move || {
        let f = fixture("aescrypt-out-nodes");
        let device = f.dir.join("null");
        let made = Command::new("mknod")
            .arg(&device)
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|status| status.success());
        if made {
            assert_success(&encrypt(&addr, &f.password, &f.input, &path(&device)));
            let device_type = std::fs::symlink_metadata(&device)
                .expect("lstat")
                .file_type();
            assert!(device_type.is_char_device(), "still a device, not a file");
        } else {
            eprintln!("mknod needs root: the device part is skipped");
        }

        let fifo = f.dir.join("pipe");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .expect("mkfifo")
                .success()
        );
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).expect("read the fifo"))
        };
        assert_success(&encrypt(&addr, &f.password, &f.input, &path(&fifo)));
        let through_fifo = f.dir.join("from-fifo.enc");
        std::fs::write(&through_fifo, reader.join().expect("reader")).expect("write");
        assert_eq!(decrypted(&f.dir, &f.password, &through_fifo), f.plain);
        let fifo_type = std::fs::symlink_metadata(&fifo).expect("lstat").file_type();
        assert!(fifo_type.is_fifo(), "still a FIFO");

        let out = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args(["encrypt", "--server", &addr, "--password-file"])
            .arg(&f.password)
            .arg("-i")
            .arg(&f.input)
            .args(["-o", "-", "--iter", "1000"])
            .current_dir(f.dir.join(""))
            .output()
            .expect("run aescrypt");
        assert_success(&out);
        let from_stdout = f.dir.join("from-stdout.enc");
        std::fs::write(&from_stdout, &out.stdout).expect("write");
        assert_eq!(decrypted(&f.dir, &f.password, &from_stdout), f.plain);
        assert!(!f.dir.join("-").exists(), "no file named -");
    })
    .await
    .expect("test");
    drop(server);
}

/// `aescrypt -o - | head -c 16`: the reader closes the pipe after 16
/// bytes; aescrypt ends quietly (no message) with SIGPIPE's status, 141.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdout_pipe_ends_quietly() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let f = fixture("aescrypt-closed-pipe");
    let big = f.dir.join("big");
    std::fs::write(&big, pattern_bytes(5, 8 << 20)).expect("write");
    let password = f.password.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut aescrypt = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args(["encrypt", "--server", &addr, "--password-file"])
            .arg(&password)
            .arg("-i")
            .arg(&big)
            .args(["-o", "-", "--iter", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run aescrypt");
        let mut stdout = aescrypt.stdout.take().expect("stdout");
        let mut first = [0u8; 16];
        std::io::Read::read_exact(&mut stdout, &mut first).expect("16 bytes");
        drop(stdout);
        (first, aescrypt.wait_with_output().expect("wait"))
    })
    .await
    .expect("join");
    let (first, out) = out;
    assert_eq!(&first[..8], b"Salted__");
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "quiet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
}

/// Bad output paths are refused before anything else: no server listens
/// on port 1, yet the message is about the output.
#[test]
fn a_directory_or_a_missing_directory_is_refused_before_any_work() {
    let f = fixture("aescrypt-out-bad");
    let out = encrypt("127.0.0.1:1", &f.password, &f.input, &path(&f.dir.join("")));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim().ends_with("is a directory"), "{stderr}");
    let missing = f.dir.join("no/dir/out.enc");
    let out = encrypt("127.0.0.1:1", &f.password, &f.input, &path(&missing));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "aescrypt: cannot write {}: directory {} does not exist",
            missing.display(),
            f.dir.join("no/dir").display()
        )
    );
}

/// SIGINT while the job waits for input: the temporary file is removed,
/// OUT keeps its old bytes, the exit status is 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_removes_the_temporary_file_and_exits_130() {
    let server = AesdProcess::start(&aesd_binary(), &["--metrics-listen", "127.0.0.1:0"]);
    let addr = server.addr.to_string();
    let metrics = server.metrics.expect("the metrics endpoint");
    let active = move || {
        metrics_text(metrics)
            .lines()
            .find_map(|line| line.strip_prefix("aesd_active_jobs "))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    tokio::task::spawn_blocking(move || {
        let f = fixture("aescrypt-sigint");
        let out = f.dir.join("out.enc");
        std::fs::write(&out, b"old").expect("write");
        let mut child = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args(["encrypt", "--server", &addr, "--password-file"])
            .arg(&f.password)
            .args(["-i", "-", "-o"])
            .arg(&out)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn aescrypt");
        // Held open (and empty) until aescrypt has exited: the job waits
        // for input, so only the signal can end it.
        let stdin = child.stdin.take().expect("stdin");
        // The job runs once the server has admitted it (its temporary file
        // exists then too; aescrypt catches signals before it connects).
        let mut polls = 0;
        while active() == 0.0 {
            assert!(child.try_wait().expect("wait").is_none(), "aescrypt ended");
            polls += 1;
            assert!(polls < 4000, "the job was never admitted");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            names(&f.dir.join(""))
                .iter()
                .any(|name| name.starts_with(".out.enc."))
        );
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let output = child.wait_with_output().expect("wait");
        drop(stdin);
        assert_eq!(output.status.code(), Some(130));
        assert_eq!(
            String::from_utf8_lossy(&output.stderr).trim(),
            "aescrypt: interrupted"
        );
        assert_eq!(names(&f.dir.join("")), ["out.enc", "password", "plain"]);
        assert_eq!(std::fs::read(&out).expect("read"), b"old");
    })
    .await
    .expect("test");
    drop(server);
}
