//! `aesload merge`: the `--json` documents of a run's shards (`--shard
//! I/N`, one per process or machine) into one document, as if one process
//! had run every client.
//!
//! Counts, bytes and time totals add up; percentiles come from the
//! shards' histograms added together (never from averaged percentiles), so
//! they are those of one histogram of every transfer; a suite's duration is
//! the union of the shards' windows (first intended start to last end of
//! each, in wall-clock time), and its throughput the bytes over it. The
//! shards must be one run: the same suites, seed, scale, iterations and
//! warm-up, every shard once. Transfers keep their global client numbers;
//! their times and the server metrics' are rebased on the earliest shard's
//! start.

use std::collections::BTreeMap;

use crate::histogram::{HistogramError, LatencyHistogram};
use crate::output::json::{Document, PercentilesJson, ServerJson, SuiteJson, SummaryJson};
use crate::percentiles::Percentiles;
use crate::report::Summary;

/// One shard's document and the file it came from.
#[derive(Debug, Clone)]
pub struct ShardDocument {
    /// The file name (for messages and `merged_from`).
    pub file: String,
    /// Its contents.
    pub document: Document,
}

/// The documents are not the shards of one run, or cannot be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// No file was given.
    #[error("nothing to merge: give the --json file of every shard")]
    NoFiles,
    /// A document `aesload merge` wrote.
    #[error("{file} is already a merged run (of {from}): merge the shards' own files")]
    AlreadyMerged {
        /// The file.
        file: String,
        /// What it was merged from.
        from: String,
    },
    /// A document without a shard (from an aesload before `--shard`).
    #[error("{file} names no shard (written by an older aesload): rerun it with --shard I/N")]
    NoShard {
        /// The file.
        file: String,
    },
    /// A summary without histograms (from an older aesload).
    #[error(
        "{file}: {part} has no histograms (written by an older aesload): its percentiles \
         cannot be merged exactly"
    )]
    NoHistograms {
        /// The file.
        file: String,
        /// Which summary.
        part: String,
    },
    /// A histogram could not be read.
    #[error("{file}: {part}: {source}")]
    Histogram {
        /// The file.
        file: String,
        /// Which summary.
        part: String,
        /// Why.
        source: HistogramError,
    },
    /// Two documents differ where the shards of one run agree.
    #[error(
        "{file} is not a shard of the same run as {first}: its {what} is {found}, {first}'s is \
         {expected}"
    )]
    Mismatch {
        /// The file that differs.
        file: String,
        /// The first file, the reference.
        first: String,
        /// What differs (`seed`, `suites`, `shard count`...).
        what: String,
        /// Its value in `file`.
        found: String,
        /// Its value in `first`.
        expected: String,
    },
    /// A shard given twice.
    #[error("shard {shard} is given twice: {first} and {second}")]
    Duplicate {
        /// The shard, `I/N`.
        shard: String,
        /// The first file with it.
        first: String,
        /// The second.
        second: String,
    },
    /// Shards missing.
    #[error("shards missing: {missing} (of {count}); give every shard's file")]
    Missing {
        /// The missing shards, `I/N, ...`.
        missing: String,
        /// How many shards the run has.
        count: usize,
    },
}

