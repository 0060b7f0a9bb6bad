//! Bounded attack benchmarks against a real `aesd` on loopback, printing
//! figures for docs/hardening.md's attack table (issue 24). Not a test:
//! `scripts/bench/attacks.sh` runs it (release build).
//!
//! ```text
//! attacks AESD_BINARY [SECONDS [NAME,...] [LANE_MIB]]]
//! ```
//!
//! * log flood: failed begins (1 PBKDF2 iteration, under `min-iter`) from
//!   127.0.0.1 for SECONDS (at most 60, default 10), 8 connections at once
//!   (each reopened when aesd closes it after `max-jobs-per-connection`);
//!   prints the begins sent and the bytes aesd logged (at `--log info`).
//! * idle memory after discarded frames: 200 connections (64 KiB chunks),
//!   each a failed decryption followed by 16 data frames of 64 KiB; prints
//!   aesd's RSS per idle connection.
//! * metrics blinding: 8 unfinished requests from 127.0.0.1, then 30
//!   scrapes from 127.0.0.2; prints how many were served.
//! * lock-out by two addresses (`--workers 2`: 4 slots, 64 queue places):
//!   127.0.0.1 runs 3 jobs, 127.0.0.2 one, each uploading fast and reading
//!   its output at 64 kB/s, and both keep 34 more connections beginning
//!   jobs (a refused or ended one begins again); after 2 s 127.0.0.3
//!   probes with 1 MiB jobs for at most SECONDS × 4 (40 s by default);
//!   prints when its first job started and finished, or how many probes got
//!   `busy`.
//! * lane sharing (`--workers 1`): two encryptions of LANE_MIB (default
//!   128) MiB at once from 127.0.0.1, nobody else; prints the lane
//!   engine's occupancy from the metrics: of the lanes the two jobs could
//!   fill (`aesd_cipher_lane_blocks_total` over
//!   `aesd_cipher_lane_fillable_blocks_total`, when the aesd has it) and
//!   of every lane (over `aesd_cipher_lane_capacity_blocks_total`), and
//!   the lanes per worker.
//! * TLS handshake flood (`--workers 1`, TLS with a certificate made by
//!   `aesd_server::tls_init`): 16 connections at a time from 127.0.0.1
//!   make full TLS handshakes (a new client configuration each, so never
//!   resumed) for SECONDS, while 127.0.0.2 runs a 1 MiB TLS job every
//!   second; prints the attacker's handshakes served and refused, aesd's
//!   CPU seconds over the flood (`process_cpu_seconds_total`) and the
//!   other address's slowest job.
//!
//! `attacks AESD_BINARY [SECONDS [NAME,...] [LANE_MIB]]]` runs only the
//! named attacks (`log`, `memory`, `metrics`, `lockout`, `lanes`, `tls`;
//! default all). AESD_BINARY may be a script that runs aesd (e.g. under qemu-user).
//!
//! Only loopback addresses; every count and duration is bounded.

use std::path::Path;
use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, DerivedKeyParams, Format, FrameReader, FrameWriter, Hello, KeySource, Message,
    Operation, Password,
};
use aesd_testkit::{AesdProcess, connect_from, proc_status_kib};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zeroize::Zeroizing;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let binary = args
        .next()
        .expect("usage: attacks AESD_BINARY [SECONDS [NAME,...] [LANE_MIB]]]");
    let seconds: u64 = args
        .next()
        .map(|s| s.parse().expect("SECONDS: a number"))
        .unwrap_or(10)
        .min(60);
    let names = args.next().unwrap_or_else(|| "all".into());
    let lane_mib: usize = args
        .next()
        .map(|s| s.parse().expect("LANE_MIB: a number"))
        .unwrap_or(128)
        .clamp(1, 1024);
    let wanted = |name: &str| names == "all" || names.split(',').any(|n| n == name);
    let binary = Path::new(&binary);
    if wanted("log") {
        log_flood(binary, seconds).await;
    }
    if wanted("memory") {
        idle_memory(binary).await;
    }
    if wanted("metrics") {
        metrics_blinding(binary).await;
    }
    if wanted("lockout") {
        lock_out(binary, seconds * 4).await;
    }
    if wanted("lanes") {
        lane_sharing(binary, lane_mib << 20).await;
    }
    if wanted("tls") {
        handshake_flood(binary, seconds).await;
    }
}

