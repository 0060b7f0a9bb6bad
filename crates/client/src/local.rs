//! By-name files encrypted and decrypted here, the key kept by the server:
//! only the header crosses the network. To encrypt, the server makes a
//! data key ([`Client::data_key`]: a fresh file key and its by-name
//! header); this client writes the header and encrypts the payload
//! itself. To decrypt, it reads the header off the file, has the server
//! unwrap its file key ([`Client::unwrap_header`]) and decrypts the
//! payload itself. The files are byte for byte the format the server
//! writes (PROTOCOL.md, *By name*), so either side reads the other's.
//!
//! The trade-off: the file key is on this machine while the file is
//! processed (in wiped memory), and the server never sees the payload,
//! so its audit log counts no payload bytes.

use aesd_age::{AgeError, CHUNK_LEN, NONCE_LEN, PayloadDecryptor, PayloadEncryptor, TAG_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zeroize::Zeroizing;

use crate::by_name::read_header;
use crate::connection::Client;
use crate::error::ClientError;
use crate::job::JobReport;

/// What a local encryption or decryption did.
#[derive(Debug, Clone)]
pub struct LocalReport {
    /// The key job's figures (the data key, or the unwrap of the header):
    /// all that crossed the network.
    pub key_job: JobReport,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
}

/// How much input is read at a time.
const READ_LEN: usize = CHUNK_LEN;

impl Client {
    /// Encrypts `input` to `output` as a by-name file under the key `name`,
    /// the payload encrypted here with a data key (the token needs
    /// `update` on `transit/datakey/plaintext/NAME`).
    pub async fn encrypt_locally<R, W>(
        &mut self,
        name: &str,
        input: &mut R,
        output: &mut W,
    ) -> Result<LocalReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let data_key = self.data_key(name).await?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|err| ClientError::Randomness(err.to_string()))?;
        let payload = PayloadEncryptor::new(&data_key.file_key, nonce);
        output
            .write_all(&data_key.header)
            .await
            .map_err(ClientError::Output)?;
        let header_len = data_key.header.len() as u64;
        let mut plain = Zeroizing::new(vec![0u8; READ_LEN]);
        // Ciphertext only: no wiping needed.
        let mut sealed = Vec::with_capacity(NONCE_LEN + 2 * (CHUNK_LEN + TAG_LEN) + READ_LEN);
        let (bytes_in, streamed) =
            stream_payload(payload, input, output, &mut plain[..], &mut sealed).await?;
        Ok(LocalReport {
            key_job: data_key.report,
            bytes_in,
            bytes_out: header_len + streamed,
        })
    }

    /// Decrypts the by-name file `input` (under the key `name`) to
    /// `output`: only its header is sent, to be unwrapped (the token needs
    /// `update` on `transit/decrypt/NAME`); each chunk's plaintext is
    /// written only once its tag verified.
    pub async fn decrypt_locally<R, W>(
        &mut self,
        name: &str,
        input: &mut R,
        output: &mut W,
    ) -> Result<LocalReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let (header_len, mut read) = read_header(input).await?;
        let payload_start = read.split_off(header_len);
        let unwrapped = self.unwrap_header(name, &read).await?;
        let mut payload = PayloadDecryptor::new(unwrapped.file_key);
        // Plaintext: wiped, and reserved so that it never reallocates
        // (the old block would be freed unwiped).
        let mut plain = Zeroizing::new(Vec::with_capacity(
            2 * CHUNK_LEN + READ_LEN.max(payload_start.len()),
        ));
        payload.push(&payload_start, &mut plain)?;
        let first = write_out(output, &mut plain).await?;
        let mut sealed = vec![0u8; READ_LEN];
        let (streamed_in, streamed_out) =
            stream_payload(payload, input, output, &mut sealed, &mut plain).await?;
        Ok(LocalReport {
            key_job: unwrapped.report,
            bytes_in: (header_len + payload_start.len()) as u64 + streamed_in,
            bytes_out: first + streamed_out,
        })
    }
}

/// The age payload's encryptor or decryptor, as [`stream_payload`] drives
/// it.
trait Payload {
    fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError>;
    fn finish(self, out: &mut Vec<u8>) -> Result<(), AgeError>;
}

impl Payload for PayloadEncryptor {
    fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        PayloadEncryptor::push(self, input, out)
    }

    fn finish(self, out: &mut Vec<u8>) -> Result<(), AgeError> {
        PayloadEncryptor::finish(self, out)
    }
}

impl Payload for PayloadDecryptor {
    fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        PayloadDecryptor::push(self, input, out)
    }

    fn finish(self, out: &mut Vec<u8>) -> Result<(), AgeError> {
        PayloadDecryptor::finish(self, out)
    }
}

/// Reads `input` to its end through `read_buf`, passes it through
/// `payload` into `out` and writes that to `output` as it comes, then the
/// payload's end, and flushes: the bytes read and written.
async fn stream_payload<P, R, W>(
    mut payload: P,
    input: &mut R,
    output: &mut W,
    read_buf: &mut [u8],
    out: &mut Vec<u8>,
) -> Result<(u64, u64), ClientError>
where
    P: Payload,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    loop {
        let n = input.read(read_buf).await.map_err(ClientError::Input)?;
        if n == 0 {
            break;
        }
        bytes_in += n as u64;
        payload.push(&read_buf[..n], out)?;
        bytes_out += write_out(output, out).await?;
    }
    payload.finish(out)?;
    bytes_out += write_out(output, out).await?;
    output.flush().await.map_err(ClientError::Output)?;
    Ok((bytes_in, bytes_out))
}

/// Writes `bytes` out and empties it (keeping its capacity); how many.
async fn write_out<W: AsyncWrite + Unpin>(
    output: &mut W,
    bytes: &mut Vec<u8>,
) -> Result<u64, ClientError> {
    output.write_all(bytes).await.map_err(ClientError::Output)?;
    let n = bytes.len() as u64;
    // Clearing leaves the bytes in the buffer until they are overwritten
    // or the buffer is dropped (wiped then, for plaintext).
    bytes.clear();
    Ok(n)
}
