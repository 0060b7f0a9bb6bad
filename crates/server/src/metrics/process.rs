//! Process figures from `/proc` (Linux): CPU seconds, resident and
//! virtual memory, open and maximum file descriptors, start time.
//! Elsewhere, or when `/proc` is unreadable, they are simply absent.

use std::fs;

/// Linux reports CPU times in clock ticks of 1/100 s (USER_HZ) on every
/// architecture this project targets.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    /// User + system CPU time.
    pub cpu_seconds: Option<f64>,
    /// Resident memory.
    pub resident_bytes: Option<u64>,
    /// Virtual memory.
    pub virtual_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on file descriptors.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// Reads the figures of this process.
    pub fn read() -> ProcessStats {
        let stat = fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().and_then(stat_fields_after_name);
        let field = |index: usize| -> Option<f64> { fields.as_ref()?.get(index)?.parse().ok() };
        // Fields counted from the state (field 3 in proc(5)): utime is
        // field 14, stime 15, starttime 22.
        let cpu_seconds = match (field(14 - 3), field(15 - 3)) {
            (Some(user), Some(system)) => Some((user + system) / TICKS_PER_SECOND),
            _ => None,
        };
        let start_time_seconds = match (field(22 - 3), boot_time()) {
            (Some(start), Some(boot)) => Some(boot + start / TICKS_PER_SECOND),
            _ => None,
        };
        let status = fs::read_to_string("/proc/self/status").ok();
        let status_kib = |key: &str| -> Option<u64> {
            status
                .as_deref()?
                .lines()
                .find(|line| line.starts_with(key))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
                .map(|kib| kib * 1024)
        };
        ProcessStats {
            cpu_seconds,
            resident_bytes: status_kib("VmRSS:"),
            virtual_bytes: status_kib("VmSize:"),
            open_fds: fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as u64),
            max_fds: max_open_files(),
            start_time_seconds,
        }
    }
}

/// The fields of `/proc/self/stat` after the `(name)` field, which may
/// itself contain spaces and parentheses.
fn stat_fields_after_name(stat: &str) -> Option<Vec<String>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

fn boot_time() -> Option<f64> {
    fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn max_open_files() -> Option<u64> {
    fs::read_to_string("/proc/self/limits")
        .ok()?
        .lines()
        .find(|line| line.starts_with("Max open files"))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_spaces_and_parentheses_are_skipped() {
        let fields = stat_fields_after_name("42 (a (b) c) S 1 2 3").expect("fields");
        assert_eq!(fields, ["S", "1", "2", "3"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_plausible_figures() {
        let stats = ProcessStats::read();
        assert!(stats.resident_bytes.expect("rss") > 100 * 1024);
        assert!(stats.open_fds.expect("fds") >= 3);
        assert!(stats.max_fds.expect("limit") >= stats.open_fds.expect("fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        let start = stats.start_time_seconds.expect("start");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "start {start}"
        );
        assert!(stats.cpu_seconds.expect("cpu") >= 0.0);
    }
}
