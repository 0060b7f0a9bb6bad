//! A small blocking client of etcd's v3 API as JSON over HTTP/1.1 (the
//! gRPC gateway every etcd 3.4 serves on its client port: `POST
//! /v3/kv/range`, `/v3/kv/txn`, `/v3/watch`; keys and values base64).
//! One connection per request (`Connection: close`): keyring reads and
//! writes are rare, and a fresh connection is the simplest failover.
//! Plain TCP, or TLS with the cluster's CA and optionally a client
//! certificate (`--etcd-cacert`, `--etcd-cert`, `--etcd-key`).
//!
//! Endpoints are tried in turn from the last one that answered: a
//! connection that fails, times out, or an answer of 502/503/504 (a
//! member without a leader) moves on to the next; an error etcd answers
//! otherwise is returned as it is.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls::pki_types::ServerName;
use serde_json::Value;

use super::location::{Endpoint, EtcdTarget};

/// Time to connect to one endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Time one read or write of a request may take (etcd answers a write
/// it cannot commit, without quorum, after its own request timeout).
pub const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// Largest answer read: a sealed keyring of 8 MiB in base64, and room.
pub const MAX_ANSWER: usize = 12 << 20;

/// Why a request to etcd failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint could be reached, or none had a leader.
    #[error("etcd unreachable: {0}")]
    Unreachable(String),
    /// etcd answered with an error (a request too large, a bad key).
    #[error("etcd at {endpoint} refused the request: HTTP {status}: {message}")]
    Refused {
        /// Which endpoint.
        endpoint: String,
        /// Its HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// An answer that is not what etcd's API gives.
    #[error("etcd at {endpoint}: malformed answer: {reason}")]
    Malformed {
        /// Which endpoint.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
}

/// The TLS files for etcd's client port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTlsFiles {
    /// The CA that signed etcd's server certificates (PEM): TLS is on
    /// when given.
    pub cacert: Option<PathBuf>,
    /// This board's client certificate (PEM), for etcd's
    /// `--client-cert-auth`.
    pub cert: Option<PathBuf>,
    /// Its key (PEM).
    pub key: Option<PathBuf>,
}

/// A byte stream to one endpoint, plain or TLS.
trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// A client of one etcd cluster.
pub struct EtcdClient {
    endpoints: Vec<Endpoint>,
    tls: Option<Arc<rustls::ClientConfig>>,
    preferred: AtomicUsize,
}

impl std::fmt::Debug for EtcdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdClient")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// One attempt at one endpoint.
enum Attempt {
    /// Try the next endpoint.
    Next(String),
    /// Final.
    Done(EtcdError),
}

impl EtcdClient {
    /// A client of `target`'s endpoints; TLS when `tls.cacert` is given.
    pub fn new(target: &EtcdTarget, tls: &EtcdTlsFiles) -> Result<Self, String> {
        let tls = match &tls.cacert {
            Some(cacert) => Some(Arc::new(crate::tls_client::client_config(
                (cacert, "--etcd-cacert"),
                match (tls.cert.as_deref(), tls.key.as_deref()) {
                    (Some(cert), Some(key)) => Some(((cert, "--etcd-cert"), (key, "--etcd-key"))),
                    (None, None) => None,
                    _ => return Err("--etcd-cert and --etcd-key go together".to_owned()),
                },
            )?)),
            None if tls.cert.is_some() || tls.key.is_some() => {
                return Err(
                    "--etcd-cert and --etcd-key need --etcd-cacert (the CA of etcd's server certificate)"
                        .to_owned(),
                );
            }
            None => None,
        };
        Ok(EtcdClient {
            endpoints: target.endpoints.clone(),
            tls,
            preferred: AtomicUsize::new(0),
        })
    }

    /// The endpoints, as `HOST:PORT,...` (for messages).
    pub fn endpoints(&self) -> String {
        let shown: Vec<String> = self.endpoints.iter().map(ToString::to_string).collect();
        shown.join(",")
    }

