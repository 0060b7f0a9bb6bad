//! Bad input: each case gets its own typed error, and the server serves
//! the next client (or the next job on the same connection) afterwards.

use crate::common;

use std::time::Duration;

use aesd_client::{Client, ClientError};
use aesd_proto::{
    ErrorCode, ErrorFrame, FrameReader, FrameWriter, Hello, Message, Operation, Password,
};
use aesd_server::{ConfigLayer, RunningServer};
use aesd_testkit::{handshaken_connection, pattern_bytes, raw_connection};
use common::{ciphertext, encrypt_verified, job_spec as spec, start_server};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// A good job on a fresh connection: the server is still serving.
async fn still_serving(server: &RunningServer) {
    encrypt_verified(
        &server.addr().to_string(),
        &spec(Operation::Encrypt, "next client"),
        99,
        100_000,
    )
    .await
    .expect("server still serving");
}

/// Reads frames until an error frame arrives; its contents.
async fn next_error(reader: &mut FrameReader<OwnedReadHalf>) -> ErrorFrame {
    let read = async {
        loop {
            match reader.read_message().await {
                Ok(Some(Message::Error(error))) => return error,
                Ok(Some(_)) => continue,
                other => panic!("expected an error frame, got {other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("error frame within 10 s")
}

async fn raw(server: &RunningServer) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    raw_connection(server.addr()).await
}

async fn handshaken(server: &RunningServer) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    handshaken_connection(server.addr()).await
}

/// Sends `bytes` as the first bytes of a connection and expects `code`.
async fn before_handshake_expect(bytes: &[u8], code: ErrorCode) -> ErrorFrame {
    expect_error(bytes, false, code).await
}

/// Sends `bytes` after the handshake and expects `code`.
async fn after_handshake_expect(bytes: &[u8], code: ErrorCode) -> ErrorFrame {
    expect_error(bytes, true, code).await
}

/// Sends `bytes` (after the handshake, or instead of it), expects an
/// error frame with `code` and the connection closed, then checks that
/// the server serves a new client.
async fn expect_error(bytes: &[u8], handshake: bool, code: ErrorCode) -> ErrorFrame {
    let server = start_server(ConfigLayer::default()).await;
    let (mut reader, mut write) = if handshake {
        handshaken(&server).await
    } else {
        raw(&server).await
    };
    write.write_all(bytes).await.expect("send");
    let error = next_error(&mut reader).await;
    assert_eq!(error.code, code, "{error}");
    assert!(
        matches!(reader.read_message().await, Ok(None)),
        "connection closed after the error"
    );
    still_serving(&server).await;
    error
}

/// A begin frame's bytes with the given operation, format and key source.
fn begin_bytes(operation: u8, format: u8, source: u8) -> Vec<u8> {
    let params = [0, 0, 0x03, 0xe8, b'p', b'w'];
    let mut payload = vec![operation, format, source, 0, params.len() as u8];
    payload.extend_from_slice(&params);
    let mut frame = vec![0x10];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// Bad frames over a real socket: each gets its error frame and its
/// connection closed, and the server goes on serving. What each frame's
/// error says, exactly, is aesd-core's protocol tests' (crates/core/tests/
/// protocol.rs, driven without sockets).
#[tokio::test]
async fn bad_frames_are_told_closed_and_the_server_goes_on() {
    before_handshake_expect(b"GET / HTTP/1.1\r\n\r\n", ErrorCode::BadMagic).await;
    let hello = Hello {
        version: 9,
        derived_keys: false,
    };
    before_handshake_expect(&hello.encode(), ErrorCode::UnsupportedVersion).await;
    after_handshake_expect(&[0x11, 0xff, 0xff, 0xff, 0xff], ErrorCode::FrameTooLarge).await;
    after_handshake_expect(&[0x55, 0, 0, 0, 0], ErrorCode::UnexpectedFrame).await;
    after_handshake_expect(&begin_bytes(1, 9, 1), ErrorCode::UnknownFormat).await;
}

#[tokio::test]
async fn truncated_frame() {
    let server = start_server(ConfigLayer::default()).await;
    let (mut reader, mut write) = handshaken(&server).await;
    write
        .write_all(&[0x10, 0, 0, 0, 20, 1, 1, 1, 0, 6])
        .await
        .expect("send");
    write.shutdown().await.expect("half-close");
    let error = next_error(&mut reader).await;
    assert_eq!(error.code, ErrorCode::TruncatedFrame);
    assert!(error.message.contains("5 of 20"), "{error}");
    still_serving(&server).await;
}

/// Runs a decrypt job expected to fail with `code`, then a good job on
/// the same connection.
async fn decrypt_fails_then_connection_still_works(input: &[u8], password: &str, code: ErrorCode) {
    let server = start_server(ConfigLayer::default()).await;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    let mut output = Vec::new();
    let err = client
        .run_job(
            &spec(Operation::Decrypt, password),
            &mut &input[..],
            &mut output,
        )
        .await
        .expect_err("job fails");
    assert_eq!(err.server_code(), Some(code), "{err}");
    let plain = pattern_bytes(5, 5000);
    let mut output = Vec::new();
    client
        .run_job(
            &spec(Operation::Decrypt, "right"),
            &mut &ciphertext(&plain, "right")[..],
            &mut output,
        )
        .await
        .expect("the same connection serves the next job");
    assert_eq!(output, plain);
    still_serving(&server).await;
}

#[tokio::test]
async fn wrong_password_on_decrypt() {
    let cipher = ciphertext(&pattern_bytes(4, 3000), "right");
    decrypt_fails_then_connection_still_works(&cipher, "wrong", ErrorCode::DecryptFailed).await;
}

#[tokio::test]
async fn truncated_ciphertext() {
    let cipher = ciphertext(&pattern_bytes(4, 3000), "right");
    decrypt_fails_then_connection_still_works(
        &cipher[..cipher.len() - 1],
        "right",
        ErrorCode::BadCiphertext,
    )
    .await;
}

#[tokio::test]
async fn ciphertext_not_a_block_multiple() {
    let mut cipher = ciphertext(&pattern_bytes(4, 3000), "right")[..16 + 32].to_vec();
    cipher.push(0);
    decrypt_fails_then_connection_still_works(&cipher, "right", ErrorCode::BadCiphertext).await;
}

#[tokio::test]
async fn ciphertext_without_salted_header() {
    // A large input: the failure comes early and the server discards the
    // rest of the upload before the next job.
    let cipher = pattern_bytes(8, 1 << 20);
    decrypt_fails_then_connection_still_works(&cipher, "right", ErrorCode::BadCiphertext).await;
}

#[tokio::test]
async fn iteration_count_outside_bounds() {
    let server = start_server(ConfigLayer {
        max_iter: Some(50_000),
        ..ConfigLayer::default()
    })
    .await;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    for iterations in [1, 50_001] {
        let mut job = spec(Operation::Encrypt, "pw");
        job.iterations = iterations;
        // The bounds apply to the server's own PBKDF2 (key source 1).
        job.key_derivation = aesd_client::KeyDerivation::Server;
        let err = client
            .run_job(&job, &mut &b"x"[..], &mut Vec::new())
            .await
            .expect_err("refused");
        assert_eq!(err.server_code(), Some(ErrorCode::LimitExceeded), "{err}");
    }
    client
        .run_job(
            &spec(Operation::Encrypt, "pw"),
            &mut &b"x"[..],
            &mut Vec::new(),
        )
        .await
        .expect("the connection stays usable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_vanishing_mid_upload_frees_its_slot() {
    let server = start_server(ConfigLayer {
        max_active: Some(1),
        max_queue: Some(4),
        ..ConfigLayer::default()
    })
    .await;
    let admission = server.state();
    let addr = server.addr().to_string();
    // A client that uploads part of a file, then its input stalls.
    let (mut feed, mut input) = tokio::io::duplex(1 << 20);
    feed.write_all(&pattern_bytes(1, 300_000))
        .await
        .expect("feed");
    let vanishing = tokio::spawn({
        let addr = addr.clone();
        async move {
            let mut client = Client::connect(&addr).await?;
            client
                .run_job(&spec(Operation::Encrypt, "pw"), &mut input, &mut Vec::new())
                .await
        }
    });
    // A second client waits in the queue behind it, then also vanishes.
    wait_until(|| admission.occupancy().active == 1).await;
    let queued = tokio::spawn({
        let addr = addr.clone();
        async move {
            let mut client = Client::connect(&addr).await?;
            client
                .run_job(
                    &spec(Operation::Encrypt, "pw"),
                    &mut &b"x"[..],
                    &mut Vec::new(),
                )
                .await
        }
    });
    wait_until(|| admission.occupancy().waiting == 1).await;
    queued.abort();
    wait_until(|| admission.occupancy().waiting == 0).await;
    vanishing.abort();
    let _: Result<Result<_, ClientError>, _> = vanishing.await;
    drop(feed);
    wait_until(|| admission.occupancy().active == 0).await;
    still_serving(&server).await;
}

async fn wait_until(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn protocol_frames_from_the_library_are_accepted() {
    // Guard for the helpers above: a hand-built begin with known fields
    // is what the library itself would send.
    let expected = Message::Begin(aesd_proto::Begin {
        operation: Operation::Encrypt,
        format: aesd_proto::Format::OpensslSaltedPbkdf2,
        key: aesd_proto::KeySource::Password {
            iterations: 1000,
            password: Password::new(b"pw".to_vec()),
        },
    });
    assert_eq!(begin_bytes(1, 1, 1), expected.to_bytes().expect("encodes"));
    let _ = FrameWriter::new(tokio::io::sink());
}
