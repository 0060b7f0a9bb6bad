//! One job: admission, then a full-duplex pipeline of three stages.
//!
//! ```text
//!  socket ──► read stage ──chunks──► cipher stage ──output──► write stage ──► socket
//!               ▲   (reads payloads      (worker pool:            │
//!               │    into free buffers)   in place)               │
//!               └─────────────── free buffers ◄──────────────────┘
//! ```
//!
//! The stages run concurrently in the connection's task, so output streams
//! back while input still arrives. A job owns [`BUFFERS_PER_JOB`] chunk
//! buffers, which circulate; when they are all in flight the read stage
//! stops reading and TCP flow control slows the client down. Memory per
//! job is therefore bounded whatever the file size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, Done, ErrorFrame, FrameKind, FrameReader, FrameWriter, KeySource, Message, Operation,
    Queued, Started,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

use crate::admission::{Entry, Permit, TicketEvent};
use crate::cipher::sliced::{SLICE_ITERATIONS, SlicedPbkdf2};
use crate::cipher::{
    BLOCK, ChunkBuf, DerivedKey, EncryptStream, HEADER_LEN, JobCipher, SALT_LEN, random_salt,
};
use crate::client_key::ClientKey;
use crate::error::JobError;
use crate::input_rate::{ByteCounter, InputRate};
use crate::pool::Timed;
use crate::server::Shared;

/// Chunk buffers one job circulates between its stages.
pub const BUFFERS_PER_JOB: usize = 4;

/// How a job ended, with what the session needs to carry on.
pub struct JobOutcome {
    /// The figures sent in the done frame, or why the job failed.
    pub result: Result<Done, JobError>,
    /// Whether an error frame for this job was already sent.
    pub error_sent: bool,
    /// Whether the client's input was read up to its end frame (or, before
    /// the job started, whether the client had nothing to send yet).
    pub input_finished: bool,
}

impl JobOutcome {
    fn failed_before_start(error: JobError) -> Self {
        JobOutcome {
            result: Err(error),
            error_sent: false,
            input_finished: true,
        }
    }
}

/// Runs one job whose begin frame has been read.
pub async fn run<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    begin: Begin,
    client: ClientKey,
    input: &ByteCounter,
    shared: &Arc<Shared>,
) -> JobOutcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let received = Instant::now();
    if let KeySource::Password { iterations, .. } = &begin.key {
        let (min, max) = (shared.config.min_iterations, shared.config.max_iterations);
        if !(min..=max).contains(iterations) {
            return JobOutcome::failed_before_start(JobError::IterationsOutOfRange {
                got: *iterations,
                min,
                max,
            });
        }
    }
    let _permit = match admit(reader, writer, client, shared).await {
        Ok(permit) => permit,
        Err(error) => return JobOutcome::failed_before_start(error),
    };
    let queue_wait = received.elapsed();
    shared
        .metrics
        .observe_queue_wait(begin.operation.name(), queue_wait);
    let queue_us = micros(queue_wait);
    if let Err(error) = writer.send(&Message::Started(Started { queue_us })).await {
        return JobOutcome::failed_before_start(error.into());
    }

    let spec = CipherSpec {
        operation: begin.operation,
        key: begin.key,
    };
    let chunk = shared.config.chunk_size as usize;
    let (free_tx, free_rx) = mpsc::channel(BUFFERS_PER_JOB);
    for _ in 0..BUFFERS_PER_JOB {
        let _ = free_tx.try_send(ChunkBuf::with_capacity(chunk));
    }
    let (input_tx, input_rx) = mpsc::channel(BUFFERS_PER_JOB);
    let (output_tx, output_rx) = mpsc::channel(BUFFERS_PER_JOB);
    let idle = shared.config.idle_timeout;

    // Set when the read or write stage fails (the client left, broke the
    // protocol or stopped reading): a key derivation stops at its next slice.
    let cancel = CancellationToken::new();
    let cancel_on_error = |failed: bool| {
        if failed {
            cancel.cancel();
        }
    };
    let (read, cipher, write) = tokio::join!(
        async {
            let rate = InputRate::new(
                shared.config.min_input_rate,
                shared.config.input_rate_window,
                input.clone(),
            );
            let result = read_stage(reader, free_rx, input_tx, idle, rate, shared).await;
            cancel_on_error(result.is_err());
            result
        },
        cipher_stage(input_rx, output_tx, spec, queue_us, &cancel, shared),
        async {
            let result = write_stage(
                writer,
                output_rx,
                free_tx,
                idle,
                begin.operation.name(),
                shared,
            )
            .await;
            cancel_on_error(result.is_err());
            result
        },
    );

    let input_finished = matches!(read, Ok(ReadEnd::SawEnd));
    let (error_sent, done) = match &write {
        Ok(end) => (end.error_sent, end.done),
        Err(_) => (false, None),
    };
    // Report the stage that failed first; the others merely stopped.
    let failure = [read.err(), cipher.err(), write.err()]
        .into_iter()
        .flatten()
        .find(|error| !matches!(error, JobError::Aborted));
    let result = match (failure, done) {
        (Some(error), _) => Err(error),
        (None, Some(done)) => Ok(done),
        (None, None) => Err(JobError::Aborted),
    };
    JobOutcome {
        result,
        error_sent,
        input_finished,
    }
}

