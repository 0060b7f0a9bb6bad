//! age (format 2) jobs: the server wraps a fresh file key to the
//! recipients' public keys when encrypting; to decrypt, this client reads
//! the file's header, unwraps the file key with its identity (or, for a
//! passphrase file, `age -p`, with the passphrase: scrypt runs here, never
//! on the server) and sends the server only that key. The identity and
//! the passphrase never leave this machine. An ASCII-armored file
//! (`age -a`) is unarmored as it is read; encrypting, the output can be
//! armored ([`AgeSpec::armor`]).

use aesd_age::passphrase::{self, AGE_DEFAULT_WORK_FACTOR, MAX_WORK_FACTOR, Wrapper};
use aesd_age::{HeaderReader, Identity, MAX_HEADER_LEN, Recipient};
use aesd_proto::{AgeFileKey, KeySource, Operation, Password};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use zeroize::Zeroizing;

use crate::armor_io::{MaybeArmored, MaybeArmoring};
use crate::connection::Client;
use crate::error::ClientError;
use crate::job::{JobEvent, JobReport};
use crate::key_source::ChosenKey;
use crate::rewrap::Rewrap;

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
    /// The passphrase of a passphrase file (`age -p`: an scrypt stanza):
    /// decrypting, used instead of the identities (a work factor at most
    /// 2^[`MAX_WORK_FACTOR`]); encrypting, instead of the recipients (at
    /// age's work factor, 2^[`AGE_DEFAULT_WORK_FACTOR`]).
    pub passphrase: Option<Password>,
    /// Encryption: write the output ASCII-armored (`age -a`).
    ///
    /// To encrypt with [`AgeSpec::passphrase`] (an `age -p` file, no
    /// recipients): the server encrypts to a one-time key made here and
    /// the header is rewritten with the scrypt stanza as it comes back
    /// (see `rewrap`).
    pub armor: bool,
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
                let (file_key, read_ahead) = unwrap_from_input(spec, input).await?;
                Ok(ChosenKey {
                    key: KeySource::AgeFileKey(AgeFileKey(Zeroizing::new(*file_key.as_bytes()))),
                    read_ahead,
                })
            }
            Operation::Rewrap
            | Operation::DataKey
            | Operation::Unwrap
            | Operation::DataKeyWrapped => Err(crate::key_source::by_name_only(spec.operation)),
        }
    }

    /// Runs one age job (see [`Client::run_job_observed`]). Decrypting,
    /// an armored input is unarmored as it is read; encrypting with
    /// [`AgeSpec::armor`], the output is armored and its END line written
    /// once the job succeeded.
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
        match spec.operation {
            Operation::Encrypt => {
                let (key, rewrap) = match &spec.passphrase {
                    Some(pass) => {
                        let (key, identity, wrapper) = one_time_recipient(pass)?;
                        (key, Some((identity, wrapper)))
                    }
                    None => {
                        if !(1..=aesd_proto::MAX_AGE_RECIPIENTS).contains(&spec.recipients.len()) {
                            return Err(ClientError::Age(aesd_age::AgeError::BadRecipient {
                                what: "an age encryption names 1 to 32 recipients",
                            }));
                        }
                        (self.prepare_age_key(spec, input).await?, None)
                    }
                };
                let mut sink = MaybeArmoring::new(&mut *output, spec.armor);
                let report = match rewrap {
                    Some((identity, wrapper)) => {
                        let mut rewrap = Rewrap::new(&mut sink, identity, wrapper);
                        self.run_prepared(spec.operation, key, input, &mut rewrap, observe)
                            .await?
                    }
                    None => {
                        self.run_prepared(spec.operation, key, input, &mut sink, observe)
                            .await?
                    }
                };
                sink.finish().await.map_err(ClientError::Output)?;
                Ok(report)
            }
            Operation::Decrypt => {
                let mut input = MaybeArmored::new(input);
                let key = self.prepare_age_key(spec, &mut input).await?;
                self.run_prepared(spec.operation, key, &mut input, output, observe)
                    .await
            }
            Operation::Rewrap
            | Operation::DataKey
            | Operation::Unwrap
            | Operation::DataKeyWrapped => Err(crate::key_source::by_name_only(spec.operation)),
        }
    }
}

/// A passphrase encryption's key: a one-time X25519 recipient for the
/// server (its identity stays here) and the passphrase's wrapper (scrypt
/// at age's work factor, done now, before any byte is sent).
fn one_time_recipient(
    passphrase: &Password,
) -> Result<(ChosenKey, Identity, Wrapper), ClientError> {
    let random = |what: &str, bytes: &mut [u8]| {
        getrandom::fill(bytes).map_err(|err| ClientError::KeyDerivation(format!("{what}: {err}")))
    };
    let mut secret = Zeroizing::new([0u8; 32]);
    random("a one-time age key", secret.as_mut_slice())?;
    let identity = Identity::from_bytes(*secret);
    let mut salt = [0u8; 16];
    random("an scrypt salt", &mut salt)?;
    let wrapper = Wrapper::new(passphrase.as_bytes(), salt, AGE_DEFAULT_WORK_FACTOR)?;
    let key = ChosenKey {
        key: KeySource::AgeRecipients(vec![*identity.recipient().as_bytes()]),
        read_ahead: Vec::new(),
    };
    Ok((key, identity, wrapper))
}

/// Reads the header from `input` (at most [`MAX_HEADER_LEN`] bytes, and
/// whatever else the last read brought) and unwraps the file key with the
/// passphrase, or the first identity that fits; returns the key and every
/// byte read.
async fn unwrap_from_input<R: AsyncRead + Unpin>(
    spec: &AgeSpec,
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
            let file_key = match &spec.passphrase {
                Some(pass) => passphrase::unwrap(&header, pass.as_bytes(), MAX_WORK_FACTOR)?,
                None => header.unwrap_file_key(&spec.identities)?,
            };
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
