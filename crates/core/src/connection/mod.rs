//! One client connection, without I/O: the protocol's state machine.
//!
//! ```text
//!  hello ──► welcome ──► [auth ──► authorized] ──► idle ◄────────────────┐
//!                                                   │ begin              │
//!                                                   ▼                    │
//!                             admitting (queued N …) ──► started         │
//!                                                          │ data … end  │
//!                                                          ▼             │
//!                                                data … done ───────────┤
//!  a failed job: error frame, its input discarded up to its end ────────┘
//!  a closing error: error frame, then closed
//! ```
//!
//! A [`Connection`] owns no socket, no timer and no thread. Its driver
//! (the server's connection task; the in-memory driver of the benches,
//! fuzzers and tests, [`crate::memory`]) asks it what to read next
//! ([`Connection::poll_read`]), hands it what arrived (`on_hello`,
//! `on_header`, `on_message`, `on_payload` ...), writes what it has to
//! send ([`Connection::poll_transmit`], then [`Connection::on_sent`]),
//! runs the CPU work it hands out ([`Action::Work`], back through
//! [`Connection::on_work_done`]), queues an encryption's feed on the lane
//! engine ([`Action::Lane`]; its chunks come back through the feed, whose
//! waker the driver set with [`Connection::link_lanes`]:
//! [`Connection::on_lanes_done`]), answers its requests (admission:
//! [`Action::Admit`]), and tells it when its deadline
//! ([`Connection::poll_timeout`]) passed ([`Connection::on_timeout`]).
//! Time is the driver's: every event carries `now`.
//!
//! Data payloads are read straight into the job's chunk buffers
//! ([`Read::Payload`] lends one), transformed in place by the work, and
//! sent from the same buffer ([`Payload::Chunk`]), which then comes back to
//! the job: a job circulates at most [`BUFFERS_PER_JOB`] of them, so its
//! memory is bounded whatever the file size, and when they are all in
//! flight the connection stops reading (TCP flow control slows the client).

pub mod error;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_cipher::stream::WipedVec;
use aesd_proto::handshake::PROTOCOL_VERSION;
use aesd_proto::{
    Begin, Done, Format, FrameHeader, FrameKind, Hello, KeySource, Message, Operation, Queued,
    Started as StartedFrame, Welcome,
};

pub use error::{SessionError, empty_data_frame};

use crate::access_token::AccessToken;
use crate::chunk::{ChunkBuf, SpareBuffers};
use crate::job::{
    Derivation, EncryptFeed, JobError, JobLimits, OpensslJob, Refusal, Started, Transform, Work,
};
use crate::lanes::{Backlog, Feed, LaneLoad, LaneLost, Waker};
use crate::openssl_enc::HEADER_LEN;

/// Chunk buffers one job circulates between reading, its work and writing.
pub const BUFFERS_PER_JOB: usize = 4;

/// What every connection of a server is set up with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Name and version sent in the welcome frame.
    pub server_name: String,
    /// Largest data payload accepted (`chunk-size`), and the size of a
    /// job's chunk buffers.
    pub chunk_size: u32,
    /// The token clients must send first, if any.
    pub access_token: Option<AccessToken>,
    /// Time for the hello, and for the auth frame after the welcome.
    pub handshake_timeout: Duration,
    /// Longest silence: between jobs, within a frame, or the client not
    /// reading the output.
    pub idle_timeout: Duration,
    /// Jobs one connection may run (`max-jobs-per-connection`).
    pub max_jobs: u64,
    /// What a job may ask for.
    pub job: JobLimits,
    /// The keyring by-name jobs (key source 5) use; `None`: the server has
    /// none, and they fail `sealed`.
    pub named_keys: Option<Arc<dyn crate::named_key::NamedKeys>>,
    /// Where a job takes its chunk buffers from and gives them back to
    /// when it ends (wiped), shared by the server's connections.
    pub spare_buffers: Arc<SpareBuffers>,
}

/// What the connection wants read next.
#[derive(Debug)]
pub enum Read {
    /// The client's 8-byte hello ([`Connection::on_hello`]).
    Hello,
    /// The next frame header ([`Connection::on_header`]), or the end of the
    /// stream between frames ([`Connection::on_input_closed`]).
    Header,
    /// The payload of `header`, decoded ([`Connection::on_message`]).
    Body(FrameHeader),
    /// The payload of a data frame into this buffer
    /// (`buf.payload_mut(header.len)`), then [`Connection::on_payload`].
    Payload(FrameHeader, ChunkBuf),
    /// The payload of a data frame, dropped as it arrives (a failed job's
    /// input), then [`Connection::on_skipped`].
    Skip(FrameHeader),
    /// Nothing to read, but whether the client closes the connection
    /// (a queued job's client); [`Connection::on_watched`].
    Watch,
}

/// A data frame's payload.
#[derive(Debug)]
pub enum Payload {
    /// A chunk transformed in place.
    Chunk(ChunkBuf),
    /// The `Salted__` header of an openssl encryption.
    Header([u8; HEADER_LEN]),
    /// Output of another size than its input (age); `spent` is the input's
    /// buffer, which comes back to the job once this is sent.
    Owned {
        /// The bytes (plaintext when decrypting: wiped when dropped).
        bytes: WipedVec,
        /// The input's chunk buffer.
        spent: Option<ChunkBuf>,
    },
}

impl Payload {
    /// The bytes to send.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Chunk(buf) => buf.as_slice(),
            Payload::Header(header) => header,
            Payload::Owned { bytes, .. } => bytes,
        }
    }
}