/// Merges the shards' documents into one (see the module's doc).
pub fn merge(shards: &[ShardDocument]) -> Result<Document, MergeError> {
    let first = shards.first().ok_or(MergeError::NoFiles)?;
    let ordered = check_shards(shards)?;
    for shard in &ordered {
        check_same_run(first, shard)?;
    }
    let origin = ordered
        .iter()
        .map(|shard| shard.document.started_unix_s)
        .fold(f64::INFINITY, f64::min);
    let mut suites = Vec::new();
    for (index, reference) in first.document.suites.iter().enumerate() {
        let parts: Vec<(&ShardDocument, &SuiteJson)> = ordered
            .iter()
            .map(|shard| (*shard, &shard.document.suites[index]))
            .collect();
        suites.push(merge_suite(reference, &parts)?);
    }
    let duration_s = suites.iter().map(|suite| suite.summary.duration_s).sum();
    let parts: Vec<(&str, &SummaryJson)> = suites
        .iter()
        .map(|suite| ("the merged run", &suite.summary))
        .collect();
    let summary = combine(&parts, duration_s, "the run")?;
    let mut transfers = Vec::new();
    for shard in &ordered {
        for transfer in &shard.document.transfers {
            let mut transfer = transfer.clone();
            let suite = |document: &Document| {
                document
                    .suites
                    .iter()
                    .find(|suite| suite.name == transfer.suite)
                    .map(|suite| suite.started_unix_s)
            };
            if let (Some(own), Some(merged)) = (
                suite(&shard.document),
                suites
                    .iter()
                    .find(|suite| suite.name == transfer.suite)
                    .map(|suite| suite.started_unix_s),
            ) {
                transfer.start_s += own - merged;
            }
            transfers.push(transfer);
        }
    }
    let order = |name: &str| {
        suites
            .iter()
            .position(|suite| suite.name == name)
            .unwrap_or(usize::MAX)
    };
    transfers.sort_by_key(|transfer| (order(&transfer.suite), transfer.client));
    let mut server_metrics = Vec::new();
    for shard in &ordered {
        for sample in &shard.document.server_metrics {
            let mut sample = sample.clone();
            sample.t_s += shard.document.started_unix_s - origin;
            server_metrics.push(sample);
        }
    }
    server_metrics.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut parameters = first.document.parameters.clone();
    parameters.servers = distinct(
        ordered
            .iter()
            .flat_map(|shard| shard.document.parameters.servers.iter().map(String::as_str)),
    );
    parameters.embedded = ordered
        .iter()
        .all(|shard| shard.document.parameters.embedded);
    let binds = distinct(
        ordered
            .iter()
            .filter_map(|shard| shard.document.parameters.bind.as_deref()),
    );
    parameters.bind = (!binds.is_empty()).then(|| binds.join(","));
    Ok(Document {
        schema_version: first.document.schema_version,
        tool: format!("aesload {} (merge)", env!("CARGO_PKG_VERSION")),
        interrupted: ordered.iter().any(|shard| shard.document.interrupted),
        parameters,
        summary,
        suites,
        transfers,
        server_metrics,
        started_unix_s: origin,
        shard: None,
        merged_from: ordered
            .iter()
            .map(|shard| match shard.document.shard {
                Some(own) => format!("{} (shard {own})", shard.file),
                None => shard.file.clone(),
            })
            .collect(),
    })
}

/// Each shard once, `0/N` to `N-1/N`, all of the same `N`: the
/// documents in shard order.
fn check_shards(shards: &[ShardDocument]) -> Result<Vec<&ShardDocument>, MergeError> {
    let first = &shards[0];
    let shard_of = |shard: &ShardDocument| match shard.document.shard {
        Some(own) => Ok(own),
        None if !shard.document.merged_from.is_empty() => Err(MergeError::AlreadyMerged {
            file: shard.file.clone(),
            from: shard.document.merged_from.join(", "),
        }),
        None => Err(MergeError::NoShard {
            file: shard.file.clone(),
        }),
    };
    let count = shard_of(first)?.count;
    let mut slots: Vec<Option<&ShardDocument>> = vec![None; count];
    for shard in shards {
        let own = shard_of(shard)?;
        if own.count != count {
            return Err(MergeError::Mismatch {
                file: shard.file.clone(),
                first: first.file.clone(),
                what: "shard count".to_owned(),
                found: own.count.to_string(),
                expected: count.to_string(),
            });
        }
        // A document's shard was checked when it was written; a file
        // edited by hand may still say 5/3.
        let Some(slot) = slots.get_mut(own.index) else {
            return Err(MergeError::Mismatch {
                file: shard.file.clone(),
                first: first.file.clone(),
                what: "shard".to_owned(),
                found: own.to_string(),
                expected: format!("one of 0/{count} to {}/{count}", count - 1),
            });
        };
        if let Some(earlier) = slot {
            return Err(MergeError::Duplicate {
                shard: own.to_string(),
                first: earlier.file.clone(),
                second: shard.file.clone(),
            });
        }
        *slot = Some(shard);
    }
    let missing: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.is_none())
        .map(|(index, _)| format!("{index}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            missing: missing.join(", "),
            count,
        });
    }
    Ok(slots.into_iter().flatten().collect())
}

