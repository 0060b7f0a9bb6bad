//! The embedded server: an aesd in the process when no `--server` is
//! given.

use aesd_load::by_name::KeyByName;
use aesd_load::load::{Arrival, LoadPlan};
use aesd_server::ConfigLayer;
use anyhow::{Context, Result};

use crate::args::Args;

/// The embedded server's chunk size: 256 KiB (`aesload --suite large` on
/// a 2-core host: 726 MB/s against 657 with aesd's 64 KiB; 1 MiB did no
/// better than 256 KiB; docs/performance.md).
pub(crate) const EMBEDDED_CHUNK_SIZE: u32 = 262_144;

/// An aesd on 127.0.0.1 (ephemeral port) with room in its queue for
/// every client that may wait at once, so an embedded run never sees
/// `busy`: a whole batch, or every client of an open-loop run.
///
/// By name (`key`), each transfer runs two jobs at once (its encryption
/// and the verifying decryption), so the queue has room for twice as
/// many; the server gets an in-memory keyring as `aesd --dev` makes one,
/// unsealed, with the key created and the key's token as root token.
pub(crate) async fn start_embedded(
    args: &Args,
    plans: &[(String, LoadPlan)],
    key: Option<&KeyByName>,
) -> Result<aesd_server::RunningServer> {
    let jobs_per_transfer = if key.is_some() { 2 } else { 1 };
    let waiting = jobs_per_transfer
        * plans
            .iter()
            .map(|(_, plan)| match plan.arrival {
                Arrival::Batches(batch) => batch,
                Arrival::Rate(_) => plan.clients,
            })
            .max()
            .unwrap_or(0);
    let defaults =
        aesd_server::Config::resolve(ConfigLayer::default()).context("aesd's default settings")?;
    let server = aesd_server::start_loopback(ConfigLayer {
        workers: args.workers,
        max_active: args.max_active,
        max_queue: Some(waiting.max(64)),
        // Every connection comes from 127.0.0.1 too; by name, two per
        // transfer (the thousand suite's batch of 50 needs 100), and room
        // for the last batch's, which the server may not have seen close
        // yet when the next one connects.
        max_connections: key.map(|_| (2 * waiting).max(1024)),
        max_connections_per_client: key.map(|_| (2 * waiting).max(64)),
        // Every load client comes from 127.0.0.1: one "client" for the
        // per-client caps, which would otherwise shape the load.
        max_active_per_client: Some(1 << 20),
        max_queued_per_client: Some(1 << 20),
        min_input_rate: Some(0),
        chunk_size: Some(args.embedded_chunk_size),
        // With --key, the file holds the keyring token, not the port's.
        token_file: match key {
            Some(_) => None,
            None => args.keys.token_file.clone(),
        },
        tls_cert: args.embedded_tls_cert.clone(),
        tls_key: args.embedded_tls_key.clone(),
        // Every job comes from 127.0.0.1: no PBKDF2 budget per client.
        kdf_budget: Some(0),
        min_iter: Some(1),
        max_iter: Some(args.iterations.max(defaults.max_iter)),
        ..ConfigLayer::default()
    })
    .await
    .context("starting the embedded server")?;
    if let Some(key) = key {
        let root_token = std::str::from_utf8(key.token.as_bytes())
            .context("--token-file: the keyring token is not text")?;
        server
            .attach_dev_keyring(Some(root_token), &[key.name.as_str()])
            .context("the embedded server's keyring (--key, --token-file)")?;
    }
    Ok(server)
}
