//! The audit log's hash chain and `aesd verify-audit` against a running
//! aesd: a log written across a restart (kill -9, started again sealed,
//! unsealed) verifies (exit 0); one flipped byte, a removed line and two
//! swapped lines are each caught and named by line number (exit 1);
//! no token, or one without sudo, is a usage/connection error (exit 2).
//! By-name jobs on the job port write a request and a response line
//! (accessor, key, version, bytes, result; no token, no plaintext); an
//! audit log that cannot be written refuses them with `audit_failed`,
//! counted, and the next job runs once the log can be written again.
//! `--audit-log-max-bytes` rotates into the kept files, which verify in
//! order and are caught out of order.

use crate::bao_support::{Aesd, raw, request};
use crate::by_name_support::job;

use std::path::{Path, PathBuf};
use std::process::Command;

use aesd_client::Client;
use aesd_proto::{ErrorCode, Operation};
use aesd_testkit::{aesd_binary, pattern_bytes};
use serde_json::{Value, json};

/// `method path` with `token` must succeed: its JSON answer.
fn admin(aesd: &Aesd, token: &str, method: &str, path: &str, body: &str) -> Value {
    let (code, answer) = raw(aesd, &request(method, path, Some(token), body));
    assert!(
        (200..300).contains(&code),
        "{method} {path}: {code} {answer}"
    );
    serde_json::from_str(&answer).unwrap_or(Value::Null)
}

