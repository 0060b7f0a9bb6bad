//! Settings that work but are unsafe are warned about at start by the real
//! `aesd`: a TLS key file others can read (like the token file), trusted
//! proxies covering a whole address family.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use aesd_testkit::{AesdProcess, TempDir, openssl};

/// Waits (up to 5 s) for a log line containing every one of `parts`.
fn logged(aesd: &AesdProcess, parts: &[&str]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if aesd
            .log()
            .iter()
            .any(|line| parts.iter().all(|part| line.contains(part)))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_tls_key_others_can_read_and_a_proxy_range_of_everything_are_warned_about() {
    let dir = TempDir::new("warnings");
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
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
        &s(&key),
        "-out",
        &s(&cert),
        "-days",
        "2",
        "-subj",
        "/CN=localhost",
    ]);
    let binary = Path::new(env!("CARGO_BIN_EXE_aesd"));
    let chmod = |mode| {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    chmod(0o644);
    let args = [
        "--tls-cert",
        &s(&cert),
        "--tls-key",
        &s(&key),
        "--trusted-proxies",
        "0.0.0.0/0",
    ];
    let aesd = AesdProcess::start(binary, &args);
    assert!(
        logged(&aesd, &["TLS key file", "readable by others", "chmod 600"]),
        "no warning about the key: {:#?}",
        aesd.log()
    );
    assert!(
        logged(&aesd, &["trusted-proxies 0.0.0.0/0", "every IPv4 address"]),
        "no warning about 0.0.0.0/0: {:#?}",
        aesd.log()
    );
    drop(aesd);

    // The negative control: a private key and a narrow proxy list.
    chmod(0o600);
    let args = [
        "--tls-cert",
        &s(&cert),
        "--tls-key",
        &s(&key),
        "--trusted-proxies",
        "127.0.0.1",
    ];
    let aesd = AesdProcess::start(binary, &args);
    std::thread::sleep(Duration::from_millis(200));
    let log = aesd.log();
    assert!(
        log.iter().any(|line| line.contains("listening")),
        "{log:#?}"
    );
    assert!(!log.iter().any(|line| line.contains("warning")), "{log:#?}");
}
