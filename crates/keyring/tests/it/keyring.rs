//! The keyring's Transit semantics: lifecycle, version rules, config and
//! trim refusals, ciphertext faults, limits.

use aesd_keyring::{
    CiphertextFault, Entropy, FileKey, KeyConfigUpdate, KeyType, Keyring, KeyringError, MAX_KEYS,
    MAX_TOTAL_VERSIONS, MAX_VERSIONS_PER_KEY, OsEntropy, WrappedKey, ciphertext,
};

/// Deterministic bytes (a counter), so tests can look for key bytes in
/// what is printed.
struct Counter(u8);

impl Entropy for Counter {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
        for b in out {
            self.0 = self.0.wrapping_add(1);
            *b = self.0;
        }
        Ok(())
    }
}

fn ring_with(name: &str, kind: KeyType) -> Keyring {
    let mut ring = Keyring::new();
    ring.create(name, kind, 1000, &mut OsEntropy)
        .expect("create");
    ring
}

fn config() -> KeyConfigUpdate {
    KeyConfigUpdate::default()
}

#[test]
fn create_read_list_and_defaults() {
    let mut ring = Keyring::new();
    let meta = ring
        .create("k1", KeyType::default(), 1000, &mut OsEntropy)
        .expect("create");
    assert_eq!(meta.key_type, KeyType::Aes256Gcm96);
    assert_eq!(meta.key_type.as_str(), "aes256-gcm96");
    assert_eq!(
        (
            meta.latest_version,
            meta.min_decryption_version,
            meta.min_encryption_version
        ),
        (1, 1, 0)
    );
    assert!(!meta.deletion_allowed && !meta.exportable && meta.auto_rotate_period == 0);
    assert_eq!(meta.keys.get(&1), Some(&1000));
    ring.create("a.b", KeyType::ChaCha20Poly1305, 5, &mut OsEntropy)
        .expect("create");
    assert_eq!(ring.list().collect::<Vec<_>>(), ["a.b", "k1"]);
    assert_eq!(
        ring.read("a.b").expect("read").key_type,
        KeyType::ChaCha20Poly1305
    );
    assert_eq!(
        ring.create("k1", KeyType::default(), 0, &mut OsEntropy),
        Err(KeyringError::KeyExists { name: "k1".into() })
    );
    assert!(matches!(
        ring.create("-bad", KeyType::default(), 0, &mut OsEntropy),
        Err(KeyringError::InvalidName { .. })
    ));
    assert_eq!(
        ring.read("nope"),
        Err(KeyringError::UnknownKey {
            name: "nope".into()
        })
    );
    assert!(ring.contains("k1") && ring.contains("a.b") && !ring.contains("nope"));
    assert_eq!(ring.require("k1"), Ok(()));
    assert_eq!(
        ring.require("nope"),
        Err(KeyringError::UnknownKey {
            name: "nope".into()
        })
    );
    assert!(matches!(
        KeyType::parse("aes128-gcm96"),
        Err(KeyringError::UnsupportedType { .. })
    ));
    assert_eq!(
        KeyType::parse("chacha20-poly1305"),
        Ok(KeyType::ChaCha20Poly1305)
    );
}

#[test]
fn metadata_and_debug_never_show_key_material() {
    let mut ring = Keyring::new();
    // Counter entropy: the key bytes are 1, 2, ..., 32.
    ring.create("k", KeyType::default(), 0, &mut Counter(0))
        .expect("create");
    let meta = serde_json::to_string(&ring.read("k").expect("read")).expect("json");
    assert!(!meta.contains("[1,2,3"), "{meta}");
    assert!(meta.contains("\"type\":\"aes256-gcm96\""), "{meta}");
    let debug = format!("{ring:?}");
    assert!(debug.contains("redacted"), "{debug}");
    assert!(!debug.contains("1, 2, 3"), "{debug}");
}

