//! Configuration: command-line flags, an optional TOML file and `AESD_*`
//! environment variables, in that order of precedence, over defaults.
//!
//! One type, [`ConfigLayer`] (made from the table in `settings.rs`),
//! holds every setting from one source: clap reads it from the command
//! line and from the environment (each variable is fed through the same
//! parser, so both accept the same syntax), serde reads it from TOML
//! (keys are the flag names). [`Config::resolve`] merges the
//! layers, fills defaults and validates the result.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser};

use aesd_proto::limits::MAX_FRAME_PAYLOAD;

use aesd_proto::secret_file::permission_warning;

use crate::auth::AccessToken;
use crate::backend::AesBackend;
use crate::defaults;
use crate::metrics::temperature::TemperatureSource;
use crate::proxy::{CidrError, CidrList, TrustedProxies};
use crate::tls::TlsIdentity;

/// Smallest data chunk the server can be configured to accept (the
/// protocol's floor, which clients check in the welcome).
pub const MIN_CHUNK_SIZE: u32 = aesd_proto::limits::MIN_DATA_CHUNK;
pub use crate::settings::{ConfigLayer, ENV_PREFIX, env_var};

/// The `aesd` command line.
#[derive(Debug, Parser)]
#[command(
    name = "aesd",
    version,
    about = "Streaming AES-256-CBC encryption server, byte-compatible with `openssl enc -aes-256-cbc -salt -pbkdf2`",
    after_help = ENV_HELP
)]
pub struct Cli {
    /// Settings (each also from the TOML file and the environment).
    #[command(flatten)]
    pub settings: ConfigLayer,

    /// TOML file with settings (keys are the flag names, e.g.
    /// `max-active = 8`); flags override it, it overrides the environment
    #[arg(long, value_name = "FILE", env = "AESD_CONFIG")]
    pub config: Option<PathBuf>,

    /// Validate FILE (with defaults for what it leaves out), print the
    /// effective settings and exit: 0 when valid, 2 when not
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,

    /// Print the effective settings as TOML and exit
    #[arg(long)]
    pub print_config: bool,

    /// Make a TLS key and a self-signed certificate for this machine's
    /// names and addresses in DIR (aesd-key.pem, mode 600, and
    /// aesd-cert.pem; never over existing files), print the pin clients
    /// pass with --tls-pin, and exit
    #[arg(long, value_name = "DIR")]
    pub tls_self_signed: Option<PathBuf>,

    /// Once listening, write the process id to FILE (atomically); removed
    /// at a normal exit. Init scripts wait for it (S50aesd). Under systemd,
    /// `Type=notify` works without it (NOTIFY_SOCKET)
    #[arg(long, value_name = "FILE", env = "AESD_PID_FILE")]
    pub pid_file: Option<PathBuf>,

    /// Print a man page or a shell completion script, made from these
    /// definitions, and exit
    #[arg(long, value_name = "KIND", exclusive = true,
          value_parser = ["man", "complete-bash", "complete-zsh", "complete-fish"])]
    pub generate: Option<String>,
}

impl Cli {
    /// The command line with each setting's default appended to its help
    /// (`[default: …]`, from [`defaults::shown`]).
    pub fn command_with_defaults() -> clap::Command {
        Cli::command().mut_args(|arg| {
            let shown = arg.get_long().and_then(defaults::shown_for);
            match (shown, arg.get_help().map(ToString::to_string)) {
                (Some(shown), Some(help)) => arg.help(format!("{help} [default: {shown}]")),
                _ => arg,
            }
        })
    }

    /// Parses the process's arguments (exits with clap's message and
    /// status 2 on a bad command line, like [`Parser::parse`]).
    pub fn parse_with_defaults() -> Cli {
        let matches = Cli::command_with_defaults().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
    }
}

const ENV_HELP: &str = "\
Environment: every setting can also come from AESD_<FLAG> (upper case, '-' as '_'), \
e.g. AESD_LISTEN=127.0.0.1:7878, AESD_WORKERS=2, AESD_MAX_ACTIVE=4; the file from AESD_CONFIG. \
Precedence: flags, then the --config file, then the environment, then defaults.

