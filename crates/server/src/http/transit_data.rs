//! Transit's data endpoints as OpenBao serves them: `transit/encrypt`,
//! `decrypt`, `rewrap` (one item or a `batch_input`) and
//! `datakey/plaintext|wrapped`, under the token's policy. Encrypt makes
//! a missing key (type `type`, default aes256-gcm96) when the token may
//! `create` on the path, as OpenBao's existence check does; the other
//! endpoints answer an unknown key with 400 `encryption key not found`.
//!
//! Batches answer each item in `batch_results` (with its `reference`);
//! encrypt and decrypt answer 400 when an item failed (or
//! `partial_failure_response_code` when some succeeded), rewrap 200
//! whatever its items did: OpenBao 2.7.2's statuses.

use std::borrow::Cow;

use aesd_keyring::policy::Capability;
use aesd_keyring::unseal::UnsealedKeyring;
use aesd_keyring::{Entropy, KeyType, OsEntropy};
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

use super::errors::ApiError;
use super::router::{ApiRequest, Operation, Reply, authorize, bool_field, create_or_update};
use super::router::{str_field, uint_field};
use super::transit_body::{Batch, BatchEntry, ItemFields, Slot, TransitBody};
use super::transit_fields::{
    Op, decode_aad, decode_secret, encode_secret, ignored, key_version, refusal, refused,
    required_str,
};
use super::transit_nonces::NoncePool;
use crate::keyring_state::{KeyringState, now};

/// The most items one `batch_input` takes (413 above).
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// Fields each endpoint takes (others are ignored with a warning).
const ENCRYPT_FIELDS: &[&str] = &[
    "plaintext",
    "associated_data",
    "context",
    "key_version",
    "batch_input",
    "type",
    "convergent_encryption",
    "partial_failure_response_code",
];
const DECRYPT_FIELDS: &[&str] = &[
    "ciphertext",
    "associated_data",
    "context",
    "batch_input",
    "partial_failure_response_code",
];
const REWRAP_FIELDS: &[&str] = &["ciphertext", "context", "key_version", "batch_input"];
const DATAKEY_FIELDS: &[&str] = &["bits", "key_version", "associated_data", "context"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Encrypt,
    Decrypt,
    Rewrap,
}

/// Answers `transit/encrypt|decrypt|rewrap|datakey/...`; `None` for
/// other paths.
pub fn route(state: &KeyringState, request: &ApiRequest) -> Option<Result<Reply, ApiError>> {
    let rest = request.path.strip_prefix("transit/")?;
    let (endpoint, name) = rest.split_once('/')?;
    let endpoint = match endpoint {
        "encrypt" => Endpoint::Encrypt,
        "decrypt" => Endpoint::Decrypt,
        "rewrap" => Endpoint::Rewrap,
        "datakey" => return Some(datakey(state, request, name)),
        _ => return None,
    };
    Some(items_endpoint(state, request, endpoint, name))
}

/// Unsupported method or a name with a slash: OpenBao's 405 or 404,
/// after the seal and token checks.
fn refuse_shape(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    state.read(|open| {
        authorize(open, request, &request.path, &[])?;
        if request.operation == Operation::Write {
            Err(ApiError::unsupported_path(&request.path))
        } else {
            Err(request.not_allowed())
        }
    })
}

/// One item's inputs, checked before the keyring is locked.
struct Item<'a> {
    /// Plaintext (encrypt) or ciphertext (decrypt, rewrap); a plaintext
    /// that is not base64 fails only its item.
    input: Result<Zeroizing<Vec<u8>>, String>,
    aad: Zeroizing<Vec<u8>>,
    version: Option<u32>,
    reference: Option<Cow<'a, str>>,
}

fn parse_item<'a>(
    fields: ItemFields<'a>,
    endpoint: Endpoint,
    batch: bool,
) -> Result<Item<'a>, String> {
    let input = match endpoint {
        Endpoint::Encrypt => decode_secret(required_str(
            &fields.plaintext,
            "plaintext",
            "missing plaintext to encrypt",
        )?),
        Endpoint::Decrypt | Endpoint::Rewrap => Ok(Zeroizing::new(
            required_str(
                &fields.ciphertext,
                "ciphertext",
                "missing ciphertext to decrypt",
            )?
            .as_bytes()
            .to_vec(),
        )),
    };
    let aad = match endpoint {
        Endpoint::Rewrap => Zeroizing::new(Vec::new()),
        _ => decode_aad(&fields.associated_data)?,
    };
    let version = match endpoint {
        Endpoint::Decrypt => None,
        _ => key_version(&fields.key_version)?,
    };
    let reference = if batch {
        fields.reference.text("reference")?;
        Some(match fields.reference {
            Slot::Str(text) => text,
            _ => Cow::Borrowed(""),
        })
    } else {
        None
    };
    Ok(Item {
        input,
        aad,
        version,
        reference,
    })
}

