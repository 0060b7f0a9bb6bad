//! The load generator behind `aesload`: clients in batches or arriving
//! at a fixed rate, spread over servers, every result verified.
//!
//! A closed-loop plan runs N clients in batches of C (the study's
//! "chunks"): a batch starts together and the next starts when all of its
//! transfers are done. An open-loop plan starts a new client every
//! 1/R seconds whatever completes (the study's "drowning" test). Each
//! client opens its own connection to the next server in round-robin
//! order, encrypts a seeded pattern of its drawn size and verifies the
//! result independently.

use std::net::IpAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aesd_proto::{AuthToken, Operation, Password};
use tokio::task::JoinSet;

use crate::by_name::{KeyByName, encrypt_verified};
use crate::distribution::SizeDist;
use crate::interrupt::{RunState, StopSignal};
use crate::pattern::{Pattern, PatternSource, splitmix64};
use crate::progress::{Metered, Progress};
use crate::record::{LoadRun, Outcome, Transfer};
use crate::shard::Shard;
use crate::verify::VerifyingSink;
use crate::verify_age::AgeVerifyingSink;
use aesd_client::ClientError;
use aesd_client::connection::{Client, ConnectOptions};
use aesd_client::job::{JobEvent, JobReport, JobSpec};
use aesd_client::key_source::{self, KeyDerivation};
use aesd_client::tls::TlsSettings;
use aesd_proto::DerivedKeyParams;

/// When clients start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Closed loop: batches of this many clients; a batch starts when the
    /// previous one is done.
    Batches(usize),
    /// Open loop: one new client every `1 / rate` seconds, whatever
    /// completes.
    Rate(f64),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Number of transfers (one client each).
    pub clients: usize,
    /// When they start.
    pub arrival: Arrival,
    /// File sizes to draw from (seeded).
    pub sizes: SizeDist,
    /// When set to P, client `i` gets the size of client `i % P`: every
    /// batch of P repeats the same sizes (the study's basic 3 and large
    /// suites processed exactly 2 and 10 times basic 2's bytes).
    pub size_period: Option<usize>,
    /// Seed for sizes and data.
    pub seed: u64,
    /// PBKDF2 iterations per job.
    pub iterations: u32,
    /// Where each job's key is derived (client or server).
    pub key_derivation: KeyDerivation,
    /// Password for every job.
    pub password: Password,
    /// Access token for servers that require one.
    pub token: Option<AuthToken>,
    /// TLS, for servers started with `--tls-cert`.
    pub tls: Option<TlsSettings>,
    /// How long a job waits for a silent server (see
    /// [`Client::set_idle_timeout`]).
    pub idle_timeout: Duration,
    /// The part of the clients this process runs ([`Shard::WHOLE`]: all);
    /// every other figure of a client comes from its global index.
    pub shard: Shard,
    /// The local address connections come from (`None`: the system's
    /// choice).
    pub bind: Option<IpAddr>,
    /// The file format of the jobs.
    pub format: LoadFormat,
}

/// The file format of a run's jobs.
#[derive(Debug, Clone, Default)]
pub enum LoadFormat {
    /// `openssl enc -aes-256-cbc -pbkdf2`, keyed by the run's password.
    #[default]
    Openssl,
    /// age v1 to the run's own X25519 identity (made at the start of the
    /// run; every result is decrypted with it by the verifier).
    Age(aesd_age::Identity),
    /// By name: age v1 under a key of the server's keyring (`--key`),
    /// every result decrypted by name through the server and compared
    /// ([`crate::by_name`]).
    ByName(KeyByName),
}

impl LoadFormat {
    /// age with a fresh identity from the OS's generator.
    pub fn fresh_age() -> Result<LoadFormat, getrandom::Error> {
        let mut secret = zeroize::Zeroizing::new([0u8; 32]);
        getrandom::fill(secret.as_mut())?;
        Ok(LoadFormat::Age(aesd_age::Identity::from_bytes(*secret)))
    }

    /// `openssl`, `age` or `by-name`.
    pub fn name(&self) -> &'static str {
        match self {
            LoadFormat::Openssl => "openssl",
            LoadFormat::Age(_) => "age",
            LoadFormat::ByName(_) => "by-name",
        }
    }
}

impl LoadPlan {
    /// The file size client `index` sends.
    pub fn size_of(&self, index: usize) -> u64 {
        let key = match self.size_period {
            Some(period) if period > 0 => index % period,
            _ => index,
        };
        self.sizes
            .draw(splitmix64(self.seed ^ splitmix64(key as u64)))
    }

