//! The optional pre-shared access token: required before any job when the
//! server has a `token-file`; a missing or wrong token is answered after a
//! growing delay and counted in the metrics; a server without a token is
//! unchanged for clients that have one.

use crate::common;

use std::time::{Duration, Instant};

use aesd_client::{Client, ClientError, JobSpec};
use aesd_proto::{
    AuthToken, ErrorCode, FrameReader, FrameWriter, Hello, Message, Operation, Password,
};
use aesd_server::ConfigLayer;
use aesd_testkit::{TempDir, pattern_bytes};
use common::{job_spec, start_server};
use tokio::net::TcpStream;

const TOKEN: &str = "correct horse battery staple";

fn token(text: &str) -> AuthToken {
    AuthToken::new(text.as_bytes().to_vec())
}

fn guarded(dir: &TempDir, delay: f64) -> ConfigLayer {
    ConfigLayer {
        token_file: Some(dir.secret_file("token", TOKEN)),
        auth_failure_delay: Some(delay),
        ..ConfigLayer::default()
    }
}

fn spec() -> JobSpec {
    job_spec(Operation::Encrypt, "pw")
}

fn server_code(result: Result<Client, ClientError>) -> Option<ErrorCode> {
    result.err().and_then(|err| err.server_code())
}

#[tokio::test]
async fn the_right_token_runs_jobs_and_the_welcome_says_one_is_needed() {
    let dir = TempDir::new("auth-ok");
    let server = start_server(guarded(&dir, 0.2)).await;
    let addr = server.addr().to_string();
    let mut client = Client::connect_with_token(&addr, Some(&token(TOKEN)))
        .await
        .expect("authorized");
    assert!(client.welcome().token_required);
    let plain = pattern_bytes(5, 10_000);
    let mut encrypted = Vec::new();
    client
        .run_job(&spec(), &mut &plain[..], &mut encrypted)
        .await
        .expect("a job after authorization");
    assert_eq!(encrypted.len(), 16 + 10_000 / 16 * 16 + 16);
    server.shutdown().await;
}

#[tokio::test]
async fn missing_and_wrong_tokens_are_refused_slowly_and_counted() {
    let dir = TempDir::new("auth-bad");
    let server = start_server(guarded(&dir, 0.2)).await;
    let addr = server.addr().to_string();

    let err = Client::connect(&addr).await.err().expect("no token");
    assert!(
        matches!(err, ClientError::TokenRequired { .. }),
        "a client without a token is told it needs one: {err}"
    );

    // Failures from one address wait 0.2 s, then 0.4 s.
    for (attempt, least) in [(1, 0.2), (2, 0.4)] {
        let started = Instant::now();
        let result =
            Client::connect_with_token(&addr, Some(&token("correct horse battery stapler"))).await;
        let waited = started.elapsed();
        assert_eq!(
            server_code(result),
            Some(ErrorCode::Unauthorized),
            "attempt {attempt}"
        );
        assert!(
            waited >= Duration::from_secs_f64(least),
            "failure {attempt} answered after {waited:?}, before its {least} s delay"
        );
    }

    // A begin in place of the auth frame fails the same way.
    let stream = TcpStream::connect(&addr).await.expect("connect");
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let mut writer = FrameWriter::new(write);
    writer.send_hello(Hello::current()).await.expect("hello");
    let Ok(Some(Message::Welcome(welcome))) = reader.read_message().await else {
        panic!("no welcome");
    };
    assert!(welcome.token_required);
    writer
        .send(&Message::Begin(aesd_proto::Begin {
            operation: Operation::Encrypt,
            format: aesd_proto::Format::OpensslSaltedPbkdf2,
            key: aesd_proto::KeySource::Password {
                iterations: 1000,
                password: Password::new(b"pw".to_vec()),
            },
        }))
        .await
        .expect("begin");
    match reader.read_message().await {
        Ok(Some(Message::Error(error))) => assert_eq!(error.code, ErrorCode::Unauthorized),
        other => panic!("expected unauthorized, got {other:?}"),
    }
    assert!(
        matches!(reader.read_message().await, Ok(None)),
        "then closed"
    );

    // The right token still works, and resets the address's delay.
    Client::connect_with_token(&addr, Some(&token(TOKEN)))
        .await
        .expect("the right token after failures");
    let started = Instant::now();
    let result = Client::connect_with_token(&addr, Some(&token("0123456789abcdef"))).await;
    assert_eq!(server_code(result), Some(ErrorCode::Unauthorized));
    // Without the reset this fourth failure would wait 8 × 0.2 s = 1.6 s.
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs_f64(1.2),
        "the delay was not reset by the success: {waited:?}"
    );

    let metrics = server.state().metrics_text();
    let line = metrics
        .lines()
        .find(|line| line.starts_with("aesd_errors_total{kind=\"unauthorized\"}"))
        .unwrap_or_else(|| panic!("no unauthorized count in\n{metrics}"));
    let count: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number");
    assert_eq!(count, 4.0, "{line}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_without_a_token_ignores_clients_that_have_one() {
    let server = start_server(ConfigLayer::default()).await;
    let addr = server.addr().to_string();
    let mut client = Client::connect_with_token(&addr, Some(&token(TOKEN)))
        .await
        .expect("no token needed");
    assert!(!client.welcome().token_required);
    let mut out = Vec::new();
    client
        .run_job(&spec(), &mut &b"abc"[..], &mut out)
        .await
        .expect("job");

    // An auth frame nobody asked for is a protocol error.
    let stream = TcpStream::connect(&addr).await.expect("connect");
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read, 1 << 20);
    let mut writer = FrameWriter::new(write);
    writer.send_hello(Hello::current()).await.expect("hello");
    assert!(matches!(
        reader.read_message().await,
        Ok(Some(Message::Welcome(_)))
    ));
    writer
        .send(&Message::Auth(token(TOKEN)))
        .await
        .expect("auth");
    match reader.read_message().await {
        Ok(Some(Message::Error(error))) => assert_eq!(error.code, ErrorCode::UnexpectedFrame),
        other => panic!("expected unexpected_frame, got {other:?}"),
    }
    server.shutdown().await;
}

#[test]
fn a_short_or_unreadable_token_file_is_refused_when_the_files_are_read() {
    let dir = TempDir::new("auth-config");
    let short = dir.secret_file("short", "too short");
    for (path, expected) in [
        (short, "16 to 256 bytes"),
        (dir.join("missing"), "cannot read access token file"),
    ] {
        // The settings resolve (no file is read then); reading the file
        // the settings name is refused.
        let config = aesd_server::Config::resolve(ConfigLayer {
            token_file: Some(path),
            ..ConfigLayer::default()
        })
        .expect("the settings alone are valid");
        let err = config.load_secrets().expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("token-file") && text.contains(expected),
            "{text}"
        );
    }
}
