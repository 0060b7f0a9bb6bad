//! Errors: what can be wrong with bytes from a peer, and the codes a server
//! sends back in an error frame.

use std::fmt;

/// Something in the bytes received from a peer breaks the protocol.
///
/// Every variant maps to the [`ErrorCode`] a server answers with
/// ([`ProtoError::code`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The connection did not start with the `AESD` magic.
    #[error("bad magic: expected \"AESD\", got {found:02x?}")]
    BadMagic {
        /// The four bytes that arrived instead.
        found: [u8; 4],
    },
    /// The reserved flags of the hello were not zero.
    #[error("reserved hello flags must be zero, got {0:#06x}")]
    ReservedFlags(u16),
    /// A frame header named a kind this version does not know.
    #[error("unknown frame kind {0:#04x}")]
    UnknownFrameKind(u8),
    /// A frame header announced more payload than allowed.
    #[error("{kind} frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// Kind of the frame.
        kind: &'static str,
        /// Announced payload length.
        len: u32,
        /// The limit that applies to this kind.
        max: u32,
    },
    /// A payload does not have the layout its kind requires.
    #[error("malformed {kind} frame: {reason}")]
    Malformed {
        /// Kind of the frame.
        kind: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A begin frame named an unknown operation.
    #[error("unknown operation {0}")]
    UnknownOperation(u8),
    /// A begin frame named an unknown file format.
    #[error("unknown format {0}")]
    UnknownFormat(u8),
    /// A begin frame named an unknown key source.
    #[error("unknown key source {0}")]
    UnknownKeySource(u8),
    /// A variable-length field is longer than its cap.
    #[error("{field} of {len} bytes exceeds the limit of {max} bytes")]
    FieldTooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// Its cap.
        max: usize,
    },
}

impl ProtoError {
    /// The code a server sends back for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProtoError::BadMagic { .. } => ErrorCode::BadMagic,
            ProtoError::ReservedFlags(_) | ProtoError::Malformed { .. } => ErrorCode::Malformed,
            ProtoError::UnknownFrameKind(_) => ErrorCode::UnexpectedFrame,
            ProtoError::FrameTooLarge { .. } | ProtoError::FieldTooLong { .. } => {
                ErrorCode::FrameTooLarge
            }
            ProtoError::UnknownOperation(_) => ErrorCode::UnknownOperation,
            ProtoError::UnknownFormat(_) => ErrorCode::UnknownFormat,
            ProtoError::UnknownKeySource(_) => ErrorCode::UnknownKeySource,
        }
    }
}

/// Why a job or connection failed, as sent in an error frame.
///
/// Codes are stable on the wire; a code this version does not know decodes
/// as [`ErrorCode::Other`] so newer servers stay readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The connection did not start with the `AESD` magic.
    BadMagic,
    /// The client's protocol version is not one the server speaks.
    UnsupportedVersion,
    /// A frame or field exceeded its size limit.
    FrameTooLarge,
    /// The peer closed the connection in the middle of a frame.
    TruncatedFrame,
    /// A frame arrived that is not allowed in the session's current state
    /// (for example data before begin), or its kind is unknown.
    UnexpectedFrame,
    /// A frame's payload does not have the layout of its kind.
    Malformed,
    /// The begin frame named an unknown operation.
    UnknownOperation,
    /// The begin frame named an unknown file format.
    UnknownFormat,
    /// The begin frame named an unknown key source.
    UnknownKeySource,
    /// A parameter is outside what the server allows (for example the
    /// PBKDF2 iteration count).
    LimitExceeded,
    /// The server requires an access token, and none or a wrong one came.
    Unauthorized,
    /// The connection ran the server's maximum number of jobs per
    /// connection; a new connection may run more.
    JobLimit,
    /// The port speaks TLS and the client sent a plain hello (sent in the
    /// clear, before the connection closes).
    TlsRequired,
    /// Decryption failed: wrong password or corrupted data (deliberately
    /// not told apart).
    DecryptFailed,
    /// The ciphertext is structurally invalid: no `Salted__` header, or a
    /// length that is not a whole number of blocks.
    BadCiphertext,
    /// The server's keyring is sealed (or it has none): by-name jobs wait
    /// for an unseal.
    Sealed,
    /// A by-name job named a key the keyring does not hold.
    UnknownKey,
    /// The file's key version is below the key's `min_decryption_version`
    /// (or was trimmed away).
    KeyVersionRetired,
    /// The file names a key version the keyring has not created yet.
    KeyVersionNotCreated,
    /// The connection's keyring token does not grant this operation on
    /// this key (its policies).
    PermissionDenied,
    /// A by-name job without a keyring token, or with one the keyring does
    /// not know (wrong, revoked or expired).
    BadKeyToken,
    /// The server's audit log (`--audit-log`) cannot be written: by-name
    /// jobs are refused, before any key is used, until it can.
    AuditFailed,
    /// The server's admission queue is full; try again later.
    Busy,
    /// The server is shutting down.
    ShuttingDown,
    /// The peer was idle for longer than the server allows.
    Timeout,
    /// An internal server error.
    Internal,
    /// A code this version does not know.
    Other(u16),
}

