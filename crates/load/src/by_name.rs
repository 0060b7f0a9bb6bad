//! By-name transfers (`aesload --key NAME`): each client encrypts its
//! pattern under a key of the server's keyring and verifies the result by
//! decrypting it, by name, through the server again, on a second
//! connection, comparing every byte with what was sent.
//!
//! The file key is wrapped by the server's key, so aesload cannot open
//! the file itself: the check is the round trip. Both jobs run at once,
//! the encryption's output fed to the decryption as it comes
//! ([`pipe`]). Neither can hold a slot waiting for the other, so no
//! server, however few its slots, deadlocks on them:
//! - the encryption never waits for the decryption (the pipe holds what
//!   the decryption has not taken yet), so a server with every slot
//!   taken by encryptions does not wait on their queued decryptions;
//! - the decryption is begun only once the encryption's first output
//!   has come (or it ended), so the encryption already holds a slot, or
//!   is done, whenever the decryption is admitted: a server with every
//!   slot taken by decryptions whose encryptions wait in its queue
//!   cannot happen.
//!
//! A decryption that keeps up holds a few chunks, one that waits in the
//! queue holds the file until it runs.
//!
//! Before a run, [`preflight`] encrypts and decrypts a few bytes on each
//! server, so a missing key, a refused token or a sealed keyring is one
//! clear error instead of a run of failed transfers.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use aesd_age::HeaderReader;
use aesd_client::by_name::STANZA_TYPE;
use aesd_client::connection::{Client, ConnectOptions};
use aesd_client::{ClientError, JobEvent, JobReport};
use aesd_proto::{ErrorCode, Operation, Secret};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::pattern::Pattern;

/// The key and token of a by-name run.
#[derive(Debug, Clone)]
pub struct KeyByName {
    /// The key's name in the server's keyring.
    pub name: String,
    /// The keyring token (sent on each connection before its job).
    pub token: Secret,
}

/// Why a by-name result did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByNameVerifyError {
    /// The encryption's output does not start with a by-name header for
    /// the key.
    #[error("the encrypted file's header is not one aesd-key stanza for key {0:?}")]
    Header(String),
    /// The verifying decryption failed.
    #[error("the verifying decryption by name failed: {kind}: {message}")]
    Decrypt {
        /// The failure's kind (the server's error code, or the client's).
        kind: &'static str,
        /// The server's error code, when it refused.
        code: Option<ErrorCode>,
        /// What was said.
        message: String,
    },
    /// A decrypted byte differs from what was sent.
    #[error("decrypted data differs from the input at byte {0}")]
    Mismatch(u64),
    /// The decrypted length differs from what was sent.
    #[error("decrypted {got} bytes, expected {expected}")]
    Length {
        /// Bytes sent.
        expected: u64,
        /// Bytes recovered.
        got: u64,
    },
}

/// An async writer that compares what is written with a [`Pattern`]:
/// the plaintext of the verifying decryption.
pub struct PlainVerifyingSink {
    expected: Pattern,
    expected_len: u64,
    checked: u64,
    scratch: Vec<u8>,
    failure: Option<ByNameVerifyError>,
}

impl PlainVerifyingSink {
    /// A sink expecting `len` bytes of `expected`.
    pub fn new(expected: Pattern, len: u64) -> Self {
        PlainVerifyingSink {
            expected,
            expected_len: len,
            checked: 0,
            scratch: Vec::new(),
            failure: None,
        }
    }

    fn absorb(&mut self, bytes: &[u8]) -> Result<(), ByNameVerifyError> {
        if self.checked + bytes.len() as u64 > self.expected_len {
            return Err(ByNameVerifyError::Length {
                expected: self.expected_len,
                got: self.checked + bytes.len() as u64,
            });
        }
        self.scratch.resize(bytes.len(), 0);
        self.expected.fill(&mut self.scratch);
        if let Some(at) = self.scratch.iter().zip(bytes).position(|(a, b)| a != b) {
            return Err(ByNameVerifyError::Mismatch(self.checked + at as u64));
        }
        self.checked += bytes.len() as u64;
        Ok(())
    }

