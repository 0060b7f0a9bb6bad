//! The audit log's hash chain (`--audit-log`): every line ends with a
//! `chain` member, the last of its JSON object, which links it to the
//! keyed line before it.
//!
//! ```text
//! body_i  = the line without its chain member: `{...}` as serialised
//! chain_i = HMAC-SHA256(K, chain_{i-1} ‖ SHA-256(body_i))
//!           (chain_{i-1} omitted, zero bytes, for the log's first line)
//! line_i  = body_i with `,"chain":"hmac-sha256:<hex of chain_i>"` before its `}`
//! K       = HMAC-SHA256(key = "aesd audit chain v1", message = audit salt)
//! ```
//!
//! The audit salt is the random key kept in the sealed keyring that also
//! hashes the lines' strings; K is derived from it with a fixed label as
//! the HMAC key, so `sys/audit-hash` (HMAC keyed by the salt itself)
//! cannot compute K, and K is never written anywhere. A line written
//! while the keyring is sealed has no salt and so no MAC: its member is
//! `"chain":"sealed"`, it does not move the chain, and a verifier can only
//! report it as not verifiable (such lines are only ever written for
//! requests that touch no key). Removing, inserting, moving or changing
//! a keyed line breaks the MAC of that line or of the next keyed one.
//!
//! Anchor lines (`"type":"audit-chain"`) say where a chain continues:
//! aesd writes one before its first line after a start, after the file
//! was renamed or removed (logrotate), truncated, or rotated by
//! `--audit-log-max-bytes`; its `previous` is the hex of the last keyed
//! line's MAC (null at the very first line). A verifier starts from the
//! first file's anchor and checks every later anchor against the chain.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use aesd_keyring::SecretKey;

/// A MAC of the chain (also a line's body digest): 32 bytes.
pub type Link = [u8; 32];

/// The label the chain key is derived with.
const CHAIN_LABEL: &[u8] = b"aesd audit chain v1";

/// The `chain` value of a line written while sealed.
pub const SEALED: &str = "sealed";

/// What a keyed line's `chain` value starts with.
pub const MAC_PREFIX: &str = "hmac-sha256:";

/// The member a line's chain value is in (always the object's last).
const MEMBER: &[u8] = b",\"chain\":\"";

/// The `type` of an anchor line.
pub const ANCHOR_TYPE: &str = "audit-chain";

/// The chain key K, derived from the keyring's audit salt.
pub struct ChainKey(zeroize::Zeroizing<[u8; 32]>);

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey(..)")
    }
}

impl ChainKey {
    /// K for the audit salt `salt`.
    pub fn derive(salt: &SecretKey) -> Self {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(CHAIN_LABEL).expect("HMAC takes any key");
        mac.update(salt.expose());
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&mac.finalize().into_bytes());
        ChainKey(key)
    }

    /// chain_i for the line whose body has SHA-256 `digest`, after
    /// `previous` (none: the log's first keyed line).
    pub fn link(&self, previous: Option<&Link>, digest: &Link) -> Link {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0[..]).expect("HMAC takes any key");
        if let Some(previous) = previous {
            mac.update(previous);
        }
        mac.update(digest);
        mac.finalize().into_bytes().into()
    }

    /// Whether `claimed` is chain_i for `digest` after `previous`
    /// (compared in constant time).
    pub fn verify(&self, previous: Option<&Link>, digest: &Link, claimed: &Link) -> bool {
        self.link(previous, digest).ct_eq(claimed).into()
    }
}

/// SHA-256 of a line's body.
pub fn digest(body: &[u8]) -> Link {
    Sha256::digest(body).into()
}

/// `body` (a JSON object, compact) with its chain member: the MAC after
/// `previous` under `key`, or `sealed` without a key. Returns the line
/// and the new link (none for a sealed line).
pub fn seal_line(
    body: &[u8],
    key: Option<&ChainKey>,
    previous: Option<&Link>,
) -> (Vec<u8>, Option<Link>) {
    let link = key.map(|key| key.link(previous, &digest(body)));
    let value = match &link {
        Some(link) => format!("{MAC_PREFIX}{}", to_hex(link)),
        None => SEALED.to_owned(),
    };
    let open = body.strip_suffix(b"}").unwrap_or(body);
    let mut line = Vec::with_capacity(body.len() + MEMBER.len() + value.len() + 2);
    line.extend_from_slice(open);
    if open == b"{" {
        line.extend_from_slice(&MEMBER[1..]);
    } else {
        line.extend_from_slice(MEMBER);
    }
    line.extend_from_slice(value.as_bytes());
    line.extend_from_slice(b"\"}");
    (line, link)
}

/// A line's chain member, as [`split_line`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainValue {
    /// Written while sealed: no MAC.
    Sealed,
    /// A keyed line's MAC.
    Mac(Link),
}

