//! The keyring: named keys and the Transit operations on them. Sans-I/O:
//! the caller hands in the time (Unix seconds) and an [`Entropy`], and
//! persists the keyring (sealed, [`crate::sealed`]) after each change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::aead::{self, NONCE_LEN};
use crate::key::{KeyConfigUpdate, KeyMetadata, KeyVersion, NamedKey};
use crate::{Entropy, KeyType, KeyringError, SecretKey, ciphertext, name};

/// The most keys a keyring holds.
pub const MAX_KEYS: usize = 256;
/// The most versions one key keeps (trim frees them).
pub const MAX_VERSIONS_PER_KEY: usize = 1024;
/// The most versions over all keys (about 180 bytes each when sealed, so
/// the sealed keyring stays under 1.5 MB: 1 490 941 bytes at every limit
/// with 128-byte names).
pub const MAX_TOTAL_VERSIONS: usize = 8192;
/// The longest plaintext one encrypt call takes: 32 MiB, OpenBao's
/// default `max_request_size` (files beyond go by the binary protocol,
/// wrapping a file key).
pub const MAX_PLAINTEXT_LEN: usize = 32 << 20;

/// A 32-byte file key (data key), wrapped by a named key's version.
pub type FileKey = SecretKey;

/// A file key wrapped by `name` version `version`: `nonce || ciphertext
/// || tag` (60 bytes), the bytes a by-name file header carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// The version that wrapped it.
    pub version: u32,
    /// `nonce || ciphertext || tag`.
    pub sealed: Vec<u8>,
}

/// Named keys with versions. `Debug` shows names and versions, never
/// material.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Keyring {
    keys: BTreeMap<String, NamedKey>,
}

impl Keyring {
    /// An empty keyring.
    pub fn new() -> Self {
        Keyring::default()
    }

    fn key(&self, name: &str) -> Result<&NamedKey, KeyringError> {
        self.keys.get(name).ok_or_else(|| KeyringError::UnknownKey {
            name: name.chars().take(80).collect(),
        })
    }

    fn key_mut(&mut self, name: &str) -> Result<&mut NamedKey, KeyringError> {
        self.keys
            .get_mut(name)
            .ok_or_else(|| KeyringError::UnknownKey {
                name: name.chars().take(80).collect(),
            })
    }

    fn total_versions(&self) -> usize {
        self.keys.values().map(NamedKey::version_count).sum()
    }

    fn room_for_a_version(&self) -> Result<(), KeyringError> {
        if self.total_versions() >= MAX_TOTAL_VERSIONS {
            return Err(KeyringError::KeyringFull {
                what: "versions over all keys",
                limit: MAX_TOTAL_VERSIONS,
            });
        }
        Ok(())
    }

    /// Creates key `name` of `key_type` with version 1.
    pub fn create(
        &mut self,
        name: &str,
        key_type: KeyType,
        now: u64,
        entropy: &mut dyn Entropy,
    ) -> Result<KeyMetadata, KeyringError> {
        name::validate(name)?;
        if self.keys.contains_key(name) {
            return Err(KeyringError::KeyExists { name: name.into() });
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(KeyringError::KeyringFull {
                what: "keys",
                limit: MAX_KEYS,
            });
        }
        self.room_for_a_version()?;
        let first = KeyVersion {
            key: SecretKey::generate(entropy)?,
            creation_time: now,
        };
        let key = NamedKey::new(name.into(), key_type, first);
        let metadata = key.metadata();
        self.keys.insert(name.into(), key);
        Ok(metadata)
    }

    /// The key's metadata (never its material).
    pub fn read(&self, name: &str) -> Result<KeyMetadata, KeyringError> {
        self.key(name).map(NamedKey::metadata)
    }

    /// Whether the keyring holds a key of this name (no copy of its
    /// metadata, unlike [`Keyring::read`]: a request's existence checks).
    pub fn contains(&self, name: &str) -> bool {
        self.keys.contains_key(name)
    }

    /// `Ok` when the keyring holds a key of this name, else the error
    /// [`Keyring::read`] gives (without copying the metadata).
    pub fn require(&self, name: &str) -> Result<(), KeyringError> {
        self.key(name).map(|_| ())
    }

    /// The key's newest version; `None` without such a key (no copy of
    /// its metadata, unlike [`Keyring::read`]).
    pub fn latest_version(&self, name: &str) -> Option<u32> {
        self.keys.get(name).map(|key| key.latest_version)
    }

