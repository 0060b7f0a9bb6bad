//! TLS on the job port, end to end: a CA and a server certificate made by
//! the real `openssl` at test time, an in-process aesd with `tls-cert` and
//! `tls-key`, and aescrypt and the client library connecting with
//! `--tls-ca`. Also what goes wrong: a certificate from another CA, a plain
//! client on the TLS port, a TLS client on a plain port, a half-configured
//! server; the server serves on after each.

use std::path::{Path, PathBuf};
use std::process::Command;

use aesd_client::tls::TlsSettings;
use aesd_client::{Client, ClientError, ConnectOptions, JobSpec};
use aesd_proto::{ErrorCode, Operation};
use aesd_testkit::{
    AesdProcess, TempDir, aesd_binary, openssl, openssl_decrypt_file, pattern_bytes,
};

/// A CA (`NAME-ca.pem`) and a server certificate it signed for 127.0.0.1
/// (`NAME.pem`, key `NAME.key`).
fn make_certificates(dir: &TempDir, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let path = |file: String| dir.join(&file);
    let (ca_key, ca) = (
        path(format!("{name}-ca.key")),
        path(format!("{name}-ca.pem")),
    );
    let (key, csr, cert) = (
        path(format!("{name}.key")),
        path(format!("{name}.csr")),
        path(format!("{name}.pem")),
    );
    let ext = path(format!("{name}.ext"));
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions file");
    let s = |p: &Path| p.display().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &s(&ca_key),
        "-out",
        &s(&ca),
        "-days",
        "2",
        "-subj",
        &format!("/CN={name} test CA"),
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &s(&key),
        "-out",
        &s(&csr),
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &s(&csr),
        "-CA",
        &s(&ca),
        "-CAkey",
        &s(&ca_key),
        "-CAcreateserial",
        "-out",
        &s(&cert),
        "-days",
        "2",
        "-extfile",
        &s(&ext),
    ]);
    (ca, cert, key)
}

fn tls_to(ca: &Path) -> ConnectOptions {
    ConnectOptions {
        token: None,
        tls: Some(TlsSettings::with_ca_file(ca).expect("CA file")),
        bind: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_over_tls_and_every_mismatch_gets_a_clear_error() {
    let dir = TempDir::new("tls");
    let (ca, cert, key) = make_certificates(&dir, "server");
    let (other_ca, _, _) = make_certificates(&dir, "other");
    let server = AesdProcess::start_tls(&cert, &key);
    let addr = server.addr.to_string();

    // aescrypt over TLS; openssl decrypts the result.
    let plain = pattern_bytes(7, 300_001);
    let (input, encrypted, back) = (dir.join("plain"), dir.join("enc"), dir.join("back"));
    std::fs::write(&input, &plain).expect("input");
    let password = dir.password_file("over tls");
    let output = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(["encrypt", "--server", &addr, "--tls-ca"])
        .arg(&ca)
        .arg("--password-file")
        .arg(&password)
        .arg("-i")
        .arg(&input)
        .arg("-o")
        .arg(&encrypted)
        .output()
        .expect("run aescrypt");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    openssl_decrypt_file(&password, 10_000, &encrypted, &back);
    assert!(std::fs::read(&back).expect("decrypted") == plain);

    // A certificate from another CA is refused, saying why.
    let err = Client::connect_with(&addr, &tls_to(&other_ca))
        .await
        .err()
        .expect("wrong CA");
    assert!(matches!(err, ClientError::TlsHandshake { .. }), "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");

    // A plain client on the TLS port gets tls_required, in the clear.
    let err = Client::connect(&addr).await.err().expect("plain on TLS");
    assert_eq!(err.server_code(), Some(ErrorCode::TlsRequired), "{err}");
    assert!(err.to_string().contains("--tls"), "{err}");

    // A TLS client on a plain port is told the server does not speak TLS.
    let plain_server = AesdProcess::start(&aesd_binary(), &[]);
    let err = Client::connect_with(&plain_server.addr.to_string(), &tls_to(&ca))
        .await
        .err()
        .expect("TLS on plain");
    assert!(err.to_string().contains("does not speak TLS"), "{err}");

    // The TLS server served on: a job through the library.
    let mut client = Client::connect_with(&addr, &tls_to(&ca))
        .await
        .expect("connect");
    let mut out = Vec::new();
    let report = client
        .run_job(
            &JobSpec::with_password(Operation::Encrypt, "again", 1000),
            &mut &plain[..1000],
            &mut out,
        )
        .await
        .expect("job over TLS");
    assert_eq!(report.bytes_sent, 1000);
    drop(plain_server);
    drop(server);
}

#[test]
fn a_half_configured_or_broken_tls_setting_is_refused_at_start() {
    let dir = TempDir::new("tls-config");
    let (_, cert, key) = make_certificates(&dir, "config");
    // aesd's effective settings: exit 2 and the reason for a bad pair.
    let settings = |args: &[&std::path::Path]| {
        let mut command = Command::new(aesd_binary());
        for (flag, path) in ["--tls-cert", "--tls-key"].iter().zip(args) {
            command.arg(flag).arg(path);
        }
        let output = command.arg("--print-config").output().expect("run aesd");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (status, only_cert) = settings(&[&cert]);
    assert_eq!(status, Some(2), "cert without key");
    assert!(
        only_cert.contains("--tls-cert needs --tls-key"),
        "{only_cert}"
    );
    let (status, swapped) = settings(&[&key, &cert]);
    assert_eq!(status, Some(2), "key as certificate");
    assert!(swapped.contains("no PEM certificate"), "{swapped}");
    let (status, matching) = settings(&[&cert, &key]);
    assert_eq!(status, Some(0), "a matching pair: {matching}");
}
