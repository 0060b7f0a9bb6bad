//! The keyring as the server holds it: not initialised, sealed (shares
//! being given) or unsealed, over a [`KeyringStore`]. Every change is
//! sealed as the next generation and stored before it is answered; a
//! change the store refuses is undone in memory. Shared by the HTTP API
//! (`http`) and, later, the binary port's by-name key source.
//!
//! ```text
//!  start:  store.load_newest()  none ─► Uninitialized   some ─► Sealed
//!  init:   Uninitialized ─ shares + root token, stored ─► Sealed
//!          (transit seal: recovery shares, root key wrapped ─► Unsealed)
//!  unseal: Sealed ─ k good shares ─► Unsealed     seal: Unsealed ─► Sealed
//!          (transit seal: Sealed ─ the other server decrypts ─► Unsealed,
//!          tried by transit_seal::retry until it works; k recovery
//!          shares unseal too)
//! ```
//!
//! Locking: one mutex; every operation is short (a keyring under 1.5 MB
//! sealed) and runs on a blocking thread, never on the async reactor.

use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use aesd_keyring::OsEntropy;
use aesd_keyring::sealed::{self, SealConfig, SealError, SealType};
use aesd_keyring::shamir::{ShamirError, Share};
use aesd_keyring::store::{KeyringStore, MemoryStore, StoreError};
use aesd_keyring::token::ROOT_POLICY;
use aesd_keyring::unseal::{SealStatus, UnsealStep, UnsealedKeyring, Unsealer};
use zeroize::Zeroizing;

/// Why a keyring operation could not run (beside the keyring's own
/// refusals, which the callers map).
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Sealed or not initialised: keys and tokens are out of reach.
    #[error("Vault is sealed")]
    Sealed,
    /// `sys/init` on a keyring that has one already.
    #[error("Vault is already initialized")]
    AlreadyInitialized,
    /// `sys/unseal` before `sys/init`.
    #[error("Vault is not initialized")]
    NotInitialized,
    /// A share that is not a share (bad hex/base64, wrong length).
    #[error("invalid key: {0}")]
    BadShare(ShamirError),
    /// Sealing, opening or splitting failed (a wrong share at the
    /// threshold is [`SealError::SharesDoNotOpen`]).
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The store could not write or read; the keyring is unchanged.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transit seal's server could not encrypt or decrypt the root
    /// key.
    #[error(transparent)]
    Transit(#[from] crate::transit_seal::TransitSealError),
}

impl StateError {
    /// A short name of the failure for `sys/seal-status`.
    fn kind(&self) -> &'static str {
        match self {
            StateError::Transit(err) => err.kind(),
            StateError::Seal(SealError::RootDoesNotOpen) => "root_does_not_open",
            StateError::Seal(_) => "seal",
            StateError::Store(_) => "store",
            _ => "state",
        }
    }
}

/// Why the last auto-unseal attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoUnsealFailure {
    /// A short name: `unreachable`, `no_answer`, `server_sealed`,
    /// `permission_denied`, `refused`, `bad_reply`, `root_does_not_open`,
    /// `seal`, `store`.
    pub kind: &'static str,
    /// The whole reason.
    pub message: String,
}

/// What one auto-unseal attempt did.
#[derive(Debug)]
pub enum AutoUnseal {
    /// Not sealed under the transit seal, or sealed by an operator.
    NothingToDo,
    /// Unsealed now.
    Unsealed {
        /// The generation opened.
        generation: u64,
    },
    /// Still sealed.
    Failed {
        /// Attempts failed in a row.
        attempts: u64,
        /// Why this one failed.
        error: AutoUnsealFailure,
    },
}

/// The auto-unseal loop's record.
#[derive(Debug, Default)]
struct AutoUnsealRecord {
    /// `sys/seal` sealed the keyring: no automatic unseal until a
    /// restart (or recovery shares), as OpenBao does.
    operator_sealed: bool,
    /// Failures in a row.
    attempts: u64,
    /// The last one's reason, until an attempt works.
    last: Option<AutoUnsealFailure>,
}

/// Where the keyring stands.
enum State {
    /// The store holds nothing: `sys/init` first.
    Uninitialized,
    /// Waiting for shares.
    Sealed(Unsealer),
    /// Open.
    Unsealed(Box<UnsealedKeyring>),
}

