//! The keyring at rest: serialised (JSON) and sealed with AES-256-GCM
//! under the 256-bit root key. The header, public and bound into the
//! associated data, carries the format version, the Shamir threshold and
//! share count (so a sealed server can report them), the generation (so
//! a file of one generation cannot pass for another) and how the root key
//! comes back at start: from Shamir shares, or (the transit seal) from
//! another server's Transit key, whose ciphertext of the root key the
//! header holds.
//!
//! ```text
//!  format 2 (written since aesd 0.x's auto-unseal; keys as base64)
//!  offset  len  field
//!       0    8  magic "AESDKRNG"
//!       8    1  format version (2)
//!       9    1  cipher (1 = AES-256-GCM)
//!      10    1  threshold k (of the recovery shares with the transit seal)
//!      11    1  shares n
//!      12    8  generation, big-endian (1, 2, ...)
//!      20    1  seal type (1 = shamir, 2 = transit)
//!      21    2  L, big-endian: bytes of the wrapped root key (0 with shamir)
//!      23    L  the root key as the Transit key encrypted it: vault:vN:base64
//!    23+L   12  nonce (random)
//!    35+L    -  AES-256-GCM(root key, nonce, aad = bytes 0..23+L, JSON) || tag
//!
//!  format 1 (read, never written): bytes 0..20 as above, then the nonce
//!  and the ciphertext with aad = bytes 0..20; shamir only; keys in the
//!  JSON as arrays of 32 numbers.
//! ```
//!
//! A format 1 keyring opens as before and its next generation is written
//! as format 2. The root key never leaves memory in the clear:
//! [`initialize`] makes it and splits it into shares,
//! [`crate::unseal::Unsealer`] combines them (or takes it back from the
//! transit seal). A random nonce per generation: far below 2^32 seals per
//! root key.

use serde::{Deserialize, Serialize};
use thiserror::Error;
use zeroize::Zeroizing;

use crate::aead::{self, KeyType, NONCE_LEN, TAG_LEN};
use crate::policy::PolicyStore;
use crate::shamir::{self, ShamirError, Share};
use crate::token::TokenStore;
use crate::{Entropy, Keyring, KeyringError, SecretKey};

/// The first 8 bytes of a sealed keyring.
pub const MAGIC: &[u8; 8] = b"AESDKRNG";
/// The format version this code writes (it reads this one and
/// [`FORMAT_V1`]).
pub const FORMAT_VERSION: u8 = 2;
/// The first format: no seal type, keys as arrays of numbers.
pub const FORMAT_V1: u8 = 1;
/// Cipher byte for AES-256-GCM.
pub const CIPHER_AES256_GCM: u8 = 1;
/// Bytes of format 1's header (the associated data).
pub const HEADER_V1_LEN: usize = 20;
/// Bytes of format 2's header before the wrapped root key.
pub const HEADER_LEN: usize = 23;
/// Seal type byte: the root key from Shamir shares.
pub const SEAL_SHAMIR: u8 = 1;
/// Seal type byte: the root key from another server's Transit key.
pub const SEAL_TRANSIT: u8 = 2;
/// The longest wrapped root key a header holds (a Transit ciphertext of
/// 32 bytes is about 70 characters).
pub const MAX_WRAPPED_ROOT_LEN: usize = 1024;
/// The largest sealed keyring written or read (the keyring's limits keep
/// the keys under 1.5 MB, the policies' and tokens' about 3 MB;
/// a larger file is refused before it is parsed).
pub const MAX_SEALED_LEN: usize = 8 << 20;

/// Why a sealed keyring could not be made or opened.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SealError {
    /// Not a sealed keyring: wrong magic, too short or too long.
    #[error("not a sealed keyring: {0}")]
    Malformed(&'static str),
    /// A format version or cipher this build does not read.
    #[error(
        "sealed keyring format {format} cipher {cipher} is not supported (this build reads formats 1 and 2, cipher 1)"
    )]
    Unsupported {
        /// The format byte.
        format: u8,
        /// The cipher byte.
        cipher: u8,
    },
    /// The root key (from the shares given) does not open the keyring: a
    /// wrong or corrupt share, shares of another keyring, or a changed
    /// file.
    #[error(
        "the shares do not open the keyring (a wrong or corrupt share, or shares of another keyring)"
    )]
    SharesDoNotOpen,
    /// The root key the transit seal gave back does not open the keyring
    /// (the Transit key of another keyring, or a changed file).
    #[error(
        "the root key the transit seal decrypted does not open the keyring (another keyring's Transit key, or a changed file)"
    )]
    RootDoesNotOpen,
    /// The contents would seal to more than [`MAX_SEALED_LEN`].
    #[error("the keyring's contents ({0} bytes of JSON) are above the 8 MiB limit")]
    TooLarge(usize),
    /// Opened, but the contents break the keyring's rules (written by
    /// another program or a bug).
    #[error("the keyring opened but its contents are invalid: {0}")]
    InvalidContents(String),
    /// Shamir parameters or shares refused.
    #[error(transparent)]
    Shamir(#[from] ShamirError),
    /// The random source failed.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
}

