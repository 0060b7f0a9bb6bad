//! `aesd --tls-self-signed DIR`: a key and a self-signed certificate for
//! the board's names, and the pin clients use (`--tls-pin sha256:...`).
//!
//! The key is ECDSA P-256 (cheap to sign with on a 100 MHz core), written
//! as PKCS#8 PEM with mode 600; the certificate is X.509 v3, CA:FALSE,
//! for TLS servers, naming `localhost`, the host name (and `NAME.local`),
//! 127.0.0.1, ::1 and the machine's own addresses (read from
//! `/proc/net/fib_trie` and `/proc/net/if_inet6`), valid for 20 years from
//! yesterday (from 2026-01-01 when the clock is unset, as on a board
//! without a real-time clock). Existing files are never overwritten. The
//! DER is written here, by hand, so that the board's binary needs no
//! certificate library: only ring, which TLS already brings.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use sha2::{Digest, Sha256};

/// Why the key and certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsInitError {
    /// A file could not be written (it exists already, or the folder is
    /// not writable).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The key could not be generated or used.
    #[error("cannot make the key: {0}")]
    Key(&'static str),
}

/// What [`make`] wrote.
#[derive(Debug, Clone)]
pub struct MadeIdentity {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// The private key (PKCS#8 PEM, mode 600).
    pub key: PathBuf,
    /// The names the certificate carries.
    pub names: Vec<String>,
    /// `sha256:` and the certificate's SHA-256, for `--tls-pin`.
    pub pin: String,
}

/// Makes `DIR/aesd-key.pem` and `DIR/aesd-cert.pem` for `names` and
/// `addresses` (DIR is created if needed).
pub fn make(
    dir: &Path,
    names: &[String],
    addresses: &[IpAddr],
    now_secs: u64,
) -> Result<MadeIdentity, TlsInitError> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|_| TlsInitError::Key("ECDSA P-256 key generation failed"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| TlsInitError::Key("the new key does not load"))?;
    let mut serial = [0u8; 16];
    rng.fill(&mut serial)
        .map_err(|_| TlsInitError::Key("no random serial number"))?;
    serial[0] = (serial[0] & 0x7f) | 0x40; // positive, 16 bytes
    let common_name = names.first().map_or("aesd", String::as_str);
    let not_before = now_secs.max(CLOCK_FLOOR) - 86_400;
    let not_after = not_before + 20 * 365 * 86_400;
    let tbs = tbs_certificate(
        &serial,
        common_name,
        (not_before, not_after),
        pair.public_key().as_ref(),
        names,
        addresses,
    );
    let signature = pair
        .sign(&rng, &tbs)
        .map_err(|_| TlsInitError::Key("signing the certificate failed"))?;
    let mut bit_string = vec![0u8];
    bit_string.extend_from_slice(signature.as_ref());
    let cert = sequence(&[tbs, ecdsa_with_sha256(), tlv(BIT_STRING, &bit_string)]);

    let key_path = dir.join("aesd-key.pem");
    let cert_path = dir.join("aesd-cert.pem");
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| TlsInitError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    write_new(&key_path, 0o600, &pem("PRIVATE KEY", pkcs8.as_ref()))
        .map_err(write_error(&key_path))?;
    write_new(&cert_path, 0o644, &pem("CERTIFICATE", &cert)).map_err(write_error(&cert_path))?;
    let mut all_names = names.to_vec();
    all_names.extend(addresses.iter().map(ToString::to_string));
    Ok(MadeIdentity {
        cert: cert_path,
        key: key_path,
        names: all_names,
        pin: pin_of(&cert),
    })
}

/// [`make`] with the certificate valid from now (the system clock).
pub fn make_now(
    dir: &Path,
    names: &[String],
    addresses: &[IpAddr],
) -> Result<MadeIdentity, TlsInitError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    make(dir, names, addresses, now)
}

/// [`make_now`] for a server on loopback, as tests and the attack
/// drills run it: `localhost` and 127.0.0.1.
pub fn make_for_loopback(dir: &Path) -> Result<MadeIdentity, TlsInitError> {
    make_now(
        dir,
        &["localhost".to_owned()],
        &[IpAddr::from([127, 0, 0, 1])],
    )
}

/// 2026-01-01: a clock before this is unset, not the real date.
const CLOCK_FLOOR: u64 = 1_767_225_600;

/// The pin of a certificate's DER: `sha256:` and its hex SHA-256.
pub fn pin_of(der: &[u8]) -> String {
    let mut pin = String::from("sha256:");
    for byte in Sha256::digest(der) {
        let _ = write!(pin, "{byte:02x}");
    }
    pin
}

/// The names of this machine: `localhost`, its host name and `NAME.local`.
pub fn local_names() -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" && host.bytes().all(is_name_byte) {
            names.push(host.to_owned());
            if !host.contains('.') {
                names.push(format!("{host}.local"));
            }
        }
    }
    names.push("localhost".to_owned());
    names
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.'
}

