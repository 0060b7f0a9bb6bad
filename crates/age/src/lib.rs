//! age v1 (C2SP `age.md`, the format of the `age` command) without I/O:
//! X25519 recipients and identities in their Bech32 forms, the header
//! (stanzas and HMAC), and the payload's STREAM of 64 KiB
//! ChaCha20-Poly1305 chunks, encrypted and decrypted incrementally with
//! bounded memory.
//!
//! Nothing here reads a clock, a socket or a random source: the caller
//! hands in the file key, the ephemeral secrets and the payload nonce
//! (from a CSPRNG), and pushes bytes in and takes bytes out. aesd, aescrypt
//! and aesload drive the same code.
//!
//! ```text
//!  encrypt: FileKey ─ header::write(recipients) ─► header bytes
//!           PayloadEncryptor::new(file key, nonce) ─ push … finish ─► payload bytes
//!  decrypt: HeaderReader ─ push … ─► Header ─ unwrap(identities) ─► FileKey
//!           header.verify_mac(file key) ─► PayloadDecryptor ─ push … finish ─► plaintext
//! ```
//!
//! Passphrase (scrypt) stanzas are unwrapped by [`passphrase`], behind the
//! `scrypt` feature, which only the client enables: the server never sees
//! a passphrase. [`armor`] reads and writes the ASCII armor (`age -a`).
//!
//! It depends on no other aesd crate. The cryptography is RustCrypto's
//! (`chacha20`, `chacha20poly1305`, `hkdf`, `hmac`, `sha2`) and
//! `x25519-dalek`, except where this crate has its own: the payload's AEAD
//! on riscv32 and aarch64 (`aead`) and X25519 on riscv32 (`curve25519`).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod armor;
mod base64;
mod ct;
mod error;
pub mod header;
mod kdf;
mod keys;
#[cfg(feature = "scrypt")]
pub mod passphrase;
// The payload's AEAD on riscv32 and aarch64; elsewhere only its tests use
// it.
#[cfg_attr(
    not(any(target_arch = "riscv32", target_arch = "aarch64")),
    allow(dead_code, unused_imports)
)]
mod aead;
pub mod stream;
// X25519 on riscv32; elsewhere only its tests use it (x25519-dalek is
// faster on 64-bit cores).
#[cfg_attr(not(target_arch = "riscv32"), allow(dead_code))]
mod curve25519;
#[doc(hidden)]
pub mod timing;
mod x25519;

pub use armor::{ARMOR_BEGIN, ARMOR_END, ArmorDecoder, ArmorEncoder};
pub use error::{AgeError, FailureClass};
pub use header::{Header, HeaderReader, MAX_HEADER_LEN, Stanza};
pub use keys::{FileKey, Identity, Recipient, parse_identities, parse_recipients};
pub use stream::{CHUNK_LEN, NONCE_LEN, PayloadDecryptor, PayloadEncryptor, TAG_LEN};

/// The first line of every age v1 file, without its line feed.
pub const VERSION_LINE: &[u8] = b"age-encryption.org/v1";
