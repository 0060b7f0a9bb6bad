//! The study's load suites as presets: basic 1, 2, 3, large, the 1000
//! clients run and the open-loop "drowning" test, each a [`LoadPlan`].
//!
//! | suite | clients | started | sizes |
//! | --- | --- | --- | --- |
//! | `basic1` | 1 | at once | 100 MiB |
//! | `basic2` | 10 | together | {2, 5, 10, 20} MiB, weights .5/.3/.2/.1 |
//! | `basic3` | 20 | batches of 10 | basic 2's, every batch repeating them |
//! | `large` | 100 | batches of 10 | basic 2's, every batch repeating them |
//! | `thousand` | 1000 | batches of 50 | {10, 50, 100} MiB, uniform |
//! | `drowning` | rate × duration | one every 1/rate s (open loop) | basic 2's distribution |
//!
//! The study's "MB" were MiB (its 100 MB file was 104.86 × 10^6 bytes).
//! Its basic 3 and large suites processed exactly 2 and 10 times basic
//! 2's 84.93 MB (169.87 and 849.35 MB): each batch of 10 repeated the
//! same ten sizes. The presets do the same, and with the default seed
//! basic 2 draws the study's 81 MiB, so all three totals match the
//! study's to the byte.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use aesd_proto::{AuthToken, Password};

use crate::distribution::SizeDist;
use crate::load::{Arrival, LoadPlan};
use aesd_client::key_source::KeyDerivation;

/// The study's "MB".
pub const STUDY_MB: u64 = 1 << 20;

/// The default seed: with it, basic 2 draws 81 MiB in total, as the
/// study's basic 2 did (84.93 MB).
pub const DEFAULT_SEED: u64 = 5;

/// Drowning's arrival rate when `--rate` is not given (clients per second).
pub const DEFAULT_DROWNING_RATE: f64 = 20.0;

/// Drowning's duration when neither `--duration` nor `--clients` is given.
pub const DEFAULT_DROWNING_DURATION: Duration = Duration::from_secs(10);

/// One of the study's suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// 1 client, one 100 MiB file.
    Basic1,
    /// 10 clients at once, sizes from the study's mix.
    Basic2,
    /// 20 clients in batches of 10, basic 2's sizes per batch.
    Basic3,
    /// 100 clients in batches of 10, basic 2's sizes per batch.
    Large,
    /// 1000 clients in batches of 50, 10/50/100 MiB.
    Thousand,
    /// Open loop: clients arrive at a fixed rate whatever completes.
    Drowning,
}

/// A suite name is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown suite {0:?} (basic1, basic2, basic3, large, thousand, drowning or all)")]
pub struct SuiteError(pub String);

/// Settings that shape or override a suite's plan.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Factor applied to every file size (e.g. 0.01).
    pub scale: f64,
    /// Seed of sizes and data.
    pub seed: u64,
    /// PBKDF2 iterations per job.
    pub iterations: u32,
    /// Where each job's key is derived (client or server).
    pub key_derivation: KeyDerivation,
    /// Password of every job.
    pub password: Password,
    /// Access token for servers that require one.
    pub token: Option<AuthToken>,
    /// TLS, for servers started with `--tls-cert`.
    pub tls: Option<aesd_client::tls::TlsSettings>,
    /// How long a job waits for a silent server (see
    /// [`Client::set_idle_timeout`](aesd_client::Client::set_idle_timeout)).
    pub idle_timeout: std::time::Duration,
    /// Replaces the suite's client count.
    pub clients: Option<usize>,
    /// Replaces a closed-loop suite's batch size.
    pub chunk: Option<usize>,
    /// Replaces the suite's size distribution.
    pub sizes: Option<SizeDist>,
    /// Open-loop arrival rate (clients per second).
    pub rate: Option<f64>,
    /// Open-loop duration (clients = rate × duration).
    pub duration: Option<Duration>,
}

impl Suite {
    /// Every suite, in the order `all` runs them.
    pub const ALL: [Suite; 6] = [
        Suite::Basic1,
        Suite::Basic2,
        Suite::Basic3,
        Suite::Large,
        Suite::Thousand,
        Suite::Drowning,
    ];

