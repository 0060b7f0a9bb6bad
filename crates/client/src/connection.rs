//! A connection to aesd: connect, handshake, then jobs (see [`crate::job`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use aesd_proto::handshake::PROTOCOL_VERSION;
use aesd_proto::limits::{MAX_FRAME_PAYLOAD, MIN_DATA_CHUNK};
use aesd_proto::{
    AuthToken, ErrorCode, FrameError, FrameReader, FrameWriter, Hello, Message, Welcome,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};

use crate::error::ClientError;
use crate::tls::TlsSettings;

/// The connection's reading side: TCP, or TLS over TCP.
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The connection's writing side: TCP, or TLS over TCP.
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// How to connect: an access token for servers that require one, TLS for
/// servers started with `--tls-cert`.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Sent when the server's welcome asks for a token.
    pub token: Option<AuthToken>,
    /// TLS, for a server whose port speaks it.
    pub tls: Option<TlsSettings>,
    /// The local address connections come from (bound before connecting,
    /// any port); `None` lets the system choose. Load from several source
    /// addresses looks like several clients to aesd's per-client limits.
    pub bind: Option<IpAddr>,
}

/// How long [`Client::connect`] waits for the TCP connection and welcome.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client waits for the answer to its access token. A server
/// delays a wrong token's answer (by default 1 s, doubling per recent
/// failure up to 32 s), so this is longer than [`CONNECT_TIMEOUT`].
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a job waits, by default, for the server's next frame (the
/// first answer to begin, output, done) or for the server to take the
/// next input frame. Waiting in the server's queue, after a queued frame,
/// is not limited: the server reports positions only as they move.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// An open, handshaken connection to an aesd server.
pub struct Client {
    pub(crate) reader: FrameReader<ReadHalf>,
    pub(crate) writer: FrameWriter<WriteHalf>,
    pub(crate) welcome: Welcome,
    pub(crate) broken: bool,
    pub(crate) idle_timeout: Duration,
    /// The server's address when the connection is not under TLS.
    pub(crate) cleartext_peer: Option<SocketAddr>,
    /// The connection is under TLS (the password may be sent when the
    /// server wants it: [`KeyDerivation::Auto`](crate::KeyDerivation)).
    pub(crate) tls: bool,
}

