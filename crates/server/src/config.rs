//! Configuration: command-line flags, an optional TOML file and `AESD_*`
//! environment variables, in that order of precedence, over defaults.
//!
//! One type, [`ConfigLayer`] (made from the table in `settings.rs`),
//! holds every setting from one source: clap reads it from the command
//! line and from the environment (each variable is fed through the same
//! parser, so both accept the same syntax), serde reads it from TOML
//! (keys are the flag names). [`Config::resolve`] fills defaults into
//! the merged layers and checks the result: [`Config`], also made from
//! the table, with the rules between settings written here.

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, FromArgMatches, Parser};

use aesd_proto::secret_file::permission_warning;

use crate::auth::AccessToken;
use crate::tls::TlsIdentity;

pub use crate::settings::{Config, ConfigError, ConfigLayer, ENV_PREFIX, env_var};

/// The `aesd` command line.
#[derive(Debug, Parser)]
#[command(
    name = "aesd",
    version,
    about = "Streaming encryption server: openssl enc -aes-256-cbc -pbkdf2 and age v1 files, both ways",
    after_help = SHORT_HELP_END,
    after_long_help = ENV_HELP
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

    /// As `bao server -dev`: a keyring in memory (lost at exit), initialised
    /// with one share and unsealed, the HTTP API on --http-listen (default
    /// 127.0.0.1:8200); prints the unseal key and the root token. For tests
    /// and trials only; not with --keyring
    #[arg(long, conflicts_with = "keyring")]
    pub dev: bool,

    /// With --dev: the root token is ID (as bao's -dev-root-token-id)
    /// instead of a random one
    #[arg(long, value_name = "ID", requires = "dev")]
    pub dev_root_token_id: Option<String>,

    /// Print a man page or a shell completion script, made from these
    /// definitions, and exit
    #[arg(long, value_name = "KIND", exclusive = true)]
    pub generate: Option<aesd_cli::generate::Generate>,
}

