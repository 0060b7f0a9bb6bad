//! A test harness for one connection's state machine, on its own clock.
//!
//! The client's side is a timeline ([`Harness::send`], [`Harness::wait`],
//! [`Harness::close`], [`Harness::stop_reading`]); the server's side is
//! scripted: what admission answers each job and when
//! ([`Harness::admission`]), stops from outside ([`Harness::stop_at`]),
//! the delay before a wrong token is answered ([`Harness::auth_delay`]).
//! [`Harness::run`] drives the very [`Connection`] the server runs, doing
//! everything that can be done at each instant and then jumping to the
//! next deadline or scripted event, and returns a [`Record`] of what the
//! client received and when, exactly: a timeout fires at its limit to the
//! nanosecond, without sockets or sleeps.
//!
//! What a server adds around the state machine (sockets, TLS, the PROXY
//! header, the admission queue's fairness, caps, metrics, signals) is
//! tested over real sockets in aesd-server's tests.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_proto::frame::HEADER_LEN as FRAME_HEADER_LEN;
use aesd_proto::{ErrorCode, FrameHeader, Hello, Message};

use super::Sink;
use super::served::{Driver, Served};
use crate::connection::{
    Action, AdmissionReply, Connection, JobReport, SessionError, Settings, Stop,
};
use crate::lanes::{FeedQueue, LaneLoad};

/// The longest a run may last on the harness's clock: a script that would
/// never end (a connection without timeouts that waits forever) stops here.
pub const RUN_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// One step of the client's timeline.
#[derive(Debug, Clone)]
enum ClientStep {
    Send(Vec<u8>),
    Wait(Duration),
    Close,
    StopReading,
    ResumeReading,
}

/// A scripted connection: the client's timeline and the server's answers.
#[derive(Debug)]
pub struct Harness {
    settings: Arc<Settings>,
    client: Vec<ClientStep>,
    admissions: VecDeque<Vec<(Duration, AdmissionReply)>>,
    stops: Vec<(Duration, Stop)>,
    auth_delay: Duration,
}

impl Harness {
    /// A connection with these settings; the client sends nothing, reads
    /// everything and never closes until told otherwise; every job is
    /// admitted at once; a wrong token is answered at once.
    pub fn new(settings: Settings) -> Harness {
        Harness {
            settings: Arc::new(settings),
            client: Vec::new(),
            admissions: VecDeque::new(),
            stops: Vec::new(),
            auth_delay: Duration::ZERO,
        }
    }

    /// The client sends these bytes (they arrive at once).
    pub fn send(mut self, bytes: impl Into<Vec<u8>>) -> Harness {
        self.client.push(ClientStep::Send(bytes.into()));
        self
    }

    /// The client sends the current protocol's hello.
    pub fn hello(self) -> Harness {
        self.send(Hello::current().encode().to_vec())
    }

    /// The client sends `message` as one frame.
    ///
    /// # Panics
    /// If the message does not encode (a test's own mistake).
    pub fn message(self, message: &Message) -> Harness {
        let mut bytes = Vec::new();
        message
            .encode(&mut bytes)
            .expect("a test's message encodes");
        self.send(bytes)
    }

    /// The client sends `bytes` one at a time, `every` apart (the first at
    /// once).
    pub fn drip(mut self, bytes: &[u8], every: Duration) -> Harness {
        for (i, byte) in bytes.iter().enumerate() {
            if i > 0 {
                self = self.wait(every);
            }
            self = self.send(vec![*byte]);
        }
        self
    }

    /// The client does nothing for `pause`.
    pub fn wait(mut self, pause: Duration) -> Harness {
        self.client.push(ClientStep::Wait(pause));
        self
    }

    /// The client closes its side: nothing more arrives.
    pub fn close(mut self) -> Harness {
        self.client.push(ClientStep::Close);
        self
    }

    /// The client stops reading: the server's next write blocks.
    pub fn stop_reading(mut self) -> Harness {
        self.client.push(ClientStep::StopReading);
        self
    }

