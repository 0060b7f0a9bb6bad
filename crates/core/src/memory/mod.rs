//! Drivers that serve connections from memory, on the calling thread:
//! each client's bytes from a slice, everything sent to a [`Sink`], all
//! work run in place (CBC encryption chunks of all connections together
//! through the [lane engine](crate::lanes)).
//!
//! * [`serve`]: every client's whole input at once, every job admitted at
//!   once, time standing still until nothing else can happen, then jumping
//!   to the next deadline. The benchmarks count with it what the server's
//!   state machine, job transform and lane engine cost per byte; the
//!   fuzzers feed it arbitrary client bytes.
//! * [`harness`]: one connection on its own clock, the client's side a
//!   timeline (bytes, pauses, closing, not reading), the server's side
//!   scripted (admission answers, stops, the delay after a wrong token):
//!   the protocol's behaviour tests (crates/core/tests) run on it, exact
//!   to the nanosecond and without sockets or sleeps.
//!
//! None of them copy the server's logic: only the sockets, the async
//! runtime and the worker threads are the server's own (`aesd-server`).

pub mod harness;
mod served;

use std::sync::Arc;
use std::time::Instant;

use crate::connection::{Connection, JobReport, SessionError, Settings};
use crate::lanes::{FeedQueue, LaneCounts, LaneLoad};
use served::{AdmitAll, Served};