impl Client {
    /// Connects to `addr` (`host:port`) and performs the handshake, for a
    /// server that requires no access token.
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        Self::connect_with_token(addr, None).await
    }

    /// Connects to `addr` (`host:port`) and performs the handshake; sends
    /// `token` when the server's welcome asks for one. A server that asks
    /// for a token when `token` is `None` is a
    /// [`ClientError::TokenRequired`]; a token for a server that requires
    /// none is not sent.
    pub async fn connect_with_token(
        addr: &str,
        token: Option<&AuthToken>,
    ) -> Result<Client, ClientError> {
        let options = ConnectOptions {
            token: token.cloned(),
            tls: None,
            bind: None,
        };
        Self::connect_with(addr, &options).await
    }

    /// Connects to `addr` (`host:port`) with `options`: TLS first when
    /// given, then the handshake, then the token when the server asks.
    pub async fn connect_with(addr: &str, options: &ConnectOptions) -> Result<Client, ClientError> {
        Self::connect_within(addr, options, CONNECT_TIMEOUT).await
    }

    /// [`Client::connect_with`] with `limit` for the TCP connection and,
    /// separately, for the welcome: a peer that accepts the connection
    /// but sends no welcome within `limit` (or sends something else) is
    /// [`ClientError::NotAesd`].
    pub async fn connect_within(
        addr: &str,
        options: &ConnectOptions,
        limit: Duration,
    ) -> Result<Client, ClientError> {
        let token = options.token.as_ref();
        let mut client =
            Self::connect_inner(addr, options.tls.as_ref(), options.bind, limit).await?;
        if client.welcome.token_required {
            let token = token.ok_or_else(|| ClientError::TokenRequired {
                addr: addr.to_owned(),
            })?;
            tokio::time::timeout(AUTH_TIMEOUT, client.authenticate(addr, token))
                .await
                .map_err(|_| ClientError::AuthTimeout {
                    addr: addr.to_owned(),
                    secs: AUTH_TIMEOUT.as_secs(),
                })??;
        }
        Ok(client)
    }

    async fn authenticate(&mut self, addr: &str, token: &AuthToken) -> Result<(), ClientError> {
        self.writer
            .send(&Message::Auth(token.clone()))
            .await
            .map_err(|err| match err {
                FrameError::Protocol(err) => ClientError::Request(err),
                other => ClientError::Frame(other),
            })?;
        match self.reader.read_message().await? {
            Some(Message::Authorized) => Ok(()),
            Some(Message::Error(error)) if error.code == ErrorCode::Unauthorized => {
                Err(ClientError::TokenRejected {
                    addr: addr.to_owned(),
                    frame: error,
                })
            }
            Some(Message::Error(error)) => Err(ClientError::Server(error)),
            Some(other) => Err(ClientError::Unexpected {
                got: other.kind().name(),
                state: "instead of authorized",
            }),
            None => Err(ClientError::Closed),
        }
    }

    async fn connect_inner(
        addr: &str,
        tls: Option<&TlsSettings>,
        bind: Option<IpAddr>,
        limit: Duration,
    ) -> Result<Client, ClientError> {
        let stream = tokio::time::timeout(limit, tcp_connect(addr, bind))
            .await
            .map_err(|_| ClientError::ConnectTimeout {
                addr: addr.to_owned(),
                secs: limit.as_secs_f64(),
            })??;
        let Some(tls) = tls else {
            // The TCP connection is up: from here the time limit is the
            // welcome's, and a peer that misses it is no aesd.
            let not_aesd = |reason: String| ClientError::NotAesd {
                addr: addr.to_owned(),
                reason,
            };
            return match tokio::time::timeout(limit, Client::over(stream)).await {
                Err(_) => Err(not_aesd(format!(
                    "it accepted the connection but sent no welcome within {} s",
                    limit.as_secs_f64()
                ))),
                Ok(Err(ClientError::Frame(FrameError::Protocol(err)))) => {
                    Err(not_aesd(format!("it answered with something else ({err})")))
                }
                Ok(Err(ClientError::Frame(FrameError::Truncated { .. }) | ClientError::Closed)) => {
                    Err(not_aesd(
                        "it closed the connection without a welcome".to_owned(),
                    ))
                }
                Ok(result) => result,
            };
        };
        let secured = async {
            let _ = stream.set_nodelay(true);
            let (connector, name) = tls.for_addr(addr)?;
            let stream = connector
                .connect(name, stream)
                .await
                .map_err(|err| tls_error(addr, &err))?;
            let (read, write) = tokio::io::split(stream);
            let mut client = Client::handshake(Box::new(read), Box::new(write)).await?;
            client.tls = true;
            Ok(client)
        };
        tokio::time::timeout(limit, secured)
            .await
            .map_err(|_| ClientError::ConnectTimeout {
                addr: addr.to_owned(),
                secs: limit.as_secs_f64(),
            })?
    }

    /// Handshakes over a stream that is already connected: one that went
    /// through a tunnel, or on which a test wrote a PROXY header first.
    pub async fn over(stream: TcpStream) -> Result<Client, ClientError> {
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().ok();
        let (read, write) = stream.into_split();
        let mut client = Client::handshake(Box::new(read), Box::new(write)).await?;
        client.cleartext_peer = peer;
        Ok(client)
    }

    /// The hello and welcome over a connected byte stream.
    async fn handshake(read: ReadHalf, write: WriteHalf) -> Result<Client, ClientError> {
        // Output chunks are the input chunk plus at most a block of carry
        // and a block of padding; accept anything up to the protocol cap.
        let mut reader = FrameReader::new(read, MAX_FRAME_PAYLOAD);
        let mut writer = FrameWriter::new(write);
        writer.send_hello(Hello::current()).await?;
        let welcome = match reader.read_message().await? {
            Some(Message::Welcome(welcome)) => welcome,
            Some(Message::Error(error)) => return Err(ClientError::Server(error)),
            Some(other) => {
                return Err(ClientError::Unexpected {
                    got: other.kind().name(),
                    state: "instead of the welcome",
                });
            }
            None => return Err(ClientError::Closed),
        };
        if welcome.version != PROTOCOL_VERSION {
            return Err(ClientError::Version(welcome.version));
        }
        check_data_limit(welcome.max_data)?;
        Ok(Client {
            reader,
            writer,
            welcome,
            broken: false,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            cleartext_peer: None,
            tls: false,
        })
    }

    /// A warning when this connection carries jobs in the clear to a
    /// server that is not on this host: the key and IV of key source 2 (or
    /// the password of key source 1) and the file then cross the network
    /// readable by anyone on the path. `None` under TLS or to a loopback
    /// address.
    pub fn cleartext_warning(&self) -> Option<String> {
        cleartext_warning(self.cleartext_peer?)
    }

    /// The server's welcome: its name and data limit.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Sets how long a job waits for the server before failing with
    /// [`ClientError::IdleTimeout`] (default [`DEFAULT_IDLE_TIMEOUT`]).
    pub fn set_idle_timeout(&mut self, limit: Duration) {
        self.idle_timeout = limit;
    }

    /// Closes the connection cleanly.
    pub async fn close(mut self) {
        let _ = self.writer.shutdown().await;
    }

    /// Closes the connection's sending side as [`Client::close`] does,
    /// for a caller that holds the client borrowed and has more to do
    /// before it drops it (aescrypt's rewrap copies the payload after the
    /// server's last answer: the server need not keep the connection for
    /// that). No job runs on it afterwards ([`ClientError::Broken`]).
    pub async fn shutdown_writes(&mut self) {
        let _ = self.writer.shutdown().await;
        self.broken = true;
    }
}

