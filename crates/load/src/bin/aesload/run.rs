//! A load run: the password and token, the plans, the servers (or the
//! embedded one), the suites one after the other, then the report and
//! the outputs.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use aesd_cli::pass_source::PassSource;
use aesd_load::by_name::{KeyByName, preflight};
use aesd_load::interrupt::Interrupt;
use aesd_load::load::run_load_until;
use aesd_load::outln;
use aesd_load::progress::{DisplayMode, Progress, display, finish_display};
use aesd_load::record::{RunParameters, SuiteRun};
use aesd_load::report::Summary;
use aesd_load::server_metrics;
use aesd_load::shard::Shard;
use aesd_proto::Password;
use anyhow::{Context, Result, bail};
use zeroize::Zeroize;

use crate::args::Args;
use crate::embedded::start_embedded;
use crate::outputs::{Outputs, describe_server_samples, report, write_outputs};
use crate::plan::{describe, plans};
use crate::signals::watch_signals;

/// Password used when no --password-file is given (load tests only).
const DEFAULT_LOAD_PASSWORD: &[u8] = b"aesload-test-password";

/// How a load run ended.
pub(crate) enum RunEnd {
    /// Every transfer verified.
    Verified,
    /// Some transfer failed.
    Failed,
    /// SIGINT or SIGTERM stopped it (its report was still written).
    Interrupted,
}

/// Warns on stderr, once per server, when a server is not on this host and
/// the jobs (password or key and IV, and the files) would cross the network
/// without TLS. A name that does not resolve is left to the run's errors.
async fn warn_cleartext(servers: &[String]) {
    for server in servers {
        let first = tokio::net::lookup_host(server.as_str())
            .await
            .ok()
            .and_then(|mut addrs| addrs.next());
        if let Some(warning) = first.and_then(aesd_client::connection::cleartext_warning) {
            eprintln!("aesload: {server}: {warning}");
        }
    }
}

/// `--key NAME` and its keyring token: from `--token-file`, or for the
/// embedded server without one, a random token that becomes its dev
/// keyring's root token.
fn by_name_key(args: &Args) -> Result<Option<KeyByName>> {
    let Some(name) = &args.keys.key else {
        return Ok(None);
    };
    if let Some(by_name) = args.keys.by_name("aesload")? {
        return Ok(Some(KeyByName {
            name: by_name.name,
            token: by_name.token,
        }));
    }
    if !args.server.is_empty() {
        bail!(
            "--key with --server needs the keyring token: --token-file FILE (or AESD_TOKEN_FILE)"
        );
    }
    let mut random = [0u8; 24];
    getrandom::fill(&mut random).context("cannot make the embedded keyring's root token")?;
    let text: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    random.zeroize();
    Ok(Some(KeyByName {
        name: name.clone(),
        token: Password::new(text.into_bytes()),
    }))
}