    /// The verdict: the bytes checked, or the first failure.
    pub fn finish(mut self) -> Result<u64, ByNameVerifyError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        if self.checked != self.expected_len {
            return Err(ByNameVerifyError::Length {
                expected: self.expected_len,
                got: self.checked,
            });
        }
        Ok(self.checked)
    }
}

crate::absorbing::absorbing_async_write!(PlainVerifyingSink);

/// What the two ends of a [`pipe`] share.
#[derive(Default)]
struct PipeState {
    chunks: VecDeque<Vec<u8>>,
    /// The writer is gone or shut down: the reader sees the end.
    closed: bool,
    /// The reader is gone: writes are dropped.
    reader_gone: bool,
    waker: Option<Waker>,
}

/// The writing end of a [`pipe`]: never waits.
pub struct PipeWriter(Arc<Mutex<PipeState>>);

/// The reading end of a [`pipe`].
pub struct PipeReader {
    state: Arc<Mutex<PipeState>>,
    /// The front chunk's bytes not read yet, from this offset.
    offset: usize,
}

/// An in-memory pipe whose writer never waits: what the reader has not
/// taken is held. When the reader is dropped, writes are accepted and
/// dropped (the writing job completes and its figures are kept).
pub fn pipe() -> (PipeWriter, PipeReader) {
    let state = Arc::new(Mutex::new(PipeState::default()));
    (
        PipeWriter(Arc::clone(&state)),
        PipeReader { state, offset: 0 },
    )
}

fn lock(state: &Mutex<PipeState>) -> std::sync::MutexGuard<'_, PipeState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl PipeWriter {
    fn close(&self) {
        let mut state = lock(&self.0);
        state.closed = true;
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        self.close();
    }
}

impl AsyncWrite for PipeWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut state = lock(&self.0);
        if !state.reader_gone && !buf.is_empty() {
            state.chunks.push_back(buf.to_vec());
            if let Some(waker) = state.waker.take() {
                waker.wake();
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.close();
        Poll::Ready(Ok(()))
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.reader_gone = true;
        state.chunks.clear();
    }
}

impl PipeReader {
    /// Waits until there is something to read, or the writer is done.
    pub async fn readable(&self) {
        std::future::poll_fn(|cx| {
            let mut state = lock(&self.state);
            if state.chunks.is_empty() && !state.closed {
                state.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            Poll::Ready(())
        })
        .await;
    }
}

impl AsyncRead for PipeReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let mut state = lock(&this.state);
        let Some(front) = state.chunks.front() else {
            if !state.closed {
                state.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            return Poll::Ready(Ok(()));
        };
        let take = (front.len() - this.offset).min(buf.remaining());
        buf.put_slice(&front[this.offset..this.offset + take]);
        this.offset += take;
        if this.offset == front.len() {
            state.chunks.pop_front();
            this.offset = 0;
        }
        Poll::Ready(Ok(()))
    }
}

/// A writer that checks the by-name header at the start of what passes
/// through it to `inner`.
struct HeaderCheck<W> {
    inner: W,
    name: String,
    reader: Option<HeaderReader>,
    failure: Option<ByNameVerifyError>,
}

impl<W> HeaderCheck<W> {
    fn new(inner: W, name: &str) -> Self {
        HeaderCheck {
            inner,
            name: name.to_owned(),
            reader: Some(HeaderReader::new()),
            failure: None,
        }
    }

    fn check(&mut self, bytes: &[u8]) {
        let Some(reader) = &mut self.reader else {
            return;
        };
        let fits = match reader.push(bytes) {
            Ok(None) => return,
            Ok(Some((header, _))) => {
                header.stanzas.len() == 1
                    && header.stanzas[0].args.len() == 3
                    && header.stanzas[0].args[0] == STANZA_TYPE
                    && header.stanzas[0].args[1] == self.name
            }
            Err(_) => false,
        };
        self.reader = None;
        if !fits {
            self.failure = Some(ByNameVerifyError::Header(self.name.clone()));
        }
    }

