//! A file much larger than the chunk size streams through the real `aesd`
//! process with bounded memory: the peak RSS after a 256 MiB job is under
//! a fixed bound and barely above the peak after an 8 MiB job.

use aesd_proto::Operation;
use aesd_testkit::{AesdProcess, encrypt_verified, job_spec, proc_status_kib};

/// The bound stated in the README: aesd's peak resident memory while
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
