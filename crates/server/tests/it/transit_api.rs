//! Transit's data endpoints (`transit/encrypt`, `decrypt`, `rewrap`,
//! `datakey`, `random`, `sys/tools/random`) checked request by request
//! against a real OpenBao 2.7.2 (`bao server -dev`, one per run), then
//! driven by real clients: the `bao` CLI and hvac (both from
//! scripts/bao/.venv; `bash scripts/bao-cli.sh --install-only`; missing
//! ones fail the test).

use crate::bao_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use bao_support::*;
use serde_json::{Value, json};

/// One server under test, with the tokens and ciphertexts its setup made
/// (`$NAME` in a request is replaced by `vars["NAME"]`).
struct Target {
    http: String,
    vars: BTreeMap<&'static str, String>,
}

impl Target {
    fn send(&self, method: &str, path: &str, token: &str, body: &str) -> Option<(u16, Value)> {
        let fill = |text: &str| {
            self.vars
                .iter()
                .rev()
                .fold(text.to_owned(), |t, (k, v)| t.replace(&format!("${k}"), v))
        };
        let token = (!token.is_empty()).then(|| fill(token));
        let sent = request(method, &fill(path), token.as_deref(), &fill(body));
        let (code, body) = try_raw_at(&self.http, &sent)?;
        Some((code, serde_json::from_str(&body).unwrap_or(Value::Null)))
    }

    fn must(&self, method: &str, path: &str, body: &str) -> Value {
        let (code, answer) = self.send(method, path, "root", body).expect("an answer");
        assert!(
            (200..300).contains(&code),
            "{method} {path}: {code} {answer}"
        );
        answer
    }

    fn encrypt(&self, key: &str, body: &str) -> String {
        let answer = self.must("POST", &format!("/v1/transit/encrypt/{key}"), body);
        answer["data"]["ciphertext"]
            .as_str()
            .expect("ciphertext")
            .to_owned()
    }

    fn token(&self, policy: &str) -> String {
        let made = self.must(
            "POST",
            "/v1/auth/token/create",
            &json!({ "policies": [policy] }).to_string(),
        );
        made["auth"]["client_token"]
            .as_str()
            .expect("client_token")
            .to_owned()
    }

