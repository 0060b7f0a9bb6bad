//! Helpers for integration tests of aesd and its tools. A crate of its own
//! so every crate's tests share one copy; only ever a dev-dependency, never
//! part of a shipped binary.
//!
//! It depends on no aesd crate but the protocol and the test data
//! (`aesd-pattern`): the server, the client and the load generator all
//! test with it, and none of them comes in through it (no dependency
//! cycle, dev-dependencies included). Tests that need the real programs
//! run them as child processes ([`workspace_binary`], [`AesdProcess`]).
//!
//! # Layout
//!
//! * [`TempDir`]: temporary folders with password and token files.
//! * [`openssl`], [`openssl_encrypt_file`], [`openssl_decrypt_file`]: the
//!   `openssl` binary as the oracle for the file format.
//! * [`workspace_binary`]: a binary of another workspace crate (`aesd`,
//!   `aescrypt`, `aesload`), built on first use;
//!   [`AesdProcess`]: the real `aesd` binary as a child process, its
//!   addresses learnt from its readiness message (`NOTIFY_SOCKET`).
//! * [`pattern_bytes`]: seeded data; [`Pattern`] and [`VerifyingSink`]
//!   re-exported from `aesd-pattern`.
//! * [`raw_connection`], [`handshaken_connection`], [`connect_from`]:
//!   frames by hand, from any loopback address.
//! * [`proc_status_kib`], [`metrics_text`]: memory readings from `/proc`,
//!   a server's `/metrics`.
//! * [`fake_server`]: a fake aesd that breaks the protocol's promises on cue.
//! * [`doc_table_rows`]: a table of the docs, for tests that check the docs
//!   say what the code does.

mod doc_table;
pub mod fake_server;

pub use doc_table::doc_table_rows;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, Hello, Message};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

pub use aesd_pattern::{Pattern, VerifyingSink};

/// A folder removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty folder under the system's temporary folder.
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "aesd-test-{label}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    /// A path inside the folder.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes the password file `password` (mode 600) and returns its path.
    pub fn password_file(&self, password: &str) -> PathBuf {
        self.secret_file("password", password)
    }

    /// Writes `name` with the line `content`, readable by its owner only.
    pub fn secret_file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, format!("{content}\n")).expect("write secret file");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        }
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The first `len` bytes of the pattern for `seed`.
pub fn pattern_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    Pattern::new(seed).fill(&mut bytes);
    bytes
}

/// Runs `openssl` with `args`; panics with its stderr when it fails.
pub fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .expect("the openssl binary is installed (run scripts/setup.sh)");
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The variable naming a folder that holds the workspace's binaries built
/// by the running `cargo test --workspace` itself (scripts/test.sh sets it
/// to the target directory's `debug` folder): [`workspace_binary`] takes
/// them from there instead of running a `cargo build` of its own, whose
/// other feature set would rebuild half the workspace, and the next cargo
/// run would rebuild it back (minutes on a fresh machine).
pub const TEST_BIN_DIR_VAR: &str = "AESD_TEST_BIN_DIR";

/// The path of binary `bin` of workspace package `package` (`aesd` of
/// `aesd-server`, `aescrypt` of `aesd-client`, `aesload` of `aesd-load`),
/// for the tests of another crate than the binary's, which cargo does not
/// hand its path. From [`TEST_BIN_DIR_VAR`]'s folder when it is set (it
/// must hold the binary); else built (`cargo build`, the running cargo's)
/// on its first use in this test process, so it is never older than its
/// sources.
///
/// # Panics
/// If the folder lacks the binary, or the build fails or names no
/// executable.
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os(TEST_BIN_DIR_VAR) {
        let path = PathBuf::from(dir).join(bin);
        assert!(
            path.is_file(),
            "{TEST_BIN_DIR_VAR} names no {bin}: {} (unset it to build {package}'s binary)",
            path.display()
        );
        return path;
    }
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Mutex::default);
    let mut built = built
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = built.get(bin) {
        return path.clone();
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--message-format=json",
            "-p",
            package,
            "--bin",
            bin,
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = stdout
        .lines()
        .filter(|line| line.contains("\"reason\":\"compiler-artifact\""))
        .find_map(|line| {
            let start = line.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + line[start..].find('"')?;
            let path = PathBuf::from(&line[start..end]);
            (path.file_name()? == bin).then_some(path)
        })
        .unwrap_or_else(|| panic!("cargo build named no executable for {bin}"));
    built.insert(bin.to_owned(), path.clone());
    path
}

/// The `aesd` binary ([`workspace_binary`]).
pub fn aesd_binary() -> PathBuf {
    workspace_binary("aesd-server", "aesd")
}

/// The Prometheus text a server's `/metrics` endpoint at `addr` serves
/// (blocking: from a test's plain thread).
///
/// # Panics
/// If the endpoint cannot be reached.
pub fn metrics_text(addr: SocketAddr) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("response");
    text
}

/// `openssl enc -aes-256-cbc -salt -pbkdf2`: encrypts `input` into
/// `output` with the password in `password_file`.
pub fn openssl_encrypt_file(password_file: &Path, iterations: u32, input: &Path, output: &Path) {
    openssl_enc(&[], password_file, iterations, input, output);
}