/// Scrapes `aesd`'s metrics once (from 127.0.0.1).
async fn scrape(aesd: &AesdProcess) -> String {
    let metrics = aesd.metrics.expect("metrics address");
    let mut stream = connect_from("127.0.0.1", metrics).await;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\n\r\n")
        .await
        .expect("scrape");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(6), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

async fn handshake_flood(binary: &Path, seconds: u64) {
    let dir = aesd_testkit::TempDir::new("attack-tls");
    let made = aesd_server::tls_init::make_for_loopback(&dir.join("tls")).expect("TLS identity");
    let (cert, key) = (
        made.cert.display().to_string(),
        made.key.display().to_string(),
    );
    let aesd = AesdProcess::start(
        binary,
        &[
            "--workers",
            "1",
            "--metrics-listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
    );
    let addr = aesd.addr.to_string();
    let pin = aesd_client::cert_pin::parse_pin(&made.pin).expect("pin");
    let options = |source: &str| aesd_client::ConnectOptions {
        token: None,
        tls: Some(aesd_client::tls::TlsSettings::with_pins(&[pin])),
        bind: Some(source.parse().expect("source address")),
    };
    let cpu_before = metric(&scrape(&aesd).await, "process_cpu_seconds_total");
    let until = Instant::now() + Duration::from_secs(seconds);
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let attackers: Vec<_> = (0..16)
        .map(|_| {
            let (addr, options) = (addr.clone(), options("127.0.0.1"));
            let (served, refused) = (served.clone(), refused.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    // A fresh client configuration: a full handshake.
                    match aesd_client::Client::connect_with(&addr, &options).await {
                        Ok(_) => served.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                        Err(_) => refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    let mut jobs = 0;
    let spec = aesd_client::JobSpec::with_password(Operation::Encrypt, "flood", 1000);
    while Instant::now() + Duration::from_secs(1) < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let started = Instant::now();
        let mut client = aesd_client::Client::connect_with(&addr, &options("127.0.0.2"))
            .await
            .expect("the other address connects");
        let mut output = Vec::new();
        client
            .run_job(&spec, &mut &vec![7u8; 1 << 20][..], &mut output)
            .await
            .expect("the other address's job");
        slowest = slowest.max(started.elapsed());
        jobs += 1;
    }
    for attacker in attackers {
        let _ = attacker.await;
    }
    let cpu = metric(&scrape(&aesd).await, "process_cpu_seconds_total") - cpu_before;
    let served = served.load(std::sync::atomic::Ordering::Relaxed);
    let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "TLS handshake flood: 16 at a time from 127.0.0.1 for {seconds} s: {served} handshakes served ({:.0}/s), {refused} refused; aesd used {cpu:.2} CPU s; 127.0.0.2's {jobs} TLS jobs of 1 MiB took at most {:.3} s",
        served as f64 / seconds as f64,
        slowest.as_secs_f64()
    );
}

/// A begin with a client-derived key (no PBKDF2 on the server).
fn derived_begin(operation: Operation) -> Message {
    Message::Begin(Begin {
        operation,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Derived(DerivedKeyParams {
            salt: [1; 8],
            key: Zeroizing::new([2; 32]),
            iv: Zeroizing::new([3; 16]),
        }),
    })
}

/// One attacking connection after another from `source` until `until`:
/// begins a job (again after `busy`), and once it runs uploads up to
/// 256 MiB as fast as aesd takes it while reading the output at 64 kB/s.
async fn slow_reader(source: &'static str, addr: std::net::SocketAddr, until: Instant) {
    while Instant::now() < until {
        let (mut reader, mut writer) = handshaken_to(source, addr).await;
        if writer
            .send(&derived_begin(Operation::Encrypt))
            .await
            .is_err()
        {
            continue;
        }
        let started = loop {
            let answer = tokio::time::timeout_at(until.into(), reader.read_message()).await;
            match answer {
                Ok(Ok(Some(Message::Queued(_)))) => continue,
                Ok(Ok(Some(Message::Started(_)))) => break true,
                _ => break false,
            }
        };
        if !started {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let upload = tokio::spawn(async move {
            let chunk = vec![9u8; 64 << 10];
            for _ in 0..4096 {
                if writer.send_data(&chunk).await.is_err() {
                    break;
                }
            }
        });
        // 64 kB/s: a frame of n bytes every n / 65 536 s.
        loop {
            let frame = tokio::time::timeout_at(until.into(), reader.read_message()).await;
            match frame {
                Ok(Ok(Some(Message::Data(bytes)))) => {
                    tokio::time::sleep(Duration::from_secs_f64(bytes.len() as f64 / 65_536.0))
                        .await;
                }
                _ => break,
            }
        }
        upload.abort();
    }
}

async fn lock_out(binary: &Path, seconds: u64) {
    let aesd = AesdProcess::start(binary, &["--workers", "2"]);
    let addr = aesd.addr;
    let until = Instant::now() + Duration::from_secs(seconds + 2);
    let mut attackers = Vec::new();
    // 127.0.0.1 takes three slots, 127.0.0.2 the fourth, then both keep
    // beginning jobs on 34 more connections each (the queue's 64 places).
    for source in ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"] {
        attackers.push(tokio::spawn(slow_reader(source, addr, until)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..34 {
        for source in ["127.0.0.1", "127.0.0.2"] {
            attackers.push(tokio::spawn(slow_reader(source, addr, until)));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let probing = Instant::now();
    let mut busy = 0u32;
    let mut outcome = None;
    while Instant::now() < until && outcome.is_none() {
        let (mut reader, mut writer) = handshaken_to("127.0.0.3", addr).await;
        writer
            .send(&derived_begin(Operation::Encrypt))
            .await
            .expect("begin");
        let started = loop {
            match tokio::time::timeout_at(until.into(), reader.read_message()).await {
                Ok(Ok(Some(Message::Queued(_)))) => continue,
                Ok(Ok(Some(Message::Started(_)))) => break Some(probing.elapsed()),
                _ => break None,
            }
        };
        let Some(started) = started else {
            busy += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let data = vec![4u8; 64 << 10];
        let upload = async {
            for _ in 0..16 {
                writer.send_data(&data).await.expect("data");
            }
            writer.send(&Message::End).await.expect("end");
        };
        let download = async {
            loop {
                match tokio::time::timeout_at(until.into(), reader.read_message()).await {
                    Ok(Ok(Some(Message::Data(_)))) => continue,
                    Ok(Ok(Some(Message::Done(_)))) => break Some(probing.elapsed()),
                    _ => break None,
                }
            }
        };
        let ((), done) = tokio::join!(upload, download);
        outcome = Some((started, done));
    }
    match outcome {
        Some((started, Some(done))) => println!(
            "lock-out: a 1 MiB job from 127.0.0.3 started after {:.3} s and finished after {:.3} s ({busy} busy probes before)",
            started.as_secs_f64(),
            done.as_secs_f64()
        ),
        Some((started, None)) => println!(
            "lock-out: a 1 MiB job from 127.0.0.3 started after {:.2} s and did not finish within {seconds} s",
            started.as_secs_f64()
        ),
        None => {
            println!("lock-out: 127.0.0.3 got no slot in {seconds} s ({busy} probes answered busy)")
        }
    }
    for attacker in attackers {
        attacker.abort();
    }
}

/// A counter's value in a Prometheus text exposition.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

async fn lane_sharing(binary: &Path, size: usize) {
    let aesd = AesdProcess::start(
        binary,
        &["--workers", "1", "--metrics-listen", "127.0.0.1:0"],
    );
    let began = Instant::now();
    let jobs: Vec<_> = (0..2)
        .map(|_| {
            let addr = aesd.addr;
            tokio::spawn(async move {
                let (mut reader, mut writer) = handshaken_to("127.0.0.1", addr).await;
                writer
                    .send(&derived_begin(Operation::Encrypt))
                    .await
                    .expect("begin");
                let upload = tokio::spawn(async move {
                    let chunk = vec![6u8; 64 << 10];
                    for _ in 0..size / chunk.len() {
                        writer.send_data(&chunk).await.expect("data");
                    }
                    writer.send(&Message::End).await.expect("end");
                    writer
                });
                let mut queued = false;
                loop {
                    match reader.read_message().await {
                        Ok(Some(Message::Queued(_))) => queued = true,
                        Ok(Some(Message::Started(_) | Message::Data(_))) => {}
                        Ok(Some(Message::Done(_))) => break,
                        other => panic!("lane sharing: {other:?}"),
                    }
                }
                let _writer = upload.await;
                queued
            })
        })
        .collect();
    let mut queued = 0;
    for job in jobs {
        if job.await.expect("job") {
            queued += 1;
        }
    }
    let took = began.elapsed();
    let text = scrape(&aesd).await;
    let used = metric(&text, "aesd_cipher_lane_blocks_total");
    let offered = metric(&text, "aesd_cipher_lane_capacity_blocks_total");
    let fillable = metric(&text, "aesd_cipher_lane_fillable_blocks_total");
    let lanes = metric(&text, "aesd_cipher_lanes");
    let jobs_per_call = lanes * used / offered;
    let of_fillable = if fillable.is_nan() {
        "not counted by this aesd".to_owned()
    } else {
        format!("{:.1} %", 100.0 * used / fillable)
    };
    println!(
        "lane sharing: 2 × {} MiB from one address on 1 worker: {queued} queued, {jobs_per_call:.2} jobs per engine call; lane occupancy of the lanes the jobs could fill: {of_fillable}; of all {lanes} lanes: {:.1} %; {:.2} s",
        size >> 20,
        100.0 * used / offered,
        took.as_secs_f64()
    );
}

async fn handshaken(
    source: &str,
    aesd: &AesdProcess,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    FrameWriter<tokio::net::tcp::OwnedWriteHalf>,
) {
    handshaken_to(source, aesd.addr).await
}

async fn handshaken_to(
    source: &str,
    addr: std::net::SocketAddr,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    FrameWriter<tokio::net::tcp::OwnedWriteHalf>,
) {
    let (read, write) = connect_from(source, addr).await.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let mut writer = FrameWriter::new(write);
    writer.send_hello(Hello::current()).await.expect("hello");
    let welcome = reader.read_message().await;
    assert!(
        matches!(welcome, Ok(Some(Message::Welcome(_)))),
        "{welcome:?}"
    );
    (reader, writer)
}

async fn log_flood(binary: &Path, seconds: u64) {
    let aesd = AesdProcess::start(binary, &[]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before: usize = aesd.log().iter().map(|line| line.len() + 1).sum();
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let addr = aesd.addr;
        tasks.push(tokio::spawn(async move {
            let begin = Message::Begin(Begin {
                operation: Operation::Encrypt,
                format: Format::OpensslSaltedPbkdf2,
                key: KeySource::Password {
                    iterations: 1,
                    password: Password::new(b"pw".to_vec()),
                },
            });
            let mut sent = 0u64;
            // A connection ends after max-jobs-per-connection: open the next.
            while Instant::now() < until {
                let (mut reader, mut writer) = handshaken_to("127.0.0.1", addr).await;
                while Instant::now() < until {
                    if writer.send(&begin).await.is_err() {
                        break;
                    }
                    match reader.read_message().await {
                        Ok(Some(Message::Error(_))) => sent += 1,
                        _ => break,
                    }
                }
            }
            sent
        }));
    }
    let mut begins = 0;
    for task in tasks {
        begins += task.await.unwrap_or(0);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after: usize = aesd.log().iter().map(|line| line.len() + 1).sum();
    println!(
        "log flood: {begins} failed begins from one address in {seconds} s; aesd logged {} bytes ({} lines)",
        after - before,
        aesd.log().len()
    );
}

async fn idle_memory(binary: &Path) {
    const CONNECTIONS: usize = 200;
    let aesd = AesdProcess::start(
        binary,
        &[
            "--max-connections",
            "1000",
            "--max-connections-per-client",
            "1000",
        ],
    );
    let begin = Message::Begin(Begin {
        operation: Operation::Decrypt,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Derived(DerivedKeyParams {
            salt: [1; 8],
            key: Zeroizing::new([2; 32]),
            iv: Zeroizing::new([3; 16]),
        }),
    });
    let before = proc_status_kib(aesd.pid(), "VmRSS").unwrap_or(0);
    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let (mut reader, mut writer) = handshaken("127.0.0.1", &aesd).await;
        writer.send(&begin).await.expect("begin");
        for _ in 0..16 {
            if writer.send_data(&[0x55; 64 * 1024]).await.is_err() {
                break;
            }
        }
        let _ = writer.send(&Message::End).await;
        loop {
            match reader.read_message().await {
                Ok(Some(Message::Error(_))) | Ok(None) | Err(_) => break,
                Ok(Some(_)) => {}
            }
        }
        held.push((reader, writer));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = proc_status_kib(aesd.pid(), "VmRSS").unwrap_or(0);
    println!(
        "idle memory: {CONNECTIONS} connections after discarded 64 KiB frames: RSS {before} -> {after} KiB, {} KiB each",
        after.saturating_sub(before) / CONNECTIONS as u64
    );
}

async fn metrics_blinding(binary: &Path) {
    let aesd = AesdProcess::start(binary, &["--metrics-listen", "127.0.0.1:0"]);
    let metrics = aesd.metrics.expect("metrics address");
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(connect_from("127.0.0.1", metrics).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut served = 0;
    for _ in 0..30 {
        let mut stream = connect_from("127.0.0.2", metrics).await;
        let _ = stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\n\r\n")
            .await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(6), stream.read_to_end(&mut answer)).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            served += 1;
        }
    }
    println!(
        "metrics blinding: 8 requests held from 127.0.0.1; {served} of 30 scrapes from 127.0.0.2 served"
    );
    drop(held);
}