/// Waits for a slot, telling the client its queue position as it changes.
async fn admit<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    client: ClientKey,
    shared: &Arc<Shared>,
) -> Result<Permit, JobError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let entry = shared.admission.enter(client).inspect_err(|refused| {
        shared.metrics.job_refused(refused.reason());
    })?;
    let mut ticket = match entry {
        Entry::Admitted(permit) => return Ok(permit),
        Entry::Queued(ticket) => ticket,
    };
    let position = ticket.position();
    writer.send(&Message::Queued(Queued { position })).await?;
    let mut watch_peer = true;
    loop {
        tokio::select! {
            biased;
            event = ticket.next_event() => match event {
                TicketEvent::Admitted(permit) => return Ok(permit),
                TicketEvent::Moved(position) => {
                    writer.send(&Message::Queued(Queued { position })).await?;
                }
            },
            () = shared.shutdown.stopping() => return Err(JobError::ShuttingDown),
            peer = reader.await_input(), if watch_peer => match peer {
                // The client left the queue: dropping the ticket frees its place.
                Ok(true) | Err(_) => return Err(JobError::ClientGone),
                // It sent early input; it is alive, stop watching.
                Ok(false) => watch_peer = false,
            },
        }
    }
}

/// What the cipher stage needs to start.
struct CipherSpec {
    operation: aesd_proto::Operation,
    key: KeySource,
}

enum Input {
    Chunk(ChunkBuf),
    End,
}

enum Output {
    Header([u8; HEADER_LEN]),
    Bytes(ChunkBuf),
    Done(Done),
    Failed(ErrorFrame),
}

enum ReadEnd {
    SawEnd,
    Stopped,
}

struct WriteEnd {
    done: Option<Done>,
    error_sent: bool,
}

async fn read_stage<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    mut free: mpsc::Receiver<ChunkBuf>,
    input: mpsc::Sender<Input>,
    idle: Duration,
    mut rate: InputRate,
    shared: &Arc<Shared>,
) -> Result<ReadEnd, JobError> {
    let max_file_size = shared.config.max_file_size;
    let mut bytes_in = 0u64;
    loop {
        let header = tokio::select! {
            biased;
            () = shared.shutdown.aborting() => return Ok(ReadEnd::Stopped),
            header = rate.wait(timeout(idle, reader.next_header())) => header?,
        };
        let header = header
            .map_err(|_| JobError::Timeout {
                what: "waiting for the client's data",
                limit: idle,
            })??
            .ok_or(JobError::ClientGone)?;
        match header.kind {
            FrameKind::Data => {
                let slow_payload = |_| JobError::Timeout {
                    what: "reading a data frame",
                    limit: idle,
                };
                let Some(mut buf) = free.recv().await else {
                    // The other stages stopped (the job failed). Consume
                    // this frame's payload so the stream stays in step for
                    // the discard that follows.
                    timeout(idle, reader.read_body(header))
                        .await
                        .map_err(slow_payload)??;
                    return Ok(ReadEnd::Stopped);
                };
                rate.wait(timeout(
                    idle,
                    reader.read_payload(buf.payload_mut(header.len as usize)),
                ))
                .await?
                .map_err(slow_payload)??;
                bytes_in += u64::from(header.len);
                if bytes_in > max_file_size {
                    return Err(JobError::FileTooLarge {
                        limit: max_file_size,
                    });
                }
                if input.send(Input::Chunk(buf)).await.is_err() {
                    return Ok(ReadEnd::Stopped);
                }
            }
            FrameKind::End => {
                // End's payload must be empty, but a header may announce
                // up to a control frame's worth: bound the wait for it.
                rate.wait(timeout(idle, reader.read_body(header)))
                    .await?
                    .map_err(|_| JobError::Timeout {
                        what: "reading an end frame",
                        limit: idle,
                    })??;
                let _ = input.send(Input::End).await;
                return Ok(ReadEnd::SawEnd);
            }
            other => {
                return Err(JobError::UnexpectedFrame {
                    got: other.name(),
                    state: "during a job (only data and end are allowed)",
                });
            }
        }
    }
}

