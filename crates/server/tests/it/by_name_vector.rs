//! PROTOCOL.md's by-name file vector (`file-by-name-abc-*`), made here
//! and checked both ways: the keyring (aes256-gcm96, a fixed key and
//! nonce) and core's `aesd-key` header code write exactly those bytes, and
//! core's by-name decryption reads `abc` back from them.

use std::sync::{Arc, Mutex};

use aesd_age::{FileKey, PayloadEncryptor};
use aesd_core::job::AgeJob;
use aesd_core::named_key::{self, NamedAccess, NamedKeyError, NamedKeys};
use aesd_keyring::{Entropy, KeyType, Keyring, KeyringError};
use aesd_proto::{Begin, ErrorCode, Format, KeySource, Operation};
use zeroize::Zeroizing;

/// Fills a request of 32 bytes (a key) with 0x42, any other (a nonce)
/// with 0x24.
struct FixedEntropy;

impl Entropy for FixedEntropy {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
        out.fill(if out.len() == 32 { 0x42 } else { 0x24 });
        Ok(())
    }
}

/// The keyring behind the vector: any token may do anything.
#[derive(Debug)]
struct VectorKeys(Mutex<Keyring>);

fn refusal(err: KeyringError) -> NamedKeyError {
    NamedKeyError::new(ErrorCode::Internal, err.to_string())
}

impl NamedKeys for VectorKeys {
    fn authorize(&self, _: Option<&[u8]>, _: &str, _: Operation) -> Result<(), NamedKeyError> {
        Ok(())
    }

    fn wrap(
        &self,
        name: &str,
        key: &[u8; 16],
        aad: &[u8],
    ) -> Result<(u32, Vec<u8>), NamedKeyError> {
        let ring = self.0.lock().expect("lock");
        ring.encrypt_raw(name, None, key, aad, &mut FixedEntropy)
            .map_err(refusal)
    }

    fn unwrap(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        aad: &[u8],
    ) -> Result<Zeroizing<[u8; 16]>, NamedKeyError> {
        let ring = self.0.lock().expect("lock");
        let plain = ring
            .decrypt_raw(name, version, sealed, aad)
            .map_err(refusal)?;
        let mut key = Zeroizing::new([0u8; 16]);
        key.copy_from_slice(&plain);
        Ok(key)
    }
}

/// A block of PROTOCOL.md: ```` ```KIND NAME ```` up to its fence.
fn block(kind: &str, name: &str) -> String {
    let text = include_str!("../../../proto/PROTOCOL.md");
    let marker = format!("```{kind} {name}\n");
    let start = text
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} missing from PROTOCOL.md"))
        + marker.len();
    let end = start + text[start..].find("```").expect("closing fence");
    text[start..end].to_owned()
}

#[test]
fn the_by_name_vector_is_what_the_keyring_and_core_write_and_read() {
    let mut ring = Keyring::new();
    ring.create("files", KeyType::Aes256Gcm96, 0, &mut FixedEntropy)
        .expect("key");
    let keys = Arc::new(VectorKeys(Mutex::new(ring)));
    let file_key = FileKey::new(core::array::from_fn(|i| i as u8));
    let (header, version) =
        named_key::write_header(keys.as_ref(), "files", &file_key).expect("header");
    assert_eq!(version, 1);
    let mut payload = Vec::new();
    let mut stream = PayloadEncryptor::new(&file_key, [1; 16]);
    stream.push(b"abc", &mut payload).expect("push");
    stream.finish(&mut payload).expect("finish");
    let header_text = String::from_utf8(header.clone()).expect("text");
    let payload_hex = hex::encode(&payload);
    let want_payload: String = block("hex", "file-by-name-abc-payload")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    assert_eq!(
        (block("text", "file-by-name-abc-header"), want_payload),
        (header_text, payload_hex),
        "PROTOCOL.md's by-name vector (left) and what is written (right)"
    );

    // Read back through core's by-name decryption.
    let access = NamedAccess {
        keys: Some(keys as Arc<dyn NamedKeys>),
        token: None,
    };
    let begin = Begin {
        operation: Operation::Decrypt,
        format: Format::Age,
        key: KeySource::KeyName("files".into()),
    };
    let mut job = AgeJob::start(begin, Some(&access)).expect("start");
    let mut file = header;
    file.extend_from_slice(&payload);
    let mut out = Vec::new();
    for piece in file.chunks(7) {
        job.update(piece, &mut out).expect("decrypts");
    }
    job.finish(&mut out).expect("ends");
    assert_eq!(out, b"abc");
}
