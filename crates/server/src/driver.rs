//! Drives one connection's protocol state machine (aesd-core's
//! [`Connection`]) over a byte stream: its reads, its writes, its work on
//! the worker pool, its admission, its deadlines, the minimum input rate,
//! the shutdown stages and the connection caps.
//!
//! One task per connection waits, in one `select!`, for whichever comes
//! first: the next bytes from the client (read straight into the job's
//! chunk buffer when they are a data payload), progress writing the frame
//! on its way out, the work out on the pool, an admission event, a stop,
//! a deadline. Every wait is cancel-safe, so input, output and work go on
//! at once (full duplex) and the state machine decides what comes next.
//!
//! The driver is the only place that tells a client about an error and
//! counts it: the state machine's errors come as [`Action::Failed`] with
//! their frame already queued; the driver's own (the transport, the input
//! rate, the connection caps) are sent by [`report`] as the connection
//! closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_core::ChunkBuf;
use aesd_core::connection::{
    Action, AdmissionReply, Connection, JobReport, Read, SessionError, Stop, Transmit,
};
use aesd_core::job::{Refusal, Work};
use aesd_proto::{ErrorCode, FrameHeader, FrameReader, Message, ProtoError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, oneshot};
use tokio::time::timeout_at;
use tracing::{debug, info, warn};

use crate::admission::{Entry, Permit, Ticket, TicketEvent};
use crate::client_id::ClientId;
use crate::error::ConnectionError;
use crate::input_rate::{ByteCounter, InputRate, Metered};
use crate::limits::ConnectionSlot;
use crate::log_limit::Decision;
use crate::low_water::{LowWater, Socket};
use crate::metrics::StreamLabels;
use crate::outgoing::Outgoing;
use crate::pool::Timed;
use crate::proxy::ProxyError;
use crate::shared::Shared;

/// How long a refused connection is given to take its error frame.
pub const REFUSAL_WRITE_LIMIT: Duration = Duration::from_secs(1);

/// Where a job is with admission.
enum Slot {
    /// No job waits or runs.
    None,
    /// Queued: the ticket's events move it.
    Queued(Ticket),
    /// Running: the permit, whose drop frees the slot.
    Held { _permit: Permit },
}

/// A data payload being read into the buffer the state machine lent.
struct PayloadRead {
    header: FrameHeader,
    buf: ChunkBuf,
    filled: usize,
}

/// What the driver reads now.
enum Reading {
    /// Nothing.
    Idle,
    /// A payload, part of it read.
    Payload(PayloadRead),
    /// A discarded payload: bytes left to skip.
    Skip(usize),
}

/// What one wait of the driver brought.
enum Event {
    Stopping,
    Aborting,
    Evicted(crate::limits::ConnectionRefused),
    Ticket(TicketEvent),
    Work(Result<Timed<Work>, oneshot::error::RecvError>),
    LanesDone,
    Written(std::io::Result<Option<Transmit>>),
    Header(Result<Option<FrameHeader>, aesd_proto::FrameError>),
    Watched(std::io::Result<bool>),
    Payload(Result<usize, aesd_proto::FrameError>),
    Skipped(Result<usize, aesd_proto::FrameError>),
    Deadline,
    RateWindow,
}

