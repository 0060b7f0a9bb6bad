//! How many TLS handshakes one client may start per minute
//! (`tls-handshake-rate`).
//!
//! A full handshake costs the server a certificate signature and a key
//! exchange (8.9 M instructions on the rv32 board). [`crate::tls_gate`]
//! bounds how many run at once; this bounds how often one client (its
//! address, IPv6 by prefix) may start one: a token bucket of one minute's
//! worth per client (see [`crate::client_buckets`]). A connection over it
//! waits for its turn ([`HandshakeRate::wait`]) when that comes within
//! `handshake-timeout`; else it is refused before any cryptography (its
//! client is told with a TLS alert, see [`crate::tls_accept`]), counted in
//! `aesd_connections_refused_total{reason="tls_handshake_rate"}` and
//! logged (at info, within the client's share of log lines). A resumed
//! handshake (a session ticket: no signature, see `tls`) is counted like
//! any other before it starts (aesd cannot tell them apart before reading
//! the ClientHello), and given back once it turns out resumed
//! ([`HandshakeRate::resumed`]): a client that resumes its sessions (aesload
//! and aescrypt share their tickets across connections) is not held back
//! by it, so the study's suites over TLS from one host run at their pace.

use std::time::{Duration, Instant};

use crate::client_buckets::ClientBuckets;
use crate::client_id::ClientId;

/// A client started more TLS handshakes than `tls-handshake-rate` allows.
#[derive(Debug, thiserror::Error)]
#[error(
    "TLS handshake refused: {client} started its {per_minute} handshakes a minute \
     (tls-handshake-rate); the next in {:.0} s",
    retry.as_secs_f64().ceil()
)]
pub struct RateExceeded {
    /// Who started them.
    pub client: ClientId,
    /// The `tls-handshake-rate` setting.
    pub per_minute: u64,
    /// When the client may start another.
    pub retry: Duration,
}

/// Every client's bucket of TLS handshakes.
#[derive(Debug)]
pub struct HandshakeRate {
    buckets: ClientBuckets,
}

impl HandshakeRate {
    /// `per_minute` handshakes per client and minute; 0 turns the rate off.
    pub fn new(per_minute: u64) -> Self {
        HandshakeRate {
            buckets: ClientBuckets::new(per_minute),
        }
    }

    /// Counts a handshake of `client` at `now`, or says when it may start
    /// one.
    pub fn take(&self, client: ClientId, now: Instant) -> Result<(), RateExceeded> {
        self.buckets
            .take(client, 1, now)
            .map_err(|short| RateExceeded {
                client,
                per_minute: short.per_minute,
                retry: short.retry,
            })
    }

    /// Gives back the handshake `client` was charged for, which turned out
    /// resumed (cheap).
    pub fn resumed(&self, client: ClientId, now: Instant) {
        self.buckets.give_back(client, 1, now);
    }

    /// Counts a handshake of `client`, waiting for the bucket to refill
    /// when that takes at most `limit` in all; else says when it may start
    /// one.
    pub async fn wait(&self, client: ClientId, limit: Duration) -> Result<(), RateExceeded> {
        let deadline = Instant::now() + limit;
        loop {
            let now = Instant::now();
            let over = match self.take(client, now) {
                Ok(()) => return Ok(()),
                Err(over) => over,
            };
            if now + over.retry > deadline {
                return Err(over);
            }
            tokio::time::sleep(over.retry).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> ClientId {
        ClientId::of([192, 0, 2, last].into(), 64)
    }

    #[test]
    fn a_client_over_its_rate_waits_and_others_are_not_charged() {
        let rate = HandshakeRate::new(120);
        let start = Instant::now();
        for _ in 0..120 {
            rate.take(client(1), start)
                .expect("within the minute's worth");
        }
        let refused = rate.take(client(1), start).expect_err("over the rate");
        // 120 a minute: the next one after half a second.
        assert!(
            (refused.retry.as_secs_f64() - 0.5).abs() < 1e-6,
            "{refused}"
        );
        assert!(
            refused.to_string().contains("tls-handshake-rate"),
            "{refused}"
        );
        rate.take(client(2), start).expect("another client");
        rate.take(client(1), start + Duration::from_millis(500))
            .expect("refilled");
        let off = HandshakeRate::new(0);
        for _ in 0..10_000 {
            off.take(client(3), start).expect("off");
        }
    }

    /// A handshake over the rate waits when its turn comes within the
    /// limit, and is refused at once when it does not.
    #[tokio::test(flavor = "current_thread")]
    async fn a_handshake_over_the_rate_waits_its_turn_within_the_limit() {
        // 600 a minute: one every 100 ms once the bucket is empty.
        let rate = HandshakeRate::new(600);
        for _ in 0..600 {
            rate.take(client(1), Instant::now()).expect("the bucket");
        }
        let started = Instant::now();
        rate.wait(client(1), Duration::from_secs(2))
            .await
            .expect("its turn within the limit");
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "{:?}",
            started.elapsed()
        );
        let started = Instant::now();
        let refused = rate
            .wait(client(1), Duration::from_millis(10))
            .await
            .expect_err("its turn is after the limit");
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "refused at once"
        );
        assert!(
            refused.to_string().contains("tls-handshake-rate"),
            "{refused}"
        );
    }
}
