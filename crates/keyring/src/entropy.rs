//! Where fresh keys and nonces come from. The keyring never reads a random
//! source itself: each operation that needs one takes an [`Entropy`], so
//! tests can count and replay, and the server hands in [`OsEntropy`].

use crate::KeyringError;

/// A source of cryptographically secure random bytes.
pub trait Entropy {
    /// Fills `out` entirely with random bytes.
    fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError>;
}

/// The operating system's CSPRNG (`getrandom`).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
        getrandom::fill(out).map_err(|err| KeyringError::Entropy(err.to_string()))
    }
}
