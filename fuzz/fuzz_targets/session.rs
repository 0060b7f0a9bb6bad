//! Fuzzes the server's session and job state machine: arbitrary bytes as
//! everything a client sends on one connection (hello, auth, begin, data,
//! end, in any order and shape), served by the real session code over an
//! in-memory stream.
//!
//! The first input byte picks the server: even, one without an access
//! token; odd, one that requires the token `0123456789abcdef` (the auth
//! vector of PROTOCOL.md, so seeds from it authenticate). The rest
//! is the client's byte stream. Checks, besides "never panics":
//! * everything the server sent is whole, valid server-to-client frames;
//! * once the connection is over, no admission slot or queue place is
//!   left taken (a leak would starve every later client).

#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameKind, FrameReader};
use aesd_server::config::{Config, ConfigLayer};
use aesd_server::server::Server;
use aesd_server::session::serve_io;
use aesd_server::shared::Shared;
use libfuzzer_sys::fuzz_target;
use tokio::runtime::Runtime;

/// The token the odd-mode server requires.
const TOKEN: &str = "0123456789abcdef";

struct Harness {
    runtime: Runtime,
    /// Bound but never accepting: only their shared state is used.
    _servers: Vec<Server>,
    open: Arc<Shared>,
    guarded: Arc<Shared>,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let token_file =
            std::env::temp_dir().join(format!("aesd-fuzz-token-{}", std::process::id()));
        std::fs::write(&token_file, TOKEN).expect("token file");
        let layer = |token: bool| ConfigLayer {
            listen: Some("127.0.0.1:0".parse().expect("address")),
            workers: Some(1),
            max_active: Some(1),
            max_queue: Some(1),
            chunk_size: Some(4096),
            // PBKDF2 stays cheap: a begin may ask for 1..=4 iterations.
            min_iter: Some(1),
            max_iter: Some(4),
            max_file_size: Some(1 << 20),
            max_jobs_per_connection: Some(8),
            handshake_timeout: Some(1.0),
            idle_timeout: Some(1.0),
            temperature: Some("off".into()),
            log: Some("off".into()),
            token_file: token.then(|| token_file.clone()),
            auth_failure_delay: Some(0.000_001),
            ..ConfigLayer::default()
        };
        let servers: Vec<Server> = [false, true]
            .into_iter()
            .map(|token| {
                let config = Config::resolve(layer(token)).expect("valid fuzz config");
                runtime.block_on(Server::bind(config)).expect("bind")
            })
            .collect();
        // The token is read when the configuration resolves: the file is
        // no longer needed (and is not left in the temporary directory).
        let _ = std::fs::remove_file(&token_file);
        Harness {
            open: servers[0].shared(),
            guarded: servers[1].shared(),
            _servers: servers,
            runtime,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, client)) = data.split_first() else {
        return;
    };
    let harness = harness();
    let shared = if mode % 2 == 0 {
        &harness.open
    } else {
        &harness.guarded
    };
    let peer: SocketAddr = "127.0.0.1:9".parse().expect("address");
    let mut sent = Vec::new();
    harness
        .runtime
        .block_on(serve_io(client, &mut sent, peer, shared));
    check_server_frames(&sent, &harness.runtime);
    check_no_slot_left(shared);
});

/// Everything the server wrote parses as server-to-client frames, to the
/// last byte.
fn check_server_frames(sent: &[u8], runtime: &Runtime) {
    runtime.block_on(async {
        let mut reader = FrameReader::new(sent, MAX_FRAME_PAYLOAD);
        loop {
            match reader.read_message().await {
                Ok(Some(message)) => assert!(
                    !matches!(
                        message.kind(),
                        FrameKind::Begin | FrameKind::End | FrameKind::Auth
                    ),
                    "the server sent a client frame: {}",
                    message.kind().name()
                ),
                Ok(None) => return,
                Err(err) => panic!("the server sent bytes that are not a frame: {err}"),
            }
        }
    });
}

/// Admission is back to empty; slots are released as the job's stages
/// finish, so allow them a moment.
fn check_no_slot_left(shared: &Shared) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let occupancy = shared.admission.occupancy();
        if occupancy.active == 0 && occupancy.waiting == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slots left taken after the connection ended: {occupancy:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
