//! The load runner against real (in-process) servers: open-loop timing,
//! spreading over servers, and verification of a corrupted result.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aesd_load::distribution::SizeDist;
use aesd_load::durations::Warmup;
use aesd_load::load::{Arrival, LoadPlan, run_load};
use aesd_load::progress::Progress;
use aesd_load::record::Transfer;
use aesd_load::report::Summary;
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, FrameWriter, Message, Password};
use aesd_server::ConfigLayer;
use aesd_testkit::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

fn plan(clients: usize, arrival: Arrival, size: u64) -> LoadPlan {
    LoadPlan {
        clients,
        arrival,
        sizes: SizeDist::fixed(size),
        size_period: None,
        seed: 3,
        iterations: 1000,
        key_derivation: aesd_client::KeyDerivation::Auto,
        password: Password::new(b"load test".to_vec()),
        token: None,
        tls: None,
        idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
        shard: aesd_load::shard::Shard::WHOLE,
        bind: None,
        format: aesd_load::load::LoadFormat::Openssl,
    }
}

/// One job at a time: every other client waits in the queue.
fn slow_server() -> ConfigLayer {
    ConfigLayer {
        workers: Some(1),
        max_active: Some(1),
        // All load comes from 127.0.0.1: queue it all, as before the
        // per-client caps.
        max_queued_per_client: Some(1 << 20),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    }
}

