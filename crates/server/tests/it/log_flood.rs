//! A client cannot make aesd's log grow without bound: lines about one
//! client are rate-limited (`log_limit`), and refusals are logged below
//! info. The real `aesd`, its log at info, as on the board.

use std::path::Path;
use std::time::{Duration, Instant};

use aesd_proto::{Begin, ErrorCode, Format, FrameReader, Hello, KeySource, Message, Operation};
use aesd_proto::{FrameWriter, Password};
use aesd_testkit::{AesdProcess, connect_from};

/// `count` begins asking for 1 PBKDF2 iteration (under `min-iter`: the job
/// fails with `limit_exceeded`, the connection goes on) from `source`;
/// each answer must be that error.
async fn refused_begins(aesd: &AesdProcess, source: &str, count: usize) {
    let stream = connect_from(source, aesd.addr).await;
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let mut writer = FrameWriter::new(write);
    writer.send_hello(Hello::current()).await.expect("hello");
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Welcome(_)))
    ));
    let begin = Message::Begin(Begin {
        operation: Operation::Encrypt,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            iterations: 1,
            password: Password::new(b"pw".to_vec()),
        },
    });
    for _ in 0..count {
        writer.send(&begin).await.expect("begin");
        match reader.read_message().await {
            Ok(Some(Message::Error(error))) => {
                assert_eq!(error.code, ErrorCode::LimitExceeded, "{error}");
            }
            other => panic!("expected limit_exceeded, got {other:?}"),
        }
    }
}

fn lines_about(log: &[String], source: &str) -> usize {
    log.iter()
        .filter(|line| line.contains(&format!("peer={source}:")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_failed_begins_logs_a_bounded_number_of_lines() {
    const BEGINS: usize = 2000;
    let aesd = AesdProcess::start(Path::new(env!("CARGO_BIN_EXE_aesd")), &[]);
    let started = Instant::now();
    refused_begins(&aesd, "127.0.0.1", BEGINS).await;
    // Another client still gets its lines: the limit is per client.
    refused_begins(&aesd, "127.0.0.2", 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = aesd.log();
    let bytes: usize = log.iter().map(|line| line.len() + 1).sum();
    println!(
        "{BEGINS} failed begins in {:.2} s: {} log lines about the client, {bytes} bytes of log in all",
        started.elapsed().as_secs_f64(),
        lines_about(&log, "127.0.0.1")
    );
    assert_eq!(lines_about(&log, "127.0.0.2"), 3, "{log:#?}");
    let flooder = lines_about(&log, "127.0.0.1");
    assert!(
        (1..=aesd_server::caps::LOG_LINES_PER_WINDOW as usize + 1).contains(&flooder),
        "{flooder} lines about the flooding client"
    );
    assert!(bytes < 16 * 1024, "{bytes} bytes of log");
}
