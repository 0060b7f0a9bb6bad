//! The HTTP API over TLS: with the job port's certificate (`--tls-cert`,
//! `--tls-key`), `--http-listen` serves HTTPS, and the real `bao` CLI
//! administers aesd through it with `BAO_CACERT`; without the CA it
//! refuses the certificate, and plain HTTP to the port gets no answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aesd_testkit::TempDir;

use crate::bao_support::{Aesd, bao_binary, raw, request, text};

/// `aesd --tls-self-signed DIR`: the certificate and key it wrote.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let output = Command::new(env!("CARGO_BIN_EXE_aesd"))
        .arg("--tls-self-signed")
        .arg(dir)
        .output()
        .expect("run aesd");
    assert!(output.status.success(), "{}", text(&output.stderr));
    (dir.join("aesd-cert.pem"), dir.join("aesd-key.pem"))
}

/// `command` as a client of the API at `addr`: the root token and, if
/// given, `ca` as `BAO_CACERT`; nothing from the environment's own
/// `BAO_*`/`VAULT_*` settings.
fn as_client_of<'c>(command: &'c mut Command, addr: &str, ca: Option<&Path>) -> &'c mut Command {
    command
        .env("BAO_ADDR", addr)
        .env("BAO_TOKEN", "root")
        .env_remove("BAO_CACERT")
        .env_remove("VAULT_CACERT")
        .env_remove("VAULT_ADDR")
        .env_remove("VAULT_TOKEN");
    if let Some(ca) = ca {
        command.env("BAO_CACERT", ca);
    }
    command
}

/// `bao args` against `addr` with the root token and, if given, the CA.
fn bao_at(addr: &str, ca: Option<&Path>, args: &[&str]) -> Output {
    as_client_of(Command::new(bao_binary()).args(args), addr, ca)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run bao")
}

#[test]
fn the_api_serves_https_with_the_job_ports_certificate() {
    let dir = TempDir::new("http-tls");
    let (cert, key) = self_signed(&dir.join("tls"));
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--tls-cert",
        cert.to_str().expect("utf-8"),
        "--tls-key",
        key.to_str().expect("utf-8"),
    ]);
    assert!(aesd.http.starts_with("https://"), "{}", aesd.http);

    // The bao CLI, trusting the certificate: a key made and read back.
    let made = bao_at(
        &aesd.http,
        Some(&cert),
        &["write", "-f", "transit/keys/tls-key"],
    );
    assert!(made.status.success(), "{}", text(&made.stderr));
    let read = bao_at(
        &aesd.http,
        Some(&cert),
        &["read", "-format=json", "transit/keys/tls-key"],
    );
    assert!(read.status.success(), "{}", text(&read.stderr));
    let value: serde_json::Value = serde_json::from_slice(&read.stdout).expect("json");
    assert_eq!(value["data"]["type"], "aes256-gcm96", "{value}");

    // Without the CA: the certificate is refused, nothing is created.
    let untrusted = bao_at(&aesd.http, None, &["write", "-f", "transit/keys/other"]);
    assert!(!untrusted.status.success(), "{}", text(&untrusted.stdout));
    let said = text(&untrusted.stderr);
    assert!(
        said.contains("certificate") && said.contains("x509"),
        "refused for the certificate: {said}"
    );

    // Plain HTTP to the TLS port: no HTTP answer.
    let plain = aesd.http.replacen("https://", "http://", 1);
    let refused = bao_at(&plain, None, &["read", "transit/keys/tls-key"]);
    assert!(!refused.status.success(), "{}", text(&refused.stdout));
    let listed = bao_at(
        &aesd.http,
        Some(&cert),
        &["list", "-format=json", "transit/keys"],
    );
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let keys: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(
        keys,
        serde_json::json!(["tls-key"]),
        "only the trusted write made a key"
    );
}

/// `aesd verify-audit FILE` against `addr` (root token) with `ca` as
/// `BAO_CACERT`: exit code and what it printed.
fn verify_audit_at(addr: &str, ca: Option<&Path>, log: &Path) -> (Option<i32>, String) {
    let out = as_client_of(
        Command::new(env!("CARGO_BIN_EXE_aesd"))
            .arg("verify-audit")
            .arg(log),
        addr,
        ca,
    )
    .output()
    .expect("run aesd verify-audit");
    (
        out.status.code(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// aesd's own clients of an HTTPS API: `aesd verify-audit` (with
/// `BAO_CACERT`) and the transit seal (`--seal-transit-ca-cert`) reach an
/// aesd that serves HTTPS and check its certificate. Without the CA the
/// address is refused before any connection, and against another
/// certificate the handshake fails and says so.
#[test]
fn verify_audit_and_the_transit_seal_reach_an_https_aesd() {
    let dir = TempDir::new("http-tls-clients");
    let (cert, key) = self_signed(&dir.join("tls"));
    let (other, _) = self_signed(&dir.join("other"));
    let log = dir.join("audit.log");
    let a = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--tls-cert",
        cert.to_str().expect("utf-8"),
        "--tls-key",
        key.to_str().expect("utf-8"),
        "--audit-log",
        log.to_str().expect("utf-8"),
    ]);
    let made = bao_at(
        &a.http,
        Some(&cert),
        &["write", "-f", "transit/keys/autounseal"],
    );
    assert!(made.status.success(), "{}", text(&made.stderr));

    let (code, said) = verify_audit_at(&a.http, Some(&cert), &log);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = verify_audit_at(&a.http, None, &log);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("BAO_CACERT"), "{said}");
    let (code, said) = verify_audit_at(&a.http, Some(&other), &log);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("TLS") && said.contains("certificate"),
        "the handshake's reason: {said}"
    );

    // B unseals itself through A's HTTPS API; C, given another
    // certificate as the CA, cannot initialise and says why.
    let token = dir.secret_file("seal-token", "root");
    let start_with_ca = |name: &str, ca: &Path| {
        Aesd::start_with(&[
            "--keyring",
            dir.join(name).to_str().expect("utf-8"),
            "--seal-transit-address",
            &a.http,
            "--seal-transit-ca-cert",
            ca.to_str().expect("utf-8"),
            "--seal-transit-key-name",
            "autounseal",
            "--seal-transit-token-file",
            token.to_str().expect("utf-8"),
        ])
    };
    let init = r#"{"recovery_shares":1,"recovery_threshold":1}"#;
    let b = start_with_ca("b", &cert);
    let (status, body) = raw(&b, &request("PUT", "/v1/sys/init", None, init));
    assert_eq!(status, 200, "{body}");
    let (_, body) = raw(&b, &request("GET", "/v1/sys/seal-status", None, ""));
    let seal: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(seal["sealed"], false, "{seal}");
    assert_eq!(seal["type"], "transit", "{seal}");
    let c = start_with_ca("c", &other);
    let (status, body) = raw(&c, &request("PUT", "/v1/sys/init", None, init));
    assert_ne!(status, 200, "{body}");
    assert!(
        body.contains("TLS") && body.contains("certificate"),
        "C's init says why: {body}"
    );
}