    /// The suite's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Basic1 => "basic1",
            Suite::Basic2 => "basic2",
            Suite::Basic3 => "basic3",
            Suite::Large => "large",
            Suite::Thousand => "thousand",
            Suite::Drowning => "drowning",
        }
    }

    /// `all`, one name, or a comma-separated list of names.
    pub fn parse_list(text: &str) -> Result<Vec<Suite>, SuiteError> {
        let mut suites = Vec::new();
        for name in text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            if name == "all" {
                suites.extend(Suite::ALL);
            } else {
                suites.push(name.parse()?);
            }
        }
        if suites.is_empty() {
            return Err(SuiteError(text.to_owned()));
        }
        Ok(suites)
    }

    /// The study's mix: {2, 5, 10, 20} MiB with weights .5/.3/.2/.1.
    pub fn study_mix() -> SizeDist {
        SizeDist::weighted(
            vec![2 * STUDY_MB, 5 * STUDY_MB, 10 * STUDY_MB, 20 * STUDY_MB],
            vec![0.5, 0.3, 0.2, 0.1],
        )
        .expect("constant sizes and weights are valid")
    }

    /// The suite's plan with `options` applied.
    pub fn plan(self, options: &SuiteOptions) -> LoadPlan {
        let (clients, arrival, sizes, size_period) = match self {
            Suite::Basic1 => (
                1,
                Arrival::Batches(1),
                SizeDist::fixed(100 * STUDY_MB),
                None,
            ),
            Suite::Basic2 => (10, Arrival::Batches(10), Suite::study_mix(), None),
            Suite::Basic3 => (20, Arrival::Batches(10), Suite::study_mix(), Some(10)),
            Suite::Large => (100, Arrival::Batches(10), Suite::study_mix(), Some(10)),
            Suite::Thousand => (
                1000,
                Arrival::Batches(50),
                SizeDist::uniform(vec![10 * STUDY_MB, 50 * STUDY_MB, 100 * STUDY_MB])
                    .expect("constant sizes are valid"),
                None,
            ),
            Suite::Drowning => {
                let rate = options.rate.unwrap_or(DEFAULT_DROWNING_RATE);
                let duration = options.duration.unwrap_or(DEFAULT_DROWNING_DURATION);
                let clients = (rate * duration.as_secs_f64()).ceil() as usize;
                (clients, Arrival::Rate(rate), Suite::study_mix(), None)
            }
        };
        let arrival = match (arrival, options.chunk) {
            (Arrival::Batches(_), Some(chunk)) => Arrival::Batches(chunk.max(1)),
            (arrival, _) => arrival,
        };
        LoadPlan {
            clients: options.clients.unwrap_or(clients),
            arrival,
            sizes: options.sizes.clone().unwrap_or(sizes).scaled(options.scale),
            size_period,
            seed: options.seed,
            iterations: options.iterations,
            key_derivation: options.key_derivation,
            password: options.password.clone(),
            token: options.token.clone(),
            tls: options.tls.clone(),
            idle_timeout: options.idle_timeout,
            shard: crate::shard::Shard::WHOLE,
            bind: None,
            format: crate::load::LoadFormat::Openssl,
        }
    }
}

/// The plan when no suite is named: `--clients` (default 1) in batches of
/// `--chunk` (default all), or arriving at `--rate` for `--duration` (or
/// for `--clients`), sizes from `--sizes` (default 10 MiB).
pub fn custom_plan(options: &SuiteOptions) -> LoadPlan {
    let (clients, arrival) = match options.rate {
        Some(rate) => {
            let duration = options.duration.unwrap_or(DEFAULT_DROWNING_DURATION);
            let clients = options
                .clients
                .unwrap_or((rate * duration.as_secs_f64()).ceil() as usize);
            (clients, Arrival::Rate(rate))
        }
        None => {
            let clients = options.clients.unwrap_or(1);
            (
                clients,
                Arrival::Batches(options.chunk.unwrap_or(clients).max(1)),
            )
        }
    };
    LoadPlan {
        clients,
        arrival,
        sizes: options
            .sizes
            .clone()
            .unwrap_or(SizeDist::fixed(10 * STUDY_MB))
            .scaled(options.scale),
        size_period: None,
        seed: options.seed,
        iterations: options.iterations,
        key_derivation: options.key_derivation,
        password: options.password.clone(),
        token: options.token.clone(),
        tls: options.tls.clone(),
        idle_timeout: options.idle_timeout,
        shard: crate::shard::Shard::WHOLE,
        bind: None,
        format: crate::load::LoadFormat::Openssl,
    }
}

