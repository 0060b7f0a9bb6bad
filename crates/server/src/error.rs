//! Why a connection failed, and what the client is told.
//!
//! The protocol's own failures, and a job's, are aesd-core's
//! ([`SessionError`], [`aesd_core::job::JobError`]); here are the ones only
//! a driver meets: the transport, TLS, the PROXY header, the connection
//! caps, the minimum input rate.

use aesd_core::connection::SessionError;
use aesd_proto::{ErrorCode, ErrorFrame, FrameError};

use crate::handshake_rate::RateExceeded;
use crate::input_rate::TooSlow;
use crate::limits::ConnectionRefused;
use crate::proxy::ProxyError;
use crate::tls_gate::NoPlace;

/// A connection failed (and closes).
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The protocol state machine's error (the client broke the protocol,
    /// went silent or away, or its job failed).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The server (or this client) has as many connections open as allowed.
    #[error(transparent)]
    ConnectionsFull(#[from] ConnectionRefused),
    /// A PROXY protocol header was missing, broken or not allowed.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// The port speaks TLS and the client started in the clear.
    #[error(
        "this port requires TLS: connect with --tls or --tls-ca FILE (the server's certificate or its CA)"
    )]
    TlsRequired,
    /// The client started more TLS handshakes than `tls-handshake-rate`
    /// allows (told with a TLS alert: no other channel before the
    /// handshake).
    #[error(transparent)]
    HandshakeRate(#[from] RateExceeded),
    /// A TLS handshake found no place among those in progress within
    /// `handshake-timeout` (told with a TLS alert).
    #[error(transparent)]
    HandshakePlace(#[from] NoPlace),
    /// The TLS handshake failed or timed out (nobody to tell: no channel).
    #[error("TLS handshake failed: {0}")]
    TlsHandshake(String),
    /// A running job's input came slower than `min-input-rate`.
    #[error(transparent)]
    TooSlow(#[from] TooSlow),
    /// The worker pool failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
    /// The transport failed.
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<FrameError> for ConnectionError {
    fn from(err: FrameError) -> Self {
        match err {
            FrameError::Truncated {
                what,
                expected,
                got,
            } => SessionError::Truncated {
                what,
                expected,
                got,
            }
            .into(),
            FrameError::Protocol(err) => SessionError::Protocol(err).into(),
            FrameError::Io(err) => ConnectionError::Io(err),
        }
    }
}

impl ConnectionError {
    /// The code sent to the client.
    pub fn code(&self) -> ErrorCode {
        match self {
            ConnectionError::Session(err) => err.code(),
            ConnectionError::ConnectionsFull(_)
            | ConnectionError::HandshakeRate(_)
            | ConnectionError::HandshakePlace(_) => ErrorCode::Busy,
            ConnectionError::Proxy(err) => err.code(),
            ConnectionError::TlsRequired => ErrorCode::TlsRequired,
            ConnectionError::TooSlow(_) => ErrorCode::Timeout,
            ConnectionError::TlsHandshake(_)
            | ConnectionError::Internal(_)
            | ConnectionError::Io(_) => ErrorCode::Internal,
        }
    }

    /// A stable name for metrics and logs: the error code's name, or
    /// `client_gone`, `io`, `tls_handshake` for failures nobody is told
    /// about.
    pub fn kind(&self) -> &'static str {
        match self {
            ConnectionError::Session(err) => err.kind(),
            ConnectionError::Io(_) => "io",
            ConnectionError::TlsHandshake(_) => "tls_handshake",
            other => other.code().name(),
        }
    }

    /// The error frame sent to the client.
    pub fn to_frame(&self) -> ErrorFrame {
        ErrorFrame::new(self.code(), self.to_string())
    }

    /// Whether the client may still be told. A client that closed its
    /// sending side (end of stream, truncated frame) may still be reading,
    /// so it is told, best effort; after a transport error it is not.
    pub fn peer_reachable(&self) -> bool {
        !matches!(
            self,
            ConnectionError::Io(_)
                | ConnectionError::TlsHandshake(_)
                | ConnectionError::HandshakeRate(_)
                | ConnectionError::HandshakePlace(_)
        )
    }

    /// Whether the connection closes after this error (the protocol's rule
    /// for its code; every error met outside the state machine closes).
    pub fn closes_connection(&self) -> bool {
        match self {
            ConnectionError::Session(err) => err.closes_connection(),
            _ => true,
        }
    }

    /// A client that went away before anything happened: a port probe or
    /// a health check, counted but not worth a warning.
    pub fn is_client_gone(&self) -> bool {
        matches!(self, ConnectionError::Session(SessionError::ClientGone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_failures_are_not_told_and_everything_here_closes() {
        let io = ConnectionError::Io(std::io::Error::other("reset"));
        assert!(!io.peer_reachable());
        assert_eq!(io.kind(), "io");
        let slow = ConnectionError::TooSlow(TooSlow {
            got: 1,
            waited: std::time::Duration::from_secs(10),
            min: 100,
        });
        assert_eq!(slow.code(), ErrorCode::Timeout);
        assert!(slow.closes_connection() && slow.peer_reachable());
        let gone = ConnectionError::Session(SessionError::ClientGone);
        assert_eq!(gone.kind(), "client_gone");
        assert!(gone.is_client_gone());
    }
}
