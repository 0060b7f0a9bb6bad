//! Independent verification of an encrypted result.
//!
//! [`VerifyingSink`] is an async writer that takes aesd's output for an
//! encrypt job, decrypts it on its own (CBC straight from the RustCrypto
//! primitives, not through the server's streaming code or aesd's cipher
//! crate) and compares the plaintext, byte for byte, with the [`Pattern`]
//! that was sent. It holds at most one chunk, whatever the file size.
//!
//! The key: when the client derived it (key source 2, aesload's default),
//! the sink takes the client's salt, key and IV
//! ([`VerifyingSink::with_key`]) and requires the output's header to carry
//! that salt; running PBKDF2 a second time would check only the client's
//! own key derivation (tested against `openssl enc` in the client
//! library), not the server. When the server derived it from the password
//! (key source 1), the sink derives it from the header's salt
//! ([`VerifyingSink::new`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use aes::Aes256;
use aesd_proto::DerivedKeyParams;
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
    /// The output's header carries another salt than the client sent
    /// with its derived key.
    #[error("the output's salt {got} is not the salt {sent} the client sent")]
    WrongSalt {
        /// The salt sent, in hex.
        sent: String,
        /// The salt in the output, in hex.
        got: String,
    },
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

/// Where the sink's key comes from.
enum KeyOrigin {
    /// Derived from the output's salt (the server derived the job's key).
    Password {
        password: zeroize::Zeroizing<Vec<u8>>,
        iterations: u32,
    },
    /// The key the client derived and sent; the output must carry its
    /// salt. Taken when the header arrives.
    Client {
        salt: [u8; 8],
        cipher: Option<Box<Decryptor>>,
    },
}

/// Decrypts and checks an encrypt job's output as it arrives.
pub struct VerifyingSink {
    origin: KeyOrigin,
    expected: Pattern,
    expected_len: u64,
    key: KeyState,
    pending: Vec<u8>,
    scratch: Vec<u8>,
    ciphertext_len: u64,
    checked: u64,
    failure: Option<VerifyError>,
}

/// Lower-case hex of a salt, for messages.
fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A CBC decryptor for the key and IV of `params`.
fn decryptor(params: &DerivedKeyParams) -> Decryptor {
    Decryptor::new(&(*params.key).into(), &(*params.iv).into())
}

/// The decryptor for `password` and the output's `salt`: the key and IV
/// PBKDF2-HMAC-SHA256 gives, as `openssl enc -pbkdf2` derives them
/// (straight from RustCrypto's PBKDF2, not through aesd's code).
fn derive(password: &[u8], salt: [u8; 8], iterations: u32) -> Decryptor {
    decryptor(&derive_params(password, salt, iterations))
}

/// Salt, key and IV as `openssl enc -aes-256-cbc -pbkdf2` derives them.
fn derive_params(password: &[u8], salt: [u8; 8], iterations: u32) -> DerivedKeyParams {
    let mut material = zeroize::Zeroizing::new([0u8; 48]);
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, &salt, iterations, material.as_mut());
    let mut params = DerivedKeyParams {
        salt,
        key: [0u8; 32].into(),
        iv: [0u8; 16].into(),
    };
    params.key.copy_from_slice(&material[..32]);
    params.iv.copy_from_slice(&material[32..]);
    params
}

impl VerifyingSink {
    /// A sink expecting the encryption of the first `expected_len` bytes
    /// of `expected` under `password`.
    pub fn new(password: &[u8], iterations: u32, expected: Pattern, expected_len: u64) -> Self {
        Self::from_origin(
            KeyOrigin::Password {
                password: zeroize::Zeroizing::new(password.to_vec()),
                iterations,
            },
            expected,
            expected_len,
        )
    }

    /// A sink for a job whose key the client derived (key source 2): the
    /// output must start with `params`' salt and decrypt under its key and
    /// IV to the first `expected_len` bytes of `expected`.
    pub fn with_key(params: &DerivedKeyParams, expected: Pattern, expected_len: u64) -> Self {
        Self::from_origin(
            KeyOrigin::Client {
                salt: params.salt,
                cipher: Some(Box::new(decryptor(params))),
            },
            expected,
            expected_len,
        )
    }