    /// POSTs `body` to `path` and returns etcd's JSON answer.
    pub fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let body = body.to_string();
        self.each_endpoint(|endpoint| {
            let mut conn = self.send(endpoint, path, &body, IO_TIMEOUT)?;
            let mut answer = Vec::new();
            (&mut conn)
                .take(MAX_ANSWER as u64 + 1)
                .read_to_end(&mut answer)
                .map_err(|err| Attempt::Next(format!("{endpoint}: reading: {err}")))?;
            if answer.len() > MAX_ANSWER {
                return Err(Attempt::Done(malformed(endpoint, "answer above 12 MiB")));
            }
            let (status, chunked, head_len) = parse_head(&answer)
                .ok_or_else(|| Attempt::Next(format!("{endpoint}: no HTTP answer")))?;
            let payload = if chunked {
                let mut decoder = Dechunker::default();
                decoder.feed(&answer[head_len..]);
                decoder.take_payload()
            } else {
                answer.split_off(head_len)
            };
            judge(endpoint, status, &payload)
        })
    }

    /// Opens a streaming request (a watch): the connection after the
    /// answer's head, ready to read messages. Its reads time out after
    /// `poll` ([`WatchRead::Idle`]), so the caller can look around.
    pub fn stream(&self, path: &str, body: &Value, poll: Duration) -> Result<WatchConn, EtcdError> {
        let body = body.to_string();
        self.each_endpoint(|endpoint| {
            let mut conn = self.send(endpoint, path, &body, poll)?;
            let mut head = Vec::new();
            let mut byte = [0u8; 1024];
            let (status, chunked, head_len) = loop {
                if let Some(parsed) = parse_head(&head) {
                    break parsed;
                }
                if head.len() > 64 << 10 {
                    return Err(Attempt::Done(malformed(endpoint, "head above 64 KiB")));
                }
                let n = conn
                    .read(&mut byte)
                    .map_err(|err| Attempt::Next(format!("{endpoint}: reading: {err}")))?;
                if n == 0 {
                    return Err(Attempt::Next(format!(
                        "{endpoint}: closed before answering"
                    )));
                }
                head.extend_from_slice(&byte[..n]);
            };
            if status != 200 {
                let mut rest = head.split_off(head_len);
                let _ = (&mut conn).take(64 << 10).read_to_end(&mut rest);
                return Err(match judge(endpoint, status, &rest) {
                    Ok(_) => Attempt::Done(malformed(endpoint, "watch not accepted")),
                    Err(attempt) => attempt,
                });
            }
            let mut decoder = Dechunker {
                plain: !chunked,
                ..Dechunker::default()
            };
            decoder.feed(&head[head_len..]);
            Ok(WatchConn {
                conn,
                decoder,
                endpoint: endpoint.to_string(),
            })
        })
    }

    fn each_endpoint<T>(
        &self,
        mut attempt: impl FnMut(&Endpoint) -> Result<T, Attempt>,
    ) -> Result<T, EtcdError> {
        let count = self.endpoints.len();
        let start = self.preferred.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for i in 0..count {
            let index = (start + i) % count;
            match attempt(&self.endpoints[index]) {
                Ok(answer) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(Attempt::Next(why)) => failures.push(why),
                Err(Attempt::Done(err)) => return Err(err),
            }
        }
        Err(EtcdError::Unreachable(failures.join("; ")))
    }

    fn send(
        &self,
        endpoint: &Endpoint,
        path: &str,
        body: &str,
        timeout: Duration,
    ) -> Result<Box<dyn Conn>, Attempt> {
        let next = |what: &str, err: io::Error| Attempt::Next(format!("{endpoint}: {what}: {err}"));
        let addrs = (endpoint.bare_host(), endpoint.port)
            .to_socket_addrs()
            .map_err(|err| next("resolving", err))?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        let mut tcp = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(err) => last = err,
            }
        }
        let tcp = tcp.ok_or_else(|| next("connecting", last))?;
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .and_then(|()| tcp.set_nodelay(true))
            .map_err(|err| next("socket options", err))?;
        let mut conn: Box<dyn Conn> = match &self.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = ServerName::try_from(endpoint.bare_host().to_owned()).map_err(|_| {
                    Attempt::Done(EtcdError::Unreachable(format!(
                        "{endpoint}: {:?} is not a name TLS can check",
                        endpoint.host
                    )))
                })?;
                let session = rustls::ClientConnection::new(Arc::clone(config), name)
                    .map_err(|err| Attempt::Next(format!("{endpoint}: TLS: {err}")))?;
                Box::new(rustls::StreamOwned::new(session, tcp))
            }
        };
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes())
            .and_then(|()| conn.flush())
            .map_err(|err| next("sending", err))?;
        Ok(conn)
    }
}

