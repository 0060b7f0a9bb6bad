//! Independent verification of an encrypted result.
//!
//! [`VerifyingSink`] is an async writer that takes aesd's output for an
//! encrypt job, decrypts it on its own (PBKDF2 and CBC straight from the
//! RustCrypto primitives, not through the server's streaming code) and
//! compares the plaintext, byte for byte, with the [`Pattern`] that was
//! sent. It holds at most one chunk, whatever the file size.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use aes::Aes256;
use cbc::cipher::{Array, BlockModeDecrypt, KeyIvInit};
use tokio::io::AsyncWrite;

use crate::pattern::Pattern;

/// Why a result failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The output does not start with `Salted__` and a salt.
    #[error("output does not start with the Salted__ header")]
    MissingHeader,
    /// The ciphertext is not whole blocks.
    #[error("ciphertext of {0} bytes is not a positive multiple of 16")]
    BadLength(u64),
    /// The last block's padding is not PKCS#7.
    #[error("invalid PKCS#7 padding in the last block")]
    BadPadding,
    /// A decrypted byte differs from what was sent.
    #[error("decrypted data differs from the input at byte {0}")]
    Mismatch(u64),
    /// The decrypted length differs from what was sent.
    #[error("decrypted {got} bytes, expected {expected}")]
    Length {
        /// Bytes sent.
        expected: u64,
        /// Bytes recovered.
        got: u64,
    },
}

/// Where the sink is in deriving the key from the output's salt.
enum KeyState {
    /// Collecting the 16-byte `Salted__` header.
    Header(Vec<u8>),
    /// PBKDF2 runs on tokio's blocking pool, off the async workers, so a
    /// load run's own verification does not delay its other clients.
    Deriving(tokio::task::JoinHandle<Decryptor>),
    /// The key is known; ciphertext is decrypted as it arrives.
    Ready(Box<Decryptor>),
}

type Decryptor = cbc::Decryptor<Aes256>;

/// Decrypts and checks an encrypt job's output as it arrives.
pub struct VerifyingSink {
    password: zeroize::Zeroizing<Vec<u8>>,
    iterations: u32,
    expected: Pattern,
    expected_len: u64,
    key: KeyState,
    pending: Vec<u8>,
    scratch: Vec<u8>,
    ciphertext_len: u64,
    checked: u64,
    failure: Option<VerifyError>,
}

/// PBKDF2-HMAC-SHA256 to key and IV, as `openssl enc -pbkdf2` does.
fn derive(password: &[u8], salt: &[u8], iterations: u32) -> Decryptor {
    let mut material = zeroize::Zeroizing::new([0u8; 48]);
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, material.as_mut());
    let mut key = [0u8; 32];
    let mut iv = [0u8; 16];
    key.copy_from_slice(&material[..32]);
    iv.copy_from_slice(&material[32..]);
    let cipher = Decryptor::new(&key.into(), &iv.into());
    zeroize::Zeroize::zeroize(&mut key);
    cipher
}

impl VerifyingSink {
    /// A sink expecting the encryption of the first `expected_len` bytes
    /// of `expected` under `password`.
    pub fn new(password: &[u8], iterations: u32, expected: Pattern, expected_len: u64) -> Self {
        VerifyingSink {
            password: zeroize::Zeroizing::new(password.to_vec()),
            iterations,
            expected,
            expected_len,
            key: KeyState::Header(Vec::with_capacity(16)),
            pending: Vec::new(),
            scratch: Vec::new(),
            ciphertext_len: 0,
            checked: 0,
            failure: None,
        }
    }

