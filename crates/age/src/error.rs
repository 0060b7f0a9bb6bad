//! What can go wrong reading or writing an age file.

use core::fmt;

/// An age error: each way a file, a key or a stream can be wrong has its
/// own variant, so a caller can say which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgeError {
    /// The input does not start with `age-encryption.org/v1` and a line
    /// feed (not an age file, or another version).
    NotAge,
    /// The header is malformed: `what` says where.
    BadHeader {
        /// The rule the header broke.
        what: &'static str,
    },
    /// The header is longer than [`crate::MAX_HEADER_LEN`] bytes.
    HeaderTooLong,
    /// The header ended before its MAC line (the input stopped).
    TruncatedHeader,
    /// An X25519 stanza is malformed (arguments, share or body length).
    BadStanza {
        /// The rule the stanza broke.
        what: &'static str,
    },
    /// None of the identities given unwraps any stanza of the header.
    NoMatchingIdentity,
    /// The input is an ASCII-armored age file (`age -a`: a
    /// `-----BEGIN AGE ENCRYPTED FILE-----` line, then base64), which this
    /// crate does not read.
    Armored,
    /// The armor of an armored file breaks a rule of its strict form
    /// (see [`crate::armor`]).
    BadArmor {
        /// The line where it does, from 1.
        line: u32,
        /// The rule it breaks.
        what: &'static str,
    },
    /// The file is encrypted to a passphrase (`age -p`: an `scrypt`
    /// stanza), and identities were given to decrypt it.
    Passphrase,
    /// The file is not encrypted to a passphrase (no `scrypt` stanza), and
    /// a passphrase was given to decrypt it.
    NotPassphrase,
    /// An scrypt stanza is malformed (arguments, salt, work factor, body),
    /// or not the only stanza of its header.
    BadScryptStanza {
        /// The rule the stanza broke.
        what: &'static str,
    },
    /// The scrypt stanza's work factor is above the limit: refused before
    /// any work (the cost doubles with each step).
    WorkFactorTooHigh {
        /// The file's log2 N.
        log_n: u32,
        /// The highest log2 N accepted.
        max: u32,
    },
    /// The passphrase does not unwrap the file key (a wrong passphrase, or
    /// a changed stanza).
    WrongPassphrase,
    /// The header's MAC does not match the file key: the header was
    /// changed, or the file key is wrong.
    HeaderMac,
    /// A recipient string is not `age1…` Bech32 of 32 bytes.
    BadRecipient {
        /// What is wrong with it.
        what: &'static str,
    },
    /// An identity is not `AGE-SECRET-KEY-1…` Bech32 of 32 bytes.
    BadIdentity {
        /// What is wrong with it (never the key itself).
        what: &'static str,
    },
    /// An X25519 computation gave the all-zero shared secret (a low-order
    /// share or recipient): refused, as the spec requires.
    LowOrderPoint,
    /// A payload chunk failed to authenticate: the data was changed,
    /// reordered or cut, or the key is wrong. No byte of that chunk is
    /// released.
    ChunkAuthentication {
        /// The chunk's index, from 0.
        chunk: u64,
    },
    /// The payload ended before a final chunk (truncation at a chunk
    /// boundary, or a missing payload nonce).
    TruncatedPayload,
    /// Data follows the final chunk.
    TrailingData,
    /// The final chunk is empty although it is not the only one.
    EmptyFinalChunk,
    /// The payload has more chunks than the 11-byte counter allows.
    TooManyChunks,
}

impl fmt::Display for AgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgeError::NotAge => f.write_str("not an age v1 file (no age-encryption.org/v1 line)"),
            AgeError::BadHeader { what } => write!(f, "malformed age header: {what}"),
            AgeError::HeaderTooLong => write!(
                f,
                "age header longer than {} bytes",
                crate::header::MAX_HEADER_LEN
            ),
            AgeError::TruncatedHeader => f.write_str("age header cut short (no --- MAC line)"),
            AgeError::BadStanza { what } => write!(f, "malformed X25519 stanza: {what}"),
            AgeError::NoMatchingIdentity => {
                f.write_str("no identity matches any recipient of the file")
            }
            AgeError::Armored => f.write_str(
                "an ASCII-armored age file (age -a: -----BEGIN AGE ENCRYPTED FILE-----) given to \
                 the binary header reader: decode its armor first (aesd_age::armor)",
            ),
            AgeError::BadArmor { line, what } => {
                write!(f, "malformed age armor (age -a) at line {line}: {what}")
            }
            AgeError::Passphrase => f.write_str(
                "the age file is encrypted with a passphrase (age -p: an scrypt stanza), not to \
                 an identity: decrypt it with a passphrase (--pass, or the prompt) instead of \
                 --identity",
            ),
            AgeError::NotPassphrase => f.write_str(
                "the age file is not encrypted with a passphrase (no scrypt stanza): decrypt it \
                 with --identity FILE",
            ),
            AgeError::BadScryptStanza { what } => write!(f, "malformed scrypt stanza: {what}"),
            AgeError::WorkFactorTooHigh { log_n, max } => write!(
                f,
                "the passphrase file's scrypt work factor is 2^{log_n} (log2 N = {log_n}), above \
                 the limit 2^{max} (age's own default): refused before any work (each step \
                 doubles the time and memory; 2^22 already takes 4 GiB)"
            ),
            AgeError::WrongPassphrase => f.write_str(
                "the passphrase does not decrypt the age file (wrong passphrase, or a changed file)",
            ),
            AgeError::HeaderMac => {
                f.write_str("age header MAC mismatch (header changed, or wrong file key)")
            }
            AgeError::BadRecipient { what } => write!(f, "bad age recipient: {what}"),
            AgeError::BadIdentity { what } => write!(f, "bad age identity: {what}"),
            AgeError::LowOrderPoint => f.write_str("X25519 gave an all-zero shared secret"),
            AgeError::ChunkAuthentication { chunk } => write!(
                f,
                "age payload chunk {chunk} failed to authenticate (changed, reordered, cut, or wrong key)"
            ),
            AgeError::TruncatedPayload => f.write_str("age payload cut short (no final chunk)"),
            AgeError::TrailingData => f.write_str("data after the age payload's final chunk"),
            AgeError::EmptyFinalChunk => f.write_str("empty final chunk after other chunks"),
            AgeError::TooManyChunks => f.write_str("age payload longer than its chunk counter"),
        }
    }
}