/// The threshold and share count of the root key's split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealConfig {
    /// k: shares needed to unseal.
    pub threshold: u8,
    /// n: shares made.
    pub shares: u8,
}

/// How the root key comes back at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealType {
    /// From k of n Shamir shares (`sys/unseal`).
    Shamir,
    /// Decrypted by another server's Transit key (auto-unseal); the
    /// shares are recovery shares.
    Transit,
}

impl SealType {
    /// The name `sys/seal-status` gives it (`type`).
    pub fn as_str(self) -> &'static str {
        match self {
            SealType::Shamir => "shamir",
            SealType::Transit => "transit",
        }
    }
}

/// The root key as another server's Transit key encrypted it: Transit's
/// text form `vault:vN:base64`. Public (only that key opens it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedRoot(String);

impl WrappedRoot {
    /// Checks `text`: 1 to [`MAX_WRAPPED_ROOT_LEN`] printable ASCII
    /// characters.
    pub fn new(text: String) -> Result<Self, SealError> {
        if text.is_empty()
            || text.len() > MAX_WRAPPED_ROOT_LEN
            || !text.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(SealError::Malformed(
                "the wrapped root key is not 1 to 1024 printable characters",
            ));
        }
        Ok(WrappedRoot(text))
    }

    /// The ciphertext text, for `transit/decrypt`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The public header of a sealed keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedHeader {
    /// The split's parameters.
    pub config: SealConfig,
    /// The keyring's generation.
    pub generation: u64,
    /// With the transit seal, the root key as its Transit key encrypted
    /// it; `None`: the Shamir seal.
    pub wrapped_root: Option<WrappedRoot>,
}

impl SealedHeader {
    /// How the root key comes back.
    pub fn seal_type(&self) -> SealType {
        match self.wrapped_root {
            None => SealType::Shamir,
            Some(_) => SealType::Transit,
        }
    }
}

/// The 256-bit root key. `Debug` prints no byte of it.
#[derive(Clone)]
pub struct RootKey(SecretKey);

impl core::fmt::Debug for RootKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RootKey(<redacted>)")
    }
}

impl RootKey {
    /// Wraps root key bytes (the auto-unseal path and tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        RootKey(SecretKey::from_bytes(bytes))
    }

    /// Takes root key bytes already in a wiping container (from
    /// [`shamir::combine`], or as the transit seal decrypted them).
    pub fn from_zeroizing(bytes: Zeroizing<[u8; 32]>) -> Self {
        RootKey(SecretKey::from_zeroizing(bytes))
    }

    /// Lends the key's bytes to `wrap` (the transit seal encrypting them
    /// with another server's key at `sys/init`); nothing else sees them.
    pub fn wrap_with<T, E>(&self, wrap: impl FnOnce(&[u8; 32]) -> Result<T, E>) -> Result<T, E> {
        wrap(self.0.expose())
    }
}

/// What is sealed: the keyring, the ACL policies and the tokens (as
/// hashes). Later additions are new optional fields. Unknown fields are
/// refused, so an older build never reads a newer keyring and drops what
/// it does not know when it writes the next generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contents {
    /// The keys.
    pub keyring: Keyring,
    /// ACL policies by name.
    #[serde(default)]
    pub policies: PolicyStore,
    /// Tokens by hash.
    #[serde(default)]
    pub tokens: TokenStore,
    /// The audit log's HMAC key (the salt of its `hmac-sha256:` values),
    /// made at `sys/init`; a keyring sealed before audit logging has none
    /// and gets one on its next write.
    #[serde(default)]
    pub audit_salt: Option<SecretKey>,
}