/// Where a connection's output goes.
pub trait Sink {
    /// Takes the next bytes the server sends.
    fn write(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn write(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A sink that counts and drops the bytes, like a socket whose copy into
/// the kernel is not counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard {
    /// Bytes written so far.
    pub bytes: u64,
}

impl Sink for Discard {
    fn write(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
    }
}

/// What happened on one connection.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Each job's end, in order.
    pub jobs: Vec<JobReport>,
    /// Each error the client was told (or would have been), in order.
    pub errors: Vec<SessionError>,
    /// Whether a job that asked for admission had not ended when the
    /// connection did (a server would never get that slot back).
    pub slot_held: bool,
}

/// Serves one connection per input (a client's whole byte stream) until
/// each is closed or has nothing left to do, with `lanes` CBC chains per
/// lane engine run. Returns what happened on each, and how full the lanes
/// were.
pub fn serve<S: Sink + Default>(
    settings: &Arc<Settings>,
    inputs: &[&[u8]],
    outputs: &mut [S],
    lanes: usize,
) -> (Vec<Outcome>, LaneCounts) {
    let mut now = Instant::now();
    let load = Arc::new(LaneLoad::default());
    let mut served: Vec<Served<'_, S>> = inputs
        .iter()
        .zip(outputs.iter_mut())
        .map(|(input, output)| {
            let mut connection = Connection::new(Arc::clone(settings), now);
            connection.link_lanes(Arc::clone(&load), None);
            Served::new(connection, input, std::mem::take(output)).all_arrived_and_closed()
        })
        .collect();
    let mut counts = LaneCounts::default();
    loop {
        let mut progress = false;
        for one in &mut served {
            progress |= one.step(now, &mut AdmitAll);
        }
        progress |= run_lanes(&mut served, now, lanes, &load, &mut counts);
        if progress {
            continue;
        }
        // Nothing moves: time passes until the next deadline.
        let Some(next) = served
            .iter()
            .filter(|one| !one.connection.is_closed())
            .filter_map(|one| one.connection.poll_timeout())
            .min()
        else {
            break;
        };
        now = now.max(next);
        for one in &mut served {
            one.connection.on_timeout(now);
        }
    }
    let outcomes = served
        .into_iter()
        .zip(outputs.iter_mut())
        .map(|(one, output)| {
            *output = one.output;
            one.outcome
        })
        .collect();
    (outcomes, counts)
}

/// Encrypts the chunks of every connection's queued encryptions, together
/// (feeds in the order of the connections), and hands them back.
fn run_lanes<S: Sink>(
    served: &mut [Served<'_, S>],
    now: Instant,
    lanes: usize,
    load: &LaneLoad,
    counts: &mut LaneCounts,
) -> bool {
    let mut queue = FeedQueue::default();
    for one in served.iter_mut() {
        for feed in one.feeds.drain(..) {
            queue.push(feed);
        }
    }
    if queue.is_empty() {
        return false;
    }
    counts.add(queue.drain(lanes, load));
    for one in served.iter_mut() {
        // Nothing here panics inside the engine: no chain is ever lost.
        let _ = one.connection.on_lanes_done(now);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use aesd_proto::frame::HEADER_LEN as FRAME_HEADER_LEN;
    use aesd_proto::{FrameHeader, Hello, Message};

    use crate::job::JobLimits;
    use crate::openssl_enc::decrypt_buffer;
    use aesd_proto::{Begin, ErrorCode, Format, KeySource, Operation, Password};

    fn settings() -> Arc<Settings> {
        Arc::new(Settings {
            server_name: "aesd test".into(),
            chunk_size: 4096,
            access_token: None,
            named_keys: None,
            spare_buffers: Arc::new(crate::chunk::SpareBuffers::for_chunk_size(4096)),
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            max_jobs: 4,
            job: JobLimits {
                max_file_size: 1 << 20,
                iterations: (1, 100),
            },
        })
    }

    /// A client's whole byte stream: hello, then one encryption job per
    /// plaintext (key source 1, 3 iterations), in data frames of `chunk`.
    fn client(plains: &[&[u8]], chunk: usize) -> Vec<u8> {
        let mut bytes = Hello::current().encode().to_vec();
        for plain in plains {
            let begin = Message::Begin(Begin {
                operation: Operation::Encrypt,
                format: Format::OpensslSaltedPbkdf2,
                key: KeySource::Password {
                    password: Password::new(b"memory".to_vec()),
                    iterations: 3,
                },
            });
            begin.encode(&mut bytes).expect("begin");
            for piece in plain.chunks(chunk) {
                Message::Data(piece.to_vec())
                    .encode(&mut bytes)
                    .expect("data");
            }
            Message::End.encode(&mut bytes).expect("end");
        }
        bytes
    }

    /// The messages of a server's output, with data frames joined per job.
    fn replies(mut output: &[u8]) -> Vec<Message> {
        let mut messages = Vec::new();
        while !output.is_empty() {
            let header: &[u8; FRAME_HEADER_LEN] =
                output[..FRAME_HEADER_LEN].try_into().expect("header");
            let header = FrameHeader::decode(header, 1 << 20).expect("valid header");
            let end = FRAME_HEADER_LEN + header.len as usize;
            messages
                .push(Message::decode(header.kind, &output[FRAME_HEADER_LEN..end]).expect("frame"));
            output = &output[end..];
        }
        messages
    }

    fn files(messages: &[Message]) -> Vec<Vec<u8>> {
        let mut files = vec![Vec::new()];
        for message in messages {
            match message {
                Message::Data(bytes) => files.last_mut().expect("file").extend_from_slice(bytes),
                Message::Done(_) => files.push(Vec::new()),
                _ => {}
            }
        }
        files.pop();
        files
    }

    #[test]
    fn two_connections_sharing_lanes_each_get_files_that_decrypt_to_their_input() {
        let plain_a: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let plain_b: Vec<u8> = (0..7_777u32).map(|i| (i * 13 + 1) as u8).collect();
        let inputs = [
            client(&[&plain_a, b"second job"], 4096),
            client(&[&plain_b], 1000),
        ];
        let mut outputs = vec![Vec::new(), Vec::new()];
        let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let (outcomes, counts) = serve(&settings(), &inputs, &mut outputs, 2);
        let a = files(&replies(&outputs[0]));
        let b = files(&replies(&outputs[1]));
        assert_eq!(a.len(), 2);
        assert_eq!(
            decrypt_buffer(b"memory", 3, &a[0], 100).expect("a"),
            plain_a
        );
        assert_eq!(
            decrypt_buffer(b"memory", 3, &a[1], 7).expect("a2"),
            b"second job"
        );
        assert_eq!(decrypt_buffer(b"memory", 3, &b[0], 64).expect("b"), plain_b);
        assert_eq!(outcomes[0].jobs.len(), 2);
        assert!(outcomes.iter().all(|outcome| outcome.errors.is_empty()));
        // Both jobs' chunks were encrypted together at some point.
        assert!(counts.used_blocks * 2 > counts.offered_blocks, "{counts:?}");
    }

    #[test]
    fn a_failed_job_is_told_and_the_next_one_runs() {
        let mut bytes = Hello::current().encode().to_vec();
        // A decryption of something that is not an openssl file.
        Message::Begin(Begin {
            operation: Operation::Decrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                password: Password::new(b"memory".to_vec()),
                iterations: 3,
            },
        })
        .encode(&mut bytes)
        .expect("begin");
        for _ in 0..5 {
            Message::Data(vec![1; 3000])
                .encode(&mut bytes)
                .expect("data");
        }
        Message::End.encode(&mut bytes).expect("end");
        bytes.extend(&client(&[b"after"], 64)[Hello::current().encode().len()..]);
        let mut outputs = vec![Vec::new()];
        let (outcomes, _) = serve(&settings(), &[&bytes], &mut outputs, 2);
        let messages = replies(&outputs[0]);
        let error = messages
            .iter()
            .find_map(|message| match message {
                Message::Error(error) => Some(error.code),
                _ => None,
            })
            .expect("an error frame");
        assert_eq!(error, ErrorCode::BadCiphertext);
        assert_eq!(files(&messages).len(), 1, "the next job ran: {messages:?}");
        assert_eq!(outcomes[0].jobs.len(), 2);
        assert!(outcomes[0].jobs[0].result.is_err());
        assert!(outcomes[0].jobs[1].result.is_ok());
    }

    #[test]
    fn a_cut_hello_and_data_before_begin_are_told() {
        let mut outputs = vec![Vec::new(), Vec::new()];
        let mut early = Hello::current().encode().to_vec();
        Message::Data(vec![1; 10]).encode(&mut early).expect("data");
        let hello = Hello::current().encode();
        let (outcomes, _) = serve(&settings(), &[&hello[..4], &early], &mut outputs, 2);
        assert!(matches!(
            outcomes[0].errors[..],
            [SessionError::Truncated { .. }]
        ));
        assert!(matches!(
            outcomes[1].errors[..],
            [SessionError::UnexpectedFrame { got: "data", .. }]
        ));
    }
}
