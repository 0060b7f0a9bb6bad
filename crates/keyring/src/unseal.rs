//! Sealed → unsealed, as OpenBao's `sys/unseal` and `sys/seal-status`
//! report it: shares are given one at a time; progress counts them up to
//! the threshold; at the threshold they are combined and must open the
//! keyring, or the attempt is refused and progress starts over; `reset`
//! drops the shares given so far.

use zeroize::Zeroizing;

use crate::policy::PolicyStore;
use crate::sealed::{
    self, Contents, ContentsRef, RootKey, SealError, SealType, SealedHeader, WrappedRoot,
};
use crate::shamir::{self, Share};
use crate::token::TokenStore;
use crate::{Entropy, Keyring, KeyringError, SecretKey};

/// What `sys/seal-status` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealStatus {
    /// Whether the keyring is still sealed.
    pub sealed: bool,
    /// k.
    pub threshold: u8,
    /// n.
    pub shares: u8,
    /// Distinct shares given so far (0 once unsealed).
    pub progress: u8,
    /// The sealed keyring's generation.
    pub generation: u64,
    /// How the root key comes back (with the transit seal, threshold and
    /// shares are the recovery shares').
    pub seal_type: SealType,
}

/// A sealed keyring waiting for shares. `Debug` shows the progress only.
pub struct Unsealer {
    sealed: Vec<u8>,
    header: SealedHeader,
    given: Vec<Share>,
}

impl core::fmt::Debug for Unsealer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Unsealer")
            .field("header", &self.header)
            .field("progress", &self.given.len())
            .finish()
    }
}

/// The outcome of one share.
#[derive(Debug)]
pub enum UnsealStep {
    /// More shares are needed.
    Progress(SealStatus),
    /// The threshold was reached and the keyring opened.
    Unsealed(Box<UnsealedKeyring>),
}

impl Unsealer {
    /// Starts unsealing `sealed` (its header is checked now).
    pub fn new(sealed: Vec<u8>) -> Result<Self, SealError> {
        let header = sealed::read_header(&sealed)?;
        Ok(Unsealer {
            sealed,
            header,
            given: Vec::new(),
        })
    }

    /// The status to report while sealed.
    pub fn status(&self) -> SealStatus {
        SealStatus {
            sealed: true,
            threshold: self.header.config.threshold,
            shares: self.header.config.shares,
            progress: u8::try_from(self.given.len()).unwrap_or(u8::MAX),
            generation: self.header.generation,
            seal_type: self.header.seal_type(),
        }
    }

    /// The generation waiting for shares.
    pub fn generation(&self) -> u64 {
        self.header.generation
    }

    /// With the transit seal, the root key as the Transit key encrypted
    /// it (to decrypt there, then [`Unsealer::open_with_root`]).
    pub fn wrapped_root(&self) -> Option<&WrappedRoot> {
        self.header.wrapped_root.as_ref()
    }

    /// Opens the keyring with the root key the transit seal decrypted;
    /// the shares given so far are dropped either way.
    pub fn open_with_root(&mut self, root: RootKey) -> Result<Box<UnsealedKeyring>, SealError> {
        self.given.clear();
        let (header, contents) = sealed::open(&self.sealed, &root).map_err(|err| match err {
            SealError::SharesDoNotOpen => SealError::RootDoesNotOpen,
            other => other,
        })?;
        Ok(Box::new(UnsealedKeyring::from_contents(
            root, header, contents,
        )))
    }

    /// Waits for shares of a newer generation (another writer stored
    /// it): the shares given so far are kept, since every generation is
    /// sealed under the same root key. `false` when `sealed` is not
    /// newer; an error (nothing changed) when its header is malformed.
    pub fn replace_sealed(&mut self, sealed: Vec<u8>) -> Result<bool, SealError> {
        let header = sealed::read_header(&sealed)?;
        if header.generation <= self.header.generation {
            return Ok(false);
        }
        self.header = header;
        self.sealed = sealed;
        Ok(true)
    }

    /// Drops the shares given so far (`sys/unseal` with `reset`).
    pub fn reset(&mut self) {
        self.given.clear();
    }

