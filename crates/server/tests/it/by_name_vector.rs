//! PROTOCOL.md's by-name file vector (`file-by-name-abc-*`), made here
//! and checked both ways: the keyring (aes256-gcm96, a fixed key and
//! nonce) and core's `aesd-key` header code write exactly those bytes, and
//! core's by-name decryption reads `abc` back from them. Likewise the data
//! key, wrapped-only data key and unwrap vectors (`datakey-files-answer`,
//! `datakey-wrapped-files-answer`, `unwrap-files-answer`): core's data key
//! answer and header for the fixed file key, and core's unwrap job on the
//! vector's header.

use std::sync::{Arc, Mutex};

use aesd_age::{FileKey, HeaderReader, PayloadEncryptor};
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

/// A `hex` block of PROTOCOL.md, decoded.
fn hex_block(name: &str) -> Vec<u8> {
    let text: String = block("hex", name)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    hex::decode(text).expect("hex")
}

/// Runs a by-name `operation` on `input` (in pieces of 7 bytes) under
/// `keys`: the output.
fn run(
    keys: &Arc<VectorKeys>,
    operation: Operation,
    input: &[u8],
) -> Result<Vec<u8>, aesd_core::job::JobError> {
    let access = NamedAccess {
        keys: Some(Arc::clone(keys) as Arc<dyn NamedKeys>),
        token: None,
    };
    let begin = Begin {
        operation,
        format: Format::Age,
        key: KeySource::KeyName("files".into()),
    };
    let mut job = AgeJob::start(begin, Some(&access))?;
    let mut out = Vec::new();
    for piece in input.chunks(7) {
        job.update(piece, &mut out)?;
    }
    job.finish(&mut out)?;
    Ok(out)
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

/// The vectors' keyring (the key `files`, version 1, from the fixed
/// entropy) and their file key (bytes 0 to 15).
fn vector_keys() -> (Arc<VectorKeys>, FileKey) {
    let mut ring = Keyring::new();
    ring.create("files", KeyType::Aes256Gcm96, 0, &mut FixedEntropy)
        .expect("key");
    (
        Arc::new(VectorKeys(Mutex::new(ring))),
        FileKey::new(core::array::from_fn(|i| i as u8)),
    )
}

#[test]
fn the_by_name_vector_is_what_the_keyring_and_core_write_and_read() {
    let (keys, file_key) = vector_keys();
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

#[test]
fn the_data_key_and_unwrap_vectors_are_what_core_answers() {
    let (keys, file_key) = vector_keys();
    // The data key answer for the vector's file key: the key, then the
    // by-name file vector's header.
    let (answer, version) =
        named_key::data_key_answer(keys.as_ref(), "files", &file_key).expect("answer");
    assert_eq!(version, 1);
    let header = block("text", "file-by-name-abc-header");
    assert_eq!(
        hex::encode(answer.as_slice()),
        hex::encode(hex_block("datakey-files-answer")),
        "PROTOCOL.md's data key vector (right) and core's answer (left)"
    );
    assert_eq!(&answer[16..], header.as_bytes());
    // Unwrap of that header answers the file key.
    let unwrapped = run(&keys, Operation::Unwrap, header.as_bytes()).expect("unwraps");
    assert_eq!(unwrapped, hex_block("unwrap-files-answer"));
    assert_eq!(unwrapped, file_key.as_bytes());

    // The data key job (its file key drawn fresh): a key, then a header
    // for `files` version 1 whose MAC it verifies, which unwraps to it.
    let answer = run(&keys, Operation::DataKey, b"").expect("data key");
    let (key, rest) = answer.split_at(16);
    let (parsed, used) = HeaderReader::new()
        .push(rest)
        .expect("a header")
        .expect("complete");
    assert_eq!(used, rest.len(), "nothing after the header");
    assert_eq!(parsed.stanzas[0].args, ["aesd-key", "files", "1"]);
    let fresh = FileKey::new(key.try_into().expect("16 bytes"));
    parsed.verify_mac(&fresh).expect("the MAC verifies");
    assert_ne!(fresh, file_key, "a fresh file key");
    assert_eq!(run(&keys, Operation::Unwrap, rest).expect("unwraps"), key);
    // Refusals: input to a data key, a payload after an unwrap's header,
    // a changed MAC: typed, and no key out.
    let err = run(&keys, Operation::DataKey, b"x").expect_err("input");
    assert_eq!(err.code(), ErrorCode::BadCiphertext);
    assert!(err.to_string().contains("takes no input"), "{err}");
    let mut with_payload = header.clone().into_bytes();
    with_payload.push(0);
    let err = run(&keys, Operation::Unwrap, &with_payload).expect_err("payload");
    assert_eq!(err.code(), ErrorCode::BadCiphertext);
    assert!(err.to_string().contains("header only"), "{err}");
    let changed = header.replacen("--- 3", "--- 4", 1);
    let err = run(&keys, Operation::Unwrap, changed.as_bytes()).expect_err("MAC");
    assert_eq!(err.code(), ErrorCode::DecryptFailed);
    assert!(err.to_string().contains("MAC"), "{err}");
}

#[test]
fn the_wrapped_data_key_vector_is_the_header_alone_and_the_job_answers_no_key() {
    let (keys, file_key) = vector_keys();
    // The header core writes for the vector's file key (what the
    // datakey-wrapped job answers): the data key vector without its key.
    let (header, version) =
        named_key::write_header(keys.as_ref(), "files", &file_key).expect("header");
    assert_eq!(version, 1);
    let wrapped = hex_block("datakey-wrapped-files-answer");
    assert_eq!(
        hex::encode(&header),
        hex::encode(&wrapped),
        "PROTOCOL.md's wrapped data key vector (right) and core's header (left)"
    );
    assert_eq!(wrapped, hex_block("datakey-files-answer")[16..]);
    assert_eq!(
        run(&keys, Operation::Unwrap, &wrapped).expect("unwraps"),
        file_key.as_bytes()
    );

    // The job (its file key drawn fresh): one header for `files` version
    // 1 and nothing else, whose file key an unwrap gives and whose MAC
    // that key verifies.
    let answer = run(&keys, Operation::DataKeyWrapped, b"").expect("wrapped data key");
    let (parsed, used) = HeaderReader::new()
        .push(&answer)
        .expect("a header")
        .expect("complete");
    assert_eq!(used, answer.len(), "the header alone: no file key after it");
    assert!(
        answer.starts_with(b"age-encryption.org/v1\n"),
        "no key first"
    );
    assert_eq!(parsed.stanzas[0].args, ["aesd-key", "files", "1"]);
    let key = run(&keys, Operation::Unwrap, &answer).expect("unwraps");
    let fresh = FileKey::new(key.as_slice().try_into().expect("16 bytes"));
    parsed.verify_mac(&fresh).expect("the MAC verifies");
    assert_ne!(fresh, file_key, "a fresh file key");
    assert!(
        !answer.windows(16).any(|w| w == key.as_slice()),
        "the file key is not in the answer"
    );
    // Input to it: typed, naming the operation, nothing out.
    let err = run(&keys, Operation::DataKeyWrapped, b"x").expect_err("input");
    assert_eq!(err.code(), ErrorCode::BadCiphertext);
    assert_eq!(
        err.to_string(),
        "a datakey-wrapped job takes no input; 1 bytes came"
    );
}
