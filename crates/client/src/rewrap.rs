//! Passphrase encryption (`age -p` files) through a server that wraps file
//! keys to X25519 recipients only: the server encrypts to a one-time
//! X25519 key made here, and this writer, on the server's output, unwraps
//! the file key from the header with that key and writes a header with the
//! scrypt stanza in its place (and a new MAC). The payload passes through
//! unchanged: its key comes from the file key and its nonce alone. The
//! passphrase and the one-time identity never leave this machine; the
//! server knows the file key, as in every encryption it does.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use aesd_age::passphrase::Wrapper;
use aesd_age::{HeaderReader, Identity, header};
use tokio::io::AsyncWrite;

/// Rewrites the header of the age file written through it.
pub(crate) struct Rewrap<W> {
    inner: W,
    /// Until the header is rewritten: the one-time identity and the
    /// passphrase's wrapper.
    keys: Option<(Identity, Wrapper)>,
    reader: HeaderReader,
    /// Bytes to write before anything else, from `written` on.
    pending: Vec<u8>,
    written: usize,
}

fn invalid(err: aesd_age::AgeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}

impl<W: AsyncWrite + Unpin> Rewrap<W> {
    /// A writer into `inner` for a file encrypted to `identity`'s
    /// recipient, rewrapped with `wrapper`.
    pub(crate) fn new(inner: W, identity: Identity, wrapper: Wrapper) -> Self {
        Rewrap {
            inner,
            keys: Some((identity, wrapper)),
            reader: HeaderReader::new(),
            pending: Vec::new(),
            written: 0,
        }
    }

    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending = Vec::new();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Rewrap<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        let Some((identity, wrapper)) = &this.keys else {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        };
        // The header's bytes are held by the reader (at most
        // MAX_HEADER_LEN) until it is whole.
        let Some((old, used)) = this.reader.push(data).map_err(invalid)? else {
            return Poll::Ready(Ok(data.len()));
        };
        let file_key = old
            .unwrap_file_key(std::slice::from_ref(identity))
            .map_err(invalid)?;
        let mut new =
            header::write_stanzas(&file_key, &[wrapper.wrap(&file_key)]).map_err(invalid)?;
        new.extend_from_slice(&data[used..]);
        this.pending = new;
        this.keys = None;
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

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_age::passphrase;
    use aesd_age::{FileKey, PayloadDecryptor, PayloadEncryptor};
    use tokio::io::AsyncWriteExt;
    use zeroize::Zeroizing;

    /// A file encrypted to a one-time key comes out as a passphrase file
    /// that opens with the passphrase, its payload untouched.
    #[tokio::test]
    async fn the_header_is_rewrapped_and_the_payload_passes() {
        let identity = Identity::from_bytes([4; 32]);
        let file_key = FileKey::new([5; 16]);
        let original = file_key.clone();
        let mut file = header::write(
            &file_key,
            &[(identity.recipient(), Zeroizing::new([6; 32]))],
        )
        .expect("header");
        let header_len = file.len();
        let mut payload = Vec::new();
        let mut encryptor = PayloadEncryptor::new(&original, [7; 16]);
        encryptor.push(&[8; 100_000], &mut payload).expect("push");
        encryptor.finish(&mut payload).expect("finish");
        file.extend_from_slice(&payload);
        drop(file_key);
        let wrapper = Wrapper::new(b"pw", [9; 16], 2).expect("wrapper");
        let mut out = Rewrap::new(Vec::new(), identity, wrapper);
        for piece in file.chunks(7) {
            out.write_all(piece).await.expect("write");
        }
        out.flush().await.expect("flush");
        let written = out.inner;
        let (new, used) = HeaderReader::new()
            .push(&written)
            .expect("a header")
            .expect("whole");
        let file_key = passphrase::unwrap(&new, b"pw", 22).expect("the passphrase opens it");
        assert_eq!(file_key, original);
        assert_eq!(&written[used..], &file[header_len..]);
        let mut plain = Vec::new();
        let mut decryptor = PayloadDecryptor::new(file_key);
        decryptor
            .push(&written[used..], &mut plain)
            .expect("payload");
        decryptor.finish(&mut plain).expect("final");
        assert_eq!(plain, vec![8; 100_000]);
    }
}
