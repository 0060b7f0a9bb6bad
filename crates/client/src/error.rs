//! Why a client operation failed.

use aesd_proto::{ErrorCode, ErrorFrame, FrameError};

/// A client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// TLS could not be set up (CA file, server name).
    #[error(transparent)]
    TlsSetup(#[from] crate::tls::TlsSetupError),
    /// The TLS handshake failed: a wrong certificate, or a server that does
    /// not speak TLS on that port.
    #[error("TLS handshake with {addr} failed: {detail}")]
    TlsHandshake {
        /// The server.
        addr: String,
        /// rustls' explanation, with a hint when the server is plain.
        detail: String,
    },
    /// aesd refused to start the TLS handshake (a fatal `access_denied`
    /// alert before any cryptography): this address is over the server's
    /// `tls-handshake-rate`, or waited `handshake-timeout` for a place
    /// among the handshakes in progress.
    #[error(
        "{addr} refused the TLS handshake (alert access_denied): this address started more TLS \
         handshakes than the server allows (its tls-handshake-rate a minute, or 4 at once for \
         longer than its handshake-timeout); retry later, or raise --tls-handshake-rate on the \
         server for load tests from one host"
    )]
    TlsRefused {
        /// The server.
        addr: String,
    },
    /// The local address to connect from could not be bound (not an
    /// address of this host, or no server address of its family).
    #[error("cannot connect from {local}: {source}")]
    Bind {
        /// The local address asked for.
        local: std::net::IpAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server could not be reached.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Connecting took too long.
    #[error("connecting to {addr} timed out after {secs} s")]
    ConnectTimeout {
        /// The address tried.
        addr: String,
        /// The limit.
        secs: f64,
    },
    /// An age file, key or identity is unusable on this side (the file's
    /// header, no identity for any recipient, a bad recipient).
    #[error(transparent)]
    Age(#[from] aesd_age::AgeError),
    /// The server answered with an error frame. Its text is printed with
    /// control characters escaped (see [`crate::printable`]).
    #[error("server error: {}", crate::printable::escape_controls(&.0.to_string()))]
    Server(ErrorFrame),
    /// The server's welcome announced a data limit outside the protocol's
    /// bounds (a server announcing 0 would make every job send nothing).
    #[error("server announced max_data = {max_data}; the protocol allows {min} to {max}")]
    BadDataLimit {
        /// What the server announced.
        max_data: u32,
        /// The protocol's floor.
        min: u32,
        /// The protocol's cap.
        max: u32,
    },
    /// The server's done frame counts other bytes than this client sent or
    /// received: data was lost or added on the way.
    #[error("server's done frame counts {server} {direction} bytes, this client counted {client}")]
    CountMismatch {
        /// `input` (bytes_in) or `output` (bytes_out).
        direction: &'static str,
        /// The server's count.
        server: u64,
        /// The client's count.
        client: u64,
    },
    /// An encryption's output does not start with the header this client
    /// asked for: `Salted__`, then (when this client derived the key) the
    /// salt it sent. Such a file would not decrypt with the password.
    #[error(
        "the server's output starts with {got}, not the {expected} this client asked for: the file would not decrypt"
    )]
    WrongHeader {
        /// The header expected, in hex (`Salted__` and the salt, or
        /// `Salted__` alone when the server chose the salt).
        expected: String,
        /// The bytes that came, in hex.
        got: String,
    },
    /// The server sent nothing (or read nothing) for the idle timeout
    /// during a job.
    #[error("the server was silent for {secs} s {state}")]
    IdleTimeout {
        /// The limit, in seconds.
        secs: f64,
        /// Where.
        state: &'static str,
    },
    /// The connection broke or the server broke the protocol.
    #[error("connection: {0}")]
    Frame(#[from] FrameError),
    /// The server sent a frame that makes no sense at this point.
    #[error("server sent an unexpected {got} frame {state}")]
    Unexpected {
        /// The frame's kind.
        got: &'static str,
        /// Where.
        state: &'static str,
    },
    /// The server closed the connection before the job was done.
    #[error("server closed the connection before the job was done")]
    Closed,
    /// The server requires an access token and none was configured.
    #[error("unauthorized: {addr} requires an access token: pass --token-file")]
    TokenRequired {
        /// The server.
        addr: String,
    },
    /// The server refused the access token.
    #[error("unauthorized: {addr} refused the access token: check --token-file")]
    TokenRejected {
        /// The server.
        addr: String,
        /// The server's answer (code `unauthorized`).
        frame: ErrorFrame,
    },
    /// The peer accepted the connection but does not speak aesd's
    /// protocol: it sent no welcome in time, or something else.
    #[error("{addr} is not an aesd server: {reason}")]
    NotAesd {
        /// The peer.
        addr: String,
        /// What it did instead of welcoming the client.
        reason: String,
    },
    /// The server did not answer the access token in time.
    #[error("{addr} did not answer the access token within {secs} s")]
    AuthTimeout {
        /// The server.
        addr: String,
        /// The limit.
        secs: u64,
    },
    /// The server speaks another protocol version.
    #[error("server speaks protocol version {0}; this client speaks 1")]
    Version(u16),
    /// Reading the job's input failed.
    #[error("reading input: {0}")]
    Input(std::io::Error),
    /// Writing the job's output failed.
    #[error("writing output: {0}")]
    Output(std::io::Error),
    /// A previous job failed in a way that left this connection unusable.
    #[error("connection unusable after an earlier failure; reconnect")]
    Broken,
    /// A request field is over its protocol limit (e.g. the password).
    #[error("request rejected before sending: {0}")]
    Request(aesd_proto::ProtoError),
    /// Key derivation on the client was required, and the server does not
    /// accept derived keys (an older aesd): the password was not sent.
    #[error(
        "the server does not accept keys derived by the client (key source 2); \
         use --key-derivation auto or server to let it derive them from the password"
    )]
    DerivedKeysUnsupported,
    /// `--key-derivation auto` on a connection without TLS to a server that
    /// does not accept derived keys: it wants the password (key source 1),
    /// which is then not sent, since anyone on the path could read it (or
    /// have flipped the welcome's flag to ask for it).
    #[error(
        "the server does not accept keys derived by the client (its welcome announces no key \
         source 2) and wants the password (key source 1), but this connection is not under \
         TLS: the password was not sent. Connect with --tls-ca FILE (or --tls) to a server \
         started with --tls-cert, or choose --key-derivation server to send the password in \
         the clear anyway"
    )]
    PasswordNeedsTls,
    /// The client's own key derivation failed (no randomness for a salt).
    #[error("deriving the key on the client failed: {0}")]
    KeyDerivation(String),
    /// A data key's or an unwrap's answer is not what was asked for (a
    /// file key, and for a data key a by-name header for the key named
    /// that this file key opens; for a wrapped-only data key that header
    /// alone): nothing was written with it.
    #[error("the server's {operation} answer is unusable: {what}")]
    BadKeyAnswer {
        /// `datakey`, `datakey-wrapped` or `unwrap`.
        operation: &'static str,
        /// What is wrong with it.
        what: &'static str,
    },
    /// No randomness for a local encryption's payload nonce.
    #[error("no randomness for the payload nonce: {0}")]
    Randomness(String),
}

