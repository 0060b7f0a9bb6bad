//! Durations and warm-up periods as people write them on the command
//! line: `10s`, `500ms`, `2m`, `1.5`; `--warmup 5s` (by time) or
//! `--warmup 10` (by count of transfers).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::record::Transfer;

/// A duration or warm-up could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {text:?} (examples: {examples})")]
pub struct DurationError {
    /// What was being parsed.
    pub what: &'static str,
    /// The text given.
    pub text: String,
    /// Valid examples.
    pub examples: &'static str,
}

/// Parses `500ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let error = || DurationError {
        what: "duration",
        text: text.to_owned(),
        examples: "10s, 500ms, 2m, 1.5",
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let seconds_per_unit = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(error()),
    };
    let value: f64 = number.parse().map_err(|_| error())?;
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| error())
}

/// The start of a run that the results leave out, so that connection
/// set-up and cold caches do not weigh on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Warmup {
    /// Keep everything.
    #[default]
    None,
    /// Leave out the transfers meant to start in the first this long.
    Time(Duration),
    /// Leave out the first this many transfers (in start order).
    Transfers(usize),
}

impl Warmup {
    /// Whether `transfer` falls in the warm-up. Clients are numbered in
    /// the order they are meant to start, so "the first N" are those
    /// numbered below N.
    pub fn excludes(&self, transfer: &Transfer) -> bool {
        match *self {
            Warmup::None => false,
            Warmup::Time(limit) => transfer.scheduled < limit,
            Warmup::Transfers(count) => transfer.client < count,
        }
    }
}

impl FromStr for Warmup {
    type Err = DurationError;

    /// A bare integer counts transfers; a number with a unit (`5s`,
    /// `500ms`) is a time.
    fn from_str(text: &str) -> Result<Warmup, DurationError> {
        let trimmed = text.trim();
        if let Ok(count) = trimmed.parse::<usize>() {
            return Ok(match count {
                0 => Warmup::None,
                count => Warmup::Transfers(count),
            });
        }
        let has_unit = trimmed.ends_with(|c: char| c.is_ascii_alphabetic());
        match parse_duration(trimmed) {
            Ok(time) if has_unit && time.is_zero() => Ok(Warmup::None),
            Ok(time) if has_unit => Ok(Warmup::Time(time)),
            _ => Err(DurationError {
                what: "warm-up",
                text: text.to_owned(),
                examples: "5s or 500ms (a time), 10 (a number of transfers)",
            }),
        }
    }
}

impl fmt::Display for Warmup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warmup::None => write!(f, "none"),
            Warmup::Time(time) => write!(f, "{}s", time.as_secs_f64()),
            Warmup::Transfers(count) => write!(f, "{count} transfers"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn a_bare_number_counts_transfers_and_a_unit_means_time() {
        assert_eq!("10".parse(), Ok(Warmup::Transfers(10)));
        assert_eq!("5s".parse(), Ok(Warmup::Time(Duration::from_secs(5))));
        assert_eq!("0".parse(), Ok(Warmup::None));
        assert!("1.5".parse::<Warmup>().is_err(), "ambiguous: say 1.5s");
        assert!("x".parse::<Warmup>().is_err());
    }

    #[test]
    fn the_warmup_leaves_out_the_first_transfers() {
        let transfer = |client: usize, scheduled_ms: u64| Transfer {
            client,
            server: 0,
            batch: None,
            size: 1,
            scheduled: Duration::from_millis(scheduled_ms),
            dispatched: Duration::from_millis(scheduled_ms),
            finished: Duration::from_millis(scheduled_ms + 1),
            report: None,
            outcome: Outcome::Verified,
        };
        let by_count = Warmup::Transfers(2);
        assert!(by_count.excludes(&transfer(1, 5000)));
        assert!(!by_count.excludes(&transfer(2, 0)));
        let by_time = Warmup::Time(Duration::from_secs(1));
        assert!(by_time.excludes(&transfer(7, 999)));
        assert!(!by_time.excludes(&transfer(0, 1000)));
        assert!(!Warmup::None.excludes(&transfer(0, 0)));
    }
}