/// Serves one connection over a pair of byte streams until it closes.
/// `slot` holds its place under the connection caps (marked idle while it
/// waits for a job, so it may be closed for another client's connection).
/// When `read` is the socket itself (plain TCP), a payload is read in one
/// wake ([`crate::low_water`]).
pub async fn serve<R, W>(
    read: R,
    write: W,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    slot: Option<&ConnectionSlot>,
) where
    R: AsyncRead + Socket + Unpin,
    W: AsyncWrite + Unpin,
{
    let _open = shared.metrics.connection_opened();
    let input = ByteCounter::default();
    let reader = FrameReader::new(Metered::new(read, input.clone()), shared.config.chunk_size);
    let lanes_done = Arc::new(Notify::new());
    let mut connection = Connection::new(Arc::clone(&shared.settings), Instant::now());
    // With an audit log, this connection's by-name jobs are recorded with
    // its client's address.
    let audited = shared
        .named_keys
        .audited(&shared.metrics, peer)
        .map(Arc::new);
    if let Some(audited) = &audited {
        connection.set_named_keys(Arc::clone(audited) as Arc<dyn aesd_core::named_key::NamedKeys>);
    }
    let waker = Arc::clone(&lanes_done);
    connection.link_lanes(
        shared.pool.lane_load(),
        Some(Arc::new(move || waker.notify_one())),
    );
    let mut driver = Driver {
        connection,
        lanes_done,
        reader,
        out: Outgoing::new(write),
        peer,
        audited,
        client: shared.client_id(peer.ip()),
        shared,
        slot,
        admission: Slot::None,
        work: None,
        reading: Reading::Idle,
        low_water: LowWater::default(),
        input,
        rate: None,
        idle_marked: false,
        stopping_told: false,
        aborting_told: false,
        timers: Timers {
            deadline: Timer::new(),
            window: Timer::new(),
        },
    };
    let failure = driver.run().await.err();
    if let Some(error) = failure {
        let limit = shared.config.handshake_timeout;
        report(&mut driver.out, peer, &error, limit, shared).await;
    }
    if let Some(audited) = &driver.audited {
        audited.connection_closed();
    }
    let _ = driver.out.shutdown().await;
    // The linger reads whatever comes: no mark holds bytes back.
    driver.reading = Reading::Idle;
    driver.lower_mark();
    linger(&mut driver.reader).await;
}

