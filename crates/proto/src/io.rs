//! Async frame I/O over any tokio byte stream.
//!
//! [`FrameReader`] reads the hello, frame headers and payloads, enforcing
//! the caps before reading; data payloads can be read straight into a
//! caller's reusable buffer. [`FrameWriter`] writes whole frames. Neither
//! applies timeouts or decides what a frame means in a session.

use std::io;

use bytes::Buf;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::error::ProtoError;
use crate::frame::{FrameHeader, FrameKind, HEADER_LEN};
use crate::handshake::{HELLO_LEN, Hello};
use crate::limits::MAX_CONTROL_PAYLOAD;
use crate::message::Message;
use crate::read_buffer::ReadBuffer;

/// Reading or writing a frame failed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection part-way through a frame or hello.
    #[error("connection closed after {got} of {expected} bytes of a {what}")]
    Truncated {
        /// What was being read ("hello", "frame header", "data payload"...).
        what: &'static str,
        /// Bytes the item needed.
        expected: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// The bytes break the protocol.
    #[error(transparent)]
    Protocol(#[from] ProtoError),
    /// The transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

/// Reads frames from a byte stream.
pub struct FrameReader<R> {
    inner: ReadBuffer<R>,
    max_data: u32,
    scratch: Vec<u8>,
    /// The bytes of a frame header read so far (see [`FrameReader::next_header`]).
    header: [u8; HEADER_LEN],
    /// How many bytes of `header` are filled.
    header_got: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader that accepts data frames of up to `max_data` bytes.
    pub fn new(inner: R, max_data: u32) -> Self {
        FrameReader {
            // Small: it holds headers and control frames; data payloads
            // are read past it straight into the caller's buffer. Every
            // open connection pays for it.
            inner: ReadBuffer::new(inner, 4 * 1024),
            max_data,
            scratch: Vec::new(),
            header: [0; HEADER_LEN],
            header_got: 0,
        }
    }

    /// Reads and parses the 8-byte hello.
    pub async fn read_hello(&mut self) -> Result<Hello, FrameError> {
        let mut bytes = [0u8; HELLO_LEN];
        self.read_full(&mut bytes, "hello").await?;
        Ok(Hello::decode(&bytes)?)
    }

    /// Reads the next frame header; `None` when the peer closed the
    /// connection cleanly between frames.
    ///
    /// Cancel safe: the bytes of a header read before the future is
    /// dropped (in a `select!` with a timeout, a shutdown or a cancelled
    /// job) are kept and the next call goes on from them, so the stream
    /// stays in step.
    pub async fn next_header(&mut self) -> Result<Option<FrameHeader>, FrameError> {
        while self.header_got < HEADER_LEN {
            let n = self.inner.read(&mut self.header[self.header_got..]).await?;
            if n == 0 {
                let got = std::mem::take(&mut self.header_got);
                if got == 0 {
                    return Ok(None);
                }
                return Err(FrameError::Truncated {
                    what: "frame header",
                    expected: HEADER_LEN,
                    got,
                });
            }
            self.header_got += n;
        }
        self.header_got = 0;
        Ok(Some(FrameHeader::decode(&self.header, self.max_data)?))
    }

    /// Reads a payload of `dst.len()` bytes into `dst` (use the header's
    /// length); for data frames this avoids any intermediate copy.
    pub async fn read_payload(&mut self, dst: &mut [u8]) -> Result<(), FrameError> {
        self.read_full(dst, "frame payload").await
    }

    /// Reads some bytes of a payload into `dst` (straight from the stream
    /// when `dst` is at least as large as the input buffer); 0 at the end
    /// of the stream. Cancel safe: bytes are only consumed when it
    /// completes, so a driver can wait for it beside other things and go
    /// on from where it got.
    pub async fn read_some(&mut self, dst: &mut [u8]) -> Result<usize, FrameError> {
        Ok(self.inner.read(dst).await?)
    }

    /// Reads and drops up to `n` bytes of a payload through the small
    /// input buffer; how many, 0 at the end of the stream. Cancel safe.
    pub async fn skip_some(&mut self, n: usize) -> Result<usize, FrameError> {
        Ok(self.inner.skip(n).await?)
    }

    /// Reads and drops the payload for `header` (a failed job's data)
    /// through the small input buffer: the reader's memory stays the same
    /// whatever the frame's size.
    pub async fn skip_payload(&mut self, header: FrameHeader) -> Result<(), FrameError> {
        let expected = header.len as usize;
        let mut got = 0;
        while got < expected {
            let n = self.inner.skip(expected - got).await?;
            if n == 0 {
                return Err(FrameError::Truncated {
                    what: "frame payload",
                    expected,
                    got,
                });
            }
            got += n;
        }
        Ok(())
    }

    /// The stream read from (its bytes may be buffered here: read only
    /// through the reader, or past it when [`FrameReader::is_drained`]).
    pub fn get_ref(&self) -> &R {
        self.inner.get_ref()
    }

    /// Whether the reader holds nothing read from the stream (no bytes
    /// and no error waiting): reading the stream directly then takes the
    /// bytes that come next.
    pub fn is_drained(&self) -> bool {
        self.inner.is_drained()
    }

    /// Heap bytes the reader holds between frames (its input buffer and
    /// its scratch for control payloads), for memory accounting and tests.
    pub fn held_bytes(&self) -> usize {
        self.inner.capacity() + self.scratch.capacity()
    }

    /// Reads the payload for `header` and decodes it. The scratch buffer
    /// it reads into is kept for the next control frame only up to the
    /// largest control payload: a data frame's size is not kept.
    pub async fn read_body(&mut self, header: FrameHeader) -> Result<Message, FrameError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(header.len as usize, 0);
        let result = self.read_full(&mut scratch, "frame payload").await;
        let decoded = result.and_then(|()| Ok(Message::decode(header.kind, &scratch)?));
        if header.kind != FrameKind::Data {
            // A control frame may carry a secret (begin: password or key;
            // auth: token): wipe the copy here and the input buffer's.
            scratch.fill(0);
            self.inner.wipe_consumed();
        }
        if scratch.capacity() <= MAX_CONTROL_PAYLOAD as usize {
            self.scratch = scratch;
        }
        decoded
    }

    /// Reads a whole frame; `None` at a clean end of stream.
    pub async fn read_message(&mut self) -> Result<Option<Message>, FrameError> {
        match self.next_header().await? {
            None => Ok(None),
            Some(header) => self.read_body(header).await.map(Some),
        }
    }

    /// Waits until the peer sends something or closes the connection,
    /// consuming nothing: `true` when it closed. Cancel-safe, so it can
    /// watch a peer that is expected to stay silent (a queued client).
    pub async fn await_input(&mut self) -> io::Result<bool> {
        Ok(self.inner.fill_buf().await?.is_empty())
    }

    async fn read_up_to(&mut self, dst: &mut [u8]) -> Result<usize, FrameError> {
        let mut got = 0;
        while got < dst.len() {
            let n = self.inner.read(&mut dst[got..]).await?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(got)
    }

    async fn read_full(&mut self, dst: &mut [u8], what: &'static str) -> Result<(), FrameError> {
        let got = self.read_up_to(dst).await?;
        if got < dst.len() {
            return Err(FrameError::Truncated {
                what,
                expected: dst.len(),
                got,
            });
        }
        Ok(())
    }
}

/// Writes frames to a byte stream.
pub struct FrameWriter<W> {
    inner: W,
    scratch: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// A writer over `inner`.
    pub fn new(inner: W) -> Self {
        FrameWriter {
            inner,
            scratch: Vec::new(),
        }
    }

    /// Writes the 8-byte hello.
    pub async fn send_hello(&mut self, hello: Hello) -> Result<(), FrameError> {
        self.inner.write_all(&hello.encode()).await?;
        self.inner.flush().await?;
        Ok(())
    }

    /// Writes one whole message. A frame that carries a secret (begin's
    /// password, auth's token) is wiped from the writer's buffer after it
    /// is written.
    pub async fn send(&mut self, message: &Message) -> Result<(), FrameError> {
        self.scratch.clear();
        message.encode(&mut self.scratch)?;
        let result = self.inner.write_all(&self.scratch).await;
        if matches!(message, Message::Begin(_) | Message::Auth(_)) {
            self.scratch.fill(0);
        }
        result?;
        self.inner.flush().await?;
        Ok(())
    }

    /// Writes a data frame carrying `payload`, without copying it (one
    /// vectored write of header and payload where the stream supports it).
    /// An empty payload writes nothing: data frames are never empty.
    pub async fn send_data(&mut self, payload: &[u8]) -> Result<(), FrameError> {
        if payload.is_empty() {
            return Ok(());
        }
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|len| *len <= FrameKind::Data.max_payload(u32::MAX))
            .ok_or(ProtoError::FrameTooLarge {
                kind: "data",
                len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                max: FrameKind::Data.max_payload(u32::MAX),
            })?;
        let header = FrameHeader {
            kind: FrameKind::Data,
            len,
        }
        .encode();
        let mut frame = Buf::chain(header.as_slice(), payload);
        self.inner.write_all_buf(&mut frame).await?;
        self.inner.flush().await?;
        Ok(())
    }

    /// Flushes and shuts down the write side (the peer sees end of stream).
    pub async fn shutdown(&mut self) -> Result<(), FrameError> {
        self.inner.shutdown().await?;
        Ok(())
    }

    /// The underlying stream.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use crate::message::{ErrorFrame, Queued};

    #[tokio::test]
    async fn large_data_frames_leave_the_reader_small() {
        let frame = Message::Data(vec![7; 64 * 1024])
            .to_bytes()
            .expect("encode");
        let end = Message::End.to_bytes().expect("encode");
        let mut input = Vec::new();
        for _ in 0..2 {
            input.extend_from_slice(&frame);
        }
        input.extend_from_slice(&end);
        let mut reader = FrameReader::new(&input[..], 1 << 20);
        let bound = 4 * 1024 + MAX_CONTROL_PAYLOAD as usize;
        let header = reader.next_header().await.expect("header").expect("frame");
        reader.skip_payload(header).await.expect("skipped");
        assert!(reader.held_bytes() <= bound, "{}", reader.held_bytes());
        assert!(matches!(
            reader.read_message().await,
            Ok(Some(Message::Data(data))) if data.len() == 64 * 1024
        ));
        assert!(reader.held_bytes() <= bound, "{}", reader.held_bytes());
        assert!(matches!(
            reader.read_message().await,
            Ok(Some(Message::End))
        ));
    }

    #[tokio::test]
    async fn a_skipped_payload_cut_short_is_truncated() {
        let frame = Message::Data(vec![7; 100]).to_bytes().expect("encode");
        let mut reader = FrameReader::new(&frame[..60], 1 << 20);
        let header = reader.next_header().await.expect("header").expect("frame");
        assert!(matches!(
            reader.skip_payload(header).await,
            Err(FrameError::Truncated {
                expected: 100,
                got: 55,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn a_header_read_cancelled_part_way_is_finished_by_the_next_call() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut reader = FrameReader::new(server, 65536);
        let frame = Message::Data(b"xyz".to_vec()).to_bytes().expect("encode");
        client.write_all(&frame[..3]).await.expect("first 3 bytes");
        // The read gives up (cancelled) with 3 of the header's bytes read.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(50), reader.next_header()).await;
        assert!(cancelled.is_err(), "the header is not complete yet");
        client.write_all(&frame[3..]).await.expect("the rest");
        drop(client);
        let header = reader.next_header().await.expect("header").expect("some");
        assert_eq!((header.kind, header.len), (FrameKind::Data, 3));
        let mut data = [0u8; 3];
        reader.read_payload(&mut data).await.expect("payload");
        assert_eq!(&data, b"xyz");
        assert!(reader.next_header().await.expect("clean end").is_none());
    }

    #[tokio::test]
    async fn a_begin_frames_password_does_not_stay_in_the_input_buffer() {
        use crate::message::{Begin, Format, KeySource, Password};
        let password = b"hunter2-never-kept";
        let begin = Message::Begin(Begin {
            operation: crate::Operation::Encrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                password: Password::new(password.to_vec()),
                iterations: 1000,
            },
        });
        let mut bytes = begin.to_bytes().expect("encode");
        bytes.extend(Message::Data(b"after".to_vec()).to_bytes().expect("encode"));
        let mut reader = FrameReader::new(&bytes[..], 65536);
        assert!(matches!(
            reader.read_message().await,
            Ok(Some(Message::Begin(_)))
        ));
        let contains = |haystack: &[u8]| haystack.windows(password.len()).any(|w| w == password);
        assert!(
            !contains(reader.inner.raw()),
            "the password is still in the buffer"
        );
        assert!(
            !contains(&reader.scratch),
            "the password is still in the scratch"
        );
        assert_eq!(
            reader.read_message().await.expect("data"),
            Some(Message::Data(b"after".to_vec()))
        );
    }

    #[tokio::test]
    async fn frames_written_are_read_back() {
        let (client, server) = tokio::io::duplex(1024);
        let mut writer = FrameWriter::new(client);
        let mut reader = FrameReader::new(server, 65536);
        writer.send_hello(Hello::current()).await.expect("hello");
        writer
            .send(&Message::Queued(Queued { position: 2 }))
            .await
            .expect("queued");
        writer.send_data(b"abc").await.expect("data");
        writer
            .send(&Message::Error(ErrorFrame::new(ErrorCode::Busy, "full")))
            .await
            .expect("error");
        drop(writer);
        assert_eq!(reader.read_hello().await.expect("hello"), Hello::current());
        assert_eq!(
            reader.read_message().await.expect("queued"),
            Some(Message::Queued(Queued { position: 2 }))
        );
        let header = reader.next_header().await.expect("header").expect("some");
        let mut data = vec![0; header.len as usize];
        reader.read_payload(&mut data).await.expect("payload");
        assert_eq!(data, b"abc");
        assert!(matches!(
            reader.read_message().await,
            Ok(Some(Message::Error(_)))
        ));
        assert!(matches!(reader.read_message().await, Ok(None)));
    }

    #[tokio::test]
    async fn a_frame_cut_short_is_reported_as_truncated() {
        let (mut client, server) = tokio::io::duplex(1024);
        client
            .write_all(&[0x11, 0, 0, 0, 10, 1, 2, 3])
            .await
            .expect("write");
        drop(client);
        let mut reader = FrameReader::new(server, 65536);
        let header = reader.next_header().await.expect("header").expect("some");
        let mut data = vec![0; header.len as usize];
        let err = reader.read_payload(&mut data).await.unwrap_err();
        assert!(matches!(
            err,
            FrameError::Truncated {
                expected: 10,
                got: 3,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn a_header_cut_short_is_reported_as_truncated() {
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(&[0x11, 0]).await.expect("write");
        drop(client);
        let mut reader = FrameReader::new(server, 65536);
        let err = reader.next_header().await.unwrap_err();
        assert!(matches!(
            err,
            FrameError::Truncated {
                expected: 5,
                got: 2,
                ..
            }
        ));
        assert!(reader.next_header().await.expect("then the end").is_none());
    }
}
