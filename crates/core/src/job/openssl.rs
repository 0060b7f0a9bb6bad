//! A format-1 job's transform (`openssl enc -aes-256-cbc -salt -pbkdf2`):
//! which key derivation has to run and with what, the `Salted__` header,
//! each chunk transformed in place, the padding at the end, and the bytes
//! taken in.
//!
//! The connection state machine ([`crate::connection`]) drives it through
//! [`super::Work`] (the key derivation in slices, an encryption's chunks
//! through the lane engine).
//!
//! ```text
//!  OpensslJob::start(begin) ──► Start::Ready { job, header }
//!          │
//!          └──► Start::DeriveKey(pending) ── keyed(derived) ──► (job, header)
//!
//!  job.key_request(chunk) ── provide_key ──┐   (decryption, key source 1)
//!  job.update(chunk) … ◄───────────────────┘
//!  job.finish(last) ──► bytes_in for the done frame
//! ```

use aesd_proto::{Begin, KeySource, Operation};
use zeroize::Zeroizing;

use super::JobError;
use crate::chunk::ChunkBuf;
use crate::openssl_enc::{
    DecryptStream, DerivedKey, EncryptStream, HEADER_LEN, SALT_LEN, derive_key, random_salt,
};

/// A started job: its cipher and what it has taken in.
pub enum OpensslJob {
    /// Plaintext in, `openssl enc` file out.
    Encrypt(Encryption),
    /// `openssl enc` file in, plaintext out.
    Decrypt(Decryption),
}

/// How a job starts.
pub enum Start {
    /// The stream can start; an encryption sends `header` first.
    Ready {
        /// The job.
        job: OpensslJob,
        /// The `Salted__` header (encryption only).
        header: Option<[u8; HEADER_LEN]>,
    },
    /// An encryption with a password (key source 1): its key must be
    /// derived first (slow: PBKDF2).
    DeriveKey(PendingEncryption),
}

/// What a key derivation needs (PBKDF2-HMAC-SHA256 over the password and
/// salt, `iterations` times).
pub struct KeyRequest<'a> {
    /// The password.
    pub password: &'a [u8],
    /// The file's salt.
    pub salt: [u8; SALT_LEN],
    /// The iteration count the client asked for.
    pub iterations: u32,
}

/// An encryption waiting for its key (key source 1); the salt is drawn.
pub struct PendingEncryption {
    password: Zeroizing<Vec<u8>>,
    salt: [u8; SALT_LEN],
    iterations: u32,
}

impl PendingEncryption {
    /// The derivation to run.
    pub fn request(&self) -> KeyRequest<'_> {
        KeyRequest {
            password: &self.password,
            salt: self.salt,
            iterations: self.iterations,
        }
    }

    /// The job, once `derived` (from [`PendingEncryption::request`]) is
    /// known, and the header to send first.
    pub fn keyed(self, derived: &DerivedKey) -> (OpensslJob, [u8; HEADER_LEN]) {
        let (stream, header) = EncryptStream::with_key(&derived.key, &derived.iv, &self.salt);
        (OpensslJob::Encrypt(Encryption::new(stream)), header)
    }
}

