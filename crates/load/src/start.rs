//! When a run starts: now, at a wall-clock time (`--start-at`, RFC 3339
//! or Unix seconds) or after a delay (`--start-in`), so that the shards of
//! one run, on several machines, begin together.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far in the past a `--start-at` time may be and still start the run
/// at once: a shard that starts later than that would not run together
/// with the others, and is refused instead.
pub const LATE_LIMIT: Duration = Duration::from_secs(10);

/// A start time could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartError {
    /// Neither RFC 3339 nor a number of seconds.
    #[error(
        "invalid start time {text:?}: {reason} (examples: 2026-11-25T18:00:00Z, \
         2026-11-25T19:00:00+01:00, 1795629600)"
    )]
    Syntax {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The time is past by more than [`LATE_LIMIT`].
    #[error(
        "the start time {text} was {late_s:.1} s ago (more than {limit} s): the other shards \
         have started without this one; choose a later --start-at",
        limit = LATE_LIMIT.as_secs()
    )]
    TooLate {
        /// The time given.
        text: String,
        /// How long ago it was.
        late_s: f64,
    },
}

/// A wall-clock start time as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartAt {
    /// The text given (for messages).
    pub text: String,
    /// The time.
    pub time: SystemTime,
}

impl std::str::FromStr for StartAt {
    type Err = StartError;

    /// RFC 3339 (`2026-11-25T18:00:00Z`, a fraction and an offset
    /// allowed) or Unix seconds (`1795629600`, `1795629600.5`).
    fn from_str(text: &str) -> Result<StartAt, StartError> {
        let time = parse_time(text.trim()).map_err(|reason| StartError::Syntax {
            text: text.to_owned(),
            reason,
        })?;
        Ok(StartAt {
            text: text.trim().to_owned(),
            time,
        })
    }
}

impl StartAt {
    /// How long to wait from `now`: zero when the time has passed by at
    /// most [`LATE_LIMIT`], an error when by more.
    pub fn wait_from(&self, now: SystemTime) -> Result<Duration, StartError> {
        match self.time.duration_since(now) {
            Ok(wait) => Ok(wait),
            Err(late) if late.duration() <= LATE_LIMIT => Ok(Duration::ZERO),
            Err(late) => Err(StartError::TooLate {
                text: self.text.clone(),
                late_s: late.duration().as_secs_f64(),
            }),
        }
    }
}

/// Seconds since the Unix epoch of `time` (negative before it).
pub fn unix_seconds(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

fn parse_time(text: &str) -> Result<SystemTime, &'static str> {
    if text.is_empty() {
        return Err("empty");
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let seconds: f64 = text.parse().map_err(|_| "not a number")?;
        return Duration::try_from_secs_f64(seconds)
            .ok()
            .and_then(|since| UNIX_EPOCH.checked_add(since))
            .ok_or("out of range");
    }
    parse_rfc3339(text)
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`t`, `z` and a space for
/// `T` accepted, as RFC 3339 allows).
fn parse_rfc3339(text: &str) -> Result<SystemTime, &'static str> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Result<i64, &'static str> {
        let part = text.get(range).ok_or("too short")?;
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err("expected YYYY-MM-DDTHH:MM:SS followed by Z or an offset");
        }
        part.parse().map_err(|_| "not a number")
    };
    if bytes.len() < 19
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return Err("expected YYYY-MM-DDTHH:MM:SS followed by Z or an offset");
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("no such date");
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err("no such time of day");
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err("a '.' without digits");
        }
        let padded = format!("{:0<9}", &fraction[..digits.min(9)]);
        nanos = padded.parse().map_err(|_| "not a number")?;
        rest = &fraction[digits..];
    }
    let offset = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digit = |b: &u8| match b.is_ascii_digit() {
                true => Ok(i64::from(b - b'0')),
                false => Err("bad offset"),
            };
            let (hours, minutes) = (digit(h1)? * 10 + digit(h2)?, digit(m1)? * 10 + digit(m2)?);
            if hours > 23 || minutes > 59 {
                return Err("bad offset");
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        [] => return Err("no time zone: end with Z or an offset such as +01:00"),
        _ => return Err("bad time zone: Z or an offset such as +01:00"),
    };
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second.min(59)
            - offset;
    let seconds = u64::try_from(seconds).map_err(|_| "before 1970")?;
    Ok(UNIX_EPOCH + Duration::new(seconds, nanos))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Result<f64, StartError> {
        text.parse::<StartAt>()
            .map(|start| unix_seconds(start.time))
    }

    #[test]
    fn rfc3339_and_unix_seconds_give_the_same_instant() {
        // date -u -d 2026-11-25T18:00:00Z +%s
        assert_eq!(at("2026-11-25T18:00:00Z"), Ok(1_795_629_600.0));
        assert_eq!(at("1795629600"), Ok(1_795_629_600.0));
        assert_eq!(at("2026-11-25T19:00:00+01:00"), Ok(1_795_629_600.0));
        assert_eq!(at("2026-11-25t17:30:00-00:30"), Ok(1_795_629_600.0));
        assert_eq!(at("2026-11-25T18:00:00.25Z"), Ok(1_795_629_600.25));
        assert_eq!(at("1795629600.5"), Ok(1_795_629_600.5));
        assert_eq!(at("1970-01-01T00:00:00Z"), Ok(0.0));
        assert_eq!(at("2024-02-29T00:00:00Z"), Ok(1_709_164_800.0));
    }

    #[test]
    fn bad_times_say_why() {
        let reason = |text: &str| match text.parse::<StartAt>() {
            Err(StartError::Syntax { reason, .. }) => reason,
            other => panic!("{text:?}: {other:?}"),
        };
        assert_eq!(reason("2026-02-30T00:00:00Z"), "no such date");
        assert_eq!(reason("2026-11-25T24:00:00Z"), "no such time of day");
        assert!(reason("2026-11-25T18:00:00").starts_with("no time zone"));
        assert!(reason("tomorrow").starts_with("expected"));
        assert_eq!(reason(""), "empty");
    }

    #[test]
    fn a_start_time_slightly_past_starts_now_and_a_stale_one_is_refused() {
        let start: StartAt = "1795629600".parse().expect("valid");
        let now = start.time;
        assert_eq!(
            start.wait_from(now - Duration::from_secs(3)),
            Ok(Duration::from_secs(3))
        );
        assert_eq!(start.wait_from(now + LATE_LIMIT), Ok(Duration::ZERO));
        match start.wait_from(now + LATE_LIMIT + Duration::from_secs(1)) {
            Err(StartError::TooLate { late_s, .. }) => assert_eq!(late_s, 11.0),
            other => panic!("{other:?}"),
        }
    }
}
