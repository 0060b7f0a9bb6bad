//! Configurable limits, each with a test that fails when the protection is
//! removed: connections in total and per client address, input size per
//! job, jobs per connection.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use aesd_client::{Client, JobSpec};
use aesd_proto::{ErrorCode, ErrorFrame, FrameReader, Hello, Message, Operation};
use aesd_server::ConfigLayer;
use aesd_testkit::connect_from;
use common::{encrypt_verified, job_spec, start_server};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

fn spec() -> JobSpec {
    job_spec(Operation::Encrypt, "limits")
}

/// An open, handshaken connection (both halves held).
struct Held {
    _reader: FrameReader<OwnedReadHalf>,
    _writer: OwnedWriteHalf,
}

/// Connects from `source` (a loopback address) and handshakes; the error
/// frame when the server refuses instead of welcoming.
async fn held_from(source: &str, server: SocketAddr) -> Result<Held, ErrorFrame> {
    let stream = connect_from(source, server).await;
    let (read, mut writer) = stream.into_split();
    // The server may refuse before reading the hello and close; a failed
    // write then is expected, the error frame still arrives.
    let _ = writer.write_all(&Hello::current().encode()).await;
    let mut reader = FrameReader::new(read, 1 << 20);
    let answer = tokio::time::timeout(Duration::from_secs(5), reader.read_message())
        .await
        .expect("answer within 5 s");
    match answer {
        Ok(Some(Message::Welcome(_))) => Ok(Held {
            _reader: reader,
            _writer: writer,
        }),
        Ok(Some(Message::Error(error))) => Err(error),
        other => panic!("expected welcome or error, got {other:?}"),
    }
}