impl OpensslJob {
    /// Starts the job `begin` asks for (its iteration count was checked
    /// against the limits: [`super::JobLimits::check`]): an encryption
    /// with a password draws its salt here and asks for its key; every
    /// other job is ready (a decryption with a password derives its key
    /// once the file's salt has arrived: [`OpensslJob::key_request`]).
    /// Builds key schedules: run it on a worker.
    pub fn start(begin: Begin) -> Result<Start, JobError> {
        let Begin { operation, key, .. } = begin;
        let by_name_only = match operation {
            Operation::Encrypt | Operation::Decrypt => None,
            Operation::Rewrap => Some("rewrap belongs to format 2 (age) with key source 5"),
            Operation::DataKey => Some("datakey belongs to format 2 (age) with key source 5"),
            Operation::Unwrap => Some("unwrap belongs to format 2 (age) with key source 5"),
            Operation::DataKeyWrapped => {
                Some("datakey-wrapped belongs to format 2 (age) with key source 5")
            }
        };
        if let Some(reason) = by_name_only {
            return Err(JobError::Begin(aesd_proto::ProtoError::Malformed {
                kind: "begin",
                reason,
            }));
        }
        match key {
            KeySource::Password {
                password,
                iterations,
            } => {
                let password = Zeroizing::new(password.as_bytes().to_vec());
                Ok(match operation {
                    Operation::Encrypt => Start::DeriveKey(PendingEncryption {
                        password,
                        salt: random_salt().map_err(JobError::Cipher)?,
                        iterations,
                    }),
                    Operation::Decrypt
                    | Operation::Rewrap
                    | Operation::DataKey
                    | Operation::Unwrap
                    | Operation::DataKeyWrapped => Start::Ready {
                        job: OpensslJob::Decrypt(Decryption::new(DecryptStream::new(
                            &password, iterations,
                        ))),
                        header: None,
                    },
                })
            }
            KeySource::Derived(params) => Ok(match operation {
                Operation::Encrypt => {
                    let (stream, header) =
                        EncryptStream::with_key(&params.key, &params.iv, &params.salt);
                    Start::Ready {
                        job: OpensslJob::Encrypt(Encryption::new(stream)),
                        header: Some(header),
                    }
                }
                Operation::Decrypt
                | Operation::Rewrap
                | Operation::DataKey
                | Operation::Unwrap
                | Operation::DataKeyWrapped => Start::Ready {
                    job: OpensslJob::Decrypt(Decryption::new(DecryptStream::with_key(
                        &params.key,
                        &params.iv,
                        &params.salt,
                    ))),
                    header: None,
                },
            }),
            // Format 2's key sources: its jobs run as `super::age::AgeJob`,
            // and the protocol decoder refuses them with format 1.
            KeySource::AgeRecipients(_) | KeySource::AgeFileKey(_) | KeySource::KeyName(_) => {
                Err(JobError::Begin(aesd_proto::ProtoError::Malformed {
                    kind: "begin",
                    reason: "key sources 3, 4 and 5 belong to format 2 (age)",
                }))
            }
        }
    }

    /// Starts a job and, for an encryption with a password, derives its
    /// key in one piece: the job and the header to send first.
    pub fn start_derived(begin: Begin) -> Result<(OpensslJob, Option<[u8; HEADER_LEN]>), JobError> {
        Ok(match OpensslJob::start(begin)? {
            Start::Ready { job, header } => (job, header),
            Start::DeriveKey(pending) => {
                let request = pending.request();
                let derived = derive_key(request.password, &request.salt, request.iterations);
                let (stream, header) =
                    EncryptStream::with_key(&derived.key, &derived.iv, &pending.salt);
                (OpensslJob::Encrypt(Encryption::new(stream)), Some(header))
            }
        })
    }

    /// For a decryption with a password whose key is not derived yet: the
    /// derivation to run before `buf` is transformed, once `buf` completes
    /// the file's salt. Hand the result to [`OpensslJob::provide_key`];
    /// without it, `update` derives the key in one piece.
    pub fn key_request(&self, buf: &ChunkBuf) -> Option<KeyRequest<'_>> {
        let OpensslJob::Decrypt(core) = self else {
            return None;
        };
        let salt = core.stream.salt_needed(buf)?;
        let (password, iterations) = core.stream.password()?;
        Some(KeyRequest {
            password,
            salt,
            iterations,
        })
    }

    /// The key derived for [`OpensslJob::key_request`]'s `salt`.
    pub fn provide_key(&mut self, derived: DerivedKey, salt: [u8; SALT_LEN]) {
        if let OpensslJob::Decrypt(core) = self {
            core.stream.provide_key(derived, salt);
        }
    }

    /// Takes `buf` in and transforms it in place: afterwards it holds the
    /// output to send (possibly nothing).
    pub fn update(&mut self, buf: &mut ChunkBuf) -> Result<(), JobError> {
        match self {
            OpensslJob::Encrypt(core) => {
                core.update(buf);
                Ok(())
            }
            OpensslJob::Decrypt(core) => core.update(buf),
        }
    }

    /// Ends the input: the last output (an encryption's padded block; a
    /// decryption's last plaintext, padding checked) into `last`, and the
    /// bytes taken in, for the done frame.
    pub fn finish(self, last: &mut ChunkBuf) -> Result<u64, JobError> {
        match self {
            OpensslJob::Encrypt(core) => Ok(core.finish(last)),
            OpensslJob::Decrypt(core) => core.finish(last),
        }
    }
}

