//! Fuzzes the connection state machine the server runs (aesd-core's
//! `Connection`, with its job transform and lane engine): arbitrary bytes
//! as everything a client sends on one connection (hello, auth, begin,
//! data, end, in any order and shape), served by aesd-core's harness
//! (work run in place, time jumping to the next deadline or scripted
//! event when nothing else can happen).
//!
//! The first input byte picks the server and its script:
//! * bit 0: 0, a server without an access token; 1, one that requires the
//!   token `0123456789abcdef` (the auth vector of PROTOCOL.md, so seeds
//!   from it authenticate);
//! * bits 1-2: what admission answers every job: admitted at once, queued
//!   (position 2, then 1 after 0.3 s) and admitted after 0.6 s, refused
//!   (busy) after 0.2 s, or queued for 2 s (twice the idle timeout);
//! * bit 3: the server stops (a graceful stop) at 0.5 s; bit 4: it aborts
//!   at 0.7 s;
//! * bit 5: the client stops reading its output at once (and reads again
//!   after 0.5 s unless bit 6 is set: then a job that ended well may never
//!   get its done frame out, and only "no done frame for a failed job" is
//!   checked);
//! * a wrong token is answered after 0.25 s.
//!
//! Seeds whose first byte is 0 or 1 keep the plain behaviour. The rest is
//! the client's byte stream, all sent at once. Checks, besides "never
//! panics":
//! * everything the server sent is whole, valid server-to-client frames;
//! * every job that asked for admission ended (its slot would be freed:
//!   a leak would starve every later client), and a job that ended well
//!   sent its done frame.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aesd_core::access_token::AccessToken;
use aesd_core::connection::{AdmissionReply, Settings, Stop};
use aesd_core::job::{JobLimits, Refusal};
use aesd_core::memory::harness::Harness;
use aesd_proto::frame::HEADER_LEN;
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameHeader, FrameKind, Message};
use libfuzzer_sys::fuzz_target;

/// The token the odd-mode server requires.
const TOKEN: &str = "0123456789abcdef";

fn settings(token: bool) -> Arc<Settings> {
    Arc::new(Settings {
        server_name: "aesd fuzz".into(),
        chunk_size: 4096,
        access_token: token.then(|| AccessToken::new(TOKEN.as_bytes())),
        named_keys: None,
        spare_buffers: Arc::new(aesd_core::chunk::SpareBuffers::for_chunk_size(4096)),
        handshake_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_jobs: 8,
        // PBKDF2 stays cheap: a begin may ask for 1..=4 iterations.
        job: JobLimits {
            max_file_size: 1 << 20,
            iterations: (1, 4),
        },
    })
}

fuzz_target!(|data: &[u8]| {
    static SERVERS: OnceLock<[Arc<Settings>; 2]> = OnceLock::new();
    let Some((&mode, client)) = data.split_first() else {
        return;
    };
    let servers = SERVERS.get_or_init(|| [settings(false), settings(true)]);
    let settings = &servers[usize::from(mode & 1)];
    let mut harness = Harness::new(Settings::clone(settings))
        .auth_delay(Duration::from_millis(250))
        .send(client.to_vec());
    if mode & 0b110 != 0 {
        // The same answers for every job the connection may run.
        for _ in 0..settings.max_jobs {
            harness = harness.admission(admission_script(mode >> 1 & 0b11));
        }
    }
    if mode & 0b1000 != 0 {
        harness = harness.stop_at(Duration::from_millis(500), Stop::Stopping);
    }
    if mode & 0b1_0000 != 0 {
        harness = harness.stop_at(Duration::from_millis(700), Stop::Aborting);
    }
    if mode & 0b10_0000 != 0 {
        harness = harness.stop_reading();
        if mode & 0b100_0000 == 0 {
            harness = harness
                .wait(Duration::from_millis(500))
                .resume_reading();
        }
    }
    let record = harness.close().run();
    let done_frames = check_server_frames(&record.sent);
    let ok = record.jobs.iter().filter(|(_, job)| job.result.is_ok()).count();
    if mode & 0b110_0000 == 0b110_0000 {
        // A client that never reads again: a job ends well when its done
        // frame is queued, and the frame may never go out.
        assert!(done_frames <= ok, "done frames sent for jobs that failed");
    } else {
        assert_eq!(ok, done_frames, "jobs that ended well and done frames sent");
    }
    assert!(
        !record.slot_held,
        "a job that asked for a slot never ended: {record:?}"
    );
});

/// Admission's answers to a job, for the script bits of the mode byte.
fn admission_script(bits: u8) -> Vec<(Duration, AdmissionReply)> {
    let ms = Duration::from_millis;
    match bits {
        1 => vec![
            (ms(0), AdmissionReply::Queued(2)),
            (ms(300), AdmissionReply::Queued(1)),
            (ms(600), AdmissionReply::Admitted),
        ],
        2 => vec![(
            ms(200),
            AdmissionReply::Refused(Refusal {
                reason: "fuzz",
                message: "refused by the fuzzer's script".into(),
            }),
        )],
        3 => vec![
            (ms(0), AdmissionReply::Queued(3)),
            (ms(2000), AdmissionReply::Admitted),
        ],
        _ => vec![(ms(0), AdmissionReply::Admitted)],
    }
}

/// Everything the server wrote parses as server-to-client frames, to the
/// last byte; returns the number of done frames.
fn check_server_frames(mut sent: &[u8]) -> usize {
    let mut done = 0;
    while !sent.is_empty() {
        let header: &[u8; HEADER_LEN] = sent
            .get(..HEADER_LEN)
            .and_then(|bytes| bytes.try_into().ok())
            .expect("the server sent a partial frame header");
        let header = FrameHeader::decode(header, MAX_FRAME_PAYLOAD)
            .unwrap_or_else(|err| panic!("the server sent a bad frame header: {err}"));
        let end = HEADER_LEN + header.len as usize;
        let payload = sent
            .get(HEADER_LEN..end)
            .expect("the server sent a partial frame");
        let message = Message::decode(header.kind, payload)
            .unwrap_or_else(|err| panic!("the server sent a frame that does not decode: {err}"));
        assert!(
            !matches!(
                message.kind(),
                FrameKind::Begin | FrameKind::End | FrameKind::Auth
            ),
            "the server sent a client frame: {}",
            message.kind().name()
        );
        done += usize::from(matches!(message, Message::Done(_)));
        sent = &sent[end..];
    }
    done
}