async fn wait_for_open(server: &aesd_server::RunningServer, open: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.state().open_connections() != open {
        assert!(
            tokio::time::Instant::now() < deadline,
            "open connections never reached {open}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn connections_over_the_total_cap_get_busy() {
    let server = start_server(ConfigLayer {
        max_connections: Some(3),
        ..ConfigLayer::default()
    })
    .await;
    let mut held = Vec::new();
    for source in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        held.push(
            held_from(source, server.addr())
                .await
                .expect("under the cap"),
        );
    }
    // From an address that already holds as many as any other: no idle
    // connection is closed for it (see the next test), it gets busy.
    let refused = held_from("127.0.0.1", server.addr())
        .await
        .err()
        .expect("over the cap");
    assert_eq!(refused.code, ErrorCode::Busy);
    assert!(refused.message.contains("maximum of 3"), "{refused}");
    held.pop();
    wait_for_open(&server, 2).await;
    held_from("127.0.0.4", server.addr())
        .await
        .expect("a place was freed");
}

/// Over `max-connections`, an idle connection (no job) of the client with
/// the most connections is closed with `busy` to make room for another
/// client's. Before, the newcomer was refused while one address held idle
/// connections.
#[tokio::test]
async fn over_the_cap_an_idle_connection_of_the_heaviest_client_makes_room() {
    let server = start_server(ConfigLayer {
        max_connections: Some(3),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    let mut oldest = held_from("127.0.0.1", addr).await.expect("first");
    let _newer = held_from("127.0.0.1", addr).await.expect("second");
    let _other = held_from("127.0.0.2", addr).await.expect("third");
    // The sessions mark themselves idle just after the welcome: retry a
    // refused newcomer until they have.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let _newcomer = loop {
        match held_from("127.0.0.3", addr).await {
            Ok(held) => break held,
            Err(refused) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no room made: {refused}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // 127.0.0.1's oldest idle connection made room.
    match tokio::time::timeout(Duration::from_secs(5), oldest._reader.read_message()).await {
        Ok(Ok(Some(Message::Error(error)))) => {
            assert_eq!(error.code, ErrorCode::Busy);
            assert!(error.message.contains("closed to make room"), "{error}");
            assert!(error.message.contains("127.0.0.1"), "{error}");
        }
        other => panic!("expected busy on the oldest idle connection, got {other:?}"),
    }
    assert_eq!(server.state().open_connections(), 3);
}

#[tokio::test]
async fn one_client_address_cannot_take_every_connection() {
    let server = start_server(ConfigLayer {
        max_connections_per_client: Some(2),
        ..ConfigLayer::default()
    })
    .await;
    let _first = held_from("127.0.0.1", server.addr()).await.expect("first");
    let _second = held_from("127.0.0.1", server.addr()).await.expect("second");
    let refused = held_from("127.0.0.1", server.addr())
        .await
        .err()
        .expect("third refused");
    assert_eq!(refused.code, ErrorCode::Busy);
    assert!(refused.message.contains("127.0.0.1"), "{refused}");
    // Another address is still served.
    let _other = held_from("127.0.0.2", server.addr())
        .await
        .expect("other client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_over_the_file_size_limit_fails_and_the_connection_goes_on() {
    let server = start_server(ConfigLayer {
        max_file_size: Some(100_000),
        ..ConfigLayer::default()
    })
    .await;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    let big = vec![7u8; 300_000];
    let err = client
        .run_job(&spec(), &mut &big[..], &mut Vec::new())
        .await
        .expect_err("over the limit");
    assert_eq!(err.server_code(), Some(ErrorCode::LimitExceeded), "{err}");
    assert!(err.to_string().contains("100000"), "{err}");
    let mut output = Vec::new();
    client
        .run_job(&spec(), &mut &big[..100_000], &mut output)
        .await
        .expect("exactly at the limit is fine, on the same connection");
    // Header, then 100 000 bytes padded by a whole block (a multiple of 16).
    assert_eq!(output.len(), 16 + 100_000 + 16);
}

#[tokio::test]
async fn a_connection_runs_at_most_its_job_limit() {
    let server = start_server(ConfigLayer {
        max_jobs_per_connection: Some(2),
        ..ConfigLayer::default()
    })
    .await;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    for _ in 0..2 {
        client
            .run_job(&spec(), &mut &b"abc"[..], &mut Vec::new())
            .await
            .expect("within the limit");
    }
    let err = client
        .run_job(&spec(), &mut &b"abc"[..], &mut Vec::new())
        .await
        .expect_err("third job refused");
    assert_eq!(err.server_code(), Some(ErrorCode::JobLimit), "{err}");
    let after = client
        .run_job(&spec(), &mut &b"abc"[..], &mut Vec::new())
        .await
        .expect_err("the connection is closed after job_limit");
    assert!(
        matches!(after, aesd_client::ClientError::Broken),
        "the client knows the connection is gone: {after}"
    );
    encrypt_verified(&server.addr().to_string(), &spec(), 1, 1000)
        .await
        .expect("a new connection is served");
}

/// Key source 1 makes the server run PBKDF2: each client has `kdf-budget`
/// iterations a minute. Past it a begin gets `busy` (job-level: the same
/// connection goes on) and a job with key source 2 still runs (each client
/// having its own bucket is `kdf_budget`'s unit test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_pbkdf2_budget_gets_busy_and_other_work_goes_on() {
    let server = start_server(ConfigLayer {
        kdf_budget: Some(3000),
        ..ConfigLayer::default()
    })
    .await;
    let mut server_side = job_spec(Operation::Encrypt, "budget");
    server_side.iterations = 1000;
    server_side.key_derivation = aesd_client::KeyDerivation::Server;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    for _ in 0..3 {
        client
            .run_job(&server_side, &mut &[1u8; 100][..], &mut Vec::new())
            .await
            .expect("within the budget");
    }
    let err = client
        .run_job(&server_side, &mut &[1u8; 100][..], &mut Vec::new())
        .await
        .expect_err("over the budget");
    assert_eq!(err.server_code(), Some(ErrorCode::Busy), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("PBKDF2 budget used up") && text.contains("--key-derivation client"),
        "{text}"
    );
    assert!(text.contains("retry in 20 s"), "{text}");
    // Key source 2 costs the server no PBKDF2: served on the same connection.
    let mut client_side = server_side.clone();
    client_side.key_derivation = aesd_client::KeyDerivation::Client;
    client
        .run_job(&client_side, &mut &[1u8; 100][..], &mut Vec::new())
        .await
        .expect("key source 2 goes on");
    let metrics = server.state().metrics_text();
    assert!(
        metrics.contains("aesd_jobs_refused_total{reason=\"kdf_budget\"} 1"),
        "{metrics}"
    );
    server.shutdown().await;
}
