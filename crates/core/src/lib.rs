//! aesd-core: what aesd does, without I/O.
//!
//! No sockets, no async runtime, no TLS: bytes, frames and events in;
//! bytes, frames and work out. The server (`aesd-server`) drives it from
//! its tokio tasks and worker threads; the benchmarks and fuzzers drive the
//! very same code from memory, so what they measure and check is what the
//! server runs.
//!
//! It builds on `aesd-proto` (frames and messages, without its tokio I/O),
//! `aesd-cipher` (the fixsliced AES, multi-lane CBC, the CPU's AES
//! instructions, the chunk buffer, the openssl format's key derivation),
//! `aesd-vexriscv` (VexRiscv's and Zkne's
//! AES instructions) and `aesd-age` (format 2), and on RustCrypto's `aes`
//! and `cbc` (software CBC decryption, and the encryption chain of a
//! CPU-AES engine on a CPU without AES instructions), `hmac` and `sha2`
//! (the sliced key derivation; SHA-256 also for access-token digests); no
//! tokio, no socket, no TLS crate.
//!
//! # Layout
//!
//! * [`openssl_enc`]: format 1, `openssl enc -aes-256-cbc -salt -pbkdf2`:
//!   the header, the key derivation (shared with the client), streamed
//!   encryption and decryption, PBKDF2 in slices.
//! * [`chunk`]: [`ChunkBuf`], the reusable, wiped buffer a chunk is read
//!   into, transformed in and sent from.
//! * [`engine`]: which AES encrypts a CBC chain (the CPU's instructions,
//!   aesd's fixsliced AES, VexRiscv's or Zkne's instructions), and several
//!   chains at once.
//! * [`lanes`]: the lane engine: several jobs' CBC chains encrypted
//!   together, each job's encryption a [`lanes::Feed`] of chunks in flight,
//!   its chain known only through [`lanes::LaneChain`].
//! * [`job`]: a job's transform (format 1 or age), its errors, and the
//!   pieces of CPU work ([`job::Work`]) a driver runs for it.
//! * [`named_key`]: key source 5, files under a keyring key by name: the
//!   `aesd-key` stanza, and the [`named_key::NamedKeys`] trait the driver
//!   implements with its keyring.
//! * [`proxy_header`]: the PROXY protocol header (v1, v2) a load balancer
//!   puts in front of a connection: a pure, bounded parser.
//! * [`access_token`]: the pre-shared token a server may require,
//!   compared in constant time.
//! * [`connection`]: one connection's protocol state machine (hello,
//!   auth, begin, queued, started, data, end, done; a failed job's input
//!   discarded): frames, work results and timer events in; frames,
//!   work and requests out.
//! * [`memory`]: drivers that serve connections from memory on one
//!   thread: [`memory::serve`] for the benchmarks and fuzzers, and
//!   [`memory::harness`], one connection on its own clock with a scripted
//!   client and server side, for the protocol's behaviour tests
//!   (`tests/protocol.rs`) and the session fuzzer.

pub mod access_token;
pub mod chunk;
pub mod connection;
pub mod engine;
pub mod job;
pub mod lanes;
pub mod memory;
pub mod named_key;
pub mod openssl_enc;
pub mod proxy_header;

pub use chunk::ChunkBuf;
pub use openssl_enc::BLOCK;

/// CBC chains the fixsliced cipher encrypts together per call (the lane
/// engine's width): 2 on 32-bit targets, 4 on 64-bit ones.
pub const LANES: usize = aesd_cipher::LANES;
