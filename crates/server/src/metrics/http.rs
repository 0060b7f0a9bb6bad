//! The `/metrics` endpoint: a deliberately small HTTP/1.1 responder.
//!
//! It answers `GET /metrics` (and `HEAD`) with the exposition text, `GET /`
//! with a pointer to it, anything else with 404 or 405, and closes the
//! connection after each response. Request heads are capped at 8 KiB and
//! must arrive within 5 seconds; a response must be taken within 5
//! seconds. At most [`MAX_CONNECTIONS`] scrapes are served at once, and
//! each counts under the server's connection caps (`max-connections`,
//! `max-connections-per-client`) like a job connection: past either, the
//! scraper gets `503 Service Unavailable` and the connection closes. A full
//! HTTP stack would be wasted on a board that Prometheus scrapes once every
//! few seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::Metrics;
use crate::client_key::ClientKey;
use crate::limits::{ConnectionLimits, ConnectionSlot};
use crate::shutdown::Shutdown;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client has to take the response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 8;

/// Where the endpoint's connections are counted.
pub struct Admission {
    /// The server's connection caps, shared with the job port.
    pub connections: Arc<ConnectionLimits>,
    /// `client-ipv6-prefix`, to key the per-client cap.
    pub ipv6_prefix: u8,
}
/// OpenMetrics text, which Prometheus asks for in its Accept header.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format, for everyone else (curl, promtool).
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves scrapes until the shutdown stops the server.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    admission: Admission,
) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        tokio::select! {
            () = shutdown.stopping() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let client = ClientKey::of(peer.ip(), admission.ipv6_prefix);
                    let slot = admission.connections.admit(client);
                    let scrape = Scrape::enter(&open);
                    let metrics = Arc::clone(&metrics);
                    tokio::spawn(async move {
                        match (slot, scrape) {
                            (Ok(slot), Some(scrape)) => respond(stream, &metrics, slot, scrape).await,
                            (slot, _) => {
                                let why = match slot {
                                    Err(refused) => refused.to_string(),
                                    Ok(_) => format!("{MAX_CONNECTIONS} scrapes are being served"),
                                };
                                debug!(%peer, "metrics connection refused: {why}");
                                metrics.error("busy");
                                refuse(stream, &why, WRITE_TIMEOUT).await;
                            }
                        }
                    });
                }
                Err(err) => {
                    warn!("metrics accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// One scrape being served; counted in `open` until dropped.
struct Scrape(Arc<AtomicUsize>);

impl Scrape {
    /// A place among the [`MAX_CONNECTIONS`], if one is free.
    fn enter(open: &Arc<AtomicUsize>) -> Option<Scrape> {
        let scrape = Scrape(Arc::clone(open));
        // Counted first; a scrape over the cap is dropped (uncounted) at once.
        (open.fetch_add(1, Ordering::AcqRel) < MAX_CONNECTIONS).then_some(scrape)
    }
}

impl Drop for Scrape {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn respond<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    metrics: &Metrics,
    _slot: ConnectionSlot,
    _scrape: Scrape,
) {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => return,
    };
    let (status, content_type, body, send_body) = route(&head, metrics);
    let body = if send_body { body.as_str() } else { "" };
    send(&mut stream, status, content_type, body, WRITE_TIMEOUT).await;
}

/// Answers `503 Service Unavailable` saying `why`, and closes.
async fn refuse<S: AsyncWrite + Unpin>(mut stream: S, why: &str, limit: Duration) {
    let body = format!("busy: {why}\n");
    send(
        &mut stream,
        "503 Service Unavailable",
        "text/plain",
        &body,
        limit,
    )
    .await;
}

/// Writes one response (within `limit`, else gives up) and closes.
async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: &str,
    content_type: &str,
    body: &str,
    limit: Duration,
) {
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(body.as_bytes());
    match tokio::time::timeout(limit, stream.write_all(&response)).await {
        Ok(Ok(())) => {
            let _ = tokio::time::timeout(limit, stream.shutdown()).await;
        }
        Ok(Err(err)) => debug!("metrics response not delivered: {err}"),
        Err(_) => debug!("metrics response not taken within {limit:?}: dropped"),
    }
}

/// Reads up to the blank line that ends the request head.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(head).ok()
}

/// Status line, content type, body and whether to send the body.
fn route(head: &str, metrics: &Metrics) -> (&'static str, &'static str, String, bool) {
    let mut request_line = head.lines().next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default();
    let target = request_line.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default();
    let send_body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return (
            "405 Method Not Allowed",
            "text/plain",
            "only GET and HEAD\n".into(),
            true,
        );
    }
    let wants_openmetrics = head.lines().any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("accept:") && lower.contains("application/openmetrics-text")
    });
    match path {
        "/metrics" if wants_openmetrics => ("200 OK", OPENMETRICS, metrics.encode(), send_body),
        "/metrics" => (
            "200 OK",
            PROMETHEUS_TEXT,
            openmetrics_to_prometheus_text(&metrics.encode()),
            send_body,
        ),
        "/" => (
            "200 OK",
            "text/plain; charset=utf-8",
            "aesd metrics: GET /metrics\n".into(),
            send_body,
        ),
        _ => (
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n".into(),
            send_body,
        ),
    }
}

/// Converts OpenMetrics text to the classic Prometheus text format: the
/// two differ (for what aesd exposes) only in that OpenMetrics names a
/// counter family without its `_total` suffix in `# HELP`/`# TYPE`, and
/// has `# UNIT` and `# EOF` lines.
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_past_the_cap_are_refused_and_places_come_back() {
        let open = Arc::new(AtomicUsize::new(0));
        let held: Vec<Scrape> = (0..MAX_CONNECTIONS)
            .map(|_| Scrape::enter(&open).expect("a free place"))
            .collect();
        assert!(Scrape::enter(&open).is_none(), "one over the cap");
        assert_eq!(open.load(Ordering::Acquire), MAX_CONNECTIONS);
        drop(held);
        assert_eq!(open.load(Ordering::Acquire), 0);
        assert!(Scrape::enter(&open).is_some());
    }

    #[tokio::test]
    async fn a_scraper_that_never_reads_is_dropped_after_the_write_limit() {
        // A 64-byte pipe nobody reads: the response cannot be written.
        let (_unread, stream) = tokio::io::duplex(64);
        let started = std::time::Instant::now();
        let body = "x".repeat(4096);
        send(
            &mut { stream },
            "200 OK",
            "text/plain",
            &body,
            Duration::from_millis(200),
        )
        .await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(200), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[test]
    fn counter_families_get_their_total_suffix() {
        let openmetrics = "# HELP jobs Jobs.\n# TYPE jobs counter\njobs_total 3\n\
                           # HELP open Open.\n# TYPE open gauge\nopen 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus_text(openmetrics),
            "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total 3\n\
             # HELP open Open.\n# TYPE open gauge\nopen 1\n"
        );
    }
}
