//! Fixed workloads whose executed instructions are counted under
//! qemu-user (`scripts/bench/icount.sh`, the `cost` bench binary).
//!
//! Each [`Workload`] does exactly one thing, the same way every time, on
//! one thread, through the code the server runs:
//!
//! * [`Workload::Encrypt`] / [`Workload::Decrypt`]: `bytes` through the
//!   server's [`EncryptStream`] / [`DecryptStream`], in place in one
//!   [`ChunkBuf`] of `chunk` bytes, as the server's job work does, then
//!   `finish` (padding, and its check when decrypting).
//! * [`Workload::Pbkdf2`]: one [`derive_key`] (key and IV, 48 bytes of
//!   PBKDF2-HMAC-SHA256) with `iterations`; `0` derives nothing.
//! * [`Workload::Job`]: `jobs` whole encryption jobs at once, each on its
//!   own connection, as the server runs them: the client's bytes (hello,
//!   begin, data frames, end) fed to aesd-core's connection state machine
//!   (the server's own) by aesd-core's in-memory driver
//!   ([`aesd_core::memory`]): the begin frame checked, the key derived in
//!   slices (random salt, `iterations` of PBKDF2), every data payload read
//!   into a [`ChunkBuf`], encrypted in place through the lane engine (the
//!   jobs' chains together, as a server worker runs them) and framed back,
//!   then the padded last block and the done frame. Input comes from memory
//!   and output goes to a sink, on one thread: the tokio scheduling,
//!   worker-pool hand-offs and metrics of the real server are left out,
//!   and so is the kernel's network stack (under qemu-user system calls
//!   cost no guest instructions anyway).
//!
//! A workload with `bytes` (or `iterations`) 0 is the baseline: the same
//! program start, set-up and finish without the per-byte work, so that
//! `(count(N) - count(0)) / N` is the cost per byte.
//!
//! The AES (`aes` crate, software, bitsliced) and SHA-256 code paths do not
//! depend on the data, so the content of the buffers does not change the
//! count: the cipher workloads reuse the buffer's previous content as the
//! next chunk and the job sends zeros. [`self_check`] verifies every
//! workload's output on small sizes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aesd_core::ChunkBuf;
use aesd_core::connection::{SessionError, Settings};
use aesd_core::job::JobLimits;
use aesd_core::memory::{self, Discard, Sink};
use aesd_core::openssl_enc::{
    self as key, BLOCK, CipherError, DecryptStream, EncryptStream, decrypt_buffer, derive_key,
};
use aesd_proto::frame::HEADER_LEN as FRAME_HEADER_LEN;
use aesd_proto::{
    Begin, Done, Format, FrameHeader, FrameKind, Hello, KeySource, Message, Operation, Password,
    ProtoError,
};

use crate::{PASSWORD, SALT};

/// The server's default chunk (data frame) size: 64 KiB.
pub const DEFAULT_CHUNK: usize = aesd_proto::limits::DEFAULT_DATA_CHUNK as usize;

/// Largest chunk a workload accepts (the protocol's largest data frame).
pub const MAX_CHUNK: usize = aesd_proto::limits::MAX_FRAME_PAYLOAD as usize;

/// PBKDF2 iterations of the encrypt and decrypt workloads: their key
/// derivation is set-up, the same at every size, so it is kept small.
pub const CIPHER_ITERATIONS: u32 = 1;

/// PBKDF2 iterations of a job unless told otherwise (`openssl enc
/// -pbkdf2`'s and `aescrypt`'s default).
pub const DEFAULT_JOB_ITERATIONS: u32 = crate::PBKDF2_ITERATIONS;

/// Largest job a workload builds in memory (1 GiB).
pub const MAX_JOB_BYTES: u64 = 1 << 30;

