//! A fleet of boards (aesd processes with `--http-listen`) sharing one
//! keyring in a real etcd (Debian's `etcd-server`, spawned here on free
//! loopback ports with a temporary data directory; a missing `etcd` or
//! `etcdctl` fails the test): init on one board, the same shares unseal
//! every board; a key made on A is on B and C, B encrypts and C decrypts,
//! a data key from A opens on C; a rotation on B is used by
//! A within 2 s; concurrent rotations never fork; an etcd outage keeps
//! the keyring readable and refuses changes with a typed 503, and the
//! boards catch up when it returns; one member of three lost loses
//! nothing; a keyring over etcd's request limit is refused and undone;
//! etcd's keys hold no key material.

use crate::etcd_support;

use std::time::{Duration, Instant};

use etcd_support::{Board, Etcd, Fleet, etcdctl_dump, key_material, wait_for};
use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};

/// The most a change on one board may take to reach another.
const VISIBLE_WITHIN: Duration = Duration::from_secs(2);

/// Key `name` made on `made_on`, then seen by `seen_by` within
/// [`VISIBLE_WITHIN`].
fn create_key_seen_by(made_on: &Board, seen_by: &Board, token: &str, name: &str) {
    let (status, body) = made_on.call(
        "POST",
        &format!("transit/keys/{name}"),
        Some(token),
        Some(json!({})),
    );
    assert_eq!(status, 200, "{body}");
    wait_for(VISIBLE_WITHIN, || {
        latest_version(seen_by, token, name) == Some(1)
    })
    .unwrap_or_else(|| {
        panic!(
            "{name} made on {} is not on {} within 2 s",
            made_on.http, seen_by.http
        )
    });
}

fn latest_version(board: &Board, token: &str, name: &str) -> Option<u64> {
    let (status, body) = board.call("GET", &format!("transit/keys/{name}"), Some(token), None);
    (status == 200).then(|| body["data"]["latest_version"].as_u64())?
}

