//! The age header: version line, recipient stanzas, MAC. Written in one
//! piece; read incrementally ([`HeaderReader`]), bounded by
//! [`MAX_HEADER_LEN`], so a stream can be fed to it as it arrives.

use alloc::string::String;
use alloc::vec::Vec;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::kdf::hkdf_sha256;
use crate::{AgeError, FileKey, Identity, Recipient, VERSION_LINE, base64, x25519};

/// The longest header read: 64 KiB holds hundreds of X25519 stanzas
/// (about 110 bytes each). Past it, [`AgeError::HeaderTooLong`].
pub const MAX_HEADER_LEN: usize = 64 * 1024;

/// Base64 characters per full body line.
const BODY_COLUMNS: usize = 64;

/// One recipient stanza: its arguments (the first names its type) and its
/// decoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stanza {
    /// Space-separated arguments after `->`.
    pub args: Vec<String>,
    /// The body, decoded from base64.
    pub body: Vec<u8>,
}

/// The first line of an ASCII-armored age file (`age -a`).
pub const ARMOR_BEGIN: &[u8] = b"-----BEGIN AGE ENCRYPTED FILE-----";

/// A parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The recipient stanzas, in order.
    pub stanzas: Vec<Stanza>,
    /// The header bytes the MAC covers: up to and including `---`.
    mac_input: Vec<u8>,
    /// The MAC from the last line.
    mac: [u8; 32],
}

/// HMAC-SHA-256 keyed with HKDF(file key, "", "header").
fn header_mac(file_key: &FileKey) -> Hmac<Sha256> {
    let key = hkdf_sha256(file_key.as_bytes(), b"", b"header");
    <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_slice()).expect("HMAC takes any key length")
}

/// Writes a whole header wrapping `file_key` to each recipient, each with
/// its own fresh ephemeral secret (from a CSPRNG).
pub fn write(
    file_key: &FileKey,
    recipients: &[(Recipient, Zeroizing<[u8; 32]>)],
) -> Result<Vec<u8>, AgeError> {
    if recipients.is_empty() {
        return Err(AgeError::BadRecipient {
            what: "no recipient given",
        });
    }
    let stanzas = recipients
        .iter()
        .map(|(recipient, ephemeral)| x25519::wrap(file_key, recipient, ephemeral))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(write_stanzas(file_key, &stanzas))
}

/// Writes a whole header holding `stanzas` (each already wrapping
/// `file_key`, of any type) and its MAC under `file_key`.
pub fn write_stanzas(file_key: &FileKey, stanzas: &[Stanza]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + stanzas.len() * 120 + 48);
    out.extend_from_slice(VERSION_LINE);
    out.push(b'\n');
    for stanza in stanzas {
        write_stanza(stanza, &mut out);
    }
    out.extend_from_slice(b"---");
    let mac = header_mac(file_key)
        .chain_update(&out)
        .finalize()
        .into_bytes();
    out.push(b' ');
    out.extend_from_slice(base64::encode(&mac).as_bytes());
    out.push(b'\n');
    out
}

fn write_stanza(stanza: &Stanza, out: &mut Vec<u8>) {
    out.extend_from_slice(b"->");
    for arg in &stanza.args {
        out.push(b' ');
        out.extend_from_slice(arg.as_bytes());
    }
    out.push(b'\n');
    let body = base64::encode(&stanza.body);
    let mut lines = body.as_bytes().chunks(BODY_COLUMNS).peekable();
    let mut last_len = 0;
    while let Some(line) = lines.next() {
        out.extend_from_slice(line);
        out.push(b'\n');
        last_len = line.len();
        if lines.peek().is_none() {
            break;
        }
    }
    // The body ends with a line shorter than 64 columns, empty if need be.
    if body.is_empty() || last_len == BODY_COLUMNS {
        out.push(b'\n');
    }
}

