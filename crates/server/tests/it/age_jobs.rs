//! Format 2 (age) through the server with the client library: jobs on one
//! connection round-trip, a changed file fails its job (not the
//! connection: the next job on it runs), and the metrics count jobs and
//! bytes by format.

use crate::common;

use aesd_age::{HeaderReader, Identity};
use aesd_client::{AgeSpec, Client};
use aesd_proto::{ErrorCode, Operation};
use aesd_server::ConfigLayer;
use aesd_testkit::pattern_bytes;
use common::{scrape, start_server};

fn spec(operation: Operation, identity: &Identity) -> AgeSpec {
    AgeSpec {
        operation,
        recipients: vec![identity.recipient()],
        identities: vec![identity.clone()],
        passphrase: None,
        armor: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_jobs_round_trip_fail_per_job_and_are_counted_by_format() {
    let server = start_server(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        chunk_size: Some(4096),
        ..ConfigLayer::default()
    })
    .await;
    let identity = Identity::from_bytes([0x5a; 32]);
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    // Frames of 4 KiB, chunks of 64 KiB: output is re-framed by the server.
    let plain = pattern_bytes(3, 200_000);
    let mut file = Vec::new();
    let report = client
        .run_age_job_observed(
            &spec(Operation::Encrypt, &identity),
            &mut &plain[..],
            &mut file,
            |_| {},
        )
        .await
        .expect("encrypts");
    assert_eq!(report.bytes_sent, plain.len() as u64);
    assert_eq!(report.bytes_received, file.len() as u64);
    let (header, _) = HeaderReader::new()
        .push(&file)
        .expect("an age header")
        .expect("complete");
    assert_eq!(header.stanzas.len(), 1);

    let mut back = Vec::new();
    client
        .run_age_job_observed(
            &spec(Operation::Decrypt, &identity),
            &mut &file[..],
            &mut back,
            |_| {},
        )
        .await
        .expect("decrypts");
    assert!(back == plain, "the round trip changed the data");

    // A changed payload byte: the job fails with decrypt_failed, naming the
    // chunk, and the connection runs the next job.
    let mut changed = file.clone();
    let at = header.len() + 16 + 65536 + 16 + 100;
    changed[at] ^= 0x01;
    let mut partial = Vec::new();
    let err = client
        .run_age_job_observed(
            &spec(Operation::Decrypt, &identity),
            &mut &changed[..],
            &mut partial,
            |_| {},
        )
        .await
        .expect_err("a changed file");
    assert_eq!(err.server_code(), Some(ErrorCode::DecryptFailed), "{err}");
    assert!(
        err.to_string().contains("chunk 1 failed to authenticate"),
        "{err}"
    );
    assert!(
        partial.len() <= 65536,
        "only chunk 0 (authenticated) may have been released, got {} bytes",
        partial.len()
    );
    let mut again = Vec::new();
    client
        .run_age_job_observed(
            &spec(Operation::Decrypt, &identity),
            &mut &file[..],
            &mut again,
            |_| {},
        )
        .await
        .expect("the connection serves on");
    assert!(again == plain);

    let metrics = scrape(server.metrics_addr().expect("metrics")).await;
    for line in [
        "aesd_jobs_total{operation=\"encrypt\",format=\"age\",outcome=\"ok\"} 1",
        "aesd_jobs_total{operation=\"decrypt\",format=\"age\",outcome=\"ok\"} 2",
        "aesd_jobs_total{operation=\"decrypt\",format=\"age\",outcome=\"decrypt_failed\"} 1",
        "aesd_jobs_total{operation=\"encrypt\",format=\"openssl\",outcome=\"ok\"} 0",
        "aesd_input_bytes_total{operation=\"encrypt\",format=\"age\"} 200000",
    ] {
        assert!(metrics.contains(line), "missing {line}:\n{metrics}");
    }
    server.shutdown().await;
}

/// Each recipient of an age encryption costs the server an X25519 share
/// and shared secret, charged to the client's kdf-budget like PBKDF2
/// (113 iterations a recipient): with a budget of 4000, one begin with 32
/// recipients (3616) runs, the next is refused with busy naming the
/// budget, and a decryption (key source 4: the client unwrapped the file
/// key, the server runs no X25519) still runs on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_encryptions_to_many_recipients_are_charged_to_the_kdf_budget() {
    let server = start_server(ConfigLayer {
        kdf_budget: Some(4000),
        ..ConfigLayer::default()
    })
    .await;
    let identities: Vec<Identity> = (1..=32u8).map(|n| Identity::from_bytes([n; 32])).collect();
    let many = AgeSpec {
        operation: Operation::Encrypt,
        recipients: identities.iter().map(Identity::recipient).collect(),
        identities: Vec::new(),
        passphrase: None,
        armor: false,
    };
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    let plain = pattern_bytes(9, 1000);
    let mut file = Vec::new();
    client
        .run_age_job_observed(&many, &mut &plain[..], &mut file, |_| {})
        .await
        .expect("32 recipients: 3616 of 4000");
    let err = client
        .run_age_job_observed(&many, &mut &plain[..], &mut Vec::new(), |_| {})
        .await
        .expect_err("over the budget");
    assert_eq!(err.server_code(), Some(ErrorCode::Busy), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("budget used up") && text.contains("3616 iterations asked"),
        "{text}"
    );
    let mut back = Vec::new();
    client
        .run_age_job_observed(
            &spec(Operation::Decrypt, &identities[31]),
            &mut &file[..],
            &mut back,
            |_| {},
        )
        .await
        .expect("a decryption costs the server no X25519");
    assert_eq!(back, plain);
    server.shutdown().await;
}