/// Something to send to the client.
#[derive(Debug)]
pub enum Transmit {
    /// A control frame.
    Frame(Message),
    /// A data frame.
    Data(Payload),
}

/// What the driver must do for the connection.
#[derive(Debug)]
pub enum Action {
    /// A job waits for a slot: take key-derivation budget for
    /// `iterations` (key source 1's PBKDF2, key source 3's X25519) and
    /// enter the admission queue; answer with [`Connection::on_admission`].
    Admit {
        /// PBKDF2 iterations the server will run for the job, or their
        /// equivalent in X25519 work ([`X25519_ITERATIONS`] a recipient),
        /// if any.
        iterations: Option<u32>,
    },
    /// Run this work and hand it back with [`Connection::on_work_done`].
    Work(Work),
    /// Queue this encryption on the lane engine (it has a chunk and no
    /// lane holds its chain): its chunks come back through the feed, its
    /// waker calls the driver, which calls [`Connection::on_lanes_done`].
    Lane(Arc<EncryptFeed>),
    /// The access token was right.
    Authenticated,
    /// The access token was wrong or missing: answer after the client's
    /// delay ([`Connection::set_auth_delay`]).
    AuthFailed {
        /// What was wrong.
        reason: &'static str,
    },
    /// The job got its slot after waiting `queue_wait`.
    JobStarted {
        /// Time from begin to admission.
        queue_wait: Duration,
    },
    /// The job is over (its done frame queued, or it failed); its slot (if
    /// it had one) is free.
    JobEnded(JobReport),
    /// An error the client is told (its frame is queued): count and log it.
    Failed(SessionError),
}

/// How a job ended, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobReport {
    /// The job's operation.
    pub operation: Operation,
    /// The job's format.
    pub format: Format,
    /// Its done figures, or the kind of error it failed with.
    pub result: Result<Done, &'static str>,
    /// Time from its begin frame to its end.
    pub elapsed: Duration,
}

/// How admission answered a job.
#[derive(Debug)]
pub enum AdmissionReply {
    /// The job waits at this position.
    Queued(u32),
    /// The job has its slot.
    Admitted,
    /// No slot: the job fails with busy.
    Refused(Refusal),
}

/// A stop from outside the connection.
#[derive(Debug)]
pub enum Stop {
    /// The server stops: queued jobs and idle connections end.
    Stopping,
    /// The server cuts running jobs off.
    Aborting,
}

/// A deadline and what its passing means.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    what: &'static str,
    limit: Duration,
}

impl Deadline {
    fn after(now: Instant, limit: Duration, what: &'static str) -> Self {
        Deadline {
            at: now
                .checked_add(limit)
                .unwrap_or(now + Duration::from_secs(86_400 * 365)),
            what,
            limit,
        }
    }

    fn error(&self) -> SessionError {
        SessionError::Timeout {
            what: self.what,
            limit: self.limit,
        }
    }
}

enum State {
    /// Waiting for the hello.
    Hello,
    /// Waiting for the auth frame.
    Auth,
    /// A wrong token: the answer waits for the driver's delay.
    AuthDelay {
        reason: &'static str,
        until: Option<Instant>,
    },
    /// Between jobs.
    Idle,
    /// A job, queued or running.
    Job(Box<Job>),
    /// After a failed job: its input is read and dropped up to its end.
    Discard,
    /// An error frame goes out, then the connection closes.
    Closing,
    /// Nothing more to do.
    Closed,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for admission; whether the client is watched for leaving.
    Admitting { watching: bool },
    /// Running.
    Running,
}

/// The transform's whereabouts.
enum Cipher {
    /// Being started (the start is out as work).
    Starting,
    /// An encryption's key being derived (a slice is out as work).
    Deriving(crate::job::PendingEncryption),
    /// A decryption's key being derived before the head chunk (a slice is
    /// out as work); the transform waits for it.
    KeyForChunk(Transform),
    /// Idle, ready for the next chunk.
    Ready(Transform),
    /// An openssl encryption on the lane engine: its chunks go to the
    /// feed as they arrive, several in flight.
    Lane(Arc<EncryptFeed>),
    /// Out in a piece of work (a chunk, the finish).
    Busy,
    /// Finished.
    Gone,
}

struct Job {
    operation: Operation,
    format: Format,
    begin: Option<Begin>,
    phase: Phase,
    /// When its begin frame arrived.
    began: Instant,
    queue_us: u64,
    cipher: Cipher,
    /// Buffers not in use.
    free: Vec<ChunkBuf>,
    /// Buffers allocated so far (at most [`BUFFERS_PER_JOB`]).
    allocated: usize,
    /// Where they come from and go back to.
    spare: Arc<SpareBuffers>,
    /// Chunks read, waiting for the cipher.
    input: VecDeque<ChunkBuf>,
    /// Payload bytes read.
    bytes_read: u64,
    /// Data bytes queued for the client.
    bytes_out: u64,
    /// The end frame was read.
    input_finished: bool,
    /// A data frame's header was read; its payload is next.
    pending_payload: Option<FrameHeader>,
    /// The end frame's header was read; its body is next.
    pending_body: Option<FrameHeader>,
    processing: Duration,
    /// The done frame is queued (the job ends when it is sent).
    done: Option<Done>,
    /// Chunks in the lane engine's feed, not back yet.
    in_lanes: usize,
    /// Since when chunks are in the lane engine (its time counts once for
    /// overlapping chunks).
    in_lanes_since: Option<Instant>,
    /// An openssl encryption's chunks read and not yet encrypted (the lane
    /// occupancy of the jobs with data).
    backlog: Option<Backlog>,
}

