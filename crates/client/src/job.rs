//! Running one job over a [`Client`]: from any async reader to any async
//! writer, full duplex.
//!
//! The client sends begin, follows its queue position until the server
//! says started, then sends input and receives output at the same time.
//! The report separates total, queue, processing (both measured by the
//! server) and network time (the remainder).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aesd_proto::{
    Begin, DerivedKeyParams, Done, Format, FrameKind, KeySource, Message, Operation, Password,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use crate::connection::Client;
use crate::error::ClientError;
use crate::key_source::{self, ChosenKey, KeyDerivation};

/// Default PBKDF2 iteration count, as `openssl enc -pbkdf2`.
pub const DEFAULT_ITERATIONS: u32 = 10_000;

/// What to do with the input.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Encrypt or decrypt.
    pub operation: Operation,
    /// The password.
    pub password: Password,
    /// PBKDF2 iterations (openssl's `-iter`).
    pub iterations: u32,
    /// Where the key is derived: by default on this client when the
    /// server accepts derived keys (the password is then never sent).
    pub key_derivation: KeyDerivation,
}

impl JobSpec {
    /// `operation` with `password` and `iterations` of PBKDF2, the key
    /// derived where it suits ([`KeyDerivation::Auto`]).
    pub fn with_password(operation: Operation, password: &str, iterations: u32) -> JobSpec {
        JobSpec {
            operation,
            password: Password::new(password.as_bytes().to_vec()),
            iterations,
            key_derivation: KeyDerivation::Auto,
        }
    }
}

/// A step of a running job, reported to the observer of
/// [`Client::run_job_observed`] (for live progress displays: the
/// [`JobReport`] only arrives at the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEvent {
    /// Begin was sent: the job waits for the server to admit it.
    BeginSent,
    /// The server reported the job's place in its queue (1 = next).
    Queued {
        /// The position.
        position: u32,
    },
    /// The server admitted the job: data flows from now on.
    Started,
}

/// What a finished job measured.
#[derive(Debug, Clone, PartialEq)]
pub struct JobReport {
    /// Input bytes sent.
    pub bytes_sent: u64,
    /// Output bytes received.
    pub bytes_received: u64,
    /// Begin sent to done received.
    pub total: Duration,
    /// Waiting for admission, as measured by the server.
    pub queue: Duration,
    /// Cryptographic work, as measured by the server.
    pub processing: Duration,
    /// The rest: `total − queue − processing` (moving bytes).
    pub network: Duration,
    /// Every queue position the server reported, in order (empty when
    /// the job was admitted at once).
    pub queue_positions: Vec<u32>,
    /// The server's figures.
    pub done: Done,
}

impl Client {
    /// Runs one job: `input` is read to its end and sent, the result is
    /// written to `output`. On a server error the connection stays usable
    /// when the error concerned only this job (wrong password, bad
    /// ciphertext, busy, limits); otherwise later calls fail with
    /// [`ClientError::Broken`].
    pub async fn run_job<R, W>(
        &mut self,
        spec: &JobSpec,
        input: &mut R,
        output: &mut W,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        self.run_job_observed(spec, input, output, |_| {}).await
    }

    /// [`Client::run_job`], telling `observe` when begin is sent, each
    /// queue position and when the server starts the job.
    pub async fn run_job_observed<R, W, F>(
        &mut self,
        spec: &JobSpec,
        input: &mut R,
        output: &mut W,
        observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        if self.broken {
            return Err(ClientError::Broken);
        }
        let key = self.prepare_key(spec, input).await?;
        self.run_prepared_job(spec, key, input, output, observe)
            .await
    }

    /// What this connection offers the key choice: the welcome's derived
    /// keys flag and whether it is under TLS.
    fn key_offer(&self) -> key_source::Offer {
        key_source::Offer {
            derived_keys: self.welcome.derived_keys,
            tls: self.tls,
        }
    }

    /// Chooses the key source of a job on this server (the server's
    /// welcome says whether it accepts derived keys) and, when this client
    /// derives the key, runs PBKDF2 (on tokio's blocking pool): with a
    /// fresh random salt to encrypt, with the salt of the `Salted__` header
    /// read from `input` to decrypt (those 16 bytes are then sent first by
    /// [`Client::run_prepared_job`]). Nothing is sent to the server.
    pub async fn prepare_key<R>(
        &mut self,
        spec: &JobSpec,
        input: &mut R,
    ) -> Result<ChosenKey, ClientError>
    where
        R: AsyncRead + Unpin,
    {
        key_source::choose(spec, self.key_offer(), input).await
    }