/// An encryption's CBC chain and the bytes it took in.
pub struct Encryption {
    stream: EncryptStream,
    bytes_in: u64,
}

impl Encryption {
    /// An encryption on `stream`, nothing taken in yet.
    pub fn new(stream: EncryptStream) -> Self {
        Encryption {
            stream,
            bytes_in: 0,
        }
    }

    /// Takes `buf` in and leaves whole blocks of plaintext in it, carrying
    /// the rest; they must then be encrypted, in order, through
    /// [`Encryption::chain`] (the lane engine does it beside other jobs').
    pub fn begin_chunk(&mut self, buf: &mut ChunkBuf) {
        self.bytes_in += buf.len() as u64;
        self.stream.begin_chunk(buf);
    }

    /// The CBC chain, for the lane engine.
    pub fn chain(&mut self) -> &mut crate::engine::Chain {
        self.stream.chain()
    }

    /// Takes `buf` in and encrypts it in place, alone.
    pub fn update(&mut self, buf: &mut ChunkBuf) {
        self.bytes_in += buf.len() as u64;
        self.stream.update(buf);
    }

    /// The padded last block into `last`; the bytes taken in.
    pub fn finish(self, last: &mut ChunkBuf) -> u64 {
        self.stream.finish(last);
        self.bytes_in
    }
}

impl crate::lanes::LaneChain for Encryption {
    fn begin_chunk(&mut self, buf: &mut ChunkBuf) {
        Encryption::begin_chunk(self, buf);
    }

    fn chain(&mut self) -> &mut crate::engine::Chain {
        Encryption::chain(self)
    }
}

/// A decryption's stream and the bytes it took in.
pub struct Decryption {
    stream: DecryptStream,
    bytes_in: u64,
}

impl Decryption {
    fn new(stream: DecryptStream) -> Self {
        Decryption {
            stream,
            bytes_in: 0,
        }
    }

    fn update(&mut self, buf: &mut ChunkBuf) -> Result<(), JobError> {
        self.bytes_in += buf.len() as u64;
        Ok(self.stream.update(buf)?)
    }

    fn finish(self, last: &mut ChunkBuf) -> Result<u64, JobError> {
        self.stream.finish(last)?;
        Ok(self.bytes_in)
    }
}

#[cfg(test)]
mod tests {
    use aesd_proto::{Format, Password};

    use super::*;
    use crate::job::JobLimits;
    use crate::openssl_enc::{decrypt_buffer, encrypt_buffer};

    const LIMITS: JobLimits = JobLimits {
        max_file_size: 1 << 20,
        iterations: (10, 100),
    };