/// One measurable piece of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Encrypt `bytes` of plaintext in chunks of `chunk` bytes.
    Encrypt {
        /// Plaintext bytes.
        bytes: u64,
        /// Chunk size (a multiple of 16, at most [`MAX_CHUNK`]).
        chunk: usize,
    },
    /// Decrypt the file of `bytes` of plaintext (a multiple of 16): its
    /// header, `bytes` of ciphertext and a last block of padding, in
    /// chunks of `chunk` bytes.
    Decrypt {
        /// Plaintext bytes (a multiple of 16).
        bytes: u64,
        /// Chunk size (a multiple of 16, at most [`MAX_CHUNK`]).
        chunk: usize,
    },
    /// Derive one key and IV with `iterations` of PBKDF2 (0: none).
    Pbkdf2 {
        /// PBKDF2-HMAC-SHA256 iterations.
        iterations: u32,
    },
    /// `jobs` encryption jobs of `bytes` at once, each framed as a client
    /// sends it on its own connection.
    Job {
        /// File bytes per job.
        bytes: u64,
        /// Data frame (and chunk buffer) size.
        chunk: usize,
        /// PBKDF2 iterations of each job's key derivation.
        iterations: u32,
        /// Jobs (connections) at once, sharing the lane engine.
        jobs: usize,
    },
}

/// What a workload did, for its one line of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes (or PBKDF2 iterations) that went in (for jobs: of all jobs).
    pub input: u64,
    /// Bytes that came out (for jobs: every byte the server sent, frames
    /// included, on all connections).
    pub output: u64,
}

/// Why a workload failed.
#[derive(Debug)]
pub enum CostError {
    /// The chunk size is not a multiple of 16 in `16..=MAX_CHUNK`.
    BadChunk {
        /// The chunk size given.
        chunk: usize,
    },
    /// A job's input is built in memory, so its size is capped.
    JobTooLarge {
        /// The size given.
        bytes: u64,
    },
    /// A decryption workload needs whole blocks of plaintext.
    NotWholeBlocks {
        /// The size given.
        bytes: u64,
    },
    /// The cipher rejected its input.
    Cipher {
        /// What was being done.
        stage: &'static str,
        /// The cipher's error.
        source: CipherError,
    },
    /// The connection refused the job or its input.
    Job {
        /// The connection's error.
        source: SessionError,
    },
    /// The job did not end with its done frame.
    NoDone,
    /// The server's output did not parse as frames.
    Frame {
        /// What was being done.
        stage: &'static str,
        /// The protocol's error.
        source: ProtoError,
    },
    /// A job count of 0.
    NoJobs,
    /// A workload produced the wrong amount of output.
    WrongLength {
        /// Which output.
        what: &'static str,
        /// Bytes expected.
        expected: u64,
        /// Bytes produced.
        got: u64,
    },
    /// A self-check found wrong output.
    Mismatch {
        /// What was compared.
        what: String,
    },
}

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CostError::BadChunk { chunk } => write!(
                f,
                "chunk size {chunk} is not a multiple of 16 between 16 and {MAX_CHUNK}"
            ),
            CostError::JobTooLarge { bytes } => {
                write!(
                    f,
                    "a job of {bytes} bytes is larger than {MAX_JOB_BYTES} (built in memory)"
                )
            }
            CostError::NotWholeBlocks { bytes } => {
                write!(f, "decrypt needs a multiple of 16 bytes, not {bytes}")
            }
            CostError::Cipher { stage, source } => write!(f, "{stage}: {source}"),
            CostError::Job { source } => write!(f, "job: {source}"),
            CostError::NoDone => write!(f, "job: no done frame"),
            CostError::Frame { stage, source } => write!(f, "{stage}: {source}"),
            CostError::NoJobs => write!(f, "--jobs must be at least 1"),
            CostError::WrongLength {
                what,
                expected,
                got,
            } => write!(f, "{what}: {got} bytes, expected {expected}"),
            CostError::Mismatch { what } => write!(f, "self-check failed: {what}"),
        }
    }
}

