//! The key derivation of the `openssl enc -aes-256-cbc -pbkdf2` format
//! (feature `kdf`): openssl derives 48 bytes with PBKDF2-HMAC-SHA256 over
//! the password and the file's salt, the first 32 the AES-256 key, the
//! next 16 the CBC IV.
//!
//! The server derives a job's key with it (`aesd-core`, also in slices),
//! the client for key source 2 (the password never leaves the client).

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::stream::SALT_LEN;

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
    let mut material = Zeroizing::new([0u8; 48]);
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, material.as_mut());
    let mut derived = DerivedKey {
        key: [0; 32],
        iv: [0; 16],
    };
    derived.key.copy_from_slice(&material[..32]);
    derived.iv.copy_from_slice(&material[32..]);
    derived
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
}
