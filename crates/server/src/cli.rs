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
    runtime.block_on(async {
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
        match start_http_api(&cli, &config, http_tls.is_some()).await {
            Ok(Some(api)) => {
                server.attach_keyring(std::sync::Arc::clone(&api.state));
                if let Some(file) = &api.audit {
                    server.attach_audit(std::sync::Arc::clone(file));
                }
                tokio::spawn(crate::http::serve(
                    api.listener,
                    api.state,
                    crate::http::HttpLimits {
                        max_request_size: config.http_max_request_size,
                        header_timeout: config.http_header_timeout,
                        body_timeout: config.http_body_timeout,
                        max_connections_per_client: config.max_connections_per_client,
                        client_ipv6_prefix: config.client_ipv6_prefix,
                    },
                    server.state().metrics(),
                    api.audit,
                    http_tls,
                    std::future::pending(),
                ));
            }
            Ok(None) => {}
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
    })
}

/// The HTTP API's listener and the keyring it serves.
struct HttpApi {
    listener: tokio::net::TcpListener,
    state: std::sync::Arc<crate::keyring_state::KeyringState>,
    /// `--audit-log`, opened.
    audit: Option<std::sync::Arc<crate::audit_file::AuditFile>>,
}

/// The address `--dev` serves on without `--http-listen` (bao's).
const DEV_HTTP_LISTEN: ([u8; 4], u16) = ([127, 0, 0, 1], 8200);

