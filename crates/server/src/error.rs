//! Why a job or a connection failed, and what the client is told.

use std::time::Duration;

use aesd_proto::{ErrorCode, ErrorFrame, FrameError, ProtoError};

use crate::admission::Refused;
use crate::cipher::CipherError;
use crate::handshake_rate::RateExceeded;
use crate::input_rate::TooSlow;
use crate::kdf_budget::BudgetExceeded;
use crate::limits::ConnectionRefused;
use crate::proxy::ProxyError;

/// A job (or its connection) failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The client broke the protocol (malformed, oversize or unknown frame).
    #[error(transparent)]
    Protocol(#[from] ProtoError),
    /// The client closed the connection in the middle of a frame.
    #[error("client closed the connection after {got} of {expected} bytes of a {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// The client closed the connection in the middle of a job.
    #[error("client disconnected during the job")]
    ClientGone,
    /// A frame arrived that the session's state does not allow.
    #[error("unexpected {got} frame {state}")]
    UnexpectedFrame {
        /// The frame's kind.
        got: &'static str,
        /// Where in the session it came.
        state: &'static str,
    },
    /// The client's protocol version is not spoken here.
    #[error("protocol version {0} is not supported (this server speaks version 1)")]
    UnsupportedVersion(u16),
    /// The job asked for an iteration count outside the configured bounds.
    #[error("PBKDF2 iteration count {got} is outside the allowed range {min}..={max}")]
    IterationsOutOfRange {
        /// Requested.
        got: u32,
        /// Configured minimum.
        min: u32,
        /// Configured maximum.
        max: u32,
    },
    /// The job's input passed the configured maximum file size.
    #[error("input exceeds the maximum file size of {limit} bytes")]
    FileTooLarge {
        /// The configured limit (`max-file-size`).
        limit: u64,
    },
    /// The connection ran its maximum number of jobs.
    #[error("this connection ran its maximum of {limit} jobs; reconnect for more")]
    TooManyJobs {
        /// The configured limit (`max-jobs-per-connection`).
        limit: u64,
    },
    /// The ciphertext is invalid or the password wrong.
    #[error(transparent)]
    Cipher(#[from] CipherError),
    /// An age (format 2) file is invalid, changed, or under another key.
    #[error(transparent)]
    Age(#[from] aesd_age::AgeError),
    /// The admission queue is full.
    #[error(transparent)]
    Busy(#[from] Refused),
    /// The client used up its PBKDF2 budget (`kdf-budget`).
    #[error(transparent)]
    KdfBudget(#[from] BudgetExceeded),
    /// The server (or this client) has as many connections open as allowed.
    #[error(transparent)]
    ConnectionsFull(#[from] ConnectionRefused),
    /// The server requires an access token and did not get the right one.
    #[error("access token required: {reason}")]
    Unauthorized {
        /// What was wrong (never the token itself).
        reason: &'static str,
    },
    /// A PROXY protocol header was missing, broken or not allowed.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// The port speaks TLS and the client started in the clear.
    #[error(
        "this port requires TLS: connect with --tls or --tls-ca FILE (the server's certificate or its CA)"
    )]
    TlsRequired,
    /// The client started more TLS handshakes than `tls-handshake-rate`
    /// allows (nobody to tell: no channel before the handshake).
    #[error(transparent)]
    HandshakeRate(#[from] RateExceeded),
    /// The TLS handshake failed or timed out (nobody to tell: no channel).
    #[error("TLS handshake failed: {0}")]
    TlsHandshake(String),
    /// The server is shutting down.
    #[error("server is shutting down")]
    ShuttingDown,
    /// The client sent nothing (or read nothing) for too long.
    #[error("{what}: no progress for {:.1} s", limit.as_secs_f64())]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// The limit that passed.
        limit: Duration,
    },
    /// A running job's input came slower than `min-input-rate`.
    #[error(transparent)]
    TooSlow(#[from] TooSlow),
    /// The worker pool failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
    /// The transport failed.
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
    /// Another stage of the same job failed first; that error is reported.
    #[error("stage stopped because another stage failed")]
    Aborted,
}

impl From<FrameError> for JobError {
    fn from(err: FrameError) -> Self {
        match err {
            FrameError::Truncated {
                what,
                expected,
                got,
            } => JobError::Truncated {
                what,
                expected,
                got,
            },
            FrameError::Protocol(err) => JobError::Protocol(err),
            FrameError::Io(err) => JobError::Io(err),
        }
    }
}

impl JobError {
    /// The code sent to the client.
    pub fn code(&self) -> ErrorCode {
        match self {
            JobError::Protocol(err) => err.code(),
            JobError::Truncated { .. } => ErrorCode::TruncatedFrame,
            JobError::UnexpectedFrame { .. } => ErrorCode::UnexpectedFrame,
            JobError::UnsupportedVersion(_) => ErrorCode::UnsupportedVersion,
            JobError::IterationsOutOfRange { .. } | JobError::FileTooLarge { .. } => {
                ErrorCode::LimitExceeded
            }
            JobError::TooManyJobs { .. } => ErrorCode::JobLimit,
            JobError::Cipher(CipherError::DecryptFailed) => ErrorCode::DecryptFailed,
            JobError::Cipher(CipherError::Rng(_)) => ErrorCode::Internal,
            JobError::Cipher(_) => ErrorCode::BadCiphertext,
            JobError::Age(err) => age_error_code(err),
            JobError::Busy(_)
            | JobError::ConnectionsFull(_)
            | JobError::KdfBudget(_)
            | JobError::HandshakeRate(_) => ErrorCode::Busy,
            JobError::Unauthorized { .. } => ErrorCode::Unauthorized,
            JobError::Proxy(err) => err.code(),
            JobError::ShuttingDown => ErrorCode::ShuttingDown,
            JobError::TlsRequired => ErrorCode::TlsRequired,
            JobError::TlsHandshake(_) => ErrorCode::Internal,
            JobError::Timeout { .. } | JobError::TooSlow(_) => ErrorCode::Timeout,
            JobError::ClientGone | JobError::Internal(_) | JobError::Io(_) | JobError::Aborted => {
                ErrorCode::Internal
            }
        }
    }

    /// A stable name for metrics and logs: the error code's name, or
    /// `client_gone`, `io`, `aborted` for failures nobody is told about.
    pub fn kind(&self) -> &'static str {
        match self {
            JobError::ClientGone => "client_gone",
            JobError::Io(_) => "io",
            JobError::Aborted => "aborted",
            JobError::TlsHandshake(_) => "tls_handshake",
            other => other.code().name(),
        }
    }

    /// The error frame sent to the client.
    pub fn to_frame(&self) -> ErrorFrame {
        ErrorFrame::new(self.code(), self.to_string())
    }

    /// Whether the connection must close after this error: what the
    /// protocol says of its code ([`ErrorCode::closes_connection`]; errors
    /// nobody is told about, such as a gone client, are `internal` and
    /// close).
    pub fn closes_connection(&self) -> bool {
        self.code().closes_connection()
    }

    /// Whether the client may still be told. A client that closed its
    /// sending side (end of stream, truncated frame) may still be reading,
    /// so it is told, best effort; after a transport error it is not.
    pub fn peer_reachable(&self) -> bool {
        !matches!(
            self,
            JobError::Io(_)
                | JobError::Aborted
                | JobError::TlsHandshake(_)
                | JobError::HandshakeRate(_)
        )
    }
}

/// An age error's code: `decrypt_failed` when the data or the key is
/// wrong (a MAC or a chunk's tag), `malformed` for a recipient key the
/// client sent that cannot be used, `bad_ciphertext` when the input is not
/// a whole age file.
fn age_error_code(err: &aesd_age::AgeError) -> ErrorCode {
    use aesd_age::AgeError;
    match err {
        AgeError::HeaderMac
        | AgeError::ChunkAuthentication { .. }
        | AgeError::NoMatchingIdentity => ErrorCode::DecryptFailed,
        AgeError::BadRecipient { .. } | AgeError::BadIdentity { .. } | AgeError::LowOrderPoint => {
            ErrorCode::Malformed
        }
        AgeError::NotAge
        | AgeError::BadHeader { .. }
        | AgeError::HeaderTooLong
        | AgeError::TruncatedHeader
        | AgeError::BadStanza { .. }
        | AgeError::TruncatedPayload
        | AgeError::TrailingData
        | AgeError::EmptyFinalChunk
        | AgeError::TooManyChunks => ErrorCode::BadCiphertext,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closing_rule_is_the_protocols() {
        // A failed random number generator is `internal`, which closes
        // (it kept the connection open when the rule was written per error).
        let rng = JobError::Cipher(CipherError::Rng("no entropy".into()));
        assert_eq!(rng.code(), ErrorCode::Internal);
        assert!(rng.closes_connection());
        // The per-connection job limit has its own code, which closes.
        let jobs = JobError::TooManyJobs { limit: 2 };
        assert_eq!(jobs.code(), ErrorCode::JobLimit);
        assert!(jobs.closes_connection());
        // Job-level errors keep it.
        assert!(!JobError::Cipher(CipherError::DecryptFailed).closes_connection());
        assert!(!JobError::FileTooLarge { limit: 1 }.closes_connection());
    }
}
