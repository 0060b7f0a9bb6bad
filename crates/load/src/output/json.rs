//! The `--json` document: the run's parameters, a summary of everything,
//! one entry per suite (its plan, summary and per-server breakdown) and
//! one object per transfer.
//!
//! [`FIELDS`] and [`SUMMARY_FIELDS`] list every field with its JSON type;
//! docs/aesload.md's "Output schema" section documents the same list,
//! and a test checks docs/aesload.md, these lists and real output agree.
//! The fields sharded runs added (at the end of both lists) are
//! documented in docs/sharded-load.md, with the rest of sharding.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::durations::Warmup;
use crate::histogram::{HistogramJson, LatencyHistogram};
use crate::load::Arrival;
use crate::percentiles::Percentiles;
use crate::record::{RunParameters, SuiteRun, Transfer};
use crate::report::Summary;
use crate::server_metrics::ServerSample;
use crate::shard::Shard;
use crate::start::unix_seconds;

/// Version of the document's layout; raised when a field changes meaning
/// or goes away (new fields may appear without a raise).
pub const SCHEMA_VERSION: u32 = 1;

/// Every field of the document (`a.b` inside objects, `a[]` for an
/// array's elements) and its JSON type (`integer`, `number`, `string`,
/// `boolean`, `array`, `object`, `summary` for a [`SummaryJson`],
/// `|null` when it may be null). `failures` maps failure kinds to counts.
pub const FIELDS: &[(&str, &str)] = &[
    ("schema_version", "integer"),
    ("tool", "string"),
    ("interrupted", "boolean"),
    ("parameters", "object"),
    ("parameters.suites", "array"),
    ("parameters.suites[]", "string"),
    ("parameters.servers", "array"),
    ("parameters.servers[]", "string"),
    ("parameters.embedded", "boolean"),
    ("parameters.seed", "integer"),
    ("parameters.scale", "number"),
    ("parameters.iterations", "integer"),
    ("parameters.format", "string"),
    ("parameters.warmup_s", "number|null"),
    ("parameters.warmup_transfers", "integer|null"),
    ("summary", "summary"),
    ("suites", "array"),
    ("suites[]", "object"),
    ("suites[].name", "string"),
    ("suites[].clients", "integer"),
    ("suites[].arrival", "string"),
    ("suites[].chunk", "integer|null"),
    ("suites[].rate_per_s", "number|null"),
    ("suites[].sizes", "array"),
    ("suites[].sizes[]", "integer"),
    ("suites[].weights", "array"),
    ("suites[].weights[]", "number"),
    ("suites[].size_period", "integer|null"),
    ("suites[].summary", "summary"),
    ("suites[].per_server", "array"),
    ("suites[].per_server[]", "object"),
    ("suites[].per_server[].server", "string"),
    ("suites[].per_server[].summary", "summary"),
    ("transfers", "array"),
    ("transfers[]", "object"),
    ("transfers[].suite", "string"),
    ("transfers[].client", "integer"),
    ("transfers[].server", "string"),
    ("transfers[].batch", "integer|null"),
    ("transfers[].bytes", "integer"),
    ("transfers[].start_s", "number"),
    ("transfers[].dispatch_delay_s", "number"),
    ("transfers[].total_s", "number"),
    ("transfers[].queue_s", "number|null"),
    ("transfers[].processing_s", "number|null"),
    ("transfers[].network_s", "number|null"),
    ("transfers[].verified", "boolean"),
    ("transfers[].warmup", "boolean"),
    ("transfers[].error_kind", "string|null"),
    ("transfers[].error", "string|null"),
    ("server_metrics", "array"),
    ("server_metrics[]", "object"),
    ("server_metrics[].t_s", "number"),
    ("server_metrics[].cpu_percent", "number|null"),
    ("server_metrics[].resident_bytes", "number|null"),
    ("server_metrics[].active_jobs", "number|null"),
    ("server_metrics[].queued_jobs", "number|null"),
    ("server_metrics[].temperature_c", "number|null"),
    ("started_unix_s", "number"),
    ("shard", "object|null"),
    ("shard.index", "integer"),
    ("shard.count", "integer"),
    ("merged_from", "array"),
    ("merged_from[]", "string"),
    ("parameters.bind", "string|null"),
    ("suites[].started_unix_s", "number"),
];

