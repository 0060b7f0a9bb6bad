//! Data keys and unwrapping on the binary port (operations 4 and 5, key
//! source 5) against an `aesd --dev` process: a file encrypted here with
//! a data key decrypts on the server by name and a server-made file
//! decrypts here after an unwrap (same bytes both ways, only the header
//! sent); the policies (`transit/datakey/plaintext/NAME`,
//! `transit/decrypt/NAME`); every refusal typed on a connection that
//! serves on; the audit lines and the metrics' operation labels; the file
//! key never in the audit log.

use crate::bao_support::Aesd;
use crate::by_name_support::{admin, connect, job, stanza, token_for};
use crate::common::scrape;

use aesd_proto::{ErrorCode, Operation};
use aesd_testkit::pattern_bytes;
use base64ct::{Base64Unpadded, Encoding};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_keys_and_unwrap_interoperate_with_by_name_jobs_and_refuse_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
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
    let metrics = scrape(aesd.metrics.expect("metrics")).await;
    for line in [
        "aesd_jobs_total{operation=\"datakey\",format=\"age\",outcome=\"ok\"} 5",
        "aesd_jobs_total{operation=\"datakey\",format=\"age\",outcome=\"bad_ciphertext\"} 1",
        "aesd_jobs_total{operation=\"unwrap\",format=\"age\",outcome=\"decrypt_failed\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }

    // The audit log: each job's request and response lines, named by
    // operation and Transit path, with the version; no file key.
    let text = std::fs::read_to_string(&log).expect("audit log");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
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
