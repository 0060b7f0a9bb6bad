//! The PROXY protocol with the real `aesd`: behind a trusted proxy
//! address (127.0.0.1), v1 and v2 headers key the per-address limits and
//! the log on the address they carry; a PROXY header from an untrusted
//! address (127.0.0.2), a trusted peer without a header and malformed
//! headers are refused with an error frame, and the server stays up.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aesd_client::Client;
use aesd_core::proxy_header::ProxyHeader;
use aesd_proto::{ErrorCode, ErrorFrame, FrameReader, Hello, Message, Operation};
use aesd_server::ConfigLayer;
use aesd_testkit::{AesdProcess, TempDir, connect_from};
use common::{job_spec, start_server};
use tokio::io::AsyncWriteExt;

/// The trusted proxy's address; clients that are not proxies use 127.0.0.2.
const PROXY: &str = "127.0.0.1";
const STRANGER: &str = "127.0.0.2";
/// A second address outside the trusted proxies.
const OTHER_STRANGER: &str = "127.0.0.3";

fn aesd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_aesd"))
}

/// The header a proxy sends for `client` connecting to `server`.
fn header(version: u8, client: &str, server: SocketAddr) -> Vec<u8> {
    let header = ProxyHeader::tcp(client.parse().expect("client"), server);
    match version {
        1 => header.to_v1(),
        _ => header.to_v2(),
    }
}

/// Connects from the trusted proxy, sends `prelude` and handshakes.
async fn via_proxy(server: SocketAddr, prelude: &[u8]) -> Result<Client, aesd_client::ClientError> {
    let mut stream = connect_from(PROXY, server).await;
    stream.write_all(prelude).await.expect("prelude");
    tokio::time::timeout(Duration::from_secs(5), Client::over(stream))
        .await
        .expect("an answer within 5 s")
}

/// Sends `bytes` from `source` and returns the error frame the server
/// answers with (it must answer with one and close).
async fn refused(source: &str, server: SocketAddr, bytes: &[u8]) -> ErrorFrame {
    let stream = connect_from(source, server).await;
    let (read, mut write) = stream.into_split();
    let _ = write.write_all(bytes).await;
    let _ = write.shutdown().await;
    let mut reader = FrameReader::new(read, 1 << 20);
    let answer = tokio::time::timeout(Duration::from_secs(5), reader.read_message())
        .await
        .expect("an answer within 5 s");
    match answer {
        Ok(Some(Message::Error(error))) => error,
        other => panic!("expected an error frame for {bytes:?}, got {other:?}"),
    }
}

async fn encrypt_through(client: &mut Client) {
    let input = vec![7u8; 100_000];
    let mut output = Vec::new();
    let report = client
        .run_job(
            &job_spec(Operation::Encrypt, "proxy"),
            &mut &input[..],
            &mut output,
        )
        .await
        .expect("the job runs");
    assert_eq!(report.done.bytes_in, input.len() as u64);
    assert_eq!(output.len(), 16 + 16 * (input.len() / 16 + 1));
}

