//! Fuzzes the client's side of the protocol: arbitrary bytes as everything
//! a (hostile or broken) server sends on one connection, welcome included,
//! while the client library (`aesd_client::Client`, what aescrypt and
//! aesload run) handshakes and runs one small job.
//!
//! The first input byte picks the job: bit 0 encryption or decryption,
//! bit 1 whether the client derives the key (key source 2) or sends the
//! password. Checks, besides "never panics":
//! * the client ends within a bounded time (its idle timeout is 200 ms, so
//!   a silent or trickling server cannot hold it);
//! * a job reported as done says exactly how many bytes it wrote out.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use aesd_client::{Client, JobSpec, KeyDerivation};
use aesd_proto::{Operation, Password};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// A job's input: a plaintext, or the start of an `openssl enc` file.
const INPUT: &[u8] = b"Salted__\x00\x01\x02\x03\x04\x05\x06\x07 sixteen bytes!!";

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, server_bytes)) = data.split_first() else {
        return;
    };
    let spec = JobSpec {
        operation: if control & 1 == 0 {
            Operation::Encrypt
        } else {
            Operation::Decrypt
        },
        password: Password::new(b"fuzz".to_vec()),
        iterations: 1,
        key_derivation: if control & 2 == 0 {
            KeyDerivation::Client
        } else {
            KeyDerivation::Server
        },
    };
    let server_bytes = server_bytes.to_vec();
    runtime().block_on(async move {
        let outcome = tokio::time::timeout(Duration::from_secs(10), run(server_bytes, spec)).await;
        assert!(outcome.is_ok(), "the client hung on a hostile server");
    });
});

/// One connection to a fake server that reads whatever the client sends
/// and answers with `server_bytes`, then closes; the client runs one job.
async fn run(server_bytes: Vec<u8>, spec: JobSpec) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let (mut read, mut write) = stream.split();
        let drain = async {
            let mut sink = [0u8; 4096];
            while matches!(read.read(&mut sink).await, Ok(n) if n > 0) {}
        };
        let answer = async {
            let _ = write.write_all(&server_bytes).await;
            let _ = write.shutdown().await;
        };
        tokio::join!(drain, answer);
    });
    let stream = TcpStream::connect(addr).await.expect("connect");
    if let Ok(mut client) = Client::over(stream).await {
        client.set_idle_timeout(Duration::from_millis(200));
        let mut output = Vec::new();
        if let Ok(report) = client.run_job(&spec, &mut &INPUT[..], &mut output).await {
            assert_eq!(report.bytes_received, output.len() as u64);
        }
    }
    server.abort();
}