/// The fields of every `summary` object, as in [`FIELDS`].
pub const SUMMARY_FIELDS: &[(&str, &str)] = &[
    ("bytes_processed", "integer"),
    ("throughput_bytes_per_sec", "number"),
    ("duration_s", "number"),
    ("transfers", "integer"),
    ("verified", "integer"),
    ("failed", "integer"),
    ("failures", "object"),
    ("warmup_excluded", "integer"),
    ("total_network_s", "number"),
    ("total_processing_s", "number"),
    ("total_queue_s", "number"),
    ("avg_network_s", "number"),
    ("avg_processing_s", "number"),
    ("avg_queue_s", "number"),
    ("total_time_s", "object"),
    ("total_time_s.p50", "number"),
    ("total_time_s.p90", "number"),
    ("total_time_s.p99", "number"),
    ("total_time_s.max", "number"),
    ("queue_time_s", "object"),
    ("queue_time_s.p50", "number"),
    ("queue_time_s.p90", "number"),
    ("queue_time_s.p99", "number"),
    ("queue_time_s.max", "number"),
    ("measured", "integer"),
    ("window_start_unix_s", "number|null"),
    ("window_end_unix_s", "number|null"),
    ("total_time_histogram", "object"),
    ("total_time_histogram.significant_digits", "integer"),
    ("total_time_histogram.max_ns", "integer"),
    ("total_time_histogram.counts", "array"),
    ("total_time_histogram.counts[]", "array"),
    ("total_time_histogram.counts[][]", "integer"),
    ("queue_time_histogram", "object"),
    ("queue_time_histogram.significant_digits", "integer"),
    ("queue_time_histogram.max_ns", "integer"),
    ("queue_time_histogram.counts", "array"),
    ("queue_time_histogram.counts[]", "array"),
    ("queue_time_histogram.counts[][]", "integer"),
];

/// The whole `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `aesload` and its version.
    pub tool: String,
    /// Whether the run was interrupted (SIGINT/SIGTERM): the transfers
    /// are those that started, and suites after it did not run.
    #[serde(default)]
    pub interrupted: bool,
    /// The invocation's settings.
    pub parameters: ParametersJson,
    /// Every suite together.
    pub summary: SummaryJson,
    /// One entry per suite run, in order.
    pub suites: Vec<SuiteJson>,
    /// Every transfer of every suite.
    pub transfers: Vec<TransferJson>,
    /// The server's timeline from `--metrics-url` (empty without it).
    #[serde(default)]
    pub server_metrics: Vec<ServerSample>,
    /// When the invocation started (Unix seconds): the origin of
    /// `server_metrics[].t_s`.
    #[serde(default)]
    pub started_unix_s: f64,
    /// The part of the run this process ran (`0/1`: all of it); `None`
    /// in a document `aesload merge` wrote.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// The shard files a merged document was made of (empty otherwise).
    #[serde(default)]
    pub merged_from: Vec<String>,
}

/// Runs written before `--format` were openssl runs.
fn openssl_format() -> String {
    "openssl".to_owned()
}

/// Settings shared by the suites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParametersJson {
    /// Suites run, in order.
    pub suites: Vec<String>,
    /// Servers, in round-robin order.
    pub servers: Vec<String>,
    /// Whether the server was aesload's embedded one.
    pub embedded: bool,
    /// Seed of sizes and data.
    pub seed: u64,
    /// Factor applied to every file size.
    pub scale: f64,
    /// PBKDF2 iterations per job.
    pub iterations: u32,
    /// `openssl` or `age`.
    #[serde(default = "openssl_format")]
    pub format: String,
    /// Warm-up by time, in seconds.
    pub warmup_s: Option<f64>,
    /// Warm-up by count of transfers.
    pub warmup_transfers: Option<usize>,
    /// The local address connections came from (`--bind`).
    #[serde(default)]
    pub bind: Option<String>,
}

