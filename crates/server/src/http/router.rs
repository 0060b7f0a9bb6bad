//! One request, parsed and routed: the seal check, the token and its
//! policy, then the handler. Synchronous: it runs on a blocking thread
//! (the store writes and fsyncs), never on the async reactor.

use aesd_keyring::policy::Capability;
use aesd_keyring::token::{TokenEntry, TokenError};
use aesd_keyring::unseal::UnsealedKeyring;
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

use super::errors::ApiError;
use super::transit_body::Slot;
use super::{auth, sys, transit_data, transit_keys, transit_random};
use crate::keyring_state::{KeyringState, now};

/// The operation a request asks for, as OpenBao's router sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// GET (and HEAD).
    Read,
    /// LIST, or GET with `?list=true`.
    List,
    /// PUT or POST (the CLI sends PUT, hvac POST).
    Write,
    /// DELETE.
    Delete,
}

/// The most JSON values (counted from `,`, `{` and `[`) a request body
/// may hold: a batch of 10 000 items is about 50 000.
pub const MAX_JSON_VALUES: usize = 65_536;

/// A request with its body read (within the size limit).
pub struct ApiRequest {
    /// What it asks for.
    pub operation: Operation,
    /// The method as sent (for messages).
    pub method: String,
    /// The path after `/v1/`, without a trailing slash.
    pub path: String,
    /// `X-Vault-Token` or `Authorization: Bearer`.
    pub token: Option<Zeroizing<String>>,
    /// The body (JSON, or empty).
    pub body: Vec<u8>,
}

impl ApiRequest {
    /// The body to parse as JSON (`None` when it is only whitespace),
    /// refused (413) when it could hold more than [`MAX_JSON_VALUES`]
    /// values.
    pub fn bounded_body(&self) -> Result<Option<&[u8]>, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        // Every value but the first follows a `,` or opens with `{`/`[`
        // (counted inside strings too: an upper bound). Without a branch
        // per byte, so that the compiler counts many bytes at once (a
        // filter's branches made this a tenth of a batch's time).
        // Counted in bytes per 128-byte chunk (at most 128 fits in a u8).
        let values: usize = self
            .body
            .chunks(128)
            .map(|chunk| {
                let marks = chunk.iter().fold(0u8, |n, &b| {
                    n + u8::from((b == b',') | (b == b'{') | (b == b'['))
                });
                usize::from(marks)
            })
            .sum();
        if values > MAX_JSON_VALUES {
            return Err(ApiError::new(
                413,
                format!(
                    "request has more than {MAX_JSON_VALUES} JSON values (commas and brackets counted)"
                ),
            ));
        }
        Ok(Some(&self.body))
    }

    /// The body as a JSON object (empty body: no fields). A body that
    /// could hold more than [`MAX_JSON_VALUES`] values is refused (413)
    /// before it is parsed: a parsed value takes tens of bytes however
    /// short its text.
    pub fn fields(&self) -> Result<Map<String, Value>, ApiError> {
        let Some(body) = self.bounded_body()? else {
            return Ok(Map::new());
        };
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => Ok(map),
            // `bao write -f` sends `null`.
            Ok(Value::Null) => Ok(Map::new()),
            Ok(_) => Err(ApiError::bad_request(
                "failed to decode JSON input: the body is not a JSON object",
            )),
            Err(err) => Err(ApiError::bad_request(format!(
                "failed to decode JSON input: {err}"
            ))),
        }
    }

    /// 405 for this request.
    pub fn not_allowed(&self) -> ApiError {
        ApiError::method_not_allowed(&self.method, &self.path)
    }
}

/// What a handler answers.
pub enum Reply {
    /// A bare JSON body (the `sys/` status endpoints).
    Raw(u16, Value),
    /// OpenBao's envelope with `data` (and `auth`, `warnings`);
    /// `top` fields are also copied to the top level (`sys/policy`).
    Envelope {
        /// `data`.
        data: Value,
        /// `auth` (token endpoints).
        auth: Option<Value>,
        /// Copy `data`'s fields to the top level too.
        top: bool,
    },
    /// 204, no body.
    NoContent,
    /// The envelope around `data` with another status (a Transit batch
    /// with failed items: 400) and OpenBao's `warnings` (parameters it
    /// ignored).
    Status {
        /// HTTP status.
        status: u16,
        /// `data`.
        data: Value,
        /// `warnings` (`null` when empty).
        warnings: Vec<String>,
    },
    /// A body already written as JSON text (Transit's items, through
    /// [`super::json_out::Envelope`]), with its status.
    Written {
        /// HTTP status.
        status: u16,
        /// The JSON text.
        body: Vec<u8>,
    },
}

/// An answer's body: a JSON tree, or JSON text written without one.
pub enum Body {
    /// A tree, written as text when it is sent.
    Tree(Value),
    /// Text.
    Text(Vec<u8>),
}