impl core::error::Error for AgeError {}

/// The class of a failure as the age test suite (C2SP's CCTV age vectors,
/// their `expect:` line) names it, so that results can be compared with it
/// and with other implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// `header failure`: the header, a stanza or a key breaks a rule.
    Header,
    /// `HMAC failure`: the header's MAC does not match.
    Hmac,
    /// `armor failure`: the ASCII armor breaks a rule.
    Armor,
    /// `payload failure`: the payload does not authenticate or is cut.
    Payload,
    /// `no match`: no identity or passphrase given unwraps the file key.
    NoMatch,
}

impl FailureClass {
    /// The suite's name of the class (its `expect:` value).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Header => "header failure",
            FailureClass::Hmac => "HMAC failure",
            FailureClass::Armor => "armor failure",
            FailureClass::Payload => "payload failure",
            FailureClass::NoMatch => "no match",
        }
    }
}

impl AgeError {
    /// The test suite's class of this error (see [`FailureClass`]).
    pub fn class(&self) -> FailureClass {
        match self {
            AgeError::NotAge
            | AgeError::BadHeader { .. }
            | AgeError::HeaderTooLong
            | AgeError::TruncatedHeader
            | AgeError::BadStanza { .. }
            | AgeError::BadScryptStanza { .. }
            | AgeError::WorkFactorTooHigh { .. }
            | AgeError::BadRecipient { .. }
            | AgeError::BadIdentity { .. }
            | AgeError::LowOrderPoint => FailureClass::Header,
            AgeError::HeaderMac => FailureClass::Hmac,
            AgeError::Armored | AgeError::BadArmor { .. } => FailureClass::Armor,
            AgeError::NoMatchingIdentity
            | AgeError::Passphrase
            | AgeError::NotPassphrase
            | AgeError::WrongPassphrase => FailureClass::NoMatch,
            AgeError::ChunkAuthentication { .. }
            | AgeError::TruncatedPayload
            | AgeError::TrailingData
            | AgeError::EmptyFinalChunk
            | AgeError::TooManyChunks => FailureClass::Payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FailureClass;
    use crate::{ArmorDecoder, FileKey, HeaderReader, PayloadDecryptor, PayloadEncryptor};
    use alloc::vec::Vec;

    /// Failures the crate's own readers report, in the suite's classes.
    #[test]
    fn failures_are_in_the_test_suites_classes() {
        let header = HeaderReader::new()
            .push(b"Salted__12345678")
            .expect_err("not age");
        assert_eq!(header.class(), FailureClass::Header);
        assert_eq!(header.class().as_str(), "header failure");

        let mut decoded = Vec::new();
        let armor = ArmorDecoder::new()
            .push(b"-----BEGIN AGE ENCRYPTED FILE-----\n!!!!\n", &mut decoded)
            .expect_err("not base64");
        assert_eq!(armor.class().as_str(), "armor failure");

        let key = FileKey::new([7; 16]);
        let mut sealed = Vec::new();
        let mut encryptor = PayloadEncryptor::new(&key, [1; 16]);
        encryptor.push(b"payload", &mut sealed).expect("push");
        encryptor.finish(&mut sealed).expect("finish");
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        let mut opened = Vec::new();
        let mut decryptor = PayloadDecryptor::new(key);
        let payload = decryptor
            .push(&sealed, &mut opened)
            .and_then(|()| decryptor.finish(&mut opened))
            .expect_err("changed tag");
        assert_eq!(payload.class().as_str(), "payload failure");
        assert!(opened.is_empty());

        assert_eq!(super::AgeError::HeaderMac.class().as_str(), "HMAC failure");
        assert_eq!(
            super::AgeError::NoMatchingIdentity.class().as_str(),
            "no match"
        );
    }
}