/// `openssl enc -d -aes-256-cbc -pbkdf2`: decrypts `input` into `output`.
pub fn openssl_decrypt_file(password_file: &Path, iterations: u32, input: &Path, output: &Path) {
    openssl_enc(&["-d"], password_file, iterations, input, output);
}

fn openssl_enc(mode: &[&str], password_file: &Path, iterations: u32, input: &Path, output: &Path) {
    let iterations = iterations.to_string();
    let pass = format!("file:{}", password_file.display());
    let (input, output) = (input.display().to_string(), output.display().to_string());
    let mut args = vec!["enc"];
    args.extend_from_slice(mode);
    args.extend_from_slice(&[
        "-aes-256-cbc",
        "-salt",
        "-pbkdf2",
        "-iter",
        &iterations,
        "-pass",
        &pass,
        "-in",
        &input,
        "-out",
        &output,
    ]);
    openssl(&args);
}

/// The real `aesd` binary, running as a child process.
pub struct AesdProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where it serves `/metrics`, when started with `--metrics-listen`.
    pub metrics: Option<SocketAddr>,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Holds the notification socket's folder until the process ends.
    _notify_dir: TempDir,
}

impl AesdProcess {
    /// Starts `binary` with `args` plus `--listen 127.0.0.1:0`, and waits
    /// (up to 20 s) for its readiness message on a notification socket
    /// (`NOTIFY_SOCKET`, systemd's protocol) to learn its addresses.
    pub fn start(binary: &Path, args: &[&str]) -> AesdProcess {
        let notify_dir = TempDir::new("notify");
        let notify_path = notify_dir.join("notify");
        let notify = UnixDatagram::bind(&notify_path).expect("bind the notification socket");
        // `--log info` unless the caller chose a level.
        let log_level: &[&str] = if args.contains(&"--log") {
            &[]
        } else {
            &["--log", "info"]
        };
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .args(log_level)
            .args(args)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start aesd");
        let stderr = child.stderr.take().expect("stderr piped");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut log) = sink.lock() {
                    log.push(line);
                }
            }
        });
        let mut buf = [0u8; 1024];
        let message = match recv_until(&notify, &mut buf, Duration::from_secs(20)) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(100));
                let log = log.lock().map(|log| log.join("\n")).unwrap_or_default();
                panic!("aesd sent no readiness message ({err}); its log:\n{log}");
            }
        };
        let addr = notify_field(&message, "AESD_LISTEN")
            .unwrap_or_else(|| panic!("no AESD_LISTEN in {message:?}"));
        let metrics = notify_field(&message, "AESD_METRICS");
        AesdProcess {
            child,
            addr,
            metrics,
            log,
            _notify_dir: notify_dir,
        }
    }

    /// The `aesd` of this workspace ([`aesd_binary`]) serving TLS with the
    /// PEM certificate chain `cert` and its key `key`.
    pub fn start_tls(cert: &Path, key: &Path) -> AesdProcess {
        let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
        AesdProcess::start(&aesd_binary(), &["--tls-cert", &cert, "--tls-key", &key])
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lines logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// Sends a signal (by name, e.g. "TERM") with `kill`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits up to `limit` for the process to exit; its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for AesdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One datagram from `socket` within `limit`. A signal arriving while it
/// waits interrupts the wait (a socket with a receive timeout is never
/// restarted, signal(7)): it waits on for the time that is left instead of
/// failing.
fn recv_until(socket: &UnixDatagram, buf: &mut [u8], limit: Duration) -> std::io::Result<usize> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        socket.set_read_timeout(Some(left))?;
        match socket.recv(buf) {
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// The address in the `NAME=ADDR` line of a readiness message.
fn notify_field(message: &str, name: &str) -> Option<SocketAddr> {
    message
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`...).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A TCP connection to `server` from the loopback address `source` (e.g.
/// `127.0.0.2`): tests of per-client limits play several clients from one
/// host this way (Linux routes all of 127.0.0.0/8 to the loopback device).
pub async fn connect_from(source: &str, server: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{source}:0").parse().expect("source address"))
        .expect("bind the source address");
    socket.connect(server).await.expect("connect")
}

/// A raw TCP connection to `server`, for tests that send bytes by hand:
/// a frame reader with the protocol's largest limit, and the write half.
pub async fn raw_connection(server: SocketAddr) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    let stream = TcpStream::connect(server).await.expect("connect");
    let (read, write) = stream.into_split();
    (FrameReader::new(read, MAX_FRAME_PAYLOAD), write)
}

/// [`raw_connection`] after the hello and the server's welcome.
pub async fn handshaken_connection(
    server: SocketAddr,
) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    let (mut reader, mut write) = raw_connection(server).await;
    write
        .write_all(&Hello::current().encode())
        .await
        .expect("hello");
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Welcome(_)))
    ));
    (reader, write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_from_the_readiness_message() {
        let message = "READY=1\nMAINPID=7\nSTATUS=listening on 127.0.0.1:4321\nAESD_LISTEN=127.0.0.1:4321\nAESD_METRICS=[::1]:9100\n";
        assert_eq!(
            notify_field(message, "AESD_LISTEN"),
            Some("127.0.0.1:4321".parse().expect("addr"))
        );
        assert_eq!(
            notify_field(message, "AESD_METRICS"),
            Some("[::1]:9100".parse().expect("addr"))
        );
        assert_eq!(notify_field("READY=1\n", "AESD_LISTEN"), None);
    }
}