    /// The client reads again.
    pub fn resume_reading(mut self) -> Harness {
        self.client.push(ClientStep::ResumeReading);
        self
    }

    /// Admission answers the next job that asks (in the order jobs ask)
    /// with these replies, each `after` the job asked. A job with no
    /// script is admitted at once. Replies still due when the job ends
    /// are dropped, as a real queue forgets a job that left.
    pub fn admission(mut self, replies: Vec<(Duration, AdmissionReply)>) -> Harness {
        self.admissions.push_back(replies);
        self
    }

    /// The server stops (or aborts) `at` after the connection opened.
    pub fn stop_at(mut self, at: Duration, stop: Stop) -> Harness {
        self.stops.push((at, stop));
        self
    }

    /// A wrong or missing token is answered `delay` after it arrived.
    pub fn auth_delay(mut self, delay: Duration) -> Harness {
        self.auth_delay = delay;
        self
    }

    /// Runs the connection until it is closed, or nothing more can happen
    /// (or [`RUN_LIMIT`] passed on its clock).
    pub fn run(self) -> Record {
        let Harness {
            settings,
            client,
            admissions,
            stops,
            auth_delay,
        } = self;
        let (input, mut timeline) = flatten(&client);
        let start = Instant::now();
        let mut now = start;
        let mut connection = Connection::new(Arc::clone(&settings), now);
        let load = Arc::new(LaneLoad::default());
        connection.link_lanes(Arc::clone(&load), None);
        let sink = TimedSink::new(start);
        let mut served = Served::new(connection, &input, sink);
        let mut driver = ScriptedDriver {
            start,
            admissions,
            due: Vec::new(),
            auth_delay,
            failures: Vec::new(),
            jobs: Vec::new(),
            admit_asked: Vec::new(),
        };
        let mut stops: Vec<(Instant, Stop)> = stops
            .into_iter()
            .map(|(at, stop)| (start + at, stop))
            .collect();
        let mut arrived = 0usize;
        let mut closed_at = None;
        loop {
            let mut progress = false;
            // What the timeline and the script make happen by now.
            while let Some((at, event)) = timeline.front()
                && *at <= now - start
            {
                match *event {
                    ClientEvent::Arrive(n) => arrived += n,
                    ClientEvent::Close => served.closed = true,
                    ClientEvent::Reading(reading) => served.reading = reading,
                }
                served.arrived = arrived;
                timeline.pop_front();
                progress = true;
            }
            for (_, reply) in take_due(&mut driver.due, now) {
                served.connection.on_admission(now, reply);
                progress = true;
            }
            for (_, stop) in take_due(&mut stops, now) {
                served.connection.on_stop(now, stop);
                progress = true;
            }
            served.output.now = now;
            progress |= served.step(now, &mut driver);
            progress |= run_lanes(&mut served, now, &load);
            if progress {
                continue;
            }
            if served.connection.is_closed() {
                closed_at = Some(now - start);
                break;
            }
            // Nothing moves: time passes until the next deadline or event.
            let next = [
                served.connection.poll_timeout(),
                timeline.front().map(|(at, _)| start + *at),
                driver.due.iter().map(|(at, _)| *at).min(),
                stops.iter().map(|(at, _)| *at).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                break;
            };
            if next - start > RUN_LIMIT {
                break;
            }
            now = now.max(next);
            served.connection.on_timeout(now);
        }
        Record {
            received: served.output.frames(),
            sent: served.output.bytes(),
            failures: driver.failures,
            jobs: driver.jobs,
            admit_asked: driver.admit_asked,
            closed_at,
            slot_held: served.outcome.slot_held,
            unread: input.len() - served.consumed(),
            ended_at: now - start,
        }
    }
}

/// The events of a client's timeline, in time order.
#[derive(Debug, Clone, Copy)]
enum ClientEvent {
    /// This many more bytes arrive.
    Arrive(usize),
    /// The client closes its side.
    Close,
    /// The client starts or stops reading.
    Reading(bool),
}