impl Drop for Job {
    /// A job that ends early: its chunks not begun are not encrypted. The
    /// buffers it holds go back to the spare ones, wiped.
    fn drop(&mut self) {
        if let Cipher::Lane(feed) = &self.cipher {
            feed.abandon();
        }
        for buf in self.free.drain(..).chain(self.input.drain(..)) {
            self.spare.give_back(buf);
        }
    }
}

/// One client connection's protocol state (see the module).
pub struct Connection {
    settings: Arc<Settings>,
    state: State,
    outbox: VecDeque<Transmit>,
    actions: VecDeque<Action>,
    /// Transmits handed to the driver and not yet sent.
    sending: usize,
    /// The whole begin frame of the next job must arrive by then; also the
    /// hello's and the auth frame's deadline.
    read_deadline: Option<Deadline>,
    write_deadline: Option<Deadline>,
    /// Work handed out and not back yet (at most one).
    work_out: bool,
    /// A header (or body) read in the current state is wanted next.
    pending_body: Option<FrameHeader>,
    /// A discarded data frame's payload is next.
    pending_skip: Option<FrameHeader>,
    jobs_run: u64,
    derived_keys: bool,
    /// The keyring token of the last key_token frame, for by-name jobs.
    key_token: Option<aesd_proto::Secret>,
    /// The jobs with data and busy lanes of every connection and engine.
    lane_load: Arc<LaneLoad>,
    /// Wakes the driver when an encryption's chunks are back.
    lane_waker: Option<Waker>,
    /// This connection's keyring for by-name jobs, if not the settings'.
    named_keys: Option<Arc<dyn crate::named_key::NamedKeys>>,
}

impl Connection {
    /// A new connection, waiting for its hello (within the handshake
    /// timeout from `now`).
    pub fn new(settings: Arc<Settings>, now: Instant) -> Connection {
        let read_deadline = Some(Deadline::after(
            now,
            settings.handshake_timeout,
            "waiting for the hello",
        ));
        Connection {
            settings,
            state: State::Hello,
            outbox: VecDeque::new(),
            actions: VecDeque::new(),
            sending: 0,
            read_deadline,
            write_deadline: None,
            work_out: false,
            pending_body: None,
            pending_skip: None,
            jobs_run: 0,
            derived_keys: false,
            key_token: None,
            lane_load: Arc::default(),
            lane_waker: None,
            named_keys: None,
        }
    }

    /// This connection's by-name jobs use `keys` rather than the
    /// settings' keyring (the driver wraps it, e.g. to audit each job with
    /// the client's address).
    pub fn set_named_keys(&mut self, keys: Arc<dyn crate::named_key::NamedKeys>) {
        self.named_keys = Some(keys);
    }

    /// Links the connection's encryptions to the lane engine: `load` is
    /// what every connection and engine shares (the jobs with data),
    /// `waker` is called when an encryption's chunks are back (then call
    /// [`Connection::on_lanes_done`]).
    pub fn link_lanes(&mut self, load: Arc<LaneLoad>, waker: Option<Waker>) {
        self.lane_load = load;
        self.lane_waker = waker;
    }

    /// Whether an encryption's chunks are in the lane engine: the driver
    /// waits for the feed's waker.
    pub fn lanes_in_flight(&self) -> bool {
        matches!(&self.state, State::Job(job) if job.in_lanes > 0)
    }

