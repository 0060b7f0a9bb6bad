//! The sealed keyring in etcd ([`KeyringStore`]), under a fleet's
//! prefix P:
//!
//! ```text
//!  P/generation   the newest generation, decimal ("7")
//!  P/sealed       its sealed bytes (aesd-keyring's sealed format: the
//!                 header in the clear, the rest AES-256-GCM under the
//!                 root key; no key, share or token in the clear)
//!  P/written-at   when it was written, Unix milliseconds (watch lag)
//! ```
//!
//! `put(N, bytes)` is one transaction: if `P/generation` is `N-1` (for
//! N = 1: if it does not exist), write all three keys; else read
//! `P/generation` and report [`StoreError::Conflict`] with it. Two boards
//! storing generation N at once: exactly one wins. A read is one range
//! over `P/`, so the generation and the bytes come from one revision.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aesd_keyring::sealed::{self, MAX_SEALED_LEN};
use aesd_keyring::store::{KeyringStore, StoreError, Stored};
use portable_atomic::{AtomicU64, Ordering};
use serde_json::{Value, json};

use super::client::{EtcdClient, EtcdError, b64, unb64};

/// What the etcd store counts, for the metrics.
#[derive(Debug, Default)]
pub struct EtcdStats {
    /// Requests to etcd that failed (unreachable, refused, malformed).
    pub errors: AtomicU64,
    /// `P/written-at` of the generation last read, Unix ms (0: none).
    pub written_at_ms: AtomicU64,
    /// Milliseconds from that write to this board reading it.
    pub lag_ms: AtomicU64,
    /// 1 while etcd answers, 0 since a request failed to reach it.
    pub reachable: AtomicU64,
}

/// The keyring of one fleet in etcd.
#[derive(Debug)]
pub struct EtcdStore {
    client: Arc<EtcdClient>,
    prefix: String,
    stats: Arc<EtcdStats>,
}

/// Unix milliseconds now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The key just after every key starting with `prefix` (etcd's
/// `range_end` for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl EtcdStore {
    /// The store under `prefix` (`/aesd/fleet1`).
    pub fn new(client: Arc<EtcdClient>, prefix: &str) -> Self {
        EtcdStore {
            client,
            prefix: prefix.to_owned(),
            stats: Arc::new(EtcdStats::default()),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<EtcdStats> {
        Arc::clone(&self.stats)
    }

    /// The client (the watch shares it).
    pub fn client(&self) -> Arc<EtcdClient> {
        Arc::clone(&self.client)
    }

    /// `P/`: what the watch watches.
    pub fn dir(&self) -> String {
        format!("{}/", self.prefix)
    }

    fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    fn call(&self, path: &str, body: &Value) -> Result<Value, StoreError> {
        match self.client.call(path, body) {
            Ok(answer) => {
                self.stats.reachable.store(1, Ordering::Relaxed);
                Ok(answer)
            }
            Err(err) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                if matches!(err, EtcdError::Unreachable(_)) {
                    self.stats.reachable.store(0, Ordering::Relaxed);
                }
                Err(self.store_error(err))
            }
        }
    }

    fn store_error(&self, err: EtcdError) -> StoreError {
        match err {
            EtcdError::Unreachable(reason) => StoreError::Unavailable {
                store: format!("etcd {}", self.client.endpoints()),
                reason,
            },
            other => self.invalid(other.to_string()),
        }
    }

    fn invalid(&self, reason: String) -> StoreError {
        StoreError::Invalid {
            store: format!("etcd {}{}", self.client.endpoints(), self.prefix),
            reason,
        }
    }

    /// The generation in a `P/generation` value.
    fn parse_generation(&self, value: &[u8]) -> Result<u64, StoreError> {
        std::str::from_utf8(value)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| {
                self.invalid(format!(
                    "{} is not a generation number",
                    self.key("generation")
                ))
            })
    }
}

