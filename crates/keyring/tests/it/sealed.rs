//! The keyring at rest and the unseal state machine: k - 1 shares do not
//! unseal, a wrong share is refused, k shares open it, the header is
//! bound to the ciphertext.

use aesd_keyring::sealed::{
    self, Contents, ContentsRef, RootKey, SealConfig, SealError, SealedHeader,
};
use aesd_keyring::shamir::Share;
use aesd_keyring::unseal::{UnsealStep, UnsealedKeyring, Unsealer};
use aesd_keyring::{KeyType, Keyring, OsEntropy};

const CONFIG: SealConfig = SealConfig {
    threshold: 3,
    shares: 5,
};

/// A keyring with one rotated key, sealed as generation 1, its shares,
/// and a ciphertext of version 1.
fn sealed_keyring() -> (Vec<u8>, Vec<Share>, String) {
    let (root, shares) = sealed::initialize(CONFIG, &mut OsEntropy).expect("init");
    let mut open = UnsealedKeyring::initialized(root, CONFIG);
    open.keyring
        .create("k", KeyType::default(), 0, &mut OsEntropy)
        .expect("create");
    let text = open
        .keyring
        .encrypt("k", None, b"kept", b"", &mut OsEntropy)
        .expect("encrypt");
    open.keyring.rotate("k", 0, &mut OsEntropy).expect("rotate");
    let (generation, bytes) = open.seal_next(&mut OsEntropy).expect("seal");
    assert_eq!(generation, 1);
    (bytes, shares, text)
}

fn unsealed(step: UnsealStep) -> Box<UnsealedKeyring> {
    match step {
        UnsealStep::Unsealed(open) => open,
        UnsealStep::Progress(status) => panic!("still sealed: {status:?}"),
    }
}

#[test]
fn k_shares_unseal_and_the_keys_come_back() {
    let (bytes, shares, text) = sealed_keyring();
    let mut unsealer = Unsealer::new(bytes).expect("header");
    let status = unsealer.status();
    assert!(status.sealed);
    assert_eq!(
        (
            status.threshold,
            status.shares,
            status.progress,
            status.generation
        ),
        (3, 5, 0, 1)
    );
    for (i, share) in [&shares[4], &shares[1]].into_iter().enumerate() {
        match unsealer.submit(share.clone()).expect("submit") {
            UnsealStep::Progress(s) => assert_eq!(s.progress as usize, i + 1),
            UnsealStep::Unsealed(_) => panic!("unsealed by {} shares", i + 1),
        }
    }
    let open = unsealed(unsealer.submit(shares[2].clone()).expect("third"));
    assert!(!open.status().sealed);
    assert_eq!(open.generation(), 1);
    assert_eq!(open.keyring.read("k").expect("read").latest_version, 2);
    assert_eq!(
        open.keyring
            .decrypt("k", &text, b"")
            .expect("decrypt")
            .as_slice(),
        b"kept"
    );
}

#[test]
fn a_repeated_share_counts_once_and_reset_starts_over() {
    let (bytes, shares, _) = sealed_keyring();
    let mut unsealer = Unsealer::new(bytes).expect("header");
    unsealer.submit(shares[0].clone()).expect("1");
    let again = unsealer.submit(shares[0].clone()).expect("1 again");
    assert!(matches!(again, UnsealStep::Progress(s) if s.progress == 1));
    unsealer.submit(shares[1].clone()).expect("2");
    unsealer.reset();
    assert_eq!(unsealer.status().progress, 0);
    unsealer.submit(shares[2].clone()).expect("1");
    unsealer.submit(shares[3].clone()).expect("2");
    unsealed(unsealer.submit(shares[4].clone()).expect("3"));
}

