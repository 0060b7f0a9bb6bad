//! Fair admission under abuse (issues 15 and 24): addresses that open many
//! jobs and stall them, or never read their output, cannot keep another
//! address's job from being served (the newcomer takes a queue place from
//! the heaviest client and borrows a slot it holds over its share, while
//! that client's jobs run on); an address alone uses every slot; jobs
//! past the per-client caps get `busy` and keep their connections; a job
//! that trickles its input is cut by the minimum input rate, while a job
//! the server itself holds back (backpressure) is not.
//!
//! The other address is 127.0.0.2: the test binds its socket there before
//! connecting (Linux routes all of 127.0.0.0/8 to the loopback).

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, ErrorCode, Format, FrameHeader, FrameKind, FrameReader, FrameWriter, Hello, KeySource,
    Message, Operation, Password,
};
use aesd_server::Occupancy;
use aesd_server::{ConfigLayer, RunningServer};
use aesd_testkit::connect_from;
use common::{encrypt_verified, job_spec, start_server};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Generous bound for answers on a busy 2-core machine.
const ANSWER: Duration = Duration::from_secs(15);

/// A handshaken connection from `source`.
async fn handshaken_from(
    source: &str,
    server: SocketAddr,
) -> (FrameReader<OwnedReadHalf>, FrameWriter<OwnedWriteHalf>) {
    let stream = connect_from(source, server).await;
    stream.set_nodelay(true).expect("nodelay");
    let (read, mut write) = stream.into_split();
    write
        .write_all(&Hello::current().encode())
        .await
        .expect("hello");
    let mut reader = FrameReader::new(read, 1 << 20);
    match next(&mut reader).await {
        Message::Welcome(_) => {}
        other => panic!("expected the welcome, got {other:?}"),
    }
    (reader, FrameWriter::new(write))
}

fn begin() -> Message {
    Message::Begin(Begin {
        operation: Operation::Encrypt,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            iterations: 1000,
            password: Password::new(b"fairness".to_vec()),
        },
    })
}

async fn next(reader: &mut FrameReader<OwnedReadHalf>) -> Message {
    match tokio::time::timeout(ANSWER, reader.read_message()).await {
        Ok(Ok(Some(message))) => message,
        other => panic!("expected a frame within {ANSWER:?}, got {other:?}"),
    }
}

/// How the server answered a begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Started,
    Queued,
    Busy,
}

async fn send_begin(
    reader: &mut FrameReader<OwnedReadHalf>,
    writer: &mut FrameWriter<OwnedWriteHalf>,
) -> Answer {
    writer.send(&begin()).await.expect("begin");
    match next(reader).await {
        Message::Started(_) => Answer::Started,
        Message::Queued(_) => Answer::Queued,
        Message::Error(error) if error.code == ErrorCode::Busy => Answer::Busy,
        other => panic!("expected started, queued or busy, got {other:?}"),
    }
}

/// Runs a whole 64 KiB job from `source` and returns how long it took
/// from its begin to its done, and whether it had to queue.
async fn job_from(source: &str, server: SocketAddr) -> (Duration, bool) {
    let (mut reader, mut writer) = handshaken_from(source, server).await;
    let began = Instant::now();
    writer.send(&begin()).await.expect("begin");
    let mut queued = false;
    loop {
        match next(&mut reader).await {
            Message::Started(_) => break,
            Message::Queued(_) => queued = true,
            other => panic!("{source}: expected started, got {other:?}"),
        }
    }
    writer.send_data(&[7u8; 64 << 10]).await.expect("data");
    writer.send(&Message::End).await.expect("end");
    loop {
        match next(&mut reader).await {
            Message::Data(_) => continue,
            Message::Done(_) => return (began.elapsed(), queued),
            other => panic!("{source}: expected output and done, got {other:?}"),
        }
    }
}

