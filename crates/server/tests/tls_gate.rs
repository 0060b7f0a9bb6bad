//! TLS handshakes in progress are bounded per client (`tls_gate`): one
//! address holding handshakes open gets no more places, its further
//! connections are closed at once, and another address's TLS jobs run.

mod common;

use std::time::Duration;

use aesd_client::cert_pin::parse_pin;
use aesd_client::tls::TlsSettings;
use aesd_client::{Client, ConnectOptions};
use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use aesd_server::caps::TLS_HANDSHAKES_PER_CLIENT as MAX_PER_CLIENT;
use aesd_testkit::{TempDir, connect_from};
use common::{job_spec, start_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The start of a TLS ClientHello record (type 22, TLS 1.0 record version,
/// 512 bytes announced), never completed.
const PARTIAL_HELLO: [u8; 6] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_handshakes_gets_no_more_and_others_are_served() {
    let dir = TempDir::new("tls-gate");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let made = aesd_server::tls_init::make(
        &dir.join("tls"),
        &["localhost".to_owned()],
        &["127.0.0.1".parse().expect("ip")],
        now,
    )
    .expect("identity");
    let server = start_server(ConfigLayer {
        tls_cert: Some(made.cert.clone()),
        tls_key: Some(made.key.clone()),
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
    // The next handshake of 127.0.0.2 is refused: closed at once, long
    // before the handshake timeout. (Retried while the held ones are still
    // being taken up by the server.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut extra = connect_from("127.0.0.2", addr).await;
        extra
            .write_all(&PARTIAL_HELLO)
            .await
            .expect("partial hello");
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_secs(2), extra.read(&mut byte)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            other => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "a handshake over the per-client bound was not refused: {other:?}"
                );
            }
        }
    }
    // Another address's TLS job runs.
    let pin = parse_pin(&made.pin).expect("pin");
    let options = ConnectOptions {
        token: None,
        tls: Some(TlsSettings::with_pins(&[pin])),
        bind: None,
    };
    let mut client = Client::connect_with(&addr.to_string(), &options)
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
    drop(held);
}