    /// The connection's settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether everything is done: the driver closes the connection.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Whether the connection waits for a job's begin frame (between
    /// jobs, nothing running or queued).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle) && self.pending_body.is_none()
    }

    /// The running job's operation and format, if a job is on.
    pub fn job(&self) -> Option<(Operation, Format)> {
        match &self.state {
            State::Job(job) => Some((job.operation, job.format)),
            _ => None,
        }
    }

    /// Whether a job is running (admitted): its reads count against the
    /// minimum input rate.
    pub fn job_running(&self) -> bool {
        matches!(&self.state, State::Job(job) if job.phase == Phase::Running)
    }

    /// What to read next; `None` while nothing is wanted (the job's
    /// buffers are all in flight, the connection is closing). A
    /// [`Read::Header`] or [`Read::Watch`] may be asked again each time
    /// (both are cancel-safe to wait for); the others hand the read over
    /// and must be completed.
    pub fn poll_read(&mut self, now: Instant) -> Option<Read> {
        let idle = self.settings.idle_timeout;
        if let Some(header) = self.pending_body.take() {
            return Some(Read::Body(header));
        }
        if let Some(header) = self.pending_skip.take() {
            self.arm_read(now, idle, "waiting for the end of a failed job's input");
            return Some(Read::Skip(header));
        }
        let read = match &mut self.state {
            State::Hello => Read::Hello,
            State::Auth | State::Idle => Read::Header,
            State::Discard => {
                self.arm_read(now, idle, "waiting for the end of a failed job's input");
                Read::Header
            }
            State::Job(job) => match job.phase {
                Phase::Admitting { watching } => {
                    if !watching {
                        return None;
                    }
                    Read::Watch
                }
                Phase::Running => {
                    if let Some(header) = job.pending_body.take() {
                        return Some(Read::Body(header));
                    }
                    if job.input_finished {
                        return None;
                    }
                    if let Some(header) = job.pending_payload.take() {
                        let mut buf = job.take_buffer(self.settings.chunk_size)?;
                        buf.payload_mut(header.len as usize);
                        self.read_deadline =
                            Some(Deadline::after(now, idle, "reading a data frame"));
                        return Some(Read::Payload(header, buf));
                    }
                    if !job.has_buffer() {
                        return None;
                    }
                    self.arm_read(now, idle, "waiting for the client's data");
                    Read::Header
                }
            },
            State::AuthDelay { .. } | State::Closing | State::Closed => return None,
        };
        Some(read)
    }

    /// Sets the read deadline unless one runs already.
    fn arm_read(&mut self, now: Instant, limit: Duration, what: &'static str) {
        if self.read_deadline.is_none() {
            self.read_deadline = Some(Deadline::after(now, limit, what));
        }
    }

    /// The client's hello arrived.
    pub fn on_hello(&mut self, now: Instant, hello: Hello) {
        if !matches!(self.state, State::Hello) {
            return;
        }
        self.read_deadline = None;
        if hello.version != PROTOCOL_VERSION {
            self.fail(now, SessionError::UnsupportedVersion(hello.version));
            return;
        }
        self.derived_keys = hello.derived_keys;
        self.outbox
            .push_back(Transmit::Frame(Message::Welcome(Welcome {
                version: PROTOCOL_VERSION,
                max_data: self.settings.chunk_size,
                server: self.settings.server_name.clone(),
                token_required: self.settings.access_token.is_some(),
                derived_keys: hello.derived_keys,
            })));
        if self.settings.access_token.is_some() {
            self.state = State::Auth;
            self.read_deadline = Some(Deadline::after(
                now,
                self.settings.handshake_timeout,
                "no auth frame within the handshake timeout",
            ));
        } else {
            self.enter_idle(now);
        }
    }

    fn enter_idle(&mut self, now: Instant) {
        self.state = State::Idle;
        self.read_deadline = Some(Deadline::after(
            now,
            self.settings.idle_timeout,
            "waiting for the next job",
        ));
    }

    /// A frame header arrived.
    pub fn on_header(&mut self, now: Instant, header: FrameHeader) {
        match &mut self.state {
            State::Auth => self.pending_body = Some(header),
            State::Idle => {
                if !matches!(header.kind, FrameKind::Begin | FrameKind::KeyToken) {
                    self.fail(
                        now,
                        SessionError::UnexpectedFrame {
                            got: header.kind.name(),
                            state: "before begin (a job starts with a begin frame)",
                        },
                    );
                    return;
                }
                if let Some(deadline) = &mut self.read_deadline {
                    deadline.what = "reading a begin frame";
                }
                self.pending_body = Some(header);
            }
            State::Discard => {
                self.read_deadline = None;
                match header.kind {
                    FrameKind::Data if header.len == 0 => self.fail(now, empty_data_frame()),
                    FrameKind::Data => self.pending_skip = Some(header),
                    FrameKind::End => {
                        self.arm_read(
                            now,
                            self.settings.idle_timeout,
                            "waiting for the end of a failed job's input",
                        );
                        self.pending_body = Some(header);
                    }
                    other => self.fail(
                        now,
                        SessionError::UnexpectedFrame {
                            got: other.name(),
                            state: "while discarding a failed job's input",
                        },
                    ),
                }
            }
            State::Job(job) if job.phase == Phase::Running && !job.input_finished => {
                self.read_deadline = None;
                match header.kind {
                    FrameKind::Data if header.len == 0 => self.fail(now, empty_data_frame()),
                    FrameKind::Data => job.pending_payload = Some(header),
                    FrameKind::End => {
                        self.read_deadline = Some(Deadline::after(
                            now,
                            self.settings.idle_timeout,
                            "reading an end frame",
                        ));
                        job.pending_body = Some(header);
                    }
                    other => self.fail(
                        now,
                        SessionError::UnexpectedFrame {
                            got: other.name(),
                            state: "during a job (only data and end are allowed)",
                        },
                    ),
                }
            }
            _ => {}
        }
    }

    /// A control frame's payload arrived, decoded.
    pub fn on_message(&mut self, now: Instant, message: Message) {
        match &mut self.state {
            State::Auth => {
                self.read_deadline = None;
                let Some(token) = &self.settings.access_token else {
                    return;
                };
                let reason = match &message {
                    Message::Auth(candidate) if token.matches(candidate.as_bytes()) => {
                        self.actions.push_back(Action::Authenticated);
                        self.outbox.push_back(Transmit::Frame(Message::Authorized));
                        self.enter_idle(now);
                        return;
                    }
                    Message::Auth(_) => "wrong access token",
                    _ => "the first frame after the welcome must be auth",
                };
                self.actions.push_back(Action::AuthFailed { reason });
                self.state = State::AuthDelay {
                    reason,
                    until: None,
                };
            }
            State::Idle => {
                self.read_deadline = None;
                match message {
                    Message::Begin(begin) => self.begin(now, begin),
                    Message::KeyToken(token) => {
                        // Kept for the by-name jobs that follow; each
                        // checks it (a token may be revoked meanwhile).
                        self.key_token = Some(token);
                        self.enter_idle(now);
                    }
                    other => self.fail(
                        now,
                        SessionError::UnexpectedFrame {
                            got: other.kind().name(),
                            state: "before begin (a job starts with a begin frame)",
                        },
                    ),
                }
            }
            State::Discard => {
                self.read_deadline = None;
                if matches!(message, Message::End) {
                    self.enter_idle(now);
                }
            }
            State::Job(job) if job.phase == Phase::Running => {
                self.read_deadline = None;
                if matches!(message, Message::End) {
                    job.input_finished = true;
                    self.advance(now);
                }
            }
            _ => {}
        }
    }

    /// A job's begin frame: check it, then ask for admission.
    fn begin(&mut self, now: Instant, begin: Begin) {
        if self.jobs_run >= self.settings.max_jobs {
            self.fail(
                now,
                SessionError::TooManyJobs {
                    limit: self.settings.max_jobs,
                },
            );
            return;
        }
        self.jobs_run += 1;
        let mut job = Box::new(Job {
            operation: begin.operation,
            format: begin.format,
            begin: None,
            phase: Phase::Admitting { watching: true },
            began: now,
            queue_us: 0,
            cipher: Cipher::Starting,
            free: Vec::new(),
            allocated: 0,
            spare: Arc::clone(&self.settings.spare_buffers),
            input: VecDeque::new(),
            bytes_read: 0,
            bytes_out: 0,
            input_finished: false,
            pending_payload: None,
            pending_body: None,
            processing: Duration::ZERO,
            done: None,
            in_lanes: 0,
            in_lanes_since: None,
            backlog: (begin.operation == Operation::Encrypt
                && begin.format == Format::OpensslSaltedPbkdf2)
                .then(|| Backlog::new(Arc::clone(&self.lane_load))),
        });
        if let Err(error) = self.settings.job.check(&begin) {
            // Refused before it started: the client sends no data for it.
            self.state = State::Job(job);
            self.end_job(now, SessionError::Job(error), true);
            return;
        }
        let iterations = match &begin.key {
            KeySource::Password { iterations, .. } => Some(*iterations),
            // An age encryption: one X25519 share and shared secret per
            // recipient, charged to the same budget as PBKDF2.
            KeySource::AgeRecipients(keys) => Some(age_recipients_cost(keys.len())),
            _ => None,
        };
        job.begin = Some(begin);
        self.state = State::Job(job);
        self.actions.push_back(Action::Admit { iterations });
    }

    /// Admission answered the job.
    pub fn on_admission(&mut self, now: Instant, admission: AdmissionReply) {
        let State::Job(job) = &mut self.state else {
            return;
        };
        if !matches!(job.phase, Phase::Admitting { .. }) {
            return;
        }
        match admission {
            AdmissionReply::Queued(position) => self
                .outbox
                .push_back(Transmit::Frame(Message::Queued(Queued { position }))),
            AdmissionReply::Refused(refusal) => {
                self.end_job(now, SessionError::Job(JobError::Busy(refusal)), true)
            }
            AdmissionReply::Admitted => {
                let queue_wait = now.saturating_duration_since(job.began);
                job.queue_us = micros(queue_wait);
                job.phase = Phase::Running;
                self.actions.push_back(Action::JobStarted { queue_wait });
                self.outbox
                    .push_back(Transmit::Frame(Message::Started(StartedFrame {
                        queue_us: job.queue_us,
                    })));
                if let Some(begin) = job.begin.take() {
                    job.cipher = Cipher::Busy;
                    let named = matches!(begin.key, KeySource::KeyName(_)).then(|| {
                        Box::new(crate::named_key::NamedAccess {
                            keys: self
                                .named_keys
                                .clone()
                                .or_else(|| self.settings.named_keys.clone()),
                            token: self.key_token.clone(),
                        })
                    });
                    self.hand_out(Work::Start {
                        named,
                        begin: Some(begin),
                        outcome: None,
                    });
                }
            }
        }
    }

    /// What a [`Read::Watch`] saw: the client closed the connection
    /// (`closed`) or sent something early (then it is watched no more).
    pub fn on_watched(&mut self, now: Instant, closed: bool) {
        let State::Job(job) = &mut self.state else {
            return;
        };
        if let Phase::Admitting { watching } = &mut job.phase {
            if closed {
                self.end_job(now, SessionError::ClientGone, true);
            } else {
                *watching = false;
            }
        }
    }

    /// A data payload arrived in the buffer [`Read::Payload`] lent.
    pub fn on_payload(&mut self, now: Instant, buf: ChunkBuf) {
        self.read_deadline = None;
        let State::Job(job) = &mut self.state else {
            // A failed job's frame, finished: the stream is in step.
            return;
        };
        if job.phase != Phase::Running || job.done.is_some() {
            return;
        }
        job.bytes_read += buf.len() as u64;
        if job.bytes_read > self.settings.job.max_file_size {
            let limit = self.settings.job.max_file_size;
            self.fail(now, SessionError::Job(JobError::FileTooLarge { limit }));
            return;
        }
        if let Some(backlog) = &mut job.backlog {
            backlog.read();
        }
        job.input.push_back(buf);
        self.advance(now);
    }

    /// A discarded payload was read to its end.
    pub fn on_skipped(&mut self, now: Instant) {
        self.read_deadline = None;
        if matches!(self.state, State::Discard) {
            self.arm_read(
                now,
                self.settings.idle_timeout,
                "waiting for the end of a failed job's input",
            );
        }
    }

    /// The client closed the connection between frames (or reset it).
    pub fn on_input_closed(&mut self, now: Instant) {
        match self.state {
            State::Idle if self.pending_body.is_none() => {
                // Between jobs: the client left; nothing to tell.
                self.state = State::Closed;
            }
            State::Closing | State::Closed => {}
            _ => self.fail(now, SessionError::ClientGone),
        }
    }

    /// Reading failed: the stream is broken (a truncated or malformed frame).
    pub fn on_read_error(&mut self, now: Instant, error: SessionError) {
        self.fail(now, error);
    }

    /// A piece of work handed out with [`Action::Work`] is done, `elapsed`
    /// from its hand-out to its return.
    pub fn on_work_done(&mut self, now: Instant, work: Work, elapsed: Duration) {
        self.work_out = false;
        let chunk_size = self.settings.chunk_size as usize;
        let State::Job(job) = &mut self.state else {
            // Work of a job that failed meanwhile: dropped.
            return;
        };
        if job.phase != Phase::Running {
            return;
        }
        job.processing += elapsed;
        let outcome = match work {
            Work::Start { outcome, .. } => match outcome {
                Some(Ok(Started::Ready { transform, header })) => {
                    if let Some(header) = header {
                        job.send(&mut self.outbox, Payload::Header(header));
                    }
                    job.cipher = Cipher::Ready(transform);
                    Ok(())
                }
                Some(Ok(Started::DeriveKey(pending))) => {
                    let derivation = Derivation::new(&pending.request());
                    job.cipher = Cipher::Deriving(pending);
                    self.hand_out(Work::Derive(Box::new(derivation)));
                    return;
                }
                Some(Err(error)) => Err(error),
                None => Ok(()),
            },
            Work::Derive(derivation) => {
                if !derivation.is_done() {
                    self.hand_out(Work::Derive(derivation));
                    return;
                }
                let Some((derived, salt)) = derivation.into_key() else {
                    return;
                };
                match std::mem::replace(&mut job.cipher, Cipher::Gone) {
                    Cipher::Deriving(pending) => {
                        let (job_cipher, header) = pending.keyed(&derived);
                        job.send(&mut self.outbox, Payload::Header(header));
                        job.cipher = Cipher::Ready(Transform::Openssl(job_cipher));
                    }
                    Cipher::KeyForChunk(mut transform) => {
                        transform.provide_key(derived, salt);
                        job.cipher = Cipher::Ready(transform);
                    }
                    other => job.cipher = other,
                }
                Ok(())
            }
            Work::Chunk {
                transform,
                bufs,
                outs,
                outcome,
            } => {
                job.cipher = Cipher::Ready(transform);
                match outcome {
                    Ok(()) => {
                        // Each chunk's output in order (age: its own,
                        // openssl: in place).
                        let mut outs = outs.into_iter();
                        for buf in bufs {
                            let out = outs.next().unwrap_or_default();
                            job.send_output(&mut self.outbox, buf, out, chunk_size);
                        }
                        Ok(())
                    }
                    Err(error) => {
                        job.free.extend(bufs);
                        Err(error)
                    }
                }
            }
            Work::Finish {
                last, out, outcome, ..
            } => {
                job.cipher = Cipher::Gone;
                match outcome {
                    Some(Ok(bytes_in)) => {
                        if !last.is_empty() {
                            job.send(&mut self.outbox, Payload::Chunk(last));
                        }
                        if !out.is_empty() {
                            job.send_owned(&mut self.outbox, out, None, chunk_size);
                        }
                        let done = Done {
                            bytes_in,
                            bytes_out: job.bytes_out,
                            queue_us: job.queue_us,
                            processing_us: micros(job.processing),
                        };
                        job.done = Some(done);
                        self.outbox.push_back(Transmit::Frame(Message::Done(done)));
                        // The job is over once its done frame is queued: its
                        // slot is free before the client reads the frame.
                        self.actions.push_back(Action::JobEnded(JobReport {
                            operation: job.operation,
                            format: job.format,
                            result: Ok(done),
                            elapsed: now.saturating_duration_since(job.began),
                        }));
                        Ok(())
                    }
                    Some(Err(error)) => Err(error),
                    None => Ok(()),
                }
            }
        };
        match outcome {
            Ok(()) => self.advance(now),
            Err(error) => self.fail(now, SessionError::Job(error)),
        }
    }

    /// An encryption's chunks came back from the lane engine (its feed's
    /// waker was called): they go out, in order. An error when the lane
    /// engine lost the job's chain (the connection cannot go on).
    pub fn on_lanes_done(&mut self, now: Instant) -> Result<(), LaneLost> {
        let chunk_size = self.settings.chunk_size as usize;
        let State::Job(job) = &mut self.state else {
            return Ok(());
        };
        let Cipher::Lane(feed) = &job.cipher else {
            return Ok(());
        };
        let done = feed.take_done()?;
        if done.is_empty() {
            return Ok(());
        }
        for buf in done {
            job.in_lanes = job.in_lanes.saturating_sub(1);
            if let Some(backlog) = &mut job.backlog {
                backlog.encrypted();
            }
            job.send_output(&mut self.outbox, buf, WipedVec::new(), chunk_size);
        }
        if job.in_lanes == 0
            && let Some(since) = job.in_lanes_since.take()
        {
            job.processing += now.saturating_duration_since(since);
        }
        self.advance(now);
        Ok(())
    }

    /// Hands the job's next piece of work out, if it has one ready and
    /// none is out; an encryption's chunks go to its feed on the lane
    /// engine as they arrive.
    fn advance(&mut self, now: Instant) {
        if self.work_out {
            return;
        }
        let State::Job(job) = &mut self.state else {
            return;
        };
        if job.phase != Phase::Running || job.done.is_some() {
            return;
        }
        if matches!(
            job.cipher,
            Cipher::Ready(Transform::Openssl(OpensslJob::Encrypt(_)))
        ) && let Cipher::Ready(Transform::Openssl(OpensslJob::Encrypt(encryption))) =
            std::mem::replace(&mut job.cipher, Cipher::Gone)
        {
            let feed = Feed::new(encryption, self.lane_waker.clone());
            job.cipher = Cipher::Lane(Arc::new(feed));
        }
        if let Cipher::Lane(feed) = &job.cipher {
            let feed = Arc::clone(feed);
            while let Some(buf) = job.input.pop_front() {
                job.in_lanes += 1;
                job.in_lanes_since.get_or_insert(now);
                if feed.push(buf) {
                    self.actions.push_back(Action::Lane(Arc::clone(&feed)));
                }
            }
            if !job.input_finished || job.in_lanes > 0 {
                return;
            }
            let Some(encryption) = feed.take_chain() else {
                return;
            };
            job.cipher = Cipher::Busy;
            self.hand_out(Work::finish(Transform::Openssl(OpensslJob::Encrypt(
                encryption,
            ))));
            return;
        }
        if !matches!(job.cipher, Cipher::Ready(_)) {
            return;
        }
        if job.input.is_empty() && !job.input_finished {
            return;
        }
        let Cipher::Ready(transform) = std::mem::replace(&mut job.cipher, Cipher::Busy) else {
            return;
        };
        let Some(buf) = job.input.pop_front() else {
            self.hand_out(Work::finish(transform));
            return;
        };
        // A decryption with a password whose salt this chunk completes:
        // the key is derived first, in slices, the chunk waits.
        if let Some(request) = transform.key_request(&buf) {
            let derivation = Derivation::new(&request);
            job.input.push_front(buf);
            job.cipher = Cipher::KeyForChunk(transform);
            self.hand_out(Work::Derive(Box::new(derivation)));
            return;
        }
        // Age takes every chunk read so far in one hand-off to a worker:
        // one wake-up there and back for all of them, where each chunk
        // alone would cost two (the cipher state travels with the work, so
        // only one hand-off can be out at a time). openssl's decryption
        // goes chunk by chunk: a later chunk may complete the salt that
        // its password's key is derived for (above).
        let mut bufs = vec![buf];
        if matches!(transform, Transform::Age(_)) {
            bufs.extend(job.input.drain(..));
        }
        self.hand_out(Work::Chunk {
            transform,
            bufs,
            outs: Vec::new(),
            outcome: Ok(()),
        });
    }

    fn hand_out(&mut self, work: Work) {
        self.work_out = true;
        self.actions.push_back(Action::Work(work));
    }

    /// The next thing to send, if any; `now` starts its write deadline.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let transmit = self.outbox.pop_front()?;
        let (limit, what) = match (&self.state, &transmit) {
            (State::Closing, Transmit::Frame(Message::Error(_))) => (
                self.settings.handshake_timeout,
                "sending the error frame before closing",
            ),
            (_, Transmit::Frame(Message::Error(_))) => (
                self.settings.idle_timeout,
                "sending a failed job's error frame",
            ),
            _ => (
                self.settings.idle_timeout,
                "client is not reading the output",
            ),
        };
        self.sending += 1;
        if self.write_deadline.is_none() {
            self.write_deadline = Some(Deadline::after(now, limit, what));
        }
        Some(transmit)
    }

    /// A transmit from [`Connection::poll_transmit`] was written whole.
    pub fn on_sent(&mut self, now: Instant, transmit: Transmit) {
        self.sending = self.sending.saturating_sub(1);
        if self.sending == 0 {
            self.write_deadline = None;
        }
        let returned = match transmit {
            Transmit::Data(Payload::Chunk(buf)) => Some(buf),
            Transmit::Data(Payload::Owned { spent, .. }) => spent,
            Transmit::Data(Payload::Header(_)) => None,
            Transmit::Frame(Message::Done(_)) => {
                if matches!(&self.state, State::Job(job) if job.done.is_some()) {
                    self.enter_idle(now);
                }
                None
            }
            Transmit::Frame(_) => None,
        };
        if let (Some(buf), State::Job(job)) = (returned, &mut self.state) {
            job.free.push(buf);
        }
        if matches!(self.state, State::Closing) && self.outbox.is_empty() && self.sending == 0 {
            self.state = State::Closed;
        }
    }

    /// Writing failed or stalled past repair: nothing more can be sent.
    pub fn on_write_failed(&mut self) {
        self.outbox.clear();
        self.state = State::Closed;
    }

    /// The delay before answering a wrong token ([`Action::AuthFailed`])
    /// ends at `until`.
    pub fn set_auth_delay(&mut self, until: Instant) {
        if let State::AuthDelay { until: slot, .. } = &mut self.state {
            *slot = Some(until);
        }
    }

    /// A stop from outside: the server stopping or aborting.
    pub fn on_stop(&mut self, now: Instant, stop: Stop) {
        match (&self.state, stop) {
            (State::Idle | State::AuthDelay { .. }, Stop::Stopping | Stop::Aborting) => {
                self.fail(now, SessionError::ShuttingDown)
            }
            (State::Job(job), Stop::Stopping) if matches!(job.phase, Phase::Admitting { .. }) => {
                self.fail(now, SessionError::ShuttingDown)
            }
            (State::Job(_), Stop::Aborting) => {
                self.drop_unsent_output();
                self.fail(now, SessionError::ShuttingDown)
            }
            _ => {}
        }
    }

    /// Drops the job's output not handed to the driver yet.
    fn drop_unsent_output(&mut self) {
        self.outbox
            .retain(|transmit| !matches!(transmit, Transmit::Data(_)));
    }

    /// The next deadline, if any: call [`Connection::on_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let auth = match &self.state {
            State::AuthDelay { until, .. } => *until,
            _ => None,
        };
        let read = if self.waits_for_input() {
            self.read_deadline.map(|deadline| deadline.at)
        } else {
            None
        };
        [read, self.write_deadline.map(|deadline| deadline.at), auth]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether a read deadline applies now.
    fn waits_for_input(&self) -> bool {
        !matches!(
            self.state,
            State::AuthDelay { .. } | State::Closing | State::Closed
        )
    }

    /// Time passed: fails the connection if a deadline passed.
    pub fn on_timeout(&mut self, now: Instant) {
        if let Some(deadline) = self.write_deadline
            && now >= deadline.at
        {
            // The client does not read: nothing more can be sent.
            let error = deadline.error();
            self.end_job_quietly(now, &error);
            self.actions.push_back(Action::Failed(error));
            self.outbox.clear();
            self.state = State::Closed;
            return;
        }
        if let State::AuthDelay { reason, until } = self.state {
            if until.is_some_and(|until| now >= until) {
                self.fail(now, SessionError::Unauthorized { reason });
            }
            return;
        }
        if let Some(deadline) = self.read_deadline
            && self.waits_for_input()
            && now >= deadline.at
        {
            self.read_deadline = None;
            let error = match self.state {
                State::Auth => SessionError::Unauthorized {
                    reason: "no auth frame within the handshake timeout",
                },
                _ => deadline.error(),
            };
            self.fail(now, error);
        }
    }

    /// The next thing the driver must do, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether a transmit is waiting.
    pub fn has_transmit(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Tells the client `error` and goes on as its code says: a job error
    /// that keeps the connection discards the job's remaining input (if
    /// the client is still sending it), other errors close.
    fn fail(&mut self, now: Instant, error: SessionError) {
        if matches!(self.state, State::Closing | State::Closed) {
            return;
        }
        self.pending_body = None;
        self.pending_skip = None;
        let mut input_finished = true;
        if let State::Job(job) = &self.state
            && job.phase == Phase::Running
        {
            input_finished = job.input_finished;
            // A frame half read stays in step: its payload is skipped, an
            // end frame's body read, by the discard that follows.
            self.pending_skip = job.pending_payload;
            self.pending_body = job.pending_body;
        }
        self.end_job(now, error, input_finished);
        if matches!(self.state, State::Closing | State::Idle) {
            self.pending_skip = None;
            self.pending_body = None;
        }
    }

    /// Ends the connection's job (if any) with `error`, tells the client
    /// and moves on: discarding the rest of the job's input unless
    /// `input_finished`, idle, or closing.
    fn end_job(&mut self, now: Instant, error: SessionError, input_finished: bool) {
        self.end_job_quietly(now, &error);
        self.read_deadline = None;
        self.outbox
            .push_back(Transmit::Frame(Message::Error(error.to_frame())));
        let closes = error.closes_connection();
        self.actions.push_back(Action::Failed(error));
        if closes {
            self.state = State::Closing;
        } else if input_finished {
            self.enter_idle(now);
        } else {
            self.state = State::Discard;
        }
    }

    /// Reports the end of the job (if any) as failed with `error`.
    fn end_job_quietly(&mut self, now: Instant, error: &SessionError) {
        if let State::Job(job) = &self.state
            && job.done.is_none()
        {
            self.actions.push_back(Action::JobEnded(JobReport {
                operation: job.operation,
                format: job.format,
                result: Err(error.kind()),
                elapsed: now.saturating_duration_since(job.began),
            }));
        }
    }
}