/// One suite's plan and results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteJson {
    /// `basic1`... or `custom`.
    pub name: String,
    /// Clients (one transfer each).
    pub clients: usize,
    /// `batches` (closed loop) or `open_loop`.
    pub arrival: String,
    /// Batch size (closed loop).
    pub chunk: Option<usize>,
    /// Arrival rate in clients per second (open loop).
    pub rate_per_s: Option<f64>,
    /// File sizes drawn from, in bytes (after `--scale`).
    pub sizes: Vec<u64>,
    /// Their relative weights.
    pub weights: Vec<f64>,
    /// Sizes repeat every this many clients.
    pub size_period: Option<usize>,
    /// The suite's figures.
    pub summary: SummaryJson,
    /// The suite's figures per server.
    pub per_server: Vec<ServerJson>,
    /// When the suite's run started (Unix seconds): the origin of its
    /// transfers' `start_s`.
    #[serde(default)]
    pub started_unix_s: f64,
}

/// One server's share of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerJson {
    /// `host:port`.
    pub server: String,
    /// Its figures, over the suite's window.
    pub summary: SummaryJson,
}

/// A [`Summary`] in seconds and bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryJson {
    /// Input bytes of verified transfers.
    pub bytes_processed: u64,
    /// `bytes_processed / duration_s`.
    pub throughput_bytes_per_sec: f64,
    /// First intended start to last end (warm-up left out).
    pub duration_s: f64,
    /// Transfers counted (warm-up left out).
    pub transfers: usize,
    /// Transfers verified.
    pub verified: usize,
    /// Transfers failed.
    pub failed: usize,
    /// Failed transfers by kind.
    pub failures: BTreeMap<String, usize>,
    /// Transfers left out as warm-up.
    pub warmup_excluded: usize,
    /// Sum of network time.
    pub total_network_s: f64,
    /// Sum of processing time.
    pub total_processing_s: f64,
    /// Sum of queue time.
    pub total_queue_s: f64,
    /// Average network time.
    pub avg_network_s: f64,
    /// Average processing time.
    pub avg_processing_s: f64,
    /// Average queue time.
    pub avg_queue_s: f64,
    /// Percentiles of verified transfers' total time.
    pub total_time_s: PercentilesJson,
    /// Percentiles of verified transfers' queue time.
    pub queue_time_s: PercentilesJson,
    /// Transfers with the server's figures (the averages' divisor).
    #[serde(default)]
    pub measured: usize,
    /// The window's start (first intended start), Unix seconds.
    #[serde(default)]
    pub window_start_unix_s: Option<f64>,
    /// The window's end (last end), Unix seconds.
    #[serde(default)]
    pub window_end_unix_s: Option<f64>,
    /// The histogram of `total_time_s`, losslessly (absent in documents of
    /// older aesload versions).
    #[serde(default)]
    pub total_time_histogram: Option<HistogramJson>,
    /// The histogram of `queue_time_s`.
    #[serde(default)]
    pub queue_time_histogram: Option<HistogramJson>,
}

/// [`Percentiles`] in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PercentilesJson {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// One transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferJson {
    /// Its suite.
    pub suite: String,
    /// Client index within the suite (intended start order).
    pub client: usize,
    /// Server it went to.
    pub server: String,
    /// Batch index (closed loop).
    pub batch: Option<usize>,
    /// Input bytes.
    pub bytes: u64,
    /// Intended start, seconds from the suite's start.
    pub start_s: f64,
    /// Intended to actual start.
    pub dispatch_delay_s: f64,
    /// Intended start to end.
    pub total_s: f64,
    /// Queue time (server-measured).
    pub queue_s: Option<f64>,
    /// Processing time (server-measured).
    pub processing_s: Option<f64>,
    /// `total − queue − processing`.
    pub network_s: Option<f64>,
    /// Whether the result verified.
    pub verified: bool,
    /// Whether the warm-up leaves it out of the summaries.
    pub warmup: bool,
    /// The failure's kind.
    pub error_kind: Option<String>,
    /// The failure.
    pub error: Option<String>,
}