    /// Takes one share. A share whose index was given already counts
    /// once (OpenBao ignores a repeated key too). At the threshold the
    /// shares are combined: if they do not open the keyring the error is
    /// [`SealError::SharesDoNotOpen`] and progress starts over.
    pub fn submit(&mut self, share: Share) -> Result<UnsealStep, SealError> {
        if !self.given.iter().any(|s| s.index() == share.index()) {
            self.given.push(share);
        }
        let threshold = usize::from(self.header.config.threshold);
        if self.given.len() < threshold {
            return Ok(UnsealStep::Progress(self.status()));
        }
        let given = core::mem::take(&mut self.given);
        let secret: Zeroizing<[u8; 32]> = shamir::combine(&given, threshold)?;
        let root = RootKey::from_zeroizing(secret);
        let (header, contents) = sealed::open(&self.sealed, &root)?;
        Ok(UnsealStep::Unsealed(Box::new(
            UnsealedKeyring::from_contents(root, header, contents),
        )))
    }
}

/// An open keyring with the root key that seals its next generation.
/// Change the keys, policies or tokens, then
/// [`UnsealedKeyring::seal_next`], store, [`UnsealedKeyring::committed`].
#[derive(Debug)]
pub struct UnsealedKeyring {
    root: RootKey,
    header: SealedHeader,
    /// The keys.
    pub keyring: Keyring,
    /// ACL policies.
    pub policies: PolicyStore,
    /// Tokens (hashes).
    pub tokens: TokenStore,
    /// The audit log's HMAC key (none in a keyring sealed before audit
    /// logging, until [`UnsealedKeyring::ensure_audit_salt`]).
    audit_salt: Option<SecretKey>,
}

impl UnsealedKeyring {
    fn from_contents(root: RootKey, header: SealedHeader, contents: Contents) -> Self {
        UnsealedKeyring {
            root,
            header,
            keyring: contents.keyring,
            policies: contents.policies,
            tokens: contents.tokens,
            audit_salt: contents.audit_salt,
        }
    }

    /// A new keyring after `sys/init`: generation 0 (nothing stored yet),
    /// the Shamir seal.
    pub fn initialized(root: RootKey, config: sealed::SealConfig) -> Self {
        UnsealedKeyring::initialized_with(root, config, None)
    }

    /// A new keyring after `sys/init` with the transit seal when
    /// `wrapped_root` is given (`config`: the recovery shares').
    pub fn initialized_with(
        root: RootKey,
        config: sealed::SealConfig,
        wrapped_root: Option<WrappedRoot>,
    ) -> Self {
        UnsealedKeyring {
            root,
            header: SealedHeader {
                config,
                generation: 0,
                wrapped_root,
            },
            keyring: Keyring::new(),
            policies: PolicyStore::default(),
            tokens: TokenStore::default(),
            audit_salt: None,
        }
    }

    /// The audit log's HMAC key, if this keyring has one yet.
    pub fn audit_salt(&self) -> Option<&SecretKey> {
        self.audit_salt.as_ref()
    }

    /// Makes the audit log's HMAC key if there is none yet (a new keyring,
    /// or one sealed before audit logging): `true` when one was made, to
    /// be stored with the next generation (or dropped with
    /// [`UnsealedKeyring::forget_unstored_audit_salt`] if that fails).
    pub fn ensure_audit_salt(&mut self, entropy: &mut dyn Entropy) -> Result<bool, KeyringError> {
        if self.audit_salt.is_some() {
            return Ok(false);
        }
        self.audit_salt = Some(SecretKey::generate(entropy)?);
        Ok(true)
    }

    /// Drops an audit key made by [`UnsealedKeyring::ensure_audit_salt`]
    /// whose generation could not be stored: no line is ever hashed with a
    /// key the store does not keep.
    pub fn forget_unstored_audit_salt(&mut self) {
        self.audit_salt = None;
    }

    /// Opens `sealed` with a root key already known (auto-unseal, dev).
    pub fn open_with(sealed: &[u8], root: RootKey) -> Result<Self, SealError> {
        let (header, contents) = sealed::open(sealed, &root)?;
        Ok(UnsealedKeyring::from_contents(root, header, contents))
    }

    /// The generation last stored (0: none yet).
    pub fn generation(&self) -> u64 {
        self.header.generation
    }

