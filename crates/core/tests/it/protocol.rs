//! The protocol's behaviour, driven through aesd-core's own harness
//! (`aesd_core::memory::harness`): the connection state machine the server
//! runs, on the harness's clock, without sockets or sleeps. Timeouts are
//! checked at their exact limit, admission answers (queued at n, refused)
//! and stops are scripted, a client that stops reading is a write that
//! never completes.
//!
//! What needs sockets (TLS, PROXY, connection caps, fairness across
//! clients, metrics, signals, one end-to-end job per format) stays in
//! aesd-server's tests.

use std::sync::Arc;
use std::time::Duration;

use aesd_core::access_token::AccessToken;
use aesd_core::chunk::SpareBuffers;
use aesd_core::connection::{AdmissionReply, BUFFERS_PER_JOB, Settings, Stop};
use aesd_core::job::{JobLimits, Refusal};
use aesd_core::memory::harness::{Harness, Record};
use aesd_core::openssl_enc::{decrypt_buffer, encrypt_buffer};
use aesd_proto::{AuthToken, Begin, ErrorCode, Format, KeySource, Message, Operation, Password};

const HANDSHAKE: Duration = Duration::from_secs(5);
const IDLE: Duration = Duration::from_secs(10);
const PASSWORD: &[u8] = b"harness password";
const ITERATIONS: u32 = 3;
const TOKEN: &[u8] = b"a token of at least sixteen bytes";

fn settings() -> Settings {
    Settings {
        server_name: "aesd harness".into(),
        chunk_size: 4096,
        access_token: None,
        named_keys: None,
        spare_buffers: Arc::new(SpareBuffers::for_chunk_size(4096)),
        handshake_timeout: HANDSHAKE,
        idle_timeout: IDLE,
        max_jobs: 3,
        job: JobLimits {
            max_file_size: 100_000,
            iterations: (1, 1000),
        },
    }
}

fn with_token() -> Settings {
    Settings {
        access_token: Some(AccessToken::new(TOKEN)),
        ..settings()
    }
}

fn begin(operation: Operation, iterations: u32) -> Message {
    Message::Begin(Begin {
        operation,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            password: Password::new(PASSWORD.to_vec()),
            iterations,
        },
    })
}

fn encrypt() -> Message {
    begin(Operation::Encrypt, ITERATIONS)
}

fn data(bytes: &[u8]) -> Message {
    Message::Data(bytes.to_vec())
}

