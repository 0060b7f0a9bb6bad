//! Independent verification of an age (format 2) result.
//!
//! [`AgeVerifyingSink`] takes aesd's output for an age encryption, reads
//! the header with aesd-age (checked against the `age` command in that
//! crate's tests) and unwraps the file key with aesload's own identity,
//! then decrypts the payload on its own: HKDF and ChaCha20-Poly1305
//! straight from RustCrypto, with the STREAM nonces computed here, not
//! through aesd-age's payload code (which the server runs). Each chunk's
//! plaintext is compared with the [`Pattern`] that was sent. It holds at
//! most one chunk, whatever the file size.

use aesd_age::{HeaderReader, Identity};
use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit};
use hkdf::Hkdf;
use sha2::Sha256;

use crate::pattern::Pattern;

const CHUNK: usize = 64 * 1024;
const TAG: usize = 16;
const SEALED: usize = CHUNK + TAG;

/// Why an age result failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgeVerifyError {
    /// The header is not an age header for aesload's identity.
    #[error("age header: {0}")]
    Header(#[from] aesd_age::AgeError),
    /// The output ended inside the header or before the payload's nonce.
    #[error("the output ended before the age payload began")]
    NoPayload,
    /// A chunk's tag did not verify.
    #[error("age chunk {0} does not authenticate")]
    Chunk(u64),
    /// The payload ends with a full chunk that is not a valid final
    /// chunk (cut at a chunk boundary, or changed).
    #[error("the age payload has no valid final chunk")]
    NoFinalChunk,
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

enum State {
    Header(HeaderReader, Identity),
    /// The file key; the payload nonce's bytes as they come.
    Nonce(aesd_age::FileKey, Vec<u8>),
    Payload(ChaCha20Poly1305),
}

/// An async writer that verifies an age encryption of a [`Pattern`].
pub struct AgeVerifyingSink {
    state: State,
    expected: Pattern,
    expected_len: u64,
    pending: Vec<u8>,
    scratch: Vec<u8>,
    chunk: u64,
    checked: u64,
    failure: Option<AgeVerifyError>,
}

impl AgeVerifyingSink {
    /// A sink for the encryption of `len` bytes of `expected` to
    /// `identity`'s recipient.
    pub fn new(identity: Identity, expected: Pattern, len: u64) -> Self {
        AgeVerifyingSink {
            state: State::Header(HeaderReader::new(), identity),
            expected,
            expected_len: len,
            pending: Vec::new(),
            scratch: Vec::new(),
            chunk: 0,
            checked: 0,
            failure: None,
        }
    }

    fn absorb(&mut self, mut bytes: &[u8]) -> Result<(), AgeVerifyError> {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Header(reader, identity) => {
                    let Some((header, used)) = reader.push(bytes)? else {
                        return Ok(());
                    };
                    let file_key = header.unwrap_file_key(std::slice::from_ref(identity))?;
                    self.state = State::Nonce(file_key, Vec::with_capacity(16));
                    bytes = &bytes[used..];
                }
                State::Nonce(file_key, nonce) => {
                    let take = (16 - nonce.len()).min(bytes.len());
                    nonce.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if nonce.len() == 16 {
                        let mut key = [0u8; 32];
                        Hkdf::<Sha256>::new(Some(nonce), file_key.as_bytes())
                            .expand(b"payload", &mut key)
                            .expect("32 bytes");
                        self.state = State::Payload(ChaCha20Poly1305::new(&Key::from(key)));
                    }
                }
                State::Payload(_) => {
                    if self.pending.len() == SEALED {
                        self.open_pending(false)?;
                    }
                    let take = (SEALED - self.pending.len()).min(bytes.len());
                    self.pending.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                }
            }
        }
        Ok(())
    }

    /// Opens the pending chunk as the final one or not, and checks it.
    fn open_pending(&mut self, last: bool) -> Result<(), AgeVerifyError> {
        let State::Payload(aead) = &self.state else {
            return Err(AgeVerifyError::NoPayload);
        };
        let mut nonce = [0u8; 12];
        nonce[3..11].copy_from_slice(&self.chunk.to_be_bytes());
        nonce[11] = u8::from(last);
        let Some(split) = self.pending.len().checked_sub(TAG) else {
            return Err(AgeVerifyError::NoFinalChunk);
        };
        let (data, tag) = self.pending.split_at_mut(split);
        let tag = (&*tag).try_into().expect("16 bytes");
        aead.decrypt_inout_detached(&nonce.into(), b"", data.into(), &tag)
            .map_err(|_| AgeVerifyError::Chunk(self.chunk))?;
        let plain = std::mem::take(&mut self.pending);
        let result = self.compare(&plain[..split]);
        self.pending = plain;
        self.pending.clear();
        self.chunk += 1;
        result
    }

    fn compare(&mut self, plain: &[u8]) -> Result<(), AgeVerifyError> {
        self.scratch.resize(plain.len(), 0);
        self.expected.fill(&mut self.scratch);
        if let Some(index) = plain.iter().zip(&self.scratch).position(|(a, b)| a != b) {
            return Err(AgeVerifyError::Mismatch(self.checked + index as u64));
        }
        self.checked += plain.len() as u64;
        if self.checked > self.expected_len {
            return Err(AgeVerifyError::Length {
                expected: self.expected_len,
                got: self.checked,
            });
        }
        Ok(())
    }

    /// Checks the final chunk and the length; call after the job.
    pub fn finish(mut self) -> Result<u64, AgeVerifyError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        if !matches!(self.state, State::Payload(_)) {
            return Err(AgeVerifyError::NoPayload);
        }
        self.open_pending(true).map_err(|err| match err {
            AgeVerifyError::Chunk(_) if self.pending.len() == SEALED => {
                AgeVerifyError::NoFinalChunk
            }
            other => other,
        })?;
        if self.checked != self.expected_len {
            return Err(AgeVerifyError::Length {
                expected: self.expected_len,
                got: self.checked,
            });
        }
        Ok(self.checked)
    }
}

