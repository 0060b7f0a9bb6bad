//! The HTTP/1.1 API (`--http-listen`): OpenBao's API for administering
//! the keyring, so the `bao` and `vault` CLIs and hvac are aesd's admin
//! tools. HTTPS with the job port's certificate (`--tls-cert`,
//! `--tls-key`) when aesd has one, plain HTTP otherwise (then keep it on
//! loopback or a trusted network). docs/aesd.md, "HTTP API", lists the
//! endpoints.
//!
//! * `api_thread`: the API's own thread and single-threaded runtime.
//! * `router`: a request's operation, token, policy check and route.
//! * `sys`: init, unseal, seal, status, health, leader, ACL policies.
//! * `auth`: tokens.
//! * `transit_keys`: named keys.
//! * `transit_data`: encrypt, decrypt, rewrap, datakey (with batches).
//! * `transit_random`: `transit/random` and `sys/tools/random`.
//! * `transit_fields`: the data endpoints' fields, OpenBao's messages.
//! * `errors`: OpenBao's `{"errors": [...]}` and status codes.
//! * `json_out`: an answer's JSON text.
//! * `audit`: the audit log's request and response lines
//!   (`--audit-log`): a line that cannot be written refuses the request
//!   with 500 before it is carried out (the request line) or before it is
//!   answered (the response line).
//!
//! Limits: a body above `http-max-request-size` gets 413; a request
//! header not complete within `http-header-timeout` closes the
//! connection, a body not complete within `http-body-timeout` gets 408
//! and closes it; at most [`MAX_CONNECTIONS`] connections at once and
//! `max-connections-per-client` from one client (an IPv4 address or an
//! IPv6 prefix, as on the job port); more are closed at once. Small
//! data requests are answered on the API's thread ([`runs_inline`]), the
//! others on its runtime's blocking threads (the store fsyncs).

mod api_thread;
mod audit;
mod auth;
mod errors;
mod json_out;
mod router;
mod sys;
mod transit_body;
mod transit_data;
mod transit_fields;
mod transit_keys;
mod transit_nonces;
mod transit_random;

pub use api_thread::ApiThread;
pub(crate) use router::{Denied, check_token, request_id};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use zeroize::Zeroizing;

pub(crate) use audit::rfc3339_now;
pub use errors::ApiError;
use router::{ApiRequest, Body, Operation};

use crate::audit_file::AuditFile;
use crate::client_id::ClientId;
use crate::keyring_state::{self, KeyringState};
use crate::limits::ConnectionLimits;
use crate::metrics::{API_ENDPOINTS, Metrics};
use crate::tls::TlsIdentity;

/// HTTP connections served at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 64;

/// The HTTP port's limits (settings `http-max-request-size`,
/// `http-header-timeout`, `http-body-timeout`,
/// `max-connections-per-client`, `client-ipv6-prefix`).
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Largest request body, bytes.
    pub max_request_size: u64,
    /// Time a request's header has to arrive in full.
    pub header_timeout: Duration,
    /// Time a request's body has to arrive in full after its header.
    pub body_timeout: Duration,
    /// Connections open at once from one client.
    pub max_connections_per_client: usize,
    /// Leading bits of an IPv6 address that identify one client.
    pub client_ipv6_prefix: u8,
}

/// Serves the API on `listener` until `stop` resolves: HTTPS with `tls`
/// (the job port's certificate), plain HTTP without.
pub async fn serve(
    listener: TcpListener,
    state: Arc<KeyringState>,
    limits: HttpLimits,
    metrics: Arc<Metrics>,
    audit: Option<Arc<AuditFile>>,
    tls: Option<TlsIdentity>,
    stop: impl Future<Output = ()>,
) {
    let caps = ConnectionLimits::new(MAX_CONNECTIONS, limits.max_connections_per_client);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::error!("http accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let slot = match caps.admit(ClientId::of(peer.ip(), limits.client_ipv6_prefix)) {
            Ok(slot) => slot,
            Err(refused) => {
                tracing::warn!(%peer, "http connection refused: {refused}");
                continue;
            }
        };
        let state = Arc::clone(&state);
        let metrics = Arc::clone(&metrics);
        let audit = audit.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                handle(
                    request,
                    Arc::clone(&state),
                    limits,
                    peer,
                    Arc::clone(&metrics),
                    audit.clone(),
                )
            });
            let http = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .clone();
            let served = match tls {
                None => http
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                    .map_err(|err| err.to_string()),
                // The handshake has the header's time to finish: a client
                // that stalls in it holds its place no longer than one
                // that stalls in a header.
                Some(tls) => {
                    match tokio::time::timeout(limits.header_timeout, tls.acceptor().accept(stream))
                        .await
                    {
                        Ok(Ok(stream)) => http
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                            .map_err(|err| err.to_string()),
                        Ok(Err(err)) => Err(format!("TLS handshake failed: {err}")),
                        Err(_) => Err(format!(
                            "TLS handshake not done within {:?}",
                            limits.header_timeout
                        )),
                    }
                }
            };
            if let Err(err) = served {
                tracing::debug!(%peer, "http connection ended: {err}");
            }
            drop(slot);
        });
    }
}