/// `shard` ran the same plan as `first`.
fn check_same_run(first: &ShardDocument, shard: &ShardDocument) -> Result<(), MergeError> {
    let mismatch = |what: &str, found: String, expected: String| MergeError::Mismatch {
        file: shard.file.clone(),
        first: first.file.clone(),
        what: what.to_owned(),
        found,
        expected,
    };
    let (a, b) = (&first.document.parameters, &shard.document.parameters);
    let checks: [(&str, String, String); 6] = [
        (
            "suites",
            format!("{:?}", b.suites),
            format!("{:?}", a.suites),
        ),
        ("seed", b.seed.to_string(), a.seed.to_string()),
        ("scale", b.scale.to_string(), a.scale.to_string()),
        (
            "iterations",
            b.iterations.to_string(),
            a.iterations.to_string(),
        ),
        (
            "warm-up (s)",
            format!("{:?}", b.warmup_s),
            format!("{:?}", a.warmup_s),
        ),
        (
            "warm-up (transfers)",
            format!("{:?}", b.warmup_transfers),
            format!("{:?}", a.warmup_transfers),
        ),
    ];
    for (what, found, expected) in checks {
        if found != expected {
            return Err(mismatch(what, found, expected));
        }
    }
    let names = |document: &Document| -> Vec<String> {
        document
            .suites
            .iter()
            .map(|suite| suite.name.clone())
            .collect()
    };
    if names(&first.document) != names(&shard.document) {
        return Err(mismatch(
            "suites run",
            format!("{:?}", names(&shard.document)),
            format!("{:?}", names(&first.document)),
        ));
    }
    for (a, b) in first.document.suites.iter().zip(&shard.document.suites) {
        let plan = |suite: &SuiteJson| {
            format!(
                "{} clients, {} (chunk {:?}, rate {:?}), sizes {:?} weights {:?} period {:?}",
                suite.clients,
                suite.arrival,
                suite.chunk,
                suite.rate_per_s,
                suite.sizes,
                suite.weights,
                suite.size_period
            )
        };
        if plan(a) != plan(b) {
            return Err(mismatch(&format!("{} plan", a.name), plan(b), plan(a)));
        }
    }
    Ok(())
}

/// One suite of every shard, merged.
fn merge_suite(
    reference: &SuiteJson,
    parts: &[(&ShardDocument, &SuiteJson)],
) -> Result<SuiteJson, MergeError> {
    let summaries: Vec<(&str, &SummaryJson)> = parts
        .iter()
        .map(|(shard, suite)| (shard.file.as_str(), &suite.summary))
        .collect();
    let duration_s = union_length(summaries.iter().filter_map(|(_, summary)| {
        Some((summary.window_start_unix_s?, summary.window_end_unix_s?))
    }));
    let summary = combine(&summaries, duration_s, &reference.name)?;
    let mut servers: Vec<(String, Vec<(&str, &SummaryJson)>)> = Vec::new();
    for (shard, suite) in parts {
        for server in &suite.per_server {
            let entry = match servers.iter().position(|(name, _)| *name == server.server) {
                Some(index) => &mut servers[index].1,
                None => {
                    servers.push((server.server.clone(), Vec::new()));
                    &mut servers.last_mut().expect("just pushed").1
                }
            };
            entry.push((shard.file.as_str(), &server.summary));
        }
    }
    let per_server = servers
        .iter()
        .map(|(server, summaries)| {
            let part = format!("{} on {server}", reference.name);
            let mut merged = combine(summaries, duration_s, &part)?;
            // Per server, the suite's window (their throughputs add up).
            merged.window_start_unix_s = summary.window_start_unix_s;
            merged.window_end_unix_s = summary.window_end_unix_s;
            Ok(ServerJson {
                server: server.clone(),
                summary: merged,
            })
        })
        .collect::<Result<Vec<_>, MergeError>>()?;
    Ok(SuiteJson {
        summary,
        per_server,
        started_unix_s: parts
            .iter()
            .map(|(_, suite)| suite.started_unix_s)
            .fold(f64::INFINITY, f64::min),
        ..reference.clone()
    })
}