/// The client's whole input, and when each part of it (and each other
/// event) happens.
fn flatten(steps: &[ClientStep]) -> (Vec<u8>, VecDeque<(Duration, ClientEvent)>) {
    let mut input = Vec::new();
    let mut timeline = VecDeque::new();
    let mut at = Duration::ZERO;
    for step in steps {
        match step {
            ClientStep::Send(bytes) => {
                input.extend_from_slice(bytes);
                timeline.push_back((at, ClientEvent::Arrive(bytes.len())));
            }
            ClientStep::Wait(pause) => at += *pause,
            ClientStep::Close => timeline.push_back((at, ClientEvent::Close)),
            ClientStep::StopReading => timeline.push_back((at, ClientEvent::Reading(false))),
            ClientStep::ResumeReading => timeline.push_back((at, ClientEvent::Reading(true))),
        }
    }
    (input, timeline)
}

/// Removes and returns the entries due by `now`, in time order.
fn take_due<T>(entries: &mut Vec<(Instant, T)>, now: Instant) -> Vec<(Instant, T)> {
    let mut due = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        if entries[i].0 <= now {
            due.push(entries.remove(i));
        } else {
            i += 1;
        }
    }
    due.sort_by_key(|(at, _)| *at);
    due
}

/// Encrypts the connection's queued chunks on the lane engine.
fn run_lanes<S: Sink>(served: &mut Served<'_, S>, now: Instant, load: &LaneLoad) -> bool {
    if served.feeds.is_empty() {
        return false;
    }
    let mut queue = FeedQueue::default();
    for feed in served.feeds.drain(..) {
        queue.push(feed);
    }
    queue.drain(crate::LANES, load);
    // Nothing here panics inside the engine: no chain is ever lost.
    let _ = served.connection.on_lanes_done(now);
    true
}

/// Answers the connection from the script, and logs what it does.
struct ScriptedDriver {
    start: Instant,
    admissions: VecDeque<Vec<(Duration, AdmissionReply)>>,
    /// Admission replies due, for the job waiting now.
    due: Vec<(Instant, AdmissionReply)>,
    auth_delay: Duration,
    failures: Vec<Failure>,
    jobs: Vec<(Duration, JobReport)>,
    admit_asked: Vec<(Duration, Option<u32>)>,
}

impl Driver for ScriptedDriver {
    fn admit(&mut self, now: Instant, iterations: Option<u32>) -> Option<AdmissionReply> {
        self.admit_asked.push((now - self.start, iterations));
        let script = self
            .admissions
            .pop_front()
            .unwrap_or_else(|| vec![(Duration::ZERO, AdmissionReply::Admitted)]);
        self.due = script
            .into_iter()
            .map(|(after, reply)| (now + after, reply))
            .collect();
        None
    }

    fn auth_delay_until(&mut self, now: Instant) -> Instant {
        now + self.auth_delay
    }

    fn saw(&mut self, now: Instant, action: &Action) {
        let at = now - self.start;
        match action {
            Action::Failed(error) => self.failures.push(Failure::new(at, error)),
            Action::JobEnded(report) => {
                self.jobs.push((at, *report));
                self.due.clear();
            }
            _ => {}
        }
    }
}

/// An error the connection reported (and told the client, unless it was
/// gone), and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Time since the connection opened.
    pub at: Duration,
    /// The code the client is told.
    pub code: ErrorCode,
    /// The stable name of the kind (metrics, logs).
    pub kind: &'static str,
    /// The message.
    pub message: String,
}