/// Makes a fresh root key and its shares (`sys/init`).
pub fn initialize(
    config: SealConfig,
    entropy: &mut dyn Entropy,
) -> Result<(RootKey, Vec<Share>), SealError> {
    let root = SecretKey::generate(entropy)?;
    let shares = shamir::split(root.expose(), config.threshold, config.shares, entropy)?;
    Ok((RootKey(root), shares))
}

/// Format 2's header: the associated data.
fn header_bytes(header: &SealedHeader) -> Vec<u8> {
    let wrapped = header
        .wrapped_root
        .as_ref()
        .map_or(&[][..], |w| w.0.as_bytes());
    let mut out = Vec::with_capacity(HEADER_LEN + wrapped.len());
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.push(CIPHER_AES256_GCM);
    out.push(header.config.threshold);
    out.push(header.config.shares);
    out.extend_from_slice(&header.generation.to_be_bytes());
    out.push(match header.seal_type() {
        SealType::Shamir => SEAL_SHAMIR,
        SealType::Transit => SEAL_TRANSIT,
    });
    // WrappedRoot::new keeps it under MAX_WRAPPED_ROOT_LEN, far below 2^16.
    out.extend_from_slice(
        &u16::try_from(wrapped.len())
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(wrapped);
    out
}

/// Reads the public header (no key needed).
pub fn read_header(sealed: &[u8]) -> Result<SealedHeader, SealError> {
    parse_header(sealed).map(|(header, _)| header)
}

/// The header and its length in bytes (the associated data).
fn parse_header(sealed: &[u8]) -> Result<(SealedHeader, usize), SealError> {
    if sealed.len() > MAX_SEALED_LEN {
        return Err(SealError::Malformed("longer than 8 MiB"));
    }
    if sealed.len() < HEADER_V1_LEN + NONCE_LEN + TAG_LEN {
        return Err(SealError::Malformed("too short"));
    }
    if &sealed[..8] != MAGIC {
        return Err(SealError::Malformed("wrong magic"));
    }
    let (format, cipher) = (sealed[8], sealed[9]);
    if !(format == FORMAT_V1 || format == FORMAT_VERSION) || cipher != CIPHER_AES256_GCM {
        return Err(SealError::Unsupported { format, cipher });
    }
    let mut generation = [0; 8];
    generation.copy_from_slice(&sealed[12..20]);
    let mut header = SealedHeader {
        config: SealConfig {
            threshold: sealed[10],
            shares: sealed[11],
        },
        generation: u64::from_be_bytes(generation),
        wrapped_root: None,
    };
    if format == FORMAT_V1 {
        return Ok((header, HEADER_V1_LEN));
    }
    let len = usize::from(u16::from_be_bytes([sealed[21], sealed[22]]));
    let end = HEADER_LEN + len;
    if sealed.len() < end + NONCE_LEN + TAG_LEN {
        return Err(SealError::Malformed("too short"));
    }
    match (sealed[20], len) {
        (SEAL_SHAMIR, 0) => {}
        (SEAL_TRANSIT, 1..) => {
            let text = String::from_utf8(sealed[HEADER_LEN..end].to_vec())
                .map_err(|_| SealError::Malformed("the wrapped root key is not text"))?;
            header.wrapped_root = Some(WrappedRoot::new(text)?);
        }
        (SEAL_SHAMIR | SEAL_TRANSIT, _) => {
            return Err(SealError::Malformed(
                "the wrapped root key's length does not fit the seal type",
            ));
        }
        _ => return Err(SealError::Malformed("unknown seal type")),
    }
    Ok((header, end))
}

/// [`Contents`] borrowed, for writing (the same fields).
#[derive(Serialize)]
pub struct ContentsRef<'a> {
    /// The keys.
    pub keyring: &'a Keyring,
    /// ACL policies by name.
    pub policies: &'a PolicyStore,
    /// Tokens by hash.
    pub tokens: &'a TokenStore,
    /// The audit log's HMAC key, if made yet (left out when not, so a
    /// keyring without one is written as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_salt: Option<&'a SecretKey>,
}