fn server_error(result: Result<Client, aesd_client::ClientError>) -> ErrorFrame {
    match result {
        Err(aesd_client::ClientError::Server(error)) => error,
        Err(other) => panic!("expected an error frame, got {other}"),
        Ok(_) => panic!("expected an error frame, got a welcome"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carried_addresses_key_the_limits_and_the_log() {
    let aesd = AesdProcess::start(
        aesd(),
        &[
            "--trusted-proxies",
            "127.0.0.1/32",
            "--max-connections-per-client",
            "1",
            "--handshake-timeout",
            "2",
        ],
    );
    let server = aesd.addr;

    // A job through the proxy, v1 then v2: logged as the carried client.
    for (version, client) in [(1, "192.0.2.10:5000"), (2, "198.51.100.20:6000")] {
        let mut client_conn = via_proxy(server, &header(version, client, server))
            .await
            .expect("welcome");
        encrypt_through(&mut client_conn).await;
        client_conn.close().await;
    }

    // One connection per client address: the cap counts carried
    // addresses, not the proxy's (every connection comes from 127.0.0.1).
    let held = via_proxy(server, &header(2, "203.0.113.7:1000", server))
        .await
        .expect("first connection of 203.0.113.7");
    let error = server_error(via_proxy(server, &header(1, "203.0.113.7:1001", server)).await);
    assert_eq!(error.code, ErrorCode::Busy, "{error:?}");
    assert!(error.message.contains("203.0.113.7"), "{}", error.message);
    let mut other = via_proxy(server, &header(2, "203.0.113.8:1000", server))
        .await
        .expect("another carried address has its own cap");
    encrypt_through(&mut other).await;
    other.close().await;
    drop(held);

    // Untrusted peers may not send a header; a trusted one must. (Two
    // untrusted addresses: with a cap of 1 per client, a second connection
    // from the same one could arrive before the server has released the
    // first one's place, and get `busy`.)
    for (version, stranger) in [(1, STRANGER), (2, OTHER_STRANGER)] {
        let error = refused(stranger, server, &header(version, "10.0.0.1:1", server)).await;
        assert_eq!(error.code, ErrorCode::BadMagic, "{error:?}");
        assert!(
            error.message.contains("trusted-proxies"),
            "{}",
            error.message
        );
    }
    let error = refused(PROXY, server, &Hello::current().encode()).await;
    assert_eq!(error.code, ErrorCode::BadMagic, "{error:?}");
    assert!(error.message.contains("PROXY"), "{}", error.message);

    // Malformed headers: refused, each with its reason.
    let mut too_long = b"PROXY UNKNOWN ".to_vec();
    too_long.resize(200, b'x');
    let mut bad_version = header(2, "10.0.0.1:1", server);
    bad_version[12] = 0x31;
    let mut huge = header(2, "10.0.0.1:1", server);
    huge[14] = 0xff;
    for bytes in [
        too_long,
        bad_version,
        huge,
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n".to_vec(),
        b"PROXY TCP4 1.2.3.4\r\n".to_vec(),
    ] {
        let error = refused(PROXY, server, &bytes).await;
        assert_eq!(error.code, ErrorCode::Malformed, "{error:?} for {bytes:?}");
    }
    let error = refused(PROXY, server, b"PROXY TCP4 1.2.").await;
    assert_eq!(error.code, ErrorCode::TruncatedFrame, "{error:?}");
    // A proxy that sends nothing gets the handshake timeout.
    let silent = connect_from(PROXY, server).await;
    let (read, _write) = silent.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    match tokio::time::timeout(Duration::from_secs(10), reader.read_message()).await {
        Ok(Ok(Some(Message::Error(error)))) => assert_eq!(error.code, ErrorCode::Timeout),
        other => panic!("expected a timeout error, got {other:?}"),
    }

    // A port probe from the proxy's address (connect, close) is no warning.
    drop(connect_from(PROXY, server).await);

    // Still serving.
    let mut after = via_proxy(server, &header(1, "192.0.2.99:1", server))
        .await
        .expect("still up");
    encrypt_through(&mut after).await;
    after.close().await;

    // The log names the carried clients, never the proxy, for the jobs.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = aesd.log();
    let jobs: Vec<&String> = log
        .iter()
        .filter(|line| line.contains("job done"))
        .collect();
    assert_eq!(jobs.len(), 4, "{log:#?}");
    for (line, client) in jobs.iter().zip([
        "192.0.2.10:5000",
        "198.51.100.20:6000",
        "203.0.113.8:1000",
        "192.0.2.99:1",
    ]) {
        assert!(line.contains(&format!("peer={client}")), "{line}");
    }
    assert!(
        log.iter()
            .any(|line| line.contains("not in trusted-proxies") && line.contains(STRANGER)),
        "{log:#?}"
    );
    assert!(
        !log.iter().any(|line| line.contains("after 0 bytes")),
        "{log:#?}"
    );
}

fn token_file(dir: &TempDir) -> PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, "0123456789abcdef\n").expect("token");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_failure_throttle_counts_the_carried_address() {
    let dir = TempDir::new("proxy-token");
    let server = start_server(ConfigLayer {
        trusted_proxies: Some("127.0.0.1/32".into()),
        token_file: Some(token_file(&dir)),
        auth_failure_delay: Some(0.01),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    let mut stream = connect_from(PROXY, addr).await;
    stream
        .write_all(&header(1, "192.0.2.50:1", addr))
        .await
        .expect("header");
    let wrong = aesd_proto::AuthToken::new(b"fedcba9876543210".to_vec());
    let (read, mut write) = stream.into_split();
    write
        .write_all(&Hello::current().encode())
        .await
        .expect("hello");
    write
        .write_all(&Message::Auth(wrong).to_bytes().expect("auth"))
        .await
        .expect("auth");
    let mut reader = FrameReader::new(read, 1 << 20);
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Welcome(_)))
    ));
    match reader.read_message().await {
        Ok(Some(Message::Error(error))) => assert_eq!(error.code, ErrorCode::Unauthorized),
        other => panic!("expected unauthorized, got {other:?}"),
    }
    // One failure is remembered for the carried address (its next delay
    // doubles), none for the proxy's.
    let state = server.state();
    assert_eq!(
        state.auth_failure_delay("192.0.2.50".parse().expect("ip")),
        Duration::from_millis(20)
    );
    assert_eq!(
        state.auth_failure_delay(PROXY.parse().expect("ip")),
        Duration::from_millis(10)
    );
    server.shutdown().await;
}