    /// The seed of client `index`'s data.
    pub fn data_seed(&self, index: usize) -> u64 {
        splitmix64(self.seed.wrapping_add(index as u64).wrapping_mul(0x9e37))
    }

    /// The client indices of each batch, in order (one batch per client
    /// in open loop).
    pub fn batches(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let batch = match self.arrival {
            Arrival::Batches(batch) => batch.max(1),
            Arrival::Rate(_) => 1,
        };
        (0..self.clients)
            .step_by(batch)
            .map(move |start| start..(start + batch).min(self.clients))
    }

    /// Total bytes the plan sends (all shards).
    pub fn total_bytes(&self) -> u64 {
        (0..self.clients).map(|index| self.size_of(index)).sum()
    }

    /// The clients this process runs (its shard's), in order.
    pub fn own_clients(&self) -> impl Iterator<Item = usize> + '_ {
        self.shard.clients(self.clients)
    }

    /// Bytes this process sends (its shard's clients).
    pub fn own_bytes(&self) -> u64 {
        self.own_clients().map(|index| self.size_of(index)).sum()
    }

    /// The server index client `index` goes to, among `servers`.
    pub fn server_of(index: usize, servers: usize) -> usize {
        index % servers.max(1)
    }
}

/// What every client task of a run shares.
struct RunContext {
    servers: Vec<String>,
    plan: LoadPlan,
    spec: JobSpec,
    started: Instant,
    progress: Arc<Progress>,
    stop: StopSignal,
}

impl RunContext {
    /// Runs client `client`, meant to start `scheduled` into the run, with
    /// its key if it was derived ahead.
    async fn client(
        self: Arc<Self>,
        client: usize,
        batch: Option<usize>,
        scheduled: Duration,
        key: Option<KeyAhead>,
    ) -> Transfer {
        let dispatched = self.started.elapsed();
        let server = LoadPlan::server_of(client, self.servers.len());
        let size = self.plan.size_of(client);
        self.progress.update(|counts| counts.running += 1);
        let options = ConnectOptions {
            token: self.plan.token.clone(),
            tls: self.plan.tls.clone(),
            bind: self.plan.bind,
        };
        let target = Target {
            server: &self.servers[server],
            options: &options,
            idle_timeout: self.plan.idle_timeout,
        };
        let mut stop = self.stop.clone();
        let (report, outcome) = tokio::select! {
            done = transfer(
                target,
                &self.spec,
                &self.plan.format,
                key,
                self.plan.data_seed(client),
                size,
                &self.progress,
            ) => done,
            () = stop.reached(RunState::Cancelled) => (None, Outcome::Failed {
                kind: INTERRUPTED.to_owned(),
                message: "cancelled: the run was interrupted and its grace period ended".to_owned(),
            }),
        };
        let finished = self.started.elapsed();
        if outcome == Outcome::Verified {
            self.progress
                .record_total(finished.saturating_sub(scheduled));
        }
        self.progress.update(|counts| {
            counts.running -= 1;
            counts.done += 1;
            if outcome == Outcome::Verified {
                counts.bytes_verified += size;
            } else {
                counts.failed += 1;
            }
        });
        Transfer {
            client,
            server,
            batch,
            size,
            scheduled,
            dispatched,
            finished,
            report,
            outcome,
        }
    }
}

/// Runs the plan, client `i` against `servers[i % servers.len()]`
/// (`host:port` each; at least one).
pub async fn run_load(servers: &[String], plan: &LoadPlan, progress: Arc<Progress>) -> LoadRun {
    run_load_until(servers, plan, progress, StopSignal::never()).await
}

/// The failure kind of a transfer cancelled by an interrupt.
pub const INTERRUPTED: &str = "interrupted";

