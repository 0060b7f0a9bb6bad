//! The audit log's lines for the job port's by-name jobs (key source 5),
//! as the HTTP API's: a `request` line when the job starts, before its
//! token is checked or any key used, and a `response` line when it ends.
//! Each names the time, the client's address, the token's accessor and
//! policies (never the token), the key, the operation (`encrypt`,
//! `decrypt`, `rewrap`, `datakey`, `unwrap`, `datakey-wrapped`) and the
//! Transit path its token was checked for ([`transit_path`]); the
//! response line adds the key version used (`key_version`; a rewrap's
//! new one in `new_key_version`), the bytes in and out and the error code
//! (null on success). No plaintext, key or token is written.
//!
//! A request line that cannot be written refuses the job with
//! `audit_failed` (counted in `aesd_errors_total{kind="audit_write"}`),
//! as Vault refuses requests no audit device can record. A response line
//! that cannot be written is counted and logged (the job is over).
//!
//! One [`AuditedKeys`] per connection wraps the server's keyring; the
//! connection runs one job at a time, so it holds at most one job's record.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use aesd_core::connection::JobReport;
use aesd_core::named_key::{NamedKeyError, NamedKeys};
use aesd_proto::{ErrorCode, Operation};
use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::audit_file::AuditFile;
use crate::keyring_state::{KeyringState, StateError, now};
use crate::metrics::Metrics;
use crate::named_keys::transit_path;

/// A connection's by-name jobs, audited.
pub struct AuditedKeys {
    keys: Arc<dyn NamedKeys>,
    state: Arc<KeyringState>,
    file: Arc<AuditFile>,
    metrics: Arc<Metrics>,
    peer: SocketAddr,
    job: Mutex<Option<JobRecord>>,
}

impl std::fmt::Debug for AuditedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditedKeys")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// The running job, as its lines tell it.
struct JobRecord {
    request_id: String,
    caller: Value,
    key: String,
    operation: Operation,
    /// The version that opened the file (decrypt, rewrap, unwrap).
    opened_with: Option<u32>,
    /// The version that wrapped the new file key (encrypt, rewrap, datakey,
    /// datakey-wrapped).
    wrapped_with: Option<u32>,
}

impl AuditedKeys {
    /// `keys`, auditing into `file` the jobs of the client at `peer`.
    pub fn new(
        keys: Arc<dyn NamedKeys>,
        state: Arc<KeyringState>,
        file: Arc<AuditFile>,
        metrics: Arc<Metrics>,
        peer: SocketAddr,
    ) -> Self {
        AuditedKeys {
            keys,
            state,
            file,
            metrics,
            peer,
            job: Mutex::new(None),
        }
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Option<JobRecord>> {
        self.job.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The line's common members.
    fn common(&self, kind: &str, job: &JobRecord) -> Value {
        json!({
            "time": crate::http::rfc3339_now(),
            "type": kind,
            "request_id": job.request_id,
            "auth": job.caller,
            "remote_address": self.peer.ip().to_string(),
            "remote_port": self.peer.port(),
            "port": "job",
            "operation": job.operation.name(),
            "path": transit_path(job.operation, &job.key),
            "key": job.key,
        })
    }

    fn write(&self, line: &Value) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(line).expect("a JSON object serialises");
        self.file
            .append(&bytes, self.state.audit_salt().as_ref())
            .inspect_err(|_| self.metrics.error("audit_write"))
    }

    /// The job's end: its response line (if a by-name job was started).
    pub fn job_ended(&self, report: &JobReport) {
        let (bytes, error) = match report.result {
            Ok(done) => ((Some(done.bytes_in), Some(done.bytes_out)), None),
            Err(kind) => ((None, None), Some(kind)),
        };
        self.finish(bytes, error);
    }

    /// The connection closed: a job still running ended with it.
    pub fn connection_closed(&self) {
        self.finish((None, None), Some("connection_closed"));
    }

    fn finish(&self, (bytes_in, bytes_out): (Option<u64>, Option<u64>), error: Option<&str>) {
        let Some(job) = self.record().take() else {
            return;
        };
        let mut line = self.common("response", &job);
        let (version, new_version) = match job.operation {
            Operation::Encrypt | Operation::DataKey | Operation::DataKeyWrapped => {
                (job.wrapped_with, None)
            }
            Operation::Decrypt | Operation::Unwrap => (job.opened_with, None),
            Operation::Rewrap => (job.opened_with, job.wrapped_with),
        };
        line["key_version"] = json!(version);
        if job.operation == Operation::Rewrap {
            line["new_key_version"] = json!(new_version);
        }
        line["bytes_in"] = json!(bytes_in);
        line["bytes_out"] = json!(bytes_out);
        line["error"] = json!(error);
        if let Err(err) = self.write(&line) {
            tracing::error!(
                path = %self.file.path().display(),
                peer = %self.peer,
                "audit log cannot be written: a by-name job's end is not recorded: {err}"
            );
        }
    }
}

impl NamedKeys for AuditedKeys {
    fn authorize(
        &self,
        token: Option<&[u8]>,
        name: &str,
        operation: Operation,
    ) -> Result<(), NamedKeyError> {
        let caller = token
            .and_then(|token| std::str::from_utf8(token).ok())
            .and_then(|token| {
                self.state
                    .read(|open| {
                        Ok::<_, StateError>(open.tokens.lookup(token, now()).ok().map(|entry| {
                            json!({
                                "accessor": entry.accessor,
                                "policies": entry.policies,
                                "display_name": entry.display_name,
                            })
                        }))
                    })
                    .ok()
                    .flatten()
            })
            .unwrap_or_else(|| json!({ "accessor": null, "policies": null, "display_name": null }));
        let job = JobRecord {
            request_id: crate::http::request_id(),
            caller,
            key: name.to_owned(),
            operation,
            opened_with: None,
            wrapped_with: None,
        };
        let line = self.common("request", &job);
        if let Err(err) = self.write(&line) {
            tracing::error!(
                path = %self.file.path().display(),
                peer = %self.peer,
                "audit log cannot be written, by-name job refused: {err}"
            );
            return Err(NamedKeyError::new(
                ErrorCode::AuditFailed,
                "the server's audit log cannot be written: by-name jobs are refused until it can (see aesd's log)",
            ));
        }
        *self.record() = Some(job);
        self.keys.authorize(token, name, operation)
    }

    fn wrap(
        &self,
        name: &str,
        file_key: &[u8; 16],
        aad: &[u8],
    ) -> Result<(u32, Vec<u8>), NamedKeyError> {
        let wrapped = self.keys.wrap(name, file_key, aad)?;
        if let Some(job) = self.record().as_mut() {
            job.wrapped_with = Some(wrapped.0);
        }
        Ok(wrapped)
    }

    fn unwrap(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        aad: &[u8],
    ) -> Result<Zeroizing<[u8; 16]>, NamedKeyError> {
        if let Some(job) = self.record().as_mut() {
            job.opened_with = Some(version);
        }
        self.keys.unwrap(name, version, sealed, aad)
    }
}