#[test]
fn boards_share_one_keyring_and_hold_no_key_material_in_etcd() {
    let etcd = Etcd::start(1);
    let fleet = Fleet::start(&etcd, "fleet-a", 3);
    let init = fleet.init(3, 2);
    let [a, b, c] = [&fleet.boards[0], &fleet.boards[1], &fleet.boards[2]];
    let token = init.token.as_str();

    let (status, body) = a.call("POST", "transit/keys/k1", Some(token), Some(json!({})));
    assert_eq!(status, 200, "{body}");
    for board in [b, c] {
        let seen = wait_for(VISIBLE_WITHIN, || {
            latest_version(board, token, "k1") == Some(1)
        });
        assert!(
            seen.is_some(),
            "k1 made on A is not on {} within 2 s",
            board.http
        );
    }

    // Transit across the fleet: encrypted on B, decrypted on C.
    let plaintext = base64_text(b"a file key's worth of secret bytes");
    let ciphertext = encrypt(b, token, "k1", &plaintext);
    assert!(ciphertext.starts_with("vault:v1:"), "{ciphertext}");
    assert_eq!(decrypt(c, token, "k1", &ciphertext), plaintext);

    let (status, body) = b.call("POST", "transit/keys/k1/rotate", Some(token), None);
    assert_eq!(status, 200, "{body}");
    let lag = wait_for(VISIBLE_WITHIN, || latest_version(a, token, "k1") == Some(2))
        .expect("B's rotation used by A within 2 s");
    println!(
        "rotation on B visible on A after {:.0} ms",
        lag.as_secs_f64() * 1e3
    );
    // A encrypts with B's new version; C decrypts both versions at once,
    // without waiting for its watch: a ciphertext newer than the keyring
    // it holds makes it load the store's newest generation first (before
    // that, a board a few milliseconds behind answered "version is too
    // new", as a fresh CI run caught).
    let newer = encrypt(a, token, "k1", &plaintext);
    assert!(newer.starts_with("vault:v2:"), "{newer}");
    assert_eq!(decrypt(c, token, "k1", &newer), plaintext);
    assert_eq!(decrypt(c, token, "k1", &ciphertext), plaintext);

    // A data key handed out by A, its wrapped form opened by C.
    let (status, body) = a.call(
        "POST",
        "transit/datakey/plaintext/k1",
        Some(token),
        Some(json!({})),
    );
    assert_eq!(status, 200, "{body}");
    let data_key_b64 = body["data"]["plaintext"]
        .as_str()
        .expect("plaintext")
        .to_owned();
    let wrapped = body["data"]["ciphertext"]
        .as_str()
        .expect("ciphertext")
        .to_owned();
    assert_eq!(decrypt(c, token, "k1", &wrapped), data_key_b64);
    let data_key = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&data_key_b64)
            .expect("base64 data key")
    };
    assert_eq!(data_key.len(), 32);

    // A board that starts later catches up at start: sealed, at the
    // fleet's generation, and the same shares open it with the same keys.
    let generation = a.seal_status()["generation"].as_u64();
    let late = fleet.start_board();
    let status = late.seal_status();
    assert_eq!(status["initialized"], true, "{status}");
    assert_eq!(status["sealed"], true, "{status}");
    late.unseal(&init.shares[1..3]);
    assert_eq!(latest_version(&late, token, "k1"), Some(2));
    assert_eq!(late.seal_status()["generation"].as_u64(), generation);

    // etcd's keys, dumped with etcdctl: none of the keys' material (raw,
    // hex or base64), no share, no token.
    let dump = etcdctl_dump(&etcd, "/fleet-a/");
    let keys = key_material(&dump.sealed, &init.shares[..2]);
    assert_eq!(keys.len(), 2, "k1 has two versions");
    for key in keys.iter().chain([&data_key]) {
        for form in [
            key.clone(),
            hex::encode(key).into_bytes(),
            hex::encode_upper(key).into_bytes(),
            base64_text(key).into_bytes(),
        ] {
            assert!(
                !contains(&dump.raw, &form),
                "etcd's dump holds a key in the clear"
            );
        }
    }
    for secret in init.shares.iter().chain([&init.token]) {
        assert!(
            !contains(&dump.raw, secret.as_bytes()),
            "etcd's dump holds {secret:?}"
        );
    }
    // The negative control: the dump does hold what is public.
    assert!(contains(&dump.raw, b"/fleet-a/generation"));
    assert!(contains(&dump.raw, b"AESDKRNG"));
}

#[test]
fn concurrent_rotations_on_two_boards_make_one_version_each() {
    const ROUNDS: usize = 50;
    let etcd = Etcd::start(1);
    let fleet = Fleet::start(&etcd, "fleet-b", 2);
    let init = fleet.init(1, 1);
    let token = init.token.as_str();
    let [a, b] = [&fleet.boards[0], &fleet.boards[1]];
    create_key_seen_by(a, b, token, "k");
    let (mut version, mut conflicts, mut lags) = (1, 0, Vec::new());
    for round in 0..ROUNDS {
        let barrier = std::sync::Barrier::new(2);
        let barrier = &barrier;
        let rotate = |on: &Board| {
            barrier.wait();
            let (status, body) = on.call("POST", "transit/keys/k/rotate", Some(token), None);
            (status, body, Instant::now())
        };
        let rotate = &rotate;
        let answers: Vec<(u16, Value, Instant)> = std::thread::scope(|scope| {
            let on_a = scope.spawn(move || rotate(a));
            let on_b = scope.spawn(move || rotate(b));
            vec![on_a.join().expect("A"), on_b.join().expect("B")]
        });
        let mut made = 0;
        for (status, body, _) in &answers {
            match status {
                200 => made += 1,
                409 => {
                    conflicts += 1;
                    assert!(
                        body.to_string()
                            .contains("keyring changed on another board"),
                        "round {round}: {body}"
                    );
                }
                other => panic!("round {round}: rotate answered {other}: {body}"),
            }
        }
        assert!(made >= 1, "round {round}: neither rotation was stored");
        version += made;
        let done = answers
            .iter()
            .filter(|(status, ..)| *status == 200)
            .map(|(.., at)| *at)
            .max()
            .expect("a success");
        wait_for(VISIBLE_WITHIN, || {
            latest_version(a, token, "k") == Some(version)
                && latest_version(b, token, "k") == Some(version)
        })
        .unwrap_or_else(|| {
            panic!(
                "round {round}: the boards do not agree on version {version} within 2 s (A {:?}, B {:?})",
                latest_version(a, token, "k"),
                latest_version(b, token, "k")
            )
        });
        lags.push(done.elapsed());
    }
    lags.sort();
    let p99 = lags[(lags.len() * 99 / 100).min(lags.len() - 1)];
    println!(
        "{ROUNDS} rounds of two concurrent rotations: {} versions made, {conflicts} conflicts refused (409); both boards on the newest version within p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        version - 1,
        lags[lags.len() / 2].as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        lags[lags.len() - 1].as_secs_f64() * 1e3
    );
    // No fork: etcd holds one keyring whose key has exactly the versions
    // the successes made.
    let dump = etcdctl_dump(&etcd, "/fleet-b/");
    let keys = key_material(&dump.sealed, &init.shares[..1]);
    assert_eq!(keys.len() as u64, version);
}