impl FromStr for Suite {
    type Err = SuiteError;

    fn from_str(text: &str) -> Result<Suite, SuiteError> {
        Suite::ALL
            .into_iter()
            .find(|suite| suite.name() == text.trim())
            .ok_or_else(|| SuiteError(text.to_owned()))
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    fn options() -> SuiteOptions {
        SuiteOptions {
            scale: 1.0,
            seed: DEFAULT_SEED,
            iterations: 1000,
            key_derivation: KeyDerivation::Auto,
            password: Password::new(b"pw".to_vec()),
            token: None,
            tls: None,
            idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
            clients: None,
            chunk: None,
            sizes: None,
            rate: None,
            duration: None,
        }
    }

    fn sizes(plan: &LoadPlan) -> Vec<u64> {
        (0..plan.clients).map(|index| plan.size_of(index)).collect()
    }

    fn batches(plan: &LoadPlan) -> Vec<Range<usize>> {
        plan.batches().collect()
    }

    /// Bytes as the study printed them: MB of 10^6, two decimals.
    fn study_mb(bytes: u64) -> String {
        format!("{:.2}", bytes as f64 / 1e6)
    }

    #[test]
    fn basic1_is_one_client_with_the_studys_100_mb_file() {
        let plan = Suite::Basic1.plan(&options());
        assert_eq!(plan.clients, 1);
        assert_eq!(batches(&plan), vec![0..1]);
        assert_eq!(sizes(&plan), vec![104_857_600]);
        assert_eq!(study_mb(plan.total_bytes()), "104.86");
    }

    #[test]
    fn basic2_is_ten_clients_together_with_the_studys_total() {
        let plan = Suite::Basic2.plan(&options());
        assert_eq!(plan.clients, 10);
        assert_eq!(batches(&plan), vec![0..10]);
        let mix = Suite::study_mix();
        assert!(sizes(&plan).iter().all(|size| mix.sizes().contains(size)));
        assert_eq!(study_mb(plan.total_bytes()), "84.93", "{:?}", sizes(&plan));
    }

    #[test]
    fn basic3_and_large_repeat_basic2_per_batch_of_ten() {
        let basic2 = sizes(&Suite::Basic2.plan(&options()));
        for (suite, clients, total) in
            [(Suite::Basic3, 20, "169.87"), (Suite::Large, 100, "849.35")]
        {
            let plan = suite.plan(&options());
            assert_eq!(plan.clients, clients, "{suite}");
            let expected: Vec<Range<usize>> = (0..clients / 10)
                .map(|batch| batch * 10..batch * 10 + 10)
                .collect();
            assert_eq!(batches(&plan), expected, "{suite}");
            for batch in sizes(&plan).chunks(10) {
                assert_eq!(batch, basic2.as_slice(), "{suite}");
            }
            assert_eq!(study_mb(plan.total_bytes()), total, "{suite}");
        }
    }

    #[test]
    fn the_study_mix_is_drawn_with_its_weights() {
        // 10 000 draws through the plan's own seeded draw: each size's
        // share is within 0.02 (about 4 standard deviations) of its weight.
        let mut plan = Suite::Drowning.plan(&SuiteOptions {
            clients: Some(10_000),
            ..options()
        });
        let mix = Suite::study_mix();
        for seed in [DEFAULT_SEED, 7] {
            plan.seed = seed;
            let drawn = sizes(&plan);
            for (index, size) in mix.sizes().iter().enumerate() {
                let share =
                    drawn.iter().filter(|drawn| *drawn == size).count() as f64 / drawn.len() as f64;
                let weight = [0.5, 0.3, 0.2, 0.1][index] / 1.1;
                assert!(
                    (share - weight).abs() < 0.02,
                    "seed {seed}, {size}: {share:.3} drawn, {weight:.3} expected"
                );
            }
        }
    }

    #[test]
    fn thousand_is_1000_clients_in_batches_of_50_over_three_sizes() {
        let plan = Suite::Thousand.plan(&options());
        assert_eq!(plan.clients, 1000);
        let batches = batches(&plan);
        assert_eq!(batches.len(), 20);
        assert!(batches.iter().all(|batch| batch.len() == 50));
        let drawn = sizes(&plan);
        for size in [10 * STUDY_MB, 50 * STUDY_MB, 100 * STUDY_MB] {
            let share = drawn.iter().filter(|drawn| **drawn == size).count() as f64 / 1000.0;
            assert!((share - 1.0 / 3.0).abs() < 0.06, "{size}: {share}");
        }
        assert_eq!(
            drawn
                .iter()
                .filter(|size| ![10, 50, 100].contains(&(**size / STUDY_MB)))
                .count(),
            0
        );
    }

    #[test]
    fn drowning_is_open_loop_at_the_rate_for_the_duration() {
        let plan = Suite::Drowning.plan(&options());
        assert_eq!(plan.arrival, Arrival::Rate(DEFAULT_DROWNING_RATE));
        assert_eq!(plan.clients, 200);
        let plan = Suite::Drowning.plan(&SuiteOptions {
            rate: Some(5.0),
            duration: Some(Duration::from_secs(4)),
            chunk: Some(3),
            ..options()
        });
        assert_eq!(plan.arrival, Arrival::Rate(5.0), "no chunks in open loop");
        assert_eq!(plan.clients, 20);
    }

    #[test]
    fn scale_and_overrides_compose() {
        let plan = Suite::Large.plan(&SuiteOptions {
            scale: 0.01,
            clients: Some(30),
            chunk: Some(5),
            ..options()
        });
        assert_eq!(plan.clients, 30);
        assert_eq!(plan.arrival, Arrival::Batches(5));
        let full = Suite::Large.plan(&options());
        for index in 0..30 {
            let expected = (full.size_of(index) as f64 * 0.01).round() as u64;
            assert_eq!(plan.size_of(index), expected);
        }
        let sized = Suite::Basic1.plan(&SuiteOptions {
            sizes: Some(SizeDist::fixed(4096)),
            ..options()
        });
        assert_eq!(sized.total_bytes(), 4096);
        let other_seed = Suite::Basic2.plan(&SuiteOptions {
            seed: 8,
            ..options()
        });
        assert_ne!(sizes(&other_seed), sizes(&Suite::Basic2.plan(&options())));
    }

    #[test]
    fn the_custom_plan_is_closed_loop_unless_a_rate_is_given() {
        let plan = custom_plan(&SuiteOptions {
            clients: Some(6),
            ..options()
        });
        assert_eq!((plan.clients, plan.arrival), (6, Arrival::Batches(6)));
        assert_eq!(plan.total_bytes(), 60 * STUDY_MB);
        let open = custom_plan(&SuiteOptions {
            rate: Some(2.0),
            duration: Some(Duration::from_secs(3)),
            ..options()
        });
        assert_eq!((open.clients, open.arrival), (6, Arrival::Rate(2.0)));
    }

    #[test]
    fn suite_lists_parse() {
        assert_eq!(Suite::parse_list("all"), Ok(Suite::ALL.to_vec()));
        assert_eq!(
            Suite::parse_list("basic1, large"),
            Ok(vec![Suite::Basic1, Suite::Large])
        );
        assert!(Suite::parse_list("basic4").is_err());
        assert!(Suite::parse_list("").is_err());
    }
}