/// What `sys/init` returns, once.
pub struct Initialized {
    /// The shares (shown once; never stored): recovery shares with the
    /// transit seal.
    pub shares: Vec<Share>,
    /// Shamir, or transit (then already unsealed).
    pub seal_type: SealType,
    /// The root token (shown once; stored as its hash).
    pub root_token: Zeroizing<String>,
}

/// What `--dev` prints: the single share and the root token.
pub struct DevKeyring {
    /// The state, unsealed.
    pub state: KeyringState,
    /// The share that unseals it after a `sys/seal`.
    pub share: Share,
    /// The root token.
    pub root_token: Zeroizing<String>,
}

/// The server's keyring and its store.
pub struct KeyringState {
    state: Mutex<State>,
    store: Box<dyn KeyringStore + Send + Sync>,
    /// `memory` (dev) or `file` (`--keyring`): `seal-status`'s
    /// `storage_type`.
    storage_type: &'static str,
    /// `--seal-transit-*`: the root key from another server's Transit key.
    transit: Option<crate::transit_seal::TransitSeal>,
    auto_unseal: Mutex<AutoUnsealRecord>,
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl KeyringState {
    /// The keyring in `store`: sealed if it holds one, else waiting for
    /// `sys/init`. Generations passed over (torn, corrupt) are logged.
    pub fn open(
        store: Box<dyn KeyringStore + Send + Sync>,
        storage_type: &'static str,
    ) -> Result<Self, StateError> {
        let state = match store.load_newest()? {
            None => State::Uninitialized,
            Some(stored) => {
                for skipped in &stored.skipped {
                    tracing::warn!(
                        generation = skipped.generation,
                        "keyring generation {} passed over: {}",
                        skipped.generation,
                        skipped.reason
                    );
                }
                State::Sealed(Unsealer::new(stored.sealed)?)
            }
        };
        Ok(KeyringState {
            state: Mutex::new(state),
            store,
            storage_type,
            transit: None,
            auto_unseal: Mutex::new(AutoUnsealRecord::default()),
        })
    }

    /// Uses the transit seal: `sys/init` wraps the root key with it and
    /// [`KeyringState::try_auto_unseal`] unwraps it.
    pub fn with_transit_seal(mut self, seal: crate::transit_seal::TransitSeal) -> Self {
        self.transit = Some(seal);
        self
    }

    /// The seal a new keyring gets (`seal-status` before `sys/init`).
    pub fn configured_seal_type(&self) -> SealType {
        if self.transit.is_some() {
            SealType::Transit
        } else {
            SealType::Shamir
        }
    }

    fn auto_record(&self) -> MutexGuard<'_, AutoUnsealRecord> {
        self.auto_unseal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Why the last auto-unseal attempt failed, while sealed.
    pub fn auto_unseal_failure(&self) -> Option<AutoUnsealFailure> {
        self.auto_record().last.clone()
    }

    /// One auto-unseal attempt: when sealed under the transit seal (and
    /// not by `sys/seal`), asks the other server to decrypt the root key
    /// and opens the keyring with it. The network call runs without the
    /// state's lock.
    pub fn try_auto_unseal(&self) -> AutoUnseal {
        let Some(seal) = &self.transit else {
            return AutoUnseal::NothingToDo;
        };
        if self.auto_record().operator_sealed {
            return AutoUnseal::NothingToDo;
        }
        let wrapped = match &*self.lock() {
            State::Sealed(unsealer) => match unsealer.wrapped_root() {
                Some(wrapped) => wrapped.clone(),
                None => return AutoUnseal::NothingToDo,
            },
            _ => return AutoUnseal::NothingToDo,
        };
        let opened = seal
            .decrypt_root(&wrapped)
            .map_err(StateError::from)
            .and_then(|root| {
                let mut state = self.lock();
                let State::Sealed(unsealer) = &mut *state else {
                    return Ok(None);
                };
                let mut open = unsealer.open_with_root(root)?;
                let generation = open.generation();
                self.store_missing_audit_salt(&mut open);
                *state = State::Unsealed(open);
                Ok(Some(generation))
            });
        let mut record = self.auto_record();
        match opened {
            Ok(Some(generation)) => {
                record.attempts = 0;
                record.last = None;
                AutoUnseal::Unsealed { generation }
            }
            Ok(None) => AutoUnseal::NothingToDo,
            Err(err) => {
                record.attempts += 1;
                let error = AutoUnsealFailure {
                    kind: err.kind(),
                    message: err.to_string(),
                };
                record.last = Some(error.clone());
                AutoUnseal::Failed {
                    attempts: record.attempts,
                    error,
                }
            }
        }
    }

    /// A keyring sealed before audit logging gets its salt stored now (a
    /// failure leaves it for the next write).
    fn store_missing_audit_salt(&self, open: &mut UnsealedKeyring) {
        if open.audit_salt().is_none()
            && let Err(err) = self.persist(open)
        {
            tracing::warn!("the audit log's salt is not stored yet: {err}");
        }
    }

    /// `--dev`: in memory, one share of one, unsealed, with a root token
    /// (`root_token_id`, or a random one).
    pub fn dev(root_token_id: Option<&str>) -> Result<DevKeyring, StateError> {
        let state = KeyringState::open(Box::new(MemoryStore::default()), "inmem")?;
        let initialized = state.init_with(
            SealConfig {
                threshold: 1,
                shares: 1,
            },
            root_token_id,
        )?;
        let share = initialized
            .shares
            .into_iter()
            .next()
            .ok_or(StateError::Seal(SealError::Malformed("no share made")))?;
        state.submit_share(&share.to_base64())?;
        Ok(DevKeyring {
            state,
            share,
            root_token: initialized.root_token,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state as it was
        // before the change (changes are applied, then stored).
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `seal-status`'s `storage_type`.
    pub fn storage_type(&self) -> &'static str {
        self.storage_type
    }

    /// Whether initialised, and the seal status (`None` before init).
    pub fn status(&self) -> Option<SealStatus> {
        match &*self.lock() {
            State::Uninitialized => None,
            State::Sealed(unsealer) => Some(unsealer.status()),
            State::Unsealed(open) => Some(open.status()),
        }
    }

    /// `sys/init`: a new root key split `threshold` of `shares`, an empty
    /// keyring with a root token, stored as generation 1; the keyring
    /// stays sealed, as OpenBao's does. With the transit seal the shares
    /// are recovery shares, the root key is wrapped by the other server
    /// first, and the keyring is unsealed at once.
    pub fn init(&self, config: SealConfig) -> Result<Initialized, StateError> {
        self.init_with(config, None)
    }

    fn init_with(
        &self,
        config: SealConfig,
        root_token_id: Option<&str>,
    ) -> Result<Initialized, StateError> {
        if !matches!(*self.lock(), State::Uninitialized) {
            return Err(StateError::AlreadyInitialized);
        }
        let (root, shares) = sealed::initialize(config, &mut OsEntropy)?;
        // The other server is asked before the lock is taken (it may take
        // seconds); the state is checked again after.
        let wrapped_root = match &self.transit {
            Some(seal) => Some(seal.encrypt_root(&root)?),
            None => None,
        };
        let seal_type = if wrapped_root.is_some() {
            SealType::Transit
        } else {
            SealType::Shamir
        };
        let mut state = self.lock();
        if !matches!(*state, State::Uninitialized) {
            return Err(StateError::AlreadyInitialized);
        }
        let mut open = UnsealedKeyring::initialized_with(root, config, wrapped_root);
        let (root_token, _) = open
            .tokens
            .create(
                root_token_id,
                vec![ROOT_POLICY.into()],
                0,
                now(),
                "root",
                &mut OsEntropy,
            )
            .map_err(|err| SealError::InvalidContents(err.to_string()))?;
        open.ensure_audit_salt(&mut OsEntropy)
            .map_err(SealError::from)?;
        let (generation, bytes) = open.seal_next(&mut OsEntropy)?;
        if let Err(err) = self.store.put(generation, &bytes) {
            if let StoreError::Conflict { .. } = err {
                // Another board of the fleet initialised first: take its
                // keyring (sealed), as the 409 says.
                if let Ok(Some(stored)) = self.store.load_newest() {
                    Self::take_newer(&mut state, stored.sealed)?;
                }
            }
            return Err(err.into());
        }
        if seal_type == SealType::Transit {
            open.committed(generation);
            *state = State::Unsealed(Box::new(open));
            tracing::info!("keyring initialized with the transit seal and unsealed");
        } else {
            *state = State::Sealed(Unsealer::new(bytes)?);
        }
        Ok(Initialized {
            shares,
            seal_type,
            root_token,
        })
    }

    /// `sys/unseal` with `key`: the status after it.
    pub fn submit_share(&self, key: &str) -> Result<SealStatus, StateError> {
        let share = Share::parse(key).map_err(StateError::BadShare)?;
        let mut state = self.lock();
        match &mut *state {
            State::Uninitialized => Err(StateError::NotInitialized),
            State::Unsealed(open) => Ok(open.status()),
            State::Sealed(unsealer) => match unsealer.submit(share)? {
                UnsealStep::Progress(status) => Ok(status),
                UnsealStep::Unsealed(mut open) => {
                    let status = open.status();
                    self.store_missing_audit_salt(&mut open);
                    *state = State::Unsealed(open);
                    self.auto_record().operator_sealed = false;
                    tracing::info!(generation = status.generation, "keyring unsealed");
                    Ok(status)
                }
            },
        }
    }

    /// `sys/unseal` with `reset`: the shares given so far are dropped.
    pub fn reset_unseal(&self) -> Result<SealStatus, StateError> {
        match &mut *self.lock() {
            State::Uninitialized => Err(StateError::NotInitialized),
            State::Unsealed(open) => Ok(open.status()),
            State::Sealed(unsealer) => {
                unsealer.reset();
                Ok(unsealer.status())
            }
        }
    }

    /// `sys/seal`: the keys and root key are dropped (wiped); the newest
    /// stored generation waits for shares again.
    pub fn seal(&self) -> Result<(), StateError> {
        let mut state = self.lock();
        if !matches!(*state, State::Unsealed(_)) {
            return Ok(());
        }
        let sealed_bytes = match self.store.load_newest() {
            Ok(Some(stored)) => stored.sealed,
            Ok(None) => return Err(StateError::Seal(SealError::Malformed("store emptied"))),
            // A store out of reach (etcd down) must not keep the keyring
            // open: it is sealed as held, and the watch brings the newest.
            Err(err) => {
                let State::Unsealed(open) = &*state else {
                    return Ok(());
                };
                tracing::warn!("sealing the keyring as held: the store cannot be read: {err}");
                open.seal_current(&mut OsEntropy)?
            }
        };
        *state = State::Sealed(Unsealer::new(sealed_bytes)?);
        if self.transit.is_some() {
            self.auto_record().operator_sealed = true;
            tracing::info!(
                "keyring sealed; the transit seal unseals it again at the next start (or give the recovery shares)"
            );
        } else {
            tracing::info!("keyring sealed");
        }
        Ok(())
    }

    /// Runs `read` on the open keyring (no change stored).
    pub fn read<R, E: From<StateError>>(
        &self,
        read: impl FnOnce(&UnsealedKeyring) -> Result<R, E>,
    ) -> Result<R, E> {
        match &*self.lock() {
            State::Unsealed(open) => read(open),
            _ => Err(StateError::Sealed.into()),
        }
    }

    /// The audit log's salt, while unsealed (a copy, wiped when dropped).
    pub fn audit_salt(&self) -> Option<aesd_keyring::SecretKey> {
        self.read(|open| Ok::<_, StateError>(open.audit_salt().cloned()))
            .ok()
            .flatten()
    }

    /// Runs `change` on the open keyring, then seals and stores the next
    /// generation. When `change` fails, or the store refuses, the keys,
    /// policies and tokens are put back as they were: what is answered is
    /// what is stored.
    pub fn change<R, E: From<StateError>>(
        &self,
        change: impl FnOnce(&mut UnsealedKeyring) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut state = self.lock();
        let State::Unsealed(open) = &mut *state else {
            return Err(StateError::Sealed.into());
        };
        let before = (
            open.keyring.clone(),
            open.policies.clone(),
            open.tokens.clone(),
        );
        let restore = |open: &mut UnsealedKeyring| {
            (open.keyring, open.policies, open.tokens) = before;
        };
        let result = match change(open) {
            Ok(result) => result,
            Err(err) => {
                restore(open);
                return Err(err);
            }
        };
        match self.persist(open) {
            Ok(()) => Ok(result),
            Err(err) => {
                let conflict = matches!(err, StateError::Store(StoreError::Conflict { .. }));
                if conflict {
                    tracing::warn!("keyring change refused, another writer stored first: {err}");
                } else {
                    tracing::error!("keyring change not stored, undone: {err}");
                }
                restore(open);
                if conflict {
                    // Another writer stored first: take its generation,
                    // so that the caller's retry works on it.
                    if let Err(reload) = self
                        .store
                        .load_newest()
                        .map_err(StateError::from)
                        .and_then(|newest| match newest {
                            Some(stored) => Self::take_newer(&mut state, stored.sealed),
                            None => Ok(None),
                        })
                    {
                        tracing::error!("after a conflict, the newest generation: {reload}");
                    }
                }
                Err(err.into())
            }
        }
    }

    /// Loads the store's newest generation and takes it if it is newer
    /// than the one held (another board of the fleet stored it): not
    /// initialised → sealed; sealed → waits for shares of the newer one
    /// (the shares given so far count); unsealed → opened with the root
    /// key held. `Some(generation)` when one was taken. A store that
    /// cannot be read is an error; the held keyring stays.
    pub fn refresh(&self) -> Result<Option<u64>, StateError> {
        let Some(stored) = self.store.load_newest()? else {
            return Ok(None);
        };
        let mut state = self.lock();
        Self::take_newer(&mut state, stored.sealed)
    }

    fn take_newer(state: &mut State, sealed_bytes: Vec<u8>) -> Result<Option<u64>, StateError> {
        let generation = sealed::read_header(&sealed_bytes)?.generation;
        let taken = match state {
            State::Uninitialized => {
                *state = State::Sealed(Unsealer::new(sealed_bytes)?);
                true
            }
            State::Sealed(unsealer) => unsealer.replace_sealed(sealed_bytes)?,
            State::Unsealed(open) => open.reload(&sealed_bytes)?,
        };
        if taken {
            tracing::info!(
                generation,
                "keyring generation {generation} loaded from the store"
            );
        }
        Ok(taken.then_some(generation))
    }

    /// Catches up before a decryption that names `version` of key `name`:
    /// when the keyring held lacks it (the key, or that version: another
    /// board of the fleet made it after the generation held) and
    /// `allowed()` (the caller may decrypt with the key: nobody else can
    /// make the board read its store), loads the store's newest
    /// generation. Blocking: one read of the store, only when behind. A
    /// store that cannot be read leaves the keyring held (the decryption
    /// then says the version is too new).
    pub fn catch_up_to(&self, name: &str, version: u32, allowed: impl FnOnce() -> bool) {
        let behind = self
            .read(|open| {
                Ok::<_, StateError>(
                    open.keyring
                        .latest_version(name)
                        .is_none_or(|latest| version > latest),
                )
            })
            .unwrap_or(false);
        if behind
            && allowed()
            && let Err(err) = self.refresh()
        {
            tracing::debug!(key = name, "no newer keyring from the store: {err}");
        }
    }

    /// The generation held (0 before `sys/init`).
    pub fn generation(&self) -> u64 {
        self.status().map_or(0, |status| status.generation)
    }

    /// Seals and stores the next generation; a keyring without the audit
    /// log's salt gets one in it (dropped again if the store refuses).
    fn persist(&self, open: &mut UnsealedKeyring) -> Result<(), StateError> {
        let made_salt = open
            .ensure_audit_salt(&mut OsEntropy)
            .map_err(SealError::from)?;
        let stored = open
            .seal_next(&mut OsEntropy)
            .map_err(StateError::from)
            .and_then(|(generation, bytes)| {
                self.store.put(generation, &bytes)?;
                Ok(generation)
            });
        match stored {
            Ok(generation) => {
                open.committed(generation);
                Ok(())
            }
            Err(err) => {
                if made_salt {
                    open.forget_unstored_audit_salt();
                }
                Err(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_seals_and_k_shares_unseal_while_a_wrong_one_is_refused() {
        let state =
            KeyringState::open(Box::new(MemoryStore::default()), "inmem").expect("open empty");
        assert!(state.status().is_none());
        let made = state
            .init(SealConfig {
                threshold: 2,
                shares: 3,
            })
            .expect("init");
        assert!(state.status().expect("status").sealed);
        let status = state
            .submit_share(&made.shares[0].to_hex())
            .expect("share 1");
        assert_eq!((status.sealed, status.progress), (true, 1));
        // Share 2 with one byte changed: refused, progress starts over.
        let mut wrong = made.shares[1].to_bytes();
        wrong[0] ^= 1;
        let wrong = Share::from_bytes(&wrong[..]).expect("share");
        let err = state.submit_share(&wrong.to_base64()).expect_err("wrong");
        assert!(
            matches!(err, StateError::Seal(SealError::SharesDoNotOpen)),
            "{err}"
        );
        assert_eq!(state.status().expect("status").progress, 0);
        state.submit_share(&made.shares[2].to_base64()).expect("a");
        let status = state.submit_share(&made.shares[0].to_hex()).expect("b");
        assert!(!status.sealed);
        let token = state
            .read(|open| {
                open.tokens
                    .lookup(&made.root_token, now())
                    .map(|e| e.is_root())
                    .map_err(|_| StateError::Sealed)
            })
            .expect("root token");
        assert!(token);
    }

    #[test]
    fn a_failed_change_is_undone() {
        let dev = KeyringState::dev(Some("root")).expect("dev");
        let err = dev
            .state
            .change(|open| {
                open.keyring
                    .create("k1", aesd_keyring::KeyType::Aes256Gcm96, 1, &mut OsEntropy)
                    .map_err(|_| StateError::Sealed)?;
                Err::<(), _>(StateError::Sealed)
            })
            .expect_err("refused");
        assert!(matches!(err, StateError::Sealed));
        let keys = dev
            .state
            .read(|open| Ok::<_, StateError>(open.keyring.len()))
            .expect("read");
        assert_eq!(keys, 0, "the change that failed was kept");
    }

    #[test]
    fn a_keyring_sealed_without_an_audit_salt_gets_one_stored_at_unseal() {
        let store = std::sync::Arc::new(MemoryStore::default());
        let config = SealConfig {
            threshold: 1,
            shares: 1,
        };
        // Generation 1 as an aesd without audit logging sealed it.
        let (root, shares) = sealed::initialize(config, &mut OsEntropy).expect("init");
        let (generation, old) = UnsealedKeyring::initialized(root.clone(), config)
            .seal_next(&mut OsEntropy)
            .expect("seal");
        store.put(generation, &old).expect("put");
        let state = board(&store);
        assert!(
            !state
                .submit_share(&shares[0].to_base64())
                .expect("unseal")
                .sealed
        );
        let salt = state
            .read(|open| Ok::<_, StateError>(open.audit_salt().cloned()))
            .expect("read")
            .expect("a salt once unsealed");
        let newest = store.load_newest().expect("load").expect("stored");
        let stored = UnsealedKeyring::open_with(&newest.sealed, root).expect("open");
        assert_eq!(stored.generation(), 2);
        assert_eq!(stored.audit_salt(), Some(&salt), "the salt is stored");
    }

    /// One store shared by two "boards" (as etcd is by a fleet).
    struct Shared(std::sync::Arc<MemoryStore>);

    impl KeyringStore for Shared {
        fn load_newest(&self) -> Result<Option<aesd_keyring::store::Stored>, StoreError> {
            self.0.load_newest()
        }

        fn put(&self, generation: u64, sealed: &[u8]) -> Result<(), StoreError> {
            self.0.put(generation, sealed)
        }
    }

    fn board(store: &std::sync::Arc<MemoryStore>) -> KeyringState {
        KeyringState::open(Box::new(Shared(std::sync::Arc::clone(store))), "etcd").expect("open")
    }

    /// A board that has not loaded a rotation made on another decrypts a
    /// by-name file of the new version all the same (the binary port's
    /// unwrap catches up), and loads it only for an allowed caller; on the
    /// usual path (not behind) nobody is asked.
    #[test]
    fn a_board_behind_catches_up_before_a_decryption_only_when_allowed() {
        use crate::named_keys::KeyringKeys;
        use aesd_core::named_key::NamedKeys;

        let store = std::sync::Arc::new(MemoryStore::default());
        let (a, b) = (board(&store), board(&store));
        let made = a
            .init(SealConfig {
                threshold: 1,
                shares: 1,
            })
            .expect("init on A");
        b.refresh().expect("B sees the init");
        for state in [&a, &b] {
            state
                .submit_share(&made.shares[0].to_hex())
                .expect("unseal");
        }
        a.change(|open| {
            open.keyring
                .create("k1", aesd_keyring::KeyType::Aes256Gcm96, 1, &mut OsEntropy)
                .map_err(|_| StateError::Sealed)
        })
        .expect("create on A");
        b.refresh().expect("B loads k1");
        a.change(|open| {
            open.keyring
                .rotate("k1", 2, &mut OsEntropy)
                .map(drop)
                .map_err(|_| StateError::Sealed)
        })
        .expect("rotate on A");
        let latest = |state: &KeyringState| {
            state
                .read(|open| Ok::<_, StateError>(open.keyring.latest_version("k1")))
                .expect("read")
        };
        assert_eq!(latest(&b), Some(1), "B has not loaded the rotation");

        b.catch_up_to("k1", 1, || panic!("asked although not behind"));
        b.catch_up_to("k1", 2, || false);
        assert_eq!(latest(&b), Some(1), "a caller not allowed made B load");

        // By name on the binary port: A wraps with version 2, B unwraps.
        let on_a = KeyringKeys::default();
        on_a.attach(std::sync::Arc::new(a));
        let on_b = KeyringKeys::default();
        on_b.attach(std::sync::Arc::new(b));
        let file_key = [7u8; 16];
        let (version, sealed) = on_a.wrap("k1", &file_key, b"aad").expect("wrap on A");
        assert_eq!(version, 2);
        let unwrapped = on_b
            .unwrap("k1", version, &sealed, b"aad")
            .expect("B catches up and unwraps");
        assert_eq!(*unwrapped, file_key);
    }

    #[test]
    fn a_second_init_on_a_shared_store_is_a_conflict_and_takes_the_first() {
        let store = std::sync::Arc::new(MemoryStore::default());
        let (a, b) = (board(&store), board(&store));
        let config = SealConfig {
            threshold: 1,
            shares: 1,
        };
        let made = a.init(config).expect("init on A");
        let err = b.init(config).map(drop).expect_err("B was not told");
        assert!(
            matches!(err, StateError::Store(StoreError::Conflict { .. })),
            "{err}"
        );
        let status = b.status().expect("B took A's keyring");
        assert!(status.sealed);
        assert_eq!(status.generation, 1);
        let status = b
            .submit_share(&made.shares[0].to_base64())
            .expect("A's share opens B");
        assert!(!status.sealed);
    }

    #[test]
    fn two_boards_on_one_store_share_keys_and_a_stale_writer_gets_a_conflict_then_catches_up() {
        let store = std::sync::Arc::new(MemoryStore::default());
        let (a, b) = (board(&store), board(&store));
        let made = a
            .init(SealConfig {
                threshold: 2,
                shares: 3,
            })
            .expect("init on A");
        // B started before the init: it takes it as sealed, then the same
        // shares unseal both.
        assert!(b.status().is_none());
        assert_eq!(b.refresh().expect("refresh"), Some(1));
        for state in [&a, &b] {
            state.submit_share(&made.shares[0].to_hex()).expect("1");
            let status = state.submit_share(&made.shares[2].to_hex()).expect("2");
            assert!(!status.sealed);
        }
        a.change(|open| {
            open.keyring
                .create("k1", aesd_keyring::KeyType::Aes256Gcm96, 1, &mut OsEntropy)
                .map_err(|_| StateError::Sealed)
        })
        .expect("create on A");
        let ciphertext = a
            .read(|open| {
                open.keyring
                    .encrypt("k1", None, b"fleet", b"", &mut OsEntropy)
                    .map_err(|_| StateError::Sealed)
            })
            .expect("encrypt on A");
        // B has not loaded generation 2 yet: its change is refused as a
        // conflict, undone, and B loads what A stored.
        let err = b
            .change(|open| {
                open.keyring
                    .create("k2", aesd_keyring::KeyType::Aes256Gcm96, 2, &mut OsEntropy)
                    .map_err(|_| StateError::Sealed)
            })
            .expect_err("stale");
        assert!(
            matches!(
                err,
                StateError::Store(StoreError::Conflict {
                    generation: 2,
                    newest: 2
                })
            ),
            "{err}"
        );
        assert_eq!(
            b.generation(),
            2,
            "B loaded A's generation after the conflict"
        );
        let plain = b
            .read(|open| {
                open.keyring
                    .decrypt("k1", &ciphertext, b"")
                    .map_err(|_| StateError::Sealed)
            })
            .expect("decrypt on B");
        assert_eq!(&plain[..], b"fleet");
        // The retry on B works, and A takes it with a refresh.
        b.change(|open| {
            open.keyring
                .rotate("k1", 2, &mut OsEntropy)
                .map(drop)
                .map_err(|_| StateError::Sealed)
        })
        .expect("retry on B");
        assert_eq!(a.refresh().expect("refresh"), Some(3));
        assert_eq!(a.refresh().expect("again"), None, "nothing newer");
        let latest = a
            .read(|open| Ok::<_, StateError>(open.keyring.read("k1").map(|m| m.latest_version)))
            .expect("read")
            .expect("k1");
        assert_eq!(latest, 2);
    }
}