impl std::error::Error for CostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CostError::Cipher { source, .. } => Some(source),
            CostError::Job { source } => Some(source),
            CostError::Frame { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Workload {
    /// Runs the workload once.
    pub fn run(&self) -> Result<Outcome, CostError> {
        match *self {
            Workload::Encrypt { bytes, chunk } => encrypt(bytes, check_chunk(chunk)?),
            Workload::Decrypt { bytes, chunk } => decrypt(bytes, check_chunk(chunk)?),
            Workload::Pbkdf2 { iterations } => {
                if iterations > 0 {
                    let derived = derive_key(PASSWORD, &SALT, iterations);
                    std::hint::black_box(&derived);
                }
                Ok(Outcome {
                    input: u64::from(iterations),
                    output: if iterations > 0 { 48 } else { 0 },
                })
            }
            Workload::Job {
                bytes,
                chunk,
                iterations,
                jobs,
            } => {
                if bytes > MAX_JOB_BYTES {
                    return Err(CostError::JobTooLarge { bytes });
                }
                if jobs == 0 {
                    return Err(CostError::NoJobs);
                }
                let input = job_input(bytes, check_chunk(chunk)?, iterations);
                let mut sinks = vec![Discard::default(); jobs];
                let done = serve_jobs(&vec![input.as_slice(); jobs], chunk, &mut sinks)?;
                Ok(Outcome {
                    input: done.iter().map(|done| done.bytes_in).sum(),
                    output: sinks.iter().map(|sink| sink.bytes).sum(),
                })
            }
        }
    }
}

fn check_chunk(chunk: usize) -> Result<usize, CostError> {
    if (BLOCK..=MAX_CHUNK).contains(&chunk) && chunk % BLOCK == 0 {
        Ok(chunk)
    } else {
        Err(CostError::BadChunk { chunk })
    }
}

/// The sizes of the chunks that carry `bytes`: full chunks, then the rest.
fn chunks(bytes: u64, chunk: usize) -> impl Iterator<Item = usize> {
    let chunk64 = chunk as u64;
    let full = bytes / chunk64;
    let rest = (bytes % chunk64) as usize;
    (0..full)
        .map(move |_| chunk)
        .chain((rest > 0).then_some(rest))
}

fn encrypt(bytes: u64, chunk: usize) -> Result<Outcome, CostError> {
    let (mut stream, header) = EncryptStream::with_salt(PASSWORD, &SALT, CIPHER_ITERATIONS);
    let mut buf = ChunkBuf::with_capacity(chunk);
    let mut output = header.len() as u64;
    for len in chunks(bytes, chunk) {
        // The buffer's previous content (ciphertext) is the next plaintext.
        buf.payload_mut(len);
        stream.update(&mut buf);
        output += buf.len() as u64;
        std::hint::black_box(buf.as_slice());
    }
    stream.finish(&mut buf);
    output += buf.len() as u64;
    let expected = (key::header(&SALT).len() as u64) + (bytes / 16 + 1) * 16;
    if output != expected {
        return Err(CostError::WrongLength {
            what: "ciphertext",
            expected,
            got: output,
        });
    }
    Ok(Outcome {
        input: bytes,
        output,
    })
}

fn decrypt(bytes: u64, chunk: usize) -> Result<Outcome, CostError> {
    if bytes % BLOCK as u64 != 0 {
        return Err(CostError::NotWholeBlocks { bytes });
    }
    let cipher_error = |stage| move |source| CostError::Cipher { stage, source };
    let mut stream = DecryptStream::new(PASSWORD, CIPHER_ITERATIONS);
    let mut buf = ChunkBuf::with_capacity(chunk);
    buf.payload_mut(key::header(&SALT).len())
        .copy_from_slice(&key::header(&SALT));
    stream
        .update(&mut buf)
        .map_err(cipher_error("decrypt header"))?;
    // The ciphertext block before the next one: the IV at first.
    let mut previous = derive_key(PASSWORD, &SALT, CIPHER_ITERATIONS).iv;
    let mut output = buf.len() as u64;
    for len in chunks(bytes, chunk) {
        // The buffer's previous content (plaintext) is the next ciphertext.
        let payload = buf.payload_mut(len);
        previous.copy_from_slice(&payload[len - BLOCK..]);
        stream
            .update(&mut buf)
            .map_err(cipher_error("decrypt chunk"))?;
        output += buf.len() as u64;
        std::hint::black_box(buf.as_slice());
    }
    // The file's last block must decrypt to a whole block of padding:
    // C = AES(padding ^ previous). One block through an encryptor with the
    // same key and IV gives AES(input ^ IV), so feed it padding ^ previous ^ IV.
    let iv = derive_key(PASSWORD, &SALT, CIPHER_ITERATIONS).iv;
    let (mut one_block, _) = EncryptStream::with_salt(PASSWORD, &SALT, CIPHER_ITERATIONS);
    let block = buf.payload_mut(BLOCK);
    for (index, byte) in block.iter_mut().enumerate() {
        *byte = BLOCK as u8 ^ previous[index] ^ iv[index];
    }
    one_block.update(&mut buf);
    stream
        .update(&mut buf)
        .map_err(cipher_error("decrypt last block"))?;
    output += buf.len() as u64;
    stream
        .finish(&mut buf)
        .map_err(cipher_error("decrypt padding"))?;
    output += buf.len() as u64;
    if output != bytes {
        return Err(CostError::WrongLength {
            what: "plaintext",
            expected: bytes,
            got: output,
        });
    }
    Ok(Outcome {
        input: bytes,
        output,
    })
}

/// The begin frame of an encryption job with [`PASSWORD`].
pub fn begin_message(iterations: u32) -> Message {
    Message::Begin(Begin {
        operation: Operation::Encrypt,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            iterations,
            password: Password::new(PASSWORD.to_vec()),
        },
    })
}

