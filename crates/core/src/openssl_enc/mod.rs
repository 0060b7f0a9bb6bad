//! The `openssl enc -aes-256-cbc -salt -pbkdf2` file format, streamed,
//! and its key derivation (`aesd-cipher`'s, which the client uses for key
//! source 2 too).
//!
//! A file is the header ([`SALTED_MAGIC`] and an 8-byte salt,
//! [`HEADER_LEN`] bytes), then the AES-256-CBC ciphertext of the PKCS#7
//! padded plaintext. openssl derives 48 bytes with PBKDF2-HMAC-SHA256
//! over the password and the salt: the first 32 are the AES-256 key, the
//! next 16 the IV ([`derive_key`]).
//!
//! * [`stream`]: [`EncryptStream`] and [`DecryptStream`], which keep one CBC
//!   chain across any chunking of the input: the format's framing (carry,
//!   held-back last block, padding, header) is `aesd_cipher::stream`'s,
//!   the CBC chain the [engine](crate::engine)'s.
//! * [`sliced`]: PBKDF2 in slices, so a derivation can stop between them.

pub mod sliced;
pub mod stream;

pub use aesd_cipher::kdf::{DerivedKey, derive_key};
pub use aesd_cipher::stream::{HEADER_LEN, SALT_LEN, SALTED_MAGIC, header};
pub use stream::{
    CipherError, DecryptStream, EncryptStream, decrypt_buffer, encrypt_buffer, encrypt_lanes,
};

/// AES block size in bytes.
pub const BLOCK: usize = aesd_cipher::cbc::BLOCK;

/// A fresh salt from the operating system's random number generator.
pub fn random_salt() -> Result<[u8; SALT_LEN], CipherError> {
    let mut salt = [0u8; SALT_LEN];
    getrandom::fill(&mut salt).map_err(|err| CipherError::Rng(err.to_string()))?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_magic_then_salt() {
        assert_eq!(
            &header(&[9; 8]),
            b"Salted__\x09\x09\x09\x09\x09\x09\x09\x09"
        );
    }
}
