//! By-name jobs (key source 5): files under a key of the server's
//! keyring. The connection first sends the keyring token
//! ([`Client::send_key_token`]); the server wraps each file's key with
//! the named key and checks the token's policies. A rewrap sends the
//! file's header only ([`Client::rewrap_header`]): the payload never
//! leaves this machine and stays byte for byte as it was.

use aesd_age::{HeaderReader, MAX_HEADER_LEN};
use aesd_proto::{KeySource, Message, Operation, Secret};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

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
}

/// Reads `input` until a whole age header came: its length and every
/// byte read.
async fn read_header<R: AsyncRead + Unpin>(input: &mut R) -> Result<(usize, Vec<u8>), ClientError> {
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

/// Whether `header` is one whole by-name header for `name`.
fn check_by_name_header(header: &[u8], name: &str) -> Result<(), ClientError> {
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
    if fits { Ok(()) } else { Err(bad()) }
}