/// Seals `contents` as generation `header.generation`.
pub fn seal(
    contents: ContentsRef<'_>,
    root: &RootKey,
    header: SealedHeader,
    entropy: &mut dyn Entropy,
) -> Result<Vec<u8>, SealError> {
    let json = to_json(&contents)?;
    let mut nonce = [0; NONCE_LEN];
    entropy.fill(&mut nonce)?;
    let aad = header_bytes(&header);
    let body = aead::seal(KeyType::Aes256Gcm96, &root.0, &nonce, &aad, &json)?;
    if aad.len() + body.len() > MAX_SEALED_LEN {
        return Err(SealError::TooLarge(json.len()));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&aad);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Counts bytes written, keeping none.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The contents' JSON in a buffer allocated once at its exact length
/// (counted first), so the key material in it is never copied by a
/// reallocation and left unwiped.
fn to_json(contents: &ContentsRef<'_>) -> Result<Zeroizing<Vec<u8>>, SealError> {
    let invalid = |err: serde_json::Error| SealError::InvalidContents(err.to_string());
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, contents).map_err(invalid)?;
    if counter.0 > MAX_SEALED_LEN - HEADER_LEN - MAX_WRAPPED_ROOT_LEN - NONCE_LEN - TAG_LEN {
        return Err(SealError::TooLarge(counter.0));
    }
    let mut json = Zeroizing::new(Vec::with_capacity(counter.0));
    serde_json::to_writer(&mut *json, contents).map_err(invalid)?;
    Ok(json)
}

