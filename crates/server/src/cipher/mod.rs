//! The `openssl enc -aes-256-cbc -salt -pbkdf2` file format, streamed.
//!
//! * [`key`]: salt, PBKDF2-HMAC-SHA256 key and IV derivation, the
//!   `Salted__` header.
//! * [`chunk`]: [`ChunkBuf`], a reusable buffer with headroom, so carried
//!   bytes are prepended and blocks are encrypted in place.
//! * [`stream`]: [`EncryptStream`] and [`DecryptStream`], which keep one CBC
//!   chain across any chunking of the input: the format's framing (carry,
//!   held-back last block, padding, header) is `aesd_cipher::stream`'s,
//!   the CBC chain the engine's.
//! * [`sliced`]: PBKDF2 in slices, so a derivation can stop between them.
//! * [`engine`]: which AES encrypts (the CPU's instructions, or aesd's
//!   fixsliced AES with several jobs' chains per call).

pub mod chunk;
pub mod engine;
pub mod key;
pub mod sliced;
pub mod stream;

pub use chunk::ChunkBuf;
pub use key::{DerivedKey, SALT_LEN, SALTED_MAGIC, derive_key, random_salt};
pub use stream::{
    CipherError, DecryptStream, EncryptStream, decrypt_buffer, encrypt_buffer, encrypt_lanes,
};

/// CBC chains the cipher encrypts together per call (the lane engine's
/// width): 2 on 32-bit targets, 4 on 64-bit ones.
pub const LANES: usize = aesd_cipher::LANES;

/// AES block size in bytes.
pub const BLOCK: usize = aesd_cipher::cbc::BLOCK;

/// Length of the `Salted__` + salt header.
pub const HEADER_LEN: usize = aesd_cipher::stream::HEADER_LEN;
