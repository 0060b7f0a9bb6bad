//! Byte sizes as people write them: `100M`, `2MiB`, `5MB`, `4096`.
//!
//! `K`, `M`, `G` (and `KiB`, `MiB`, `GiB`) are powers of 1024, as in the
//! study, whose "100 MB" file was 104 857 600 bytes; `KB`, `MB`, `GB` are
//! powers of 1000.

/// A size could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {text:?}: {reason} (examples: 4096, 64K, 2M, 1.5G, 5MB)")]
pub struct SizeError {
    /// The text given.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses one size.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let error = |reason| SizeError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(error("unknown unit")),
    };
    if number.is_empty() {
        return Err(error("no number"));
    }
    if let Ok(whole) = number.parse::<u64>() {
        return whole
            .checked_mul(multiplier)
            .ok_or_else(|| error("too large"));
    }
    let value: f64 = number.parse().map_err(|_| error("not a number"))?;
    let bytes = value * multiplier as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
        return Err(error("too large"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a comma-separated list of sizes (at least one).
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, SizeError> {
    let sizes = text
        .split(',')
        .filter(|part| !part.trim().is_empty())
        .map(parse_size)
        .collect::<Result<Vec<_>, _>>()?;
    if sizes.is_empty() {
        return Err(SizeError {
            text: text.to_owned(),
            reason: "empty list",
        });
    }
    Ok(sizes)
}

/// A comma-separated list of sizes, as a command-line value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeList(pub Vec<u64>);

impl std::str::FromStr for SizeList {
    type Err = SizeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_size_list(text).map(SizeList)
    }
}

/// Formats a byte count for people, in powers of 1024 (`2.0 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_binary_unless_written_decimal() {
        assert_eq!(parse_size("100M"), Ok(104_857_600));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("5MB"), Ok(5_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert_eq!(parse_size("12Q").unwrap_err().reason, "unknown unit");
        assert_eq!(parse_size("M").unwrap_err().reason, "no number");
        assert_eq!(
            parse_size("99999999999999G").unwrap_err().reason,
            "too large"
        );
        assert!(parse_size_list(",").is_err());
        assert_eq!(parse_size_list("2M,5M"), Ok(vec![2 << 20, 5 << 20]));
    }

    #[test]
    fn human_sizes_read_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