/// `aesd verify-audit FILES` against `aesd` with `token`: exit code and
/// what it printed (stdout, then stderr).
fn verify_audit(aesd: &Aesd, token: Option<&str>, files: &[&Path]) -> (i32, String) {
    let runner = std::env::var("AESD_TEST_RUNNER").unwrap_or_default();
    let mut runner = runner.split_whitespace();
    let mut command = match runner.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(runner).arg(aesd_binary());
            command
        }
        None => Command::new(aesd_binary()),
    };
    command
        .arg("verify-audit")
        .args(files)
        .env("BAO_ADDR", &aesd.http)
        .env_remove("BAO_TOKEN")
        .env_remove("VAULT_TOKEN");
    if let Some(token) = token {
        command.env("BAO_TOKEN", token);
    }
    let out = command.output().expect("run aesd verify-audit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Init (one share) and unseal a fresh `--keyring` aesd: share, root token.
fn init_and_unseal(aesd: &Aesd) -> (String, String) {
    let (code, answer) = raw(
        aesd,
        &request(
            "PUT",
            "/v1/sys/init",
            None,
            &json!({ "secret_shares": 1, "secret_threshold": 1 }).to_string(),
        ),
    );
    assert_eq!(code, 200, "{answer}");
    let init: Value = serde_json::from_str(&answer).expect("JSON");
    let share = init["keys_base64"][0].as_str().expect("share").to_owned();
    unseal(aesd, &share);
    (share, init["root_token"].as_str().expect("root").to_owned())
}

fn unseal(aesd: &Aesd, share: &str) {
    let (code, answer) = raw(
        aesd,
        &request(
            "PUT",
            "/v1/sys/unseal",
            None,
            &json!({ "key": share }).to_string(),
        ),
    );
    assert_eq!(code, 200, "{answer}");
    assert!(answer.contains("\"sealed\":false"), "{answer}");
}

/// A copy of `log` named `name` with `change` applied to its lines.
fn tampered(log: &Path, name: &str, change: impl FnOnce(&mut Vec<String>)) -> PathBuf {
    let text = std::fs::read_to_string(log).expect("log");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    change(&mut lines);
    let path = log.with_file_name(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("write copy");
    path
}

/// The number (from 1) of the first line of `log` matching `wanted`.
fn line_number(log: &Path, wanted: impl Fn(&Value) -> bool) -> usize {
    std::fs::read_to_string(log)
        .expect("log")
        .lines()
        .position(|line| serde_json::from_str(line).is_ok_and(|v: Value| wanted(&v)))
        .expect("a matching line")
        + 1
}

#[test]
fn a_chain_across_a_restart_verifies_and_each_tampering_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keyring = dir.path().join("keyring");
    std::fs::create_dir(&keyring).expect("keyring dir");
    let log = dir.path().join("audit.log");
    let args = [
        "--keyring",
        keyring.to_str().expect("utf-8"),
        "--audit-log",
        log.to_str().expect("utf-8"),
    ];
    let aesd = Aesd::start_with(&args);
    let (share, root) = init_and_unseal(&aesd);
    admin(&aesd, &root, "POST", "/v1/transit/keys/chained", "{}");
    admin(&aesd, &root, "POST", "/v1/transit/keys/chained/rotate", "");
    aesd.stop(); // kill -9
    let aesd = Aesd::start_with(&args);
    unseal(&aesd, &share);
    admin(&aesd, &root, "GET", "/v1/transit/keys/chained", "");

    let (code, out) = verify_audit(&aesd, Some(&root), &[&log]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("intact:"), "{out}");
    let text = std::fs::read_to_string(&log).expect("log");
    // The restart is in the file: a start anchor naming the last keyed
    // line before it, and lines written while sealed.
    let starts = text
        .lines()
        .filter(|l| l.contains("\"type\":\"audit-chain\"") && l.contains("\"event\":\"start\""))
        .count();
    assert_eq!(starts, 2, "{text}");
    assert!(text.contains("\"chain\":\"sealed\""), "{text}");

    // One flipped byte in the rotate request's line.
    let rotate = line_number(&log, |l| {
        l["type"] == "request" && l["path"] == "transit/keys/chained/rotate"
    });
    let flipped = tampered(&log, "flipped.log", |lines| {
        lines[rotate - 1] = lines[rotate - 1].replacen("rotate", "rotatf", 1);
    });
    let (code, out) = verify_audit(&aesd, Some(&root), &[&flipped]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("flipped.log line {rotate}: MAC mismatch")),
        "{out}"
    );
    // The rotate request's line removed: the line after it is named.
    let removed = tampered(&log, "removed.log", |lines| {
        lines.remove(rotate - 1);
    });
    let (code, out) = verify_audit(&aesd, Some(&root), &[&removed]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("removed.log line {rotate}: MAC")),
        "{out}"
    );
    // The rotate request and its response swapped.
    let swapped = tampered(&log, "swapped.log", |lines| {
        lines.swap(rotate - 1, rotate);
    });
    let (code, out) = verify_audit(&aesd, Some(&root), &[&swapped]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("swapped.log line {rotate}: MAC")),
        "{out}"
    );
    // Not JSON.
    let cut = tampered(&log, "cut.log", |lines| lines[2].truncate(10));
    let (code, out) = verify_audit(&aesd, Some(&root), &[&cut]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cut.log line 3: not JSON"), "{out}");

    // No token, a token without sudo, a sealed aesd: exit 2.
    let (code, out) = verify_audit(&aesd, None, &[&log]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("BAO_TOKEN"), "{out}");
    admin(
        &aesd,
        &root,
        "PUT",
        "/v1/sys/policies/acl/auditor",
        &json!({ "policy": "path \"sys/audit-chain/verify\" { capabilities = [\"update\"] }" })
            .to_string(),
    );
    let made = admin(
        &aesd,
        &root,
        "POST",
        "/v1/auth/token/create",
        &json!({ "policies": ["auditor"] }).to_string(),
    );
    let no_sudo = made["auth"]["client_token"].as_str().expect("token");
    let (code, out) = verify_audit(&aesd, Some(no_sudo), &[&log]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("403"), "{out}");
    admin(&aesd, &root, "PUT", "/v1/sys/seal", "");
    let (code, out) = verify_audit(&aesd, Some(&root), &[&log]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("sealed"), "{out}");
    aesd.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_name_jobs_are_audited_and_an_unwritable_log_refuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let root = "audit-job-root-71c3e9";
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        root,
        "--audit-log",
        log.to_str().expect("utf-8"),
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    admin(&aesd, root, "POST", "/v1/transit/keys/jobs", "{}");
    let me = admin(&aesd, root, "GET", "/v1/auth/token/lookup-self", "");
    let accessor = me["data"]["accessor"]
        .as_str()
        .expect("accessor")
        .to_owned();
    let plain = pattern_bytes(11, 70_000);
    let mut client = Client::connect(&aesd.listen.expect("job port").to_string())
        .await
        .expect("connect");
    client.send_key_token(root.as_bytes()).await.expect("token");
    let sealed = job(&mut client, Operation::Encrypt, "jobs", &plain)
        .await
        .expect("encrypt");
    let opened = job(&mut client, Operation::Decrypt, "jobs", &sealed)
        .await
        .expect("decrypt");
    assert_eq!(opened, plain);
    let (code, _) = job(&mut client, Operation::Encrypt, "absent", &plain)
        .await
        .expect_err("unknown key");
    assert_eq!(code, ErrorCode::UnknownKey);
    admin(&aesd, root, "POST", "/v1/transit/keys/jobs/rotate", "");
    client
        .rewrap_header("jobs", &mut &sealed[..])
        .await
        .expect("rewrap");

    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let jobs: Vec<&Value> = lines.iter().filter(|l| l["port"] == "job").collect();
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    let (request, response) = (jobs[0], jobs[1]);
    assert_eq!(request["type"], "request");
    assert_eq!(request["operation"], "encrypt");
    assert_eq!(request["path"], "transit/encrypt/jobs");
    assert_eq!(request["key"], "jobs");
    assert_eq!(request["auth"]["accessor"], accessor.as_str());
    assert_eq!(request["remote_address"], "127.0.0.1");
    assert_eq!(response["request_id"], request["request_id"]);
    assert_eq!(response["type"], "response");
    assert_eq!(response["key_version"], 1);
    assert_eq!(response["bytes_in"], plain.len());
    assert_eq!(response["bytes_out"], sealed.len());
    assert_eq!(response["error"], Value::Null);
    assert_eq!(jobs[3]["operation"], "decrypt");
    assert_eq!(jobs[3]["key_version"], 1);
    assert_eq!(jobs[3]["bytes_out"], plain.len());
    assert_eq!(jobs[5]["key"], "absent");
    assert_eq!(jobs[5]["error"], "unknown_key");
    assert_eq!(jobs[6]["path"], "transit/rewrap/jobs");
    assert_eq!(jobs[7]["key_version"], 1, "{}", jobs[7]);
    assert_eq!(jobs[7]["new_key_version"], 2, "{}", jobs[7]);
    assert!(
        jobs.iter().all(|l| l["chain"]
            .as_str()
            .is_some_and(|c| c.starts_with("hmac-sha256:"))),
        "{jobs:?}"
    );
    // No token, no plaintext (a 16-byte window of it).
    assert!(!text.contains(root), "the token is in the log");
    let window = &plain[1000..1016];
    assert!(!text.as_bytes().windows(16).any(|w| w == window));
    // The job lines are in the chain.
    let (code, out) = verify_audit(&aesd, Some(root), &[&log]);
    assert_eq!(code, 0, "{out}");

    // The log's path becomes a directory: the job is refused, counted.
    std::fs::rename(&log, dir.path().join("audit.log.1")).expect("rename");
    std::fs::create_dir(&log).expect("mkdir");
    let (code, out) = job(&mut client, Operation::Encrypt, "jobs", &plain)
        .await
        .expect_err("refused");
    assert_eq!((code, out.len()), (ErrorCode::AuditFailed, 0));
    let metrics = aesd_testkit::metrics_text(aesd.metrics.expect("metrics address"));
    assert!(
        metrics.contains("aesd_errors_total{kind=\"audit_write\"} 1"),
        "{metrics}"
    );
    // The same connection runs the next job once the log can be written.
    std::fs::remove_dir(&log).expect("rmdir");
    job(&mut client, Operation::Encrypt, "jobs", &plain)
        .await
        .expect("encrypt again");
    let fresh = std::fs::read_to_string(&log).expect("new log");
    assert!(fresh.contains("\"event\":\"reopened\""), "{fresh}");
    let (code, out) = verify_audit(&aesd, Some(root), &[&dir.path().join("audit.log.1"), &log]);
    assert_eq!(code, 0, "{out}");
    drop(client);
    aesd.stop();
}