/// [`run_load`] that stops early when `stop` says so: no client starts
/// once it reaches [`RunState::Stopping`], and running transfers fail
/// with kind [`INTERRUPTED`] once it reaches [`RunState::Cancelled`].
/// The run holds the transfers that started.
pub async fn run_load_until(
    servers: &[String],
    plan: &LoadPlan,
    progress: Arc<Progress>,
    stop: StopSignal,
) -> LoadRun {
    let planned_bytes = plan.own_bytes();
    let planned = plan.own_clients().count();
    progress.update(|counts| {
        counts.planned += planned;
        counts.planned_bytes += planned_bytes;
    });
    let context = Arc::new(RunContext {
        servers: servers.to_vec(),
        plan: plan.clone(),
        spec: JobSpec {
            operation: Operation::Encrypt,
            password: plan.password.clone(),
            iterations: plan.iterations,
            key_derivation: plan.key_derivation,
        },
        started: Instant::now(),
        progress,
        stop: stop.clone(),
    });
    let started_at = SystemTime::now();
    let mut transfers = Vec::with_capacity(planned);
    if servers.is_empty() {
        return LoadRun {
            duration: Duration::ZERO,
            started_at,
            transfers,
        };
    }
    let own = |range: &Range<usize>| -> Vec<usize> {
        range
            .clone()
            .filter(|client| plan.shard.owns(*client))
            .collect()
    };
    let mut running = JoinSet::new();
    match plan.arrival {
        Arrival::Batches(_) => {
            // Each batch keeps its global number; a shard runs its own
            // clients of it (none: nothing to wait for).
            let batches: Vec<Vec<usize>> = plan.batches().map(|range| own(&range)).collect();
            let mut keys = batches
                .first()
                .map(|first| derive_ahead(&context.spec, first.len()));
            for (batch, range) in batches.iter().enumerate() {
                if stop.state() >= RunState::Stopping {
                    break;
                }
                let scheduled = context.started.elapsed();
                // The next batch's keys derive while this batch runs.
                let this = std::mem::replace(
                    &mut keys,
                    batches
                        .get(batch + 1)
                        .map(|next| derive_ahead(&context.spec, next.len())),
                );
                let mut this = this.unwrap_or_default().into_iter();
                for &client in range {
                    let key = this.next().flatten();
                    running.spawn(Arc::clone(&context).client(client, Some(batch), scheduled, key));
                }
                collect(&mut running, &mut transfers).await;
            }
        }
        Arrival::Rate(rate) => {
            for client in plan.own_clients() {
                let scheduled = Duration::from_secs_f64(client as f64 / rate);
                let mut stopping = stop.clone();
                tokio::select! {
                    () = tokio::time::sleep_until((context.started + scheduled).into()) => {}
                    () = stopping.reached(RunState::Stopping) => break,
                }
                running.spawn(Arc::clone(&context).client(client, None, scheduled, None));
            }
            collect(&mut running, &mut transfers).await;
        }
    }
    transfers.sort_by_key(|transfer| transfer.client);
    LoadRun {
        duration: context.started.elapsed(),
        started_at,
        transfers,
    }
}

/// A client's key, derived ahead on tokio's blocking pool (a fresh salt,
/// PBKDF2 with the job's password and iterations).
pub type KeyAhead = tokio::task::JoinHandle<Result<DerivedKeyParams, ClientError>>;

/// Starts deriving the keys of a batch's `clients` clients (one each, in
/// order), when `spec` lets the client derive them (key derivation auto or
/// client): a batch's clients then find their keys ready instead of all
/// running PBKDF2 at once while the server waits for them. With key
/// derivation `server`, nothing (each job sends the password). A key the
/// server turns out not to accept (an aesd without key source 2, with
/// `auto`) is dropped and the password sent.
fn derive_ahead(spec: &JobSpec, clients: usize) -> Vec<Option<KeyAhead>> {
    (0..clients)
        .map(|_| {
            (spec.key_derivation != KeyDerivation::Server).then(|| {
                let (password, iterations) = (spec.password.clone(), spec.iterations);
                tokio::task::spawn_blocking(move || {
                    let salt = key_source::fresh_salt()?;
                    Ok(key_source::derive(password.as_bytes(), salt, iterations))
                })
            })
        })
        .collect()
}

/// Waits for every task in `running`.
async fn collect(running: &mut JoinSet<Transfer>, transfers: &mut Vec<Transfer>) {
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok(transfer) => transfers.push(transfer),
            Err(err) => tracing::error!("a client task failed: {err}"),
        }
    }
}

/// Where a transfer goes and how it connects.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The server, `host:port`.
    pub server: &'a str,
    /// TLS, and the token if the server asks for one.
    pub options: &'a ConnectOptions,
    /// The job fails after this long of server silence (see
    /// [`Client::set_idle_timeout`]).
    pub idle_timeout: Duration,
}