impl Body {
    /// The body as a tree, for the audit log's response line (text is
    /// parsed: only with an audit log).
    pub fn tree(&self) -> std::borrow::Cow<'_, Value> {
        match self {
            Body::Tree(value) => std::borrow::Cow::Borrowed(value),
            Body::Text(text) => std::borrow::Cow::Owned(
                serde_json::from_slice(text)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(text).into_owned())),
            ),
        }
    }

    /// The JSON text to send; a tree is written into a buffer of
    /// `capacity` bytes (sized so that it is not copied as it grows).
    pub fn into_text(self, capacity: usize) -> Vec<u8> {
        match self {
            Body::Tree(value) => {
                let mut out = Vec::with_capacity(capacity);
                super::json_out::write(&mut out, &value);
                out
            }
            Body::Text(text) => text,
        }
    }
}

impl Reply {
    /// The envelope around `data`.
    pub fn data(data: Value) -> Self {
        Reply::Envelope {
            data,
            auth: None,
            top: false,
        }
    }

    /// The status and body to send.
    pub fn render(self) -> (u16, Option<Body>) {
        match self {
            Reply::Raw(status, body) => (status, Some(Body::Tree(body))),
            Reply::Written { status, body } => (status, Some(Body::Text(body))),
            Reply::NoContent => (204, None),
            Reply::Envelope { data, auth, top } => {
                // `data` is moved, not copied (a batch's is most of the
                // answer); only a reply with both `data` and a copy of
                // its fields at the top level pays a copy.
                let (inner, top_fields) = match (auth.is_some(), top) {
                    (false, false) => (data, None),
                    (true, false) => (Value::Null, None),
                    (true, true) => (Value::Null, Some(data)),
                    (false, true) => (data.clone(), Some(data)),
                };
                let mut body = json!({
                    "request_id": request_id(),
                    "lease_id": "",
                    "renewable": false,
                    "lease_duration": 0,
                    "data": inner,
                    "wrap_info": null,
                    "warnings": null,
                    "auth": auth,
                });
                if let (Some(Value::Object(fields)), Value::Object(out)) = (top_fields, &mut body) {
                    for (key, value) in fields {
                        out.entry(key).or_insert(value);
                    }
                }
                (200, Some(Body::Tree(body)))
            }
            Reply::Status {
                status,
                data,
                warnings,
            } => {
                let body = match Reply::data(data).render() {
                    (_, Some(Body::Tree(mut body))) => {
                        if !warnings.is_empty() {
                            body["warnings"] = json!(warnings);
                        }
                        body
                    }
                    _ => Value::Null,
                };
                (status, Some(Body::Tree(body)))
            }
        }
    }
}

/// A UUID-shaped request id, unpredictable and never repeated within the
/// process: the 128-bit keyed hash (SipHash under a key drawn once from
/// the kernel, std's `RandomState`) of a counter, so a request costs no
/// `getrandom` for its id (one a request was a tenth of the kernel time
/// of a 1 KiB Transit encryption, docs/performance.md).
pub(crate) fn request_id() -> String {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    static COUNTER: portable_atomic::AtomicU64 = portable_atomic::AtomicU64::new(0);
    let key = KEY.get_or_init(std::hash::RandomState::new);
    let count = COUNTER.fetch_add(1, portable_atomic::Ordering::Relaxed);
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&key.hash_one((count, 0u8)).to_le_bytes());
    raw[8..].copy_from_slice(&key.hash_one((count, 1u8)).to_le_bytes());
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(36);
    for (index, byte) in raw.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        id.push(char::from(HEX[usize::from(byte >> 4)]));
        id.push(char::from(HEX[usize::from(byte & 15)]));
    }
    id
}

/// The caller's token entry, if `capabilities` are all granted on
/// `path` by its policies; `permission denied` otherwise (no token, an
/// unknown or expired one, or a missing capability).
pub fn authorize(
    open: &UnsealedKeyring,
    request: &ApiRequest,
    path: &str,
    capabilities: &[Capability],
) -> Result<TokenEntry, ApiError> {
    Ok(check_token(
        open,
        request.token.as_ref().map(|t| t.as_str()),
        path,
        capabilities,
    )?)
}

/// Why a token may not do something ([`check_token`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No token was given.
    #[error("permission denied: no token")]
    NoToken,
    /// The token is not one the keyring knows (or it expired).
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The token's policies do not grant the capabilities on the path.
    #[error("permission denied")]
    Policy,
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::NoToken | Denied::Policy => ApiError::permission_denied(),
            Denied::Token(err) => err.into(),
        }
    }
}

/// The one policy check, for the HTTP API and the binary port's by-name
/// jobs alike: `token`'s entry when its policies grant every one of
/// `capabilities` on `path`.
pub fn check_token(
    open: &UnsealedKeyring,
    token: Option<&str>,
    path: &str,
    capabilities: &[Capability],
) -> Result<TokenEntry, Denied> {
    let token = token.ok_or(Denied::NoToken)?;
    let entry = open.tokens.lookup(token, now())?;
    let acl = entry.acl(|name| open.policies.get(name));
    if capabilities.iter().all(|cap| acl.allows(path, *cap)) {
        Ok(entry.clone())
    } else {
        Err(Denied::Policy)
    }
}