    /// [`Client::prepare_key`] for an encryption whose salt, key and IV
    /// the caller derived already ([`key_source::fresh_salt`], then
    /// [`key_source::derive`] with the spec's password and iterations; a
    /// load generator derives the next clients' keys while others run):
    /// `derived` is used when this client would derive the key, the
    /// password is sent when the server derives it. Decryption is refused
    /// ([`ClientError::KeyDerivation`]): it takes the file's salt.
    pub fn prepare_derived_key(
        &self,
        spec: &JobSpec,
        derived: DerivedKeyParams,
    ) -> Result<ChosenKey, ClientError> {
        key_source::choose_derived(spec, self.key_offer(), derived)
    }

    /// [`Client::run_job_observed`] with a key from
    /// [`Client::prepare_key`] (for the same `spec` and `input`) or
    /// [`Client::prepare_derived_key`].
    pub async fn run_prepared_job<R, W, F>(
        &mut self,
        spec: &JobSpec,
        key: ChosenKey,
        input: &mut R,
        output: &mut W,
        observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        self.run_prepared(spec.operation, key, input, output, observe)
            .await
    }

    /// Runs a job whose key source is chosen, keeping the connection's
    /// state: broken unless the job ended with a job-level result.
    pub(crate) async fn run_prepared<R, W, F>(
        &mut self,
        operation: Operation,
        key: ChosenKey,
        input: &mut R,
        output: &mut W,
        observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        if self.broken {
            return Err(ClientError::Broken);
        }
        self.broken = true;
        let result = self
            .run_job_inner(operation, key, input, output, observe)
            .await;
        self.broken = match &result {
            Ok(_) => false,
            Err(ClientError::Server(frame)) => frame.code.closes_connection(),
            Err(ClientError::Output(_)) => true,
            Err(_) => true,
        };
        result
    }

