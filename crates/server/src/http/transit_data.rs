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
use super::json_out::{self, Envelope};
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
    let run = |open: &UnsealedKeyring, items: &[Item]| -> Vec<Result<ItemAnswer, String>> {
        // At most one read of the random source for all of the items'
        // nonces, and none for most single encryptions (this thread's
        // pool still holds some from an earlier request).
        NoncePool::with_thread_pool(items.len(), |nonces| {
            items
                .iter()
                .map(|item| run_item(open, endpoint, name, item, nonces))
                .collect()
        })
    };
    let (items, partial, results) = match endpoint {
        Endpoint::Encrypt => {
            let key_type = key_type_for_create(fields);
            let exists = state.read(|open| Ok::<_, ApiError>(open.keyring.contains(name)))?;
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
                    let exists = open.keyring.contains(name);
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
                    .require(name)
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

/// What one item answers.
enum ItemAnswer {
    /// Encrypt, rewrap: the ciphertext and the version that sealed it.
    Sealed {
        ciphertext: String,
        key_version: u32,
    },
    /// Decrypt: the plaintext's base64 (secret: wiped when dropped).
    Opened { plaintext: Zeroizing<String> },
}

fn run_item(
    open: &UnsealedKeyring,
    endpoint: Endpoint,
    name: &str,
    item: &Item,
    nonces: &mut NoncePool,
) -> Result<ItemAnswer, String> {
    let input = item.input.as_ref().map_err(Clone::clone)?;
    let keyring = &open.keyring;
    let sealed = |plain: &[u8], nonces: &mut NoncePool| {
        let ciphertext = keyring
            .encrypt(name, item.version, plain, &item.aad, nonces)
            .map_err(|err| refusal(&err, Op::Encrypt).1)?;
        let key_version = version_of(&ciphertext);
        Ok(ItemAnswer::Sealed {
            ciphertext,
            key_version,
        })
    };
    let opened = || {
        let text = std::str::from_utf8(input).map_err(|_| "invalid ciphertext: no prefix")?;
        keyring
            .decrypt(name, text, &item.aad)
            .map_err(|err| refusal(&err, Op::Decrypt).1)
    };
    match endpoint {
        Endpoint::Encrypt => sealed(input, nonces),
        Endpoint::Decrypt => Ok(ItemAnswer::Opened {
            plaintext: Zeroizing::new(encode_secret(&opened()?)),
        }),
        Endpoint::Rewrap => sealed(&opened()?, nonces),
    }
}

/// The version in a `vault:vN:` ciphertext this server just made.
fn version_of(text: &str) -> u32 {
    aesd_keyring::ciphertext::split(text).map_or(0, |(version, _)| version)
}

/// The answer: one item's fields as `data`, or a batch's `batch_results`
/// (each with its `reference`, a failed one with its `error`), written
/// as JSON text without a tree (a batch of 100 is 100 maps otherwise);
/// the keys in serde_json's map order, as OpenBao's answer is read.
fn answer(
    endpoint: Endpoint,
    items: &[Item],
    results: Vec<Result<ItemAnswer, String>>,
    partial: u16,
    warnings: Vec<String>,
) -> Result<Reply, ApiError> {
    let batch = items.first().is_some_and(|item| item.reference.is_some());
    let capacity = 256
        + results
            .iter()
            .map(|result| match result {
                Ok(ItemAnswer::Sealed { ciphertext, .. }) => ciphertext.len() + 64,
                Ok(ItemAnswer::Opened { plaintext }) => plaintext.len() + 48,
                Err(error) => error.len() + 64,
            })
            .sum::<usize>();
    let mut envelope = Envelope::open(capacity);
    let out = &mut envelope.data;
    if !batch {
        let result = results
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("no result"))?;
        write_item(out, &result.map_err(ApiError::bad_request)?, None);
        return Ok(Reply::Written {
            status: 200,
            body: envelope.close(&warnings),
        });
    }
    let failed = results.iter().filter(|r| r.is_err()).count();
    out.extend_from_slice(br#"{"batch_results":["#);
    for (index, (result, item)) in results.iter().zip(items).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let reference = item.reference.as_deref().unwrap_or("");
        match result {
            Ok(answer) => write_item(out, answer, Some(reference)),
            Err(error) => {
                out.extend_from_slice(br#"{"error":"#);
                json_out::write_str(out, error);
                if endpoint == Endpoint::Decrypt {
                    out.extend_from_slice(br#","plaintext":"""#);
                }
                out.extend_from_slice(br#","reference":"#);
                json_out::write_str(out, reference);
                out.push(b'}');
            }
        }
    }
    out.extend_from_slice(b"]}");
    let status = match (endpoint, failed) {
        (Endpoint::Rewrap, _) | (_, 0) => 200,
        (_, n) if n == items.len() => 400,
        _ => partial,
    };
    Ok(Reply::Written {
        status,
        body: envelope.close(&warnings),
    })
}

/// One item's object: its fields and, in a batch, its `reference`.
fn write_item(out: &mut Vec<u8>, answer: &ItemAnswer, reference: Option<&str>) {
    match answer {
        ItemAnswer::Sealed {
            ciphertext,
            key_version,
        } => {
            out.extend_from_slice(br#"{"ciphertext":"#);
            json_out::write_str(out, ciphertext);
            out.extend_from_slice(br#","key_version":"#);
            json_out::write_uint(out, u64::from(*key_version));
        }
        ItemAnswer::Opened { plaintext } => {
            out.extend_from_slice(br#"{"plaintext":"#);
            json_out::write_str(out, plaintext);
        }
    }
    if let Some(reference) = reference {
        out.extend_from_slice(br#","reference":"#);
        json_out::write_str(out, reference);
    }
    out.push(b'}');
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::http::router::Body;

    fn item(reference: Option<&str>) -> Item<'static> {
        Item {
            input: Ok(Zeroizing::new(Vec::new())),
            aad: Zeroizing::new(Vec::new()),
            version: None,
            reference: reference.map(|text| Cow::Owned(text.to_owned())),
        }
    }

    fn sealed(text: &str, version: u32) -> Result<ItemAnswer, String> {
        Ok(ItemAnswer::Sealed {
            ciphertext: text.to_owned(),
            key_version: version,
        })
    }

    /// The answer's status and body, parsed, without its request id
    /// (checked for its shape).
    fn answered(
        endpoint: Endpoint,
        items: &[Item],
        results: Vec<Result<ItemAnswer, String>>,
        warnings: Vec<String>,
    ) -> (u16, Value) {
        let reply = answer(endpoint, items, results, 207, warnings).expect("an answer");
        let (status, Some(Body::Text(text))) = reply.render() else {
            panic!("written as text");
        };
        let mut body: Value = serde_json::from_slice(&text).expect("valid JSON");
        assert_eq!(body["request_id"].as_str().map(str::len), Some(36));
        body["request_id"] = json!("id");
        (status, body)
    }

    fn envelope(data: Value, warnings: Value) -> Value {
        json!({
            "auth": null, "data": data, "lease_duration": 0, "lease_id": "",
            "renewable": false, "request_id": "id", "warnings": warnings, "wrap_info": null,
        })
    }

    #[test]
    fn single_items_answer_their_fields_in_the_envelope() {
        let (status, body) = answered(
            Endpoint::Encrypt,
            &[item(None)],
            vec![sealed("vault:v2:AAAA", 2)],
            vec!["ignored: x".into()],
        );
        assert_eq!(status, 200);
        assert_eq!(
            body,
            envelope(
                json!({"ciphertext": "vault:v2:AAAA", "key_version": 2}),
                json!(["ignored: x"])
            )
        );
        let opened = Ok(ItemAnswer::Opened {
            plaintext: Zeroizing::new("aGk=".to_owned()),
        });
        let (status, body) = answered(Endpoint::Decrypt, &[item(None)], vec![opened], vec![]);
        assert_eq!(status, 200);
        assert_eq!(body, envelope(json!({"plaintext": "aGk="}), Value::Null));
        let failed = answer(
            Endpoint::Decrypt,
            &[item(None)],
            vec![Err("invalid ciphertext: no prefix".into())],
            400,
            vec![],
        );
        let Err(error) = failed else {
            panic!("a single failed item is the request's error");
        };
        assert_eq!(error.status, 400);
    }

    #[test]
    fn batches_answer_every_item_with_its_reference_and_the_partial_status() {
        let items = [item(Some("a")), item(Some("quote \" and \\ and \n"))];
        let (status, body) = answered(
            Endpoint::Encrypt,
            &items,
            vec![sealed("vault:v1:QQ==", 1), Err("bad \"base64\"".into())],
            vec![],
        );
        assert_eq!(status, 207, "partial_failure_response_code");
        assert_eq!(
            body,
            envelope(
                json!({"batch_results": [
                    {"ciphertext": "vault:v1:QQ==", "key_version": 1, "reference": "a"},
                    {"error": "bad \"base64\"", "reference": "quote \" and \\ and \n"},
                ]}),
                Value::Null
            )
        );
        let (status, body) = answered(
            Endpoint::Decrypt,
            &items,
            vec![Err("one".into()), Err("two".into())],
            vec![],
        );
        assert_eq!(status, 400, "every item failed");
        assert_eq!(
            body["data"],
            json!({"batch_results": [
                {"error": "one", "plaintext": "", "reference": "a"},
                {"error": "two", "plaintext": "", "reference": "quote \" and \\ and \n"},
            ]})
        );
        let (status, _) = answered(
            Endpoint::Rewrap,
            &items,
            vec![Err("one".into()), sealed("vault:v3:QQ==", 3)],
            vec![],
        );
        assert_eq!(status, 200, "rewrap answers 200 whatever its items did");
    }
}
