//! `transit/keys`: list, and `transit/keys/:name` with its `config`,
//! `rotate` and `trim`, answering with OpenBao's key metadata.

use aesd_keyring::policy::Capability;
use aesd_keyring::{KeyConfigUpdate, KeyMetadata, KeyType, OsEntropy};
use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::router::{
    ApiRequest, Operation, Reply, authorize, bool_field, create_or_update, duration_field,
    str_field, uint_field,
};
use crate::keyring_state::{KeyringState, now};

/// Routes `transit/keys` (`None`) and `transit/keys/<rest>`.
pub fn route(
    state: &KeyringState,
    request: &ApiRequest,
    rest: Option<&str>,
) -> Result<Reply, ApiError> {
    let Some(rest) = rest else {
        return list(state, request);
    };
    let path = request.path.as_str();
    match rest.split_once('/') {
        None => key(state, request, rest),
        Some((name, action)) => {
            if request.operation != Operation::Write {
                return state.read(|open| {
                    authorize(open, request, path, &[])?;
                    Err(request.not_allowed())
                });
            }
            let fields = request.fields()?;
            match action {
                "rotate" => state.change(|open| {
                    authorize(open, request, path, &[Capability::Update])?;
                    open.keyring.rotate(name, now(), &mut OsEntropy)?;
                    Ok(Reply::data(metadata_json(&open.keyring.read(name)?)))
                }),
                "config" => {
                    let update = config_update(&fields)?;
                    state.change(|open| {
                        authorize(open, request, path, &[Capability::Update])?;
                        let metadata = open.keyring.configure(name, &update)?;
                        Ok(Reply::data(metadata_json(&metadata)))
                    })
                }
                "trim" => {
                    let minimum = uint_field(&fields, "min_available_version")?
                        .ok_or_else(|| ApiError::bad_request("missing min_available_version"))?;
                    let minimum = u32::try_from(minimum)
                        .map_err(|_| ApiError::bad_request("min_available_version too large"))?;
                    state.change(|open| {
                        authorize(open, request, path, &[Capability::Update])?;
                        let metadata = open.keyring.trim(name, minimum)?;
                        Ok(Reply::data(metadata_json(&metadata)))
                    })
                }
                _ => state.read(|open| {
                    authorize(open, request, path, &[])?;
                    Err(ApiError::unsupported_path(path))
                }),
            }
        }
    }
}

fn list(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    if request.operation != Operation::List {
        return Err(request.not_allowed());
    }
    state.read(|open| {
        // OpenBao checks a list on the path with a trailing slash.
        authorize(open, request, "transit/keys/", &[Capability::List])?;
        let names: Vec<&str> = open.keyring.list().collect();
        if names.is_empty() {
            return Err(ApiError::not_found());
        }
        Ok(Reply::data(json!({ "keys": names })))
    })
}

fn key(state: &KeyringState, request: &ApiRequest, name: &str) -> Result<Reply, ApiError> {
    let path = request.path.as_str();
    match request.operation {
        Operation::Read => state.read(|open| {
            authorize(open, request, path, &[Capability::Read])?;
            Ok(Reply::data(metadata_json(&open.keyring.read(name)?)))
        }),
        Operation::Write => {
            let fields = request.fields()?;
            for unsupported in ["derived", "convergent_encryption", "allow_plaintext_backup"] {
                if bool_field(&fields, unsupported)? == Some(true) {
                    return Err(ApiError::bad_request(format!(
                        "{unsupported} is not supported by aesd (docs/aesd.md, \"HTTP API\")"
                    )));
                }
            }
            let key_type = match str_field(&fields, "type")? {
                None | Some("") => KeyType::Aes256Gcm96,
                Some(other) => KeyType::parse(other)
                    .map_err(|_| ApiError::bad_request(format!("unknown key type {other}")))?,
            };
            let update = KeyConfigUpdate {
                exportable: bool_field(&fields, "exportable")?,
                auto_rotate_period: duration_field(&fields, "auto_rotate_period")?,
                ..KeyConfigUpdate::default()
            };
            state.change(|open| {
                let exists = open.keyring.contains(name);
                authorize(open, request, path, &[create_or_update(exists)])?;
                // A write to an existing key answers its metadata and
                // changes nothing, as OpenBao's does.
                if !exists {
                    open.keyring.create(name, key_type, now(), &mut OsEntropy)?;
                    open.keyring.configure(name, &update)?;
                }
                Ok(Reply::data(metadata_json(&open.keyring.read(name)?)))
            })
        }
        Operation::Delete => state.change(|open| {
            authorize(open, request, path, &[Capability::Delete])?;
            open.keyring.delete(name).map_err(|err| match err {
                aesd_keyring::KeyringError::DeletionNotAllowed { .. } => ApiError::bad_request(
                    format!("error deleting policy {name}: deletion is not allowed for this key"),
                ),
                other => other.into(),
            })?;
            Ok(Reply::NoContent)
        }),
        Operation::List => Err(request.not_allowed()),
    }
}

fn config_update(fields: &Map<String, Value>) -> Result<KeyConfigUpdate, ApiError> {
    let version = |name: &str| -> Result<Option<u32>, ApiError> {
        uint_field(fields, name)?
            .map(|v| {
                u32::try_from(v).map_err(|_| ApiError::bad_request(format!("{name} too large")))
            })
            .transpose()
    };
    Ok(KeyConfigUpdate {
        min_decryption_version: version("min_decryption_version")?,
        min_encryption_version: version("min_encryption_version")?,
        deletion_allowed: bool_field(fields, "deletion_allowed")?,
        exportable: bool_field(fields, "exportable")?,
        auto_rotate_period: duration_field(fields, "auto_rotate_period")?,
    })
}

/// A key's metadata in OpenBao's shape: `keys` lists the versions from
/// `min_decryption_version` up, as OpenBao's does.
pub fn metadata_json(metadata: &KeyMetadata) -> Value {
    let keys: Map<String, Value> = metadata
        .keys
        .iter()
        .filter(|(version, _)| **version >= metadata.min_decryption_version)
        .map(|(version, time)| (version.to_string(), json!(time)))
        .collect();
    json!({
        "name": metadata.name,
        "type": metadata.key_type.as_str(),
        "keys": keys,
        "latest_version": metadata.latest_version,
        "min_decryption_version": metadata.min_decryption_version,
        "min_encryption_version": metadata.min_encryption_version,
        "min_available_version": metadata.min_available_version,
        "deletion_allowed": metadata.deletion_allowed,
        "exportable": metadata.exportable,
        "auto_rotate_period": metadata.auto_rotate_period,
        "allow_plaintext_backup": false,
        "derived": false,
        "imported_key": false,
        "soft_deleted": false,
        "supports_encryption": true,
        "supports_decryption": true,
        "supports_derivation": false,
        "supports_signing": false,
    })
}