fn plain(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A welcomed connection.
fn welcomed(settings: Settings) -> Harness {
    Harness::new(settings).hello()
}

/// A whole encryption job of `bytes`, in data frames of `chunk`.
fn encryption(mut harness: Harness, bytes: &[u8], chunk: usize) -> Harness {
    harness = harness.message(&encrypt());
    for piece in bytes.chunks(chunk) {
        harness = harness.message(&data(piece));
    }
    harness.message(&Message::End)
}

/// A whole decryption job of `file`, in data frames of `chunk`.
fn decryption(mut harness: Harness, file: &[u8], chunk: usize) -> Harness {
    harness = harness.message(&begin(Operation::Decrypt, ITERATIONS));
    for piece in file.chunks(chunk) {
        harness = harness.message(&data(piece));
    }
    harness.message(&Message::End)
}

/// `len` bytes of plaintext encrypted under a password that is not
/// [`PASSWORD`]: their decryption fails at its end.
fn under_another_password(len: usize, seed: u8) -> Vec<u8> {
    encrypt_buffer(
        b"another password",
        &[9; 8],
        ITERATIONS,
        &plain(len, seed),
        1000,
    )
}

fn assert_decrypts_to(record: &Record, index: usize, expected: &[u8]) {
    let files = record.files();
    let file = files
        .get(index)
        .unwrap_or_else(|| panic!("no file {index}: {:?}", record.kinds()));
    let opened = decrypt_buffer(PASSWORD, ITERATIONS, file, 1000).expect("decrypts");
    assert_eq!(opened, expected);
}

// --- The handshake -------------------------------------------------------

#[test]
fn a_hello_that_never_completes_times_out_exactly_at_the_handshake_limit() {
    let record = Harness::new(settings()).send(b"AES".to_vec()).run();
    assert_eq!(record.first_error(), Some((HANDSHAKE, ErrorCode::Timeout)));
    assert_eq!(record.closed_at, Some(HANDSHAKE));
    assert!(record.failures[0].message.contains("waiting for the hello"));
}

#[test]
fn a_hello_a_nanosecond_before_the_limit_is_welcomed() {
    let hello = aesd_proto::Hello::current().encode();
    let record = Harness::new(settings())
        .send(hello[..7].to_vec())
        .wait(HANDSHAKE - Duration::from_nanos(1))
        .send(hello[7..].to_vec())
        .wait(Duration::from_secs(1))
        .close()
        .run();
    assert_eq!(record.kinds(), ["welcome"]);
    assert!(record.failures.is_empty(), "{:?}", record.failures);
}

#[test]
fn bad_magic_and_an_unknown_version_are_told_and_close() {
    let record = Harness::new(settings())
        .send(b"GET / HTTP/1.1\r\n".to_vec())
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::BadMagic]);
    assert!(record.failures[0].message.contains("magic"));
    assert_eq!(record.closed_at, Some(Duration::ZERO));

    let mut hello = aesd_proto::Hello::current().encode();
    hello[4..6].copy_from_slice(&0x7fu16.to_be_bytes());
    let record = Harness::new(settings()).send(hello.to_vec()).run();
    assert_eq!(record.error_codes(), [ErrorCode::UnsupportedVersion]);
    assert!(record.failures[0].message.contains("127"));
    assert!(record.closed_at.is_some());
}

// --- Bad frames ----------------------------------------------------------

/// A begin frame's bytes with the given operation, format and key source
/// numbers (key parameters: 1000 iterations, the password "pw").
fn begin_bytes(operation: u8, format: u8, source: u8) -> Vec<u8> {
    let params = [0, 0, 0x03, 0xe8, b'p', b'w'];
    let mut payload = vec![operation, format, source, 0, params.len() as u8];
    payload.extend_from_slice(&params);
    let mut frame = vec![0x10];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// The one error a welcomed connection gets for `bytes`; the connection
/// must close after it, at once.
fn closing_error_after_welcome(bytes: &[u8]) -> (ErrorCode, String) {
    let record = welcomed(settings()).send(bytes.to_vec()).run();
    assert_eq!(
        record.failures.len(),
        1,
        "{bytes:02x?}: {:?}",
        record.failures
    );
    assert_eq!(record.closed_at, Some(Duration::ZERO), "{bytes:02x?}");
    let failure = &record.failures[0];
    assert_eq!(record.error_codes(), [failure.code], "{bytes:02x?}");
    (failure.code, failure.message.clone())
}

#[test]
fn unknown_operations_formats_and_key_sources_are_named_and_close() {
    let (code, message) = closing_error_after_welcome(&begin_bytes(1, 9, 1));
    assert_eq!(code, ErrorCode::UnknownFormat);
    assert!(message.contains("format 9"), "{message}");
    let (code, _) = closing_error_after_welcome(&begin_bytes(7, 1, 1));
    assert_eq!(code, ErrorCode::UnknownOperation);
    let (code, _) = closing_error_after_welcome(&begin_bytes(1, 1, 7));
    assert_eq!(code, ErrorCode::UnknownKeySource);
}

#[test]
fn oversize_lengths_name_the_announced_size() {
    let (code, message) = closing_error_after_welcome(&[0x11, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(code, ErrorCode::FrameTooLarge);
    assert!(message.contains("4294967295"), "{message}");
    let (code, _) = closing_error_after_welcome(&[0x10, 0x00, 0x01, 0x00, 0x00]);
    assert_eq!(code, ErrorCode::FrameTooLarge);
}

#[test]
fn a_frame_cut_by_the_close_says_how_much_arrived() {
    let record = welcomed(settings())
        .send(vec![0x10, 0, 0, 0, 20, 1, 1, 1, 0, 6])
        .close()
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::TruncatedFrame]);
    assert!(
        record.failures[0].message.contains("5 of 20"),
        "{:?}",
        record.failures
    );
}

#[test]
fn an_unknown_frame_kind_and_an_oversize_length_close_the_connection() {
    for (bytes, code) in [
        (vec![0x7e, 0, 0, 0, 0], ErrorCode::UnexpectedFrame),
        (vec![0x11, 0xff, 0xff, 0xff, 0xff], ErrorCode::FrameTooLarge),
        (vec![0x10, 0x00, 0x10, 0x00, 0x00], ErrorCode::FrameTooLarge),
    ] {
        let record = welcomed(settings()).send(bytes.clone()).run();
        assert_eq!(record.error_codes(), [code], "{bytes:02x?}");
        assert!(record.closed_at.is_some(), "{bytes:02x?}");
    }
}

#[test]
fn data_before_begin_is_an_unexpected_frame() {
    let record = welcomed(settings()).message(&data(b"early")).run();
    assert_eq!(record.error_codes(), [ErrorCode::UnexpectedFrame]);
    assert!(
        record.failures[0].message.contains("before begin"),
        "{:?}",
        record.failures
    );
}

#[test]
fn an_empty_data_frame_inside_a_job_is_malformed() {
    let record = welcomed(settings())
        .message(&encrypt())
        .send(vec![0x11, 0, 0, 0, 0])
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::Malformed]);
    assert!(record.failures[0].message.contains("empty"));
    assert!(!record.slot_held, "the job's slot was given back");
}

