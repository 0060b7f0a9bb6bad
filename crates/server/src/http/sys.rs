//! `sys/`: init, unseal, seal, seal-status, health, leader (no token
//! needed but for `seal`), and the ACL policies (`sys/policy/:name`,
//! `sys/policies/acl/:name`), and `sys/audit-hash/:path` (the audit
//! log's HMAC of a known value), `sys/audit-chain/verify` (checks the
//! audit log's chain MACs without the chain key leaving aesd).

use aesd_keyring::policy::Capability;
use aesd_keyring::sealed::{SealConfig, SealType};
use aesd_keyring::token::ROOT_POLICY;
use aesd_keyring::unseal::SealStatus;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::router::{
    ApiRequest, Operation, Reply, authorize, bool_field, create_or_update, str_field, uint_field,
};
use crate::keyring_state::{KeyringState, now};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Routes `sys/<rest>`.
pub fn route(state: &KeyringState, request: &ApiRequest, rest: &str) -> Result<Reply, ApiError> {
    let op = request.operation;
    match rest {
        "init" => match op {
            Operation::Read => Ok(Reply::Raw(
                200,
                json!({ "initialized": state.status().is_some() }),
            )),
            Operation::Write => init(state, request),
            _ => Err(request.not_allowed()),
        },
        "seal-status" => match op {
            Operation::Read | Operation::Write => Ok(Reply::Raw(200, seal_status(state))),
            _ => Err(request.not_allowed()),
        },
        "unseal" => match op {
            Operation::Write => unseal(state, request),
            _ => Err(request.not_allowed()),
        },
        "seal" => match op {
            Operation::Write => {
                state.read(|open| {
                    authorize(
                        open,
                        request,
                        "sys/seal",
                        &[Capability::Update, Capability::Sudo],
                    )
                    .map(drop)
                })?;
                state.seal()?;
                Ok(Reply::NoContent)
            }
            _ => Err(request.not_allowed()),
        },
        "health" => match op {
            Operation::Read => Ok(health(state)),
            _ => Err(request.not_allowed()),
        },
        "leader" => match op {
            Operation::Read => Ok(Reply::Raw(200, json!({ "ha_enabled": false }))),
            _ => Err(request.not_allowed()),
        },
        "policy" | "policies/acl" => list_policies(state, request, rest == "policy"),
        "tools/random" => super::transit_random::route(state, request),
        _ if rest.starts_with("tools/random/") => super::transit_random::route(state, request),
        "audit-chain/verify" => match op {
            Operation::Write => verify_chain(state, request),
            _ => Err(request.not_allowed()),
        },
        _ if rest.starts_with("audit-hash/") => match op {
            Operation::Write => audit_hash(state, request),
            _ => Err(request.not_allowed()),
        },
        _ => {
            if let Some(name) = rest.strip_prefix("policy/") {
                return policy(state, request, name, true);
            }
            if let Some(name) = rest.strip_prefix("policies/acl/") {
                return policy(state, request, name, false);
            }
            state.read(|open| {
                authorize(open, request, &request.path, &[])?;
                Err(ApiError::unsupported_path(&request.path))
            })
        }
    }
}

fn status_json(state: &KeyringState, status: Option<SealStatus>) -> Value {
    let (initialized, sealed, t, n, progress) = match status {
        None => (false, true, 0, 0, 0),
        Some(s) => (true, s.sealed, s.threshold, s.shares, s.progress),
    };
    let seal_type = status.map_or_else(|| state.configured_seal_type(), |s| s.seal_type);
    let mut body = json!({
        "type": seal_type.as_str(),
        "initialized": initialized,
        "sealed": sealed,
        "t": t,
        "n": n,
        "progress": progress,
        "nonce": "",
        "version": VERSION,
        "commit_date": "",
        "migration": false,
        "recovery_seal": seal_type == SealType::Transit,
        "storage_type": state.storage_type(),
    });
    if sealed
        && let Some(failure) = state.auto_unseal_failure()
        && let Value::Object(fields) = &mut body
    {
        // aesd's own fields: why the transit seal has not unsealed it.
        fields.insert("auto_unseal_error".into(), json!(failure.message));
        fields.insert("auto_unseal_error_kind".into(), json!(failure.kind));
    }
    if !sealed && let Value::Object(fields) = &mut body {
        fields.insert("cluster_name".into(), json!("aesd"));
        fields.insert("cluster_id".into(), json!("aesd"));
    }
    body
}

fn seal_status(state: &KeyringState) -> Value {
    status_json(state, state.status())
}

fn health(state: &KeyringState) -> Reply {
    let status = state.status();
    let (code, initialized, sealed) = match status {
        None => (501, false, true),
        Some(s) if s.sealed => (503, true, true),
        Some(_) => (200, true, false),
    };
    let mut body = json!({
        "initialized": initialized,
        "sealed": sealed,
        "standby": false,
        "replication_performance_mode": "disabled",
        "replication_dr_mode": "disabled",
        "server_time_utc": now(),
        "version": VERSION,
    });
    if !sealed {
        body["cluster_name"] = json!("aesd");
        body["cluster_id"] = json!("aesd");
    }
    Reply::Raw(code, body)
}

