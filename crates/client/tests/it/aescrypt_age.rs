//! `aescrypt --format age` through a real aesd, against Debian's `age`
//! 1.1.1 (installed by scripts/setup.sh; missing, the test fails): age
//! decrypts what aesd encrypts, aesd decrypts what age encrypts, on sizes
//! around the 64 KiB chunk and sizes drawn at run time; changed and cut
//! files fail closed (exit 1, one line, the output file never created).
//! Armored and passphrase files: aescrypt_age_armor, aescrypt_age_passphrase.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary, pattern_bytes};

pub(crate) fn run(program: &str, args: &[&str]) -> Output {
    let program = if program == "aescrypt" {
        env!("CARGO_BIN_EXE_aescrypt")
    } else {
        program
    };
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e} (scripts/setup.sh installs age)"))
}

pub(crate) fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn path(path: &Path) -> String {
    path.display().to_string()
}

/// `age-keygen -o PATH`: the identity file and its recipient.
pub(crate) fn keygen(key: &Path) -> (std::path::PathBuf, String) {
    ok(&run("age-keygen", &["-o", &path(key)]), "age-keygen");
    let recipient = String::from_utf8(run("age-keygen", &["-y", &path(key)]).stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    (key.to_owned(), recipient)
}

/// Sizes around the chunk edges and a few drawn now.
fn sizes() -> Vec<usize> {
    let mut drawn = [0u8; 4];
    getrandom::fill(&mut drawn).expect("random");
    let a = usize::from(u16::from_le_bytes([drawn[0], drawn[1]]));
    let b = usize::from(u16::from_le_bytes([drawn[2], drawn[3]]));
    vec![0, 1, 65535, 65536, 65537, (2 << 20) + a, 3 * a + b % 7]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_and_aescrypt_read_each_others_files_through_aesd() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-age");
    tokio::task::spawn_blocking(move || {
        let (key, recipient) = keygen(&dir.join("key.txt"));
        let (plain, ours, theirs, back) = (
            dir.join("plain"),
            dir.join("ours.age"),
            dir.join("theirs.age"),
            dir.join("back"),
        );
        for (i, len) in sizes().into_iter().enumerate() {
            let data = pattern_bytes(i as u64, len);
            std::fs::write(&plain, &data).expect("write");
            let out = run(
                "aescrypt",
                &[
                    "encrypt",
                    "--server",
                    &addr,
                    "-r",
                    &recipient,
                    "-i",
                    &path(&plain),
                    "-o",
                    &path(&ours),
                ],
            );
            ok(&out, "aescrypt encrypt");
            let out = run("age", &["-d", "-i", &path(&key), &path(&ours)]);
            ok(&out, "age -d");
            assert!(out.stdout == data, "age -d of aesd's {len} bytes differs");

            ok(
                &run(
                    "age",
                    &["-r", &recipient, "-o", &path(&theirs), &path(&plain)],
                ),
                "age -r",
            );
            let out = run(
                "aescrypt",
                &[
                    "decrypt",
                    "--server",
                    &addr,
                    "--identity",
                    &path(&key),
                    "-i",
                    &path(&theirs),
                    "-o",
                    &path(&back),
                ],
            );
            ok(&out, "aescrypt decrypt");
            assert!(
                std::fs::read(&back).expect("back") == data,
                "{len} bytes back differ"
            );
            std::fs::remove_file(&back).expect("remove");
        }
    })
    .await
    .expect("test thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_and_cut_age_files_fail_closed() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-age-bad");
    tokio::task::spawn_blocking(move || {
        let (key, recipient) = keygen(&dir.join("key.txt"));
        let plain = dir.join("plain");
        let data = pattern_bytes(7, 3 * 65536 + 1000);
        std::fs::write(&plain, &data).expect("write");
        let file = dir.join("f.age");
        ok(
            &run(
                "age",
                &["-r", &recipient, "-o", &path(&file), &path(&plain)],
            ),
            "age -r",
        );
        let good = std::fs::read(&file).expect("read");
        let header_len = good
            .windows(4)
            .position(|w| w == b"\n---")
            .map(|at| at + 1 + good[at + 1..].iter().position(|&b| b == b'\n').expect("nl") + 1)
            .expect("a MAC line");
        let sealed = 65536 + 16;
        let mut flipped = good.clone();
        flipped[header_len + 16 + sealed + 10] ^= 1;
        let mut mac_changed = good.clone();
        mac_changed[header_len - 5] = if mac_changed[header_len - 5] == b'A' {
            b'B'
        } else {
            b'A'
        };
        let cases: [(&str, Vec<u8>, &str); 4] = [
            (
                "a payload byte changed",
                flipped,
                "decrypt_failed: age payload chunk 1 failed to authenticate",
            ),
            (
                "cut at a chunk boundary",
                good[..header_len + 16 + 3 * sealed].to_vec(),
                "bad_ciphertext: age payload cut short",
            ),
            (
                "cut inside the header",
                good[..header_len - 20].to_vec(),
                "age header cut short",
            ),
            (
                "the header's MAC changed",
                mac_changed,
                "age header MAC mismatch",
            ),
        ];
        let bad = dir.join("bad.age");
        let out_path = dir.join("out");
        for (what, bytes, reason) in cases {
            std::fs::write(&bad, &bytes).expect("write");
            let out = run(
                "aescrypt",
                &[
                    "decrypt",
                    "--server",
                    &addr,
                    "--identity",
                    &path(&key),
                    "-i",
                    &path(&bad),
                    "-o",
                    &path(&out_path),
                ],
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
            assert!(stderr.contains(reason), "{what}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
            assert!(!out_path.exists(), "{what}: an output file was left");
        }
        // Another identity: no stanza is for it, nothing is sent.
        let (other, _) = keygen(&dir.join("other.txt"));
        let out = run(
            "aescrypt",
            &[
                "decrypt",
                "--server",
                &addr,
                "--identity",
                &path(&other),
                "-i",
                &path(&file),
                "-o",
                &path(&out_path),
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no identity matches any recipient"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // An openssl decryption of an age file says what to do instead.
        let out = run(
            "aescrypt",
            &[
                "decrypt",
                "--server",
                &addr,
                "--pass",
                "pass:x",
                "-i",
                &path(&file),
                "-o",
                &path(&out_path),
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("is an age file: decrypt it with --identity")
        );
        // Flags that do not fit the format are refused before anything runs.
        let out = run(
            "aescrypt",
            &[
                "encrypt",
                "--server",
                &addr,
                "--format",
                "age",
                "-i",
                &path(&plain),
                "-o",
                &path(&out_path),
            ],
        );
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs a recipient"));
    })
    .await
    .expect("test thread");
}
