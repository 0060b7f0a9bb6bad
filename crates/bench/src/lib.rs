//! Fixtures for aesd's benchmarks (`cargo bench -p aesd-bench`).
//!
//! Every fixture goes through the code the server runs, not a copy of it:
//!
//! * [`EncryptFixture`] and [`DecryptFixture`]: the server's
//!   [`EncryptStream`] / [`DecryptStream`] transforming a [`ChunkBuf`] in
//!   place, the key derived once when the fixture is built (outside the
//!   timed loop), the buffer reused from call to call.
//! * [`data_frame`] and [`begin_frame`]: [`Message`]s for the frame codec.
//! * [`run_clients`]: whole jobs through an in-process server on loopback
//!   with the real client, each result checked.
//! * [`cost`]: single-threaded workloads (encrypt, decrypt, PBKDF2, a
//!   whole job) whose guest instructions `scripts/bench/icount.sh` counts
//!   under qemu-user (the `cost` bench binary runs them).
//!
//! It depends on `aesd-core` (the streams, chunk buffers and in-memory
//! driver), `aesd-proto`, `aesd-client` (the loopback jobs' client) and
//! `aesd-pattern` (their data and verifier); the loopback bench's server
//! (`aesd-server`) and criterion are dev-dependencies, for the benches only.
//!
//! See `docs/performance.md` for the figures and how to reproduce them.

pub mod cost;

use std::net::SocketAddr;

use aesd_client::{Client, JobSpec};
use aesd_core::ChunkBuf;
use aesd_core::openssl_enc::{
    self as key, DecryptStream, EncryptStream, SALT_LEN, decrypt_buffer, encrypt_buffer,
};
use aesd_pattern::{Pattern, PatternSource, VerifyingSink};
use aesd_proto::{Message, Operation, Password};

/// Chunk sizes of the AES-256-CBC benches: 64 B, 1 KiB, 16 KiB, 64 KiB
/// (the server's default chunk) and 1 MiB (its largest).
pub const CIPHER_SIZES: [usize; 5] = [64, 1024, 16 * 1024, 64 * 1024, 1024 * 1024];

/// The password of every bench.
pub const PASSWORD: &[u8] = b"aesd bench password";

/// The fixed salt of the cipher fixtures (a salt must never be reused with
/// a real password; these are benchmarks).
pub const SALT: [u8; SALT_LEN] = *b"benchslt";

/// PBKDF2 iterations of the cipher fixtures and loopback jobs (the
/// server's minimum: key derivation is benchmarked on its own).
pub const FIXTURE_ITERATIONS: u32 = 1000;

/// PBKDF2 iterations of the key-derivation bench (`openssl enc -pbkdf2`'s
/// default).
pub const PBKDF2_ITERATIONS: u32 = 10_000;

/// A deterministic, non-trivial plaintext of `len` bytes.
pub fn plaintext(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    Pattern::new(0x00ae_5d00).fill(&mut bytes);
    bytes
}

/// Encrypts `plain` through [`EncryptStream`] in chunks of `chunk` bytes
/// and returns the whole `openssl enc` file (header, ciphertext, padding).
pub fn encrypt_file(plain: &[u8], chunk: usize) -> Vec<u8> {
    encrypt_buffer(PASSWORD, &SALT, FIXTURE_ITERATIONS, plain, chunk)
}

/// Decrypts a whole `openssl enc` file through [`DecryptStream`] in chunks
/// of `chunk` bytes.
///
/// # Panics
/// If the file does not decrypt (wrong password, bad padding or length).
pub fn decrypt_file(file: &[u8], chunk: usize) -> Vec<u8> {
    decrypt_buffer(PASSWORD, FIXTURE_ITERATIONS, file, chunk).expect("bench ciphertext decrypts")
}

/// Checks that the streams round-trip `size` bytes in chunks of `size`
/// (the fixtures then time exactly these calls).
///
/// # Panics
/// If they do not: a benchmark of a broken cipher is worthless.
pub fn check_round_trip(size: usize) {
    let plain = plaintext(size);
    let file = encrypt_file(&plain, size);
    assert_eq!(
        file.len(),
        key::header(&SALT).len() + (size / 16 + 1) * 16,
        "ciphertext length for {size} bytes"
    );
    assert!(
        decrypt_file(&file, size) == plain,
        "round trip of {size} bytes"
    );
}

/// One encryption stream at steady state, timed one chunk at a time.
pub struct EncryptFixture {
    stream: EncryptStream,
    buf: ChunkBuf,
    size: usize,
}

