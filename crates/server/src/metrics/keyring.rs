//! The keyring's figures, read at scrape time: its generation on this
//! board (boards of one fleet should agree: the `AesdKeyringGenerationsDiffer`
//! alert), and with `--keyring etcd://...` the watch lag, whether etcd
//! answers and the failed requests to it.
//!
//! The keyring is opened after the job server (and its metrics) are
//! built, so it is attached here once, process-wide, when it opens.

use std::sync::{Arc, OnceLock};

use portable_atomic::Ordering;
use prometheus_client::encoding::DescriptorEncoder;

use super::{counter, gauge};
use crate::etcd::EtcdStats;
use crate::keyring_state::KeyringState;

/// The keyring of this process and its store's figures.
struct Attached {
    state: Arc<KeyringState>,
    etcd: Option<Arc<EtcdStats>>,
}

static ATTACHED: OnceLock<Attached> = OnceLock::new();

/// Shows `state` (and, with etcd, `etcd`) in the metrics from now on
/// (the first call wins; aesd opens one keyring).
pub fn attach(state: Arc<KeyringState>, etcd: Option<Arc<EtcdStats>>) {
    let _ = ATTACHED.set(Attached { state, etcd });
}

/// Writes the keyring's series, if a keyring is attached.
pub fn encode(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let Some(attached) = ATTACHED.get() else {
        return Ok(());
    };
    gauge(
        encoder,
        "aesd_keyring_generation",
        "Generation of the sealed keyring this board holds (0 before sys/init); the boards of one fleet agree once each has loaded the newest",
        i64::try_from(attached.state.generation()).unwrap_or(i64::MAX),
    )?;
    let Some(etcd) = &attached.etcd else {
        return Ok(());
    };
    gauge(
        encoder,
        "aesd_keyring_watch_lag_seconds",
        "From the write of the newest generation this board loaded (the writer's clock) to this board loading it",
        etcd.lag_ms.load(Ordering::Relaxed) as f64 / 1000.0,
    )?;
    gauge(
        encoder,
        "aesd_keyring_storage_up",
        "1 while etcd answered the last request, 0 since one could not reach it (changes are refused then)",
        i64::try_from(etcd.reachable.load(Ordering::Relaxed)).unwrap_or(0),
    )?;
    counter(
        encoder,
        "aesd_keyring_storage_errors",
        "Requests to the keyring's etcd that failed (unreachable, refused or malformed answers)",
        etcd.errors.load(Ordering::Relaxed),
    )
}
