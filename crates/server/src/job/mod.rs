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
//! back while input still arrives. What the job does to its bytes (key,
//! header, chunks, padding, counts) is [`core::JobCore`], without I/O. A job owns [`BUFFERS_PER_JOB`] chunk
//! buffers, which circulate; when they are all in flight the read stage
//! stops reading and TCP flow control slows the client down. Memory per
//! job is therefore bounded whatever the file size.

pub mod age;
pub mod core;
mod encrypt;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, Done, Format, FrameKind, FrameReader, FrameWriter, KeySource, Message, Operation,
    ProtoError, Queued, Started,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use self::age::AgeJob;
use self::core::{JobCore, KeyRequest, Start};
use crate::admission::{Entry, Permit, TicketEvent};
use crate::cipher::sliced::{SLICE_ITERATIONS, SlicedPbkdf2};
use crate::cipher::{BLOCK, ChunkBuf, DerivedKey, HEADER_LEN};
use crate::client_key::ClientKey;
use crate::error::JobError;
use crate::input_rate::{ByteCounter, InputRate};
use crate::lanes::Backlog;
use crate::metrics::{Metrics, StreamLabels};
use crate::pool::WorkerPool;
use crate::shared::{JobContext, JobLimits};
use crate::shutdown::Shutdown;

/// Chunk buffers one job circulates between its stages.
pub const BUFFERS_PER_JOB: usize = 4;

/// How a job ended, with what the session needs to carry on. A job never
/// sends an error frame itself: the session tells the client why it failed.
pub struct JobOutcome {
    /// The figures sent in the done frame, or why the job failed.
    pub result: Result<Done, JobError>,
    /// Whether the client's input was read up to its end frame (or, before
    /// the job started, whether the client had nothing to send yet).
    pub input_finished: bool,
}

impl JobOutcome {
    fn failed_before_start(error: JobError) -> Self {
        JobOutcome {
            result: Err(error),
            input_finished: true,
        }
    }
}

/// Runs one job whose begin frame has been read, and counts it in
/// `aesd_jobs_total` (see [`Tally`]).
pub async fn run<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    begin: Begin,
    client: ClientKey,
    input: &ByteCounter,
    ctx: JobContext<'_>,
) -> JobOutcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let tally = Tally {
        stream: StreamLabels {
            operation: begin.operation.name(),
            format: begin.format.name(),
        },
        received: Instant::now(),
        metrics: ctx.metrics,
        counted: AtomicBool::new(false),
    };
    let outcome = run_uncounted(reader, writer, begin, client, input, ctx, &tally).await;
    tally.ended(&outcome.result);
    outcome
}

/// Counts a job in `aesd_jobs_total` once: a successful job just before its
/// done frame goes out (a client holding the frame finds the job counted,
/// as aesload's metric deltas expect), any other when it ends.
struct Tally<'a> {
    stream: StreamLabels,
    received: Instant,
    metrics: &'a Metrics,
    counted: AtomicBool,
}

impl Tally<'_> {
    /// The job is done: counted with its processing and total time.
    fn done(&self, done: &Done) {
        if !self.counted.swap(true, Ordering::Relaxed) {
            let processing = Duration::from_micros(done.processing_us);
            self.metrics
                .job_finished(&self.stream, Ok((processing, self.received.elapsed())));
        }
    }

    /// The job ended: counted with its error unless already counted.
    fn ended(&self, result: &Result<Done, JobError>) {
        match result {
            Ok(done) => self.done(done),
            Err(error) => {
                if !self.counted.swap(true, Ordering::Relaxed) {
                    self.metrics.job_finished(&self.stream, Err(error.kind()));
                }
            }
        }
    }
}

