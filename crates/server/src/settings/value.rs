//! How a setting's typed value (in [`crate::Config`]) is written in flags,
//! TOML and variables (in [`crate::ConfigLayer`]), and the checks the
//! settings table names after `valid`.

use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend::AesBackend;
use crate::etcd::KeyringLocation;
use crate::metrics::temperature::TemperatureSource;
use crate::mlock::MlockMode;
use crate::proxy::CidrList;
use crate::transit_seal::TransitAddress;

/// A setting's typed value and its written form: `read` when the
/// settings are resolved, `write` for `--print-config`, so that writing
/// and reading again gives the same value.
pub trait SettingValue: Sized {
    /// The value as a flag, a TOML key or a variable gives it (clap and
    /// serde parse this type).
    type Written;

    /// The typed value, or why the written one is not allowed.
    fn read(written: Self::Written) -> Result<Self, String>;

    /// The written form; `None` when the setting is unset (nothing to
    /// print).
    fn write(&self) -> Option<Self::Written>;
}

/// Types written as they are (numbers, addresses, paths, text).
macro_rules! written_as_is {
    ($($ty:ty),*) => {$(
        impl SettingValue for $ty {
            type Written = $ty;

            fn read(written: $ty) -> Result<$ty, String> {
                Ok(written)
            }

            fn write(&self) -> Option<$ty> {
                Some(self.clone())
            }
        }
    )*};
}

written_as_is!(u8, u32, u64, usize, SocketAddr, PathBuf, String);

/// An optional setting (a file, an address): unset unless given.
impl<T: SettingValue> SettingValue for Option<T> {
    type Written = T::Written;

    fn read(written: T::Written) -> Result<Self, String> {
        T::read(written).map(Some)
    }

    fn write(&self) -> Option<T::Written> {
        self.as_ref().and_then(T::write)
    }
}

/// Longest time a setting may give, in seconds (a day).
const MAX_SECONDS: f64 = 86_400.0;

/// A time, written in seconds (fractions allowed): more than 0 and at
/// most a day.
impl SettingValue for Duration {
    type Written = f64;

    fn read(secs: f64) -> Result<Duration, String> {
        if secs > 0.0 && secs <= MAX_SECONDS {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(format!(
                "must be more than 0 and at most {MAX_SECONDS} seconds, got {secs}"
            ))
        }
    }

    fn write(&self) -> Option<f64> {
        Some(self.as_secs_f64())
    }
}

/// Networks, written `CIDR[,CIDR...]`; the empty list is unset.
impl SettingValue for CidrList {
    type Written = String;

    fn read(written: String) -> Result<CidrList, String> {
        parse(&written)
    }

    fn write(&self) -> Option<String> {
        (!self.is_empty()).then(|| self.to_string())
    }
}

/// `auto`, `off`, `hwmon:PATH` or `xadc:0xADDR`.
impl SettingValue for TemperatureSource {
    type Written = String;

    fn read(written: String) -> Result<TemperatureSource, String> {
        parse(&written)
    }

    fn write(&self) -> Option<String> {
        Some(match self {
            TemperatureSource::Auto => "auto".to_owned(),
            TemperatureSource::Off => "off".to_owned(),
            TemperatureSource::Hwmon(path) => format!("hwmon:{}", path.display()),
            TemperatureSource::Xadc(addr) => format!("xadc:{addr:#x}"),
        })
    }
}

/// A directory, or `etcd://HOST:PORT[,HOST:PORT...]/PREFIX`.
impl SettingValue for KeyringLocation {
    type Written = String;

    fn read(written: String) -> Result<KeyringLocation, String> {
        KeyringLocation::parse(&written)
    }

