//! How much key derivation one client may make the server run.
//!
//! A job with key source 1 (the client sends its password) makes the
//! server run PBKDF2: 10 000 iterations are several seconds of a 100 MHz
//! board, `max-iter` about a minute. The `kdf-budget` setting gives each
//! client (its address, IPv6 by prefix) that many iterations per minute,
//! as a token bucket that holds at most one minute's worth: a begin asking
//! for more than the bucket holds is refused with `busy` (the connection
//! stays open) and told when to retry. A job larger than the whole budget
//! passes when the bucket is full and leaves it in debt, so `max-iter` jobs
//! stay possible, one per refill. Key source 2 (the client derives) costs
//! nothing here. Beside the clients' buckets, one bucket for everyone
//! (`kdf-budget-total`) bounds what many addresses can ask together.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_key::ClientKey;

/// Clients tracked at most. When the table is full, clients whose bucket
/// has refilled are forgotten (a sweep, at most once per
/// [`SWEEP_INTERVAL`]); while it is still full, a client it does not know
/// is refused as if its bucket were empty, until the next sweep can free
/// a place. Memory and the work under the lock stay bounded whatever the
/// number of addresses asking.
const TRACKED_CLIENTS: usize = 4096;

/// Shortest time between two sweeps of a full table.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A begin frame that asks for more key derivation than its client has left.
#[derive(Debug, thiserror::Error)]
#[error(
    "PBKDF2 budget used up for {client}: {iterations} iterations asked, about {available} of \
     {per_minute} per minute left; retry in {:.0} s, or derive the key on the client (key source 2)",
    retry.as_secs_f64().ceil()
)]
pub struct BudgetExceeded {
    /// Who asked.
    pub client: ClientKey,
    /// Iterations the job asked for.
    pub iterations: u32,
    /// Iterations left in the client's bucket (rounded down).
    pub available: u64,
    /// The `kdf-budget` setting.
    pub per_minute: u64,
    /// When the bucket holds enough again.
    pub retry: Duration,
}

/// Every client's bucket of PBKDF2 iterations.
#[derive(Debug)]
pub struct KdfBudget {
    per_minute: u64,
    table: Mutex<Table>,
    /// The bucket of all clients together (`kdf-budget-total`), if on.
    total: Option<(u64, Mutex<Bucket>)>,
}

/// The buckets, and when a full table may be swept next.
#[derive(Debug, Default)]
struct Table {
    buckets: HashMap<ClientKey, Bucket>,
    /// No sweep before this (set by the last sweep of a full table).
    next_sweep: Option<Instant>,
    /// Sweeps run so far (for tests).
    sweeps: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Iterations left; negative after a job larger than the budget.
    tokens: f64,
    updated: Instant,
}

impl KdfBudget {
    /// `per_minute` iterations per client and minute; 0 turns the budget off.
    pub fn new(per_minute: u64) -> Self {
        KdfBudget {
            per_minute,
            table: Mutex::new(Table::default()),
            total: None,
        }
    }

    /// Also bounds all clients together to `per_minute` iterations per
    /// minute (0: no such bound).
    pub fn with_total(mut self, per_minute: u64) -> Self {
        self.total = (per_minute > 0).then(|| {
            (
                per_minute,
                Mutex::new(Bucket {
                    tokens: per_minute as f64,
                    updated: Instant::now(),
                }),
            )
        });
        self
    }

    /// Takes `iterations` from the bucket of all clients, or says when it
    /// holds enough again.
    fn take_total(
        &self,
        client: ClientKey,
        iterations: u32,
        now: Instant,
    ) -> Result<(), BudgetExceeded> {
        let Some((per_minute, bucket)) = &self.total else {
            return Ok(());
        };
        let Ok(mut bucket) = bucket.lock() else {
            return Ok(());
        };
        let capacity = *per_minute as f64;
        let per_second = capacity / 60.0;
        let level = bucket.level(now, per_second, capacity);
        let wanted = f64::from(iterations);
        let needed = wanted.min(capacity);
        if level + 1e-6 < needed {
            return Err(BudgetExceeded {
                client,
                iterations,
                available: level.max(0.0) as u64,
                per_minute: *per_minute,
                retry: Duration::from_secs_f64((needed - level) / per_second),
            });
        }
        *bucket = Bucket {
            tokens: level - wanted,
            updated: now,
        };
        Ok(())
    }