/// The items of a request: its `batch_input`, or the request itself.
fn parse_items<'a>(
    fields: &'a Map<String, Value>,
    batch: Batch<'a>,
    endpoint: Endpoint,
) -> Result<Vec<Item<'a>>, ApiError> {
    let batch = match batch {
        Batch::Absent => {
            return parse_item(ItemFields::of(fields), endpoint, false)
                .map(|item| vec![item])
                .map_err(ApiError::bad_request);
        }
        Batch::Items(batch) => batch,
        Batch::NotArray => {
            return Err(ApiError::bad_request(
                "failed to parse batch input: batch_input must be an array",
            ));
        }
    };
    if batch.is_empty() {
        return Err(ApiError::bad_request("missing batch input to process"));
    }
    if batch.len() > MAX_BATCH_ITEMS {
        return Err(ApiError::new(
            413,
            format!(
                "batch_input has {} items, more than aesd takes ({MAX_BATCH_ITEMS})",
                batch.len()
            ),
        ));
    }
    batch
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let BatchEntry::Item(item) = item else {
                return Err(format!("[{index}] expected a map"));
            };
            parse_item(item, endpoint, true).map_err(|err| format!("[{index}] {err}"))
        })
        .collect::<Result<_, _>>()
        .map_err(|err| ApiError::bad_request(format!("failed to parse batch input: {err}")))
}

fn items_endpoint(
    state: &KeyringState,
    request: &ApiRequest,
    endpoint: Endpoint,
    name: &str,
) -> Result<Reply, ApiError> {
    if request.operation != Operation::Write || name.contains('/') || name.is_empty() {
        return refuse_shape(state, request);
    }
    let TransitBody { fields, batch } = TransitBody::parse(request)?;
    let fields = &fields;
    let known = match endpoint {
        Endpoint::Encrypt => ENCRYPT_FIELDS,
        Endpoint::Decrypt => DECRYPT_FIELDS,
        Endpoint::Rewrap => REWRAP_FIELDS,
    };
    let warnings = ignored(fields, known);
    // Bad fields are answered after the seal and token checks, as
    // OpenBao answers them.
    let parsed = parse_items(fields, batch, endpoint).and_then(|items| {
        let partial = partial_failure_code(fields)?;
        Ok((items, partial))
    });
    let path = request.path.as_str();
    let run = |open: &UnsealedKeyring, items: &[Item]| -> Vec<Result<Map<String, Value>, String>> {
        // One read of the random source for all of the items' nonces.
        let mut nonces = NoncePool::for_items(items.len());
        items
            .iter()
            .map(|item| run_item(open, endpoint, name, item, &mut nonces))
            .collect()
    };
    let (items, partial, results) = match endpoint {
        Endpoint::Encrypt => {
            let key_type = key_type_for_create(fields);
            let exists = state.read(|open| Ok::<_, ApiError>(open.keyring.read(name).is_ok()))?;
            if exists {
                state.read(|open| {
                    authorize(open, request, path, &[Capability::Update])?;
                    let (items, partial) = parsed?;
                    let results = run(open, &items);
                    Ok::<_, ApiError>((items, partial, results))
                })?
            } else {
                // Stored even when every item fails, as OpenBao keeps
                // the key it made.
                state.change(|open| {
                    let exists = open.keyring.read(name).is_ok();
                    authorize(open, request, path, &[create_or_update(exists)])?;
                    let (items, partial) = parsed?;
                    if !exists {
                        open.keyring
                            .create(name, key_type?, now(), &mut OsEntropy)
                            .map_err(|err| refused(&err, Op::Encrypt))?;
                    }
                    let results = run(open, &items);
                    Ok::<_, ApiError>((items, partial, results))
                })?
            }
        }
        Endpoint::Decrypt | Endpoint::Rewrap => {
            if let Ok((items, _)) = &parsed {
                catch_up_for(state, request, name, items);
            }
            state.read(|open| {
                authorize(open, request, path, &[Capability::Update])?;
                let (items, partial) = parsed?;
                open.keyring
                    .read(name)
                    .map_err(|err| refused(&err, Op::Decrypt))?;
                let results = run(open, &items);
                Ok::<_, ApiError>((items, partial, results))
            })?
        }
    };
    answer(endpoint, &items, results, partial, warnings)
}

