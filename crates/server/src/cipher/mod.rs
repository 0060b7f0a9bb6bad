//! The `openssl enc -aes-256-cbc -salt -pbkdf2` file format, streamed.
//!
//! * [`key`]: salt, PBKDF2-HMAC-SHA256 key and IV derivation, the
//!   `Salted__` header.
//! * [`chunk`]: [`ChunkBuf`], a reusable buffer with headroom, so carried
//!   bytes are prepended and blocks are encrypted in place.
//! * [`stream`]: [`EncryptStream`] and [`DecryptStream`], which keep one CBC
//!   chain across any chunking of the input.

pub mod chunk;
pub mod key;
pub mod stream;

pub use chunk::ChunkBuf;
pub use key::{DerivedKey, SALT_LEN, SALTED_MAGIC, derive_key};
pub use stream::{
    CipherError, DecryptStream, EncryptStream, JobCipher, decrypt_buffer, encrypt_buffer,
};

/// AES block size in bytes.
pub const BLOCK: usize = 16;

/// Length of the `Salted__` + salt header.
pub const HEADER_LEN: usize = 16;