Limits: data chunks up to 1 MiB (--chunk-size), passwords up to 1024 bytes, \
access tokens 16 to 256 bytes, PBKDF2 iterations within --min-iter..--max-iter.";

/// The effective, validated settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Job port address.
    pub listen: SocketAddr,
    /// Worker threads.
    pub workers: usize,
    /// Jobs processed at once.
    pub max_active: usize,
    /// Jobs that may wait.
    pub max_queue: usize,
    /// Largest data payload accepted.
    pub chunk_size: u32,
    /// Lowest PBKDF2 iteration count accepted.
    pub min_iterations: u32,
    /// Highest PBKDF2 iteration count accepted.
    pub max_iterations: u32,
    /// Time allowed for the hello.
    pub handshake_timeout: Duration,
    /// Time a connection may stay silent.
    pub idle_timeout: Duration,
    /// Time in-flight jobs get after a shutdown signal.
    pub shutdown_grace: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_client: usize,
    /// IPv6 prefix length that identifies one client.
    pub client_ipv6_prefix: u8,
    /// Slots one client keeps while another client waits.
    pub max_active_per_client: usize,
    /// Jobs one client may have waiting.
    pub max_queued_per_client: usize,
    /// Slowest input a running job may send, bytes/s (0: no minimum).
    pub min_input_rate: u32,
    /// Waiting time over which the input rate is measured.
    pub input_rate_window: Duration,
    /// PBKDF2 iterations per client and minute (0: no budget).
    pub kdf_budget: u64,
    /// PBKDF2 iterations per minute for all clients together (0: off).
    pub kdf_budget_total: u64,
    /// Largest input of one job, in bytes.
    pub max_file_size: u64,
    /// Jobs per connection.
    pub max_jobs_per_connection: u64,
    /// The file holding the access token clients must send, if any (read
    /// by [`Config::load_secrets`]).
    pub token_file: Option<PathBuf>,
    /// The certificate chain and key of the job port's TLS, if any (read
    /// by [`Config::load_secrets`]).
    pub tls_files: Option<TlsFiles>,
    /// TLS handshakes per client and minute (0: no limit).
    pub tls_handshake_rate: u64,
    /// First delay before answering a failed authentication.
    pub auth_failure_delay: Duration,
    /// Peers that must send a PROXY header (empty: none).
    pub trusted_proxies: TrustedProxies,
    /// Log filter.
    pub log: String,
    /// Address of the metrics endpoint, if any.
    pub metrics_listen: Option<SocketAddr>,
    /// Who may scrape the metrics.
    pub metrics_allow: CidrList,
    /// Where the board temperature comes from.
    pub temperature: TemperatureSource,
    /// Which AES implementation to use.
    pub aes_backend: AesBackend,
    /// Where `aes-backend = auto` reads the device tree.
    pub device_tree: PathBuf,
}

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
        key: &'static str,
        /// What is allowed.
        reason: String,
    },
}

impl ConfigLayer {
    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|err| ConfigError::Parse {
            path: path.to_owned(),
            message: err.to_string(),
        })
    }

    /// Reads `AESD_*` variables through `lookup` (normally
    /// `std::env::var`), parsing each as its flag would be parsed.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let command = ConfigLayer::augment_args(clap::Command::new("environment"));
        let mut argv = vec!["environment".to_owned()];
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if let Some(value) = lookup(&env_var(long)) {
                argv.push(format!("--{long}={value}"));
            }
        }
        let matches =
            command
                .try_get_matches_from(argv)
                .map_err(|err| ConfigError::Environment {
                    message: err
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                })?;
        ConfigLayer::from_arg_matches(&matches).map_err(|err| ConfigError::Environment {
            message: err.to_string(),
        })
    }

    /// This layer, with settings it lacks taken from `lower`.
    pub fn over(self, lower: ConfigLayer) -> ConfigLayer {
        let mut merged = toml::Table::try_from(&lower).unwrap_or_default();
        if let Ok(upper) = toml::Table::try_from(&self) {
            merged.extend(upper);
        }
        merged.try_into().unwrap_or(self)
    }

    /// The layer as TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