impl EncryptFixture {
    /// A stream with its key already derived and a buffer holding `size`
    /// bytes of plaintext. `size` must be a multiple of 16, so no bytes
    /// are carried and every [`EncryptFixture::run`] encrypts all of them.
    ///
    /// # Panics
    /// If `size` is not a positive multiple of 16.
    pub fn new(size: usize) -> Self {
        assert!(size > 0 && size % 16 == 0, "whole blocks only");
        let (stream, _header) = EncryptStream::with_salt(PASSWORD, &SALT, FIXTURE_ITERATIONS);
        let mut buf = ChunkBuf::with_capacity(size);
        buf.payload_mut(size).copy_from_slice(&plaintext(size));
        EncryptFixture { stream, buf, size }
    }

    /// Encrypts the next chunk in place, as the server's job work does
    /// (`payload_mut` then `update`): the buffer's previous content, so
    /// the stream keeps one CBC chain over a long input. Returns the bytes
    /// of ciphertext produced (`size`).
    pub fn run(&mut self) -> usize {
        self.buf.payload_mut(self.size);
        self.stream.update(&mut self.buf);
        self.buf.len()
    }
}

/// One decryption stream at steady state, timed one chunk at a time.
pub struct DecryptFixture {
    stream: DecryptStream,
    buf: ChunkBuf,
    size: usize,
}

impl DecryptFixture {
    /// A stream that has consumed the `Salted__` header (so its key is
    /// derived) and the first `size` bytes of real ciphertext, and a
    /// buffer of `size` bytes. `size` must be a multiple of 16.
    ///
    /// # Panics
    /// If `size` is not a positive multiple of 16.
    pub fn new(size: usize) -> Self {
        assert!(size > 0 && size % 16 == 0, "whole blocks only");
        let file = encrypt_file(&plaintext(size), size);
        let mut stream = DecryptStream::new(PASSWORD, FIXTURE_ITERATIONS);
        let mut buf = ChunkBuf::with_capacity(size);
        let (header, ciphertext) = file.split_at(key::header(&SALT).len());
        buf.payload_mut(header.len()).copy_from_slice(header);
        stream.update(&mut buf).expect("header");
        buf.payload_mut(size).copy_from_slice(&ciphertext[..size]);
        stream.update(&mut buf).expect("first chunk");
        assert!(
            buf.as_slice() == &plaintext(size)[..size - 16],
            "first chunk decrypts, last block held back"
        );
        DecryptFixture { stream, buf, size }
    }

    /// Decrypts the next `size` bytes of ciphertext in place, as the
    /// server's job work does: the stream prepends the block it held
    /// back last time and holds back the new last block (only the final
    /// block carries padding), so `size` bytes of plaintext come out.
    /// CBC decryption costs the same whatever the bytes, so the buffer's
    /// previous content serves as the next ciphertext chunk.
    ///
    /// # Panics
    /// Never for whole blocks (only the final block is checked).
    pub fn run(&mut self) -> usize {
        self.buf.payload_mut(self.size);
        self.stream
            .update(&mut self.buf)
            .expect("whole blocks always decrypt");
        self.buf.len()
    }
}

/// A data frame of `len` bytes of file content.
pub fn data_frame(len: usize) -> Message {
    Message::Data(plaintext(len))
}

/// A begin frame as `aescrypt` sends it (encrypt, password, 10 000
/// iterations).
pub fn begin_frame() -> Message {
    cost::begin_message(PBKDF2_ITERATIONS)
}

/// The job of the loopback bench: encrypt with [`PASSWORD`] and
/// [`FIXTURE_ITERATIONS`].
pub fn loopback_spec() -> JobSpec {
    JobSpec {
        operation: Operation::Encrypt,
        password: Password::new(PASSWORD.to_vec()),
        iterations: FIXTURE_ITERATIONS,
        key_derivation: aesd_client::KeyDerivation::Auto,
    }
}

/// Runs `clients` encryption jobs of `size` bytes each at once against the
/// server at `addr` (one connection each, on the current tokio runtime),
/// the pattern for the client's number as input, each result checked by
/// the independent verifier (`aesd-pattern`); returns the file bytes
/// processed.
///
/// # Panics
/// If a job fails or its output does not verify.
pub async fn run_clients(addr: SocketAddr, clients: usize, size: u64) -> u64 {
    let addr = addr.to_string();
    let spec = loopback_spec();
    let jobs: Vec<_> = (0..clients as u64)
        .map(|seed| {
            let (addr, spec) = (addr.clone(), spec.clone());
            tokio::spawn(async move {
                let mut client = Client::connect(&addr).await.expect("connect");
                let mut sink =
                    VerifyingSink::new(PASSWORD, FIXTURE_ITERATIONS, Pattern::new(seed), size);
                client
                    .run_job(&spec, &mut PatternSource::new(seed, size), &mut sink)
                    .await
                    .expect("loopback job");
                sink.finish().expect("loopback job verified");
            })
        })
        .collect();
    for job in jobs {
        job.await.expect("client task");
    }
    clients as u64 * size
}
