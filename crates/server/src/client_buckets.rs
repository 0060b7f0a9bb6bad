//! Token buckets per client, in a table of bounded size: what
//! `kdf-budget` (PBKDF2 iterations) and `tls-handshake-rate` (TLS
//! handshakes) charge.
//!
//! Each client (its address, IPv6 by prefix) has a bucket that holds at
//! most one minute's worth and refills continuously. A request larger
//! than the whole bucket passes when the bucket is full and leaves it in
//! debt, so such requests stay possible, one per refill.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_id::ClientId;

/// Clients tracked at most. When the table is full, clients whose bucket
/// has refilled are forgotten (a sweep, at most once per
/// [`SWEEP_INTERVAL`]); while it is still full, a client it does not know
/// is refused as if its bucket were empty, until the next sweep can free
/// a place. Memory and the work under the lock stay bounded whatever the
/// number of addresses asking.
pub const TRACKED_CLIENTS: usize = 4096;

/// Shortest time between two sweeps of a full table.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Why a bucket could not pay: what it holds and when it holds enough.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortfall {
    /// Units left in the bucket (rounded down; 0 in debt).
    pub available: u64,
    /// The bucket's refill per minute (its capacity).
    pub per_minute: u64,
    /// When the bucket holds enough again.
    pub retry: Duration,
}

/// One token bucket.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    /// Units left; negative after a request larger than the capacity.
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    /// A full bucket of `per_minute` units at `now`.
    pub fn full(per_minute: u64, now: Instant) -> Bucket {
        Bucket {
            tokens: per_minute as f64,
            updated: now,
        }
    }

    /// The bucket's level at `now`, refilled since its last update.
    fn level(&self, now: Instant, per_minute: u64) -> f64 {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        (self.tokens + elapsed * per_minute as f64 / 60.0).min(per_minute as f64)
    }

    /// Whether `amount` could be taken at `now` (a request larger than the
    /// capacity needs a full bucket); the level it would leave, or why not.
    fn check(&self, amount: u64, now: Instant, per_minute: u64) -> Result<f64, Shortfall> {
        let capacity = per_minute as f64;
        let per_second = capacity / 60.0;
        let level = self.level(now, per_minute);
        let wanted = amount as f64;
        let needed = wanted.min(capacity);
        if level + 1e-6 < needed {
            return Err(Shortfall {
                available: level.max(0.0) as u64,
                per_minute,
                retry: Duration::from_secs_f64((needed - level) / per_second),
            });
        }
        Ok(level - wanted)
    }

    /// Takes `amount` at `now`, or says why not.
    pub fn take(&mut self, amount: u64, now: Instant, per_minute: u64) -> Result<(), Shortfall> {
        let left = self.check(amount, now, per_minute)?;
        *self = Bucket {
            tokens: left,
            updated: now,
        };
        Ok(())
    }
}

/// Every client's bucket of `per_minute` units.
#[derive(Debug)]
pub struct ClientBuckets {
    per_minute: u64,
    table: Mutex<Table>,
}

/// The buckets, and when a full table may be swept next.
#[derive(Debug, Default)]
struct Table {
    buckets: HashMap<ClientId, Bucket>,
    /// No sweep before this (set by the last sweep of a full table).
    next_sweep: Option<Instant>,
    /// Sweeps run so far (for tests).
    sweeps: u64,
}

impl ClientBuckets {
    /// `per_minute` units per client and minute; 0 turns the buckets off
    /// (everything passes).
    pub fn new(per_minute: u64) -> Self {
        ClientBuckets {
            per_minute,
            table: Mutex::new(Table::default()),
        }
    }

    /// Takes `amount` from `client`'s bucket at `now` if it holds enough
    /// and `also` agrees (a bucket of everyone, checked after the
    /// client's and charged by `also` itself); the client's bucket is
    /// charged only when both pass.
    pub fn take_with(
        &self,
        client: ClientId,
        amount: u64,
        now: Instant,
        also: impl FnOnce() -> Result<(), Shortfall>,
    ) -> Result<(), Shortfall> {
        if self.per_minute == 0 {
            return also();
        }
        let Ok(mut table) = self.table.lock() else {
            // A poisoned lock (a panic elsewhere) must not stop every client.
            return Ok(());
        };
        if !table.buckets.contains_key(&client) && table.buckets.len() >= TRACKED_CLIENTS {
            if table.next_sweep.is_none_or(|next| now >= next) {
                table.sweep(now, self.per_minute);
            }
            if table.buckets.len() >= TRACKED_CLIENTS {
                let retry = table
                    .next_sweep
                    .map_or(SWEEP_INTERVAL, |next| next.saturating_duration_since(now));
                return Err(Shortfall {
                    available: 0,
                    per_minute: self.per_minute,
                    retry,
                });
            }
        }
        let bucket = table
            .buckets
            .entry(client)
            .or_insert(Bucket::full(self.per_minute, now));
        bucket.check(amount, now, self.per_minute)?;
        also()?;
        bucket.take(amount, now, self.per_minute)
    }