#[test]
fn encrypt_decrypt_both_types_with_associated_data() {
    for kind in [KeyType::Aes256Gcm96, KeyType::ChaCha20Poly1305] {
        let ring = ring_with("k", kind);
        let text = ring
            .encrypt("k", None, b"attack at dawn", b"ctx", &mut OsEntropy)
            .expect("encrypt");
        assert!(text.starts_with("vault:v1:"), "{text}");
        let (_, sealed) = ciphertext::parse(&text).expect("parse");
        assert_eq!(sealed.len(), 12 + 14 + 16);
        assert_eq!(
            ring.decrypt("k", &text, b"ctx")
                .expect("decrypt")
                .as_slice(),
            b"attack at dawn"
        );
        assert_eq!(
            ring.decrypt("k", &text, b"other"),
            Err(KeyringError::BadCiphertext(
                CiphertextFault::AuthenticationFailed
            )),
            "{kind:?}: other associated data"
        );
        let empty = ring
            .encrypt("k", None, b"", b"", &mut OsEntropy)
            .expect("empty");
        assert!(ring.decrypt("k", &empty, b"").expect("decrypt").is_empty());
    }
}

#[test]
fn ciphertext_faults_are_typed() {
    let ring = ring_with("k", KeyType::default());
    let other = ring_with("k", KeyType::default());
    let text = ring
        .encrypt("k", None, b"secret", b"", &mut OsEntropy)
        .expect("encrypt");
    let bad = |t: &str| ring.decrypt("k", t, b"").err();
    let fault = |f| Some(KeyringError::BadCiphertext(f));
    // Another key's ciphertext (same name, other keyring: other material).
    assert_eq!(
        other.decrypt("k", &text, b"").err(),
        fault(CiphertextFault::AuthenticationFailed)
    );
    // One flipped bit in the payload.
    let (v, mut sealed) = ciphertext::parse(&text).expect("parse");
    sealed[14] ^= 1;
    assert_eq!(
        bad(&ciphertext::format(v, &sealed)),
        fault(CiphertextFault::AuthenticationFailed)
    );
    assert_eq!(
        bad(&ciphertext::format(1, &[0; 27])),
        fault(CiphertextFault::TooShort)
    );
    assert_eq!(
        bad(&text.replace("vault:", "bao:")),
        fault(CiphertextFault::MalformedPrefix)
    );
    assert_eq!(
        bad("vault:vx:AAAA"),
        fault(CiphertextFault::MalformedVersion)
    );
    assert_eq!(bad("vault:v1:%%%%"), fault(CiphertextFault::BadBase64));
    assert_eq!(
        ring.decrypt("nokey", &text, b"").err(),
        Some(KeyringError::UnknownKey {
            name: "nokey".into()
        })
    );
    // A ciphertext of a key with the same material but another type fails too.
    let mut chacha = Keyring::new();
    chacha
        .create("k", KeyType::ChaCha20Poly1305, 0, &mut Counter(0))
        .expect("create");
    let mut aes = Keyring::new();
    aes.create("k", KeyType::Aes256Gcm96, 0, &mut Counter(0))
        .expect("create");
    let text = chacha
        .encrypt("k", None, b"x", b"", &mut OsEntropy)
        .expect("encrypt");
    assert_eq!(
        aes.decrypt("k", &text, b"").err(),
        fault(CiphertextFault::AuthenticationFailed)
    );
    assert!(chacha.decrypt("k", &text, b"").is_ok());
}

