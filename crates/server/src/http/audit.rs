//! The audit log's lines (`--audit-log FILE`), as OpenBao's file audit
//! device writes them: a `request` line before the request is carried out
//! and a `response` line before it is answered, one JSON object a line.
//! Every string in the request's and the response's bodies (plaintexts,
//! ciphertexts, data keys, tokens, shares, `batch_input` items, names in
//! bodies) is replaced by `hmac-sha256:<hex>`, HMAC-SHA256 keyed with the
//! keyring's audit salt (`sys/audit-hash` computes the same for a known
//! value); numbers and booleans stay. While the keyring is sealed or not
//! initialised there is no salt: strings are written as `redacted`.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use aesd_keyring::SecretKey;
use aesd_keyring::token::TokenEntry;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::router::{ApiRequest, Operation};
use super::transit_random::hex_lower;
use crate::keyring_state::{KeyringState, StateError, now};

/// What a string becomes when there is no salt (sealed keyring).
pub const REDACTED: &str = "redacted";

/// `hmac-sha256:<hex>` of `text` under `salt`.
pub fn hmac_text(salt: &SecretKey, text: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(salt.expose())
        .expect("HMAC takes any key length");
    mac.update(text.as_bytes());
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(12 + 64);
    out.push_str("hmac-sha256:");
    out.push_str(&hex_lower(&digest));
    out
}

