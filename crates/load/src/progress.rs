//! Live progress of a load run, for people watching it.
//!
//! The runner updates a shared [`Progress`] (bytes as they are sent,
//! clients running, waiting in the server's queue, done, the total time
//! of each verified transfer); [`display`] shows it on stderr as oha
//! does: done/total, percent, MB/s, ETA and the live p50/p99 of total
//! time, on one line cut to the terminal's width and redrawn in place,
//! or a plain line a second when stderr is not a terminal (no escape
//! codes in a log). Counters sit behind a `Mutex`, not 64-bit atomics,
//! which the riscv32 boards lack.

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

use crate::percentiles::Percentiles;

/// Live counters of a run, shared by its clients and the display.
#[derive(Debug, Default)]
pub struct Progress {
    inner: Mutex<ProgressCounts>,
    totals: Mutex<Vec<Duration>>,
}

/// A snapshot of [`Progress`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProgressCounts {
    /// Transfers the plan holds.
    pub planned: usize,
    /// Transfers started and not finished (queued ones included).
    pub running: usize,
    /// Transfers that sent begin and wait for the server to start them.
    pub queued: usize,
    /// Transfers finished (verified or failed).
    pub done: usize,
    /// Transfers failed.
    pub failed: usize,
    /// Input bytes sent so far.
    pub bytes_sent: u64,
    /// Input bytes of verified transfers.
    pub bytes_verified: u64,
    /// Input bytes the plan holds.
    pub planned_bytes: u64,
}

impl ProgressCounts {
    /// Running transfers that are not queued (connecting or moving data).
    pub fn active(&self) -> usize {
        self.running.saturating_sub(self.queued)
    }
}

impl Progress {
    /// The counts now.
    pub fn snapshot(&self) -> ProgressCounts {
        self.inner.lock().map(|counts| *counts).unwrap_or_default()
    }

    /// Changes the counts.
    pub fn update(&self, change: impl FnOnce(&mut ProgressCounts)) {
        if let Ok(mut counts) = self.inner.lock() {
            change(&mut counts);
        }
    }

    /// Records a verified transfer's total time (for the live p50/p99).
    pub fn record_total(&self, total: Duration) {
        if let Ok(mut totals) = self.totals.lock() {
            totals.push(total);
        }
    }

    /// Percentiles of the total times recorded so far.
    pub fn total_percentiles(&self) -> Percentiles {
        self.totals
            .lock()
            .map(|totals| Percentiles::of(totals.iter().copied()))
            .unwrap_or_default()
    }
}

/// An async reader that adds the bytes read through it to a
/// [`Progress`] (its `bytes_sent`).
pub struct Metered<'a, R> {
    inner: R,
    progress: &'a Progress,
}

impl<'a, R> Metered<'a, R> {
    /// Counts what is read from `inner` into `progress`.
    pub fn new(inner: R, progress: &'a Progress) -> Self {
        Metered { inner, progress }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Metered<'_, R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        if read > 0 {
            self.progress.update(|counts| counts.bytes_sent += read);
        }
        polled
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayMode {
    /// One status line redrawn in place, a few times a second.
    Terminal,
    /// A plain line every second (logs, CI).
    Lines,
}

impl DisplayMode {
    /// How often the display refreshes.
    pub fn interval(self) -> Duration {
        match self {
            DisplayMode::Terminal => Duration::from_millis(250),
            DisplayMode::Lines => Duration::from_secs(1),
        }
    }
}

/// The status line for `counts`, `elapsed` into the run, sending at
/// `rate` bytes per second lately, with `totals` the percentiles of the
/// verified transfers' total time so far; cut to `width` characters
/// (the least important fields go first). Rates are MB/s (10^6 bytes),
/// as in the table.
pub fn status_line(
    label: &str,
    counts: &ProgressCounts,
    elapsed: Duration,
    rate: f64,
    totals: &Percentiles,
    width: usize,
) -> String {
    let percent = match counts.planned_bytes {
        0 => 0.0,
        planned => counts.bytes_sent as f64 * 100.0 / planned as f64,
    };
    let average = counts.bytes_sent as f64 / elapsed.as_secs_f64().max(1e-3);
    let eta = match (
        counts.planned_bytes.checked_sub(counts.bytes_sent),
        average > 0.0,
    ) {
        (Some(left), true) => format!("ETA {}", short_duration(left as f64 / average)),
        _ => "ETA n/a".to_owned(),
    };
    let latency = match totals.count {
        0 => "p50 n/a p99 n/a".to_owned(),
        _ => format!(
            "p50 {} p99 {}",
            short_duration(totals.p50.as_secs_f64()),
            short_duration(totals.p99.as_secs_f64())
        ),
    };
    let mut fields = vec![
        format!("{label} {}/{}", counts.done, counts.planned),
        format!("{percent:.0}%"),
        format!("{:.1} MB/s", rate.max(0.0) / 1e6),
        eta,
        latency,
        format!("{}s", elapsed.as_secs()),
        format!("{} act {} queued", counts.active(), counts.queued),
    ];
    if counts.failed > 0 {
        fields.insert(1, format!("{} failed", counts.failed));
    }
    let mut line = fields.join(" | ");
    while line.chars().count() > width && fields.len() > 1 {
        fields.pop();
        line = fields.join(" | ");
    }
    line.chars().take(width).collect()
}

/// `secs` as `85ms`, `4.2s`, `3m05s` or `1h02m`.
fn short_duration(secs: f64) -> String {
    match secs {
        s if s < 1.0 => format!("{:.0}ms", s * 1000.0),
        s if s < 60.0 => format!("{s:.1}s"),
        s if s < 3600.0 => format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64),
        s => format!("{}h{:02}m", (s / 3600.0) as u64, (s % 3600.0 / 60.0) as u64),
    }
}