impl Cli {
    /// The command line with each setting's default appended to its help
    /// (`[default: …]`, as the settings table shows it: `shown_defaults`).
    /// `-h` shows only [`SHORT_HELP_FLAGS`]; `--help` every one.
    pub fn command_with_defaults() -> clap::Command {
        // Every default written out once (not once per flag: on the
        // board's core that was most of the instructions of every start).
        let shown_defaults = crate::settings::shown_defaults();
        Cli::command().mut_args(|arg| {
            let long = arg.get_long().map(ToOwned::to_owned);
            let arg = arg.hide_short_help(
                long.as_deref()
                    .is_some_and(|long| !SHORT_HELP_FLAGS.contains(&long)),
            );
            let shown = long.as_deref().and_then(|long| {
                shown_defaults
                    .iter()
                    .find(|(name, _)| name == long)
                    .map(|(_, text)| text)
            });
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

/// The flags `aesd -h` shows (a summary); `--help` shows every setting.
pub const SHORT_HELP_FLAGS: [&str; 9] = [
    "listen",
    "workers",
    "max-active",
    "tls-cert",
    "tls-key",
    "tls-self-signed",
    "token-file",
    "log",
    "config",
];

const SHORT_HELP_END: &str = "\
Every setting (limits, timeouts, shutdown, TLS, metrics, --print-config) and the environment: \
aesd --help, or the man page (aesd --generate man). \
Subcommand: aesd verify-audit FILE... checks the --audit-log hash chain (aesd verify-audit --help).";

const ENV_HELP: &str = "\
Environment: every setting can also come from AESD_<FLAG> (upper case, '-' as '_'), \
e.g. AESD_LISTEN=127.0.0.1:7878, AESD_WORKERS=2, AESD_MAX_ACTIVE=4; the file from AESD_CONFIG. \
Precedence: flags, then the --config file, then the environment, then defaults.

Limits: data chunks up to 1 MiB (--chunk-size), passwords up to 1024 bytes, \
access tokens 16 to 256 bytes, PBKDF2 iterations within --min-iter..--max-iter.

Subcommand: aesd verify-audit FILE [FILE...] checks the audit log's hash chain \
(--audit-log) with the running, unsealed aesd named by BAO_ADDR and a root token in \
BAO_TOKEN; exit 0 intact, 1 naming the first bad line, 2 usage or connection errors \
(aesd verify-audit --help).";

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
            let var = env_var(long);
            if let Some(value) = lookup(&var) {
                let one = format!("--{long}={value}");
                // Each variable checked on its own, so that an error names
                // the variable, not the flag it stands for.
                if let Err(err) = command
                    .clone()
                    .try_get_matches_from(["environment", one.as_str()])
                {
                    return Err(ConfigError::Environment {
                        message: name_the_variable(&err, arg, &var),
                    });
                }
                argv.push(one);
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

/// clap's first line about the value of `arg`, naming the environment
/// variable `var` it came from instead of the flag (`invalid value 'x' for
/// AESD_WORKERS (--workers)`).
fn name_the_variable(err: &clap::Error, arg: &clap::Arg, var: &str) -> String {
    let line = err.to_string();
    let line = line.lines().next().unwrap_or_default();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    let long = arg.get_long().unwrap_or_default();
    let value_name = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map(ToString::to_string)
        .unwrap_or_else(|| long.to_uppercase());
    let as_flag = format!("'--{long} <{value_name}>'");
    if line.contains(&as_flag) {
        line.replace(&as_flag, &format!("{var} (--{long})"))
    } else {
        format!("{var} (--{long}): {line}")
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
    /// The first setting that needs the keyring or its HTTP API, as its
    /// flag: what an aesd built without the cargo feature `http-api`
    /// refuses (with `--dev`, which is a flag only). `None` when none is
    /// given.
    pub fn keyring_setting(&self) -> Option<&'static str> {
        [
            (self.keyring.is_some(), "--keyring"),
            (self.http_listen.is_some(), "--http-listen"),
            (self.audit_log.is_some(), "--audit-log"),
            (
                self.seal_transit_address.is_some(),
                "--seal-transit-address",
            ),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Reads the files the settings name (`tls-cert` and `tls-key`,
    /// `token-file`): the resolution checked the settings alone, this
    /// step reads the secrets. An error names the setting whose file
    /// could not be used.
    pub fn load_secrets(&self) -> Result<Secrets, ConfigError> {
        let tls = match self.tls_files()? {
            Some(files) => Some(TlsIdentity::load(&files.cert, &files.key).map_err(|err| {
                ConfigError::Invalid {
                    key: "tls-cert".into(),
                    reason: err.to_string(),
                }
            })?),
            None => None,
        };
        let access_token = match &self.token_file {
            Some(path) => {
                Some(
                    AccessToken::from_file(path).map_err(|err| ConfigError::Invalid {
                        key: "token-file".into(),
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

    /// Fills defaults into a merged layer and checks every setting: each
    /// on its own as the settings table (settings.rs) declares it, then
    /// the rules between settings.
    pub fn resolve(layer: ConfigLayer) -> Result<Config, ConfigError> {
        let config = Config::each_setting(layer)?;
        config.check_rules_between_settings()?;
        Ok(config)
    }

    /// The rules that name two settings, which the settings table cannot
    /// state for one: `tls-cert` and `tls-key` come together, `min-iter`
    /// is at most `max-iter`, and two pairs of limits must be at least 1
    /// (one message names both).
    /// The transit seal's settings come together, with a keyring.
    fn check_transit_seal(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: &str| {
            Err(ConfigError::Invalid {
                key: key.into(),
                reason: reason.into(),
            })
        };
        let Some(address) = &self.seal_transit_address else {
            if self.seal_transit_key_name.is_some()
                || self.seal_transit_token_file.is_some()
                || self.seal_transit_ca_cert.is_some()
            {
                return invalid(
                    "seal-transit-address",
                    "--seal-transit-key-name, --seal-transit-token-file and --seal-transit-ca-cert need --seal-transit-address",
                );
            }
            return Ok(());
        };
        match (address.tls, &self.seal_transit_ca_cert) {
            (true, None) => {
                return invalid(
                    "seal-transit-ca-cert",
                    "an https:// --seal-transit-address needs --seal-transit-ca-cert (the PEM file its certificate is checked against)",
                );
            }
            (false, Some(_)) => {
                return invalid(
                    "seal-transit-ca-cert",
                    "--seal-transit-ca-cert is for an https:// --seal-transit-address",
                );
            }
            _ => {}
        }
        if self.seal_transit_key_name.is_none() {
            return invalid(
                "seal-transit-key-name",
                "the transit seal needs the key's name (--seal-transit-key-name)",
            );
        }
        if self.seal_transit_token_file.is_none() {
            return invalid(
                "seal-transit-token-file",
                "the transit seal needs a token (--seal-transit-token-file)",
            );
        }
        if self.keyring.is_none() {
            return invalid(
                "seal-transit-address",
                "the transit seal seals a stored keyring: give --keyring",
            );
        }
        Ok(())
    }

    fn check_rules_between_settings(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: String| {
            Err(ConfigError::Invalid {
                key: key.into(),
                reason,
            })
        };
        self.tls_files()?;
        self.etcd_tls_files()?;
        if self.max_connections == 0 || self.max_connections_per_client == 0 {
            return invalid(
                "max-connections",
                "max-connections and max-connections-per-client must be at least 1".into(),
            );
        }
        if self.max_file_size == 0 || self.max_jobs_per_connection == 0 {
            return invalid(
                "max-file-size",
                "max-file-size and max-jobs-per-connection must be at least 1".into(),
            );
        }
        self.check_transit_seal()?;
        if self.min_iter == 0 || self.min_iter > self.max_iter {
            return invalid(
                "min-iter",
                format!(
                    "must be at least 1 and at most max-iter ({}), got {}",
                    self.max_iter, self.min_iter
                ),
            );
        }
        Ok(())
    }

    /// The job port's TLS files: both `tls-cert` and `tls-key`, or
    /// neither (no TLS); one alone is an error naming the other.
    pub fn tls_files(&self) -> Result<Option<TlsFiles>, ConfigError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(ConfigError::Invalid {
                key: "tls-key".into(),
                reason: "--tls-cert needs --tls-key (the certificate's private key)".into(),
            }),
            (None, Some(_)) => Err(ConfigError::Invalid {
                key: "tls-cert".into(),
                reason: "--tls-key needs --tls-cert (the certificate chain)".into(),
            }),
        }
    }

    /// The TLS files for etcd's client port: `etcd-cacert`, `etcd-cert`
    /// and `etcd-key` only with `keyring = "etcd://..."`; the client
    /// certificate and key together, and with the CA.
    pub fn etcd_tls_files(&self) -> Result<crate::etcd::EtcdTlsFiles, ConfigError> {
        let files = crate::etcd::EtcdTlsFiles {
            cacert: self.etcd_cacert.clone(),
            cert: self.etcd_cert.clone(),
            key: self.etcd_key.clone(),
        };
        let invalid = |key: &str, reason: &str| {
            Err(ConfigError::Invalid {
                key: key.into(),
                reason: reason.into(),
            })
        };
        let any = files.cacert.is_some() || files.cert.is_some() || files.key.is_some();
        if any && !matches!(self.keyring, Some(crate::etcd::KeyringLocation::Etcd(_))) {
            return invalid(
                "etcd-cacert",
                "--etcd-cacert, --etcd-cert and --etcd-key go with --keyring etcd://...",
            );
        }
        match (&files.cert, &files.key) {
            (Some(_), None) => {
                invalid("etcd-key", "--etcd-cert needs --etcd-key (its private key)")
            }
            (None, Some(_)) => invalid(
                "etcd-cert",
                "--etcd-key needs --etcd-cert (its certificate)",
            ),
            (Some(_), Some(_)) if files.cacert.is_none() => invalid(
                "etcd-cacert",
                "--etcd-cert needs --etcd-cacert (the CA of etcd's server certificate): a client certificate goes over TLS only",
            ),
            _ => Ok(files),
        }
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
            .tls_key
            .iter()
            .filter_map(|key| permission_warning(key, "TLS key"));
        token
            .chain(tls_key)
            .chain(self.trusted_proxies.warnings())
            .collect()
    }
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
    fn the_settings_that_need_the_keyring_are_named() {
        let named = |args: &[&str]| {
            let mut argv = vec!["aesd"];
            argv.extend_from_slice(args);
            let cli = Cli::try_parse_from(argv).expect("flags");
            Config::resolve(cli.settings)
                .expect("valid")
                .keyring_setting()
        };
        assert_eq!(named(&[]), None);
        assert_eq!(named(&["--workers", "2", "--dev"]), None);
        assert_eq!(named(&["--keyring", "/var/lib/aesd"]), Some("--keyring"));
        assert_eq!(
            named(&["--http-listen", "127.0.0.1:8200"]),
            Some("--http-listen")
        );
        assert_eq!(named(&["--audit-log", "/tmp/a.log"]), Some("--audit-log"));
    }

    #[test]
    fn etcd_tls_flags_need_an_etcd_keyring_and_each_other() {
        let resolve = |args: &[&str]| {
            let mut argv = vec!["aesd"];
            argv.extend_from_slice(args);
            Config::resolve(Cli::try_parse_from(argv).expect("flags").settings)
        };
        let etcd = ["--keyring", "etcd://127.0.0.1:2379/aesd"];
        let files = resolve(
            &[
                &etcd[..],
                &[
                    "--etcd-cacert",
                    "ca.pem",
                    "--etcd-cert",
                    "c.pem",
                    "--etcd-key",
                    "k.pem",
                ],
            ]
            .concat(),
        )
        .expect("valid")
        .etcd_tls_files()
        .expect("files");
        assert_eq!(files.cacert, Some("ca.pem".into()));
        for (args, says) in [
            (
                &["--keyring", "/var/lib/aesd", "--etcd-cacert", "ca.pem"][..],
                "go with --keyring etcd://",
            ),
            (
                &["--etcd-cacert", "ca.pem"][..],
                "go with --keyring etcd://",
            ),
            (
                &[&etcd[..], &["--etcd-cert", "c.pem"]].concat()[..],
                "--etcd-cert needs --etcd-key",
            ),
            (
                &[&etcd[..], &["--etcd-key", "k.pem"]].concat()[..],
                "--etcd-key needs --etcd-cert",
            ),
            (
                &[&etcd[..], &["--etcd-cert", "c.pem", "--etcd-key", "k.pem"]].concat()[..],
                "needs --etcd-cacert",
            ),
        ] {
            let err = resolve(args).expect_err("refused").to_string();
            assert!(err.contains(says), "{args:?}: {err}");
        }
        let err = Cli::try_parse_from(["aesd", "--keyring", "etcd://h:1/"])
            .map(|cli| Config::resolve(cli.settings).map(drop));
        let shown = match err {
            Err(clap) => clap.to_string(),
            Ok(resolved) => resolved.expect_err("refused").to_string(),
        };
        assert!(shown.contains("empty key prefix"), "{shown}");
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
            ConfigError::Invalid { ref key, .. } if key == "chunk-size"
        ));
        let err = Config::resolve(ConfigLayer {
            idle_timeout: Some(-1.0),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid { ref key, .. } if key == "idle-timeout"
        ));
        let err = Config::resolve(ConfigLayer {
            temperature: Some("thermal".into()),
            ..ConfigLayer::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid { ref key, .. } if key == "temperature"
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
            ConfigError::Invalid { ref key, .. } if key == "trusted-proxies"
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
                    ConfigError::Invalid { ref key, .. } if key == "metrics-allow"
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

    /// `tls-cert` and `tls-key` come together: one alone is refused when
    /// the settings are resolved, and again when the secrets are loaded
    /// from a configuration changed since (never a silent plain port).
    #[test]
    fn tls_cert_and_key_come_together() {
        let named = |err: ConfigError, setting: &str| {
            assert!(
                matches!(err, ConfigError::Invalid { ref key, .. } if key == setting),
                "{err}"
            );
        };
        let cert_alone = ConfigLayer {
            tls_cert: Some("cert.pem".into()),
            ..ConfigLayer::default()
        };
        named(Config::resolve(cert_alone).unwrap_err(), "tls-key");
        let key_alone = ConfigLayer {
            tls_key: Some("key.pem".into()),
            ..ConfigLayer::default()
        };
        named(Config::resolve(key_alone).unwrap_err(), "tls-cert");
        let mut config = Config::resolve(ConfigLayer::default()).expect("valid");
        config.tls_cert = Some("cert.pem".into());
        named(config.load_secrets().unwrap_err(), "tls-key");
    }

    #[test]
    fn printed_config_reads_back_the_same() {
        let config = Config::resolve(ConfigLayer::default()).expect("valid");
        let text = config.to_layer().to_toml();
        let again: ConfigLayer = toml::from_str(&text).expect("reads back");
        assert_eq!(Config::resolve(again).expect("valid"), config);
    }
}
