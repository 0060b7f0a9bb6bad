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
//! nothing here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_key::ClientKey;

/// Clients tracked before idle ones (with a full bucket) are forgotten.
const TRACKED_CLIENTS: usize = 4096;

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
    buckets: Mutex<HashMap<ClientKey, Bucket>>,
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
            buckets: Mutex::new(HashMap::new()),
        }
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
        let Ok(mut buckets) = self.buckets.lock() else {
            // A poisoned lock (a panic elsewhere) must not stop every job.
            return Ok(());
        };
        if buckets.len() >= TRACKED_CLIENTS {
            buckets.retain(|_, bucket| bucket.level(now, per_second, capacity) < capacity);
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
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
        *bucket = Bucket {
            tokens: level - wanted,
            updated: now,
        };
        Ok(())
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
            budget.take(key, 1, start).expect("first job");
        }
        // Every bucket refills within a minute; then the table is swept.
        let later = start + Duration::from_secs(61);
        budget.take(client(5), 1, later).expect("new client");
        let tracked = budget.buckets.lock().expect("lock").len();
        assert!(tracked <= TRACKED_CLIENTS, "{tracked} buckets");
    }
}
