//! The `aesd` command: parses settings, starts logging and the runtime,
//! serves until SIGINT or SIGTERM. The binary is [`main`] and nothing
//! else.

use std::io::IsTerminal;
use std::process::ExitCode;

use tracing::{error, info, warn};

use crate::Server;
use crate::config::{Cli, Config, ConfigLayer};
use crate::readiness::Readiness;

/// The `aesd` command, start to exit.
pub fn main() -> ExitCode {
    // Test builds only (feature emulate-aes-insn): VexRiscv's AES
    // instruction, which traps under qemu-user, is executed by its model.
    #[cfg(feature = "emulate-aes-insn")]
    if !aesd_vexriscv::sigill::install_emulator() {
        eprintln!("aesd: cannot install the AES instruction emulator");
        return ExitCode::FAILURE;
    }
    // Before any secret is read (the token file, a job's password): a
    // crash must not leave them in a core file.
    let core_dumps = aesd_cli::secrets::disable_core_dumps();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "verify-audit") {
        return crate::verify_audit::main(&args[2..]);
    }
    let cli = Cli::parse_with_defaults();
    if let Some(kind) = cli.generate {
        return aesd_cli::generate::print(kind, Cli::command_with_defaults());
    }
    if let Some(path) = &cli.check_config {
        return check_config(path);
    }
    if let Some(dir) = &cli.tls_self_signed {
        return tls_self_signed(dir);
    }
    let mut config = match Config::load(&cli) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("aesd: {err}");
            return ExitCode::from(2);
        }
    };
    // An aesd built without the keyring and its API refuses their settings.
    if let Err(err) = crate::api_start::available(cli.dev, &config) {
        eprintln!("aesd: {err}");
        return ExitCode::from(2);
    }
    // The files the settings name, once the settings are resolved.
    let secrets = match config.load_secrets() {
        Ok(secrets) => secrets,
        Err(err) => {
            eprintln!("aesd: {err}");
            return ExitCode::from(2);
        }
    };
    let backend = match crate::backend::select(config.aes_backend, &config.device_tree) {
        Ok(backend) => backend,
        Err(err) => {
            eprintln!("aesd: {err}");
            return ExitCode::from(2);
        }
    };
    if cli.print_config {
        print!("{}", config.to_layer().to_toml());
        println!(
            "# AES in use: {} ({})",
            backend.engine.name(),
            backend.reason
        );
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
    if let Err(err) = core_dumps {
        tracing::warn!("{err}: a crash may leave secrets in a core file");
    }
    // Before the keyring (and its keys) is loaded.
    let holds_keys = cli.dev || config.keyring.is_some() || config.http_listen.is_some();
    if let Err(err) = crate::mlock::apply(config.mlock, holds_keys) {
        error!("--mlock on: {err}");
        eprintln!("aesd: --mlock on: {err}");
        return ExitCode::FAILURE;
    }
    keep_connections_within_the_fd_limit(&mut config);
    info!(
        aes = backend.engine.name(),
        "AES backend: {}, because {}",
        backend.engine.name(),
        backend.reason
    );
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
    // The HTTP API's own thread: stopped (and its handlers waited for)
    // once the job port has shut down, before the runtime is.
    let mut api_thread = None;
    let code = runtime.block_on(async {
        // Installed before the port opens: a SIGTERM that arrives as soon
        // as aesd listens is a graceful shutdown, not a kill.
        let (stop, again) = shutdown_signals();
        // The HTTP API serves HTTPS with the job port's certificate
        // (--tls-cert, --tls-key) when it has one.
        let http_tls = secrets.tls.clone();
        let server = match Server::bind_with(config.clone(), secrets).await {
            Ok(server) => server,
            Err(err) => {
                eprintln!("aesd: {err}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(addr) = server.metrics_addr() {
            info!(
                metrics = %addr,
                allow = %config.metrics_allow,
                "metrics on http://{addr}/metrics for {}",
                config.metrics_allow
            );
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
        // The keyring and its HTTP API (--keyring, --dev, --http-listen).
        match crate::api_start::start(&cli, &config, &server, http_tls).await {
            Ok(thread) => api_thread = thread,
            Err(err) => {
                error!("{err}");
                eprintln!("aesd: {err}");
                return ExitCode::FAILURE;
            }
        }
        let mut readiness = Readiness::from_env(cli.pid_file.clone());
        if let Err(err) = readiness.ready(server.local_addr(), server.metrics_addr()) {
            error!("{err}");
            eprintln!("aesd: {err}");
            return ExitCode::FAILURE;
        }
        let readiness = &readiness;
        server
            .serve_until(
                async move {
                    stop.await;
                    if let Err(err) = readiness.stopping() {
                        warn!("{err}");
                    }
                },
                again,
            )
            .await;
        ExitCode::SUCCESS
    });
    if let Some(thread) = api_thread {
        thread.stop();
    }
    code
}

/// Raises the soft open-file limit to the hard one and lowers
/// `max-connections` to what it leaves, logging both.
fn keep_connections_within_the_fd_limit(config: &mut Config) {
    let limit = crate::fd_limit::raise();
    let show = |limit: Option<u64>| limit.map_or("unlimited".to_owned(), |n| n.to_string());
    if limit.now != limit.before {
        info!(
            "open-file limit raised from {} to {} (the hard limit)",
            show(limit.before),
            show(limit.now)
        );
    }
    let fits = crate::fd_limit::connections_within(limit.now, config.max_connections);
    if fits < config.max_connections {
        warn!(
            "max-connections {} lowered to {fits}: the open-file limit is {} and {} descriptors are kept for the rest (raise it: ulimit -n, LimitNOFILE=)",
            config.max_connections,
            show(limit.now),
            crate::fd_limit::RESERVED_FDS
        );
        config.max_connections = fits;
        config.max_connections_per_client = config.max_connections_per_client.min(fits);
    }
}

/// `--tls-self-signed DIR`: makes the key and certificate, prints where
/// they are, the names they carry and the pin.
fn tls_self_signed(dir: &std::path::Path) -> ExitCode {
    use crate::tls_init;
    match tls_init::make_now(dir, &tls_init::local_names(), &tls_init::local_addresses()) {
        Ok(made) => {
            println!(
                "wrote {} (mode 600) and {}",
                made.key.display(),
                made.cert.display()
            );
            println!("names: {}", made.names.join(", "));
            println!("pin: {}", made.pin);
            println!(
                "serve: aesd --tls-cert {} --tls-key {}",
                made.cert.display(),
                made.key.display()
            );
            println!(
                "clients: aescrypt --server HOST:7878 --tls-pin {} ... (or --tls-ca {})",
                made.pin,
                made.cert.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("aesd: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `--check-config FILE`: validates the file alone over the defaults.
fn check_config(path: &std::path::Path) -> ExitCode {
    let checked = ConfigLayer::from_file(path)
        .and_then(Config::resolve)
        .and_then(|config| config.load_secrets().map(|_| config))
        .map_err(|err| err.to_string())
        .and_then(|config| crate::api_start::available(false, &config).map(|()| config));
    match checked {
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

/// Installs the SIGINT and SIGTERM handlers now; the first future
/// resolves when either signal arrives (a graceful shutdown), the second
/// when one arrives again (cut the running jobs off now).
fn shutdown_signals() -> (
    impl std::future::Future<Output = ()>,
    impl std::future::Future<Output = ()>,
) {
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    let (again_tx, again_rx) = tokio::sync::oneshot::channel::<()>();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        tokio::spawn(async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    let next = async |interrupt: &mut tokio::signal::unix::Signal,
                                      terminate: &mut tokio::signal::unix::Signal| {
                        tokio::select! {
                            _ = interrupt.recv() => "SIGINT",
                            _ = terminate.recv() => "SIGTERM",
                        }
                    };
                    // Awaited outside the log macros: a macro whose level is
                    // off does not evaluate its arguments (with --log warn
                    // the first signal was never waited for).
                    let first = next(&mut interrupt, &mut terminate).await;
                    info!("{first} received");
                    let _ = first_tx.send(());
                    let again = next(&mut interrupt, &mut terminate).await;
                    warn!("{again} received again: cutting off the running jobs now");
                    let _ = again_tx.send(());
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                    let _ = first_tx.send(());
                    let _ = tokio::signal::ctrl_c().await;
                    let _ = again_tx.send(());
                }
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = first_tx.send(());
        let _ = tokio::signal::ctrl_c().await;
        let _ = again_tx.send(());
    });
    (
        async move {
            let _ = first_rx.await;
        },
        async move {
            if again_rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        },
    )
}
