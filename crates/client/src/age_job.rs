//! age (format 2) jobs: the server wraps a fresh file key to the
//! recipients' public keys when encrypting; to decrypt, this client reads
//! the file's header, unwraps the file key with its identity and sends the
//! server only that key. The identity never leaves this machine.

use aesd_age::{HeaderReader, Identity, MAX_HEADER_LEN, Recipient};
use aesd_proto::{AgeFileKey, KeySource, Operation};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use zeroize::Zeroizing;

use crate::connection::Client;
use crate::error::ClientError;
use crate::job::{JobEvent, JobReport};
use crate::key_source::ChosenKey;

/// What an age job needs: recipients to encrypt, identities to decrypt.
#[derive(Debug, Clone)]
pub struct AgeSpec {
    /// Encrypt or decrypt.
    pub operation: Operation,
    /// The file's recipients (encryption): 1 to
    /// [`aesd_proto::MAX_AGE_RECIPIENTS`].
    pub recipients: Vec<Recipient>,
    /// Identities to try on the file's stanzas (decryption).
    pub identities: Vec<Identity>,
}

/// The first bytes of every age file: how a decryption tells the format.
pub fn is_age(prefix: &[u8]) -> bool {
    let mut line = aesd_age::VERSION_LINE.to_vec();
    line.push(b'\n');
    let n = prefix.len().min(line.len());
    n > 0 && prefix[..n] == line[..n]
}

impl Client {
    /// The key source of an age job: the recipients' keys to encrypt; to
    /// decrypt, the file key unwrapped from the header read off `input`
    /// (those bytes are sent first by the job). Nothing is sent here.
    pub async fn prepare_age_key<R>(
        &mut self,
        spec: &AgeSpec,
        input: &mut R,
    ) -> Result<ChosenKey, ClientError>
    where
        R: AsyncRead + Unpin,
    {
        match spec.operation {
            Operation::Encrypt => Ok(ChosenKey {
                key: KeySource::AgeRecipients(
                    spec.recipients.iter().map(|r| *r.as_bytes()).collect(),
                ),
                read_ahead: Vec::new(),
            }),
            Operation::Decrypt => {
                let (file_key, read_ahead) = unwrap_from_input(&spec.identities, input).await?;
                Ok(ChosenKey {
                    key: KeySource::AgeFileKey(AgeFileKey(Zeroizing::new(*file_key.as_bytes()))),
                    read_ahead,
                })
            }
            Operation::Rewrap => Err(crate::key_source::rewrap_is_by_name()),
        }
    }

    /// Runs one age job (see [`Client::run_job_observed`]).
    pub async fn run_age_job_observed<R, W, F>(
        &mut self,
        spec: &AgeSpec,
        input: &mut R,
        output: &mut W,
        observe: F,
    ) -> Result<JobReport, ClientError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnMut(JobEvent),
    {
        if spec.operation == Operation::Encrypt
            && !(1..=aesd_proto::MAX_AGE_RECIPIENTS).contains(&spec.recipients.len())
        {
            return Err(ClientError::Age(aesd_age::AgeError::BadRecipient {
                what: "an age encryption names 1 to 32 recipients",
            }));
        }
        let key = self.prepare_age_key(spec, input).await?;
        self.run_prepared(spec.operation, key, input, output, observe)
            .await
    }
}

/// Reads the header from `input` (at most [`MAX_HEADER_LEN`] bytes, and
/// whatever else the last read brought) and unwraps the file key with the
/// first identity that fits; returns the key and every byte read.
async fn unwrap_from_input<R: AsyncRead + Unpin>(
    identities: &[Identity],
    input: &mut R,
) -> Result<(aesd_age::FileKey, Vec<u8>), ClientError> {
    let mut reader = HeaderReader::new();
    let mut read = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = input.read(&mut buf).await.map_err(ClientError::Input)?;
        if n == 0 {
            return Err(reader.finish().into());
        }
        read.extend_from_slice(&buf[..n]);
        if let Some((header, _)) = reader.push(&buf[..n])? {
            let file_key = header.unwrap_file_key(identities)?;
            return Ok((file_key, read));
        }
        debug_assert!(read.len() <= MAX_HEADER_LEN + buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_tells_an_age_file() {
        assert!(is_age(b"age-encryption.org/v1\n-> X25519"));
        assert!(is_age(b"age-enc"));
        assert!(!is_age(b"Salted__"));
        assert!(!is_age(b""));
    }
}
