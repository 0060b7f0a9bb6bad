//! Every setting of aesd declared once, in one table: its name (the
//! flag `--max-active`, the TOML key `max-active`, the variable
//! `AESD_MAX_ACTIVE`, the field `Config::max_active`), its type, the value
//! name and help of `--help`, its typed default and the values it allows.
//!
//! From the table come
//! - [`ConfigLayer`]: the settings of one source (flags, TOML, variables),
//!   each as written there (`Option<`[`SettingValue::Written`]`>`);
//! - [`Config`]: the typed settings, with the table's help as their docs;
//! - `Config::each_setting`: each setting from a layer or its default,
//!   read and checked on its own ([`Config::resolve`] adds the rules
//!   between settings, in config.rs);
//! - [`Config::to_layer`]: the reverse, for `--print-config`;
//! - [`shown_defaults`]: the default as users read it (`--help`,
//!   docs/aesd.md's table).
//! - [`ConfigError`]: why a source or a value was refused (config.rs
//!   re-exports it with the rest).
//!
//! A new setting is one entry here and a row in docs/aesd.md's table
//! (tests check the row); a new type of value also needs its
//! [`SettingValue`] impl (settings/value.rs), and a rule naming two
//! settings goes beside the others in `Config::resolve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use aesd_proto::limits::{DEFAULT_DATA_CHUNK, MAX_FRAME_PAYLOAD, MIN_DATA_CHUNK};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::backend::{AesBackend, DEFAULT_DEVICE_TREE};
use crate::client_id::DEFAULT_IPV6_PREFIX;
use crate::etcd::KeyringLocation;
use crate::metrics::temperature::TemperatureSource;
use crate::mlock::MlockMode;
use crate::proxy::{CidrList, TrustedProxies};
use crate::transit_seal::{DEFAULT_MOUNT_PATH, TransitAddress};

mod value;

pub use value::SettingValue;
use value::{at_least_one, at_most, within, within_unit};

/// A configuration source could not be read or a value is out of range.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or wrong types.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        message: String,
    },
    /// An environment variable has a value the setting does not accept.
    #[error("environment: {message}")]
    Environment {
        /// The parser's explanation (names the variable's flag).
        message: String,
    },
    /// A setting is outside its allowed range.
    #[error("setting `{key}`: {reason}")]
    Invalid {
        /// The setting's name (flag / TOML key).
        key: String,
        /// What is allowed.
        reason: String,
    },
}

/// Prefix of the environment variables that configure aesd.
pub const ENV_PREFIX: &str = "AESD_";

/// The environment variable of a setting: `AESD_` and its flag name in
/// upper case, `-` as `_` (`max-active` → `AESD_MAX_ACTIVE`).
pub fn env_var(flag: &str) -> String {
    format!("{ENV_PREFIX}{}", flag.to_uppercase().replace('-', "_"))
}

/// The flag name (without `--`; also the TOML key) of a field:
/// `max_active` → `max-active`.
fn flag(field: &str) -> String {
    field.replace('_', "-")
}