/// Before a decrypt or rewrap: when a ciphertext names a version of
/// `name` newer than the keyring held here (or the key is not held yet),
/// another board of the fleet may have rotated or made it a moment ago
/// and this one not loaded it yet: for a caller the policy lets decrypt
/// (no one else can make this board read its store), the store's newest
/// generation is loaded first (`KeyringState::refresh`), so the answer is
/// not "version is too new" for the milliseconds a change takes to
/// arrive. A store that cannot be read leaves the keyring held, and the
/// items are answered from it. On the usual path (the board is not
/// behind) this costs the ciphertexts' prefixes and one lookup of the
/// key: no decoding, no token check.
fn catch_up_for(state: &KeyringState, request: &ApiRequest, name: &str, items: &[Item]) {
    let newest = items
        .iter()
        .filter_map(|item| item.input.as_ref().ok())
        .filter_map(|input| std::str::from_utf8(input).ok())
        .filter_map(|text| aesd_keyring::ciphertext::split(text).ok())
        .map(|(version, _)| version)
        .max();
    let Some(newest) = newest else { return };
    state.catch_up_to(name, newest, || {
        state
            .read(|open| authorize(open, request, &request.path, &[Capability::Update]))
            .is_ok()
    });
}

/// `type` for a key encrypt makes; convergent encryption is refused.
fn key_type_for_create(fields: &Map<String, Value>) -> Result<KeyType, ApiError> {
    if bool_field(fields, "convergent_encryption")? == Some(true) {
        return Err(ApiError::bad_request(
            "convergent_encryption is not supported by aesd (docs/aesd.md, \"Transit data endpoints\")",
        ));
    }
    match str_field(fields, "type")? {
        None | Some("") => Ok(KeyType::Aes256Gcm96),
        Some(other) => KeyType::parse(other)
            .map_err(|_| ApiError::bad_request(format!("unknown key type {other}"))),
    }
}

/// `partial_failure_response_code`: the status of a batch where some
/// items failed and some did not (400 when not given).
fn partial_failure_code(fields: &Map<String, Value>) -> Result<u16, ApiError> {
    match uint_field(fields, "partial_failure_response_code")? {
        None | Some(0) => Ok(400),
        Some(code @ 200..=599) => Ok(u16::try_from(code).unwrap_or(400)),
        Some(code) => Err(ApiError::bad_request(format!(
            "partial_failure_response_code {code} is not an HTTP status (200 to 599)"
        ))),
    }
}

fn run_item(
    open: &UnsealedKeyring,
    endpoint: Endpoint,
    name: &str,
    item: &Item,
    nonces: &mut NoncePool,
) -> Result<Map<String, Value>, String> {
    let input = item.input.as_ref().map_err(Clone::clone)?;
    let keyring = &open.keyring;
    let mut out = Map::new();
    match endpoint {
        Endpoint::Encrypt => {
            let text = keyring
                .encrypt(name, item.version, input, &item.aad, nonces)
                .map_err(|err| refusal(&err, Op::Encrypt).1)?;
            out.insert("key_version".into(), json!(version_of(&text)));
            out.insert("ciphertext".into(), json!(text));
        }
        Endpoint::Decrypt => {
            let text = std::str::from_utf8(input).map_err(|_| "invalid ciphertext: no prefix")?;
            let plain = keyring
                .decrypt(name, text, &item.aad)
                .map_err(|err| refusal(&err, Op::Decrypt).1)?;
            out.insert("plaintext".into(), json!(encode_secret(&plain)));
        }
        Endpoint::Rewrap => {
            let text = std::str::from_utf8(input).map_err(|_| "invalid ciphertext: no prefix")?;
            let plain = keyring
                .decrypt(name, text, &item.aad)
                .map_err(|err| refusal(&err, Op::Decrypt).1)?;
            let text = keyring
                .encrypt(name, item.version, &plain, &item.aad, nonces)
                .map_err(|err| refusal(&err, Op::Encrypt).1)?;
            out.insert("key_version".into(), json!(version_of(&text)));
            out.insert("ciphertext".into(), json!(text));
        }
    }
    Ok(out)
}

