//! The `openssl enc -aes-256-cbc -salt -pbkdf2` file format, streamed,
//! and its key derivation (shared with the client, which derives keys for
//! key source 2 the same way).
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

use zeroize::{Zeroize, ZeroizeOnDrop};

pub use aesd_cipher::stream::{HEADER_LEN, SALT_LEN, SALTED_MAGIC, header};
pub use stream::{
    CipherError, DecryptStream, EncryptStream, decrypt_buffer, encrypt_buffer, encrypt_lanes,
};

/// AES block size in bytes.
pub const BLOCK: usize = aesd_cipher::cbc::BLOCK;

/// An AES-256 key and CBC IV, wiped on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct DerivedKey {
    /// The AES-256 key.
    pub key: [u8; 32],
    /// The CBC initialisation vector.
    pub iv: [u8; 16],
}

/// Derives key and IV as `openssl enc -pbkdf2 -iter <iterations>` does.
pub fn derive_key(password: &[u8], salt: &[u8; SALT_LEN], iterations: u32) -> DerivedKey {
    let mut material = zeroize::Zeroizing::new([0u8; 48]);
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, material.as_mut());
    let mut derived = DerivedKey {
        key: [0; 32],
        iv: [0; 16],
    };
    derived.key.copy_from_slice(&material[..32]);
    derived.iv.copy_from_slice(&material[32..]);
    derived
}

/// A fresh salt from the operating system's random number generator.
pub fn random_salt() -> Result<[u8; SALT_LEN], CipherError> {
    let mut salt = [0u8; SALT_LEN];
    getrandom::fill(&mut salt).map_err(|err| CipherError::Rng(err.to_string()))?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl enc -aes-256-cbc -pbkdf2 -iter 10000 -k password
    /// -S 0001020304050607 -P` prints this key and IV.
    #[test]
    fn derivation_matches_openssl() {
        let derived = derive_key(b"password", &[0, 1, 2, 3, 4, 5, 6, 7], 10_000);
        assert_eq!(
            hex::encode(derived.key),
            "6827bd488a4c5d38d28131175369843dc41c73284eff746252231b58fe384b1e"
        );
        assert_eq!(hex::encode(derived.iv), "77532013c6cb46fda992eda58456ddee");
    }

    #[test]
    fn header_is_magic_then_salt() {
        assert_eq!(
            &header(&[9; 8]),
            b"Salted__\x09\x09\x09\x09\x09\x09\x09\x09"
        );
    }
}
