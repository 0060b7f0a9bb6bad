//! Which key source a job uses, and the client's own key derivation.
//!
//! With key source 2 the client runs PBKDF2-HMAC-SHA256 itself, as
//! `openssl enc -pbkdf2` does, and sends the server the salt, key and IV:
//! the password never leaves the client and the server (a 100 MHz board)
//! does no key derivation. For encryption the client draws the salt; for
//! decryption it reads it from the file's `Salted__` header, which it then
//! sends on as the first bytes of the input.

use aesd_proto::{DerivedKeyParams, KeySource, Operation};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::ClientError;
use crate::job::JobSpec;

/// Where a job's key is derived from its password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyDerivation {
    /// On the client when the server accepts derived keys (its welcome says
    /// so); otherwise on the server, but only over TLS: on a cleartext
    /// connection a server (or anyone flipping the welcome's flag on the
    /// path) that asks for the password gets
    /// [`ClientError::PasswordNeedsTls`] and never the password.
    #[default]
    Auto,
    /// Always on the client; a server that does not accept derived keys is
    /// an error ([`ClientError::DerivedKeysUnsupported`]), so the password
    /// is never sent.
    Client,
    /// Always on the server (key source 1: the password is sent, also on
    /// a cleartext connection: the caller chose it explicitly).
    Server,
}

impl KeyDerivation {
    /// The name used by the command-line tools (`auto`, `client`, `server`).
    pub fn name(self) -> &'static str {
        match self {
            KeyDerivation::Auto => "auto",
            KeyDerivation::Client => "client",
            KeyDerivation::Server => "server",
        }
    }
}

impl std::str::FromStr for KeyDerivation {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(KeyDerivation::Auto),
            "client" => Ok(KeyDerivation::Client),
            "server" => Ok(KeyDerivation::Server),
            other => Err(format!(
                "unknown key derivation `{other}`: expected auto, client or server"
            )),
        }
    }
}

/// Length of the `Salted__` + salt header (the format's, as the server
/// reads it: aesd-cipher's [`stream`](aesd_cipher::stream)).
pub use aesd_cipher::stream::HEADER_LEN;
use aesd_cipher::stream::{SALT_LEN, SALTED_MAGIC};

/// A rewrap asked of a password or age job: rewrap is by name only
/// ([`crate::by_name`]).
pub(crate) fn by_name_only(operation: Operation) -> ClientError {
    let reason = match operation {
        Operation::DataKey => "a data key is by name only (key source 5: Client::data_key)",
        Operation::Unwrap => "unwrap is by name only (key source 5: Client::unwrap_header)",
        Operation::DataKeyWrapped => {
            "a wrapped data key is by name only (key source 5: Client::data_key_wrapped)"
        }
        _ => "rewrap is by name only (key source 5: Client::rewrap_header)",
    };
    ClientError::Request(aesd_proto::ProtoError::Malformed {
        kind: "begin",
        reason,
    })
}

/// A job's key source, chosen (and derived, when this client derives it)
/// before the job runs: [`Client::prepare_key`], then
/// [`Client::run_prepared_job`]. A caller that checks the result itself
/// (aesload's verifier) reads the derived key here instead of running
/// PBKDF2 a second time.
///
/// [`Client::prepare_key`]: crate::Client::prepare_key
/// [`Client::run_prepared_job`]: crate::Client::run_prepared_job
pub struct ChosenKey {
    /// The key source for the begin frame.
    pub(crate) key: KeySource,
    /// Input already read (a decryption's header); the job sends it first.
    pub(crate) read_ahead: Vec<u8>,
}

impl ChosenKey {
    /// The salt, key and IV this client derived (key source 2); `None`
    /// when the server derives the key from the password (key source 1).
    pub fn derived(&self) -> Option<&DerivedKeyParams> {
        match &self.key {
            KeySource::Derived(params) => Some(params),
            _ => None,
        }
    }
}

impl std::fmt::Debug for ChosenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // DerivedKeyParams prints no secret; a password is not printed.
        f.debug_struct("ChosenKey")
            .field("derived", &self.derived())
            .field("read_ahead", &self.read_ahead.len())
            .finish()
    }
}

