//! Start-up of the keyring and its HTTP API (`--dev`, `--keyring`,
//! `--http-listen`, `--audit-log`, `--seal-transit-*`): opens the keyring
//! in its store, gives it to the job port's by-name jobs and serves the
//! API. Built with the cargo feature `http-api` (the default); an aesd
//! built without it has `api_absent.rs` in its place and refuses these
//! settings.

use tracing::{info, warn};

use crate::Server;
use crate::config::{Cli, Config};
use crate::http::ApiThread;
use crate::tls::TlsIdentity;

/// Every setting of the keyring and its API is served by this build.
pub fn available(_dev: bool, _config: &Config) -> Result<(), String> {
    Ok(())
}

/// Opens the keyring the settings ask for, if any, attaches it (and the
/// audit log) to `server`'s by-name jobs and serves the HTTP API on its own
/// thread ([`ApiThread`]: the API stops when it is dropped). Nothing when
/// no setting asks for the keyring.
pub async fn start(
    cli: &Cli,
    config: &Config,
    server: &Server,
    tls: Option<TlsIdentity>,
) -> Result<Option<ApiThread>, String> {
    let Some(api) = start_http_api(cli, config, tls.is_some()).await? else {
        return Ok(None);
    };
    server.attach_keyring(std::sync::Arc::clone(&api.state));
    if let Some(file) = &api.audit {
        server.attach_audit(std::sync::Arc::clone(file));
    }
    let limits = crate::http::HttpLimits {
        max_request_size: config.http_max_request_size,
        header_timeout: config.http_header_timeout,
        body_timeout: config.http_body_timeout,
        max_connections_per_client: config.max_connections_per_client,
        client_ipv6_prefix: config.client_ipv6_prefix,
    };
    let (state, audit, metrics) = (api.state, api.audit, server.state().metrics());
    ApiThread::start(api.listener, move |listener, stop| {
        crate::http::serve(listener, state, limits, metrics, audit, tls, async {
            let _ = stop.await;
        })
    })
    .map(Some)
    .map_err(|err| format!("cannot start the HTTP API's thread: {err}"))
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