/// Why a line has no usable chain member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// No `"chain"` member at the end of the object.
    #[error("no chain member at the end of the line")]
    Missing,
    /// A chain value that is neither `sealed` nor `hmac-sha256:` and 64
    /// hex digits.
    #[error("a malformed chain value")]
    Malformed,
}

/// A line's body (the bytes its MAC covers) and its chain value.
pub fn split_line(line: &[u8]) -> Result<(Vec<u8>, ChainValue), SplitError> {
    const ONLY: &[u8] = b"{\"chain\":\"";
    // The body keeps what precedes the member (`{` alone when it is the
    // object's only member) and gets its `}` back.
    let (mut body, rest) = match line.windows(MEMBER.len()).rposition(|w| w == MEMBER) {
        Some(at) => (line[..at].to_vec(), &line[at + MEMBER.len()..]),
        None => match line.strip_prefix(ONLY) {
            Some(rest) => (b"{".to_vec(), rest),
            None => return Err(SplitError::Missing),
        },
    };
    let value = rest.strip_suffix(b"\"}").ok_or(SplitError::Missing)?;
    let chain = if value == SEALED.as_bytes() {
        ChainValue::Sealed
    } else {
        let hex = value
            .strip_prefix(MAC_PREFIX.as_bytes())
            .ok_or(SplitError::Malformed)?;
        ChainValue::Mac(from_hex(hex).ok_or(SplitError::Malformed)?)
    };
    body.push(b'}');
    Ok((body, chain))
}

/// Lowercase hex of a link (MACs and digests are not secret).
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

/// A link from 64 hex digits (either case).
pub fn from_hex(hex: &[u8]) -> Option<Link> {
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut link = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        link[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ChainKey {
        ChainKey::derive(&SecretKey::from_bytes([9; 32]))
    }

    #[test]
    fn a_sealed_line_splits_back_into_its_body_and_mac() {
        let body = br#"{"time":"t","type":"request","data":{"x":"a,\"chain\":\"b"}}"#;
        let (line, link) = seal_line(body, Some(&key()), None);
        let link = link.expect("keyed");
        assert!(
            line.ends_with(format!(",\"chain\":\"hmac-sha256:{}\"}}", to_hex(&link)).as_bytes())
        );
        serde_json::from_slice::<serde_json::Value>(&line).expect("still JSON");
        let (back, value) = split_line(&line).expect("split");
        assert_eq!(back, body.to_vec());
        assert_eq!(value, ChainValue::Mac(link));
        assert!(key().verify(None, &digest(&back), &link));
    }

    #[test]
    fn the_mac_binds_the_previous_link_and_the_body() {
        let k = key();
        let d = digest(b"{\"a\":1}");
        let first = k.link(None, &d);
        let second = k.link(Some(&first), &d);
        assert_ne!(first, second, "the previous link is covered");
        assert!(!k.verify(Some(&first), &digest(b"{\"a\":2}"), &second));
        assert!(!k.verify(Some(&second), &d, &second));
        let other = ChainKey::derive(&SecretKey::from_bytes([8; 32]));
        assert!(!other.verify(Some(&first), &d, &second), "another key");
    }

    #[test]
    fn the_chain_key_is_not_the_salts_own_hmac_of_anything() {
        // sys/audit-hash computes HMAC(salt, input): K is HMAC(label,
        // salt), so even the label as input does not give it.
        let salt = SecretKey::from_bytes([9; 32]);
        let via_audit_hash = crate::audit_chain::tests::hmac(salt.expose(), CHAIN_LABEL);
        assert_ne!(&via_audit_hash[..], &key().0[..]);
        assert_eq!(&hmac(CHAIN_LABEL, salt.expose())[..], &key().0[..]);
    }

    fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("key");
        mac.update(message);
        mac.finalize().into_bytes().into()
    }

    #[test]
    fn sealed_lines_and_lines_without_a_chain() {
        let (line, link) = seal_line(b"{\"a\":1}", None, None);
        assert_eq!(link, None);
        assert_eq!(line, b"{\"a\":1,\"chain\":\"sealed\"}".to_vec());
        assert_eq!(
            split_line(&line),
            Ok((b"{\"a\":1}".to_vec(), ChainValue::Sealed))
        );
        assert_eq!(split_line(b"{\"a\":1}"), Err(SplitError::Missing));
        assert_eq!(
            split_line(b"{\"a\":1,\"chain\":\"hmac-sha256:zz\"}"),
            Err(SplitError::Malformed)
        );
        let (empty, _) = seal_line(b"{}", None, None);
        assert_eq!(empty, b"{\"chain\":\"sealed\"}".to_vec());
        assert_eq!(split_line(&empty), Ok((b"{}".to_vec(), ChainValue::Sealed)));
    }

    #[test]
    fn hex_round_trips() {
        let link: Link = core::array::from_fn(|i| u8::try_from(i * 7).unwrap_or(0));
        assert_eq!(from_hex(to_hex(&link).as_bytes()), Some(link));
        assert_eq!(from_hex(b"00"), None);
    }
}
