//! aescrypt's errors as a person reads them: impossible values refused
//! at parse time (exit 2, naming the value), a peer that is not aesd
//! named as such within `--timeout`, the two access-token errors in one
//! form.

use std::process::{Command, Output, Stdio};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary};

fn aescrypt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run aescrypt")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_owned()
}

#[test]
fn impossible_values_are_refused_at_parse_time() {
    let common = ["encrypt", "-i", "-", "-o", "-"];
    let pass = ["--pass", "pass:x"];
    for (extra, said) in [
        (
            [&["--server", "127.0.0.1"][..], &pass].concat(),
            "\"127.0.0.1\" has no port: give HOST:PORT",
        ),
        (
            [&["--server", "h:0"][..], &pass].concat(),
            "the port must be a number from 1 to 65535",
        ),
        (
            [&["--server", "h:1", "--iter", "0"][..], &pass].concat(),
            "0 is not in 1..",
        ),
        (
            [&["--server", "h:1", "--timeout", "0"][..], &pass].concat(),
            "--timeout",
        ),
        (
            vec!["--server", "h:1", "--pass", "secret"],
            "is not a password source",
        ),
    ] {
        let output = aescrypt(&[&common[..], &extra].concat());
        let said_now = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {said_now}");
        assert!(said_now.contains(said), "{extra:?}: {said_now}");
    }
}

/// A TCP peer that accepts and says nothing: named as no aesd once the
/// given --timeout has passed (not a fixed 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_named_as_not_aesd_within_the_given_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let output = tokio::task::spawn_blocking(move || {
        aescrypt(&[
            "encrypt",
            "--server",
            &addr,
            "--pass",
            "pass:x",
            "--timeout",
            "0.3",
            "-i",
            "-",
            "-o",
            "-",
        ])
    })
    .await
    .expect("aescrypt");
    silent.abort();
    assert_eq!(output.status.code(), Some(1));
    let said = stderr(&output);
    assert!(
        said.ends_with(
            "is not an aesd server: it accepted the connection but sent no welcome within 0.3 s"
        ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_and_a_wrong_token_read_alike() {
    let dir = TempDir::new("aescrypt-token");
    let token = dir.secret_file("token", "0123456789abcdef-right");
    let wrong = dir.secret_file("wrong", "0123456789abcdef-wrong");
    let server = AesdProcess::start(
        &aesd_binary(),
        &["--token-file", token.to_str().expect("utf-8 path")],
    );
    let addr = server.addr.to_string();
    let (missing, refused) = tokio::task::spawn_blocking(move || {
        let base = [
            "encrypt", "--server", &addr, "--pass", "pass:x", "-i", "-", "-o", "-",
        ];
        let missing = aescrypt(&base);
        let refused =
            aescrypt(&[&base[..], &["--token-file", wrong.to_str().expect("utf-8")]].concat());
        (stderr(&missing), stderr(&refused))
    })
    .await
    .expect("aescrypt");
    assert!(
        missing.starts_with("aescrypt: unauthorized: ")
            && missing.ends_with("requires an access token: pass --token-file"),
        "{missing}"
    );
    assert!(
        refused.starts_with("aescrypt: unauthorized: ")
            && refused.ends_with("refused the access token: check --token-file"),
        "{refused}"
    );
    drop(server);
}