fn malformed(endpoint: &Endpoint, reason: &str) -> EtcdError {
    EtcdError::Malformed {
        endpoint: endpoint.to_string(),
        reason: reason.to_owned(),
    }
}

/// The JSON of a 200, an error otherwise (502-504: try the next one).
fn judge(endpoint: &Endpoint, status: u16, payload: &[u8]) -> Result<Value, Attempt> {
    let json: Option<Value> = serde_json::from_slice(payload).ok();
    if status == 200 {
        return json.ok_or_else(|| Attempt::Done(malformed(endpoint, "answer is not JSON")));
    }
    let message = json
        .as_ref()
        .and_then(|j| j.get("message").or_else(|| j.get("error")))
        .and_then(Value::as_str)
        .map_or_else(
            || String::from_utf8_lossy(&payload[..payload.len().min(200)]).into_owned(),
            ToOwned::to_owned,
        );
    if matches!(status, 502..=504) {
        return Err(Attempt::Next(format!(
            "{endpoint}: HTTP {status}: {message}"
        )));
    }
    Err(Attempt::Done(EtcdError::Refused {
        endpoint: endpoint.to_string(),
        status,
        message,
    }))
}

/// `(status, chunked, head length)` once the head is complete.
fn parse_head(bytes: &[u8]) -> Option<(u16, bool, usize)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    Some((status, chunked, end))
}

/// Decodes HTTP/1.1 chunked transfer coding incrementally (or passes a
/// plain body through).
#[derive(Debug, Default)]
pub struct Dechunker {
    plain: bool,
    pending: Vec<u8>,
    payload: Vec<u8>,
    /// Bytes left in the current chunk (with its CRLF), if inside one.
    left: Option<usize>,
    ended: bool,
}

impl Dechunker {
    /// Takes more bytes off the wire.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.plain {
            self.payload.extend_from_slice(bytes);
            return;
        }
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while !self.ended {
            match self.left {
                Some(left) => {
                    let take = left.min(self.pending.len() - at);
                    let data_left = left.saturating_sub(2);
                    let data = take.min(data_left);
                    self.payload.extend_from_slice(&self.pending[at..at + data]);
                    at += take;
                    self.left = (left > take).then_some(left - take);
                    if self.left.is_some() {
                        break;
                    }
                }
                None => {
                    let Some(eol) = self.pending[at..].windows(2).position(|w| w == b"\r\n") else {
                        break;
                    };
                    let line = &self.pending[at..at + eol];
                    let size = std::str::from_utf8(line)
                        .ok()
                        .and_then(|l| l.split(';').next())
                        .and_then(|hex| usize::from_str_radix(hex.trim(), 16).ok());
                    at += eol + 2;
                    match size {
                        Some(0) | None => self.ended = true,
                        Some(size) => self.left = Some(size + 2),
                    }
                }
            }
        }
        self.pending.drain(..at);
    }

    /// The payload decoded so far (taken).
    pub fn take_payload(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.payload)
    }

    /// Whether the last chunk was seen.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The next newline-terminated message of the payload, if complete.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.payload.iter().position(|b| *b == b'\n')?;
        let mut line: Vec<u8> = self.payload.drain(..=end).collect();
        line.pop();
        Some(line)
    }

    /// Bytes of payload waiting for their newline.
    pub fn buffered(&self) -> usize {
        self.payload.len()
    }
}

