//! Keys: the 16-byte file key, X25519 recipients (`age1…`) and identities
//! (`AGE-SECRET-KEY-1…`) in age's Bech32 forms, and the identity and
//! recipient file formats of the `age` command (one per line, `#`
//! comments, blank lines ignored).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use bech32::primitives::decode::CheckedHrpstring;
use bech32::{Bech32, Hrp};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::AgeError;

const RECIPIENT_HRP: &str = "age";
const IDENTITY_HRP: &str = "age-secret-key-";

/// A file's symmetric key: 16 bytes from a CSPRNG, never reused. Wiped
/// when dropped, never printed.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct FileKey([u8; 16]);

impl FileKey {
    /// The key made of `bytes` (which must come from a CSPRNG).
    pub fn new(bytes: [u8; 16]) -> Self {
        FileKey(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for FileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FileKey(<redacted>)")
    }
}

/// An X25519 recipient: a public key, written `age1…`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Recipient([u8; 32]);

impl Recipient {
    /// The recipient with this X25519 public key.
    pub fn from_bytes(public: [u8; 32]) -> Self {
        Recipient(public)
    }

    /// The public key.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses `age1…` (Bech32, lowercase or uppercase, 32 bytes).
    pub fn parse(text: &str) -> Result<Self, AgeError> {
        let bytes =
            decode_bech32(text, RECIPIENT_HRP).map_err(|what| AgeError::BadRecipient { what })?;
        Ok(Recipient(bytes))
    }
}

impl fmt::Display for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        bech32::encode_lower_to_fmt::<Bech32, _>(f, Hrp::parse_unchecked(RECIPIENT_HRP), &self.0)
            .map_err(|_| fmt::Error)
    }
}

/// An X25519 identity: a secret key, written `AGE-SECRET-KEY-1…`. Wiped
/// when dropped, never printed by `Debug`.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Identity([u8; 32]);

impl Identity {
    /// The identity with this X25519 secret (32 bytes from a CSPRNG).
    pub fn from_bytes(secret: [u8; 32]) -> Self {
        Identity(secret)
    }

    /// The secret scalar's bytes.
    pub(crate) fn secret(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses `AGE-SECRET-KEY-1…` (Bech32, 32 bytes).
    pub fn parse(text: &str) -> Result<Self, AgeError> {
        let bytes =
            decode_bech32(text, IDENTITY_HRP).map_err(|what| AgeError::BadIdentity { what })?;
        Ok(Identity(bytes))
    }

    /// The recipient (public key) of this identity.
    pub fn recipient(&self) -> Recipient {
        Recipient(crate::x25519::public_key(&self.0))
    }

    /// The identity as the `age` command writes it (uppercase Bech32):
    /// secret, so the string is wiped when dropped.
    pub fn to_secret_string(&self) -> Zeroizing<String> {
        let mut text = Zeroizing::new(String::new());
        bech32::encode_upper_to_fmt::<Bech32, _>(
            &mut *text,
            Hrp::parse_unchecked(IDENTITY_HRP),
            &self.0,
        )
        .expect("32 bytes fit a Bech32 string");
        text
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity(for {})", self.recipient())
    }
}

/// Decodes Bech32 (not Bech32m) with human-readable part `hrp` (compared
/// without case) carrying exactly 32 bytes.
fn decode_bech32(text: &str, hrp: &str) -> Result<[u8; 32], &'static str> {
    let checked = CheckedHrpstring::new::<Bech32>(text.trim())
        .map_err(|_| "not Bech32 (bad characters, mixed case or checksum)")?;
    if !checked.hrp().to_lowercase().eq_ignore_ascii_case(hrp) {
        return Err("wrong prefix");
    }
    let bytes: Vec<u8> = checked.byte_iter().collect();
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| "not 32 bytes")
}

/// The lines of an age key file that carry keys: without comments (`#`)
/// and blank lines, trimmed.
fn key_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// Parses an identity file as `age-keygen` writes it; at least one
/// identity.
pub fn parse_identities(text: &str) -> Result<Vec<Identity>, AgeError> {
    let identities = key_lines(text)
        .map(Identity::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if identities.is_empty() {
        return Err(AgeError::BadIdentity {
            what: "no AGE-SECRET-KEY-1 line in the file",
        });
    }
    Ok(identities)
}

/// Parses a recipients file (`age -R`); at least one recipient.
pub fn parse_recipients(text: &str) -> Result<Vec<Recipient>, AgeError> {
    let recipients = key_lines(text)
        .map(Recipient::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if recipients.is_empty() {
        return Err(AgeError::BadRecipient {
            what: "no age1 line in the file",
        });
    }
    Ok(recipients)
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    /// The spec's example identity and its recipient (C2SP age.md, "The
    /// X25519 recipient type").
    const SPEC_IDENTITY: &str =
        "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX";
    const SPEC_RECIPIENT: &str = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj";

    #[test]
    fn the_spec_identity_has_the_spec_recipient_and_both_round_trip() {
        let identity = Identity::parse(SPEC_IDENTITY).expect("identity");
        assert_eq!(identity.recipient().to_string(), SPEC_RECIPIENT);
        assert_eq!(identity.to_secret_string().as_str(), SPEC_IDENTITY);
        let recipient = Recipient::parse(SPEC_RECIPIENT).expect("recipient");
        assert_eq!(recipient, identity.recipient());
        assert_eq!(
            Recipient::parse(&SPEC_RECIPIENT.to_uppercase()),
            Ok(recipient)
        );
    }

    #[test]
    fn wrong_keys_are_refused_with_the_reason() {
        let mut flipped = SPEC_RECIPIENT.to_string();
        flipped.replace_range(10..11, "q");
        assert_eq!(
            Recipient::parse(&flipped),
            Err(AgeError::BadRecipient {
                what: "not Bech32 (bad characters, mixed case or checksum)"
            })
        );
        assert_eq!(
            Recipient::parse(SPEC_IDENTITY),
            Err(AgeError::BadRecipient {
                what: "wrong prefix"
            })
        );
        assert!(matches!(
            Identity::parse(SPEC_RECIPIENT),
            Err(AgeError::BadIdentity {
                what: "wrong prefix"
            })
        ));
        let debug = alloc::format!("{:?}", Identity::parse(SPEC_IDENTITY).expect("identity"));
        assert!(!debug.contains("GFPYY"), "{debug}");
    }

    #[test]
    fn key_files_skip_comments_and_blank_lines() {
        let file = alloc::format!(
            "# created: 2026-11-25\n# public key: {SPEC_RECIPIENT}\n\n{SPEC_IDENTITY}\n"
        );
        let identities = parse_identities(&file).expect("one identity");
        assert_eq!(identities.len(), 1);
        assert!(matches!(
            parse_identities("# nothing\n"),
            Err(AgeError::BadIdentity { .. })
        ));
        let recipients =
            parse_recipients(&alloc::format!("{SPEC_RECIPIENT}\n# x\n")).expect("one recipient");
        assert_eq!(recipients, [identities[0].recipient()]);
    }
}