#[test]
fn rotation_keeps_old_versions_until_the_minimum_moves() {
    let mut ring = ring_with("k", KeyType::default());
    let v1 = ring
        .encrypt("k", None, b"one", b"", &mut OsEntropy)
        .expect("v1");
    assert_eq!(ring.rotate("k", 2000, &mut OsEntropy), Ok(2));
    assert_eq!(ring.rotate("k", 3000, &mut OsEntropy), Ok(3));
    let v3 = ring
        .encrypt("k", None, b"three", b"", &mut OsEntropy)
        .expect("v3");
    assert!(v3.starts_with("vault:v3:"));
    let v2 = ring
        .encrypt("k", Some(2), b"two", b"", &mut OsEntropy)
        .expect("v2");
    assert!(v2.starts_with("vault:v2:"));
    assert_eq!(ring.decrypt("k", &v1, b"").expect("old").as_slice(), b"one");
    // A version above the latest.
    let (_, sealed) = ciphertext::parse(&v3).expect("parse");
    assert_eq!(
        ring.decrypt("k", &ciphertext::format(9, &sealed), b"")
            .err(),
        Some(KeyringError::VersionNotCreated {
            name: "k".into(),
            version: 9,
            latest: 3
        })
    );
    assert_eq!(
        ring.encrypt("k", Some(4), b"", b"", &mut OsEntropy).err(),
        Some(KeyringError::VersionNotCreated {
            name: "k".into(),
            version: 4,
            latest: 3
        })
    );
    // A version's ciphertext under another version's number fails.
    let (_, sealed1) = ciphertext::parse(&v1).expect("parse");
    assert_eq!(
        ring.decrypt("k", &ciphertext::format(2, &sealed1), b"")
            .err(),
        Some(KeyringError::BadCiphertext(
            CiphertextFault::AuthenticationFailed
        ))
    );
    // min_decryption_version = 2 refuses version 1, keeps 2 and 3.
    ring.configure(
        "k",
        &KeyConfigUpdate {
            min_decryption_version: Some(2),
            ..config()
        },
    )
    .expect("config");
    assert_eq!(
        ring.decrypt("k", &v1, b"").err(),
        Some(KeyringError::VersionBelowMinimum {
            name: "k".into(),
            version: 1,
            minimum: 2,
            operation: "decryption"
        })
    );
    assert_eq!(ring.decrypt("k", &v2, b"").expect("v2").as_slice(), b"two");
    // min_encryption_version = 3: encrypting with 2 refused.
    ring.configure(
        "k",
        &KeyConfigUpdate {
            min_encryption_version: Some(3),
            ..config()
        },
    )
    .expect("config");
    assert!(matches!(
        ring.encrypt("k", Some(2), b"", b"", &mut OsEntropy),
        Err(KeyringError::VersionBelowMinimum {
            version: 2,
            minimum: 3,
            operation: "encryption",
            ..
        })
    ));
    // Lowering min_decryption_version again re-opens version 1 (not trimmed).
    ring.configure(
        "k",
        &KeyConfigUpdate {
            min_decryption_version: Some(0),
            min_encryption_version: Some(0),
            ..config()
        },
    )
    .expect("config");
    assert_eq!(
        ring.read("k").expect("read").min_decryption_version,
        1,
        "0 is taken as 1"
    );
    assert_eq!(ring.decrypt("k", &v1, b"").expect("v1").as_slice(), b"one");
}

#[test]
fn configuration_refusals_are_all_or_nothing() {
    let mut ring = ring_with("k", KeyType::default());
    ring.rotate("k", 0, &mut OsEntropy).expect("rotate");
    let before = ring.read("k").expect("read");
    let refused = [
        KeyConfigUpdate {
            min_decryption_version: Some(3),
            deletion_allowed: Some(true),
            ..config()
        },
        KeyConfigUpdate {
            min_encryption_version: Some(3),
            ..config()
        },
        KeyConfigUpdate {
            min_decryption_version: Some(2),
            min_encryption_version: Some(1),
            ..config()
        },
        KeyConfigUpdate {
            auto_rotate_period: Some(3599),
            exportable: Some(true),
            ..config()
        },
    ];
    let reasons = [
        "cannot set min decryption version of 3, latest key version is 2",
        "cannot set min encryption version of 3, latest key version is 2",
        "min encryption version of 1 must be greater than or equal to min decryption version of 2",
        "auto rotate period must be 0 to disable or at least an hour",
    ];
    for (update, reason) in refused.iter().zip(reasons) {
        assert_eq!(
            ring.configure("k", update),
            Err(KeyringError::InvalidConfig {
                name: "k".into(),
                reason: reason.into()
            })
        );
        assert_eq!(
            ring.read("k").expect("read"),
            before,
            "unchanged after {update:?}"
        );
    }
    let meta = ring
        .configure(
            "k",
            &KeyConfigUpdate {
                exportable: Some(true),
                auto_rotate_period: Some(3600),
                ..config()
            },
        )
        .expect("config");
    assert!(meta.exportable && meta.auto_rotate_period == 3600);
    let meta = ring
        .configure(
            "k",
            &KeyConfigUpdate {
                exportable: Some(false),
                ..config()
            },
        )
        .expect("config");
    assert!(meta.exportable, "exportable is one-way");
    assert_eq!(
        ring.configure("x", &config()),
        Err(KeyringError::UnknownKey { name: "x".into() })
    );
}