    /// Takes `iterations` from `client`'s bucket at `now`, or says why not.
    pub fn take(
        &self,
        client: ClientKey,
        iterations: u32,
        now: Instant,
    ) -> Result<(), BudgetExceeded> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = self.per_minute as f64;
        let per_second = capacity / 60.0;
        let Ok(mut table) = self.table.lock() else {
            // A poisoned lock (a panic elsewhere) must not stop every job.
            return Ok(());
        };
        if !table.buckets.contains_key(&client) && table.buckets.len() >= TRACKED_CLIENTS {
            if table.next_sweep.is_none_or(|next| now >= next) {
                table.sweep(now, per_second, capacity);
            }
            if table.buckets.len() >= TRACKED_CLIENTS {
                let retry = table
                    .next_sweep
                    .map_or(SWEEP_INTERVAL, |next| next.saturating_duration_since(now));
                return Err(BudgetExceeded {
                    client,
                    iterations,
                    available: 0,
                    per_minute: self.per_minute,
                    retry,
                });
            }
        }
        let bucket = table.buckets.entry(client).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let level = bucket.level(now, per_second, capacity);
        let wanted = f64::from(iterations);
        // A job larger than the whole budget needs a full bucket.
        let needed = wanted.min(capacity);
        if level + 1e-6 < needed {
            return Err(BudgetExceeded {
                client,
                iterations,
                available: level.max(0.0) as u64,
                per_minute: self.per_minute,
                retry: Duration::from_secs_f64((needed - level) / per_second),
            });
        }
        // Everyone's bucket too; the client's is only charged when both
        // have enough.
        self.take_total(client, iterations, now)?;
        *bucket = Bucket {
            tokens: level - wanted,
            updated: now,
        };
        Ok(())
    }
}

impl Table {
    /// Forgets the clients whose bucket is full at `now`; the next sweep
    /// may run when the first remaining bucket is full again, and not
    /// within [`SWEEP_INTERVAL`].
    fn sweep(&mut self, now: Instant, per_second: f64, capacity: f64) {
        self.sweeps += 1;
        self.buckets
            .retain(|_, bucket| bucket.level(now, per_second, capacity) < capacity);
        let first_full = self
            .buckets
            .values()
            .map(|bucket| (capacity - bucket.level(now, per_second, capacity)) / per_second)
            .fold(f64::INFINITY, f64::min);
        let wait = Duration::try_from_secs_f64(first_full)
            .unwrap_or(Duration::from_secs(3600))
            .max(SWEEP_INTERVAL);
        self.next_sweep = Some(now + wait);
    }
}