/// [`run`] without the count.
async fn run_uncounted<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    begin: Begin,
    client: ClientKey,
    input: &ByteCounter,
    ctx: JobContext<'_>,
    tally: &Tally<'_>,
) -> JobOutcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let received = tally.received;
    let limits = ctx.limits;
    if let Err(error) = JobCore::check(&begin, &limits) {
        return JobOutcome::failed_before_start(error);
    }
    // Key source 1: the server will run PBKDF2, out of the client's budget.
    if let KeySource::Password { iterations, .. } = &begin.key
        && let Err(exceeded) = ctx.kdf_budget.take(client, *iterations, Instant::now())
    {
        ctx.metrics.job_refused("kdf_budget");
        return JobOutcome::failed_before_start(exceeded.into());
    }
    let _permit = match admit(reader, writer, client, ctx).await {
        Ok(permit) => permit,
        Err(error) => return JobOutcome::failed_before_start(error),
    };
    let queue_wait = received.elapsed();
    ctx.metrics
        .observe_queue_wait(begin.operation.name(), queue_wait);
    let queue_us = micros(queue_wait);
    if let Err(error) = writer.send(&Message::Started(Started { queue_us })).await {
        return JobOutcome::failed_before_start(error.into());
    }

    let stream = tally.stream.clone();
    let chunk = limits.chunk_size as usize;
    let (free_tx, free_rx) = mpsc::channel(BUFFERS_PER_JOB);
    for _ in 0..BUFFERS_PER_JOB {
        let _ = free_tx.try_send(ChunkBuf::with_capacity(chunk));
    }
    let (input_tx, input_rx) = mpsc::channel(BUFFERS_PER_JOB);
    let (output_tx, output_rx) = mpsc::channel(BUFFERS_PER_JOB);
    // An encryption's chunks read and not yet encrypted, for the lane
    // occupancy of the jobs with data.
    let backlog = (begin.operation == Operation::Encrypt
        && begin.format == Format::OpensslSaltedPbkdf2)
        .then(|| ctx.pool.backlog());

    // Set when a stage fails: a key derivation stops at its next slice, the
    // read stage at the next frame boundary, so the session can tell the
    // client at once.
    let cancel = CancellationToken::new();
    let cancel_on_error = |failed: bool| {
        if failed {
            cancel.cancel();
        }
    };
    let (read, cipher, write) = tokio::join!(
        async {
            let rate = InputRate::new(
                limits.min_input_rate,
                limits.input_rate_window,
                input.clone(),
            );
            let result = read_stage(
                reader,
                free_rx,
                input_tx,
                backlog.as_ref(),
                limits,
                rate,
                (ctx.shutdown, &cancel),
            )
            .await;
            cancel_on_error(result.is_err());
            result
        },
        async {
            let result = cipher_stage(
                input_rx,
                output_tx,
                begin,
                queue_us,
                &cancel,
                backlog.as_ref(),
                ctx,
            )
            .await;
            cancel_on_error(result.is_err());
            result
        },
        async {
            let result = write_stage(writer, output_rx, free_tx, limits, &stream, tally).await;
            cancel_on_error(result.is_err());
            result
        },
    );

    let input_finished = matches!(read, Ok(ReadEnd::SawEnd));
    let done = write.as_ref().ok().copied().flatten();
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
        input_finished,
    }
}

/// Waits for a slot, telling the client its queue position as it changes.
async fn admit<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    client: ClientKey,
    ctx: JobContext<'_>,
) -> Result<Permit, JobError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let entry = ctx.admission.enter(client).inspect_err(|refused| {
        ctx.metrics.job_refused(refused.reason());
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
                TicketEvent::Refused(refused) => {
                    ctx.metrics.job_refused(refused.reason());
                    return Err(refused.into());
                }
                TicketEvent::Moved(position) => {
                    writer.send(&Message::Queued(Queued { position })).await?;
                }
            },
            () = ctx.shutdown.stopping() => return Err(JobError::ShuttingDown),
            peer = reader.await_input(), if watch_peer => match peer {
                // The client left the queue: dropping the ticket frees its place.
                Ok(true) | Err(_) => return Err(JobError::ClientGone),
                // It sent early input; it is alive, stop watching.
                Ok(false) => watch_peer = false,
            },
        }
    }
}

enum Input {
    Chunk(ChunkBuf),
    End,
}