/// An open watch stream.
pub struct WatchConn {
    conn: Box<dyn Conn>,
    decoder: Dechunker,
    endpoint: String,
}

/// What a poll of a watch stream gave.
#[derive(Debug)]
pub enum WatchRead {
    /// One message (JSON).
    Message(Value),
    /// Nothing within the poll time.
    Idle,
    /// The stream ended or failed (why).
    Closed(String),
}

/// Longest watch message waiting for its end.
const MAX_WATCH_MESSAGE: usize = MAX_ANSWER;

impl WatchConn {
    /// Which endpoint it is on.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The next message, waiting at most the poll time.
    pub fn next(&mut self) -> WatchRead {
        loop {
            if let Some(line) = self.decoder.next_line() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return match serde_json::from_slice(&line) {
                    Ok(json) => WatchRead::Message(json),
                    Err(err) => WatchRead::Closed(format!("malformed watch message: {err}")),
                };
            }
            if self.decoder.ended() {
                return WatchRead::Closed("the watch stream ended".to_owned());
            }
            if self.decoder.buffered() > MAX_WATCH_MESSAGE {
                return WatchRead::Closed("watch message above 12 MiB".to_owned());
            }
            let mut buf = [0u8; 16 << 10];
            match self.conn.read(&mut buf) {
                Ok(0) => return WatchRead::Closed("etcd closed the watch".to_owned()),
                Ok(n) => self.decoder.feed(&buf[..n]),
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return WatchRead::Idle;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return WatchRead::Closed(format!("reading the watch: {err}")),
            }
        }
    }
}

/// base64 of `bytes` (etcd's JSON carries keys and values so).
pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of a base64 field of etcd's JSON (an absent field is
/// empty, as the gateway omits empty values).
pub fn unb64(json: &Value, field: &str) -> Result<Vec<u8>, String> {
    match json.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => STANDARD
            .decode(text)
            .map_err(|err| format!("{field} is not base64: {err}")),
        Some(_) => Err(format!("{field} is not a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_decode_across_any_split() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n world\n\r\n0\r\n\r\n";
        for split in 0..wire.len() {
            let mut decoder = Dechunker::default();
            decoder.feed(&wire[..split]);
            decoder.feed(&wire[split..]);
            assert!(decoder.ended(), "split {split}");
            assert_eq!(decoder.next_line().as_deref(), Some(&b"hello world"[..]));
            assert_eq!(decoder.next_line(), None);
        }
    }

    #[test]
    fn heads_give_status_and_chunking() {
        let head = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\nrest";
        assert_eq!(parse_head(head), Some((503, true, head.len() - 4)));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\n"), None, "incomplete");
    }

    #[test]
    fn an_unreachable_cluster_names_every_endpoint() {
        // Port 1 on loopback: nothing listens there.
        let target = EtcdTarget {
            endpoints: vec![
                Endpoint {
                    host: "127.0.0.1".into(),
                    port: 1,
                },
                Endpoint {
                    host: "127.0.0.2".into(),
                    port: 1,
                },
            ],
            prefix: "/t".into(),
        };
        let client = EtcdClient::new(&target, &EtcdTlsFiles::default()).expect("client");
        let err = client
            .call("/v3/kv/range", &serde_json::json!({}))
            .expect_err("nothing listens");
        let EtcdError::Unreachable(why) = &err else {
            panic!("{err}");
        };
        assert!(
            why.contains("127.0.0.1:1: connecting") && why.contains("127.0.0.2:1: connecting"),
            "{why}"
        );
    }
}
