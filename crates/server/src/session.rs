//! One client connection: the handshake, then jobs one after another.
//!
//! After a job fails with an error that leaves the byte stream in step
//! (wrong password, bad ciphertext, busy, iteration limit), the session
//! discards the client's remaining input up to its end frame and waits for
//! the next begin. Protocol violations, timeouts and shutdown close the
//! connection after the error frame.
//!
//! The session is the only place that tells a client about an error:
//! [`report`] counts it (`aesd_errors_total{kind}`), logs it and sends
//! its one error frame, for a failed job, a closing connection and a
//! connection refused before its session ([`refuse`]) alike.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aesd_proto::handshake::PROTOCOL_VERSION;
use aesd_proto::{
    ErrorCode, FrameError, FrameKind, FrameReader, FrameWriter, Message, ProtoError, Welcome,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at};
use tracing::{debug, info, warn};

use crate::error::JobError;
use crate::input_rate::{ByteCounter, Metered};
use crate::job;
use crate::limits::ConnectionSlot;
use crate::log_limit::Decision;
use crate::proxy::ProxyError;
use crate::shared::Shared;
use crate::tls::TLS_HANDSHAKE_BYTE;
use crate::tls_accept;

/// How long a refused connection is given to take its error frame.
const REFUSAL_WRITE_LIMIT: Duration = Duration::from_secs(1);

/// Answers a connection refused before its session (over the connection
/// caps: `busy`; a bad PROXY header) with an error frame and closes it. A
/// connection that closed before sending anything is only counted.
pub async fn refuse(stream: TcpStream, peer: SocketAddr, error: JobError, shared: Arc<Shared>) {
    let mut writer = FrameWriter::new(stream);
    if matches!(error, JobError::ClientGone) {
        report_unreachable(peer, &error, &shared);
    } else {
        report(&mut writer, peer, &error, REFUSAL_WRITE_LIMIT, &shared).await;
    }
    let _ = writer.shutdown().await;
}

/// The one way an error reaches the client: counts it, logs it, and sends
/// its error frame (within `limit`) unless the client cannot take it (the
/// transport failed, or it left before a byte). Whether the connection
/// closes afterwards is the caller's to follow from
/// [`JobError::closes_connection`]. Returns whether the frame was sent.
async fn report<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    peer: SocketAddr,
    error: &JobError,
    limit: Duration,
    shared: &Shared,
) -> bool {
    shared.metrics.error(error.kind());
    log_error(peer, error, shared);
    if !error.peer_reachable() {
        return false;
    }
    matches!(
        timeout(limit, writer.send(&Message::Error(error.to_frame()))).await,
        Ok(Ok(()))
    )
}

/// Serves one accepted connection until it closes; `slot` holds its place
/// under the connection caps (and may be taken back while the connection
/// waits for a job, see [`crate::limits`]).
pub async fn serve(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, slot: ConnectionSlot) {
    if let Err(err) = stream.set_nodelay(true) {
        debug!(%peer, "cannot set TCP_NODELAY: {err}");
    }
    let Some(tls) = shared.config.tls.clone() else {
        let (read, write) = stream.into_split();
        serve_io_in(read, write, peer, &shared, Some(&slot)).await;
        return;
    };
    // A TLS port: the first byte says whether the client starts TLS.
    let limit = shared.config.handshake_timeout;
    let mut first = [0u8; 1];
    let peeked = timeout(limit, stream.peek(&mut first)).await;
    let error = match peeked {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_BYTE => {
            match tls_accept::accept(stream, peer, &shared, &tls).await {
                Ok(tls_stream) => {
                    let (read, write) = tokio::io::split(tls_stream);
                    serve_io_in(read, write, peer, &shared, Some(&slot)).await;
                }
                // No channel to tell the client.
                Err(error) => report_unreachable(peer, &error, &shared),
            }
            return;
        }
        Ok(Ok(0)) | Ok(Err(_)) => JobError::ClientGone,
        Ok(Ok(_)) => JobError::TlsRequired,
        Err(_) => JobError::Timeout {
            what: "waiting for the TLS handshake",
            limit,
        },
    };
    refuse(stream, peer, error, shared).await;
}

