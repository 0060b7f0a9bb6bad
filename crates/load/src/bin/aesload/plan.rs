//! The load plans the arguments describe (a suite's or a custom one),
//! and the line that says what a plan runs.

use aesd_load::by_name::KeyByName;
use aesd_load::distribution::SizeDist;
use aesd_load::load::{Arrival, LoadFormat, LoadPlan};
use aesd_load::shard::Shard;
use aesd_load::sizes::human_bytes;
use aesd_load::suites::{SuiteOptions, custom_plan};
use aesd_proto::{AuthToken, Password};
use anyhow::{Context, Result, bail};

use crate::args::{Args, Suites};

/// The plans to run, by name, from the arguments.
pub(crate) fn plans(
    args: &Args,
    password: Password,
    token: Option<AuthToken>,
    by_name: Option<KeyByName>,
) -> Result<Vec<(String, LoadPlan)>> {
    let options = SuiteOptions {
        scale: args.scale,
        seed: args.seed,
        iterations: args.iterations,
        key_derivation: args.key_derivation,
        password,
        token,
        tls: args.tls.settings()?,
        idle_timeout: args.timeout,
        clients: args.clients,
        chunk: args.chunk,
        sizes: match (&args.size, &args.sizes) {
            (Some(size), _) => Some(SizeDist::fixed(*size)),
            (None, sizes) => sizes.clone(),
        },
        rate: args.rate,
        duration: args.duration,
    };
    let plans: Vec<(String, LoadPlan)> = match &args.suite {
        Some(Suites(suites)) => suites
            .iter()
            .map(|suite| (suite.name().to_owned(), suite.plan(&options)))
            .collect(),
        None => vec![("custom".to_owned(), custom_plan(&options))],
    };
    // One identity for the whole run (age): the recipient of every job.
    let format = match (by_name, args.format.as_deref()) {
        (Some(key), _) => LoadFormat::ByName(key),
        (None, Some("age")) => LoadFormat::fresh_age().context("cannot make an age identity")?,
        (None, _) => LoadFormat::Openssl,
    };
    let plans: Vec<(String, LoadPlan)> = plans
        .into_iter()
        .map(|(name, mut plan)| {
            plan.shard = args.shard.unwrap_or(Shard::WHOLE);
            plan.bind = args.bind;
            plan.format = format.clone();
            (name, plan)
        })
        .collect();
    let open_loop = plans
        .iter()
        .any(|(_, plan)| matches!(plan.arrival, Arrival::Rate(_)));
    if args.duration.is_some() && !open_loop {
        bail!("--duration applies to open-loop runs: give --rate, or --suite drowning");
    }
    Ok(plans)
}

/// One line saying what a plan runs.
pub(crate) fn describe(plan: &LoadPlan) -> String {
    let arrival = match plan.arrival {
        Arrival::Batches(_) if plan.clients <= 1 => String::new(),
        Arrival::Batches(batch) if batch >= plan.clients => " together".to_owned(),
        Arrival::Batches(batch) => format!(" in batches of {batch}"),
        Arrival::Rate(rate) => format!(
            " arriving at {rate}/s for {:.1} s (open loop, offering {:.2} MB/s)",
            plan.clients as f64 / rate,
            rate * plan.sizes.mean() / 1e6
        ),
    };
    let sizes: Vec<String> = match plan.sizes.sizes() {
        [size] => vec![human_bytes(*size)],
        sizes => sizes
            .iter()
            .enumerate()
            .map(|(index, size)| {
                format!(
                    "{} ({:.0}%)",
                    human_bytes(*size),
                    plan.sizes.probability(index) * 100.0
                )
            })
            .collect(),
    };
    let period = match plan.size_period {
        Some(period) => format!(", the same sizes every {period} clients"),
        None => String::new(),
    };
    let clients = match plan.clients {
        1 => "1 client".to_owned(),
        count => format!("{count} clients"),
    };
    // Sizes in powers of 1024 as given (the study's "100 MB" was 100
    // MiB); the total also in MB (10^6), the table's and live line's unit.
    format!(
        "{clients}{arrival}, sizes {}{period}; {:.2} MB ({}) in total",
        sizes.join(", "),
        plan.total_bytes() as f64 / 1e6,
        human_bytes(plan.total_bytes())
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn nonsense_settings_are_refused() {
        let plans_of = |argv: &[&str]| {
            let args = Args::try_parse_from(argv).expect("parses");
            plans(&args, Password::new(b"pw".to_vec()), None, None)
        };
        assert!(plans_of(&["aesload", "--duration", "5s"]).is_err());
        for refused in [
            &["aesload", "--scale", "0"][..],
            &["aesload", "--rate=-1"],
            &["aesload", "--rate", "NaN"],
            &["aesload", "--clients", "0"],
            &["aesload", "--chunk", "0"],
            &["aesload", "--iter", "0"],
            &["aesload", "--workers", "0"],
            &["aesload", "--max-active", "0"],
            &["aesload", "--embedded-chunk-size", "100"],
            &["aesload", "--server", "127.0.0.1"],
            &["aesload", "--server", "a:1,b"],
        ] {
            let err = Args::try_parse_from(refused).expect_err("refused at parse time");
            assert_eq!(err.exit_code(), 2, "{refused:?}");
        }
        let all = plans_of(&["aesload", "--suite", "all", "--scale", "0.01"]).expect("valid");
        assert_eq!(all.len(), 6);
        let custom = plans_of(&["aesload", "--rate", "4", "--duration", "2s"]).expect("valid");
        assert_eq!(custom[0].1.clients, 8);
    }
}
