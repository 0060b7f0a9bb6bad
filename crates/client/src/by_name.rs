//! By-name jobs (key source 5): files under a key of the server's
//! keyring. The connection first sends the keyring token
//! ([`Client::send_key_token`]); the server wraps each file's key with
//! the named key and checks the token's policies. A rewrap sends the
//! file's header only ([`Client::rewrap_header`]): the payload never
//! leaves this machine and stays byte for byte as it was.
//!
//! For clients that encrypt the payload themselves ([`crate::local`]): a
//! data key ([`Client::data_key`]) is a fresh file key and the by-name
//! header that wraps it; an unwrap ([`Client::unwrap_header`]) is the file
//! key of a header. Both answers are held in wiped memory here and
//! checked against each other (the header's MAC under the file key). A
//! wrapped-only data key ([`Client::data_key_wrapped`]) is the header
//! alone, for a client that must not see the file key: it prepares
//! headers that another client, allowed to unwrap them, encrypts under.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use aesd_age::{FileKey, Header, HeaderReader, MAX_HEADER_LEN};
use aesd_proto::{KeySource, Message, Operation, Secret};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use zeroize::Zeroizing;

use crate::connection::Client;
use crate::error::ClientError;
use crate::job::{JobEvent, JobReport};
use crate::key_source::ChosenKey;

/// The stanza type a by-name file's header holds (`-> aesd-key NAME VERSION`).
pub const STANZA_TYPE: &str = "aesd-key";

/// A rewrapped header and what was read past the old one.
#[derive(Debug)]
pub struct Rewrapped {
    /// The new header (the file key wrapped by the key's latest version).
    pub header: Vec<u8>,
    /// Bytes of the input read past the old header: the payload's start,
    /// to be written after the new header, unchanged.
    pub payload_start: Vec<u8>,
    /// The job's figures (bytes sent: the old header's length).
    pub report: JobReport,
}

/// A data key: a fresh file key and the by-name header that wraps it with
/// the key's latest version. Write the header, then the payload encrypted
/// with the file key ([`aesd_age::PayloadEncryptor`]): the file is a
/// by-name file like the server's.
pub struct DataKey {
    /// The file key (wiped when dropped).
    pub file_key: FileKey,
    /// The whole by-name header, up to and including its MAC line.
    pub header: Vec<u8>,
    /// The job's figures (no bytes sent).
    pub report: JobReport,
}

impl std::fmt::Debug for DataKey {
    /// The header's length only: the file key is a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKey")
            .field("header_len", &self.header.len())
            .finish_non_exhaustive()
    }
}

/// A wrapped-only data key: the by-name header that wraps a fresh file
/// key with the key's latest version; the file key stayed on the server.
/// An unwrap of the header ([`Client::unwrap_header`], by a token allowed
/// to) gives the file key to encrypt the payload with.
#[derive(Debug)]
pub struct WrappedDataKey {
    /// The whole by-name header, up to and including its MAC line.
    pub header: Vec<u8>,
    /// The job's figures (no bytes sent).
    pub report: JobReport,
}

/// An unwrapped header's file key.
pub struct Unwrapped {
    /// The file key (wiped when dropped), its header's MAC verified here.
    pub file_key: FileKey,
    /// The job's figures (bytes sent: the header's length).
    pub report: JobReport,
}

impl std::fmt::Debug for Unwrapped {
    /// Nothing of the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwrapped").finish_non_exhaustive()
    }
}

impl Client {
    /// Sends the keyring token the connection's by-name jobs run under
    /// (a key_token frame; the server answers nothing, each job checks
    /// it).
    pub async fn send_key_token(&mut self, token: &[u8]) -> Result<(), ClientError> {
        if self.broken {
            return Err(ClientError::Broken);
        }
        let frame = Message::KeyToken(Secret::new(token.to_vec()));
        frame.to_bytes().map_err(ClientError::Request)?;
        self.writer.send(&frame).await?;
        Ok(())
    }

