//! Passphrase age files (`age -p`, scrypt) through a real aesd, against
//! Debian's `age` 1.1.1 typed to on a pseudo-terminal, both ways: aescrypt
//! decrypts them (binary and armored) with the password sources it has
//! for openssl files (`--pass`, the prompt), the input recognised as a
//! passphrase file, and `age -d` decrypts what `aescrypt encrypt --format
//! age --pass` writes (binary and armored); a wrong passphrase, a work factor above 2^22 (refused before any
//! work), `--identity` on such a file and a passphrase on an X25519 file
//! each get one line saying so, and no output.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary, pattern_bytes};

use crate::aescrypt_age::{keygen, ok, path, run};

const PASSPHRASE: &str = "correct horse battery";

/// `age -p [extra] -o OUT IN`, the passphrase typed twice on a pty.
fn age_p(extra: &[&str], input: &Path, output: &Path) {
    let mut command = Command::new("age");
    command
        .arg("-p")
        .args(extra)
        .args(["-o", &path(output), &path(input)]);
    let mut session = rexpect::session::spawn_command(command, Some(30_000))
        .expect("age on a pty (scripts/setup.sh installs age)");
    session
        .exp_string("passphrase")
        .expect("the passphrase prompt");
    session.send_line(PASSPHRASE).expect("type");
    session.exp_string("Confirm").expect("the confirmation");
    session.send_line(PASSPHRASE).expect("type");
    session.exp_eof().expect("age ends");
    let head = std::fs::read(output).expect("age -p wrote");
    assert!(
        head.windows(9).any(|w| w == b"-> scrypt") || head.starts_with(b"-----BEGIN"),
        "a passphrase file"
    );
}