#[test]
fn trim_follows_openbao_rules_and_deletes_versions() {
    let mut ring = ring_with("k", KeyType::default());
    let v1 = ring
        .encrypt("k", None, b"one", b"", &mut OsEntropy)
        .expect("v1");
    for _ in 0..4 {
        ring.rotate("k", 0, &mut OsEntropy).expect("rotate");
    }
    let invalid = |reason: &str| {
        Err(KeyringError::InvalidConfig {
            name: "k".into(),
            reason: reason.into(),
        })
    };
    assert_eq!(
        ring.trim("k", 2),
        invalid(
            "minimum available version cannot be set when minimum encryption version is not set"
        )
    );
    ring.configure(
        "k",
        &KeyConfigUpdate {
            min_encryption_version: Some(4),
            min_decryption_version: Some(3),
            ..config()
        },
    )
    .expect("config");
    assert_eq!(
        ring.trim("k", 4),
        invalid("minimum available version cannot be greater than minimum decryption version")
    );
    assert_eq!(
        ring.trim("k", 5),
        invalid("minimum available version cannot be greater than minimum encryption version")
    );
    assert_eq!(
        ring.trim("k", 0),
        invalid("minimum available version should be positive")
    );
    let meta = ring.trim("k", 3).expect("trim");
    assert_eq!(meta.keys.keys().copied().collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(meta.min_available_version, 3);
    assert_eq!(
        ring.trim("k", 2),
        invalid("minimum available version cannot be decremented")
    );
    // Version 1 is gone for good: lowering min_decryption_version is refused.
    assert_eq!(
        ring.configure(
            "k",
            &KeyConfigUpdate {
                min_decryption_version: Some(1),
                ..config()
            }
        ),
        invalid("min decryption version should not be less than min available version")
    );
    assert!(matches!(
        ring.decrypt("k", &v1, b""),
        Err(KeyringError::VersionBelowMinimum { version: 1, .. })
    ));
    assert!(
        ring.encrypt("k", Some(4), b"x", b"", &mut OsEntropy)
            .is_ok()
    );
}

#[test]
fn delete_is_refused_until_allowed() {
    let mut ring = ring_with("k", KeyType::default());
    assert_eq!(
        ring.delete("k"),
        Err(KeyringError::DeletionNotAllowed { name: "k".into() })
    );
    assert_eq!(ring.len(), 1);
    ring.configure(
        "k",
        &KeyConfigUpdate {
            deletion_allowed: Some(true),
            ..config()
        },
    )
    .expect("config");
    assert_eq!(ring.delete("k"), Ok(()));
    assert!(ring.is_empty());
    assert_eq!(
        ring.delete("k"),
        Err(KeyringError::UnknownKey { name: "k".into() })
    );
}

#[test]
fn file_keys_wrap_and_unwrap_bound_to_their_context() {
    let mut ring = ring_with("files", KeyType::default());
    let file_key = FileKey::generate(&mut OsEntropy).expect("file key");
    let wrapped = ring
        .wrap_file_key("files", None, &file_key, b"header", &mut OsEntropy)
        .expect("wrap");
    assert_eq!((wrapped.version, wrapped.sealed.len()), (1, 60));
    ring.rotate("files", 0, &mut OsEntropy).expect("rotate");
    let back = ring
        .unwrap_file_key("files", &wrapped, b"header")
        .expect("unwrap");
    assert_eq!(back.expose(), file_key.expose());
    assert_eq!(
        ring.unwrap_file_key("files", &wrapped, b"other header")
            .err(),
        Some(KeyringError::BadCiphertext(
            CiphertextFault::AuthenticationFailed
        ))
    );
    // Something else encrypted under the same key and context is no file key.
    let (version, sealed) = ring
        .encrypt_raw("files", None, b"short", b"header", &mut OsEntropy)
        .expect("encrypt");
    assert_eq!(
        ring.unwrap_file_key("files", &WrappedKey { version, sealed }, b"header")
            .err(),
        Some(KeyringError::BadCiphertext(CiphertextFault::NotAFileKey))
    );
    // Rewrap: the same file key under version 2.
    let rewrapped = ring
        .wrap_file_key("files", None, &back, b"header", &mut OsEntropy)
        .expect("rewrap");
    assert_eq!(rewrapped.version, 2);
    assert_eq!(
        ring.unwrap_file_key("files", &rewrapped, b"header")
            .expect("unwrap")
            .expose(),
        file_key.expose()
    );
}

#[test]
fn auto_rotation_when_the_period_has_passed() {
    let mut ring = ring_with("k", KeyType::default());
    ring.create("never", KeyType::default(), 1000, &mut OsEntropy)
        .expect("create");
    ring.configure(
        "k",
        &KeyConfigUpdate {
            auto_rotate_period: Some(3600),
            ..config()
        },
    )
    .expect("config");
    assert!(
        ring.rotate_due(4599, &mut OsEntropy)
            .expect("due")
            .is_empty()
    );
    assert_eq!(ring.rotate_due(4600, &mut OsEntropy).expect("due"), ["k"]);
    assert_eq!(ring.read("k").expect("read").latest_version, 2);
    assert!(
        ring.rotate_due(4601, &mut OsEntropy)
            .expect("due")
            .is_empty()
    );
    assert_eq!(ring.read("never").expect("read").latest_version, 1);
}

#[test]
fn limits_on_keys_and_versions() {
    let mut ring = Keyring::new();
    for i in 0..MAX_KEYS {
        ring.create(&format!("k{i}"), KeyType::default(), 0, &mut OsEntropy)
            .expect("create");
    }
    assert_eq!(
        ring.create("one-more", KeyType::default(), 0, &mut OsEntropy),
        Err(KeyringError::KeyringFull {
            what: "keys",
            limit: MAX_KEYS
        })
    );
    // Versions of one key.
    for _ in 1..MAX_VERSIONS_PER_KEY {
        ring.rotate("k0", 0, &mut OsEntropy).expect("rotate");
    }
    assert!(matches!(
        ring.rotate("k0", 0, &mut OsEntropy),
        Err(KeyringError::KeyringFull {
            limit: MAX_VERSIONS_PER_KEY,
            ..
        })
    ));
    // Versions over all keys.
    let mut total = MAX_KEYS + MAX_VERSIONS_PER_KEY - 1;
    'fill: for i in 1..MAX_KEYS {
        for _ in 1..MAX_VERSIONS_PER_KEY {
            if total == MAX_TOTAL_VERSIONS {
                break 'fill;
            }
            ring.rotate(&format!("k{i}"), 0, &mut OsEntropy)
                .expect("rotate");
            total += 1;
        }
    }
    assert_eq!(
        ring.rotate("k200", 0, &mut OsEntropy),
        Err(KeyringError::KeyringFull {
            what: "versions over all keys",
            limit: MAX_TOTAL_VERSIONS
        })
    );
}
