//! Tokens as OpenBao issues them: a random secret the client sends in
//! `X-Vault-Token`, stored only as its SHA-256, with an accessor (a second
//! random name that can look up or revoke the token without being it),
//! its policies, and an optional time to live. The root token carries the
//! `root` policy: every capability on every path.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;
use zeroize::Zeroizing;

use crate::policy::Acl;
use crate::{Entropy, KeyringError};

/// The policy name that grants everything.
pub const ROOT_POLICY: &str = "root";
/// The most tokens kept.
pub const MAX_TOKENS: usize = 4096;
/// The longest token accepted (OpenBao's dev root token ids may be short
/// words such as `root`; none is longer than this).
pub const MAX_TOKEN_LEN: usize = 256;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    /// No such token (never issued, revoked, or expired and removed).
    #[error("permission denied: unknown or revoked token")]
    Unknown,
    /// Its time to live has passed.
    #[error("permission denied: token expired")]
    Expired,
    /// No token with that accessor.
    #[error("no token with that accessor")]
    UnknownAccessor,
    /// A token id that is empty, too long or not printable ASCII.
    #[error("invalid token id (1 to 256 printable ASCII characters)")]
    InvalidId,
    /// A token with that id exists already.
    #[error("a token with that id exists already")]
    Exists,
    /// [`MAX_TOKENS`] reached.
    #[error("too many tokens (limit {MAX_TOKENS}); revoke some")]
    Full,
    /// The random source failed.
    #[error(transparent)]
    Entropy(#[from] KeyringError),
}

/// What is kept of a token: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// The accessor (public handle).
    pub accessor: String,
    /// Policy names, sorted; `root` grants everything.
    pub policies: Vec<String>,
    /// Creation time, Unix seconds.
    pub creation_time: u64,
    /// Seconds it lives from its last renewal; 0 = forever.
    pub ttl: u64,
    /// When it expires, Unix seconds; 0 = never.
    pub expire_time: u64,
    /// Shown in `lookup-self` (e.g. `token`, `root`).
    pub display_name: String,
}

impl TokenEntry {
    /// Whether it carries the root policy.
    pub fn is_root(&self) -> bool {
        self.policies.iter().any(|p| p == ROOT_POLICY)
    }

    /// Its ACL given the policies by name (unknown names grant nothing).
    pub fn acl<'a>(&self, policy: impl Fn(&str) -> Option<&'a crate::policy::Policy>) -> Acl {
        if self.is_root() {
            return Acl::root();
        }
        Acl::new(self.policies.iter().filter_map(|name| policy(name)))
    }
}

/// The tokens, by the hex SHA-256 of each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenStore {
    by_hash: BTreeMap<String, TokenEntry>,
}

fn hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    base16ct::lower::encode_string(&digest)
}

fn random_text(entropy: &mut dyn Entropy, bytes: usize) -> Result<Zeroizing<String>, KeyringError> {
    let mut raw = Zeroizing::new(vec![0u8; bytes]);
    entropy.fill(&mut raw)?;
    Ok(crate::secret_text::base64url(&raw[..]))
}

impl TokenStore {
    /// Issues a token with `policies` (sorted, deduplicated) living `ttl`
    /// seconds (0: forever). With `id`, the token is that text (as
    /// `-dev-root-token-id` and `auth/token/create`'s `id`); otherwise
    /// `s.` and 32 random base64url characters (192 bits). Returns the
    /// token, shown once, and its entry.
    pub fn create(
        &mut self,
        id: Option<&str>,
        mut policies: Vec<String>,
        ttl: u64,
        now: u64,
        display_name: &str,
        entropy: &mut dyn Entropy,
    ) -> Result<(Zeroizing<String>, TokenEntry), TokenError> {
        if self.by_hash.len() >= MAX_TOKENS {
            return Err(TokenError::Full);
        }
        let token = match id {
            Some(id) => {
                if id.is_empty()
                    || id.len() > MAX_TOKEN_LEN
                    || !id.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(TokenError::InvalidId);
                }
                Zeroizing::new(id.to_string())
            }
            None => Zeroizing::new(format!("s.{}", *random_text(entropy, 24)?)),
        };
        let key = hash(&token);
        if self.by_hash.contains_key(&key) {
            return Err(TokenError::Exists);
        }
        policies.sort();
        policies.dedup();
        let entry = TokenEntry {
            accessor: random_text(entropy, 18)?.to_string(),
            policies,
            creation_time: now,
            ttl,
            expire_time: if ttl == 0 { 0 } else { now.saturating_add(ttl) },
            display_name: display_name.into(),
        };
        self.by_hash.insert(key, entry.clone());
        Ok((token, entry))
    }

    /// The entry of `token`, if it is live at `now`.
    pub fn lookup(&self, token: &str, now: u64) -> Result<&TokenEntry, TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Unknown);
        }
        let entry = self.by_hash.get(&hash(token)).ok_or(TokenError::Unknown)?;
        if entry.expire_time != 0 && now >= entry.expire_time {
            return Err(TokenError::Expired);
        }
        Ok(entry)
    }

    /// The entry with `accessor`.
    pub fn lookup_accessor(&self, accessor: &str) -> Result<&TokenEntry, TokenError> {
        self.by_hash
            .values()
            .find(|e| e.accessor == accessor)
            .ok_or(TokenError::UnknownAccessor)
    }

    /// Extends a live token's life by its TTL (or `increment` seconds) from
    /// `now` (`renew-self`); a token without TTL stays without.
    pub fn renew(
        &mut self,
        token: &str,
        increment: Option<u64>,
        now: u64,
    ) -> Result<TokenEntry, TokenError> {
        self.lookup(token, now)?;
        let entry = self
            .by_hash
            .get_mut(&hash(token))
            .ok_or(TokenError::Unknown)?;
        if entry.ttl != 0 {
            let ttl = increment.unwrap_or(entry.ttl).min(entry.ttl);
            entry.expire_time = now.saturating_add(ttl);
        }
        Ok(entry.clone())
    }

    /// Revokes `token` (`auth/token/revoke`, `revoke-self`).
    pub fn revoke(&mut self, token: &str) -> Result<(), TokenError> {
        self.by_hash
            .remove(&hash(token))
            .map(|_| ())
            .ok_or(TokenError::Unknown)
    }

    /// Revokes the token with `accessor`.
    pub fn revoke_accessor(&mut self, accessor: &str) -> Result<(), TokenError> {
        let before = self.by_hash.len();
        self.by_hash.retain(|_, e| e.accessor != accessor);
        if self.by_hash.len() == before {
            return Err(TokenError::UnknownAccessor);
        }
        Ok(())
    }

    /// Removes expired tokens; returns how many.
    pub fn tidy(&mut self, now: u64) -> usize {
        let before = self.by_hash.len();
        self.by_hash
            .retain(|_, e| e.expire_time == 0 || now < e.expire_time);
        before - self.by_hash.len()
    }

    /// How many tokens are kept.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether no token is kept.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}
