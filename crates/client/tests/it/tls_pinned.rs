//! TLS the way people make certificates: `openssl req -x509 -newkey
//! rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1`
//! (OpenSSL 3 marks it CA:TRUE) given to `--tls-ca` is accepted as the
//! pinned server certificate, as curl and Go accept it; so is its SHA-256
//! with `--tls-pin`. The name is still checked, and a wrong pin refused.

use std::path::{Path, PathBuf};

use aesd_client::cert_pin::{parse_pin, pin_of};
use aesd_client::tls::TlsSettings;
use aesd_client::{Client, ClientError, ConnectOptions, JobSpec};
use aesd_proto::Operation;
use aesd_testkit::{AesdProcess, TempDir, openssl, pattern_bytes};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The self-signed certificate and key of the command line.
fn openssl_self_signed(dir: &TempDir) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let s = |p: &Path| p.display().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &s(&key),
        "-out",
        &s(&cert),
        "-days",
        "2",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
    ]);
    (cert, key)
}

async fn encrypt_over(addr: &str, tls: TlsSettings) -> Result<(), ClientError> {
    let options = ConnectOptions {
        token: None,
        tls: Some(tls),
        bind: None,
    };
    let mut client = Client::connect_with(addr, &options).await?;
    let plain = pattern_bytes(3, 10_000);
    let mut output = Vec::new();
    client
        .run_job(
            &JobSpec::with_password(Operation::Encrypt, "pw", 1000),
            &mut &plain[..],
            &mut output,
        )
        .await?;
    assert!(output.starts_with(b"Salted__"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_ca_certificate_is_accepted_as_pinned_and_still_checked() {
    let dir = TempDir::new("tls-pinned");
    let (cert, key) = openssl_self_signed(&dir);
    let der = CertificateDer::from_pem_file(&cert).expect("certificate");
    // The premise: OpenSSL 3 made it a CA certificate.
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl x509");
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "the test needs a CA:TRUE certificate"
    );
    let server = AesdProcess::start_tls(&cert, &key);
    let addr = server.addr.to_string();

    // --tls-ca with the server's own certificate: accepted as pinned
    // (before: `invalid peer certificate: ... CaUsedAsEndEntity`).
    encrypt_over(&addr, TlsSettings::with_ca_file(&cert).expect("ca file"))
        .await
        .expect("the pinned certificate is accepted");

    // The name is still checked.
    let err = encrypt_over(
        &addr,
        TlsSettings::with_ca_file(&cert)
            .expect("ca file")
            .server_name("board.example"),
    )
    .await
    .expect_err("another name");
    assert!(err.to_string().contains("not valid for name"), "{err}");

    // --tls-pin with its SHA-256; a wrong pin is refused.
    let pin = parse_pin(&pin_of(der.as_ref())).expect("pin");
    encrypt_over(&addr, TlsSettings::with_pins(&[pin]))
        .await
        .expect("the pin is accepted");
    let mut wrong = pin;
    wrong[0] ^= 1;
    let err = encrypt_over(&addr, TlsSettings::with_pins(&[wrong]))
        .await
        .expect_err("a wrong pin");
    assert!(matches!(err, ClientError::TlsHandshake { .. }), "{err}");
    // Said in words, naming the pin the server presented (it was
    // `ApplicationVerificationFailure`).
    let said = err.to_string();
    assert!(
        said.contains("does not match the pin") && said.contains(&pin_of(der.as_ref())),
        "{said}"
    );
    assert!(!said.contains("ApplicationVerificationFailure"), "{said}");
}
