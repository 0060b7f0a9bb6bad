//! RustCrypto's ChaCha20 (the `chacha20` crate) as a key stream. On
//! aarch64 the crate compiles its NEON backend whenever the target has
//! NEON, which every aarch64 Linux target has (no cfg or feature needed);
//! on x86 it picks AVX2 or SSE2 at run time; elsewhere its portable code.

use chacha20::ChaCha20;
use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use zeroize::Zeroizing;

use super::KeyStream;

/// ChaCha20 under a key, for any nonce.
pub(crate) struct RustCryptoChaCha {
    key: Zeroizing<[u8; 32]>,
}

impl RustCryptoChaCha {
    fn cipher(&self, nonce: &[u8; 12]) -> ChaCha20 {
        ChaCha20::new(&(*self.key).into(), &(*nonce).into())
    }
}

impl KeyStream for RustCryptoChaCha {
    fn new(key: &[u8; 32]) -> Self {
        RustCryptoChaCha {
            key: Zeroizing::new(*key),
        }
    }

    fn poly_key(&self, nonce: &[u8; 12]) -> Zeroizing<[u8; 32]> {
        let mut key = Zeroizing::new([0u8; 32]);
        self.cipher(nonce).apply_keystream(key.as_mut_slice());
        key
    }

    fn apply(&self, nonce: &[u8; 12], data: &mut [u8]) {
        let mut cipher = self.cipher(nonce);
        cipher.seek(64u64);
        cipher.apply_keystream(data);
    }
}