impl Job {
    fn has_buffer(&self) -> bool {
        !self.free.is_empty() || self.allocated < BUFFERS_PER_JOB
    }

    fn take_buffer(&mut self, chunk_size: u32) -> Option<ChunkBuf> {
        if let Some(buf) = self.free.pop() {
            return Some(buf);
        }
        if self.allocated < BUFFERS_PER_JOB {
            self.allocated += 1;
            return Some(self.spare.take(chunk_size as usize));
        }
        None
    }

    fn send(&mut self, outbox: &mut VecDeque<Transmit>, payload: Payload) {
        self.bytes_out += payload.as_slice().len() as u64;
        outbox.push_back(Transmit::Data(payload));
    }

    /// A chunk's output: the buffer itself, or (age) bytes of another size.
    fn send_output(
        &mut self,
        outbox: &mut VecDeque<Transmit>,
        buf: ChunkBuf,
        out: WipedVec,
        chunk_size: usize,
    ) {
        if self.format == Format::Age {
            if out.is_empty() {
                self.free.push(buf);
            } else {
                self.send_owned(outbox, out, Some(buf), chunk_size);
            }
        } else if buf.is_empty() {
            self.free.push(buf);
        } else {
            self.send(outbox, Payload::Chunk(buf));
        }
    }

    /// Owned output in data frames of at most `chunk_size` bytes; `spent`
    /// comes back to the job after the last.
    fn send_owned(
        &mut self,
        outbox: &mut VecDeque<Transmit>,
        mut bytes: WipedVec,
        spent: Option<ChunkBuf>,
        chunk_size: usize,
    ) {
        let limit = chunk_size.max(1);
        while bytes.len() > limit {
            let rest = bytes.split_off(limit);
            let piece = std::mem::replace(&mut bytes, rest);
            self.send(
                outbox,
                Payload::Owned {
                    bytes: piece,
                    spent: None,
                },
            );
        }
        self.send(outbox, Payload::Owned { bytes, spent });
    }
}

/// What one recipient of an age encryption costs the server, in PBKDF2
/// iterations: an X25519 share and shared secret, about 2.1 M
/// instructions on the rv32 board (67 M for a begin with 32 recipients),
/// where one PBKDF2-HMAC-SHA256 iteration is about 18 500 (185 M for
/// 10 000): 113 iterations. Charged to the client's `kdf-budget` like
/// PBKDF2, so headers with many recipients cannot occupy a core either.
pub const X25519_ITERATIONS: u32 = 113;

/// The budget an age encryption to `recipients` recipients takes.
pub fn age_recipients_cost(recipients: usize) -> u32 {
    u32::try_from(recipients)
        .unwrap_or(u32::MAX)
        .saturating_mul(X25519_ITERATIONS)
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
