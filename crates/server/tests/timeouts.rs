//! Timeouts against slow and stalled clients: a hello that never
//! completes, a frame dripped a byte at a time (slowloris), a client that
//! stops reading its output. Each is cut off with a `timeout` error near
//! its limit, gives back its connection and job slot, and the server goes
//! on serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_client::testkit::{encrypt_verified, start_server};
use aesd_client::{JobSpec, pattern::Pattern};
use aesd_proto::{
    Begin, ErrorCode, Format, FrameReader, FrameWriter, Hello, KeySource, Message, Operation,
    Password,
};
use aesd_server::admission::Admission;
use aesd_server::{ConfigLayer, RunningServer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;

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

async fn assert_recovers(server: &RunningServer, admission: &Admission) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while admission.occupancy().active != 0 {
        assert!(
            Instant::now() < deadline,
            "the job slot was never given back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spec = JobSpec {
        operation: Operation::Encrypt,
        password: Password::new(b"next".to_vec()),
        iterations: 1000,
    };
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

#[tokio::test]
async fn a_hello_that_never_completes_times_out() {
    let server = start_server(strict()).await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let started = Instant::now();
    write.write_all(b"AES").await.expect("three bytes of hello");
    let (code, answered) = error_frame(&mut reader).await;
    assert_eq!(code, ErrorCode::Timeout);
    assert_near_limit(started, answered, "stalled hello");
    assert!(matches!(reader.read_message().await, Ok(None)), "closed");
    assert_recovers(&server, &server.shared().admission).await;
}

#[tokio::test]
async fn a_frame_dripped_a_byte_at_a_time_is_cut_off() {
    let server = start_server(strict()).await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    write
        .write_all(&Hello::current().encode())
        .await
        .expect("hello");
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Welcome(_)))
    ));
    // A begin frame, one byte every 100 ms: each byte comes well inside
    // the idle limit, the whole frame would take about 20 s.
    let bytes = begin(190).to_bytes().expect("begin");
    let started = Instant::now();
    let drip = tokio::spawn(async move {
        for byte in bytes {
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Then hold the connection open.
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let (code, answered) = error_frame(&mut reader).await;
    drip.abort();
    assert_eq!(code, ErrorCode::Timeout);
    assert_near_limit(started, answered, "dripped begin frame");

    // The same inside a job: a data frame's payload dripped, and an end
    // frame announcing a payload (which it may not have) dripped.
    for (header, what) in [
        ([0x11, 0, 0, 0x10, 0], "dripped data frame"),
        ([0x12, 0, 0, 0x03, 0xe8], "dripped end frame"),
    ] {
        drip_inside_a_job(&server, header, what).await;
    }
    assert_recovers(&server, &server.shared().admission).await;
}

/// Starts a job, then sends a frame header and drips its payload a byte
/// every 100 ms; expects a timeout near the idle limit.
async fn drip_inside_a_job(server: &RunningServer, header: [u8; 5], what: &str) {
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    write
        .write_all(&Hello::current().encode())
        .await
        .expect("hello");
    write
        .write_all(&begin(2).to_bytes().expect("begin"))
        .await
        .expect("begin");
    loop {
        match reader.read_message().await {
            Ok(Some(Message::Started(_))) => break,
            Ok(Some(Message::Welcome(_) | Message::Queued(_))) => continue,
            other => panic!("expected started, got {other:?}"),
        }
    }
    let started = Instant::now();
    let drip = tokio::spawn(async move {
        let _ = write.write_all(&header).await;
        for _ in 0..4096 {
            if write.write_all(b"x").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (code, answered) = error_frame(&mut reader).await;
    drip.abort();
    assert_eq!(code, ErrorCode::Timeout, "{what}");
    assert_near_limit(started, answered, what);
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_and_frees_its_slot() {
    let server = start_server(strict()).await;
    let admission: Arc<Admission> = Arc::clone(&server.shared().admission);
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let mut writer = FrameWriter::new(write);
    writer.send_hello(Hello::current()).await.expect("hello");
    writer.send(&begin(2)).await.expect("begin");
    loop {
        match reader.read_message().await {
            Ok(Some(Message::Started(_))) => break,
            Ok(Some(_)) => continue,
            other => panic!("expected started, got {other:?}"),
        }
    }
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