#[test]
fn a_client_closing_inside_a_frame_is_a_truncated_frame_and_frees_its_slot() {
    let mut frame = Vec::new();
    data(&[7; 100]).encode(&mut frame).expect("data");
    let record = welcomed(settings())
        .message(&encrypt())
        .send(frame[..50].to_vec())
        .close()
        .run();
    assert_eq!(record.failures.len(), 1, "{:?}", record.failures);
    assert_eq!(record.failures[0].code, ErrorCode::TruncatedFrame);
    assert!(!record.slot_held);
    assert_eq!(record.jobs.len(), 1);
    assert!(record.jobs[0].1.result.is_err());
}

// --- Timeouts, exact -----------------------------------------------------

#[test]
fn a_frame_dripped_a_byte_at_a_time_is_cut_off_at_the_idle_limit() {
    // A byte every second, each well inside the 10 s limit: the frame as a
    // whole must still arrive within it.
    let mut frame = Vec::new();
    encrypt().encode(&mut frame).expect("begin");
    let record = welcomed(settings())
        .drip(&frame, Duration::from_secs(1))
        .run();
    let (at, code) = record.first_error().expect("an error");
    assert_eq!(code, ErrorCode::Timeout);
    assert_eq!(at, IDLE, "{:?}", record.failures);
    assert!(record.unread > 0, "the drip was cut off before it ended");
}

#[test]
fn a_data_frame_dripped_inside_a_job_is_cut_off_at_the_idle_limit() {
    let mut frame = Vec::new();
    data(&[1; 1000]).encode(&mut frame).expect("data");
    let record = welcomed(settings())
        .message(&encrypt())
        .drip(&frame, Duration::from_millis(100))
        .run();
    let (at, code) = record.first_error().expect("an error");
    assert_eq!(code, ErrorCode::Timeout);
    // The payload read starts once the header is whole (5 drips in).
    assert_eq!(at, Duration::from_millis(400) + IDLE);
    assert!(!record.slot_held);
}

#[test]
fn an_idle_connection_is_closed_at_the_idle_limit_and_not_before() {
    let record = welcomed(settings()).run();
    assert_eq!(record.first_error(), Some((IDLE, ErrorCode::Timeout)));
    // A job 1 ns before the limit keeps it open.
    let record = encryption(
        welcomed(settings()).wait(IDLE - Duration::from_nanos(1)),
        b"just in time",
        64,
    )
    .close()
    .run();
    assert_eq!(record.files().len(), 1, "{:?}", record.failures);
}

