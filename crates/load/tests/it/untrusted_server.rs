//! aesload's transfers against a fake server that goes silent in the
//! middle of a job: the per-transfer idle timeout ends them.

use std::time::{Duration, Instant};

use aesd_load::load::{Target, transfer};
use aesd_load::progress::Progress;
use aesd_load::record::Outcome;
use aesd_proto::Operation;
use aesd_testkit::fake_server::{fake_server, silent_after_started};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aesload_transfer_to_a_silent_server_times_out() {
    let addr = fake_server(65_536, silent_after_started).await;
    // The fake server wants the password on a cleartext connection:
    // allowed explicitly.
    let mut spec = aesd_client::JobSpec::with_password(Operation::Encrypt, "pw", 1000);
    spec.key_derivation = aesd_client::KeyDerivation::Server;
    let started = Instant::now();
    let (_, outcome) = transfer(
        Target {
            server: &addr.to_string(),
            options: &aesd_client::ConnectOptions::default(),
            idle_timeout: Duration::from_millis(500),
        },
        &spec,
        &aesd_load::load::LoadFormat::Openssl,
        None,
        1,
        10_000,
        &Progress::default(),
    )
    .await;
    match outcome {
        Outcome::Failed { kind, .. } => assert_eq!(kind, "timeout"),
        other => panic!("wrong outcome {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}
