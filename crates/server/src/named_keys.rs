//! The binary port's by-name key source (key source 5) on the server's
//! keyring: [`KeyringKeys`] implements core's
//! [`NamedKeys`](aesd_core::named_key::NamedKeys) with the keyring the
//! HTTP API serves, its tokens and its policies (the HTTP API's own check,
//! [`crate::http::check_token`]).
//!
//! The keyring is attached once it is open ([`KeyringKeys::attach`]: the
//! job port binds first); until then, and while it is sealed, by-name
//! jobs fail `sealed`.

use std::sync::{Arc, OnceLock};

use aesd_core::named_key::{NamedKeyError, NamedKeys};
use aesd_keyring::policy::Capability;
use aesd_keyring::{KeyringError, OsEntropy};
use aesd_proto::{ErrorCode, Operation};
use zeroize::Zeroizing;

use crate::audit_file::AuditFile;
use crate::http::{Denied, check_token};
use crate::job_audit::AuditedKeys;
use crate::keyring_state::{KeyringState, StateError};
use crate::metrics::Metrics;

/// The server's keyring, once attached, and the audit log its jobs are
/// recorded in, if any.
#[derive(Default)]
pub struct KeyringKeys {
    state: OnceLock<Arc<KeyringState>>,
    audit: OnceLock<Arc<AuditFile>>,
}

impl std::fmt::Debug for KeyringKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringKeys")
            .field("attached", &self.state.get().is_some())
            .finish()
    }
}

impl KeyringKeys {
    /// Makes `state` the keyring of by-name jobs (once; a second call is
    /// ignored).
    pub fn attach(&self, state: Arc<KeyringState>) {
        let _ = self.state.set(state);
    }

    /// Records by-name jobs in `file` (`--audit-log`; once).
    pub fn attach_audit(&self, file: Arc<AuditFile>) {
        let _ = self.audit.set(file);
    }

    /// The keyring for the connection of the client at `peer`, its jobs
    /// audited; `None` without an audit log or a keyring.
    pub fn audited(
        self: &Arc<Self>,
        metrics: &Arc<Metrics>,
        peer: std::net::SocketAddr,
    ) -> Option<AuditedKeys> {
        let (state, file) = (self.state.get()?, self.audit.get()?);
        Some(AuditedKeys::new(
            Arc::clone(self) as Arc<dyn NamedKeys>,
            Arc::clone(state),
            Arc::clone(file),
            Arc::clone(metrics),
            peer,
        ))
    }

    /// Whether a keyring is attached.
    pub fn is_attached(&self) -> bool {
        self.state.get().is_some()
    }

    fn state(&self) -> Result<&KeyringState, NamedKeyError> {
        self.state.get().map(Arc::as_ref).ok_or_else(|| {
            NamedKeyError::new(
                ErrorCode::Sealed,
                "this aesd has no keyring (start it with --keyring DIR and --http-listen, or --dev)",
            )
        })
    }
}

/// The Transit path whose `update` capability a by-name `operation` on
/// the key `name` needs (and that its audit lines name): OpenBao's path
/// for the same operation. An unwrap reveals what a decryption would, so
/// it needs the decryption's path; a data key needs OpenBao's path for a
/// plaintext data key, a wrapped-only one OpenBao's path for a wrapped
/// data key.
pub fn transit_path(operation: Operation, name: &str) -> String {
    match operation {
        Operation::Encrypt | Operation::Decrypt | Operation::Rewrap => {
            format!("transit/{}/{name}", operation.name())
        }
        Operation::DataKey => format!("transit/datakey/plaintext/{name}"),
        Operation::DataKeyWrapped => format!("transit/datakey/wrapped/{name}"),
        Operation::Unwrap => format!("transit/decrypt/{name}"),
    }
}

/// The error a sealed (or failing) keyring gives a by-name job.
fn state_error(err: StateError) -> NamedKeyError {
    match err {
        StateError::Sealed => NamedKeyError::new(
            ErrorCode::Sealed,
            "the keyring is sealed: unseal it (bao operator unseal) first",
        ),
        other => NamedKeyError::new(ErrorCode::Internal, other.to_string()),
    }
}

/// The code for each keyring refusal.
fn keyring_error(err: KeyringError) -> NamedKeyError {
    let code = match &err {
        KeyringError::UnknownKey { .. } => ErrorCode::UnknownKey,
        KeyringError::VersionBelowMinimum { .. } => ErrorCode::KeyVersionRetired,
        KeyringError::VersionNotCreated { .. } => ErrorCode::KeyVersionNotCreated,
        KeyringError::BadCiphertext(_) => ErrorCode::DecryptFailed,
        _ => ErrorCode::Internal,
    };
    NamedKeyError::new(code, err.to_string())
}

/// Either a sealed keyring or one of its refusals.
enum Refused {
    State(StateError),
    Named(NamedKeyError),
}

impl From<StateError> for Refused {
    fn from(err: StateError) -> Self {
        Refused::State(err)
    }
}

impl From<Refused> for NamedKeyError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::State(err) => state_error(err),
            Refused::Named(err) => err,
        }
    }
}

impl NamedKeys for KeyringKeys {
    fn authorize(
        &self,
        token: Option<&[u8]>,
        name: &str,
        operation: Operation,
    ) -> Result<(), NamedKeyError> {
        let state = self.state()?;
        let path = transit_path(operation, name);
        let token = token.map(|token| std::str::from_utf8(token).unwrap_or("\u{fffd}"));
        Ok(state.read(|open| {
            check_token(open, token, &path, &[Capability::Update])
                .map(drop)
                .map_err(|denied| {
                    Refused::Named(match denied {
                        Denied::NoToken => NamedKeyError::new(
                            ErrorCode::BadKeyToken,
                            "no keyring token: send a key_token frame first (aescrypt --token-file)",
                        ),
                        Denied::Token(err) => {
                            NamedKeyError::new(ErrorCode::BadKeyToken, err.to_string())
                        }
                        Denied::Policy => NamedKeyError::new(
                            ErrorCode::PermissionDenied,
                            format!("permission denied: the token's policies do not grant update on {path}"),
                        ),
                    })
                })
        })?)
    }

    fn wrap(
        &self,
        name: &str,
        file_key: &[u8; 16],
        aad: &[u8],
    ) -> Result<(u32, Vec<u8>), NamedKeyError> {
        Ok(self.state()?.read(|open| {
            open.keyring
                .encrypt_raw(name, None, file_key, aad, &mut OsEntropy)
                .map_err(|err| Refused::Named(keyring_error(err)))
        })?)
    }

    fn unwrap(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        aad: &[u8],
    ) -> Result<Zeroizing<[u8; 16]>, NamedKeyError> {
        let state = self.state()?;
        // The job's token was checked for the key when it began (core's
        // NamedAccess::authorize): a file made on another board of the
        // fleet with a version this one has not loaded yet decrypts here
        // too, as Transit's decrypt does.
        state.catch_up_to(name, version, || true);
        let plain = state.read(|open| {
            open.keyring
                .decrypt_raw(name, version, sealed, aad)
                .map_err(|err| Refused::Named(keyring_error(err)))
        })?;
        let mut key = Zeroizing::new([0u8; 16]);
        if plain.len() != key.len() {
            return Err(NamedKeyError::new(
                ErrorCode::DecryptFailed,
                "the stanza's sealed file key is not 16 bytes",
            ));
        }
        key.copy_from_slice(&plain);
        Ok(key)
    }
}
