//! A bound on TLS handshakes in progress: in all ([`MAX_HANDSHAKES`]) and
//! per client ([`MAX_PER_CLIENT`]).
//!
//! A handshake costs the server a certificate signature and a key exchange
//! (8.9 M instructions on the rv32 board) and runs on the async runtime's
//! threads. Without a bound, one address opening connections that start a
//! handshake keeps those threads and the CPU busy for everyone. A
//! connection that finds no place waits for one ([`HandshakeGate::wait`]),
//! in order of the places freed, up to `handshake-timeout`: ten clients
//! starting at once from one host (the study's `basic2`) all get their
//! turn. One that still finds none is refused before any cryptography
//! (see [`crate::tls_accept`]: its client is told with a TLS alert).
//! Resumed handshakes (see `tls`) are cheap, but take a place like others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::client_id::ClientId;

/// TLS handshakes in progress at once.
pub const MAX_HANDSHAKES: usize = 16;
/// TLS handshakes in progress at once for one client.
pub const MAX_PER_CLIENT: usize = 4;

/// Why a handshake got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GateFull {
    /// [`MAX_HANDSHAKES`] handshakes are in progress.
    #[error("{MAX_HANDSHAKES} TLS handshakes are in progress")]
    All,
    /// [`MAX_PER_CLIENT`] handshakes of this client are in progress.
    #[error("{MAX_PER_CLIENT} TLS handshakes of {0} are in progress")]
    Client(ClientId),
}

/// A handshake waited for a place as long as it may and found none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "TLS handshake refused: {full} and none ended within {:.1} s (handshake-timeout)",
    waited.as_secs_f64()
)]
pub struct NoPlace {
    /// Why the last try found no place.
    pub full: GateFull,
    /// How long it waited.
    pub waited: Duration,
}

/// Handshakes in progress, in all and per client.
#[derive(Debug, Default)]
pub struct HandshakeGate {
    open: Mutex<(usize, HashMap<ClientId, usize>)>,
    /// Woken each time a place is freed.
    freed: Notify,
}

/// A handshake's place; freed when dropped.
#[derive(Debug)]
pub struct HandshakePass {
    gate: Arc<HandshakeGate>,
    client: ClientId,
}

impl HandshakeGate {
    /// A place for a handshake of `client`, if both bounds have one.
    pub fn enter(self: &Arc<Self>, client: ClientId) -> Result<HandshakePass, GateFull> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.0 >= MAX_HANDSHAKES {
            return Err(GateFull::All);
        }
        let mine = open.1.entry(client).or_default();
        if *mine >= MAX_PER_CLIENT {
            return Err(GateFull::Client(client));
        }
        *mine += 1;
        open.0 += 1;
        Ok(HandshakePass {
            gate: Arc::clone(self),
            client,
        })
    }

    /// A place for a handshake of `client`, waiting up to `limit` for one
    /// to be freed.
    pub async fn wait(
        self: &Arc<Self>,
        client: ClientId,
        limit: Duration,
    ) -> Result<HandshakePass, NoPlace> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before trying, so a place freed in between wakes it.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let full = match self.enter(client) {
                Ok(pass) => return Ok(pass),
                Err(full) => full,
            };
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(NoPlace {
                    full,
                    waited: limit,
                });
            }
        }
    }
}

impl Drop for HandshakePass {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock().unwrap_or_else(|e| e.into_inner());
        open.0 -= 1;
        if let Some(mine) = open.1.get_mut(&self.client) {
            *mine -= 1;
            if *mine == 0 {
                open.1.remove(&self.client);
            }
        }
        drop(open);
        self.gate.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(n: u16) -> ClientId {
        ClientId::of([127, 0, (n >> 8) as u8, n as u8].into(), 64)
    }

    #[test]
    fn one_client_holds_at_most_its_share_and_all_at_most_the_total() {
        let gate = Arc::new(HandshakeGate::default());
        let mine: Vec<_> = (0..MAX_PER_CLIENT)
            .map(|_| gate.enter(client(1)).expect("under the share"))
            .collect();
        assert_eq!(
            gate.enter(client(1)).unwrap_err(),
            GateFull::Client(client(1))
        );
        let others: Vec<_> = (2..)
            .take(MAX_HANDSHAKES - MAX_PER_CLIENT)
            .map(|n| gate.enter(client(n)).expect("under the total"))
            .collect();
        assert_eq!(gate.enter(client(999)).unwrap_err(), GateFull::All);
        drop(mine);
        let _again = gate.enter(client(1)).expect("places freed");
        drop(others);
        assert_eq!(gate.open.lock().expect("lock").1.len(), 1);
    }

    /// Over its share, a client's handshake waits for a place freed by
    /// another of its handshakes, and is refused only once the wait is over.
    #[tokio::test(flavor = "current_thread")]
    async fn a_handshake_over_the_share_waits_for_a_place_then_is_refused() {
        let gate = Arc::new(HandshakeGate::default());
        let mut mine: Vec<_> = (0..MAX_PER_CLIENT)
            .map(|_| gate.enter(client(1)).expect("under the share"))
            .collect();
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.wait(client(1), Duration::from_secs(10)).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "it waits while every place is held");
        mine.pop();
        let pass = waiting.await.expect("task").expect("the place freed");
        let started = tokio::time::Instant::now();
        let refused = gate
            .wait(client(1), Duration::from_millis(300))
            .await
            .expect_err("no place freed");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(refused.full, GateFull::Client(client(1)));
        assert!(
            refused.to_string().contains("handshake-timeout"),
            "{refused}"
        );
        drop(pass);
    }
}
