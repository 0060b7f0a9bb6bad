//! What the fleet tests run: a real etcd (one or three members on free
//! loopback ports, a temporary data directory, killed at the end), aesd
//! boards with `--keyring etcd://...` driven over their HTTP API, and
//! readers of etcd's contents (`etcdctl`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aesd_keyring::shamir::Share;
use aesd_keyring::unseal::{UnsealStep, Unsealer};
use aesd_testkit::{TempDir, aesd_binary};

use crate::bao_support::{Aesd, request, try_raw_at};
use serde_json::{Value, json};

/// A program from `PATH` (installed by scripts/setup.sh): a missing one
/// fails the test.
fn program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "{name} is not installed (Debian's etcd-server and etcd-client: bash scripts/setup.sh)"
        )
    })
}

/// A loopback port free at the time of asking.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Runs `check` every 20 ms until it holds (the time it took) or `limit`
/// passes (`None`).
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if check() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A CA, etcd's server certificate (for 127.0.0.1) and a board's client
/// certificate, made with openssl.
pub struct EtcdTls {
    /// The CA certificate.
    pub ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    /// The board's certificate.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl EtcdTls {
    /// Makes the files in `dir`.
    pub fn generate(dir: &TempDir) -> EtcdTls {
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.join("."))
                .output()
                .expect("openssl is installed (bash scripts/setup.sh)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "1",
                    "-subj",
                    "/CN=aesd test CA",
                ],
            ]
            .concat(),
        );
        for (name, usage) in [
            ("server", "serverAuth,clientAuth"),
            ("client", "clientAuth"),
        ] {
            let ext = dir.join(&format!("{name}.ext"));
            std::fs::write(
                &ext,
                format!("subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n"),
            )
            .expect("ext file");
            let (key, csr, pem) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
            );
            openssl(
                &[
                    &["req"][..],
                    &ec,
                    &[
                        "-keyout",
                        &key,
                        "-out",
                        &csr,
                        "-subj",
                        &format!("/CN=aesd test {name}"),
                    ],
                ]
                .concat(),
            );
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "1",
                "-extfile",
                &format!("{name}.ext"),
            ]);
        }
        EtcdTls {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        }
    }
}

/// One etcd member.
struct Member {
    name: String,
    client: String,
    peer: String,
    child: Option<Child>,
}

/// A real etcd cluster on loopback.
pub struct Etcd {
    dir: TempDir,
    members: Vec<Member>,
    tls: Option<EtcdTls>,
    /// More arguments for every member.
    extra: Vec<String>,
}

impl Etcd {
    /// `count` members (1 or 3), started and answering.
    pub fn start(count: usize) -> Etcd {
        Etcd::start_with(count, false)
    }

    /// One member whose client port takes TLS with client certificates
    /// only (`--client-cert-auth`).
    pub fn start_tls() -> Etcd {
        Etcd::start_with(1, true)
    }

    /// The TLS files, with [`Etcd::start_tls`].
    pub fn tls(&self) -> Option<&EtcdTls> {
        self.tls.as_ref()
    }

    /// One member that refuses requests above `bytes`
    /// (`--max-request-bytes`, 1.5 MiB by default).
    pub fn start_limited(bytes: usize) -> Etcd {
        Etcd::start_with_args(1, false, vec![format!("--max-request-bytes={bytes}")])
    }

    fn start_with(count: usize, tls: bool) -> Etcd {
        Etcd::start_with_args(count, tls, Vec::new())
    }

    fn start_with_args(count: usize, tls: bool, extra: Vec<String>) -> Etcd {
        let dir = TempDir::new("etcd");
        let tls = tls.then(|| EtcdTls::generate(&dir));
        let members = (0..count)
            .map(|i| Member {
                name: format!("m{i}"),
                client: format!("127.0.0.1:{}", free_port()),
                peer: format!("127.0.0.1:{}", free_port()),
                child: None,
            })
            .collect();
        let mut etcd = Etcd {
            dir,
            members,
            tls,
            extra,
        };
        etcd.restart_all();
        etcd
    }

    /// The client endpoints, `HOST:PORT,...`.
    pub fn endpoints(&self) -> String {
        let all: Vec<&str> = self.members.iter().map(|m| m.client.as_str()).collect();
        all.join(",")
    }

