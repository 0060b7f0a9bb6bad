//! `aesload`: the load generator. Runs many clients in batches against an
//! aesd server (or an embedded one), verifies every result and prints the
//! study's table.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use aesd_client::DEFAULT_ITERATIONS;
use aesd_client::load::{LoadPlan, Outcome, Progress, run_load};
use aesd_client::password::{permission_warning, read_password_file};
use aesd_client::report::Summary;
use aesd_client::sizes::{SizeList, human_bytes, parse_size};
use aesd_proto::Password;
use aesd_server::{Config, ConfigLayer, Server};
use anyhow::{Context, Result};
use clap::Parser;

/// Password used when no --password-file is given (load tests only).
const DEFAULT_LOAD_PASSWORD: &[u8] = b"aesload-test-password";

/// Load generator for aesd: N clients in batches of C, every result
/// decrypted and compared with what was sent.
#[derive(Debug, Parser)]
#[command(
    name = "aesload",
    version,
    after_help = "\
Without --server, aesload starts an embedded aesd on 127.0.0.1 (ephemeral port) \
and runs against it, so it works out of the box.

Sizes: K/M/G and KiB/MiB/GiB are powers of 1024 (the study's \"100 MB\" was 100 MiB), \
KB/MB/GB powers of 1000. The table prints MB as 10^6 bytes, like the study.

Exit status: 0 when every transfer verified; 1 when any failed; 2 on bad arguments.

Examples:
  aesload --clients 100 --chunk 10 --sizes 2M,5M,10M,20M
  aesload --server 192.168.1.50:7878 --clients 1 --size 100M"
)]
struct Args {
    /// Server to load, HOST:PORT [default: an embedded server on 127.0.0.1]
    #[arg(long, value_name = "HOST:PORT")]
    server: Option<String>,
    /// Number of clients (one transfer each)
    #[arg(long, value_name = "N", default_value_t = 1)]
    clients: usize,
    /// Clients started together; the next batch starts when this one is done [default: all at once]
    #[arg(long, value_name = "C")]
    chunk: Option<usize>,
    /// Size of every file
    #[arg(long, value_name = "SIZE", conflicts_with = "sizes", value_parser = parse_size)]
    size: Option<u64>,
    /// Sizes to draw from, comma-separated, uniformly per client (seeded)
    #[arg(long, value_name = "LIST")]
    sizes: Option<SizeList>,
    /// File whose first line is the password [default: a fixed test password]
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// PBKDF2 iterations per job (openssl -iter)
    #[arg(long = "iter", value_name = "N", default_value_t = DEFAULT_ITERATIONS)]
    iterations: u32,
    /// Seed for the size draw and the data
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Embedded server only: worker threads [default: one per core]
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Embedded server only: jobs processed at once [default: 2 × workers]
    #[arg(long, value_name = "N")]
    max_active: Option<usize>,
    /// No progress lines on stderr
    #[arg(short, long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AESLOAD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("aesload: cannot start the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("aesload: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<bool> {
    let password = match &args.password_file {
        Some(path) => {
            if let Some(warning) = permission_warning(path) {
                eprintln!("aesload: {warning}");
            }
            read_password_file(path)?
        }
        None => Password::new(DEFAULT_LOAD_PASSWORD.to_vec()),
    };
    let sizes = match (&args.size, &args.sizes) {
        (Some(size), _) => vec![*size],
        (None, Some(sizes)) => sizes.0.clone(),
        (None, None) => vec![10 << 20],
    };
    let plan = LoadPlan {
        clients: args.clients,
        batch: args.chunk.unwrap_or(args.clients).max(1),
        sizes,
        seed: args.seed,
        iterations: args.iterations,
        password,
    };

    let embedded = match &args.server {
        Some(_) => None,
        None => Some(start_embedded(&args, &plan).await?),
    };
    let target = match (&args.server, &embedded) {
        (Some(server), _) => server.clone(),
        (None, Some(server)) => server.addr().to_string(),
        (None, None) => unreachable!("an embedded server is started when no --server is given"),
    };

    let sizes_text: Vec<String> = plan.sizes.iter().map(|size| human_bytes(*size)).collect();
    println!(
        "aesload: {} clients in batches of {}, sizes {} (seed {}), {} in total, PBKDF2 {} iterations",
        plan.clients,
        plan.batch,
        sizes_text.join(","),
        plan.seed,
        human_bytes(plan.total_bytes()),
        plan.iterations
    );
    match &embedded {
        Some(server) => {
            let config = &server.shared().config;
            println!(
                "server: embedded aesd on {} ({} workers, {} active slots, queue {})",
                server.addr(),
                config.workers,
                config.max_active,
                config.max_queue
            );
        }
        None => println!("server: {target}"),
    }

    let progress = Arc::new(Progress::default());
    let reporter =
        (!args.quiet).then(|| tokio::spawn(report_progress(Arc::clone(&progress), plan.clients)));
    let run = run_load(&target, &plan, Arc::clone(&progress)).await;
    if let Some(reporter) = reporter {
        reporter.abort();
    }
    if let Some(server) = embedded {
        server.shutdown().await;
    }

    let summary = Summary::of(&run);
    println!();
    print!("{}", summary.table());
    for transfer in &run.transfers {
        if let Outcome::Failed { kind, message } = &transfer.outcome {
            eprintln!(
                "aesload: client {} ({}) failed [{kind}]: {message}",
                transfer.client,
                human_bytes(transfer.size)
            );
        }
    }
    Ok(summary.verified == summary.transfers)
}

async fn start_embedded(args: &Args, plan: &LoadPlan) -> Result<aesd_server::RunningServer> {
    let listen: SocketAddr = "127.0.0.1:0".parse().context("loopback address")?;
    let config = Config::with(ConfigLayer {
        listen: Some(listen),
        workers: args.workers,
        max_active: args.max_active,
        // Room for a whole batch to wait: an embedded run never sees Busy.
        max_queue: Some(plan.batch.max(64)),
        min_iter: Some(1),
        max_iter: Some(
            plan.iterations
                .max(aesd_server::config::DEFAULT_MAX_ITERATIONS),
        ),
        ..ConfigLayer::default()
    })
    .context("embedded server settings")?;
    let server = Server::bind(config)
        .await
        .context("starting the embedded server")?;
    Ok(server.spawn())
}

async fn report_progress(progress: Arc<Progress>, clients: usize) {
    let started = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let counts = progress.snapshot();
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "[{secs:6.1}s] {}/{clients} done ({} failed), {} active, {} verified, {}/s",
            counts.done,
            counts.failed,
            counts.active,
            human_bytes(counts.bytes),
            human_bytes((counts.bytes as f64 / secs) as u64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["aesload", "--sizes", "2M,5M", "--clients", "3"])
            .expect("parses");
        assert_eq!(args.sizes, Some(SizeList(vec![2 << 20, 5 << 20])));
        assert!(Args::try_parse_from(["aesload", "--size", "1M", "--sizes", "2M"]).is_err());
    }
}