impl Failure {
    fn new(at: Duration, error: &SessionError) -> Failure {
        Failure {
            at,
            code: error.code(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// What happened on a scripted connection, with times since it opened.
#[derive(Debug)]
pub struct Record {
    /// Every frame the client received, and when its first byte was sent
    /// (as far as the bytes decode: [`Record::sent`] has them all).
    pub received: Vec<(Duration, Message)>,
    /// Every byte the server sent.
    pub sent: Vec<u8>,
    /// Every error the connection reported.
    pub failures: Vec<Failure>,
    /// Every job's end.
    pub jobs: Vec<(Duration, JobReport)>,
    /// When each job asked admission for a slot, with its PBKDF2
    /// iterations.
    pub admit_asked: Vec<(Duration, Option<u32>)>,
    /// When the connection closed, if it did.
    pub closed_at: Option<Duration>,
    /// Whether a job that asked for a slot had not ended at the close.
    pub slot_held: bool,
    /// Bytes the client sent that the connection never read.
    pub unread: usize,
    /// The clock when the run stopped.
    pub ended_at: Duration,
}

impl Record {
    /// The codes of the error frames the client received, in order.
    pub fn error_codes(&self) -> Vec<ErrorCode> {
        self.received
            .iter()
            .filter_map(|(_, message)| match message {
                Message::Error(error) => Some(error.code),
                _ => None,
            })
            .collect()
    }

    /// When the client received its first error frame, and its code.
    pub fn first_error(&self) -> Option<(Duration, ErrorCode)> {
        self.received
            .iter()
            .find_map(|(at, message)| match message {
                Message::Error(error) => Some((*at, error.code)),
                _ => None,
            })
    }

    /// The output of each job the client saw done: its data frames
    /// joined, one entry per done frame.
    pub fn files(&self) -> Vec<Vec<u8>> {
        let mut files = Vec::new();
        let mut current = Vec::new();
        for (_, message) in &self.received {
            match message {
                Message::Data(bytes) => current.extend_from_slice(bytes),
                Message::Done(_) => files.push(std::mem::take(&mut current)),
                Message::Error(_) => current.clear(),
                _ => {}
            }
        }
        files
    }

    /// The names of the frames received, in order (`welcome`, `queued`,
    /// `data`, ...), for messages in assertions.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.received
            .iter()
            .map(|(_, message)| message.kind().name())
            .collect()
    }
}

/// A sink that keeps what was written and when.
#[derive(Debug)]
struct TimedSink {
    start: Instant,
    /// The clock of the writes to come.
    now: Instant,
    writes: Vec<(Instant, Vec<u8>)>,
}

impl TimedSink {
    fn new(start: Instant) -> TimedSink {
        TimedSink {
            start,
            now: start,
            writes: Vec::new(),
        }
    }

    /// Every byte written.
    fn bytes(&self) -> Vec<u8> {
        self.writes
            .iter()
            .flat_map(|(_, chunk)| chunk.iter().copied())
            .collect()
    }

    /// The frames written, each with the time of its first byte.
    fn frames(&self) -> Vec<(Duration, Message)> {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for (at, chunk) in &self.writes {
            starts.push((bytes.len(), *at));
            bytes.extend_from_slice(chunk);
        }
        let time_of = |offset: usize| {
            starts
                .iter()
                .rev()
                .find(|(begin, _)| *begin <= offset)
                .map_or(Duration::ZERO, |(_, at)| *at - self.start)
        };
        let mut frames = Vec::new();
        let mut offset = 0;
        while bytes.len() - offset >= FRAME_HEADER_LEN {
            let header: &[u8; FRAME_HEADER_LEN] = bytes[offset..offset + FRAME_HEADER_LEN]
                .try_into()
                .expect("a header's length");
            // The server's own frames: any length a data frame may have.
            let Ok(header) = FrameHeader::decode(header, u32::MAX) else {
                break;
            };
            let end = offset + FRAME_HEADER_LEN + header.len as usize;
            if end > bytes.len() {
                break;
            }
            let Ok(message) = Message::decode(header.kind, &bytes[offset + FRAME_HEADER_LEN..end])
            else {
                break;
            };
            frames.push((time_of(offset), message));
            offset = end;
        }
        frames
    }
}

impl Sink for TimedSink {
    fn write(&mut self, bytes: &[u8]) {
        self.writes.push((self.now, bytes.to_vec()));
    }
}
