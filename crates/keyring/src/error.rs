//! Every refusal the keyring can give, as one enum: the HTTP layer maps
//! each variant to OpenBao's status code and message, the binary protocol
//! to its typed error.

use thiserror::Error;

/// A refused or failed keyring operation. No variant carries key material,
/// plaintext or a share.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KeyringError {
    /// No key of that name in the keyring.
    #[error("no key named {name:?} in the keyring")]
    UnknownKey {
        /// The name asked for.
        name: String,
    },
    /// A key of that name exists already (create is not an upsert here).
    #[error("a key named {name:?} exists already")]
    KeyExists {
        /// The name asked for.
        name: String,
    },
    /// The name breaks OpenBao's rules (see [`crate::name`]).
    #[error("invalid key name {name:?}: {reason}")]
    InvalidName {
        /// The name given (truncated to 80 bytes for the message).
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The key type is not one the keyring supports.
    #[error("unsupported key type {given:?} (supported: aes256-gcm96, chacha20-poly1305)")]
    UnsupportedType {
        /// The type asked for.
        given: String,
    },
    /// A version below the key's minimum for this operation (decryption:
    /// `min_decryption_version`; encryption: `min_encryption_version`), or
    /// one trimmed away.
    #[error(
        "key {name:?} version {version} is below the minimum {minimum} allowed for {operation}"
    )]
    VersionBelowMinimum {
        /// The key.
        name: String,
        /// The version asked for.
        version: u32,
        /// The minimum for the operation.
        minimum: u32,
        /// `encryption` or `decryption`.
        operation: &'static str,
    },
    /// A version above the key's latest.
    #[error("key {name:?} version {version} is not created yet (latest is {latest})")]
    VersionNotCreated {
        /// The key.
        name: String,
        /// The version asked for.
        version: u32,
        /// The key's latest version.
        latest: u32,
    },
    /// The keyring's documented limits ([`crate::MAX_KEYS`],
    /// [`crate::MAX_VERSIONS_PER_KEY`], [`crate::MAX_TOTAL_VERSIONS`]).
    #[error("keyring full: {what} (limit {limit})")]
    KeyringFull {
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: usize,
    },
    /// Delete asked for a key whose `deletion_allowed` is false.
    #[error("deletion is not allowed for key {name:?} (set deletion_allowed first)")]
    DeletionNotAllowed {
        /// The key.
        name: String,
    },
    /// A configuration or trim the rules refuse (OpenBao's checks; the
    /// message says which).
    #[error("invalid configuration for key {name:?}: {reason}")]
    InvalidConfig {
        /// The key.
        name: String,
        /// OpenBao's reason, in words.
        reason: String,
    },
    /// A ciphertext that cannot be this key's: malformed `vault:vN:`
    /// prefix, bad base64, too short, or the AEAD's authentication failed
    /// (wrong key, another key's ciphertext, changed bytes or associated
    /// data).
    #[error("bad ciphertext: {0}")]
    BadCiphertext(CiphertextFault),
    /// A plaintext longer than the keyring's AEADs take in one call
    /// ([`crate::MAX_PLAINTEXT_LEN`]).
    #[error("plaintext of {len} bytes is longer than {max} bytes")]
    PlaintextTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The operating system's random source failed.
    #[error("random source failed: {0}")]
    Entropy(String),
}

/// Why a ciphertext was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CiphertextFault {
    /// It does not start with `vault:v` followed by a version and `:`.
    #[error("malformed prefix (expected vault:vN:)")]
    MalformedPrefix,
    /// The version is not a positive decimal number that fits 32 bits.
    #[error("malformed version")]
    MalformedVersion,
    /// The payload is not standard base64.
    #[error("payload is not valid base64")]
    BadBase64,
    /// Shorter than a nonce and a tag.
    #[error("too short for a nonce and a tag")]
    TooShort,
    /// It opened, but is not a 32-byte file key (a ciphertext of
    /// something else under the same key and associated data).
    #[error("not a wrapped 32-byte file key")]
    NotAFileKey,
    /// The tag did not verify: another key, a changed byte or other
    /// associated data.
    #[error("authentication failed (another key, changed bytes or other associated data)")]
    AuthenticationFailed,
}

impl From<CiphertextFault> for KeyringError {
    fn from(fault: CiphertextFault) -> Self {
        KeyringError::BadCiphertext(fault)
    }
}
