//! The pre-shared access token a server may require before any job.
//!
//! Only the token's SHA-256 digest is kept. A client's token is hashed the
//! same way and the two digests are compared in constant time
//! ([`subtle`]), so neither the position of the first wrong byte nor the
//! token's length shows in the answer's timing.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The token a server requires, as its digest.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    digest: [u8; 32],
}

impl AccessToken {
    /// The token `token` (its bounds, 16 to 256 bytes, are checked where it
    /// is read: `aesd_proto::secret_file`).
    pub fn new(token: &[u8]) -> AccessToken {
        AccessToken {
            digest: Sha256::digest(token).into(),
        }
    }

    /// Whether `candidate` is the token, compared in constant time.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate).into();
        bool::from(digest.ct_eq(&self.digest))
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<digest>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_itself_matches() {
        let token = AccessToken::new(b"0123456789abcdef");
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeF"));
        assert!(!token.matches(b"0123456789abcdef0"));
        assert!(!token.matches(b""));
        assert!(!format!("{token:?}").contains("0123"));
    }
}
