//! Prometheus metrics: what aesd counts, and the `/metrics` endpoint.
//!
//! * [`process`]: process CPU, memory, file descriptors from `/proc`.
//! * [`temperature`]: board temperature from hwmon or a LiteX XADC.
//! * [`http`]: the minimal HTTP server behind `--metrics-listen`.
//! * [`keyring`]: the keyring's generation and its etcd store's figures.
//!
//! Counters and histograms are updated as jobs run; gauges (active jobs,
//! queue depth, workers, process figures, temperature) are read at scrape
//! time. Names follow Prometheus conventions: base units, `_total` for
//! counters, `_seconds` and `_bytes` suffixes.

pub mod http;
pub mod keyring;
pub mod process;
pub mod temperature;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::admission::Admission;
use crate::pool::WorkerPool;
use crate::wide_counter::WideCounter;
use process::ProcessStats;
use temperature::Sensor;

/// Histogram buckets for queue wait, processing and job time: 1 ms to
/// 500 s (a 10 MB file on a 100 MHz board takes tens of seconds).
pub const TIME_BUCKETS: [f64; 18] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
    100.0, 250.0, 500.0,
];

/// The `operation` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// `encrypt` or `decrypt`.
    pub operation: &'static str,
}

/// Labels of `aesd_input_bytes_total` and `aesd_output_bytes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabels {
    /// `encrypt` or `decrypt`.
    pub operation: &'static str,
    /// The file format: `openssl` or `age`.
    pub format: &'static str,
}

/// Labels of `aesd_jobs_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// `encrypt` or `decrypt`.
    pub operation: &'static str,
    /// The file format: `openssl` or `age`.
    pub format: &'static str,
    /// `ok`, or the error kind.
    pub outcome: &'static str,
}

/// The file formats, for series that exist from the start.
const FORMATS: [&str; 2] = ["openssl", "age"];

/// The `kind` label of `aesd_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    /// The error kind (an error code name, `client_gone` or `io`).
    pub kind: &'static str,
}

/// The `reason` label of `aesd_jobs_refused_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabel {
    /// One of [`REFUSAL_REASONS`].
    pub reason: &'static str,
}

/// Every `reason` of `aesd_jobs_refused_total`.
pub const REFUSAL_REASONS: [&str; 5] = [
    "queue_full",
    "per_client_active",
    "per_client_queued",
    "kdf_budget",
    "displaced",
];

/// Every `reason` of `aesd_connections_refused_total`: connections closed
/// before anything was read from them.
pub const CONNECTION_REFUSAL_REASONS: [&str; 3] = [
    "metrics_not_allowed",
    "tls_handshake_rate",
    "tls_handshakes",
];

/// Labels of `aesd_api_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRequestLabels {
    /// One of [`API_ENDPOINTS`].
    pub endpoint: &'static str,
    /// The HTTP status answered.
    pub status: u16,
}

/// The `endpoint` label of the HTTP API's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiEndpointLabel {
    /// One of [`API_ENDPOINTS`].
    pub endpoint: &'static str,
}

/// Labels of `aesd_api_bytes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiBytesLabels {
    /// One of [`API_ENDPOINTS`].
    pub endpoint: &'static str,
    /// `in` (request bodies) or `out` (answer bodies).
    pub direction: &'static str,
}

/// Every `endpoint` of the HTTP API's series (the path's first parts;
/// `other` for the rest, so the label set stays bounded).
pub const API_ENDPOINTS: [&str; 11] = [
    "transit/encrypt",
    "transit/decrypt",
    "transit/rewrap",
    "transit/datakey",
    "transit/random",
    "transit/keys",
    "sys/tools/random",
    "sys",
    "auth/token",
    "other",
    "none",
];

/// Histogram buckets for HTTP API requests: 50 us to 10 s.
pub const API_TIME_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5, 10.0,
];

fn api_histogram() -> Histogram {
    Histogram::new(API_TIME_BUCKETS)
}

type TimeFamily = Family<OperationLabel, Histogram, fn() -> Histogram>;

fn time_histogram() -> Histogram {
    Histogram::new(TIME_BUCKETS)
}

