//! Text forms of secrets (key material in the sealed keyring, Shamir
//! shares, tokens) made and read in constant time: base64 with `base64ct`
//! and hex with `base16ct`, which use neither table lookups nor branches
//! on the data. Decoding goes into a buffer that is wiped when dropped,
//! on failure too.
//!
//! Also the serialised form of [`SecretKey`]: standard base64 (44
//! characters) since sealed format 2; format 1 wrote a JSON array of 32
//! numbers (formatted through a digit table indexed by each secret byte),
//! still read so that an older keyring opens and is rewritten in the new
//! form at its next write.

use base64ct::{Base64, Base64UrlUnpadded, Encoding};
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use zeroize::{Zeroize, Zeroizing};

use crate::{KEY_LEN, SecretKey};

/// Bytes of the base64 form of a key: 32 bytes, padded.
const KEY_BASE64_LEN: usize = 44;

/// Why a text form was refused (no more detail: the text may be a
/// secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadText {
    /// Not the encoding (a character outside its alphabet, bad padding).
    Alphabet,
    /// Well formed, but not the number of bytes expected.
    Length,
}

/// Standard base64 of `bytes`, padded.
pub(crate) fn base64(bytes: &[u8]) -> Zeroizing<String> {
    Zeroizing::new(Base64::encode_string(bytes))
}

/// URL-safe base64 of `bytes`, unpadded.
pub(crate) fn base64url(bytes: &[u8]) -> Zeroizing<String> {
    Zeroizing::new(Base64UrlUnpadded::encode_string(bytes))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> Zeroizing<String> {
    Zeroizing::new(base16ct::lower::encode_string(bytes))
}

/// Decodes standard base64 (padded) of exactly `N` bytes.
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub(crate) fn base64_exact<const N: usize>(text: &str) -> Result<Zeroizing<[u8; N]>, BadText> {
    let mut out = Zeroizing::new([0u8; N]);
    let len = Base64::decode(text, &mut out[..])
        .map_err(|err| match err {
            base64ct::Error::InvalidLength => BadText::Length,
            base64ct::Error::InvalidEncoding => BadText::Alphabet,
        })?
        .len();
    if len != N {
        return Err(BadText::Length);
    }
    Ok(out)
}

/// Decodes hex (either case) of exactly `N` bytes.
#[inline(never)] // its own symbol: scripts/cross/ct-functions.txt
pub(crate) fn hex_exact<const N: usize>(text: &str) -> Result<Zeroizing<[u8; N]>, BadText> {
    let mut out = Zeroizing::new([0u8; N]);
    let len = base16ct::mixed::decode(text, &mut out[..])
        .map_err(|err| match err {
            base16ct::Error::InvalidLength => BadText::Length,
            base16ct::Error::InvalidEncoding => BadText::Alphabet,
        })?
        .len();
    if len != N {
        return Err(BadText::Length);
    }
    Ok(out)
}

impl Serialize for SecretKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; KEY_BASE64_LEN];
        let result = match Base64::encode(self.expose(), &mut buf) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => Err(serde::ser::Error::custom("key too long for its buffer")),
        };
        buf.zeroize();
        result
    }
}

impl<'de> Deserialize<'de> for SecretKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// Reads a key as base64 (format 2) or as 32 numbers (format 1).
struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = SecretKey;

    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a key: base64 of 32 bytes, or (format 1) 32 numbers")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<SecretKey, E> {
        base64_exact::<KEY_LEN>(text)
            .map(SecretKey::from_zeroizing)
            .map_err(|_| E::custom("a key is not base64 of 32 bytes"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SecretKey, A::Error> {
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = seq
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(i, &self))?;
        }
        if seq.next_element::<u8>()?.is_some() {
            return Err(de::Error::invalid_length(KEY_LEN + 1, &self));
        }
        Ok(SecretKey::from_zeroizing(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_written_as_base64_and_read_in_both_forms() {
        let bytes: [u8; 32] = core::array::from_fn(|i| (i * 7 + 250) as u8);
        let key = SecretKey::from_bytes(bytes);
        let json = serde_json::to_string(&key).expect("json");
        assert_eq!(json, format!("\"{}\"", Base64::encode_string(&bytes)));
        assert_eq!(serde_json::from_str::<SecretKey>(&json).expect("new"), key);
        let old = serde_json::to_string(&bytes.to_vec()).expect("numbers");
        assert!(old.starts_with("[250,1,8,"), "{old}");
        assert_eq!(serde_json::from_str::<SecretKey>(&old).expect("old"), key);
    }

    #[test]
    fn a_malformed_key_is_refused_without_echoing_it() {
        let short = format!("\"{}\"", Base64::encode_string(&[9u8; 31]));
        let long = format!("\"{}\"", Base64::encode_string(&[9u8; 33]));
        for bad in [
            short.as_str(),
            long.as_str(),
            "\"not base64 at all, not at all, not at all!\"",
            "[1,2,3]",
            &serde_json::to_string(&[1u8; 33].to_vec()).expect("json"),
            "[256,0]",
            "7",
        ] {
            let err = serde_json::from_str::<SecretKey>(bad).expect_err(bad);
            assert!(!err.to_string().contains("CQkJ"), "{err}");
        }
    }

    #[test]
    fn exact_decoders_check_the_length_and_the_alphabet() {
        assert_eq!(*hex_exact::<2>("0aFf").expect("hex"), [0x0a, 0xff]);
        assert_eq!(hex_exact::<2>("0aFfee"), Err(BadText::Length));
        assert_eq!(hex_exact::<2>("0g00"), Err(BadText::Alphabet));
        assert_eq!(*base64_exact::<3>("AQID").expect("b64"), [1, 2, 3]);
        assert_eq!(base64_exact::<3>("AQIDBA=="), Err(BadText::Length));
        assert_eq!(base64_exact::<3>("AQ=="), Err(BadText::Length));
        assert_eq!(base64_exact::<3>("AQ-D"), Err(BadText::Alphabet));
        assert_eq!(&*hex(&[0xab, 1]), "ab01");
        assert_eq!(&*base64url(&[0xfb, 0xff]), "-_8");
    }
}
