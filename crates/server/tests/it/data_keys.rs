//! Data keys and unwrapping on the binary port (operations 4, 5 and 6,
//! key source 5) against an `aesd --dev` process: a file encrypted here
//! with a data key decrypts on the server by name and a server-made file
//! decrypts here after an unwrap (same bytes both ways, only the header
//! sent); a wrapped-only data key is a header alone that a consumer
//! unwraps and fills with a payload encrypted here; the policies
//! (`transit/datakey/plaintext/NAME`, `transit/datakey/wrapped/NAME`,
//! `transit/decrypt/NAME`); every refusal typed on a connection that
//! serves on; the audit lines and the metrics' operation labels; the file
//! key never in the audit log.

use crate::bao_support::Aesd;
use crate::by_name_support::{admin, connect, job, stanza, token_for};
use crate::common::scrape;

use aesd_age::PayloadEncryptor;
use aesd_client::{Client, ClientError};
use aesd_proto::{ErrorCode, Operation};
use aesd_testkit::pattern_bytes;
use base64ct::{Base64Unpadded, Encoding};
use serde_json::Value;

/// `aesd --dev` (root token `root`) with its audit log in `dir` and
/// metrics, and the key `files` made: the server and the log's path.
fn dev_aesd_with_files_key(dir: &std::path::Path) -> (Aesd, std::path::PathBuf) {
    let log = dir.join("audit.log");
    let aesd = Aesd::start_with(&[
        "--dev",
        "--dev-root-token-id",
        "root",
        "--audit-log",
        log.to_str().expect("utf-8"),
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    admin(&aesd, "POST", "/v1/transit/keys/files", "{}");
    (aesd, log)
}

/// The audit log's lines (`text`), each parsed as JSON.
fn audit_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

/// Asserts that one scrape of `aesd`'s metrics has every line of `lines`.
async fn assert_metrics_contain(aesd: &Aesd, lines: &[&str]) {
    let metrics = scrape(aesd.metrics.expect("metrics")).await;
    for line in lines {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_keys_and_unwrap_interoperate_with_by_name_jobs_and_refuse_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (aesd, log) = dev_aesd_with_files_key(dir.path());
    admin(&aesd, "POST", "/v1/transit/keys/other", "{}");
    let local_token = token_for(
        &aesd,
        "files-local",
        &["transit/datakey/plaintext/files", "transit/decrypt/files"],
    );
    let plain = pattern_bytes(23, 150_000);

    // A data key: the file key, then a by-name header for `files`
    // version 1 whose MAC that key verifies (checked by the client).
    let mut local = connect(&aesd, &local_token).await;
    let data_key = local.data_key("files").await.expect("data key");
    assert_eq!(stanza(&data_key.header).1, ["aesd-key", "files", "1"]);
    assert_eq!(data_key.report.bytes_sent, 0);
    assert_eq!(
        data_key.report.bytes_received,
        16 + data_key.header.len() as u64
    );
    // Its header unwraps to the same file key.
    let unwrapped = local
        .unwrap_header("files", &data_key.header)
        .await
        .expect("unwrap");
    assert_eq!(unwrapped.file_key, data_key.file_key);
    assert_eq!(unwrapped.report.bytes_received, 16);

    // Encrypted here, decrypted by the server by name: the same bytes.
    let mut file = Vec::new();
    let made = local
        .encrypt_locally("files", &mut &plain[..], &mut file)
        .await
        .expect("local encryption");
    assert_eq!(made.key_job.bytes_sent, 0, "no plaintext crosses");
    assert_eq!(
        (made.bytes_in, made.bytes_out),
        (150_000, file.len() as u64)
    );
    let (header_len, args) = stanza(&file);
    assert_eq!(args, ["aesd-key", "files", "1"]);
    let mut root = connect(&aesd, "root").await;
    assert!(job(&mut root, Operation::Decrypt, "files", &file).await == Ok(plain.clone()));

    // Encrypted by the server, decrypted here: only the header is sent.
    let server_file = job(&mut root, Operation::Encrypt, "files", &plain)
        .await
        .expect("server encryption");
    let mut opened = Vec::new();
    let read = local
        .decrypt_locally("files", &mut &server_file[..], &mut opened)
        .await
        .expect("local decryption");
    assert!(opened == plain);
    let (server_header_len, _) = stanza(&server_file);
    assert_eq!(read.key_job.bytes_sent, server_header_len as u64);
    assert_eq!(read.bytes_in, server_file.len() as u64);

    // After a rotation, data keys are under version 2 and old headers
    // still unwrap.
    admin(&aesd, "POST", "/v1/transit/keys/files/rotate", "");
    let v2 = local.data_key("files").await.expect("data key v2");
    assert_eq!(stanza(&v2.header).1, ["aesd-key", "files", "2"]);
    let mut again = Vec::new();
    local
        .decrypt_locally("files", &mut &file[..], &mut again)
        .await
        .expect("version 1 decrypts after the rotation");
    assert!(again == plain);

    // Refusals, each typed, no key out, and the connection serves on.
    // A data key takes no input.
    let (code, out) = job(&mut local, Operation::DataKey, "files", b"x")
        .await
        .expect_err("input to a data key");
    assert_eq!((code, out.len()), (ErrorCode::BadCiphertext, 0));
    // An unwrap takes the header only.
    let (code, out) = job(&mut local, Operation::Unwrap, "files", &file)
        .await
        .expect_err("payload to an unwrap");
    assert_eq!((code, out.len()), (ErrorCode::BadCiphertext, 0));
    // A changed header byte (in its MAC line): the MAC does not verify.
    let mut changed = file[..header_len].to_vec();
    let at = header_len - 3;
    changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
    let (code, out) = job(&mut local, Operation::Unwrap, "files", &changed)
        .await
        .expect_err("changed header");
    assert_eq!((code, out.len()), (ErrorCode::DecryptFailed, 0));
    // The unchanged header does unwrap: the MAC was why (negative control).
    assert_eq!(
        job(&mut local, Operation::Unwrap, "files", &file[..header_len])
            .await
            .expect("unchanged header")
            .len(),
        16
    );
    // A header under `files` named as `other`.
    let (code, _) = job(&mut root, Operation::Unwrap, "other", &file[..header_len])
        .await
        .expect_err("another key");
    assert_eq!(code, ErrorCode::DecryptFailed);
    // A changed header decrypted here fails before any plaintext.
    let mut bad_file = changed.clone();
    bad_file.extend_from_slice(&file[header_len..]);
    let mut nothing = Vec::new();
    let err = local
        .decrypt_locally("files", &mut &bad_file[..], &mut nothing)
        .await
        .expect_err("changed header, locally");
    assert_eq!(err.server_code(), Some(ErrorCode::DecryptFailed), "{err}");
    assert!(nothing.is_empty());

    // Policies: encrypt-only may not unwrap (it would reveal what a
    // decryption does); encrypt and decrypt without datakey may not have
    // a data key; the local token may not encrypt by name.
    let encrypt_only = token_for(&aesd, "files-encrypt", &["transit/encrypt/files"]);
    let no_datakey = token_for(
        &aesd,
        "files-no-datakey",
        &["transit/encrypt/files", "transit/decrypt/files"],
    );
    let mut writer = connect(&aesd, &encrypt_only).await;
    let (code, out) = job(&mut writer, Operation::Unwrap, "files", &file[..header_len])
        .await
        .expect_err("encrypt-only unwraps");
    assert_eq!((code, out.len()), (ErrorCode::PermissionDenied, 0));
    let err = writer
        .data_key("files")
        .await
        .expect_err("encrypt-only data key");
    assert_eq!(
        err.server_code(),
        Some(ErrorCode::PermissionDenied),
        "{err}"
    );
    assert!(
        err.to_string().contains("transit/datakey/plaintext/files"),
        "{err}"
    );
    let mut both = connect(&aesd, &no_datakey).await;
    let err = both.data_key("files").await.expect_err("no datakey grant");
    assert_eq!(
        err.server_code(),
        Some(ErrorCode::PermissionDenied),
        "{err}"
    );
    // ...which the same token's decrypt grant does allow to unwrap.
    both.unwrap_header("files", &file[..header_len])
        .await
        .expect("decrypt grant unwraps");
    let (code, _) = job(&mut local, Operation::Encrypt, "files", b"x")
        .await
        .expect_err("local token encrypts by name");
    assert_eq!(code, ErrorCode::PermissionDenied);
    // Every connection serves on after its refusals.
    job(&mut writer, Operation::Encrypt, "files", b"x")
        .await
        .expect("encrypt-only encrypts");
    job(&mut root, Operation::DataKey, "files", b"")
        .await
        .expect("root's data key");
    local.data_key("files").await.expect("serves on");

    // The metrics count both operations under their own labels.
    assert_metrics_contain(
        &aesd,
        &[
            "aesd_jobs_total{operation=\"datakey\",format=\"age\",outcome=\"ok\"} 5",
            "aesd_jobs_total{operation=\"datakey\",format=\"age\",outcome=\"bad_ciphertext\"} 1",
            "aesd_jobs_total{operation=\"unwrap\",format=\"age\",outcome=\"decrypt_failed\"} 3",
        ],
    )
    .await;

    // The audit log: each job's request and response lines, named by
    // operation and Transit path, with the version; no file key.
    let text = std::fs::read_to_string(&log).expect("audit log");
    let lines = audit_lines(&text);
    let jobs: Vec<&Value> = lines.iter().filter(|l| l["port"] == "job").collect();
    let first_datakey = jobs
        .iter()
        .position(|l| l["operation"] == "datakey")
        .expect("a datakey line");
    let (request, response) = (jobs[first_datakey], jobs[first_datakey + 1]);
    assert_eq!(request["path"], "transit/datakey/plaintext/files");
    assert_eq!(response["type"], "response");
    assert_eq!(response["key_version"], 1);
    assert_eq!(response["bytes_in"], 0);
    let unwrap = jobs[first_datakey + 3];
    assert_eq!(unwrap["operation"], "unwrap", "{unwrap}");
    assert_eq!(unwrap["path"], "transit/decrypt/files");
    assert_eq!(unwrap["key_version"], 1);
    assert_eq!(unwrap["bytes_out"], 16);
    for key in [&data_key.file_key, &v2.file_key] {
        let bytes = key.as_bytes();
        let hex = hex::encode(bytes);
        let b64 = Base64Unpadded::encode_string(bytes);
        assert!(
            !text.as_bytes().windows(16).any(|w| w == bytes)
                && !text.contains(&hex)
                && !text.contains(&b64[..20]),
            "a file key is in the audit log"
        );
    }
}

/// The file key `bytes` is nowhere in the audit log `text`: not raw, hex
/// or base64.
fn assert_key_not_in(text: &str, bytes: &[u8]) {
    let hex = hex::encode(bytes);
    let b64 = Base64Unpadded::encode_string(bytes);
    assert!(
        !text.as_bytes().windows(bytes.len()).any(|w| w == bytes)
            && !text.contains(&hex)
            && !text.contains(&b64[..20]),
        "a file key is in the audit log"
    );
}

/// A by-name job's refusal: its code and message (no output allowed).
async fn refusal(client: &mut Client, operation: Operation, input: &[u8]) -> (ErrorCode, String) {
    let mut out = Vec::new();
    let err = client
        .run_by_name_job_observed(operation, "files", &mut &input[..], &mut out, |_| {})
        .await
        .expect_err("refused");
    assert!(out.is_empty(), "{operation:?} refused after output");
    match err {
        ClientError::Server(frame) => (frame.code, frame.message),
        other => panic!("{operation:?}: not the server's refusal: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_data_key_is_a_header_alone_that_unwraps_and_makes_a_by_name_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (aesd, log) = dev_aesd_with_files_key(dir.path());
    // Version 2 is the latest: the header must name it.
    admin(&aesd, "POST", "/v1/transit/keys/files/rotate", "");
    let producer_token = token_for(&aesd, "files-wrapped", &["transit/datakey/wrapped/files"]);
    let consumer_token = token_for(&aesd, "files-consumer", &["transit/decrypt/files"]);
    let plaintext_token = token_for(
        &aesd,
        "files-plaintext",
        &["transit/datakey/plaintext/files"],
    );
    let plain = pattern_bytes(29, 100_000);

    // The producer's answer: exactly one by-name header for `files`
    // version 2, nothing before or after it (no file key).
    let mut producer = connect(&aesd, &producer_token).await;
    let wrapped = producer
        .data_key_wrapped("files")
        .await
        .expect("wrapped data key");
    let (header_len, args) = stanza(&wrapped.header);
    assert_eq!(args, ["aesd-key", "files", "2"]);
    assert_eq!(header_len, wrapped.header.len(), "no trailing bytes");
    assert!(wrapped.header.starts_with(b"age-encryption.org/v1\n"));
    assert_eq!(wrapped.report.bytes_sent, 0);
    assert_eq!(wrapped.report.bytes_received, header_len as u64);
    // The same through the raw job: the answer is the header alone.
    let raw = job(&mut producer, Operation::DataKeyWrapped, "files", b"")
        .await
        .expect("raw wrapped data key");
    let (raw_len, raw_args) = stanza(&raw);
    assert_eq!((raw_len, raw_args), (raw.len(), args.clone()));
    assert_ne!(raw, wrapped.header, "a fresh file key each time");

    // The consumer unwraps it (op 5; the client checks the MAC with the
    // key), encrypts a payload here after the header: the server
    // decrypts that file by name to the same bytes.
    let mut consumer = connect(&aesd, &consumer_token).await;
    let unwrapped = consumer
        .unwrap_header("files", &wrapped.header)
        .await
        .expect("unwrap");
    let mut file = wrapped.header.clone();
    let mut payload = PayloadEncryptor::new(&unwrapped.file_key, [7; 16]);
    payload.push(&plain, &mut file).expect("payload");
    payload.finish(&mut file).expect("payload end");
    assert!(job(&mut consumer, Operation::Decrypt, "files", &file).await == Ok(plain.clone()));
    // A wrong file key's payload after the same header does not decrypt
    // (negative control: the unwrapped key is why the file opens).
    let mut wrong = wrapped.header.clone();
    let mut other = PayloadEncryptor::new(&aesd_age::FileKey::new([9; 16]), [7; 16]);
    other.push(&plain, &mut wrong).expect("payload");
    other.finish(&mut wrong).expect("payload end");
    let (code, out) = job(&mut consumer, Operation::Decrypt, "files", &wrong)
        .await
        .expect_err("another key's payload");
    assert_eq!((code, out.len()), (ErrorCode::DecryptFailed, 0));

    // Policies, each refusal typed, and each connection serves on. The
    // plaintext data key's path does not grant a wrapped one...
    let mut plaintext_only = connect(&aesd, &plaintext_token).await;
    let (code, message) = refusal(&mut plaintext_only, Operation::DataKeyWrapped, b"").await;
    assert_eq!(code, ErrorCode::PermissionDenied, "{message}");
    assert!(
        message.contains("transit/datakey/wrapped/files"),
        "{message}"
    );
    let err = plaintext_only
        .data_key_wrapped("files")
        .await
        .expect_err("plaintext grant, wrapped data key");
    assert_eq!(
        err.server_code(),
        Some(ErrorCode::PermissionDenied),
        "{err}"
    );
    plaintext_only
        .data_key("files")
        .await
        .expect("its own grant: a plaintext data key");
    // ...nor the wrapped one a plaintext data key or an unwrap.
    let (code, message) = refusal(&mut producer, Operation::DataKey, b"").await;
    assert_eq!(code, ErrorCode::PermissionDenied, "{message}");
    assert!(
        message.contains("transit/datakey/plaintext/files"),
        "{message}"
    );
    let err = producer
        .unwrap_header("files", &wrapped.header)
        .await
        .expect_err("wrapped grant unwraps");
    assert_eq!(
        err.server_code(),
        Some(ErrorCode::PermissionDenied),
        "{err}"
    );
    assert!(err.to_string().contains("transit/decrypt/files"), "{err}");
    // Input to it: the typed error naming the operation.
    let (code, message) = refusal(&mut producer, Operation::DataKeyWrapped, b"xy").await;
    assert_eq!(
        (code, message.as_str()),
        (
            ErrorCode::BadCiphertext,
            "a datakey-wrapped job takes no input; 2 bytes came"
        )
    );
    let again = producer
        .data_key_wrapped("files")
        .await
        .expect("serves on after the refusals");
    assert_eq!(stanza(&again.header).1, args);

    // The metrics count it under its own operation label.
    assert_metrics_contain(&aesd, &[
        "aesd_jobs_total{operation=\"datakey-wrapped\",format=\"age\",outcome=\"ok\"} 3",
        "aesd_jobs_total{operation=\"datakey-wrapped\",format=\"age\",outcome=\"bad_ciphertext\"} 1",
        "aesd_jobs_total{operation=\"datakey-wrapped\",format=\"age\",outcome=\"permission_denied\"} 2",
    ])
    .await;

    // The audit log: the request and response lines name the operation,
    // its Transit path and the wrapping version; no file key anywhere.
    let text = std::fs::read_to_string(&log).expect("audit log");
    let lines = audit_lines(&text);
    let jobs: Vec<&Value> = lines
        .iter()
        .filter(|l| l["port"] == "job" && l["operation"] == "datakey-wrapped")
        .collect();
    let (request, response) = (jobs[0], jobs[1]);
    assert_eq!(request["type"], "request", "{request}");
    assert_eq!(request["path"], "transit/datakey/wrapped/files");
    assert_eq!(response["type"], "response", "{response}");
    assert_eq!(response["path"], "transit/datakey/wrapped/files");
    assert_eq!(response["key_version"], 2);
    assert_eq!(response["bytes_in"], 0);
    assert_eq!(response["bytes_out"], header_len);
    assert_eq!(response["error"], Value::Null);
    assert_key_not_in(&text, unwrapped.file_key.as_bytes());
}
