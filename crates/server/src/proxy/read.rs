//! Reads a PROXY header off a connection: exactly its bytes (the hello
//! behind it stays unread), at most [`header::V1_MAX_LEN`] or
//! [`header::V2_FIXED_LEN`] + [`header::V2_MAX_PAYLOAD`] bytes, within a
//! time limit for the whole header.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::ProxyError;
use aesd_core::proxy_header::{self as header, Parsed, ProxyHeader};

/// Reads the header `proxy` sends first on `stream`; fails when it is
/// missing, malformed, cut short or not whole within `limit`.
pub async fn read_header<R: AsyncRead + Unpin>(
    stream: &mut R,
    proxy: SocketAddr,
    limit: Duration,
) -> Result<ProxyHeader, ProxyError> {
    tokio::time::timeout(limit, read_untimed(stream, proxy))
        .await
        .map_err(|_| ProxyError::Timeout { proxy, limit })?
}

async fn read_untimed<R: AsyncRead + Unpin>(
    stream: &mut R,
    proxy: SocketAddr,
) -> Result<ProxyHeader, ProxyError> {
    let mut bytes = Vec::with_capacity(header::V2_FIXED_LEN);
    loop {
        match header::parse(&bytes).map_err(|source| ProxyError::Header { proxy, source })? {
            Parsed::Complete(header, _) => return Ok(header),
            Parsed::Incomplete(more) => {
                let have = bytes.len();
                bytes.resize(have + more, 0);
                let mut filled = have;
                while filled < bytes.len() {
                    let read = stream
                        .read(&mut bytes[filled..])
                        .await
                        .map_err(|source| ProxyError::Io { proxy, source })?;
                    if read == 0 {
                        return Err(ProxyError::Closed { proxy, got: filled });
                    }
                    filled += read;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::HeaderError;

    fn proxy() -> SocketAddr {
        "127.0.0.1:40000".parse().expect("addr")
    }

    async fn read(mut input: &[u8]) -> (Result<ProxyHeader, ProxyError>, usize) {
        let total = input.len();
        let result = read_header(&mut input, proxy(), Duration::from_secs(1)).await;
        (result, total - input.len())
    }

    #[tokio::test]
    async fn reads_exactly_the_header() {
        let header = ProxyHeader::tcp(
            "127.0.0.9:1234".parse().expect("addr"),
            "127.0.0.1:7878".parse().expect("addr"),
        );
        for mut bytes in [header.to_v1(), header.to_v2()] {
            let len = bytes.len();
            bytes.extend(b"AESD\0\x01\0\x01");
            let (result, consumed) = read(&bytes).await;
            assert_eq!(result.expect("header").source, header.source);
            assert_eq!(consumed, len, "the hello stays unread");
        }
    }

    #[tokio::test]
    async fn a_missing_header_is_refused_after_five_bytes() {
        let (result, consumed) = read(b"AESD\0\x01\0\x01").await;
        assert!(matches!(
            result,
            Err(ProxyError::Header {
                source: HeaderError::NotProxy { .. },
                ..
            })
        ));
        assert_eq!(consumed, 5);
    }

    #[tokio::test]
    async fn cut_short_and_silent_proxies_fail() {
        let (result, _) = read(b"PROXY TCP4 1.2.3.4").await;
        assert!(matches!(result, Err(ProxyError::Closed { got: 18, .. })));
        let (mut silent, _keep) = tokio::io::duplex(64);
        let started = std::time::Instant::now();
        let result = read_header(&mut silent, proxy(), Duration::from_millis(50)).await;
        assert!(matches!(result, Err(ProxyError::Timeout { .. })));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
