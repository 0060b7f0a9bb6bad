//! Optional client authentication with a pre-shared access token: the
//! token read from its file ([`AccessToken`]; only its SHA-256 digest is
//! kept, and compared in constant time by aesd-core's
//! [`access_token`](aesd_core::access_token)).
//!
//! Failed attempts are slowed down per client address by
//! [`FailureThrottle`] (per [`ClientId`]: an IPv6 /64 is one client): the `unauthorized` answer comes after a delay that
//! doubles with each recent failure from the same address.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aesd_core::access_token::AccessToken as CoreToken;
use aesd_proto::limits::{MAX_TOKEN_LEN, MIN_TOKEN_LEN};
use aesd_proto::secret_file::{SecretFileError, read_secret_file};

use crate::client_id::ClientId;

/// The token a server requires, read from the `token-file`'s first line;
/// only its digest is kept (aesd-core's [`CoreToken`]).
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    token: CoreToken,
}

impl AccessToken {
    /// Reads the token from the first line of `path` (16 to 256 bytes).
    pub fn from_file(path: &Path) -> Result<AccessToken, SecretFileError> {
        let token = read_secret_file(path, "access token", MIN_TOKEN_LEN, MAX_TOKEN_LEN)?;
        Ok(AccessToken {
            token: CoreToken::new(token.as_bytes()),
        })
    }

    /// The token's digest, which the connections compare against.
    pub fn token(&self) -> &CoreToken {
        &self.token
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// Failures older than this are forgotten.
pub const FAILURE_MEMORY: Duration = Duration::from_secs(600);
/// The delay stops doubling after this many failures (32 × the base).
const MAX_DOUBLINGS: u32 = 5;
/// Addresses remembered at most; past this, a failure from an address not
/// remembered gets the longest delay.
const MAX_TRACKED: usize = 4096;

/// Recent authentication failures per client address, and the delay the
/// next `unauthorized` answer to each must wait.
#[derive(Debug)]
pub struct FailureThrottle {
    base: Duration,
    failures: Mutex<HashMap<ClientId, (u32, Instant)>>,
}

impl FailureThrottle {
    /// A throttle whose first failure waits `base`.
    pub fn new(base: Duration) -> Self {
        FailureThrottle {
            base,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure from `peer` and returns how long to wait before
    /// answering it: the base delay, doubled for each earlier failure from
    /// the address within [`FAILURE_MEMORY`], up to 32 × the base.
    pub fn failed(&self, peer: ClientId) -> Duration {
        let now = Instant::now();
        let longest = self.base * (1 << MAX_DOUBLINGS);
        let Ok(mut failures) = self.failures.lock() else {
            return longest;
        };
        if failures.len() >= MAX_TRACKED && !failures.contains_key(&peer) {
            failures.retain(|_, (_, last)| now.duration_since(*last) < FAILURE_MEMORY);
            if failures.len() >= MAX_TRACKED {
                return longest;
            }
        }
        let entry = failures.entry(peer).or_insert((0, now));
        if now.duration_since(entry.1) >= FAILURE_MEMORY {
            entry.0 = 0;
        }
        let delay = self.base * (1 << entry.0.min(MAX_DOUBLINGS));
        *entry = (entry.0.saturating_add(1), now);
        delay
    }

    /// The delay [`FailureThrottle::failed`] would return for `peer` now,
    /// without recording a failure.
    pub fn next_delay(&self, peer: ClientId) -> Duration {
        let now = Instant::now();
        let longest = self.base * (1 << MAX_DOUBLINGS);
        let Ok(failures) = self.failures.lock() else {
            return longest;
        };
        match failures.get(&peer) {
            Some((count, last)) if now.duration_since(*last) < FAILURE_MEMORY => {
                self.base * (1 << (*count).min(MAX_DOUBLINGS))
            }
            Some(_) => self.base,
            None if failures.len() >= MAX_TRACKED => longest,
            None => self.base,
        }
    }

    /// Forgets `peer`'s failures after it authenticated.
    pub fn succeeded(&self, peer: ClientId) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(&peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token read from a temporary file holding `content` (removed
    /// once read).
    fn token_from(name: &str, content: &[u8]) -> Result<AccessToken, SecretFileError> {
        let path = std::env::temp_dir().join(format!("aesd-token-{}-{name}", std::process::id()));
        std::fs::write(&path, content).expect("write");
        let token = AccessToken::from_file(&path);
        let _ = std::fs::remove_file(&path);
        token
    }

    #[test]
    fn only_the_exact_token_matches() {
        let token = token_from("ok", b"0123456789abcdef\n").expect("ok");
        let digest = token.token();
        assert!(digest.matches(b"0123456789abcdef"));
        assert!(!digest.matches(b"0123456789abcdeF"));
        assert!(!digest.matches(b"0123456789abcdef\n"));
        assert!(!digest.matches(b"0123456789abcde"));
        assert!(!digest.matches(b""));
        assert!(!format!("{token:?}").contains("0123"));
    }

    #[test]
    fn short_tokens_are_refused() {
        let err = token_from("short", b"tiny\n").unwrap_err();
        assert!(
            matches!(err, SecretFileError::Length { len: 4, .. }),
            "{err}"
        );
    }

    #[test]
    fn the_delay_doubles_per_failure_up_to_a_cap_and_resets_on_success() {
        let throttle = FailureThrottle::new(Duration::from_millis(10));
        let peer = ClientId::of([127, 0, 0, 9].into(), 64);
        let other = ClientId::of([127, 0, 0, 10].into(), 64);
        let delays: Vec<u64> = (0..8)
            .map(|_| throttle.failed(peer).as_millis() as u64)
            .collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 320, 320]);
        assert_eq!(throttle.next_delay(peer), Duration::from_millis(320));
        assert_eq!(throttle.next_delay(other), Duration::from_millis(10));
        assert_eq!(throttle.failed(other), Duration::from_millis(10));
        throttle.succeeded(peer);
        assert_eq!(throttle.failed(peer), Duration::from_millis(10));
    }
}