    /// Encrypts or decrypts `input` to `output` under the keyring key
    /// `name` (see [`Client::run_job_observed`]).
    pub async fn run_by_name_job_observed<R, W, F>(
        &mut self,
        operation: Operation,
        name: &str,
        input: &mut R,
        output: &mut W,
        observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        let key = ChosenKey {
            key: KeySource::KeyName(name.to_owned()),
            read_ahead: Vec::new(),
        };
        self.run_prepared(operation, key, input, output, observe)
            .await
    }

    /// Reads a by-name file's header off `input` and has the server
    /// rewrap it with the latest version of `name`; only the header is
    /// sent. The new header is checked to be a by-name header naming
    /// `name`.
    pub async fn rewrap_header<R>(
        &mut self,
        name: &str,
        input: &mut R,
    ) -> Result<Rewrapped, ClientError>
    where
        R: AsyncRead + Unpin,
    {
        let (header_len, mut read) = read_header(input).await?;
        let payload_start = read.split_off(header_len);
        let mut header = Vec::new();
        let key = ChosenKey {
            key: KeySource::KeyName(name.to_owned()),
            read_ahead: Vec::new(),
        };
        let report = self
            .run_prepared(
                Operation::Rewrap,
                key,
                &mut read.as_slice(),
                &mut header,
                |_| {},
            )
            .await?;
        check_by_name_header(&header, name)?;
        Ok(Rewrapped {
            header,
            payload_start,
            report,
        })
    }

    /// Asks the server for a data key under the latest version of `name`
    /// (operation 4; the token needs `update` on
    /// `transit/datakey/plaintext/NAME`). The answer is checked: a by-name
    /// header for `name` whose MAC the file key verifies.
    pub async fn data_key(&mut self, name: &str) -> Result<DataKey, ClientError> {
        let (answer, report) = self
            .key_job(Operation::DataKey, name, b"", FILE_KEY_LEN + MAX_HEADER_LEN)
            .await?;
        let bad = |what| ClientError::BadKeyAnswer {
            operation: "datakey",
            what,
        };
        let Some((key, header)) = answer.bytes.split_first_chunk::<FILE_KEY_LEN>() else {
            return Err(bad("shorter than a file key"));
        };
        let file_key = FileKey::new(*key);
        let parsed = check_by_name_header(header, name)
            .map_err(|_| bad("not one by-name header for the key asked after the file key"))?;
        parsed
            .verify_mac(&file_key)
            .map_err(|_| bad("the header's MAC does not verify under the file key"))?;
        Ok(DataKey {
            file_key,
            header: header.to_vec(),
            report,
        })
    }

    /// Asks the server for a wrapped-only data key under the latest
    /// version of `name` (operation 6; the token needs `update` on
    /// `transit/datakey/wrapped/NAME`): the header alone. The answer is
    /// checked to be one whole by-name header for `name` (its MAC cannot
    /// be checked here: that needs the file key).
    pub async fn data_key_wrapped(&mut self, name: &str) -> Result<WrappedDataKey, ClientError> {
        let (answer, report) = self
            .key_job(Operation::DataKeyWrapped, name, b"", MAX_HEADER_LEN)
            .await?;
        check_by_name_header(&answer.bytes, name).map_err(|_| ClientError::BadKeyAnswer {
            operation: "datakey-wrapped",
            what: "not one by-name header for the key asked",
        })?;
        Ok(WrappedDataKey {
            header: answer.bytes.to_vec(),
            report,
        })
    }

