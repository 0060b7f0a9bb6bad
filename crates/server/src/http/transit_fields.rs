//! What the Transit data endpoints share: base64 of plaintexts and data
//! keys in constant time, the fields OpenBao ignores (its `warnings`),
//! version fields, and the keyring's refusals in OpenBao's words.

use aesd_keyring::{CiphertextFault, KeyringError};
use base64ct::{Base64, Encoding};
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use super::errors::ApiError;
use super::transit_body::Slot;

/// Which operation a keyring refusal came from: OpenBao words a version
/// above the latest differently for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Encrypt, the encryption half of rewrap, datakey.
    Encrypt,
    /// Decrypt, the decryption half of rewrap.
    Decrypt,
}

/// Standard base64 (with padding) of secret bytes: plaintexts, data keys.
/// Constant time (`base64ct`: no table lookups or branches on the data).
pub fn decode_secret(text: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    Base64::decode_vec(text)
        .map(Zeroizing::new)
        .map_err(|_| "illegal base64 data (standard base64 with padding expected)".to_owned())
}

/// Standard base64 of secret bytes, in constant time.
pub fn encode_secret(bytes: &[u8]) -> String {
    Base64::encode_string(bytes)
}

/// Associated data: base64 (not secret, but decoded the same way).
pub fn decode_aad(slot: &Slot<'_>) -> Result<Zeroizing<Vec<u8>>, String> {
    match slot {
        Slot::Absent => Ok(Zeroizing::new(Vec::new())),
        Slot::Str(text) => decode_secret(text)
            .map_err(|err| format!("unable to get associated_data from the request: {err}")),
        Slot::Number(_) | Slot::Other => Err("associated_data: not a string".to_owned()),
    }
}

/// OpenBao's warning for body fields the endpoint does not take (sorted,
/// as OpenBao lists them); empty when every field is known.
pub fn ignored(fields: &Map<String, Value>, known: &[&str]) -> Vec<String> {
    let mut unknown: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|key| !known.contains(key))
        .collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    unknown.sort_unstable();
    vec![format!(
        "Endpoint ignored these unrecognized parameters: [{}]",
        unknown.join(" ")
    )]
}

/// `key_version` (absent or 0: the latest).
pub fn key_version(slot: &Slot<'_>) -> Result<Option<u32>, String> {
    slot.uint("key_version")?
        .map(|v| u32::try_from(v).map_err(|_| "key_version: too large".to_owned()))
        .transpose()
}

/// A required text field of a request or a batch item.
pub fn required_str<'s>(slot: &'s Slot<'_>, name: &str, missing: &str) -> Result<&'s str, String> {
    match slot {
        Slot::Absent => Err(missing.to_owned()),
        Slot::Str(text) if text.is_empty() && name == "ciphertext" => Err(missing.to_owned()),
        Slot::Str(text) => Ok(text),
        Slot::Number(_) | Slot::Other => Err(format!("{name}: not a string")),
    }
}

/// The keyring's refusal as OpenBao words it (status, message). An
/// unknown key is 400 `encryption key not found` on these endpoints.
pub fn refusal(err: &KeyringError, op: Op) -> (u16, String) {
    let text = match err {
        KeyringError::UnknownKey { .. } => "encryption key not found".to_owned(),
        KeyringError::VersionNotCreated { .. } => match op {
            Op::Encrypt => {
                "requested version for encryption is higher than the latest key version".to_owned()
            }
            Op::Decrypt => "invalid ciphertext: version is too new".to_owned(),
        },
        KeyringError::VersionBelowMinimum { .. } => match op {
            Op::Encrypt => {
                "requested version for encryption is less than the minimum encryption key version"
                    .to_owned()
            }
            Op::Decrypt => {
                "ciphertext or signature version is disallowed by policy (too old)".to_owned()
            }
        },
        KeyringError::BadCiphertext(fault) => match fault {
            CiphertextFault::MalformedPrefix => "invalid ciphertext: no prefix".to_owned(),
            CiphertextFault::MalformedVersion => {
                "invalid ciphertext: version number could not be decoded".to_owned()
            }
            CiphertextFault::BadBase64 => "invalid ciphertext: could not decode base64".to_owned(),
            CiphertextFault::TooShort => "invalid ciphertext length".to_owned(),
            CiphertextFault::AuthenticationFailed | CiphertextFault::NotAFileKey => {
                "cipher: message authentication failed".to_owned()
            }
        },
        KeyringError::Entropy(_) => return (500, err.to_string()),
        other => other.to_string(),
    };
    (400, text)
}

/// [`refusal`] as a request's error.
pub fn refused(err: &KeyringError, op: Op) -> ApiError {
    let (status, message) = refusal(err, op);
    ApiError::new(status, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_round_trip_and_bad_base64_is_refused() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", &[0, 255, 128, 7, 9]] {
            let text = encode_secret(bytes);
            assert_eq!(
                text,
                base64_reference(bytes),
                "encoding of {bytes:?} differs from RFC 4648"
            );
            assert_eq!(decode_secret(&text).expect("decodes").as_slice(), bytes);
        }
        for bad in ["!!", "aGVsbG8", "aGVsbG8=x", "aGVs bG8="] {
            assert!(decode_secret(bad).is_err(), "{bad:?} accepted");
        }
    }

    /// RFC 4648 base64, written out plainly, to check base64ct against.
    fn base64_reference(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn unknown_fields_are_listed_sorted() {
        let fields: Map<String, Value> =
            serde_json::from_str(r#"{"plaintext":"","zeta":1,"bogus":2}"#).expect("json");
        assert_eq!(
            ignored(&fields, &["plaintext"]),
            ["Endpoint ignored these unrecognized parameters: [bogus zeta]"]
        );
        assert!(ignored(&fields, &["plaintext", "zeta", "bogus"]).is_empty());
    }
}