    async fn run_job_inner<R, W, F>(
        &mut self,
        operation: Operation,
        chosen: ChosenKey,
        input: &mut R,
        output: &mut W,
        mut observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        let started = Instant::now();
        let mut header = ExpectedHeader::for_job(operation, &chosen.key);
        let format = match chosen.key {
            KeySource::AgeRecipients(_) | KeySource::AgeFileKey(_) | KeySource::KeyName(_) => {
                Format::Age
            }
            KeySource::Password { .. } | KeySource::Derived(_) => Format::OpensslSaltedPbkdf2,
        };
        let begin = Message::Begin(Begin {
            operation,
            format,
            key: chosen.key,
        });
        begin.to_bytes().map_err(ClientError::Request)?;
        self.writer.send(&begin).await?;
        observe(JobEvent::BeginSent);

        let idle = self.idle_timeout;
        let mut queue_positions = Vec::new();
        loop {
            // The first answer to begin must come within the idle timeout;
            // once queued, the server reports positions only as they move.
            let next = if queue_positions.is_empty() {
                within(idle, "after begin", self.reader.read_message()).await?
            } else {
                self.reader.read_message().await?
            };
            match next {
                Some(Message::Queued(queued)) => {
                    observe(JobEvent::Queued {
                        position: queued.position,
                    });
                    queue_positions.push(queued.position);
                }
                Some(Message::Started(_)) => {
                    observe(JobEvent::Started);
                    break;
                }
                Some(Message::Error(error)) => return Err(ClientError::Server(error)),
                Some(other) => {
                    return Err(ClientError::Unexpected {
                        got: other.kind().name(),
                        state: "while waiting for admission",
                    });
                }
                None => return Err(ClientError::Closed),
            }
        }

        let chunk = self.welcome.max_data as usize;
        // Set when the server has failed the job: the sender stops waiting
        // for input (never in the middle of a frame) and sends end, so the
        // connection stays in step for the next job.
        let stop_sending = Notify::new();
        // Set when reading the input failed: the job cannot go on, and
        // waiting for the server's answer would wait for its input timeout.
        let input_failed = Notify::new();
        let Client { reader, writer, .. } = self;
        let read_ahead = chosen.read_ahead;
        let activity = Mutex::new(Activity {
            last: Instant::now(),
            reading_input: false,
        });
        let send = async {
            let mut buf = vec![0u8; chunk];
            // A decryption's header, read to find the salt or the file
            // key, goes first: whole frames of it, then the rest merged
            // with the first input.
            let mut sent = 0u64;
            let mut pending = &read_ahead[..];
            while pending.len() > chunk {
                within(idle, "taking input", writer.send_data(&pending[..chunk])).await?;
                Activity::progress(&activity);
                sent += chunk as u64;
                pending = &pending[chunk..];
            }
            buf[..pending.len()].copy_from_slice(pending);
            let mut ahead = pending.len();
            loop {
                Activity::reading_input(&activity, true);
                let n = tokio::select! {
                    biased;
                    () = stop_sending.notified() => break,
                    n = fill(input, &mut buf[ahead..]) => n.map_err(ClientError::Input)? + ahead,
                };
                Activity::reading_input(&activity, false);
                ahead = 0;
                if n == 0 {
                    break;
                }
                within(idle, "taking input", writer.send_data(&buf[..n])).await?;
                Activity::progress(&activity);
                sent += n as u64;
            }
            Activity::reading_input(&activity, false);
            within(idle, "taking the end frame", writer.send(&Message::End)).await?;
            Ok::<u64, ClientError>(sent)
        };
        let send = async {
            let sent = send.await;
            if let Err(ClientError::Input(_)) = &sent {
                input_failed.notify_one();
            }
            sent
        };
        let receive = async {
            let mut received = 0u64;
            // Data payloads land here, one frame at a time (no copy).
            let mut payload = Vec::with_capacity(chunk);
            let result = loop {
                let next = tokio::select! {
                    biased;
                    // The connection is left mid-frame: the job's error
                    // (the input's) marks it broken.
                    () = input_failed.notified() => break Err(ClientError::Broken),
                    next = next_frame(reader, &mut payload, idle, &activity) => next,
                };
                Activity::progress(&activity);
                match next {
                    Ok(Some(Incoming::Data)) => {
                        if let Err(err) = header.check(received, &payload) {
                            break Err(err);
                        }
                        if let Err(err) = output.write_all(&payload).await {
                            break Err(ClientError::Output(err));
                        }
                        received += payload.len() as u64;
                    }
                    Ok(Some(Incoming::Message(Message::Done(done)))) => {
                        match header.finish(received) {
                            Ok(()) => break Ok((received, done)),
                            Err(err) => break Err(err),
                        }
                    }
                    Ok(Some(Incoming::Message(Message::Error(error)))) => {
                        break Err(ClientError::Server(error));
                    }
                    Ok(Some(Incoming::Message(other))) => {
                        break Err(ClientError::Unexpected {
                            got: other.kind().name(),
                            state: "during the job",
                        });
                    }
                    Ok(None) => break Err(ClientError::Closed),
                    Err(err) => break Err(err),
                }
            };
            // The last frames may hold plaintext or a file key (a
            // decryption's, a data key's, an unwrap's answer).
            zeroize::Zeroize::zeroize(&mut payload);
            if result.is_err() {
                stop_sending.notify_one();
            }
            result
        };
        let (sent, received) = tokio::join!(send, receive);
        if let Err(err @ ClientError::Input(_)) = sent {
            return Err(err);
        }
        let (bytes_received, done) = received?;
        let bytes_sent = sent?;
        check_count("input", done.bytes_in, bytes_sent)?;
        check_count("output", done.bytes_out, bytes_received)?;
        output.flush().await.map_err(ClientError::Output)?;
        let total = started.elapsed();
        let queue = Duration::from_micros(done.queue_us);
        let processing = Duration::from_micros(done.processing_us);
        Ok(JobReport {
            bytes_sent,
            bytes_received,
            total,
            queue,
            processing,
            network: total.saturating_sub(queue).saturating_sub(processing),
            queue_positions,
            done,
        })
    }
}

/// The first bytes an encryption's output must have: `Salted__`, and the
/// salt when this client chose it (key source 2). Checked as the output
/// streams in, before any of it is written out.
struct ExpectedHeader {
    bytes: Vec<u8>,
    /// Bytes of the output that came so far (up to `bytes.len()`).
    got: Vec<u8>,
}

impl ExpectedHeader {
    fn for_job(operation: Operation, key: &KeySource) -> ExpectedHeader {
        let mut bytes = Vec::new();
        match (operation, key) {
            (Operation::Encrypt, KeySource::AgeRecipients(_) | KeySource::KeyName(_))
            | (Operation::Rewrap | Operation::DataKeyWrapped, _) => {
                bytes.extend_from_slice(aesd_age::VERSION_LINE);
                bytes.push(b'\n');
            }
            (Operation::Encrypt, KeySource::Derived(params)) => {
                bytes.extend_from_slice(b"Salted__");
                bytes.extend_from_slice(&params.salt);
            }
            (Operation::Encrypt, _) => bytes.extend_from_slice(b"Salted__"),
            // A data key's and an unwrap's answers start with the file
            // key: checked by the caller (crate::by_name).
            (Operation::Decrypt | Operation::DataKey | Operation::Unwrap, _) => {}
        }
        ExpectedHeader {
            bytes,
            got: Vec::new(),
        }
    }

