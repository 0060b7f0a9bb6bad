//! Timeouts against slow and stalled clients over real sockets: a hello
//! that never completes, a client that stops reading its output (the
//! socket buffers fill, the server's write blocks). Each is cut off with a
//! `timeout` error near its limit, gives back its connection and job slot,
//! and the server goes on serving. The exact limits, frames dripped a byte
//! at a time and every other deadline of the protocol are aesd-core's
//! protocol tests' (crates/core/tests/it/protocol.rs, on the harness's clock).

use crate::common;

use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, ErrorCode, Format, FrameReader, FrameWriter, KeySource, Message, Operation, Password,
};
use aesd_server::ServerState;
use aesd_server::{ConfigLayer, RunningServer};
use aesd_testkit::{Pattern, handshaken_connection, raw_connection};
use common::{encrypt_verified, job_spec, start_server};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

const LIMIT: f64 = 1.0;

fn strict() -> ConfigLayer {
    ConfigLayer {
        handshake_timeout: Some(LIMIT),
        idle_timeout: Some(LIMIT),
        max_active: Some(1),
        ..ConfigLayer::default()
    }
}

fn begin(password_len: usize) -> Message {
    Message::Begin(Begin {
        operation: Operation::Encrypt,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            iterations: 1000,
            password: Password::new(vec![b'p'; password_len]),
        },
    })
}

/// The next error frame (skipping anything else), and when it came.
async fn error_frame(reader: &mut FrameReader<OwnedReadHalf>) -> (ErrorCode, Instant) {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), reader.read_message()).await {
            Ok(Ok(Some(Message::Error(error)))) => return (error.code, Instant::now()),
            Ok(Ok(Some(_))) => continue,
            other => panic!("expected an error frame within 10 s, got {other:?}"),
        }
    }
}

async fn assert_recovers(server: &RunningServer, admission: &ServerState) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while admission.occupancy().active != 0 {
        assert!(
            Instant::now() < deadline,
            "the job slot was never given back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spec = job_spec(Operation::Encrypt, "next");
    encrypt_verified(&server.addr().to_string(), &spec, 3, 100_000)
        .await
        .expect("the server still serves");
}

fn assert_near_limit(started: Instant, answered: Instant, what: &str) {
    let took = answered - started;
    assert!(
        took >= Duration::from_secs_f64(LIMIT * 0.9) && took < Duration::from_secs_f64(LIMIT * 3.0),
        "{what}: cut off after {took:?}, the limit is {LIMIT} s"
    );
}

/// How far a test connection gets before the test takes over.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Stage {
    Connected,
    JobStarted,
}

/// A raw connection brought to `stage`: the reader, and the socket's write
/// half for the test to misbehave on.
async fn connect(
    server: &RunningServer,
    stage: Stage,
) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    let (mut reader, mut write) = match stage {
        Stage::Connected => raw_connection(server.addr()).await,
        _ => handshaken_connection(server.addr()).await,
    };
    if stage >= Stage::JobStarted {
        write
            .write_all(&begin(2).to_bytes().expect("begin"))
            .await
            .expect("begin");
        loop {
            match reader.read_message().await {
                Ok(Some(Message::Started(_))) => break,
                Ok(Some(Message::Queued(_))) => continue,
                other => panic!("expected started, got {other:?}"),
            }
        }
    }
    (reader, write)
}

/// Sends `head`, then `tail` a byte every 100 ms, each byte well inside
/// the idle limit; expects a timeout near the limit all the same.
async fn drip(server: &RunningServer, stage: Stage, head: Vec<u8>, tail: Vec<u8>, what: &str) {
    let (mut reader, mut write) = connect(server, stage).await;
    let started = Instant::now();
    let dripping = tokio::spawn(async move {
        let _ = write.write_all(&head).await;
        for byte in tail {
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Then hold the connection open.
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let (code, answered) = error_frame(&mut reader).await;
    dripping.abort();
    assert_eq!(code, ErrorCode::Timeout, "{what}");
    assert_near_limit(started, answered, what);
    assert!(
        matches!(reader.read_message().await, Ok(None)),
        "{what}: closed"
    );
}

#[tokio::test]
async fn a_hello_that_never_completes_times_out() {
    let server = start_server(strict()).await;
    drip(
        &server,
        Stage::Connected,
        b"AES".to_vec(),
        Vec::new(),
        "stalled hello",
    )
    .await;
    assert_recovers(&server, &server.state()).await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_and_frees_its_slot() {
    let server = start_server(strict()).await;
    let admission: ServerState = server.state();
    let (reader, write) = connect(&server, Stage::JobStarted).await;
    let mut writer = FrameWriter::new(write);
    // Upload up to 1 GiB and never read the output: once the socket
    // buffers are full the server cannot write, and must give up.
    let upload = tokio::spawn(async move {
        let mut chunk = vec![0u8; 64 << 10];
        let mut pattern = Pattern::new(1);
        for _ in 0..(1 << 14) {
            pattern.fill(&mut chunk);
            if writer.send_data(&chunk).await.is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    while admission.occupancy().active != 0 {
        assert!(
            Instant::now() < deadline,
            "a client that reads nothing still holds its slot after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    upload.abort();
    drop(reader);
    assert_recovers(&server, &admission).await;
}