impl KeyringStore for EtcdStore {
    fn load_newest(&self) -> Result<Option<Stored>, StoreError> {
        let dir = self.dir();
        let answer = self.call(
            "/v3/kv/range",
            &json!({ "key": b64(dir.as_bytes()), "range_end": b64(&prefix_end(dir.as_bytes())) }),
        )?;
        let kvs = match answer.get("kvs") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(kvs)) => kvs,
            Some(_) => return Err(self.invalid("range answer without a kvs list".into())),
        };
        let (mut generation, mut sealed_bytes, mut written_at) = (None, None, None);
        for kv in kvs {
            let key = unb64(kv, "key").map_err(|e| self.invalid(e))?;
            let value = unb64(kv, "value").map_err(|e| self.invalid(e))?;
            if key == self.key("generation").as_bytes() {
                generation = Some(self.parse_generation(&value)?);
            } else if key == self.key("sealed").as_bytes() {
                sealed_bytes = Some(value);
            } else if key == self.key("written-at").as_bytes() {
                written_at = self.parse_generation(&value).ok();
            }
        }
        let (generation, sealed_bytes) = match (generation, sealed_bytes) {
            (None, None) => return Ok(None),
            (Some(g), Some(s)) => (g, s),
            _ => {
                return Err(self.invalid(format!(
                    "{} and {} must both exist (one is missing)",
                    self.key("generation"),
                    self.key("sealed")
                )));
            }
        };
        if sealed_bytes.len() > MAX_SEALED_LEN {
            return Err(StoreError::TooLarge(sealed_bytes.len()));
        }
        let header = sealed::read_header(&sealed_bytes)
            .map_err(|err| self.invalid(format!("{}: {err}", self.key("sealed"))))?;
        if header.generation != generation {
            return Err(self.invalid(format!(
                "{} says {generation}, the sealed header {}",
                self.key("generation"),
                header.generation
            )));
        }
        if let Some(at) = written_at {
            if self.stats.written_at_ms.swap(at, Ordering::Relaxed) != at {
                self.stats
                    .lag_ms
                    .store(now_ms().saturating_sub(at), Ordering::Relaxed);
            }
        }
        Ok(Some(Stored {
            generation,
            sealed: sealed_bytes,
            skipped: Vec::new(),
        }))
    }

    fn put(&self, generation: u64, sealed_bytes: &[u8]) -> Result<(), StoreError> {
        if sealed_bytes.len() > MAX_SEALED_LEN {
            return Err(StoreError::TooLarge(sealed_bytes.len()));
        }
        let generation_key = b64(self.key("generation").as_bytes());
        let compare = if generation <= 1 {
            json!({ "target": "CREATE", "result": "EQUAL", "key": generation_key, "create_revision": "0" })
        } else {
            json!({
                "target": "VALUE",
                "result": "EQUAL",
                "key": generation_key,
                "value": b64((generation - 1).to_string().as_bytes()),
            })
        };
        let put = |name: &str, value: &[u8]| json!({ "request_put": { "key": b64(self.key(name).as_bytes()), "value": b64(value) } });
        let txn = json!({
            "compare": [compare],
            "success": [
                put("generation", generation.to_string().as_bytes()),
                put("sealed", sealed_bytes),
                put("written-at", now_ms().to_string().as_bytes()),
            ],
            "failure": [{ "request_range": { "key": generation_key } }],
        });
        let answer = self.call("/v3/kv/txn", &txn)?;
        if answer.get("succeeded").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let newest = answer
            .pointer("/responses/0/response_range/kvs/0")
            .map(|kv| unb64(kv, "value").map_err(|e| self.invalid(e)))
            .transpose()?
            .map(|value| self.parse_generation(&value))
            .transpose()?
            .unwrap_or(0);
        Err(StoreError::Conflict { generation, newest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_bound_the_prefix() {
        assert_eq!(prefix_end(b"/aesd/"), b"/aesd0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), [0]);
    }
}
