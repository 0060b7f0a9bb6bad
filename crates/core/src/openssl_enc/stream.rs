//! Streaming encryption and decryption in the `openssl enc` format.
//!
//! Both streams take chunks of any size in [`ChunkBuf`]s and transform them
//! in place, keeping one CBC chain for the whole file. The format's framing
//! (the carried partial block, the held-back last block that carries the
//! PKCS#7 padding, the `Salted__` header) is aesd-cipher's
//! ([`EncryptFraming`], [`DecryptFraming`]); here are the keys and the
//! CBC chains (the engine's).

use aesd_cipher::stream::{DecryptFraming, EncryptFraming, FormatError, unpadded_len};

use super::{BLOCK, DerivedKey, HEADER_LEN, SALT_LEN, derive_key};
use crate::chunk::ChunkBuf;
use crate::engine::{Chain, DecryptChain, encrypt_chains};

/// Why a stream could not be encrypted or decrypted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    /// The input does not start with `Salted__` and a salt.
    #[error("input does not start with the \"Salted__\" header of `openssl enc -salt`")]
    MissingHeader,
    /// The ciphertext after the header is empty or not whole blocks.
    #[error("ciphertext after the header is {len} bytes, not a positive multiple of 16")]
    BadLength {
        /// Ciphertext bytes after the 16-byte header.
        len: u64,
    },
    /// Wrong password or corrupted ciphertext (deliberately not told apart).
    #[error("decryption failed: wrong password or corrupted data")]
    DecryptFailed,
    /// The file's salt is not the one the client derived its key with
    /// (key source 2).
    #[error("the file's salt is not the salt the key was derived with")]
    SaltMismatch,
    /// The operating system's random number generator failed.
    #[error("cannot read a random salt from the operating system: {0}")]
    Rng(String),
}

impl From<FormatError> for CipherError {
    fn from(error: FormatError) -> Self {
        match error {
            FormatError::MissingHeader => CipherError::MissingHeader,
            FormatError::BadLength { len } => CipherError::BadLength { len },
            FormatError::BadPadding => CipherError::DecryptFailed,
        }
    }
}

/// Encrypts a stream of chunks; one CBC chain for the whole stream.
pub struct EncryptStream {
    cipher: Chain,
    framing: EncryptFraming,
}

impl EncryptStream {
    /// Derives the key from `password` and `salt` (the slow part: run it
    /// on a worker); for test vectors and benches, a real encryption draws
    /// its salt ([`super::random_salt`]) and a salt must never be reused
    /// with the same password. Returns the stream and the 16-byte header
    /// that must be sent before any ciphertext.
    pub fn with_salt(
        password: &[u8],
        salt: &[u8; SALT_LEN],
        iterations: u32,
    ) -> (Self, [u8; HEADER_LEN]) {
        let derived = derive_key(password, salt, iterations);
        Self::with_key(&derived.key, &derived.iv, salt)
    }

    /// A stream for a key and IV already derived (by the client: key source
    /// 2) from the password and `salt`. Returns the stream and its header.
    pub fn with_key(
        key: &[u8; 32],
        iv: &[u8; 16],
        salt: &[u8; SALT_LEN],
    ) -> (Self, [u8; HEADER_LEN]) {
        let cipher = Chain::new(key, iv);
        let stream = EncryptStream {
            cipher,
            framing: EncryptFraming::new(),
        };
        (stream, super::header(salt))
    }

    /// Encrypts the whole blocks of carried bytes + `buf` in place; the
    /// rest is carried. Afterwards `buf` holds the ciphertext to send
    /// (possibly nothing).
    pub fn update(&mut self, buf: &mut ChunkBuf) {
        self.begin_chunk(buf);
        encrypt_lanes(&mut [(self, buf.as_mut_slice())]);
    }

    /// The CBC chain, for the lane engine.
    pub fn chain(&mut self) -> &mut Chain {
        &mut self.cipher
    }

    /// The first half of [`EncryptStream::update`], for the lane engine:
    /// puts the carried bytes in front of `buf` and carries its partial
    /// last block, so that `buf` holds whole blocks, still plaintext. They
    /// must then be encrypted, in order, with [`encrypt_lanes`].
    pub fn begin_chunk(&mut self, buf: &mut ChunkBuf) {
        self.framing.begin_chunk(buf);
    }

    /// Pads and encrypts the last block into `buf` (which is cleared
    /// first): 16 bytes of ciphertext, the end of the stream.
    pub fn finish(mut self, buf: &mut ChunkBuf) {
        self.framing.last_block(buf);
        encrypt_chains(&mut [(&mut self.cipher, buf.as_mut_slice())]);
    }
}

