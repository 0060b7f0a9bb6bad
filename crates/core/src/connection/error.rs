//! Why a connection (or the job on it) failed, as the protocol state
//! machine sees it, and what the client is told.

use std::time::Duration;

use aesd_proto::{ErrorCode, ErrorFrame, ProtoError};

use crate::job::JobError;

/// A connection's failure: the client broke the protocol, went silent or
/// away, the server is stopping, or its job failed ([`SessionError::Job`]).
/// Whether the connection goes on afterwards is the protocol's rule for
/// the code ([`SessionError::closes_connection`]).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
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
    /// The connection ran its maximum number of jobs.
    #[error("this connection ran its maximum of {limit} jobs; reconnect for more")]
    TooManyJobs {
        /// The configured limit (`max-jobs-per-connection`).
        limit: u64,
    },
    /// The server requires an access token and did not get the right one.
    #[error("access token required: {reason}")]
    Unauthorized {
        /// What was wrong (never the token itself).
        reason: &'static str,
    },
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
    /// The job failed.
    #[error(transparent)]
    Job(#[from] JobError),
}

impl SessionError {
    /// The code sent to the client.
    pub fn code(&self) -> ErrorCode {
        match self {
            SessionError::Protocol(err) => err.code(),
            SessionError::Truncated { .. } => ErrorCode::TruncatedFrame,
            SessionError::UnexpectedFrame { .. } => ErrorCode::UnexpectedFrame,
            SessionError::UnsupportedVersion(_) => ErrorCode::UnsupportedVersion,
            SessionError::TooManyJobs { .. } => ErrorCode::JobLimit,
            SessionError::Unauthorized { .. } => ErrorCode::Unauthorized,
            SessionError::ShuttingDown => ErrorCode::ShuttingDown,
            SessionError::Timeout { .. } => ErrorCode::Timeout,
            SessionError::ClientGone => ErrorCode::Internal,
            SessionError::Job(err) => err.code(),
        }
    }

    /// A stable name for metrics and logs: the error code's name, or
    /// `client_gone` for a client nobody is told about.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionError::ClientGone => "client_gone",
            other => other.code().name(),
        }
    }

    /// The error frame sent to the client.
    pub fn to_frame(&self) -> ErrorFrame {
        ErrorFrame::new(self.code(), self.to_string())
    }

    /// Whether the connection must close after this error: what the
    /// protocol says of its code ([`ErrorCode::closes_connection`]; a gone
    /// client is `internal`, which closes).
    pub fn closes_connection(&self) -> bool {
        self.code().closes_connection()
    }
}

/// The error for an empty data frame: PROTOCOL.md says data frames are
/// never empty, and an empty one would cost the server a frame's work
/// without a byte counted against `max-file-size`.
pub fn empty_data_frame() -> SessionError {
    SessionError::Protocol(ProtoError::Malformed {
        kind: "data",
        reason: "a data frame is never empty",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openssl_enc::CipherError;

    #[test]
    fn the_closing_rule_is_the_protocols() {
        // A failed random number generator is `internal`, which closes.
        let rng = SessionError::Job(JobError::Cipher(CipherError::Rng("no entropy".into())));
        assert_eq!(rng.code(), ErrorCode::Internal);
        assert!(rng.closes_connection());
        // The per-connection job limit has its own code, which closes.
        let jobs = SessionError::TooManyJobs { limit: 2 };
        assert_eq!(jobs.code(), ErrorCode::JobLimit);
        assert!(jobs.closes_connection());
        // Job-level errors keep it.
        assert!(
            !SessionError::Job(JobError::Cipher(CipherError::DecryptFailed)).closes_connection()
        );
        assert!(!SessionError::Job(JobError::FileTooLarge { limit: 1 }).closes_connection());
        assert_eq!(SessionError::ClientGone.kind(), "client_gone");
    }
}
