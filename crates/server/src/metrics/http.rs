//! The `/metrics` endpoint: a deliberately small HTTP/1.1 responder.
//!
//! It answers `GET /metrics` (and `HEAD`) with the exposition text, `GET /`
//! with a pointer to it, anything else with 404 or 405, and closes the
//! connection after each response. Request heads are capped at 8 KiB and
//! must arrive within 5 seconds. A full HTTP stack would be wasted on a
//! board that Prometheus scrapes once every few seconds.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use super::Metrics;
use crate::shutdown::Shutdown;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// OpenMetrics text, which Prometheus asks for in its Accept header.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format, for everyone else (curl, promtool).
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves scrapes until the shutdown stops the server.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, shutdown: Shutdown) {
    loop {
        tokio::select! {
            () = shutdown.stopping() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(respond(stream, Arc::clone(&metrics)));
                }
                Err(err) => {
                    warn!("metrics accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

async fn respond(mut stream: TcpStream, metrics: Arc<Metrics>) {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => return,
    };
    let (status, content_type, body, send_body) = route(&head, &metrics);
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if send_body {
        response.extend_from_slice(body.as_bytes());
    }
    if let Err(err) = stream.write_all(&response).await {
        debug!("metrics response not delivered: {err}");
    }
    let _ = stream.shutdown().await;
}

/// Reads up to the blank line that ends the request head.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
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