/// How long a closing connection reads what its client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Reads and drops what the client still sends, until it closes (or for
/// [`LINGER`]), after the write side was shut down. Closing a socket with
/// unread input makes the kernel reset the connection, and the reset
/// discards what was sent but not yet transmitted: a job cut off while
/// its client was still writing lost the end of its last frame and its
/// `shutting_down` error frame (the client saw `connection closed after
/// 63100 of 65536 bytes of a frame payload`). Reading until the client
/// closes, which it does once it has read the error, lets everything sent
/// arrive. No byte limit: a client reading its output slowly may well
/// write fast meanwhile.
async fn linger<R: AsyncRead + Unpin>(reader: &mut FrameReader<R>) {
    let drain = async { while let Ok(1..) = reader.skip_some(64 << 10).await {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

struct Driver<'a, R, W> {
    connection: Connection,
    /// Woken when an encryption's chunks are back from the lane engine.
    lanes_done: Arc<Notify>,
    reader: FrameReader<Metered<R>>,
    out: Outgoing<W>,
    peer: SocketAddr,
    /// This connection's by-name jobs, audited (with `--audit-log`).
    audited: Option<Arc<crate::job_audit::AuditedKeys>>,
    client: ClientId,
    shared: &'a Arc<Shared>,
    slot: Option<&'a ConnectionSlot>,
    admission: Slot,
    /// The work out on the pool, when it was handed out.
    work: Option<oneshot::Receiver<Timed<Work>>>,
    reading: Reading,
    /// The socket's receive mark (plain TCP only), raised while a payload
    /// is read.
    low_water: LowWater,
    input: ByteCounter,
    /// The running job's input rate check.
    rate: Option<InputRate>,
    /// Whether the connection slot is marked idle.
    idle_marked: bool,
    stopping_told: bool,
    aborting_told: bool,
    timers: Timers,
}

/// The driver's two timers, kept from wait to wait (a timer made anew each
/// time would be registered and removed again at every turn of the loop).
struct Timers {
    /// The state machine's deadline.
    deadline: Timer,
    /// The end of the input rate's window.
    window: Timer,
}

/// A timer reset only when its instant changes.
struct Timer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    at: Option<Instant>,
}

impl Timer {
    fn new() -> Self {
        Timer {
            sleep: Box::pin(tokio::time::sleep(Duration::from_secs(86_400))),
            at: None,
        }
    }

    /// Resolves at `at` (never for `None`).
    async fn until(&mut self, at: Option<Instant>) {
        let Some(at) = at else {
            return std::future::pending().await;
        };
        if self.at != Some(at) {
            self.sleep.as_mut().reset(at.into());
            self.at = Some(at);
        }
        self.sleep.as_mut().await;
    }
}

impl<R, W> Driver<'_, R, W>
where
    R: AsyncRead + Socket + Unpin,
    W: AsyncWrite + Unpin,
{
    /// Runs the connection until it closes: `Ok` when the state machine
    /// closed it (its errors are reported), else the driver's own error
    /// (not yet reported).
    async fn run(&mut self) -> Result<(), ConnectionError> {
        // One clock read per turn of the loop: the instant an event was
        // handled serves the turn after it (nothing awaits in between).
        // On riscv32 Linux the clock is a system call, and a payload
        // arriving a packet at a time turns this loop once per packet.
        let mut now = Instant::now();
        loop {
            self.act(now)?;
            if !self.out.is_busy()
                && let Some(transmit) = self.connection.poll_transmit(now)
            {
                self.out.start(transmit).map_err(SessionError::from)?;
            }
            if self.connection.is_closed() {
                return Ok(());
            }
            self.mark_idle();
            self.lower_mark();
            let mut wanted = ReadWanted::Nothing;
            if matches!(self.reading, Reading::Idle) {
                match self.connection.poll_read(now) {
                    // Reads finished once started: the hello and a control
                    // frame's body (short, under the read deadline).
                    Some(Read::Hello) => {
                        self.read_hello(now).await?;
                        now = Instant::now();
                        continue;
                    }
                    Some(Read::Body(header)) => {
                        now = self.read_body(header).await?;
                        continue;
                    }
                    Some(Read::Payload(header, buf)) => {
                        self.reading = Reading::Payload(PayloadRead {
                            header,
                            buf,
                            filled: 0,
                        });
                    }
                    Some(Read::Skip(header)) => self.reading = Reading::Skip(header.len as usize),
                    Some(Read::Header) => wanted = ReadWanted::Header,
                    Some(Read::Watch) => wanted = ReadWanted::Watch,
                    None => {}
                }
            }
            now = self.wait(wanted, now).await?;
        }
    }

    /// Marks the connection slot idle while the connection waits for a
    /// job (only on a change: it takes the caps' lock).
    fn mark_idle(&mut self) {
        let idle = self.connection.is_idle();
        if idle != self.idle_marked
            && let Some(slot) = self.slot
        {
            slot.set_idle(idle);
            self.idle_marked = idle;
        }
    }

    /// Does what the state machine asks.
    fn act(&mut self, now: Instant) -> Result<(), ConnectionError> {
        while let Some(action) = self.connection.poll_action() {
            match action {
                Action::Admit { iterations } => self.admit(now, iterations),
                Action::Work(work) => self.submit(work)?,
                Action::Lane(feed) => self
                    .shared
                    .pool
                    .queue_feed(feed)
                    .map_err(|err| ConnectionError::Internal(err.to_string()))?,
                Action::Authenticated => self.shared.auth_failures.succeeded(self.client),
                Action::AuthFailed { reason } => {
                    let delay = self.shared.auth_failures.failed(self.client);
                    debug!(peer = %self.peer, "authentication failed ({reason}); answering in {delay:?}");
                    self.connection.set_auth_delay(now + delay);
                }
                Action::JobStarted { queue_wait } => {
                    if let Some((operation, _)) = self.connection.job() {
                        self.shared
                            .metrics
                            .observe_queue_wait(operation.name(), queue_wait);
                    }
                    self.rate = Some(InputRate::new(
                        self.shared.config.min_input_rate,
                        self.shared.config.input_rate_window,
                        self.input.clone(),
                    ));
                }
                Action::JobEnded(report) => self.job_ended(&report),
                Action::Failed(error) => {
                    self.shared.metrics.error(error.kind());
                    log_error(self.peer, &ConnectionError::Session(error), self.shared);
                }
            }
        }
        Ok(())
    }

    /// Takes the PBKDF2 budget and enters the admission queue.
    fn admit(&mut self, now: Instant, iterations: Option<u32>) {
        let shared = self.shared;
        if let Some(iterations) = iterations
            && let Err(exceeded) = shared.kdf_budget.take(self.client, iterations, now)
        {
            shared.metrics.job_refused("kdf_budget");
            let refusal = Refusal {
                reason: "kdf_budget",
                message: exceeded.to_string(),
            };
            self.connection
                .on_admission(now, AdmissionReply::Refused(refusal));
            return;
        }
        match shared.admission.enter(self.client) {
            Ok(Entry::Admitted(permit)) => {
                self.admission = Slot::Held { _permit: permit };
                self.connection.on_admission(now, AdmissionReply::Admitted);
            }
            Ok(Entry::Queued(ticket)) => {
                let position = ticket.position();
                self.admission = Slot::Queued(ticket);
                self.connection
                    .on_admission(now, AdmissionReply::Queued(position));
            }
            Err(refused) => {
                shared.metrics.job_refused(refused.reason());
                self.connection
                    .on_admission(now, AdmissionReply::Refused(refusal(&refused)));
            }
        }
    }

    /// Hands a piece of work to the pool.
    fn submit(&mut self, work: Work) -> Result<(), ConnectionError> {
        let submitted = self.shared.pool.start(move || {
            let mut work = work;
            work.run();
            work
        });
        self.work = Some(submitted.map_err(|err| ConnectionError::Internal(err.to_string()))?);
        Ok(())
    }

    /// Counts and logs a job's end; frees its slot.
    fn job_ended(&mut self, report: &JobReport) {
        self.admission = Slot::None;
        self.rate = None;
        let stream = StreamLabels {
            operation: report.operation.name(),
            format: report.format.name(),
        };
        let outcome = report
            .result
            .map(|done| (Duration::from_micros(done.processing_us), report.elapsed));
        self.shared.metrics.job_finished(&stream, outcome);
        if let Some(audited) = &self.audited {
            audited.job_ended(report);
        }
        if let Ok(done) = report.result {
            info!(
                peer = %self.peer,
                op = report.operation.name(),
                bytes_in = done.bytes_in,
                bytes_out = done.bytes_out,
                queue_ms = done.queue_us / 1000,
                processing_ms = done.processing_us / 1000,
                "job done"
            );
        }
    }

    async fn read_hello(&mut self, now: Instant) -> Result<(), ConnectionError> {
        let deadline = self.deadline();
        let read = self.reader.read_hello();
        let hello = match deadline {
            Some(deadline) => timeout_at(deadline.into(), read).await.ok(),
            None => Some(read.await),
        };
        let Some(hello) = hello else {
            self.connection.on_timeout(Instant::now());
            return Ok(());
        };
        match hello {
            Ok(hello) => self.connection.on_hello(now, hello),
            // Connected and closed without a byte: a port probe or health
            // check, not a broken client.
            Err(aesd_proto::FrameError::Truncated { got: 0, .. }) => {
                return Err(SessionError::ClientGone.into());
            }
            Err(aesd_proto::FrameError::Io(err))
                if err.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                return Err(SessionError::ClientGone.into());
            }
            // Only trusted proxies may say who the client is.
            Err(aesd_proto::FrameError::Protocol(ProtoError::BadMagic { found }))
                if ProxyError::looks_like_header(&found) =>
            {
                return Err(ProxyError::Untrusted { peer: self.peer }.into());
            }
            Err(err) => return self.read_failed(err),
        }
        Ok(())
    }

    /// Reads a control frame's body and hands it on; returns the instant
    /// it was handled.
    async fn read_body(&mut self, header: FrameHeader) -> Result<Instant, ConnectionError> {
        let deadline = self.deadline();
        let read = self.reader.read_body(header);
        let body = match deadline {
            Some(deadline) => timeout_at(deadline.into(), read).await.ok(),
            None => Some(read.await),
        };
        let now = Instant::now();
        match body {
            None => self.connection.on_timeout(now),
            Some(Ok(message)) => self.connection.on_message(now, message),
            Some(Err(err)) => self.read_failed(err)?,
        }
        Ok(now)
    }

    /// A read failed: the stream's fault goes to the state machine (it
    /// tells the client), the transport's ends the connection.
    fn read_failed(&mut self, err: aesd_proto::FrameError) -> Result<(), ConnectionError> {
        match ConnectionError::from(err) {
            ConnectionError::Session(error) => {
                self.connection.on_read_error(Instant::now(), error);
                Ok(())
            }
            other => Err(other),
        }
    }

    /// The state machine's next deadline.
    fn deadline(&self) -> Option<Instant> {
        self.connection.poll_timeout()
    }

    /// Waits for the first of everything the connection waits for, from
    /// `now` on, and hands it to the state machine; returns the instant it
    /// was handled.
    async fn wait(&mut self, wanted: ReadWanted, now: Instant) -> Result<Instant, ConnectionError> {
        let shared = self.shared;
        let deadline = self.deadline();
        let running = self.connection.job_running();
        let reading = running
            && (matches!(wanted, ReadWanted::Header) || !matches!(self.reading, Reading::Idle));
        if let Some(rate) = &mut self.rate {
            if reading {
                rate.start_waiting(now);
            } else {
                rate.stop_waiting(now)?;
            }
        }
        let rate_window = self.rate.as_ref().and_then(InputRate::window_end);
        // A payload's read waits for the rest of the payload: the mark is
        // what is still to come (bytes already in the reader's buffer are
        // read without waiting, and a mark above what the client will
        // still send would never be met).
        if let Reading::Payload(payload) = &self.reading
            && let Some(socket) = self.reader.get_ref().get_ref().socket()
        {
            let remaining = payload.header.len as usize - payload.filled;
            self.low_water.raise(socket, remaining);
        }
        let idle = self.connection.is_idle();
        let queued = matches!(self.admission, Slot::Queued(_));
        let in_lanes = self.connection.lanes_in_flight();
        let event = {
            let Driver {
                reader,
                out,
                slot,
                admission,
                work,
                lanes_done,
                reading,
                stopping_told,
                aborting_told,
                timers,
                ..
            } = self;
            let evicted = async {
                match slot {
                    Some(slot) if idle => slot.evicted().await,
                    _ => std::future::pending().await,
                }
            };
            let ticket_event = async {
                match admission {
                    Slot::Queued(ticket) => ticket.next_event().await,
                    _ => std::future::pending().await,
                }
            };
            let work_done = async {
                match work {
                    Some(receiver) => receiver.await,
                    None => std::future::pending().await,
                }
            };
            let read = async {
                match (wanted, &mut *reading) {
                    (_, Reading::Payload(payload)) => {
                        let len = payload.header.len as usize;
                        let dst = &mut payload.buf.payload_mut(len)[payload.filled..];
                        Event::Payload(reader.read_some(dst).await)
                    }
                    (_, Reading::Skip(left)) => Event::Skipped(reader.skip_some(*left).await),
                    (ReadWanted::Header, Reading::Idle) => {
                        Event::Header(reader.next_header().await)
                    }
                    (ReadWanted::Watch, Reading::Idle) => {
                        Event::Watched(reader.await_input().await)
                    }
                    (ReadWanted::Nothing, Reading::Idle) => std::future::pending().await,
                }
            };
            let sleep = timers.deadline.until(deadline);
            let window = timers.window.until(rate_window);
            let busy = out.is_busy();
            tokio::select! {
                biased;
                () = shared.shutdown.aborting(), if !*aborting_told => Event::Aborting,
                () = shared.shutdown.stopping(), if !*stopping_told => Event::Stopping,
                why = evicted, if idle => Event::Evicted(why),
                event = ticket_event, if queued => Event::Ticket(event),
                done = work_done => Event::Work(done),
                () = lanes_done.notified(), if in_lanes => Event::LanesDone,
                written = out.write_some(), if busy => Event::Written(written),
                event = read => event,
                () = sleep => Event::Deadline,
                () = window => Event::RateWindow,
            }
        };
        let now = Instant::now();
        // Bytes held back by the receive mark count before the input rate
        // judges the client, whichever event came at the window's end (a
        // read's own bytes are its event's). A frame's read deadline is
        // the whole frame's: a mark changes nothing there.
        let held = if reading
            && rate_window.is_some_and(|end| now >= end)
            && !matches!(event, Event::Payload(_))
        {
            self.take_queued()
        } else {
            None
        };
        if let Some(rate) = &mut self.rate
            && reading
        {
            rate.stop_waiting(now)?;
        }
        if let Some(held) = held {
            self.handle(now, held)?;
        }
        self.handle(now, event)?;
        Ok(now)
    }

    /// Sets the receive mark back to 1 when it is raised and no payload
    /// is being read (between payloads; before the closing connection's
    /// linger, which must read whatever arrives).
    fn lower_mark(&mut self) {
        if self.low_water.is_raised()
            && !matches!(self.reading, Reading::Payload(_))
            && let Some(socket) = self.reader.get_ref().get_ref().socket()
        {
            self.low_water.lower(socket);
        }
    }

    /// While the receive mark is raised for a payload: lowers it (the
    /// next wait sets it to what is then still to come) and takes what
    /// the kernel queued below it, as the read that would have happened
    /// without the mark (`None` when nothing was queued, or no mark is
    /// raised).
    fn take_queued(&mut self) -> Option<Event> {
        if !self.low_water.is_raised() {
            return None;
        }
        let socket = self.reader.get_ref().get_ref().socket()?;
        let Reading::Payload(payload) = &mut self.reading else {
            return None;
        };
        // Bytes in the reader's buffer come first (the select may have
        // answered another event before the read took them): then the
        // next wait's read takes them, without waiting.
        if !self.reader.is_drained() {
            return None;
        }
        self.low_water.lower(socket);
        let len = payload.header.len as usize;
        let dst = &mut payload.buf.payload_mut(len)[payload.filled..];
        match LowWater::take_queued(socket, dst) {
            Ok(n) => {
                self.input.add(n);
                Some(Event::Payload(Ok(n)))
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => None,
            Err(err) => Some(Event::Payload(Err(aesd_proto::FrameError::Io(err)))),
        }
    }

    /// Hands what arrived to the state machine.
    fn handle(&mut self, now: Instant, event: Event) -> Result<(), ConnectionError> {
        match event {
            Event::Aborting => {
                self.aborting_told = true;
                self.stopping_told = true;
                self.connection.on_stop(now, Stop::Aborting);
            }
            Event::Stopping => {
                self.stopping_told = true;
                self.connection.on_stop(now, Stop::Stopping);
            }
            Event::Evicted(why) => return Err(why.into()),
            Event::Ticket(TicketEvent::Admitted(permit)) => {
                self.admission = Slot::Held { _permit: permit };
                self.connection.on_admission(now, AdmissionReply::Admitted);
            }
            Event::Ticket(TicketEvent::Moved(position)) => {
                self.connection
                    .on_admission(now, AdmissionReply::Queued(position));
            }
            Event::Ticket(TicketEvent::Refused(refused)) => {
                self.admission = Slot::None;
                self.shared.metrics.job_refused(refused.reason());
                self.connection
                    .on_admission(now, AdmissionReply::Refused(refusal(&refused)));
            }
            Event::Work(done) => {
                self.work = None;
                let done = done.map_err(|_| {
                    ConnectionError::Internal(
                        "worker pool task failed: the task panicked or the pool has shut down"
                            .into(),
                    )
                })?;
                self.connection.on_work_done(now, done.value, done.elapsed);
            }
            Event::LanesDone => self
                .connection
                .on_lanes_done(now)
                .map_err(|lost| ConnectionError::Internal(lost.to_string()))?,
            Event::Written(written) => match written {
                Ok(Some(transmit)) => {
                    if let (Transmit::Data(payload), Some((operation, format))) =
                        (&transmit, self.connection.job())
                    {
                        self.shared.metrics.add_output_bytes(
                            &StreamLabels {
                                operation: operation.name(),
                                format: format.name(),
                            },
                            payload.as_slice().len() as u64,
                        );
                    }
                    self.connection.on_sent(now, transmit);
                }
                Ok(None) => {}
                Err(err) => {
                    self.connection.on_write_failed();
                    return Err(err.into());
                }
            },
            Event::Header(header) => match header {
                Ok(Some(header)) => self.connection.on_header(now, header),
                Ok(None) => self.connection.on_input_closed(now),
                // A reset between jobs is a client leaving, like a close
                // (load balancers' health checks reset after the welcome).
                Err(aesd_proto::FrameError::Io(err))
                    if err.kind() == std::io::ErrorKind::ConnectionReset
                        && self.connection.is_idle() =>
                {
                    self.connection.on_input_closed(now)
                }
                Err(err) => self.read_failed(err)?,
            },
            Event::Watched(watched) => match watched {
                Ok(closed) => self.connection.on_watched(now, closed),
                // The client left the queue.
                Err(_) => self.connection.on_watched(now, true),
            },
            Event::Payload(read) => {
                let n = match read {
                    Ok(n) => n,
                    Err(err) => return self.read_failed(err),
                };
                let Reading::Payload(payload) = &mut self.reading else {
                    return Ok(());
                };
                let len = payload.header.len as usize;
                if n == 0 {
                    let got = payload.filled;
                    self.reading = Reading::Idle;
                    self.connection.on_read_error(
                        now,
                        SessionError::Truncated {
                            what: "frame payload",
                            expected: len,
                            got,
                        },
                    );
                    return Ok(());
                }
                payload.filled += n;
                if payload.filled == len
                    && let Reading::Payload(payload) =
                        std::mem::replace(&mut self.reading, Reading::Idle)
                {
                    if let Some((operation, format)) = self.connection.job() {
                        self.shared.metrics.add_input_bytes(
                            &StreamLabels {
                                operation: operation.name(),
                                format: format.name(),
                            },
                            len as u64,
                        );
                    }
                    let mut buf = payload.buf;
                    buf.payload_mut(len);
                    self.connection.on_payload(now, buf);
                }
            }
            Event::Skipped(skipped) => {
                let n = match skipped {
                    Ok(n) => n,
                    Err(err) => return self.read_failed(err),
                };
                let Reading::Skip(left) = &mut self.reading else {
                    return Ok(());
                };
                if n == 0 {
                    let expected = *left;
                    self.reading = Reading::Idle;
                    self.connection.on_read_error(
                        now,
                        SessionError::Truncated {
                            what: "frame payload",
                            expected,
                            got: 0,
                        },
                    );
                    return Ok(());
                }
                *left -= n;
                if *left == 0 {
                    self.reading = Reading::Idle;
                    self.connection.on_skipped(now);
                }
            }
            Event::Deadline => self.connection.on_timeout(now),
            Event::RateWindow => {}
        }
        Ok(())
    }
}

/// What the driver reads while it waits.
#[derive(Clone, Copy)]
enum ReadWanted {
    /// Nothing.
    Nothing,
    /// The next frame header.
    Header,
    /// Whether the client closes (consuming nothing).
    Watch,
}

/// An admission refusal, in the words the client is told.
fn refusal(refused: &crate::admission::Refused) -> Refusal {
    Refusal {
        reason: refused.reason(),
        message: refused.to_string(),
    }
}

/// Tells the client `error` (the driver's own, as the connection closes):
/// counts it, logs it, and sends its error frame (within `limit`) unless
/// the client cannot take it (the transport failed). Returns whether the
/// frame was sent.
pub async fn report<W: AsyncWrite + Unpin>(
    out: &mut Outgoing<W>,
    peer: SocketAddr,
    error: &ConnectionError,
    limit: Duration,
    shared: &Shared,
) -> bool {
    shared.metrics.error(error.kind());
    log_error(peer, error, shared);
    if !error.peer_reachable() || out.is_busy() {
        return false;
    }
    matches!(
        tokio::time::timeout(limit, out.send_now(Message::Error(error.to_frame()))).await,
        Ok(Ok(()))
    )
}

/// Counts and logs an error the client cannot be told (no channel to it),
/// within the client's share of log lines.
pub fn report_unreachable(peer: SocketAddr, error: &ConnectionError, shared: &Shared) {
    shared.metrics.error(error.kind());
    log_error(peer, error, shared);
}

/// Logs a client's error, within the client's share of log lines
/// ([`crate::log_limit`]). Refusals (`busy`, `unauthorized`,
/// `tls_required`) are logged at debug: they are the server working as
/// configured, and `aesd_errors_total` counts them; but TLS handshakes
/// refused (rate, places) at info; failed jobs at info,
/// connections closed for an error at warn.
fn log_error(peer: SocketAddr, error: &ConnectionError, shared: &Shared) {
    if error.is_client_gone()
        || matches!(error, ConnectionError::Session(SessionError::ShuttingDown))
    {
        debug!(%peer, "connection ended: {error}");
        return;
    }
    let client = shared.client_id(peer.ip());
    let summary = match shared.log_limit.admit(client, std::time::Instant::now()) {
        Decision::Suppress => return,
        Decision::Log(summary) => summary,
    };
    if let Some(summary) = summary {
        summary.log();
    }
    let code = error.code();
    match error {
        // A TLS client refused before its handshake: a client over the
        // limits meant for floods, which a normal run should not meet.
        ConnectionError::HandshakeRate(_) | ConnectionError::HandshakePlace(_) => {
            info!(%peer, %code, "{error}");
        }
        _ if matches!(
            code,
            ErrorCode::Busy | ErrorCode::Unauthorized | ErrorCode::TlsRequired
        ) =>
        {
            debug!(%peer, %code, "refused: {error}");
        }
        // Failed handshakes: probes and broken clients, as before TLS.
        ConnectionError::TlsHandshake(_) => debug!(%peer, "connection closed: {error}"),
        error if !error.closes_connection() => info!(%peer, %code, "job failed: {error}"),
        error => warn!(%peer, %code, "connection closed: {error}"),
    }
}