/// Columns of the terminal stderr is, less one (a line that fills the
/// last column wraps on some terminals); 80 when unknown.
fn line_width() -> usize {
    terminal_size::terminal_size_of(std::io::stderr())
        .map(|(width, _)| usize::from(width.0))
        .unwrap_or(80)
        .saturating_sub(1)
        .max(20)
}

/// Shows `progress` on stderr until the task is aborted; call
/// [`finish_display`] afterwards.
pub async fn display(progress: Arc<Progress>, label: String, mode: DisplayMode) {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(mode.interval());
    ticker.tick().await;
    let (mut last_bytes, mut last_at) = (0u64, started);
    loop {
        ticker.tick().await;
        let counts = progress.snapshot();
        let now = Instant::now();
        let window = now.duration_since(last_at).as_secs_f64();
        let rate = match window > 0.0 {
            true => counts.bytes_sent.saturating_sub(last_bytes) as f64 / window,
            false => 0.0,
        };
        (last_bytes, last_at) = (counts.bytes_sent, now);
        let width = match mode {
            DisplayMode::Terminal => line_width(),
            DisplayMode::Lines => usize::MAX,
        };
        let totals = progress.total_percentiles();
        let line = status_line(
            &label,
            &counts,
            now.duration_since(started),
            rate,
            &totals,
            width,
        );
        let mut stderr = std::io::stderr().lock();
        let _ = match mode {
            // Clear the line, write over it, stay on it.
            DisplayMode::Terminal => write!(stderr, "\r\x1b[2K{line}"),
            DisplayMode::Lines => writeln!(stderr, "{line}"),
        };
        let _ = stderr.flush();
    }
}

/// Clears a terminal status line left by [`display`], so what follows
/// starts on a clean line.
pub fn finish_display(mode: DisplayMode) {
    if mode == DisplayMode::Terminal {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K");
        let _ = stderr.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn metered_reads_are_counted() {
        let progress = Progress::default();
        let mut data = Vec::new();
        let mut reader = Metered::new(&[7u8; 1000][..], &progress);
        reader.read_to_end(&mut data).await.expect("reads");
        assert_eq!(progress.snapshot().bytes_sent, 1000);
    }

    #[test]
    fn the_status_line_shows_every_count_and_fits_the_width() {
        let counts = ProgressCounts {
            planned: 100,
            running: 10,
            queued: 4,
            done: 20,
            failed: 1,
            bytes_sent: 25_000_000,
            bytes_verified: 20_000_000,
            planned_bytes: 100_000_000,
        };
        let totals = Percentiles::of([Duration::from_millis(400), Duration::from_millis(1200)]);
        let elapsed = Duration::from_secs(5);
        let line = status_line("large", &counts, elapsed, 5e6, &totals, usize::MAX);
        assert_eq!(
            line,
            "large 20/100 | 1 failed | 25% | 5.0 MB/s | ETA 15.0s | p50 400ms p99 1.2s | 5s | 6 act 4 queued"
        );
        for width in [20, 40, 79] {
            let line = status_line("large", &counts, elapsed, 5e6, &totals, width);
            assert!(line.chars().count() <= width, "{width}: {line}");
            assert!(line.starts_with("large 20/100"), "{line}");
        }
        let none = status_line(
            "x",
            &ProgressCounts::default(),
            elapsed,
            0.0,
            &Percentiles::default(),
            200,
        );
        assert!(
            none.contains("ETA n/a") && none.contains("p50 n/a"),
            "{none}"
        );
    }
}
