//! What the server's integration tests share: an in-process server, jobs
//! for it, and whole encryptions checked end to end by the real client
//! and the independent verifier (`aesd-pattern`).

#![allow(dead_code)] // Each test file uses its own part.

use aesd_client::{Client, JobReport, JobSpec};
use aesd_pattern::{Pattern, PatternSource, VerifyingSink};
use aesd_proto::Operation;
use aesd_server::{ConfigLayer, RunningServer};

/// An `openssl enc` file of `plain` under `password` (a fixed salt, 1000
/// iterations: what `job_spec` asks for), made by aesd-core's own stream.
pub fn ciphertext(plain: &[u8], password: &str) -> Vec<u8> {
    aesd_core::openssl_enc::encrypt_buffer(password.as_bytes(), &[3; 8], 1000, plain, 64 * 1024)
}

/// An in-process server on 127.0.0.1 (an ephemeral port) with `layer`
/// over the defaults.
pub async fn start_server(layer: ConfigLayer) -> RunningServer {
    aesd_server::start_loopback(layer)
        .await
        .expect("the test server starts")
}

/// A job for tests: `operation` under `password` at 1000 PBKDF2
/// iterations (the server's default minimum: quick to derive).
pub fn job_spec(operation: Operation, password: &str) -> JobSpec {
    JobSpec::with_password(operation, password, 1000)
}

/// Encrypts `size` bytes of the pattern for `seed` through `server` on a
/// new connection and verifies the result with the independent verifier:
/// the job's report, or what went wrong.
pub async fn encrypt_verified(
    server: &str,
    spec: &JobSpec,
    seed: u64,
    size: u64,
) -> Result<JobReport, String> {
    let mut client = Client::connect(server)
        .await
        .map_err(|err| format!("{}: {err}", err.kind()))?;
    let mut source = PatternSource::new(seed, size);
    let key = client
        .prepare_key(spec, &mut source)
        .await
        .map_err(|err| format!("{}: {err}", err.kind()))?;
    let mut sink = VerifyingSink::for_job(
        key.derived(),
        spec.password.as_bytes(),
        spec.iterations,
        Pattern::new(seed),
        size,
    );
    let report = client
        .run_prepared_job(spec, key, &mut source, &mut sink, |_| {})
        .await
        .map_err(|err| format!("{}: {err}", err.kind()))?;
    sink.finish().map_err(|err| format!("verify: {err}"))?;
    Ok(report)
}

/// The text a metrics endpoint at `addr` answers to `GET /metrics`
/// (within 10 s), the status line and headers included.
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\n\r\n")
        .await
        .expect("send");
    let mut response = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut response),
    )
    .await
    .expect("in time")
    .expect("read");
    String::from_utf8_lossy(&response).into_owned()
}
