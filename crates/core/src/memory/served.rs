//! One connection driven from memory: the client's bytes from a slice (as
//! far as they have arrived), the server's frames to a [`Sink`], the
//! connection's actions answered by a [`Driver`]. Shared by
//! [`serve`](super::serve) (everything at once) and the
//! [harness](super::harness) (a timeline on its own clock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use aesd_proto::frame::HEADER_LEN as FRAME_HEADER_LEN;
use aesd_proto::handshake::HELLO_LEN;
use aesd_proto::{FrameHeader, FrameKind, Hello, Message};

use super::{Outcome, Sink};
use crate::connection::{Action, AdmissionReply, Connection, Read, SessionError, Transmit};
use crate::job::EncryptFeed;

/// How a driver answers what a connection asks of it.
pub(crate) trait Driver {
    /// A job asks for a slot (PBKDF2 `iterations`, if any): the answer now,
    /// or `None` when it comes later (through
    /// [`Connection::on_admission`]).
    fn admit(&mut self, now: Instant, iterations: Option<u32>) -> Option<AdmissionReply>;
    /// When the answer to a wrong or missing token may go out.
    fn auth_delay_until(&mut self, now: Instant) -> Instant;
    /// Sees each action before it is carried out (a log).
    fn saw(&mut self, _now: Instant, _action: &Action) {}
}

/// Every job admitted at once, a wrong token answered at once.
pub(crate) struct AdmitAll;

impl Driver for AdmitAll {
    fn admit(&mut self, _now: Instant, _iterations: Option<u32>) -> Option<AdmissionReply> {
        Some(AdmissionReply::Admitted)
    }

    fn auth_delay_until(&mut self, now: Instant) -> Instant {
        now
    }
}

/// One connection being served.
pub(crate) struct Served<'a, S> {
    pub(crate) connection: Connection,
    /// Everything the client sends, in order.
    input: &'a [u8],
    /// Bytes of `input` read so far.
    consumed: usize,
    /// Bytes of `input` that have arrived (at most `input.len()`).
    pub(crate) arrived: usize,
    /// Whether the client has closed its side (once all it sends arrived).
    pub(crate) closed: bool,
    /// A read the connection handed over that waits for bytes.
    pending_read: Option<Read>,
    /// Whether the client reads what the server sends; while it does not,
    /// one transmit is held unwritten (the server's write is blocked).
    pub(crate) reading: bool,
    held: Option<Transmit>,
    pub(crate) output: S,
    pub(crate) outcome: Outcome,
    /// Encryptions queued for the lane engine.
    pub(crate) feeds: Vec<Arc<EncryptFeed>>,
}

impl<'a, S: Sink> Served<'a, S> {
    /// A connection whose client sends `input` (nothing arrived yet) and
    /// reads everything.
    pub(crate) fn new(connection: Connection, input: &'a [u8], output: S) -> Self {
        Served {
            connection,
            input,
            consumed: 0,
            arrived: 0,
            closed: false,
            pending_read: None,
            reading: true,
            held: None,
            output,
            outcome: Outcome::default(),
            feeds: Vec::new(),
        }
    }

    /// The whole input has arrived and the client closed after it.
    pub(crate) fn all_arrived_and_closed(mut self) -> Self {
        self.arrived = self.input.len();
        self.closed = true;
        self
    }

    /// Does what can be done now; whether anything happened.
    pub(crate) fn step(&mut self, now: Instant, driver: &mut impl Driver) -> bool {
        let mut progress = self.write(now);
        while let Some(action) = self.connection.poll_action() {
            progress = true;
            driver.saw(now, &action);
            match action {
                Action::Admit { iterations } => {
                    self.outcome.slot_held = true;
                    if let Some(reply) = driver.admit(now, iterations) {
                        self.connection.on_admission(now, reply);
                    }
                }
                Action::Lane(feed) => self.feeds.push(feed),
                Action::Work(mut work) => {
                    work.run();
                    self.connection.on_work_done(now, work, Duration::ZERO);
                }
                Action::AuthFailed { .. } => {
                    let until = driver.auth_delay_until(now);
                    self.connection.set_auth_delay(until);
                }
                Action::JobEnded(report) => {
                    self.outcome.slot_held = false;
                    self.outcome.jobs.push(report);
                }
                Action::Failed(error) => self.outcome.errors.push(error),
                Action::Authenticated | Action::JobStarted { .. } => {}
            }
        }
        if self.connection.is_closed() {
            return progress;
        }
        let read = match self.pending_read.take() {
            Some(read) => Some(read),
            None => self.connection.poll_read(now),
        };
        if let Some(read) = read {
            progress |= self.read(now, read);
        }
        progress
    }

    /// Writes what the connection has to send, as far as the client reads.
    fn write(&mut self, now: Instant) -> bool {
        let mut progress = false;
        loop {
            if !self.reading {
                // A blocked write: the server has taken one transmit and
                // waits; its write deadline runs.
                if self.held.is_none()
                    && let Some(transmit) = self.connection.poll_transmit(now)
                {
                    self.held = Some(transmit);
                    progress = true;
                }
                return progress;
            }
            let transmit = match self.held.take() {
                Some(held) => held,
                None => match self.connection.poll_transmit(now) {
                    Some(transmit) => transmit,
                    None => return progress,
                },
            };
            self.send(&transmit);
            self.connection.on_sent(now, transmit);
            progress = true;
        }
    }