/// Everything aesd counts.
pub struct Metrics {
    registry: Registry,
    input_bytes: Family<StreamLabels, WideCounter>,
    output_bytes: Family<StreamLabels, WideCounter>,
    jobs: Family<JobLabels, WideCounter>,
    errors: Family<ErrorLabel, WideCounter>,
    jobs_refused: Family<RefusalLabel, WideCounter>,
    connections_refused: Family<RefusalLabel, WideCounter>,
    connections: WideCounter,
    connections_open: Gauge,
    queue_wait: TimeFamily,
    processing: TimeFamily,
    job_duration: TimeFamily,
    api_requests: Family<ApiRequestLabels, WideCounter>,
    api_duration: Family<ApiEndpointLabel, Histogram, fn() -> Histogram>,
    api_bytes: Family<ApiBytesLabels, WideCounter>,
}

/// Keeps `aesd_connections_open` up while it lives.
pub struct ConnectionGuard {
    metrics: Arc<Metrics>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.metrics.connections_open.dec();
    }
}

impl Metrics {
    /// Registers every metric; `live` provides the scrape-time gauges.
    pub fn new(live: LiveCollector) -> Arc<Self> {
        let mut registry = Registry::default();
        let metrics = Metrics {
            input_bytes: Family::default(),
            output_bytes: Family::default(),
            jobs: Family::default(),
            errors: Family::default(),
            jobs_refused: Family::default(),
            connections_refused: Family::default(),
            connections: WideCounter::default(),
            connections_open: Gauge::default(),
            queue_wait: Family::new_with_constructor(time_histogram),
            processing: Family::new_with_constructor(time_histogram),
            job_duration: Family::new_with_constructor(time_histogram),
            api_requests: Family::default(),
            api_duration: Family::new_with_constructor(api_histogram),
            api_bytes: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "aesd_input_bytes",
            "File bytes received from clients, by operation and file format",
            metrics.input_bytes.clone(),
        );
        registry.register(
            "aesd_output_bytes",
            "File bytes sent to clients, by operation and file format",
            metrics.output_bytes.clone(),
        );
        registry.register(
            "aesd_jobs",
            "Jobs finished, by operation, file format and outcome (ok or the error kind)",
            metrics.jobs.clone(),
        );
        registry.register(
            "aesd_errors",
            "Errors by kind (job and connection errors)",
            metrics.errors.clone(),
        );
        registry.register(
            "aesd_jobs_refused",
            "Jobs refused with busy at admission, or later losing their queue place to another client, by reason (queue_full, per_client_active, per_client_queued, kdf_budget, displaced)",
            metrics.jobs_refused.clone(),
        );
        registry.register(
            "aesd_connections_refused",
            "Connections closed before anything was read from them, by reason (metrics_not_allowed: a scrape from outside metrics-allow; tls_handshake_rate: a client over its TLS handshake rate; tls_handshakes: a TLS handshake that waited handshake-timeout for a place among those in progress)",
            metrics.connections_refused.clone(),
        );
        registry.register(
            "aesd_connections",
            "Connections accepted",
            metrics.connections.clone(),
        );
        registry.register(
            "aesd_connections_open",
            "Connections open now",
            metrics.connections_open.clone(),
        );
        registry.register(
            "aesd_queue_wait_seconds",
            "Time from begin to admission",
            metrics.queue_wait.clone(),
        );
        registry.register(
            "aesd_processing_seconds",
            "Cryptographic work per job on the worker pool, waiting for a worker included",
            metrics.processing.clone(),
        );
        registry.register(
            "aesd_job_duration_seconds",
            "Time from begin to done per successful job",
            metrics.job_duration.clone(),
        );
        registry.register(
            "aesd_api_requests",
            "HTTP API (--http-listen) requests answered, by endpoint and status",
            metrics.api_requests.clone(),
        );
        registry.register(
            "aesd_api_request_duration_seconds",
            "HTTP API request time from its header read to its answer, by endpoint",
            metrics.api_duration.clone(),
        );
        registry.register(
            "aesd_api_bytes",
            "HTTP API body bytes, by endpoint and direction (in: requests, out: answers)",
            metrics.api_bytes.clone(),
        );
        for endpoint in API_ENDPOINTS {
            drop(
                metrics
                    .api_duration
                    .get_or_create(&ApiEndpointLabel { endpoint }),
            );
            for direction in ["in", "out"] {
                drop(metrics.api_bytes.get_or_create(&ApiBytesLabels {
                    endpoint,
                    direction,
                }));
            }
        }
        registry.register_collector(Box::new(live));
        // Series that exist from the start (at zero) let rate() see the
        // first job's increase; series born with their first increment
        // would read as flat.
        for reason in REFUSAL_REASONS {
            drop(metrics.jobs_refused.get_or_create(&RefusalLabel { reason }));
        }
        for reason in CONNECTION_REFUSAL_REASONS {
            drop(
                metrics
                    .connections_refused
                    .get_or_create(&RefusalLabel { reason }),
            );
        }
        for operation in ["encrypt", "decrypt"] {
            let label = OperationLabel { operation };
            drop(metrics.queue_wait.get_or_create(&label));
            drop(metrics.processing.get_or_create(&label));
            drop(metrics.job_duration.get_or_create(&label));
            for format in FORMATS {
                let stream = StreamLabels { operation, format };
                drop(metrics.input_bytes.get_or_create(&stream));
                drop(metrics.output_bytes.get_or_create(&stream));
                drop(metrics.jobs.get_or_create(&JobLabels {
                    operation,
                    format,
                    outcome: "ok",
                }));
            }
        }
        Arc::new(Metrics {
            registry,
            ..metrics
        })
    }