/// The most shares `sys/init` makes (Shamir over GF(2^8)).
const MAX_SHARES: u64 = 255;

fn init(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let fields = request.fields()?;
    let transit = state.configured_seal_type() == SealType::Transit;
    // With the transit seal the recovery shares are asked for and
    // secret_shares is ignored (OpenBao's CLI sends both); otherwise
    // recovery shares are refused.
    let mut unsupported = vec!["pgp_keys", "root_token_pgp_key", "stored_shares"];
    unsupported.push(if transit {
        "recovery_pgp_keys"
    } else {
        "recovery_shares"
    });
    for name in unsupported {
        let given = match fields.get(name) {
            None | Some(Value::Null) => false,
            Some(Value::Number(n)) => n.as_u64() != Some(0),
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if given {
            return Err(ApiError::bad_request(format!(
                "{name} is not supported by aesd (docs/aesd.md, \"HTTP API\")"
            )));
        }
    }
    let (shares_field, threshold_field) = if transit {
        ("recovery_shares", "recovery_threshold")
    } else {
        ("secret_shares", "secret_threshold")
    };
    let shares = uint_field(&fields, shares_field)?
        .ok_or_else(|| ApiError::bad_request(format!("{shares_field} must be given")))?;
    let threshold = uint_field(&fields, threshold_field)?
        .ok_or_else(|| ApiError::bad_request(format!("{threshold_field} must be given")))?;
    if shares > MAX_SHARES || threshold > shares {
        return Err(ApiError::bad_request(format!(
            "invalid seal configuration: {threshold_field} {threshold} of {shares_field} {shares} (need 2 <= threshold <= shares <= 255, or 1 of 1)"
        )));
    }
    let config = SealConfig {
        threshold: u8::try_from(threshold).map_err(|_| ApiError::bad_request("bad threshold"))?,
        shares: u8::try_from(shares).map_err(|_| ApiError::bad_request("bad share count"))?,
    };
    let made = state.init(config)?;
    let hex: Vec<String> = made.shares.iter().map(|s| s.to_hex().to_string()).collect();
    let base64: Vec<String> = made
        .shares
        .iter()
        .map(|s| s.to_base64().to_string())
        .collect();
    let root_token = made.root_token.as_str();
    if made.seal_type == SealType::Transit {
        tracing::info!(
            threshold = config.threshold,
            shares = config.shares,
            "keyring initialized with the transit seal (unsealed; recovery shares made)"
        );
        let none: [&str; 0] = [];
        return Ok(Reply::Raw(
            200,
            json!({
                "keys": none,
                "keys_base64": none,
                "recovery_keys": hex,
                "recovery_keys_base64": base64,
                "root_token": root_token,
            }),
        ));
    }
    tracing::info!(
        threshold = config.threshold,
        shares = config.shares,
        "keyring initialized (sealed; unseal with the shares)"
    );
    Ok(Reply::Raw(
        200,
        json!({ "keys": hex, "keys_base64": base64, "root_token": root_token }),
    ))
}

fn unseal(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let fields = request.fields()?;
    let status = if bool_field(&fields, "reset")? == Some(true) {
        state.reset_unseal()?
    } else {
        let key = str_field(&fields, "key")?.ok_or_else(|| {
            ApiError::bad_request(
                "'key' must be specified in request body as JSON, or 'reset' set to true",
            )
        })?;
        state.submit_share(key)?
    };
    Ok(Reply::Raw(200, status_json(state, Some(status))))
}

/// `GET sys/policy` (`keys` and `policies`) or `LIST sys/policies/acl`.
fn list_policies(state: &KeyringState, request: &ApiRequest, old: bool) -> Result<Reply, ApiError> {
    let allowed = if old {
        request.operation == Operation::Read || request.operation == Operation::List
    } else {
        request.operation == Operation::List
    };
    if !allowed {
        return Err(request.not_allowed());
    }
    let (path, cap) = if old {
        ("sys/policy", Capability::Read)
    } else {
        ("sys/policies/acl/", Capability::List)
    };
    state.read(|open| {
        authorize(open, request, path, &[cap])?;
        let mut names: Vec<String> = open.policies.names().map(str::to_owned).collect();
        names.push(ROOT_POLICY.to_owned());
        names.sort();
        let data = if old {
            json!({ "keys": names, "policies": names })
        } else {
            json!({ "keys": names })
        };
        Ok(Reply::Envelope {
            data,
            auth: None,
            top: old,
        })
    })
}

/// `sys/policy/:name` (`rules`) and `sys/policies/acl/:name` (`policy`).
fn policy(
    state: &KeyringState,
    request: &ApiRequest,
    name: &str,
    old: bool,
) -> Result<Reply, ApiError> {
    let path = request.path.as_str();
    let text_field = if old { "rules" } else { "policy" };
    match request.operation {
        Operation::Read => state.read(|open| {
            authorize(open, request, path, &[Capability::Read])?;
            let name = name.to_ascii_lowercase();
            let text = if name == ROOT_POLICY {
                String::new()
            } else {
                open.policies
                    .get(&name)
                    .ok_or_else(ApiError::not_found)?
                    .text
                    .clone()
            };
            let mut data = json!({ "name": name });
            data[text_field] = json!(text);
            Ok(Reply::Envelope {
                data,
                auth: None,
                top: old,
            })
        }),
        Operation::Write => {
            let fields = request.fields()?;
            let text = match str_field(&fields, "policy")? {
                Some(text) => text,
                None => str_field(&fields, "rules")?.ok_or_else(|| {
                    ApiError::bad_request("'policy' parameter not supplied or empty")
                })?,
            };
            state.change(|open| {
                let exists = open.policies.get(name).is_some();
                authorize(open, request, path, &[create_or_update(exists)])?;
                open.policies.put(name, text)?;
                Ok(Reply::NoContent)
            })
        }
        Operation::Delete => state.change(|open| {
            authorize(open, request, path, &[Capability::Delete])?;
            match open.policies.delete(name) {
                // Deleting what is not there succeeds, as OpenBao's does.
                Ok(()) | Err(aesd_keyring::policy::PolicyStoreError::Unknown(_)) => {
                    Ok(Reply::NoContent)
                }
                Err(err) => Err(err.into()),
            }
        }),
        Operation::List => Err(request.not_allowed()),
    }
}

/// `sys/audit-hash/:path` with `input`: the `hmac-sha256:...` the audit
/// log writes for that string (any `:path`: aesd has one audit log).
/// Needs `update` on the path.
fn audit_hash(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let fields = request.fields()?;
    state.read(|open| {
        authorize(open, request, &request.path, &[Capability::Update])?;
        let input = str_field(&fields, "input")?
            .ok_or_else(|| ApiError::bad_request("missing input"))?;
        let salt = open.audit_salt().ok_or_else(|| {
            ApiError::bad_request(
                "this keyring has no audit salt yet (sealed before audit logging): any write stores one",
            )
        })?;
        Ok(Reply::data(json!({ "hash": super::audit::hmac_text(salt, input) })))
    })
}

/// Most lines one `sys/audit-chain/verify` request checks.
pub const VERIFY_MAX_LINES: usize = 65_536;

/// `sys/audit-chain/verify` (`aesd verify-audit`): `previous` (the hex
/// MAC the batch follows, empty at the log's start) and `entries`, the
/// hex of each keyed line's body digest (SHA-256) and claimed MAC, 64
/// bytes a line. Answers how many verified and the index of the first
/// that does not (`first_mismatch`, null when all do); never a MAC, so
/// the endpoint computes nothing a forger could use. Needs `update` and
/// `sudo` on the path (a root token), as OpenBao's audit paths do.
fn verify_chain(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    use crate::audit_chain::{ChainKey, Link, from_hex};
    let fields = request.fields()?;
    state.read(|open| {
        authorize(
            open,
            request,
            &request.path,
            &[Capability::Update, Capability::Sudo],
        )?;
        let previous = match str_field(&fields, "previous")?.unwrap_or("") {
            "" => None,
            hex => Some(from_hex(hex.as_bytes()).ok_or_else(|| {
                ApiError::bad_request("previous: not 64 hex digits (a chain MAC) or empty")
            })?),
        };
        let entries = str_field(&fields, "entries")?
            .ok_or_else(|| ApiError::bad_request("missing entries"))?
            .as_bytes();
        if entries.len() % 128 != 0 || entries.len() / 128 > VERIFY_MAX_LINES {
            return Err(ApiError::bad_request(format!(
                "entries: the hex of 64 bytes (digest and MAC) per line, at most {VERIFY_MAX_LINES} lines"
            )));
        }
        let salt = open.audit_salt().ok_or_else(|| {
            ApiError::bad_request("this keyring has no audit salt: no line was chained under it")
        })?;
        let key = ChainKey::derive(salt);
        let mut previous: Option<Link> = previous;
        let mut first_mismatch = None;
        for (index, entry) in entries.chunks_exact(128).enumerate() {
            let (Some(digest), Some(claimed)) =
                (from_hex(&entry[..64]), from_hex(&entry[64..]))
            else {
                return Err(ApiError::bad_request(format!(
                    "entries: line {index} is not hex"
                )));
            };
            if !key.verify(previous.as_ref(), &digest, &claimed) {
                first_mismatch = Some(index);
                break;
            }
            previous = Some(claimed);
        }
        let verified = first_mismatch.unwrap_or(entries.len() / 128);
        Ok(Reply::data(json!({
            "verified": verified,
            "first_mismatch": first_mismatch,
        })))
    })
}
