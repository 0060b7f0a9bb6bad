//! ASCII-armored age files (`age -a`) through a real aesd, against
//! Debian's `age` 1.1.1: aescrypt decrypts what `age -a` writes (LF and
//! CRLF), `age -d` decrypts what `aescrypt --armor` writes, and each
//! malformed armor is refused with the line and the rule it breaks, no
//! output created.

use std::path::Path;

use aesd_testkit::{AesdProcess, TempDir, aesd_binary, pattern_bytes};

use crate::aescrypt_age::{keygen, ok, path, run};

fn decrypt(addr: &str, key: &Path, input: &Path, output: &Path) -> std::process::Output {
    run(
        "aescrypt",
        &[
            "decrypt",
            "--server",
            addr,
            "--identity",
            &path(key),
            "-i",
            &path(input),
            "-o",
            &path(output),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn armored_files_go_both_ways_with_age() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-armor");
    tokio::task::spawn_blocking(move || {
        let (key, recipient) = keygen(&dir.join("key.txt"));
        let (plain, ours, theirs, back) = (
            dir.join("plain"),
            dir.join("ours.age"),
            dir.join("theirs.age"),
            dir.join("back"),
        );
        for (i, len) in [0usize, 1, 65537, 200_001].into_iter().enumerate() {
            let data = pattern_bytes(40 + i as u64, len);
            std::fs::write(&plain, &data).expect("write");
            // aescrypt --armor -> age -d.
            let out = run(
                "aescrypt",
                &[
                    "encrypt",
                    "--server",
                    &addr,
                    "-r",
                    &recipient,
                    "--armor",
                    "-i",
                    &path(&plain),
                    "-o",
                    &path(&ours),
                ],
            );
            ok(&out, "aescrypt encrypt --armor");
            let text = String::from_utf8(std::fs::read(&ours).expect("ours")).expect("text");
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines[0], "-----BEGIN AGE ENCRYPTED FILE-----");
            assert_eq!(lines[lines.len() - 1], "-----END AGE ENCRYPTED FILE-----");
            assert!(
                lines[1..lines.len() - 2].iter().all(|l| l.len() == 64),
                "64 columns but the last"
            );
            let out = run("age", &["-d", "-i", &path(&key), &path(&ours)]);
            ok(&out, "age -d of aescrypt --armor");
            assert!(out.stdout == data, "age -d of {len} armored bytes differs");
            // And aescrypt reads its own.
            ok(&decrypt(&addr, &key, &ours, &back), "aescrypt decrypt own");
            assert!(std::fs::read(&back).expect("back") == data);
            std::fs::remove_file(&back).expect("rm");

            // age -a -> aescrypt, LF then CRLF.
            ok(
                &run(
                    "age",
                    &["-a", "-r", &recipient, "-o", &path(&theirs), &path(&plain)],
                ),
                "age -a",
            );
            ok(&decrypt(&addr, &key, &theirs, &back), "aescrypt decrypt");
            assert!(
                std::fs::read(&back).expect("back") == data,
                "{len} bytes from age -a differ"
            );
            std::fs::remove_file(&back).expect("rm");
            let crlf = std::fs::read_to_string(&theirs)
                .expect("text")
                .replace('\n', "\r\n");
            std::fs::write(&theirs, crlf).expect("write");
            ok(
                &decrypt(&addr, &key, &theirs, &back),
                "aescrypt decrypt CRLF",
            );
            assert!(std::fs::read(&back).expect("back") == data);
            std::fs::remove_file(&back).expect("rm");
        }
    })
    .await
    .expect("test thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_armor_is_refused_with_its_line_and_rule() {
    let server = AesdProcess::start(&aesd_binary(), &[]);
    let addr = server.addr.to_string();
    let dir = TempDir::new("aescrypt-armor-bad");
    tokio::task::spawn_blocking(move || {
        let (key, recipient) = keygen(&dir.join("key.txt"));
        let plain = dir.join("plain");
        std::fs::write(&plain, pattern_bytes(50, 5000)).expect("write");
        let good_path = dir.join("good.age");
        ok(
            &run(
                "age",
                &[
                    "-a",
                    "-r",
                    &recipient,
                    "-o",
                    &path(&good_path),
                    &path(&plain),
                ],
            ),
            "age -a",
        );
        let good = std::fs::read_to_string(&good_path).expect("text");
        let lines: Vec<&str> = good.lines().collect();
        let n = lines.len();
        let join = |lines: &[&str]| lines.join("\n") + "\n";
        let short = &lines[3][..40];
        let cases: Vec<(&str, String, String)> = vec![
            (
                "cut before its END line",
                join(&lines[..n - 1]),
                format!("at line {n}: cut short: no -----END"),
            ),
            (
                "a short line in the middle",
                join(&[&lines[..3], &[short], &lines[4..]].concat()),
                "at line 5: a line after the last (short or padded) base64 line".into(),
            ),
            (
                "text after the END line",
                good.clone() + "signed: me\n",
                format!("at line {}: data after the END line", n + 1),
            ),
            (
                "a space inside a line",
                join(
                    &[
                        &lines[..2],
                        &[&lines[2].replacen(|c| c != '=', " ", 1)],
                        &lines[3..],
                    ]
                    .concat(),
                ),
                "at line 3: a character that is not base64".into(),
            ),
            (
                "a longer line",
                join(&[&lines[..2], &[&format!("{}AAAA", lines[2])], &lines[3..]].concat()),
                "at line 3: a line longer than 64 columns".into(),
            ),
        ];
        let bad = dir.join("bad.age");
        let out_path = dir.join("out");
        for (what, text, said) in cases {
            std::fs::write(&bad, &text).expect("write");
            let out = decrypt(&addr, &key, &bad, &out_path);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
            assert!(
                stderr.contains("malformed age armor (age -a)") && stderr.contains(&said),
                "{what}: {stderr}"
            );
            assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
            assert!(!out_path.exists(), "{what}: an output file was left");
        }
        // --armor is for age encryptions only.
        let out = run(
            "aescrypt",
            &[
                "decrypt",
                "--server",
                &addr,
                "--identity",
                &path(&key),
                "--armor",
                "-i",
                &path(&good_path),
                "-o",
                &path(&out_path),
            ],
        );
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("an armored input is recognised"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
    .await
    .expect("test thread");
}