impl Bucket {
    /// The bucket's level at `now`, refilled since its last update.
    fn level(&self, now: Instant, per_second: f64, capacity: f64) -> f64 {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        (self.tokens + elapsed * per_second).min(capacity)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn client(last: u8) -> ClientKey {
        ClientKey::of(IpAddr::from([192, 0, 2, last]), 64)
    }

    #[test]
    fn a_client_gets_its_budget_then_waits_for_the_refill() {
        let budget = KdfBudget::new(30_000);
        let start = Instant::now();
        for _ in 0..3 {
            budget
                .take(client(1), 10_000, start)
                .expect("within budget");
        }
        let refused = budget
            .take(client(1), 10_000, start)
            .expect_err("budget used up");
        assert_eq!(refused.available, 0);
        // 30 000 a minute: 10 000 come back in 20 s.
        assert!(
            (refused.retry.as_secs_f64() - 20.0).abs() < 0.01,
            "{refused}"
        );
        assert!(refused.to_string().contains("retry in 20 s"), "{refused}");
        // Another client has its own bucket.
        budget.take(client(2), 10_000, start).expect("other client");
        let later = start + Duration::from_secs(20);
        budget.take(client(1), 10_000, later).expect("refilled");
        assert!(budget.take(client(1), 10_000, later).is_err());
    }

    #[test]
    fn many_clients_together_stay_within_the_total() {
        // 10 000 per client, 30 000 for everyone: the fourth client waits
        // although its own bucket is full.
        let budget = KdfBudget::new(10_000).with_total(30_000);
        let start = Instant::now();
        for n in 1..=3 {
            budget.take(client(n), 10_000, start).expect("within both");
        }
        let refused = budget
            .take(client(4), 10_000, start)
            .expect_err("the total is used up");
        assert_eq!(refused.per_minute, 30_000, "{refused}");
        assert!(
            (refused.retry.as_secs_f64() - 20.0).abs() < 0.01,
            "{refused}"
        );
        // Its own bucket was not charged: after the total refills, it runs.
        budget
            .take(client(4), 10_000, start + Duration::from_secs(20))
            .expect("refilled total, untouched own bucket");
        let off = KdfBudget::new(10_000).with_total(0);
        for n in 1..=10 {
            off.take(client(n), 10_000, start).expect("no total");
        }
    }

    #[test]
    fn a_job_larger_than_the_budget_needs_a_full_bucket_and_leaves_debt() {
        let budget = KdfBudget::new(60_000);
        let start = Instant::now();
        budget.take(client(3), 100_000, start).expect("full bucket");
        // 40 000 in debt: the next 1000 need 41 s of refill.
        let refused = budget.take(client(3), 1000, start).expect_err("in debt");
        assert!(
            (refused.retry.as_secs_f64() - 41.0).abs() < 0.01,
            "{refused}"
        );
        assert!(
            budget
                .take(client(3), 100_000, start + Duration::from_secs(99))
                .is_err()
        );
        budget
            .take(client(3), 100_000, start + Duration::from_secs(100))
            .expect("full again after 100 s");
    }

    #[test]
    fn zero_turns_the_budget_off_and_the_table_stays_bounded() {
        let off = KdfBudget::new(0);
        let start = Instant::now();
        for _ in 0..100 {
            off.take(client(4), 100_000, start).expect("no budget");
        }
        let budget = KdfBudget::new(1000);
        for n in 0..(TRACKED_CLIENTS as u32 + 10) {
            let key = ClientKey::of(IpAddr::from(n.to_be_bytes()), 64);
            let taken = budget.take(key, 1, start);
            // The table is full of buckets not yet refilled.
            assert_eq!(taken.is_ok(), n < TRACKED_CLIENTS as u32, "client {n}");
        }
        // Every bucket refills within a minute; then the table is swept.
        let later = start + Duration::from_secs(61);
        budget.take(client(5), 1, later).expect("new client");
        let tracked = budget.table.lock().expect("lock").buckets.len();
        assert!(tracked <= TRACKED_CLIENTS, "{tracked} buckets");
    }

    #[test]
    fn clients_in_debt_cannot_grow_the_table_or_make_every_begin_sweep_it() {
        // Every address takes a job larger than the budget: no bucket
        // refills for two minutes and a sweep frees nothing.
        let budget = KdfBudget::new(1000);
        let start = Instant::now();
        let key = |n: u32| ClientKey::of(IpAddr::from(n.to_be_bytes()), 64);
        for n in 0..TRACKED_CLIENTS as u32 {
            budget.take(key(n), 2000, start).expect("first job");
        }
        let mut refused = 0;
        for n in 0..1000u32 {
            let at = start + Duration::from_millis(u64::from(n));
            if let Err(err) = budget.take(key(1_000_000 + n), 1, at) {
                assert_eq!(err.available, 0);
                assert!(err.retry >= Duration::from_millis(1), "{err}");
                refused += 1;
            }
        }
        let table = budget.table.lock().expect("lock");
        assert_eq!(table.buckets.len(), TRACKED_CLIENTS, "the table is bounded");
        assert_eq!(refused, 1000, "new clients wait for a place");
        assert!(table.sweeps <= 1, "{} sweeps in one second", table.sweeps);
        drop(table);
        // A known client is served from its own bucket as before.
        budget
            .take(key(7), 1, start + Duration::from_secs(600))
            .expect("refilled");
    }
}
