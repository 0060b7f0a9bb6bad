//! Every setting's default: a named constant each, which `resolve()`
//! fills in. The text `--help` and the settings table of docs/aesd.md show
//! for it ([`shown`]) is declared with the setting in `settings.rs`; tests
//! check the table, the help and the resolved defaults against it.

use aesd_proto::limits::DEFAULT_DATA_CHUNK;

pub use crate::backend::DEFAULT_DEVICE_TREE as DEVICE_TREE;

/// Address of the job port.
pub const LISTEN: &str = "0.0.0.0:7878";
/// Jobs that may wait for a slot.
pub const MAX_QUEUE: usize = 64;
/// Largest data frame payload accepted, in bytes.
pub const CHUNK_SIZE: u32 = DEFAULT_DATA_CHUNK;
/// Lowest PBKDF2 iteration count a job may ask for.
pub const MIN_ITER: u32 = 1000;
/// Highest PBKDF2 iteration count a job may ask for: about a minute of one
/// core on a 100 MHz VexRiscv.
pub const MAX_ITER: u32 = 100_000;
/// Seconds a new connection has to send its hello.
pub const HANDSHAKE_TIMEOUT_SECS: f64 = 10.0;
/// Seconds a connection may stay silent (or not read).
pub const IDLE_TIMEOUT_SECS: f64 = 60.0;
/// Seconds running jobs get after SIGINT/SIGTERM.
pub const SHUTDOWN_GRACE_SECS: f64 = 30.0;
/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections open at once from one client address.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 64;
/// Largest input of one job (16 GiB: hours on a 100 MHz board).
pub const MAX_FILE_SIZE: u64 = 16 << 30;
/// Jobs one connection may run.
pub const MAX_JOBS_PER_CONNECTION: u64 = 10_000;
/// Seconds before a wrong or missing token is answered.
pub const AUTH_FAILURE_DELAY_SECS: f64 = 1.0;
/// Log filter.
pub const LOG: &str = "info";
/// Board temperature source.
pub const TEMPERATURE: &str = "auto";
/// AES implementation.
pub const AES_BACKEND: &str = "auto";
/// Active jobs per worker thread (`max-active` = this × workers).
pub const ACTIVE_PER_WORKER: usize = 2;
/// Leading bits of an IPv6 address that identify one client.
pub const CLIENT_IPV6_PREFIX: u8 = crate::client_id::DEFAULT_IPV6_PREFIX;
/// Slowest input a running job may send, bytes/s: a trickle that holds a
/// slot is cut, a slow link (a 9600-baud modem is 960 B/s) is roughly the
/// floor.
pub const MIN_INPUT_RATE: u32 = 1024;
/// Seconds of waiting over which the input rate is measured.
pub const INPUT_RATE_WINDOW_SECS: f64 = 10.0;
/// PBKDF2 iterations (key source 1) one client may make aesd run per
/// minute: one `max-iter` job, or ten jobs at openssl's 10 000.
pub const KDF_BUDGET: u64 = 100_000;
/// PBKDF2 iterations (key source 1) all clients together may make aesd
/// run per minute: four clients' budgets.
pub const KDF_BUDGET_TOTAL: u64 = 400_000;

/// TLS handshakes one client may start per minute: ten a second on
/// average, and a minute's worth at once (a host opening a few hundred
/// connections together). The board's aesd.toml: 120.
pub const TLS_HANDSHAKE_RATE: u64 = 600;

/// Networks that may scrape the metrics: loopback, the private IPv4
/// networks (RFC 1918), IPv4 link-local, IPv6 unique local and link-local
/// addresses. A management network is one of these; the internet is not.
pub const METRICS_ALLOW: &str =
    "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,::1/128,fc00::/7,fe80::/10";

/// Slots one client keeps while another client waits (alone it uses them
/// all, see `admission`): all slots but one, and never more than an equal
/// part of them among the clients with jobs. At least 1.
pub fn max_active_per_client(max_active: usize) -> usize {
    max_active.saturating_sub(1).max(1)
}