/// The files of the job port's TLS identity (`tls-cert`, `tls-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

/// What the settings' files hold, read after the settings were resolved
/// ([`Config::load_secrets`]): the TLS identity and the access token.
#[derive(Clone, Default)]
pub struct Secrets {
    pub(crate) tls: Option<TlsIdentity>,
    pub(crate) access_token: Option<AccessToken>,
}

impl std::fmt::Debug for Secrets {
    /// Which secrets are present, never their bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("tls", &self.tls.is_some())
            .field("access_token", &self.access_token.is_some())
            .finish()
    }
}

impl Config {
    /// Reads the files the settings name (`tls-cert` and `tls-key`,
    /// `token-file`): the resolution checked the settings alone, this
    /// step reads the secrets. An error names the setting whose file
    /// could not be used.
    pub fn load_secrets(&self) -> Result<Secrets, ConfigError> {
        let tls = match &self.tls_files {
            Some(files) => Some(TlsIdentity::load(&files.cert, &files.key).map_err(|err| {
                ConfigError::Invalid {
                    key: "tls-cert",
                    reason: err.to_string(),
                }
            })?),
            None => None,
        };
        let access_token = match &self.token_file {
            Some(path) => {
                Some(
                    AccessToken::from_file(path).map_err(|err| ConfigError::Invalid {
                        key: "token-file",
                        reason: err.to_string(),
                    })?,
                )
            }
            None => None,
        };
        Ok(Secrets { tls, access_token })
    }

