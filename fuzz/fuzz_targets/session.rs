//! Fuzzes the connection state machine the server runs (aesd-core's
//! `Connection`, with its job transform and lane engine): arbitrary bytes
//! as everything a client sends on one connection (hello, auth, begin,
//! data, end, in any order and shape), served from memory by aesd-core's
//! in-memory driver (work run in place, jobs admitted at once, time
//! jumping to the next deadline when nothing else can happen).
//!
//! The first input byte picks the server: even, one without an access
//! token; odd, one that requires the token `0123456789abcdef` (the auth
//! vector of PROTOCOL.md, so seeds from it authenticate). The rest is the
//! client's byte stream. Checks, besides "never panics":
//! * everything the server sent is whole, valid server-to-client frames;
//! * every job that asked for admission ended (its slot would be freed:
//!   a leak would starve every later client), and a job that ended well
//!   sent its done frame.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aesd_core::access_token::AccessToken;
use aesd_core::connection::Settings;
use aesd_core::job::JobLimits;
use aesd_core::memory;
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
    let settings = &servers[usize::from(mode % 2)];
    let mut outputs = vec![Vec::new()];
    let (outcomes, _) = memory::serve(settings, &[client], &mut outputs, 2);
    let done_frames = check_server_frames(&outputs[0]);
    let outcome = &outcomes[0];
    let ok = outcome.jobs.iter().filter(|job| job.result.is_ok()).count();
    assert_eq!(ok, done_frames, "jobs that ended well and done frames sent");
    assert!(
        !outcome.slot_held,
        "a job that asked for a slot never ended: {outcome:?}"
    );
});

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