/// Logs a client's error, within the client's share of log lines
/// ([`crate::log_limit`]). Refusals (`busy`, `unauthorized`,
/// `tls_required`) are logged at debug: they are the server working as
/// configured, and `aesd_errors_total` counts them; failed jobs at info,
/// connections closed for an error at warn.
fn log_error(peer: SocketAddr, error: &JobError, shared: &Shared) {
    if matches!(error, JobError::ShuttingDown | JobError::ClientGone) {
        debug!(%peer, "connection ended: {error}");
        return;
    }
    let client = shared.client_key(peer.ip());
    let summary = match shared.log_limit.admit(client, std::time::Instant::now()) {
        Decision::Suppress => return,
        Decision::Log(summary) => summary,
    };
    if let Some(summary) = summary {
        summary.log();
    }
    let code = error.code();
    match error {
        _ if matches!(
            code,
            ErrorCode::Busy | ErrorCode::Unauthorized | ErrorCode::TlsRequired
        ) =>
        {
            debug!(%peer, %code, "refused: {error}");
        }
        // Failed handshakes: probes and broken clients, as before TLS.
        JobError::TlsHandshake(_) => debug!(%peer, "connection closed: {error}"),
        error if !error.closes_connection() => info!(%peer, %code, "job failed: {error}"),
        error => warn!(%peer, %code, "connection closed: {error}"),
    }
}

/// Counts and logs an error the client cannot be told (no channel to it),
/// within the client's share of log lines.
fn report_unreachable(peer: SocketAddr, error: &JobError, shared: &Shared) {
    shared.metrics.error(error.kind());
    log_error(peer, error, shared);
}

/// Serves one connection over any pair of byte streams (the halves of a
/// TCP connection; in-memory streams in the fuzzer) until it closes.
pub async fn serve_io<R, W>(read: R, write: W, peer: SocketAddr, shared: &Arc<Shared>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_io_in(read, write, peer, shared, None).await;
}

/// [`serve_io`] for a connection holding `slot` under the connection caps:
/// marked idle while it waits for a job, and closed with `busy` when its
/// place is taken for another client's connection.
async fn serve_io_in<R, W>(
    read: R,
    write: W,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    slot: Option<&ConnectionSlot>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let _open = shared.metrics.connection_opened();
    let input = ByteCounter::default();
    let mut reader = FrameReader::new(Metered::new(read, input.clone()), shared.config.chunk_size);
    let mut writer = FrameWriter::new(write);
    if let Err(error) = run(&mut reader, &mut writer, peer, &input, shared, slot).await {
        let limit = shared.config.handshake_timeout;
        report(&mut writer, peer, &error, limit, shared).await;
    }
    let _ = writer.shutdown().await;
}

/// Runs the connection until it ends: `Ok` when the client closed it
/// between jobs, else the error that closes it (not yet reported).
async fn run<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    peer: SocketAddr,
    input: &ByteCounter,
    shared: &Arc<Shared>,
    slot: Option<&ConnectionSlot>,
) -> Result<(), JobError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let config = &shared.config;
    let hello = timeout(config.handshake_timeout, reader.read_hello())
        .await
        .map_err(|_| JobError::Timeout {
            what: "waiting for the hello",
            limit: config.handshake_timeout,
        })?
        .map_err(|err| match JobError::from(err) {
            // Connected and closed without a byte: a port probe or health
            // check, not a broken client.
            JobError::Truncated { got: 0, .. } => JobError::ClientGone,
            JobError::Io(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {
                JobError::ClientGone
            }
            // Only trusted proxies may say who the client is.
            JobError::Protocol(ProtoError::BadMagic { found })
                if ProxyError::looks_like_header(&found) =>
            {
                JobError::Proxy(ProxyError::Untrusted { peer })
            }
            other => other,
        })?;
    if hello.version != PROTOCOL_VERSION {
        return Err(JobError::UnsupportedVersion(hello.version));
    }
    writer
        .send(&Message::Welcome(Welcome {
            version: PROTOCOL_VERSION,
            max_data: config.chunk_size,
            server: shared.name.clone(),
            token_required: config.access_token.is_some(),
            derived_keys: hello.derived_keys,
        }))
        .await?;
    authenticate(reader, writer, peer, shared).await?;

    let mut jobs_run = 0u64;
    loop {
        // The whole begin frame, header and payload, must arrive within
        // the idle limit: a client dripping it a byte at a time cannot
        // hold the connection.
        let deadline = tokio::time::Instant::now() + config.idle_timeout;
        // Between jobs the connection's place may go to another client's
        // connection when the server is at max-connections.
        let evicted = async {
            match slot {
                Some(slot) => {
                    slot.set_idle(true);
                    slot.evicted().await
                }
                None => std::future::pending().await,
            }
        };
        let header = tokio::select! {
            biased;
            () = shared.shutdown.stopping() => return Err(JobError::ShuttingDown),
            why = evicted => return Err(JobError::ConnectionsFull(why)),
            header = timeout_at(deadline, reader.next_header()) => header,
        };
        if let Some(slot) = slot {
            slot.set_idle(false);
        }
        let header = header.map_err(|_| JobError::Timeout {
            what: "waiting for the next job",
            limit: config.idle_timeout,
        })?;
        let header = match header {
            // A reset between jobs is a client leaving, like a close
            // (load balancers' health checks reset after the welcome).
            Err(FrameError::Io(err)) if err.kind() == std::io::ErrorKind::ConnectionReset => {
                return Ok(());
            }
            other => other.map_err(JobError::from)?,
        };
        let Some(header) = header else {
            return Ok(());
        };
        if header.kind != FrameKind::Begin {
            return Err(JobError::UnexpectedFrame {
                got: header.kind.name(),
                state: "before begin (a job starts with a begin frame)",
            });
        }
        let body = timeout_at(deadline, reader.read_body(header))
            .await
            .map_err(|_| JobError::Timeout {
                what: "reading a begin frame",
                limit: config.idle_timeout,
            })?;
        let Message::Begin(begin) = body.map_err(JobError::from)? else {
            return Err(JobError::Internal(
                "begin frame decoded as another kind".into(),
            ));
        };
        if jobs_run >= config.max_jobs_per_connection {
            return Err(JobError::TooManyJobs {
                limit: config.max_jobs_per_connection,
            });
        }
        jobs_run += 1;
        let operation = begin.operation;
        let client = shared.client_key(peer.ip());
        let outcome = job::run(reader, writer, begin, client, input, shared.job_context()).await;
        match outcome.result {
            Ok(done) => info!(
                %peer,
                op = operation.name(),
                bytes_in = done.bytes_in,
                bytes_out = done.bytes_out,
                queue_ms = done.queue_us / 1000,
                processing_ms = done.processing_us / 1000,
                "job done"
            ),
            Err(error) if error.closes_connection() => return Err(error),
            Err(error) => {
                let limit = config.idle_timeout;
                if !report(writer, peer, &error, limit, shared).await {
                    return Err(JobError::Timeout {
                        what: "sending a failed job's error frame",
                        limit,
                    });
                }
                if !outcome.input_finished {
                    discard_until_end(reader, shared).await?;
                }
            }
        }
    }
}

