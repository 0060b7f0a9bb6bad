//! Log lines about clients, rate-limited per client, so that a client
//! cannot turn aesd's log into a way to fill the board's RAM or disk.
//!
//! Every line the session writes about a failed job, a refused or closed
//! connection goes through [`LogLimiter::admit`] with the client's identity. A
//! client gets [`LINES_PER_WINDOW`] lines per [`WINDOW`]; further lines in
//! the window are only counted, and once the window is over one summary
//! line says how many were left out ("N more refusals and errors from X in
//! the last S s"). The summary comes with the client's next line, or from
//! [`LogLimiter::flush`], which the server runs every window. The metrics
//! (`aesd_errors_total{kind}`) still count every event.
//!
//! The table holds at most [`TRACKED_CLIENTS`] clients; past that, clients
//! it does not know share one entry ("other clients"), so memory stays
//! bounded whatever the number of addresses.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::info;

use crate::client_id::ClientId;

/// Lines one client may cause per window.
pub const LINES_PER_WINDOW: u32 = 10;

/// The window over which [`LINES_PER_WINDOW`] counts.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Clients with their own entry at most.
const TRACKED_CLIENTS: usize = 1024;

/// Who a line is about: a client, or every client past the table's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A client with its own entry.
    Client(ClientId),
    /// The clients that found the table full.
    Others,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Client(key) => write!(f, "{key}"),
            Source::Others => f.write_str("other clients (too many to track one by one)"),
        }
    }
}

/// Lines left out for a source over a finished window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Who they were about.
    pub source: Source,
    /// How many lines were left out.
    pub suppressed: u64,
    /// The window they were left out in.
    pub over: Duration,
}

impl Summary {
    /// Writes the summary line (at info).
    pub fn log(&self) {
        info!(
            client = %self.source,
            suppressed = self.suppressed,
            "{} more refusals and errors from {} in the last {:.0} s (not logged one by one; aesd_errors_total counts them)",
            self.suppressed,
            self.source,
            self.over.as_secs_f64()
        );
    }
}

/// Whether to write a line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Write it, after the summary of the client's previous window if any.
    Log(Option<Summary>),
    /// Leave it out (it is counted for the summary).
    Suppress,
}

/// Per-client windows of log lines.
#[derive(Debug)]
pub struct LogLimiter {
    lines: u32,
    window: Duration,
    table: Mutex<HashMap<Source, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    logged: u32,
    suppressed: u64,
}

impl Default for LogLimiter {
    fn default() -> Self {
        LogLimiter::new(LINES_PER_WINDOW, WINDOW)
    }
}

impl LogLimiter {
    /// `lines` lines per client and `window`.
    pub fn new(lines: u32, window: Duration) -> Self {
        LogLimiter {
            lines,
            window,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a line about `client` at `now` may be written.
    pub fn admit(&self, client: ClientId, now: Instant) -> Decision {
        let Ok(mut table) = self.table.lock() else {
            return Decision::Log(None);
        };
        let mut source = Source::Client(client);
        if !table.contains_key(&source) && table.len() >= TRACKED_CLIENTS {
            source = Source::Others;
        }
        let window = table.entry(source).or_insert(Window {
            start: now,
            logged: 0,
            suppressed: 0,
        });
        let mut summary = None;
        if now.saturating_duration_since(window.start) >= self.window {
            if window.suppressed > 0 {
                summary = Some(Summary {
                    source,
                    suppressed: window.suppressed,
                    over: now.saturating_duration_since(window.start),
                });
            }
            *window = Window {
                start: now,
                logged: 0,
                suppressed: 0,
            };
        }
        if window.logged < self.lines {
            window.logged += 1;
            Decision::Log(summary)
        } else {
            window.suppressed += 1;
            Decision::Suppress
        }
    }

    /// Ends the windows that are over at `now`: returns the summaries of
    /// those that left lines out and forgets their clients.
    pub fn flush(&self, now: Instant) -> Vec<Summary> {
        let Ok(mut table) = self.table.lock() else {
            return Vec::new();
        };
        let mut summaries = Vec::new();
        table.retain(|source, window| {
            let age = now.saturating_duration_since(window.start);
            if age < self.window {
                return true;
            }
            if window.suppressed > 0 {
                summaries.push(Summary {
                    source: *source,
                    suppressed: window.suppressed,
                    over: age,
                });
            }
            false
        });
        summaries
    }

    #[cfg(test)]
    /// Clients with an entry (for tests).
    pub fn tracked(&self) -> usize {
        self.table.lock().map(|table| table.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn client(n: u32) -> ClientId {
        ClientId::of(IpAddr::from(n.to_be_bytes()), 64)
    }

    #[test]
    fn a_client_gets_its_lines_then_one_summary() {
        let limiter = LogLimiter::new(3, Duration::from_secs(10));
        let start = Instant::now();
        let decisions: Vec<_> = (0..100)
            .map(|i| limiter.admit(client(1), start + Duration::from_millis(i)))
            .collect();
        assert!(decisions[..3].iter().all(|d| *d == Decision::Log(None)));
        assert!(decisions[3..].iter().all(|d| *d == Decision::Suppress));
        // Another client has its own lines.
        assert_eq!(limiter.admit(client(2), start), Decision::Log(None));
        // The next window starts with the summary of the last.
        let later = start + Duration::from_secs(10);
        match limiter.admit(client(1), later) {
            Decision::Log(Some(summary)) => {
                assert_eq!(summary.suppressed, 97);
                assert_eq!(summary.source, Source::Client(client(1)));
            }
            other => panic!("expected a summary, got {other:?}"),
        }
        assert_eq!(limiter.admit(client(1), later), Decision::Log(None));
    }

    #[test]
    fn flush_reports_finished_windows_and_forgets_them() {
        let limiter = LogLimiter::new(1, Duration::from_secs(10));
        let start = Instant::now();
        for _ in 0..5 {
            limiter.admit(client(1), start);
        }
        limiter.admit(client(2), start);
        assert!(limiter.flush(start + Duration::from_secs(9)).is_empty());
        let summaries = limiter.flush(start + Duration::from_secs(10));
        assert_eq!(summaries.len(), 1, "client 2 left nothing out");
        assert_eq!(summaries[0].suppressed, 4);
        assert_eq!(limiter.tracked(), 0);
    }

    #[test]
    fn past_the_table_size_clients_share_one_entry() {
        let limiter = LogLimiter::new(2, Duration::from_secs(10));
        let start = Instant::now();
        for n in 0..TRACKED_CLIENTS as u32 {
            assert_eq!(limiter.admit(client(n), start), Decision::Log(None));
        }
        let logged = (0..1000u32)
            .filter(|n| limiter.admit(client(1_000_000 + n), start) != Decision::Suppress)
            .count();
        assert_eq!(logged, 2, "the others share one window");
        assert_eq!(limiter.tracked(), TRACKED_CLIENTS + 1);
        let summaries = limiter.flush(start + Duration::from_secs(10));
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].source, Source::Others);
        assert_eq!(summaries[0].suppressed, 998);
    }
}