/// Where a decryption's key comes from once the header has arrived.
enum DecryptKey {
    /// Derived from the password and the file's salt (key source 1).
    Password {
        password: zeroize::Zeroizing<Vec<u8>>,
        iterations: u32,
    },
    /// Derived by the client from the salt it read in the file (key
    /// source 2); the file's salt must be that one.
    Derived(Box<DerivedKey>, [u8; SALT_LEN]),
}

/// Decrypts a stream of chunks in the `openssl enc` format.
pub struct DecryptStream {
    key: DecryptKey,
    framing: DecryptFraming,
    cipher: Option<DecryptChain>,
}

impl DecryptStream {
    /// A decryptor; the key is derived once the salt has arrived.
    pub fn new(password: &[u8], iterations: u32) -> Self {
        Self::with_source(DecryptKey::Password {
            password: zeroize::Zeroizing::new(password.to_vec()),
            iterations,
        })
    }

    /// A decryptor for a key and IV the client derived (key source 2)
    /// from the password and `salt`; the file's header must carry `salt`.
    pub fn with_key(key: &[u8; 32], iv: &[u8; 16], salt: &[u8; SALT_LEN]) -> Self {
        let derived = DerivedKey { key: *key, iv: *iv };
        Self::with_source(DecryptKey::Derived(Box::new(derived), *salt))
    }

    fn with_source(key: DecryptKey) -> Self {
        DecryptStream {
            key,
            framing: DecryptFraming::new(),
            cipher: None,
        }
    }

    /// For a decryption with a password (key source 1) whose key is not
    /// derived yet: the salt, when the header is complete with the bytes
    /// of `buf`. The caller then derives the key (in slices, see
    /// [`SlicedPbkdf2`](super::sliced::SlicedPbkdf2)) and hands it over
    /// with [`DecryptStream::provide_key`] before calling `update`, which
    /// would otherwise derive it in one piece.
    pub fn salt_needed(&self, buf: &ChunkBuf) -> Option<[u8; SALT_LEN]> {
        if self.cipher.is_some() || !matches!(self.key, DecryptKey::Password { .. }) {
            return None;
        }
        self.framing.salt_ahead(buf)
    }

    /// The key and IV derived from the password and `salt` (see
    /// [`DecryptStream::salt_needed`]).
    pub fn provide_key(&mut self, derived: DerivedKey, salt: [u8; SALT_LEN]) {
        self.key = DecryptKey::Derived(Box::new(derived), salt);
    }

    /// The iteration count and password of a key source 1 decryption whose
    /// key is not derived yet.
    pub fn password(&self) -> Option<(&[u8], u32)> {
        match &self.key {
            DecryptKey::Password {
                password,
                iterations,
            } if self.cipher.is_none() => Some((password, *iterations)),
            _ => None,
        }
    }

    /// Consumes the header from the first bytes (deriving the key when the
    /// salt is complete: slow, run on a worker), then decrypts whole
    /// blocks in place, holding back the last one. Afterwards `buf` holds
    /// plaintext to send (possibly nothing).
    pub fn update(&mut self, buf: &mut ChunkBuf) -> Result<(), CipherError> {
        if let Some(salt) = self.framing.take_header(buf)? {
            let cipher = match &self.key {
                DecryptKey::Password {
                    password,
                    iterations,
                } => {
                    let derived = derive_key(password, &salt, *iterations);
                    DecryptChain::new(&derived.key, &derived.iv)
                }
                DecryptKey::Derived(derived, expected) => {
                    if salt != *expected {
                        return Err(CipherError::SaltMismatch);
                    }
                    DecryptChain::new(&derived.key, &derived.iv)
                }
            };
            self.cipher = Some(cipher);
        }
        let Some(cipher) = self.cipher.as_mut() else {
            return Ok(());
        };
        self.framing.hold_back(buf);
        cipher.decrypt(buf.as_mut_slice());
        Ok(())
    }

    /// Checks the length, decrypts the held-back block and strips the
    /// padding into `buf` (cleared first).
    pub fn finish(mut self, buf: &mut ChunkBuf) -> Result<(), CipherError> {
        self.framing.last_block(buf)?;
        let Some(cipher) = self.cipher.as_mut() else {
            return Err(CipherError::MissingHeader);
        };
        cipher.decrypt(buf.as_mut_slice());
        let mut last = [0u8; BLOCK];
        last.copy_from_slice(buf.as_slice());
        let plain = unpadded_len(&last);
        last.fill(0);
        buf.truncate(plain.unwrap_or(0));
        plain.map(|_| ()).ok_or(CipherError::DecryptFailed)
    }
}