    /// Takes header bytes from the front of `bytes`; returns how many it
    /// took and, once the header is whole, the salt.
    fn take_header(&mut self, bytes: &[u8]) -> Result<(usize, Option<[u8; 8]>), VerifyError> {
        let KeyState::Header(header) = &mut self.key else {
            return Ok((0, None));
        };
        let take = (16 - header.len()).min(bytes.len());
        header.extend_from_slice(&bytes[..take]);
        if header.len() < 16 {
            return Ok((take, None));
        }
        if &header[..8] != b"Salted__" {
            return Err(VerifyError::MissingHeader);
        }
        let mut salt = [0u8; 8];
        salt.copy_from_slice(&header[8..16]);
        Ok((take, Some(salt)))
    }

    /// Deriving on the calling thread; for the synchronous unit tests.
    #[cfg(test)]
    fn absorb(&mut self, bytes: &[u8]) -> Result<(), VerifyError> {
        let (taken, salt) = self.take_header(bytes)?;
        if let Some(salt) = salt {
            self.key = KeyState::Ready(Box::new(derive(&self.password, &salt, self.iterations)));
        }
        match self.key {
            KeyState::Ready(_) => self.absorb_ciphertext(&bytes[taken..]),
            _ => Ok(()),
        }
    }

    fn absorb_ciphertext(&mut self, bytes: &[u8]) -> Result<(), VerifyError> {
        self.ciphertext_len += bytes.len() as u64;
        self.pending.extend_from_slice(bytes);
        // Keep the last block back: it carries the padding.
        let keep = match self.pending.len() % 16 {
            0 => 16.min(self.pending.len()),
            partial => partial,
        };
        let ready = self.pending.len() - keep;
        if ready > 0 {
            let mut plain = std::mem::take(&mut self.pending);
            self.pending = plain.split_off(ready);
            self.decrypt_and_check(&mut plain)?;
        }
        Ok(())
    }