/// A TCP connection to `addr` (`host:port`), from `bind` when given: the
/// socket is bound to that address (any port) before it connects, to the
/// first of `addr`'s addresses of the same family.
async fn tcp_connect(addr: &str, bind: Option<IpAddr>) -> Result<TcpStream, ClientError> {
    let connect_error = |source| ClientError::Connect {
        addr: addr.to_owned(),
        source,
    };
    let Some(local) = bind else {
        return TcpStream::connect(addr).await.map_err(connect_error);
    };
    let peer = tokio::net::lookup_host(addr)
        .await
        .map_err(connect_error)?
        .find(|peer| peer.is_ipv4() == local.is_ipv4())
        .ok_or_else(|| ClientError::Bind {
            local,
            source: std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                format!("{addr} has no address of the same family"),
            ),
        })?;
    let socket = match local {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .and_then(|socket| socket.bind(SocketAddr::new(local, 0)).map(|()| socket))
    .map_err(|source| ClientError::Bind { local, source })?;
    socket.connect(peer).await.map_err(connect_error)
}

/// Parses a `--server HOST:PORT` argument: a host (a name, an IPv4
/// address or a bracketed IPv6 address) and a port from 1 to 65535.
/// Refused at parse time, so a missing port is not found by every client
/// failing to connect.
pub fn parse_server_address(text: &str) -> Result<String, String> {
    let missing_port =
        || format!("{text:?} has no port: give HOST:PORT (aesd listens on 7878 by default)");
    let (host, port) = match text.rsplit_once(':') {
        Some((host, _)) if host.contains(':') && !host.starts_with('[') => {
            return Err(format!(
                "{text:?}: write an IPv6 address in brackets, [ADDR]:PORT"
            ));
        }
        Some((host, _)) if !host.ends_with(']') && host.starts_with('[') => {
            return Err(missing_port());
        }
        Some((host, port)) => (host, port),
        None => return Err(missing_port()),
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("{text:?} has no host: give HOST:PORT"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(text.to_owned()),
        _ => Err(format!(
            "{text:?}: the port must be a number from 1 to 65535"
        )),
    }
}

/// The warning [`Client::cleartext_warning`] gives for a plain connection
/// to `peer`; `None` for loopback (127.0.0.0/8, ::1, IPv4-mapped loopback).
pub fn cleartext_warning(peer: SocketAddr) -> Option<String> {
    if peer.ip().to_canonical().is_loopback() {
        return None;
    }
    Some(format!(
        "warning: {peer} is not this host and the connection is not encrypted: the key and IV (or the password) and the file cross the network in the clear; use --tls-ca FILE (or --tls) with a server started with --tls-cert"
    ))
}

/// Parses a `--timeout SECS` argument: a number of seconds above 0
/// (fractions allowed), at most a billion.
pub fn parse_idle_timeout(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 1e9 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!(
            "expected a number of seconds above 0, got {text:?}"
        )),
    }
}

