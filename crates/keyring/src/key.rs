//! One named key: its versions and the settings OpenBao's Transit keeps
//! with it (`min_decryption_version`, `min_encryption_version`,
//! `min_available_version`, `deletion_allowed`, `exportable`,
//! `auto_rotate_period`), and the rules that pick the version for an
//! operation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{KeyType, KeyringError, SecretKey};

/// One version of a key: its material and when it was made (Unix
/// seconds).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KeyVersion {
    /// The key material (redacted in `Debug`, wiped when dropped).
    pub key: SecretKey,
    /// Creation time, Unix seconds.
    pub creation_time: u64,
}

/// A named key with its versions and settings. Field meanings are
/// OpenBao's; see [`KeyMetadata`] for what may be shown.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NamedKey {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) key_type: KeyType,
    /// Versions present: `min_available_version.max(1) ..= latest_version`.
    pub(crate) versions: BTreeMap<u32, KeyVersion>,
    pub(crate) latest_version: u32,
    pub(crate) min_decryption_version: u32,
    pub(crate) min_encryption_version: u32,
    pub(crate) min_available_version: u32,
    pub(crate) deletion_allowed: bool,
    pub(crate) exportable: bool,
    /// Seconds; 0 = never.
    pub(crate) auto_rotate_period: u64,
}

/// What `transit/keys/:name` shows of a key: everything but the material.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyMetadata {
    /// The key's name.
    pub name: String,
    /// Its type, OpenBao's name.
    #[serde(rename = "type")]
    pub key_type: KeyType,
    /// Version number -> creation time (Unix seconds), for the versions
    /// still present.
    pub keys: BTreeMap<u32, u64>,
    /// The newest version.
    pub latest_version: u32,
    /// Ciphertexts of older versions are refused.
    pub min_decryption_version: u32,
    /// Encryption with older versions is refused; 0: only the latest.
    pub min_encryption_version: u32,
    /// Versions below it are trimmed (gone); 0: nothing trimmed.
    pub min_available_version: u32,
    /// Whether delete is allowed.
    pub deletion_allowed: bool,
    /// Whether export is allowed (one-way: once set, never unset).
    pub exportable: bool,
    /// Seconds between automatic rotations; 0 = never.
    pub auto_rotate_period: u64,
}

/// A change to a key's settings, as `transit/keys/:name/config` takes it:
/// `None` leaves a setting as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyConfigUpdate {
    /// New `min_decryption_version` (0 is taken as 1, as OpenBao does).
    pub min_decryption_version: Option<u32>,
    /// New `min_encryption_version` (0: only the latest).
    pub min_encryption_version: Option<u32>,
    /// New `deletion_allowed`.
    pub deletion_allowed: Option<bool>,
    /// `Some(true)` makes the key exportable for good; `Some(false)` never
    /// undoes it (ignored, as OpenBao does).
    pub exportable: Option<bool>,
    /// Seconds; 0 disables, otherwise at least 3600 (OpenBao's rule).
    pub auto_rotate_period: Option<u64>,
}

/// The shortest non-zero `auto_rotate_period`, seconds (OpenBao's).
pub const MIN_AUTO_ROTATE_PERIOD: u64 = 3600;