    /// Waits for a key derivation in flight, if any.
    fn poll_key(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let KeyState::Deriving(handle) = &mut self.key {
            match Pin::new(handle).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(cipher)) => self.key = KeyState::Ready(Box::new(cipher)),
                Poll::Ready(Err(err)) => {
                    return Poll::Ready(Err(std::io::Error::other(format!(
                        "key derivation for verification failed: {err}"
                    ))));
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    fn decrypt_and_check(&mut self, blocks: &mut [u8]) -> Result<(), VerifyError> {
        if let KeyState::Ready(cipher) = &mut self.key {
            let (blocks_array, _) = Array::slice_as_chunks_mut(blocks);
            cipher.decrypt_blocks(blocks_array);
        }
        self.compare(blocks)
    }

    fn compare(&mut self, plain: &[u8]) -> Result<(), VerifyError> {
        self.scratch.resize(plain.len(), 0);
        self.expected.fill(&mut self.scratch);
        if plain != &self.scratch[..] {
            let index = plain
                .iter()
                .zip(&self.scratch)
                .position(|(a, b)| a != b)
                .unwrap_or(plain.len());
            return Err(VerifyError::Mismatch(self.checked + index as u64));
        }
        self.checked += plain.len() as u64;
        if self.checked > self.expected_len {
            return Err(VerifyError::Length {
                expected: self.expected_len,
                got: self.checked,
            });
        }
        Ok(())
    }

    /// Checks the last block and the total length; call after the job.
    pub fn finish(mut self) -> Result<u64, VerifyError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        match self.key {
            KeyState::Header(_) => return Err(VerifyError::MissingHeader),
            // The header came, but nothing after it.
            KeyState::Deriving(_) => return Err(VerifyError::BadLength(0)),
            KeyState::Ready(_) => {}
        }
        if self.ciphertext_len == 0 || self.ciphertext_len % 16 != 0 || self.pending.len() != 16 {
            return Err(VerifyError::BadLength(self.ciphertext_len));
        }
        let mut last = std::mem::take(&mut self.pending);
        if let KeyState::Ready(cipher) = &mut self.key {
            let (block, _) = Array::slice_as_chunks_mut(&mut last);
            cipher.decrypt_blocks(block);
        }
        let pad = usize::from(last[15]);
        if pad == 0 || pad > 16 || last[16 - pad..].iter().any(|&b| usize::from(b) != pad) {
            return Err(VerifyError::BadPadding);
        }
        self.compare(&last[..16 - pad])?;
        if self.checked != self.expected_len {
            return Err(VerifyError::Length {
                expected: self.expected_len,
                got: self.checked,
            });
        }
        Ok(self.checked)
    }
}

impl AsyncWrite for VerifyingSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // Keep accepting after a failure (so the job itself completes and
        // its figures are kept); the first failure is reported by finish.
        if self.failure.is_some() {
            return Poll::Ready(Ok(buf.len()));
        }
        match self.take_header(buf) {
            Err(failure) => {
                self.failure = Some(failure);
                return Poll::Ready(Ok(buf.len()));
            }
            Ok((taken, Some(salt))) => {
                let (password, iterations) = (self.password.clone(), self.iterations);
                self.key = KeyState::Deriving(tokio::task::spawn_blocking(move || {
                    derive(&password, &salt, iterations)
                }));
                return Poll::Ready(Ok(taken));
            }
            Ok((taken, None)) if taken > 0 => return Poll::Ready(Ok(taken)),
            Ok((_, None)) => {}
        }
        std::task::ready!(self.poll_key(cx))?;
        if let Err(failure) = self.absorb_ciphertext(buf) {
            self.failure = Some(failure);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_key(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_server::cipher::encrypt_buffer;

    fn encrypted(seed: u64, len: usize) -> Vec<u8> {
        let mut plain = vec![0u8; len];
        Pattern::new(seed).fill(&mut plain);
        encrypt_buffer(b"pw", &[5; 8], 1000, &plain, 4096)
    }

    fn verify(bytes: &[u8], seed: u64, len: u64, piece: usize) -> Result<u64, VerifyError> {
        let mut sink = VerifyingSink::new(b"pw", 1000, Pattern::new(seed), len);
        for part in bytes.chunks(piece) {
            sink.absorb(part)?;
        }
        sink.finish()
    }

    #[test]
    fn a_correct_result_verifies_in_any_chunking() {
        for len in [0usize, 1, 16, 17, 1000] {
            let bytes = encrypted(9, len);
            for piece in [1, 7, 16, 4096] {
                assert_eq!(verify(&bytes, 9, len as u64, piece), Ok(len as u64));
            }
        }
    }

    #[test]
    fn a_corrupted_byte_is_caught() {
        let mut bytes = encrypted(9, 1000);
        bytes[500] ^= 1;
        assert!(matches!(
            verify(&bytes, 9, 1000, 64),
            Err(VerifyError::Mismatch(_))
        ));
    }

    #[test]
    fn wrong_length_and_data_are_caught() {
        let bytes = encrypted(9, 1000);
        assert!(verify(&bytes, 10, 1000, 64).is_err(), "other data");
        assert!(verify(&bytes, 9, 1001, 64).is_err(), "other length");
        assert!(
            verify(&bytes[..bytes.len() - 16], 9, 1000, 64).is_err(),
            "lost block"
        );
        assert_eq!(
            verify(&bytes[16..], 9, 1000, 64),
            Err(VerifyError::MissingHeader)
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_async_writer_derives_off_thread_and_verifies() {
        use tokio::io::AsyncWriteExt;
        let bytes = encrypted(4, 5000);
        for piece in [1, 15, 16, 17, 4096] {
            let mut sink = VerifyingSink::new(b"pw", 1000, Pattern::new(4), 5000);
            for part in bytes.chunks(piece) {
                sink.write_all(part).await.expect("write");
            }
            sink.flush().await.expect("flush");
            assert_eq!(sink.finish(), Ok(5000), "piece {piece}");
        }
        let mut sink = VerifyingSink::new(b"other", 1000, Pattern::new(4), 5000);
        sink.write_all(&bytes).await.expect("write");
        assert!(sink.finish().is_err(), "a wrong password must not verify");
    }
}
