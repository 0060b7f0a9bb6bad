//! A small blocking HTTP/1.1 client of OpenBao's API (another aesd's or
//! OpenBao's), for the transit seal and for the `aesd` subcommands that
//! talk to a running aesd: one `POST` per connection over
//! `std::net::TcpStream` (`Connection: close`), with timeouts, a bounded
//! reply and every buffer that held the token or a key wiped. Enough for
//! OpenBao's JSON replies (a `Content-Length` body or one that ends with
//! the connection); plain HTTP only.

mod address;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use zeroize::Zeroizing;

pub use address::HttpAddress;

/// Why a request got no HTTP reply.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// No TCP connection (refused, no route, timeout, unknown host).
    #[error("cannot reach {address}: {source}")]
    Unreachable {
        /// The server's address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// Connected, but the request or the reply did not get through in
    /// time.
    #[error("{address} did not answer: {source}")]
    NoAnswer {
        /// The server's address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The reply is not HTTP/1.x this client reads.
    #[error("not an HTTP reply: {0}")]
    BadReply(String),
}

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one read or write may wait.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest reply read (OpenBao's replies here are a few hundred
/// bytes; a batch check of the audit chain a few KiB).
pub const MAX_REPLY: usize = 64 << 10;

/// A reply: its status and its body (wiped when dropped).
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Zeroizing<Vec<u8>>,
}

/// Sends `POST path` with `body` (JSON) and `X-Vault-Token: token`.
pub fn post(
    address: &HttpAddress,
    path: &str,
    token: &[u8],
    body: &[u8],
) -> Result<Reply, HttpClientError> {
    let unreachable = |source: std::io::Error| HttpClientError::Unreachable {
        address: address.to_string(),
        source,
    };
    let mut stream = connect(address).map_err(unreachable)?;
    let no_answer = |source: std::io::Error| HttpClientError::NoAnswer {
        address: address.to_string(),
        source,
    };
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(no_answer)?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nX-Vault-Token: ",
        address.host_header(),
        body.len()
    );
    let mut request = Zeroizing::new(Vec::with_capacity(
        head.len() + token.len() + 4 + body.len(),
    ));
    request.extend_from_slice(head.as_bytes());
    request.extend_from_slice(token);
    request.extend_from_slice(b"\r\n\r\n");
    request.extend_from_slice(body);
    stream.write_all(&request).map_err(no_answer)?;
    // Allocated once at its largest: a reallocation would leave a copy
    // of the reply (the root key, for decrypt) unwiped.
    let mut raw = Zeroizing::new(Vec::with_capacity(MAX_REPLY + 1));
    (&mut stream)
        .take(MAX_REPLY as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(no_answer)?;
    if raw.len() > MAX_REPLY {
        return Err(HttpClientError::BadReply(format!(
            "longer than {MAX_REPLY} bytes"
        )));
    }
    parse_reply(&raw)
}

fn connect(address: &HttpAddress) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in (address.host.as_str(), address.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address")
    }))
}

/// Splits a whole HTTP/1.1 reply into its status and body.
fn parse_reply(raw: &[u8]) -> Result<Reply, HttpClientError> {
    let bad = |why: &str| HttpClientError::BadReply(why.to_owned());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of the header"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("a header that is not text"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| bad("not an HTTP/1.x status line"))?;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("a header line without ':'"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") && !value.eq_ignore_ascii_case("identity")
        {
            return Err(bad("a chunked body (not supported)"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| bad("a Content-Length that is not a number"))?,
            );
        }
    }
    let body = &raw[end + 4..];
    let body = match length {
        Some(len) if len > body.len() => return Err(bad("a body shorter than its Content-Length")),
        Some(len) => &body[..len],
        None => body,
    };
    Ok(Reply {
        status,
        body: Zeroizing::new(body.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_by_content_length_or_to_the_end() {
        let reply = parse_reply(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx: y\r\n\r\n{}trailing")
            .unwrap_or_else(|_| panic!("parses"));
        assert_eq!((reply.status, reply.body.as_slice()), (200, &b"{}"[..]));
        let reply = parse_reply(b"HTTP/1.0 503 Service Unavailable\r\n\r\n{\"errors\":[]}")
            .unwrap_or_else(|_| panic!("parses"));
        assert_eq!(reply.status, 503);
        assert_eq!(reply.body.as_slice(), b"{\"errors\":[]}");
    }

    #[test]
    fn malformed_replies_are_refused_saying_why() {
        for (raw, why) in [
            (&b"HTTP/1.1 200 OK\r\n"[..], "no end of the header"),
            (b"SSH-2.0\r\n\r\n", "status line"),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", "status line"),
            (b"HTTP/1.1 200 OK\r\nbad\r\n\r\n", "without ':'"),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                "chunked",
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}", "shorter"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                "not a number",
            ),
        ] {
            let err = parse_reply(raw).err().expect("refused").to_string();
            assert!(err.contains(why), "{err}");
        }
    }
}
