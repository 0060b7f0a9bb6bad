//! The one way a connection comes in, from the accepted socket to its
//! driver: the PROXY header (from trusted proxies: who the client is) →
//! the connection caps (per client, in total) → TLS (on a TLS port: the
//! handshake on its own thread, [`tls_accept`]) →
//! [`driver::serve`], which drives the protocol state machine.
//!
//! A connection refused on the way (over the caps: `busy`; a bad PROXY
//! header; a plain client on a TLS port) gets its error frame and is
//! closed; one that closed before sending anything is only counted.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_util::task::TaskTracker;
use tracing::debug;

use aesd_core::connection::SessionError;

use crate::driver::{self, REFUSAL_WRITE_LIMIT};
use crate::error::ConnectionError;
use crate::limits::ConnectionSlot;
use crate::outgoing::Outgoing;
use crate::proxy::{self, ProxyError};
use crate::shared::Shared;
use crate::tls::TLS_HANDSHAKE_BYTE;
use crate::tls_accept;

/// Takes an accepted connection on its way, as a task of `tracker`. A
/// direct connection takes its place under the caps here, in the order
/// connections were accepted; a trusted proxy's once its PROXY header
/// says whose it is.
pub fn accept(stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared>, tracker: &TaskTracker) {
    let shared = Arc::clone(shared);
    if shared.config.trusted_proxies.contains(peer.ip()) {
        tracker.spawn(async move {
            let limit = shared.config.handshake_timeout;
            let mut stream = stream;
            let client = match proxy::read::read_header(&mut stream, peer, limit).await {
                Ok(header) => {
                    let client = header.source.unwrap_or(peer);
                    debug!(%client, proxy = %peer, version = header.version, "PROXY header read");
                    client
                }
                // Connected and closed without a byte: a port probe, not a
                // broken proxy.
                Err(ProxyError::Closed { got: 0, .. }) => {
                    debug!(proxy = %peer, "closed before a PROXY header");
                    let error = SessionError::ClientGone.into();
                    return refuse(stream, peer, error, &shared).await;
                }
                Err(error) => return refuse(stream, peer, error.into(), &shared).await,
            };
            match shared.connections.admit(shared.client_id(client.ip())) {
                Ok(slot) => serve(stream, client, &shared, slot).await,
                Err(refused) => {
                    debug!(%client, proxy = %peer, "refused: {refused}");
                    refuse(stream, client, refused.into(), &shared).await;
                }
            }
        });
        return;
    }
    match shared.connections.admit(shared.client_id(peer.ip())) {
        Ok(slot) => tracker.spawn(async move { serve(stream, peer, &shared, slot).await }),
        Err(refused) => {
            tracker.spawn(async move { refuse(stream, peer, refused.into(), &shared).await })
        }
    };
}

/// Serves a connection under the caps (its `slot`): over TLS on a TLS
/// port, after the handshake; in the clear otherwise.
async fn serve(stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared>, slot: ConnectionSlot) {
    if let Err(err) = stream.set_nodelay(true) {
        debug!(%peer, "cannot set TCP_NODELAY: {err}");
    }
    let Some(tls) = shared.tls.clone() else {
        let (read, write) = stream.into_split();
        driver::serve(read, write, peer, shared, Some(&slot)).await;
        return;
    };
    // A TLS port: the first byte says whether the client starts TLS.
    let limit = shared.config.handshake_timeout;
    let mut first = [0u8; 1];
    let peeked = timeout(limit, stream.peek(&mut first)).await;
    let error = match peeked {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_BYTE => {
            match tls_accept::accept(stream, peer, shared, &tls).await {
                Ok(tls_stream) => {
                    let (read, write) = tokio::io::split(tls_stream);
                    driver::serve(read, write, peer, shared, Some(&slot)).await;
                }
                // No channel to tell the client.
                Err(error) => driver::report_unreachable(peer, &error, shared),
            }
            return;
        }
        Ok(Ok(0)) | Ok(Err(_)) => SessionError::ClientGone.into(),
        Ok(Ok(_)) => ConnectionError::TlsRequired,
        Err(_) => SessionError::Timeout {
            what: "waiting for the TLS handshake",
            limit,
        }
        .into(),
    };
    refuse(stream, peer, error, shared).await;
}

/// Answers a connection refused before its driver with an error frame and
/// closes it. A connection that closed before sending anything is only
/// counted.
async fn refuse(stream: TcpStream, peer: SocketAddr, error: ConnectionError, shared: &Shared) {
    let mut out = Outgoing::new(stream);
    if error.is_client_gone() {
        driver::report_unreachable(peer, &error, shared);
    } else {
        driver::report(&mut out, peer, &error, REFUSAL_WRITE_LIMIT, shared).await;
    }
    let _ = out.shutdown().await;
}
