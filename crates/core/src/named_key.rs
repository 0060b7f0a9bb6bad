//! Key source 5: files under a key of the server's keyring, by name.
//!
//! The file is an age v1 file whose header holds one stanza of aesd's
//! own, `-> aesd-key NAME VERSION`, its body the 16-byte file key sealed
//! by that version of the keyring key (the keyring's AEAD, nonce ‖
//! ciphertext ‖ tag, 44 bytes) with [`associated_data`] binding the key's
//! name; then the ordinary header MAC and STREAM payload. So the payload
//! code is age's, and a rewrap rewrites the header alone.
//!
//! Core knows no keyring: the driver hands in a [`NamedKeys`] (the
//! server's keyring, its tokens and policies), called from the job's
//! start and header work on a worker thread.

use std::fmt;
use std::sync::Arc;

use aesd_age::{FileKey, Header, Stanza, header};
use aesd_proto::{ErrorCode, Operation, Secret};
use zeroize::Zeroizing;

/// The stanza type of a by-name file's header.
pub const STANZA_TYPE: &str = "aesd-key";

/// The keyring behind key source 5, as the driver provides it.
pub trait NamedKeys: Send + Sync + fmt::Debug {
    /// Whether `token` (the connection's keyring token, if it sent one)
    /// may run `operation` on the key `name`: the keyring's own policy
    /// check (`update` on `transit/encrypt|decrypt|rewrap/NAME`; a data
    /// key on `transit/datakey/plaintext/NAME`, a wrapped-only one on
    /// `transit/datakey/wrapped/NAME`, an unwrap on
    /// `transit/decrypt/NAME`).
    fn authorize(
        &self,
        token: Option<&[u8]>,
        name: &str,
        operation: Operation,
    ) -> Result<(), NamedKeyError>;

    /// Seals `file_key` with the latest version of `name` (honouring its
    /// `min_encryption_version`): the version and nonce ‖ ciphertext ‖
    /// tag.
    fn wrap(
        &self,
        name: &str,
        file_key: &[u8; 16],
        aad: &[u8],
    ) -> Result<(u32, Vec<u8>), NamedKeyError>;

    /// Opens what [`NamedKeys::wrap`] sealed with version `version`.
    fn unwrap(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        aad: &[u8],
    ) -> Result<Zeroizing<[u8; 16]>, NamedKeyError>;
}

/// Why a by-name job was refused: its code on the wire (`sealed`,
/// `unknown_key`, `key_version_retired`, `key_version_not_created`,
/// `permission_denied`, `bad_key_token`, `decrypt_failed`,
/// `bad_ciphertext`, `internal`) and the words for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NamedKeyError {
    /// The code sent to the client.
    pub code: ErrorCode,
    /// What the client is told (never key material).
    pub message: String,
}

impl NamedKeyError {
    /// An error with `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        NamedKeyError {
            code,
            message: message.into(),
        }
    }
}

/// What a by-name job's start needs: the keyring and the connection's
/// keyring token.
#[derive(Clone)]
pub struct NamedAccess {
    /// The keyring (none: this server has no keyring).
    pub keys: Option<Arc<dyn NamedKeys>>,
    /// The token of the connection's last key_token frame.
    pub token: Option<Secret>,
}

impl fmt::Debug for NamedAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamedAccess")
            .field("keyring", &self.keys.is_some())
            .field("token", &self.token.is_some())
            .finish()
    }
}

impl NamedAccess {
    /// The keyring, once the token is checked for `operation` on `name`.
    pub fn authorize(
        &self,
        name: &str,
        operation: Operation,
    ) -> Result<Arc<dyn NamedKeys>, NamedKeyError> {
        let keys = self.keys.as_ref().ok_or_else(|| {
            NamedKeyError::new(
                ErrorCode::Sealed,
                "this aesd has no keyring (start it with --keyring DIR or --dev)",
            )
        })?;
        keys.authorize(self.token.as_ref().map(Secret::as_bytes), name, operation)?;
        Ok(Arc::clone(keys))
    }
}

/// The associated data a file key is sealed with: `aesd-key ` and the
/// key's name, so a stanza moved under another name does not open.
pub fn associated_data(name: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(STANZA_TYPE.len() + 1 + name.len());
    aad.extend_from_slice(STANZA_TYPE.as_bytes());
    aad.push(b' ');
    aad.extend_from_slice(name.as_bytes());
    aad
}

/// A whole by-name header for `file_key`, wrapped by the latest version
/// of `name`: the header and that version.
pub fn write_header(
    keys: &dyn NamedKeys,
    name: &str,
    file_key: &FileKey,
) -> Result<(Vec<u8>, u32), NamedKeyError> {
    let (version, sealed) = keys.wrap(name, file_key.as_bytes(), &associated_data(name))?;
    let stanza = Stanza {
        args: vec![STANZA_TYPE.to_owned(), name.to_owned(), version.to_string()],
        body: sealed,
    };
    let header = header::write_stanzas(file_key, &[stanza])
        .expect("write_stanzas refuses only an empty list of stanzas");
    Ok((header, version))
}

