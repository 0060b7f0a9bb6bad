//! Accepting a TLS connection: the client's turn under its handshake rate
//! ([`crate::handshake_rate`]), a place among the handshakes in progress
//! ([`crate::tls_gate`]), both waited for within `handshake-timeout`, then the handshake itself on a thread of its own
//! ([`HandshakeThread`](crate::tls_thread::HandshakeThread)), never on the
//! async runtime's threads.
//!
//! A full handshake is a certificate signature and a key exchange: 8.9 M
//! instructions on the rv32 board, about 90 ms of a 100 MHz core. Run on
//! the runtime's threads, each one would stall every connection those
//! threads serve (jobs' reads and writes, scrapes) for that long. On the
//! handshake thread it stalls nothing but other handshakes, and all of
//! them together take at most one core whatever comes in. The connection
//! is still registered with the runtime's reactor, which wakes the
//! handshake thread when its bytes arrive; the encrypted stream comes back
//! to the runtime once the handshake is done.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::driver::REFUSAL_WRITE_LIMIT;
use crate::error::ConnectionError;
use crate::shared::Shared;
use crate::tls::TlsIdentity;

/// The TLS record a refused handshake gets before the connection closes: a
/// fatal `access_denied` alert (RFC 8446 6.2: "access control was applied
/// and the sender decided not to proceed"), in the clear as every record
/// before the handshake. aescrypt and aesload name it as aesd's refusal;
/// any other TLS client reports the alert, not a reset.
pub const REFUSAL_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49];

/// How much of the client's first flight a refused connection reads (and
/// drops) before closing, so that closing does not reset the connection
/// and lose the alert. A ClientHello is far smaller.
const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// Accepts a connection that starts a TLS handshake: its turn under the
/// client's `tls-handshake-rate`, then a place among the handshakes in
/// progress, each waited for up to `handshake-timeout`, then the handshake
/// on the handshake thread within `handshake-timeout` (a resumed one is
/// given back to the rate). A connection that
/// gets no turn or no place is refused before any cryptography: it gets
/// [`REFUSAL_ALERT`] and is closed. The error is for the session to count
/// and log.
pub async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    tls: &TlsIdentity,
) -> Result<TlsStream<TcpStream>, ConnectionError> {
    let client = shared.client_id(peer.ip());
    let limit = shared.config.handshake_timeout;
    // The turn first: a connection waiting for it holds no place that
    // other clients' handshakes could use.
    if let Err(over) = shared.tls_rate.wait(client, limit).await {
        shared.metrics.connection_refused("tls_handshake_rate");
        tell_refused(stream).await;
        return Err(ConnectionError::HandshakeRate(over));
    }
    let _pass = match shared.tls_handshakes.wait(client, limit).await {
        Ok(pass) => pass,
        Err(no_place) => {
            shared.metrics.connection_refused("tls_handshakes");
            tell_refused(stream).await;
            return Err(ConnectionError::HandshakePlace(no_place));
        }
    };
    let Some(thread) = &shared.tls_thread else {
        return Err(ConnectionError::Internal(
            "TLS configured without a handshake thread".into(),
        ));
    };
    let secured = thread.handshake(tls.acceptor(), stream, limit).await?;
    let kind = secured.get_ref().1.handshake_kind();
    tracing::debug!(%peer, ?kind, "TLS handshake done");
    if kind == Some(rustls::HandshakeKind::Resumed) {
        shared.tls_rate.resumed(client, std::time::Instant::now());
    }
    Ok(secured)
}

/// Sends [`REFUSAL_ALERT`], ends the sending side, and reads what the
/// client sent until it closes, within [`REFUSAL_WRITE_LIMIT`].
async fn tell_refused(mut stream: TcpStream) {
    let told = async {
        stream.write_all(&REFUSAL_ALERT).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < REFUSAL_DRAIN_BYTES {
            match stream.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<(), io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_WRITE_LIMIT, told).await;
}
