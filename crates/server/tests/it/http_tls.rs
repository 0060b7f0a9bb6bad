//! The HTTP API over TLS: with the job port's certificate (`--tls-cert`,
//! `--tls-key`), `--http-listen` serves HTTPS, and the real `bao` CLI
//! administers aesd through it with `BAO_CACERT`; without the CA it
//! refuses the certificate, and plain HTTP to the port gets no answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aesd_testkit::TempDir;

use crate::bao_support::{Aesd, bao_binary, text};

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

/// `bao args` against `addr` with the root token and, if given, the CA.
fn bao_at(addr: &str, ca: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(bao_binary());
    command
        .args(args)
        .env("BAO_ADDR", addr)
        .env("BAO_TOKEN", "root")
        .env_remove("BAO_CACERT")
        .env_remove("VAULT_CACERT")
        .env_remove("VAULT_ADDR")
        .env_remove("VAULT_TOKEN")
        .env("HOME", std::env::temp_dir());
    if let Some(ca) = ca {
        command.env("BAO_CACERT", ca);
    }
    command.output().expect("run bao")
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