/// The capability a write needs: `create` where nothing exists yet,
/// `update` otherwise (OpenBao's existence check).
pub fn create_or_update(exists: bool) -> Capability {
    if exists {
        Capability::Update
    } else {
        Capability::Create
    }
}

/// Answers `request`.
pub fn route(state: &KeyringState, request: &ApiRequest) -> Result<Reply, ApiError> {
    let path = request.path.as_str();
    if let Some(rest) = path.strip_prefix("sys/") {
        return sys::route(state, request, rest);
    }
    if let Some(rest) = path.strip_prefix("auth/token/") {
        return auth::route(state, request, rest);
    }
    if path == "transit/keys" {
        return transit_keys::route(state, request, None);
    }
    if let Some(rest) = path.strip_prefix("transit/keys/") {
        return transit_keys::route(state, request, Some(rest));
    }
    if let Some(reply) = transit_data::route(state, request) {
        return reply;
    }
    if path == "transit/random" || path.starts_with("transit/random/") {
        return transit_random::route(state, request);
    }
    // Unknown paths: sealed first, then the token, as OpenBao answers.
    state.read(|open| {
        authorize(open, request, path, &[])?;
        Err(ApiError::unsupported_path(path))
    })
}

/// A number field given as a JSON number or a decimal string.
pub fn uint_field(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, ApiError> {
    Slot::of(fields, name)
        .uint(name)
        .map_err(ApiError::bad_request)
}

/// A boolean field given as JSON or as "true"/"false".
pub fn bool_field(fields: &Map<String, Value>, name: &str) -> Result<Option<bool>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("{name}: not a boolean"))),
        Some(_) => Err(ApiError::bad_request(format!("{name}: not a boolean"))),
    }
}

/// A text field.
pub fn str_field<'a>(
    fields: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(format!("{name}: not a string"))),
    }
}

/// A duration field as OpenBao takes it: seconds as a number or a
/// string, or Go's duration form with units `d`, `h`, `m`, `s` (`90s`,
/// `1h`, `1h30m0s`: what the CLI sends for `-ttl=1h`).
pub fn duration_field(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "{name}: not a duration (e.g. 3600, \"1h\", \"1h30m\")"
        ))
    };
    match fields.get(name) {
        Some(Value::String(s)) => parse_duration(s.trim()).map(Some).ok_or_else(bad),
        _ => uint_field(fields, name).map_err(|_| bad()),
    }
}

/// Seconds in `text`: empty (0), digits (seconds), or number-unit pairs.
fn parse_duration(text: &str) -> Option<u64> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return if text.is_empty() {
            Some(0)
        } else {
            text.parse().ok()
        };
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(scale)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, request_id};

    /// A UUID's shape (8-4-4-4-12 lowercase hex digits), and two ids
    /// differ.
    #[test]
    fn request_ids_are_uuid_shaped_and_random() {
        let id = request_id();
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(
            id.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{id}"
        );
        assert_ne!(id, request_id());
    }

    /// Ids from a counter do not show it: 10 000 in a row are all
    /// different, and so are their first eight digits and their last
    /// twelve (a counter shown in the clear would repeat one of them),
    /// and every hex digit turns up about as often in every place.
    #[test]
    fn request_ids_do_not_repeat_or_show_their_counter() {
        let ids: Vec<String> = (0..10_000).map(|_| request_id()).collect();
        let distinct = |part: fn(&str) -> &str| {
            ids.iter()
                .map(|id| part(id))
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        assert_eq!(distinct(|id| id), ids.len());
        assert_eq!(distinct(|id| &id[..8]), ids.len());
        assert_eq!(distinct(|id| &id[24..]), ids.len());
        for place in [0, 7, 9, 35] {
            let mut counts = [0usize; 16];
            for id in &ids {
                let digit = id.as_bytes()[place];
                counts[usize::from(if digit.is_ascii_digit() {
                    digit - b'0'
                } else {
                    digit - b'a' + 10
                })] += 1;
            }
            // 625 expected per digit; 400 is about nine deviations away.
            assert!(counts.iter().all(|&n| n > 400), "place {place}: {counts:?}");
        }
    }

    #[test]
    fn durations_as_the_cli_and_hvac_send_them() {
        for (text, seconds) in [
            ("", Some(0)),
            ("3600", Some(3600)),
            ("1h", Some(3600)),
            ("1h0m0s", Some(3600)),
            ("1h30m", Some(5400)),
            ("2d", Some(172_800)),
            ("90s", Some(90)),
            ("1.5h", None),
            ("h", None),
            ("10x", None),
            ("-5", None),
        ] {
            assert_eq!(parse_duration(text), seconds, "{text:?}");
        }
    }
}