    /// The same keys, policies, tokens and ciphertexts on either server.
    fn set_up(&mut self) {
        self.must("POST", "/v1/transit/keys/t1", "{}");
        self.must(
            "POST",
            "/v1/transit/keys/t2",
            r#"{"type":"chacha20-poly1305"}"#,
        );
        self.must("POST", "/v1/transit/keys/t3", "{}");
        let ct1 = self.encrypt("t1", r#"{"plaintext":"aGVsbG8="}"#);
        let ct1ad = self.encrypt("t1", r#"{"plaintext":"aGVsbG8=","associated_data":"YWJj"}"#);
        let ct2 = self.encrypt("t2", r#"{"plaintext":"aGVsbG8="}"#);
        let ct3 = self.encrypt("t3", r#"{"plaintext":"aGVsbG8="}"#);
        self.must("POST", "/v1/transit/keys/t3/rotate", "");
        self.must(
            "POST",
            "/v1/transit/keys/t3/config",
            r#"{"min_decryption_version":2}"#,
        );
        let policy = |rules: &str| json!({ "policy": rules }).to_string();
        self.must(
            "PUT",
            "/v1/sys/policies/acl/use",
            &policy(
                r#"path "transit/encrypt/*" { capabilities = ["update"] }
path "transit/decrypt/*" { capabilities = ["update"] }"#,
            ),
        );
        self.must(
            "PUT",
            "/v1/sys/policies/acl/make",
            &policy(r#"path "transit/encrypt/*" { capabilities = ["create", "update"] }"#),
        );
        self.must(
            "PUT",
            "/v1/sys/policies/acl/look",
            &policy(r#"path "transit/*" { capabilities = ["read", "list"] }"#),
        );
        let (user, maker, looker) = (self.token("use"), self.token("make"), self.token("look"));
        self.vars.extend([
            ("CT1AD", ct1ad),
            ("CT1", ct1),
            ("CT2", ct2),
            ("CT3", ct3),
            ("USER", user),
            ("MAKER", maker),
            ("LOOKER", looker),
        ]);
    }
}

/// A request of the matrix: method, path, token (`""`: none), body.
type Case = (&'static str, &'static str, &'static str, &'static str);

const E1: &str = "/v1/transit/encrypt/t1";
const D1: &str = "/v1/transit/decrypt/t1";
const W1: &str = "/v1/transit/rewrap/t1";
const P: &str = r#"{"plaintext":"aGVsbG8="}"#;

/// Requests both servers answer alike: status and the fields of `data`
/// and `errors` (aesd shows no field OpenBao lacks, and lacks none).
const SAME: &[Case] = &[
    ("POST", E1, "root", P),
    ("PUT", E1, "root", r#"{"plaintext":""}"#),
    ("POST", E1, "root", "{}"),
    ("POST", E1, "root", r#"{"plaintext":"!!"}"#),
    ("POST", E1, "root", r#"{"plaintext":"aGVsbG8"}"#),
    (
        "POST",
        E1,
        "root",
        r#"{"plaintext":"aGVsbG8=","key_version":5}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"plaintext":"aGVsbG8=","key_version":1}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"plaintext":"aGVsbG8=","associated_data":"YWJj"}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"plaintext":"aGVsbG8=","context":"YWJj"}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"plaintext":"aGVsbG8=","nonce":"YWJj","bogus":1}"#,
    ),
    (
        "POST",
        "/v1/transit/encrypt/t2",
        "root",
        r#"{"plaintext":"aGVsbG8=","associated_data":"YWJj"}"#,
    ),
    ("POST", "/v1/transit/encrypt/n1", "root", P),
    (
        "POST",
        "/v1/transit/encrypt/n2",
        "root",
        r#"{"plaintext":"aGVsbG8=","type":"chacha20-poly1305"}"#,
    ),
    ("GET", "/v1/transit/keys/n2", "root", ""),
    (
        "POST",
        "/v1/transit/encrypt/n3",
        "root",
        r#"{"plaintext":"aGVsbG8=","type":"bogus"}"#,
    ),
    (
        "POST",
        "/v1/transit/encrypt/n4",
        "root",
        r#"{"plaintext":"","convergent_encryption":true}"#,
    ),
    ("GET", E1, "root", ""),
    ("POST", "/v1/transit/encrypt/a/b", "root", P),
    ("POST", D1, "root", r#"{"ciphertext":"$CT1"}"#),
    ("POST", D1, "root", "{}"),
    (
        "POST",
        "/v1/transit/decrypt/none",
        "root",
        r#"{"ciphertext":"$CT1"}"#,
    ),
    ("POST", D1, "root", r#"{"ciphertext":"vault:v1:!!"}"#),
    ("POST", D1, "root", r#"{"ciphertext":"AAAA"}"#),
    ("POST", D1, "root", r#"{"ciphertext":"vault:x1:AAAA"}"#),
    ("POST", D1, "root", r#"{"ciphertext":"vault:v:AAAA"}"#),
    (
        "POST",
        D1,
        "root",
        r#"{"ciphertext":"vault:v9:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#,
    ),
    ("POST", D1, "root", r#"{"ciphertext":"vault:v1:AAAA"}"#),
    (
        "POST",
        D1,
        "root",
        r#"{"ciphertext":"vault:v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#,
    ),
    ("POST", D1, "root", r#"{"ciphertext":"$CT2"}"#),
    ("POST", D1, "root", r#"{"ciphertext":"$CT1AD"}"#),
    (
        "POST",
        D1,
        "root",
        r#"{"ciphertext":"$CT1AD","associated_data":"YWJj"}"#,
    ),
    (
        "POST",
        "/v1/transit/decrypt/t3",
        "root",
        r#"{"ciphertext":"$CT3"}"#,
    ),
    (
        "POST",
        "/v1/transit/decrypt/t2",
        "root",
        r#"{"ciphertext":"$CT2","bogus":1}"#,
    ),
    ("GET", D1, "root", ""),
    ("POST", W1, "root", r#"{"ciphertext":"$CT1"}"#),
    (
        "POST",
        W1,
        "root",
        r#"{"ciphertext":"$CT1","key_version":9}"#,
    ),
    ("POST", W1, "root", "{}"),
    (
        "POST",
        "/v1/transit/rewrap/t3",
        "root",
        r#"{"ciphertext":"$CT3"}"#,
    ),
    (
        "POST",
        "/v1/transit/rewrap/none",
        "root",
        r#"{"ciphertext":"$CT1"}"#,
    ),
    ("POST", "/v1/transit/datakey/plaintext/t1", "root", "{}"),
    (
        "POST",
        "/v1/transit/datakey/wrapped/t1",
        "root",
        r#"{"bits":128}"#,
    ),
    (
        "POST",
        "/v1/transit/datakey/wrapped/t2",
        "root",
        r#"{"bits":512,"associated_data":"YWJj"}"#,
    ),
    (
        "POST",
        "/v1/transit/datakey/wrapped/t1",
        "root",
        r#"{"bits":100}"#,
    ),
    (
        "POST",
        "/v1/transit/datakey/plaintext/t1",
        "root",
        r#"{"key_version":9}"#,
    ),
    ("POST", "/v1/transit/datakey/other/t1", "root", "{}"),
    ("POST", "/v1/transit/datakey/plaintext/none", "root", "{}"),
    ("POST", "/v1/transit/random", "root", "{}"),
    (
        "POST",
        "/v1/transit/random/8",
        "root",
        r#"{"format":"hex"}"#,
    ),
    ("POST", "/v1/transit/random/platform/8", "root", ""),
    ("POST", "/v1/transit/random/seal/8", "root", ""),
    ("POST", "/v1/transit/random/0", "root", ""),
    ("POST", "/v1/transit/random/200000", "root", ""),
    ("POST", "/v1/transit/random/bogus/8", "root", ""),
    (
        "POST",
        "/v1/transit/random/8",
        "root",
        r#"{"format":"bogus"}"#,
    ),
    ("GET", "/v1/transit/random/8", "root", ""),
    ("POST", "/v1/sys/tools/random/8", "root", ""),
    // Batches: every item answered with its reference; encrypt and
    // decrypt answer 400 when an item failed (or the partial code when
    // some did not), rewrap 200.
    (
        "POST",
        E1,
        "root",
        r#"{"batch_input":[{"plaintext":"aGVsbG8=","reference":"a"},{"plaintext":"aGVsbG8="}]}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"batch_input":[{"plaintext":"aGVsbG8=","reference":"a"},{"plaintext":"!!","reference":"b"}]}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"batch_input":[{"plaintext":"!!"},{"plaintext":"aGVsbG8=","key_version":7}]}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"batch_input":[{"plaintext":"!!"},{"plaintext":""}],"partial_failure_response_code":207}"#,
    ),
    (
        "POST",
        E1,
        "root",
        r#"{"batch_input":[{"plaintext":"!!"}],"partial_failure_response_code":207}"#,
    ),
    ("POST", E1, "root", r#"{"batch_input":[]}"#),
    (
        "POST",
        D1,
        "root",
        r#"{"batch_input":[{"ciphertext":"$CT1","reference":"x"},{"ciphertext":"vault:v1:AAAA"}]}"#,
    ),
    (
        "POST",
        D1,
        "root",
        r#"{"batch_input":[{"ciphertext":"$CT1"},{"ciphertext":"$CT2"}],"partial_failure_response_code":207}"#,
    ),
    (
        "POST",
        D1,
        "root",
        r#"{"batch_input":[{"ciphertext":"$CT1AD","associated_data":"YWJj"}]}"#,
    ),
    (
        "POST",
        "/v1/transit/decrypt/none",
        "root",
        r#"{"batch_input":[{"ciphertext":"$CT1"}]}"#,
    ),
    (
        "POST",
        W1,
        "root",
        r#"{"batch_input":[{"ciphertext":"$CT1","reference":"x"},{"ciphertext":"vault:v1:AAAA"}]}"#,
    ),
    (
        "POST",
        W1,
        "root",
        r#"{"batch_input":[{"ciphertext":"vault:v1:AAAA"}]}"#,
    ),
    // Tokens and policies.
    ("POST", E1, "", P),
    ("POST", E1, "not-a-token", P),
    ("POST", E1, "$USER", P),
    ("POST", "/v1/transit/encrypt/u1", "$USER", P),
    ("POST", "/v1/transit/encrypt/m1", "$MAKER", P),
    ("POST", E1, "$MAKER", P),
    ("POST", D1, "$USER", r#"{"ciphertext":"$CT1"}"#),
    ("POST", D1, "$MAKER", r#"{"ciphertext":"$CT1"}"#),
    (
        "POST",
        "/v1/transit/decrypt/none",
        "$USER",
        r#"{"ciphertext":"$CT1"}"#,
    ),
    (
        "POST",
        "/v1/transit/decrypt/none",
        "$MAKER",
        r#"{"ciphertext":"$CT1"}"#,
    ),
    ("POST", W1, "$USER", r#"{"ciphertext":"$CT1"}"#),
    ("POST", "/v1/transit/datakey/plaintext/t1", "$USER", ""),
    ("POST", "/v1/transit/random/8", "$USER", ""),
    ("POST", E1, "$LOOKER", P),
    ("POST", D1, "$LOOKER", "{}"),
    ("GET", "/v1/transit/keys/m1", "root", ""),
    ("PUT", "/v1/sys/seal", "root", ""),
    ("POST", E1, "root", P),
    ("POST", D1, "root", r#"{"ciphertext":"$CT1"}"#),
    ("POST", "/v1/transit/encrypt/n9", "", P),
    ("POST", "/v1/transit/datakey/plaintext/t1", "root", ""),
    ("POST", "/v1/transit/random/8", "root", ""),
    ("POST", "/v1/sys/tools/random/8", "root", ""),
];

/// Where aesd answers otherwise, on purpose (docs/aesd.md, "Transit data
/// endpoints"): the request, OpenBao's status, aesd's.
const DIFFERENT: &[(Case, Option<u16>, u16)] = &[
    // A malformed batch item: OpenBao 500, aesd 400 (bad input).
    (
        ("POST", E1, "root", r#"{"batch_input":[{"reference":"a"}]}"#),
        Some(500),
        400,
    ),
    (
        ("POST", D1, "root", r#"{"batch_input":[{}]}"#),
        Some(500),
        400,
    ),
    (
        ("POST", E1, "root", r#"{"batch_input":[5]}"#),
        Some(500),
        400,
    ),
    (
        ("POST", E1, "root", r#"{"batch_input":"x"}"#),
        Some(500),
        400,
    ),
    // Associated data that is not base64: OpenBao 500, aesd 400.
    (
        (
            "POST",
            E1,
            "root",
            r#"{"plaintext":"","associated_data":"!!"}"#,
        ),
        Some(500),
        400,
    ),
    // Convergent encryption (a derived key): aesd has none.
    (
        (
            "POST",
            "/v1/transit/encrypt/c1",
            "root",
            r#"{"plaintext":"","convergent_encryption":true,"context":"YWJj"}"#,
        ),
        Some(200),
        400,
    ),
    // A partial-failure code that is no HTTP status: OpenBao drops the
    // connection, aesd answers 400.
    (
        (
            "POST",
            E1,
            "root",
            r#"{"batch_input":[{"plaintext":"!!"},{"plaintext":""}],"partial_failure_response_code":99}"#,
        ),
        None,
        400,
    ),
];

/// Fields only OpenBao's answers have (aesd keys are never derived:
/// none here so far).
const ONLY_OPENBAO: &[&str] = &[];

fn fields(answer: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    shape(answer, "", &mut out);
    out
}

#[test]
fn transit_data_endpoints_answer_as_a_real_openbao_and_real_clients_use_them() {
    let home = tempfile::tempdir().expect("temp dir");
    let openbao = OpenBao::start(home.path());
    let aesd = Aesd::start_with(&["--dev", "--dev-root-token-id", "root"]);
    let mut bao_target = Target {
        http: openbao.http.clone(),
        vars: BTreeMap::new(),
    };
    let mut aesd_target = Target {
        http: aesd.http.clone(),
        vars: BTreeMap::new(),
    };
    bao_target.set_up();
    aesd_target.set_up();
    // Deliberate differences first (the matrix ends sealed).
    for ((method, path, token, body), bao_code, aesd_code) in DIFFERENT {
        let from_bao = bao_target.send(method, path, token, body);
        let from_aesd = aesd_target.send(method, path, token, body);
        assert_eq!(
            from_bao.as_ref().map(|(code, _)| *code),
            *bao_code,
            "{method} {path} {body}: OpenBao answered {from_bao:?} (docs/aesd.md lists another difference)"
        );
        let (code, answer) = from_aesd.expect("aesd answers");
        assert_eq!(code, *aesd_code, "{method} {path} {body}: aesd {answer}");
        assert_eq!(
            answer["errors"].as_array().map(Vec::len),
            Some(1),
            "aesd's refusal names its reason: {answer}"
        );
    }
    let mut differences = Vec::new();
    for (method, path, token, body) in SAME {
        let (bao_code, bao_answer) = bao_target
            .send(method, path, token, body)
            .expect("OpenBao answers");
        let (aesd_code, aesd_answer) = aesd_target
            .send(method, path, token, body)
            .expect("aesd answers");
        let (bao_fields, aesd_fields) = (fields(&bao_answer), fields(&aesd_answer));
        let invented: Vec<&String> = aesd_fields
            .difference(&bao_fields)
            .filter(|f| !f.starts_with("data.keys."))
            .collect();
        let missing: Vec<&String> = bao_fields
            .difference(&aesd_fields)
            .filter(|f| !ONLY_OPENBAO.contains(&f.as_str()) && !f.starts_with("data.keys."))
            .collect();
        let same_results = batch_errors(&bao_answer) == batch_errors(&aesd_answer);
        if bao_code != aesd_code || !invented.is_empty() || !missing.is_empty() || !same_results {
            differences.push(format!(
                "{method} {path} {body}: OpenBao {bao_code} {bao_answer} | aesd {aesd_code} {aesd_answer} | invented {invented:?} missing {missing:?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} requests answered otherwise:\n{}",
        differences.len(),
        SAME.len(),
        differences.join("\n")
    );
    drop(openbao);

    let aesd = Aesd::start_with(&["--dev", "--dev-root-token-id", "root"]);
    bao_cli_encrypts_decrypts_rewraps_and_makes_data_keys(&aesd);
    hvac_uses_the_data_endpoints(&aesd);
}

/// Which batch items failed, in order (`None`: no batch).
fn batch_errors(answer: &Value) -> Option<Vec<bool>> {
    answer["data"]["batch_results"].as_array().map(|items| {
        items
            .iter()
            .map(|item| item.get("error").is_some())
            .collect()
    })
}

fn b64(bytes: &[u8]) -> String {
    let out = Command::new("base64")
        .arg("-w0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(bytes)?;
            child.wait_with_output()
        })
        .expect("base64");
    text(&out.stdout)
}

/// `bao write` of transit paths against aesd: encrypt, decrypt, rewrap
/// after a rotation, datakey, a batch from stdin.
fn bao_cli_encrypts_decrypts_rewraps_and_makes_data_keys(aesd: &Aesd) {
    let root = Some("root");
    let plain = b64(b"attack at dawn");
    let made = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "transit/encrypt/cli",
            &format!("plaintext={plain}"),
        ],
    );
    let ct = made["data"]["ciphertext"].as_str().expect("ciphertext");
    assert!(ct.starts_with("vault:v1:"), "{made}");
    let opened = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "transit/decrypt/cli",
            &format!("ciphertext={ct}"),
        ],
    );
    assert_eq!(opened["data"]["plaintext"], plain, "{opened}");
    ok(aesd, root, &["write", "-f", "transit/keys/cli/rotate"]);
    let rewrapped = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "transit/rewrap/cli",
            &format!("ciphertext={ct}"),
        ],
    );
    let ct2 = rewrapped["data"]["ciphertext"]
        .as_str()
        .expect("ciphertext");
    assert!(ct2.starts_with("vault:v2:"), "{rewrapped}");
    let opened = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "transit/decrypt/cli",
            &format!("ciphertext={ct2}"),
        ],
    );
    assert_eq!(opened["data"]["plaintext"], plain, "{opened}");
    refused(
        aesd,
        root,
        &["write", "transit/decrypt/cli", "ciphertext=vault:v1:AAAA"],
        400,
        "invalid ciphertext length",
    );
    refused(
        aesd,
        root,
        &[
            "write",
            "transit/decrypt/nokey",
            &format!("ciphertext={ct}"),
        ],
        400,
        "encryption key not found",
    );
    let key = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "-f",
            "transit/datakey/plaintext/cli",
        ],
    );
    let wrapped = key["data"]["ciphertext"].as_str().expect("ciphertext");
    let unwrapped = ok(
        aesd,
        root,
        &[
            "write",
            "-format=json",
            "transit/decrypt/cli",
            &format!("ciphertext={wrapped}"),
        ],
    );
    assert_eq!(unwrapped["data"]["plaintext"], key["data"]["plaintext"]);

    // A batch as JSON on stdin.
    let batch = json!({ "batch_input": [
        { "plaintext": plain, "reference": "one" },
        { "plaintext": "!!", "reference": "two" },
        { "plaintext": b64(b""), "reference": "three" },
    ]});
    let mut child = Command::new(bao_binary())
        .args(["write", "-format=json", "transit/encrypt/cli", "-"])
        .env("BAO_ADDR", &aesd.http)
        .env("BAO_TOKEN", "root")
        .env("HOME", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bao");
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(batch.to_string().as_bytes())
            .expect("batch to bao");
    }
    let out = child.wait_with_output().expect("bao");
    // One item failed: 400 (the results are in `data`, which the CLI
    // does not print for an error status; with OpenBao too).
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        !out.status.success() && said.contains("Code: 400"),
        "{said}"
    );
    let good = json!({ "batch_input": [
        { "plaintext": plain, "reference": "one" },
        { "plaintext": b64(b""), "reference": "three" },
    ]});
    let mut child = Command::new(bao_binary())
        .args(["write", "-format=json", "transit/encrypt/cli", "-"])
        .env("BAO_ADDR", &aesd.http)
        .env("BAO_TOKEN", "root")
        .env("HOME", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bao");
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(good.to_string().as_bytes())
            .expect("batch to bao");
    }
    let out = child.wait_with_output().expect("bao");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    let results = answer["data"]["batch_results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{answer}");
    assert_eq!(results[0]["reference"], "one");
    assert_eq!(results[1]["reference"], "three");
    assert!(results.iter().all(|r| r["key_version"] == 2), "{answer}");
}

/// The interpreter of the venv that holds `bao` (and hvac).
fn venv_python() -> std::path::PathBuf {
    let python = bao_binary().with_file_name("python");
    assert!(
        python.is_file(),
        "no python beside {} (bash scripts/bao-cli.sh --install-only)",
        bao_binary().display()
    );
    python
}

/// hvac (Python) against aesd: encrypt, decrypt, rewrap, batches, a data
/// key that encrypts a file locally (openssl) and is recovered from its
/// wrapped form to decrypt it, random bytes; errors as hvac's exceptions.
fn hvac_uses_the_data_endpoints(aesd: &Aesd) {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/transit_hvac.py");
    let out = Command::new(venv_python())
        .arg(&script)
        .arg(&aesd.http)
        .arg(dir.path())
        .env("HOME", dir.path())
        .output()
        .expect("run python");
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "hvac script failed:\n{said}");
    assert!(said.contains("hvac: all checks passed"), "{said}");
}

/// The HTTP port's limits: too many JSON values or batch items (413), a
/// body that stops arriving (408, closed), and the per-client connection
/// cap (the third connection of one client closed unanswered; a place
/// freed is taken again).
#[test]
fn http_limits_refuse_floods_and_slow_bodies() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--http-max-request-size",
        "1048576",
        "--http-body-timeout",
        "1",
        "--max-connections-per-client",
        "2",
    ]);
    let post = |path: &str, body: &str| raw(&aesd, &request("POST", path, Some("root"), body));
    let (code, body) = post("/v1/transit/encrypt/k", r#"{"plaintext":""}"#);
    assert_eq!(code, 200, "{body}");
    let many_values = format!(r#"{{"plaintext":"","x":[{}0]}}"#, "0,".repeat(70_000));
    let (code, body) = post("/v1/transit/encrypt/k", &many_values);
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("JSON values"), "{body}");
    let items = vec![r#"{"plaintext":""}"#; 10_001].join(",");
    let (code, body) = post(
        "/v1/transit/encrypt/k",
        &format!(r#"{{"batch_input":[{items}]}}"#),
    );
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("10001 items"), "{body}");
    let items = vec![r#"{"plaintext":""}"#; 10_000].join(",");
    let (code, body) = post(
        "/v1/transit/encrypt/k",
        &format!(r#"{{"batch_input":[{items}]}}"#),
    );
    assert_eq!(
        code,
        200,
        "10 000 items are allowed: {}",
        &body[..200.min(body.len())]
    );

    let addr = aesd.http.trim_start_matches("http://").to_owned();
    // A body that stops: 408 after --http-body-timeout, then closed.
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    slow.write_all(
        b"POST /v1/transit/encrypt/k HTTP/1.1\r\nHost: a\r\nX-Vault-Token: root\r\nContent-Length: 100\r\n\r\n{\"plain",
    )
    .expect("send");
    let started = Instant::now();
    let mut answer = String::new();
    slow.read_to_string(&mut answer)
        .expect("the connection is closed, not left hanging");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("http-body-timeout"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered after {:?}",
        started.elapsed()
    );

    // Two connections held open by this client; a third is closed
    // without an answer, and once one of the two goes, a new one is
    // served. The server frees the places of the connections above when
    // their tasks end, which can come a little after their answers: a
    // kept connection refused meanwhile is tried again.
    drop(slow);
    let keep = || {
        for _ in 0..50 {
            let mut stream = TcpStream::connect(&addr).expect("connect");
            stream
                .write_all(b"GET /v1/sys/health HTTP/1.1\r\nHost: a\r\n\r\n")
                .expect("send");
            let mut buf = [0u8; 12];
            if stream.read_exact(&mut buf).is_ok() {
                assert_eq!(&buf, b"HTTP/1.1 200", "kept-alive request answered");
                return stream;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no place for a connection within 5 s");
    };
    let first = keep();
    let second = keep();
    let mut third = TcpStream::connect(&addr).expect("connect");
    third
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let _ = third.write_all(b"GET /v1/sys/health HTTP/1.1\r\nHost: a\r\n\r\n");
    let mut got = Vec::new();
    let _ = third.read_to_end(&mut got);
    assert!(
        got.is_empty(),
        "the third connection was answered: {}",
        String::from_utf8_lossy(&got)
    );
    drop(first);
    let (code, _) = (0..50)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            try_raw_at(&aesd.http, &request("GET", "/v1/sys/health", None, ""))
        })
        .find_map(|answer| answer)
        .expect("a freed place is taken again");
    assert_eq!(code, 200);
    drop(second);
}

/// `/metrics` counts the HTTP API's requests by endpoint and status,
/// their time and their body bytes each way.
#[test]
fn api_requests_are_counted_in_the_metrics() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--metrics-listen",
        &metrics_addr,
    ]);
    let body = r#"{"plaintext":"aGVsbG8="}"#;
    for _ in 0..3 {
        let (code, answer) = raw(
            &aesd,
            &request("POST", "/v1/transit/encrypt/m", Some("root"), body),
        );
        assert_eq!(code, 200, "{answer}");
    }
    let (code, _) = raw(
        &aesd,
        &request("POST", "/v1/transit/decrypt/m", Some("root"), "{}"),
    );
    assert_eq!(code, 400);
    let text = aesd_testkit::metrics_text(metrics_addr.parse().expect("addr"));
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    };
    assert_eq!(
        value(r#"aesd_api_requests_total{endpoint="transit/encrypt",status="200"}"#),
        3.0
    );
    assert_eq!(
        value(r#"aesd_api_requests_total{endpoint="transit/decrypt",status="400"}"#),
        1.0
    );
    assert_eq!(
        value(r#"aesd_api_request_duration_seconds_count{endpoint="transit/encrypt"}"#),
        3.0
    );
    assert_eq!(
        value(r#"aesd_api_bytes_total{endpoint="transit/encrypt",direction="in"}"#),
        3.0 * body.len() as f64
    );
    assert!(
        value(r#"aesd_api_bytes_total{endpoint="transit/encrypt",direction="out"}"#) > 3.0 * 100.0,
        "answers of about 200 bytes each"
    );
    assert_eq!(
        value(r#"aesd_api_request_duration_seconds_count{endpoint="transit/rewrap"}"#),
        0.0,
        "series of endpoints not used yet exist at 0"
    );
}

/// The API is served on its own thread (`aesd-http`, apart from the job
/// port's runtime), and SIGTERM still ends aesd: the thread is told to
/// stop and joined, so a stop that did not reach it would hang the exit.
#[test]
fn the_api_has_its_own_thread_and_stops_at_sigterm() {
    let mut aesd = Aesd::start_with(&["--dev", "--dev-root-token-id", "root"]);
    let body = r#"{"plaintext":"aGVsbG8="}"#;
    let (code, answer) = raw(
        &aesd,
        &request("POST", "/v1/transit/encrypt/k", Some("root"), body),
    );
    assert_eq!(code, 200, "{answer}");
    let pid = aesd.child.id();
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("aesd's threads")
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect();
    assert!(
        names.iter().any(|name| name == "aesd-http"),
        "no thread named aesd-http among {names:?}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = aesd.child.try_wait().expect("wait for aesd") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "aesd still runs 30 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "aesd exited with {status}");
    assert!(
        try_raw_at(&aesd.http, &request("GET", "/v1/sys/health", None, "")).is_none(),
        "the API still answers after aesd exited"
    );
}
