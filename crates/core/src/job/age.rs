//! One format-2 (age) job without I/O: bytes in, bytes out.
//!
//! Encryption (key source 3): the server draws the file key, one
//! ephemeral secret per recipient and the payload nonce, writes the header
//! (it needs only the recipients' public keys) and streams the payload.
//! Decryption (key source 4): the client unwrapped the file key with its
//! identity and sent only that; the server reads the header from the input,
//! checks its MAC with the file key, and streams the authenticated
//! plaintext. aesd holds no long-term secret either way.
//!
//! By name (key source 5, [`crate::named_key`]): the server wraps the
//! file key with the keyring key's latest version into the header's
//! `aesd-key` stanza, unwraps it from there to decrypt, and to rewrap
//! takes the header alone and answers it re-wrapped by the latest version.
//! For clients that encrypt and decrypt the payload themselves: a data key
//! takes no input and answers a fresh file key followed by the by-name
//! header that wraps it (a wrapped-only data key answers the header alone:
//! its file key is wiped here unseen); an unwrap takes the header alone
//! and answers its file key (both wiped wherever they are held).
//!
//! Memory: at most one 64 KiB chunk pending and, while decrypting, a
//! header of up to [`aesd_age::MAX_HEADER_LEN`] bytes until it is complete.

use aesd_age::{
    CHUNK_LEN, FileKey, HeaderReader, NONCE_LEN, PayloadDecryptor, PayloadEncryptor, Recipient,
    TAG_LEN, header,
};
use aesd_proto::{Begin, ErrorCode, KeySource, Operation};
use zeroize::Zeroizing;

use super::JobError;
use crate::named_key::{self, NamedAccess, NamedKeyError, NamedKeys};
use crate::openssl_enc::CipherError;
use std::sync::Arc;

/// A started age job and the input bytes it took in.
pub struct AgeJob {
    state: State,
    bytes_in: u64,
}

enum State {
    /// Encrypting; the header waits in `header` until the first output.
    Encrypt {
        header: Option<Vec<u8>>,
        payload: PayloadEncryptor,
    },
    /// Decrypting, the header not complete yet.
    Header {
        reader: HeaderReader,
        key: HeaderKey,
    },
    /// Decrypting the payload.
    Payload(PayloadDecryptor),
    /// Taking a by-name header alone (rewrap, unwrap), not complete yet.
    HeaderOnly {
        reader: HeaderReader,
        keys: Arc<dyn NamedKeys>,
        name: String,
        answer: HeaderAnswer,
    },
    /// A data key: its answer (the file key and its header, or the
    /// header alone for a wrapped-only one), held until the end; no input
    /// is taken.
    DataKey {
        operation: Operation,
        answer: Zeroizing<Vec<u8>>,
    },
    /// The answer is out: no more input is taken.
    Answered(Operation),
}

/// What a header-only job answers.
#[derive(Clone, Copy)]
enum HeaderAnswer {
    /// The header re-wrapped by the key's latest version.
    Rewrap,
    /// The header's 16-byte file key.
    FileKey,
}

impl HeaderAnswer {
    fn operation(self) -> Operation {
        match self {
            HeaderAnswer::Rewrap => Operation::Rewrap,
            HeaderAnswer::FileKey => Operation::Unwrap,
        }
    }
}

/// Where a decryption's file key comes from.
enum HeaderKey {
    /// Key source 4: the client sent it.
    Given(FileKey),
    /// Key source 5: the header's `aesd-key` stanza, under this key.
    Named {
        keys: Arc<dyn NamedKeys>,
        name: String,
    },
}

fn random<const N: usize>() -> Result<[u8; N], JobError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|err| JobError::Cipher(CipherError::Rng(err.to_string())))?;
    Ok(bytes)
}

impl AgeJob {
    /// The most output `input_len` more bytes of input (0: the end) can
    /// release: a header still held back, the chunk pending inside the
    /// payload's STREAM and the input, with a nonce and a tag per chunk.
    fn output_bound(&self, input_len: usize) -> usize {
        let header = match &self.state {
            State::Encrypt {
                header: Some(header),
                ..
            } => header.len(),
            State::DataKey { answer, .. } => answer.len(),
            _ => 0,
        };
        let chunks = input_len / CHUNK_LEN + 2;
        header + NONCE_LEN + CHUNK_LEN + input_len + chunks * TAG_LEN
    }