    /// Merges flags, the config file (from `--config` or `AESD_CONFIG`)
    /// and the environment, and validates the result.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        let file = match &cli.config {
            Some(path) => ConfigLayer::from_file(path)?,
            None => ConfigLayer::default(),
        };
        let env = ConfigLayer::from_env(|name| std::env::var(name).ok())?;
        Config::resolve(cli.settings.clone().over(file).over(env))
    }

    /// Fills defaults into a merged layer and checks every range.
    pub fn resolve(layer: ConfigLayer) -> Result<Config, ConfigError> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers = layer.workers.unwrap_or(cores);
        let max_active = layer
            .max_active
            .unwrap_or(defaults::ACTIVE_PER_WORKER * workers);
        let max_queue = layer.max_queue.unwrap_or(defaults::MAX_QUEUE);
        let config = Config {
            listen: layer
                .listen
                .unwrap_or_else(|| defaults::LISTEN.parse().expect("valid default address")),
            workers,
            max_active,
            max_queue,
            chunk_size: layer.chunk_size.unwrap_or(defaults::CHUNK_SIZE),
            min_iterations: layer.min_iter.unwrap_or(defaults::MIN_ITER),
            max_iterations: layer.max_iter.unwrap_or(defaults::MAX_ITER),
            handshake_timeout: seconds(
                "handshake-timeout",
                layer.handshake_timeout,
                defaults::HANDSHAKE_TIMEOUT_SECS,
            )?,
            idle_timeout: seconds(
                "idle-timeout",
                layer.idle_timeout,
                defaults::IDLE_TIMEOUT_SECS,
            )?,
            shutdown_grace: seconds(
                "shutdown-grace",
                layer.shutdown_grace,
                defaults::SHUTDOWN_GRACE_SECS,
            )?,
            max_connections: layer.max_connections.unwrap_or(defaults::MAX_CONNECTIONS),
            max_connections_per_client: layer
                .max_connections_per_client
                .unwrap_or(defaults::MAX_CONNECTIONS_PER_CLIENT),
            client_ipv6_prefix: layer
                .client_ipv6_prefix
                .unwrap_or(defaults::CLIENT_IPV6_PREFIX),
            max_active_per_client: layer
                .max_active_per_client
                .unwrap_or_else(|| defaults::max_active_per_client(max_active)),
            max_queued_per_client: layer.max_queued_per_client.unwrap_or(max_queue),
            min_input_rate: layer.min_input_rate.unwrap_or(defaults::MIN_INPUT_RATE),
            input_rate_window: seconds(
                "input-rate-window",
                layer.input_rate_window,
                defaults::INPUT_RATE_WINDOW_SECS,
            )?,
            kdf_budget: layer.kdf_budget.unwrap_or(defaults::KDF_BUDGET),
            kdf_budget_total: layer.kdf_budget_total.unwrap_or(defaults::KDF_BUDGET_TOTAL),
            max_file_size: layer.max_file_size.unwrap_or(defaults::MAX_FILE_SIZE),
            max_jobs_per_connection: layer
                .max_jobs_per_connection
                .unwrap_or(defaults::MAX_JOBS_PER_CONNECTION),
            tls_files: match (&layer.tls_cert, &layer.tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(ConfigError::Invalid {
                        key: "tls-key",
                        reason: "--tls-cert needs --tls-key (the certificate's private key)".into(),
                    });
                }
                (None, Some(_)) => {
                    return Err(ConfigError::Invalid {
                        key: "tls-cert",
                        reason: "--tls-key needs --tls-cert (the certificate chain)".into(),
                    });
                }
            },
            tls_handshake_rate: layer
                .tls_handshake_rate
                .unwrap_or(defaults::TLS_HANDSHAKE_RATE),
            token_file: layer.token_file.clone(),
            auth_failure_delay: seconds(
                "auth-failure-delay",
                layer.auth_failure_delay,
                defaults::AUTH_FAILURE_DELAY_SECS,
            )?,
            trusted_proxies: layer
                .trusted_proxies
                .as_deref()
                .unwrap_or_default()
                .parse()
                .map_err(|err: CidrError| ConfigError::Invalid {
                    key: "trusted-proxies",
                    reason: err.to_string(),
                })?,
            log: layer.log.unwrap_or_else(|| defaults::LOG.to_owned()),
            metrics_listen: layer.metrics_listen,
            metrics_allow: metrics_allow(layer.metrics_allow.as_deref())?,
            temperature: match layer
                .temperature
                .as_deref()
                .unwrap_or(defaults::TEMPERATURE)
                .parse()
            {
                Ok(source) => source,
                Err(err) => {
                    return Err(ConfigError::Invalid {
                        key: "temperature",
                        reason: err.to_string(),
                    });
                }
            },
            aes_backend: layer
                .aes_backend
                .as_deref()
                .unwrap_or(defaults::AES_BACKEND)
                .parse()
                .map_err(|reason| ConfigError::Invalid {
                    key: "aes-backend",
                    reason,
                })?,
            device_tree: layer
                .device_tree
                .unwrap_or_else(|| PathBuf::from(defaults::DEVICE_TREE)),
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: String| Err(ConfigError::Invalid { key, reason });
        if !(1..=1024).contains(&self.workers) {
            return invalid(
                "workers",
                format!("must be 1 to 1024, got {}", self.workers),
            );
        }
        if !(1..=65_536).contains(&self.max_active) {
            return invalid(
                "max-active",
                format!("must be 1 to 65536, got {}", self.max_active),
            );
        }
        if self.max_connections == 0 || self.max_connections_per_client == 0 {
            return invalid(
                "max-connections",
                "max-connections and max-connections-per-client must be at least 1".into(),
            );
        }
        if self.client_ipv6_prefix > 128 {
            return invalid(
                "client-ipv6-prefix",
                format!("must be 0 to 128 bits, got {}", self.client_ipv6_prefix),
            );
        }
        if self.max_active_per_client == 0 {
            return invalid("max-active-per-client", "must be at least 1".into());
        }
        if self.max_file_size == 0 || self.max_jobs_per_connection == 0 {
            return invalid(
                "max-file-size",
                "max-file-size and max-jobs-per-connection must be at least 1".into(),
            );
        }
        if self.max_queue > 1_000_000 {
            return invalid(
                "max-queue",
                format!("must be at most 1000000, got {}", self.max_queue),
            );
        }
        if !(MIN_CHUNK_SIZE..=MAX_FRAME_PAYLOAD).contains(&self.chunk_size) {
            return invalid(
                "chunk-size",
                format!(
                    "must be {MIN_CHUNK_SIZE} to {MAX_FRAME_PAYLOAD} bytes, got {}",
                    self.chunk_size
                ),
            );
        }
        if self.min_iterations == 0 || self.min_iterations > self.max_iterations {
            return invalid(
                "min-iter",
                format!(
                    "must be at least 1 and at most max-iter ({}), got {}",
                    self.max_iterations, self.min_iterations
                ),
            );
        }
        if let Err(err) = tracing_subscriber::EnvFilter::try_new(&self.log) {
            return invalid("log", format!("not a valid filter: {err}"));
        }
        Ok(())
    }

    /// Warnings about settings that work but are unsafe: a token file or
    /// TLS key file that other users can read, trusted proxies that cover
    /// a whole address family.
    pub fn warnings(&self) -> Vec<String> {
        let token = self
            .token_file
            .iter()
            .filter_map(|path| permission_warning(path, "access token"));
        let tls_key = self
            .tls_files
            .iter()
            .filter_map(|tls| permission_warning(&tls.key, "TLS key"));
        token
            .chain(tls_key)
            .chain(self.trusted_proxies.warnings())
            .collect()
    }

    /// The settings as a complete TOML layer (for `--print-config`).
    pub fn to_layer(&self) -> ConfigLayer {
        ConfigLayer {
            listen: Some(self.listen),
            workers: Some(self.workers),
            max_active: Some(self.max_active),
            max_queue: Some(self.max_queue),
            chunk_size: Some(self.chunk_size),
            min_iter: Some(self.min_iterations),
            max_iter: Some(self.max_iterations),
            handshake_timeout: Some(self.handshake_timeout.as_secs_f64()),
            idle_timeout: Some(self.idle_timeout.as_secs_f64()),
            shutdown_grace: Some(self.shutdown_grace.as_secs_f64()),
            max_connections: Some(self.max_connections),
            max_connections_per_client: Some(self.max_connections_per_client),
            client_ipv6_prefix: Some(self.client_ipv6_prefix),
            max_active_per_client: Some(self.max_active_per_client),
            max_queued_per_client: Some(self.max_queued_per_client),
            min_input_rate: Some(self.min_input_rate),
            input_rate_window: Some(self.input_rate_window.as_secs_f64()),
            kdf_budget: Some(self.kdf_budget),
            kdf_budget_total: Some(self.kdf_budget_total),
            max_file_size: Some(self.max_file_size),
            max_jobs_per_connection: Some(self.max_jobs_per_connection),
            tls_cert: self.tls_files.as_ref().map(|tls| tls.cert.clone()),
            tls_key: self.tls_files.as_ref().map(|tls| tls.key.clone()),
            tls_handshake_rate: Some(self.tls_handshake_rate),
            token_file: self.token_file.clone(),
            auth_failure_delay: Some(self.auth_failure_delay.as_secs_f64()),
            trusted_proxies: (!self.trusted_proxies.is_empty())
                .then(|| self.trusted_proxies.to_string()),
            log: Some(self.log.clone()),
            metrics_listen: self.metrics_listen,
            metrics_allow: Some(self.metrics_allow.to_string()),
            temperature: Some(match &self.temperature {
                TemperatureSource::Auto => "auto".to_owned(),
                TemperatureSource::Off => "off".to_owned(),
                TemperatureSource::Hwmon(path) => format!("hwmon:{}", path.display()),
                TemperatureSource::Xadc(addr) => format!("xadc:{addr:#x}"),
            }),
            aes_backend: Some(self.aes_backend.name().to_owned()),
            device_tree: Some(self.device_tree.clone()),
        }
    }
}

