//! The frame being written to a connection, written a piece at a time.
//!
//! A data frame goes out as its 5-byte header and its payload, straight
//! from the chunk buffer the payload was encrypted in, in one vectored
//! write where the stream takes one (no copy into a frame buffer). Each
//! [`Outgoing::write_some`] is one write: waiting for it is cancel-safe, so
//! the connection's driver waits for it beside its reads and its work.

use std::io::IoSlice;

use aesd_core::connection::Transmit;
use aesd_proto::frame::HEADER_LEN;
use aesd_proto::{FrameHeader, FrameKind, ProtoError};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// A frame on its way out.
struct Frame {
    transmit: Transmit,
    /// A data frame's header, or a control frame whole.
    head: Vec<u8>,
    /// Bytes written so far, of `head` then the payload.
    written: usize,
    /// Whether every byte was written and only a flush is left.
    flushing: bool,
}

/// A writer with at most one frame on its way out.
pub struct Outgoing<W> {
    writer: W,
    frame: Option<Frame>,
    /// The spare buffer for the next frame's head.
    spare: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> Outgoing<W> {
    /// Nothing on its way out yet.
    pub fn new(writer: W) -> Self {
        Outgoing {
            writer,
            frame: None,
            spare: Vec::with_capacity(HEADER_LEN),
        }
    }

    /// Whether a frame is on its way out.
    pub fn is_busy(&self) -> bool {
        self.frame.is_some()
    }

    /// Starts sending `transmit`.
    pub fn start(&mut self, transmit: Transmit) -> Result<(), ProtoError> {
        let mut head = std::mem::take(&mut self.spare);
        head.clear();
        match &transmit {
            Transmit::Frame(message) => message.encode(&mut head)?,
            Transmit::Data(payload) => {
                let len = u32::try_from(payload.as_slice().len()).unwrap_or(u32::MAX);
                let header = FrameHeader {
                    kind: FrameKind::Data,
                    len,
                };
                head.extend_from_slice(&header.encode());
            }
        }
        self.frame = Some(Frame {
            transmit,
            head,
            written: 0,
            flushing: false,
        });
        Ok(())
    }

    /// Writes what it can of the frame with one write (or flushes it once
    /// whole); the frame, once it is out.
    pub async fn write_some(&mut self) -> std::io::Result<Option<Transmit>> {
        let Some(frame) = &mut self.frame else {
            return Ok(None);
        };
        if !frame.flushing {
            let payload: &[u8] = match &frame.transmit {
                Transmit::Data(payload) => payload.as_slice(),
                Transmit::Frame(_) => &[],
            };
            let head_len = frame.head.len();
            let total = head_len + payload.len();
            let n = if frame.written < head_len {
                let slices = [
                    IoSlice::new(&frame.head[frame.written..]),
                    IoSlice::new(payload),
                ];
                self.writer.write_vectored(&slices).await?
            } else {
                self.writer
                    .write(&payload[frame.written - head_len..])
                    .await?
            };
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            frame.written += n;
            if frame.written < total {
                return Ok(None);
            }
            frame.flushing = true;
        }
        self.writer.flush().await?;
        let Some(frame) = self.frame.take() else {
            return Ok(None);
        };
        self.spare = frame.head;
        Ok(Some(frame.transmit))
    }

    /// Writes `frame` whole (an error frame at the end of a connection).
    pub async fn send_now(&mut self, message: aesd_proto::Message) -> std::io::Result<()> {
        self.start(Transmit::Frame(message))
            .map_err(std::io::Error::other)?;
        while self.write_some().await?.is_none() {}
        Ok(())
    }

    /// Flushes and shuts down the write side (the peer sees end of stream).
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        self.writer.shutdown().await
    }
}
