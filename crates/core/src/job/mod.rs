//! A job's transform: what a job does to its bytes, whichever its format,
//! and the pieces of CPU work ([`Work`]) a driver runs for it.
//!
//! * [`openssl`]: format 1, `openssl enc -aes-256-cbc -salt -pbkdf2`
//!   ([`OpensslJob`]): key, header, chunks in place, padding.
//! * [`age`]: format 2, age v1 ([`AgeJob`]): header, STREAM payload.
//! * [`Transform`]: either, behind one interface.
//! * [`Work`]: one step of a job's CPU work (start, a PBKDF2 slice, a
//!   chunk, the end). The connection state machine
//!   ([`crate::connection`]) hands work out and takes it back; a driver
//!   runs it where it likes (the server on its worker pool; the benches
//!   and fuzzers inline). An openssl encryption's chunks do not go out as
//!   work: they go to its [`EncryptFeed`] on the
//!   [lane engine](crate::lanes), several in flight, beside other jobs'.
//! * [`JobError`]: why a job failed (never a connection's trouble: that
//!   is [`crate::connection::SessionError`]).

pub mod age;
pub mod openssl;

use aesd_proto::{Begin, ErrorCode, Format, ProtoError};

use aesd_cipher::stream::WipedVec;

use crate::chunk::ChunkBuf;
use crate::lanes::Feed;
use crate::openssl_enc::sliced::{SLICE_ITERATIONS, SlicedPbkdf2};
use crate::openssl_enc::{CipherError, DerivedKey, HEADER_LEN, SALT_LEN};

pub use age::AgeJob;
pub use openssl::{Encryption, KeyRequest, OpensslJob, PendingEncryption, Start};

/// An openssl encryption on the lane engine: its chain and its chunks in
/// flight ([`crate::lanes`]).
pub type EncryptFeed = Feed<Encryption>;

/// A busy refusal: the job could not have a slot (the queue, the client's
/// caps, its PBKDF2 budget) or lost it to another client. The driver's
/// admission decides; the job only carries the words to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// A stable name for the metrics (`aesd_jobs_refused_total{reason}`).
    pub reason: &'static str,
    /// What the client is told.
    pub message: String,
}