    /// The sink for a job with a password: [`VerifyingSink::with_key`]
    /// when the client derived the key (`derived`, key source 2), else
    /// [`VerifyingSink::new`] (the server derives it from the password).
    pub fn for_job(
        derived: Option<&DerivedKeyParams>,
        password: &[u8],
        iterations: u32,
        expected: Pattern,
        expected_len: u64,
    ) -> Self {
        match derived {
            Some(params) => Self::with_key(params, expected, expected_len),
            None => Self::new(password, iterations, expected, expected_len),
        }
    }

    fn from_origin(origin: KeyOrigin, expected: Pattern, expected_len: u64) -> Self {
        VerifyingSink {
            origin,
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

    /// The key state once the header's `salt` is known: the client's key
    /// (if the salt is the one sent), or a derivation from the password,
    /// started by `start_derivation`.
    fn key_for_salt(
        &mut self,
        salt: [u8; 8],
        start_derivation: impl FnOnce(zeroize::Zeroizing<Vec<u8>>, u32) -> KeyState,
    ) -> Result<KeyState, VerifyError> {
        match &mut self.origin {
            KeyOrigin::Password {
                password,
                iterations,
            } => Ok(start_derivation(password.clone(), *iterations)),
            KeyOrigin::Client { salt: sent, cipher } => match cipher.take() {
                Some(cipher) if *sent == salt => Ok(KeyState::Ready(cipher)),
                _ => Err(VerifyError::WrongSalt {
                    sent: to_hex(sent),
                    got: to_hex(&salt),
                }),
            },
        }
    }

    /// Deriving on the calling thread; for the synchronous unit tests.
    #[cfg(test)]
    fn absorb(&mut self, bytes: &[u8]) -> Result<(), VerifyError> {
        let (taken, salt) = self.take_header(bytes)?;
        if let Some(salt) = salt {
            self.key = self.key_for_salt(salt, |password, iterations| {
                KeyState::Ready(Box::new(derive(&password, salt, iterations)))
            })?;
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
            // Decrypt in place, then move the kept tail to the front: the
            // buffer's allocation is reused from chunk to chunk.
            let mut pending = std::mem::take(&mut self.pending);
            let result = self.decrypt_and_check(&mut pending[..ready]);
            pending.copy_within(ready.., 0);
            pending.truncate(keep);
            self.pending = pending;
            result?;
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
                let next = self.key_for_salt(salt, |password, iterations| {
                    KeyState::Deriving(tokio::task::spawn_blocking(move || {
                        derive(&password, salt, iterations)
                    }))
                });
                match next {
                    Ok(state) => self.key = state,
                    Err(failure) => self.failure = Some(failure),
                }
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
    use aesd_core::openssl_enc::encrypt_buffer;

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

    #[test]
    fn the_clients_key_verifies_and_another_salt_or_key_is_caught() {
        let salt = [5u8; 8];
        let params = derive_params(b"pw", salt, 1000);
        let bytes = encrypted(9, 1000);
        let check = |params: &DerivedKeyParams, bytes: &[u8]| {
            let mut sink = VerifyingSink::with_key(params, Pattern::new(9), 1000);
            for part in bytes.chunks(100) {
                sink.absorb(part)?;
            }
            sink.finish()
        };
        assert_eq!(check(&params, &bytes), Ok(1000));
        let mut other_salt = bytes.clone();
        other_salt[8] ^= 1;
        assert_eq!(
            check(&params, &other_salt),
            Err(VerifyError::WrongSalt {
                sent: "0505050505050505".into(),
                got: "0405050505050505".into(),
            })
        );
        let mut other_key = params.clone();
        other_key.key[0] ^= 1;
        assert!(check(&other_key, &bytes).is_err(), "another key");
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