/// When the server requires an access token: reads the client's auth
/// frame and answers authorized, or fails with `unauthorized` after the
/// failure delay for the client's address.
async fn authenticate<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    peer: SocketAddr,
    shared: &Arc<Shared>,
) -> Result<(), JobError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(token) = &shared.config.access_token else {
        return Ok(());
    };
    let limit = shared.config.handshake_timeout;
    let message =
        timeout(limit, reader.read_message())
            .await
            .map_err(|_| JobError::Unauthorized {
                reason: "no auth frame within the handshake timeout",
            })??;
    let reason = match message {
        Some(Message::Auth(candidate)) if token.matches(candidate.as_bytes()) => {
            shared.auth_failures.succeeded(shared.client_key(peer.ip()));
            writer.send(&Message::Authorized).await?;
            return Ok(());
        }
        Some(Message::Auth(_)) => "wrong access token",
        Some(_) => "the first frame after the welcome must be auth",
        None => return Err(JobError::ClientGone),
    };
    let delay = shared.auth_failures.failed(shared.client_key(peer.ip()));
    debug!(%peer, "authentication failed ({reason}); answering in {delay:?}");
    tokio::select! {
        () = shared.shutdown.stopping() => return Err(JobError::ShuttingDown),
        () = tokio::time::sleep(delay) => {}
    }
    Err(JobError::Unauthorized { reason })
}

/// Reads and drops the rest of a failed job's input, up to its end frame.
/// Data payloads are skipped through the reader's small input buffer, so
/// discarding leaves the connection's memory as it was whatever the frame
/// sizes.
async fn discard_until_end<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    shared: &Arc<Shared>,
) -> Result<(), JobError> {
    let idle = shared.config.idle_timeout;
    let slow = |_| JobError::Timeout {
        what: "waiting for the end of a failed job's input",
        limit: idle,
    };
    loop {
        let header = timeout(idle, reader.next_header())
            .await
            .map_err(slow)?
            .map_err(JobError::from)?
            .ok_or(JobError::ClientGone)?;
        match header.kind {
            FrameKind::Data if header.len == 0 => return Err(job::empty_data_frame()),
            FrameKind::Data => timeout(idle, reader.skip_payload(header))
                .await
                .map_err(slow)?
                .map_err(JobError::from)?,
            FrameKind::End => {
                timeout(idle, reader.read_body(header))
                    .await
                    .map_err(slow)?
                    .map_err(JobError::from)?;
                return Ok(());
            }
            other => {
                return Err(JobError::UnexpectedFrame {
                    got: other.name(),
                    state: "while discarding a failed job's input",
                });
            }
        }
    }
}