    /// Counts input bytes as they arrive.
    pub fn add_input_bytes(&self, stream: &StreamLabels, bytes: u64) {
        self.input_bytes.get_or_create(stream).inc_by(bytes);
    }

    /// Counts output bytes as they leave.
    pub fn add_output_bytes(&self, stream: &StreamLabels, bytes: u64) {
        self.output_bytes.get_or_create(stream).inc_by(bytes);
    }

    /// Records how long a job waited for admission.
    pub fn observe_queue_wait(&self, operation: &'static str, wait: Duration) {
        self.queue_wait
            .get_or_create(&OperationLabel { operation })
            .observe(wait.as_secs_f64());
    }

    /// Records a finished job: its outcome, and for a successful job its
    /// processing and total time.
    pub fn job_finished(
        &self,
        stream: &StreamLabels,
        outcome: Result<(Duration, Duration), &'static str>,
    ) {
        let operation = stream.operation;
        let label = match outcome {
            Ok((processing, total)) => {
                let op = OperationLabel { operation };
                self.processing
                    .get_or_create(&op)
                    .observe(processing.as_secs_f64());
                self.job_duration
                    .get_or_create(&op)
                    .observe(total.as_secs_f64());
                "ok"
            }
            Err(kind) => kind,
        };
        self.jobs
            .get_or_create(&JobLabels {
                operation,
                format: stream.format,
                outcome: label,
            })
            .inc();
    }

    /// Counts a job refused at admission, for `reason` (see
    /// [`REFUSAL_REASONS`]).
    pub fn job_refused(&self, reason: &'static str) {
        self.jobs_refused
            .get_or_create(&RefusalLabel { reason })
            .inc();
    }

    /// Counts a connection closed before anything was read from it, for
    /// `reason` (see [`CONNECTION_REFUSAL_REASONS`]).
    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&RefusalLabel { reason })
            .inc();
    }

    /// Records an HTTP API request: its endpoint (one of
    /// [`API_ENDPOINTS`]), status, time and body bytes each way.
    pub fn api_request(
        &self,
        endpoint: &'static str,
        status: u16,
        elapsed: Duration,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        self.api_requests
            .get_or_create(&ApiRequestLabels { endpoint, status })
            .inc();
        self.api_duration
            .get_or_create(&ApiEndpointLabel { endpoint })
            .observe(elapsed.as_secs_f64());
        for (direction, bytes) in [("in", bytes_in), ("out", bytes_out)] {
            self.api_bytes
                .get_or_create(&ApiBytesLabels {
                    endpoint,
                    direction,
                })
                .inc_by(bytes);
        }
    }

    /// Counts an error of `kind`.
    pub fn error(&self, kind: &'static str) {
        self.errors.get_or_create(&ErrorLabel { kind }).inc();
    }

    /// Counts a new connection; it counts as open until the guard drops.
    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.inc();
        self.connections_open.inc();
        ConnectionGuard {
            metrics: Arc::clone(self),
        }
    }

    /// The exposition text (OpenMetrics 1.0, which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Gauges read at scrape time.
#[derive(Debug)]
pub struct LiveCollector {
    /// Active jobs and queue depth.
    pub admission: Arc<Admission>,
    /// Workers and their busy time.
    pub pool: Arc<WorkerPool>,
    /// Slot and queue bounds.
    pub limits: (usize, usize),
    /// The board's temperature sensor, if any.
    pub sensor: Option<Sensor>,
}