/// Waits (at most [`ANSWER`]) for the admission counts to become
/// `expected`: a job's slot is given back just after its done frame.
async fn occupancy_settles(server: &RunningServer, expected: Occupancy) {
    let deadline = Instant::now() + ANSWER;
    loop {
        let now = server.state().occupancy();
        if now == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{now:?}, expected {expected:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn refused_count(server: &RunningServer, reason: &str) -> u64 {
    let text = server.state().metrics_text();
    let series = format!("aesd_jobs_refused_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .trim()
        .parse()
        .expect("a count")
}

/// The attack of issue 15: 12 connections from one address begin a job,
/// send one byte and stall. Without fair sharing they hold every slot and
/// queue place and a job from another address gets `busy` (or waits for as
/// long as they stall).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_jobs_from_one_address_cannot_starve_another() {
    let server = start_server(ConfigLayer {
        workers: Some(2),
        max_active: Some(4),
        max_queue: Some(8),
        idle_timeout: Some(120.0),
        // The sharing alone must do it: no input rate minimum here.
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await;
    let mut attackers = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..13 {
        let (mut reader, mut writer) = handshaken_from("127.0.0.1", server.addr()).await;
        answers.push(send_begin(&mut reader, &mut writer).await);
        // One byte of a data frame's header, then silence.
        writer.get_mut().write_all(&[0x11]).await.expect("a byte");
        attackers.push((reader, writer));
    }
    let count = |answer| answers.iter().filter(|a| **a == answer).count();
    eprintln!(
        "attacker: {} started, {} queued, {} busy",
        count(Answer::Started),
        count(Answer::Queued),
        count(Answer::Busy)
    );
    // Alone, the address may take every slot and queue place
    // (work-conserving), and is refused only past them.
    assert_eq!(count(Answer::Started), 4, "{answers:?}");
    assert_eq!(count(Answer::Queued), 8, "{answers:?}");
    assert_eq!(count(Answer::Busy), 1, "{answers:?}");

    let (took, queued) = job_from("127.0.0.2", server.addr()).await;
    eprintln!("the other address's job: {took:?}, queued: {queued}");
    assert!(took < ANSWER, "served in {took:?}");
    // Its begin took the newest queue place of 127.0.0.1 (the queue was
    // full) and borrowed a slot 127.0.0.1 held over its share: 127.0.0.1's
    // four jobs still hold theirs, seven of its jobs still wait.
    assert_eq!(refused_count(&server, "displaced"), 1);
    occupancy_settles(
        &server,
        Occupancy {
            active: 4,
            waiting: 7,
        },
    )
    .await;
    drop(attackers);
}

/// Work-conserving sharing, end to end: an address alone runs as many jobs
/// as there are slots; one over its per-client cap queues and the next is
/// refused with `busy` (keeping its connection); when another address
/// comes it borrows a slot the first holds over its share and starts at
/// once, while the first's jobs run on and complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_caps_queue_then_refuse_with_busy() {
    let server = start_server(ConfigLayer {
        workers: Some(1),
        max_active: Some(2),
        max_active_per_client: Some(1),
        max_queued_per_client: Some(1),
        idle_timeout: Some(120.0),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    let (mut a_reader, mut a_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(
        send_begin(&mut a_reader, &mut a_writer).await,
        Answer::Started
    );
    // Nobody else waits: 127.0.0.1 takes the second slot too.
    let (mut b_reader, mut b_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(
        send_begin(&mut b_reader, &mut b_writer).await,
        Answer::Started
    );
    // Its third waits, its fourth gets busy: no queue place left for it.
    let (mut c_reader, mut c_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(
        send_begin(&mut c_reader, &mut c_writer).await,
        Answer::Queued
    );
    let (mut d_reader, mut d_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(send_begin(&mut d_reader, &mut d_writer).await, Answer::Busy);
    // The connection stays open: a refused job sends nothing more, the
    // client may begin again at once.
    assert_eq!(send_begin(&mut d_reader, &mut d_writer).await, Answer::Busy);
    assert_eq!(refused_count(&server, "per_client_active"), 2);

    // Another address: 127.0.0.1 is over its share (one slot each); the
    // newcomer borrows the slot it holds over it and starts at once.
    let (took, queued) = job_from("127.0.0.2", addr).await;
    eprintln!("127.0.0.2 served in {took:?} (queued first: {queued})");
    assert!(took < ANSWER, "served in {took:?}");
    // 127.0.0.1's running job B was not stopped: it completes.
    b_writer.send_data(&[9u8; 64 << 10]).await.expect("data");
    b_writer.send(&Message::End).await.expect("end");
    loop {
        match next(&mut b_reader).await {
            Message::Data(_) => continue,
            Message::Done(done) => {
                assert_eq!(done.bytes_in, 64 << 10);
                break;
            }
            other => panic!("B should complete, got {other:?}"),
        }
    }
    // B's slot goes to 127.0.0.1's waiting job (C).
    loop {
        match next(&mut c_reader).await {
            Message::Started(_) => break,
            Message::Queued(_) => continue,
            other => panic!("C should start when B is done, got {other:?}"),
        }
    }
    drop((a_reader, a_writer, b_writer, c_writer));
}

/// Issue 24's lock-out: 127.0.0.1 runs 3 jobs that upload fast and never
/// read their output (slower than any reader), 127.0.0.2 takes the last
/// slot the same way, and both fill the queue with begins. A third address
/// must still get a slot and finish its job, and no job of the first two is
/// stopped for it. Before fair sharing it got `busy` for as long as they
/// kept it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_addresses_with_slow_readers_cannot_lock_out_a_third() {
    let server = start_server(ConfigLayer {
        workers: Some(2),
        max_active: Some(4),
        max_queue: Some(16),
        idle_timeout: Some(120.0),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await;
    let addr = server.addr();
    let mut held = Vec::new();
    let mut uploads = Vec::new();
    for source in ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"] {
        let (mut reader, mut writer) = handshaken_from(source, addr).await;
        assert_eq!(send_begin(&mut reader, &mut writer).await, Answer::Started);
        // 16 MiB as fast as the server takes it; the output is never read.
        uploads.push(tokio::spawn(async move {
            let chunk = vec![3u8; 64 << 10];
            for _ in 0..256 {
                if writer.send_data(&chunk).await.is_err() {
                    break;
                }
            }
            writer
        }));
        held.push(reader);
    }
    let mut queued = Vec::new();
    for n in 0..17 {
        let source = if n % 2 == 0 { "127.0.0.2" } else { "127.0.0.1" };
        let (mut reader, mut writer) = handshaken_from(source, addr).await;
        let answer = send_begin(&mut reader, &mut writer).await;
        // 127.0.0.2's first waiting job borrows a slot 127.0.0.1 holds over
        // its share (two clients: two slots each); the rest wait.
        let expected = if n == 0 {
            Answer::Started
        } else {
            Answer::Queued
        };
        assert_eq!(answer, expected, "begin {n} from {source}");
        queued.push((reader, writer));
    }
    assert_eq!(
        server.state().occupancy(),
        Occupancy {
            active: 5,
            waiting: 16
        }
    );

    let (took, was_queued) = job_from("127.0.0.3", addr).await;
    eprintln!("127.0.0.3: done in {took:?} (queued first: {was_queued})");
    assert!(took < ANSWER, "served in {took:?}");
    assert_eq!(refused_count(&server, "displaced"), 1);
    // Every job of the first two addresses still holds its slot.
    occupancy_settles(
        &server,
        Occupancy {
            active: 5,
            waiting: 15,
        },
    )
    .await;
    for upload in uploads {
        upload.abort();
    }
    drop((held, queued));
}

/// One host, one worker, two jobs and nobody else waiting: both run at
/// once (sharing the worker's lane engine) although one slot per client is
/// the cap while others wait. Before, the second job queued behind the
/// first (lane occupancy 50 % on the 2-lane board).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_alone_runs_a_job_in_every_slot() {
    let server = start_server(ConfigLayer {
        workers: Some(1),
        idle_timeout: Some(120.0),
        ..ConfigLayer::default()
    })
    .await;
    assert_eq!(server.state().config().max_active, 2);
    assert_eq!(server.state().config().max_active_per_client, 1);
    let addr = server.addr();
    let (mut a_reader, mut a_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(
        send_begin(&mut a_reader, &mut a_writer).await,
        Answer::Started
    );
    let (mut b_reader, mut b_writer) = handshaken_from("127.0.0.1", addr).await;
    assert_eq!(
        send_begin(&mut b_reader, &mut b_writer).await,
        Answer::Started,
        "the second job of a client alone must not queue"
    );
    drop((a_reader, a_writer, b_reader, b_writer));
}

/// A job whose client sends a few bytes every 200 ms (50 bytes/s, each
/// read well inside the idle timeout) is cut by `min-input-rate` at the
/// end of its first window, and its slot goes to the next job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_job_is_cut_by_the_minimum_input_rate() {
    let server = start_server(ConfigLayer {
        max_active: Some(1),
        idle_timeout: Some(60.0),
        min_input_rate: Some(1000),
        input_rate_window: Some(1.0),
        ..ConfigLayer::default()
    })
    .await;
    let (mut reader, mut writer) = handshaken_from("127.0.0.1", server.addr()).await;
    assert_eq!(send_begin(&mut reader, &mut writer).await, Answer::Started);
    let began = Instant::now();
    let trickle = tokio::spawn(async move {
        let write = writer.get_mut();
        // A data frame announcing 4 KiB: 80 s at this rate.
        let _ = write.write_all(&[0x11, 0, 0, 0x10, 0]).await;
        for _ in 0..400 {
            if write.write_all(&[b'x'; 10]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let code = loop {
        match next(&mut reader).await {
            Message::Error(error) => break error.code,
            _ => continue,
        }
    };
    let took = began.elapsed();
    trickle.abort();
    eprintln!("trickle cut after {took:?}");
    assert_eq!(code, ErrorCode::Timeout);
    assert!(
        took < Duration::from_secs(10),
        "cut after {took:?}; the window is 1 s"
    );
    let deadline = Instant::now() + ANSWER;
    while server.state().occupancy().active != 0 {
        assert!(Instant::now() < deadline, "the slot was never given back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spec = job_spec(Operation::Encrypt, "next");
    encrypt_verified(&server.addr().to_string(), &spec, 1, 200_000)
        .await
        .expect("the next job is served");
}

/// A payload that arrives slowly but steadily (2 KiB every 250 ms: 8 kB/s
/// against a minimum of 1 kB/s in windows of 0.5 s; 2 s for the frame)
/// completes. On plain TCP the receive mark keeps a frame's bytes in the
/// kernel until the whole frame is there, so the input rate must count
/// what is queued before it judges the client (driver.rs, `take_queued`);
/// without that this job is cut at its second window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_steady_payload_is_judged_on_what_it_sent() {
    const PAYLOAD: usize = 16 << 10;
    const PIECE: usize = 2 << 10;
    let server = start_server(ConfigLayer {
        max_active: Some(1),
        idle_timeout: Some(60.0),
        min_input_rate: Some(1000),
        input_rate_window: Some(0.5),
        ..ConfigLayer::default()
    })
    .await;
    let (mut reader, mut writer) = handshaken_from("127.0.0.1", server.addr()).await;
    assert_eq!(send_begin(&mut reader, &mut writer).await, Answer::Started);
    let upload = tokio::spawn(async move {
        let write = writer.get_mut();
        write
            .write_all(&data_header(PAYLOAD))
            .await
            .expect("header");
        for _ in 0..PAYLOAD / PIECE {
            tokio::time::sleep(Duration::from_millis(250)).await;
            write.write_all(&[b'x'; PIECE]).await.expect("payload");
        }
        writer.send(&Message::End).await.expect("end");
        writer
    });
    let mut received = 0;
    let done = loop {
        match next(&mut reader).await {
            Message::Data(bytes) => received += bytes.len(),
            Message::Done(done) => break done,
            other => panic!("expected output or done, got {other:?}"),
        }
    };
    assert_eq!(done.bytes_in, PAYLOAD as u64);
    assert!(received > PAYLOAD, "{received} bytes of output");
    let _writer = upload.await.expect("upload");
}

/// A job's last data frame whose header came with the first bytes of its
/// payload in one segment, the rest after a pause, then the end: the
/// server reads the header and those bytes into its input buffer, so the
/// receive mark must ask the kernel for what is still to come, not for
/// the whole payload (the end frame's few bytes would never make up the
/// difference, and the job would wait for its frame deadline). The board
/// simulation met this on every job's last frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_frame_split_after_its_header_completes_at_once() {
    const PAYLOAD: usize = 16 << 10;
    const FIRST: usize = 1000;
    let server = start_server(ConfigLayer {
        max_active: Some(1),
        idle_timeout: Some(20.0),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await;
    let (mut reader, mut writer) = handshaken_from("127.0.0.1", server.addr()).await;
    assert_eq!(send_begin(&mut reader, &mut writer).await, Answer::Started);
    let mut head = data_header(PAYLOAD).to_vec();
    head.extend_from_slice(&[b'y'; FIRST]);
    writer.get_mut().write_all(&head).await.expect("head");
    tokio::time::sleep(Duration::from_millis(300)).await;
    writer
        .get_mut()
        .write_all(&[b'y'; PAYLOAD - FIRST])
        .await
        .expect("rest");
    writer.send(&Message::End).await.expect("end");
    let sent = Instant::now();
    let done = loop {
        match tokio::time::timeout(Duration::from_secs(5), reader.read_message()).await {
            Ok(Ok(Some(Message::Data(_)))) => continue,
            Ok(Ok(Some(Message::Done(done)))) => break done,
            other => panic!(
                "expected output and done within 5 s of the frame's end, got {other:?} after {:?}",
                sent.elapsed()
            ),
        }
    };
    assert_eq!(done.bytes_in, PAYLOAD as u64);
}

/// The header of a data frame announcing `len` payload bytes, as the
/// protocol encodes it (for tests that send the payload in pieces).
fn data_header(len: usize) -> [u8; aesd_proto::frame::HEADER_LEN] {
    FrameHeader {
        kind: FrameKind::Data,
        len: u32::try_from(len).expect("a frame's length"),
    }
    .encode()
}

/// A client that stops reading its output for 4 s makes the server stop
/// reading its input (backpressure). That pause is the server's, not the
/// client's: with a minimum of 100 kB/s over 1 s windows the job still
/// completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_does_not_count_against_the_input_rate() {
    const TOTAL: usize = 32 << 20;
    let server = start_server(ConfigLayer {
        workers: Some(1),
        max_active: Some(1),
        idle_timeout: Some(60.0),
        min_input_rate: Some(100_000),
        input_rate_window: Some(1.0),
        ..ConfigLayer::default()
    })
    .await;
    let (mut reader, mut writer) = handshaken_from("127.0.0.1", server.addr()).await;
    assert_eq!(send_begin(&mut reader, &mut writer).await, Answer::Started);
    let upload = tokio::spawn(async move {
        let chunk = vec![5u8; 64 << 10];
        for _ in 0..TOTAL / chunk.len() {
            writer.send_data(&chunk).await.expect("data");
        }
        writer.send(&Message::End).await.expect("end");
        writer
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut received = 0usize;
    let outcome = loop {
        match tokio::time::timeout(Duration::from_secs(60), reader.read_message()).await {
            Ok(Ok(Some(Message::Data(bytes)))) => received += bytes.len(),
            Ok(Ok(Some(Message::Done(done)))) => break Ok(done),
            Ok(Ok(Some(Message::Error(error)))) => break Err(error),
            other => panic!("expected output, got {other:?}"),
        }
    };
    let done = outcome.expect("the job completes despite the pause");
    assert_eq!(done.bytes_in, TOTAL as u64);
    assert!(received > TOTAL);
    let _writer = upload.await.expect("upload");
}