/// Declares the settings. Each entry:
///
/// ```text
/// /// help (--help, and the docs of the ConfigLayer and Config fields)
/// field: Type, "VALUE NAME", default EXPR [, shown TEXT] [, valid CHECK];
/// ```
///
/// - `Type` is the field's type in [`Config`]; its [`SettingValue`] impl
///   says how flags, TOML and variables write it.
/// - `default EXPR` is the typed value when no source gives one. It is
///   evaluated in the table's order and may use the settings above it by
///   their field names (`ACTIVE_PER_WORKER * workers`).
/// - `shown TEXT` is the default as `--help` and the docs show it, when
///   that is not simply the default as written (a rule such as "2 ×
///   workers", or "none"). An entry whose default uses other settings must
///   have one.
/// - `valid CHECK`: a function of `&Type` whose `Err` says what is allowed
///   (`within(1..=1024)`); applied to given and default values alike.
macro_rules! settings {
    ($(
        $(#[doc = $help:literal])*
        $field:ident: $ty:ty, $value_name:literal, default $default:expr
            $(, shown $shown:expr)?
            $(, valid $valid:expr)?;
    )*) => {
        /// Settings from one source; `None` where that source says nothing.
        #[derive(Debug, Clone, Default, PartialEq, Args, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        pub struct ConfigLayer {
            $(
                $(#[doc = $help])*
                #[arg(long, value_name = $value_name)]
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<<$ty as SettingValue>::Written>,
            )*
        }

        /// The effective, validated settings ([`Config::resolve`]).
        #[derive(Debug, Clone, PartialEq)]
        pub struct Config {
            $(
                $(#[doc = $help])*
                pub $field: $ty,
            )*
        }

        impl Config {
            /// Each setting from `layer`, or its default where `layer` has
            /// none, read and checked on its own, in the table's order.
            pub(crate) fn each_setting(layer: ConfigLayer) -> Result<Config, ConfigError> {
                $(
                    let $field: $ty = match layer.$field {
                        Some(written) => <$ty as SettingValue>::read(written),
                        None => Ok($default),
                    }
                    .map_err(invalid(stringify!($field)))?;
                    $( ($valid)(&$field).map_err(invalid(stringify!($field)))?; )?
                )*
                Ok(Config { $($field),* })
            }

            /// The settings as a complete layer, each as written (for
            /// `--print-config`; unset ones are left out).
            pub fn to_layer(&self) -> ConfigLayer {
                ConfigLayer {
                    $( $field: self.$field.write(), )*
                }
            }
        }

        /// Each setting's flag name (without `--`; also its TOML key) and
        /// its default as users read it: what `--help` appends as
        /// `[default: …]` and what docs/aesd.md's settings table says.
        pub fn shown_defaults() -> Vec<(String, String)> {
            vec![$(
                (flag(stringify!($field)), shown!($ty, $default, $($shown)?)),
            )*]
        }
    };
}

/// A default as users read it: the entry's `shown` text, else its typed
/// default as written ("none" when that is unset).
macro_rules! shown {
    ($ty:ty, $default:expr,) => {
        <$ty as SettingValue>::write(&$default)
            .map_or_else(|| "none".to_owned(), |written| written.to_string())
    };
    ($ty:ty, $default:expr, $shown:expr) => {
        $shown.to_string()
    };
}

/// The error of a setting whose value is not allowed.
fn invalid(field: &'static str) -> impl FnOnce(String) -> ConfigError {
    move |reason| ConfigError::Invalid {
        key: flag(field),
        reason,
    }
}

/// Active jobs per worker thread: the default `max-active` is this ×
/// `workers`.
const ACTIVE_PER_WORKER: usize = 2;

settings! {
    /// Address and port of the job port
    listen: SocketAddr, "ADDR", default SocketAddr::from(([0, 0, 0, 0], 7878));
    /// Worker threads for cryptographic work
    workers: usize, "N", default std::thread::available_parallelism().map_or(1, usize::from),
        shown "one per core", valid within(1..=1024);
    /// Jobs processed at once; more wait in the queue
    max_active: usize, "N", default ACTIVE_PER_WORKER * workers,
        shown format!("{ACTIVE_PER_WORKER} × workers"), valid within(1..=65_536);
    /// Jobs that may wait for a slot; past this, clients get a Busy error at
    /// once
    max_queue: usize, "N", default 64, valid at_most(1_000_000);
    /// Largest data frame payload accepted, in bytes (4096 to 1048576); per-job
    /// memory is a few of these. Clients send frames of this size: on a host
    /// serving large files 262144 costs the kernel far less per byte
    chunk_size: u32, "BYTES", default DEFAULT_DATA_CHUNK,
        valid within_unit(MIN_DATA_CHUNK..=MAX_FRAME_PAYLOAD, "bytes");
    /// Lowest PBKDF2 iteration count a job may ask for
    min_iter: u32, "N", default 1000;
    // 100 000: about a minute of one core on a 100 MHz VexRiscv.
    /// Highest PBKDF2 iteration count a job may ask for
    max_iter: u32, "N", default 100_000;
    /// Seconds a new connection has to send its hello
    handshake_timeout: Duration, "SECS", default Duration::from_secs(10);
    /// Seconds a connection may stay silent (or not read our output) before it
    /// is closed with a Timeout error
    idle_timeout: Duration, "SECS", default Duration::from_secs(60);
    /// Seconds in-flight jobs get to finish after SIGINT/SIGTERM before they
    /// are cut off with a ShuttingDown error
    shutdown_grace: Duration, "SECS", default Duration::from_secs(30);
    /// Connections open at once; past this a new connection gets a Busy error
    /// and is closed
    max_connections: usize, "N", default 1024;
    /// Connections open at once from one client (an IPv4 address or an
    /// IPv6 prefix, see client-ipv6-prefix)
    max_connections_per_client: usize, "N", default 64;
    /// Leading bits of an IPv6 address that identify one client for every
    /// per-client limit (0 to 128; IPv4 clients are their address)
    client_ipv6_prefix: u8, "BITS", default DEFAULT_IPV6_PREFIX,
        valid within_unit(0..=128, "bits");
    // All slots but one, and never more than an equal part of them among
    // the clients with jobs (see `admission`).
    /// Slots one client keeps while another client waits for one (its
    /// share is also at most an equal part of the slots). A client alone
    /// uses every slot; when another arrives it starts at once on a slot
    /// lent beyond max-active (the first client's jobs run on, but it
    /// starts no more until it is back within its share)
    max_active_per_client: usize, "N", default max_active.saturating_sub(1).max(1),
        shown "max-active − 1 (at least 1)", valid at_least_one;
    /// Jobs one client may have waiting in the queue; past this its jobs
    /// get a Busy error at once (the connection stays open)
    max_queued_per_client: usize, "N", default max_queue, shown "max-queue";
    // 1024 B/s: a trickle that holds a slot is cut, a slow link (a
    // 9600-baud modem is 960 B/s) is roughly the floor.
    /// Slowest input a running job may send, in bytes per second of the
    /// time the server waits for it (not while the server itself is
    /// busy); a slower job fails with a Timeout error and frees its slot.
    /// 0 turns the check off
    min_input_rate: u32, "BYTES", default 1024;
    /// Seconds of waiting for input over which min-input-rate is measured;
    /// the first window is a job's grace period
    input_rate_window: Duration, "SECS", default Duration::from_secs(10);
    // 100 000: one max-iter job, or ten jobs at openssl's 10 000.
    /// PBKDF2 iterations one client may make aesd run per minute (jobs
    /// with key source 1, where the client sends its password; an age
    /// encryption's X25519 counts as 113 iterations per recipient); a
    /// begin over the budget gets busy and is told when to retry. A job
    /// larger than the budget needs a full minute's worth. 0 turns it off
    kdf_budget: u64, "ITERATIONS", default 100_000;
    // 400 000: four clients' budgets.
    /// PBKDF2 iterations all clients together may make aesd run per
    /// minute (key source 1), beside each one's kdf-budget: many addresses
    /// cannot add up to every core. A begin over it gets busy. 0 turns it
    /// off
    kdf_budget_total: u64, "ITERATIONS", default 400_000;
    // 16 GiB: hours on a 100 MHz board.
    /// Largest input one job may send, in bytes; past this the job fails with
    /// limit_exceeded
    max_file_size: u64, "BYTES", default 16 << 30, shown "17179869184 (16 GiB)";
    /// Jobs one connection may run; then it is closed with job_limit
    max_jobs_per_connection: u64, "N", default 10_000;
    /// TLS on the job port: this PEM certificate chain (leaf first); needs
    /// --tls-key. Clients then connect with --tls or --tls-ca; a plain
    /// client gets tls_required
    tls_cert: Option<PathBuf>, "FILE", default None, shown "none";
    /// TLS on the job port: the PEM private key of --tls-cert
    tls_key: Option<PathBuf>, "FILE", default None, shown "none";
    // 600: ten a second on average, and a minute's worth at once (a host
    // opening a few hundred connections together). The board's
    // aesd.toml: 120.
    /// TLS handshakes one client may start per minute (a token bucket
    /// holding a minute's worth); a connection over it is closed before
    /// any cryptography and counted in
    /// aesd_connections_refused_total{reason="tls_handshake_rate"}. 0 turns
    /// it off
    tls_handshake_rate: u64, "HANDSHAKES", default 600;
    /// Require clients to send this access token before any job: the file's
    /// first line, 16 to 256 bytes (clients: --token-file)
    token_file: Option<PathBuf>, "FILE", default None, shown "none";
    /// Seconds a wrong or missing token waits before its unauthorized answer;
    /// doubles with each further failure from the same address within 10
    /// minutes, up to 32 times
    auth_failure_delay: Duration, "SECS", default Duration::from_secs(1);
    /// Address of the Prometheus /metrics endpoint, e.g. 0.0.0.0:9878
    metrics_listen: Option<SocketAddr>, "ADDR", default None, shown "off";
    /// Networks that may scrape the metrics (CIDR[,CIDR...]); a connection
    /// from any other address is closed before its request is read and
    /// counted in aesd_connections_refused_total{reason="metrics_not_allowed"}.
    /// 0.0.0.0/0,::/0 allows every address
    metrics_allow: CidrList, "CIDR,...", default local_networks(), valid some_network;
    /// Board temperature for the metrics: auto (first hwmon sensor, if any),
    /// off, hwmon:PATH (a temp*_input file) or xadc:0xADDR (LiteX XADC
    /// temperature CSR via /dev/mem, from csr.json)
    temperature: TemperatureSource, "SOURCE", default TemperatureSource::Auto;
    /// AES implementation: auto (VexRiscv's AES instruction when the device
    /// tree marks the CPUs with it and its self-test passes, else Zkne/Zknd
    /// when the device tree's ISA or riscv_hwprobe lists them and their
    /// self-test passes, else software), software (the CPU's AES
    /// instructions if any, else aesd's fixsliced AES), vexriscv (the
    /// AesPlugin instruction, custom-0, or exit 2) or zkne (the ratified
    /// scalar AES instructions, or exit 2)
    aes_backend: AesBackend, "BACKEND", default AesBackend::Auto;
    /// Device tree that `aes-backend = auto` reads the CPUs' features from
    /// (`litex,aes-instruction`, `riscv,isa`, `riscv,isa-extensions`)
    device_tree: PathBuf, "DIR", default PathBuf::from(DEFAULT_DEVICE_TREE),
        shown DEFAULT_DEVICE_TREE;
    /// Load balancers (IP networks, CIDR[,CIDR...], e.g. 10.0.0.5/32) whose
    /// connections must start with a PROXY protocol header (v1 or v2); the
    /// client address it carries then keys the per-address limits and the log.
    /// A PROXY header from any other address is refused
    trusted_proxies: TrustedProxies, "CIDR,...", default TrustedProxies::default();
    /// Address of the HTTP API (OpenBao's sys/, auth/token/ and
    /// transit/keys/ endpoints, for the bao CLI, and Transit's encrypt,
    /// decrypt, rewrap, datakey and random), e.g. 127.0.0.1:8200.
    /// HTTPS with the job port's certificate when tls-cert and tls-key
    /// are set (clients: BAO_CACERT), plain HTTP otherwise
    http_listen: Option<SocketAddr>, "ADDR", default None, shown "off";
    /// Largest HTTP request body, in bytes (OpenBao's max_request_size);
    /// a larger one gets 413
    http_max_request_size: u64, "BYTES", default 32 << 20, shown "33554432 (32 MiB)",
        valid within_unit(1..=u64::MAX, "bytes");
    /// Seconds an HTTP request's header has to arrive in full; a slower one
    /// has its connection closed
    http_header_timeout: Duration, "SECS", default Duration::from_secs(10);
    /// Seconds an HTTP request's body has to arrive in full once its
    /// header has (OpenBao's http_read_timeout); a slower one gets 408 and
    /// its connection is closed
    http_body_timeout: Duration, "SECS", default Duration::from_secs(30);
    /// Audit log: a request line and a response line (JSON) for every HTTP
    /// API request and every by-name job of the job port (key source 5:
    /// the token's accessor, key, version, operation, bytes in and out,
    /// result), every string of HTTP bodies (plaintexts, ciphertexts, data
    /// keys, tokens, shares) as hmac-sha256:HEX under a salt kept in the
    /// sealed keyring (POST sys/audit-hash/file with input=VALUE computes
    /// it). Tamper-evident: each line ends with a "chain" HMAC linking it
    /// to the line before (`aesd verify-audit FILE...` checks it). Appended,
    /// mode 0600, reopened when renamed (logrotate needs no signal). A line
    /// that cannot be written refuses the request with 500 and the by-name
    /// job with audit_failed. A path only ("-" is a file named "-")
    audit_log: Option<PathBuf>, "FILE", default None, shown "off";
    /// Size bound of the audit log: a line that would take FILE past this
    /// many bytes goes to a fresh FILE after FILE.1 ... are shifted up
    /// (FILE becomes FILE.1); the chain continues across files. 0: no
    /// bound (rotate with logrotate instead)
    audit_log_max_bytes: u64, "BYTES", default 0, shown "0 (no bound)";
    /// Rotated audit log files kept with --audit-log-max-bytes (FILE.1 ...
    /// FILE.N); the oldest is dropped
    audit_log_keep: u32, "N", default 5, valid within_unit(1..=1000, "files");
    /// Where the sealed keyring (named keys, policies, tokens) is kept: a
    /// directory, or etcd://HOST:PORT[,HOST:PORT...]/PREFIX for a fleet
    /// sharing one keyring (every board reads and writes it there and
    /// watches it: docs/fleet.md). aesd starts sealed: `bao operator init`
    /// once, then `bao operator unseal` with the shares after each start
    /// (or --seal-transit-address: unsealed by another server).
    /// The job port's by-name jobs (key source 5, aescrypt --key) use it:
    /// refused `sealed` until unsealed; `unknown_key`,
    /// `key_version_retired`, `key_version_not_created`,
    /// `permission_denied`, `bad_key_token`, `audit_failed` (PROTOCOL.md,
    /// By name)
    keyring: Option<KeyringLocation>, "LOCATION", default None, shown "none";
    /// Auto-unseal from another server's Transit key (OpenBao's transit
    /// seal, `address`): http(s)://HOST[:PORT] of another aesd's (or
    /// OpenBao's) HTTP API. `sys/init` has it encrypt the root key
    /// (recovery shares instead of unseal shares) and aesd unseals itself
    /// at start; while that server is sealed or unreachable aesd stays
    /// sealed and retries (0.5 s doubling to 10 s). The root key crosses
    /// that connection: https:// (with --seal-transit-ca-cert), or plain
    /// http:// on loopback or a trusted network. Needs --keyring,
    /// --seal-transit-key-name and --seal-transit-token-file
    seal_transit_address: Option<TransitAddress>, "URL", default None, shown "off";
    /// The transit seal's key name on that server (OpenBao's `key_name`)
    seal_transit_key_name: Option<String>, "NAME", default None, shown "none";
    /// The transit seal's mount path on that server (OpenBao's `mount_path`)
    seal_transit_mount_path: String, "PATH", default DEFAULT_MOUNT_PATH.to_owned(),
        shown DEFAULT_MOUNT_PATH;
    /// File whose first line is the transit seal's token (OpenBao's
    /// `token`): it needs update on MOUNT/encrypt/NAME and
    /// MOUNT/decrypt/NAME
    seal_transit_token_file: Option<PathBuf>, "FILE", default None, shown "none";
    /// The transit seal server's CA certificate (PEM; its own self-signed
    /// certificate will do), checking an https:// --seal-transit-address
    /// (OpenBao's `tls_ca_cert`); required for https://, refused with
    /// http://
    seal_transit_ca_cert: Option<PathBuf>, "FILE", default None, shown "none";
    /// With --keyring etcd://...: the CA certificate (PEM) of etcd's
    /// client port; TLS is on when it is given
    etcd_cacert: Option<PathBuf>, "FILE", default None, shown "none";
    /// With --etcd-cacert: this board's client certificate (PEM), for
    /// etcd's --client-cert-auth
    etcd_cert: Option<PathBuf>, "FILE", default None, shown "none";
    /// The key (PEM) of --etcd-cert
    etcd_key: Option<PathBuf>, "FILE", default None, shown "none";
    /// Lock aesd's memory (mlockall) while it holds a keyring (--keyring,
    /// --dev, --http-listen), so no key is swapped out: auto (when
    /// RLIMIT_MEMLOCK is unlimited or aesd has CAP_IPC_LOCK; else a
    /// warning), on (or exit 1), off
    mlock: MlockMode, "MODE", default MlockMode::Auto;
    /// Log filter, tracing syntax (error, warn, info, debug, trace, or
    /// per-module like "aesd_server=debug")
    log: String, "FILTER", default "info".to_owned(), valid log_filter;
}

/// The default `metrics-allow`: loopback, the private IPv4 networks (RFC
/// 1918), IPv4 link-local, IPv6 unique local and link-local addresses. A
/// management network is one of these; the internet is not.
fn local_networks() -> CidrList {
    "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,::1/128,fc00::/7,fe80::/10"
        .parse()
        .expect("the local networks are valid CIDRs")
}

/// `metrics-allow` names at least one network: with none, nobody could
/// scrape the metrics.
fn some_network(networks: &CidrList) -> Result<(), String> {
    if networks.is_empty() {
        return Err(
            "no network given: nobody could scrape the metrics (0.0.0.0/0,::/0 allows every address)"
                .to_owned(),
        );
    }
    Ok(())
}

/// `log` is a filter tracing understands.
fn log_filter(filter: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(drop)
        .map_err(|err| format!("not a valid filter: {err}"))
}

/// The shown default of one flag (without `--`); the command line writes
/// them all out once instead ([`crate::config::Cli::command_with_defaults`]).
#[cfg(test)]
pub fn shown_for(flag: &str) -> Option<String> {
    shown_defaults()
        .into_iter()
        .find(|(name, _)| name == flag)
        .map(|(_, text)| text)
}

#[cfg(test)]
mod tests;