#[test]
fn an_etcd_outage_keeps_keys_usable_refuses_changes_and_is_caught_up() {
    let mut etcd = Etcd::start(1);
    let fleet = Fleet::start(&etcd, "fleet-c", 2);
    let init = fleet.init(1, 1);
    let token = init.token.as_str();
    let [a, b] = [&fleet.boards[0], &fleet.boards[1]];
    create_key_seen_by(a, b, token, "k");
    let generation = a
        .metric("aesd_keyring_generation")
        .expect("generation gauge");
    assert_eq!(b.metric("aesd_keyring_generation"), Some(generation));
    assert_eq!(a.metric("aesd_keyring_storage_up"), Some(1.0));
    let errors_before = a
        .metric("aesd_keyring_storage_errors_total")
        .expect("errors");

    etcd.stop_all();
    // The watch notices etcd is gone, before any change is tried.
    wait_for(VISIBLE_WITHIN, || {
        b.metric("aesd_keyring_storage_up") == Some(0.0)
    })
    .expect("storage_up 0 on B without a change tried");
    for board in [a, b] {
        assert_eq!(latest_version(board, token, "k"), Some(1), "keys readable");
        let (status, body) = board.call("POST", "transit/keys/k/rotate", Some(token), None);
        assert_eq!(status, 503, "{body}");
        let text = body.to_string();
        assert!(
            text.contains("keyring storage unavailable") && text.contains("etcd"),
            "{text}"
        );
    }
    // Encryption and decryption go on from the keyring each board holds;
    // an encrypt that would create its key is a change, refused likewise.
    let plaintext = base64_text(b"during the outage");
    let ciphertext = encrypt(a, token, "k", &plaintext);
    assert_eq!(decrypt(b, token, "k", &ciphertext), plaintext);
    let (status, body) = a.call(
        "POST",
        "transit/encrypt/new-during-outage",
        Some(token),
        Some(json!({ "plaintext": plaintext })),
    );
    assert_eq!(status, 503, "{body}");
    assert!(
        body.to_string().contains("keyring storage unavailable"),
        "{body}"
    );
    assert_eq!(
        latest_version(a, token, "k"),
        Some(1),
        "the refused change is undone"
    );
    assert_eq!(a.metric("aesd_keyring_storage_up"), Some(0.0));
    // sys/seal works without etcd (sealed as held), and the share opens it.
    let (status, body) = b.call("PUT", "sys/seal", Some(token), None);
    assert_eq!(status, 204, "{body}");
    assert_eq!(b.seal_status()["sealed"], true);
    assert_eq!(latest_version(b, token, "k"), None, "sealed: no keys");
    b.unseal(&init.shares);
    assert_eq!(latest_version(b, token, "k"), Some(1));
    assert!(
        a.metric("aesd_keyring_storage_errors_total")
            .expect("errors")
            > errors_before
    );

    etcd.restart_all();
    let back = wait_for(Duration::from_secs(10), || {
        a.call("POST", "transit/keys/k/rotate", Some(token), None).0 == 200
    })
    .expect("a rotate succeeds once etcd is back");
    println!(
        "rotate accepted {:.0} ms after etcd restarted",
        back.as_secs_f64() * 1e3
    );
    let lag = wait_for(VISIBLE_WITHIN, || latest_version(b, token, "k") == Some(2))
        .expect("B catches up without a restart");
    println!(
        "B caught up {:.0} ms after the rotate",
        lag.as_secs_f64() * 1e3
    );
    assert_eq!(a.metric("aesd_keyring_storage_up"), Some(1.0));
    for board in [a, b] {
        assert_eq!(
            board.metric("aesd_keyring_generation"),
            Some(generation + 1.0),
            "one more generation, on both boards"
        );
    }
    let lag = b
        .metric("aesd_keyring_watch_lag_seconds")
        .expect("watch lag");
    assert!((0.0..2.0).contains(&lag), "watch lag {lag} s");
}

