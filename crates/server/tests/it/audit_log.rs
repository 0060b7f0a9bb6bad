//! The HTTP API's audit log (`--audit-log FILE`): the real `bao` CLI's
//! requests each leave a request and a response line with the caller,
//! the operation, the key and its version, the status and the error; no
//! plaintext, ciphertext, token, data key or share appears in the file
//! (raw or base64); the `hmac-sha256:` of a known value matches
//! `sys/audit-hash`; a log that cannot be written refuses requests with
//! 500, carries none of them out, and the server stays up.

use crate::bao_support;

use std::path::Path;

use bao_support::*;
use base64ct::{Base64, Encoding};
use serde_json::{Value, json};

/// The log's lines, parsed (every line must be JSON).
fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .expect("audit log")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The lines of `kind` for `path`.
fn find<'a>(all: &'a [Value], kind: &str, path: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|l| l["type"] == kind && l["path"] == path)
        .collect()
}

/// The names of the `secrets` found in `haystack`, each searched as its
/// raw bytes and as standard base64.
fn leaks(haystack: &[u8], secrets: &[(&str, Vec<u8>)]) -> Vec<String> {
    let contains = |needle: &[u8]| haystack.windows(needle.len()).any(|w| w == needle);
    secrets
        .iter()
        .filter(|(_, secret)| {
            contains(secret)
                || contains(
                    Base64::encode_string(secret)
                        .trim_end_matches('=')
                        .as_bytes(),
                )
        })
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

fn write_json(aesd: &Aesd, token: &str, args: &[&str]) -> Value {
    let mut all = vec!["write", "-format=json"];
    all.extend_from_slice(args);
    ok(aesd, Some(token), &all)
}

#[test]
fn bao_cli_requests_leave_hashed_lines_and_no_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let root = "audit-root-token-5f1c7e";
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        root,
        "--audit-log",
        log.to_str().expect("utf-8"),
    ]);
    let plain = b"the audit log never shows this 93b1";
    let plain64 = Base64::encode_string(plain);
    let made = write_json(
        &aesd,
        root,
        &["transit/encrypt/audk", &format!("plaintext={plain64}")],
    );
    let ct = made["data"]["ciphertext"]
        .as_str()
        .expect("ciphertext")
        .to_owned();
    let opened = write_json(
        &aesd,
        root,
        &["transit/decrypt/audk", &format!("ciphertext={ct}")],
    );
    assert_eq!(opened["data"]["plaintext"], plain64.as_str());
    ok(
        &aesd,
        Some(root),
        &["write", "-f", "transit/keys/audk/rotate"],
    );
    let key = write_json(&aesd, root, &["-f", "transit/datakey/plaintext/audk"]);
    let data_key = Base64::decode_vec(key["data"]["plaintext"].as_str().expect("data key"))
        .expect("base64 data key");
    let wrapped = key["data"]["ciphertext"]
        .as_str()
        .expect("wrapped")
        .to_owned();
    let batch_plain = b"batch item never shown either 4e2a";
    let batch = json!({ "batch_input": [{ "plaintext": Base64::encode_string(batch_plain) }] });
    let (code, _) = raw(
        &aesd,
        &request(
            "POST",
            "/v1/transit/encrypt/audk",
            Some(root),
            &batch.to_string(),
        ),
    );
    assert_eq!(code, 200);
    let bogus = "not-a-token-but-secret-d41d";
    refused(
        &aesd,
        Some(bogus),
        &[
            "write",
            "transit/encrypt/audk",
            &format!("plaintext={plain64}"),
        ],
        403,
        "permission denied",
    );
    // A method no path takes: refused before the body is read.
    let (code, _) = raw(
        &aesd,
        &request("PATCH", "/v1/transit/keys/audk", Some(root), "{}"),
    );
    assert_eq!(code, 405);
    // Asked after the requests above: its own lines come last.
    let hashed = write_json(
        &aesd,
        root,
        &["sys/audit-hash/file", &format!("input={plain64}")],
    );
    let all = lines(&log);

    // Encrypt: the caller, the operation, the key, the hashed plaintext.
    let enc = find(&all, "request", "transit/encrypt/audk");
    let first = enc[0];
    assert_eq!(first["operation"], "update");
    assert_eq!(first["key"], "audk");
    assert_eq!(first["remote_address"], "127.0.0.1");
    assert_eq!(first["auth"]["policies"], json!(["root"]));
    assert!(
        first["auth"]["accessor"]
            .as_str()
            .is_some_and(|a| !a.is_empty()),
        "{first}"
    );
    assert!(
        first["time"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
        "{first}"
    );
    assert_eq!(
        first["data"]["plaintext"], hashed["data"]["hash"],
        "{first}"
    );
    assert!(
        hashed["data"]["hash"]
            .as_str()
            .is_some_and(|h| h.starts_with("hmac-sha256:"))
    );
    let enc_out = find(&all, "response", "transit/encrypt/audk");
    assert_eq!(enc_out[0]["request_id"], first["request_id"]);
    assert_eq!(enc_out[0]["status"], 200);
    assert_eq!(enc_out[0]["key_version"], 1);
    assert_eq!(enc_out[0]["error"], Value::Null);
    assert!(
        enc_out[0]["data"]["data"]["ciphertext"]
            .as_str()
            .is_some_and(|c| c.starts_with("hmac-sha256:"))
    );
    // The batch item hashed.
    let batch_line = enc
        .iter()
        .find(|l| l["data"]["batch_input"].is_array())
        .expect("batch line");
    assert!(
        batch_line["data"]["batch_input"][0]["plaintext"]
            .as_str()
            .is_some_and(|p| p.starts_with("hmac-sha256:"))
    );
    // The refused request: 403, its error, no caller, its token hashed.
    let denied = enc_out
        .iter()
        .find(|l| l["status"] == 403)
        .expect("a 403 line");
    assert!(
        denied["error"]
            .as_str()
            .is_some_and(|e| e.contains("permission denied")),
        "{denied}"
    );
    assert_eq!(denied["auth"]["accessor"], Value::Null);
    assert!(
        denied["auth"]["client_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("hmac-sha256:"))
    );
    // Decrypt: the version from the ciphertext; rotate.
    let dec = find(&all, "request", "transit/decrypt/audk");
    assert_eq!(dec[0]["key_version"], 1, "{}", dec[0]);
    assert_eq!(
        find(&all, "response", "transit/decrypt/audk")[0]["status"],
        200
    );
    let rotated = find(&all, "response", "transit/keys/audk/rotate");
    assert!(
        rotated[0]["status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s)),
        "{}",
        rotated[0]
    );
    assert_eq!(rotated[0]["key"], "audk");
    // The 405: a response line only.
    let patched: Vec<_> = all.iter().filter(|l| l["method"] == "PATCH").collect();
    assert_eq!(patched.len(), 1, "{patched:?}");
    assert_eq!(patched[0]["type"], "response");
    assert_eq!(patched[0]["status"], 405);
    assert_eq!(patched[0]["path"], "transit/keys/audk");
    let datakey = find(&all, "response", "transit/datakey/plaintext/audk");
    assert_eq!(datakey[0]["key_version"], 2, "{}", datakey[0]);

    // No secret in the raw bytes, nor in base64.
    let raw_log = std::fs::read(&log).expect("log");
    let secrets = [
        ("plaintext", plain.to_vec()),
        ("batch plaintext", batch_plain.to_vec()),
        ("ciphertext", ct.clone().into_bytes()),
        (
            "ciphertext body",
            ct.as_bytes()["vault:v1:".len()..].to_vec(),
        ),
        ("root token", root.as_bytes().to_vec()),
        ("refused token", bogus.as_bytes().to_vec()),
        ("data key", data_key.clone()),
        ("wrapped data key", wrapped.clone().into_bytes()),
    ];
    assert_eq!(leaks(&raw_log, &secrets), Vec::<String>::new());
    // Negative control: a planted secret is found, by name.
    let mut planted = raw_log.clone();
    planted.extend_from_slice(format!("{{\"oops\":\"{plain64}\"}}\n").as_bytes());
    assert_eq!(leaks(&planted, &secrets), vec!["plaintext".to_owned()]);
    let mut planted = raw_log;
    planted.extend_from_slice(&data_key);
    assert_eq!(leaks(&planted, &secrets), vec!["data key".to_owned()]);
    aesd.stop();
}

#[test]
fn shares_and_the_root_token_of_init_and_unseal_are_not_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let keyring = dir.path().join("keyring");
    std::fs::create_dir(&keyring).expect("keyring dir");
    let aesd = Aesd::start_with(&[
        "--keyring",
        keyring.to_str().expect("utf-8"),
        "--audit-log",
        log.to_str().expect("utf-8"),
    ]);
    let init = ok(
        &aesd,
        None,
        &[
            "operator",
            "init",
            "-key-shares=1",
            "-key-threshold=1",
            "-format=json",
        ],
    );
    let share = init["unseal_keys_b64"][0]
        .as_str()
        .expect("share")
        .to_owned();
    let share_hex = init["unseal_keys_hex"][0]
        .as_str()
        .expect("share")
        .to_owned();
    let root = init["root_token"].as_str().expect("root token").to_owned();
    ok(&aesd, None, &["operator", "unseal", "-format=json", &share]);
    let hashed = write_json(&aesd, &root, &["sys/audit-hash/file", "input=x"]);
    assert!(
        hashed["data"]["hash"]
            .as_str()
            .is_some_and(|h| h.starts_with("hmac-sha256:"))
    );
    let all = lines(&log);
    // Sealed: no salt yet, the share is written as `redacted`.
    let unseal = find(&all, "request", "sys/unseal");
    assert_eq!(unseal[0]["data"]["key"], "redacted", "{}", unseal[0]);
    let raw_log = std::fs::read(&log).expect("log");
    let secrets = [
        ("share", Base64::decode_vec(&share).expect("base64 share")),
        ("share hex", share_hex.into_bytes()),
        ("root token", root.into_bytes()),
    ];
    assert_eq!(leaks(&raw_log, &secrets), Vec::<String>::new());
    aesd.stop();
}

#[test]
fn an_unwritable_audit_log_refuses_requests_and_the_server_stays_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let root = "audit-root-token-9a0b";
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        root,
        "--audit-log",
        log.to_str().expect("utf-8"),
    ]);
    let make = |name: &str| {
        raw(
            &aesd,
            &request(
                "POST",
                &format!("/v1/transit/keys/{name}"),
                Some(root),
                "{}",
            ),
        )
    };
    let (code, body) = make("before");
    assert!((200..300).contains(&code), "{code} {body}");
    // Rotated away and replaced by a directory: refused, not carried out.
    std::fs::rename(&log, dir.path().join("audit.log.1")).expect("rename");
    std::fs::create_dir(&log).expect("mkdir");
    let (code, body) = make("during");
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("audit log cannot be written"), "{body}");
    // A writable path again: a new file, and the key was never made.
    std::fs::remove_dir(&log).expect("rmdir");
    let (code, body) = raw(
        &aesd,
        &request("GET", "/v1/transit/keys/during", Some(root), ""),
    );
    assert_eq!(code, 404, "{body}");
    // The new file starts with the chain's anchor, then the request.
    let fresh = lines(&log);
    assert_eq!(fresh[0]["type"], "audit-chain", "{:?}", fresh[0]);
    assert_eq!(fresh[0]["event"], "reopened", "{:?}", fresh[0]);
    assert_eq!(fresh[1]["path"], "transit/keys/during", "{:?}", fresh[1]);
    aesd.stop();

    // /dev/full: every write fails; every request gets 500; still up.
    let mut full = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        root,
        "--audit-log",
        "/dev/full",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    for _ in 0..3 {
        let (code, body) = raw_at(&full.http, &request("GET", "/v1/sys/health", None, ""));
        assert_eq!(code, 500, "{body}");
    }
    assert!(
        full.child.try_wait().expect("try_wait").is_none(),
        "aesd exited"
    );
    // Each refused line counted (the metrics endpoint is not audited):
    // the request line, and the response line that refusal then needs.
    let metrics = aesd_testkit::metrics_text(full.metrics.expect("metrics address"));
    assert!(
        metrics.contains("aesd_errors_total{kind=\"audit_write\"} 6"),
        "{metrics}"
    );
    full.stop();
}