/// The summaries `parts` (each with its file's name) as one, over
/// `duration_s`; `part` names them in errors.
fn combine(
    parts: &[(&str, &SummaryJson)],
    duration_s: f64,
    part: &str,
) -> Result<SummaryJson, MergeError> {
    let mut total = LatencyHistogram::new();
    let mut queue = LatencyHistogram::new();
    let mut failures = BTreeMap::new();
    let mut merged = SummaryJson {
        bytes_processed: 0,
        throughput_bytes_per_sec: 0.0,
        duration_s,
        transfers: 0,
        verified: 0,
        failed: 0,
        failures: BTreeMap::new(),
        warmup_excluded: 0,
        total_network_s: 0.0,
        total_processing_s: 0.0,
        total_queue_s: 0.0,
        avg_network_s: 0.0,
        avg_processing_s: 0.0,
        avg_queue_s: 0.0,
        total_time_s: PercentilesJson::from(&Percentiles::default()),
        queue_time_s: PercentilesJson::from(&Percentiles::default()),
        measured: 0,
        window_start_unix_s: None,
        window_end_unix_s: None,
        total_time_histogram: None,
        queue_time_histogram: None,
    };
    for (file, summary) in parts {
        let (own_total, own_queue) = summary
            .histograms()
            .ok_or_else(|| MergeError::NoHistograms {
                file: (*file).to_owned(),
                part: part.to_owned(),
            })?
            .map_err(|source| MergeError::Histogram {
                file: (*file).to_owned(),
                part: part.to_owned(),
                source,
            })?;
        total.add(&own_total);
        queue.add(&own_queue);
        merged.bytes_processed += summary.bytes_processed;
        merged.transfers += summary.transfers;
        merged.verified += summary.verified;
        merged.failed += summary.failed;
        merged.warmup_excluded += summary.warmup_excluded;
        merged.measured += summary.measured;
        merged.total_network_s += summary.total_network_s;
        merged.total_processing_s += summary.total_processing_s;
        merged.total_queue_s += summary.total_queue_s;
        for (kind, count) in &summary.failures {
            *failures.entry(kind.clone()).or_insert(0) += count;
        }
    }
    merged.failures = failures;
    if merged.measured > 0 {
        let measured = merged.measured as f64;
        merged.avg_network_s = merged.total_network_s / measured;
        merged.avg_processing_s = merged.total_processing_s / measured;
        merged.avg_queue_s = merged.total_queue_s / measured;
    }
    if duration_s > 0.0 {
        merged.throughput_bytes_per_sec = merged.bytes_processed as f64 / duration_s;
    }
    merged.total_time_s = PercentilesJson::from(&total.percentiles());
    merged.queue_time_s = PercentilesJson::from(&queue.percentiles());
    merged.total_time_histogram = Some(total.to_json());
    merged.queue_time_histogram = Some(queue.to_json());
    merged.set_window_of(parts.iter().map(|(_, summary)| *summary));
    Ok(merged)
}

