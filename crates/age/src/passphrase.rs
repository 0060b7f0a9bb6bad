//! The scrypt recipient type (`age -p`): a file key wrapped under a key
//! derived from a passphrase with scrypt (N = 2^log2N, r = 8, p = 1).
//!
//! Client-side only (the `scrypt` feature, which aesd does not enable):
//! the passphrase and the derivation's memory never reach a board. The
//! work factor is bounded ([`MAX_WORK_FACTOR`], age's own default limit)
//! and checked before any work, and an scrypt stanza must be the only
//! stanza of its header (the spec's rule: a passphrase file
//! authenticates its sender).
//!
//! Timing: the body is opened with ChaCha20-Poly1305, whose tag check is
//! constant time; scrypt's memory accesses depend on the passphrase by
//! design (it is memory-hard, not cache-timing-hard), as in every
//! implementation of it.

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce, Tag};
use zeroize::Zeroizing;

use crate::{AgeError, FileKey, Header, Stanza, base64};

/// The stanza's type, its first argument.
pub const STANZA_TAG: &str = "scrypt";
/// The highest log2 N a file may ask for: 22, age's default limit (4 GiB
/// of memory, a few seconds).
pub const MAX_WORK_FACTOR: u32 = 22;
/// The log2 N `age -p` writes by default (about a second).
pub const AGE_DEFAULT_WORK_FACTOR: u32 = 18;
/// The prefix of scrypt's salt, before the stanza's 16 random bytes.
const SALT_LABEL: &[u8] = b"age-encryption.org/v1/scrypt";

/// Whether `header` is a passphrase file's (it has an scrypt stanza).
pub fn is_passphrase_header(header: &Header) -> bool {
    header.stanzas.iter().any(is_scrypt)
}

fn is_scrypt(stanza: &Stanza) -> bool {
    stanza.args.first().map(String::as_str) == Some(STANZA_TAG)
}

/// The wrap key: scrypt(passphrase, label ‖ salt) with N = 2^`log_n`.
fn wrap_key(passphrase: &[u8], salt: &[u8; 16], log_n: u32) -> Zeroizing<[u8; 32]> {
    let mut full_salt = Vec::with_capacity(SALT_LABEL.len() + salt.len());
    full_salt.extend_from_slice(SALT_LABEL);
    full_salt.extend_from_slice(salt);
    let log_n = u8::try_from(log_n).expect("checked against the limit");
    let params = scrypt::Params::new(log_n, 8, 1).expect("r = 8, p = 1 and a bounded N are valid");
    let mut key = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(passphrase, &full_salt, &params, key.as_mut_slice())
        .expect("32 bytes is a valid output length");
    key
}

/// A passphrase's wrap key, derived once (the expensive part) before the
/// file key is known: [`Wrapper::wrap`] then makes the stanza.
pub struct Wrapper {
    key: Zeroizing<[u8; 32]>,
    salt: [u8; 16],
    log_n: u32,
}

impl core::fmt::Debug for Wrapper {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Wrapper(<redacted>)")
    }
}

impl Wrapper {
    /// Derives the wrap key of `passphrase` with a fresh `salt` (16 bytes
    /// from a CSPRNG, one per file) and a work factor of 2^`log_n` (1 to
    /// [`MAX_WORK_FACTOR`]; age writes [`AGE_DEFAULT_WORK_FACTOR`]).
    pub fn new(passphrase: &[u8], salt: [u8; 16], log_n: u32) -> Result<Self, AgeError> {
        if !(1..=MAX_WORK_FACTOR).contains(&log_n) {
            return Err(AgeError::WorkFactorTooHigh {
                log_n,
                max: MAX_WORK_FACTOR,
            });
        }
        Ok(Wrapper {
            key: wrap_key(passphrase, &salt, log_n),
            salt,
            log_n,
        })
    }

    /// The scrypt stanza wrapping `file_key`.
    pub fn wrap(&self, file_key: &FileKey) -> Stanza {
        let mut body = file_key.as_bytes().to_vec();
        let tag = ChaCha20Poly1305::new(&Key::from(*self.key))
            .encrypt_inout_detached(&Nonce::default(), b"", body.as_mut_slice().into())
            .expect("16 bytes are within ChaCha20-Poly1305's limits");
        body.extend_from_slice(&tag);
        Stanza {
            args: vec![
                STANZA_TAG.into(),
                base64::encode(&self.salt),
                self.log_n.to_string(),
            ],
            body,
        }
    }
}

/// The scrypt stanza wrapping `file_key` under `passphrase` (see
/// [`Wrapper::new`]).
pub fn wrap(
    file_key: &FileKey,
    passphrase: &[u8],
    salt: [u8; 16],
    log_n: u32,
) -> Result<Stanza, AgeError> {
    Ok(Wrapper::new(passphrase, salt, log_n)?.wrap(file_key))
}

