//! `aesd`: the encryption server binary. Parses settings, starts logging
//! and the runtime, serves until SIGINT or SIGTERM.

use std::io::IsTerminal;
use std::process::ExitCode;

use aesd_server::Server;
use aesd_server::config::{Cli, Config, ConfigLayer};
use clap::Parser;
use tracing::info;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(path) = &cli.check_config {
        return check_config(path);
    }
    let config = match Config::load(&cli) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("aesd: {err}");
            return ExitCode::from(2);
        }
    };
    if cli.print_config {
        print!("{}", config.to_layer().to_toml());
        return ExitCode::SUCCESS;
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&config.log))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("aesd: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let server = match Server::bind(config.clone()).await {
            Ok(server) => server,
            Err(err) => {
                eprintln!("aesd: {err}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(addr) = server.metrics_addr() {
            info!(metrics = %addr, "metrics on http://{addr}/metrics");
        }
        info!(
            listen = %server.local_addr(),
            workers = config.workers,
            max_active = config.max_active,
            max_queue = config.max_queue,
            chunk_size = config.chunk_size,
            "aesd {} listening",
            env!("CARGO_PKG_VERSION")
        );
        server.serve(shutdown_signal()).await;
        ExitCode::SUCCESS
    })
}

/// `--check-config FILE`: validates the file alone over the defaults.
fn check_config(path: &std::path::Path) -> ExitCode {
    match ConfigLayer::from_file(path).and_then(Config::resolve) {
        Ok(config) => {
            println!("{}: ok", path.display());
            print!("{}", config.to_layer().to_toml());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("aesd: {err}");
            ExitCode::from(2)
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => info!("SIGINT received"),
                    _ = terminate.recv() => info!("SIGTERM received"),
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