/// Each setting's default as users read it, by flag name (without `--`):
/// what `--help` appends as `[default: …]` and what docs/aesd.md's settings
/// table says. Declared beside each setting in `settings.rs`.
pub fn shown() -> Vec<(String, String)> {
    crate::settings::shown_defaults()
}

/// The shown default of one flag.
pub fn shown_for(flag: &str) -> Option<String> {
    shown()
        .into_iter()
        .find(|(name, _)| name == flag)
        .map(|(_, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config, ConfigLayer};

    /// The flags of the settings (all of `ConfigLayer`'s arguments).
    fn setting_flags() -> Vec<String> {
        use clap::{Args, Command};
        ConfigLayer::augment_args(Command::new("settings"))
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(str::to_owned))
            .collect()
    }

    #[test]
    fn every_setting_has_one_shown_default_and_the_help_shows_it() {
        let flags = setting_flags();
        let shown = shown();
        assert_eq!(shown.len(), flags.len(), "one default per setting");
        let command = Cli::command_with_defaults();
        let helps: Vec<(String, String)> = command
            .get_arguments()
            .filter_map(|arg| Some((arg.get_long()?.to_owned(), arg.get_help()?.to_string())))
            .collect();
        for flag in &flags {
            let text = shown_for(flag).unwrap_or_else(|| panic!("--{flag} has no shown default"));
            let (_, help) = helps
                .iter()
                .find(|(long, _)| long == flag)
                .unwrap_or_else(|| panic!("--{flag} has no help"));
            assert!(
                help.ends_with(&format!("[default: {text}]")),
                "--{flag}'s help ends with [default: {text}]: {help}"
            );
            assert_eq!(
                help.matches("[default:").count(),
                1,
                "--{flag}: no default written into its doc comment as well: {help}"
            );
        }
    }

    /// The settings table of docs/aesd.md: every `--flag` row's default cell is
    /// the shown default (a row naming two flags, `a / b`, has two).
    #[test]
    fn the_settings_table_shows_the_same_defaults() {
        let readme = include_str!("../../../docs/aesd.md");
        let table = readme
            .split("## Settings\n")
            .nth(1)
            .expect("docs/aesd.md has the settings section");
        let flags = setting_flags();
        let mut seen = Vec::new();
        for line in table
            .lines()
            .skip_while(|l| !l.starts_with("| flag"))
            .skip(2)
        {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let names: Vec<&str> = cells[1]
                .split('`')
                .filter_map(|part| part.strip_prefix("--"))
                .map(|part| part.split(' ').next().unwrap_or(part))
                .filter(|name| flags.iter().any(|flag| flag == name))
                .collect();
            if names.is_empty() {
                continue; // --config, --check-config, --print-config
            }
            let defaults: Vec<String> = cells[2]
                .split(" / ")
                .map(|cell| cell.replace('`', ""))
                .collect();
            assert_eq!(defaults.len(), names.len(), "row {line}");
            for (name, default) in names.iter().zip(&defaults) {
                assert_eq!(
                    Some(default.clone()),
                    shown_for(name),
                    "docs/aesd.md row for --{name}"
                );
                seen.push(name.to_string());
            }
        }
        for flag in &flags {
            assert!(seen.contains(flag), "docs/aesd.md's table lacks --{flag}");
        }
    }

    #[test]
    fn resolve_fills_in_the_constants() {
        let config = Config::resolve(ConfigLayer::default()).expect("defaults are valid");
        assert_eq!(config.listen.to_string(), LISTEN);
        assert_eq!(config.max_active, ACTIVE_PER_WORKER * config.workers);
        assert_eq!(config.max_queue, MAX_QUEUE);
        assert_eq!(config.chunk_size, CHUNK_SIZE);
        assert_eq!(
            (config.min_iterations, config.max_iterations),
            (MIN_ITER, MAX_ITER)
        );
        assert_eq!(config.idle_timeout.as_secs_f64(), IDLE_TIMEOUT_SECS);
        assert_eq!(config.max_file_size, MAX_FILE_SIZE);
        assert_eq!(config.max_jobs_per_connection, MAX_JOBS_PER_CONNECTION);
    }
}
