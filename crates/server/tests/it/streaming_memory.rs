//! A file much larger than the chunk size streams through the real `aesd`
//! process with bounded memory: the peak RSS after a 256 MiB job is under
//! a fixed bound and barely above the peak after an 8 MiB job; eight jobs
//! at once add only their buffers; a 40 MiB decryption stays as bounded.

use crate::common;

use aesd_client::Client;
use aesd_proto::Operation;
use aesd_testkit::{AesdProcess, TempDir, openssl_encrypt_file, pattern_bytes, proc_status_kib};
use common::{encrypt_verified, job_spec};

/// The bound stated in docs/aesd.md ("Memory"): aesd's peak resident memory while
/// streaming any file size with default settings (64 KiB chunks).
const PEAK_RSS_BOUND_KIB: u64 = 16 * 1024;
/// How much the peak may grow from an 8 MiB to a 256 MiB job (allocator
/// noise); growth with the file size would be far larger.
const GROWTH_BOUND_KIB: u64 = 2 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_256_mib_keeps_server_memory_flat() {
    let aesd = AesdProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_aesd")),
        &["--workers", "2", "--chunk-size", "65536"],
    );
    let server = aesd.addr.to_string();
    let spec = job_spec(Operation::Encrypt, "streaming");

    encrypt_verified(&server, &spec, 1, 8 << 20)
        .await
        .expect("8 MiB verified");
    let peak_small = proc_status_kib(aesd.pid(), "VmHWM").expect("VmHWM readable");

    let report = encrypt_verified(&server, &spec, 2, 256 << 20)
        .await
        .expect("256 MiB verified");
    assert_eq!(report.bytes_sent, 256 << 20);
    assert_eq!(report.bytes_received, (256 << 20) + 16 + 16);
    let peak_large = proc_status_kib(aesd.pid(), "VmHWM").expect("VmHWM readable");
    let rss_now = proc_status_kib(aesd.pid(), "VmRSS").expect("VmRSS readable");

    println!(
        "aesd peak RSS: {peak_small} KiB after 8 MiB, {peak_large} KiB after 256 MiB; \
         RSS now {rss_now} KiB; 256 MiB in {:.2} s",
        report.total.as_secs_f64()
    );
    assert!(
        peak_large <= PEAK_RSS_BOUND_KIB,
        "peak RSS {peak_large} KiB exceeds the bound of {PEAK_RSS_BOUND_KIB} KiB"
    );
    assert!(
        peak_large.saturating_sub(peak_small) <= GROWTH_BOUND_KIB,
        "peak RSS grew from {peak_small} to {peak_large} KiB with the file size"
    );
}

/// Eight jobs at once, 32 MiB each: every result verified, and the peak
/// RSS stays within the single-job bound plus each further job's buffers
/// (4 chunk buffers of 64 KiB) with a 2× allowance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_jobs_keep_server_memory_bounded() {
    const JOBS: u64 = 8;
    let aesd = AesdProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_aesd")),
        &[
            "--workers",
            "2",
            "--max-active",
            "8",
            "--chunk-size",
            "65536",
        ],
    );
    let server = aesd.addr.to_string();
    let spec = job_spec(Operation::Encrypt, "concurrent");
    let jobs: Vec<_> = (0..JOBS)
        .map(|seed| {
            let (server, spec) = (server.clone(), spec.clone());
            tokio::spawn(async move { encrypt_verified(&server, &spec, seed, 32 << 20).await })
        })
        .collect();
    for job in jobs {
        let report = job.await.expect("task").expect("32 MiB verified");
        assert_eq!(report.bytes_sent, 32 << 20);
    }
    let peak = proc_status_kib(aesd.pid(), "VmHWM").expect("VmHWM readable");
    let bound = PEAK_RSS_BOUND_KIB + (JOBS - 1) * 2 * 4 * 64;
    println!("aesd peak RSS with {JOBS} concurrent 32 MiB jobs: {peak} KiB (bound {bound} KiB)");
    assert!(peak <= bound, "peak RSS {peak} KiB exceeds {bound} KiB");
}

/// Decryption through the server beyond a few MB: a 40 MiB file made by
/// `openssl enc` decrypts through the real aesd to exactly its plaintext,
/// with memory as bounded as encryption.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_40_mib_openssl_file_decrypts_through_the_server() {
    const SIZE: usize = 40 << 20;
    let dir = TempDir::new("decrypt-40mib");
    let plain_path = dir.join("plain");
    let encrypted_path = dir.join("plain.enc");
    let plain = pattern_bytes(40, SIZE);
    std::fs::write(&plain_path, &plain).expect("write plaintext");
    let password = dir.password_file("large decryption");
    let spec = job_spec(Operation::Decrypt, "large decryption");
    openssl_encrypt_file(&password, spec.iterations, &plain_path, &encrypted_path);
    let file = std::fs::read(&encrypted_path).expect("read ciphertext");
    assert_eq!(file.len(), SIZE + 16 + 16);

    let aesd = AesdProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_aesd")),
        &["--workers", "2", "--chunk-size", "65536"],
    );
    let mut client = Client::connect(&aesd.addr.to_string())
        .await
        .expect("connect");
    let mut output = Vec::with_capacity(SIZE);
    let report = client
        .run_job(&spec, &mut &file[..], &mut output)
        .await
        .expect("decrypted");
    assert_eq!(report.bytes_received, SIZE as u64);
    assert!(output == plain, "the plaintext differs");
    let peak = proc_status_kib(aesd.pid(), "VmHWM").expect("VmHWM readable");
    println!("aesd peak RSS decrypting 40 MiB: {peak} KiB");
    assert!(peak <= PEAK_RSS_BOUND_KIB, "peak RSS {peak} KiB");
}
