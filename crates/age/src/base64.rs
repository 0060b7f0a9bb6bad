//! The header's base64: standard alphabet, no padding, canonical only
//! (RFC 4648 section 3.5: a decoder must refuse non-zero trailing bits and
//! `=`).

use alloc::string::String;
use alloc::vec::Vec;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;

/// Encodes `bytes` without padding.
pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD_NO_PAD.encode(bytes)
}

/// Decodes canonical unpadded base64; `None` for anything else.
pub(crate) fn decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.contains(&b'=') {
        return None;
    }
    let bytes = STANDARD_NO_PAD.decode(text).ok()?;
    // The engine already refuses trailing bits; re-encoding makes the
    // canonical-form rule explicit rather than a property of its settings.
    (encode(&bytes).as_bytes() == text).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_unpadded_base64_decodes() {
        assert_eq!(decode(b"AQI").as_deref(), Some(&[1u8, 2][..]));
        assert_eq!(decode(b"").as_deref(), Some(&[][..]));
        assert_eq!(decode(b"AQI="), None, "padding");
        assert_eq!(decode(b"AQJ"), None, "non-zero trailing bits");
        assert_eq!(decode(b"AQ I"), None, "a space");
        assert_eq!(decode(b"A"), None, "a lone sextet");
    }
}
