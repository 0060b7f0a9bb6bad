//! Test data for aesd, any size, never held whole: what the load
//! generator sends and checks, what the tests and benchmarks stream.
//!
//! # Layout
//!
//! * [`pattern`]: [`Pattern`](pattern::Pattern), a seeded byte sequence,
//!   and [`PatternSource`](pattern::PatternSource), its first bytes as an
//!   async reader.
//! * [`verify`]: [`VerifyingSink`](verify::VerifyingSink), an async writer
//!   that decrypts an encryption job's output on its own and compares it,
//!   byte for byte, with the pattern that was sent.
//!
//! Of aesd's crates it depends on `aesd-proto` only (a job's key
//! parameters); the verifier derives the key and decrypts with RustCrypto's
//! `pbkdf2`, `sha2`, `aes` and `cbc` directly, never through aesd-core or
//! aesd-cipher, so a bug in the server's cipher cannot verify its own
//! output. `aesd-core` is a dev-dependency: its tests make files through the
//! server's stream.

pub mod pattern;
pub mod verify;

pub use pattern::{Pattern, PatternSource};
pub use verify::{VerifyError, VerifyingSink};
