//! The transit seal (auto-unseal, as OpenBao's `seal "transit"`): the
//! root key is encrypted at `sys/init` by a named Transit key of another
//! server (another aesd, or OpenBao) and kept so in the sealed keyring's
//! header; at start aesd asks that server to decrypt it and unseals
//! itself. The shares `sys/init` makes are then recovery shares.
//!
//! ```text
//!  init:   root key ─ POST {mount}/encrypt/{key} ─► vault:vN:... (header)
//!  start:  header's vault:vN:... ─ POST {mount}/decrypt/{key} ─► root key ─► open
//!          (refused or unreachable: stay sealed, retry with backoff: retry.rs)
//! ```
//!
//! Settings (docs/aesd.md): `--seal-transit-address http(s)://HOST:PORT`,
//! `--seal-transit-key-name NAME` (OpenBao's `key_name`),
//! `--seal-transit-mount-path PATH` (`mount_path`, default `transit/`),
//! `--seal-transit-token-file FILE` (`token`, read from a file),
//! `--seal-transit-ca-cert FILE` (`tls_ca_cert`, for `https://`). The root
//! key crosses the connection in base64: over TLS (crate::http_client), or
//! in plain HTTP to a server on loopback or a network trusted as much as
//! this board.

pub mod retry;

use std::path::Path;

use aesd_keyring::sealed::{RootKey, WrappedRoot};
use aesd_proto::message::Secret;
use aesd_proto::secret_file::{SecretFileError, read_secret_file};
use base64ct::{Base64, Encoding};
use serde::Deserialize;
use zeroize::{Zeroize, Zeroizing};

pub use crate::http_client::HttpAddress as TransitAddress;
use crate::http_client::{self, HttpClientError};

/// The mount path when none is given (OpenBao's).
pub const DEFAULT_MOUNT_PATH: &str = "transit/";
/// The longest token read from `--seal-transit-token-file`.
pub const MAX_TOKEN_LEN: usize = 256;

/// Why the transit seal could not encrypt or decrypt the root key.
#[derive(Debug, thiserror::Error)]
pub enum TransitSealError {
    /// No TCP connection (refused, no route, timeout, unknown host).
    #[error("cannot reach the transit seal's server {address}: {source}")]
    Unreachable {
        /// `--seal-transit-address`.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// Connected, but the request or the reply did not get through in
    /// time.
    #[error("the transit seal's server {address} did not answer: {source}")]
    NoAnswer {
        /// `--seal-transit-address`.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The other server is sealed (HTTP 503).
    #[error("the transit seal's server is sealed (HTTP 503: {message}); unseal it")]
    ServerSealed {
        /// Its `errors`.
        message: String,
    },
    /// The token has no access (HTTP 403): unknown, revoked, or its
    /// policy lacks `update` on the path.
    #[error(
        "the transit seal's token was refused (HTTP 403: {message}); it needs update on {path} (--seal-transit-token-file)"
    )]
    PermissionDenied {
        /// Its `errors`.
        message: String,
        /// The path asked.
        path: String,
    },
    /// Any other refusal (an unknown key is 400 or 404).
    #[error("the transit seal's server refused {path} (HTTP {status}): {message}")]
    Refused {
        /// The path asked.
        path: String,
        /// The HTTP status.
        status: u16,
        /// Its `errors`.
        message: String,
    },
    /// A reply that is not Transit's.
    #[error("the transit seal's server's reply is not Transit's: {0}")]
    BadReply(String),
    /// TLS to an `https://` server failed: its certificate was refused
    /// (not signed by --seal-transit-ca-cert, another name), or no TLS
    /// on the port.
    #[error("TLS to the transit seal's server failed: {0}")]
    Tls(String),
}

impl From<HttpClientError> for TransitSealError {
    fn from(err: HttpClientError) -> Self {
        match err {
            HttpClientError::Unreachable { address, source } => {
                TransitSealError::Unreachable { address, source }
            }
            HttpClientError::NoAnswer { address, source } => {
                TransitSealError::NoAnswer { address, source }
            }
            HttpClientError::BadReply(why) => TransitSealError::BadReply(why),
            err @ (HttpClientError::Tls { .. } | HttpClientError::NoCa { .. }) => {
                TransitSealError::Tls(err.to_string())
            }
        }
    }
}

impl TransitSealError {
    /// A short name of the failure (`sys/seal-status`'s
    /// `auto_unseal_error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            TransitSealError::Unreachable { .. } => "unreachable",
            TransitSealError::NoAnswer { .. } => "no_answer",
            TransitSealError::ServerSealed { .. } => "server_sealed",
            TransitSealError::PermissionDenied { .. } => "permission_denied",
            TransitSealError::Refused { .. } => "refused",
            TransitSealError::BadReply(_) => "bad_reply",
            TransitSealError::Tls(_) => "tls",
        }
    }
}

/// The transit seal's settings, the token read.
pub struct TransitSeal {
    address: TransitAddress,
    tls: Option<http_client::HttpTls>,
    mount_path: String,
    key_name: String,
    token: Secret,
}

impl std::fmt::Debug for TransitSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TransitSeal({})", self.describe())
    }
}

/// Transit's `data` with one text field (borrowed from the wiped body).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    data: Data<'a>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow, default)]
    ciphertext: Option<&'a str>,
    #[serde(borrow, default)]
    plaintext: Option<&'a str>,
}