    /// The job a format-2 `begin` asks for (the protocol decoder has
    /// checked that the key source fits the operation); `named` is what a
    /// by-name job (key source 5) is checked against and runs with.
    pub fn start(begin: Begin, named: Option<&NamedAccess>) -> Result<AgeJob, JobError> {
        let state = match (begin.operation, begin.key) {
            (operation, KeySource::KeyName(name)) => {
                let access = named.ok_or_else(|| {
                    NamedKeyError::new(ErrorCode::Internal, "a by-name job without its access")
                })?;
                let keys = access.authorize(&name, operation)?;
                match operation {
                    Operation::Encrypt => {
                        let file_key = FileKey::new(random()?);
                        let (header, _version) =
                            named_key::write_header(keys.as_ref(), &name, &file_key)?;
                        State::Encrypt {
                            header: Some(header),
                            payload: PayloadEncryptor::new(&file_key, random()?),
                        }
                    }
                    Operation::Decrypt => State::Header {
                        reader: HeaderReader::new(),
                        key: HeaderKey::Named { keys, name },
                    },
                    Operation::Rewrap => State::HeaderOnly {
                        reader: HeaderReader::new(),
                        keys,
                        name,
                        answer: HeaderAnswer::Rewrap,
                    },
                    Operation::Unwrap => State::HeaderOnly {
                        reader: HeaderReader::new(),
                        keys,
                        name,
                        answer: HeaderAnswer::FileKey,
                    },
                    Operation::DataKey => {
                        let file_key = FileKey::new(random()?);
                        let (answer, _version) =
                            named_key::data_key_answer(keys.as_ref(), &name, &file_key)?;
                        State::DataKey { operation, answer }
                    }
                    Operation::DataKeyWrapped => {
                        // `file_key` is wiped when dropped, at the end of
                        // this arm: only its wrapped form leaves.
                        let file_key = FileKey::new(random()?);
                        let (header, _version) =
                            named_key::write_header(keys.as_ref(), &name, &file_key)?;
                        State::DataKey {
                            operation,
                            answer: Zeroizing::new(header),
                        }
                    }
                }
            }
            (Operation::Encrypt, KeySource::AgeRecipients(keys)) => {
                let file_key = FileKey::new(random()?);
                let mut recipients = Vec::with_capacity(keys.len());
                for key in keys {
                    recipients.push((Recipient::from_bytes(key), Zeroizing::new(random()?)));
                }
                let header = header::write(&file_key, &recipients)?;
                State::Encrypt {
                    header: Some(header),
                    payload: PayloadEncryptor::new(&file_key, random()?),
                }
            }
            (Operation::Decrypt, KeySource::AgeFileKey(key)) => State::Header {
                reader: HeaderReader::new(),
                key: HeaderKey::Given(FileKey::new(*key.0)),
            },
            _ => {
                return Err(JobError::Begin(aesd_proto::ProtoError::Malformed {
                    kind: "begin",
                    reason: "format 2 (age) takes key source 3 to encrypt and 4 to decrypt",
                }));
            }
        };
        Ok(AgeJob { state, bytes_in: 0 })
    }

    /// Takes `input` in and appends what can be released to `out`, which
    /// first reserves the most that can be (so it never reallocates while
    /// holding plaintext: the old block would be freed unwiped).
    pub fn update(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), JobError> {
        out.reserve(self.output_bound(input.len()));
        self.bytes_in += input.len() as u64;
        match &mut self.state {
            State::Encrypt { header, payload } => {
                if let Some(header) = header.take() {
                    out.extend_from_slice(&header);
                }
                payload.push(input, out)?;
            }
            State::Header { reader, key } => {
                let Some((header, used)) = reader.push(input)? else {
                    return Ok(());
                };
                let file_key = match key {
                    HeaderKey::Given(file_key) => {
                        header.verify_mac(file_key)?;
                        file_key.clone()
                    }
                    HeaderKey::Named { keys, name } => {
                        named_key::open_header(keys.as_ref(), name, &header)?
                    }
                };
                let mut payload = PayloadDecryptor::new(file_key);
                payload.push(&input[used..], out)?;
                self.state = State::Payload(payload);
            }
            State::Payload(payload) => payload.push(input, out)?,
            State::HeaderOnly {
                reader,
                keys,
                name,
                answer,
            } => {
                let Some((header, used)) = reader.push(input)? else {
                    return Ok(());
                };
                let operation = answer.operation();
                if used < input.len() {
                    return Err(no_more_input(operation, input.len() - used).into());
                }
                let file_key = named_key::open_header(keys.as_ref(), name, &header)?;
                match answer {
                    HeaderAnswer::Rewrap => {
                        let (new_header, _version) =
                            named_key::write_header(keys.as_ref(), name, &file_key)?;
                        out.extend_from_slice(&new_header);
                    }
                    HeaderAnswer::FileKey => out.extend_from_slice(file_key.as_bytes()),
                }
                self.state = State::Answered(operation);
            }
            State::DataKey { operation, .. } => {
                if !input.is_empty() {
                    return Err(no_more_input(*operation, input.len()).into());
                }
            }
            State::Answered(operation) => {
                if !input.is_empty() {
                    return Err(no_more_input(*operation, input.len()).into());
                }
            }
        }
        Ok(())
    }