/// Encrypts a whole buffer with a given salt, `chunk` bytes at a time
/// (at least 1), through the same streaming path a job uses; returns the
/// complete `openssl enc` file. For test vectors, tests and benchmarks: a
/// real encryption draws its salt with [`super::random_salt`].
pub fn encrypt_buffer(
    password: &[u8],
    salt: &[u8; SALT_LEN],
    iterations: u32,
    plain: &[u8],
    chunk: usize,
) -> Vec<u8> {
    let chunk = chunk.max(1);
    let (mut stream, header) = EncryptStream::with_salt(password, salt, iterations);
    let mut out = header.to_vec();
    let mut buf = ChunkBuf::with_capacity(chunk);
    for piece in plain.chunks(chunk) {
        buf.payload_mut(piece.len()).copy_from_slice(piece);
        stream.update(&mut buf);
        out.extend_from_slice(buf.as_slice());
    }
    stream.finish(&mut buf);
    out.extend_from_slice(buf.as_slice());
    out
}

/// Decrypts a whole `openssl enc` file, `chunk` bytes at a time (at least
/// 1), through the same streaming path a job uses.
pub fn decrypt_buffer(
    password: &[u8],
    iterations: u32,
    file: &[u8],
    chunk: usize,
) -> Result<Vec<u8>, CipherError> {
    let chunk = chunk.max(1);
    let mut stream = DecryptStream::new(password, iterations);
    let mut out = Vec::with_capacity(file.len());
    let mut buf = ChunkBuf::with_capacity(chunk);
    for piece in file.chunks(chunk) {
        buf.payload_mut(piece.len()).copy_from_slice(piece);
        stream.update(&mut buf)?;
        out.extend_from_slice(buf.as_slice());
    }
    stream.finish(&mut buf)?;
    out.extend_from_slice(buf.as_slice());
    Ok(out)
}

/// Continues each stream's CBC chain over its whole blocks, all streams
/// together (one lane each).
pub fn encrypt_lanes(lanes: &mut [(&mut EncryptStream, &mut [u8])]) {
    let mut chains: Vec<(&mut Chain, &mut [u8])> = lanes
        .iter_mut()
        .map(|(stream, blocks)| (&mut stream.cipher, &mut **blocks))
        .collect();
    encrypt_chains(&mut chains);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

    fn encrypt_in_chunks(plain: &[u8], chunk: usize) -> Vec<u8> {
        encrypt_buffer(b"pw", &SALT, 1000, plain, chunk)
    }

    fn decrypt_in_chunks(
        cipher: &[u8],
        chunk: usize,
        password: &[u8],
    ) -> Result<Vec<u8>, CipherError> {
        decrypt_buffer(password, 1000, cipher, chunk)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn chunking_does_not_change_the_ciphertext() {
        let plain = pattern(1000);
        let reference = encrypt_in_chunks(&plain, 1000);
        assert_eq!(reference.len(), 16 + 1008);
        for chunk in [1, 3, 15, 16, 17, 64, 999] {
            assert_eq!(encrypt_in_chunks(&plain, chunk), reference, "chunk {chunk}");
        }
    }

    #[test]
    fn decrypting_in_any_chunking_restores_the_plaintext() {
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 500] {
            let plain = pattern(len);
            let cipher = encrypt_in_chunks(&plain, 7);
            for chunk in [1, 5, 16, 17, 64] {
                assert_eq!(
                    decrypt_in_chunks(&cipher, chunk, b"pw").as_deref(),
                    Ok(plain.as_slice()),
                    "len {len} chunk {chunk}"
                );
            }
        }
    }

    #[test]
    fn wrong_password_fails_as_decrypt_failed() {
        let cipher = encrypt_in_chunks(&pattern(100), 100);
        // A wrong key yields valid-looking padding with probability ~1/256;
        // this password is checked not to.
        assert_eq!(
            decrypt_in_chunks(&cipher, 64, b"wrong"),
            Err(CipherError::DecryptFailed)
        );
    }

    #[test]
    fn structural_errors_are_told_apart() {
        assert_eq!(
            decrypt_in_chunks(b"Salted_!12345678abcdefghabcdefgh", 64, b"pw"),
            Err(CipherError::MissingHeader)
        );
        assert_eq!(
            decrypt_in_chunks(b"", 64, b"pw"),
            Err(CipherError::MissingHeader)
        );
        assert_eq!(
            decrypt_in_chunks(b"Salted__12345678", 64, b"pw"),
            Err(CipherError::BadLength { len: 0 })
        );
        let cipher = encrypt_in_chunks(&pattern(40), 40);
        assert_eq!(
            decrypt_in_chunks(&cipher[..cipher.len() - 1], 64, b"pw"),
            Err(CipherError::BadLength { len: 47 })
        );
    }
}