    /// The first failure, or one when the header never ended.
    fn verdict(&self) -> Result<(), ByNameVerifyError> {
        match (&self.failure, &self.reader) {
            (Some(failure), _) => Err(failure.clone()),
            (None, Some(_)) => Err(ByNameVerifyError::Header(self.name.clone())),
            (None, None) => Ok(()),
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for HeaderCheck<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let written = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.check(&buf[..written]);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A by-name encryption of `input` on `encrypt` (connected, its token
/// sent), verified by a decryption on `decrypt` (likewise) against
/// `expected` (`len` bytes). The encryption's report, or its error; then
/// the verdict. `observe` sees the encryption's events.
pub async fn encrypt_verified<R, F>(
    encrypt: &mut Client,
    decrypt: &mut Client,
    name: &str,
    input: &mut R,
    expected: Pattern,
    len: u64,
    observe: F,
) -> Result<(JobReport, Result<(), ByNameVerifyError>), ClientError>
where
    R: AsyncRead + Unpin,
    F: FnMut(JobEvent),
{
    let (writer, mut reader) = pipe();
    let mut sink = PlainVerifyingSink::new(expected, len);
    let encrypting = async {
        let mut output = HeaderCheck::new(writer, name);
        let result = encrypt
            .run_by_name_job_observed(Operation::Encrypt, name, input, &mut output, observe)
            .await;
        // The decryption sees the end now, whatever happened.
        output.inner.close();
        (result, output.verdict())
    };
    let decrypting = async {
        // Begun once the encryption runs (module doc): never a slot
        // held waiting for a job still in the queue.
        reader.readable().await;
        decrypt
            .run_by_name_job_observed(Operation::Decrypt, name, &mut reader, &mut sink, |_| {})
            .await
    };
    let ((encrypted, header), decrypted) = tokio::join!(encrypting, decrypting);
    let report = encrypted?;
    let verdict = header.and_then(|()| match decrypted {
        Ok(_) => sink.finish().map(drop),
        Err(err) => Err(ByNameVerifyError::Decrypt {
            kind: err.kind(),
            code: match &err {
                ClientError::Server(frame) => Some(frame.code),
                _ => None,
            },
            message: err.to_string(),
        }),
    });
    Ok((report, verdict))
}

/// Why a by-name run cannot start on a server.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The server refused the key, the token or the job.
    #[error("{server}: {advice} ({code}: {message})")]
    Refused {
        /// The server.
        server: String,
        /// The server's error code.
        code: &'static str,
        /// What it said.
        message: String,
        /// What to do about it.
        advice: String,
    },
    /// The trial job failed otherwise (connection, protocol).
    #[error("{server}: a by-name trial job failed: {source}")]
    Failed {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// The trial's round trip did not give back what was sent.
    #[error("{server}: a by-name trial job did not verify: {source}")]
    NotVerified {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: ByNameVerifyError,
    },
}

/// What to do about a server's refusal of a by-name job on `name`.
fn advice(code: ErrorCode, name: &str) -> String {
    match code {
        ErrorCode::UnknownKey => format!(
            "the keyring has no key {name:?}: create it first (bao write -f transit/keys/{name})"
        ),
        ErrorCode::BadKeyToken => {
            "the keyring token in --token-file was refused (missing, wrong, revoked or expired)"
                .to_owned()
        }
        ErrorCode::PermissionDenied => format!(
            "the token may not do both jobs of a verified run: it needs update on \
             transit/encrypt/{name} and transit/decrypt/{name}"
        ),
        ErrorCode::Sealed => {
            "the server's keyring is sealed, or it has none: unseal it (bao operator unseal), \
             or start aesd with --keyring DIR or --dev"
                .to_owned()
        }
        _ => "the server refused a by-name job".to_owned(),
    }
}

/// Bytes of the trial job.
const TRIAL_LEN: u64 = 1024;

/// Encrypts and decrypts [`TRIAL_LEN`] bytes by name on `server`: `Ok`
/// when the key exists, the token may encrypt and decrypt with it and the
/// keyring is unsealed; else the typed refusal with what to do about it.
pub async fn preflight(
    server: &str,
    options: &ConnectOptions,
    idle_timeout: std::time::Duration,
    key: &KeyByName,
) -> Result<(), PreflightError> {
    let failed = |source: ClientError| match source {
        ClientError::Server(frame) => PreflightError::Refused {
            server: server.to_owned(),
            code: frame.code.name(),
            message: frame.message.clone(),
            advice: advice(frame.code, &key.name),
        },
        source => PreflightError::Failed {
            server: server.to_owned(),
            source,
        },
    };
    let connect = || async {
        let mut client = Client::connect_within(server, options, idle_timeout).await?;
        client.set_idle_timeout(idle_timeout);
        client.send_key_token(key.token.as_bytes()).await?;
        Ok::<Client, ClientError>(client)
    };
    let mut encrypt = connect().await.map_err(failed)?;
    let mut decrypt = connect().await.map_err(failed)?;
    let seed = 0x7e57;
    let mut input = crate::pattern::PatternSource::new(seed, TRIAL_LEN);
    let (_, verdict) = encrypt_verified(
        &mut encrypt,
        &mut decrypt,
        &key.name,
        &mut input,
        Pattern::new(seed),
        TRIAL_LEN,
        |_| {},
    )
    .await
    .map_err(failed)?;
    encrypt.close().await;
    decrypt.close().await;
    match verdict {
        Ok(()) => Ok(()),
        // The decryption's refusal, as the encryption's would be.
        Err(ByNameVerifyError::Decrypt {
            code: Some(code),
            message,
            ..
        }) => Err(PreflightError::Refused {
            server: server.to_owned(),
            code: code.name(),
            message,
            advice: advice(code, &key.name),
        }),
        Err(source) => Err(PreflightError::NotVerified {
            server: server.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_pipe_passes_everything_in_order_and_never_makes_the_writer_wait() {
        let (mut writer, mut reader) = pipe();
        // 1000 writes before any read: none waits.
        for index in 0..1000u32 {
            writer.write_all(&index.to_le_bytes()).await.expect("write");
        }
        writer.shutdown().await.expect("shutdown");
        let mut read = Vec::new();
        reader.read_to_end(&mut read).await.expect("read");
        let expected: Vec<u8> = (0..1000u32).flat_map(u32::to_le_bytes).collect();
        assert_eq!(read, expected);
    }

    #[tokio::test]
    async fn the_reader_is_readable_only_once_there_is_data_or_an_end() {
        use std::time::Duration;
        let (mut writer, reader) = pipe();
        let pending = tokio::time::timeout(Duration::from_millis(50), reader.readable()).await;
        assert!(pending.is_err(), "readable before anything was written");
        writer.write_all(b"x").await.expect("write");
        tokio::time::timeout(Duration::from_secs(5), reader.readable())
            .await
            .expect("readable once written");
        let (writer, reader) = pipe();
        drop(writer);
        tokio::time::timeout(Duration::from_secs(5), reader.readable())
            .await
            .expect("readable once the writer is gone");
    }

    #[tokio::test]
    async fn writes_after_the_reader_is_gone_are_accepted_and_dropped() {
        let (mut writer, reader) = pipe();
        drop(reader);
        writer.write_all(&[1; 100]).await.expect("accepted");
        assert!(lock(&writer.0).chunks.is_empty());
    }

    #[test]
    fn the_plain_sink_finds_a_changed_byte_and_a_wrong_length() {
        let mut expected = vec![0u8; 1000];
        Pattern::new(3).fill(&mut expected);
        let check = |bytes: &[u8], len: u64| {
            let mut sink = PlainVerifyingSink::new(Pattern::new(3), len);
            for piece in bytes.chunks(77) {
                if sink.failure.is_none()
                    && let Err(failure) = sink.absorb(piece)
                {
                    sink.failure = Some(failure);
                }
            }
            sink.finish()
        };
        assert_eq!(check(&expected, 1000), Ok(1000));
        let mut changed = expected.clone();
        changed[500] ^= 1;
        assert_eq!(check(&changed, 1000), Err(ByNameVerifyError::Mismatch(500)));
        assert_eq!(
            check(&expected[..999], 1000),
            Err(ByNameVerifyError::Length {
                expected: 1000,
                got: 999
            })
        );
        assert!(matches!(
            check(&expected, 999),
            Err(ByNameVerifyError::Length { .. })
        ));
    }
}
