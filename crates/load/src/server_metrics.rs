//! `aesload --metrics-url`: samples a server's Prometheus endpoint during a
//! run, like the study's once-a-second server metrics (CPU %, memory,
//! active clients, temperature), so the report shows what the board did
//! while it was loaded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How often the endpoint is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How long one scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response read.
const MAX_RESPONSE: usize = 1 << 20;

/// A metrics URL could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// The URL is not `http://HOST:PORT[/PATH]` or `HOST:PORT`.
    #[error("invalid metrics URL {0:?}: use http://HOST:PORT/metrics or HOST:PORT")]
    BadUrl(String),
    /// The scrape failed.
    #[error("scraping {url}: {reason}")]
    Scrape {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
}

/// Where to scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsUrl {
    /// `host:port`.
    pub authority: String,
    /// Request path, `/metrics` by default.
    pub path: String,
}

impl std::str::FromStr for MetricsUrl {
    type Err = MetricsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let rest = text.strip_prefix("http://").unwrap_or(text);
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/metrics"),
        };
        let valid_port = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if text.starts_with("https://") || !valid_port {
            return Err(MetricsError::BadUrl(text.to_owned()));
        }
        Ok(MetricsUrl {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

impl std::fmt::Display for MetricsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

/// One sample of the server's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// CPU used by the server since the previous sample, in % of one core.
    pub cpu_percent: Option<f64>,
    /// Resident memory.
    pub resident_bytes: Option<f64>,
    /// Jobs holding a slot.
    pub active_jobs: Option<f64>,
    /// Jobs waiting for a slot.
    pub queued_jobs: Option<f64>,
    /// Board temperature, when the server has a sensor.
    pub temperature_c: Option<f64>,
}

/// Fetches the exposition text.
pub async fn scrape(url: &MetricsUrl) -> Result<String, MetricsError> {
    let failed = |reason: String| MetricsError::Scrape {
        url: url.to_string(),
        reason,
    };
    let request = async {
        let mut stream = TcpStream::connect(&url.authority).await?;
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {}\r\n\r\n",
            url.path, url.authority
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        (&mut stream)
            .take(MAX_RESPONSE as u64)
            .read_to_end(&mut response)
            .await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(SCRAPE_TIMEOUT, request)
        .await
        .map_err(|_| failed(format!("no answer within {} s", SCRAPE_TIMEOUT.as_secs())))?
        .map_err(|err| failed(err.to_string()))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| failed("not an HTTP response".into()))?;
    if !head.starts_with("HTTP/1.") || head.split_whitespace().nth(1) != Some("200") {
        return Err(failed(head.lines().next().unwrap_or_default().to_owned()));
    }
    Ok(body.to_owned())
}

/// The first sample of every metric name in Prometheus or OpenMetrics
/// text (labels ignored).
pub fn parse_samples(text: &str) -> BTreeMap<String, f64> {
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let value_start = match line[name_end..].find('}') {
            Some(close) => name_end + close + 1,
            None => name_end,
        };
        let value = line[value_start..].split_whitespace().next();
        if let Some(value) = value.and_then(|value| value.parse::<f64>().ok()) {
            samples.entry(line[..name_end].to_owned()).or_insert(value);
        }
    }
    samples
}

/// Turns scrapes into samples; CPU % needs the previous scrape.
#[derive(Debug, Default)]
pub struct Sampler {
    previous_cpu: Option<(f64, Instant)>,
}

impl Sampler {
    /// A sample from one scrape taken at `at`, `t_s` seconds into the run.
    pub fn sample(&mut self, text: &str, at: Instant, t_s: f64) -> ServerSample {
        let values = parse_samples(text);
        let get = |name: &str| values.get(name).copied();
        let cpu_seconds = get("process_cpu_seconds_total");
        let cpu_percent = match (cpu_seconds, self.previous_cpu) {
            (Some(now), Some((before, then))) => {
                let elapsed = at.duration_since(then).as_secs_f64();
                (elapsed > 0.0).then(|| (now - before) / elapsed * 100.0)
            }
            _ => None,
        };
        if let Some(seconds) = cpu_seconds {
            self.previous_cpu = Some((seconds, at));
        }
        ServerSample {
            t_s,
            cpu_percent,
            resident_bytes: get("process_resident_memory_bytes"),
            active_jobs: get("aesd_active_jobs"),
            queued_jobs: get("aesd_queued_jobs"),
            temperature_c: get("aesd_board_temperature_celsius"),
        }
    }
}

/// Samples `url` every [`SAMPLE_INTERVAL`] until `stop` resolves, and once
/// more then (so a short run still has a first and a last sample); failed
/// scrapes are skipped (and counted in the returned number).
pub async fn sample_until(
    url: MetricsUrl,
    started: Instant,
    stop: impl std::future::Future<Output = ()>,
) -> (Vec<ServerSample>, usize) {
    let mut sampler = Sampler::default();
    let mut samples = Vec::new();
    let mut failures = 0;
    let mut ticker = tokio::time::interval(SAMPLE_INTERVAL);
    tokio::pin!(stop);
    let mut last = false;
    while !last {
        tokio::select! {
            () = &mut stop => last = true,
            _ = ticker.tick() => {}
        }
        match scrape(&url).await {
            Ok(text) => {
                let now = Instant::now();
                let t_s = now.duration_since(started).as_secs_f64();
                samples.push(sampler.sample(&text, now, t_s));
            }
            Err(_) => failures += 1,
        }
    }
    (samples, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_a_default_path() {
        let url: MetricsUrl = "http://10.0.0.5:9878/metrics".parse().expect("url");
        assert_eq!(url.authority, "10.0.0.5:9878");
        assert_eq!(url.path, "/metrics");
        let url: MetricsUrl = "127.0.0.1:9878".parse().expect("bare");
        assert_eq!(url.to_string(), "http://127.0.0.1:9878/metrics");
        for bad in ["https://h:1/metrics", "h", "h:port", ":9878"] {
            assert!(bad.parse::<MetricsUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn samples_come_from_the_exposition_text() {
        let text = "# HELP x y\nprocess_cpu_seconds_total 2.5\nprocess_resident_memory_bytes 5771264.0\n\
                    aesd_active_jobs 3\naesd_queued_jobs 7\n\
                    aesd_board_temperature_celsius{sensor=\"hwmon:cpu thermal\"} 45.5\n# EOF\n";
        let values = parse_samples(text);
        assert_eq!(values["aesd_queued_jobs"], 7.0);
        assert_eq!(values["aesd_board_temperature_celsius"], 45.5);
        let mut sampler = Sampler::default();
        let first = Instant::now();
        let sample = sampler.sample(text, first, 0.0);
        assert_eq!(sample.cpu_percent, None, "CPU % needs two scrapes");
        assert_eq!(sample.active_jobs, Some(3.0));
        let later = text.replace("2.5", "3.0");
        let sample = sampler.sample(&later, first + Duration::from_secs(1), 1.0);
        let cpu = sample.cpu_percent.expect("cpu");
        assert!((cpu - 50.0).abs() < 1e-9, "{cpu}");
    }
}
