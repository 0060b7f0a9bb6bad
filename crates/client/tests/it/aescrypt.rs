//! The `aescrypt` binary, as a user runs it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use aesd_testkit::{
    AesdProcess, TempDir, aesd_binary, openssl, openssl_decrypt_file, openssl_encrypt_file,
    pattern_bytes,
};

fn aescrypt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run aescrypt")
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

fn one_line_error(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    assert_eq!(
        stderr.lines().count(),
        1,
        "one-line reason expected, got:\n{stderr}"
    );
    assert!(stderr.starts_with("aescrypt: "), "{stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aescrypt_round_trips_with_openssl_and_fails_cleanly() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt");
    let password = dir.password_file("s3cret");
    let plain = pattern_bytes(42, 300_001);
    let (pt, enc, dec, back) = (
        dir.join("pt"),
        dir.join("pt.enc"),
        dir.join("pt.dec"),
        dir.join("back"),
    );
    std::fs::write(&pt, &plain).expect("write");

    let run = tokio::task::spawn_blocking({
        let (addr, password) = (addr.clone(), password.clone());
        let (pt, enc, dec, back) = (pt.clone(), enc.clone(), dec.clone(), back.clone());
        move || {
            // encrypt with aescrypt, decrypt with openssl
            let out = aescrypt(&[
                "encrypt",
                "--server",
                &addr,
                "--password-file",
                &path(&password),
                "-i",
                &path(&pt),
                "-o",
                &path(&enc),
                "--iter",
                "20000",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            openssl_decrypt_file(&password, 20_000, &enc, &dec);
            // encrypt with openssl, decrypt with aescrypt
            openssl_encrypt_file(&password, 10_000, &pt, &enc);
            let out = aescrypt(&[
                "decrypt",
                "--server",
                &addr,
                "--password-file",
                &path(&password),
                "-i",
                &path(&enc),
                "-o",
                &path(&back),
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
    run.await.expect("commands");
    assert!(
        std::fs::read(&dec).expect("dec") == plain,
        "openssl recovered other bytes"
    );
    assert!(
        std::fs::read(&back).expect("back") == plain,
        "aescrypt recovered other bytes"
    );

    // Wrong password: exit 1, one line, no output file left behind. A
    // wrong key gives valid-looking padding once in about 256 salts, so
    // this file has a fixed salt, checked to fail with this password.
    let wrong = dir.secret_file("wrong-password", "not it");
    // openssl 3 writes no `Salted__` header for a salt given with -S: the
    // header is put in front of its ciphertext here.
    let fixed = dir.join("fixed-salt.enc");
    let body = dir.join("fixed-salt.body");
    openssl(&[
        "enc",
        "-aes-256-cbc",
        "-pbkdf2",
        "-iter",
        "10000",
        "-S",
        "0505050505050505",
        "-pass",
        &format!("file:{}", password.display()),
        "-in",
        &pt.display().to_string(),
        "-out",
        &body.display().to_string(),
    ]);
    let mut file = b"Salted__\x05\x05\x05\x05\x05\x05\x05\x05".to_vec();
    file.extend(std::fs::read(&body).expect("openssl's ciphertext"));
    std::fs::write(&fixed, file).expect("write");
    let failed = dir.join("failed.out");
    let out = tokio::task::spawn_blocking({
        let (addr, wrong, enc, failed) = (addr.clone(), path(&wrong), path(&fixed), path(&failed));
        move || {
            aescrypt(&[
                "decrypt",
                "--server",
                &addr,
                "--password-file",
                &wrong,
                "-i",
                &enc,
                "-o",
                &failed,
            ])
        }
    })
    .await
    .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let reason = one_line_error(&out);
    assert!(reason.contains("decrypt_failed"), "{reason}");
    assert!(
        !failed.exists(),
        "a failed job must not leave an output file"
    );
    assert!(
        std::fs::read_dir(dir.join("")).expect("list").all(|entry| {
            !entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .contains(".partial-")
        }),
        "no partial file left behind"
    );

    // Unreachable server and missing input: exit 1 with a reason.
    let out = aescrypt(&[
        "encrypt",
        "--server",
        "127.0.0.1:1",
        "--password-file",
        &path(&password),
        "-i",
        &path(&pt),
        "-o",
        &path(&dir.join("x")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line_error(&out).contains("cannot connect"));
    let out = aescrypt(&[
        "encrypt",
        "--server",
        &addr,
        "--password-file",
        &path(&password),
        "-i",
        "/nonexistent",
        "-o",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line_error(&out).contains("cannot open input"));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aescrypt_streams_stdin_to_stdout() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-pipe");
    let password = dir.password_file("pipe");
    let plain = pattern_bytes(7, 100_000);
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
            .args([
                "encrypt",
                "--server",
                &addr,
                "--password-file",
                &path(&password),
                "-i",
                "-",
                "-o",
                "-",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = plain.clone();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let output = child.wait_with_output().expect("wait");
        writer.join().expect("join").expect("write stdin");
        assert!(output.status.success());
        let enc = dir.join("enc");
        let dec = dir.join("dec");
        std::fs::write(&enc, &output.stdout).expect("write");
        openssl_decrypt_file(&password, 10_000, &enc, &dec);
        (std::fs::read(&dec).expect("dec"), plain)
    })
    .await
    .expect("pipe");
    assert!(output.0 == output.1, "stdin → stdout round trip differs");
    drop(server);
}

#[test]
fn aescrypt_warns_about_a_password_file_others_can_read() {
    let dir = TempDir::new("aescrypt-mode");
    let open = dir.join("open-password");
    std::fs::write(&open, "pw\n").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = aescrypt(&[
        "encrypt",
        "--server",
        "127.0.0.1:1",
        "--password-file",
        &path(&open),
        "-i",
        "-",
        "-o",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("readable by others (mode 644)"), "{stderr}");
}

/// A TCP relay on 127.0.0.1 that forwards one connection at a time to
/// `server` and records every byte the client sent.
async fn recording_relay(
    server: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = std::sync::Arc::clone(&sent);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = tokio::net::TcpStream::connect(server)
                .await
                .expect("connect");
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = upstream.into_split();
            let record = std::sync::Arc::clone(&record);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = client_read.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    record.lock().expect("lock").extend_from_slice(&buf[..n]);
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = server_write.shutdown().await;
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
            });
        }
    });
    (addr, sent)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// With key source 2 (the default against this server), neither an
/// encryption nor a decryption sends the password: only salt, key and IV.
/// `--key-derivation server` does send it, which shows the check can see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aescrypt_never_sends_the_password_by_default() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let secret = "a password that must stay here 7f3a";
    let dir = TempDir::new("no-password-on-the-wire");
    let password = dir.password_file(secret);
    let (pt, enc, dec) = (dir.join("pt"), dir.join("enc"), dir.join("dec"));
    let plain = pattern_bytes(3, 100_000);
    std::fs::write(&pt, &plain).expect("write");

    for (derivation, expect_password) in [("auto", false), ("client", false), ("server", true)] {
        let (relay, sent) = recording_relay(server.addr).await;
        let relay = relay.to_string();
        let (password, pt, enc, out) = (password.clone(), pt.clone(), enc.clone(), dec.clone());
        let outputs = tokio::task::spawn_blocking(move || {
            let common = |mode: &str, input: &Path, output: &Path| {
                aescrypt(&[
                    mode,
                    "--server",
                    &relay,
                    "--password-file",
                    &path(&password),
                    "--key-derivation",
                    derivation,
                    "-i",
                    &path(input),
                    "-o",
                    &path(output),
                ])
            };
            (common("encrypt", &pt, &enc), common("decrypt", &enc, &out))
        })
        .await
        .expect("aescrypt runs");
        for output in [&outputs.0, &outputs.1] {
            assert!(
                output.status.success(),
                "{derivation}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert!(std::fs::read(&dec).expect("read") == plain, "{derivation}");
        let sent = sent.lock().expect("lock").clone();
        assert!(
            sent.len() > 200_000,
            "{derivation}: both jobs went through the relay"
        );
        assert_eq!(
            contains(&sent, secret.as_bytes()),
            expect_password,
            "{derivation}: password bytes on the wire"
        );
    }
    drop(server);
}

/// No downgrade: a server whose welcome announces no derived keys (an old
/// aesd, or anyone on the path flipping that flag) on a connection without
/// TLS gets no password from `--key-derivation auto`, the default: aescrypt
/// fails naming what the server wants and how to allow it, and the bytes
/// aescrypt sent hold no password. With `--key-derivation server` chosen
/// explicitly the password is on the wire (the recording can see it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aescrypt_sends_no_password_in_the_clear_because_a_server_asked() {
    // The fake server reads one message (a begin, if any) and hangs up.
    let server = aesd_testkit::fake_server::fake_server(65_536, |mut reader, _writer| async move {
        let _ = reader.read_message().await;
    })
    .await;
    let secret = "a password that must stay here 91c4";
    let dir = TempDir::new("no-downgrade");
    let password = dir.password_file(secret);
    let pt = dir.join("pt");
    std::fs::write(&pt, pattern_bytes(5, 1000)).expect("write");

    for derivation in [None, Some("auto"), Some("server")] {
        let (relay, sent) = recording_relay(server).await;
        let relay = relay.to_string();
        let (password, pt, out) = (password.clone(), pt.clone(), dir.join("out"));
        let output = tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "encrypt".to_owned(),
                "--server".to_owned(),
                relay,
                "--password-file".to_owned(),
                path(&password),
                "-i".to_owned(),
                path(&pt),
                "-o".to_owned(),
                path(&out),
            ];
            if let Some(derivation) = derivation {
                args.extend(["--key-derivation".to_owned(), derivation.to_owned()]);
            }
            aescrypt(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .expect("aescrypt runs");
        assert!(
            !output.status.success(),
            "{derivation:?}: the fake server runs no job"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The relay's recording is complete once aescrypt has exited and
        // the relay has read its side to the end.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let sent = sent.lock().expect("lock").clone();
        assert!(
            !sent.is_empty(),
            "{derivation:?}: the hello went through the relay"
        );
        if derivation == Some("server") {
            assert!(
                contains(&sent, secret.as_bytes()),
                "--key-derivation server sends the password: {stderr}"
            );
        } else {
            assert!(
                !contains(&sent, secret.as_bytes()),
                "{derivation:?}: password bytes on the wire"
            );
            for words in [
                "not under TLS",
                "--key-derivation server",
                "--tls-ca",
                "key source 1",
            ] {
                assert!(
                    stderr.contains(words),
                    "{derivation:?}: {words:?} in {stderr}"
                );
            }
        }
    }
}

/// aescrypt turns its core dumps off before it reads a secret: while it
/// waits on a silent server with the password in memory, its core file
/// size limit is 0, soft and hard (`/proc/PID/limits`).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aescrypt_holds_its_secrets_without_core_dumps() {
    let server = aesd_testkit::fake_server::fake_server(
        65_536,
        aesd_testkit::fake_server::silent_after_started,
    )
    .await;
    let dir = TempDir::new("no-core-dumps");
    let password = dir.password_file("pw");
    let pt = dir.join("pt");
    std::fs::write(&pt, [1u8; 100]).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args([
            "encrypt",
            "--server",
            &server.to_string(),
            "--password-file",
            &path(&password),
            "--key-derivation",
            "server",
            "--timeout",
            "20",
            "-i",
            &path(&pt),
            "-o",
            &path(&dir.join("out")),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn aescrypt");
    let limits_path = format!("/proc/{}/limits", child.id());
    let mut core_line = String::new();
    for _ in 0..100 {
        let limits = std::fs::read_to_string(&limits_path).unwrap_or_default();
        core_line = limits
            .lines()
            .find(|line| line.starts_with("Max core file size"))
            .unwrap_or_default()
            .to_owned();
        let fields: Vec<&str> = core_line.split_whitespace().collect();
        if fields.get(4..6) == Some(&["0", "0"][..]) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let fields: Vec<&str> = core_line.split_whitespace().collect();
    assert_eq!(fields.get(4..6), Some(&["0", "0"][..]), "{core_line:?}");
}