    fn spawn(&mut self, index: usize) {
        let cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect();
        let member = &self.members[index];
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let log = std::fs::File::create(self.dir.join(&format!("{}.log", member.name)))
            .expect("etcd log file");
        let child = Command::new(program("etcd"))
            .args(["--name", &member.name])
            .arg("--data-dir")
            .arg(self.dir.join(&member.name))
            .args([
                "--listen-client-urls",
                &format!("{scheme}://{}", member.client),
            ])
            .args([
                "--advertise-client-urls",
                &format!("{scheme}://{}", member.client),
            ])
            .args(["--listen-peer-urls", &format!("http://{}", member.peer)])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://{}", member.peer),
            ])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", "aesd-test"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(self.tls.iter().flat_map(|tls| {
                [
                    "--client-cert-auth".into(),
                    "--trusted-ca-file".into(),
                    tls.ca.clone().into_os_string(),
                    "--cert-file".into(),
                    tls.server_cert.clone().into_os_string(),
                    "--key-file".into(),
                    tls.server_key.clone().into_os_string(),
                ]
            }))
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[index].child = Some(child);
    }

    /// Starts every member that is not running and waits until each
    /// answers a linearizable read.
    pub fn restart_all(&mut self) {
        for index in 0..self.members.len() {
            if self.members[index].child.is_none() {
                self.spawn(index);
            }
        }
        for member in &self.members {
            let ready = wait_for(Duration::from_secs(20), || match &self.tls {
                None => try_raw_at(
                    &member.client,
                    &request("POST", "/v3/kv/range", None, r#"{"key":"AA=="}"#),
                )
                .is_some_and(|(status, _)| status == 200),
                Some(tls) => Command::new("curl")
                    .args([
                        "-fsS",
                        "-o",
                        "/dev/null",
                        "-X",
                        "POST",
                        "-d",
                        r#"{"key":"AA=="}"#,
                    ])
                    .arg("--cacert")
                    .arg(&tls.ca)
                    .arg("--cert")
                    .arg(&tls.client_cert)
                    .arg("--key")
                    .arg(&tls.client_key)
                    .arg(format!("https://{}/v3/kv/range", member.client))
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success()),
            });
            assert!(ready.is_some(), "etcd member {} did not start", member.name);
        }
    }

    /// Kills member `index` (SIGKILL).
    pub fn stop_member(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills every member.
    pub fn stop_all(&mut self) {
        for index in 0..self.members.len() {
            self.stop_member(index);
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// An aesd process with `--keyring etcd://...` and its HTTP API.
pub struct Board {
    aesd: Aesd,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub http: String,
    /// Its metrics endpoint.
    pub metrics: std::net::SocketAddr,
}

impl Board {
    /// A board with `--keyring KEYRING` and `extra` arguments.
    pub fn start(keyring: &str, extra: &[&std::ffi::OsStr]) -> Board {
        let mut args = vec!["--keyring", keyring, "--metrics-listen", "127.0.0.1:0"];
        args.extend(
            extra
                .iter()
                .map(|arg| arg.to_str().expect("utf-8 argument")),
        );
        let aesd = Aesd::start_with(&args);
        Board {
            http: aesd.http.trim_start_matches("http://").to_owned(),
            metrics: aesd.metrics.expect("aesd logs its metrics address"),
            aesd,
        }
    }

    /// Runs aesd with `--keyring KEYRING` and `extra`, which must exit
    /// with an error within 15 s: its stderr.
    pub fn start_fails(keyring: &str, extra: &[&std::ffi::OsStr]) -> String {
        let mut child = Command::new(aesd_binary())
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
            .args(["--keyring", keyring, "--workers", "1", "--log", "info"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start aesd");
        let exited = wait_for(Duration::from_secs(15), || {
            child.try_wait().ok().flatten().is_some()
        });
        if exited.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("aesd's output");
        assert!(exited.is_some(), "aesd started although it should not have");
        assert!(!out.status.success(), "aesd exited with success");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `method /v1/path` with `token` and a JSON `body`.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = request(method, &format!("/v1/{path}"), token, &body);
        let (status, text) = try_raw_at(&self.aesd.http, &request)
            .unwrap_or_else(|| panic!("board {} does not answer {method} {path}", self.http));
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body)
    }

    /// The value of the unlabelled series `name` on its /metrics.
    pub fn metric(&self, name: &str) -> Option<f64> {
        aesd_testkit::metrics_text(self.metrics)
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    /// `sys/seal-status`.
    pub fn seal_status(&self) -> Value {
        self.call("GET", "sys/seal-status", None, None).1
    }

    /// Gives `shares`; the board must end unsealed.
    pub fn unseal(&self, shares: &[String]) {
        let mut last = Value::Null;
        for share in shares {
            let (status, body) =
                self.call("PUT", "sys/unseal", None, Some(json!({ "key": share })));
            assert_eq!(status, 200, "{body}");
            last = body;
        }
        assert_eq!(last["sealed"], false, "{last}");
    }
}

/// What `sys/init` gave.
pub struct Init {
    /// The shares, base64.
    pub shares: Vec<String>,
    /// The root token.
    pub token: String,
}

/// Boards sharing one etcd prefix.
pub struct Fleet {
    keyring: String,
    extra: Vec<std::ffi::OsString>,
    /// The boards, in start order.
    pub boards: Vec<Board>,
}

impl Fleet {
    /// `count` boards on `etcd` under `/prefix`.
    pub fn start(etcd: &Etcd, prefix: &str, count: usize) -> Fleet {
        Fleet::start_with(etcd, prefix, count, Vec::new())
    }

    /// `count` boards with `extra` arguments (the TLS flags).
    pub fn start_with(
        etcd: &Etcd,
        prefix: &str,
        count: usize,
        extra: Vec<std::ffi::OsString>,
    ) -> Fleet {
        let keyring = format!("etcd://{}/{prefix}", etcd.endpoints());
        let args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| a.as_os_str()).collect();
        let boards = (0..count).map(|_| Board::start(&keyring, &args)).collect();
        Fleet {
            keyring,
            extra,
            boards,
        }
    }

    /// `--keyring`'s value.
    pub fn keyring(&self) -> &str {
        &self.keyring
    }

    /// One more board, started now.
    pub fn start_board(&self) -> Board {
        let args: Vec<&std::ffi::OsStr> = self.extra.iter().map(|a| a.as_os_str()).collect();
        let board = Board::start(&self.keyring, &args);
        let initialized = wait_for(Duration::from_secs(2), || {
            board.seal_status()["initialized"] == true
        });
        assert!(
            initialized.is_some(),
            "a late board sees the fleet's keyring"
        );
        board
    }

    /// `sys/init` on the first board; every board sees it and is unsealed
    /// with the same `threshold` shares.
    pub fn init(&self, shares: u8, threshold: u8) -> Init {
        let (status, body) = self.boards[0].call(
            "PUT",
            "sys/init",
            None,
            Some(json!({ "secret_shares": shares, "secret_threshold": threshold })),
        );
        assert_eq!(status, 200, "{body}");
        let init = Init {
            shares: body["keys_base64"]
                .as_array()
                .expect("keys_base64")
                .iter()
                .map(|s| s.as_str().expect("share").to_owned())
                .collect(),
            token: body["root_token"].as_str().expect("root_token").to_owned(),
        };
        for board in &self.boards {
            let seen = wait_for(Duration::from_secs(2), || {
                board.seal_status()["initialized"] == true
            });
            assert!(seen.is_some(), "board {} does not see the init", board.http);
            board.unseal(&init.shares[..usize::from(threshold)]);
        }
        init
    }
}

/// etcd's keys under a prefix, as `etcdctl get --prefix` prints them,
/// and the sealed keyring stored there.
pub struct Dump {
    /// Keys and values as etcdctl prints them.
    pub raw: Vec<u8>,
    /// `PREFIX/sealed`'s bytes.
    pub sealed: Vec<u8>,
}

/// Dumps `prefix` with etcdctl.
pub fn etcdctl_dump(etcd: &Etcd, prefix: &str) -> Dump {
    let etcdctl = |args: &[&str]| {
        let out = Command::new(program("etcdctl"))
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &etcd.endpoints()])
            .args(args)
            .output()
            .expect("run etcdctl");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let raw = etcdctl(&["get", "--prefix", prefix]);
    let json: Value =
        serde_json::from_slice(&etcdctl(&["get", "-w", "json", &format!("{prefix}sealed")]))
            .expect("etcdctl json");
    use base64::Engine;
    let sealed = base64::engine::general_purpose::STANDARD
        .decode(json["kvs"][0]["value"].as_str().expect("a sealed keyring"))
        .expect("base64");
    Dump { raw, sealed }
}

/// Every key version's material in `sealed`, opened with `shares` (the
/// test knows them; etcd never does).
pub fn key_material(sealed: &[u8], shares: &[String]) -> Vec<Vec<u8>> {
    let mut unsealer = Unsealer::new(sealed.to_vec()).expect("a sealed keyring");
    let mut open = None;
    for share in shares {
        if let UnsealStep::Unsealed(opened) = unsealer
            .submit(Share::parse(share).expect("share"))
            .expect("unseal")
        {
            open = Some(opened);
        }
    }
    let open = open.expect("the shares open the sealed keyring");
    let tree = serde_json::to_value(&open.keyring).expect("keyring as JSON");
    let mut keys = Vec::new();
    collect_keys(&tree, &mut keys);
    keys
}

/// The 32-byte keys (base64) under a field named `key`.
fn collect_keys(value: &Value, keys: &mut Vec<Vec<u8>>) {
    match value {
        Value::Object(map) => {
            for (name, field) in map {
                if let (true, Some(bytes)) = (name == "key", as_bytes(field)) {
                    keys.push(bytes);
                } else {
                    collect_keys(field, keys);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_keys(item, keys)),
        _ => {}
    }
}

fn as_bytes(value: &Value) -> Option<Vec<u8>> {
    use base64ct::{Base64, Encoding};
    // Sealed format 2 writes a key as base64 of its 32 bytes.
    Base64::decode_vec(value.as_str()?)
        .ok()
        .filter(|bytes| bytes.len() == 32)
}
