//! Fixed workloads whose executed instructions are counted under
//! qemu-user (`scripts/bench/icount.sh`, the `cost` bench binary).
//!
//! Each [`Workload`] does exactly one thing, the same way every time, on
//! one thread, through the code the server runs:
//!
//! * [`Workload::Encrypt`] / [`Workload::Decrypt`]: `bytes` through the
//!   server's [`EncryptStream`] / [`DecryptStream`], in place in one
//!   [`ChunkBuf`] of `chunk` bytes, as the server's cipher stage does, then
//!   `finish` (padding, and its check when decrypting).
//! * [`Workload::Pbkdf2`]: one [`derive_key`] (key and IV, 48 bytes of
//!   PBKDF2-HMAC-SHA256) with `iterations`; `0` derives nothing.
//! * [`Workload::Job`]: a whole encryption job as the server sees it: the
//!   begin frame parsed by [`FrameReader`], the key derived by
//!   [`JobCore::start_derived`] (random salt, `iterations` of PBKDF2): the
//!   server's own job core, which its pipeline drives too; every data
//!   frame's payload read into a [`ChunkBuf`], transformed in place and sent
//!   back with [`FrameWriter::send_data`], then the padded last block and
//!   the done frame. Input comes from memory and output goes to a sink, on
//!   one thread with no runtime: the tokio scheduling, channels, worker
//!   pool hand-offs and metrics of the real server are left out, and so is
//!   the kernel's network stack (under qemu-user system calls cost no guest
//!   instructions anyway).
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
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use aesd_core::ChunkBuf;
use aesd_core::job::{JobError, OpensslJob};
use aesd_core::openssl_enc::{
    self as key, BLOCK, CipherError, DecryptStream, EncryptStream, decrypt_buffer, derive_key,
};
use aesd_proto::frame::HEADER_LEN as FRAME_HEADER_LEN;
use aesd_proto::{
    Begin, Done, Format, FrameError, FrameHeader, FrameKind, FrameReader, FrameWriter, KeySource,
    Message, Operation, Password, Started,
};
use tokio::io::AsyncWrite;

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
    /// One encryption job of `bytes`, framed as a client sends it.
    Job {
        /// File bytes.
        bytes: u64,
        /// Data frame (and chunk buffer) size.
        chunk: usize,
        /// PBKDF2 iterations of the job's key derivation.
        iterations: u32,
    },
}

/// What a workload did, for its one line of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes (or PBKDF2 iterations) that went in.
    pub input: u64,
    /// Bytes that came out (for a job: every byte the server sent,
    /// frames included).
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
    /// The job core refused the job or its input.
    Job {
        /// What was being done.
        stage: &'static str,
        /// The job's error.
        source: JobError,
    },
    /// Reading or writing a frame failed.
    Frame {
        /// What was being done.
        stage: &'static str,
        /// The frame layer's error.
        source: FrameError,
    },
    /// The job's input held a frame the server would not accept there.
    UnexpectedFrame {
        /// The frame's kind.
        got: &'static str,
        /// What the job expected.
        expected: &'static str,
    },
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
    /// In-memory I/O reported "not ready", which it never should.
    Stalled,
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
            CostError::Job { stage, source } => write!(f, "{stage}: {source}"),
            CostError::Frame { stage, source } => write!(f, "{stage}: {source}"),
            CostError::UnexpectedFrame { got, expected } => {
                write!(f, "job input: got a {got} frame, expected {expected}")
            }
            CostError::WrongLength {
                what,
                expected,
                got,
            } => write!(f, "{what}: {got} bytes, expected {expected}"),
            CostError::Mismatch { what } => write!(f, "self-check failed: {what}"),
            CostError::Stalled => write!(f, "in-memory I/O stalled (a bug in the workload)"),
        }
    }
}