/// One client: connect to `target`, take its key from `key_ahead` if it
/// was derived ahead (else choose and derive it now), encrypt `size` bytes
/// of the seeded pattern, verify the result; bytes and queue state go to
/// `progress`.
pub async fn transfer(
    target: Target<'_>,
    spec: &JobSpec,
    format: &LoadFormat,
    key_ahead: Option<KeyAhead>,
    seed: u64,
    size: u64,
    progress: &Progress,
) -> (Option<JobReport>, Outcome) {
    let failed = |kind: &str, message: String| Outcome::Failed {
        kind: kind.to_owned(),
        message,
    };
    let connect = Client::connect_within(target.server, target.options, target.idle_timeout);
    let mut client = match connect.await {
        Ok(client) => client,
        Err(err) => return (None, failed(err.kind(), err.to_string())),
    };
    client.set_idle_timeout(target.idle_timeout);
    let mut source = Metered::new(PatternSource::new(seed, size), progress);
    match format {
        LoadFormat::Age(identity) => {
            return age_transfer(client, identity, &mut source, seed, size, progress).await;
        }
        LoadFormat::ByName(key) => {
            return by_name_transfer(target, client, key, &mut source, seed, size, progress).await;
        }
        LoadFormat::Openssl => {}
    }
    // The key is chosen (and, with key source 2, derived here) before the
    // job, so the verifier takes the client's key instead of running
    // PBKDF2 again (see crate::verify).
    let key = match key_ahead {
        Some(ahead) => match ahead.await {
            Ok(Ok(derived)) => client.prepare_derived_key(spec, derived),
            Ok(Err(err)) => Err(err),
            Err(err) => Err(ClientError::KeyDerivation(err.to_string())),
        },
        None => client.prepare_key(spec, &mut source).await,
    };
    let key = match key {
        Ok(key) => key,
        Err(err) => return (None, failed(err.kind(), err.to_string())),
    };
    let mut sink = VerifyingSink::for_job(
        key.derived(),
        spec.password.as_bytes(),
        spec.iterations,
        Pattern::new(seed),
        size,
    );
    let mut queued = false;
    let result = client
        .run_prepared_job(spec, key, &mut source, &mut sink, |event| {
            track_queued(&mut queued, event, progress);
        })
        .await;
    conclude(client, result, queued, progress, || {
        sink.finish().map(drop).map_err(|err| err.to_string())
    })
    .await
}

/// An age encryption of the pattern to `identity`'s recipient, verified
/// by [`AgeVerifyingSink`] with the identity.
async fn age_transfer(
    mut client: Client,
    identity: &aesd_age::Identity,
    source: &mut Metered<'_, PatternSource>,
    seed: u64,
    size: u64,
    progress: &Progress,
) -> (Option<JobReport>, Outcome) {
    let spec = aesd_client::AgeSpec {
        operation: Operation::Encrypt,
        recipients: vec![identity.recipient()],
        identities: Vec::new(),
        passphrase: None,
        armor: false,
    };
    let mut sink = AgeVerifyingSink::new(identity.clone(), Pattern::new(seed), size);
    let mut queued = false;
    let result = client
        .run_age_job_observed(&spec, source, &mut sink, |event| {
            track_queued(&mut queued, event, progress);
        })
        .await;
    conclude(client, result, queued, progress, || {
        sink.finish().map(drop).map_err(|err| err.to_string())
    })
    .await
}

/// A by-name encryption of the pattern under `key`, verified by a
/// decryption by name on a second connection ([`encrypt_verified`]).
async fn by_name_transfer(
    target: Target<'_>,
    mut client: Client,
    key: &KeyByName,
    source: &mut Metered<'_, PatternSource>,
    seed: u64,
    size: u64,
    progress: &Progress,
) -> (Option<JobReport>, Outcome) {
    let failed = |err: ClientError| {
        (
            None,
            Outcome::Failed {
                kind: err.kind().to_owned(),
                message: err.to_string(),
            },
        )
    };
    if let Err(err) = client.send_key_token(key.token.as_bytes()).await {
        return failed(err);
    }
    let connect = Client::connect_within(target.server, target.options, target.idle_timeout);
    let mut checker = match connect.await {
        Ok(checker) => checker,
        Err(err) => return failed(err),
    };
    checker.set_idle_timeout(target.idle_timeout);
    if let Err(err) = checker.send_key_token(key.token.as_bytes()).await {
        return failed(err);
    }
    let mut queued = false;
    let result = encrypt_verified(
        &mut client,
        &mut checker,
        &key.name,
        source,
        Pattern::new(seed),
        size,
        |event| track_queued(&mut queued, event, progress),
    )
    .await;
    checker.close().await;
    let (result, verdict) = match result {
        Ok((report, verdict)) => (Ok(report), verdict),
        Err(err) => (Err(err), Ok(())),
    };
    conclude(client, result, queued, progress, || {
        verdict.map_err(|err| err.to_string())
    })
    .await
}

/// Ends a transfer: the progress display's queued count put right, then
/// the job's error, or the verifier's verdict on its output.
async fn conclude(
    client: Client,
    result: Result<JobReport, ClientError>,
    queued: bool,
    progress: &Progress,
    verdict: impl FnOnce() -> Result<(), String>,
) -> (Option<JobReport>, Outcome) {
    if queued {
        progress.update(|counts| counts.queued -= 1);
    }
    let report = match result {
        Ok(report) => report,
        Err(err) => {
            return (
                None,
                Outcome::Failed {
                    kind: err.kind().to_owned(),
                    message: err.to_string(),
                },
            );
        }
    };
    client.close().await;
    let outcome = match verdict() {
        Ok(()) => Outcome::Verified,
        Err(message) => Outcome::Failed {
            kind: "verify".to_owned(),
            message,
        },
    };
    (Some(report), outcome)
}