crate::absorbing::absorbing_async_write!(AgeVerifyingSink);

#[cfg(test)]
mod tests {
    use aesd_age::{FileKey, PayloadEncryptor, header};
    use zeroize::Zeroizing;

    use super::*;

    fn encrypted(identity: &Identity, seed: u64, len: usize) -> Vec<u8> {
        let mut plain = vec![0u8; len];
        Pattern::new(seed).fill(&mut plain);
        let file_key = FileKey::new([7; 16]);
        let mut out = header::write(
            &file_key,
            &[(identity.recipient(), Zeroizing::new([8; 32]))],
        )
        .expect("header");
        let mut payload = PayloadEncryptor::new(&file_key, [9; 16]);
        payload.push(&plain, &mut out).expect("push");
        payload.finish(&mut out).expect("finish");
        out
    }

    fn verify(
        bytes: &[u8],
        identity: &Identity,
        seed: u64,
        len: u64,
        piece: usize,
    ) -> Result<u64, AgeVerifyError> {
        let mut sink = AgeVerifyingSink::new(identity.clone(), Pattern::new(seed), len);
        for part in bytes.chunks(piece.max(1)) {
            sink.absorb(part)?;
        }
        sink.finish()
    }

    #[test]
    fn a_correct_result_verifies_in_any_chunking() {
        let identity = Identity::from_bytes([3; 32]);
        for len in [0usize, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK] {
            let bytes = encrypted(&identity, 4, len);
            for piece in [1000, CHUNK, usize::MAX] {
                let piece = piece.min(bytes.len());
                assert_eq!(
                    verify(&bytes, &identity, 4, len as u64, piece),
                    Ok(len as u64),
                    "len {len}"
                );
            }
        }
    }

    #[test]
    fn wrong_data_keys_and_cuts_are_caught_with_the_reason() {
        let identity = Identity::from_bytes([3; 32]);
        let bytes = encrypted(&identity, 4, 2 * CHUNK + 10);
        assert_eq!(
            verify(&bytes, &identity, 5, 2 * CHUNK as u64 + 10, 4096),
            Err(AgeVerifyError::Mismatch(0)),
            "other data"
        );
        assert!(matches!(
            verify(
                &bytes,
                &Identity::from_bytes([4; 32]),
                4,
                2 * CHUNK as u64 + 10,
                4096
            ),
            Err(AgeVerifyError::Header(
                aesd_age::AgeError::NoMatchingIdentity
            ))
        ));
        // 100 bytes from the end: inside chunk 1 (the final chunk is 26).
        let mut flipped = bytes.clone();
        let at = bytes.len() - 100;
        flipped[at] ^= 1;
        assert_eq!(
            verify(&flipped, &identity, 4, 2 * CHUNK as u64 + 10, 4096),
            Err(AgeVerifyError::Chunk(1))
        );
        let mut last = bytes.clone();
        let end = last.len() - 1;
        last[end] ^= 1;
        assert_eq!(
            verify(&last, &identity, 4, 2 * CHUNK as u64 + 10, 4096),
            Err(AgeVerifyError::Chunk(2))
        );
        let boundary = bytes.len() - (10 + TAG);
        assert_eq!(
            verify(
                &bytes[..boundary],
                &identity,
                4,
                2 * CHUNK as u64 + 10,
                4096
            ),
            Err(AgeVerifyError::NoFinalChunk)
        );
        assert!(matches!(
            verify(&bytes, &identity, 4, 2 * CHUNK as u64 + 11, 4096),
            Err(AgeVerifyError::Length { .. })
        ));
    }
}
