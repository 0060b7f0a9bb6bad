//! The minimum input rate of a running job (`min-input-rate`).
//!
//! The idle timeout counts per read, so a client that sends a byte just
//! inside it, again and again, would hold a job slot forever. The
//! connection's driver therefore tells [`InputRate`] when it starts and
//! stops waiting for a running job's input ([`InputRate::start_waiting`],
//! [`InputRate::stop_waiting`]); it measures the bytes the client delivered
//! against the time the server spent *waiting for them*, in windows of
//! `input-rate-window` of such time. A window that ends below the minimum
//! fails the job with [`TooSlow`] (the `timeout` error), which frees its
//! slot; the driver wakes at [`InputRate::window_end`] to check it.
//!
//! Only waiting for the client counts. While the job is not reading (the
//! workers are busy, or the client is slow to take the output, so the
//! job's buffers are all in flight) the clock is stopped: the server's own
//! backpressure never fails a job. The first window is the job's grace
//! period: nothing is checked before a job has waited a whole window.
//!
//! Bytes are counted where they leave the socket ([`Metered`]), so a large
//! frame arriving slowly counts as it arrives, not when it is complete.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

/// Bytes read from one connection so far (wrapping; only differences over
/// one window are used, so 32 bits are enough).
#[derive(Debug, Clone, Default)]
pub struct ByteCounter(Arc<AtomicUsize>);

impl ByteCounter {
    /// The count now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts `bytes` more.
    pub fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A reader that counts the bytes read through it.
#[derive(Debug)]
pub struct Metered<R> {
    inner: R,
    counter: ByteCounter,
}

impl<R> Metered<R> {
    /// Wraps `inner`; its bytes are counted in `counter`.
    pub fn new(inner: R, counter: ByteCounter) -> Self {
        Metered { inner, counter }
    }

    /// The stream read from.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Metered<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.counter.add(read);
        }
        poll
    }
}

/// A job's input came slower than the minimum rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "input too slow: {got} bytes in {:.1} s of waiting, the minimum is {min} bytes/s",
    waited.as_secs_f64()
)]
pub struct TooSlow {
    /// Bytes received in the window.
    pub got: usize,
    /// The waiting time of the window.
    pub waited: Duration,
    /// The minimum rate, bytes/s.
    pub min: u32,
}

/// The input rate check of one job.
#[derive(Debug)]
pub struct InputRate {
    min: u32,
    window: Duration,
    counter: ByteCounter,
    waited: Duration,
    window_start: usize,
    /// Since when the driver waits for input, if it does.
    waiting_since: Option<Instant>,
}

impl InputRate {
    /// A check of at least `min` bytes/s (0: none) over windows of
    /// `window` of waiting time, on the bytes counted by `counter`.
    pub fn new(min: u32, window: Duration, counter: ByteCounter) -> Self {
        let window_start = counter.get();
        InputRate {
            min,
            window: window.max(Duration::from_millis(1)),
            counter,
            waited: Duration::ZERO,
            window_start,
            waiting_since: None,
        }
    }

    /// The driver waits for the job's input from `now` on (no change if
    /// it already waits).
    pub fn start_waiting(&mut self, now: Instant) {
        if self.min > 0 && self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
    }

    /// The driver stops waiting at `now` (input came, or something else
    /// happened first): the time waited counts, and a window that ended
    /// below the minimum fails.
    pub fn stop_waiting(&mut self, now: Instant) -> Result<(), TooSlow> {
        let Some(since) = self.waiting_since.take() else {
            return Ok(());
        };
        self.waited += now.saturating_duration_since(since);
        self.end_window_if_due()
    }

    /// When the current window ends if the waiting goes on; `None` when
    /// the driver does not wait or the check is off.
    pub fn window_end(&self) -> Option<Instant> {
        let since = self.waiting_since?;
        since.checked_add(self.window.saturating_sub(self.waited))
    }

    fn end_window_if_due(&mut self) -> Result<(), TooSlow> {
        if self.waited < self.window {
            return Ok(());
        }
        let now = self.counter.get();
        let got = now.wrapping_sub(self.window_start);
        let needed = f64::from(self.min) * self.waited.as_secs_f64();
        if (got as f64) < needed {
            return Err(TooSlow {
                got,
                waited: self.waited,
                min: self.min,
            });
        }
        self.waited = Duration::ZERO;
        self.window_start = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    #[test]
    fn a_trickle_fails_at_the_end_of_a_window() {
        let counter = ByteCounter::default();
        let mut rate = InputRate::new(100, WINDOW, counter.clone());
        let began = Instant::now();
        let mut now = began;
        // One byte every 5 s of waiting: 0.2 bytes/s.
        let mut failed = None;
        for _ in 0..10 {
            rate.start_waiting(now);
            now += Duration::from_secs(5);
            counter.add(1);
            if let Err(too_slow) = rate.stop_waiting(now) {
                failed = Some(too_slow);
                break;
            }
        }
        let too_slow = failed.expect("the trickle is cut");
        assert_eq!(too_slow.got, 2);
        assert_eq!(now - began, WINDOW);
    }

    #[test]
    fn a_stall_inside_one_read_is_cut_at_the_window_end() {
        let mut rate = InputRate::new(100, WINDOW, ByteCounter::default());
        let began = Instant::now();
        rate.start_waiting(began);
        let end = rate.window_end().expect("waiting");
        assert_eq!(end - began, WINDOW);
        assert!(rate.stop_waiting(end).is_err());
    }

    #[test]
    fn time_not_spent_waiting_does_not_count() {
        let counter = ByteCounter::default();
        let mut rate = InputRate::new(100, WINDOW, counter.clone());
        let mut now = Instant::now();
        for _ in 0..20 {
            // The server is busy for a minute between reads (not counted),
            // then 200 bytes arrive after 1 s of waiting: 200 bytes/s.
            now += Duration::from_secs(60);
            rate.start_waiting(now);
            now += Duration::from_secs(1);
            counter.add(200);
            rate.stop_waiting(now)
                .expect("fast enough while waited for");
        }
    }

    #[test]
    fn zero_turns_the_check_off() {
        let mut rate = InputRate::new(0, WINDOW, ByteCounter::default());
        let now = Instant::now();
        rate.start_waiting(now);
        assert_eq!(rate.window_end(), None);
        rate.stop_waiting(now + Duration::from_secs(100))
            .expect("no minimum");
    }
}