    /// Has the server unwrap the file key of the by-name `header` (the
    /// whole header, up to its MAC line, and nothing else) under the key
    /// `name` (operation 5; the token needs `update` on
    /// `transit/decrypt/NAME`). The server verifies the header's MAC; so
    /// does this client with the key it got.
    pub async fn unwrap_header(
        &mut self,
        name: &str,
        header: &[u8],
    ) -> Result<Unwrapped, ClientError> {
        let (answer, report) = self
            .key_job(Operation::Unwrap, name, header, FILE_KEY_LEN)
            .await?;
        let bad = |what| ClientError::BadKeyAnswer {
            operation: "unwrap",
            what,
        };
        let key = <[u8; FILE_KEY_LEN]>::try_from(answer.bytes.as_slice())
            .map_err(|_| bad("not a 16-byte file key"))?;
        let file_key = FileKey::new(key);
        let (parsed, _) = HeaderReader::new()
            .push(header)?
            .ok_or(ClientError::Age(aesd_age::AgeError::TruncatedHeader))?;
        parsed
            .verify_mac(&file_key)
            .map_err(|_| bad("the header's MAC does not verify under the file key"))?;
        Ok(Unwrapped { file_key, report })
    }

    /// Runs the key job `operation` (datakey, datakey-wrapped, unwrap) on
    /// the key `name` with `input`, its answer collected in a [`KeyAnswer`]
    /// of at most `capacity` bytes.
    async fn key_job(
        &mut self,
        operation: Operation,
        name: &str,
        input: &[u8],
        capacity: usize,
    ) -> Result<(KeyAnswer, JobReport), ClientError> {
        let mut answer = KeyAnswer::new(capacity);
        let report = self
            .run_prepared(
                operation,
                by_name(name),
                &mut &input[..],
                &mut answer,
                |_| {},
            )
            .await?;
        Ok((answer, report))
    }
}

/// A file key's length.
const FILE_KEY_LEN: usize = 16;

/// Key source 5 for `name`.
fn by_name(name: &str) -> ChosenKey {
    ChosenKey {
        key: KeySource::KeyName(name.to_owned()),
        read_ahead: Vec::new(),
    }
}

/// A job's output that holds a file key: wiped when dropped, and never
/// reallocated (its capacity is fixed: more is an error), so no unwiped
/// copy is left behind. A wrapped-only data key's header goes here too,
/// for the same bound on what the server may send.
struct KeyAnswer {
    bytes: Zeroizing<Vec<u8>>,
}

impl KeyAnswer {
    fn new(capacity: usize) -> Self {
        KeyAnswer {
            bytes: Zeroizing::new(Vec::with_capacity(capacity)),
        }
    }
}

impl AsyncWrite for KeyAnswer {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.bytes.capacity() - this.bytes.len() < data.len() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server's answer is longer than a key job's answer may be",
            )));
        }
        this.bytes.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Reads `input` until a whole age header came: its length and every
/// byte read.
pub(crate) async fn read_header<R: AsyncRead + Unpin>(
    input: &mut R,
) -> Result<(usize, Vec<u8>), ClientError> {
    let mut reader = HeaderReader::new();
    let mut read = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = input.read(&mut buf).await.map_err(ClientError::Input)?;
        if n == 0 {
            return Err(reader.finish().into());
        }
        let before = read.len();
        read.extend_from_slice(&buf[..n]);
        if let Some((_, used)) = reader.push(&buf[..n])? {
            return Ok((before + used, read));
        }
        debug_assert!(read.len() <= MAX_HEADER_LEN + buf.len());
    }
}

/// `header` parsed, if it is one whole by-name header for `name`.
fn check_by_name_header(header: &[u8], name: &str) -> Result<Header, ClientError> {
    let bad = || {
        ClientError::Age(aesd_age::AgeError::BadHeader {
            what: "the server's rewrapped header is not one aesd-key stanza for the key asked",
        })
    };
    let (parsed, used) = HeaderReader::new().push(header)?.ok_or_else(bad)?;
    let fits = used == header.len()
        && parsed.stanzas.len() == 1
        && parsed.stanzas[0].args.len() == 3
        && parsed.stanzas[0].args[0] == STANZA_TYPE
        && parsed.stanzas[0].args[1] == name;
    if fits { Ok(parsed) } else { Err(bad()) }
}