fn decrypt(addr: &str, extra: &[&str], input: &Path, output: &Path) -> std::process::Output {
    let base = [
        "decrypt",
        "--server",
        addr,
        "-i",
        &path(input),
        "-o",
        &path(output),
    ];
    run("aescrypt", &[&base[..], extra].concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passphrase_files_from_age_decrypt_with_every_password_source() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-age-p");
    tokio::task::spawn_blocking(move || {
        let data = pattern_bytes(60, 70_000);
        let (plain, binary, armored, back) = (
            dir.join("plain"),
            dir.join("p.age"),
            dir.join("pa.age"),
            dir.join("back"),
        );
        std::fs::write(&plain, &data).expect("write");
        let pw = dir.join("pw.txt");
        std::fs::write(&pw, format!("{PASSPHRASE}\n")).expect("write");
        age_p(&[], &plain, &binary);
        age_p(&["-a"], &plain, &armored);
        // Recognised as a passphrase file: no --format needed.
        for (file, extra) in [
            (
                &binary,
                vec!["--pass".to_owned(), format!("file:{}", path(&pw))],
            ),
            (&armored, vec!["--password-file".to_owned(), path(&pw)]),
            (
                &binary,
                vec![
                    "--format".into(),
                    "age".into(),
                    "--pass".into(),
                    format!("pass:{PASSPHRASE}"),
                ],
            ),
        ] {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            ok(&decrypt(&addr, &extra, file, &back), "aescrypt decrypt");
            assert!(std::fs::read(&back).expect("back") == data, "{extra:?}");
            std::fs::remove_file(&back).expect("rm");
        }
        // The terminal prompt, asked once.
        let mut command = Command::new(env!("CARGO_BIN_EXE_aescrypt"));
        command.args([
            "decrypt",
            "--server",
            &addr,
            "-i",
            &path(&binary),
            "-o",
            &path(&back),
        ]);
        let mut session = rexpect::session::spawn_command(command, Some(30_000)).expect("pty");
        session.exp_string("password: ").expect("the prompt");
        session.send_line(PASSPHRASE).expect("type");
        let rest = session.exp_eof().expect("end");
        let status = session.process().wait().expect("wait");
        assert!(
            matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
            "{status:?}: {rest}"
        );
        assert!(std::fs::read(&back).expect("back") == data);
    })
    .await
    .expect("test thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passphrases_high_work_factors_and_wrong_keys_are_named() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-age-p-bad");
    tokio::task::spawn_blocking(move || {
        let (key, recipient) = keygen(&dir.join("key.txt"));
        let (plain, file, out) = (dir.join("plain"), dir.join("p.age"), dir.join("out"));
        std::fs::write(&plain, pattern_bytes(61, 1000)).expect("write");
        age_p(&[], &plain, &file);
        // The work factor raised from age's 18 to 23 in the stanza: 8 GiB
        // and 32 times the time if it were done; refused at once.
        let text = std::fs::read(&file).expect("read");
        let line_end = text
            .windows(2)
            .position(|w| w == b"8\n")
            .expect("the stanza's work factor 18");
        assert_eq!(&text[line_end - 2..line_end + 2], b" 18\n");
        let mut high = text.clone();
        high[line_end - 1..line_end + 1].copy_from_slice(b"23");
        let high_file = dir.join("high.age");
        std::fs::write(&high_file, &high).expect("write");
        let x25519 = dir.join("x.age");
        ok(
            &run(
                "age",
                &["-r", &recipient, "-o", &path(&x25519), &path(&plain)],
            ),
            "age -r",
        );
        let pass = format!("pass:{PASSPHRASE}");
        let key = path(&key);
        let cases: [(&str, &Path, Vec<&str>, &str); 4] = [
            (
                "a wrong passphrase",
                &file,
                vec!["--pass", "pass:correct horse batterz"],
                "the passphrase does not decrypt the age file",
            ),
            (
                "a work factor of 2^23",
                &high_file,
                vec!["--pass", &pass],
                "scrypt work factor is 2^23 (log2 N = 23), above the limit 2^22",
            ),
            (
                "an identity for a passphrase file",
                &file,
                vec!["--identity", &key],
                "encrypted with a passphrase (age -p: an scrypt stanza), not to an identity: \
                 decrypt it with a passphrase (--pass",
            ),
            (
                "a passphrase for an X25519 file",
                &x25519,
                vec!["--format", "age", "--pass", &pass],
                "not encrypted with a passphrase (no scrypt stanza): decrypt it with --identity",
            ),
        ];
        for (what, input, extra, said) in cases {
            let started = Instant::now();
            let result = decrypt(&addr, &extra, input, &out);
            let stderr = String::from_utf8_lossy(&result.stderr);
            assert_eq!(result.status.code(), Some(1), "{what}: {stderr}");
            assert!(stderr.contains(said), "{what}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
            assert!(!out.exists(), "{what}: an output file was left");
            if what.contains("2^23") {
                assert!(
                    started.elapsed() < Duration::from_secs(3),
                    "refused before any work: {:?}",
                    started.elapsed()
                );
            }
        }
        // Recipients and a passphrase together: refused before anything.
        let result = run(
            "aescrypt",
            &[
                "encrypt",
                "--server",
                &addr,
                "-r",
                &recipient,
                "--pass",
                &pass,
                "-i",
                &path(&plain),
                "-o",
                &path(&out),
            ],
        );
        assert_eq!(result.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&result.stderr)
                .contains("a passphrase file (age -p) has the passphrase alone"),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
    })
    .await
    .expect("test thread");
}

/// `age -d IN` with the passphrase typed on a pty; what it wrote to OUT.
fn age_d_p(input: &Path, output: &Path) -> Vec<u8> {
    let mut command = Command::new("age");
    command.args(["-d", "-o", &path(output), &path(input)]);
    let mut session = rexpect::session::spawn_command(command, Some(30_000)).expect("age on a pty");
    session
        .exp_string("passphrase")
        .expect("the passphrase prompt");
    session.send_line(PASSPHRASE).expect("type");
    let rest = session.exp_eof().expect("age ends");
    let status = session.process().wait().expect("wait");
    assert!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
        "age -d: {status:?}: {rest}"
    );
    std::fs::read(output).expect("age -d wrote")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_decrypts_the_passphrase_files_aescrypt_writes() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-age-p-enc");
    tokio::task::spawn_blocking(move || {
        let data = pattern_bytes(62, 150_000);
        let (plain, file, back) = (dir.join("plain"), dir.join("p.age"), dir.join("back"));
        std::fs::write(&plain, &data).expect("write");
        let pw = dir.join("pw.txt");
        std::fs::write(&pw, format!("{PASSPHRASE}\n")).expect("write");
        for extra in [
            &["--format", "age", "--pass", &format!("file:{}", path(&pw))][..],
            &["--armor", "--password-file", &path(&pw)][..],
        ] {
            let base = [
                "encrypt",
                "--server",
                &addr,
                "-i",
                &path(&plain),
                "-o",
                &path(&file),
            ];
            ok(
                &run("aescrypt", &[&base[..], extra].concat()),
                "aescrypt encrypt with a passphrase",
            );
            let written = std::fs::read(&file).expect("written");
            let armored = written.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----");
            assert_eq!(armored, extra.contains(&"--armor"));
            if !armored {
                let header = String::from_utf8_lossy(&written[..200]);
                let stanzas: Vec<&str> = header.lines().filter(|l| l.starts_with("->")).collect();
                assert_eq!(stanzas.len(), 1, "{header}");
                assert!(stanzas[0].starts_with("-> scrypt ") && stanzas[0].ends_with(" 18"));
            }
            assert!(age_d_p(&file, &back) == data, "age -d of {extra:?}");
            std::fs::remove_file(&back).expect("rm");
            ok(
                &decrypt(&addr, &["--password-file", &path(&pw)], &file, &back),
                "aescrypt decrypt its own",
            );
            assert!(std::fs::read(&back).expect("back") == data);
            std::fs::remove_file(&back).expect("rm");
        }
    })
    .await
    .expect("test thread");
}
