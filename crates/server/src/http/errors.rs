//! Errors as OpenBao answers them: a status code and
//! `{"errors": ["..."]}`, with OpenBao's texts where clients match them
//! (`permission denied`, `Vault is sealed`).

use aesd_keyring::KeyringError;
use aesd_keyring::policy::PolicyStoreError;
use aesd_keyring::sealed::SealError;
use aesd_keyring::store::StoreError;
use aesd_keyring::token::TokenError;

use crate::keyring_state::StateError;
use crate::transit_seal::TransitSealError;

/// A refused request: its status and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The `errors` array (empty for OpenBao's bare 404).
    pub messages: Vec<String>,
}

impl ApiError {
    /// Any status with one message.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError {
            status,
            messages: vec![message.into()],
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, message)
    }

    /// 403 `permission denied` (no, unknown or expired token, or no
    /// capability for the path).
    pub fn permission_denied() -> Self {
        ApiError::new(403, "permission denied")
    }

    /// 404 with no message, as OpenBao answers a missing key or policy.
    pub fn not_found() -> Self {
        ApiError {
            status: 404,
            messages: Vec::new(),
        }
    }

    /// 404 for a path aesd does not serve.
    pub fn unsupported_path(path: &str) -> Self {
        ApiError::new(
            404,
            format!(
                "unsupported path {path:?} (aesd serves sys/, auth/token/, transit/keys/ and Transit's data endpoints: docs/aesd.md, \"HTTP API\")"
            ),
        )
    }

    /// 405 for a method the path does not take.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        ApiError::new(405, format!("method {method} not supported on {path:?}"))
    }

    /// 503 `Vault is sealed`.
    pub fn sealed() -> Self {
        ApiError::new(503, "Vault is sealed")
    }

    /// 500 for what the server could not do (a store that cannot write).
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "errors": self.messages })
    }
}

impl From<StateError> for ApiError {
    fn from(err: StateError) -> Self {
        match err {
            StateError::Sealed => ApiError::sealed(),
            StateError::AlreadyInitialized
            | StateError::NotInitialized
            | StateError::BadShare(_) => ApiError::bad_request(err.to_string()),
            StateError::Seal(SealError::SharesDoNotOpen | SealError::Shamir(_)) => {
                ApiError::bad_request(format!(
                    "{err}; unseal progress was reset, give the shares again"
                ))
            }
            StateError::Store(StoreError::Conflict { generation, newest }) => ApiError::new(
                409,
                format!(
                    "keyring changed on another board: generation {newest} was stored first (this change would have been {generation}); this board has loaded it, retry the request"
                ),
            ),
            StateError::Store(StoreError::Unavailable { .. }) => ApiError::new(
                503,
                format!(
                    "keyring storage unavailable, the change is refused (encrypt and decrypt go on with the keyring this board holds): {err}"
                ),
            ),
            StateError::Transit(
                TransitSealError::Unreachable { .. }
                | TransitSealError::NoAnswer { .. }
                | TransitSealError::ServerSealed { .. },
            ) => ApiError::new(503, err.to_string()),
            StateError::Seal(_) | StateError::Store(_) | StateError::Transit(_) => {
                ApiError::internal(err.to_string())
            }
        }
    }
}

impl From<KeyringError> for ApiError {
    fn from(err: KeyringError) -> Self {
        match err {
            KeyringError::UnknownKey { .. } => ApiError::not_found(),
            KeyringError::Entropy(_) => ApiError::internal(err.to_string()),
            _ => ApiError::bad_request(err.to_string()),
        }
    }
}

impl From<PolicyStoreError> for ApiError {
    fn from(err: PolicyStoreError) -> Self {
        match err {
            PolicyStoreError::Unknown(_) => ApiError::not_found(),
            PolicyStoreError::Parse(_) => {
                ApiError::bad_request(format!("failed to parse policy: {err}"))
            }
            _ => ApiError::bad_request(err.to_string()),
        }
    }
}

impl From<TokenError> for ApiError {
    fn from(err: TokenError) -> Self {
        match err {
            TokenError::Unknown | TokenError::Expired => ApiError::permission_denied(),
            TokenError::Entropy(_) => ApiError::internal(err.to_string()),
            _ => ApiError::bad_request(err.to_string()),
        }
    }
}