impl Document {
    /// The document for `runs` made with `parameters`.
    pub fn new(parameters: &RunParameters, runs: &[SuiteRun]) -> Document {
        let warmup = parameters.warmup;
        let (warmup_s, warmup_transfers) = match warmup {
            Warmup::None => (None, None),
            Warmup::Time(time) => (Some(time.as_secs_f64()), None),
            Warmup::Transfers(count) => (None, Some(count)),
        };
        let server_name = |index: usize| {
            parameters
                .servers
                .get(index)
                .cloned()
                .unwrap_or_else(|| format!("#{index}"))
        };
        let suites: Vec<SuiteJson> = runs
            .iter()
            .map(|suite| {
                let (chunk, rate_per_s, arrival) = match suite.plan.arrival {
                    Arrival::Batches(chunk) => (Some(chunk), None, "batches"),
                    Arrival::Rate(rate) => (None, Some(rate), "open_loop"),
                };
                let per_server = Summary::per_server(&suite.run, warmup, parameters.servers.len())
                    .iter()
                    .enumerate()
                    .map(|(index, summary)| ServerJson {
                        server: server_name(index),
                        summary: SummaryJson::new(summary, suite.run.started_at),
                    })
                    .collect();
                SuiteJson {
                    name: suite.name.clone(),
                    clients: suite.plan.clients,
                    arrival: arrival.to_owned(),
                    chunk,
                    rate_per_s,
                    sizes: suite.plan.sizes.sizes().to_vec(),
                    weights: suite.plan.sizes.weights().to_vec(),
                    size_period: suite.plan.size_period,
                    summary: SummaryJson::new(
                        &Summary::of(&suite.run, warmup),
                        suite.run.started_at,
                    ),
                    per_server,
                    started_unix_s: unix_seconds(suite.run.started_at),
                }
            })
            .collect();
        let transfers = runs
            .iter()
            .flat_map(|suite| {
                suite.run.transfers.iter().map(|transfer| {
                    TransferJson::new(
                        &suite.name,
                        server_name(transfer.server),
                        transfer,
                        warmup.excludes(transfer),
                    )
                })
            })
            .collect();
        let mut summary = SummaryJson::new(&Summary::overall(runs, warmup), parameters.started_at);
        summary.set_window_of(suites.iter().map(|suite: &SuiteJson| &suite.summary));
        Document {
            schema_version: SCHEMA_VERSION,
            tool: format!("aesload {}", env!("CARGO_PKG_VERSION")),
            interrupted: false,
            parameters: ParametersJson {
                suites: runs.iter().map(|suite| suite.name.clone()).collect(),
                servers: parameters.servers.clone(),
                embedded: parameters.embedded,
                seed: parameters.seed,
                scale: parameters.scale,
                iterations: parameters.iterations,
                format: parameters.format.to_owned(),
                warmup_s,
                warmup_transfers,
                bind: parameters.bind.map(|bind| bind.to_string()),
            },
            summary,
            suites,
            transfers,
            server_metrics: Vec::new(),
            started_unix_s: unix_seconds(parameters.started_at),
            shard: Some(parameters.shard),
            merged_from: Vec::new(),
        }
    }

    /// The document with the server's timeline from `--metrics-url`.
    pub fn with_server_metrics(mut self, samples: Vec<ServerSample>) -> Document {
        self.server_metrics = samples;
        self
    }

    /// The document with the list of shard files it was merged from.
    pub fn merged_from(mut self, files: Vec<String>) -> Document {
        self.merged_from = files;
        self
    }

    /// The document of a run that was interrupted (`interrupted`).
    pub fn interrupted(mut self, interrupted: bool) -> Document {
        self.interrupted = interrupted;
        self
    }