async fn handle(
    request: Request<Incoming>,
    state: Arc<KeyringState>,
    limits: HttpLimits,
    peer: SocketAddr,
    metrics: Arc<Metrics>,
    audit: Option<Arc<AuditFile>>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let started = std::time::Instant::now();
    let endpoint = endpoint_label(request.uri().path());
    let raw_method = request.method().to_string();
    let raw_path = request.uri().path().to_owned();
    let mut bytes_in = 0;
    let (status, body) = match read_request(request, limits).await {
        Ok(api) => {
            bytes_in = api.body.len();
            let method = api.method.clone();
            let path = api.path.clone();
            let (status, body) = if runs_inline(&api, &state) {
                audited_route(&state, &api, audit.as_deref(), peer, &metrics)
            } else {
                let state = Arc::clone(&state);
                let audit = audit.clone();
                let metrics = Arc::clone(&metrics);
                tokio::task::spawn_blocking(move || {
                    audited_route(&state, &api, audit.as_deref(), peer, &metrics)
                })
                .await
                .unwrap_or_else(|_| {
                    let failed = ApiError::internal("the request's handler failed");
                    (failed.status, Some(Body::Tree(failed.body())))
                })
            };
            tracing::debug!(%peer, %method, %path, status, "http request");
            (status, body)
        }
        Err(err) => {
            let (status, body) = (err.status, Some(Body::Tree(err.body())));
            match &audit {
                Some(file) => {
                    let path = raw_path.strip_prefix("/v1/").unwrap_or(&raw_path);
                    let record = audit::AuditRecord::unread(&raw_method, path, peer);
                    audit_response(file, &record, &state, status, body, &metrics)
                }
                None => (status, body),
            }
        }
    };
    // Written straight into the buffer (`Value`'s `Display` goes through
    // the formatter, several times slower on riscv32), sized for an answer
    // as long as the request (Transit's usual case) so that it is not
    // copied as it grows.
    let body = body.map(|body| body.into_text(bytes_in.saturating_add(512)));
    let bytes_out = body.as_ref().map_or(0, Vec::len);
    metrics.api_request(
        endpoint,
        status,
        started.elapsed(),
        u64::try_from(bytes_in).unwrap_or(u64::MAX),
        u64::try_from(bytes_out).unwrap_or(u64::MAX),
    );
    Ok(response(status, body))
}

/// Routes `api` between its audit lines (`audit`, if any): the request
/// is not carried out unless its request line is written, nor answered
/// unless its response line is. The status and body to send.
fn audited_route(
    state: &KeyringState,
    api: &ApiRequest,
    audit: Option<&AuditFile>,
    peer: SocketAddr,
    metrics: &Metrics,
) -> (u16, Option<Body>) {
    let rendered = |answer: Result<(u16, Option<Body>), ApiError>| match answer {
        Ok(rendered) => rendered,
        Err(err) => (err.status, Some(Body::Tree(err.body()))),
    };
    let Some(file) = audit else {
        return rendered(router::route(state, api).map(|r| r.render()));
    };
    let (record, line) = audit::AuditRecord::request(state, api, peer);
    let answer = match write_audit(file, state, &line, metrics) {
        Ok(()) => router::route(state, api).map(|r| r.render()),
        Err(refused) => Err(refused),
    };
    let (status, body) = rendered(answer);
    audit_response(file, &record, state, status, body, metrics)
}

/// Writes the response line of `record`; when it cannot be written the
/// answer is withheld and the refusal (500) sent instead.
fn audit_response(
    file: &AuditFile,
    record: &audit::AuditRecord,
    state: &KeyringState,
    status: u16,
    body: Option<Body>,
    metrics: &Metrics,
) -> (u16, Option<Body>) {
    let tree = body.as_ref().map(Body::tree);
    let line = record.response(state, status, tree.as_deref());
    drop(tree);
    match write_audit(file, state, &line, metrics) {
        Ok(()) => (status, body),
        Err(refused) => (refused.status, Some(Body::Tree(refused.body()))),
    }
}