/// Why a job failed. The connection goes on after most of these (the
/// protocol says which codes close it: [`ErrorCode::closes_connection`]).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The begin frame asks for something its format does not take.
    #[error(transparent)]
    Begin(ProtoError),
    /// The job asked for an iteration count outside the configured bounds.
    #[error("PBKDF2 iteration count {got} is outside the allowed range {min}..={max}")]
    IterationsOutOfRange {
        /// Requested.
        got: u32,
        /// Configured minimum.
        min: u32,
        /// Configured maximum.
        max: u32,
    },
    /// The job's input passed the configured maximum file size.
    #[error("input exceeds the maximum file size of {limit} bytes")]
    FileTooLarge {
        /// The configured limit (`max-file-size`).
        limit: u64,
    },
    /// The ciphertext is invalid or the password wrong.
    #[error(transparent)]
    Cipher(#[from] CipherError),
    /// An age (format 2) file is invalid, changed, or under another key.
    #[error(transparent)]
    Age(#[from] aesd_age::AgeError),
    /// No slot for the job, or its slot was taken back.
    #[error(transparent)]
    Busy(#[from] Refusal),
    /// A by-name job (key source 5) refused by the keyring: sealed, an
    /// unknown key or version, the token's policies, a changed header.
    #[error(transparent)]
    NamedKey(#[from] crate::named_key::NamedKeyError),
}

impl JobError {
    /// The code sent to the client.
    pub fn code(&self) -> ErrorCode {
        match self {
            JobError::Begin(err) => err.code(),
            JobError::IterationsOutOfRange { .. } | JobError::FileTooLarge { .. } => {
                ErrorCode::LimitExceeded
            }
            JobError::Cipher(CipherError::DecryptFailed) => ErrorCode::DecryptFailed,
            JobError::Cipher(CipherError::Rng(_)) => ErrorCode::Internal,
            JobError::Cipher(_) => ErrorCode::BadCiphertext,
            JobError::Age(err) => age_error_code(err),
            JobError::Busy(_) => ErrorCode::Busy,
            JobError::NamedKey(err) => err.code,
        }
    }
}

/// An age error's code: `decrypt_failed` when the data or the key is
/// wrong (a MAC or a chunk's tag), `malformed` for a recipient key the
/// client sent that cannot be used, `bad_ciphertext` when the input is not
/// a whole age file.
fn age_error_code(err: &aesd_age::AgeError) -> ErrorCode {
    use aesd_age::AgeError;
    match err {
        AgeError::HeaderMac
        | AgeError::ChunkAuthentication { .. }
        | AgeError::NoMatchingIdentity
        | AgeError::Passphrase
        | AgeError::NotPassphrase
        | AgeError::WrongPassphrase => ErrorCode::DecryptFailed,
        AgeError::BadRecipient { .. } | AgeError::BadIdentity { .. } | AgeError::LowOrderPoint => {
            ErrorCode::Malformed
        }
        AgeError::NotAge
        | AgeError::Armored
        | AgeError::BadArmor { .. }
        | AgeError::BadScryptStanza { .. }
        | AgeError::WorkFactorTooHigh { .. }
        | AgeError::BadHeader { .. }
        | AgeError::HeaderTooLong
        | AgeError::TruncatedHeader
        | AgeError::BadStanza { .. }
        | AgeError::TruncatedPayload
        | AgeError::TrailingData
        | AgeError::EmptyFinalChunk
        | AgeError::TooManyChunks => ErrorCode::BadCiphertext,
    }
}

/// The limits a job's begin frame is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Most input one job may send (`max-file-size`).
    pub max_file_size: u64,
    /// PBKDF2 iteration counts a job may ask for (`min-iter`, `max-iter`).
    pub iterations: (u32, u32),
}

impl JobLimits {
    /// Limits that allow any job (benches, fuzzers).
    pub const UNLIMITED: JobLimits = JobLimits {
        max_file_size: u64::MAX,
        iterations: (1, u32::MAX),
    };

    /// Whether `begin` asks for an iteration count within bounds. Cheap:
    /// checked before the job queues for a slot.
    pub fn check(&self, begin: &Begin) -> Result<(), JobError> {
        if let aesd_proto::KeySource::Password { iterations, .. } = &begin.key {
            let (min, max) = self.iterations;
            if !(min..=max).contains(iterations) {
                return Err(JobError::IterationsOutOfRange {
                    got: *iterations,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }
}

/// A started job's cipher.
pub enum Transform {
    /// Format 1 (`openssl enc`).
    Openssl(OpensslJob),
    /// Format 2 (age).
    Age(AgeJob),
}

impl Transform {
    /// For a decryption with a password whose key is not derived yet: the
    /// derivation to run before `buf` is transformed, once `buf` completes
    /// the file's salt ([`OpensslJob::key_request`]).
    pub fn key_request(&self, buf: &ChunkBuf) -> Option<KeyRequest<'_>> {
        match self {
            Transform::Openssl(job) => job.key_request(buf),
            Transform::Age(_) => None,
        }
    }

    /// The key derived for [`Transform::key_request`]'s `salt`.
    pub fn provide_key(&mut self, derived: DerivedKey, salt: [u8; SALT_LEN]) {
        if let Transform::Openssl(job) = self {
            job.provide_key(derived, salt);
        }
    }
}

/// What a job's transform started with: its cipher and what to send
/// before any output, or a key still to derive.
pub enum Started {
    /// The cipher is ready; `header` goes out first (age: with the first
    /// output, by the transform itself).
    Ready {
        /// The job's cipher.
        transform: Transform,
        /// The `Salted__` header of an openssl encryption.
        header: Option<[u8; HEADER_LEN]>,
    },
    /// An openssl encryption with a password: its key is derived first, in
    /// slices ([`Work::Derive`]).
    DeriveKey(PendingEncryption),
}

/// A key derivation in progress, and what the key is for.
pub struct Derivation {
    derivation: SlicedPbkdf2,
    salt: [u8; SALT_LEN],
    derived: Option<DerivedKey>,
}

impl Derivation {
    /// A derivation for `request`.
    pub fn new(request: &KeyRequest<'_>) -> Self {
        Derivation {
            derivation: SlicedPbkdf2::new(request.password, &request.salt, request.iterations),
            salt: request.salt,
            derived: None,
        }
    }

    /// Whether the last slice ran.
    pub fn is_done(&self) -> bool {
        self.derived.is_some()
    }

    /// The key, once the last slice ran; the salt it was derived with.
    pub fn into_key(self) -> Option<(DerivedKey, [u8; SALT_LEN])> {
        Some((self.derived?, self.salt))
    }
}

/// One step of a job's CPU work. Run it ([`Work::run`]) and give it back to
/// its connection.
pub enum Work {
    /// Start the job's cipher (key schedules; a fresh salt).
    Start {
        /// The job's begin frame (taken when run).
        begin: Option<Begin>,
        /// A by-name job's keyring and token (key source 5), else `None`.
        named: Option<Box<crate::named_key::NamedAccess>>,
        /// The outcome, once run.
        outcome: Option<Result<Started, JobError>>,
    },
    /// [`SLICE_ITERATIONS`] of a PBKDF2 derivation.
    Derive(Box<Derivation>),
    /// Chunks of input through the cipher, in order: one for openssl (in
    /// place), every chunk that was waiting for age.
    Chunk {
        /// The job's cipher.
        transform: Transform,
        /// The chunks: input before, output after (openssl: in place).
        bufs: Vec<ChunkBuf>,
        /// Output of another size, once run (age: one per chunk), else
        /// empty; plaintext when decrypting, so wiped when dropped.
        outs: Vec<WipedVec>,
        /// Whether the chunk went through, once run.
        outcome: Result<(), JobError>,
    },
    /// The end of the input: padding, its check, the last age chunk.
    Finish {
        /// The job's cipher (taken when run).
        transform: Option<Transform>,
        /// The last output (openssl).
        last: ChunkBuf,
        /// The last output (age; wiped when dropped).
        out: WipedVec,
        /// The bytes the cipher took in, once run.
        outcome: Option<Result<u64, JobError>>,
    },
}

impl std::fmt::Debug for Work {
    /// The step only: work holds keys and plaintext.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Work::Start { .. } => "Work::Start",
            Work::Derive(_) => "Work::Derive",
            Work::Chunk { .. } => "Work::Chunk",
            Work::Finish { .. } => "Work::Finish",
        })
    }
}

impl Work {
    /// The end of `transform`'s input, to run.
    pub fn finish(transform: Transform) -> Work {
        Work::Finish {
            transform: Some(transform),
            last: ChunkBuf::with_capacity(crate::BLOCK),
            out: WipedVec::new(),
            outcome: None,
        }
    }

    /// Runs the work alone, on this thread.
    pub fn run(&mut self) {
        match self {
            Work::Start {
                begin,
                named,
                outcome,
            } => {
                if let Some(begin) = begin.take() {
                    *outcome = Some(start(begin, named.as_deref()));
                }
            }
            Work::Derive(derivation) => {
                if derivation.derived.is_none() {
                    derivation.derived = derivation.derivation.run(SLICE_ITERATIONS);
                }
            }
            Work::Chunk {
                transform,
                bufs,
                outs,
                outcome,
            } => {
                *outcome = match transform {
                    Transform::Openssl(job) => bufs.iter_mut().try_for_each(|buf| job.update(buf)),
                    Transform::Age(job) => {
                        outs.resize_with(bufs.len(), WipedVec::new);
                        bufs.iter()
                            .zip(outs.iter_mut())
                            .try_for_each(|(buf, out)| job.update(buf.as_slice(), out))
                    }
                };
            }
            Work::Finish {
                transform,
                last,
                out,
                outcome,
            } => {
                if let Some(transform) = transform.take() {
                    *outcome = Some(match transform {
                        Transform::Openssl(job) => job.finish(last),
                        Transform::Age(job) => job.finish(out),
                    });
                }
            }
        }
    }
}

/// Starts the transform `begin` asks for (its limits were checked).
fn start(begin: Begin, named: Option<&crate::named_key::NamedAccess>) -> Result<Started, JobError> {
    if begin.format == Format::Age {
        return Ok(Started::Ready {
            transform: Transform::Age(AgeJob::start(begin, named)?),
            header: None,
        });
    }
    Ok(match OpensslJob::start(begin)? {
        Start::Ready { job, header } => Started::Ready {
            transform: Transform::Openssl(job),
            header,
        },
        Start::DeriveKey(pending) => Started::DeriveKey(pending),
    })
}

#[cfg(test)]
mod tests {
    use aesd_age::Identity;
    use aesd_proto::{AgeFileKey, KeySource, Operation};
    use zeroize::Zeroizing;

    use super::*;

    /// A started age transform for `operation` with `key`.
    fn age_transform(operation: Operation, key: KeySource) -> Transform {
        let mut work = Work::Start {
            begin: Some(Begin {
                operation,
                format: Format::Age,
                key,
            }),
            named: None,
            outcome: None,
        };
        work.run();
        match work {
            Work::Start {
                outcome: Some(Ok(Started::Ready { transform, .. })),
                ..
            } => transform,
            _ => panic!("the age job did not start"),
        }
    }

    /// Chunk buffers holding `input` in pieces of `piece` bytes.
    fn chunks(input: &[u8], piece: usize) -> Vec<ChunkBuf> {
        input
            .chunks(piece)
            .map(|part| {
                let mut buf = ChunkBuf::with_capacity(piece);
                buf.payload_mut(part.len()).copy_from_slice(part);
                buf
            })
            .collect()
    }

    /// `input` through `transform` in one hand-off of all its chunks, then
    /// the end: the output.
    fn in_one_hand_off(transform: Transform, input: &[u8], piece: usize) -> Vec<u8> {
        let mut work = Work::Chunk {
            transform,
            bufs: chunks(input, piece),
            outs: Vec::new(),
            outcome: Ok(()),
        };
        work.run();
        let Work::Chunk {
            transform,
            outs,
            outcome,
            ..
        } = work
        else {
            unreachable!()
        };
        outcome.expect("the chunks go through");
        let mut output: Vec<u8> = outs.iter().flat_map(|out| out.iter().copied()).collect();
        let mut end = Work::finish(transform);
        end.run();
        let Work::Finish { out, outcome, .. } = end else {
            unreachable!()
        };
        assert_eq!(outcome.expect("ran").expect("ends"), input.len() as u64);
        output.extend_from_slice(&out);
        output
    }

    /// An age chunk work takes the job's waiting chunks with it, in
    /// order: an encryption of three chunks in one hand-off decrypts
    /// (chunk by chunk, in a separate job) to the whole input, and a
    /// decryption of three chunks in one hand-off gives it back.
    #[test]
    fn an_age_hand_off_takes_every_waiting_chunk_in_order() {
        let identity = Identity::from_bytes([9; 32]);
        let plain: Vec<u8> = (0..150_000u32).map(|i| (i % 253) as u8).collect();
        let piece = 50_000;
        let file = in_one_hand_off(
            age_transform(
                Operation::Encrypt,
                KeySource::AgeRecipients(vec![*identity.recipient().as_bytes()]),
            ),
            &plain,
            piece,
        );
        let (header, _) = aesd_age::HeaderReader::new()
            .push(&file)
            .expect("header")
            .expect("complete");
        let file_key = *header
            .unwrap_file_key(&[identity])
            .expect("unwraps")
            .as_bytes();
        let decrypt = || {
            age_transform(
                Operation::Decrypt,
                KeySource::AgeFileKey(AgeFileKey(Zeroizing::new(file_key))),
            )
        };
        let Transform::Age(mut job) = decrypt() else {
            unreachable!()
        };
        let mut back = Vec::new();
        for part in file.chunks(piece) {
            job.update(part, &mut back).expect("decrypts");
        }
        job.finish(&mut back).expect("ends");
        assert_eq!(back, plain, "the encryption's chunks in one hand-off");
        assert_eq!(
            in_one_hand_off(decrypt(), &file, piece),
            plain,
            "the decryption's chunks in one hand-off"
        );
    }
}
