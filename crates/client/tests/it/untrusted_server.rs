//! The client against fake servers that break the protocol's promises: a
//! welcome with an impossible data limit, a done frame with wrong counts,
//! silence in the middle of a job. Each fake server is the test kit's
//! [`fake_server`] with a script of raw frames.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use aesd_client::{Client, ClientError, JobSpec, KeyDerivation};
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{Done, Message, Operation};
use aesd_testkit::TempDir;
use aesd_testkit::fake_server::{Reader, Writer, fake_server, silent_after_started, take_job};

/// Answers every job with 32 bytes of output and a done frame whose
/// counts are off by `lie_in` and `lie_out`.
async fn lying_done(mut reader: Reader, mut writer: Writer, lie_in: u64, lie_out: u64) {
    let input = take_job(&mut reader, &mut writer).await;
    // An encryption's output starts with `Salted__` (the client checks).
    let mut output = b"Salted__".to_vec();
    output.extend_from_slice(&[7u8; 24]);
    let _ = writer.send_data(&output).await;
    let _ = writer
        .send(&Message::Done(Done {
            bytes_in: input + lie_in,
            bytes_out: 32 + lie_out,
            queue_us: 0,
            processing_us: 0,
        }))
        .await;
    let _ = reader.read_message().await;
}

async fn run_one(addr: SocketAddr, timeout: Option<Duration>) -> Result<Vec<u8>, ClientError> {
    let mut client = Client::connect(&addr.to_string()).await?;
    if let Some(limit) = timeout {
        client.set_idle_timeout(limit);
    }
    // The fake server wants the password on a cleartext connection:
    // allowed explicitly.
    let mut spec = JobSpec::with_password(Operation::Encrypt, "pw", 1000);
    spec.key_derivation = KeyDerivation::Server;
    let mut output = Vec::new();
    client
        .run_job(&spec, &mut &[1u8; 10_000][..], &mut output)
        .await?;
    Ok(output)
}

/// aescrypt failed with `reason` and left only its input and password.
fn failed_cleanly(output: &Output, dir: &TempDir, reason: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(reason), "{stderr}");
    assert!(!Path::new(&dir.join("out")).exists(), "no output expected");
    let mut left: Vec<String> = std::fs::read_dir(dir.join(""))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["in", "password"], "no temporary file may be left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_welcome_with_an_impossible_data_limit_is_refused() {
    for max_data in [0, 4095, MAX_FRAME_PAYLOAD + 1] {
        let addr = fake_server(max_data, |reader, writer| async move {
            let _ = (reader, writer);
        })
        .await;
        match Client::connect(&addr.to_string()).await {
            Err(ClientError::BadDataLimit { max_data: got, .. }) => assert_eq!(got, max_data),
            Err(other) => panic!("{max_data}: wrong error {other}"),
            Ok(_) => panic!("{max_data}: accepted"),
        }
    }
    let addr = fake_server(0, |reader, writer| async move {
        let _ = (reader, writer);
    })
    .await;
    let dir = TempDir::new("untrusted-welcome");
    let output = tokio::task::spawn_blocking({
        let dir_path = dir.join("");
        move || {
            let dir = TempDirRef(dir_path);
            dir.run(addr, &[])
        }
    })
    .await
    .expect("join");
    failed_cleanly(&output, &dir, "max_data = 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_frame_with_wrong_counts_fails_the_job() {
    for (lie_in, lie_out, direction) in [(1, 0, "input"), (0, 5, "output")] {
        let addr = fake_server(65_536, move |reader, writer| {
            lying_done(reader, writer, lie_in, lie_out)
        })
        .await;
        match run_one(addr, None).await {
            Err(ClientError::CountMismatch { direction: got, .. }) => assert_eq!(got, direction),
            other => panic!("wrong result {other:?}"),
        }
    }
    // The honest fake passes, so the check is what fails the others.
    let addr = fake_server(65_536, |reader, writer| lying_done(reader, writer, 0, 0)).await;
    let honest = run_one(addr, None).await.expect("honest");
    assert_eq!(honest.len(), 32);
    assert!(honest.starts_with(b"Salted__") && honest[8..] == [7u8; 24]);

    let addr = fake_server(65_536, |reader, writer| lying_done(reader, writer, 3, 0)).await;
    let dir = TempDir::new("untrusted-done");
    let path = dir.join("");
    let output = tokio::task::spawn_blocking(move || TempDirRef(path).run(addr, &[]))
        .await
        .expect("join");
    failed_cleanly(&output, &dir, "counts 10003 input bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_silent_during_the_job_times_out() {
    let addr = fake_server(65_536, silent_after_started).await;
    let started = Instant::now();
    match run_one(addr, Some(Duration::from_millis(500))).await {
        Err(ClientError::IdleTimeout { .. }) => {}
        other => panic!("wrong result {other:?}"),
    }
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "{waited:?}");

    // Silent before answering begin.
    let addr = fake_server(65_536, |reader, writer| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop((reader, writer));
    })
    .await;
    match run_one(addr, Some(Duration::from_millis(500))).await {
        Err(ClientError::IdleTimeout { state, .. }) => assert_eq!(state, "after begin"),
        other => panic!("wrong result {other:?}"),
    }

    let addr = fake_server(65_536, silent_after_started).await;
    let dir = TempDir::new("untrusted-silent");
    let path = dir.join("");
    let started = Instant::now();
    let output =
        tokio::task::spawn_blocking(move || TempDirRef(path).run(addr, &["--timeout", "1"]))
            .await
            .expect("join");
    assert!(started.elapsed() < Duration::from_secs(10));
    failed_cleanly(&output, &dir, "silent for 1 s");
}

/// A [`TempDir`]'s path, usable from a blocking thread.
struct TempDirRef(std::path::PathBuf);

impl TempDirRef {
    fn run(&self, addr: SocketAddr, extra: &[&str]) -> Output {
        let input = self.0.join("in");
        std::fs::write(&input, vec![5u8; 10_000]).expect("write input");
        let password = self.0.join("password");
        std::fs::write(&password, "pw\n").expect("write password");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600));
        }
        let mut args = vec![
            "encrypt".to_owned(),
            "--server".into(),
            addr.to_string(),
            "--password-file".into(),
            password.display().to_string(),
            "-i".into(),
            input.display().to_string(),
            "-o".into(),
            self.0.join("out").display().to_string(),
            // The fake server wants the password (its welcome announces no
            // derived keys) on a cleartext connection: allowed explicitly.
            "--key-derivation".into(),
            "server".into(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run aescrypt")
    }
}
