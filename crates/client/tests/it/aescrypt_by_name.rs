//! `aescrypt encrypt|rewrap|decrypt --key NAME --token-file FILE` through
//! an `aesd --dev` (its keyring administered over the HTTP API): the file
//! names the key and its version, a rotation then rewrap moves it to the
//! new version with the payload bytes unchanged, and it decrypts back.
//! With `--local` only the header crosses the network, and the files
//! interoperate both ways with the server-made ones.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary, pattern_bytes};

fn aescrypt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run aescrypt")
}

/// `POST path` with the dev root token: the status line.
fn post(http: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(http).expect("connect to the HTTP API");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: aesd\r\nConnection: close\r\nX-Vault-Token: root\r\nContent-Length: 2\r\n\r\n{{}}"
    )
    .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer.lines().next().unwrap_or_default().to_owned()
}

/// The header's stanza line and the bytes after the header.
fn split(file: &[u8]) -> (String, Vec<u8>) {
    let (header, used) = aesd_age::HeaderReader::new()
        .push(file)
        .expect("an age header")
        .expect("complete");
    (header.stanzas[0].args.join(" "), file[used..].to_vec())
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn aescrypt_encrypts_rewraps_and_decrypts_by_key_name() {
    // A free port for the HTTP API (the readiness message names the job
    // port only).
    let http = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let server = AesdProcess::start(
        &aesd_binary(),
        &[
            "--dev",
            "--dev-root-token-id",
            "root",
            "--http-listen",
            &http,
        ],
    );
    assert!(post(&http, "/v1/transit/keys/files").contains(" 20"));
    let dir = TempDir::new("aescrypt-by-name");
    let (plain, enc, new, back, token) = (
        dir.join("plain"),
        dir.join("enc"),
        dir.join("new"),
        dir.join("back"),
        dir.join("token"),
    );
    let data = pattern_bytes(3, 150_000);
    std::fs::write(&plain, &data).expect("write");
    std::fs::write(&token, "root\n").expect("write");
    let addr = server.addr.to_string();
    let run = |mode: &str, input: &Path, output: &Path, extra: &[&str]| {
        let mut args = vec![
            mode,
            "--server",
            &addr,
            "--key",
            "files",
            "--token-file",
            s(&token),
            "-i",
            s(input),
            "-o",
            s(output),
        ];
        args.extend_from_slice(extra);
        aescrypt(&args)
    };
    let by_name_with = |mode: &str, input: &Path, output: &Path, extra: &[&str]| {
        let out = run(mode, input, output, extra);
        assert!(
            out.status.success(),
            "aescrypt {mode} {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let by_name = |mode: &str, input: &Path, output: &Path| {
        by_name_with(mode, input, output, &[]);
    };
    by_name("encrypt", &plain, &enc);
    let (stanza, payload) = split(&std::fs::read(&enc).expect("read"));
    assert_eq!(stanza, "aesd-key files 1");
    assert!(post(&http, "/v1/transit/keys/files/rotate").contains(" 20"));
    by_name("rewrap", &enc, &new);
    let (stanza, new_payload) = split(&std::fs::read(&new).expect("read"));
    assert_eq!(stanza, "aesd-key files 2");
    assert_eq!(
        new_payload, payload,
        "rewrap leaves the payload bytes as they were"
    );
    by_name("decrypt", &new, &back);
    assert_eq!(std::fs::read(&back).expect("read"), data);

    // --local: a server-made file decrypts here, only its header sent.
    let (local_enc, local_back) = (dir.join("local.enc"), dir.join("local.back"));
    let header_len = |file: &[u8]| {
        aesd_age::HeaderReader::new()
            .push(file)
            .expect("header")
            .expect("complete")
            .1
    };
    let new_header_len = header_len(&std::fs::read(&new).expect("read"));
    let said = by_name_with("decrypt", &new, &local_back, &["--local", "-v"]);
    assert_eq!(std::fs::read(&local_back).expect("read"), data);
    assert!(
        said.contains(&format!(
            "aescrypt: {new_header_len} bytes in, 16 bytes out;"
        )),
        "the key job takes the header, answers the file key: {said}"
    );
    // A file encrypted here (no plaintext sent) decrypts on the server
    // by name, and here too.
    let said = by_name_with("encrypt", &plain, &local_enc, &["--local", "-v"]);
    assert!(said.contains("aescrypt: 0 bytes in,"), "{said}");
    let (stanza, _) = split(&std::fs::read(&local_enc).expect("read"));
    assert_eq!(stanza, "aesd-key files 2");
    std::fs::remove_file(&back).expect("remove");
    by_name("decrypt", &local_enc, &back);
    assert_eq!(std::fs::read(&back).expect("read"), data);
    std::fs::remove_file(&local_back).expect("remove");
    by_name_with("decrypt", &local_enc, &local_back, &["--local"]);
    assert_eq!(std::fs::read(&local_back).expect("read"), data);
    // A changed header byte (in the MAC line): refused by the server's
    // MAC check, exit 1, no output written.
    let mut changed = std::fs::read(&local_enc).expect("read");
    let at = header_len(&changed) - 3;
    changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
    let (bad, bad_out) = (dir.join("bad.enc"), dir.join("bad.out"));
    std::fs::write(&bad, &changed).expect("write");
    let out = run("decrypt", &bad, &bad_out, &["--local"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("decrypt_failed"), "{said}");
    assert!(!bad_out.exists(), "nothing written");
    // --local with rewrap, or without --key: usage errors.
    let out = run("rewrap", &new, &bad_out, &["--local"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--local is for encrypt and decrypt"));
    let out = aescrypt(&[
        "encrypt",
        "--server",
        &addr,
        "--pass",
        "pass:x",
        "--local",
        "-i",
        s(&plain),
        "-o",
        s(&bad_out),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--local is by name"));

    // rewrap without --key: a usage error (exit 2), nothing written.
    let out = aescrypt(&[
        "rewrap",
        "--server",
        &addr,
        "--pass",
        "pass:x",
        "-i",
        s(&enc),
        "-o",
        s(&back),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rewrap is by name"));
}