    /// Checks the part of `payload` (output from offset `at`) that falls
    /// within the header.
    fn check(&mut self, at: u64, payload: &[u8]) -> Result<(), ClientError> {
        let want = self.bytes.len();
        let Ok(at) = usize::try_from(at) else {
            return Ok(());
        };
        if at >= want {
            return Ok(());
        }
        let take = payload.len().min(want - at);
        self.got.extend_from_slice(&payload[..take]);
        if self.got[..] != self.bytes[..self.got.len()] {
            return Err(self.wrong());
        }
        Ok(())
    }

    /// The output is complete (`received` bytes): the header must be whole.
    fn finish(&self, received: u64) -> Result<(), ClientError> {
        if received < self.bytes.len() as u64 {
            return Err(self.wrong());
        }
        Ok(())
    }

    fn wrong(&self) -> ClientError {
        ClientError::WrongHeader {
            expected: to_hex(&self.bytes),
            got: to_hex(&self.got),
        }
    }
}

/// `bytes` as lowercase hex digits.
fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// When the job last moved, shared by its sending and receiving halves:
/// the server may be silent while this client waits for its own input.
struct Activity {
    last: Instant,
    reading_input: bool,
}

impl Activity {
    fn reading_input(activity: &Mutex<Activity>, reading: bool) {
        let mut activity = activity.lock().unwrap_or_else(|e| e.into_inner());
        activity.reading_input = reading;
        activity.last = Instant::now();
    }

    fn progress(activity: &Mutex<Activity>) {
        activity.lock().unwrap_or_else(|e| e.into_inner()).last = Instant::now();
    }

    /// When the server's silence becomes a timeout; `None` while this
    /// client is waiting for its input.
    fn deadline(activity: &Mutex<Activity>, idle: Duration) -> Option<Instant> {
        let activity = activity.lock().unwrap_or_else(|e| e.into_inner());
        (!activity.reading_input).then(|| activity.last + idle)
    }
}

/// A frame of the data phase.
enum Incoming {
    /// A data frame, its payload in the caller's buffer.
    Data,
    /// Any other frame.
    Message(Message),
}

/// Reads the next frame; a data frame's payload goes into `payload`
/// (resized to it), straight from the stream.
async fn read_incoming<R: AsyncRead + Unpin>(
    reader: &mut aesd_proto::FrameReader<R>,
    payload: &mut Vec<u8>,
) -> Result<Option<Incoming>, aesd_proto::FrameError> {
    let Some(header) = reader.next_header().await? else {
        return Ok(None);
    };
    if header.kind == FrameKind::Data {
        payload.resize(header.len as usize, 0);
        reader.read_payload(payload).await?;
        return Ok(Some(Incoming::Data));
    }
    Ok(Some(Incoming::Message(reader.read_body(header).await?)))
}

/// The server's next frame during the data phase (a data frame's payload
/// in `payload`), or [`ClientError::IdleTimeout`] once nothing moved for
/// `idle` (time spent waiting for this client's own input does not count).
async fn next_frame<R: AsyncRead + Unpin>(
    reader: &mut aesd_proto::FrameReader<R>,
    payload: &mut Vec<u8>,
    idle: Duration,
    activity: &Mutex<Activity>,
) -> Result<Option<Incoming>, ClientError> {
    let read = read_incoming(reader, payload);
    tokio::pin!(read);
    loop {
        let wake = Activity::deadline(activity, idle).unwrap_or_else(|| Instant::now() + idle);
        tokio::select! {
            message = &mut read => return Ok(message?),
            () = tokio::time::sleep_until(wake.into()) => {
                if Activity::deadline(activity, idle).is_some_and(|d| d <= Instant::now()) {
                    return Err(ClientError::IdleTimeout {
                        secs: idle.as_secs_f64(),
                        state: "during the job",
                    });
                }
            }
        }
    }
}

/// `step`, or [`ClientError::IdleTimeout`] after `idle`.
async fn within<T, E>(
    idle: Duration,
    state: &'static str,
    step: impl Future<Output = Result<T, E>>,
) -> Result<T, ClientError>
where
    ClientError: From<E>,
{
    match tokio::time::timeout(idle, step).await {
        Ok(result) => result.map_err(ClientError::from),
        Err(_) => Err(ClientError::IdleTimeout {
            secs: idle.as_secs_f64(),
            state,
        }),
    }
}

/// The server's count in the done frame must be this client's.
fn check_count(direction: &'static str, server: u64, client: u64) -> Result<(), ClientError> {
    if server == client {
        Ok(())
    } else {
        Err(ClientError::CountMismatch {
            direction,
            server,
            client,
        })
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
async fn fill<R: AsyncRead + Unpin>(input: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = input.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}
