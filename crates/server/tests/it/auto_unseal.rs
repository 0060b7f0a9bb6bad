//! Auto-unseal from a second aesd (the transit seal, issue 38 item 4):
//! aesd A holds the Transit key `autounseal`; aesd B, started with
//! `--seal-transit-*`, is initialised with the `bao` CLI (recovery shares,
//! no unseal shares) and unseals itself, after every restart too. While A
//! is sealed or stopped, or the token is wrong, B stays sealed and says
//! why (`sys/seal-status`); once A is unsealed again B unseals within its
//! retry. `sys/seal` on B stops the auto-unseal until the recovery shares
//! are given.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bao_support::{Aesd, bao_binary, ok, raw_at, request};

/// A request to `aesd` that must answer `expect`; the JSON body.
fn call(aesd: &Aesd, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let (code, text) = raw_at(&aesd.http, &request(method, path, token, body));
    (code, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn must(aesd: &Aesd, method: &str, path: &str, token: Option<&str>, body: &str) -> Value {
    let (code, json) = call(aesd, method, path, token, body);
    assert!(code == 200 || code == 204, "{method} {path}: {code} {json}");
    json
}

fn seal_status(aesd: &Aesd) -> Value {
    must(aesd, "GET", "/v1/sys/seal-status", None, "")
}

/// Polls `sys/seal-status` until `done` holds (at most `within`).
fn wait_for(aesd: &Aesd, within: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let status = seal_status(aesd);
        if done(&status) {
            return status;
        }
        assert!(
            start.elapsed() < within,
            "not {what} within {within:?}: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Aesd A: a keyring of its own (1 share of 1, kept here so the test can
/// seal and unseal A), the key `autounseal`, and a token that may only
/// encrypt and decrypt with it. Returns A, its share, its root token and
/// that token.
fn start_a(dir: &Path) -> (Aesd, String, String, String) {
    let a = Aesd::start(&dir.join("a"));
    let init = must(
        &a,
        "PUT",
        "/v1/sys/init",
        None,
        r#"{"secret_shares":1,"secret_threshold":1}"#,
    );
    let share = init["keys"][0].as_str().expect("share").to_owned();
    let root = init["root_token"].as_str().expect("root").to_owned();
    must(
        &a,
        "PUT",
        "/v1/sys/unseal",
        None,
        &format!(r#"{{"key":"{share}"}}"#),
    );
    must(&a, "POST", "/v1/transit/keys/autounseal", Some(&root), "{}");
    let policy = r#"path "transit/encrypt/autounseal" { capabilities = ["update"] }
path "transit/decrypt/autounseal" { capabilities = ["update"] }"#;
    must(
        &a,
        "PUT",
        "/v1/sys/policies/acl/autounseal",
        Some(&root),
        &serde_json::json!({ "policy": policy }).to_string(),
    );
    let made = must(
        &a,
        "POST",
        "/v1/auth/token/create",
        Some(&root),
        r#"{"policies":["autounseal"]}"#,
    );
    let token = made["auth"]["client_token"]
        .as_str()
        .expect("client_token")
        .to_owned();
    (a, share, root, token)
}

fn start_b(dir: &Path, a_http: &str, token_file: &Path) -> Aesd {
    Aesd::start_with(&[
        "--keyring",
        dir.join("b").to_str().expect("utf-8"),
        "--seal-transit-address",
        a_http,
        "--seal-transit-key-name",
        "autounseal",
        "--seal-transit-token-file",
        token_file.to_str().expect("utf-8"),
    ])
}

#[test]
fn a_second_aesd_unseals_b_at_every_start_and_b_says_why_when_it_cannot() {
    bao_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, share_a, root_a, token) = start_a(dir.path());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).expect("token file");

    // B before init: the transit seal, recovery shares.
    let b = start_b(dir.path(), &a.http, &token_file);
    let status = seal_status(&b);
    assert_eq!(
        (
            &status["type"],
            &status["recovery_seal"],
            &status["initialized"]
        ),
        (
            &Value::from("transit"),
            &Value::Bool(true),
            &Value::Bool(false)
        ),
        "{status}"
    );
    let init = ok(
        &b,
        None,
        &[
            "operator",
            "init",
            "-recovery-shares=3",
            "-recovery-threshold=2",
            "-format=json",
        ],
    );
    let recovery: Vec<String> = init["recovery_keys_b64"]
        .as_array()
        .expect("recovery_keys_b64")
        .iter()
        .map(|k| k.as_str().expect("key").to_owned())
        .collect();
    assert_eq!(recovery.len(), 3, "{init}");
    assert_eq!(init["unseal_keys_b64"].as_array().map(Vec::len), Some(0));
    let root_b = init["root_token"].as_str().expect("root_token").to_owned();
    let status = seal_status(&b);
    assert_eq!(status["sealed"], false, "unsealed at init: {status}");
    assert_eq!(
        (&status["t"], &status["n"]),
        (&Value::from(2), &Value::from(3))
    );
    must(&b, "POST", "/v1/transit/keys/k", Some(&root_b), "{}");
    let sealed = must(
        &b,
        "POST",
        "/v1/transit/encrypt/k",
        Some(&root_b),
        r#"{"plaintext":"aGVsbG8="}"#,
    );
    let ciphertext = sealed["data"]["ciphertext"]
        .as_str()
        .expect("ciphertext")
        .to_owned();
    // On disk: format 2, the transit seal, the root key as A's ciphertext.
    let newest = std::fs::read_dir(dir.path().join("b"))
        .expect("b's keyring")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sealed"))
        .max()
        .expect("a sealed generation");
    let bytes = std::fs::read(&newest).expect("read");
    assert_eq!((bytes[8], bytes[20]), (2, 2), "format 2, seal type transit");
    assert!(
        bytes.windows(9).any(|w| w == b"vault:v1:"),
        "the wrapped root key"
    );

    // Restarted: unsealed again with no share, the keys there.
    b.stop();
    let b = start_b(dir.path(), &a.http, &token_file);
    wait_for(&b, Duration::from_secs(20), "auto-unsealed", |s| {
        s["sealed"] == false
    });
    let opened = must(
        &b,
        "POST",
        "/v1/transit/decrypt/k",
        Some(&root_b),
        &serde_json::json!({ "ciphertext": ciphertext }).to_string(),
    );
    assert_eq!(opened["data"]["plaintext"], "aGVsbG8=");

    // A sealed: B restarts sealed and says why; A unsealed: B follows.
    must(&a, "PUT", "/v1/sys/seal", Some(&root_a), "");
    b.stop();
    let b = start_b(dir.path(), &a.http, &token_file);
    let status = wait_for(&b, Duration::from_secs(20), "told A is sealed", |s| {
        s["auto_unseal_error_kind"] == "server_sealed"
    });
    assert_eq!(status["sealed"], true, "{status}");
    assert_eq!(status["type"], "transit");
    assert!(
        status["auto_unseal_error"]
            .as_str()
            .is_some_and(|m| m.contains("is sealed (HTTP 503")),
        "{status}"
    );
    let (code, _) = call(&b, "POST", "/v1/transit/keys/k2", Some(&root_b), "{}");
    assert_eq!(code, 503, "B serves nothing while sealed");
    must(
        &a,
        "PUT",
        "/v1/sys/unseal",
        None,
        &format!(r#"{{"key":"{share_a}"}}"#),
    );
    let status = wait_for(&b, Duration::from_secs(25), "unsealed by the retry", |s| {
        s["sealed"] == false
    });
    assert!(status.get("auto_unseal_error").is_none(), "{status}");

    // sys/seal on B: no auto-unseal until restart; the recovery shares
    // unseal it (k - 1 do not).
    must(&b, "PUT", "/v1/sys/seal", Some(&root_b), "");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        seal_status(&b)["sealed"],
        true,
        "sealed by the operator stays sealed"
    );
    let one = must(
        &b,
        "PUT",
        "/v1/sys/unseal",
        None,
        &format!(r#"{{"key":"{}"}}"#, recovery[0]),
    );
    assert_eq!(
        (&one["sealed"], &one["progress"]),
        (&Value::Bool(true), &Value::from(1))
    );
    let two = must(
        &b,
        "PUT",
        "/v1/sys/unseal",
        None,
        &format!(r#"{{"key":"{}"}}"#, recovery[2]),
    );
    assert_eq!(two["sealed"], false, "{two}");

    // Negative controls: a wrong token, then A gone: B stays sealed and
    // names the reason.
    b.stop();
    let wrong = dir.path().join("wrong-token");
    std::fs::write(&wrong, "s.not-a-token-of-a\n").expect("token file");
    let b = start_b(dir.path(), &a.http, &wrong);
    let status = wait_for(
        &b,
        Duration::from_secs(20),
        "told the token is refused",
        |s| s["auto_unseal_error_kind"] == "permission_denied",
    );
    assert_eq!(status["sealed"], true, "{status}");
    assert!(
        status["auto_unseal_error"]
            .as_str()
            .is_some_and(|m| m.contains("token was refused (HTTP 403")),
        "{status}"
    );
    b.stop();
    let a_http = a.http.clone();
    a.stop();
    let b = start_b(dir.path(), &a_http, &token_file);
    let status = wait_for(&b, Duration::from_secs(20), "told A is unreachable", |s| {
        s["auto_unseal_error_kind"] == "unreachable"
    });
    assert_eq!(status["sealed"], true, "{status}");
}

/// The settings the transit seal needs come together, and `--dev` does
/// not take it: aesd refuses to start and says which is missing.
#[test]
fn incomplete_transit_seal_settings_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = dir.path().join("k");
    let keyring = keyring.to_str().expect("utf-8");
    let token = dir.path().join("t");
    std::fs::write(&token, "s.token\n").expect("token");
    let token = token.to_str().expect("utf-8");
    let addr = "http://127.0.0.1:1";
    for (args, says) in [
        (
            vec![
                "--keyring",
                keyring,
                "--seal-transit-address",
                addr,
                "--seal-transit-token-file",
                token,
            ],
            "--seal-transit-key-name",
        ),
        (
            vec![
                "--keyring",
                keyring,
                "--seal-transit-address",
                addr,
                "--seal-transit-key-name",
                "k",
            ],
            "--seal-transit-token-file",
        ),
        (
            vec![
                "--seal-transit-address",
                addr,
                "--seal-transit-key-name",
                "k",
                "--seal-transit-token-file",
                token,
            ],
            "give --keyring",
        ),
        (
            vec!["--keyring", keyring, "--seal-transit-key-name", "k"],
            "need --seal-transit-address",
        ),
        (
            vec![
                "--keyring",
                keyring,
                "--seal-transit-address",
                "https://127.0.0.1:1",
            ],
            "an https:// --seal-transit-address needs --seal-transit-ca-cert",
        ),
        (
            vec![
                "--keyring",
                keyring,
                "--seal-transit-address",
                addr,
                "--seal-transit-key-name",
                "k",
                "--seal-transit-token-file",
                token,
                "--seal-transit-ca-cert",
                token,
            ],
            "--seal-transit-ca-cert is for an https:// --seal-transit-address",
        ),
        (
            vec![
                "--http-listen",
                "127.0.0.1:0",
                "--keyring",
                keyring,
                "--seal-transit-address",
                "https://127.0.0.1:1",
                "--seal-transit-key-name",
                "k",
                "--seal-transit-token-file",
                token,
                "--seal-transit-ca-cert",
                token,
            ],
            "no PEM certificate",
        ),
        (
            vec![
                "--http-listen",
                "127.0.0.1:0",
                "--keyring",
                keyring,
                "--seal-transit-address",
                addr,
                "--seal-transit-key-name",
                "k",
                "--seal-transit-token-file",
                "/nonexistent/token",
            ],
            "--seal-transit-token-file",
        ),
        (
            vec![
                "--http-listen",
                "127.0.0.1:0",
                "--keyring",
                keyring,
                "--seal-transit-address",
                addr,
                "--seal-transit-key-name",
                "no/slash",
                "--seal-transit-token-file",
                token,
            ],
            "--seal-transit-key-name",
        ),
    ] {
        let out = std::process::Command::new(aesd_testkit::aesd_binary())
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .expect("run aesd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(
            stderr.contains(says),
            "{args:?}: expected {says:?} in: {stderr}"
        );
    }
}
