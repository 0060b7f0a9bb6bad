//! Bounded attack benchmarks against a real `aesd` on loopback, printing
//! figures for docs/hardening.md's attack table (issue 24). Not a test:
//! `scripts/bench/attacks.sh` runs it (release build).
//!
//! ```text
//! attacks AESD_BINARY [SECONDS]
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
    let binary = args.next().expect("usage: attacks AESD_BINARY [SECONDS]");
    let seconds: u64 = args
        .next()
        .map(|s| s.parse().expect("SECONDS: a number"))
        .unwrap_or(10)
        .min(60);
    let binary = Path::new(&binary);
    log_flood(binary, seconds).await;
    idle_memory(binary).await;
    metrics_blinding(binary).await;
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