async fn cipher_stage(
    mut input: mpsc::Receiver<Input>,
    output: mpsc::Sender<Output>,
    spec: CipherSpec,
    queue_us: u64,
    cancel: &CancellationToken,
    shared: &Arc<Shared>,
) -> Result<(), JobError> {
    let pool = &shared.pool;
    let mut processing = Duration::ZERO;
    let mut bytes_in = 0u64;
    let fail = |error: JobError| async {
        let _ = output.send(Output::Failed(error.to_frame())).await;
        Err(error)
    };
    let derive = |password: Zeroizing<Vec<u8>>, salt: [u8; SALT_LEN], iterations: u32| {
        derive_in_slices(password, salt, iterations, cancel, shared)
    };
    let CipherSpec { operation, key } = spec;
    let (mut cipher, header) = match (operation, key) {
        // Key source 1, encryption: PBKDF2 in slices, then the stream.
        (
            Operation::Encrypt,
            KeySource::Password {
                iterations,
                password,
            },
        ) => {
            let salt = match random_salt() {
                Ok(salt) => salt,
                Err(error) => return fail(error.into()).await,
            };
            let password = Zeroizing::new(password.as_bytes().to_vec());
            let derived = match derive(password, salt, iterations).await {
                Ok((derived, elapsed)) => {
                    processing += elapsed;
                    derived
                }
                Err(JobError::ShuttingDown) => return fail(JobError::ShuttingDown).await,
                Err(error) => return Err(error),
            };
            let (stream, header) = EncryptStream::with_key(&derived.key, &derived.iv, &salt);
            (JobCipher::Encrypt(stream), Some(header))
        }
        // Key source 2 (no derivation), or a decryption whose key is
        // derived once the salt has arrived (below).
        (operation, key) => {
            let started = pool
                .run(move || JobCipher::start(operation, &key))
                .await
                .map_err(|err| JobError::Internal(err.to_string()))?;
            processing += started.elapsed;
            match started.value {
                Ok(started) => started,
                Err(error) => return fail(error.into()).await,
            }
        }
    };
    if let Some(header) = header {
        output
            .send(Output::Header(header))
            .await
            .map_err(|_| JobError::Aborted)?;
    }
    loop {
        let next = tokio::select! {
            biased;
            () = shared.shutdown.aborting() => return fail(JobError::ShuttingDown).await,
            next = input.recv() => next,
        };
        match next.ok_or(JobError::Aborted)? {
            Input::Chunk(mut buf) => {
                bytes_in += buf.len() as u64;
                shared
                    .metrics
                    .add_input_bytes(operation.name(), buf.len() as u64);
                // Key source 1, decryption: this chunk completes the header.
                if let JobCipher::Decrypt(stream) = &mut cipher
                    && let Some(salt) = stream.salt_needed(&buf)
                    && let Some((password, iterations)) = stream.password()
                {
                    let password = Zeroizing::new(password.to_vec());
                    match derive(password, salt, iterations).await {
                        Ok((derived, elapsed)) => {
                            processing += elapsed;
                            stream.provide_key(derived, salt);
                        }
                        Err(JobError::ShuttingDown) => {
                            return fail(JobError::ShuttingDown).await;
                        }
                        Err(error) => return Err(error),
                    }
                }
                let timed = match cipher {
                    // Encryption goes to the lane engine, beside other jobs'.
                    JobCipher::Encrypt(stream) => {
                        let timed = pool
                            .encrypt_chunk(stream, buf)
                            .await
                            .map_err(|err| JobError::Internal(err.to_string()))?;
                        let (stream, buf) = timed.value;
                        Timed {
                            value: (JobCipher::Encrypt(stream), buf, Ok(())),
                            elapsed: timed.elapsed,
                        }
                    }
                    decrypt @ JobCipher::Decrypt(_) => {
                        let mut decrypt = decrypt;
                        pool.run(move || {
                            let result = decrypt.update(&mut buf);
                            (decrypt, buf, result)
                        })
                        .await
                        .map_err(|err| JobError::Internal(err.to_string()))?
                    }
                };
                processing += timed.elapsed;
                let (returned, buf, result) = timed.value;
                cipher = returned;
                if let Err(error) = result {
                    return fail(error.into()).await;
                }
                output
                    .send(Output::Bytes(buf))
                    .await
                    .map_err(|_| JobError::Aborted)?;
            }
            Input::End => {
                let timed = pool
                    .run(move || {
                        let mut last = ChunkBuf::with_capacity(BLOCK);
                        let result = cipher.finish(&mut last);
                        (last, result)
                    })
                    .await
                    .map_err(|err| JobError::Internal(err.to_string()))?;
                processing += timed.elapsed;
                let (last, result) = timed.value;
                if let Err(error) = result {
                    return fail(error.into()).await;
                }
                output
                    .send(Output::Bytes(last))
                    .await
                    .map_err(|_| JobError::Aborted)?;
                let done = Done {
                    bytes_in,
                    bytes_out: 0,
                    queue_us,
                    processing_us: micros(processing),
                };
                output
                    .send(Output::Done(done))
                    .await
                    .map_err(|_| JobError::Aborted)?;
                return Ok(());
            }
        }
    }
}

