//! The `/metrics` endpoint: a deliberately small HTTP/1.1 responder.
//!
//! It answers `GET /metrics` (and `HEAD`) with the exposition text, `GET /`
//! with a pointer to it, anything else with 404 or 405, and closes the
//! connection after each response. Request heads are capped at 8 KiB and
//! must arrive within 5 seconds; a response must be taken within 5
//! seconds. At most [`MAX_CONNECTIONS`] scrapes are served at once, at
//! most [`MAX_PER_CLIENT`] of them for one client (an IPv4 address, an
//! IPv6 prefix), so that one address holding unfinished requests cannot
//! blind the scrapes of another; and each counts under the server's
//! connection caps (`max-connections`,
//! `max-connections-per-client`) like a job connection: past either, the
//! scraper gets `503 Service Unavailable` and the connection closes. Only
//! addresses in `metrics-allow` are served: a connection from anywhere
//! else is closed at once, before its request is read, and counted in
//! `aesd_connections_refused_total{reason="metrics_not_allowed"}`. A full
//! HTTP stack would be wasted on a board that Prometheus scrapes once every
//! few seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::Metrics;
use crate::client_id::ClientId;
use crate::limits::{ConnectionLimits, ConnectionSlot};
use crate::proxy::CidrList;
use crate::shutdown::Shutdown;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client has to take the response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Scrapes served at once for one client; more from it are answered 503.
pub const MAX_PER_CLIENT: usize = 2;

/// Who may scrape, and where the endpoint's connections are counted.
pub struct ScrapeAccess {
    /// The server's connection caps, shared with the job port.
    pub connections: Arc<ConnectionLimits>,
    /// `client-ipv6-prefix`: who a client is for the per-client cap.
    pub ipv6_prefix: u8,
    /// `metrics-allow`: the networks that may scrape.
    pub allow: CidrList,
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
    access: ScrapeAccess,
) {
    let open = Arc::new(Places::default());
    loop {
        tokio::select! {
            () = shutdown.stopping() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if !access.allow.contains(peer.ip()) => {
                    // Not a byte read, no place taken: closed by the drop.
                    metrics.connection_refused("metrics_not_allowed");
                    drop(stream);
                }
                Ok((stream, peer)) => {
                    let client = ClientId::of(peer.ip(), access.ipv6_prefix);
                    let slot = access.connections.admit(client);
                    let scrape = Scrape::enter(&open, client);
                    let metrics = Arc::clone(&metrics);
                    tokio::spawn(async move {
                        let why = match (slot, scrape) {
                            (Ok(slot), Ok(scrape)) => {
                                respond(stream, &metrics, slot, scrape).await;
                                return;
                            }
                            (Err(refused), _) => refused.to_string(),
                            (Ok(_), Err(full)) => full.describe(client),
                        };
                        debug!(%peer, "metrics connection refused: {why}");
                        metrics.error("busy");
                        refuse(stream, &why, WRITE_TIMEOUT).await;
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

/// The scrape places in use: in all and per client.
#[derive(Default)]
struct Places {
    open: Mutex<(usize, HashMap<ClientId, usize>)>,
}

/// Why a scrape gets no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// [`MAX_CONNECTIONS`] scrapes are being served.
    All,
    /// [`MAX_PER_CLIENT`] scrapes of this client are being served.
    Client,
}

impl Full {
    /// The reason told to the scraper.
    fn describe(self, client: ClientId) -> String {
        match self {
            Full::All => format!("{MAX_CONNECTIONS} scrapes are being served"),
            Full::Client => format!("{MAX_PER_CLIENT} scrapes of {client} are being served"),
        }
    }
}

/// One scrape being served; holds its places until dropped.
struct Scrape {
    places: Arc<Places>,
    client: ClientId,
}

impl Scrape {
    /// A place among the [`MAX_CONNECTIONS`] and the client's
    /// [`MAX_PER_CLIENT`], if both have one free.
    fn enter(places: &Arc<Places>, client: ClientId) -> Result<Scrape, Full> {
        let mut open = places.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.0 >= MAX_CONNECTIONS {
            return Err(Full::All);
        }
        let mine = open.1.entry(client).or_insert(0);
        if *mine >= MAX_PER_CLIENT {
            return Err(Full::Client);
        }
        *mine += 1;
        open.0 += 1;
        Ok(Scrape {
            places: Arc::clone(places),
            client,
        })
    }
}

impl Drop for Scrape {
    fn drop(&mut self) {
        let mut open = self.places.open.lock().unwrap_or_else(|e| e.into_inner());
        open.0 -= 1;
        if let Some(mine) = open.1.get_mut(&self.client) {
            *mine -= 1;
            if *mine == 0 {
                open.1.remove(&self.client);
            }
        }
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

    fn client(n: u8) -> ClientId {
        ClientId::of(std::net::IpAddr::from([192, 0, 2, n]), 64)
    }

    #[test]
    fn scrapes_past_the_cap_are_refused_and_places_come_back() {
        let places = Arc::new(Places::default());
        let held: Vec<Scrape> = (0..MAX_CONNECTIONS)
            .map(|n| Scrape::enter(&places, client(n as u8 / 2)).expect("a free place"))
            .collect();
        assert_eq!(
            Scrape::enter(&places, client(200)).err(),
            Some(Full::All),
            "one over the cap"
        );
        drop(held);
        assert!(Scrape::enter(&places, client(200)).is_ok());
        let open = places.open.lock().expect("lock");
        assert_eq!(open.0, 0, "every place came back");
        assert!(open.1.is_empty());
    }

    #[test]
    fn one_client_holds_at_most_its_share() {
        let places = Arc::new(Places::default());
        let mine: Vec<Scrape> = (0..MAX_PER_CLIENT)
            .map(|_| Scrape::enter(&places, client(1)).expect("its share"))
            .collect();
        assert_eq!(Scrape::enter(&places, client(1)).err(), Some(Full::Client));
        assert!(Scrape::enter(&places, client(2)).is_ok(), "another client");
        drop(mine);
        assert!(Scrape::enter(&places, client(1)).is_ok());
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