#[test]
fn a_wrong_share_is_refused_and_progress_starts_over() {
    let (bytes, shares, _) = sealed_keyring();
    let mut unsealer = Unsealer::new(bytes.clone()).expect("header");
    let mut raw = shares[2].to_bytes();
    raw[7] ^= 0x40;
    let corrupt = Share::from_bytes(&raw[..]).expect("share");
    unsealer.submit(shares[0].clone()).expect("1");
    unsealer.submit(shares[1].clone()).expect("2");
    assert_eq!(
        unsealer.submit(corrupt).err(),
        Some(SealError::SharesDoNotOpen)
    );
    assert_eq!(unsealer.status().progress, 0);
    // Shares of another keyring's root key do not open it either.
    let (_, others, _) = sealed_keyring();
    for share in &others[..3] {
        let _ = unsealer.submit(share.clone());
    }
    assert_eq!(unsealer.status().progress, 0);
    let mut fresh = Unsealer::new(bytes).expect("header");
    fresh.submit(others[0].clone()).expect("1");
    fresh.submit(others[1].clone()).expect("2");
    assert_eq!(
        fresh.submit(others[2].clone()).err(),
        Some(SealError::SharesDoNotOpen)
    );
    // The right shares still work afterwards.
    for share in &shares[..2] {
        fresh.submit(share.clone()).expect("right share");
    }
    unsealed(fresh.submit(shares[2].clone()).expect("third"));
}

#[test]
fn header_is_bound_and_checked() {
    let (root, _) = sealed::initialize(CONFIG, &mut OsEntropy).expect("init");
    let header = SealedHeader {
        config: CONFIG,
        generation: 7,
        wrapped_root: None,
    };
    let empty = Contents::default();
    let bytes = sealed::seal(
        contents(&empty.keyring),
        &root,
        header.clone(),
        &mut OsEntropy,
    )
    .expect("seal");
    assert_eq!(sealed::read_header(&bytes), Ok(header.clone()));
    assert!(sealed::open(&bytes, &root).is_ok());
    // Claiming another generation (byte 19) or threshold (byte 10) breaks the tag.
    for at in [19, 10, 11] {
        let mut changed = bytes.clone();
        changed[at] ^= 1;
        assert_eq!(
            sealed::open(&changed, &root).err(),
            Some(SealError::SharesDoNotOpen),
            "byte {at}"
        );
    }
    let mut changed = bytes.clone();
    changed[0] = b'X';
    assert_eq!(
        sealed::read_header(&changed),
        Err(SealError::Malformed("wrong magic"))
    );
    let mut changed = bytes.clone();
    changed[8] = 3;
    assert_eq!(
        sealed::read_header(&changed),
        Err(SealError::Unsupported {
            format: 3,
            cipher: 1
        })
    );
    assert_eq!(
        sealed::read_header(&bytes[..40]),
        Err(SealError::Malformed("too short"))
    );
    let wrong = RootKey::from_bytes([7; 32]);
    assert_eq!(
        sealed::open(&bytes, &wrong).err(),
        Some(SealError::SharesDoNotOpen)
    );
    // The sealed bytes hold no key in the clear: a keyring whose key is a
    // known pattern does not show it.
    let mut ring = Keyring::new();
    ring.create("k", KeyType::default(), 0, &mut Pattern)
        .expect("create");
    let bytes = sealed::seal(contents(&ring), &root, header.clone(), &mut OsEntropy).expect("seal");
    assert!(!bytes.windows(8).any(|w| w == [0x5a; 8]));
    assert!(
        !String::from_utf8_lossy(&bytes).contains("\"k\""),
        "key name in the clear"
    );
}

fn contents(keyring: &Keyring) -> ContentsRef<'_> {
    static NONE: std::sync::LazyLock<Contents> = std::sync::LazyLock::new(Contents::default);
    ContentsRef {
        keyring,
        policies: &NONE.policies,
        tokens: &NONE.tokens,
        audit_salt: None,
    }
}

struct Pattern;

impl aesd_keyring::Entropy for Pattern {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), aesd_keyring::KeyringError> {
        out.fill(0x5a);
        Ok(())
    }
}

#[test]
fn init_parameters_are_checked() {
    for (threshold, shares) in [(0, 1), (2, 1), (1, 2), (6, 5)] {
        assert!(matches!(
            sealed::initialize(SealConfig { threshold, shares }, &mut OsEntropy),
            Err(SealError::Shamir(_))
        ));
    }
    let (root, shares) = sealed::initialize(
        SealConfig {
            threshold: 1,
            shares: 1,
        },
        &mut OsEntropy,
    )
    .expect("1 of 1");
    let config = SealConfig {
        threshold: 1,
        shares: 1,
    };
    let bytes = UnsealedKeyring::initialized(root, config)
        .seal_next(&mut OsEntropy)
        .expect("seal")
        .1;
    let mut unsealer = Unsealer::new(bytes).expect("header");
    unsealed(unsealer.submit(shares[0].clone()).expect("one share"));
}