/// Opens the keyring (`--keyring DIR`: sealed; `--dev`: in memory,
/// unsealed, its unseal key and root token printed) and binds
/// `--http-listen`. `None` when neither asks for the API.
async fn start_http_api(cli: &Cli, config: &Config, tls: bool) -> Result<Option<HttpApi>, String> {
    use crate::keyring_state::KeyringState;
    if cli.dev && config.seal_transit_address.is_some() {
        return Err(
            "--dev with --seal-transit-address: --dev keeps its keyring in memory, unsealed (the transit seal needs --keyring)"
                .into(),
        );
    }
    let state = if cli.dev {
        let dev = KeyringState::dev(cli.dev_root_token_id.as_deref())
            .map_err(|err| format!("--dev: {err}"))?;
        println!("aesd --dev: the keyring is in memory and unsealed; it is lost at exit.");
        println!("Unseal Key: {}", dev.share.to_base64().as_str());
        println!("Root Token: {}", dev.root_token.as_str());
        std::sync::Arc::new(dev.state)
    } else if let Some(location) = &config.keyring {
        open_keyring(location, config)?
    } else {
        if let Some(addr) = config.http_listen {
            warn!(
                "--http-listen {addr} without --keyring or --dev: an empty, uninitialised keyring in memory (bao operator init makes one that is lost at exit)"
            );
        } else {
            if config.audit_log.is_some() {
                warn!(
                    "--audit-log without the HTTP API (--http-listen, --keyring or --dev): nothing to audit"
                );
            }
            return Ok(None);
        }
        KeyringState::open(
            Box::new(aesd_keyring::store::MemoryStore::default()),
            "inmem",
        )
        .map(std::sync::Arc::new)
        .map_err(|err| err.to_string())?
    };
    let sealed = state.status().is_none_or(|s| s.sealed);
    let Some(addr) = config
        .http_listen
        .or(cli.dev.then(|| std::net::SocketAddr::from(DEV_HTTP_LISTEN)))
    else {
        warn!("--keyring without --http-listen: nothing can unseal it yet");
        return Ok(None);
    };
    let audit = match &config.audit_log {
        Some(path) => Some(std::sync::Arc::new(
            crate::audit_file::AuditFile::open(
                path,
                (config.audit_log_max_bytes > 0).then_some(crate::audit_file::Rotation {
                    max_bytes: config.audit_log_max_bytes,
                    keep: config.audit_log_keep,
                }),
            )
            .map_err(|err| format!("--audit-log {}: {err}", path.display()))?,
        )),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| format!("cannot listen for the HTTP API on {addr}: {err}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let scheme = if tls { "https" } else { "http" };
    info!(
        http = %bound,
        sealed,
        "HTTP API listening on {scheme}://{bound} (keyring {})",
        if sealed { "sealed" } else { "unsealed" }
    );
    if let Some(path) = &config.audit_log {
        info!(audit_log = %path.display(), "HTTP API audit log: {}", path.display());
    }
    Ok(Some(HttpApi {
        listener,
        state,
        audit,
    }))
}

/// `--keyring DIR` or `--keyring etcd://...`: the keyring in its store;
/// with etcd, the watch that loads other boards' changes runs from here.
fn open_keyring(
    location: &crate::etcd::KeyringLocation,
    config: &Config,
) -> Result<std::sync::Arc<crate::keyring_state::KeyringState>, String> {
    use crate::etcd::{EtcdClient, EtcdStore, KeyringLocation};
    use crate::keyring_state::KeyringState;
    let failed = |err: &dyn std::fmt::Display| format!("--keyring {location}: {err}");
    match location {
        KeyringLocation::Dir(dir) => {
            let store = aesd_keyring::store::DirStore::open(dir).map_err(|e| failed(&e))?;
            let state = KeyringState::open(Box::new(store), "file").map_err(|e| failed(&e))?;
            let state = with_transit_seal(state, config)?;
            crate::metrics::keyring::attach(std::sync::Arc::clone(&state), None);
            Ok(state)
        }
        KeyringLocation::Etcd(target) => {
            let tls = config.etcd_tls_files().map_err(|e| failed(&e))?;
            let client = EtcdClient::new(target, &tls).map_err(|e| failed(&e))?;
            let store = EtcdStore::new(std::sync::Arc::new(client), &target.prefix);
            let (client, dir, stats) = (store.client(), store.dir(), store.stats());
            // A board that starts while etcd is down cannot know the
            // fleet's keyring: it refuses to start (a supervisor
            // restarts it) rather than offer `sys/init` on an empty one.
            let state = with_transit_seal(
                KeyringState::open(Box::new(store), "etcd").map_err(|e| failed(&e))?,
                config,
            )?;
            let watched = std::sync::Arc::clone(&state);
            crate::etcd::watch::spawn(client, dir, std::sync::Arc::clone(&stats), move || {
                watched.refresh().map(drop).map_err(|err| err.to_string())
            })
            .map_err(|e| failed(&e))?;
            info!("keyring in {location}, watched");
            crate::metrics::keyring::attach(std::sync::Arc::clone(&state), Some(stats));
            Ok(state)
        }
    }
}

/// `--seal-transit-*`: the keyring gets the transit seal and the
/// auto-unseal loop starts; a keyring sealed under the other seal is
/// reported (aesd does not migrate seals).
fn with_transit_seal(
    state: crate::keyring_state::KeyringState,
    config: &Config,
) -> Result<std::sync::Arc<crate::keyring_state::KeyringState>, String> {
    use aesd_keyring::sealed::SealType;
    let stored = state.status().map(|status| status.seal_type);
    let (Some(address), Some(key_name), Some(token_file)) = (
        &config.seal_transit_address,
        &config.seal_transit_key_name,
        &config.seal_transit_token_file,
    ) else {
        if stored == Some(SealType::Transit) {
            warn!(
                "the keyring uses the transit seal but no --seal-transit-address is given: unseal it with the recovery shares"
            );
        }
        return Ok(std::sync::Arc::new(state));
    };
    let seal = crate::transit_seal::TransitSeal::new(
        address.clone(),
        config.seal_transit_ca_cert.as_deref(),
        &config.seal_transit_mount_path,
        key_name,
        token_file,
    )?;
    if !address.tls && !address.is_loopback() {
        warn!(
            "--seal-transit-address {address} is not loopback: the root key crosses that network in plain HTTP at init and at every start"
        );
    }
    if stored == Some(SealType::Shamir) {
        warn!(
            "the keyring uses the shamir seal: --seal-transit-* is not used for it (aesd does not migrate seals); unseal it with its shares"
        );
    }
    info!(
        "transit seal: {} (auto-unseal at start, retried while it fails)",
        seal.describe()
    );
    let state = std::sync::Arc::new(state.with_transit_seal(seal));
    crate::transit_seal::retry::spawn(std::sync::Arc::clone(&state))
        .map_err(|err| format!("cannot start the auto-unseal thread: {err}"))?;
    Ok(state)
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
        .and_then(|config| config.load_secrets().map(|_| config));
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