    /// Takes `amount` from `client`'s bucket at `now`, or says why not.
    pub fn take(&self, client: ClientId, amount: u64, now: Instant) -> Result<(), Shortfall> {
        self.take_with(client, amount, now, || Ok(()))
    }

    /// Puts `amount` back into `client`'s bucket at `now` (up to its
    /// capacity): what was taken for work that turned out cheaper.
    pub fn give_back(&self, client: ClientId, amount: u64, now: Instant) {
        if self.per_minute == 0 {
            return;
        }
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        if let Some(bucket) = table.buckets.get_mut(&client) {
            let level = bucket.level(now, self.per_minute);
            *bucket = Bucket {
                tokens: (level + amount as f64).min(self.per_minute as f64),
                updated: now,
            };
        }
    }

    /// Clients in the table and sweeps run so far (for tests).
    #[cfg(test)]
    pub fn tracked_and_sweeps(&self) -> (usize, u64) {
        self.table
            .lock()
            .map_or((0, 0), |table| (table.buckets.len(), table.sweeps))
    }
}

impl Table {
    /// Forgets the clients whose bucket is full at `now`; the next sweep
    /// may run when the first remaining bucket is full again, and not
    /// within [`SWEEP_INTERVAL`].
    fn sweep(&mut self, now: Instant, per_minute: u64) {
        self.sweeps += 1;
        let capacity = per_minute as f64;
        self.buckets
            .retain(|_, bucket| bucket.level(now, per_minute) < capacity);
        let first_full = self
            .buckets
            .values()
            .map(|bucket| (capacity - bucket.level(now, per_minute)) / (capacity / 60.0))
            .fold(f64::INFINITY, f64::min);
        let wait = Duration::try_from_secs_f64(first_full)
            .unwrap_or(Duration::from_secs(3600))
            .max(SWEEP_INTERVAL);
        self.next_sweep = Some(now + wait);
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn key(n: u32) -> ClientId {
        ClientId::of(IpAddr::from(n.to_be_bytes()), 64)
    }

    #[test]
    fn zero_turns_the_buckets_off_and_the_table_stays_bounded() {
        let off = ClientBuckets::new(0);
        let start = Instant::now();
        for _ in 0..100 {
            off.take(key(4), 100_000, start).expect("no buckets");
        }
        let buckets = ClientBuckets::new(1000);
        for n in 0..(TRACKED_CLIENTS as u32 + 10) {
            let taken = buckets.take(key(n), 1, start);
            // The table is full of buckets not yet refilled.
            assert_eq!(taken.is_ok(), n < TRACKED_CLIENTS as u32, "client {n}");
        }
        // Every bucket refills within a minute; then the table is swept.
        let later = start + Duration::from_secs(61);
        buckets.take(key(u32::MAX), 1, later).expect("new client");
        let (tracked, _) = buckets.tracked_and_sweeps();
        assert!(tracked <= TRACKED_CLIENTS, "{tracked} buckets");
    }

    #[test]
    fn clients_in_debt_cannot_grow_the_table_or_make_every_request_sweep_it() {
        // Every address takes more than its bucket: no bucket refills for
        // two minutes and a sweep frees nothing.
        let buckets = ClientBuckets::new(1000);
        let start = Instant::now();
        for n in 0..TRACKED_CLIENTS as u32 {
            buckets.take(key(n), 2000, start).expect("first request");
        }
        let mut refused = 0;
        for n in 0..1000u32 {
            let at = start + Duration::from_millis(u64::from(n));
            if let Err(err) = buckets.take(key(1_000_000 + n), 1, at) {
                assert_eq!(err.available, 0);
                assert!(err.retry >= Duration::from_millis(1), "{err:?}");
                refused += 1;
            }
        }
        let (tracked, sweeps) = buckets.tracked_and_sweeps();
        assert_eq!(tracked, TRACKED_CLIENTS, "the table is bounded");
        assert_eq!(refused, 1000, "new clients wait for a place");
        assert!(sweeps <= 1, "{sweeps} sweeps in one second");
        // A known client is served from its own bucket as before.
        buckets
            .take(key(7), 1, start + Duration::from_secs(600))
            .expect("refilled");
    }

    #[test]
    fn the_client_is_charged_only_when_the_other_bucket_agrees() {
        let buckets = ClientBuckets::new(60);
        let start = Instant::now();
        let nope = Shortfall {
            available: 0,
            per_minute: 1,
            retry: Duration::from_secs(1),
        };
        for _ in 0..100 {
            assert_eq!(
                buckets.take_with(key(1), 60, start, || Err(nope)),
                Err(nope)
            );
        }
        buckets.take(key(1), 60, start).expect("still full");
        let refused = buckets.take(key(1), 1, start).expect_err("empty");
        assert!(
            (refused.retry.as_secs_f64() - 1.0).abs() < 1e-6,
            "{refused:?}"
        );
    }
}
