//! `auth/token/`: create, lookup-self, renew-self, revoke-self, revoke.
//! The `-self` endpoints take any live token, as OpenBao's `default`
//! policy grants them; the others need their capability.

use aesd_keyring::OsEntropy;
use aesd_keyring::policy::Capability;
use aesd_keyring::token::{ROOT_POLICY, TokenEntry};
use serde_json::{Value, json};

use super::errors::ApiError;
use super::router::{ApiRequest, Operation, Reply, authorize, duration_field, str_field};
use crate::keyring_state::{KeyringState, now};

/// The policy OpenBao gives every token unless told not to.
const DEFAULT_POLICY: &str = "default";

/// Routes `auth/token/<rest>`.
pub fn route(state: &KeyringState, request: &ApiRequest, rest: &str) -> Result<Reply, ApiError> {
    let path = request.path.as_str();
    let write = request.operation == Operation::Write;
    match rest {
        "create" if write => create(state, request),
        "lookup-self" if write || request.operation == Operation::Read => state.read(|open| {
            let entry = authorize(open, request, path, &[])?;
            let mut data = lookup_json(&entry);
            // The caller's own token, as OpenBao shows it.
            data["id"] = json!(request.token.as_ref().map_or("", |t| t.as_str()));
            Ok(Reply::data(data))
        }),
        "renew-self" if write => {
            let fields = request.fields()?;
            let increment = duration_field(&fields, "increment")?.filter(|&i| i > 0);
            state.change(|open| {
                authorize(open, request, path, &[])?;
                let token = request
                    .token
                    .as_ref()
                    .ok_or_else(ApiError::permission_denied)?;
                let entry = open.tokens.renew(token, increment, now())?;
                Ok(auth_reply(None, &entry))
            })
        }
        "revoke-self" if write => state.change(|open| {
            authorize(open, request, path, &[])?;
            let token = request
                .token
                .as_ref()
                .ok_or_else(ApiError::permission_denied)?;
            open.tokens.revoke(token)?;
            Ok(Reply::NoContent)
        }),
        "revoke" if write => {
            let fields = request.fields()?;
            let target = str_field(&fields, "token")?
                .filter(|t| !t.is_empty())
                .ok_or_else(|| ApiError::bad_request("missing token ID"))?
                .to_owned();
            state.change(|open| {
                authorize(open, request, path, &[Capability::Update])?;
                // An unknown token: nothing to revoke, success as OpenBao.
                let _ = open.tokens.revoke(&target);
                Ok(Reply::NoContent)
            })
        }
        "create" | "lookup-self" | "renew-self" | "revoke-self" | "revoke" => state.read(|open| {
            authorize(open, request, path, &[])?;
            Err(request.not_allowed())
        }),
        _ => state.read(|open| {
            authorize(open, request, path, &[])?;
            Err(ApiError::unsupported_path(path))
        }),
    }
}

fn create(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let fields = request.fields()?;
    let mut policies: Vec<String> = match fields.get("policies") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(|s| s.trim().to_ascii_lowercase())
                    .ok_or_else(|| ApiError::bad_request("policies: not a list of names"))
            })
            .collect::<Result<_, _>>()?,
        Some(Value::String(list)) => list
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect(),
        Some(_) => return Err(ApiError::bad_request("policies: not a list of names")),
    };
    let no_default = super::router::bool_field(&fields, "no_default_policy")?.unwrap_or(false);
    let ttl = duration_field(&fields, "ttl")?.unwrap_or(0);
    let id = str_field(&fields, "id")?.map(str::to_owned);
    let display_name = str_field(&fields, "display_name")?
        .map_or_else(|| "token".to_owned(), |name| format!("token-{name}"));
    state.change(|open| {
        let parent = authorize(open, request, &request.path, &[Capability::Update])?;
        if policies.is_empty() {
            policies = parent
                .policies
                .iter()
                .filter(|p| p.as_str() != DEFAULT_POLICY)
                .cloned()
                .collect();
        }
        if !parent.is_root() {
            // A child gets no policy its parent lacks (OpenBao's rule).
            if let Some(extra) = policies
                .iter()
                .find(|p| p.as_str() != DEFAULT_POLICY && !parent.policies.contains(*p))
            {
                return Err(ApiError::bad_request(format!(
                    "child policies must be subset of parent (the parent lacks {extra:?})"
                )));
            }
        }
        let root = policies.iter().any(|p| p == ROOT_POLICY);
        if !no_default && !root {
            policies.push(DEFAULT_POLICY.to_owned());
        }
        let (token, entry) = open.tokens.create(
            id.as_deref(),
            policies,
            ttl,
            now(),
            &display_name,
            &mut OsEntropy,
        )?;
        Ok(auth_reply(Some(token.as_str()), &entry))
    })
}

fn auth_reply(token: Option<&str>, entry: &TokenEntry) -> Reply {
    Reply::Envelope {
        data: Value::Null,
        auth: Some(json!({
            "client_token": token.unwrap_or(""),
            "accessor": entry.accessor,
            "policies": entry.policies,
            "token_policies": entry.policies,
            "metadata": null,
            "lease_duration": remaining(entry),
            "renewable": entry.ttl != 0,
            "entity_id": "",
            "token_type": "service",
            "orphan": false,
            "mfa_requirement": null,
            "num_uses": 0,
        })),
        top: false,
    }
}

fn remaining(entry: &TokenEntry) -> u64 {
    if entry.expire_time == 0 {
        0
    } else {
        entry.expire_time.saturating_sub(now())
    }
}

fn lookup_json(entry: &TokenEntry) -> Value {
    json!({
        "accessor": entry.accessor,
        "creation_time": entry.creation_time,
        "creation_ttl": entry.ttl,
        "display_name": entry.display_name,
        "entity_id": "",
        "expire_time": if entry.expire_time == 0 { Value::Null } else { json!(entry.expire_time) },
        "explicit_max_ttl": 0,
        "meta": null,
        "num_uses": 0,
        "orphan": entry.is_root(),
        "path": "auth/token/create",
        "policies": entry.policies,
        "renewable": entry.ttl != 0,
        "ttl": remaining(entry),
        "type": "service",
    })
}