impl NamedKey {
    pub(crate) fn new(name: String, key_type: KeyType, first: KeyVersion) -> Self {
        NamedKey {
            name,
            key_type,
            versions: BTreeMap::from([(1, first)]),
            latest_version: 1,
            min_decryption_version: 1,
            min_encryption_version: 0,
            min_available_version: 0,
            deletion_allowed: false,
            exportable: false,
            auto_rotate_period: 0,
        }
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key's type.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The newest version.
    pub fn latest_version(&self) -> u32 {
        self.latest_version
    }

    /// How many versions are present.
    pub fn version_count(&self) -> usize {
        self.versions.len()
    }

    /// Everything but the key material.
    pub fn metadata(&self) -> KeyMetadata {
        KeyMetadata {
            name: self.name.clone(),
            key_type: self.key_type,
            keys: self
                .versions
                .iter()
                .map(|(&v, kv)| (v, kv.creation_time))
                .collect(),
            latest_version: self.latest_version,
            min_decryption_version: self.min_decryption_version,
            min_encryption_version: self.min_encryption_version,
            min_available_version: self.min_available_version,
            deletion_allowed: self.deletion_allowed,
            exportable: self.exportable,
            auto_rotate_period: self.auto_rotate_period,
        }
    }

    /// The version encryption uses when asked for `requested` (`None` or
    /// 0: the latest), by OpenBao's rules.
    pub(crate) fn encryption_version(
        &self,
        requested: Option<u32>,
    ) -> Result<(u32, &KeyVersion), KeyringError> {
        let version = match requested {
            None | Some(0) => self.latest_version,
            Some(v) => v,
        };
        if version > self.latest_version {
            return Err(self.not_created(version));
        }
        let minimum = self.min_encryption_version.max(self.min_available_version);
        if version < minimum {
            return Err(self.below(version, minimum, "encryption"));
        }
        self.present(version, "encryption")
    }

    /// The version decryption of a ciphertext made with `version` uses.
    pub(crate) fn decryption_version(&self, version: u32) -> Result<&KeyVersion, KeyringError> {
        if version > self.latest_version {
            return Err(self.not_created(version));
        }
        let minimum = self
            .min_decryption_version
            .max(self.min_available_version)
            .max(1);
        if version < minimum {
            return Err(self.below(version, minimum, "decryption"));
        }
        self.present(version, "decryption").map(|(_, kv)| kv)
    }

    fn present(
        &self,
        version: u32,
        operation: &'static str,
    ) -> Result<(u32, &KeyVersion), KeyringError> {
        // Versions min_available..=latest are always present; a miss here
        // would be a keyring that broke that invariant.
        self.versions
            .get(&version)
            .map(|kv| (version, kv))
            .ok_or_else(|| self.below(version, self.min_available_version, operation))
    }

    fn not_created(&self, version: u32) -> KeyringError {
        KeyringError::VersionNotCreated {
            name: self.name.clone(),
            version,
            latest: self.latest_version,
        }
    }

    fn below(&self, version: u32, minimum: u32, operation: &'static str) -> KeyringError {
        KeyringError::VersionBelowMinimum {
            name: self.name.clone(),
            version,
            minimum,
            operation,
        }
    }

    fn invalid(&self, reason: String) -> KeyringError {
        KeyringError::InvalidConfig {
            name: self.name.clone(),
            reason,
        }
    }

    /// Applies `update` with OpenBao's checks, all or nothing.
    pub(crate) fn configure(&mut self, update: &KeyConfigUpdate) -> Result<(), KeyringError> {
        let mut next = self.clone();
        if let Some(min_dec) = update.min_decryption_version {
            let min_dec = min_dec.max(1);
            if min_dec != next.min_decryption_version && min_dec > next.latest_version {
                return Err(self.invalid(format!(
                    "cannot set min decryption version of {min_dec}, latest key version is {}",
                    next.latest_version
                )));
            }
            next.min_decryption_version = min_dec;
        }
        if let Some(min_enc) = update.min_encryption_version {
            if min_enc != next.min_encryption_version && min_enc > next.latest_version {
                return Err(self.invalid(format!(
                    "cannot set min encryption version of {min_enc}, latest key version is {}",
                    next.latest_version
                )));
            }
            next.min_encryption_version = min_enc;
        }
        if next.min_encryption_version > 0
            && next.min_encryption_version < next.min_decryption_version
        {
            return Err(self.invalid(format!(
                "min encryption version of {} must be greater than or equal to min decryption version of {}",
                next.min_encryption_version, next.min_decryption_version
            )));
        }
        if let Some(allowed) = update.deletion_allowed {
            next.deletion_allowed = allowed;
        }
        if update.exportable == Some(true) {
            next.exportable = true;
        }
        if let Some(period) = update.auto_rotate_period {
            if period != 0 && period < MIN_AUTO_ROTATE_PERIOD {
                return Err(self.invalid(
                    "auto rotate period must be 0 to disable or at least an hour".into(),
                ));
            }
            next.auto_rotate_period = period;
        }
        if next.min_available_version > next.min_encryption_version {
            return Err(self.invalid(
                "min encryption version should not be less than min available version".into(),
            ));
        }
        if next.min_available_version > next.min_decryption_version {
            return Err(self.invalid(
                "min decryption version should not be less than min available version".into(),
            ));
        }
        *self = next;
        Ok(())
    }

    /// Deletes the versions below `min_available_version`, with OpenBao's
    /// checks.
    pub(crate) fn trim(&mut self, min_available: u32) -> Result<(), KeyringError> {
        let reason = if min_available < self.min_available_version {
            Some("minimum available version cannot be decremented")
        } else if self.min_encryption_version == 0 {
            Some(
                "minimum available version cannot be set when minimum encryption version is not set",
            )
        } else if min_available > self.min_encryption_version {
            Some("minimum available version cannot be greater than minimum encryption version")
        } else if min_available > self.min_decryption_version {
            Some("minimum available version cannot be greater than minimum decryption version")
        } else if min_available == 0 {
            Some("minimum available version should be positive")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(self.invalid(reason.into()));
        }
        self.min_available_version = min_available;
        self.versions.retain(|&v, _| v >= min_available);
        Ok(())
    }

    /// Adds version `latest + 1`.
    pub(crate) fn push_version(&mut self, version: KeyVersion) -> u32 {
        self.latest_version += 1;
        self.versions.insert(self.latest_version, version);
        self.latest_version
    }

    /// Whether `auto_rotate_period` has passed since the latest version
    /// was made.
    pub fn rotation_due(&self, now: u64) -> bool {
        self.auto_rotate_period != 0
            && self
                .versions
                .get(&self.latest_version)
                .is_some_and(|kv| now.saturating_sub(kv.creation_time) >= self.auto_rotate_period)
    }

    /// Checks the invariants a loaded keyring must hold (a file written
    /// by another program, or by a bug, is refused rather than used).
    pub(crate) fn check(&self) -> Result<(), String> {
        let low = self.min_available_version.max(1);
        let expected: Vec<u32> = (low..=self.latest_version).collect();
        let present: Vec<u32> = self.versions.keys().copied().collect();
        if self.latest_version == 0 || present != expected {
            return Err(format!(
                "key {:?}: versions not {low}..={}",
                self.name, self.latest_version
            ));
        }
        if self.min_decryption_version == 0 || self.min_decryption_version > self.latest_version {
            return Err(format!(
                "key {:?}: min_decryption_version out of range",
                self.name
            ));
        }
        if self.min_encryption_version > self.latest_version {
            return Err(format!(
                "key {:?}: min_encryption_version out of range",
                self.name
            ));
        }
        crate::name::validate(&self.name).map_err(|e| e.to_string())
    }
}