/// Runs the load the arguments describe and reports it: how it ended, or
/// why it could not start (bad arguments, an unusable output or address).
pub(crate) async fn run(args: Args) -> Result<RunEnd> {
    let outputs = Outputs::check(&args)?;
    // A stale --start-at is refused before anything starts.
    let start_at = match (&args.start_at, args.start_in) {
        (Some(start), _) => {
            start.wait_from(std::time::SystemTime::now())?;
            Some(start.time)
        }
        (None, Some(delay)) => Some(std::time::SystemTime::now() + delay),
        (None, None) => None,
    };
    // A --bind address this host does not have would fail every transfer.
    if let Some(bind) = args.bind {
        std::net::TcpListener::bind((bind, 0)).with_context(|| {
            format!("cannot connect from --bind {bind}: not usable on this host")
        })?;
    }
    let password = match (&args.pass, &args.password_file) {
        (Some(source), _) => source.read("aesload")?,
        (None, Some(path)) => PassSource::File(path.clone()).read("aesload")?,
        (None, None) => Password::new(DEFAULT_LOAD_PASSWORD.to_vec()),
    };
    // With --key, the file holds the keyring token (by_name_key).
    let token = args.keys.access_token("aesload")?;
    let by_name = by_name_key(&args)?;
    let plans = plans(&args, password, token, by_name.clone())?;

    let embedded = match args.server.is_empty() {
        true => Some(start_embedded(&args, &plans, by_name.as_ref()).await?),
        false => None,
    };
    let servers = match &embedded {
        Some(server) => vec![server.addr().to_string()],
        None => args.server.clone(),
    };
    if let Some(key) = &by_name {
        let options = aesd_client::ConnectOptions {
            token: None,
            tls: args.tls.settings()?,
            bind: args.bind,
        };
        for server in &servers {
            preflight(server, &options, args.timeout, key)
                .await
                .context("--key: the run cannot start")?;
        }
    }
    for (name, plan) in &plans {
        outln!("aesload: {name}: {}", describe(plan));
        if !plan.shard.is_whole() {
            outln!(
                "shard {}: {} of its clients, {:.2} MB",
                plan.shard,
                plan.own_clients().count(),
                plan.own_bytes() as f64 / 1e6
            );
        }
    }
    if let Some(bind) = args.bind {
        outln!("connecting from {bind}");
    }
    outln!(
        "settings: seed {}, scale {}, PBKDF2 {} iterations, warm-up {}",
        args.seed,
        args.scale,
        args.iterations,
        args.warmup
    );
    match &embedded {
        Some(server) => {
            let state = server.state();
            let config = state.config();
            outln!(
                "server: embedded aesd on {} ({} workers, {} active slots, queue {}, chunks of {} bytes)",
                server.addr(),
                config.workers,
                config.max_active,
                config.max_queue,
                config.chunk_size
            );
        }
        None if servers.len() == 1 => outln!("server: {}", servers[0]),
        None => outln!("servers (round-robin): {}", servers.join(", ")),
    }
    if embedded.is_none() && args.tls.settings()?.is_none() {
        warn_cleartext(&servers).await;
    }

    if let Some(start_at) = start_at {
        let wait = start_at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        if !args.quiet {
            eprintln!(
                "aesload: starting in {:.1} s (at {:.3}, Unix time)",
                wait.as_secs_f64(),
                aesd_load::start::unix_seconds(start_at)
            );
        }
        tokio::time::sleep(wait).await;
    }
    let (interrupt, stop) = Interrupt::new();
    let interrupt = Arc::new(interrupt);
    tokio::spawn(watch_signals(Arc::clone(&interrupt)));
    let started = Instant::now();
    let started_at = std::time::SystemTime::now();
    let mode = match std::io::stderr().is_terminal() {
        true => DisplayMode::Terminal,
        false => DisplayMode::Lines,
    };
    let (stop_sampling, sampling_stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = args.metrics_url.clone().map(|url| {
        tokio::spawn(server_metrics::sample_until(url, started, async {
            let _ = sampling_stopped.await;
        }))
    });
    let mut runs = Vec::with_capacity(plans.len());
    for (name, plan) in plans {
        if interrupt.stopped() {
            break;
        }
        let progress = Arc::new(Progress::default());
        let display =
            (!args.quiet).then(|| tokio::spawn(display(Arc::clone(&progress), name.clone(), mode)));
        let run = run_load_until(&servers, &plan, progress, stop.clone()).await;
        if let Some(display) = display {
            display.abort();
            let _ = display.await;
            finish_display(mode);
            let summary = Summary::of(&run, args.warmup);
            eprintln!(
                "aesload: {name} done: {} of {} verified in {:.2} s",
                summary.verified,
                summary.transfers,
                run.duration.as_secs_f64()
            );
        }
        runs.push(SuiteRun { name, plan, run });
    }
    let _ = stop_sampling.send(());
    let server_samples = match sampler {
        Some(sampler) => {
            let (samples, failures) = sampler.await.unwrap_or_default();
            describe_server_samples(&samples, failures);
            samples
        }
        None => Vec::new(),
    };
    if let Some(server) = embedded {
        server.shutdown().await;
    }
    let parameters = RunParameters {
        servers,
        embedded: args.server.is_empty(),
        seed: args.seed,
        scale: args.scale,
        iterations: args.iterations,
        format: match (&args.keys.key, args.format.as_deref()) {
            (Some(_), _) => "by-name",
            (None, Some("age")) => "age",
            (None, _) => "openssl",
        },
        warmup: args.warmup,
        shard: args.shard.unwrap_or(Shard::WHOLE),
        bind: args.bind,
        started_at,
    };
    let interrupted = interrupt.stopped();
    report(&runs, &parameters, interrupted);
    write_outputs(&outputs, &runs, &parameters, server_samples, interrupted)?;
    if !args.quiet {
        eprintln!(
            "aesload: finished in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let verified = runs.iter().all(|suite| {
        suite
            .run
            .transfers
            .iter()
            .all(|transfer| transfer.verified())
    });
    Ok(match (interrupted, verified) {
        (true, _) => RunEnd::Interrupted,
        (false, true) => RunEnd::Verified,
        (false, false) => RunEnd::Failed,
    })
}
