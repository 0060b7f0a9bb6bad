//! The `hex file-…` vectors of PROTOCOL.md (made with `openssl enc -S`)
//! match the server's cipher, encrypting with the same salt and decrypting.

use aesd_core::ChunkBuf;
use aesd_core::openssl_enc::{DecryptStream, EncryptStream};

struct FileVector {
    name: &'static str,
    plain: &'static [u8],
    salt: [u8; 8],
    iterations: u32,
}

const VECTORS: [FileVector; 2] = [
    FileVector {
        name: "file-abc-iter10000",
        plain: b"abc",
        salt: [0, 1, 2, 3, 4, 5, 6, 7],
        iterations: 10_000,
    },
    FileVector {
        name: "file-fox-iter1000",
        plain: b"The quick brown fox jumps over the lazy dog",
        salt: [7, 6, 5, 4, 3, 2, 1, 0],
        iterations: 1000,
    },
];

fn vector_bytes(name: &str) -> Vec<u8> {
    let text = include_str!("../../../proto/PROTOCOL.md");
    let marker = format!("```hex {name}\n");
    let start = text
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} missing"))
        + marker.len();
    let end = start + text[start..].find("```").expect("closing fence");
    let hex: String = text[start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    hex::decode(hex).expect("valid hex")
}

/// The whole file `stream` makes of `plain` (one chunk), header first.
fn encrypt_whole(mut stream: EncryptStream, header: [u8; 16], plain: &[u8]) -> Vec<u8> {
    let mut buf = ChunkBuf::with_capacity(plain.len().max(16));
    buf.payload_mut(plain.len()).copy_from_slice(plain);
    stream.update(&mut buf);
    let mut produced = header.to_vec();
    produced.extend_from_slice(buf.as_slice());
    stream.finish(&mut buf);
    produced.extend_from_slice(buf.as_slice());
    produced
}

/// The plaintext `decrypt` recovers from the whole `file` (one chunk).
fn decrypt_whole(mut decrypt: DecryptStream, file: &[u8]) -> Vec<u8> {
    let mut buf = ChunkBuf::with_capacity(file.len());
    buf.payload_mut(file.len()).copy_from_slice(file);
    decrypt.update(&mut buf).expect("decrypts");
    let mut recovered = buf.as_slice().to_vec();
    decrypt.finish(&mut buf).expect("valid padding");
    recovered.extend_from_slice(buf.as_slice());
    recovered
}

#[test]
fn file_vectors_match_encryption_and_decryption() {
    for vector in VECTORS {
        let expected = vector_bytes(vector.name);
        let (stream, header) =
            EncryptStream::with_salt(b"password", &vector.salt, vector.iterations);
        let produced = encrypt_whole(stream, header, vector.plain);
        assert_eq!(
            hex::encode(&produced),
            hex::encode(&expected),
            "{}",
            vector.name
        );

        let decrypt = DecryptStream::new(b"password", vector.iterations);
        let recovered = decrypt_whole(decrypt, &expected);
        assert_eq!(recovered, vector.plain, "{}", vector.name);
    }
}

/// Key source 2: the key and IV of PROTOCOL.md's `frame-begin-derived`
/// give the same file as the password does, and decrypt it; a file with
/// another salt is refused.
#[test]
fn derived_key_vector_gives_the_same_file() {
    let expected = vector_bytes("file-abc-iter10000");
    let begin = vector_bytes("frame-begin-derived");
    // header 5 bytes, operation, format, key source, params_len u16.
    let params = &begin[5 + 5..];
    let salt: [u8; 8] = params[..8].try_into().expect("salt");
    let key: [u8; 32] = params[8..40].try_into().expect("key");
    let iv: [u8; 16] = params[40..56].try_into().expect("iv");

    let (stream, header) = EncryptStream::with_key(&key, &iv, &salt);
    let produced = encrypt_whole(stream, header, b"abc");
    assert_eq!(hex::encode(&produced), hex::encode(&expected));

    let recovered = decrypt_whole(DecryptStream::with_key(&key, &iv, &salt), &expected);
    assert_eq!(recovered, b"abc");

    let mut other_salt = salt;
    other_salt[7] ^= 1;
    let mut decrypt = DecryptStream::with_key(&key, &iv, &other_salt);
    let mut buf = ChunkBuf::with_capacity(expected.len());
    buf.payload_mut(expected.len()).copy_from_slice(&expected);
    assert_eq!(
        decrypt.update(&mut buf),
        Err(aesd_core::openssl_enc::CipherError::SaltMismatch)
    );
}