#[test]
fn policies_and_token_hashes_are_sealed_with_the_keys() {
    let (root, shares) = sealed::initialize(CONFIG, &mut OsEntropy).expect("init");
    let mut open = UnsealedKeyring::initialized(root, CONFIG);
    open.policies
        .put(
            "enc",
            r#"path "transit/encrypt/k" { capabilities = ["update"] }"#,
        )
        .expect("policy");
    let (token, entry) = open
        .tokens
        .create(None, vec!["enc".into()], 0, 5, "token", &mut OsEntropy)
        .expect("token");
    let (_, bytes) = open.seal_next(&mut OsEntropy).expect("seal");
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains(token.as_str()) && !text.contains("transit/encrypt"));
    let mut unsealer = Unsealer::new(bytes).expect("header");
    unsealer.submit(shares[0].clone()).expect("1");
    unsealer.submit(shares[1].clone()).expect("2");
    let back = unsealed(unsealer.submit(shares[2].clone()).expect("3"));
    assert_eq!(back.tokens.lookup(&token, 6), Ok(&entry));
    assert!(back.policies.get("enc").is_some());
    assert_eq!(back.policies, open.policies);
}

/// What a board of a fleet does with a generation another board stored:
/// an open keyring takes a newer one (opened with its own root key) and
/// ignores an older or equal one; another fleet's keyring is refused
/// and nothing changes; a sealed one keeps the shares given so far.
#[test]
fn a_newer_generation_from_another_writer_is_taken_an_older_or_foreign_one_is_not() {
    let (bytes, shares, _) = sealed_keyring();
    let unseal = |bytes: &[u8]| {
        let mut unsealer = Unsealer::new(bytes.to_vec()).expect("header");
        unsealer.submit(shares[0].clone()).expect("1");
        unsealer.submit(shares[1].clone()).expect("2");
        unsealed(unsealer.submit(shares[2].clone()).expect("3"))
    };
    let (mut here, mut there) = (unseal(&bytes), unseal(&bytes));
    there
        .keyring
        .create("new", KeyType::default(), 0, &mut OsEntropy)
        .expect("create");
    let (generation, newer) = there.seal_next(&mut OsEntropy).expect("seal");
    there.committed(generation);
    assert_eq!(generation, 2);
    assert!(!here.reload(&bytes).expect("same generation"), "not newer");
    assert!(here.keyring.read("new").is_err());
    assert!(here.reload(&newer).expect("newer"), "taken");
    assert_eq!(here.generation(), 2);
    assert!(here.keyring.read("new").is_ok(), "the other writer's key");
    assert!(
        !here.reload(&bytes).expect("older"),
        "an older one is ignored"
    );
    assert!(here.keyring.read("new").is_ok());

    // Another fleet's generation 3: its root key differs, it is refused.
    let (other_root, _) = sealed::initialize(CONFIG, &mut OsEntropy).expect("init");
    let mut foreign = UnsealedKeyring::initialized(other_root, CONFIG);
    foreign.committed(2);
    let (_, foreign) = foreign.seal_next(&mut OsEntropy).expect("seal");
    assert!(matches!(
        here.reload(&foreign),
        Err(SealError::SharesDoNotOpen)
    ));
    assert_eq!(here.generation(), 2, "unchanged");
    assert!(here.keyring.read("new").is_ok());

    // Sealed with one share given: the newer generation keeps it.
    let mut sealed_board = Unsealer::new(bytes.clone()).expect("header");
    sealed_board.submit(shares[3].clone()).expect("1");
    assert!(!sealed_board.replace_sealed(bytes.clone()).expect("same"));
    assert!(sealed_board.replace_sealed(newer).expect("newer"));
    assert_eq!(sealed_board.generation(), 2);
    assert_eq!(
        sealed_board.status().progress,
        1,
        "the share given still counts"
    );
    sealed_board.submit(shares[4].clone()).expect("2");
    let open = unsealed(sealed_board.submit(shares[0].clone()).expect("3"));
    assert!(open.keyring.read("new").is_ok(), "generation 2 opened");
}