    fn begin(operation: Operation, iterations: u32) -> Begin {
        Begin {
            operation,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                password: Password::new(b"core".to_vec()),
                iterations,
            },
        }
    }

    /// Runs `input` through `core` in chunks of `chunk` bytes, deriving a
    /// decryption's key when asked, as the pipeline does.
    fn run(
        mut core: OpensslJob,
        header: Option<[u8; HEADER_LEN]>,
        input: &[u8],
        chunk: usize,
    ) -> (Vec<u8>, u64) {
        let mut out = header.map(|h| h.to_vec()).unwrap_or_default();
        for piece in input.chunks(chunk) {
            let mut buf = ChunkBuf::with_capacity(chunk);
            buf.payload_mut(piece.len()).copy_from_slice(piece);
            if let Some(request) = core.key_request(&buf) {
                let derived = derive_key(request.password, &request.salt, request.iterations);
                let salt = request.salt;
                core.provide_key(derived, salt);
            }
            core.update(&mut buf).expect("update");
            out.extend_from_slice(buf.as_slice());
        }
        let mut last = ChunkBuf::with_capacity(16);
        let bytes_in = core.finish(&mut last).expect("finish");
        out.extend_from_slice(last.as_slice());
        (out, bytes_in)
    }

    #[test]
    fn iteration_counts_outside_the_limits_are_refused_before_anything_runs() {
        for iterations in [9, 101] {
            let err = LIMITS
                .check(&begin(Operation::Encrypt, iterations))
                .expect_err("out of range");
            assert!(
                matches!(err, JobError::IterationsOutOfRange { got, min: 10, max: 100 } if got == iterations)
            );
            assert!(
                LIMITS
                    .check(&begin(Operation::Decrypt, iterations))
                    .is_err()
            );
        }
        assert!(LIMITS.check(&begin(Operation::Encrypt, 10)).is_ok());
    }

    #[test]
    fn by_name_operations_are_refused_in_format_1_naming_their_format() {
        for (operation, name) in [
            (Operation::Rewrap, "rewrap"),
            (Operation::DataKey, "datakey"),
            (Operation::Unwrap, "unwrap"),
            (Operation::DataKeyWrapped, "datakey-wrapped"),
        ] {
            let Err(err) = OpensslJob::start(begin(operation, 20)) else {
                panic!("{name} started in format 1");
            };
            assert_eq!(err.code(), aesd_proto::ErrorCode::Malformed, "{name}");
            assert_eq!(
                err.to_string(),
                format!(
                    "malformed begin frame: {name} belongs to format 2 (age) with key source 5"
                )
            );
        }
    }

    #[test]
    fn an_encryption_with_a_password_asks_for_its_key_then_writes_the_openssl_format() {
        let plain: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let Start::DeriveKey(pending) =
            OpensslJob::start(begin(Operation::Encrypt, 12)).expect("start")
        else {
            panic!("an encryption with a password needs its key first");
        };
        let request = pending.request();
        assert_eq!((request.password, request.iterations), (&b"core"[..], 12));
        let salt = request.salt;
        let derived = derive_key(request.password, &request.salt, request.iterations);
        let (core, header) = pending.keyed(&derived);
        let (file, bytes_in) = run(core, Some(header), &plain, 777);
        assert_eq!(bytes_in, plain.len() as u64);
        assert_eq!(file, encrypt_buffer(b"core", &salt, 12, &plain, 4096));
        assert_eq!(
            decrypt_buffer(b"core", 12, &file, 100).expect("decrypts"),
            plain
        );
    }

    #[test]
    fn a_decryption_with_a_password_asks_for_its_key_once_the_salt_is_in() {
        let plain = b"the job core, decrypting".repeat(40);
        let file = encrypt_buffer(b"core", &[5; SALT_LEN], 20, &plain, 64);
        let Start::Ready {
            job: core,
            header: None,
        } = OpensslJob::start(begin(Operation::Decrypt, 20)).expect("start")
        else {
            panic!("a decryption starts at once, with no header");
        };
        // 10 bytes: not the whole salt yet; the next chunk completes it.
        let mut buf = ChunkBuf::with_capacity(16);
        buf.payload_mut(10).copy_from_slice(&file[..10]);
        assert!(core.key_request(&buf).is_none());
        let (out, bytes_in) = run(core, None, &file, 10);
        assert_eq!((out, bytes_in), (plain.clone(), file.len() as u64));
        // Without provide_key, update derives the key in one piece.
        let (core, _) = OpensslJob::start_derived(begin(Operation::Decrypt, 20)).expect("start");
        let mut whole = ChunkBuf::with_capacity(file.len());
        whole.payload_mut(file.len()).copy_from_slice(&file);
        let mut core = core;
        core.update(&mut whole).expect("update");
        let mut last = ChunkBuf::with_capacity(16);
        let mut out = whole.as_slice().to_vec();
        core.finish(&mut last).expect("finish");
        out.extend_from_slice(last.as_slice());
        assert_eq!(out, plain);
    }

    #[test]
    fn a_wrong_password_fails_at_the_end_as_decrypt_failed() {
        let file = encrypt_buffer(b"other", &[6; SALT_LEN], 20, &[1u8; 64], 64);
        let (mut core, _) =
            OpensslJob::start_derived(begin(Operation::Decrypt, 20)).expect("start");
        let mut buf = ChunkBuf::with_capacity(file.len());
        buf.payload_mut(file.len()).copy_from_slice(&file);
        core.update(&mut buf).expect("blocks decrypt to something");
        let mut last = ChunkBuf::with_capacity(16);
        let err = core.finish(&mut last).expect_err("padding");
        assert_eq!(err.code(), aesd_proto::ErrorCode::DecryptFailed);
    }
}