    fn send(&mut self, transmit: &Transmit) {
        match transmit {
            Transmit::Frame(message) => {
                let mut bytes = Vec::new();
                // The server's own messages always encode.
                if message.encode(&mut bytes).is_ok() {
                    self.output.write(&bytes);
                }
            }
            Transmit::Data(payload) => {
                let payload = payload.as_slice();
                let header = FrameHeader {
                    kind: FrameKind::Data,
                    len: payload.len() as u32,
                };
                self.output.write(&header.encode());
                self.output.write(payload);
            }
        }
    }

    /// Bytes of the input the connection has read.
    pub(crate) fn consumed(&self) -> usize {
        self.consumed
    }

    /// Bytes that have arrived and are not read yet.
    fn available(&self) -> usize {
        self.arrived - self.consumed
    }

    /// Whether nothing more will ever arrive.
    fn input_over(&self) -> bool {
        self.closed && self.arrived == self.input.len()
    }

    /// Takes up to `n` arrived bytes.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let input: &'a [u8] = self.input;
        let n = n.min(self.available());
        let taken = &input[self.consumed..self.consumed + n];
        self.consumed += n;
        taken
    }

    /// Whether a read of `n` bytes can be done now: they have arrived, or
    /// nothing more will (the read then reports what it got).
    fn ready(&self, n: usize) -> bool {
        self.available() >= n || self.input_over()
    }

    /// Takes the next `N` bytes; when fewer are left, tells the
    /// connection the input ended (cleanly before any byte of `what`,
    /// else truncated).
    fn take_exact<const N: usize>(
        &mut self,
        now: Instant,
        what: &'static str,
    ) -> Option<&'a [u8; N]> {
        let bytes = self.take(N);
        match <&[u8; N]>::try_from(bytes) {
            Ok(whole) => Some(whole),
            Err(_) if bytes.is_empty() => {
                self.connection.on_input_closed(now);
                None
            }
            Err(_) => {
                let got = bytes.len();
                let error = SessionError::Truncated {
                    what,
                    expected: N,
                    got,
                };
                self.connection.on_read_error(now, error);
                None
            }
        }
    }

    /// Takes the whole payload of `header`; when the input ends short of
    /// it, tells the connection the frame was truncated.
    fn take_payload(&mut self, now: Instant, header: FrameHeader) -> Option<&'a [u8]> {
        let len = header.len as usize;
        let bytes = self.take(len);
        if bytes.len() < len {
            let error = truncated(len, bytes.len());
            self.connection.on_read_error(now, error);
            return None;
        }
        Some(bytes)
    }

    /// Performs `read` if its bytes are there (else keeps it for later);
    /// whether anything happened.
    fn read(&mut self, now: Instant, read: Read) -> bool {
        let needed = match &read {
            Read::Hello => HELLO_LEN,
            Read::Header => FRAME_HEADER_LEN,
            Read::Body(header) | Read::Payload(header, _) | Read::Skip(header) => {
                header.len as usize
            }
            Read::Watch => 1,
        };
        if !self.ready(needed) {
            // A read handed over must be completed; the others are asked
            // again (the connection's state may change meanwhile).
            if matches!(read, Read::Body(_) | Read::Payload(..) | Read::Skip(_)) {
                self.pending_read = Some(read);
            }
            return false;
        }
        let max_data = self.connection.settings().chunk_size;
        match read {
            Read::Hello => {
                if let Some(bytes) = self.take_exact::<HELLO_LEN>(now, "hello") {
                    match Hello::decode(bytes) {
                        Ok(hello) => self.connection.on_hello(now, hello),
                        Err(err) => self.connection.on_read_error(now, err.into()),
                    }
                }
            }
            Read::Header => {
                if let Some(bytes) = self.take_exact::<FRAME_HEADER_LEN>(now, "frame header") {
                    match FrameHeader::decode(bytes, max_data) {
                        Ok(header) => self.connection.on_header(now, header),
                        Err(err) => self.connection.on_read_error(now, err.into()),
                    }
                }
            }
            Read::Body(header) => {
                if let Some(bytes) = self.take_payload(now, header) {
                    match Message::decode(header.kind, bytes) {
                        Ok(message) => self.connection.on_message(now, message),
                        Err(err) => self.connection.on_read_error(now, err.into()),
                    }
                }
            }
            Read::Payload(header, mut buf) => {
                if let Some(bytes) = self.take_payload(now, header) {
                    buf.payload_mut(bytes.len()).copy_from_slice(bytes);
                    self.connection.on_payload(now, buf);
                }
            }
            Read::Skip(header) => {
                if self.take_payload(now, header).is_some() {
                    self.connection.on_skipped(now);
                }
            }
            Read::Watch => {
                // Early input means a live client; none left means it
                // closed. Either way the job stops waiting for a watch.
                let closed = self.available() == 0;
                self.connection.on_watched(now, closed);
            }
        }
        true
    }
}

fn truncated(expected: usize, got: usize) -> SessionError {
    SessionError::Truncated {
        what: "frame payload",
        expected,
        got,
    }
}
