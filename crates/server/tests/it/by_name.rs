//! By-name jobs on the binary port (key source 5) against an `aesd --dev`
//! process, its keyring administered over the HTTP API as the bao CLI
//! does: encrypt and decrypt by name, rotate and decrypt the old version,
//! rewrap sending the header only (payload bytes identical), every typed
//! refusal (retired and missing versions, another key, an encrypt-only
//! token, a wrong or missing token, a changed header or payload with no
//! plaintext returned, sealed).

use crate::bao_support::Aesd;
use crate::by_name_support::{admin, connect, job, stanza, token_for};

use aesd_client::Client;
use aesd_proto::{ErrorCode, Operation};
use aesd_testkit::pattern_bytes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_by_key_name_encrypt_decrypt_rotate_rewrap_and_every_refusal() {
    let aesd = Aesd::start_with(&["--dev", "--dev-root-token-id", "root"]);
    admin(&aesd, "POST", "/v1/transit/keys/files", "{}");
    admin(&aesd, "POST", "/v1/transit/keys/other", "{}");
    let plain = pattern_bytes(7, 200_000);

    // Encrypt by name with the root token (as short as bao's dev root),
    // decrypt it back; the header names the key and version 1.
    let mut root = connect(&aesd, "root").await;
    let v1 = job(&mut root, Operation::Encrypt, "files", &plain)
        .await
        .expect("encrypt");
    let (v1_header_len, args) = stanza(&v1);
    assert_eq!(args, ["aesd-key", "files", "1"]);
    assert_eq!(
        job(&mut root, Operation::Decrypt, "files", &v1)
            .await
            .expect("decrypt"),
        plain
    );

    // Rotate: new files are under version 2, the old one still decrypts.
    admin(&aesd, "POST", "/v1/transit/keys/files/rotate", "");
    let v2 = job(&mut root, Operation::Encrypt, "files", &plain)
        .await
        .expect("encrypt v2");
    assert_eq!(stanza(&v2).1, ["aesd-key", "files", "2"]);
    assert_eq!(
        job(&mut root, Operation::Decrypt, "files", &v1)
            .await
            .expect("old version"),
        plain
    );

    // Rewrap sends the header only; the payload bytes stay as they were.
    let rewrapped = root
        .rewrap_header("files", &mut &v1[..])
        .await
        .expect("rewrap");
    assert_eq!(rewrapped.report.bytes_sent, v1_header_len as u64);
    assert_eq!(rewrapped.report.done.bytes_in, v1_header_len as u64);
    let mut new_file = rewrapped.header.clone();
    new_file.extend_from_slice(&v1[v1_header_len..]);
    let (new_header_len, args) = stanza(&new_file);
    assert_eq!(args, ["aesd-key", "files", "2"]);
    assert_eq!(new_file[new_header_len..], v1[v1_header_len..]);
    assert_eq!(
        job(&mut root, Operation::Decrypt, "files", &new_file)
            .await
            .expect("rewrapped decrypts"),
        plain
    );
    // The payload sent to a rewrap is refused (header only), naming it.
    let (code, out) = job(&mut root, Operation::Rewrap, "files", &v1)
        .await
        .expect_err("payload in a rewrap");
    assert_eq!((code, out.len()), (ErrorCode::BadCiphertext, 0));

    // min_decryption_version 2: version 1 is retired, typed; the
    // connection goes on.
    admin(
        &aesd,
        "POST",
        "/v1/transit/keys/files/config",
        r#"{"min_decryption_version":2}"#,
    );
    let (code, out) = job(&mut root, Operation::Decrypt, "files", &v1)
        .await
        .expect_err("retired");
    assert_eq!((code, out.len()), (ErrorCode::KeyVersionRetired, 0));
    // A version not created yet (the stanza's version changed: the
    // version is checked before anything is opened).
    let text = String::from_utf8_lossy(&new_file[..new_header_len]).replace("files 2", "files 9");
    let mut v9 = text.into_bytes();
    v9.extend_from_slice(&new_file[new_header_len..]);
    let (code, out) = job(&mut root, Operation::Decrypt, "files", &v9)
        .await
        .expect_err("not created");
    assert_eq!((code, out.len()), (ErrorCode::KeyVersionNotCreated, 0));
    let (code, _) = job(&mut root, Operation::Encrypt, "missing", b"x")
        .await
        .expect_err("unknown key");
    assert_eq!(code, ErrorCode::UnknownKey);
    // A file under `files` named as `other` is refused (its stanza is
    // bound to its key's name).
    let (code, _) = job(&mut root, Operation::Decrypt, "other", &v2)
        .await
        .expect_err("another key");
    assert_eq!(code, ErrorCode::DecryptFailed);

    // Changed bytes: a header (its MAC) or the payload's first chunk:
    // decrypt_failed, and not one byte of plaintext comes back.
    let mut bad_header = v2.clone();
    let (v2_header_len, _) = stanza(&v2);
    // A base64 character of the MAC line changed to another one.
    let at = v2_header_len - 3;
    bad_header[at] = if bad_header[at] == b'A' { b'B' } else { b'A' };
    let mut bad_payload = v2.clone();
    bad_payload[v2_header_len + 40] ^= 0x80;
    for (what, file) in [("header", &bad_header), ("payload", &bad_payload)] {
        let (code, out) = job(&mut root, Operation::Decrypt, "files", file)
            .await
            .expect_err(what);
        assert_eq!(code, ErrorCode::DecryptFailed, "{what}");
        assert!(out.is_empty(), "{what}: {} bytes came back", out.len());
    }

    // Policies: a token for `files` cannot use `other`; an encrypt-only
    // token cannot decrypt or rewrap.
    let files_token = token_for(
        &aesd,
        "files-all",
        &[
            "transit/encrypt/files",
            "transit/decrypt/files",
            "transit/rewrap/files",
        ],
    );
    let encrypt_only = token_for(&aesd, "files-encrypt", &["transit/encrypt/files"]);
    let mut files = connect(&aesd, &files_token).await;
    let mine = job(&mut files, Operation::Encrypt, "files", &plain)
        .await
        .expect("allowed");
    assert_eq!(
        job(&mut files, Operation::Decrypt, "files", &mine).await,
        Ok(plain.clone())
    );
    let (code, _) = job(&mut files, Operation::Encrypt, "other", b"x")
        .await
        .expect_err("another key");
    assert_eq!(code, ErrorCode::PermissionDenied);
    let mut writer = connect(&aesd, &encrypt_only).await;
    job(&mut writer, Operation::Encrypt, "files", b"x")
        .await
        .expect("encrypt-only encrypts");
    for operation in [Operation::Decrypt, Operation::Rewrap] {
        let (code, out) = job(&mut writer, operation, "files", &mine)
            .await
            .expect_err("encrypt-only");
        assert_eq!((code, out.len()), (ErrorCode::PermissionDenied, 0));
    }

    // A wrong token, and none at all: bad_key_token.
    let mut wrong = connect(&aesd, "not-a-token").await;
    let (code, _) = job(&mut wrong, Operation::Encrypt, "files", b"x")
        .await
        .expect_err("wrong token");
    assert_eq!(code, ErrorCode::BadKeyToken);
    let addr = aesd.listen.expect("job port").to_string();
    let mut none = Client::connect(&addr).await.expect("connect");
    let (code, _) = job(&mut none, Operation::Encrypt, "files", b"x")
        .await
        .expect_err("no token");
    assert_eq!(code, ErrorCode::BadKeyToken);

    // Sealed: by-name jobs get `sealed`, typed, on a connection that
    // stays open.
    admin(&aesd, "PUT", "/v1/sys/seal", "");
    let (code, out) = job(&mut files, Operation::Decrypt, "files", &mine)
        .await
        .expect_err("sealed");
    assert_eq!((code, out.len()), (ErrorCode::Sealed, 0));
    let (code, _) = job(&mut files, Operation::Encrypt, "files", b"x")
        .await
        .expect_err("still sealed");
    assert_eq!(code, ErrorCode::Sealed);
}
