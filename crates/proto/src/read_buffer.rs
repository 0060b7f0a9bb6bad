//! The frame reader's input buffer: a small buffer in front of the byte
//! stream (headers and control frames arrive a few bytes at a time) whose
//! consumed bytes can be wiped, so that a begin frame's password or key, or
//! an auth frame's token, does not stay in memory after it was decoded.
//! Reads as large as the buffer go straight to the caller's memory (data
//! payloads), never through it.

use std::io;
use std::pin::Pin;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use zeroize::Zeroize;

/// A byte stream with a wipeable read buffer.
pub(crate) struct ReadBuffer<R> {
    inner: R,
    buf: Box<[u8]>,
    /// Next unread byte in `buf`.
    pos: usize,
    /// End of the bytes in `buf`.
    filled: usize,
    /// An error met by a read that already returned bytes, for the next.
    pending_error: Option<io::Error>,
}

impl<R: AsyncRead + Unpin> ReadBuffer<R> {
    /// A buffer of `capacity` bytes over `inner`.
    pub(crate) fn new(inner: R, capacity: usize) -> Self {
        ReadBuffer {
            inner,
            buf: vec![0; capacity.max(1)].into_boxed_slice(),
            pos: 0,
            filled: 0,
            pending_error: None,
        }
    }

    /// The stream read from.
    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }

    /// Whether nothing read from the stream waits here (no bytes, no
    /// error): the stream's next bytes are the next to be read.
    pub(crate) fn is_drained(&self) -> bool {
        self.pos == self.filled && self.pending_error.is_none()
    }

    /// Reads some bytes into `dst`; 0 at the end of the stream. Cancel
    /// safe: nothing is consumed unless the read completes.
    ///
    /// A large read takes the buffered bytes and then, in the same call,
    /// whatever the stream has ready behind them straight into `dst`
    /// (without waiting for more: the buffered bytes are returned at once
    /// if it has none), so a data payload that starts in the buffer does
    /// not cost a second call.
    pub(crate) async fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if dst.is_empty() {
            return Ok(0);
        }
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        if self.pos == self.filled {
            if dst.len() >= self.buf.len() {
                return self.inner.read(dst).await;
            }
            self.refill().await?;
        }
        let n = dst.len().min(self.filled - self.pos);
        dst[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        let rest = &mut dst[n..];
        if rest.len() < self.buf.len() {
            return Ok(n);
        }
        let mut ready = ReadBuf::new(rest);
        let inner = &mut self.inner;
        let polled = std::future::poll_fn(|cx| {
            // Ready or not, this call ends now: nothing waits here.
            match Pin::new(&mut *inner).poll_read(cx, &mut ready) {
                Poll::Ready(result) => Poll::Ready(result),
                Poll::Pending => Poll::Ready(Ok(())),
            }
        })
        .await;
        // The bytes came first; the error waits for the next call.
        self.pending_error = polled.err();
        Ok(n + ready.filled().len())
    }

    /// The buffered bytes, reading more when there are none (empty at the
    /// end of the stream); consumes nothing. Cancel safe.
    pub(crate) async fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            self.refill().await?;
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    /// Consumes up to `n` bytes without copying them anywhere (through the
    /// buffer, so the memory it takes stays the buffer's whatever `n`);
    /// how many were consumed, 0 at the end of the stream. Cancel safe.
    pub(crate) async fn skip(&mut self, n: usize) -> io::Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        if self.pos == self.filled {
            self.refill().await?;
        }
        let skipped = n.min(self.filled - self.pos);
        self.pos += skipped;
        Ok(skipped)
    }

    /// The buffer's size in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Zeroes the bytes already consumed from the buffer (they may hold a
    /// secret that was just decoded).
    pub(crate) fn wipe_consumed(&mut self) {
        self.buf[..self.pos].zeroize();
    }

    /// The whole buffer, consumed and unread bytes alike (for tests).
    #[cfg(test)]
    pub(crate) fn raw(&self) -> &[u8] {
        &self.buf
    }

    /// Reads into the empty buffer. The old bytes are wiped first.
    async fn refill(&mut self) -> io::Result<()> {
        let n = self.inner.read(&mut self.buf).await?;
        // Only after the read completed (cancel safety): the buffer held
        // nothing unread, so the overwritten bytes were all consumed.
        self.buf[n..self.filled.max(n)].zeroize();
        self.pos = 0;
        self.filled = n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_reads_come_through_the_buffer_and_large_ones_past_it() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut reader = ReadBuffer::new(&data[..], 16);
        let mut small = [0u8; 5];
        assert_eq!(reader.read(&mut small).await.expect("read"), 5);
        assert_eq!(small, [0, 1, 2, 3, 4]);
        assert_eq!(reader.fill_buf().await.expect("buffered").len(), 11);
        let mut rest = Vec::new();
        let mut large = [0u8; 32];
        loop {
            let n = reader.read(&mut large).await.expect("read");
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&large[..n]);
        }
        assert_eq!(rest, data[5..]);
        assert!(reader.fill_buf().await.expect("end").is_empty());
    }

    #[tokio::test]
    async fn a_large_read_takes_the_buffered_bytes_and_what_is_ready_behind_them() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut reader = ReadBuffer::new(&data[..], 16);
        let mut header = [0u8; 5];
        assert_eq!(reader.read(&mut header).await.expect("read"), 5);
        // 11 bytes are buffered; the stream has 84 more ready.
        let mut payload = [0u8; 60];
        assert_eq!(reader.read(&mut payload).await.expect("read"), 60);
        assert_eq!(payload[..], data[5..65]);
    }

    #[tokio::test]
    async fn skipped_bytes_go_through_the_buffer() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut reader = ReadBuffer::new(&data[..], 16);
        let mut skipped = 0;
        while skipped < 90 {
            let n = reader.skip(90 - skipped).await.expect("skip");
            assert!((1..=16).contains(&n), "{n} bytes at a time");
            skipped += n;
        }
        let mut rest = [0u8; 10];
        assert_eq!(reader.read(&mut rest).await.expect("read"), 6);
        assert_eq!(rest[..6], data[90..96]);
        assert_eq!(reader.skip(10).await.expect("skip"), 4);
        assert_eq!(reader.skip(10).await.expect("end"), 0);
    }

    #[tokio::test]
    async fn consumed_bytes_are_wiped_and_unread_ones_kept() {
        let data = b"secret-password|next frame";
        let mut reader = ReadBuffer::new(&data[..], 64);
        let mut secret = [0u8; 16];
        assert_eq!(reader.read(&mut secret).await.expect("read"), 16);
        reader.wipe_consumed();
        assert!(
            reader.buf[..16].iter().all(|&b| b == 0),
            "the secret is wiped"
        );
        assert_eq!(&reader.buf[16..data.len()], b"next frame");
        let mut next = [0u8; 10];
        assert_eq!(reader.read(&mut next).await.expect("read"), 10);
        assert_eq!(&next, b"next frame");
    }

    /// Drained only once every byte taken from the stream was handed on.
    #[tokio::test]
    async fn drained_when_nothing_read_waits_in_the_buffer() {
        let data = b"header+payload";
        let mut reader = ReadBuffer::new(&data[..], 64);
        assert!(reader.is_drained(), "nothing read yet");
        let mut header = [0u8; 7];
        assert_eq!(reader.read(&mut header).await.expect("read"), 7);
        assert!(!reader.is_drained(), "the payload's bytes wait here");
        let mut rest = [0u8; 7];
        assert_eq!(reader.read(&mut rest).await.expect("read"), 7);
        assert!(reader.is_drained());
    }
}