    /// The document as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

impl SummaryJson {
    /// `summary`, whose window counts from `origin` (its run's start).
    pub fn new(summary: &Summary, origin: SystemTime) -> SummaryJson {
        let at = |offset: Duration| unix_seconds(origin) + offset.as_secs_f64();
        SummaryJson {
            bytes_processed: summary.bytes_processed,
            throughput_bytes_per_sec: summary.throughput_bytes_per_sec,
            duration_s: summary.duration.as_secs_f64(),
            transfers: summary.transfers,
            verified: summary.verified,
            failed: summary.failed(),
            failures: summary.failures.clone(),
            warmup_excluded: summary.warmup_excluded,
            total_network_s: summary.total_network.as_secs_f64(),
            total_processing_s: summary.total_processing.as_secs_f64(),
            total_queue_s: summary.total_queue.as_secs_f64(),
            avg_network_s: summary.average(summary.total_network).as_secs_f64(),
            avg_processing_s: summary.average(summary.total_processing).as_secs_f64(),
            avg_queue_s: summary.average(summary.total_queue).as_secs_f64(),
            total_time_s: PercentilesJson::from(&summary.total_time),
            queue_time_s: PercentilesJson::from(&summary.queue_time),
            measured: summary.measured,
            window_start_unix_s: summary.window.map(|(start, _)| at(start)),
            window_end_unix_s: summary.window.map(|(_, end)| at(end)),
            total_time_histogram: Some(summary.total_histogram.to_json()),
            queue_time_histogram: Some(summary.queue_histogram.to_json()),
        }
    }

    /// Sets the window to span those of `parts` (first start to last
    /// end; unset when none has one).
    pub fn set_window_of<'a>(&mut self, parts: impl IntoIterator<Item = &'a SummaryJson>) {
        let (mut start, mut end) = (None::<f64>, None::<f64>);
        for part in parts {
            if let (Some(from), Some(to)) = (part.window_start_unix_s, part.window_end_unix_s) {
                start = Some(start.map_or(from, |start| start.min(from)));
                end = Some(end.map_or(to, |end| end.max(to)));
            }
        }
        self.window_start_unix_s = start;
        self.window_end_unix_s = end;
    }

    /// The histograms behind the percentiles, when the document has them.
    pub fn histograms(
        &self,
    ) -> Option<Result<(LatencyHistogram, LatencyHistogram), crate::histogram::HistogramError>>
    {
        let (total, queue) = (
            self.total_time_histogram.as_ref()?,
            self.queue_time_histogram.as_ref()?,
        );
        Some(
            LatencyHistogram::from_json(total)
                .and_then(|total| LatencyHistogram::from_json(queue).map(|queue| (total, queue))),
        )
    }
}

impl From<&Percentiles> for PercentilesJson {
    fn from(percentiles: &Percentiles) -> PercentilesJson {
        PercentilesJson {
            p50: percentiles.p50.as_secs_f64(),
            p90: percentiles.p90.as_secs_f64(),
            p99: percentiles.p99.as_secs_f64(),
            max: percentiles.max.as_secs_f64(),
        }
    }
}