impl std::error::Error for CostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CostError::Cipher { source, .. } => Some(source),
            CostError::Job { source, .. } => Some(source),
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
            } => {
                if bytes > MAX_JOB_BYTES {
                    return Err(CostError::JobTooLarge { bytes });
                }
                let input = job_input(bytes, check_chunk(chunk)?, iterations);
                let mut sink = Discard::default();
                let done = serve_job(&input, chunk, &mut sink)?;
                Ok(Outcome {
                    input: done.bytes_in,
                    output: sink.bytes,
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

/// What a client sends for one encryption job of `bytes` zeros: begin
/// frame, data frames of `chunk` bytes, end frame. The buffer starts zeroed
/// (fresh pages from the allocator) and only the frame headers are
/// written, so building it costs next to nothing per byte.
///
/// # Panics
/// If the input does not fit in memory (callers cap `bytes` at
/// [`MAX_JOB_BYTES`]).
pub fn job_input(bytes: u64, chunk: usize, iterations: u32) -> Vec<u8> {
    let mut begin = Vec::new();
    // A begin frame with the fixed test password always encodes.
    let _ = begin_message(iterations).encode(&mut begin);
    let frames = chunks(bytes, chunk).count();
    let total = begin.len() + bytes as usize + (frames + 1) * FRAME_HEADER_LEN;
    let mut input = vec![0u8; total];
    input[..begin.len()].copy_from_slice(&begin);
    let mut at = begin.len();
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

/// Serves one job from `input` (a begin frame, data frames, an end frame)
/// the way the server's job does, writing every frame the server would send
/// (started, data, done) to `output`. Returns the done frame's figures.
pub fn serve_job<W: AsyncWrite + Unpin>(
    input: &[u8],
    chunk: usize,
    output: W,
) -> Result<Done, CostError> {
    let chunk = check_chunk(chunk)?;
    block_on(serve_job_async(input, chunk, output))?
}

async fn serve_job_async<W: AsyncWrite + Unpin>(
    input: &[u8],
    chunk: usize,
    output: W,
) -> Result<Done, CostError> {
    let frame_error = |stage| move |source| CostError::Frame { stage, source };
    let job_error = |stage| move |source| CostError::Job { stage, source };
    let mut reader = FrameReader::new(input, chunk as u32);
    let mut writer = FrameWriter::new(output);
    let begin = match reader
        .read_message()
        .await
        .map_err(frame_error("read begin"))?
    {
        Some(Message::Begin(begin)) => begin,
        Some(other) => {
            return Err(CostError::UnexpectedFrame {
                got: other.kind().name(),
                expected: "begin",
            });
        }
        None => {
            return Err(CostError::UnexpectedFrame {
                got: "end of input",
                expected: "begin",
            });
        }
    };
    let (mut core, header) = OpensslJob::start_derived(begin).map_err(job_error("start"))?;
    writer
        .send(&Message::Started(Started { queue_us: 0 }))
        .await
        .map_err(frame_error("send started"))?;
    let mut bytes_out = 0u64;
    if let Some(header) = header {
        writer
            .send_data(&header)
            .await
            .map_err(frame_error("send header"))?;
        bytes_out += header.len() as u64;
    }
    let mut buf = ChunkBuf::with_capacity(chunk);
    loop {
        let header = reader
            .next_header()
            .await
            .map_err(frame_error("read frame header"))?
            .ok_or(CostError::UnexpectedFrame {
                got: "end of input",
                expected: "data or end",
            })?;
        match header.kind {
            FrameKind::Data => {
                reader
                    .read_payload(buf.payload_mut(header.len as usize))
                    .await
                    .map_err(frame_error("read data"))?;
                core.update(&mut buf).map_err(job_error("update"))?;
                writer
                    .send_data(buf.as_slice())
                    .await
                    .map_err(frame_error("send data"))?;
                bytes_out += buf.len() as u64;
            }
            FrameKind::End => {
                reader
                    .read_body(header)
                    .await
                    .map_err(frame_error("read end"))?;
                break;
            }
            other => {
                return Err(CostError::UnexpectedFrame {
                    got: other.name(),
                    expected: "data or end",
                });
            }
        }
    }
    let mut last = ChunkBuf::with_capacity(BLOCK);
    let bytes_in = core.finish(&mut last).map_err(job_error("finish"))?;
    writer
        .send_data(last.as_slice())
        .await
        .map_err(frame_error("send last block"))?;
    bytes_out += last.len() as u64;
    let done = Done {
        bytes_in,
        bytes_out,
        queue_us: 0,
        processing_us: 0,
    };
    writer
        .send(&Message::Done(done))
        .await
        .map_err(frame_error("send done"))?;
    Ok(done)
}

/// Polls a future that only does in-memory I/O to completion on this
/// thread. Such a future never waits; if it ever did, nothing could wake
/// it, so that is an error rather than a hang.
fn block_on<F: Future>(future: F) -> Result<F::Output, CostError> {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Err(CostError::Stalled),
    }
}

/// An output that counts and discards bytes, like a socket whose copy into
/// the kernel is not counted.
#[derive(Debug, Default)]
pub struct Discard {
    /// Bytes written so far.
    pub bytes: u64,
}

impl AsyncWrite for Discard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.bytes += buf.len() as u64;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
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
        let mut sent = Vec::new();
        let input = job_input(bytes, chunk, iterations);
        let done = serve_job(&input, chunk, &mut sent)?;
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
    Ok(report)
}

/// The `openssl enc` file carried by a job's output frames (started, data
/// frames, done).
fn job_file(mut sent: &[u8]) -> Result<Vec<u8>, CostError> {
    let frame_error = |source: aesd_proto::ProtoError| CostError::Frame {
        stage: "self-check: parse the job's output",
        source: source.into(),
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
    let shape_ok = kinds.first() == Some(&"started")
        && kinds.last() == Some(&"done")
        && kinds[1..kinds.len() - 1].iter().all(|kind| *kind == "data");
    if !shape_ok {
        return Err(CostError::Mismatch {
            what: format!("job output frames {kinds:?}, expected started, data..., done"),
        });
    }
    Ok(file)
}