    /// The status to report once unsealed.
    pub fn status(&self) -> SealStatus {
        SealStatus {
            sealed: false,
            threshold: self.header.config.threshold,
            shares: self.header.config.shares,
            progress: 0,
            generation: self.header.generation,
            seal_type: self.header.seal_type(),
        }
    }

    /// Seals the keyring as the next generation: `(generation, bytes)`
    /// to store with [`crate::store::KeyringStore::put`]; call
    /// [`UnsealedKeyring::committed`] once it is stored.
    pub fn seal_next(&self, entropy: &mut dyn Entropy) -> Result<(u64, Vec<u8>), SealError> {
        let header = SealedHeader {
            config: self.header.config,
            generation: self.header.generation + 1,
            wrapped_root: self.header.wrapped_root.clone(),
        };
        Ok((
            header.generation,
            sealed::seal(
                ContentsRef {
                    keyring: &self.keyring,
                    policies: &self.policies,
                    tokens: &self.tokens,
                    audit_salt: self.audit_salt.as_ref(),
                },
                &self.root,
                header,
                entropy,
            )?,
        ))
    }

    /// Takes a newer generation another writer stored (a board of the
    /// same fleet, through a shared store): opened with this keyring's
    /// root key, it replaces the keys, policies and tokens held. Returns
    /// `false` (nothing changed) when `sealed` is not newer than the
    /// generation held; an error (nothing changed) when the root key does
    /// not open it or its contents are invalid.
    pub fn reload(&mut self, sealed: &[u8]) -> Result<bool, SealError> {
        let header = sealed::read_header(sealed)?;
        if header.generation <= self.header.generation {
            return Ok(false);
        }
        let (header, contents) = sealed::open(sealed, &self.root)?;
        self.header = header;
        self.keyring = contents.keyring;
        self.policies = contents.policies;
        self.tokens = contents.tokens;
        // A writer that predates audit logging keeps no salt: ours stays.
        if contents.audit_salt.is_some() {
            self.audit_salt = contents.audit_salt;
        }
        Ok(true)
    }

    /// Seals the keyring as it is, at the generation held (not a new
    /// one): what a board seals with when its store cannot be read (the
    /// contents are those of the stored generation, under a fresh nonce).
    pub fn seal_current(&self, entropy: &mut dyn Entropy) -> Result<Vec<u8>, SealError> {
        sealed::seal(
            ContentsRef {
                keyring: &self.keyring,
                policies: &self.policies,
                tokens: &self.tokens,
                audit_salt: self.audit_salt.as_ref(),
            },
            &self.root,
            self.header.clone(),
            entropy,
        )
    }

    /// Records that `generation` is stored.
    pub fn committed(&mut self, generation: u64) {
        self.header.generation = generation;
    }

    /// Back to sealed: the keys and root key are dropped (wiped).
    pub fn seal(self, sealed: Vec<u8>) -> Result<Unsealer, SealError> {
        Unsealer::new(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::UnsealedKeyring;
    use crate::OsEntropy;
    use crate::sealed::{self, RootKey, SealConfig};

    #[test]
    fn a_keyring_sealed_without_an_audit_salt_opens_and_keeps_one_once_made() {
        let root = RootKey::from_bytes([3; 32]);
        let config = SealConfig {
            threshold: 1,
            shares: 1,
        };
        // Sealed with no salt: the contents an older aesd wrote.
        let (_, old) = UnsealedKeyring::initialized(root.clone(), config)
            .seal_next(&mut OsEntropy)
            .expect("seal");
        let (_, contents) = sealed::open(&old, &root).expect("open");
        assert!(contents.audit_salt.is_none());
        let mut open = UnsealedKeyring::open_with(&old, root.clone()).expect("open");
        assert!(open.audit_salt().is_none());
        assert!(open.ensure_audit_salt(&mut OsEntropy).expect("salt"));
        assert!(!open.ensure_audit_salt(&mut OsEntropy).expect("salt"));
        let salt = open.audit_salt().expect("made").clone();
        let (_, new) = open.seal_next(&mut OsEntropy).expect("seal");
        let again = UnsealedKeyring::open_with(&new, root).expect("open");
        assert_eq!(again.audit_salt(), Some(&salt));
    }
}