#[test]
fn a_client_that_stops_reading_is_cut_off_at_the_idle_limit_and_frees_its_slot() {
    let input = plain(50_000, 1);
    let record = encryption(welcomed(settings()).stop_reading(), &input, 4096).run();
    let failure = record.failures.first().expect("a failure");
    assert_eq!(failure.code, ErrorCode::Timeout);
    assert!(
        failure.message.contains("not reading"),
        "{}",
        failure.message
    );
    // The first write (the welcome) blocked at once.
    assert_eq!(failure.at, IDLE);
    assert!(!record.slot_held);
    assert!(record.closed_at.is_some());
}

#[test]
fn a_client_that_pauses_reading_within_the_limit_gets_its_whole_file() {
    let input = plain(30_000, 2);
    let record = encryption(welcomed(settings()), &input, 4096)
        .stop_reading()
        .wait(IDLE - Duration::from_millis(1))
        .resume_reading()
        .close()
        .run();
    assert!(record.failures.is_empty(), "{:?}", record.failures);
    assert_decrypts_to(&record, 0, &input);
}

// --- Admission -----------------------------------------------------------

#[test]
fn a_queued_job_is_told_its_position_then_runs_with_its_queue_time() {
    let input = plain(10_000, 3);
    let record = encryption(welcomed(settings()), &input, 4096)
        .admission(vec![
            (Duration::ZERO, AdmissionReply::Queued(2)),
            (Duration::from_secs(3), AdmissionReply::Queued(1)),
            (Duration::from_secs(7), AdmissionReply::Admitted),
        ])
        .close()
        .run();
    let queued: Vec<(Duration, u32)> = record
        .received
        .iter()
        .filter_map(|(at, message)| match message {
            Message::Queued(queued) => Some((*at, queued.position)),
            _ => None,
        })
        .collect();
    assert_eq!(
        queued,
        [(Duration::ZERO, 2), (Duration::from_secs(3), 1)],
        "{:?}",
        record.kinds()
    );
    let started = record
        .received
        .iter()
        .find_map(|(at, message)| match message {
            Message::Started(started) => Some((*at, started.queue_us)),
            _ => None,
        });
    assert_eq!(started, Some((Duration::from_secs(7), 7_000_000)));
    assert_decrypts_to(&record, 0, &input);
    assert_eq!(record.admit_asked, [(Duration::ZERO, Some(ITERATIONS))]);
}

#[test]
fn a_refused_job_gets_busy_and_the_next_job_on_the_connection_runs() {
    let input = plain(5000, 4);
    let refused = welcomed(settings()).message(&encrypt()).admission(vec![(
        Duration::from_secs(1),
        AdmissionReply::Refused(Refusal {
            reason: "queue_full",
            message: "the queue is full".into(),
        }),
    )]);
    // The client sends nothing more for the refused job (PROTOCOL.md: no
    // data before started) and begins again once told.
    let refused = refused.wait(Duration::from_secs(1));
    let record = encryption(refused, &input, 1000).close().run();
    assert_eq!(record.error_codes(), [ErrorCode::Busy]);
    assert_eq!(
        record.first_error().map(|(at, _)| at),
        Some(Duration::from_secs(1))
    );
    assert_eq!(record.files().len(), 1, "{:?}", record.kinds());
    assert_decrypts_to(&record, 0, &input);
    assert_eq!(record.jobs.len(), 2);
}

#[test]
fn a_queued_client_that_leaves_frees_its_place_and_is_not_started_later() {
    let record = welcomed(settings())
        .message(&encrypt())
        .admission(vec![
            (Duration::ZERO, AdmissionReply::Queued(1)),
            (Duration::from_secs(5), AdmissionReply::Admitted),
        ])
        .wait(Duration::from_secs(2))
        .close()
        .run();
    assert_eq!(record.jobs.len(), 1);
    assert_eq!(record.jobs[0].0, Duration::from_secs(2));
    assert_eq!(record.jobs[0].1.result, Err("client_gone"));
    assert!(!record.slot_held);
    assert!(!record.kinds().contains(&"started"), "{:?}", record.kinds());
}

