//! How much key derivation one client may make the server run.
//!
//! Age encryptions (key source 3) are charged here too: each recipient
//! costs the server an X25519 share and shared secret, counted as
//! `aesd_core::connection::X25519_ITERATIONS` (113) iterations, so a
//! begin with 32 recipients takes 3616 of the budget.
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

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_buckets::{Bucket, ClientBuckets, Shortfall};
use crate::client_id::ClientId;

/// A begin frame that asks for more key derivation than its client has left.
#[derive(Debug, thiserror::Error)]
#[error(
    "PBKDF2 budget used up for {client}: {iterations} iterations asked (an age recipient's \
     X25519 counts as 113), about {available} of {per_minute} per minute left; retry in {:.0} s, \
     or derive the key on the client (aescrypt and aesload: --key-derivation client)",
    retry.as_secs_f64().ceil()
)]
pub struct BudgetExceeded {
    /// Who asked.
    pub client: ClientId,
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
    clients: ClientBuckets,
    /// The bucket of all clients together (`kdf-budget-total`), if on.
    total: Option<(u64, Mutex<Bucket>)>,
}

impl KdfBudget {
    /// `per_minute` iterations per client and minute; 0 turns the budget off.
    pub fn new(per_minute: u64) -> Self {
        KdfBudget {
            clients: ClientBuckets::new(per_minute),
            total: None,
        }
    }

    /// Also bounds all clients together to `per_minute` iterations per
    /// minute (0: no such bound).
    pub fn with_total(mut self, per_minute: u64) -> Self {
        self.total = (per_minute > 0).then(|| {
            (
                per_minute,
                Mutex::new(Bucket::full(per_minute, Instant::now())),
            )
        });
        self
    }

    /// Takes `iterations` from the bucket of all clients, or says when it
    /// holds enough again.
    fn take_total(&self, iterations: u32, now: Instant) -> Result<(), Shortfall> {
        let Some((per_minute, bucket)) = &self.total else {
            return Ok(());
        };
        let Ok(mut bucket) = bucket.lock() else {
            return Ok(());
        };
        bucket.take(u64::from(iterations), now, *per_minute)
    }

    /// Takes `iterations` from `client`'s bucket at `now`, or says why not.
    /// Everyone's bucket too; the client's is only charged when both have
    /// enough. Each of the two is off at 0, independently of the other.
    pub fn take(
        &self,
        client: ClientId,
        iterations: u32,
        now: Instant,
    ) -> Result<(), BudgetExceeded> {
        self.clients
            .take_with(client, u64::from(iterations), now, || {
                self.take_total(iterations, now)
            })
            .map_err(|short| BudgetExceeded {
                client,
                iterations,
                available: short.available,
                per_minute: short.per_minute,
                retry: short.retry,
            })
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn client(last: u8) -> ClientId {
        ClientId::of(IpAddr::from([192, 0, 2, last]), 64)
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
    fn zero_turns_each_budget_off_on_its_own() {
        let off = KdfBudget::new(0).with_total(0);
        let start = Instant::now();
        for _ in 0..100 {
            off.take(client(4), 100_000, start).expect("no budget");
        }
        let total_only = KdfBudget::new(0).with_total(1000);
        total_only.take(client(4), 1000, start).expect("the total");
        assert!(
            total_only.take(client(5), 1, start).is_err(),
            "total used up"
        );
    }
}