/// This machine's addresses: loopback, the IPv4 addresses the kernel
/// routes to itself (`/proc/net/fib_trie`, "/32 host LOCAL") and the IPv6
/// ones of its interfaces (`/proc/net/if_inet6`), link-local left out.
pub fn local_addresses() -> Vec<IpAddr> {
    let mut addresses: Vec<IpAddr> = vec![
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    if let Ok(trie) = std::fs::read_to_string("/proc/net/fib_trie") {
        let mut last: Option<IpAddr> = None;
        for line in trie.lines() {
            let line = line.trim_start_matches([' ', '|', '-', '+']);
            if let Ok(addr) = line.trim().parse::<std::net::Ipv4Addr>() {
                last = Some(IpAddr::V4(addr));
            } else if line.trim() == "/32 host LOCAL"
                && let Some(addr) = last
                && !addresses.contains(&addr)
            {
                addresses.push(addr);
            }
        }
    }
    if let Ok(table) = std::fs::read_to_string("/proc/net/if_inet6") {
        for line in table.lines() {
            let Some(hex) = line.split_whitespace().next() else {
                continue;
            };
            let Ok(bits) = u128::from_str_radix(hex, 16) else {
                continue;
            };
            let addr = std::net::Ipv6Addr::from(bits);
            let link_local = addr.segments()[0] & 0xffc0 == 0xfe80;
            if !link_local && !addresses.contains(&IpAddr::V6(addr)) {
                addresses.push(IpAddr::V6(addr));
            }
        }
    }
    addresses
}

/// Creates `path` (never over an existing file or through a link) with
/// `mode` and writes `text`.
fn write_new(path: &Path, mode: u32, text: &str) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// The to-be-signed part of the certificate.
fn tbs_certificate(
    serial: &[u8],
    common_name: &str,
    (not_before, not_after): (u64, u64),
    public_key: &[u8],
    names: &[String],
    addresses: &[IpAddr],
) -> Vec<u8> {
    // Name: CN only; issuer and subject are the same.
    let name = sequence(&[tlv(
        SET,
        &sequence(&[
            tlv(OID, &[0x55, 0x04, 0x03]),
            tlv(UTF8_STRING, common_name.as_bytes()),
        ]),
    )]);
    let validity = sequence(&[time(not_before), time(not_after)]);
    // id-ecPublicKey, prime256v1.
    let spki = sequence(&[
        sequence(&[
            tlv(OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]),
            tlv(OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]),
        ]),
        tlv(BIT_STRING, &[&[0u8][..], public_key].concat()),
    ]);
    let mut alt_names = Vec::new();
    for name in names {
        alt_names.extend(tlv(0x82, name.as_bytes())); // [2] dNSName
    }
    for address in addresses {
        let bytes = match address {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        alt_names.extend(tlv(0x87, &bytes)); // [7] iPAddress
    }
    let extensions = sequence(&[
        // subjectAltName
        sequence(&[
            tlv(OID, &[0x55, 0x1d, 0x11]),
            tlv(OCTET_STRING, &tlv(SEQUENCE, &alt_names)),
        ]),
        // basicConstraints, critical: CA:FALSE
        sequence(&[
            tlv(OID, &[0x55, 0x1d, 0x13]),
            tlv(0x01, &[0xff]),
            tlv(OCTET_STRING, &sequence(&[])),
        ]),
        // extendedKeyUsage: serverAuth
        sequence(&[
            tlv(OID, &[0x55, 0x1d, 0x25]),
            tlv(
                OCTET_STRING,
                &sequence(&[tlv(OID, &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01])]),
            ),
        ]),
    ]);
    sequence(&[
        tlv(0xa0, &tlv(INTEGER, &[2])), // version 3
        tlv(INTEGER, serial),
        ecdsa_with_sha256(),
        name.clone(),
        validity,
        name,
        spki,
        tlv(0xa3, &extensions),
    ])
}

/// AlgorithmIdentifier ecdsa-with-SHA256 (no parameters).
fn ecdsa_with_sha256() -> Vec<u8> {
    sequence(&[tlv(OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02])])
}

fn sequence(items: &[Vec<u8>]) -> Vec<u8> {
    tlv(SEQUENCE, &items.concat())
}

/// One DER element.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|byte| **byte == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// UTCTime before 2050, GeneralizedTime from then on (RFC 5280 4.1.2.5).
fn time(secs: u64) -> Vec<u8> {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let clock = format!(
        "{month:02}{day:02}{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    );
    if year < 2050 {
        tlv(UTC_TIME, format!("{:02}{clock}", year % 100).as_bytes())
    } else {
        tlv(GENERALIZED_TIME, format!("{year:04}{clock}").as_bytes())
    }
}

/// The proleptic Gregorian date `days` after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// PEM with 64-character lines.
fn pem(label: &str, der: &[u8]) -> String {
    let encoded = base64(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for index in 0..4 {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * index) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_encoding_and_pem_are_the_standard_ones() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(time(1_795_616_100), tlv(UTC_TIME, b"261125141500Z"));
        assert_eq!(
            time(2_556_144_000),
            tlv(GENERALIZED_TIME, b"20510101000000Z")
        );
        assert_eq!(tlv(OCTET_STRING, &[7; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(base64(b"aesd!"), "YWVzZCE=");
        assert_eq!(base64(b"ae"), "YWU=");
        assert!(pem("X", b"aesd").starts_with("-----BEGIN X-----\nYWVzZA==\n"));
    }
}