#[derive(Deserialize)]
struct Errors {
    #[serde(default)]
    errors: Vec<String>,
}

impl TransitSeal {
    /// The seal for `key_name` under `mount_path` at `address`, with the
    /// token from the first line of `token_file`; `ca_cert` checks an
    /// `https://` address's certificate.
    pub fn new(
        address: TransitAddress,
        ca_cert: Option<&Path>,
        mount_path: &str,
        key_name: &str,
        token_file: &Path,
    ) -> Result<Self, String> {
        let tls = match (address.tls, ca_cert) {
            (true, Some(ca)) => Some(http_client::HttpTls::from_ca_file(
                ca,
                "--seal-transit-ca-cert",
            )?),
            (true, None) => {
                return Err(format!(
                    "--seal-transit-address {address}: https:// needs --seal-transit-ca-cert"
                ));
            }
            (false, _) => None,
        };
        aesd_keyring::name::validate(key_name)
            .map_err(|err| format!("--seal-transit-key-name {key_name:?}: {err}"))?;
        let mount = mount_path.trim_matches('/');
        if mount.is_empty()
            || !mount
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
            || mount
                .split('/')
                .any(|segment| segment.is_empty() || segment == "..")
        {
            return Err(format!(
                "--seal-transit-mount-path {mount_path:?}: letters, digits, '-', '_', '.' and '/' between segments"
            ));
        }
        let token = read_secret_file(token_file, "transit seal token", 1, MAX_TOKEN_LEN)
            .map_err(|err: SecretFileError| format!("--seal-transit-token-file: {err}"))?;
        if !token.as_bytes().iter().all(u8::is_ascii_graphic) {
            return Err(format!(
                "--seal-transit-token-file {}: the token must be printable ASCII",
                token_file.display()
            ));
        }
        Ok(TransitSeal {
            address,
            tls,
            mount_path: mount.to_owned(),
            key_name: key_name.to_owned(),
            token,
        })
    }

    /// `key NAME at http://HOST:PORT/v1/MOUNT`, for the logs.
    pub fn describe(&self) -> String {
        format!(
            "key {} at {}/v1/{}",
            self.key_name, self.address, self.mount_path
        )
    }

    fn path(&self, operation: &str) -> String {
        format!("{}/{operation}/{}", self.mount_path, self.key_name)
    }

    /// Posts `body` to `operation` and returns the 200 reply's body.
    fn call(&self, operation: &str, body: &[u8]) -> Result<Zeroizing<Vec<u8>>, TransitSealError> {
        let path = self.path(operation);
        let reply = http_client::post(
            &self.address,
            self.tls.as_ref(),
            &format!("/v1/{path}"),
            self.token.as_bytes(),
            body,
        )?;
        if reply.status == 200 {
            return Ok(reply.body);
        }
        let message = serde_json::from_slice::<Errors>(&reply.body)
            .map(|e| e.errors.join("; "))
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect::<String>();
        Err(match reply.status {
            503 => TransitSealError::ServerSealed { message },
            403 => TransitSealError::PermissionDenied { message, path },
            status => TransitSealError::Refused {
                path,
                status,
                message,
            },
        })
    }

    /// Encrypts the root key with the Transit key (`sys/init`).
    pub fn encrypt_root(&self, root: &RootKey) -> Result<WrappedRoot, TransitSealError> {
        let body = root.wrap_with(|bytes| {
            let mut encoded = [0u8; 44];
            let mut body = Zeroizing::new(Vec::with_capacity(64));
            body.extend_from_slice(b"{\"plaintext\":\"");
            if let Ok(text) = Base64::encode(bytes, &mut encoded) {
                body.extend_from_slice(text.as_bytes());
            }
            encoded.zeroize();
            body.extend_from_slice(b"\"}");
            Ok::<_, TransitSealError>(body)
        })?;
        let reply = self.call("encrypt", &body)?;
        let envelope: Envelope<'_> = serde_json::from_slice(&reply)
            .map_err(|err| TransitSealError::BadReply(format!("encrypt: {err}")))?;
        let text = envelope
            .data
            .ciphertext
            .ok_or_else(|| TransitSealError::BadReply("encrypt: no data.ciphertext".into()))?;
        WrappedRoot::new(text.to_owned())
            .map_err(|err| TransitSealError::BadReply(format!("encrypt: {err}")))
    }

    /// Decrypts the root key with the Transit key (at start).
    pub fn decrypt_root(&self, wrapped: &WrappedRoot) -> Result<RootKey, TransitSealError> {
        let body = serde_json::to_vec(&serde_json::json!({ "ciphertext": wrapped.as_str() }))
            .map_err(|err| TransitSealError::BadReply(err.to_string()))?;
        let reply = self.call("decrypt", &body)?;
        let envelope: Envelope<'_> = serde_json::from_slice(&reply)
            .map_err(|_| TransitSealError::BadReply("decrypt: not Transit's JSON".into()))?;
        let text = envelope
            .data
            .plaintext
            .ok_or_else(|| TransitSealError::BadReply("decrypt: no data.plaintext".into()))?;
        let mut root = Zeroizing::new([0u8; 32]);
        let len = Base64::decode(text, &mut root[..]).map_or(0, |bytes| bytes.len());
        if len != 32 {
            return Err(TransitSealError::BadReply(
                "decrypt: the plaintext is not base64 of a 32-byte root key".into(),
            ));
        }
        Ok(RootKey::from_zeroizing(root))
    }
}
