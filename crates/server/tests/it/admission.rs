//! 50 concurrent clients on 10 active slots: the first ten hold their
//! slots until 40 more are queued, then everyone completes and verifies;
//! the queued ones saw their positions and non-zero queue time; clients
//! beyond the queue's bound get Busy at once.

use crate::common;

use std::time::Duration;

use aesd_client::{Client, ClientError, JobReport, JobSpec};
use aesd_proto::{ErrorCode, Operation};
use aesd_server::ConfigLayer;
use aesd_testkit::{Pattern, VerifyingSink};
use common::{job_spec, start_server};
use tokio::io::AsyncWriteExt;

const SLOTS: usize = 10;
const QUEUE: usize = 40;
const SIZE: usize = 256 * 1024;

fn spec() -> JobSpec {
    job_spec(Operation::Encrypt, "admission")
}

/// Encrypts `SIZE` bytes of the pattern for `seed`, fed through a pipe
/// that opens only when `gate` fires; returns the report once verified.
async fn gated_client(
    addr: String,
    seed: u64,
    gate: tokio::sync::watch::Receiver<bool>,
) -> Result<JobReport, ClientError> {
    let mut client = Client::connect(&addr).await?;
    let (mut feed, mut input) = tokio::io::duplex(64 * 1024);
    let feeder = tokio::spawn(async move {
        let mut gate = gate;
        let _ = gate.wait_for(|open| *open).await;
        let mut data = vec![0u8; SIZE];
        Pattern::new(seed).fill(&mut data);
        let _ = feed.write_all(&data).await;
    });
    let mut sink = VerifyingSink::new(b"admission", 1000, Pattern::new(seed), SIZE as u64);
    let report = client.run_job(&spec(), &mut input, &mut sink).await;
    feeder.abort();
    let report = report?;
    sink.finish().expect("result verifies");
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_clients_ten_slots_positions_queue_time_and_busy() {
    let server = start_server(ConfigLayer {
        workers: Some(2),
        max_active: Some(SLOTS),
        max_queue: Some(QUEUE),
        // Every client is 127.0.0.1 here: no per-client shares, and the
        // gated uploads may wait as long as the test needs.
        max_active_per_client: Some(SLOTS),
        max_queued_per_client: Some(QUEUE),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr().to_string();
    let admission = server.state();
    let (open, gate) = tokio::sync::watch::channel(false);

    let mut clients = Vec::new();
    for seed in 0..(SLOTS + QUEUE) as u64 {
        clients.push(tokio::spawn(gated_client(addr.clone(), seed, gate.clone())));
        // The first ten take the slots, in order, before anyone queues.
        if seed < SLOTS as u64 {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while admission.occupancy().active <= seed as usize {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "client {seed} never admitted"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while admission.occupancy().waiting < QUEUE {
        assert!(
            tokio::time::Instant::now() < deadline,
            "queue never filled: {:?}",
            admission.occupancy()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(admission.occupancy().active, SLOTS);

    // The queue is at its bound: more clients are refused at once.
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let mut client = Client::connect(&addr).await.expect("connect");
        let err = client
            .run_job(&spec(), &mut &b"x"[..], &mut Vec::new())
            .await
            .expect_err("busy");
        assert_eq!(err.server_code(), Some(ErrorCode::Busy), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "Busy must come at once"
        );
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    open.send(true).expect("open the gate");
    let mut queued = 0;
    for (index, handle) in clients.into_iter().enumerate() {
        let report = handle.await.expect("task").expect("job verified");
        if report.queue_positions.is_empty() {
            assert!(
                index < SLOTS,
                "client {index} was admitted at once but should have queued"
            );
        } else {
            queued += 1;
            assert!(
                report.queue > Duration::ZERO,
                "client {index} queued with zero queue time"
            );
            let first = report.queue_positions[0];
            assert!(
                (1..=QUEUE as u32).contains(&first),
                "client {index} first position {first}"
            );
            assert!(
                report
                    .queue_positions
                    .windows(2)
                    .all(|pair| pair[1] < pair[0]),
                "positions only move forward: {:?}",
                report.queue_positions
            );
        }
    }
    assert_eq!(queued, QUEUE, "every client past the slots queued");
    assert_eq!(admission.occupancy().active, 0);
    server.shutdown().await;
}
