//! Tests tying the settings table to what users meet: every setting has
//! a flag, a TOML key and a variable, `--print-config` prints it, `--help`
//! and docs/aesd.md show its default, and that default is the one
//! `resolve` fills in.

use super::*;
use crate::config::Cli;
use clap::{Args, Parser};

/// Settings whose default follows from others (shown as a rule, not
/// a value).
const DERIVED: [&str; 4] = [
    "workers",
    "max-active",
    "max-active-per-client",
    "max-queued-per-client",
];

/// The flags of the settings (all of `ConfigLayer`'s arguments, without
/// `--`), in the table's order.
fn flags() -> Vec<String> {
    ConfigLayer::augment_args(clap::Command::new("settings"))
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(str::to_owned))
        .collect()
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
        http_listen: Some("127.0.0.1:8200".parse().expect("address")),
        keyring: Some("etcd://127.0.0.1:2379,127.0.0.1:2479/aesd/fleet".into()),
        etcd_cacert: Some("etcd-ca.pem".into()),
        etcd_cert: Some("etcd-client.pem".into()),
        etcd_key: Some("etcd-client-key.pem".into()),
        audit_log: Some("audit.log".into()),
        seal_transit_address: Some("https://127.0.0.1:8300".into()),
        seal_transit_key_name: Some("autounseal".into()),
        seal_transit_token_file: Some("transit-token".into()),
        seal_transit_ca_cert: Some("transit-ca.pem".into()),
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

/// A row of docs/aesd.md's settings table that names settings: each
/// setting's flag with the value name the row gives it (`--listen ADDR`),
/// and the row's defaults (a row naming two flags, `a / b`, has two).
struct DocsRow {
    line: &'static str,
    flags: Vec<(&'static str, &'static str)>,
    defaults: Vec<String>,
}

/// The rows of docs/aesd.md's settings table that name settings (not
/// `--config`, `--print-config` and the other one-off flags).
fn docs_rows() -> Vec<DocsRow> {
    let docs = include_str!("../../../../docs/aesd.md");
    let table = docs
        .split("## Settings\n")
        .nth(1)
        .expect("docs/aesd.md has the settings section");
    let settings = flags();
    table
        .lines()
        .skip_while(|line| !line.starts_with("| flag"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let flags: Vec<(&str, &str)> = cells[1]
                .split('`')
                .filter_map(|part| part.strip_prefix("--"))
                .map(|flag| flag.split_once(' ').unwrap_or((flag, "")))
                .filter(|(name, _)| settings.iter().any(|setting| setting == name))
                .collect();
            let defaults = cells[2]
                .split(" / ")
                .map(|cell| cell.replace('`', ""))
                .collect();
            (!flags.is_empty()).then_some(DocsRow {
                line,
                flags,
                defaults,
            })
        })
        .collect()
}

/// docs/aesd.md's settings table has a row for every setting, naming its
/// flag with the value name `--help` shows (`--listen ADDR`).
#[test]
fn the_settings_table_names_the_value_of_each_flag() {
    let command = ConfigLayer::augment_args(clap::Command::new("settings"));
    let mut seen = Vec::new();
    for row in docs_rows() {
        for (name, value) in &row.flags {
            let arg = command
                .get_arguments()
                .find(|arg| arg.get_long() == Some(name))
                .expect("a setting's flag");
            let declared: Vec<String> = arg
                .get_value_names()
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(declared, [*value], "docs/aesd.md row {}", row.line);
            seen.push(name.to_string());
        }
    }
    let mut flags = flags();
    flags.sort();
    seen.sort();
    assert_eq!(seen, flags, "a docs row for every setting");
}