#[test]
fn losing_one_of_three_etcd_members_fails_nothing() {
    let mut etcd = Etcd::start(3);
    let fleet = Fleet::start(&etcd, "fleet-d", 2);
    let init = fleet.init(1, 1);
    let token = init.token.as_str();
    let [a, b] = [&fleet.boards[0], &fleet.boards[1]];
    create_key_seen_by(a, b, token, "k");
    let started = Instant::now();
    let (mut reads, mut rotations, mut killed) = (0, 0, false);
    while started.elapsed() < Duration::from_secs(4) {
        if !killed && started.elapsed() > Duration::from_secs(1) {
            // The first member: the one each board tries first.
            etcd.stop_member(0);
            killed = true;
        }
        for board in [a, b] {
            let (status, body) = board.call("GET", "transit/keys/k", Some(token), None);
            assert_eq!(status, 200, "read failed with a member down: {body}");
            reads += 1;
        }
        let board = [a, b][rotations % 2];
        let (status, body) = board.call("POST", "transit/keys/k/rotate", Some(token), None);
        match status {
            200 => rotations += 1,
            // The other board stored first and this one had not loaded it
            // yet: retried, as a client would.
            409 => {}
            _ => panic!("rotate failed with a member down: {status} {body}"),
        }
    }
    assert!(killed);
    let expected = rotations as u64 + 1;
    wait_for(VISIBLE_WITHIN, || {
        latest_version(a, token, "k") == Some(expected)
            && latest_version(b, token, "k") == Some(expected)
    })
    .expect("both boards on the newest version");
    println!(
        "{reads} reads and {rotations} rotations, one of three etcd members killed after 1 s: none failed"
    );
}