/// What a connection offers the choice of a key source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offer {
    /// The server's welcome accepts keys derived by the client (key
    /// source 2).
    pub(crate) derived_keys: bool,
    /// The connection is under TLS (a password sent is not readable on
    /// the path).
    pub(crate) tls: bool,
}

/// Chooses the key source for `spec` against what the connection offers;
/// derives the key when the client does it, reading a decryption's header
/// from `input`.
pub(crate) async fn choose<R: AsyncRead + Unpin>(
    spec: &JobSpec,
    offer: Offer,
    input: &mut R,
) -> Result<ChosenKey, ClientError> {
    if !derives_on_client(spec, offer)? {
        return Ok(password_key(spec));
    }
    let (salt, read_ahead) = match spec.operation {
        Operation::Encrypt => (Some(fresh_salt()?), Vec::new()),
        Operation::Decrypt => salt_from_input(input).await?,
        Operation::Rewrap | Operation::DataKey | Operation::Unwrap | Operation::DataKeyWrapped => {
            return Err(by_name_only(spec.operation));
        }
    };
    let params = match salt {
        Some(salt) => derive_off_thread(spec, salt).await?,
        // Not an `openssl enc -salt` file: there is no salt to derive
        // with. The server rejects the input (`bad_ciphertext`) before it
        // uses any key, so send a random one rather than spend PBKDF2 on
        // nothing (and never the password).
        None => DerivedKeyParams {
            salt: [0; 8],
            key: random_bytes::<32>()?.into(),
            iv: random_bytes::<16>()?.into(),
        },
    };
    Ok(ChosenKey {
        key: KeySource::Derived(params),
        read_ahead,
    })
}

/// Whether this client derives the key of `spec` on a connection offering
/// `offer`: the password goes to the server only when the caller chose
/// `server`, or under TLS with `auto` (never because a cleartext welcome
/// asked for it).
fn derives_on_client(spec: &JobSpec, offer: Offer) -> Result<bool, ClientError> {
    match (spec.key_derivation, offer.derived_keys) {
        (KeyDerivation::Server, _) => Ok(false),
        (KeyDerivation::Auto, false) if offer.tls => Ok(false),
        (KeyDerivation::Auto, false) => Err(ClientError::PasswordNeedsTls),
        (KeyDerivation::Client, false) => Err(ClientError::DerivedKeysUnsupported),
        (KeyDerivation::Auto | KeyDerivation::Client, true) => Ok(true),
    }
}

/// Key source 1: the server derives the key from the password.
fn password_key(spec: &JobSpec) -> ChosenKey {
    ChosenKey {
        key: KeySource::Password {
            iterations: spec.iterations,
            password: spec.password.clone(),
        },
        read_ahead: Vec::new(),
    }
}

/// [`choose`] for an encryption whose key the caller derived ahead (a
/// fresh salt from [`fresh_salt`], then [`derive`] with the spec's
/// password and iterations): `derived` is sent when this client derives
/// the key, the password when the server does (then `derived` is dropped).
pub(crate) fn choose_derived(
    spec: &JobSpec,
    offer: Offer,
    derived: DerivedKeyParams,
) -> Result<ChosenKey, ClientError> {
    if spec.operation != Operation::Encrypt {
        return Err(ClientError::KeyDerivation(
            "a key derived ahead is for encryption only: decryption takes the file's salt".into(),
        ));
    }
    if !derives_on_client(spec, offer)? {
        return Ok(password_key(spec));
    }
    Ok(ChosenKey {
        key: KeySource::Derived(derived),
        read_ahead: Vec::new(),
    })
}

/// A fresh random salt for an encryption (from the OS's generator).
pub fn fresh_salt() -> Result<[u8; 8], ClientError> {
    random_bytes::<8>()
}

/// Key and IV from `password` and `salt`, as
/// `openssl enc -aes-256-cbc -pbkdf2 -iter <iterations>` derives them.
/// The same derivation as the server's (aesd-cipher's
/// [`derive_key`](aesd_cipher::kdf::derive_key)).
pub fn derive(password: &[u8], salt: [u8; SALT_LEN], iterations: u32) -> DerivedKeyParams {
    let derived = aesd_cipher::kdf::derive_key(password, &salt, iterations);
    DerivedKeyParams {
        salt,
        key: derived.key.into(),
        iv: derived.iv.into(),
    }
}