enum Output {
    Header([u8; HEADER_LEN]),
    Bytes(ChunkBuf),
    /// Output of another size than its input (age): sent in data frames of
    /// at most the chunk size; `spent` is the input's buffer, freed after.
    Owned {
        bytes: Vec<u8>,
        spent: Option<ChunkBuf>,
    },
    Done(Done),
}

enum ReadEnd {
    SawEnd,
    Stopped,
}

/// Reads the job's frames into free chunk buffers until its end frame
/// (counting an encryption's chunks in its `backlog`). Stops between
/// frames (never inside one: the stream stays in step for the session)
/// when another stage failed (`cancel`) or running jobs are cut off.
async fn read_stage<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    mut free: mpsc::Receiver<ChunkBuf>,
    input: mpsc::Sender<Input>,
    backlog: Option<&Backlog<'_>>,
    limits: JobLimits,
    mut rate: InputRate,
    (shutdown, cancel): (&Shutdown, &CancellationToken),
) -> Result<ReadEnd, JobError> {
    let (idle, max_file_size) = (limits.idle_timeout, limits.max_file_size);
    let mut bytes_in = 0u64;
    loop {
        // `next_header` is cancel safe: giving up here loses no bytes.
        let header = tokio::select! {
            biased;
            () = shutdown.aborting() => return Ok(ReadEnd::Stopped),
            () = cancel.cancelled() => return Ok(ReadEnd::Stopped),
            header = rate.wait(timeout(idle, reader.next_header())) => header?,
        };
        let header = header
            .map_err(|_| JobError::Timeout {
                what: "waiting for the client's data",
                limit: idle,
            })??
            .ok_or(JobError::ClientGone)?;
        match header.kind {
            FrameKind::Data if header.len == 0 => return Err(empty_data_frame()),
            FrameKind::Data => {
                let slow_payload = |_| JobError::Timeout {
                    what: "reading a data frame",
                    limit: idle,
                };
                let Some(mut buf) = free.recv().await else {
                    // The other stages stopped (the job failed). Consume
                    // this frame's payload so the stream stays in step for
                    // the discard that follows.
                    timeout(idle, reader.skip_payload(header))
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
                if let Some(backlog) = backlog {
                    backlog.read();
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

/// Starts the job's core (deriving an encryption's key in slices), then
/// transforms each chunk on the worker pool (an encryption through the
/// lane engine, beside other jobs') and passes it on; the padding and the
/// done figures at the end. A failure ends the stage with its error; a
/// derivation stops at `cancel`.
async fn cipher_stage(
    mut input: mpsc::Receiver<Input>,
    output: mpsc::Sender<Output>,
    begin: Begin,
    queue_us: u64,
    cancel: &CancellationToken,
    backlog: Option<&Backlog<'_>>,
    ctx: JobContext<'_>,
) -> Result<(), JobError> {
    if begin.format == Format::Age {
        return age_stage(input, output, begin, queue_us, ctx).await;
    }
    let (pool, shutdown, metrics) = (ctx.pool, ctx.shutdown, ctx.metrics);
    let stream = StreamLabels {
        operation: begin.operation.name(),
        format: begin.format.name(),
    };
    let limits = ctx.limits;
    let mut processing = Duration::ZERO;
    let started = pool
        .run(move || JobCore::start(begin, &limits))
        .await
        .map_err(|err| JobError::Internal(err.to_string()))?;
    processing += started.elapsed;
    let (core, header) = match started.value? {
        Start::Ready { core, header } => (core, header),
        // Key source 1, encryption: PBKDF2 in slices, then the stream.
        Start::DeriveKey(pending) => {
            let (derived, elapsed) =
                derive_in_slices(pending.request(), cancel, pool, shutdown).await?;
            processing += elapsed;
            let (core, header) = pending.keyed(&derived);
            (core, Some(header))
        }
    };
    if let Some(header) = header {
        output
            .send(Output::Header(header))
            .await
            .map_err(|_| JobError::Aborted)?;
    }
    let mut core = match core {
        // Encryption: the lane engine, beside other jobs' encryptions.
        JobCore::Encrypt(encrypt) => {
            let stages = encrypt::Stages {
                input,
                output: &output,
                labels: &stream,
                backlog,
            };
            return encrypt::run(stages, encrypt, processing, queue_us, ctx).await;
        }
        decrypt @ JobCore::Decrypt(_) => decrypt,
    };
    loop {
        let next = tokio::select! {
            biased;
            () = shutdown.aborting() => return Err(JobError::ShuttingDown),
            next = input.recv() => next,
        };
        match next.ok_or(JobError::Aborted)? {
            Input::Chunk(mut buf) => {
                metrics.add_input_bytes(&stream, buf.len() as u64);
                // Key source 1, decryption: this chunk completes the salt.
                if let Some(request) = core.key_request(&buf) {
                    let salt = request.salt;
                    let (derived, elapsed) =
                        derive_in_slices(request, cancel, pool, shutdown).await?;
                    processing += elapsed;
                    core.provide_key(derived, salt);
                }
                let mut decrypt = core;
                let timed = pool
                    .run(move || {
                        let result = decrypt.update(&mut buf);
                        (decrypt, buf, result)
                    })
                    .await
                    .map_err(|err| JobError::Internal(err.to_string()))?;
                processing += timed.elapsed;
                let (returned, buf, result) = timed.value;
                core = returned;
                result?;
                output
                    .send(Output::Bytes(buf))
                    .await
                    .map_err(|_| JobError::Aborted)?;
            }
            Input::End => return finish(core, &output, processing, queue_us, pool).await,
        }
    }
}

/// The end of a job in the openssl format: the last block (the padding,
/// or its check) on the worker pool, then the last bytes and the done
/// figures to the write stage. `processing` is the job's time on the pool
/// so far.
async fn finish(
    core: JobCore,
    output: &mpsc::Sender<Output>,
    processing: Duration,
    queue_us: u64,
    pool: &WorkerPool,
) -> Result<(), JobError> {
    let timed = pool
        .run(move || {
            let mut last = ChunkBuf::with_capacity(BLOCK);
            let result = core.finish(&mut last);
            (last, result)
        })
        .await
        .map_err(|err| JobError::Internal(err.to_string()))?;
    let (last, bytes_in) = timed.value;
    let bytes_in = bytes_in?;
    output
        .send(Output::Bytes(last))
        .await
        .map_err(|_| JobError::Aborted)?;
    let done = Done {
        bytes_in,
        bytes_out: 0,
        queue_us,
        processing_us: micros(processing + timed.elapsed),
    };
    output
        .send(Output::Done(done))
        .await
        .map_err(|_| JobError::Aborted)
}

/// The cipher stage of an age job (format 2): each chunk through
/// [`AgeJob`] on the worker pool, its output passed on as it is released.
async fn age_stage(
    mut input: mpsc::Receiver<Input>,
    output: mpsc::Sender<Output>,
    begin: Begin,
    queue_us: u64,
    ctx: JobContext<'_>,
) -> Result<(), JobError> {
    let (pool, shutdown, metrics) = (ctx.pool, ctx.shutdown, ctx.metrics);
    let stream = StreamLabels {
        operation: begin.operation.name(),
        format: begin.format.name(),
    };
    let pool_failed = |err: crate::pool::PoolError| JobError::Internal(err.to_string());
    let started = pool
        .run(move || AgeJob::start(begin))
        .await
        .map_err(pool_failed)?;
    let mut processing = started.elapsed;
    let mut job = started.value?;
    let send = |message| async { output.send(message).await.map_err(|_| JobError::Aborted) };
    loop {
        let next = tokio::select! {
            biased;
            () = shutdown.aborting() => return Err(JobError::ShuttingDown),
            next = input.recv() => next,
        };
        match next.ok_or(JobError::Aborted)? {
            Input::Chunk(buf) => {
                metrics.add_input_bytes(&stream, buf.len() as u64);
                let timed = pool
                    .run(move || {
                        // Empty: a sealed chunk is handed over without a copy.
                        let mut out = Vec::new();
                        let result = job.update(buf.as_slice(), &mut out);
                        (job, buf, out, result)
                    })
                    .await
                    .map_err(pool_failed)?;
                processing += timed.elapsed;
                let (returned, buf, bytes, result) = timed.value;
                job = returned;
                result?;
                send(Output::Owned {
                    bytes,
                    spent: Some(buf),
                })
                .await?;
            }
            Input::End => {
                let timed = pool
                    .run(move || {
                        let mut out = Vec::new();
                        let result = job.finish(&mut out);
                        (out, result)
                    })
                    .await
                    .map_err(pool_failed)?;
                processing += timed.elapsed;
                let (bytes, bytes_in) = timed.value;
                let bytes_in = bytes_in?;
                send(Output::Owned { bytes, spent: None }).await?;
                send(Output::Done(Done {
                    bytes_in,
                    bytes_out: 0,
                    queue_us,
                    processing_us: micros(processing),
                }))
                .await?;
                return Ok(());
            }
        }
    }
}

/// Sends the cipher stage's output as data frames, then the done frame
/// (counting the job first); returns the chunk buffers to the read stage.
/// Its result is the done figures, or `None` when the cipher stage stopped
/// before them.
async fn write_stage<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    mut output: mpsc::Receiver<Output>,
    free: mpsc::Sender<ChunkBuf>,
    limits: JobLimits,
    stream: &StreamLabels,
    tally: &Tally<'_>,
) -> Result<Option<Done>, JobError> {
    let metrics = tally.metrics;
    let idle = limits.idle_timeout;
    let mut bytes_out = 0u64;
    let mut sent = None;
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
                metrics.add_output_bytes(stream, header.len() as u64);
            }
            Output::Bytes(buf) => {
                timeout(idle, writer.send_data(buf.as_slice()))
                    .await
                    .map_err(stalled)??;
                bytes_out += buf.len() as u64;
                metrics.add_output_bytes(stream, buf.len() as u64);
                let _ = free.try_send(buf);
            }
            Output::Owned { bytes, spent } => {
                for piece in bytes.chunks(limits.chunk_size as usize) {
                    timeout(idle, writer.send_data(piece))
                        .await
                        .map_err(stalled)??;
                }
                bytes_out += bytes.len() as u64;
                metrics.add_output_bytes(stream, bytes.len() as u64);
                if let Some(buf) = spent {
                    let _ = free.try_send(buf);
                }
            }
            Output::Done(mut done) => {
                done.bytes_out = bytes_out;
                tally.done(&done);
                timeout(idle, writer.send(&Message::Done(done)))
                    .await
                    .map_err(stalled)??;
                sent = Some(done);
            }
        }
    }
    Ok(sent)
}

/// Derives key and IV from a password (key source 1) on the worker pool, a
/// slice of [`SLICE_ITERATIONS`] at a time, so that the derivation stops
/// between slices when the job is cancelled (the client left: `Aborted`,
/// the failing stage reports why) or the server cuts running jobs off
/// (`ShuttingDown`). Returns the key and the time spent on the pool.
async fn derive_in_slices(
    request: KeyRequest<'_>,
    cancel: &CancellationToken,
    pool: &WorkerPool,
    shutdown: &Shutdown,
) -> Result<(DerivedKey, Duration), JobError> {
    let mut derivation = SlicedPbkdf2::new(request.password, &request.salt, request.iterations);
    let mut elapsed = Duration::ZERO;
    loop {
        if cancel.is_cancelled() {
            return Err(JobError::Aborted);
        }
        if shutdown.is_aborting() {
            return Err(JobError::ShuttingDown);
        }
        let timed = pool
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

/// The error for an empty data frame: PROTOCOL.md says data frames are
/// never empty, and an empty one would cost the server a frame's work
/// without a byte counted against `max-file-size`.
pub(crate) fn empty_data_frame() -> JobError {
    JobError::Protocol(ProtoError::Malformed {
        kind: "data",
        reason: "a data frame is never empty",
    })
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