/// The `metrics-allow` networks (the default when unset); an empty list
/// is refused: no scraper could reach the endpoint.
fn metrics_allow(value: Option<&str>) -> Result<CidrList, ConfigError> {
    let invalid = |reason| ConfigError::Invalid {
        key: "metrics-allow",
        reason,
    };
    let networks: CidrList = value
        .unwrap_or(defaults::METRICS_ALLOW)
        .parse()
        .map_err(|err: CidrError| invalid(err.to_string()))?;
    if networks.is_empty() {
        return Err(invalid(
            "no network given: nobody could scrape the metrics (0.0.0.0/0,::/0 allows every address)"
                .into(),
        ));
    }
    Ok(networks)
}

fn seconds(key: &'static str, value: Option<f64>, default: f64) -> Result<Duration, ConfigError> {
    let secs = value.unwrap_or(default);
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(ConfigError::Invalid {
            key,
            reason: format!("must be more than 0 and at most 86400 seconds, got {secs}"),
        });
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_beat_file_beat_environment() {
        let flags = Cli::try_parse_from(["aesd", "--workers", "3"])
            .expect("flags")
            .settings;
        let file: ConfigLayer =
            toml::from_str("workers = 5\nmax-active = 7\nmax-queue = 9").expect("toml");
        let environment = ConfigLayer::from_env(env(&[
            ("AESD_WORKERS", "8"),
            ("AESD_MAX_ACTIVE", "8"),
            ("AESD_CHUNK_SIZE", "8192"),
        ]))
        .expect("env");
        let config = Config::resolve(flags.over(file).over(environment)).expect("valid");
        assert_eq!(config.workers, 3);
        assert_eq!(config.max_active, 7);
        assert_eq!(config.max_queue, 9);
        assert_eq!(config.chunk_size, 8192);
    }

    #[test]
    fn defaults_follow_the_worker_count() {
        let config = Config::resolve(ConfigLayer {
            workers: Some(3),
            ..ConfigLayer::default()
        })
        .expect("valid");
        assert_eq!(config.max_active, 6);
        assert_eq!(config.max_active_per_client, 5, "all slots but one");
        assert_eq!(config.max_queued_per_client, config.max_queue);
        assert_eq!(config.listen.port(), 7878);
        let config = Config::resolve(ConfigLayer {
            max_active: Some(5),
            ..ConfigLayer::default()
        })
        .expect("valid");
        assert_eq!(config.max_active_per_client, 4, "all slots but one");
        let config = Config::resolve(ConfigLayer {
            max_active: Some(1),
            ..ConfigLayer::default()
        })
        .expect("valid");
        assert_eq!(config.max_active_per_client, 1);
    }

    #[test]
    fn bad_values_are_named() {
        let err = ConfigLayer::from_env(env(&[("AESD_WORKERS", "many")])).unwrap_err();
        assert!(err.to_string().contains("workers"), "{err}");
        let err = Config::resolve(ConfigLayer {
            chunk_size: Some(10),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "chunk-size",
                ..
            }
        ));
        let err = Config::resolve(ConfigLayer {
            idle_timeout: Some(-1.0),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "idle-timeout",
                ..
            }
        ));
        let err = Config::resolve(ConfigLayer {
            temperature: Some("thermal".into()),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "temperature",
                ..
            }
        ));
        let err: Result<ConfigLayer, _> = toml::from_str("wrokers = 2");
        assert!(err.is_err(), "unknown keys are refused");
    }

    #[test]
    fn trusted_proxies_from_flag_file_and_environment() {
        let flags = Cli::try_parse_from(["aesd", "--trusted-proxies", "127.0.0.1/32,10.0.0.0/8"])
            .expect("flags")
            .settings;
        let config = Config::resolve(flags).expect("valid");
        assert!(
            config
                .trusted_proxies
                .contains("10.9.8.7".parse().expect("ip"))
        );
        assert!(
            !config
                .trusted_proxies
                .contains("127.0.0.2".parse().expect("ip"))
        );
        let file: ConfigLayer =
            toml::from_str("trusted-proxies = \"192.168.1.0/24\"").expect("toml");
        let environment =
            ConfigLayer::from_env(env(&[("AESD_TRUSTED_PROXIES", "fd00::/8")])).expect("env");
        let config = Config::resolve(file.clone().over(environment.clone())).expect("valid");
        assert_eq!(config.trusted_proxies.to_string(), "192.168.1.0/24");
        let config = Config::resolve(environment).expect("valid");
        assert_eq!(config.trusted_proxies.to_string(), "fd00::/8");
        let printed = config.to_layer().to_toml();
        assert!(
            printed.contains("trusted-proxies = \"fd00::/8\""),
            "{printed}"
        );
        let err = Config::resolve(ConfigLayer {
            trusted_proxies: Some("10.0.0.1/8".into()),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "trusted-proxies",
                ..
            }
        ));
        assert!(
            Config::resolve(ConfigLayer::default())
                .expect("valid")
                .trusted_proxies
                .is_empty()
        );
    }

    #[test]
    fn metrics_allow_defaults_to_local_networks_and_cannot_be_empty() {
        let config = Config::resolve(ConfigLayer::default()).expect("valid");
        for local in [
            "127.0.0.1",
            "10.1.2.3",
            "172.31.0.1",
            "192.168.1.9",
            "169.254.3.4",
        ] {
            let ip = local.parse().expect("ip");
            assert!(config.metrics_allow.contains(ip), "{local}");
        }
        for local in ["::1", "fd12::1", "fe80::1", "::ffff:192.168.0.7"] {
            let ip = local.parse().expect("ip");
            assert!(config.metrics_allow.contains(ip), "{local}");
        }
        for remote in ["8.8.8.8", "172.32.0.1", "100.64.0.1", "2001:db8::1"] {
            let ip = remote.parse().expect("ip");
            assert!(!config.metrics_allow.contains(ip), "{remote}");
        }
        let environment =
            ConfigLayer::from_env(env(&[("AESD_METRICS_ALLOW", "192.0.2.0/24")])).expect("env");
        let config = Config::resolve(environment).expect("valid");
        assert!(
            config
                .metrics_allow
                .contains("192.0.2.9".parse().expect("ip"))
        );
        assert!(
            !config
                .metrics_allow
                .contains("127.0.0.1".parse().expect("ip"))
        );
        for bad in ["", " , ", "10.0.0.1/8"] {
            let err = Config::resolve(ConfigLayer {
                metrics_allow: Some(bad.into()),
                ..ConfigLayer::default()
            })
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::Invalid {
                        key: "metrics-allow",
                        ..
                    }
                ),
                "{bad:?}: {err}"
            );
        }
    }

    /// Resolving the settings reads no file: missing TLS and token files
    /// are met only when the secrets are loaded, each named by its setting.
    #[test]
    fn files_are_read_after_resolution() {
        let missing = std::env::temp_dir().join("aesd-config-test-no-such-file");
        let config = Config::resolve(ConfigLayer {
            tls_cert: Some(missing.clone()),
            tls_key: Some(missing.clone()),
            ..ConfigLayer::default()
        })
        .expect("the settings alone are valid");
        assert_eq!(
            config.to_layer().tls_cert.as_deref(),
            Some(missing.as_path())
        );
        let err = config.load_secrets().expect_err("no such file");
        assert!(err.to_string().contains("tls-cert"), "{err}");
        let config = Config::resolve(ConfigLayer {
            token_file: Some(missing),
            ..ConfigLayer::default()
        })
        .expect("the settings alone are valid");
        let err = config.load_secrets().expect_err("no such file");
        assert!(err.to_string().contains("token-file"), "{err}");
        let plain = Config::resolve(ConfigLayer::default()).expect("defaults");
        let secrets = plain.load_secrets().expect("nothing to read");
        assert!(format!("{secrets:?}").contains("tls: false"), "{secrets:?}");
    }

    #[test]
    fn printed_config_reads_back_the_same() {
        let config = Config::resolve(ConfigLayer::default()).expect("valid");
        let text = config.to_layer().to_toml();
        let again: ConfigLayer = toml::from_str(&text).expect("reads back");
        assert_eq!(Config::resolve(again).expect("valid"), config);
    }
}