    fn write(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// `http://HOST[:PORT]`.
impl SettingValue for TransitAddress {
    type Written = String;

    fn read(written: String) -> Result<TransitAddress, String> {
        TransitAddress::parse(&written)
    }

    fn write(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// `auto`, `on` or `off`.
impl SettingValue for MlockMode {
    type Written = String;

    fn read(written: String) -> Result<MlockMode, String> {
        written.parse()
    }

    fn write(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// `auto`, `software`, `vexriscv` or `zkne`.
impl SettingValue for AesBackend {
    type Written = String;

    fn read(written: String) -> Result<AesBackend, String> {
        parse(&written)
    }

    fn write(&self) -> Option<String> {
        Some(self.name().to_owned())
    }
}

/// A value parsed from its text; the parser's error says why not.
fn parse<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: Display,
{
    text.parse().map_err(|err: T::Err| err.to_string())
}

/// `valid within(1..=1024)`: "must be 1 to 1024, got 0".
pub fn within<T: PartialOrd + Display>(
    range: RangeInclusive<T>,
) -> impl Fn(&T) -> Result<(), String> {
    within_unit(range, "")
}

/// `valid within_unit(4096..=1048576, "bytes")`: "must be 4096 to
/// 1048576 bytes, got 10".
pub fn within_unit<T: PartialOrd + Display>(
    range: RangeInclusive<T>,
    unit: &'static str,
) -> impl Fn(&T) -> Result<(), String> {
    move |value| {
        if range.contains(value) {
            return Ok(());
        }
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        Err(format!(
            "must be {} to {}{unit}, got {value}",
            range.start(),
            range.end()
        ))
    }
}

/// `valid at_most(1_000_000)`: "must be at most 1000000, got 1000001".
pub fn at_most<T: PartialOrd + Display>(most: T) -> impl Fn(&T) -> Result<(), String> {
    move |value| {
        if *value <= most {
            Ok(())
        } else {
            Err(format!("must be at most {most}, got {value}"))
        }
    }
}

/// `valid at_least_one`: "must be at least 1".
pub fn at_least_one(value: &usize) -> Result<(), String> {
    if *value >= 1 {
        Ok(())
    } else {
        Err("must be at least 1".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing a value and reading it again gives the same value.
    fn round_trip<T: SettingValue + PartialEq + std::fmt::Debug + Clone>(value: T) {
        let written = value.write().expect("a set value is written");
        assert_eq!(T::read(written).expect("reads back"), value);
    }

    #[test]
    fn each_written_form_reads_back() {
        round_trip(Duration::from_millis(1500));
        round_trip(Some(PathBuf::from("/etc/aesd/token")));
        round_trip("10.0.0.0/8,fd00::/8".parse::<CidrList>().expect("networks"));
        for source in ["auto", "off", "hwmon:/sys/x/temp1_input", "xadc:0xf0002000"] {
            round_trip(source.parse::<TemperatureSource>().expect("source"));
        }
        for backend in ["auto", "software", "vexriscv", "zkne"] {
            round_trip(backend.parse::<AesBackend>().expect("backend"));
        }
        assert_eq!(None::<PathBuf>.write(), None, "unset is not written");
        assert_eq!(CidrList::default().write(), None, "no network is unset");
    }

    #[test]
    fn times_are_more_than_0_and_at_most_a_day() {
        assert_eq!(Duration::read(0.25), Ok(Duration::from_millis(250)));
        assert_eq!(Duration::read(86_400.0), Ok(Duration::from_secs(86_400)));
        for bad in [0.0, -1.0, 86_400.5, f64::NAN, f64::INFINITY] {
            let err = Duration::read(bad).expect_err("out of range");
            assert!(err.starts_with("must be more than 0"), "{bad}: {err}");
        }
    }

    #[test]
    fn checks_say_what_is_allowed() {
        assert_eq!(within(1..=1024)(&1024), Ok(()));
        assert_eq!(
            within(1..=1024)(&0),
            Err("must be 1 to 1024, got 0".to_owned())
        );
        assert_eq!(
            within_unit(4096..=1_048_576, "bytes")(&10),
            Err("must be 4096 to 1048576 bytes, got 10".to_owned())
        );
        assert_eq!(at_most(10)(&10), Ok(()));
        assert_eq!(
            at_most(10)(&11),
            Err("must be at most 10, got 11".to_owned())
        );
        assert_eq!(at_least_one(&1), Ok(()));
        assert!(at_least_one(&0).is_err());
    }
}
