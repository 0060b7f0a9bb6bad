//! The lane engine through the real server: concurrent encryption jobs on
//! one worker share its lanes, and each still gets exactly its own
//! `openssl enc` file (every result is decrypted and compared).

use crate::common;

use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use common::{encrypt_verified, job_spec, start_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_jobs_on_one_worker_share_its_lanes() {
    let server = start_server(ConfigLayer {
        workers: Some(1),
        max_active: Some(8),
        max_active_per_client: Some(8),
        max_queued_per_client: Some(64),
        ..ConfigLayer::default()
    })
    .await;
    let pool = server.state();
    let lanes = pool.lanes();
    let addr = server.addr().to_string();
    let jobs: Vec<_> = (0..lanes as u64 * 2)
        .map(|seed| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let spec = job_spec(Operation::Encrypt, "lanes");
                encrypt_verified(&addr, &spec, seed, (4 << 20) + seed * 4099).await
            })
        })
        .collect();
    for job in jobs {
        job.await.expect("job task").expect("verified");
    }
    let (used, offered) = pool.lane_blocks();
    let total_blocks: u64 = (0..lanes as u64 * 2)
        .map(|seed| ((4 << 20) + seed * 4099) / 16)
        .sum();
    // Every whole block went through the engine (the last partial block
    // and the padding block of each job go with `finish`).
    assert_eq!(used, total_blocks, "blocks encrypted by the lane engine");
    eprintln!("lane occupancy: {used} of {offered} blocks ({lanes} lanes)");
    // More than one lane busy on average: jobs were encrypted together.
    assert!(
        used * lanes as u64 > offered,
        "lane occupancy {used} / {offered} with {lanes} lanes"
    );
    server.shutdown().await;
}
