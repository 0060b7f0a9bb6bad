//! Live progress of a load run, for people watching it.
//!
//! The runner updates a shared [`Progress`] (bytes as they are sent,
//! clients running, waiting in the server's queue, done); [`display`]
//! shows it on stderr: one line redrawn in place on a terminal, plain
//! periodic lines in a log. Counters sit behind a `Mutex`, not 64-bit
//! atomics, which the riscv32 boards lack.

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

use crate::sizes::human_bytes;

/// Live counters of a run, shared by its clients and the display.
#[derive(Debug, Default)]
pub struct Progress {
    inner: Mutex<ProgressCounts>,
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
    /// A plain line every few seconds (logs, CI).
    Lines,
}

impl DisplayMode {
    /// How often the display refreshes.
    pub fn interval(self) -> Duration {
        match self {
            DisplayMode::Terminal => Duration::from_millis(250),
            DisplayMode::Lines => Duration::from_secs(2),
        }
    }
}

/// The status line for `counts`, `elapsed` into the run, sending at
/// `rate` bytes per second lately.
pub fn status_line(label: &str, counts: &ProgressCounts, elapsed: Duration, rate: f64) -> String {
    let failed = match counts.failed {
        0 => String::new(),
        failed => format!(", {failed} failed"),
    };
    format!(
        "[{label} {:6.1}s] {} sent, {}/s | clients: {} active, {} queued, {}/{} done{failed}",
        elapsed.as_secs_f64(),
        human_bytes(counts.bytes_sent),
        human_bytes(rate.max(0.0) as u64),
        counts.active(),
        counts.queued,
        counts.done,
        counts.planned,
    )
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
        let line = status_line(&label, &counts, now.duration_since(started), rate);
        let mut stderr = std::io::stderr().lock();
        let _ = match mode {
            // Clear the line, write over it, stay on it.
            DisplayMode::Terminal => write!(stderr, "\r\x1b[2K{line}"),
            DisplayMode::Lines => writeln!(stderr, "{line}"),
        };
        let _ = stderr.flush();
    }
}

/// Clears a terminal status line left by [`display`].
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
    fn the_status_line_shows_every_count() {
        let counts = ProgressCounts {
            planned: 100,
            running: 10,
            queued: 4,
            done: 20,
            failed: 1,
            bytes_sent: 3 << 20,
            bytes_verified: 2 << 20,
        };
        let line = status_line("large", &counts, Duration::from_secs(3), 1048576.0);
        assert_eq!(
            line,
            "[large    3.0s] 3.0 MiB sent, 1.0 MiB/s | clients: 6 active, 4 queued, 20/100 done, 1 failed"
        );
    }
}