// --- Job limits ----------------------------------------------------------

#[test]
fn input_over_the_file_size_limit_fails_the_job_and_the_connection_goes_on() {
    let too_big = plain(100_001, 5);
    let small = plain(100, 6);
    let record = encryption(encryption(welcomed(settings()), &too_big, 4096), &small, 64)
        .close()
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::LimitExceeded]);
    assert_eq!(record.files().len(), 1);
    assert_decrypts_to(&record, 0, &small);
}

#[test]
fn a_connection_runs_at_most_its_job_limit() {
    let mut harness = welcomed(settings());
    for i in 0..4 {
        harness = encryption(harness, &plain(10, i), 64);
    }
    let record = harness.close().run();
    assert_eq!(record.files().len(), 3);
    assert_eq!(record.error_codes(), [ErrorCode::JobLimit]);
    assert!(record.closed_at.is_some());
}

#[test]
fn an_iteration_count_outside_the_bounds_fails_before_admission() {
    let record = welcomed(settings())
        .message(&begin(Operation::Encrypt, 1001))
        .wait(Duration::from_secs(1))
        .close()
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::LimitExceeded]);
    assert!(record.admit_asked.is_empty(), "no slot asked for");
    assert!(record.failures[0].message.contains("1001"));
}

// --- A failed job's input is discarded -----------------------------------

#[test]
fn a_failed_decryption_discards_its_input_and_the_next_job_runs() {
    let harness = decryption(welcomed(settings()), &under_another_password(3000, 7), 500);
    let next = plain(2000, 8);
    let record = encryption(harness, &next, 700).close().run();
    assert_eq!(record.error_codes(), [ErrorCode::DecryptFailed]);
    assert_decrypts_to(&record, 0, &next);
    assert_eq!(record.unread, 0, "the discarded input was read to its end");
}

// --- Chunk buffers kept between jobs -------------------------------------

/// Settings whose jobs take their chunk buffers from `spare`.
fn sharing(spare: &Arc<SpareBuffers>) -> Settings {
    Settings {
        spare_buffers: Arc::clone(spare),
        ..settings()
    }
}

#[test]
fn the_next_job_takes_the_buffers_the_last_one_gave_back_and_both_are_right() {
    let first = plain(9000, 1);
    let once = Arc::new(SpareBuffers::for_chunk_size(4096));
    let record = encryption(welcomed(sharing(&once)), &first, 4096)
        .close()
        .run();
    assert_decrypts_to(&record, 0, &first);
    let one_job = once.kept();
    assert!((1..=BUFFERS_PER_JOB).contains(&one_job), "{one_job}");

    // Then a decryption and an encryption on the same connection: each
    // takes the buffers the job before it gave back, so no more are kept
    // after three jobs than after one.
    let second = plain(7000, 2);
    let file = encrypt_buffer(PASSWORD, &[3; 8], ITERATIONS, &second, 1000);
    let third = plain(5000, 3);
    let spare = Arc::new(SpareBuffers::for_chunk_size(4096));
    let harness = encryption(welcomed(sharing(&spare)), &first, 4096);
    let harness = decryption(harness, &file, 4096);
    let record = encryption(harness, &third, 4096).close().run();
    assert!(record.error_codes().is_empty(), "{:?}", record.kinds());
    assert_decrypts_to(&record, 0, &first);
    assert_eq!(record.files()[1], second);
    assert_decrypts_to(&record, 2, &third);
    assert_eq!(spare.kept(), one_job);
}

#[test]
fn a_failed_jobs_buffers_come_back_too() {
    let spare = Arc::new(SpareBuffers::for_chunk_size(4096));
    let file = under_another_password(9000, 4);
    let record = decryption(welcomed(sharing(&spare)), &file, 4096)
        .close()
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::DecryptFailed]);
    assert!(spare.kept() >= 1);
}

