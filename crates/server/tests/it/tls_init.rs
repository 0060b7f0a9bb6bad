//! `aesd --tls-self-signed DIR`: the one-line path to TLS. The real `aesd`
//! makes a key and a certificate and prints their pin; an aesd serving
//! them runs jobs for a client with `--tls-pin` or `--tls-ca`, the names
//! are checked, and existing files are never overwritten.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use aesd_client::cert_pin::parse_pin;
use aesd_client::tls::TlsSettings;
use aesd_client::{Client, ConnectOptions};
use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use aesd_testkit::TempDir;
use common::{job_spec, start_server};

async fn one_job(addr: &str, tls: TlsSettings) -> Result<(), aesd_client::ClientError> {
    let options = ConnectOptions {
        token: None,
        tls: Some(tls),
        bind: None,
    };
    let mut client = Client::connect_with(addr, &options).await?;
    let mut output = Vec::new();
    client
        .run_job(
            &job_spec(Operation::Encrypt, "pw"),
            &mut &[5u8; 1000][..],
            &mut output,
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_identity_and_its_pin_serve_tls_jobs() {
    let dir = TempDir::new("tls-init");
    let folder = dir.join("tls");
    let output = Command::new(env!("CARGO_BIN_EXE_aesd"))
        .arg("--tls-self-signed")
        .arg(&folder)
        .output()
        .expect("run aesd");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pin = stdout
        .lines()
        .find_map(|line| line.strip_prefix("pin: "))
        .expect("a pin line");
    let (cert, key) = (folder.join("aesd-cert.pem"), folder.join("aesd-key.pem"));
    let mode = std::fs::metadata(&key).expect("key").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key is private");
    assert!(
        stdout.contains("127.0.0.1") && stdout.contains("localhost"),
        "{stdout}"
    );

    let server = start_server(ConfigLayer {
        tls_cert: Some(cert.clone()),
        tls_key: Some(key.clone()),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr().to_string();
    let pin = parse_pin(pin).expect("the printed pin parses");
    one_job(&addr, TlsSettings::with_pins(&[pin]))
        .await
        .expect("--tls-pin");
    one_job(&addr, TlsSettings::with_ca_file(&cert).expect("cert"))
        .await
        .expect("--tls-ca with the certificate");
    one_job(
        &addr,
        TlsSettings::with_pins(&[pin]).server_name("localhost"),
    )
    .await
    .expect("the name localhost");
    let err = one_job(
        &addr,
        TlsSettings::with_pins(&[pin]).server_name("elsewhere.example"),
    )
    .await
    .expect_err("a name the certificate lacks");
    assert!(err.to_string().contains("not valid for name"), "{err}");

    // A second run leaves the first key in place.
    let again = Command::new(env!("CARGO_BIN_EXE_aesd"))
        .arg("--tls-self-signed")
        .arg(&folder)
        .output()
        .expect("run aesd");
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("File exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let _ = std::fs::remove_dir_all(&folder);
}