/// Build information labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    target: &'static str,
}

/// The AES backend label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: &'static str,
}

/// Sensor label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SensorLabel {
    sensor: String,
}

fn gauge<V: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: V,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter<V: prometheus_client::encoding::EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: V,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for LiveCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let build = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "aesd_build_info",
            "Version and target of the running aesd (always 1)",
            None,
            build.metric_type(),
        )?;
        build.encode(family.encode_family(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            target: env!("AESD_TARGET"),
        })?)?;

        let backend = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "aesd_aes_backend_info",
            "The AES implementation jobs run on (always 1): vexriscv (VexRiscv's AES instruction), zkne (Zkne/Zknd), cpu-aes (AES-NI, ARMv8) or fixsliced (software)",
            None,
            backend.metric_type(),
        )?;
        backend.encode(family.encode_family(&BackendLabel {
            backend: aesd_core::engine::Engine::detect().name(),
        })?)?;

        keyring::encode(&mut encoder)?;

        let occupancy = self.admission.occupancy();
        gauge(
            &mut encoder,
            "aesd_active_jobs",
            "Jobs holding a slot now",
            occupancy.active as i64,
        )?;
        gauge(
            &mut encoder,
            "aesd_queued_jobs",
            "Jobs waiting for a slot now (queue depth)",
            occupancy.waiting as i64,
        )?;
        gauge(
            &mut encoder,
            "aesd_active_jobs_limit",
            "Slots (--max-active)",
            self.limits.0 as i64,
        )?;
        gauge(
            &mut encoder,
            "aesd_queued_jobs_limit",
            "Queue bound (--max-queue)",
            self.limits.1 as i64,
        )?;
        gauge(
            &mut encoder,
            "aesd_workers",
            "Worker threads",
            self.pool.workers() as i64,
        )?;
        counter(
            &mut encoder,
            "aesd_worker_busy_seconds",
            "Time the workers spent running cryptographic work, all workers together",
            self.pool.busy_time().as_secs_f64(),
        )?;
        gauge(
            &mut encoder,
            "aesd_cipher_lanes",
            "CBC encryption chains one worker encrypts together (lanes)",
            self.pool.lanes() as i64,
        )?;
        let (used, offered) = self.pool.lane_blocks();
        counter(
            &mut encoder,
            "aesd_cipher_lane_blocks",
            "Blocks the lane engine encrypted; lane occupancy = this / aesd_cipher_lane_capacity_blocks_total",
            used,
        )?;
        counter(
            &mut encoder,
            "aesd_cipher_lane_capacity_blocks",
            "Blocks the lane engine could have encrypted in the same calls with every lane busy",
            offered,
        )?;
        counter(
            &mut encoder,
            "aesd_cipher_lane_fillable_blocks",
            "Blocks the lane engine could have encrypted in the same calls had every encryption job with data (chunks read from its client, not yet encrypted) had a lane (at most every lane); lane occupancy of the jobs with data = aesd_cipher_lane_blocks_total / this",
            self.pool.lane_fillable_blocks(),
        )?;

        let stats = ProcessStats::read();
        if let Some(cpu) = stats.cpu_seconds {
            counter(
                &mut encoder,
                "process_cpu_seconds",
                "User and system CPU time",
                cpu,
            )?;
        }
        if let Some(bytes) = stats.resident_bytes {
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory",
                bytes as f64,
            )?;
        }
        if let Some(bytes) = stats.virtual_bytes {
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory",
                bytes as f64,
            )?;
        }
        if let Some(fds) = stats.open_fds {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                fds as f64,
            )?;
        }
        if let Some(fds) = stats.max_fds {
            gauge(
                &mut encoder,
                "process_max_fds",
                "File descriptor limit",
                fds as f64,
            )?;
        }
        if let Some(start) = stats.start_time_seconds {
            gauge(
                &mut encoder,
                "process_start_time_seconds",
                "Start time, seconds since the epoch",
                start,
            )?;
        }

        if let Some(sensor) = &self.sensor {
            if let Some(celsius) = sensor.read_celsius() {
                let metric = ConstGauge::new(celsius);
                let mut family = encoder.encode_descriptor(
                    "aesd_board_temperature_celsius",
                    "Board temperature",
                    None,
                    metric.metric_type(),
                )?;
                metric.encode(family.encode_family(&SensorLabel {
                    sensor: sensor.label.clone(),
                })?)?;
            }
        }
        Ok(())
    }
}