impl Header {
    /// The file key from the first stanza one of `identities` unwraps,
    /// with the header's MAC checked against it. A malformed X25519 stanza
    /// is an error (the spec says to reject it), other stanza types are
    /// skipped.
    pub fn unwrap_file_key(&self, identities: &[Identity]) -> Result<FileKey, AgeError> {
        for identity in identities {
            for stanza in &self.stanzas {
                if let Some(file_key) = x25519::unwrap(stanza, identity)? {
                    self.verify_mac(&file_key)?;
                    return Ok(file_key);
                }
            }
        }
        // A passphrase file has a single scrypt stanza (the spec allows no
        // other beside it): said as such rather than as a key mismatch.
        if self
            .stanzas
            .iter()
            .any(|stanza| stanza.args.first().is_some_and(|kind| kind == "scrypt"))
        {
            return Err(AgeError::Passphrase);
        }
        Err(AgeError::NoMatchingIdentity)
    }

    /// Checks the header's MAC with `file_key` (in constant time).
    pub fn verify_mac(&self, file_key: &FileKey) -> Result<(), AgeError> {
        header_mac(file_key)
            .chain_update(&self.mac_input)
            .verify_slice(&self.mac)
            .map_err(|_| AgeError::HeaderMac)
    }

    /// The header's length in bytes, MAC line included.
    pub fn len(&self) -> usize {
        // "---" is in mac_input; " " + 43 base64 characters + "\n" follow.
        self.mac_input.len() + 1 + 43 + 1
    }

    /// Never true: a header has at least its version and MAC lines.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Reads a header from a stream, piece by piece.
#[derive(Debug, Default)]
pub struct HeaderReader {
    buf: Vec<u8>,
    /// Where the next unexamined line starts in `buf`.
    line_start: usize,
}

impl HeaderReader {
    /// A reader with nothing read yet.
    pub fn new() -> Self {
        HeaderReader::default()
    }

    /// Takes `input` in. When the header is complete: the header and how
    /// many bytes of `input` it used (the rest is payload). A wrong first
    /// line fails as soon as it can be told ([`AgeError::NotAge`]).
    pub fn push(&mut self, input: &[u8]) -> Result<Option<(Header, usize)>, AgeError> {
        let before = self.buf.len();
        let room = MAX_HEADER_LEN - before;
        let take = input.len().min(room);
        self.buf.extend_from_slice(&input[..take]);
        let version_len = VERSION_LINE.len() + 1;
        let seen = self.buf.len().min(version_len);
        let mut expected = VERSION_LINE.to_vec();
        expected.push(b'\n');
        if self.buf[..seen] != expected[..seen] {
            // An armored file: said as such once its first line shows it.
            let armor_seen = self.buf.len().min(ARMOR_BEGIN.len());
            if self.buf[..armor_seen] == ARMOR_BEGIN[..armor_seen] {
                return match armor_seen == ARMOR_BEGIN.len() {
                    true => Err(AgeError::Armored),
                    false => Ok(None),
                };
            }
            return Err(AgeError::NotAge);
        }
        while let Some(end) = self.buf[self.line_start..].iter().position(|&b| b == b'\n') {
            let line_end = self.line_start + end;
            if self.buf[self.line_start..line_end].starts_with(b"---") {
                let header = parse(&self.buf[..=line_end])?;
                let used = line_end + 1 - before;
                return Ok(Some((header, used)));
            }
            self.line_start = line_end + 1;
        }
        if self.buf.len() == MAX_HEADER_LEN {
            return Err(AgeError::HeaderTooLong);
        }
        Ok(None)
    }

