//! Board temperature, from a Linux hwmon sensor or from the XADC of a
//! LiteX SoC.
//!
//! * `auto` (default): the first `temp*_input` under `/sys/class/hwmon`,
//!   if the board has one (a Raspberry Pi has `cpu_thermal`); otherwise
//!   no temperature metric at all rather than a made-up value.
//! * `hwmon:PATH`: a given hwmon file (millidegrees Celsius, as the kernel
//!   writes them).
//! * `xadc:ADDR`: the LiteX XADC temperature CSR at physical address ADDR,
//!   read through `/dev/mem` (root only). Take the address from the SoC's
//!   `csr.json`: `csr_registers.xadc_temperature.addr`. The 12-bit raw
//!   value converts as raw × 503.975 / 4096 − 273.15 °C (Xilinx UG480).
//! * `off`: never read.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Where the temperature comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemperatureSource {
    /// The first hwmon sensor, if any.
    Auto,
    /// A hwmon `temp*_input` file.
    Hwmon(PathBuf),
    /// A LiteX XADC temperature register at this physical address.
    Xadc(u64),
    /// No temperature.
    Off,
}

/// A temperature source setting could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid temperature source {0:?}: use auto, off, hwmon:PATH or xadc:0xADDRESS")]
pub struct TemperatureSourceError(String);

impl std::str::FromStr for TemperatureSource {
    type Err = TemperatureSourceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || TemperatureSourceError(text.to_owned());
        match text {
            "auto" => Ok(TemperatureSource::Auto),
            "off" => Ok(TemperatureSource::Off),
            _ => {
                if let Some(path) = text.strip_prefix("hwmon:") {
                    if path.is_empty() {
                        return Err(error());
                    }
                    Ok(TemperatureSource::Hwmon(PathBuf::from(path)))
                } else if let Some(addr) = text.strip_prefix("xadc:") {
                    let digits = addr.strip_prefix("0x").ok_or_else(error)?;
                    u64::from_str_radix(digits, 16)
                        .map(TemperatureSource::Xadc)
                        .map_err(|_| error())
                } else {
                    Err(error())
                }
            }
        }
    }
}

/// A resolved sensor: what to read, and its label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensor {
    kind: SensorKind,
    /// The `sensor` label of the metric.
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SensorKind {
    Hwmon(PathBuf),
    Xadc(u64),
}

impl TemperatureSource {
    /// The sensor to read, if any; `auto` looks under `/sys/class/hwmon`.
    pub fn resolve(&self) -> Option<Sensor> {
        match self {
            TemperatureSource::Off => None,
            TemperatureSource::Hwmon(path) => Some(Sensor {
                label: format!("hwmon:{}", path.display()),
                kind: SensorKind::Hwmon(path.clone()),
            }),
            TemperatureSource::Xadc(addr) => Some(Sensor {
                label: format!("xadc:{addr:#x}"),
                kind: SensorKind::Xadc(*addr),
            }),
            TemperatureSource::Auto => first_hwmon_sensor(Path::new("/sys/class/hwmon")),
        }
    }
}

fn first_hwmon_sensor(root: &Path) -> Option<Sensor> {
    let mut devices: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    devices.sort();
    for device in devices {
        let name = std::fs::read_to_string(device.join("name")).unwrap_or_default();
        let input = device.join("temp1_input");
        if read_millidegrees(&input).is_some() {
            return Some(Sensor {
                label: format!("hwmon:{}", name.trim()),
                kind: SensorKind::Hwmon(input),
            });
        }
    }
    None
}

impl Sensor {
    /// The temperature now, in °C; `None` when the read fails.
    pub fn read_celsius(&self) -> Option<f64> {
        match &self.kind {
            SensorKind::Hwmon(path) => read_millidegrees(path).map(|milli| milli / 1000.0),
            SensorKind::Xadc(addr) => read_xadc(*addr),
        }
    }
}

fn read_millidegrees(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Converts a raw 12-bit XADC temperature sample to °C.
pub fn xadc_raw_to_celsius(raw: u32) -> f64 {
    f64::from(raw & 0xfff) * 503.975 / 4096.0 - 273.15
}

#[cfg(unix)]
fn read_xadc(addr: u64) -> Option<f64> {
    use std::os::unix::fs::FileExt;
    let mem = File::open("/dev/mem").ok()?;
    let mut word = [0u8; 4];
    mem.read_exact_at(&mut word, addr).ok()?;
    Some(xadc_raw_to_celsius(u32::from_le_bytes(word)))
}

#[cfg(not(unix))]
fn read_xadc(_addr: u64) -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_bad_ones_are_refused() {
        assert_eq!("auto".parse(), Ok(TemperatureSource::Auto));
        assert_eq!("off".parse(), Ok(TemperatureSource::Off));
        assert_eq!(
            "xadc:0xf0005800".parse(),
            Ok(TemperatureSource::Xadc(0xf000_5800))
        );
        assert_eq!(
            "hwmon:/sys/class/hwmon/hwmon0/temp1_input".parse(),
            Ok(TemperatureSource::Hwmon(
                "/sys/class/hwmon/hwmon0/temp1_input".into()
            ))
        );
        for bad in ["", "xadc:f000", "xadc:0xzz", "hwmon:", "thermal"] {
            assert!(bad.parse::<TemperatureSource>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hwmon_millidegrees_are_read_as_celsius() {
        let dir = std::env::temp_dir().join(format!("aesd-hwmon-{}", std::process::id()));
        let device = dir.join("hwmon0");
        std::fs::create_dir_all(&device).expect("dir");
        std::fs::write(device.join("name"), "cpu_thermal\n").expect("name");
        std::fs::write(device.join("temp1_input"), "48312\n").expect("temp");
        let sensor = first_hwmon_sensor(&dir).expect("found");
        assert_eq!(sensor.label, "hwmon:cpu_thermal");
        assert_eq!(sensor.read_celsius(), Some(48.312));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn xadc_conversion_follows_the_datasheet() {
        // 0x9d0 (2512) is about 35.9 °C.
        let celsius = xadc_raw_to_celsius(0x9d0);
        assert!((celsius - 35.94).abs() < 0.05, "{celsius}");
    }
}
