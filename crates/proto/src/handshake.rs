//! The hello a client sends first: magic and protocol version.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "AESD" (41 45 53 44)
//! 4       2     protocol version, big-endian (1)
//! 6       2     flags: bit 0 = the client can send derived keys (key
//!               source 2); the other bits are reserved and must be 0
//! ```
//!
//! The server answers with a [`Welcome`](crate::Welcome) frame, or with an
//! error frame (`bad_magic`, `unsupported_version`) and closes.

use crate::error::ProtoError;

/// The four bytes every connection starts with.
pub const MAGIC: [u8; 4] = *b"AESD";

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// Length of the hello in bytes.
pub const HELLO_LEN: usize = 8;

/// Hello flag bit 0: the client can send key source 2 (a key it derived
/// itself), so the server may announce it in the welcome.
pub const HELLO_DERIVED_KEYS: u16 = 1;

/// The client's opening bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The protocol version the client speaks.
    pub version: u16,
    /// The client can derive keys itself and send them (key source 2);
    /// a server that accepts them says so in its welcome. A client that
    /// does not set this never sees the welcome flag, so clients written
    /// before key source 2 keep working.
    pub derived_keys: bool,
}

impl Hello {
    /// The hello this crate's clients send: [`PROTOCOL_VERSION`], able to
    /// send derived keys.
    pub fn current() -> Self {
        Hello {
            version: PROTOCOL_VERSION,
            derived_keys: true,
        }
    }

    /// The hello of a client that only knows key source 1 (passwords), as
    /// clients before key source 2 sent it.
    pub fn password_only() -> Self {
        Hello {
            version: PROTOCOL_VERSION,
            derived_keys: false,
        }
    }

    /// The hello's bytes on the wire.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut bytes = [0u8; HELLO_LEN];
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[4..6].copy_from_slice(&self.version.to_be_bytes());
        let flags = if self.derived_keys {
            HELLO_DERIVED_KEYS
        } else {
            0
        };
        bytes[6..8].copy_from_slice(&flags.to_be_bytes());
        bytes
    }

    /// Parses a hello; fails on a wrong magic or reserved flag bits set.
    /// Whether the version is supported is for the server to decide.
    pub fn decode(bytes: &[u8; HELLO_LEN]) -> Result<Self, ProtoError> {
        let found = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if found != MAGIC {
            return Err(ProtoError::BadMagic { found });
        }
        let flags = u16::from_be_bytes([bytes[6], bytes[7]]);
        if flags & !HELLO_DERIVED_KEYS != 0 {
            return Err(ProtoError::ReservedFlags(flags));
        }
        Ok(Hello {
            version: u16::from_be_bytes([bytes[4], bytes[5]]),
            derived_keys: flags & HELLO_DERIVED_KEYS != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips() {
        let hello = Hello::current();
        assert_eq!(Hello::decode(&hello.encode()), Ok(hello));
    }

    #[test]
    fn wrong_magic_is_rejected_with_the_bytes_seen() {
        let err = Hello::decode(b"GET / HT").unwrap_err();
        assert_eq!(err, ProtoError::BadMagic { found: *b"GET " });
    }

    #[test]
    fn both_hellos_round_trip_and_differ_in_bit_0() {
        let plain = Hello::password_only();
        assert_eq!(Hello::decode(&plain.encode()), Ok(plain));
        assert_eq!(plain.encode()[6..], [0, 0]);
        assert_eq!(Hello::current().encode()[6..], [0, 1]);
    }

    #[test]
    fn reserved_flags_must_be_zero() {
        let mut bytes = Hello::current().encode();
        bytes[7] = 3;
        assert_eq!(Hello::decode(&bytes), Err(ProtoError::ReservedFlags(3)));
        bytes[7] = 0;
        bytes[6] = 0x80;
        assert_eq!(
            Hello::decode(&bytes),
            Err(ProtoError::ReservedFlags(0x8000))
        );
    }
}