#[test]
fn the_size_bound_rotates_and_the_chain_runs_across_the_kept_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let root = "audit-rotate-root-2b8d";
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        root,
        "--audit-log",
        log.to_str().expect("utf-8"),
        "--audit-log-max-bytes",
        "3000",
        "--audit-log-keep",
        "2",
    ]);
    for n in 0..12 {
        admin(&aesd, root, "POST", &format!("/v1/transit/keys/r{n}"), "{}");
    }
    let kept = [
        dir.path().join("audit.log.2"),
        dir.path().join("audit.log.1"),
        log.clone(),
    ];
    for file in &kept {
        let bytes = std::fs::metadata(file).expect("kept").len();
        assert!(bytes <= 3000, "{}: {bytes} bytes", file.display());
    }
    assert!(!dir.path().join("audit.log.3").exists(), "only two kept");
    let newest = std::fs::read_to_string(&log).expect("log");
    let first: Value = serde_json::from_str(newest.lines().next().expect("a line")).expect("JSON");
    assert_eq!(
        (&first["type"], &first["event"]),
        (&json!("audit-chain"), &json!("rotated")),
        "{newest}"
    );
    let files: Vec<&Path> = kept.iter().map(PathBuf::as_path).collect();
    let (code, out) = verify_audit(&aesd, Some(root), &files);
    assert_eq!(code, 0, "{out}");
    // Out of order: caught at the anchor of the file that does not follow.
    let (code, out) = verify_audit(&aesd, Some(root), &[files[1], files[0], files[2]]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.log.2 line 1: anchor"), "{out}");
    aesd.stop();
}