/// Opens a sealed keyring with `root`.
pub fn open(sealed: &[u8], root: &RootKey) -> Result<(SealedHeader, Contents), SealError> {
    let (header, header_len) = parse_header(sealed)?;
    let (aad, body) = sealed.split_at(header_len);
    let json = aead::open(KeyType::Aes256Gcm96, &root.0, aad, body)
        .map_err(|_| SealError::SharesDoNotOpen)?;
    let contents: Contents =
        serde_json::from_slice(&json).map_err(|err| SealError::InvalidContents(err.to_string()))?;
    contents
        .keyring
        .check()
        .map_err(SealError::InvalidContents)?;
    Ok((header, contents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAX_KEYS, MAX_TOTAL_VERSIONS, MAX_VERSIONS_PER_KEY, OsEntropy};

    /// A keyring at its limits, with the longest names: the JSON buffer is
    /// allocated once at its exact length (never reallocated, so never
    /// copied unwiped) and the sealed keyring fits [`MAX_SEALED_LEN`].
    #[test]
    fn a_full_keyring_fits_its_buffer_and_the_size_limit() {
        let mut ring = Keyring::new();
        let names: Vec<String> = (0..MAX_KEYS).map(|i| format!("{i:0>128}")).collect();
        for name in &names {
            ring.create(name, KeyType::ChaCha20Poly1305, u64::MAX, &mut OsEntropy)
                .expect("create");
        }
        let mut total = MAX_KEYS;
        'fill: for name in &names {
            for _ in 1..MAX_VERSIONS_PER_KEY {
                if total == MAX_TOTAL_VERSIONS {
                    break 'fill;
                }
                ring.rotate(name, u64::MAX, &mut OsEntropy).expect("rotate");
                total += 1;
            }
        }
        let none = Contents::default();
        let contents = ContentsRef {
            keyring: &ring,
            policies: &none.policies,
            tokens: &none.tokens,
            audit_salt: None,
        };
        let json = to_json(&contents).expect("json");
        assert_eq!(json.capacity(), json.len(), "reallocated");
        let root = RootKey::from_bytes([1; 32]);
        let header = SealedHeader {
            config: SealConfig {
                threshold: 2,
                shares: 3,
            },
            generation: 1,
            wrapped_root: None,
        };
        let sealed = seal(contents, &root, header, &mut OsEntropy).expect("seal");
        assert!(sealed.len() <= MAX_SEALED_LEN, "{} bytes", sealed.len());
        let (_, back) = open(&sealed, &root).expect("open");
        assert_eq!(back.keyring, ring);
        println!(
            "full keyring: {} keys, {total} versions, {} bytes sealed",
            MAX_KEYS,
            sealed.len()
        );
    }

    /// Fills with one byte value (known key material).
    struct Fixed(u8);

    impl Entropy for Fixed {
        fn fill(&mut self, out: &mut [u8]) -> Result<(), KeyringError> {
            out.fill(self.0);
            Ok(())
        }
    }

    /// A format 1 keyring (keys as arrays of numbers, 20-byte header)
    /// opens; its next generation is format 2 with keys as base64; both
    /// hold the same keys.
    #[test]
    fn a_format_1_keyring_opens_and_is_rewritten_as_format_2() {
        let mut ring = Keyring::new();
        ring.create("k", KeyType::Aes256Gcm96, 5, &mut Fixed(0x5a))
            .expect("create");
        let none = Contents::default();
        let new_json = String::from_utf8(
            to_json(&ContentsRef {
                keyring: &ring,
                policies: &none.policies,
                tokens: &none.tokens,
                audit_salt: None,
            })
            .expect("json")
            .to_vec(),
        )
        .expect("utf-8");
        let base64 = "\"WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo=\"";
        assert!(new_json.contains(base64), "{new_json}");
        let numbers = format!("[{}]", ["90"; 32].join(","));
        let old_json = new_json.replace(base64, &numbers);
        let root = RootKey::from_bytes([4; 32]);
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&[FORMAT_V1, CIPHER_AES256_GCM, 1, 1]);
        v1.extend_from_slice(&9u64.to_be_bytes());
        let body = aead::seal(
            KeyType::Aes256Gcm96,
            &root.0,
            &[7; NONCE_LEN],
            &v1,
            old_json.as_bytes(),
        )
        .expect("seal");
        v1.extend_from_slice(&body);

        let (header, contents) = open(&v1, &root).expect("format 1 opens");
        assert_eq!((header.generation, header.wrapped_root), (9, None));
        assert_eq!(contents.keyring, ring);
        let open_ring = crate::unseal::UnsealedKeyring::open_with(&v1, root.clone()).expect("open");
        let (generation, v2) = open_ring.seal_next(&mut OsEntropy).expect("seal");
        assert_eq!((generation, v2[8]), (10, FORMAT_VERSION));
        let (_, header_len) = parse_header(&v2).expect("header");
        assert_eq!(header_len, HEADER_LEN);
        let json = aead::open(
            KeyType::Aes256Gcm96,
            &root.0,
            &v2[..header_len],
            &v2[header_len..],
        )
        .expect("opens");
        let json = String::from_utf8(json.to_vec()).expect("utf-8");
        assert!(json.contains(base64) && !json.contains(&numbers), "{json}");
        assert_eq!(open(&v2, &root).expect("format 2 opens").1.keyring, ring);
    }

    /// The transit seal's wrapped root key is in the header, bound to the
    /// ciphertext; malformed lengths and seal types are refused.
    #[test]
    fn a_wrapped_root_key_is_kept_in_the_header_and_bound() {
        let root = RootKey::from_bytes([6; 32]);
        let none = Contents::default();
        let contents = || ContentsRef {
            keyring: &none.keyring,
            policies: &none.policies,
            tokens: &none.tokens,
            audit_salt: None,
        };
        let header = SealedHeader {
            config: SealConfig {
                threshold: 2,
                shares: 3,
            },
            generation: 3,
            wrapped_root: Some(WrappedRoot::new("vault:v1:AAAA".into()).expect("text")),
        };
        let bytes = seal(contents(), &root, header.clone(), &mut OsEntropy).expect("seal");
        assert_eq!(read_header(&bytes), Ok(header.clone()));
        assert_eq!(header.seal_type(), SealType::Transit);
        assert_eq!(&bytes[20..23], &[SEAL_TRANSIT, 0, 13]);
        let mut changed = bytes.clone();
        changed[30] ^= 1; // inside "vault:v1:AAAA"
        assert_eq!(
            open(&changed, &root).err(),
            Some(SealError::SharesDoNotOpen)
        );
        let mut changed = bytes.clone();
        changed[20] = SEAL_SHAMIR;
        assert!(matches!(
            read_header(&changed),
            Err(SealError::Malformed(_))
        ));
        changed[20] = 9;
        assert!(matches!(
            read_header(&changed),
            Err(SealError::Malformed(_))
        ));
        let mut changed = bytes.clone();
        changed[22] = 255;
        assert!(matches!(
            read_header(&changed),
            Err(SealError::Malformed(_))
        ));
        assert!(WrappedRoot::new(String::new()).is_err());
        assert!(WrappedRoot::new("a b".into()).is_err());
        assert!(WrappedRoot::new("a".repeat(MAX_WRAPPED_ROOT_LEN + 1)).is_err());
    }
}