/// The file key of a passphrase file, with the header's MAC checked
/// against it. Refused: a header with no scrypt stanza
/// ([`AgeError::NotPassphrase`]) or with another stanza beside it, a
/// malformed stanza, a work factor above `max_log_n` (before any work).
pub fn unwrap(header: &Header, passphrase: &[u8], max_log_n: u32) -> Result<FileKey, AgeError> {
    let bad = |what| AgeError::BadScryptStanza { what };
    let stanza = match header.stanzas.as_slice() {
        [stanza] if is_scrypt(stanza) => stanza,
        stanzas if stanzas.iter().any(is_scrypt) => {
            return Err(bad(
                "not the only stanza of the header (the spec forbids mixing)",
            ));
        }
        _ => return Err(AgeError::NotPassphrase),
    };
    let [_, salt, log_n] = stanza.args.as_slice() else {
        return Err(bad("not exactly three arguments"));
    };
    let salt: [u8; 16] = base64::decode(salt.as_bytes())
        .and_then(|bytes| <[u8; 16]>::try_from(bytes.as_slice()).ok())
        .ok_or(bad("the salt is not canonical base64 of 16 bytes"))?;
    let log_n = parse_work_factor(log_n)?;
    if log_n > max_log_n {
        return Err(AgeError::WorkFactorTooHigh {
            log_n,
            max: max_log_n,
        });
    }
    if stanza.body.len() != 32 {
        return Err(bad("the body is not 32 bytes"));
    }
    let key = wrap_key(passphrase, &salt, log_n);
    let mut file_key = Zeroizing::new([0u8; 16]);
    file_key.copy_from_slice(&stanza.body[..16]);
    let tag = Tag::try_from(&stanza.body[16..]).expect("16 bytes");
    ChaCha20Poly1305::new(&Key::from(*key))
        .decrypt_inout_detached(&Nonce::default(), b"", file_key.as_mut_slice().into(), &tag)
        .map_err(|_| AgeError::WrongPassphrase)?;
    let file_key = FileKey::new(*file_key);
    header.verify_mac(&file_key)?;
    Ok(file_key)
}

/// The work factor argument: decimal, no leading zero (`[1-9][0-9]*`).
fn parse_work_factor(text: &str) -> Result<u32, AgeError> {
    let bad = |what| AgeError::BadScryptStanza { what };
    let bytes = text.as_bytes();
    let well_formed = bytes.first().is_some_and(|b| (b'1'..=b'9').contains(b))
        && bytes.iter().all(u8::is_ascii_digit);
    if !well_formed {
        return Err(bad(
            "the work factor is not a decimal number without leading zeros",
        ));
    }
    // A number too long for u32 is far above any limit.
    Ok(text.parse().unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HeaderReader;
    use crate::header::write_stanzas;
    extern crate std;

    fn header_of(bytes: &[u8]) -> Header {
        HeaderReader::new()
            .push(bytes)
            .expect("well formed")
            .expect("complete")
            .0
    }

    #[test]
    fn a_written_stanza_unwraps_with_its_passphrase_only() {
        let file_key = FileKey::new([7; 16]);
        let stanza = wrap(&file_key, b"correct horse", [1; 16], 4).expect("wrap");
        assert_eq!(stanza.args[2], "4");
        let header = header_of(&write_stanzas(&file_key, &[stanza]).expect("header"));
        assert!(is_passphrase_header(&header));
        assert_eq!(unwrap(&header, b"correct horse", 22), Ok(file_key));
        assert_eq!(
            unwrap(&header, b"correct horsf", 22),
            Err(AgeError::WrongPassphrase)
        );
        // The limit is the caller's: the same file refused under 2^3.
        assert_eq!(
            unwrap(&header, b"correct horse", 3),
            Err(AgeError::WorkFactorTooHigh { log_n: 4, max: 3 })
        );
    }

    #[test]
    fn a_work_factor_above_the_limit_is_refused_before_any_work() {
        // 2^40 would take a terabyte and hours: refused at once.
        let stanza = Stanza {
            args: vec!["scrypt".into(), base64::encode(&[2; 16]), "40".into()],
            body: vec![0; 32],
        };
        let file_key = FileKey::new([3; 16]);
        let header = header_of(&write_stanzas(&file_key, &[stanza]).expect("header"));
        let started = std::time::Instant::now();
        let err = unwrap(&header, b"pw", MAX_WORK_FACTOR).expect_err("refused");
        assert_eq!(err, AgeError::WorkFactorTooHigh { log_n: 40, max: 22 });
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let said = err.to_string();
        assert!(said.contains("2^40") && said.contains("2^22"), "{said}");
    }

    #[test]
    fn malformed_or_mixed_scrypt_stanzas_are_refused() {
        let file_key = FileKey::new([3; 16]);
        let good = wrap(&file_key, b"pw", [1; 16], 2).expect("wrap");
        let with_args = |args: &[&str]| Stanza {
            args: args.iter().map(|a| (*a).into()).collect(),
            body: good.body.clone(),
        };
        let salt = good.args[1].clone();
        let cases = [
            (vec![with_args(&["scrypt", &salt])], "three arguments"),
            (vec![with_args(&["scrypt", "AAAA", "2"])], "the salt"),
            (vec![with_args(&["scrypt", &salt, "02"])], "leading zeros"),
            (vec![with_args(&["scrypt", &salt, "0"])], "leading zeros"),
            (vec![with_args(&["scrypt", &salt, "x"])], "leading zeros"),
            (
                vec![Stanza {
                    args: good.args.clone(),
                    body: vec![0; 31],
                }],
                "32 bytes",
            ),
            (
                vec![good.clone(), with_args(&["X25519", "AAAA"])],
                "the only stanza",
            ),
            (vec![good.clone(), good.clone()], "the only stanza"),
        ];
        for (stanzas, needle) in cases {
            let header = header_of(&write_stanzas(&file_key, &stanzas).expect("header"));
            let err = unwrap(&header, b"pw", 22).expect_err(needle);
            assert!(
                matches!(err, AgeError::BadScryptStanza { what } if what.contains(needle)),
                "{needle}: {err}"
            );
        }
        let x25519 = header_of(
            &write_stanzas(&file_key, &[with_args(&["X25519", "AAAA"])]).expect("header"),
        );
        assert_eq!(unwrap(&x25519, b"pw", 22), Err(AgeError::NotPassphrase),);
    }
}