/// A slow server on its own thread and runtime, so that stalling the
/// test's runtime delays only the load generator. Dropping the handle
/// stops it.
struct ServerThread {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    fn start(layer: ConfigLayer) -> ServerThread {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let server = aesd_server::start_loopback(layer)
                    .await
                    .expect("the test server starts");
                addr_tx.send(server.addr()).expect("send address");
                let _ = stopped.await;
                server.shutdown().await;
            });
        });
        let addr = addr_rx.recv().expect("server address");
        ServerThread {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn open_loop_latency_counts_from_the_intended_start() {
    let server = ServerThread::start(slow_server());
    let servers = vec![server.addr.to_string()];
    // The load generator runs on one thread; 30 ms in, that thread is
    // blocked for 300 ms, so the arrivals due meanwhile start late.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = runtime.block_on(async {
        tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            std::thread::sleep(Duration::from_millis(300));
        });
        let plan = plan(20, Arrival::Rate(100.0), 64 << 10);
        run_load(&servers, &plan, Arc::new(Progress::default())).await
    });
    assert_eq!(run.transfers.len(), 20);
    for transfer in &run.transfers {
        assert!(transfer.verified(), "{:?}", transfer.outcome);
        // Intended start: arrival i at i / rate, whatever happened.
        assert_eq!(
            transfer.scheduled,
            Duration::from_secs_f64(transfer.client as f64 / 100.0)
        );
        let job = transfer.report.as_ref().expect("report").total;
        assert!(
            transfer.total() >= transfer.dispatch_delay() + job,
            "client {}: total {:?} < dispatch delay {:?} + job {job:?}",
            transfer.client,
            transfer.total(),
            transfer.dispatch_delay()
        );
    }
    let late = run
        .transfers
        .iter()
        .find(|transfer| transfer.dispatch_delay() >= Duration::from_millis(200))
        .expect("an arrival due during the stall started late");
    let job = late.report.as_ref().expect("report").total;
    assert!(
        late.total() >= Duration::from_millis(200) && late.total() > job,
        "the late transfer's total {:?} must include its dispatch delay {:?} (job alone {job:?})",
        late.total(),
        late.dispatch_delay()
    );
    // network = total − queue − processing, so it holds the delay too.
    assert!(late.network().expect("measured") >= late.dispatch_delay());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_queue_time_grows_on_a_one_slot_server() {
    let server = aesd_server::start_loopback(slow_server())
        .await
        .expect("the test server starts");
    let servers = vec![server.addr().to_string()];
    // 30 arrivals within 30 ms, one job at a time: each waits for those
    // ahead of it. The arrivals are closer together than a job takes, so
    // the queue builds up whatever this machine's speed.
    let plan = plan(30, Arrival::Rate(1_000.0), 2 << 20);
    let progress = Arc::new(Progress::default());
    let run = run_load(&servers, &plan, Arc::clone(&progress)).await;
    server.shutdown().await;
    let summary = Summary::of(&run, Warmup::None);
    assert_eq!(summary.verified, 30, "{:?}", summary.failures);
    // Order by when each client really started: scheduling jitter on a
    // busy machine can reorder arrivals that were due 1 ms apart, and
    // that says nothing about the queue.
    let mut by_start: Vec<&Transfer> = run.transfers.iter().collect();
    by_start.sort_by_key(|transfer| transfer.dispatched);
    let queues: Vec<Duration> = by_start
        .iter()
        .map(|transfer| transfer.queue().expect("measured"))
        .collect();
    let mean = |part: &[Duration]| part.iter().sum::<Duration>() / part.len() as u32;
    let (first, last) = (mean(&queues[..10]), mean(&queues[20..]));
    assert!(
        last > first,
        "queue time should grow with arrival order: first 10 {first:?}, last 10 {last:?}"
    );
    // Jobs ran one at a time, so the longest wait spans many jobs' work
    // (29 of them if every client arrived at once).
    let mut processing: Vec<Duration> = run
        .transfers
        .iter()
        .map(|transfer| transfer.processing().expect("measured"))
        .collect();
    processing.sort();
    let median = processing[processing.len() / 2];
    let longest = queues.iter().max().copied().unwrap_or_default();
    assert!(
        longest >= median * 10,
        "the longest queue time {longest:?} should span many jobs of {median:?} each"
    );
    let waited = queues.iter().filter(|queue| !queue.is_zero()).count();
    assert!(waited >= 25, "only {waited} of 30 clients queued");
    assert!(
        run.transfers.iter().any(|transfer| transfer
            .report
            .as_ref()
            .is_some_and(|r| r.queue_positions.len() > 1)),
        "some client was told several queue positions"
    );
    let counts = progress.snapshot();
    assert_eq!((counts.done, counts.running, counts.queued), (30, 0, 0));
    assert_eq!(counts.bytes_sent, 30 * (2 << 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_are_spread_evenly_over_servers() {
    let (a, b) = (
        aesd_server::start_loopback(ConfigLayer::default())
            .await
            .expect("the test server starts"),
        aesd_server::start_loopback(ConfigLayer::default())
            .await
            .expect("the test server starts"),
    );
    let servers = vec![a.addr().to_string(), b.addr().to_string()];
    let run = run_load(
        &servers,
        &plan(10, Arrival::Batches(4), 32 << 10),
        Arc::new(Progress::default()),
    )
    .await;
    let per_server = Summary::per_server(&run, Warmup::None, 2);
    for (index, summary) in per_server.iter().enumerate() {
        assert_eq!(
            (summary.transfers, summary.verified),
            (5, 5),
            "server {index}"
        );
        assert_eq!(summary.bytes_processed, 5 * (32 << 10));
    }
    for transfer in &run.transfers {
        assert_eq!(transfer.server, transfer.client % 2);
    }

    // The split is real: with the second address dead, exactly its
    // clients fail, and they fail to connect.
    let servers = vec![a.addr().to_string(), "127.0.0.1:1".to_owned()];
    let run = run_load(
        &servers,
        &plan(6, Arrival::Batches(6), 16 << 10),
        Arc::new(Progress::default()),
    )
    .await;
    for transfer in &run.transfers {
        match transfer.client % 2 {
            0 => assert!(transfer.verified(), "{:?}", transfer.outcome),
            _ => assert_eq!(transfer.failure().map(|(kind, _)| kind), Some("connect")),
        }
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// A proxy to `upstream` that flips one bit in the middle of the first
/// large data frame the server sends back (on whichever connection gets
/// there first); everything else passes through untouched.
async fn corrupting_proxy(upstream: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let corrupted = Arc::new(AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let corrupted = Arc::clone(&corrupted);
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut client_read, client_write) = client.into_split();
                let (server_read, mut server_write) = server.into_split();
                let upstream_copy = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                    let _ = server_write.shutdown().await;
                });
                let mut frames = FrameReader::new(server_read, MAX_FRAME_PAYLOAD);
                let mut out = FrameWriter::new(client_write);
                while let Ok(Some(message)) = frames.read_message().await {
                    let sent = match message {
                        Message::Data(mut bytes) => {
                            if bytes.len() >= 4096 && !corrupted.swap(true, Ordering::SeqCst) {
                                let middle = bytes.len() / 2;
                                bytes[middle] ^= 0x01;
                            }
                            out.send_data(&bytes).await
                        }
                        other => out.send(&other).await,
                    };
                    if sent.is_err() {
                        break;
                    }
                }
                let _ = out.shutdown().await;
                let _ = upstream_copy.await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_catches_a_corrupted_result() {
    let server = aesd_server::start_loopback(ConfigLayer::default())
        .await
        .expect("the test server starts");
    let proxy = corrupting_proxy(server.addr()).await;
    let run = run_load(
        &[proxy.to_string()],
        &plan(3, Arrival::Batches(1), 256 << 10),
        Arc::new(Progress::default()),
    )
    .await;
    let summary = Summary::of(&run, Warmup::None);
    assert_eq!(summary.verified, 2);
    assert_eq!(
        summary.failures.get("verify"),
        Some(&1),
        "{:?}",
        summary.failures
    );
    assert_eq!(
        summary.bytes_processed,
        2 * (256 << 10),
        "a corrupted result never counts"
    );
    let (_, message) = run
        .transfers
        .iter()
        .find_map(|transfer| transfer.failure())
        .expect("one failure");
    assert!(message.contains("differs from the input"), "{message}");

    // The same through the binary: exit 1, the failure in the report.
    let proxy = corrupting_proxy(server.addr()).await;
    let dir = TempDir::new("aesload-corrupt");
    let json = dir.join("run.json");
    let output = tokio::task::spawn_blocking({
        let json = json.clone();
        move || {
            Command::new(env!("CARGO_BIN_EXE_aesload"))
                .args([
                    "--server",
                    &proxy.to_string(),
                    "--clients",
                    "3",
                    "--chunk",
                    "1",
                ])
                .args(["--size", "256K", "--iter", "1000", "--quiet", "--json"])
                .arg(&json)
                .output()
                .expect("run aesload")
        }
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let row = stdout
        .lines()
        .find(|line| line.starts_with("Failed (verify)"))
        .unwrap_or_else(|| panic!("no verify failure row:\n{stdout}"));
    assert!(row.trim_end().ends_with('1'), "{row}");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    assert_eq!(document["summary"]["failed"], 1);
    assert_eq!(document["summary"]["failures"]["verify"], 1);
    server.shutdown().await;
}

/// `--format age`: every transfer is an age encryption to the run's
/// identity, verified by aesload's own decryption; one result changed on
/// the way fails verification (its chunk does not authenticate), the
/// others verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_age_run_verifies_every_result_and_catches_a_changed_one() {
    let server = aesd_server::start_loopback(ConfigLayer::default())
        .await
        .expect("the test server starts");
    let mut age_plan = plan(4, Arrival::Batches(2), 200 << 10);
    age_plan.format = aesd_load::load::LoadFormat::fresh_age().expect("identity");
    let run = run_load(
        &[server.addr().to_string()],
        &age_plan,
        Arc::new(Progress::default()),
    )
    .await;
    let summary = Summary::of(&run, Warmup::None);
    assert_eq!(summary.verified, 4, "{:?}", summary.failures);

    let proxy = corrupting_proxy(server.addr()).await;
    let run = run_load(
        &[proxy.to_string()],
        &age_plan,
        Arc::new(Progress::default()),
    )
    .await;
    let summary = Summary::of(&run, Warmup::None);
    assert_eq!(summary.verified, 3);
    assert_eq!(
        summary.failures.get("verify"),
        Some(&1),
        "{:?}",
        summary.failures
    );
    let (_, message) = run
        .transfers
        .iter()
        .find_map(|transfer| transfer.failure())
        .expect("one failure");
    assert!(message.contains("does not authenticate"), "{message}");
}
