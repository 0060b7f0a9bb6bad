//! Each board watches its fleet's prefix: a change another board stored
//! is loaded within a poll (about a second), and the held keyring
//! swapped. The watch runs on a thread of its own (blocking I/O, never
//! on the async runtime):
//!
//! ```text
//!  connect ─► watch P/ created ─► catch up (load the newest) ─► events ─► load ...
//!     ▲            every 5 s idle: load (also checks etcd answers)    │
//!     └────── stream closed / load failed: retry every 0.5 s ◄──────────┘
//! ```
//!
//! While etcd is unreachable the board keeps the keyring it holds
//! (encrypt and decrypt go on; changes are refused by the store); when
//! etcd answers again the watch reconnects and catches up.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use portable_atomic::Ordering;

use super::client::{EtcdClient, EtcdError, WatchRead, b64};
use super::store::{EtcdStats, prefix_end};

/// How long a read of the watch stream waits before looking around.
pub const POLL: Duration = Duration::from_secs(1);

/// With no event for this long, the newest generation is read anyway
/// (a lost stream that TCP has not noticed yet, a missed event).
pub const PROBE_EVERY: Duration = Duration::from_secs(5);

/// Wait between reconnection attempts while etcd is unreachable.
pub const RETRY: Duration = Duration::from_millis(500);

/// Starts the watch of `dir` (`P/`): `load` runs once the watch is
/// established, on each event and every [`PROBE_EVERY`] without one; it
/// loads the newest generation and says whether etcd answered. While no
/// endpoint can be reached, `stats.reachable` is 0 (the metric
/// `aesd_keyring_storage_up`), whether or not a change was tried.
pub fn spawn(
    client: Arc<EtcdClient>,
    dir: String,
    stats: Arc<EtcdStats>,
    load: impl Fn() -> Result<(), String> + Send + 'static,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("etcd-watch".into())
        .spawn(move || run(&client, &dir, &stats, &load))
}

fn run(client: &EtcdClient, dir: &str, stats: &EtcdStats, load: &dyn Fn() -> Result<(), String>) {
    let request = json!({
        "create_request": {
            "key": b64(dir.as_bytes()),
            "range_end": b64(&prefix_end(dir.as_bytes())),
        }
    });
    let mut down_since: Option<Instant> = None;
    loop {
        let outcome = client
            .stream("/v3/watch", &request, POLL)
            .map_err(|err| {
                if matches!(err, EtcdError::Unreachable(_)) {
                    stats.reachable.store(0, Ordering::Relaxed);
                }
                err.to_string()
            })
            .and_then(|mut watch| {
                let endpoint = watch.endpoint().to_owned();
                follow(&mut watch, load, &mut down_since, &endpoint)
            });
        if let Err(why) = outcome {
            if down_since.is_none() {
                tracing::warn!(
                    "keyring watch lost ({why}): this board keeps its keyring, changes are refused until etcd answers again"
                );
                down_since = Some(Instant::now());
            }
        }
        thread::sleep(RETRY);
    }
}

/// Follows one watch stream until it ends (`Err`: why).
fn follow(
    watch: &mut super::client::WatchConn,
    load: &dyn Fn() -> Result<(), String>,
    down_since: &mut Option<Instant>,
    endpoint: &str,
) -> Result<(), String> {
    let mut created = false;
    let mut last = Instant::now();
    loop {
        match watch.next() {
            WatchRead::Message(message) => {
                let result = message.get("result").unwrap_or(&Value::Null);
                if let Some(error) = message.get("error") {
                    return Err(format!("watch error: {error}"));
                }
                if result.get("canceled").and_then(Value::as_bool) == Some(true) {
                    return Err("etcd canceled the watch".to_owned());
                }
                let events = result
                    .get("events")
                    .and_then(Value::as_array)
                    .is_some_and(|events| !events.is_empty());
                if !created || events {
                    load()?;
                    last = Instant::now();
                }
                if !created {
                    created = true;
                    if let Some(since) = down_since.take() {
                        tracing::info!(
                            "keyring watch back on {endpoint} after {:.1} s; caught up",
                            since.elapsed().as_secs_f64()
                        );
                    } else {
                        tracing::info!("keyring watch on {endpoint}");
                    }
                }
            }
            WatchRead::Idle => {
                if last.elapsed() >= PROBE_EVERY {
                    load()?;
                    last = Instant::now();
                }
            }
            WatchRead::Closed(why) => return Err(why),
        }
    }
}