    /// The input ended: an unfinished header is [`AgeError::TruncatedHeader`]
    /// (or [`AgeError::NotAge`] when not even the version line came).
    pub fn finish(&self) -> AgeError {
        if self.buf.len() < VERSION_LINE.len() + 1 {
            AgeError::NotAge
        } else {
            AgeError::TruncatedHeader
        }
    }
}

/// Parses a complete header (its last line is the MAC line).
fn parse(bytes: &[u8]) -> Result<Header, AgeError> {
    let bad = |what| AgeError::BadHeader { what };
    let text = bytes.strip_suffix(b"\n").ok_or(bad("no final line feed"))?;
    let mut lines = text.split(|&b| b == b'\n').peekable();
    if lines.next() != Some(VERSION_LINE) {
        return Err(AgeError::NotAge);
    }
    let mut stanzas = Vec::new();
    loop {
        let line = lines.next().ok_or(bad("no MAC line"))?;
        if let Some(mac) = line.strip_prefix(b"--- ") {
            if lines.next().is_some() {
                return Err(bad("lines after the MAC line"));
            }
            if stanzas.is_empty() {
                return Err(bad("no recipient stanza"));
            }
            let mac = base64::decode(mac)
                .and_then(|m| <[u8; 32]>::try_from(m.as_slice()).ok())
                .ok_or(bad("the MAC is not canonical base64 of 32 bytes"))?;
            let mac_input = bytes[..bytes.len() - 1 - (line.len() - 3)].to_vec();
            return Ok(Header {
                stanzas,
                mac_input,
                mac,
            });
        }
        let args = line
            .strip_prefix(b"-> ")
            .ok_or(bad("a line that is neither a stanza nor the MAC"))?;
        let args = args
            .split(|&b| b == b' ')
            .map(|arg| {
                let printable = !arg.is_empty() && arg.iter().all(|b| (0x21..=0x7e).contains(b));
                printable
                    .then(|| String::from_utf8_lossy(arg).into_owned())
                    .ok_or(bad("an empty or unprintable stanza argument"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut body_text = Vec::new();
        loop {
            let body_line = lines.next().ok_or(bad("a stanza body without its end"))?;
            if body_line.len() > BODY_COLUMNS {
                return Err(bad("a stanza body line over 64 columns"));
            }
            body_text.extend_from_slice(body_line);
            if body_line.len() < BODY_COLUMNS {
                break;
            }
        }
        let body = base64::decode(&body_text).ok_or(bad("a stanza body that is not base64"))?;
        stanzas.push(Stanza { args, body });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn sample() -> (Vec<u8>, FileKey, Identity) {
        let identity = Identity::from_bytes([1; 32]);
        let file_key = FileKey::new([2; 16]);
        let header = write(
            &file_key,
            &[
                (identity.recipient(), Zeroizing::new([3; 32])),
                (
                    Identity::from_bytes([4; 32]).recipient(),
                    Zeroizing::new([5; 32]),
                ),
            ],
        )
        .expect("header");
        (header, file_key, identity)
    }

    /// The header of a file `age -p` (1.1.1) wrote: one scrypt stanza.
    const PASSPHRASE_HEADER: &[u8] = b"age-encryption.org/v1
-> scrypt gZOMcTadK10tSUXmGe1yrg 18
pKVW7tH81goUNZ9+M4EO8rkC4fLlUPKrTaUN7y/16yU
--- oxbC6FS768fXRodmfaH0V9faWxpeddp6jiAlexrqJzI
";

    /// Armored and passphrase files each get an error that says what they
    /// are (they were `not an age v1 file` and `no identity matches`).
    #[test]
    fn armored_and_passphrase_files_are_named() {
        let mut reader = HeaderReader::new();
        let armored = b"-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n";
        let mut said = None;
        for byte in armored {
            match reader.push(&[*byte]) {
                Ok(None) => {}
                Ok(Some(_)) => panic!("not a header"),
                Err(err) => {
                    said = Some(err);
                    break;
                }
            }
        }
        assert_eq!(said, Some(AgeError::Armored));
        assert!(AgeError::Armored.to_string().contains("age -a"));
        // A dash that is no armor is still not age.
        assert_eq!(
            HeaderReader::new().push(b"-----BEGIN PGP MESSAGE-----\n"),
            Err(AgeError::NotAge)
        );
        let (header, _) = HeaderReader::new()
            .push(PASSPHRASE_HEADER)
            .expect("a valid header")
            .expect("complete");
        assert_eq!(
            header.unwrap_file_key(&[Identity::from_bytes([1; 32])]),
            Err(AgeError::Passphrase)
        );
        assert!(AgeError::Passphrase.to_string().contains("age -p"));
    }

    #[test]
    fn a_written_header_reads_back_byte_by_byte_and_unwraps() {
        let (bytes, file_key, identity) = sample();
        let mut reader = HeaderReader::new();
        let mut with_payload = bytes.clone();
        with_payload.extend_from_slice(b"PAYLOAD");
        let mut found = None;
        for (i, byte) in with_payload.iter().enumerate() {
            if let Some((header, used)) = reader.push(&[*byte]).expect("valid") {
                found = Some((header, i + used));
                break;
            }
        }
        let (header, end) = found.expect("complete");
        assert_eq!(end, bytes.len());
        assert_eq!(header.len(), bytes.len());
        assert_eq!(header.stanzas.len(), 2);
        assert_eq!(header.unwrap_file_key(&[identity]), Ok(file_key));
        assert_eq!(
            header.unwrap_file_key(&[Identity::from_bytes([9; 32])]),
            Err(AgeError::NoMatchingIdentity)
        );
    }

    #[test]
    fn a_changed_header_fails_its_mac() {
        let (bytes, file_key, identity) = sample();
        // Swap the two stanzas: each still unwraps, the MAC no longer fits.
        let text = core::str::from_utf8(&bytes).expect("text");
        let lines: Vec<&str> = text.lines().collect();
        let swapped = alloc::format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n",
            lines[0],
            lines[3],
            lines[4],
            lines[1],
            lines[2],
            lines[5]
        );
        let (header, _) = HeaderReader::new()
            .push(swapped.as_bytes())
            .expect("well formed")
            .expect("complete");
        assert_eq!(header.verify_mac(&file_key), Err(AgeError::HeaderMac));
        assert_eq!(
            header.unwrap_file_key(&[identity]),
            Err(AgeError::HeaderMac)
        );
    }

    #[test]
    fn malformed_headers_say_what_is_wrong() {
        let cases: [(&[u8], AgeError); 4] = [
            (b"Salted__12345678", AgeError::NotAge),
            (
                b"age-encryption.org/v1\n--- AAAA\n",
                AgeError::BadHeader {
                    what: "no recipient stanza",
                },
            ),
            (
                b"age-encryption.org/v1\n-> X25519  x\n\n--- A\n",
                AgeError::BadHeader {
                    what: "an empty or unprintable stanza argument",
                },
            ),
            (
                b"age-encryption.org/v1\nhello\n--- A\n",
                AgeError::BadHeader {
                    what: "a line that is neither a stanza nor the MAC",
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(HeaderReader::new().push(input), Err(expected));
        }
        let mut long = b"age-encryption.org/v1\n-> X25519 ".to_vec();
        long.resize(MAX_HEADER_LEN + 1, b'A');
        assert_eq!(
            HeaderReader::new().push(&long),
            Err(AgeError::HeaderTooLong)
        );
        let mut cut = HeaderReader::new();
        assert_eq!(cut.push(b"age-encryption.org/v1\n-> X"), Ok(None));
        assert_eq!(cut.finish(), AgeError::TruncatedHeader);
    }

    #[test]
    fn stanza_bodies_end_with_a_short_line() {
        for len in [0, 47, 48, 49, 96] {
            let stanza = Stanza {
                args: alloc::vec!["t".into()],
                body: alloc::vec![7; len],
            };
            let mut out = Vec::new();
            write_stanza(&stanza, &mut out);
            let last = out[..out.len() - 1]
                .rsplit(|&b| b == b'\n')
                .next()
                .expect("a line");
            assert!(last.len() < BODY_COLUMNS, "len {len}");
        }
    }
}