impl ErrorCode {
    /// The code's number on the wire.
    pub fn to_wire(self) -> u16 {
        match self {
            ErrorCode::BadMagic => 1,
            ErrorCode::UnsupportedVersion => 2,
            ErrorCode::FrameTooLarge => 3,
            ErrorCode::TruncatedFrame => 4,
            ErrorCode::UnexpectedFrame => 5,
            ErrorCode::Malformed => 6,
            ErrorCode::UnknownOperation => 7,
            ErrorCode::UnknownFormat => 8,
            ErrorCode::UnknownKeySource => 9,
            ErrorCode::LimitExceeded => 10,
            ErrorCode::Unauthorized => 11,
            ErrorCode::JobLimit => 12,
            ErrorCode::TlsRequired => 13,
            ErrorCode::DecryptFailed => 20,
            ErrorCode::BadCiphertext => 21,
            ErrorCode::Sealed => 40,
            ErrorCode::UnknownKey => 41,
            ErrorCode::KeyVersionRetired => 42,
            ErrorCode::KeyVersionNotCreated => 43,
            ErrorCode::PermissionDenied => 44,
            ErrorCode::BadKeyToken => 45,
            ErrorCode::AuditFailed => 46,
            ErrorCode::Busy => 30,
            ErrorCode::ShuttingDown => 31,
            ErrorCode::Timeout => 32,
            ErrorCode::Internal => 99,
            ErrorCode::Other(code) => code,
        }
    }

    /// The code for a number on the wire.
    pub fn from_wire(code: u16) -> Self {
        match code {
            1 => ErrorCode::BadMagic,
            2 => ErrorCode::UnsupportedVersion,
            3 => ErrorCode::FrameTooLarge,
            4 => ErrorCode::TruncatedFrame,
            5 => ErrorCode::UnexpectedFrame,
            6 => ErrorCode::Malformed,
            7 => ErrorCode::UnknownOperation,
            8 => ErrorCode::UnknownFormat,
            9 => ErrorCode::UnknownKeySource,
            10 => ErrorCode::LimitExceeded,
            11 => ErrorCode::Unauthorized,
            12 => ErrorCode::JobLimit,
            13 => ErrorCode::TlsRequired,
            20 => ErrorCode::DecryptFailed,
            21 => ErrorCode::BadCiphertext,
            40 => ErrorCode::Sealed,
            41 => ErrorCode::UnknownKey,
            42 => ErrorCode::KeyVersionRetired,
            43 => ErrorCode::KeyVersionNotCreated,
            44 => ErrorCode::PermissionDenied,
            45 => ErrorCode::BadKeyToken,
            46 => ErrorCode::AuditFailed,
            30 => ErrorCode::Busy,
            31 => ErrorCode::ShuttingDown,
            32 => ErrorCode::Timeout,
            99 => ErrorCode::Internal,
            other => ErrorCode::Other(other),
        }
    }

    /// Whether the server closes the connection after sending this error
    /// during a session (after the welcome): the one definition both sides
    /// use (PROTOCOL.md's error table, checked by its vector test). Only
    /// the job-level errors keep it open: the server discards the rest of
    /// the job's input and the client may begin another job. Unknown codes
    /// close. (Before the welcome, any error closes the connection.)
    pub fn closes_connection(self) -> bool {
        !matches!(
            self,
            ErrorCode::LimitExceeded
                | ErrorCode::DecryptFailed
                | ErrorCode::BadCiphertext
                | ErrorCode::Busy
                | ErrorCode::Sealed
                | ErrorCode::UnknownKey
                | ErrorCode::KeyVersionRetired
                | ErrorCode::KeyVersionNotCreated
                | ErrorCode::PermissionDenied
                | ErrorCode::AuditFailed
        )
    }

    /// A stable snake_case name, for logs and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadMagic => "bad_magic",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::TruncatedFrame => "truncated_frame",
            ErrorCode::UnexpectedFrame => "unexpected_frame",
            ErrorCode::Malformed => "malformed",
            ErrorCode::UnknownOperation => "unknown_operation",
            ErrorCode::UnknownFormat => "unknown_format",
            ErrorCode::UnknownKeySource => "unknown_key_source",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::JobLimit => "job_limit",
            ErrorCode::TlsRequired => "tls_required",
            ErrorCode::DecryptFailed => "decrypt_failed",
            ErrorCode::BadCiphertext => "bad_ciphertext",
            ErrorCode::Sealed => "sealed",
            ErrorCode::UnknownKey => "unknown_key",
            ErrorCode::KeyVersionRetired => "key_version_retired",
            ErrorCode::KeyVersionNotCreated => "key_version_not_created",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::BadKeyToken => "bad_key_token",
            ErrorCode::AuditFailed => "audit_failed",
            ErrorCode::Busy => "busy",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(_) => "other",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Other(code) => write!(f, "error code {code}"),
            known => f.write_str(known.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_number() {
        for wire in 0..=200u16 {
            assert_eq!(ErrorCode::from_wire(wire).to_wire(), wire);
        }
        assert_eq!(ErrorCode::from_wire(30), ErrorCode::Busy);
        assert_eq!(ErrorCode::from_wire(7777), ErrorCode::Other(7777));
    }
}