impl ClientError {
    /// The server's error code, when the server reported the failure.
    pub fn server_code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(frame) | ClientError::TokenRejected { frame, .. } => {
                Some(frame.code)
            }
            _ => None,
        }
    }

    /// A short stable name for the kind of failure (for reports).
    pub fn kind(&self) -> &'static str {
        match self {
            ClientError::Connect { .. } | ClientError::ConnectTimeout { .. } => "connect",
            ClientError::Bind { .. } => "bind",
            ClientError::TlsSetup(_) | ClientError::TlsHandshake { .. } => "tls",
            ClientError::TlsRefused { .. } => "busy",
            ClientError::TokenRequired { .. }
            | ClientError::TokenRejected { .. }
            | ClientError::AuthTimeout { .. } => "unauthorized",
            ClientError::Server(frame) => frame.code.name(),
            ClientError::Frame(_) | ClientError::Closed | ClientError::Broken => "connection",
            ClientError::Unexpected { .. }
            | ClientError::NotAesd { .. }
            | ClientError::Version(_)
            | ClientError::BadDataLimit { .. }
            | ClientError::CountMismatch { .. }
            | ClientError::WrongHeader { .. }
            | ClientError::BadKeyAnswer { .. } => "protocol",
            ClientError::IdleTimeout { .. } => "timeout",
            ClientError::Input(_) => "input",
            ClientError::Output(_) => "output",
            ClientError::Request(_) => "request",
            ClientError::DerivedKeysUnsupported
            | ClientError::PasswordNeedsTls
            | ClientError::KeyDerivation(_)
            | ClientError::Randomness(_) => "key",
            ClientError::Age(_) => "age",
        }
    }
}
