//! A small blocking HTTP/1.1 client of OpenBao's API (another aesd's or
//! OpenBao's), for the transit seal and for the `aesd` subcommands that
//! talk to a running aesd: one `POST` per connection over
//! `std::net::TcpStream` (`Connection: close`), with timeouts, a bounded
//! reply and every buffer that held the token or a key wiped. Enough for
//! OpenBao's JSON replies (a `Content-Length` body or one that ends with
//! the connection). `https://` addresses go over TLS (rustls, the server's
//! certificate checked against a CA file: [`HttpTls`]); rustls's own
//! record buffers, which hold the request and reply in the clear for a
//! moment, are not wiped (they are freed when the connection drops).

mod address;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

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
    /// An `https://` address without a CA to check its certificate by.
    #[error(
        "{address}: https:// needs the CA certificate (PEM) of the server's certificate: {how}"
    )]
    NoCa {
        /// The server's address.
        address: String,
        /// Where to give it (the flag or variable).
        how: &'static str,
    },
    /// The TLS handshake failed (the certificate refused, another
    /// protocol on the port).
    #[error("{address}: TLS: {detail}")]
    Tls {
        /// The server's address.
        address: String,
        /// rustls's reason.
        detail: String,
    },
}

/// How to check an `https://` server: the certificates of a CA file (the
/// server's own self-signed certificate will do).
#[derive(Clone)]
pub struct HttpTls {
    config: Arc<rustls::ClientConfig>,
    /// Where to give the CA file, for [`HttpClientError::NoCa`].
    how: &'static str,
}

impl HttpTls {
    /// Trusts the PEM certificates in `path`; `how` names the flag or
    /// variable that gave it (for errors).
    pub fn from_ca_file(path: &Path, how: &'static str) -> Result<HttpTls, String> {
        let config = crate::tls_client::client_config((path, how), None)?;
        Ok(HttpTls {
            config: Arc::new(config),
            how,
        })
    }
}

impl std::fmt::Debug for HttpTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HttpTls({})", self.how)
    }
}

/// A connection: TCP, or TLS over it.
trait Connection: Read + Write {}
impl<T: Read + Write> Connection for T {}

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

/// Sends `POST path` with `body` (JSON) and `X-Vault-Token: token`;
/// over TLS checked by `tls` when the address is `https://` (which
/// needs it: [`HttpClientError::NoCa`] without).
pub fn post(
    address: &HttpAddress,
    tls: Option<&HttpTls>,
    path: &str,
    token: &[u8],
    body: &[u8],
) -> Result<Reply, HttpClientError> {
    let unreachable = |source: std::io::Error| HttpClientError::Unreachable {
        address: address.to_string(),
        source,
    };
    let no_answer = |source: std::io::Error| match tls_failure(&source) {
        Some(detail) => HttpClientError::Tls {
            address: address.to_string(),
            detail,
        },
        None => HttpClientError::NoAnswer {
            address: address.to_string(),
            source,
        },
    };
    let tcp = connect(address).map_err(unreachable)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| tcp.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(no_answer)?;
    let mut stream: Box<dyn Connection> = if address.tls {
        let tls = tls.ok_or_else(|| HttpClientError::NoCa {
            address: address.to_string(),
            how: "BAO_CACERT or --seal-transit-ca-cert",
        })?;
        let name =
            ServerName::try_from(address.host.clone()).map_err(|_| HttpClientError::Tls {
                address: address.to_string(),
                detail: format!("{:?} is not a DNS name or an IP address", address.host),
            })?;
        let connection =
            rustls::ClientConnection::new(Arc::clone(&tls.config), name).map_err(|err| {
                HttpClientError::Tls {
                    address: address.to_string(),
                    detail: err.to_string(),
                }
            })?;
        Box::new(rustls::StreamOwned::new(connection, tcp))
    } else {
        Box::new(tcp)
    };
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
    stream.flush().map_err(no_answer)?;
    // Allocated once at its largest: a reallocation would leave a copy
    // of the reply (the root key, for decrypt) unwiped.
    let mut raw = Zeroizing::new(Vec::with_capacity(MAX_REPLY + 1));
    let ended = (&mut stream)
        .take(MAX_REPLY as u64 + 1)
        .read_to_end(&mut raw);
    // A TLS server that closes without close_notify: the reply counts
    // only when its Content-Length says it is whole (a cut one is not
    // taken for a short body).
    let cut = match ended {
        Ok(_) => false,
        Err(err) if address.tls && err.kind() == std::io::ErrorKind::UnexpectedEof => true,
        Err(err) => return Err(no_answer(err)),
    };
    if raw.len() > MAX_REPLY {
        return Err(HttpClientError::BadReply(format!(
            "longer than {MAX_REPLY} bytes"
        )));
    }
    let (reply, had_length) = parse_reply(&raw)?;
    if cut && !had_length {
        return Err(HttpClientError::BadReply(
            "the TLS connection ended without close_notify and the reply has no Content-Length"
                .to_owned(),
        ));
    }
    Ok(reply)
}

/// rustls's reason, when an I/O error is a TLS failure.
fn tls_failure(err: &std::io::Error) -> Option<String> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(ToString::to_string)
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

/// Splits a whole HTTP/1.1 reply into its status and body; and whether
/// it had a `Content-Length`.
fn parse_reply(raw: &[u8]) -> Result<(Reply, bool), HttpClientError> {
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
    Ok((
        Reply {
            status,
            body: Zeroizing::new(body.to_vec()),
        },
        length.is_some(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_by_content_length_or_to_the_end() {
        let (reply, had_length) =
            parse_reply(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx: y\r\n\r\n{}trailing")
                .unwrap_or_else(|_| panic!("parses"));
        assert_eq!((reply.status, reply.body.as_slice()), (200, &b"{}"[..]));
        assert!(had_length);
        let (reply, had_length) =
            parse_reply(b"HTTP/1.0 503 Service Unavailable\r\n\r\n{\"errors\":[]}")
                .unwrap_or_else(|_| panic!("parses"));
        assert_eq!(reply.status, 503);
        assert!(!had_length);
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