    /// Ends the input: the last output into `out` (reserved first, as in
    /// [`AgeJob::update`]); the bytes taken in.
    pub fn finish(self, out: &mut Vec<u8>) -> Result<u64, JobError> {
        out.reserve(self.output_bound(0));
        match self.state {
            State::Encrypt { header, payload } => {
                if let Some(header) = header {
                    out.extend_from_slice(&header);
                }
                payload.finish(out)?;
            }
            State::Header { reader, .. } | State::HeaderOnly { reader, .. } => {
                return Err(reader.finish().into());
            }
            State::Payload(payload) => payload.finish(out)?,
            State::DataKey { answer, .. } => out.extend_from_slice(&answer),
            State::Answered(_) => {}
        }
        Ok(self.bytes_in)
    }
}

/// A header-only job's input went on past the header's MAC line, or a
/// data key's input was not empty.
fn no_more_input(operation: Operation, extra: usize) -> NamedKeyError {
    let message = if matches!(operation, Operation::DataKey | Operation::DataKeyWrapped) {
        format!(
            "a {} job takes no input; {extra} bytes came",
            operation.name()
        )
    } else {
        format!(
            "{} {} takes the file's header only (up to its MAC line); {extra} more bytes came",
            if operation == Operation::Unwrap {
                "an"
            } else {
                "a"
            },
            operation.name()
        )
    };
    NamedKeyError::new(ErrorCode::BadCiphertext, message)
}

#[cfg(test)]
mod tests {
    use aesd_age::Identity;
    use aesd_proto::{AgeFileKey, Format};

    use super::*;

    fn run(mut job: AgeJob, input: &[u8], piece: usize) -> Result<Vec<u8>, JobError> {
        let mut out = Vec::new();
        for part in input.chunks(piece) {
            job.update(part, &mut out)?;
        }
        job.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn an_encryption_decrypts_with_the_file_key_the_identity_unwraps() {
        let identity = Identity::from_bytes([4; 32]);
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let job = AgeJob::start(
            Begin {
                operation: Operation::Encrypt,
                format: Format::Age,
                key: KeySource::AgeRecipients(vec![*identity.recipient().as_bytes()]),
            },
            None,
        )
        .expect("start");
        let file = run(job, &plain, 4096).expect("encrypts");
        let (header, _) = HeaderReader::new()
            .push(&file)
            .expect("header")
            .expect("complete");
        let file_key = header.unwrap_file_key(&[identity]).expect("unwraps");
        let decrypt = |key: [u8; 16]| {
            AgeJob::start(
                Begin {
                    operation: Operation::Decrypt,
                    format: Format::Age,
                    key: KeySource::AgeFileKey(AgeFileKey(Zeroizing::new(key))),
                },
                None,
            )
            .expect("start")
        };
        assert_eq!(
            run(decrypt(*file_key.as_bytes()), &file, 5000).expect("decrypts"),
            plain
        );
        // A wrong file key fails on the header's MAC: decrypt_failed.
        let err = run(decrypt([0; 16]), &file, 5000).expect_err("wrong key");
        assert_eq!(err.code(), aesd_proto::ErrorCode::DecryptFailed);
        // Cut inside the final chunk: it fails to authenticate.
        let err = run(
            decrypt(*file_key.as_bytes()),
            &file[..file.len() - 100],
            5000,
        )
        .expect_err("cut");
        assert_eq!(err.code(), aesd_proto::ErrorCode::DecryptFailed);
        assert!(
            err.to_string().contains("chunk 3 failed to authenticate"),
            "{err}"
        );
        // Cut at a chunk boundary: bad_ciphertext, naming the truncation.
        let boundary = file.len() - (plain.len() % aesd_age::CHUNK_LEN + aesd_age::TAG_LEN);
        let err =
            run(decrypt(*file_key.as_bytes()), &file[..boundary], 5000).expect_err("truncated");
        assert_eq!(err.code(), aesd_proto::ErrorCode::BadCiphertext);
        assert!(err.to_string().contains("cut short"), "{err}");
        // Not an age file at all.
        let err =
            run(decrypt(*file_key.as_bytes()), b"Salted__12345678", 5000).expect_err("not age");
        assert_eq!(err.code(), aesd_proto::ErrorCode::BadCiphertext);
    }
}
