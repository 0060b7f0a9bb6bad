//! Transit's ciphertext text form: `vault:v` + key version + `:` +
//! standard base64 of `nonce || ciphertext || tag`. The same form comes
//! back from `transit/encrypt` and goes into `transit/decrypt`.

use base64ct::{Base64, Encoding};

use crate::CiphertextFault;

/// The prefix of every Transit ciphertext, before the version.
pub const PREFIX: &str = "vault:v";

/// Formats `sealed` (`nonce || ciphertext || tag`) made with `version`.
pub fn format(version: u32, sealed: &[u8]) -> String {
    // Encoded in place after the prefix: one buffer, no copy of the
    // base64 (Transit's batches make thousands of these a second).
    let prefix = format!("{PREFIX}{version}:");
    let mut out = vec![0; prefix.len() + Base64::encoded_len(sealed)];
    out[..prefix.len()].copy_from_slice(prefix.as_bytes());
    let encoded = Base64::encode(sealed, &mut out[prefix.len()..])
        .map(str::len)
        .expect("the buffer is encoded_len long");
    debug_assert_eq!(prefix.len() + encoded, out.len());
    String::from_utf8(out).expect("the prefix and base64 are ASCII")
}

/// Splits a Transit ciphertext into its version and the decoded
/// `nonce || ciphertext || tag` (length not checked here).
pub fn parse(text: &str) -> Result<(u32, Vec<u8>), CiphertextFault> {
    let (version, payload) = split(text)?;
    let sealed = Base64::decode_vec(payload).map_err(|_| CiphertextFault::BadBase64)?;
    Ok((version, sealed))
}

/// The version of a Transit ciphertext and its base64 payload, not
/// decoded (the prefix's checks only: no copy of the payload).
pub fn split(text: &str) -> Result<(u32, &str), CiphertextFault> {
    let rest = text
        .strip_prefix(PREFIX)
        .ok_or(CiphertextFault::MalformedPrefix)?;
    let (version, payload) = rest
        .split_once(':')
        .ok_or(CiphertextFault::MalformedPrefix)?;
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CiphertextFault::MalformedVersion);
    }
    let version: u32 = version
        .parse()
        .map_err(|_| CiphertextFault::MalformedVersion)?;
    if version == 0 {
        return Err(CiphertextFault::MalformedVersion);
    }
    Ok((version, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let text = format(7, &[1, 2, 3, 255]);
        assert_eq!(text, "vault:v7:AQID/w==");
        assert_eq!(parse(&text), Ok((7, vec![1, 2, 3, 255])));
    }

    #[test]
    fn malformed_forms_refused_by_kind() {
        let cases = [
            ("AQID", CiphertextFault::MalformedPrefix),
            ("vault:AQID", CiphertextFault::MalformedPrefix),
            ("vault:v1AQID", CiphertextFault::MalformedPrefix),
            ("bao:v1:AQID", CiphertextFault::MalformedPrefix),
            ("vault:v:AQID", CiphertextFault::MalformedVersion),
            ("vault:v0:AQID", CiphertextFault::MalformedVersion),
            ("vault:v-1:AQID", CiphertextFault::MalformedVersion),
            ("vault:v+1:AQID", CiphertextFault::MalformedVersion),
            ("vault:v99999999999:AQID", CiphertextFault::MalformedVersion),
            ("vault:v1:AQ!D", CiphertextFault::BadBase64),
            ("vault:v1:AQI", CiphertextFault::BadBase64),
            ("vault:v1:AQID:x", CiphertextFault::BadBase64),
        ];
        for (text, fault) in cases {
            assert_eq!(parse(text), Err(fault), "{text}");
        }
    }
}
