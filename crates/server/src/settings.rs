//! Every setting of aesd declared once, in one table: its name (the
//! flag `--max-active`, the TOML key `max-active`, the variable
//! `AESD_MAX_ACTIVE`), its type, the value name and help of `--help`, and
//! its default as users read it (in `--help` and docs/aesd.md's table).
//!
//! From the table come [`ConfigLayer`] (which clap and serde read from
//! the command line, the environment and TOML) and [`shown_defaults`].
//! [`crate::Config::resolve`] fills the typed defaults of
//! [`crate::defaults`]; tests check every setting's flag, variable, TOML
//! key, docs row and default against this table.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::defaults::*;

/// Prefix of the environment variables that configure aesd.
pub const ENV_PREFIX: &str = "AESD_";

/// The environment variable of a setting: `AESD_` and its flag name in
/// upper case, `-` as `_` (`max-active` → `AESD_MAX_ACTIVE`).
pub fn env_var(flag: &str) -> String {
    format!("{ENV_PREFIX}{}", flag.to_uppercase().replace('-', "_"))
}

/// Declares the settings: each entry is the help text (doc comment), the
/// field name (the flag with `_` for `-`), the value's type, the value
/// name `--help` shows and the default as users read it.
macro_rules! settings {
    ($(
        $(#[doc = $help:literal])*
        $field:ident: $ty:ty, $value_name:literal, default $shown:expr;
    )*) => {
        /// Settings from one source; `None` where that source says nothing.
        #[derive(Debug, Clone, Default, PartialEq, Args, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        pub struct ConfigLayer {
            $(
                $(#[doc = $help])*
                #[arg(long, value_name = $value_name)]
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
        }

        /// Each setting's flag name (without `--`; also its TOML key) and
        /// its default as users read it: what `--help` appends as
        /// `[default: …]` and what docs/aesd.md's settings table says.
        pub fn shown_defaults() -> Vec<(String, String)> {
            vec![$(
                (stringify!($field).replace('_', "-"), $shown.to_string()),
            )*]
        }
    };
}

settings! {
    /// Address and port of the job port
    listen: SocketAddr, "ADDR", default LISTEN;
    /// Worker threads for cryptographic work
    workers: usize, "N", default "one per core";
    /// Jobs processed at once; more wait in the queue
    max_active: usize, "N", default format!("{ACTIVE_PER_WORKER} × workers");
    /// Jobs that may wait for a slot; past this, clients get a Busy error at
    /// once
    max_queue: usize, "N", default MAX_QUEUE;
    /// Largest data frame payload accepted, in bytes (4096 to 1048576); per-job
    /// memory is a few of these
    chunk_size: u32, "BYTES", default CHUNK_SIZE;
    /// Lowest PBKDF2 iteration count a job may ask for
    min_iter: u32, "N", default MIN_ITER;
    /// Highest PBKDF2 iteration count a job may ask for
    max_iter: u32, "N", default MAX_ITER;
    /// Seconds a new connection has to send its hello
    handshake_timeout: f64, "SECS", default HANDSHAKE_TIMEOUT_SECS;
    /// Seconds a connection may stay silent (or not read our output) before it
    /// is closed with a Timeout error
    idle_timeout: f64, "SECS", default IDLE_TIMEOUT_SECS;
    /// Seconds in-flight jobs get to finish after SIGINT/SIGTERM before they
    /// are cut off with a ShuttingDown error
    shutdown_grace: f64, "SECS", default SHUTDOWN_GRACE_SECS;
    /// Connections open at once; past this a new connection gets a Busy error
    /// and is closed
    max_connections: usize, "N", default MAX_CONNECTIONS;
    /// Connections open at once from one client (an IPv4 address or an
    /// IPv6 prefix, see client-ipv6-prefix)
    max_connections_per_client: usize, "N", default MAX_CONNECTIONS_PER_CLIENT;
    /// Leading bits of an IPv6 address that identify one client for every
    /// per-client limit (0 to 128; IPv4 clients are their address)
    client_ipv6_prefix: u8, "BITS", default CLIENT_IPV6_PREFIX;
    /// Slots one client keeps while another client waits for one (its
    /// share is also at most an equal part of the slots). A client alone
    /// uses every slot; when another arrives it starts at once on a slot
    /// lent beyond max-active (the first client's jobs run on, but it
    /// starts no more until it is back within its share)
    max_active_per_client: usize, "N", default "max-active − 1 (at least 1)";
    /// Jobs one client may have waiting in the queue; past this its jobs
    /// get a Busy error at once (the connection stays open)
    max_queued_per_client: usize, "N", default "max-queue";
    /// Slowest input a running job may send, in bytes per second of the
    /// time the server waits for it (not while the server itself is
    /// busy); a slower job fails with a Timeout error and frees its slot.
    /// 0 turns the check off
    min_input_rate: u32, "BYTES", default MIN_INPUT_RATE;
    /// Seconds of waiting for input over which min-input-rate is measured;
    /// the first window is a job's grace period
    input_rate_window: f64, "SECS", default INPUT_RATE_WINDOW_SECS;
    /// PBKDF2 iterations one client may make aesd run per minute (jobs
    /// with key source 1, where the client sends its password); a begin
    /// over the budget gets busy and is told when to retry. A job larger
    /// than the budget needs a full minute's worth. 0 turns it off
    kdf_budget: u64, "ITERATIONS", default KDF_BUDGET;
    /// PBKDF2 iterations all clients together may make aesd run per
    /// minute (key source 1), beside each one's kdf-budget: many addresses
    /// cannot add up to every core. A begin over it gets busy. 0 turns it
    /// off
    kdf_budget_total: u64, "ITERATIONS", default KDF_BUDGET_TOTAL;
    /// Largest input one job may send, in bytes; past this the job fails with
    /// limit_exceeded
    max_file_size: u64, "BYTES", default format!("{MAX_FILE_SIZE} ({} GiB)", MAX_FILE_SIZE >> 30);
    /// Jobs one connection may run; then it is closed with job_limit
    max_jobs_per_connection: u64, "N", default MAX_JOBS_PER_CONNECTION;
    /// TLS on the job port: this PEM certificate chain (leaf first); needs
    /// --tls-key. Clients then connect with --tls or --tls-ca; a plain
    /// client gets tls_required
    tls_cert: PathBuf, "FILE", default "none";
    /// TLS on the job port: the PEM private key of --tls-cert
    tls_key: PathBuf, "FILE", default "none";
    /// TLS handshakes one client may start per minute (a token bucket
    /// holding a minute's worth); a connection over it is closed before
    /// any cryptography and counted in
    /// aesd_connections_refused_total{reason="tls_handshake_rate"}. 0 turns
    /// it off
    tls_handshake_rate: u64, "HANDSHAKES", default TLS_HANDSHAKE_RATE;
    /// Require clients to send this access token before any job: the file's
    /// first line, 16 to 256 bytes (clients: --token-file)
    token_file: PathBuf, "FILE", default "none";
    /// Seconds a wrong or missing token waits before its unauthorized answer;
    /// doubles with each further failure from the same address within 10
    /// minutes, up to 32 times
    auth_failure_delay: f64, "SECS", default AUTH_FAILURE_DELAY_SECS;
    /// Address of the Prometheus /metrics endpoint, e.g. 0.0.0.0:9878
    metrics_listen: SocketAddr, "ADDR", default "off";
    /// Networks that may scrape the metrics (CIDR[,CIDR...]); a connection
    /// from any other address is closed before its request is read and
    /// counted in aesd_connections_refused_total{reason="metrics_not_allowed"}.
    /// 0.0.0.0/0,::/0 allows every address
    metrics_allow: String, "CIDR,...", default METRICS_ALLOW;
    /// Board temperature for the metrics: auto (first hwmon sensor, if any),
    /// off, hwmon:PATH (a temp*_input file) or xadc:0xADDR (LiteX XADC
    /// temperature CSR via /dev/mem, from csr.json)
    temperature: String, "SOURCE", default TEMPERATURE;
    /// AES implementation: auto (VexRiscv's AES instruction when the device
    /// tree marks the CPUs with it and its self-test passes, else Zkne/Zknd
    /// when the device tree's ISA or riscv_hwprobe lists them and their
    /// self-test passes, else software), software (the CPU's AES
    /// instructions if any, else aesd's fixsliced AES), vexriscv (the
    /// AesPlugin instruction, custom-0, or exit 2) or zkne (the ratified
    /// scalar AES instructions, or exit 2)
    aes_backend: String, "BACKEND", default AES_BACKEND;
    /// Device tree that `aes-backend = auto` reads the CPUs' features from
    /// (`litex,aes-instruction`, `riscv,isa`, `riscv,isa-extensions`)
    device_tree: PathBuf, "DIR", default DEVICE_TREE;
    /// Load balancers (IP networks, CIDR[,CIDR...], e.g. 10.0.0.5/32) whose
    /// connections must start with a PROXY protocol header (v1 or v2); the
    /// client address it carries then keys the per-address limits and the log.
    /// A PROXY header from any other address is refused
    trusted_proxies: String, "CIDR,...", default "none";
    /// Log filter, tracing syntax (error, warn, info, debug, trace, or
    /// per-module like "aesd_server=debug")
    log: String, "FILTER", default LOG;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config};
    use clap::Parser;

    /// Settings whose default follows from others (shown as a rule, not
    /// a value).
    const DERIVED: [&str; 4] = [
        "workers",
        "max-active",
        "max-active-per-client",
        "max-queued-per-client",
    ];

    fn flags() -> Vec<String> {
        shown_defaults().into_iter().map(|(flag, _)| flag).collect()
    }

    /// A resolved configuration with every setting given, as the TOML
    /// table `--print-config` prints.
    fn every_setting_printed() -> toml::Table {
        let config = Config::resolve(ConfigLayer {
            tls_cert: Some("cert.pem".into()),
            tls_key: Some("key.pem".into()),
            token_file: Some("token".into()),
            metrics_listen: Some("127.0.0.1:9878".parse().expect("address")),
            trusted_proxies: Some("10.0.0.0/8".into()),
            ..ConfigLayer::default()
        })
        .expect("valid");
        toml::from_str(&config.to_layer().to_toml()).expect("printed TOML reads back")
    }

    /// A TOML value as a flag or variable takes it.
    fn as_argument(value: &toml::Value) -> String {
        value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned)
    }

    /// The TOML value a layer gives one setting, if any.
    fn value_of(layer: &ConfigLayer, flag: &str) -> Option<toml::Value> {
        toml::Table::try_from(layer)
            .expect("a layer is a table")
            .get(flag)
            .cloned()
    }

    #[test]
    fn every_setting_has_a_toml_key_a_flag_and_a_variable() {
        let printed = every_setting_printed();
        let keys: Vec<&String> = printed.keys().collect();
        let mut flags = flags();
        flags.sort();
        assert_eq!(
            keys,
            flags.iter().collect::<Vec<_>>(),
            "--print-config prints every setting"
        );
        let from_toml: ConfigLayer = printed.clone().try_into().expect("TOML keys");
        let mut argv = vec!["aesd".to_owned()];
        argv.extend(
            printed
                .iter()
                .map(|(key, value)| format!("--{key}={}", as_argument(value))),
        );
        let from_flags = Cli::try_parse_from(&argv)
            .expect("a flag per setting")
            .settings;
        assert_eq!(from_flags, from_toml);
        let from_env = ConfigLayer::from_env(|name| {
            printed
                .iter()
                .find(|(key, _)| env_var(key) == name)
                .map(|(_, value)| as_argument(value))
        })
        .expect("a variable per setting");
        assert_eq!(from_env, from_toml);
        assert!(flags.iter().all(|flag| env_var(flag).starts_with("AESD_")));
        assert_eq!(
            env_var("max-connections-per-client"),
            "AESD_MAX_CONNECTIONS_PER_CLIENT"
        );
    }

    /// The default users read (in `--help` and docs/aesd.md) is the one
    /// `resolve` fills in: read as the setting's value, it gives the same
    /// value; "none" and "off" are settings left unset; only the derived
    /// defaults are rules rather than values.
    #[test]
    fn shown_defaults_are_the_resolved_defaults() {
        let defaults = Config::resolve(ConfigLayer::default())
            .expect("defaults are valid")
            .to_layer();
        for (flag, shown) in shown_defaults() {
            let resolved = value_of(&defaults, &flag);
            if shown == "none" || shown == "off" {
                assert_eq!(resolved, None, "--{flag}: shown {shown}");
                continue;
            }
            // "17179869184 (16 GiB)": the value, then a reading aid.
            let value = shown.split(" (").next().unwrap_or(&shown);
            let var = env_var(&flag);
            let read = ConfigLayer::from_env(|name| (name == var).then(|| value.to_owned()));
            match read {
                Ok(layer) => {
                    assert!(!DERIVED.contains(&flag.as_str()), "--{flag}: {shown}");
                    assert_eq!(value_of(&layer, &flag), resolved, "--{flag}: shown {shown}");
                }
                Err(_) => assert!(DERIVED.contains(&flag.as_str()), "--{flag}: {shown}"),
            }
        }
    }

    /// docs/aesd.md's settings table names each setting's flag with the
    /// value name `--help` shows (`--listen ADDR`).
    #[test]
    fn the_settings_table_names_the_value_of_each_flag() {
        let docs = include_str!("../../../docs/aesd.md");
        let table = docs
            .split("## Settings\n")
            .nth(1)
            .expect("docs/aesd.md has the settings section");
        let command = ConfigLayer::augment_args(clap::Command::new("settings"));
        let mut seen = Vec::new();
        let rows = table
            .lines()
            .skip_while(|line| !line.starts_with('|'))
            .take_while(|line| line.starts_with('|'));
        for row in rows {
            let flag_cell = row.split('|').nth(1).unwrap_or_default();
            for flag in flag_cell
                .split('`')
                .filter_map(|part| part.strip_prefix("--"))
            {
                let (name, value) = flag.split_once(' ').unwrap_or((flag, ""));
                let Some(arg) = command
                    .get_arguments()
                    .find(|arg| arg.get_long() == Some(name))
                else {
                    continue;
                };
                let declared: Vec<String> = arg
                    .get_value_names()
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                assert_eq!(declared, [value], "docs/aesd.md row {row}");
                seen.push(name.to_owned());
            }
        }
        let mut flags = flags();
        flags.sort();
        seen.sort();
        assert_eq!(seen, flags, "a docs row for every setting");
    }
}