/// Runs [`derive`] on tokio's blocking pool, so a load run's many clients
/// do not stall each other on PBKDF2.
async fn derive_off_thread(spec: &JobSpec, salt: [u8; 8]) -> Result<DerivedKeyParams, ClientError> {
    let password = spec.password.clone();
    let iterations = spec.iterations;
    tokio::task::spawn_blocking(move || derive(password.as_bytes(), salt, iterations))
        .await
        .map_err(|err| ClientError::KeyDerivation(err.to_string()))
}

/// Reads the 16-byte header of a file to decrypt; returns its salt (`None`
/// when the input is too short or not a salted file) and the bytes read.
async fn salt_from_input<R: AsyncRead + Unpin>(
    input: &mut R,
) -> Result<(Option<[u8; 8]>, Vec<u8>), ClientError> {
    let mut header = vec![0u8; HEADER_LEN];
    let mut filled = 0;
    while filled < HEADER_LEN {
        let n = input
            .read(&mut header[filled..])
            .await
            .map_err(ClientError::Input)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    header.truncate(filled);
    let salt =
        (filled == HEADER_LEN && header[..SALTED_MAGIC.len()] == SALTED_MAGIC[..]).then(|| {
            let mut salt = [0u8; 8];
            salt.copy_from_slice(&header[8..]);
            salt
        });
    Ok((salt, header))
}

fn random_bytes<const N: usize>() -> Result<[u8; N], ClientError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|err| ClientError::KeyDerivation(err.to_string()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aesd_proto::Password;

    /// A server whose welcome accepts derived keys (plain TCP).
    const DERIVED: Offer = Offer {
        derived_keys: true,
        tls: false,
    };
    /// A server that wants the password, under TLS.
    const TLS_NO_DERIVED: Offer = Offer {
        derived_keys: false,
        tls: true,
    };
    /// A server that wants the password, on a cleartext connection.
    const CLEAR_NO_DERIVED: Offer = Offer {
        derived_keys: false,
        tls: false,
    };

    fn spec(operation: Operation, derivation: KeyDerivation) -> JobSpec {
        JobSpec {
            operation,
            password: Password::new(b"password".to_vec()),
            iterations: 10_000,
            key_derivation: derivation,
        }
    }

    /// `openssl enc -aes-256-cbc -pbkdf2 -iter 10000 -k password
    /// -S 0001020304050607 -P` prints this key and IV.
    #[test]
    fn derivation_matches_openssl() {
        let params = derive(b"password", [0, 1, 2, 3, 4, 5, 6, 7], 10_000);
        assert_eq!(
            hex::encode(params.key.as_ref()),
            "6827bd488a4c5d38d28131175369843dc41c73284eff746252231b58fe384b1e"
        );
        assert_eq!(
            hex::encode(params.iv.as_ref()),
            "77532013c6cb46fda992eda58456ddee"
        );
    }

    #[tokio::test]
    async fn auto_derives_only_when_the_server_accepts_it() {
        let mut input: &[u8] = b"plain";
        let chosen = choose(
            &spec(Operation::Encrypt, KeyDerivation::Auto),
            TLS_NO_DERIVED,
            &mut input,
        )
        .await
        .expect("chosen");
        assert!(matches!(chosen.key, KeySource::Password { .. }));
        // In the clear, a welcome without derived keys (or one whose flag
        // was flipped on the path) gets no password.
        let refused = choose(
            &spec(Operation::Encrypt, KeyDerivation::Auto),
            CLEAR_NO_DERIVED,
            &mut input,
        )
        .await;
        assert!(
            matches!(refused, Err(ClientError::PasswordNeedsTls)),
            "{refused:?}"
        );
        let chosen = choose(
            &spec(Operation::Encrypt, KeyDerivation::Auto),
            DERIVED,
            &mut input,
        )
        .await
        .expect("chosen");
        let KeySource::Derived(params) = chosen.key else {
            panic!("expected a derived key");
        };
        assert_eq!(*params.key, *derive(b"password", params.salt, 10_000).key);
        assert!(chosen.read_ahead.is_empty());
    }

    #[test]
    fn a_key_derived_ahead_follows_the_same_rules() {
        let ahead = derive(b"password", fresh_salt().expect("salt"), 10_000);
        let encrypt = spec(Operation::Encrypt, KeyDerivation::Auto);
        let chosen = choose_derived(&encrypt, DERIVED, ahead.clone()).expect("chosen");
        assert_eq!(chosen.derived(), Some(&ahead));
        assert!(chosen.read_ahead.is_empty());
        // The server derives: the password is sent (under TLS) and the key
        // dropped; in the clear, nothing is chosen.
        let chosen = choose_derived(&encrypt, TLS_NO_DERIVED, ahead.clone()).expect("chosen");
        assert!(chosen.derived().is_none());
        assert!(matches!(chosen.key, KeySource::Password { .. }));
        assert!(matches!(
            choose_derived(&encrypt, CLEAR_NO_DERIVED, ahead.clone()),
            Err(ClientError::PasswordNeedsTls)
        ));
        let server = spec(Operation::Encrypt, KeyDerivation::Server);
        assert!(
            choose_derived(&server, DERIVED, ahead.clone())
                .expect("chosen")
                .derived()
                .is_none()
        );
        let client = spec(Operation::Encrypt, KeyDerivation::Client);
        assert!(matches!(
            choose_derived(&client, TLS_NO_DERIVED, ahead.clone()),
            Err(ClientError::DerivedKeysUnsupported)
        ));
        let decrypt = spec(Operation::Decrypt, KeyDerivation::Auto);
        assert!(matches!(
            choose_derived(&decrypt, DERIVED, ahead),
            Err(ClientError::KeyDerivation(_))
        ));
    }

    #[tokio::test]
    async fn client_only_refuses_a_server_without_derived_keys() {
        let mut input: &[u8] = b"";
        for offer in [TLS_NO_DERIVED, CLEAR_NO_DERIVED] {
            let result = choose(
                &spec(Operation::Encrypt, KeyDerivation::Client),
                offer,
                &mut input,
            )
            .await;
            assert!(matches!(result, Err(ClientError::DerivedKeysUnsupported)));
        }
        // `server`, chosen explicitly, sends the password in the clear too.
        let chosen = choose(
            &spec(Operation::Encrypt, KeyDerivation::Server),
            CLEAR_NO_DERIVED,
            &mut input,
        )
        .await
        .expect("chosen");
        assert!(matches!(chosen.key, KeySource::Password { .. }));
        let chosen = choose(
            &spec(Operation::Encrypt, KeyDerivation::Server),
            DERIVED,
            &mut input,
        )
        .await
        .expect("chosen");
        assert!(matches!(chosen.key, KeySource::Password { .. }));
    }

    #[tokio::test]
    async fn decryption_takes_the_salt_from_the_header_and_keeps_it() {
        let file = b"Salted__\x00\x01\x02\x03\x04\x05\x06\x07ciphertext......";
        let mut input: &[u8] = file;
        let chosen = choose(
            &spec(Operation::Decrypt, KeyDerivation::Auto),
            DERIVED,
            &mut input,
        )
        .await
        .expect("chosen");
        let KeySource::Derived(params) = chosen.key else {
            panic!("expected a derived key");
        };
        assert_eq!(params.salt, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(
            hex::encode(params.key.as_ref()),
            "6827bd488a4c5d38d28131175369843dc41c73284eff746252231b58fe384b1e"
        );
        assert_eq!(chosen.read_ahead, file[..16].to_vec());
        assert_eq!(input, &file[16..]);
    }

    #[tokio::test]
    async fn a_file_without_a_header_gets_a_random_key_not_a_derived_one() {
        for file in [&b"short"[..], &b"NotSalted_______________"[..]] {
            let mut input: &[u8] = file;
            let chosen = choose(
                &spec(Operation::Decrypt, KeyDerivation::Auto),
                DERIVED,
                &mut input,
            )
            .await
            .expect("chosen");
            let KeySource::Derived(params) = chosen.key else {
                panic!("expected a derived key");
            };
            assert_ne!(*params.key, *derive(b"password", params.salt, 10_000).key);
            assert_eq!(chosen.read_ahead, file[..file.len().min(16)].to_vec());
        }
    }
}
