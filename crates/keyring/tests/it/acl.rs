//! Policies (OpenBao's HCL subset, its path matching and priority) and
//! tokens (hashed, accessors, TTLs, root).

use aesd_keyring::OsEntropy;
use aesd_keyring::policy::{self, Acl, Capability, PolicyErrorKind, PolicyStore, PolicyStoreError};
use aesd_keyring::token::{TokenError, TokenStore};

fn acl(texts: &[&str]) -> Acl {
    let policies: Vec<_> = texts
        .iter()
        .map(|t| policy::parse(t).expect("policy"))
        .collect();
    Acl::new(&policies)
}

#[test]
fn exact_paths_globs_and_plus_segments() {
    let acl = acl(&[r#"
        # encrypt with k1 only
        path "transit/encrypt/k1" { capabilities = ["update"] }
        // read any key's metadata under team-a/
        path "transit/keys/team-a*" {
          capabilities = ["read", "list"]
        }
        /* decrypt with any key, one segment */
        path "transit/decrypt/+" { capabilities = ["update"] }
        path "transit/+/shared/*" { capabilities = ["create"] }
    "#]);
    assert!(acl.allows("transit/encrypt/k1", Capability::Update));
    assert!(!acl.allows("transit/encrypt/k1", Capability::Read));
    assert!(!acl.allows("transit/encrypt/k2", Capability::Update));
    assert!(
        !acl.allows("transit/encrypt/k10", Capability::Update),
        "exact, not prefix"
    );
    assert!(acl.allows("transit/keys/team-a-1", Capability::Read));
    assert!(acl.allows("transit/keys/team-a/x", Capability::List));
    assert!(!acl.allows("transit/keys/team-b", Capability::Read));
    assert!(acl.allows("transit/decrypt/anything", Capability::Update));
    assert!(
        !acl.allows("transit/decrypt/a/b", Capability::Update),
        "+ is one segment"
    );
    assert!(acl.allows("transit/x/shared/y/z", Capability::Create));
    assert!(
        !acl.allows("transit/x/shared", Capability::Create),
        "glob after / needs more"
    );
    assert!(!acl.allows("transit/x/y/shared/z", Capability::Create));
}

#[test]
fn openbao_priority_and_deny() {
    // "secret/*" and "secret/+/+/foo/*": the first wildcard at the same
    // place, both globs, the latter has two + segments: it loses.
    let acl1 = acl(&[
        r#"path "transit/*" { capabilities = ["read"] }"#,
        r#"path "transit/+/+/foo/*" { capabilities = ["update"] }"#,
    ]);
    assert_eq!(acl1.capabilities("transit/a/b/foo/c").names(), ["read"]);
    // An exact path beats a glob; a longer glob beats a shorter one; deny wins
    // over the union when the same pattern is in two policies.
    let acl2 = acl(&[
        r#"path "transit/keys/*" { capabilities = ["read"] }
           path "transit/keys/k*" { capabilities = ["update"] }
           path "transit/keys/k1" { capabilities = ["list"] }"#,
        r#"path "transit/keys/k1" { capabilities = ["deny"] }
           path "transit/keys/k2" { capabilities = ["read"] }"#,
        r#"path "transit/keys/k2" { capabilities = ["update"] }"#,
    ]);
    assert_eq!(acl2.capabilities("transit/keys/x").names(), ["read"]);
    assert_eq!(acl2.capabilities("transit/keys/k9").names(), ["update"]);
    assert_eq!(acl2.capabilities("transit/keys/k1").names(), ["deny"]);
    assert!(!acl2.allows("transit/keys/k1", Capability::List));
    assert_eq!(
        acl2.capabilities("transit/keys/k2").names(),
        ["read", "update"]
    );
    // A later first wildcard wins over fewer + segments.
    let acl3 = acl(&[r#"path "transit/+/k" { capabilities = ["read"] }
           path "transit/keys/+" { capabilities = ["update"] }"#]);
    assert_eq!(acl3.capabilities("transit/keys/k").names(), ["update"]);
    assert!(Acl::root().allows("sys/anything", Capability::Sudo));
    assert!(
        Acl::default()
            .capabilities("transit/keys/k")
            .names()
            .is_empty()
    );
}

#[test]
fn parse_errors_name_line_and_column() {
    let cases: [(&str, usize, usize, PolicyErrorKind); 9] = [
        (
            "path \"a\" {\n  capabilities = [\"raed\"]\n}",
            2,
            19,
            PolicyErrorKind::UnknownCapability("raed".into()),
        ),
        (
            "path \"a\" {\n  allowed_parameters = {}\n}",
            2,
            3,
            PolicyErrorKind::UnsupportedAttribute("allowed_parameters".into()),
        ),
        (
            "path \"a*b\" { capabilities = [\"read\"] }",
            1,
            6,
            PolicyErrorKind::GlobNotAtEnd("a*b".into()),
        ),
        (
            "path \"a\" { }",
            1,
            6,
            PolicyErrorKind::NoCapabilities("a".into()),
        ),
        (
            "path \"a { capabilities = [] }",
            1,
            6,
            PolicyErrorKind::BadString,
        ),
        (
            "\n\n  /* never closed",
            3,
            3,
            PolicyErrorKind::UnterminatedComment,
        ),
        (
            "paths \"a\" {}",
            1,
            1,
            PolicyErrorKind::Expected {
                expected: "path",
                found: "paths".into(),
            },
        ),
        (
            "path a {}",
            1,
            6,
            PolicyErrorKind::Expected {
                expected: "a quoted path",
                found: "a".into(),
            },
        ),
        (
            "path \"a\" { capabilities = [\"read\" \"list\"] }",
            1,
            35,
            PolicyErrorKind::Expected {
                expected: "',' or ']'",
                found: "\"list\"".into(),
            },
        ),
    ];
    for (text, line, column, kind) in cases {
        let err = policy::parse(text).expect_err(text);
        assert_eq!(
            (err.line, err.column, &err.kind),
            (line, column, &kind),
            "{text:?}: {err}"
        );
    }
    let big = "#".repeat(policy::MAX_POLICY_LEN + 1);
    assert_eq!(
        policy::parse(&big).expect_err("big").kind,
        PolicyErrorKind::TooLarge
    );
    // Trailing commas and several capabilities are fine.
    let ok = policy::parse(r#"path "a" { capabilities = ["read", "list",] }"#).expect("ok");
    assert_eq!(ok.rules[0].capabilities.names(), ["read", "list"]);
}

#[test]
fn policy_store_names_and_reserved_policies() {
    let mut store = PolicyStore::default();
    let text = r#"path "transit/encrypt/k" { capabilities = ["update"] }"#;
    assert_eq!(store.put("Enc", text), Ok("enc".into()));
    assert_eq!(store.get("ENC").expect("get").text, text);
    assert_eq!(
        store.put("root", text),
        Err(PolicyStoreError::Reserved("root".into()))
    );
    assert!(matches!(
        store.put("a/b", text),
        Err(PolicyStoreError::InvalidName(_))
    ));
    assert!(matches!(
        store.put("bad", "path"),
        Err(PolicyStoreError::Parse(_))
    ));
    assert_eq!(
        store.delete("default"),
        Err(PolicyStoreError::Reserved("default".into()))
    );
    assert_eq!(
        store.delete("nope"),
        Err(PolicyStoreError::Unknown("nope".into()))
    );
    assert_eq!(store.names().collect::<Vec<_>>(), ["enc"]);
    assert_eq!(store.delete("enc"), Ok(()));
}

#[test]
fn tokens_are_stored_hashed_with_accessors_ttls_and_root() {
    let mut store = TokenStore::default();
    let (root, root_entry) = store
        .create(
            Some("root"),
            vec!["root".into()],
            0,
            100,
            "root",
            &mut OsEntropy,
        )
        .expect("root");
    assert_eq!(root.as_str(), "root");
    assert!(root_entry.is_root());
    assert!(
        root_entry
            .acl(|_| None)
            .allows("transit/keys/x", Capability::Create)
    );
    let (token, entry) = store
        .create(
            None,
            vec!["b".into(), "a".into(), "a".into()],
            60,
            100,
            "token",
            &mut OsEntropy,
        )
        .expect("token");
    assert!(
        token.starts_with("s.") && token.len() == 34,
        "{}",
        token.as_str()
    );
    assert_eq!(entry.policies, ["a", "b"]);
    assert_eq!(entry.expire_time, 160);
    let json = serde_json::to_string(&store).expect("json");
    assert!(
        !json.contains(token.as_str()) && !json.contains("\"root\":"),
        "{json}"
    );
    assert_eq!(store.lookup(&token, 159), Ok(&entry));
    assert_eq!(store.lookup(&token, 160), Err(TokenError::Expired));
    assert_eq!(
        store
            .renew(&token, Some(10), 150)
            .expect("renew")
            .expire_time,
        160
    );
    assert_eq!(
        store.renew(&token, None, 155).expect("renew").expire_time,
        215
    );
    assert_eq!(store.lookup("s.guess", 0), Err(TokenError::Unknown));
    assert_eq!(
        store
            .lookup_accessor(&entry.accessor)
            .expect("accessor")
            .policies,
        ["a", "b"]
    );
    assert_eq!(
        store
            .create(Some("root"), vec![], 0, 0, "x", &mut OsEntropy)
            .err(),
        Some(TokenError::Exists)
    );
    assert_eq!(
        store
            .create(Some("with space"), vec![], 0, 0, "x", &mut OsEntropy)
            .err(),
        Some(TokenError::InvalidId)
    );
    assert_eq!(store.revoke_accessor(&entry.accessor), Ok(()));
    assert_eq!(store.lookup(&token, 100), Err(TokenError::Unknown));
    assert_eq!(
        store.revoke_accessor(&entry.accessor),
        Err(TokenError::UnknownAccessor)
    );
    let (short, _) = store
        .create(None, vec![], 1, 0, "t", &mut OsEntropy)
        .expect("short");
    assert_eq!(store.tidy(5), 1);
    assert_eq!(store.revoke(&short), Err(TokenError::Unknown));
    assert_eq!(store.revoke("root"), Ok(()));
    assert!(store.is_empty());
}

#[test]
fn a_token_for_one_key_cannot_touch_another() {
    let mut policies = PolicyStore::default();
    policies
        .put(
            "k1-encrypt",
            r#"path "transit/encrypt/k1" { capabilities = ["update"] }"#,
        )
        .expect("policy");
    let mut tokens = TokenStore::default();
    let (token, _) = tokens
        .create(
            None,
            vec!["k1-encrypt".into(), "missing".into()],
            0,
            0,
            "t",
            &mut OsEntropy,
        )
        .expect("token");
    let acl = tokens
        .lookup(&token, 0)
        .expect("live")
        .acl(|n| policies.get(n));
    assert!(acl.allows("transit/encrypt/k1", Capability::Update));
    assert!(!acl.allows("transit/decrypt/k1", Capability::Update));
    assert!(!acl.allows("transit/encrypt/k2", Capability::Update));
}