/// The total length of the union of `intervals` (`(start, end)`): their
/// span when they overlap, without the gaps when they do not.
pub fn union_length(intervals: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let mut intervals: Vec<(f64, f64)> = intervals
        .into_iter()
        .filter(|(start, end)| end >= start)
        .collect();
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut length = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in intervals {
        current = match current {
            Some((from, to)) if start <= to => Some((from, to.max(end))),
            Some((from, to)) => {
                length += to - from;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((from, to)) = current {
        length += to - from;
    }
    length
}

/// Each string once, in first-seen order.
fn distinct<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        if !seen.iter().any(|known| known == item) {
            seen.push(item.to_owned());
        }
    }
    seen
}

/// A summary of a document, for the report's tables (the percentiles from
/// its histograms when it has them).
pub fn summary_of(json: &SummaryJson) -> Summary {
    let secs = std::time::Duration::from_secs_f64;
    let (total_histogram, queue_histogram) = match json.histograms() {
        Some(Ok(histograms)) => histograms,
        _ => (LatencyHistogram::new(), LatencyHistogram::new()),
    };
    let percentiles =
        |histogram: &LatencyHistogram, json: &PercentilesJson| match histogram.is_empty() {
            false => histogram.percentiles(),
            true => Percentiles {
                count: 0,
                p50: secs(json.p50),
                p90: secs(json.p90),
                p99: secs(json.p99),
                max: secs(json.max),
            },
        };
    Summary {
        bytes_processed: json.bytes_processed,
        duration: secs(json.duration_s),
        throughput_bytes_per_sec: json.throughput_bytes_per_sec,
        total_network: secs(json.total_network_s),
        total_processing: secs(json.total_processing_s),
        total_queue: secs(json.total_queue_s),
        measured: json.measured,
        transfers: json.transfers,
        verified: json.verified,
        failures: json.failures.clone(),
        warmup_excluded: json.warmup_excluded,
        total_time: percentiles(&total_histogram, &json.total_time_s),
        queue_time: percentiles(&queue_histogram, &json.queue_time_s),
        total_histogram,
        queue_histogram,
        window: None,
        planned: None,
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use aesd_client::job::JobReport;
    use aesd_proto::{Done, Password};

    use super::*;
    use crate::distribution::SizeDist;
    use crate::durations::Warmup;
    use crate::load::{Arrival, LoadPlan};
    use crate::record::{LoadRun, Outcome, RunParameters, SuiteRun, Transfer};
    use crate::shard::Shard;

    const CLIENTS: usize = 40;

    fn plan(shard: Shard) -> LoadPlan {
        LoadPlan {
            clients: CLIENTS,
            arrival: Arrival::Batches(10),
            sizes: SizeDist::uniform(vec![1000, 5000, 20_000]).expect("valid"),
            size_period: None,
            seed: 5,
            iterations: 1000,
            key_derivation: aesd_client::KeyDerivation::Auto,
            password: Password::new(b"pw".to_vec()),
            token: None,
            tls: None,
            idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
            shard,
            bind: None,
            format: crate::load::LoadFormat::Openssl,
        }
    }

    /// Client `client`'s transfer, the same whichever shard runs it:
    /// times spread over three orders of magnitude, every seventh failed.
    fn transfer(plan: &LoadPlan, client: usize) -> Transfer {
        let micros = |x: u64| Duration::from_micros(x);
        let mixed = crate::pattern::splitmix64(client as u64);
        let total = micros(1_000 + mixed % 2_000_000);
        let queue = micros(mixed % 997 * 100);
        let scheduled = Duration::from_millis(100 * (client / 10) as u64);
        let failed = client % 7 == 3;
        let size = plan.size_of(client);
        Transfer {
            client,
            server: client % 2,
            batch: Some(client / 10),
            size,
            scheduled,
            dispatched: scheduled,
            finished: scheduled + total,
            report: (!failed).then(|| JobReport {
                bytes_sent: size,
                bytes_received: size + 16,
                total,
                queue,
                processing: total / 3,
                network: total - total / 3,
                queue_positions: vec![],
                done: Done {
                    bytes_in: size,
                    bytes_out: size + 16,
                    queue_us: 0,
                    processing_us: 0,
                },
            }),
            outcome: match failed {
                true => Outcome::Failed {
                    kind: "busy".into(),
                    message: "full".into(),
                },
                false => Outcome::Verified,
            },
        }
    }

    /// The document of `shard`, its run started `delay` after a common
    /// instant.
    fn document(shard: Shard, delay: Duration, seed: u64) -> Document {
        let start: SystemTime = UNIX_EPOCH + Duration::from_secs(1_795_629_600) + delay;
        let mut plan = plan(shard);
        plan.seed = seed;
        let transfers = plan
            .own_clients()
            .map(|client| transfer(&plan, client))
            .collect();
        let bind: IpAddr = format!("127.0.0.{}", shard.index + 2).parse().expect("ip");
        let parameters = RunParameters {
            servers: vec!["10.0.0.1:7878".into(), "10.0.0.2:7878".into()],
            embedded: false,
            seed,
            scale: 1.0,
            iterations: 1000,
            format: "openssl",
            warmup: Warmup::None,
            shard,
            bind: Some(bind),
            started_at: start,
        };
        let run = SuiteRun {
            name: "large".into(),
            plan,
            run: LoadRun {
                duration: Duration::from_secs(3),
                started_at: start,
                transfers,
            },
        };
        Document::new(&parameters, &[run])
    }

    fn shards(count: usize) -> Vec<ShardDocument> {
        (0..count)
            .map(|index| ShardDocument {
                file: format!("shard-{index}.json"),
                document: document(Shard::new(index, count).expect("valid"), Duration::ZERO, 5),
            })
            .collect()
    }

    #[test]
    fn merged_shards_equal_the_unsharded_run() {
        let whole = document(Shard::WHOLE, Duration::ZERO, 5);
        for count in [1, 2, 3, 7] {
            let merged = merge(&shards(count)).expect("merges");
            for (merged, whole) in [
                (&merged.summary, &whole.summary),
                (&merged.suites[0].summary, &whole.suites[0].summary),
            ] {
                assert_eq!(merged.bytes_processed, whole.bytes_processed, "{count}");
                assert_eq!(
                    (
                        merged.transfers,
                        merged.verified,
                        merged.failed,
                        merged.measured
                    ),
                    (
                        whole.transfers,
                        whole.verified,
                        whole.failed,
                        whole.measured
                    ),
                    "{count}"
                );
                assert_eq!(merged.failures, whole.failures);
                assert_eq!(merged.total_time_histogram, whole.total_time_histogram);
                assert_eq!(merged.queue_time_histogram, whole.queue_time_histogram);
                assert_eq!(merged.total_time_s, whole.total_time_s, "{count}");
                assert_eq!(merged.queue_time_s, whole.queue_time_s, "{count}");
                assert!((merged.duration_s - whole.duration_s).abs() < 1e-6);
                assert!((merged.total_queue_s - whole.total_queue_s).abs() < 1e-6);
                assert!((merged.avg_network_s - whole.avg_network_s).abs() < 1e-6);
            }
            for (merged, whole) in merged.suites[0]
                .per_server
                .iter()
                .zip(&whole.suites[0].per_server)
            {
                assert_eq!(merged.server, whole.server);
                assert_eq!(
                    merged.summary.bytes_processed,
                    whole.summary.bytes_processed
                );
                assert_eq!(merged.summary.total_time_s, whole.summary.total_time_s);
            }
            let clients: Vec<usize> = merged.transfers.iter().map(|t| t.client).collect();
            assert_eq!(clients, (0..CLIENTS).collect::<Vec<_>>());
            assert_eq!(merged.transfers, whole.transfers, "{count}");
            assert_eq!(merged.shard, None);
            assert_eq!(merged.merged_from.len(), count);
        }
    }

    #[test]
    fn throughput_is_over_the_union_of_the_windows() {
        // Shard 1 starts 1 s after shard 0: the union is 1 s longer.
        let mut parts = shards(2);
        parts[1].document = document(Shard { index: 1, count: 2 }, Duration::from_secs(1), 5);
        let merged = merge(&parts).expect("merges");
        let own = |index: usize| {
            let summary = &parts[index].document.suites[0].summary;
            (
                summary.window_start_unix_s.expect("window"),
                summary.window_end_unix_s.expect("window"),
            )
        };
        let expected = own(1).1.max(own(0).1) - own(0).0;
        let summary = &merged.suites[0].summary;
        assert!((summary.duration_s - expected).abs() < 1e-9, "{summary:?}");
        let throughput = summary.bytes_processed as f64 / expected;
        assert!((summary.throughput_bytes_per_sec - throughput).abs() < 1e-6);
        // Shard 1's transfers moved 1 s later on the merged time line.
        let first_of_shard_1 = merged.transfers.iter().find(|t| t.client == 1).expect("1");
        assert!((first_of_shard_1.start_s - 1.0).abs() < 1e-9);
        assert_eq!(
            merged.parameters.bind.as_deref(),
            Some("127.0.0.2,127.0.0.3")
        );
    }

    #[test]
    fn the_union_leaves_gaps_out() {
        assert_eq!(union_length([(0.0, 2.0), (1.0, 3.0)]), 3.0);
        assert_eq!(union_length([(5.0, 6.0), (0.0, 1.0)]), 2.0);
        assert_eq!(union_length([(0.0, 4.0), (1.0, 2.0)]), 4.0);
        assert_eq!(union_length([]), 0.0);
    }

    #[test]
    fn not_the_shards_of_one_run_are_refused_with_the_reason() {
        let mut missing = shards(3);
        missing.remove(1);
        assert_eq!(
            merge(&missing).expect_err("missing"),
            MergeError::Missing {
                missing: "1/3".into(),
                count: 3
            }
        );

        let mut twice = shards(3);
        twice.push(ShardDocument {
            file: "again.json".into(),
            ..twice[2].clone()
        });
        assert_eq!(
            merge(&twice).expect_err("duplicate"),
            MergeError::Duplicate {
                shard: "2/3".into(),
                first: "shard-2.json".into(),
                second: "again.json".into()
            }
        );

        let mut other_seed = shards(2);
        other_seed[1].document = document(Shard { index: 1, count: 2 }, Duration::ZERO, 6);
        match merge(&other_seed).expect_err("seed") {
            MergeError::Mismatch {
                file,
                what,
                found,
                expected,
                ..
            } => assert_eq!(
                (
                    file.as_str(),
                    what.as_str(),
                    found.as_str(),
                    expected.as_str()
                ),
                ("shard-1.json", "seed", "6", "5")
            ),
            other => panic!("{other:?}"),
        }

        let mut other_suite = shards(2);
        other_suite[1].document.parameters.suites = vec!["basic2".into()];
        assert!(matches!(
            merge(&other_suite).expect_err("suite"),
            MergeError::Mismatch { what, .. } if what == "suites"
        ));

        let mut counts = shards(2);
        counts.push(shards(3).remove(2));
        match merge(&counts).expect_err("count") {
            MergeError::Mismatch { file, what, .. } => {
                assert_eq!(
                    (file.as_str(), what.as_str()),
                    ("shard-2.json", "shard count")
                )
            }
            other => panic!("{other:?}"),
        }

        let merged = merge(&shards(2)).expect("merges");
        let again = [ShardDocument {
            file: "merged.json".into(),
            document: merged,
        }];
        let err = merge(&again).expect_err("merged");
        assert!(matches!(err, MergeError::AlreadyMerged { .. }), "{err:?}");
        assert!(
            err.to_string().contains("shard-0.json (shard 0/2)"),
            "{err}"
        );

        let mut old = shards(1);
        old[0].document.suites[0].summary.total_time_histogram = None;
        assert!(matches!(
            merge(&old).expect_err("old"),
            MergeError::NoHistograms { part, .. } if part == "large"
        ));
        assert_eq!(merge(&[]).expect_err("none"), MergeError::NoFiles);
    }
}