#[test]
fn with_no_room_for_spares_every_job_still_runs() {
    let spare = Arc::new(SpareBuffers::new(4096, 0));
    let (first, second) = (plain(9000, 5), plain(9000, 6));
    let harness = encryption(welcomed(sharing(&spare)), &first, 4096);
    let record = encryption(harness, &second, 4096).close().run();
    assert_decrypts_to(&record, 0, &first);
    assert_decrypts_to(&record, 1, &second);
    assert_eq!(spare.kept(), 0);
}

// --- Access tokens -------------------------------------------------------

#[test]
fn the_right_token_is_authorized_and_its_job_runs() {
    let input = plain(1000, 9);
    let harness = welcomed(with_token()).message(&Message::Auth(AuthToken::new(TOKEN.to_vec())));
    let record = encryption(harness, &input, 300).close().run();
    assert_eq!(record.kinds()[..2], ["welcome", "authorized"]);
    assert_decrypts_to(&record, 0, &input);
}

#[test]
fn a_wrong_token_is_answered_after_the_delay_and_closes() {
    let delay = Duration::from_millis(1500);
    let record = welcomed(with_token())
        .message(&Message::Auth(AuthToken::new(
            b"the wrong token, sixteen+".to_vec(),
        )))
        .auth_delay(delay)
        .run();
    assert_eq!(record.first_error(), Some((delay, ErrorCode::Unauthorized)));
    assert!(record.closed_at.is_some());
}

#[test]
fn a_job_without_the_token_is_refused_and_no_auth_frame_times_out() {
    let record = encryption(welcomed(with_token()), b"no token", 64)
        .auth_delay(Duration::from_secs(1))
        .run();
    assert_eq!(record.error_codes(), [ErrorCode::Unauthorized]);
    assert!(record.admit_asked.is_empty());

    let record = welcomed(with_token()).run();
    assert_eq!(
        record.first_error(),
        Some((HANDSHAKE, ErrorCode::Unauthorized))
    );
}

// --- Stops from outside --------------------------------------------------

#[test]
fn stopping_tells_an_idle_connection_and_a_queued_job_at_once() {
    let record = welcomed(settings())
        .stop_at(Duration::from_secs(2), Stop::Stopping)
        .run();
    assert_eq!(
        record.first_error(),
        Some((Duration::from_secs(2), ErrorCode::ShuttingDown))
    );

    let record = welcomed(settings())
        .message(&encrypt())
        .admission(vec![(Duration::ZERO, AdmissionReply::Queued(3))])
        .stop_at(Duration::from_secs(1), Stop::Stopping)
        .run();
    assert_eq!(
        record.first_error(),
        Some((Duration::from_secs(1), ErrorCode::ShuttingDown))
    );
    assert!(!record.slot_held);
}

#[test]
fn stopping_lets_a_running_job_finish_and_aborting_cuts_it_off() {
    let input = plain(20_000, 10);
    // The job's input arrives over 5 s; the stop comes at 1 s.
    let mut running = welcomed(settings()).message(&encrypt());
    for piece in input.chunks(4000) {
        running = running.message(&data(piece)).wait(Duration::from_secs(1));
    }
    let running = running.message(&Message::End).close();

    let record = running
        .stop_at(Duration::from_secs(1), Stop::Stopping)
        .run();
    assert!(record.failures.is_empty(), "{:?}", record.failures);
    assert_decrypts_to(&record, 0, &input);

    let mut cut = welcomed(settings()).message(&encrypt());
    for piece in input.chunks(4000) {
        cut = cut.message(&data(piece)).wait(Duration::from_secs(1));
    }
    let record = cut
        .message(&Message::End)
        .stop_at(Duration::from_millis(2500), Stop::Aborting)
        .run();
    assert_eq!(
        record.first_error(),
        Some((Duration::from_millis(2500), ErrorCode::ShuttingDown))
    );
    assert!(record.files().is_empty(), "no done frame after the abort");
    assert!(!record.slot_held);
}