/// Appends one audit line, chained under the keyring's audit salt (none
/// while sealed); a failure is logged, counted
/// (`aesd_errors_total{kind="audit_write"}`) and becomes the 500 the
/// request gets instead of being carried out or answered.
fn write_audit(
    file: &AuditFile,
    state: &KeyringState,
    line: &[u8],
    metrics: &Metrics,
) -> Result<(), ApiError> {
    file.append(line, state.audit_salt().as_ref())
        .map_err(|err| {
            metrics.error("audit_write");
            tracing::error!(
                path = %file.path().display(),
                "audit log cannot be written, request refused: {err}"
            );
            ApiError::internal("the audit log cannot be written: request refused (see aesd's log)")
        })
}

/// Largest body a data request is answered with on the connection's own
/// task rather than a blocking thread.
const INLINE_BODY_MAX: usize = 16 * 1024;

/// Whether `request` is answered on the connection's task: a small
/// request to Transit's decrypt, rewrap, datakey or random (work of
/// microseconds under the keyring's lock, no store write). Handing it to a
/// blocking thread and back costs more than the work (two thread wake-ups,
/// most of the server's CPU per request). Encrypt runs there when its key
/// exists (else it makes and stores the key: a blocking thread, as every
/// admin endpoint; a key deleted in between is made inline, once).
fn runs_inline(request: &ApiRequest, state: &KeyringState) -> bool {
    if request.body.len() > INLINE_BODY_MAX {
        return false;
    }
    if let Some(name) = request.path.strip_prefix("transit/encrypt/") {
        return state
            .read(|open| Ok::<_, keyring_state::StateError>(open.keyring.contains(name)))
            .unwrap_or(false);
    }
    [
        "transit/decrypt/",
        "transit/rewrap/",
        "transit/datakey/",
        "transit/random",
    ]
    .iter()
    .any(|prefix| request.path.starts_with(prefix))
}

/// The `endpoint` label of a request path (one of [`API_ENDPOINTS`]).
fn endpoint_label(path: &str) -> &'static str {
    let Some(path) = path.strip_prefix("/v1/") else {
        return "none";
    };
    API_ENDPOINTS
        .iter()
        .find(|endpoint| {
            path.strip_prefix(**endpoint)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .copied()
        .unwrap_or("other")
}

fn response(status: u16, body: Option<Vec<u8>>) -> Response<Full<Bytes>> {
    let has_body = body.is_some();
    let mut response = Response::new(Full::new(body.map_or_else(Bytes::new, Bytes::from)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if has_body {
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    response
}

fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        413,
        format!("http: request body too large (http-max-request-size is {limit} bytes)"),
    )
}

async fn read_request(
    request: Request<Incoming>,
    limits: HttpLimits,
) -> Result<ApiRequest, ApiError> {
    let (parts, body) = request.into_parts();
    let raw_path = parts.uri.path();
    let Some(path) = raw_path.strip_prefix("/v1/") else {
        return Err(ApiError::unsupported_path(raw_path));
    };
    let path = path.trim_end_matches('/').to_owned();
    let listed = parts.uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "list=true" || pair == "list=1")
    });
    let operation = match parts.method.as_str() {
        "GET" | "HEAD" if listed => Operation::List,
        "GET" | "HEAD" => Operation::Read,
        "LIST" => Operation::List,
        "PUT" | "POST" => Operation::Write,
        "DELETE" => Operation::Delete,
        other => return Err(ApiError::method_not_allowed(other, &path)),
    };
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_request_size) {
        return Err(too_large(limits.max_request_size));
    }
    let limit = usize::try_from(limits.max_request_size).unwrap_or(usize::MAX);
    let collected = tokio::time::timeout(limits.body_timeout, Limited::new(body, limit).collect())
        .await
        .map_err(|_| {
            ApiError::new(
                408,
                format!(
                    "http: request body not complete within {} s (http-body-timeout)",
                    limits.body_timeout.as_secs()
                ),
            )
        })?;
    let body = collected
        .map_err(|err| {
            if err.is::<http_body_util::LengthLimitError>() {
                too_large(limits.max_request_size)
            } else {
                ApiError::bad_request(format!("cannot read the request body: {err}"))
            }
        })?
        .to_bytes();
    // Without a copy when the body is the only owner of its buffer.
    let body = Vec::from(body);
    Ok(ApiRequest {
        operation,
        method: parts.method.to_string(),
        path,
        token: token(&parts.headers),
        body,
    })
}

/// `X-Vault-Token`, else `Authorization: Bearer`.
fn token(headers: &hyper::HeaderMap) -> Option<Zeroizing<String>> {
    if let Some(value) = headers.get("x-vault-token").and_then(|v| v.to_str().ok()) {
        return Some(Zeroizing::new(value.trim().to_owned()));
    }
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| Zeroizing::new(t.trim().to_owned()))
}