/// What a client sends for one encryption job of `bytes` zeros: hello,
/// begin frame, data frames of `chunk` bytes, end frame. The buffer starts
/// zeroed (fresh pages from the allocator) and only the frame headers are
/// written, so building it costs next to nothing per byte.
///
/// # Panics
/// If the input does not fit in memory (callers cap `bytes` at
/// [`MAX_JOB_BYTES`]).
pub fn job_input(bytes: u64, chunk: usize, iterations: u32) -> Vec<u8> {
    let mut start = Hello::current().encode().to_vec();
    // A begin frame with the fixed test password always encodes.
    let _ = begin_message(iterations).encode(&mut start);
    let frames = chunks(bytes, chunk).count();
    let total = start.len() + bytes as usize + (frames + 1) * FRAME_HEADER_LEN;
    let mut input = vec![0u8; total];
    input[..start.len()].copy_from_slice(&start);
    let mut at = start.len();
    for len in chunks(bytes, chunk) {
        let header = FrameHeader {
            kind: FrameKind::Data,
            len: len as u32,
        };
        input[at..at + FRAME_HEADER_LEN].copy_from_slice(&header.encode());
        at += FRAME_HEADER_LEN + len;
    }
    let end = FrameHeader {
        kind: FrameKind::End,
        len: 0,
    };
    input[at..at + FRAME_HEADER_LEN].copy_from_slice(&end.encode());
    input
}

/// Serves one connection per input (each a client's bytes from
/// [`job_input`]) at once through aesd-core's connection state machine,
/// the jobs' CBC chains together in the lane engine, writing everything
/// the server sends (welcome, started, data, done) to the outputs. Returns
/// each job's done figures.
pub fn serve_jobs<S: Sink + Default>(
    inputs: &[&[u8]],
    chunk: usize,
    outputs: &mut [S],
) -> Result<Vec<Done>, CostError> {
    let chunk = check_chunk(chunk)?;
    let (outcomes, _) = memory::serve(&job_settings(chunk), inputs, outputs, aesd_core::LANES);
    outcomes
        .into_iter()
        .map(|mut outcome| {
            if let Some(error) = outcome.errors.pop() {
                return Err(CostError::Job { source: error });
            }
            match outcome.jobs.first().map(|job| job.result) {
                Some(Ok(done)) => Ok(done),
                _ => Err(CostError::NoDone),
            }
        })
        .collect()
}

/// What the workload's connections may do: any job their input asks for
/// (any iteration count, any size), as a server configured for it would
/// allow, with data frames up to `chunk`.
fn job_settings(chunk: usize) -> Arc<Settings> {
    Arc::new(Settings {
        server_name: "aesd cost".into(),
        chunk_size: chunk as u32,
        access_token: None,
        named_keys: None,
        spare_buffers: Arc::new(aesd_core::chunk::SpareBuffers::for_chunk_size(chunk as u32)),
        handshake_timeout: Duration::from_secs(3600),
        idle_timeout: Duration::from_secs(3600),
        max_jobs: 1,
        job: JobLimits::UNLIMITED,
    })
}

