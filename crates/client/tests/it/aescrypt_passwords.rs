//! aescrypt's password sources, as openssl's `-pass`: `pass:`, `env:`,
//! `file:` (and `--password-file`), `fd:N`, `stdin`, and the no-echo
//! prompt on a terminal (under a pseudo-terminal: rexpect). Each result
//! is decrypted by openssl with the password that should have been used.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary, openssl, pattern_bytes};

const PASSWORD: &str = "correct horse";

/// openssl decrypts `encrypted` with `PASSWORD` and gets `plain`.
fn assert_decrypts_with_the_password(dir: &TempDir, encrypted: &Path, plain: &[u8]) {
    let out = dir.join("openssl-out");
    openssl(&[
        "enc",
        "-d",
        "-aes-256-cbc",
        "-pbkdf2",
        "-iter",
        "1000",
        "-pass",
        &format!("pass:{PASSWORD}"),
        "-in",
        &encrypted.display().to_string(),
        "-out",
        &out.display().to_string(),
    ]);
    assert!(
        std::fs::read(&out).expect("read") == plain,
        "wrong plaintext"
    );
}

fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `aescrypt encrypt` of `input` to `output` with the extra arguments.
fn encrypt(addr: &str, input: &Path, output: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aescrypt"));
    command
        .args(["encrypt", "--server", addr, "--iter", "1000", "-i"])
        .arg(input)
        .arg("-o")
        .arg(output)
        .args(extra)
        .stdin(Stdio::null());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_password_source_gives_the_password() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    tokio::task::spawn_blocking(move || {
        let dir = TempDir::new("aescrypt-pass");
        let plain = pattern_bytes(11, 5_000);
        let input = dir.join("plain");
        std::fs::write(&input, &plain).expect("write");
        let file = dir.password_file(PASSWORD);
        let out = dir.join("out.enc");
        let file_arg = format!("file:{}", file.display());
        let literal = format!("pass:{PASSWORD}");
        for extra in [
            vec!["--pass", literal.as_str()],
            vec!["--pass", file_arg.as_str()],
            vec!["--password-file", file.to_str().expect("utf-8")],
            vec!["--pass", "env:AESD_TEST_PASSWORD"],
        ] {
            let output = encrypt(&addr, &input, &out, &extra)
                .env("AESD_TEST_PASSWORD", PASSWORD)
                .output()
                .expect("run aescrypt");
            assert_success(&output);
            assert_decrypts_with_the_password(&dir, &out, &plain);
            std::fs::remove_file(&out).expect("rm");
        }

        // fd:3, a descriptor the shell opens on the password file.
        let script = format!(
            "exec '{}' encrypt --server {addr} --iter 1000 -i '{}' -o '{}' --pass fd:3 3<'{}'",
            env!("CARGO_BIN_EXE_aescrypt"),
            input.display(),
            out.display(),
            file.display()
        );
        assert_success(
            &Command::new("bash")
                .args(["-c", &script])
                .output()
                .expect("bash"),
        );
        assert_decrypts_with_the_password(&dir, &out, &plain);
        std::fs::remove_file(&out).expect("rm");

        // stdin: the first line is the password, the data follows it.
        let mut child = encrypt(&addr, Path::new("-"), &out, &["--pass", "stdin"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin
                .write_all(format!("{PASSWORD}\n").as_bytes())
                .and_then(|()| stdin.write_all(&plain))
                .expect("write stdin");
        }
        assert_success(&child.wait_with_output().expect("wait"));
        assert_decrypts_with_the_password(&dir, &out, &plain);
    })
    .await
    .expect("test");
    drop(server);
}

#[test]
fn bad_sources_and_no_terminal_are_one_clear_line() {
    let dir = TempDir::new("aescrypt-pass-bad");
    let input = dir.join("plain");
    std::fs::write(&input, b"x").expect("write");
    let out = dir.join("out.enc");
    let stderr_of = |extra: &[&str]| {
        let output = encrypt("127.0.0.1:1", &input, &out, extra)
            .env_remove("AESD_TEST_UNSET")
            .output()
            .expect("run aescrypt");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )
    };
    let (code, stderr) = stderr_of(&[]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "aescrypt: no password: give --pass (pass:PASSWORD, env:VAR, file:PATH, fd:N or stdin) or --password-file, or run on a terminal to be prompted"
    );
    let (code, stderr) = stderr_of(&["--pass", "pw.txt"]);
    assert_eq!(code, Some(2), "refused at parse time: {stderr}");
    assert!(stderr.contains("is not a password source"), "{stderr}");
    let (code, stderr) = stderr_of(&["--pass", "env:AESD_TEST_UNSET"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "aescrypt: environment variable AESD_TEST_UNSET (--pass env:AESD_TEST_UNSET) is not set"
    );
    // A password file that is a directory: the error once, no mode warning.
    let (code, stderr) = stderr_of(&["--pass", &format!("file:{}", dir.join("").display())]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(stderr.matches("os error 21").count(), 1, "{stderr}");
    let missing = dir.join("missing");
    let (_, stderr) = stderr_of(&["--password-file", missing.to_str().expect("utf-8")]);
    assert_eq!(
        stderr,
        format!(
            "aescrypt: cannot read password file {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

/// On a terminal with no source given, aescrypt prompts (twice to
/// encrypt); two different answers are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_prompt_asks_twice_to_encrypt_and_refuses_a_mismatch() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    tokio::task::spawn_blocking(move || {
        let dir = TempDir::new("aescrypt-prompt");
        let plain = pattern_bytes(12, 3_000);
        let input = dir.join("plain");
        std::fs::write(&input, &plain).expect("write");
        let out = dir.join("out.enc");
        let prompted = |answers: [&str; 2]| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_aescrypt"));
            command
                .args(["encrypt", "--server", &addr, "--iter", "1000", "-i"])
                .arg(&input)
                .arg("-o")
                .arg(&out);
            let mut session = rexpect::session::spawn_command(command, Some(20_000)).expect("pty");
            session.exp_string("password: ").expect("first prompt");
            session.send_line(answers[0]).expect("type");
            session
                .exp_string("password again: ")
                .expect("second prompt");
            session.send_line(answers[1]).expect("type");
            let rest = session.exp_eof().expect("end");
            let status = session.process().wait().expect("wait");
            (status, rest)
        };
        let (status, rest) = prompted([PASSWORD, PASSWORD]);
        assert!(
            matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
            "{status:?}: {rest}"
        );
        assert_decrypts_with_the_password(&dir, &out, &plain);
        std::fs::remove_file(&out).expect("rm");
        let (status, rest) = prompted([PASSWORD, "another"]);
        assert!(
            matches!(status, rexpect::process::WaitStatus::Exited(_, 1)),
            "{status:?}"
        );
        assert!(rest.contains("the passwords typed do not match"), "{rest}");
        assert!(!out.exists());
    })
    .await
    .expect("test");
    drop(server);
}

/// A password file with a CRLF line ending: read as openssl reads it (the
/// `\r` is part of the password) through `file:`, `--password-file`,
/// `fd:` and `stdin`, with a warning naming it; openssl decrypts what
/// aescrypt wrote and aescrypt decrypts what openssl wrote with the same
/// file. A file without the `\r` does not decrypt it (the `\r` counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crlf_password_file_reads_as_openssl_reads_it_both_ways() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    tokio::task::spawn_blocking(move || {
        let dir = TempDir::new("aescrypt-crlf");
        let plain = pattern_bytes(12, 3_000);
        let input = dir.join("plain");
        std::fs::write(&input, &plain).expect("write");
        // secret_file ends the line with \n.
        let crlf = dir.secret_file("crlf.txt", &format!("{PASSWORD}\r"));
        let lf = dir.secret_file("lf.txt", PASSWORD);
        let crlf_path = crlf.to_str().expect("utf-8");
        let file_arg = format!("file:{crlf_path}");
        let out = dir.join("out.enc");
        let openssl_with = |mode: &[&str], pass: &Path, from: &Path, to: &Path| {
            let status = Command::new("openssl")
                .arg("enc")
                .args(mode)
                .args(["-aes-256-cbc", "-pbkdf2", "-iter", "1000", "-pass"])
                .arg(format!("file:{}", pass.display()))
                .arg("-in")
                .arg(from)
                .arg("-out")
                .arg(to)
                .stderr(Stdio::null())
                .status()
                .expect("openssl (a test dependency: scripts/setup.sh installs it)");
            status.success()
        };
        for (extra, stdin) in [
            (vec!["--pass", file_arg.as_str()], None),
            (vec!["--password-file", crlf_path], None),
            (vec!["--pass", "fd:0"], Some(&crlf)),
            (vec!["--pass", "stdin"], Some(&crlf)),
        ] {
            let mut command = encrypt(&addr, &input, &out, &extra);
            if let Some(path) = stdin {
                command.stdin(std::fs::File::open(path).expect("open"));
            }
            let output = command.output().expect("run aescrypt");
            assert_success(&output);
            let said = String::from_utf8_lossy(&output.stderr);
            assert!(
                said.contains("ends with a carriage return") && said.contains("it is kept"),
                "{extra:?}: {said}"
            );
            let back = dir.join("openssl-out");
            assert!(
                openssl_with(&["-d"], &crlf, &out, &back),
                "{extra:?}: openssl -pass file: with the same CRLF file"
            );
            assert!(std::fs::read(&back).expect("read") == plain, "{extra:?}");
            assert!(
                !openssl_with(&["-d"], &lf, &out, &back),
                "{extra:?}: the \\r was dropped (the LF file decrypts it)"
            );
        }
        // openssl encrypts with the CRLF file; aescrypt decrypts with it.
        let from_openssl = dir.join("from-openssl.enc");
        assert!(openssl_with(&[], &crlf, &input, &from_openssl));
        let back = dir.join("aescrypt-out");
        let output = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args(["decrypt", "--server", &addr, "--iter", "1000", "--pass"])
            .arg(&file_arg)
            .arg("-i")
            .arg(&from_openssl)
            .arg("-o")
            .arg(&back)
            .stdin(Stdio::null())
            .output()
            .expect("run aescrypt");
        assert_success(&output);
        assert!(std::fs::read(&back).expect("read") == plain);
    })
    .await
    .expect("the test thread");
    drop(server);
}
