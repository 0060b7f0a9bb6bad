//! TLS handshakes in progress are bounded per client (`tls_gate`): one
//! address holding handshakes open gets no more places, its further
//! connections wait for one (up to `handshake-timeout`), and another
//! address's TLS jobs run. Handshakes started are rate-limited per client
//! (`tls-handshake-rate`): an address over its rate gets a TLS
//! `access_denied` alert and is closed, which its client names as aesd's
//! refusal; another is served.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use aesd_client::cert_pin::parse_pin;
use aesd_client::tls::TlsSettings;
use aesd_client::{Client, ConnectOptions};
use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use aesd_server::RunningServer;
use aesd_server::caps::{TLS_HANDSHAKES_PER_CLIENT as MAX_PER_CLIENT, TLS_REFUSAL_ALERT};
use aesd_testkit::{TempDir, connect_from};
use common::{job_spec, start_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The start of a TLS ClientHello record (type 22, TLS 1.0 record version,
/// 512 bytes announced), never completed.
const PARTIAL_HELLO: [u8; 6] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];

/// A server with a TLS identity made for 127.0.0.1, the settings of
/// `layer` besides, and the identity's directory and pin.
async fn tls_server(layer: ConfigLayer) -> (RunningServer, TempDir, String) {
    let dir = TempDir::new("tls-gate");
    let made = aesd_server::tls_init::make_for_loopback(&dir.join("tls")).expect("identity");
    let server = start_server(ConfigLayer {
        tls_cert: Some(made.cert.clone()),
        tls_key: Some(made.key.clone()),
        ..layer
    })
    .await;
    (server, dir, made.pin)
}

/// Options for a client that pins `pin`, connecting from `bind`.
fn pinned(pin: &str, bind: &str) -> ConnectOptions {
    ConnectOptions {
        token: None,
        tls: Some(TlsSettings::with_pins(&[parse_pin(pin).expect("pin")])),
        bind: Some(bind.parse().expect("source address")),
    }
}

/// A TLS job from 127.0.0.1: the server serves other clients.
async fn tls_job(addr: SocketAddr, pin: &str) {
    let mut client = Client::connect_with(&addr.to_string(), &pinned(pin, "127.0.0.1"))
        .await
        .expect("TLS from 127.0.0.1");
    let mut output = Vec::new();
    client
        .run_job(
            &job_spec(Operation::Encrypt, "pw"),
            &mut &[5u8; 1000][..],
            &mut output,
        )
        .await
        .expect("job");
}

/// A connection from `source` that starts a handshake: `None` when the
/// server refused it within 2 s (its TLS alert, then the connection closed
/// without a reset), else the connection, still open (the caller keeps
/// it: it holds its place).
async fn refused_at_once(source: &str, addr: SocketAddr) -> Option<TcpStream> {
    let mut stream = connect_from(source, addr).await;
    stream
        .write_all(&PARTIAL_HELLO)
        .await
        .expect("partial hello");
    let mut answer = Vec::new();
    match tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut answer)).await {
        Ok(Ok(_)) => {
            assert_eq!(
                answer, TLS_REFUSAL_ALERT,
                "the refusal's alert, then the end"
            );
            None
        }
        Ok(Err(err)) => panic!("the refusal reset the connection: {err} (after {answer:?})"),
        Err(_) => Some(stream),
    }
}

/// A TLS client from `source` on another task, and when it finished.
fn tls_client_from(
    source: &'static str,
    addr: SocketAddr,
    pin: &str,
) -> tokio::task::JoinHandle<(
    Result<Client, aesd_client::ClientError>,
    tokio::time::Instant,
)> {
    let options = pinned(pin, source);
    tokio::spawn(async move {
        let connected = Client::connect_with(&addr.to_string(), &options).await;
        (connected, tokio::time::Instant::now())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_handshakes_gets_no_more_and_others_are_served() {
    let (server, _dir, pin) = tls_server(ConfigLayer {
        // Long, so that a handshake held open is not ended by it here.
        handshake_timeout: Some(60.0),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    let mut held = Vec::new();
    for _ in 0..MAX_PER_CLIENT {
        let mut stream = connect_from("127.0.0.2", addr).await;
        stream
            .write_all(&PARTIAL_HELLO)
            .await
            .expect("partial hello");
        held.push(stream);
    }
    // Time for the server to take the four up (microseconds).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The next handshake of 127.0.0.2 waits for a place (before: it was
    // reset at once); meanwhile another address's TLS job runs.
    let waiting = tls_client_from("127.0.0.2", addr, &pin);
    tls_job(addr, &pin).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !waiting.is_finished(),
        "a handshake over the per-client bound did not wait for a place"
    );
    // A place freed: it gets it and its handshake completes.
    let freed = tokio::time::Instant::now();
    drop(held.pop());
    let (connected, at) = waiting.await.expect("task");
    connected.expect("the waiting handshake, once a place is free");
    assert!(at >= freed);
    drop(held);
}

/// `tls-handshake-rate` 3 a minute: after 3 handshakes started from
/// 127.0.0.2, its further connections are refused at once (their turn is
/// 20 s away, past `handshake-timeout`) with the alert, a real TLS
/// client's too (named as aesd's refusal), and counted, while 127.0.0.1's
/// TLS jobs run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_over_its_handshake_rate_is_refused_and_another_is_served() {
    let (server, _dir, pin) = tls_server(ConfigLayer {
        tls_handshake_rate: Some(3),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    // Three handshakes started and abandoned, then more: refused at once
    // once the server has counted the three.
    for _ in 0..3 {
        let mut abandoned = connect_from("127.0.0.2", addr).await;
        abandoned
            .write_all(&PARTIAL_HELLO)
            .await
            .expect("partial hello");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut held = Vec::new();
    while let Some(open) = refused_at_once("127.0.0.2", addr).await {
        held.push(open);
        assert!(
            tokio::time::Instant::now() < deadline,
            "handshakes over the rate were not refused"
        );
    }
    let refused = Client::connect_with(&addr.to_string(), &pinned(&pin, "127.0.0.2"))
        .await
        .err()
        .expect("a TLS client over its rate was served");
    assert!(
        matches!(refused, aesd_client::ClientError::TlsRefused { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("refused the TLS handshake")
            && refused.to_string().contains("tls-handshake-rate"),
        "{refused}"
    );
    tls_job(addr, &pin).await;
    tls_job(addr, &pin).await;
    drop(held);
    let metrics = server.state().metrics_text();
    let count: u64 = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("aesd_connections_refused_total{reason=\"tls_handshake_rate\"} ")
        })
        .and_then(|value| value.trim().parse().ok())
        .expect("the refusal counter");
    assert!(count >= 2, "{count} refusals counted:\n{metrics}");
    server.shutdown().await;
}