/// Checks every workload on small sizes (and odd chunkings) against
/// independent expectations: encryption against [`decrypt_buffer`], the
/// crafted decryption against its length and padding check, a job's output
/// frames against the `openssl enc` file they must form. Returns one line
/// per check.
pub fn self_check() -> Result<Vec<String>, CostError> {
    let mut report = Vec::new();
    for (bytes, chunk) in [
        (0, 16),
        (16, 16),
        (1000, 64),
        (4096, 1024),
        (70_000, DEFAULT_CHUNK),
    ] {
        let encrypted = Workload::Encrypt { bytes, chunk }.run()?;
        report.push(format!(
            "encrypt {bytes} (chunk {chunk}): {} bytes out",
            encrypted.output
        ));
        if bytes % 16 == 0 {
            let decrypted = Workload::Decrypt { bytes, chunk }.run()?;
            report.push(format!(
                "decrypt {bytes} (chunk {chunk}): {} bytes out, padding ok",
                decrypted.output
            ));
        }
        let iterations = 2;
        let input = job_input(bytes, chunk, iterations);
        let mut sent = vec![Vec::new()];
        let done = serve_jobs(&[&input], chunk, &mut sent)?[0];
        let sent = sent.remove(0);
        let file = job_file(&sent)?;
        let plain = decrypt_buffer(PASSWORD, iterations, &file, 4096).map_err(|source| {
            CostError::Cipher {
                stage: "self-check: decrypt the job's output",
                source,
            }
        })?;
        if plain.len() as u64 != bytes
            || plain.iter().any(|byte| *byte != 0)
            || done.bytes_in != bytes
        {
            return Err(CostError::Mismatch {
                what: format!("job of {bytes} bytes (chunk {chunk}) does not decrypt to its input"),
            });
        }
        let counted = Workload::Job {
            bytes,
            chunk,
            iterations,
            jobs: 1,
        }
        .run()?;
        if counted.output != sent.len() as u64 {
            return Err(CostError::Mismatch {
                what: format!(
                    "job of {bytes} bytes: {} bytes to the sink, {} to a buffer",
                    counted.output,
                    sent.len()
                ),
            });
        }
        report.push(format!(
            "job {bytes} (chunk {chunk}): {} frame bytes out, decrypts to the input",
            sent.len()
        ));
    }
    // Two jobs at once, sharing the lane engine: each decrypts to its input.
    let input = job_input(70_000, DEFAULT_CHUNK, 2);
    let mut sent = vec![Vec::new(), Vec::new()];
    serve_jobs(&[&input, &input], DEFAULT_CHUNK, &mut sent)?;
    for (index, sent) in sent.iter().enumerate() {
        let file = job_file(sent)?;
        let plain =
            decrypt_buffer(PASSWORD, 2, &file, 4096).map_err(|source| CostError::Cipher {
                stage: "self-check: decrypt a concurrent job's output",
                source,
            })?;
        if plain.len() != 70_000 || plain.iter().any(|byte| *byte != 0) {
            return Err(CostError::Mismatch {
                what: format!("concurrent job {index} does not decrypt to its input"),
            });
        }
    }
    report.push("2 jobs at once (lanes): each decrypts to its input".into());
    Ok(report)
}

/// The `openssl enc` file carried by a job's output frames (welcome,
/// started, data frames, done).
fn job_file(mut sent: &[u8]) -> Result<Vec<u8>, CostError> {
    let frame_error = |source: ProtoError| CostError::Frame {
        stage: "self-check: parse the job's output",
        source,
    };
    let mut file = Vec::new();
    let mut kinds = Vec::new();
    while !sent.is_empty() {
        let header: &[u8; FRAME_HEADER_LEN] = sent
            .get(..FRAME_HEADER_LEN)
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(CostError::Mismatch {
                what: "job output ends in a partial frame header".into(),
            })?;
        let header = FrameHeader::decode(header, MAX_CHUNK as u32).map_err(frame_error)?;
        let end = FRAME_HEADER_LEN + header.len as usize;
        let payload = sent.get(FRAME_HEADER_LEN..end).ok_or(CostError::Mismatch {
            what: "job output ends in a partial frame".into(),
        })?;
        let message = Message::decode(header.kind, payload).map_err(frame_error)?;
        if let Message::Data(bytes) = &message {
            file.extend_from_slice(bytes);
        }
        kinds.push(header.kind.name());
        sent = &sent[end..];
    }
    let shape_ok = kinds.len() >= 3
        && kinds[..2] == ["welcome", "started"]
        && kinds.last() == Some(&"done")
        && kinds[2..kinds.len() - 1].iter().all(|kind| *kind == "data");
    if !shape_ok {
        return Err(CostError::Mismatch {
            what: format!("job output frames {kinds:?}, expected welcome, started, data..., done"),
        });
    }
    Ok(file)
}