    /// The names of all keys, sorted.
    pub fn list(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// How many keys the keyring holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the keyring holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds a new version to `name`; returns its number.
    pub fn rotate(
        &mut self,
        name: &str,
        now: u64,
        entropy: &mut dyn Entropy,
    ) -> Result<u32, KeyringError> {
        self.room_for_a_version()?;
        if self.key(name)?.version_count() >= MAX_VERSIONS_PER_KEY {
            return Err(KeyringError::KeyringFull {
                what: "versions of one key (trim old ones)",
                limit: MAX_VERSIONS_PER_KEY,
            });
        }
        let version = KeyVersion {
            key: SecretKey::generate(entropy)?,
            creation_time: now,
        };
        Ok(self.key_mut(name)?.push_version(version))
    }

    /// Rotates every key whose `auto_rotate_period` has passed; returns
    /// the names rotated. Stops at the first refusal (keyring full).
    pub fn rotate_due(
        &mut self,
        now: u64,
        entropy: &mut dyn Entropy,
    ) -> Result<Vec<String>, KeyringError> {
        let due: Vec<String> = self
            .keys
            .values()
            .filter(|k| k.rotation_due(now))
            .map(|k| k.name.clone())
            .collect();
        for name in &due {
            self.rotate(name, now, entropy)?;
        }
        Ok(due)
    }

    /// Deletes `name` with all its versions, if its `deletion_allowed`.
    pub fn delete(&mut self, name: &str) -> Result<(), KeyringError> {
        if !self.key(name)?.deletion_allowed {
            return Err(KeyringError::DeletionNotAllowed { name: name.into() });
        }
        self.keys.remove(name);
        Ok(())
    }

    /// Changes `name`'s settings (all or nothing).
    pub fn configure(
        &mut self,
        name: &str,
        update: &KeyConfigUpdate,
    ) -> Result<KeyMetadata, KeyringError> {
        let key = self.key_mut(name)?;
        key.configure(update)?;
        Ok(key.metadata())
    }

    /// Deletes `name`'s versions below `min_available_version`, for good.
    pub fn trim(&mut self, name: &str, min_available: u32) -> Result<KeyMetadata, KeyringError> {
        let key = self.key_mut(name)?;
        key.trim(min_available)?;
        Ok(key.metadata())
    }

    /// Encrypts with `name` (version `version`, `None` or 0: the latest)
    /// and associated data `aad`: `(version, nonce || ciphertext || tag)`.
    pub fn encrypt_raw(
        &self,
        name: &str,
        version: Option<u32>,
        plaintext: &[u8],
        aad: &[u8],
        entropy: &mut dyn Entropy,
    ) -> Result<(u32, Vec<u8>), KeyringError> {
        let key = self.key(name)?;
        let (version, kv) = key.encryption_version(version)?;
        let mut nonce = [0; NONCE_LEN];
        entropy.fill(&mut nonce)?;
        let sealed = aead::seal(key.key_type, &kv.key, &nonce, aad, plaintext)?;
        Ok((version, sealed))
    }

    /// Opens `nonce || ciphertext || tag` made by `name` version
    /// `version` with `aad`.
    pub fn decrypt_raw(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        aad: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, KeyringError> {
        let key = self.key(name)?;
        let kv = key.decryption_version(version)?;
        Ok(aead::open(key.key_type, &kv.key, aad, sealed)?)
    }

    /// Encrypts to Transit's text form, `vault:vN:` + base64.
    pub fn encrypt(
        &self,
        name: &str,
        version: Option<u32>,
        plaintext: &[u8],
        aad: &[u8],
        entropy: &mut dyn Entropy,
    ) -> Result<String, KeyringError> {
        let (version, sealed) = self.encrypt_raw(name, version, plaintext, aad, entropy)?;
        Ok(ciphertext::format(version, &sealed))
    }

    /// Decrypts Transit's text form.
    pub fn decrypt(
        &self,
        name: &str,
        text: &str,
        aad: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, KeyringError> {
        // An unknown key is reported before a malformed ciphertext.
        self.key(name)?;
        let (version, sealed) = ciphertext::parse(text)?;
        self.decrypt_raw(name, version, &sealed, aad)
    }

    /// Wraps a 32-byte file key with `name` (version as for
    /// [`Keyring::encrypt_raw`]); `aad` binds it to its context (e.g. the
    /// file header naming the key).
    pub fn wrap_file_key(
        &self,
        name: &str,
        version: Option<u32>,
        file_key: &FileKey,
        aad: &[u8],
        entropy: &mut dyn Entropy,
    ) -> Result<WrappedKey, KeyringError> {
        let (version, sealed) = self.encrypt_raw(name, version, file_key.expose(), aad, entropy)?;
        Ok(WrappedKey { version, sealed })
    }

    /// Unwraps a file key wrapped by [`Keyring::wrap_file_key`].
    pub fn unwrap_file_key(
        &self,
        name: &str,
        wrapped: &WrappedKey,
        aad: &[u8],
    ) -> Result<FileKey, KeyringError> {
        let plain = self.decrypt_raw(name, wrapped.version, &wrapped.sealed, aad)?;
        let bytes: [u8; 32] = plain
            .as_slice()
            .try_into()
            .map_err(|_| KeyringError::BadCiphertext(crate::CiphertextFault::NotAFileKey))?;
        Ok(FileKey::from_bytes(bytes))
    }

    /// Checks the invariants of every key (after loading).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.keys.len() > MAX_KEYS || self.total_versions() > MAX_TOTAL_VERSIONS {
            return Err("over the keyring's limits".into());
        }
        for (name, key) in &self.keys {
            if name != &key.name {
                return Err(format!("key {name:?} stored under another name"));
            }
            key.check()?;
        }
        Ok(())
    }
}
