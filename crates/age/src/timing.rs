//! The hand-written primitives, reachable on every target for the
//! dudect-style timing benchmark (`crates/bench/benches/dudect.rs`): on
//! the host they are the same source as on the boards, where aesd uses
//! them (X25519 and the scalar ChaCha20 and radix-2^32 Poly1305 on
//! riscv32, the radix-2^64 Poly1305 on aarch64). Not an API.

use crate::aead::KeyStream;
use crate::aead::poly1305::{Radix32, Radix64, aead_tag};

/// X25519(`scalar`, `u`) with the riscv32 field arithmetic and ladder.
pub fn x25519(scalar: &[u8; 32], u: &[u8; 32]) -> [u8; 32] {
    crate::curve25519::x25519(scalar, u)
}

/// X25519(`scalar`, 9) through the fixed-base table (riscv32's).
pub fn x25519_base(scalar: &[u8; 32]) -> [u8; 32] {
    crate::curve25519::x25519_base(scalar)
}

/// The AEAD's Poly1305 tag of `data` under `key`, radix 2^32 (riscv32).
pub fn poly1305_radix32(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    aead_tag::<Radix32>(key, data)
}

/// The same, radix 2^64 (aarch64).
pub fn poly1305_radix64(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    aead_tag::<Radix64>(key, data)
}

/// `data` XORed with the scalar ChaCha20 key stream (riscv32's) under
/// `key` and `nonce`, from block 1.
pub fn chacha20_scalar(key: &[u8; 32], nonce: &[u8; 12], data: &mut [u8]) {
    crate::aead::ScalarChaCha::new(key).apply(nonce, data);
}