/// A welcome's `max_data` must lie within the protocol's bounds: with 0 a
/// client would send no input at all, above the cap no frame could carry it.
fn check_data_limit(max_data: u32) -> Result<(), ClientError> {
    if (MIN_DATA_CHUNK..=MAX_FRAME_PAYLOAD).contains(&max_data) {
        Ok(())
    } else {
        Err(ClientError::BadDataLimit {
            max_data,
            min: MIN_DATA_CHUNK,
            max: MAX_FRAME_PAYLOAD,
        })
    }
}

/// A failed handshake, in words that name the fix: a pin that does not
/// match, a refusal by aesd (its TLS alert: [`ClientError::TlsRefused`]),
/// or a server that answered something that is not TLS (a plain aesd
/// answers a TLS hello with an error frame).
fn tls_error(addr: &str, err: &std::io::Error) -> ClientError {
    let cause = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let detail = match cause {
        Some(rustls::Error::AlertReceived(rustls::AlertDescription::AccessDenied)) => {
            return ClientError::TlsRefused {
                addr: addr.to_owned(),
            };
        }
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) => other
            .0
            .downcast_ref::<crate::cert_pin::PinMismatch>()
            .map(ToString::to_string),
        _ => None,
    };
    ClientError::TlsHandshake {
        addr: addr.to_owned(),
        detail: detail.unwrap_or_else(|| tls_failure(err)),
    }
}

/// rustls' own words, with a hint when the server is not TLS.
fn tls_failure(err: &std::io::Error) -> String {
    let text = err.to_string();
    let not_tls = text.contains("InvalidContentType")
        || text.contains("corrupt message")
        || text.contains("InvalidMessage");
    if not_tls {
        format!(
            "{text}: the server does not speak TLS on this port (is it started with --tls-cert?)"
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleartext_to_another_host_is_warned_about_and_loopback_is_not() {
        let warning = cleartext_warning("192.0.2.7:7878".parse().expect("addr")).expect("warned");
        assert!(
            warning.contains("192.0.2.7:7878") && warning.contains("--tls"),
            "{warning}"
        );
        assert!(cleartext_warning("[2001:db8::1]:7878".parse().expect("addr")).is_some());
        for local in [
            "127.0.0.1:7878",
            "127.3.2.1:1",
            "[::1]:7878",
            "[::ffff:127.0.0.1]:7878",
        ] {
            assert_eq!(
                cleartext_warning(local.parse().expect("addr")),
                None,
                "{local}"
            );
        }
    }

    #[test]
    fn data_limits_outside_the_protocol_bounds_are_refused() {
        for bad in [0, 1, MIN_DATA_CHUNK - 1, MAX_FRAME_PAYLOAD + 1, u32::MAX] {
            assert!(
                matches!(check_data_limit(bad), Err(ClientError::BadDataLimit { max_data, .. }) if max_data == bad),
                "{bad}"
            );
        }
        for good in [MIN_DATA_CHUNK, 65_536, MAX_FRAME_PAYLOAD] {
            assert!(check_data_limit(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn server_addresses_need_a_host_and_a_port() {
        for good in ["127.0.0.1:7878", "board.local:1", "[::1]:7878"] {
            assert_eq!(parse_server_address(good).as_deref(), Ok(good), "{good}");
        }
        for bad in [
            "127.0.0.1",
            "board",
            ":7878",
            "h:0",
            "h:70000",
            "h:x",
            "::1",
            "[::1]",
            "[]:1",
        ] {
            assert!(parse_server_address(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_server_address("127.0.0.1"),
            Err(
                "\"127.0.0.1\" has no port: give HOST:PORT (aesd listens on 7878 by default)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn timeouts_parse_as_positive_seconds() {
        assert_eq!(parse_idle_timeout("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_idle_timeout("60"), Ok(DEFAULT_IDLE_TIMEOUT));
        for bad in ["0", "-1", "x", "inf", "NaN"] {
            assert!(parse_idle_timeout(bad).is_err(), "{bad}");
        }
    }
}
