//! The PROXY protocol: aesd behind a load balancer (HAProxy's
//! `send-proxy` / `send-proxy-v2`) that tells it who the client is.
//!
//! Connections from the networks of `trusted-proxies` must start with a
//! PROXY header (version 1 or 2) before the hello; the client address it
//! carries then stands for the connection everywhere a rule is per
//! address (the connection caps, the auth-failure throttle) and in the
//! log. A connection from anywhere else that starts with a PROXY header
//! is refused: an untrusted client must not choose its own address.
//!
//! * [`cidr`]: the trusted networks.
//! * [`read`]: reading exactly the header from a socket, with a timeout
//!   (the server's `accept` does it for connections from trusted
//!   proxies);
//!   the header's parser (pure, incremental, bounded) is aesd-core's
//!   [`proxy_header`](aesd_core::proxy_header).

pub mod cidr;
pub mod read;

use std::net::SocketAddr;
use std::time::Duration;

use aesd_proto::ErrorCode;

pub use aesd_core::proxy_header::{self as header, HeaderError};
pub use cidr::{CidrList, TrustedProxies};

/// A connection's PROXY header was missing, wrong or not allowed.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A trusted proxy sent something that is not a valid header.
    #[error("from trusted proxy {proxy}: {source}")]
    Header {
        /// The proxy's address.
        proxy: SocketAddr,
        /// What is wrong with the header.
        source: HeaderError,
    },
    /// A trusted proxy closed the connection inside the header.
    #[error("trusted proxy {proxy} closed the connection after {got} bytes of a PROXY header")]
    Closed {
        /// The proxy's address.
        proxy: SocketAddr,
        /// Bytes received.
        got: usize,
    },
    /// A trusted proxy did not send a whole header in time.
    #[error("trusted proxy {proxy} sent no whole PROXY header within {:.1} s", limit.as_secs_f64())]
    Timeout {
        /// The proxy's address.
        proxy: SocketAddr,
        /// The handshake timeout.
        limit: Duration,
    },
    /// A peer outside `trusted-proxies` sent a PROXY header.
    #[error("PROXY protocol header from {peer}, which is not in trusted-proxies")]
    Untrusted {
        /// The peer's address.
        peer: SocketAddr,
    },
    /// The socket failed while reading the header.
    #[error("reading a PROXY header from {proxy}: {source}")]
    Io {
        /// The proxy's address.
        proxy: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl ProxyError {
    /// The code of the error frame sent before closing: `timeout`,
    /// `malformed` for a header that is broken, `bad_magic` for a
    /// connection that starts with the wrong thing (a hello from a trusted
    /// proxy, a PROXY header from anyone else).
    pub fn code(&self) -> ErrorCode {
        match self {
            ProxyError::Timeout { .. } => ErrorCode::Timeout,
            ProxyError::Header {
                source: HeaderError::NotProxy { .. },
                ..
            }
            | ProxyError::Untrusted { .. } => ErrorCode::BadMagic,
            ProxyError::Closed { .. } => ErrorCode::TruncatedFrame,
            ProxyError::Header { .. } | ProxyError::Io { .. } => ErrorCode::Malformed,
        }
    }

    /// Whether the first bytes of a connection (what the hello reader saw
    /// in place of `AESD`) are the start of a PROXY header.
    pub fn looks_like_header(first: &[u8]) -> bool {
        let len = first.len().min(4);
        len > 0
            && (first[..len] == header::V1_PREFIX[..len]
                || first[..len] == header::V2_SIGNATURE[..len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_tell_broken_headers_from_wrong_starts() {
        let proxy: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let not_proxy = ProxyError::Header {
            proxy,
            source: HeaderError::NotProxy { found: vec![0x41] },
        };
        assert_eq!(not_proxy.code(), ErrorCode::BadMagic);
        let broken = ProxyError::Header {
            proxy,
            source: HeaderError::V1TooLong,
        };
        assert_eq!(broken.code(), ErrorCode::Malformed);
        assert!(ProxyError::looks_like_header(b"PROX"));
        assert!(ProxyError::looks_like_header(b"\r\n\r\n"));
        assert!(!ProxyError::looks_like_header(b"GET "));
        assert!(!ProxyError::looks_like_header(b""));
    }
}
