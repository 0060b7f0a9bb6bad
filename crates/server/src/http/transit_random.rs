//! `transit/random[/:source][/:bytes]` and `sys/tools/random[...]`:
//! random bytes from the operating system (`bytes`, 1 to 131072, default
//! 32; `format` `base64` or `hex`; `source` `platform`, `all` or `seal`,
//! all the same here: aesd has no seal entropy), under `update` on the
//! path.

use aesd_keyring::policy::Capability;
use aesd_keyring::{Entropy, OsEntropy};
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

use super::errors::ApiError;
use super::router::{ApiRequest, Operation, Reply, authorize, str_field, uint_field};
use super::transit_fields::{encode_secret, ignored};
use crate::keyring_state::KeyringState;

/// The most bytes one request takes (OpenBao's limit).
pub const MAX_RANDOM_BYTES: u64 = 128 * 1024;
const DEFAULT_BYTES: u64 = 32;
const FIELDS: &[&str] = &["bytes", "format", "source"];
const SOURCES: &[&str] = &["platform", "seal", "all"];

/// Answers `transit/random...` and `sys/tools/random...`.
pub fn route(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let path = request.path.as_str();
    let rest = path
        .strip_prefix("transit/random")
        .or_else(|| path.strip_prefix("sys/tools/random"))
        .unwrap_or_default();
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if request.operation != Operation::Write || segments.len() > 2 {
        return state.read(|open| {
            authorize(open, request, path, &[])?;
            if segments.len() > 2 {
                Err(ApiError::unsupported_path(path))
            } else {
                Err(request.not_allowed())
            }
        });
    }
    let fields = request.fields()?;
    let mut warnings = ignored(&fields, FIELDS);
    let parsed = parse(&fields, &segments, &mut warnings);
    state.read(|open| {
        authorize(open, request, path, &[Capability::Update])?;
        Ok::<_, ApiError>(())
    })?;
    let (len, hex) = parsed?;
    let mut bytes = Zeroizing::new(vec![0u8; len]);
    OsEntropy
        .fill(&mut bytes)
        .map_err(|err| ApiError::internal(format!("random source failed: {err}")))?;
    let text = if hex {
        hex_lower(&bytes)
    } else {
        encode_secret(&bytes)
    };
    Ok(Reply::Status {
        status: 200,
        data: json!({ "random_bytes": text }),
        warnings,
    })
}

/// The byte count and whether hex was asked for.
fn parse(
    fields: &Map<String, Value>,
    segments: &[&str],
    warnings: &mut Vec<String>,
) -> Result<(usize, bool), ApiError> {
    let (source, url_bytes) = match segments {
        [] => (None, None),
        [one] if SOURCES.contains(one) => (Some(*one), None),
        [one] => (None, Some(*one)),
        [source, bytes] => (Some(*source), Some(*bytes)),
        _ => return Err(ApiError::not_found()),
    };
    let source = match source {
        Some(source) => source,
        None => str_field(fields, "source")?.unwrap_or("platform"),
    };
    if !SOURCES.contains(&source) {
        return Err(ApiError::bad_request(format!(
            "unsupported entropy source {source:?}; must be \"platform\" or \"seal\", or \"all\""
        )));
    }
    if source == "seal" {
        warnings
            .push("no seal/entropy augmentation available, using platform entropy source".into());
    }
    let bytes = match url_bytes {
        Some(text) => text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "error parsing url-set byte count: {text:?} is not a number"
            ))
        })?,
        None => uint_field(fields, "bytes")?.unwrap_or(DEFAULT_BYTES),
    };
    if bytes < 1 {
        return Err(ApiError::bad_request("'bytes' cannot be less than 1"));
    }
    if bytes > MAX_RANDOM_BYTES {
        return Err(ApiError::bad_request(format!(
            "'bytes' should be less than {MAX_RANDOM_BYTES}"
        )));
    }
    let hex = match str_field(fields, "format")?.unwrap_or("base64") {
        "base64" => false,
        "hex" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "unsupported encoding format {other:?}; must be \"hex\" or \"base64\""
            )));
        }
    };
    let len = usize::try_from(bytes).map_err(|_| ApiError::bad_request("'bytes' too large"))?;
    Ok((len, hex))
}

/// Lower-case hex without a table or a branch on the data (random bytes
/// here, HMACs in the audit log).
pub(super) fn hex_lower(bytes: &[u8]) -> String {
    let digit = |nibble: u8| -> char {
        let n = i16::from(nibble);
        // 0-9 -> '0'-'9'; 10-15 -> 'a'-'f' ((9 - n) >> 8 is -1 above 9).
        let code = n + 48 + (((9 - n) >> 8) & 39);
        char::from(u8::try_from(code).unwrap_or(b'?'))
    };
    bytes
        .iter()
        .flat_map(|b| [digit(b >> 4), digit(b & 15)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::hex_lower;

    #[test]
    fn hex_of_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex_lower(&all), expected);
    }
}