impl TransferJson {
    /// `transfer` of `suite`, sent to `server`.
    pub fn new(suite: &str, server: String, transfer: &Transfer, warmup: bool) -> TransferJson {
        let secs = |duration: Duration| duration.as_secs_f64();
        let failure = transfer.failure();
        TransferJson {
            suite: suite.to_owned(),
            client: transfer.client,
            server,
            batch: transfer.batch,
            bytes: transfer.size,
            start_s: secs(transfer.scheduled),
            dispatch_delay_s: secs(transfer.dispatch_delay()),
            total_s: secs(transfer.total()),
            queue_s: transfer.queue().map(secs),
            processing_s: transfer.processing().map(secs),
            network_s: transfer.network().map(secs),
            verified: transfer.verified(),
            warmup,
            error_kind: failure.map(|(kind, _)| kind.to_owned()),
            error: failure.map(|(_, message)| message.to_owned()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use aesd_proto::{Done, Password};
    use serde_json::Value;

    use super::*;
    use crate::distribution::SizeDist;
    use crate::load::LoadPlan;
    use crate::record::{LoadRun, Outcome};
    use aesd_client::job::JobReport;

    fn transfer(client: usize, batch: Option<usize>, outcome: Outcome) -> Transfer {
        let ms = Duration::from_millis;
        let report = (outcome == Outcome::Verified).then(|| JobReport {
            bytes_sent: 1000,
            bytes_received: 1040,
            total: ms(30),
            queue: ms(5),
            processing: ms(20),
            network: ms(5),
            queue_positions: vec![1],
            done: Done {
                bytes_in: 1000,
                bytes_out: 1040,
                queue_us: 5000,
                processing_us: 20_000,
            },
        });
        Transfer {
            client,
            server: client % 2,
            batch,
            size: 1000,
            scheduled: ms(10 * client as u64),
            dispatched: ms(10 * client as u64 + 1),
            finished: ms(10 * client as u64 + 31),
            report,
            outcome,
        }
    }

    /// Three transfers: two verified, one that failed to connect.
    pub(crate) fn suite(name: &str, arrival: Arrival, period: Option<usize>) -> SuiteRun {
        let batch = match arrival {
            Arrival::Batches(_) => Some(0),
            Arrival::Rate(_) => None,
        };
        SuiteRun {
            name: name.to_owned(),
            plan: LoadPlan {
                clients: 3,
                arrival,
                sizes: SizeDist::weighted(vec![1000, 2000], vec![0.5, 0.25]).expect("valid"),
                size_period: period,
                seed: 5,
                iterations: 1000,
                key_derivation: aesd_client::KeyDerivation::Auto,
                password: Password::new(b"pw".to_vec()),
                token: None,
                tls: None,
                idle_timeout: aesd_client::connection::DEFAULT_IDLE_TIMEOUT,
                shard: crate::shard::Shard::WHOLE,
                bind: None,
                format: crate::load::LoadFormat::Openssl,
            },
            run: LoadRun {
                duration: Duration::from_millis(60),
                started_at: std::time::UNIX_EPOCH + Duration::from_secs(1_795_629_600),
                transfers: vec![
                    transfer(0, batch, Outcome::Verified),
                    transfer(1, batch, Outcome::Verified),
                    transfer(
                        2,
                        batch,
                        Outcome::Failed {
                            kind: "connect".into(),
                            message: "refused".into(),
                        },
                    ),
                ],
            },
        }
    }

    /// A document with every optional field both set and unset.
    pub(crate) fn sample() -> Document {
        let parameters = RunParameters {
            servers: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            embedded: false,
            seed: 5,
            scale: 0.5,
            iterations: 1000,
            format: "openssl",
            warmup: Warmup::Transfers(1),
            shard: Shard { index: 1, count: 2 },
            bind: Some("127.0.0.2".parse().expect("address")),
            started_at: std::time::UNIX_EPOCH + Duration::from_secs(1_795_629_600),
        };
        Document::new(
            &parameters,
            &[
                suite("basic3", Arrival::Batches(10), Some(10)),
                suite("drowning", Arrival::Rate(20.0), None),
            ],
        )
        .merged_from(vec!["a.json (shard 0/2)".to_owned()])
        .with_server_metrics(vec![
            ServerSample {
                t_s: 1.0,
                cpu_percent: Some(87.5),
                resident_bytes: Some(5.5e6),
                active_jobs: Some(4.0),
                queued_jobs: Some(6.0),
                temperature_c: Some(45.5),
            },
            ServerSample {
                t_s: 2.0,
                cpu_percent: None,
                resident_bytes: None,
                active_jobs: None,
                queued_jobs: None,
                temperature_c: None,
            },
        ])
    }

    fn type_name(value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(number) if number.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    type Seen = BTreeMap<String, BTreeSet<&'static str>>;

    /// Records the type of every field under `path`; `summary` objects
    /// go to `summaries`, `failures` (kind → count) is not descended.
    fn walk(path: &str, value: &Value, fields: &mut Seen, summaries: &mut Seen) {
        let join = |key: &str| match path {
            "" => key.to_owned(),
            _ => format!("{path}.{key}"),
        };
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    let here = join(key);
                    if key == "summary" {
                        fields.entry(here).or_default().insert("summary");
                        walk("", value, summaries, &mut Seen::new());
                    } else {
                        fields
                            .entry(here.clone())
                            .or_default()
                            .insert(type_name(value));
                        if key != "failures" {
                            walk(&here, value, fields, summaries);
                        }
                    }
                }
            }
            Value::Array(items) => {
                let here = format!("{path}[]");
                for item in items {
                    fields
                        .entry(here.clone())
                        .or_default()
                        .insert(type_name(item));
                    walk(&here, item, fields, summaries);
                }
            }
            _ => {}
        }
    }

    /// Every produced field is documented with a type that allows what
    /// was produced, and every documented field was produced.
    pub(crate) fn assert_matches(seen: &Seen, documented: &[(String, String)], what: &str) {
        let documented: BTreeMap<&str, BTreeSet<&str>> = documented
            .iter()
            .map(|(path, types)| (path.as_str(), types.split('|').collect()))
            .collect();
        for (path, types) in seen {
            let allowed = documented
                .get(path.as_str())
                .unwrap_or_else(|| panic!("{what}: {path} is produced but not documented"));
            assert!(
                types.is_subset(allowed),
                "{what}: {path} has types {types:?}, documented {allowed:?}"
            );
        }
        for path in documented.keys() {
            assert!(
                seen.contains_key(*path),
                "{what}: {path} is documented but not produced"
            );
        }
    }

    fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(path, types)| ((*path).to_owned(), (*types).to_owned()))
            .collect()
    }

    /// The `| \`path\` | type | meaning |` rows of the table that follows
    /// `heading` in `file` (from the workspace root; types written
    /// `number or null` there).
    fn doc_table(file: &str, heading: &str) -> Vec<(String, String)> {
        aesd_testkit::doc_table_rows(file, heading, "|")
            .into_iter()
            .filter_map(|cells| {
                let path = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
                Some((path.to_owned(), cells.get(1)?.replace(" or ", "|")))
            })
            .collect()
    }

    #[test]
    fn the_document_round_trips() {
        let document = sample();
        let text = document.to_json().expect("serialises");
        let back: Document = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, document);
    }

    #[test]
    fn the_document_has_exactly_the_documented_fields() {
        let value = serde_json::to_value(sample()).expect("serialises");
        let (mut fields, mut summaries) = (Seen::new(), Seen::new());
        walk("", &value, &mut fields, &mut summaries);
        assert_matches(&fields, &owned(FIELDS), "document");
        assert_matches(&summaries, &owned(SUMMARY_FIELDS), "summary");
    }

    #[test]
    fn the_readme_documents_exactly_these_fields() {
        // docs/aesload.md's tables, then docs/sharded-load.md's for the fields
        // sharded runs added.
        let documented = |heading: &str, sharding: &str| {
            let mut rows = doc_table("docs/aesload.md", heading);
            rows.extend(doc_table("docs/sharded-load.md", sharding));
            rows
        };
        assert_eq!(
            documented("### JSON document", "#### JSON document: sharding fields"),
            owned(FIELDS)
        );
        assert_eq!(
            documented(
                "### Summary objects",
                "#### Summary objects: sharding fields"
            ),
            owned(SUMMARY_FIELDS)
        );
    }

    #[test]
    fn the_sample_shows_warmup_servers_and_suites() {
        let document = sample();
        assert_eq!(document.parameters.warmup_transfers, Some(1));
        assert_eq!(document.summary.warmup_excluded, 2, "one per suite");
        assert_eq!(document.suites[0].per_server.len(), 2);
        assert_eq!(document.transfers.len(), 6);
        assert!(document.transfers[0].warmup && !document.transfers[1].warmup);
        assert_eq!(document.transfers[1].server, "127.0.0.1:2");
        assert_eq!(document.suites[1].arrival, "open_loop");
    }
}