/// A keyring grown past etcd's request limit (here 6 KiB instead of
/// etcd's default 1.5 MiB): the change that would store it is refused
/// with a 500 naming etcd's reason and undone; the board keeps serving
/// the keyring it holds, and a change that fits (trimming old versions)
/// is stored again.
#[test]
fn a_keyring_over_etcds_request_limit_is_refused_and_the_board_goes_on() {
    let etcd = Etcd::start_limited(6 * 1024);
    let fleet = Fleet::start(&etcd, "fleet-size", 1);
    let init = fleet.init(1, 1);
    let token = init.token.as_str();
    let board = &fleet.boards[0];
    let (status, body) = board.call("POST", "transit/keys/k", Some(token), Some(json!({})));
    assert_eq!(status, 200, "{body}");
    let ciphertext = encrypt(board, token, "k", &base64_text(b"before the limit"));
    let mut accepted = 1;
    let refusal = loop {
        let (status, body) = board.call("POST", "transit/keys/k/rotate", Some(token), None);
        match status {
            200 => accepted += 1,
            _ => break (status, body),
        }
        assert!(accepted < 2000, "2000 versions fit in 6 KiB?");
    };
    let (status, body) = refusal;
    assert_eq!(status, 500, "{body}");
    let message = body["errors"][0].as_str().unwrap_or_default();
    assert!(
        message.contains("too large"),
        "the refusal names etcd's reason: {body}"
    );
    assert_eq!(
        latest_version(board, token, "k"),
        Some(accepted),
        "the refused rotation was undone"
    );
    assert_eq!(
        decrypt(board, token, "k", &ciphertext),
        base64_text(b"before the limit")
    );
    encrypt(board, token, "k", &base64_text(b"after the refusal"));
    // Versions below 2 trimmed: a smaller keyring, stored again.
    let config = |body: Value| board.call("POST", "transit/keys/k/config", Some(token), Some(body));
    let (status, body) =
        config(json!({ "min_decryption_version": accepted, "min_encryption_version": accepted }));
    assert!((200..300).contains(&status), "{body}");
    let (status, body) = board.call(
        "POST",
        "transit/keys/k/trim",
        Some(token),
        Some(json!({ "min_available_version": accepted })),
    );
    assert!((200..300).contains(&status), "trim: {body}");
    let (status, body) = board.call("POST", "transit/keys/k/rotate", Some(token), None);
    assert_eq!(status, 200, "a rotation once trimmed: {body}");
    println!(
        "{accepted} versions fitted under etcd's 6 KiB request limit; the next rotation: 500 {message:?}"
    );
}

#[test]
fn boards_reach_etcd_over_tls_with_a_client_certificate() {
    let etcd = Etcd::start_tls();
    let tls = etcd.tls().expect("TLS files");
    let flags: Vec<OsString> = vec![
        "--etcd-cacert".into(),
        tls.ca.clone().into(),
        "--etcd-cert".into(),
        tls.client_cert.clone().into(),
        "--etcd-key".into(),
        tls.client_key.clone().into(),
    ];
    let fleet = Fleet::start_with(&etcd, "fleet-tls", 2, flags.clone());
    let init = fleet.init(1, 1);
    let token = init.token.as_str();
    let [a, b] = [&fleet.boards[0], &fleet.boards[1]];
    create_key_seen_by(a, b, token, "k");

    // Negative controls: without the client certificate etcd refuses the
    // handshake; without TLS it does not speak; aesd says why and stops.
    let ca_only: Vec<&OsStr> = flags[..2].iter().map(OsString::as_os_str).collect();
    let without_cert = Board::start_fails(fleet.keyring(), &ca_only);
    assert!(
        without_cert.contains("is unreachable") && without_cert.contains("BadCertificate"),
        "{without_cert}"
    );
    let plain = Board::start_fails(fleet.keyring(), &[]);
    assert!(plain.contains("keyring store etcd"), "{plain}");
}

/// `plaintext` (base64) encrypted under `name` on `board`: its ciphertext.
fn encrypt(board: &Board, token: &str, name: &str, plaintext: &str) -> String {
    let (status, body) = board.call(
        "POST",
        &format!("transit/encrypt/{name}"),
        Some(token),
        Some(json!({ "plaintext": plaintext })),
    );
    assert_eq!(status, 200, "encrypt on {}: {body}", board.http);
    body["data"]["ciphertext"]
        .as_str()
        .expect("ciphertext")
        .to_owned()
}

/// `ciphertext` decrypted under `name` on `board`: its plaintext (base64).
fn decrypt(board: &Board, token: &str, name: &str, ciphertext: &str) -> String {
    let (status, body) = board.call(
        "POST",
        &format!("transit/decrypt/{name}"),
        Some(token),
        Some(json!({ "ciphertext": ciphertext })),
    );
    assert_eq!(status, 200, "decrypt on {}: {body}", board.http);
    body["data"]["plaintext"]
        .as_str()
        .expect("plaintext")
        .to_owned()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn base64_text(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
