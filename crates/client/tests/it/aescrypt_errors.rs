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

/// Inputs that are not a file or stream are refused before a server is
/// contacted (a silent peer here: a check after connecting would time
/// out instead), for both directions, saying what the input is; a FIFO
/// and a device are streamed like stdin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_kinds_are_checked_before_connecting() {
    let dir = TempDir::new("aescrypt-inputs");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent = listener.local_addr().expect("addr").to_string();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let subdir = dir.join("a-directory");
    std::fs::create_dir(&subdir).expect("mkdir");
    let missing = dir.join("missing");
    let bad = [
        (
            subdir.clone(),
            "is a directory: aescrypt encrypts one file or stream",
        ),
        (missing.clone(), "cannot open input"),
    ];
    let outcomes = tokio::task::spawn_blocking({
        let silent = silent.clone();
        let out = dir.join("out");
        move || {
            let mut outcomes = Vec::new();
            for mode in ["encrypt", "decrypt"] {
                for (input, said) in &bad {
                    let started = std::time::Instant::now();
                    let output = aescrypt(&[
                        mode,
                        "--server",
                        &silent,
                        "--pass",
                        "pass:x",
                        "--timeout",
                        "5",
                        "-i",
                        input.to_str().expect("utf-8"),
                        "-o",
                        out.to_str().expect("utf-8"),
                    ]);
                    outcomes.push((mode, *said, output, started.elapsed()));
                }
            }
            outcomes
        }
    })
    .await
    .expect("aescrypt");
    for (mode, said, output, took) in outcomes {
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{mode}: {text}");
        assert!(text.contains(said), "{mode}: {text}");
        assert!(
            took < std::time::Duration::from_secs(3),
            "{mode}: {took:?} (waited for the server?)"
        );
    }
    assert!(!dir.join("out").exists(), "no output left behind");
    held.abort();

    // A FIFO and a character device are read to their end.
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::write(&fifo, b"through a fifo").expect("write the fifo")
    });
    let (from_fifo, from_device) = tokio::task::spawn_blocking({
        let dir_out = dir.join("fifo.enc");
        let null_out = dir.join("null.enc");
        let fifo = fifo.clone();
        move || {
            let run = |input: &std::path::Path, out: &std::path::Path| {
                aescrypt(&[
                    "encrypt",
                    "--server",
                    &addr,
                    "--pass",
                    "pass:x",
                    "--iter",
                    "1000",
                    "-i",
                    input.to_str().expect("utf-8"),
                    "-o",
                    out.to_str().expect("utf-8"),
                ])
            };
            (
                run(&fifo, &dir_out),
                run(std::path::Path::new("/dev/null"), &null_out),
            )
        }
    })
    .await
    .expect("aescrypt");
    writer.join().expect("writer");
    assert!(from_fifo.status.success(), "{}", stderr(&from_fifo));
    assert!(from_device.status.success(), "{}", stderr(&from_device));
    // Salted__, salt, and one block per 16 bytes begun (an empty input: one).
    let fifo_len = std::fs::metadata(dir.join("fifo.enc")).expect("out").len();
    assert_eq!(fifo_len, 16 + 16);
    let null_len = std::fs::metadata(dir.join("null.enc")).expect("out").len();
    assert_eq!(null_len, 16 + 16);
    drop(server);
}

/// Encrypted output to a terminal is refused before anything else (as
/// age refuses), and `--to-terminal` forces it (here it then goes on to
/// connect, to a port where nothing listens).
#[test]
fn encrypted_output_to_a_terminal_is_refused_unless_forced() {
    let dir = TempDir::new("aescrypt-terminal");
    let input = dir.join("plain");
    std::fs::write(&input, b"some bytes").expect("write");
    let on_terminal = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_aescrypt"));
        command
            .args([
                "encrypt",
                "--server",
                "127.0.0.1:1",
                "--pass",
                "pass:x",
                "-i",
            ])
            .arg(&input)
            .args(["-o", "-"])
            .args(extra);
        let mut session = rexpect::session::spawn_command(command, Some(20_000)).expect("pty");
        let said = session.exp_eof().expect("end");
        let status = session.process().wait().expect("wait");
        (status, said)
    };
    let (status, said) = on_terminal(&[]);
    assert!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 1)),
        "{status:?}: {said}"
    );
    assert!(
        said.contains("refusing to write encrypted (binary) output to a terminal")
            && said.contains("--to-terminal"),
        "{said}"
    );
    let (status, said) = on_terminal(&["--to-terminal"]);
    assert!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 1)),
        "{status:?}: {said}"
    );
    assert!(
        !said.contains("refusing") && said.contains("cannot connect"),
        "{said}"
    );
}