/// The version in a `vault:vN:` ciphertext this server just made.
fn version_of(text: &str) -> u32 {
    aesd_keyring::ciphertext::split(text).map_or(0, |(version, _)| version)
}

fn answer(
    endpoint: Endpoint,
    items: &[Item],
    results: Vec<Result<Map<String, Value>, String>>,
    partial: u16,
    warnings: Vec<String>,
) -> Result<Reply, ApiError> {
    let batch = items.first().is_some_and(|item| item.reference.is_some());
    if !batch {
        let result = results
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("no result"))?;
        let data = result.map_err(ApiError::bad_request)?;
        return Ok(Reply::Status {
            status: 200,
            data: Value::Object(data),
            warnings,
        });
    }
    let failed = results.iter().filter(|r| r.is_err()).count();
    let batch_results: Vec<Value> = results
        .into_iter()
        .zip(items)
        .map(|(result, item)| {
            let mut out = result.unwrap_or_else(|error| {
                let mut out = Map::new();
                if endpoint == Endpoint::Decrypt {
                    out.insert("plaintext".into(), json!(""));
                }
                out.insert("error".into(), json!(error));
                out
            });
            out.insert(
                "reference".into(),
                json!(item.reference.as_deref().unwrap_or("")),
            );
            Value::Object(out)
        })
        .collect();
    let status = match (endpoint, failed) {
        (Endpoint::Rewrap, _) | (_, 0) => 200,
        (_, n) if n == items.len() => 400,
        _ => partial,
    };
    Ok(Reply::Status {
        status,
        data: json!({ "batch_results": batch_results }),
        warnings,
    })
}

/// `transit/datakey/plaintext|wrapped/:name`: a new random key of
/// `bits` (128, 256 or 512), encrypted with the named key; `plaintext`
/// also answers the key itself.
fn datakey(state: &KeyringState, request: &ApiRequest, rest: &str) -> Result<Reply, ApiError> {
    let Some((kind, name)) = rest.split_once('/') else {
        return refuse_shape(state, request);
    };
    if request.operation != Operation::Write || name.contains('/') || name.is_empty() {
        return refuse_shape(state, request);
    }
    let fields = request.fields()?;
    let with_plaintext = match kind {
        "plaintext" => true,
        "wrapped" => false,
        _ => {
            return Err(ApiError::bad_request(
                "Invalid path, must be 'plaintext' or 'wrapped'",
            ));
        }
    };
    let warnings = ignored(&fields, DATAKEY_FIELDS);
    let parsed = datakey_fields(&fields);
    let path = request.path.as_str();
    let (key, ciphertext) = state.read(|open| {
        authorize(open, request, path, &[Capability::Update])?;
        let (len, version, aad) = parsed?;
        let mut key = Zeroizing::new(vec![0u8; len]);
        OsEntropy
            .fill(&mut key)
            .map_err(|err| ApiError::internal(format!("random source failed: {err}")))?;
        let ciphertext = open
            .keyring
            .encrypt(name, version, &key, &aad, &mut OsEntropy)
            .map_err(|err| refused(&err, Op::Encrypt))?;
        Ok::<_, ApiError>((key, ciphertext))
    })?;
    let mut data = json!({
        "ciphertext": ciphertext,
        "key_version": version_of(&ciphertext),
    });
    if with_plaintext {
        data["plaintext"] = json!(encode_secret(&key));
    }
    Ok(Reply::Status {
        status: 200,
        data,
        warnings,
    })
}

/// Datakey's `bits` (as bytes), `key_version` and `associated_data`.
type DatakeyFields = (usize, Option<u32>, Zeroizing<Vec<u8>>);

fn datakey_fields(fields: &Map<String, Value>) -> Result<DatakeyFields, ApiError> {
    let len = match uint_field(fields, "bits")?.unwrap_or(256) {
        128 => 16,
        256 => 32,
        512 => 64,
        _ => return Err(ApiError::bad_request("invalid bit length")),
    };
    let version = key_version(&Slot::of(fields, "key_version")).map_err(ApiError::bad_request)?;
    let aad = decode_aad(&Slot::of(fields, "associated_data")).map_err(ApiError::bad_request)?;
    Ok((len, version, aad))
}
