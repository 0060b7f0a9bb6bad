//! Helpers for integration tests of aesd and its tools. A crate of its own
//! so every crate's tests share one copy; only ever a dev-dependency (and
//! the benches' fixtures), never part of a shipped binary.
//!
//! # Layout
//!
//! * [`TempDir`]: temporary folders with password and token files.
//! * [`openssl`], [`openssl_encrypt_file`], [`openssl_decrypt_file`]: the
//!   `openssl` binary as the oracle for the file format.
//! * [`start_server`]: an in-process server on loopback;
//!   [`AesdProcess`]: the real `aesd` binary as a child process, its
//!   addresses learnt from its readiness message (`NOTIFY_SOCKET`).
//! * [`encrypt_verified`], [`job_spec`], [`pattern_bytes`]: jobs with
//!   seeded data, checked end to end; [`Pattern`] and [`VerifyingSink`]
//!   re-exported from the load generator.
//! * [`raw_connection`], [`handshaken_connection`]: frames by hand.
//! * [`proc_status_kib`]: memory readings from `/proc`.
//! * [`fake_server`]: a fake aesd that breaks the protocol's promises on cue.

pub mod fake_server;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, Hello, Message, Operation, Password};
use aesd_server::{Config, ConfigLayer, RunningServer, Server};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use aesd_client::{JobReport, JobSpec, KeyDerivation};
use aesd_load::load;
pub use aesd_load::pattern::Pattern;
use aesd_load::progress::Progress;
use aesd_load::record::Outcome;
pub use aesd_load::verify::VerifyingSink;

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

/// Encrypts `size` bytes of the pattern for `seed` through `server` on a
/// new connection and verifies the result (as one aesload transfer): the
/// job's report, or what went wrong.
pub async fn encrypt_verified(
    server: &str,
    spec: &JobSpec,
    seed: u64,
    size: u64,
) -> Result<JobReport, String> {
    match load::transfer(
        load::Target {
            server,
            options: &aesd_client::ConnectOptions::default(),
            idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
        },
        spec,
        &load::LoadFormat::Openssl,
        None,
        seed,
        size,
        &Progress::default(),
    )
    .await
    {
        (Some(report), Outcome::Verified) => Ok(report),
        (_, Outcome::Failed { kind, message }) => Err(format!("{kind}: {message}")),
        (None, Outcome::Verified) => Err("verified without a report".into()),
    }
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

/// Starts an in-process server on 127.0.0.1 with an ephemeral port and
/// the given settings over the defaults.
pub async fn start_server(layer: ConfigLayer) -> RunningServer {
    let config = Config::resolve(ConfigLayer {
        listen: Some("127.0.0.1:0".parse().expect("loopback")),
        ..layer
    })
    .expect("valid test settings");
    Server::bind(config).await.expect("bind loopback").spawn()
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
        notify
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("socket timeout");
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--log", "info"])
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
        let message = match notify.recv(&mut buf) {
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

/// A job for tests: `operation` under `password` at 1000 PBKDF2
/// iterations (the server's default minimum: quick to derive).
pub fn job_spec(operation: Operation, password: &str) -> JobSpec {
    JobSpec {
        operation,
        password: Password::new(password.as_bytes().to_vec()),
        iterations: 1000,
        key_derivation: KeyDerivation::Auto,
    }
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