/// Follows a job's events into the progress display's count of queued
/// clients.
fn track_queued(queued: &mut bool, event: JobEvent, progress: &Progress) {
    let change = match event {
        JobEvent::BeginSent => !*queued,
        JobEvent::Started => *queued,
        JobEvent::Queued { .. } => false,
    };
    if change {
        *queued = !*queued;
        let now_queued = *queued;
        progress.update(|counts| match now_queued {
            true => counts.queued += 1,
            false => counts.queued -= 1,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(clients: usize, arrival: Arrival) -> LoadPlan {
        LoadPlan {
            clients,
            arrival,
            sizes: SizeDist::uniform(vec![2, 5, 10, 20]).expect("valid"),
            size_period: None,
            seed: 1,
            iterations: 1000,
            key_derivation: KeyDerivation::Auto,
            password: Password::new(b"pw".to_vec()),
            token: None,
            tls: None,
            idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
            shard: Shard::WHOLE,
            bind: None,
            format: crate::load::LoadFormat::Openssl,
        }
    }

    #[test]
    fn batches_cover_every_client_once_in_order() {
        let ranges: Vec<_> = plan(25, Arrival::Batches(10)).batches().collect();
        assert_eq!(ranges, vec![0..10, 10..20, 20..25]);
        assert_eq!(
            plan(3, Arrival::Batches(0)).batches().count(),
            3,
            "batch 0 means one at a time"
        );
        assert_eq!(plan(4, Arrival::Rate(2.0)).batches().count(), 4);
    }

    #[test]
    fn sizes_are_drawn_from_the_list_reproducibly_and_all_appear() {
        let plan = plan(100, Arrival::Batches(10));
        let sizes: Vec<u64> = (0..100).map(|i| plan.size_of(i)).collect();
        assert!(sizes.iter().all(|size| plan.sizes.sizes().contains(size)));
        for size in plan.sizes.sizes() {
            assert!(sizes.contains(size), "size {size} never drawn");
        }
        assert_eq!(sizes, (0..100).map(|i| plan.size_of(i)).collect::<Vec<_>>());
        let mut other = plan.clone();
        other.seed = 2;
        assert_ne!(
            sizes,
            (0..100).map(|i| other.size_of(i)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_size_period_repeats_the_sizes_but_not_the_data() {
        let mut plan = plan(30, Arrival::Batches(10));
        plan.size_period = Some(10);
        for index in 10..30 {
            assert_eq!(plan.size_of(index), plan.size_of(index % 10));
            assert_ne!(plan.data_seed(index), plan.data_seed(index % 10));
        }
    }

    #[test]
    fn the_shards_together_run_the_unsharded_jobs_once() {
        // Each job as the runner sees it: client, batch, size, data, server.
        let jobs = |plan: &LoadPlan| -> Vec<(usize, usize, u64, u64, usize)> {
            let batches: Vec<Range<usize>> = plan.batches().collect();
            plan.own_clients()
                .map(|client| {
                    let batch = batches
                        .iter()
                        .position(|range| range.contains(&client))
                        .expect("in a batch");
                    let server = LoadPlan::server_of(client, 3);
                    (
                        client,
                        batch,
                        plan.size_of(client),
                        plan.data_seed(client),
                        server,
                    )
                })
                .collect()
        };
        let mut whole = plan(47, Arrival::Batches(10));
        whole.size_period = Some(10);
        let expected = jobs(&whole);
        assert_eq!(expected.len(), 47);
        for count in [1, 2, 3, 5, 47, 60] {
            let mut union = Vec::new();
            for index in 0..count {
                let mut shard = whole.clone();
                shard.shard = Shard::new(index, count).expect("valid");
                let own = jobs(&shard);
                assert_eq!(shard.own_bytes(), own.iter().map(|job| job.2).sum::<u64>());
                union.extend(own);
            }
            union.sort_unstable();
            assert_eq!(union, expected, "{count} shards");
        }
    }

    #[test]
    fn clients_go_round_robin_over_the_servers() {
        let spread: Vec<usize> = (0..7).map(|i| LoadPlan::server_of(i, 3)).collect();
        assert_eq!(spread, vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(LoadPlan::server_of(5, 1), 0);
    }
}
