//! Keys the board keeps: a keyring of named, versioned keys with OpenBao
//! Transit's semantics, sealed at rest under a root key split into Shamir
//! shares, stored crash-safely. Sans-I/O except the stores: the HTTP API
//! (OpenBao's JSON), the binary protocol's by-name key source and the
//! etcd backend are built on top of it.
//!
//! # Layout
//!
//! ```text
//!  name        key names, OpenBao's rule
//!  aead        key types aes256-gcm96 / chacha20-poly1305, SecretKey, seal/open
//!  ciphertext  Transit's text form vault:vN:base64(nonce || ciphertext || tag)
//!  key         one named key: versions, settings, version rules, config, trim
//!  keyring     the keyring: create, read, list, rotate, delete, configure,
//!              trim, encrypt/decrypt, wrap/unwrap a file key; limits
//!  shamir      GF(2^8) secret sharing of the root key, constant time
//!  sealed      the keyring at rest: header, AES-256-GCM under the root key
//!  secret_text base64 / hex of secrets in constant time; SecretKey's serde
//!  unseal      sealed -> unsealed, as sys/unseal reports it
//!  policy      ACL policies (OpenBao's HCL subset), path matching, PolicyStore
//!  token       tokens stored as SHA-256 with accessors, TTLs, the root policy
//!  store       KeyringStore (newest / compare-and-put), DirStore, MemoryStore
//!  entropy     the random source the caller hands in
//!  error       KeyringError, CiphertextFault
//! ```
//!
//! ```text
//!  init:    sealed::initialize(k, n) ─► RootKey + shares (shown once)
//!  change:  UnsealedKeyring.keyring.rotate(..) ─ seal_next ─► store.put(N+1) ─ committed(N+1)
//!  start:   store.load_newest() ─► Unsealer ─ submit(share) × k ─► UnsealedKeyring
//! ```
//!
//! # Constant time
//!
//! Everything touching key material is constant time on riscv32imac:
//! RustCrypto's `aes` uses its fixsliced software AES there (no tables),
//! `ghash`/`polyval` the 32-bit constant-time multiplication (BearSSL's
//! `ghash_ctmul32`, integer multiplies only), ChaCha20-Poly1305 is
//! table-free arithmetic, and Shamir's field arithmetic is bitwise with no
//! secret-dependent branch or index ([`shamir`]). Key material lives in
//! zeroizing containers (the AES key schedules too: `aes-gcm`'s `zeroize`
//! feature) and no `Debug` prints it. Checked in the sources of `aes`
//! 0.9.2 (no riscv32 backend: `backends/soft`, fixsliced 32-bit) and
//! `polyval` 0.7.3 (`cpubits` picks `field_element/mul32.rs` on 32-bit
//! targets); re-check when they are updated.
//!
//! docs/keyring.md describes the on-disk format, its versioning and the
//! threat model.

mod aead;
pub mod ciphertext;
mod entropy;
mod error;
mod key;
mod keyring;
pub mod name;
pub mod policy;
pub mod sealed;
mod secret_text;
pub mod shamir;
pub mod store;
pub mod token;
pub mod unseal;

pub use aead::{KEY_LEN, KeyType, NONCE_LEN, SecretKey, TAG_LEN};
pub use entropy::{Entropy, OsEntropy};
pub use error::{CiphertextFault, KeyringError};
pub use key::{KeyConfigUpdate, KeyMetadata, KeyVersion, MIN_AUTO_ROTATE_PERIOD, NamedKey};
pub use keyring::{
    FileKey, Keyring, MAX_KEYS, MAX_PLAINTEXT_LEN, MAX_TOTAL_VERSIONS, MAX_VERSIONS_PER_KEY,
    WrappedKey,
};