/// A data key's answer (operation 4): `file_key` followed by the whole
/// by-name header that wraps it with the latest version of `name`, in
/// wiped memory; and that version.
pub fn data_key_answer(
    keys: &dyn NamedKeys,
    name: &str,
    file_key: &FileKey,
) -> Result<(Zeroizing<Vec<u8>>, u32), NamedKeyError> {
    let (header, version) = write_header(keys, name, file_key)?;
    let mut answer = Zeroizing::new(Vec::with_capacity(file_key.as_bytes().len() + header.len()));
    answer.extend_from_slice(file_key.as_bytes());
    answer.extend_from_slice(&header);
    Ok((answer, version))
}

/// The key name and version a by-name header's one stanza names, and its
/// sealed file key.
pub fn read_stanza(header: &Header) -> Result<(&str, u32, &[u8]), NamedKeyError> {
    let bad = |why: &str| {
        NamedKeyError::new(
            ErrorCode::BadCiphertext,
            format!("not a by-name file: {why}"),
        )
    };
    let [stanza] = header.stanzas.as_slice() else {
        return Err(bad("its header must hold exactly one aesd-key stanza"));
    };
    let [kind, name, version] = stanza.args.as_slice() else {
        return Err(bad("the stanza is not `-> aesd-key NAME VERSION`"));
    };
    if kind != STANZA_TYPE {
        return Err(bad("the stanza is not `-> aesd-key NAME VERSION`"));
    }
    let canonical = !version.starts_with('0') && version.bytes().all(|b| b.is_ascii_digit());
    let version = version
        .parse::<u32>()
        .ok()
        .filter(|_| canonical)
        .ok_or_else(|| bad("the stanza's version is not a decimal number from 1"))?;
    Ok((name, version, &stanza.body))
}

/// The file key of a by-name `header` that must name `expected` (the key
/// the job's begin named, which its token was checked for), its MAC
/// verified.
pub fn open_header(
    keys: &dyn NamedKeys,
    expected: &str,
    header: &Header,
) -> Result<FileKey, NamedKeyError> {
    let (name, version, sealed) = read_stanza(header)?;
    if name != expected {
        return Err(NamedKeyError::new(
            ErrorCode::DecryptFailed,
            format!(
                "the file is under key {:?}, not {expected:?} (the key the job named)",
                name.chars().take(80).collect::<String>()
            ),
        ));
    }
    let bytes = keys.unwrap(name, version, sealed, &associated_data(name))?;
    let file_key = FileKey::new(*bytes);
    header.verify_mac(&file_key).map_err(|_| {
        NamedKeyError::new(
            ErrorCode::DecryptFailed,
            "the header's MAC does not verify (the header was changed)",
        )
    })?;
    Ok(file_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of `stanzas` (arguments, body) under a zero file key.
    fn header(stanzas: &[(&[&str], &[u8])]) -> Header {
        let stanzas: Vec<Stanza> = stanzas
            .iter()
            .map(|(args, body)| Stanza {
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                body: body.to_vec(),
            })
            .collect();
        let bytes = header::write_stanzas(&FileKey::new([0; 16]), &stanzas).expect("header");
        aesd_age::HeaderReader::new()
            .push(&bytes)
            .expect("parses")
            .expect("complete")
            .0
    }

    #[test]
    fn a_by_name_header_holds_one_aesd_key_stanza_with_a_canonical_version() {
        let ok = header(&[(&["aesd-key", "files", "12"], b"sealed")]);
        assert_eq!(
            read_stanza(&ok).expect("reads"),
            ("files", 12, &b"sealed"[..])
        );
        for (what, bad) in [
            (
                "leading zero",
                header(&[(&["aesd-key", "files", "012"], b"x")]),
            ),
            ("version 0", header(&[(&["aesd-key", "files", "0"], b"x")])),
            ("sign", header(&[(&["aesd-key", "files", "+1"], b"x")])),
            (
                "over u32",
                header(&[(&["aesd-key", "files", "4294967296"], b"x")]),
            ),
            ("no version", header(&[(&["aesd-key", "files"], b"x")])),
            ("another type", header(&[(&["X25519", "files", "1"], b"x")])),
            (
                "two stanzas",
                header(&[
                    (&["aesd-key", "files", "1"], b"x"),
                    (&["aesd-key", "files", "2"], b"x"),
                ]),
            ),
        ] {
            let err = read_stanza(&bad).expect_err(what);
            assert_eq!(err.code, ErrorCode::BadCiphertext, "{what}");
            assert!(err.message.contains("not a by-name file"), "{what}: {err}");
        }
        assert_eq!(associated_data("files"), b"aesd-key files");
    }
}
