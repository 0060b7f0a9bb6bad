//! Observability with the real parts: Debian's Prometheus, run with the
//! shipped fleet config (file-based discovery, the target labelled with its
//! `board`), scrapes a real aesd every second while 100 clients run; every
//! PromQL expression of the shipped Grafana dashboard then returns data
//! through Prometheus's HTTP API, the fleet overview's per board; promtool
//! accepts aesd's real output and the shipped configs; the metrics endpoint
//! and the job port stay responsive under the load.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aesd_client::Client;
use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use aesd_testkit::TempDir;
use common::{encrypt_verified, job_spec as spec, start_server};

const CLIENTS: usize = 100;

/// A blocking HTTP/1.0 GET (no chunked bodies): status and body.
fn http_get(addr: SocketAddr, target: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {target} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The `board` label the test's target gets in its target file.
const BOARD: &str = "test-board";

/// Debian's `prometheus` with the shipped fleet config, scraping one
/// target (from a target file, labelled [`BOARD`]) every second.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = TempDir::new("prometheus");
        let config = dir.join("fleet.yml");
        let shipped = std::fs::read_to_string(repo_file("deploy/prometheus/fleet.yml"))
            .expect("deploy/prometheus/fleet.yml");
        let fast = shipped
            .replace("scrape_interval: 5s", "scrape_interval: 1s")
            .replace("evaluation_interval: 5s", "evaluation_interval: 1s");
        assert_ne!(fast, shipped, "the fleet config's intervals moved");
        std::fs::write(&config, fast).expect("write config");
        std::fs::create_dir_all(dir.join("targets")).expect("targets dir");
        std::fs::write(
            dir.join("targets/boards.yml"),
            format!("- targets: ['{target}']\n  labels:\n    board: {BOARD}\n"),
        )
        .expect("write targets");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Debian's prometheus is installed (bash scripts/setup.sh)");
        let prometheus = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready within 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    /// Evaluates `expr` now: the result list, or why it failed.
    fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>, String> {
        let (status, body) = http_get(
            self.addr,
            &format!("/api/v1/query?query={}", percent_encode(expr)),
        )
        .map_err(|err| err.to_string())?;
        let json: serde_json::Value =
            serde_json::from_str(&body).map_err(|err| format!("{err}: {body}"))?;
        if status != 200 || json["status"] != "success" {
            return Err(format!("HTTP {status}: {body}"));
        }
        Ok(json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn promtool(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is installed (bash scripts/setup.sh)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write");
    child.wait_with_output().expect("promtool")
}

/// The PromQL of every panel, with Grafana's variables filled in.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_file("deploy/grafana/dashboards/aesd.json"))
        .expect("dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            let expr = expr
                .replace("$instance", ".*")
                .replace("$board", ".*")
                .replace("$__rate_interval", "1m");
            queries.push((panel["title"].as_str().unwrap_or("?").to_owned(), expr));
        }
    }
    queries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_aesd_and_every_dashboard_query_has_data() {
    let dir = TempDir::new("hwmon");
    let sensor = dir.join("temp1_input");
    std::fs::write(&sensor, "45500\n").expect("sensor file");
    let server = start_server(ConfigLayer {
        workers: Some(2),
        max_active: Some(4),
        max_queue: Some(CLIENTS),
        max_active_per_client: Some(4),
        max_queued_per_client: Some(CLIENTS),
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        temperature: Some(format!("hwmon:{}", sensor.display())),
        ..ConfigLayer::default()
    })
    .await;
    let metrics = server.metrics_addr().expect("metrics enabled");
    let addr = server.addr().to_string();

    // promtool accepts the real output and the shipped configuration.
    let (status, text) = http_get(metrics, "/metrics").expect("scrape");
    assert_eq!(status, 200);
    let check = promtool(&["check", "metrics"], &text);
    assert!(
        check.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    for shipped in [
        "deploy/prometheus/prometheus.yml",
        "deploy/prometheus/fleet.yml",
    ] {
        let config = repo_file(shipped);
        let check = promtool(&["check", "config", &config.display().to_string()], "");
        assert!(
            check.status.success(),
            "promtool check config {shipped}: {}",
            String::from_utf8_lossy(&check.stdout)
        );
    }

    let prometheus = tokio::task::spawn_blocking(move || Prometheus::start(metrics))
        .await
        .expect("start prometheus");
    let prometheus = std::sync::Arc::new(prometheus);
    let up = {
        let prometheus = std::sync::Arc::clone(&prometheus);
        tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(result) = prometheus.query("up{job=\"aesd\"} == 1") {
                    if !result.is_empty() {
                        return true;
                    }
                }
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    assert!(up.await.expect("poll"), "prometheus never scraped aesd");

    // Responsiveness probe: scrape /metrics and open a new job connection
    // every 100 ms while the load runs; record the slowest of each.
    let probing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let probe = {
        let (probing, addr) = (std::sync::Arc::clone(&probing), addr.clone());
        tokio::spawn(async move {
            let (mut slowest_scrape, mut slowest_connect) = (Duration::ZERO, Duration::ZERO);
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let scrape = tokio::task::spawn_blocking(move || http_get(metrics, "/metrics"))
                    .await
                    .expect("join");
                assert!(matches!(scrape, Ok((200, _))), "scrape failed under load");
                slowest_scrape = slowest_scrape.max(started.elapsed());
                let started = Instant::now();
                Client::connect(&addr)
                    .await
                    .expect("job port answers under load")
                    .close()
                    .await;
                slowest_connect = slowest_connect.max(started.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (slowest_scrape, slowest_connect)
        })
    };

    // The load: 100 clients in two waves two seconds apart (so it spans
    // several scrapes), each wave with two errors of known kinds.
    for wave in 0..2u64 {
        let mut clients = Vec::new();
        for index in 0..(CLIENTS / 2) as u64 {
            let (addr, seed) = (addr.clone(), wave * 1000 + index);
            clients.push(tokio::spawn(async move {
                encrypt_verified(&addr, &spec(Operation::Encrypt, "metrics"), seed, 1 << 20).await
            }));
        }
        let mut bad = std::net::TcpStream::connect(server.addr()).expect("connect");
        bad.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("bad magic");
        let mut client = Client::connect(&addr).await.expect("connect");
        let wrong = client
            .run_job(
                &spec(Operation::Decrypt, "x"),
                &mut &[0u8; 64][..],
                &mut Vec::new(),
            )
            .await;
        assert!(wrong.is_err(), "a bad ciphertext must fail");
        for handle in clients {
            handle.await.expect("task").expect("transfer verified");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // Let Prometheus take a few more scrapes after the load.
    tokio::time::sleep(Duration::from_secs(3)).await;
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    let (slowest_scrape, slowest_connect) = probe.await.expect("probe");
    println!(
        "slowest /metrics scrape {slowest_scrape:?}, slowest new job connection {slowest_connect:?} while {CLIENTS} clients ran"
    );
    assert!(
        slowest_scrape < Duration::from_secs(2),
        "metrics endpoint stalled: {slowest_scrape:?}"
    );
    assert!(
        slowest_connect < Duration::from_secs(2),
        "job port stalled: {slowest_connect:?}"
    );

    let results = tokio::task::spawn_blocking(move || {
        dashboard_queries()
            .into_iter()
            .map(|(panel, expr)| {
                let result = prometheus.query(&expr);
                (panel, expr, result)
            })
            .collect::<Vec<_>>()
    })
    .await
    .expect("queries");
    // Panels that must show activity after the load, not just a series.
    let must_be_positive = [
        "Throughput",
        "Jobs per second",
        "Errors per second",
        "Processing time",
        "Job duration",
        "CPU",
        "Memory",
        "Board temperature",
        "Build",
        "Throughput per board",
        "Share of jobs per board",
        "Busy share per board",
        "Errors per board",
    ];
    // The fleet overview's panels: one series per board, named.
    let per_board = [
        "Throughput per board",
        "Share of jobs per board",
        "Busy share per board",
        "Errors per board",
    ];
    let mut failures = Vec::new();
    for (panel, expr, result) in &results {
        match result {
            Ok(series) if !series.is_empty() => {
                let values: Vec<f64> = series
                    .iter()
                    .filter_map(|sample| sample["value"][1].as_str()?.parse().ok())
                    .collect();
                let best = values.iter().copied().fold(f64::NAN, f64::max);
                println!(
                    "{panel:<34} {best:>14.6}  ({} series)  {expr}",
                    series.len()
                );
                if must_be_positive.contains(&panel.as_str()) && (best.is_nan() || best <= 0.0) {
                    failures.push(format!("{panel}: no activity ({best}) for {expr}"));
                }
                if per_board.contains(&panel.as_str())
                    && !series
                        .iter()
                        .all(|sample| sample["metric"]["board"] == BOARD)
                {
                    failures.push(format!("{panel}: not per board: {series:?}"));
                }
                if values.iter().all(|value| value.is_nan()) {
                    failures.push(format!("{panel}: only NaN for {expr}"));
                }
            }
            Ok(_) => failures.push(format!("{panel}: no data for {expr}")),
            Err(err) => failures.push(format!("{panel}: {expr}: {err}")),
        }
    }
    assert!(
        results.len() >= 24,
        "the dashboard lost queries: {}",
        results.len()
    );
    assert!(
        failures.is_empty(),
        "dashboard queries failed:\n{}",
        failures.join("\n")
    );
    server.shutdown().await;
}
