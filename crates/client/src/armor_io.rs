//! ASCII-armored age files (`age -a`) as streams: a reader that
//! unarmors its input when it is armored (told by its first byte) and
//! passes a binary file through, and a writer that armors what it is
//! given. The armor's rules and errors are [`aesd_age::armor`]'s; here
//! they only meet tokio's I/O traits. Memory stays bounded: one read's
//! worth decoded, one write's worth encoded.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use aesd_age::armor::looks_armored;
use aesd_age::{AgeError, ArmorDecoder, ArmorEncoder};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Bytes read from the inner reader at a time.
const READ_LEN: usize = 16 * 1024;

/// An armor error as an I/O error of the input (its source is the
/// [`AgeError`], which says the line and the rule).
fn armor_error(err: AgeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}

/// What the reader found its input to be.
enum Mode {
    /// Nothing read yet.
    Unknown,
    /// A binary age file (or anything else): passed through.
    Binary,
    /// Armored: decoded; `None` once the input and its armor ended.
    Armored(Option<ArmorDecoder>),
}

/// Reads an age file, armored or not, as the binary file.
pub struct MaybeArmored<R> {
    inner: R,
    mode: Mode,
    /// Bytes ready to hand out (decoded, or the first read of a binary
    /// file), from `taken` on.
    ready: Vec<u8>,
    taken: usize,
    scratch: Vec<u8>,
}

impl<R: AsyncRead + Unpin> MaybeArmored<R> {
    /// A reader of `inner`, which is told armored or binary at its first
    /// byte.
    pub fn new(inner: R) -> Self {
        MaybeArmored {
            inner,
            mode: Mode::Unknown,
            ready: Vec::new(),
            taken: 0,
            scratch: Vec::new(),
        }
    }

    /// Whether the input was armored (known after the first read).
    pub fn was_armored(&self) -> bool {
        matches!(self.mode, Mode::Armored(_))
    }

    /// Reads once from the inner reader into `scratch`; its length.
    fn fill_scratch(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.scratch.resize(READ_LEN, 0);
        let mut buf = ReadBuf::new(&mut self.scratch);
        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
        let n = buf.filled().len();
        self.scratch.truncate(n);
        Poll::Ready(Ok(n))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for MaybeArmored<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.taken);
                buf.put_slice(&this.ready[this.taken..this.taken + n]);
                this.taken += n;
                return Poll::Ready(Ok(()));
            }
            this.ready.clear();
            this.taken = 0;
            match &mut this.mode {
                Mode::Binary => return Pin::new(&mut this.inner).poll_read(cx, buf),
                Mode::Armored(None) => return Poll::Ready(Ok(())),
                Mode::Unknown | Mode::Armored(Some(_)) => {}
            }
            let n = ready!(this.fill_scratch(cx))?;
            if matches!(this.mode, Mode::Unknown) {
                this.mode = if looks_armored(&this.scratch[..n]) {
                    Mode::Armored(Some(ArmorDecoder::new()))
                } else {
                    Mode::Binary
                };
            }
            match &mut this.mode {
                Mode::Binary => std::mem::swap(&mut this.ready, &mut this.scratch),
                Mode::Armored(decoder) if n == 0 => {
                    if let Some(decoder) = decoder.take() {
                        decoder.finish().map_err(armor_error)?;
                    }
                    return Poll::Ready(Ok(()));
                }
                Mode::Armored(Some(decoder)) => decoder
                    .push(&this.scratch, &mut this.ready)
                    .map_err(armor_error)?,
                Mode::Armored(None) | Mode::Unknown => unreachable!("decided above"),
            }
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// Writes the armor of what it is given; [`Armoring::finish`] writes the
/// last line and the END line (without it the armor is cut short).
pub struct Armoring<W> {
    inner: W,
    encoder: Option<ArmorEncoder>,
    /// Encoded bytes not yet written to `inner`, from `written` on.
    pending: Vec<u8>,
    written: usize,
}

impl<W: AsyncWrite + Unpin> Armoring<W> {
    /// A writer armoring into `inner`.
    pub fn new(inner: W) -> Self {
        Armoring {
            inner,
            encoder: Some(ArmorEncoder::new()),
            pending: Vec::new(),
            written: 0,
        }
    }

    /// Writes out what is pending.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Writes the armor's end and flushes: the armored file is complete.
    pub async fn finish(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        if let Some(encoder) = self.encoder.take() {
            encoder.finish(&mut self.pending);
        }
        std::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        self.inner.flush().await
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Armoring<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        let Some(encoder) = &mut this.encoder else {
            return Poll::Ready(Err(io::Error::other("the armor is already finished")));
        };
        encoder.push(data, &mut this.pending);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// An output armored or not, chosen at run time (one type for both, so a
/// job's future stays `Send`).
pub enum MaybeArmoring<W> {
    /// Written as it comes.
    Plain(W),
    /// Armored.
    Armored(Armoring<W>),
}

impl<W: AsyncWrite + Unpin> MaybeArmoring<W> {
    /// `inner`, armored when `armor`.
    pub fn new(inner: W, armor: bool) -> Self {
        match armor {
            true => MaybeArmoring::Armored(Armoring::new(inner)),
            false => MaybeArmoring::Plain(inner),
        }
    }

    /// Ends the armor ([`Armoring::finish`]), or flushes.
    pub async fn finish(&mut self) -> io::Result<()> {
        match self {
            MaybeArmoring::Plain(inner) => inner.flush().await,
            MaybeArmoring::Armored(armored) => armored.finish().await,
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for MaybeArmoring<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeArmoring::Plain(inner) => Pin::new(inner).poll_write(cx, data),
            MaybeArmoring::Armored(armored) => Pin::new(armored).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeArmoring::Plain(inner) => Pin::new(inner).poll_flush(cx),
            MaybeArmoring::Armored(armored) => Pin::new(armored).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeArmoring::Plain(inner) => Pin::new(inner).poll_shutdown(cx),
            MaybeArmoring::Armored(armored) => Pin::new(armored).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn armored(data: &[u8]) -> Vec<u8> {
        let mut out = Armoring::new(Vec::new());
        for piece in data.chunks(1000) {
            out.write_all(piece).await.expect("write");
        }
        out.finish().await.expect("finish");
        out.inner
    }

    #[tokio::test]
    async fn armored_and_binary_inputs_both_read_as_the_binary_file() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let text = armored(&data).await;
        assert!(text.starts_with(aesd_age::ARMOR_BEGIN));
        let mut reader = MaybeArmored::new(text.as_slice());
        let mut back = Vec::new();
        reader.read_to_end(&mut back).await.expect("unarmored");
        assert!(reader.was_armored());
        assert_eq!(back, data);
        let mut binary = b"age-encryption.org/v1\n".to_vec();
        binary.extend_from_slice(&data);
        let mut reader = MaybeArmored::new(binary.as_slice());
        let mut back = Vec::new();
        reader.read_to_end(&mut back).await.expect("passed through");
        assert!(!reader.was_armored());
        assert_eq!(back, binary);
    }

    #[tokio::test]
    async fn a_cut_armor_is_an_input_error_naming_it() {
        let text = armored(&[1; 500]).await;
        let cut = &text[..text.len() - 40];
        let err = MaybeArmored::new(cut)
            .read_to_end(&mut Vec::new())
            .await
            .expect_err("cut short");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let inner = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<AgeError>())
            .expect("the armor's error");
        assert!(
            matches!(inner, AgeError::BadArmor { what, .. } if what.contains("cut short")),
            "{inner}"
        );
    }
}