async fn write_stage<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    mut output: mpsc::Receiver<Output>,
    free: mpsc::Sender<ChunkBuf>,
    idle: Duration,
    operation: &'static str,
    shared: &Arc<Shared>,
) -> Result<WriteEnd, JobError> {
    let mut bytes_out = 0u64;
    let mut end = WriteEnd {
        done: None,
        error_sent: false,
    };
    let stalled = |_| JobError::Timeout {
        what: "client is not reading the output",
        limit: idle,
    };
    while let Some(next) = output.recv().await {
        match next {
            Output::Header(header) => {
                timeout(idle, writer.send_data(&header))
                    .await
                    .map_err(stalled)??;
                bytes_out += header.len() as u64;
                shared
                    .metrics
                    .add_output_bytes(operation, header.len() as u64);
            }
            Output::Bytes(buf) => {
                timeout(idle, writer.send_data(buf.as_slice()))
                    .await
                    .map_err(stalled)??;
                bytes_out += buf.len() as u64;
                shared.metrics.add_output_bytes(operation, buf.len() as u64);
                let _ = free.try_send(buf);
            }
            Output::Done(mut done) => {
                done.bytes_out = bytes_out;
                timeout(idle, writer.send(&Message::Done(done)))
                    .await
                    .map_err(stalled)??;
                end.done = Some(done);
            }
            Output::Failed(frame) => {
                timeout(idle, writer.send(&Message::Error(frame)))
                    .await
                    .map_err(stalled)??;
                end.error_sent = true;
            }
        }
    }
    Ok(end)
}

/// Derives key and IV from a password (key source 1) on the worker pool, a
/// slice of [`SLICE_ITERATIONS`] at a time, so that the derivation stops
/// between slices when the job is cancelled (the client left: `Aborted`,
/// the failing stage reports why) or the server cuts running jobs off
/// (`ShuttingDown`). Returns the key and the time spent on the pool.
async fn derive_in_slices(
    password: Zeroizing<Vec<u8>>,
    salt: [u8; SALT_LEN],
    iterations: u32,
    cancel: &CancellationToken,
    shared: &Arc<Shared>,
) -> Result<(DerivedKey, Duration), JobError> {
    let mut derivation = SlicedPbkdf2::new(&password, &salt, iterations);
    drop(password);
    let mut elapsed = Duration::ZERO;
    loop {
        if cancel.is_cancelled() {
            return Err(JobError::Aborted);
        }
        if shared.shutdown.is_aborting() {
            return Err(JobError::ShuttingDown);
        }
        let timed = shared
            .pool
            .run(move || {
                let derived = derivation.run(SLICE_ITERATIONS);
                (derivation, derived)
            })
            .await
            .map_err(|err| JobError::Internal(err.to_string()))?;
        elapsed += timed.elapsed;
        let (returned, derived) = timed.value;
        if let Some(derived) = derived {
            return Ok((derived, elapsed));
        }
        derivation = returned;
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