/// `value` with every string HMAC'd (or [`REDACTED`] without a salt).
pub fn hash_strings(value: &Value, salt: Option<&SecretKey>) -> Value {
    match value {
        Value::String(text) => {
            Value::String(salt.map_or_else(|| REDACTED.to_owned(), |salt| hmac_text(salt, text)))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| hash_strings(v, salt)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), hash_strings(v, salt)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One request as the audit log tells it.
pub struct AuditRecord {
    request_id: String,
    caller: Option<TokenEntry>,
    token_hmac: Option<String>,
    remote: SocketAddr,
    method: String,
    operation: &'static str,
    path: String,
    key: Option<String>,
    key_version: Option<u64>,
}

impl AuditRecord {
    /// The record of `request` from `remote`: the caller's token entry
    /// (if the token is valid and the keyring open) and the request line.
    pub fn request(
        state: &KeyringState,
        request: &ApiRequest,
        remote: SocketAddr,
    ) -> (Self, Vec<u8>) {
        let (caller, salt) = state
            .read(|open| {
                let caller = request
                    .token
                    .as_ref()
                    .and_then(|token| open.tokens.lookup(token, now()).ok().cloned());
                Ok::<_, StateError>((caller, open.audit_salt().cloned()))
            })
            .unwrap_or((None, None));
        let data = match request.fields() {
            Ok(fields) => Value::Object(fields),
            // Not JSON (or too many values): the whole body, hashed.
            Err(_) => Value::String(String::from_utf8_lossy(&request.body).into_owned()),
        };
        let record = AuditRecord {
            request_id: super::router::request_id(),
            token_hmac: request.token.as_ref().map(|token| {
                salt.as_ref()
                    .map_or_else(|| REDACTED.to_owned(), |s| hmac_text(s, token))
            }),
            caller,
            remote,
            method: request.method.clone(),
            operation: operation_name(request.operation),
            path: request.path.clone(),
            key: key_name(&request.path).map(str::to_owned),
            key_version: data
                .get("ciphertext")
                .and_then(Value::as_str)
                .and_then(ciphertext_version),
        };
        let mut line = record.common("request");
        line["data"] = hash_strings(&data, salt.as_ref());
        (record, json_line(&line))
    }

    /// A request refused before it was read in full (its path and method
    /// only): the record for its response line.
    pub fn unread(method: &str, path: &str, remote: SocketAddr) -> Self {
        AuditRecord {
            request_id: super::router::request_id(),
            caller: None,
            token_hmac: None,
            remote,
            method: method.to_owned(),
            operation: "",
            path: path.to_owned(),
            key: None,
            key_version: None,
        }
    }

    /// The response line: `status`, the error if any, the body's strings
    /// hashed (OpenBao's `errors` are kept as they are).
    pub fn response(&self, state: &KeyringState, status: u16, body: Option<&Value>) -> Vec<u8> {
        let salt = state
            .read(|open| Ok::<_, StateError>(open.audit_salt().cloned()))
            .unwrap_or(None);
        let mut line = self.common("response");
        line["status"] = json!(status);
        let mut error = Value::Null;
        let mut data = Map::new();
        if let Some(Value::Object(fields)) = body {
            for (name, value) in fields {
                match name.as_str() {
                    "errors" => {
                        error = json!(
                            value
                                .as_array()
                                .map(|errors| errors
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join("; "))
                                .unwrap_or_default()
                        );
                    }
                    "request_id" | "lease_id" | "warnings" => {}
                    _ => {
                        data.insert(name.clone(), hash_strings(value, salt.as_ref()));
                    }
                }
            }
            if let Some(version) = fields
                .get("data")
                .and_then(|data| data.get("key_version"))
                .and_then(Value::as_u64)
            {
                line["key_version"] = json!(version);
            }
        }
        line["error"] = error;
        line["data"] = Value::Object(data);
        json_line(&line)
    }

    fn common(&self, kind: &str) -> Value {
        json!({
            "time": rfc3339_now(),
            "type": kind,
            "request_id": self.request_id,
            "auth": {
                "accessor": self.caller.as_ref().map(|c| c.accessor.clone()),
                "policies": self.caller.as_ref().map(|c| c.policies.clone()),
                "display_name": self.caller.as_ref().map(|c| c.display_name.clone()),
                "client_token": self.token_hmac,
            },
            "remote_address": self.remote.ip().to_string(),
            "remote_port": self.remote.port(),
            "method": self.method,
            "operation": self.operation,
            "path": self.path,
            "key": self.key,
            "key_version": self.key_version,
        })
    }
}

/// `line` as compact JSON bytes (serialised straight into the buffer, not
/// through `Display`'s formatter, which with the HMAC's hex cost about
/// 140 k instructions per Transit request on riscv32: docs/performance.md).
fn json_line(line: &Value) -> Vec<u8> {
    serde_json::to_vec(line).expect("a JSON value with string keys always serialises")
}

/// OpenBao's name of an operation.
fn operation_name(operation: Operation) -> &'static str {
    match operation {
        Operation::Read => "read",
        Operation::List => "list",
        Operation::Write => "update",
        Operation::Delete => "delete",
    }
}

/// The Transit key a path names, if any.
pub fn key_name(path: &str) -> Option<&str> {
    if let Some(rest) = path.strip_prefix("transit/keys/") {
        return rest.split('/').next().filter(|name| !name.is_empty());
    }
    [
        "transit/encrypt/",
        "transit/decrypt/",
        "transit/rewrap/",
        "transit/datakey/plaintext/",
        "transit/datakey/wrapped/",
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(prefix))
    .filter(|name| !name.is_empty())
}

/// N of a `vault:vN:...` ciphertext.
fn ciphertext_version(ciphertext: &str) -> Option<u64> {
    let rest = ciphertext.strip_prefix("vault:v")?;
    rest.split(':').next()?.parse().ok()
}

/// Now as RFC 3339 in UTC with milliseconds.
pub fn rfc3339_now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339(secs: u64, millis: u32) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_771_627, 999), "2026-11-27T09:27:07.999Z");
    }

    #[test]
    fn every_string_is_hashed_and_numbers_stay() {
        let salt = SecretKey::from_bytes([7; 32]);
        let value =
            json!({"plaintext": "c2VjcmV0", "batch_input": [{"plaintext": "eA=="}], "n": 3});
        let hashed = hash_strings(&value, Some(&salt));
        assert_eq!(hashed["plaintext"], json!(hmac_text(&salt, "c2VjcmV0")));
        assert_eq!(
            hashed["batch_input"][0]["plaintext"],
            json!(hmac_text(&salt, "eA=="))
        );
        assert_eq!(hashed["n"], json!(3));
        assert!(!hashed.to_string().contains("c2VjcmV0"));
        assert_eq!(hash_strings(&value, None)["plaintext"], json!(REDACTED));
    }

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        // RFC 4231 test case 2 has a 4-byte key; ours are 32 bytes, so
        // check against a 32-byte key padded as HMAC pads it: "Jefe" and
        // zeros are the same HMAC key.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let salt = SecretKey::from_bytes(key);
        assert_eq!(
            hmac_text(&salt, "what do ya want for nothing?"),
            "hmac-sha256:5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn key_names_and_versions_from_paths_and_ciphertexts() {
        assert_eq!(key_name("transit/keys/k/rotate"), Some("k"));
        assert_eq!(key_name("transit/encrypt/k"), Some("k"));
        assert_eq!(key_name("transit/datakey/wrapped/k"), Some("k"));
        assert_eq!(key_name("sys/health"), None);
        assert_eq!(ciphertext_version("vault:v12:abc"), Some(12));
        assert_eq!(ciphertext_version("abc"), None);
    }
}