/// Every setting's `--help` ends with its shown default, once.
#[test]
fn every_setting_has_one_shown_default_and_the_help_shows_it() {
    let shown = shown_defaults();
    let shown_flags: Vec<&String> = shown.iter().map(|(flag, _)| flag).collect();
    assert_eq!(shown_flags, flags().iter().collect::<Vec<_>>());
    let command = Cli::command_with_defaults();
    for (flag, text) in &shown {
        let help = command
            .get_arguments()
            .find(|arg| arg.get_long() == Some(flag))
            .and_then(|arg| arg.get_help())
            .unwrap_or_else(|| panic!("--{flag} has no help"))
            .to_string();
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

/// Each row of docs/aesd.md's settings table gives the shown default of
/// each flag it names.
#[test]
fn the_settings_table_shows_the_same_defaults() {
    for row in docs_rows() {
        assert_eq!(row.defaults.len(), row.flags.len(), "row {}", row.line);
        for ((name, _), default) in row.flags.iter().zip(&row.defaults) {
            assert_eq!(
                Some(default.clone()),
                shown_for(name),
                "docs/aesd.md row for --{name}"
            );
        }
    }
}

/// The value a resolved setting has, as `--print-config` prints it.
fn printed(config: &Config, flag: &str) -> u64 {
    value_of(&config.to_layer(), flag)
        .and_then(|value| value.as_integer())
        .and_then(|value| u64::try_from(value).ok())
        .unwrap_or_else(|| panic!("--{flag} is printed as a number"))
}

/// What a derived default's shown rule ("2 × workers", "max-queue",
/// "max-active − 1 (at least 1)", "one per core") says it is, read from
/// the rule's text and the other settings' resolved values.
fn follow_rule(rule: &str, config: &Config) -> u64 {
    let number = |text: &str| -> u64 {
        text.parse()
            .unwrap_or_else(|_| panic!("a number in the rule {rule:?}"))
    };
    if rule == "one per core" {
        return std::thread::available_parallelism().map_or(1, |cores| cores.get() as u64);
    }
    if let Some((factor, other)) = rule.split_once(" × ") {
        return number(factor) * printed(config, other);
    }
    if let Some((other, rest)) = rule.split_once(" − ") {
        let (minus, floor) = rest
            .strip_suffix(')')
            .and_then(|rest| rest.split_once(" (at least "))
            .unwrap_or_else(|| panic!("a rule the test cannot read: {rule:?}"));
        return printed(config, other)
            .saturating_sub(number(minus))
            .max(number(floor));
    }
    assert!(
        flags().iter().any(|flag| flag == rule),
        "a rule the test cannot read: {rule:?}"
    );
    printed(config, rule)
}

/// The settings whose default follows from others resolve to what their
/// shown rule says, whatever the settings they follow.
#[test]
fn derived_defaults_follow_their_shown_rules() {
    let layers = [
        ConfigLayer::default(),
        ConfigLayer {
            workers: Some(1),
            ..ConfigLayer::default()
        },
        ConfigLayer {
            workers: Some(7),
            max_queue: Some(9),
            ..ConfigLayer::default()
        },
        ConfigLayer {
            max_active: Some(1),
            ..ConfigLayer::default()
        },
        ConfigLayer {
            workers: Some(3),
            max_active: Some(5),
            max_queue: Some(0),
            ..ConfigLayer::default()
        },
    ];
    let shown = shown_defaults();
    for layer in layers {
        let config = Config::resolve(layer.clone()).expect("valid");
        for flag in DERIVED {
            if value_of(&layer, flag).is_some() {
                continue; // given, not derived
            }
            let (_, rule) = shown
                .iter()
                .find(|(name, _)| name == flag)
                .expect("a shown default");
            assert_eq!(
                printed(&config, flag),
                follow_rule(rule, &config),
                "--{flag}: shown {rule:?}, from {layer:?}"
            );
        }
    }
}

/// A bad value from the environment names the variable it came from
/// (`AESD_WORKERS`), not only the flag it stands for.
#[test]
fn a_bad_environment_value_names_its_variable() {
    let err = ConfigLayer::from_env(|name| (name == "AESD_WORKERS").then(|| "two".to_owned()))
        .expect_err("not a number");
    let said = err.to_string();
    assert!(
        said.contains("AESD_WORKERS (--workers)") && said.contains("'two'"),
        "{said}"
    );
    assert!(!said.contains("'--workers <"), "{said}");
}

/// `aesd -h` is a summary (at most 30 lines, as aescrypt's and aesload's)
/// that names both formats and points to `--help`, which has every setting.
#[test]
fn the_short_help_is_a_summary_and_the_long_help_has_everything() {
    let problems = aesd_cli::help::summary_problems(
        Cli::command_with_defaults(),
        &["--kdf-budget", "--shutdown-grace", "--metrics-listen"],
    );
    assert!(problems.is_empty(), "{problems:#?}");
    let short = Cli::command_with_defaults().render_help().to_string();
    // Wrapped to the terminal's width: the words, whatever the lines.
    let flat = short.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("age v1") && flat.contains("openssl enc"),
        "{short}"
    );
    assert!(flat.contains("aesd --help"), "{short}");
    assert!(!short.contains("--kdf-budget"), "{short}");
    let long = Cli::command_with_defaults().render_long_help().to_string();
    assert!(long.contains("--listen"), "--listen missing from --help");
}
