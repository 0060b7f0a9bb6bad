//! ASCII armor (`age -a`): an age file as the strict PEM of RFC 7468
//! (section 3), label `AGE ENCRYPTED FILE`, which the age spec asks for:
//!
//! ```text
//! -----BEGIN AGE ENCRYPTED FILE-----
//! YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB...   64 columns a line
//! ...                                             the last line 1 to 64
//! -----END AGE ENCRYPTED FILE-----
//! ```
//!
//! The base64 is standard and padded with `=` (unlike the header's), and
//! canonical. Decoding is strict, as the spec recommends (a lax parser
//! makes armored files malleable): whitespace is allowed before the BEGIN
//! line and after the END line only; every base64 line but the last has
//! exactly 64 columns; only the last may be shorter or padded; lines end
//! with LF, or all with CRLF. Each rule broken is an
//! [`AgeError::BadArmor`] naming the line and the rule.
//!
//! Both directions work incrementally with bounded memory (one line), so
//! a stream is armored or unarmored as it passes.

use alloc::vec::Vec;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::AgeError;

/// The first line of an armored age file.
pub const ARMOR_BEGIN: &[u8] = b"-----BEGIN AGE ENCRYPTED FILE-----";
/// The last line of an armored age file.
pub const ARMOR_END: &[u8] = b"-----END AGE ENCRYPTED FILE-----";

/// Base64 characters on each line but the last.
const COLUMNS: usize = 64;
/// Bytes a full line encodes.
const LINE_BYTES: usize = COLUMNS / 4 * 3;

/// Whether `byte` is whitespace that may surround the armor.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// Armors a stream: the BEGIN line with the first bytes, a line per
/// 48 bytes, the last line and the END line at [`ArmorEncoder::finish`].
#[derive(Debug, Default)]
pub struct ArmorEncoder {
    /// Bytes not yet making a full line (fewer than 48).
    pending: Vec<u8>,
    /// Whether the BEGIN line is out.
    begun: bool,
}

impl ArmorEncoder {
    /// An encoder with nothing written.
    pub fn new() -> Self {
        ArmorEncoder::default()
    }

    /// Appends to `out` the armor of `data` as far as full lines go.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        self.begin(out);
        if !self.pending.is_empty() {
            let take = (LINE_BYTES - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() < LINE_BYTES {
                return;
            }
            encode_line(&self.pending, out);
            self.pending.clear();
        }
        let mut lines = data.chunks_exact(LINE_BYTES);
        for line in &mut lines {
            encode_line(line, out);
        }
        self.pending.extend_from_slice(lines.remainder());
    }

    /// Appends the last (short, padded) line, if any, and the END line.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.begin(out);
        if !self.pending.is_empty() {
            encode_line(&self.pending, out);
        }
        out.extend_from_slice(ARMOR_END);
        out.push(b'\n');
    }

    fn begin(&mut self, out: &mut Vec<u8>) {
        if !self.begun {
            out.extend_from_slice(ARMOR_BEGIN);
            out.push(b'\n');
            self.begun = true;
        }
    }
}

/// One line of base64 (padded) and its line feed.
fn encode_line(bytes: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    let written = STANDARD
        .encode_slice(bytes, &mut out[start..])
        .expect("room for the line");
    out.truncate(start + written);
    out.push(b'\n');
}

/// Where a decoder is in the armor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Whitespace before the BEGIN line.
    Leading,
    /// The BEGIN line.
    Begin,
    /// Full base64 lines (or the END line).
    Body,
    /// After the last (short or padded) line: only the END line may come.
    Last,
    /// After the END line: whitespace only.
    Trailing,
}

/// Unarmors a stream: push armored bytes in, take the binary age file
/// out; [`ArmorDecoder::finish`] at the end of the input.
#[derive(Debug)]
pub struct ArmorDecoder {
    part: Part,
    /// The line being read (at most 64 columns and a CR).
    line: Vec<u8>,
    /// Its number, from 1.
    line_number: u32,
    /// Whether lines end with CRLF (told by the BEGIN line).
    crlf: Option<bool>,
}

impl Default for ArmorDecoder {
    fn default() -> Self {
        ArmorDecoder::new()
    }
}

impl ArmorDecoder {
    /// A decoder at the start of its input.
    pub fn new() -> Self {
        ArmorDecoder {
            part: Part::Leading,
            line: Vec::with_capacity(COLUMNS + 2),
            line_number: 1,
            crlf: None,
        }
    }

    fn bad(&self, what: &'static str) -> AgeError {
        AgeError::BadArmor {
            line: self.line_number,
            what,
        }
    }

    /// Takes `input` in and appends what it decodes to to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        for &byte in input {
            match self.part {
                Part::Leading if is_space(byte) => {
                    if byte == b'\n' {
                        self.line_number += 1;
                    }
                    continue;
                }
                Part::Leading => self.part = Part::Begin,
                Part::Trailing if is_space(byte) => {
                    if byte == b'\n' {
                        self.line_number += 1;
                    }
                    continue;
                }
                Part::Trailing => return Err(self.bad("data after the END line")),
                _ => {}
            }
            if byte != b'\n' {
                let longest = match self.part {
                    Part::Begin => ARMOR_BEGIN.len(),
                    _ => COLUMNS.max(ARMOR_END.len()),
                } + 1;
                if self.line.len() == longest {
                    return Err(self.too_long());
                }
                self.line.push(byte);
                continue;
            }
            let mut line = core::mem::take(&mut self.line);
            let crlf = line.last() == Some(&b'\r');
            if crlf {
                line.pop();
            }
            if *self.crlf.get_or_insert(crlf) != crlf {
                return Err(self.bad("mixed line endings (LF and CRLF)"));
            }
            let result = self.line_done(&line, out);
            line.clear();
            self.line = line;
            result?;
            self.line_number += 1;
        }
        Ok(())
    }

    fn too_long(&self) -> AgeError {
        match self.part {
            Part::Begin => self.bad("the first line is not -----BEGIN AGE ENCRYPTED FILE-----"),
            _ => self.bad("a line longer than 64 columns"),
        }
    }

    /// A whole line (without its line ending).
    fn line_done(&mut self, line: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        match self.part {
            Part::Begin if line == ARMOR_BEGIN => {
                self.part = Part::Body;
                Ok(())
            }
            Part::Begin => {
                Err(self.bad("the first line is not -----BEGIN AGE ENCRYPTED FILE-----"))
            }
            Part::Body | Part::Last if line == ARMOR_END => {
                self.part = Part::Trailing;
                Ok(())
            }
            Part::Last => Err(self.bad(
                "a line after the last (short or padded) base64 line: only the last may be \
                 shorter than 64 columns",
            )),
            Part::Body => self.base64_line(line, out),
            Part::Leading | Part::Trailing => unreachable!("not reading a line there"),
        }
    }

    fn base64_line(&mut self, line: &[u8], out: &mut Vec<u8>) -> Result<(), AgeError> {
        if line.is_empty() {
            return Err(self.bad("an empty line inside the armor"));
        }
        if line.len() > COLUMNS {
            return Err(self.bad("a line longer than 64 columns"));
        }
        let alphabet = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
        if !line.iter().all(alphabet) {
            return Err(self.bad("a character that is not base64 (whitespace inside the armor?)"));
        }
        if line.len() < COLUMNS || line.contains(&b'=') {
            self.part = Part::Last;
        }
        if line.len() % 4 != 0 {
            return Err(self.bad("base64 not padded to a multiple of 4 characters"));
        }
        let start = out.len();
        out.resize(start + line.len() / 4 * 3, 0);
        let decoded = STANDARD
            .decode_slice(line, &mut out[start..])
            .ok()
            // Canonical: what it decodes to encodes back to the line
            // (no stray `=`, no non-zero trailing bits).
            .filter(|&n| {
                let mut again = [0u8; COLUMNS];
                STANDARD
                    .encode_slice(&out[start..start + n], &mut again)
                    .is_ok_and(|len| &again[..len] == line)
            });
        match decoded {
            Some(n) => {
                out.truncate(start + n);
                Ok(())
            }
            None => {
                out.truncate(start);
                Err(self.bad("base64 that is not canonical (stray padding or trailing bits)"))
            }
        }
    }

    /// The input ended: an error unless the END line came (its line
    /// ending may be missing).
    pub fn finish(mut self) -> Result<(), AgeError> {
        match self.part {
            Part::Trailing => Ok(()),
            Part::Body | Part::Last if self.line.as_slice() == ARMOR_END => Ok(()),
            Part::Leading => Err(self.bad("no armor: the input is empty or whitespace")),
            Part::Begin => {
                Err(self.bad("the first line is not -----BEGIN AGE ENCRYPTED FILE-----"))
            }
            Part::Body | Part::Last => {
                self.line.clear();
                Err(self.bad("cut short: no -----END AGE ENCRYPTED FILE----- line"))
            }
        }
    }
}

/// Whether `prefix`, the first bytes of an input, starts an armored file
/// rather than a binary one: true for whitespace or a dash (the armor, or
/// something [`ArmorDecoder`] will name the fault of); a binary age file
/// starts with `age-encryption.org/`.
pub fn looks_armored(prefix: &[u8]) -> bool {
    prefix.first().is_some_and(|&b| is_space(b) || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn armor(data: &[u8]) -> Vec<u8> {
        let mut encoder = ArmorEncoder::new();
        let mut out = Vec::new();
        encoder.push(data, &mut out);
        encoder.finish(&mut out);
        out
    }

    fn unarmor(text: &[u8]) -> Result<Vec<u8>, AgeError> {
        let mut decoder = ArmorDecoder::new();
        let mut out = Vec::new();
        decoder.push(text, &mut out)?;
        decoder.finish()?;
        Ok(out)
    }

    fn what(result: Result<Vec<u8>, AgeError>) -> (u32, &'static str) {
        match result {
            Err(AgeError::BadArmor { line, what }) => (line, what),
            other => panic!("expected a BadArmor error, got {other:?}"),
        }
    }

    #[test]
    fn armor_round_trips_at_every_length_around_a_line() {
        for len in [0, 1, 2, 3, 47, 48, 49, 95, 96, 97, 1000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let text = armor(&data);
            let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            assert_eq!(lines[0], ARMOR_BEGIN);
            assert_eq!(lines[lines.len() - 2], ARMOR_END, "len {len}");
            assert_eq!(lines[lines.len() - 1], b"", "ends with a line feed");
            let body = &lines[1..lines.len() - 2];
            for line in &body[..body.len().saturating_sub(1)] {
                assert_eq!(line.len(), COLUMNS, "len {len}");
            }
            assert_eq!(unarmor(&text), Ok(data.clone()), "len {len}");
            // Fed a byte at a time, in and out.
            let mut encoder = ArmorEncoder::new();
            let mut again = Vec::new();
            for byte in &data {
                encoder.push(&[*byte], &mut again);
            }
            encoder.finish(&mut again);
            assert_eq!(again, text);
            let mut decoder = ArmorDecoder::new();
            let mut out = Vec::new();
            for byte in &text {
                decoder.push(&[*byte], &mut out).expect("valid");
            }
            decoder.finish().expect("complete");
            assert_eq!(out, data);
        }
    }

    #[test]
    fn whitespace_around_crlf_and_a_missing_final_line_feed_are_accepted() {
        let data = vec![9u8; 100];
        let text = armor(&data);
        let mut padded = b" \n\t\r\n".to_vec();
        padded.extend_from_slice(&text);
        padded.extend_from_slice(b"\n  \r\n");
        assert_eq!(unarmor(&padded), Ok(data.clone()));
        let crlf: Vec<u8> = text
            .iter()
            .flat_map(|&b| {
                if b == b'\n' {
                    vec![b'\r', b'\n']
                } else {
                    vec![b]
                }
            })
            .collect();
        assert_eq!(unarmor(&crlf), Ok(data.clone()));
        assert_eq!(unarmor(&text[..text.len() - 1]), Ok(data));
    }

    #[test]
    fn each_malformed_armor_names_its_fault_and_line() {
        let data = vec![5u8; 100];
        let good = String::from_utf8(armor(&data)).expect("ascii");
        let lines: Vec<&str> = good.lines().collect();
        // lines: BEGIN, 64, 64 (48+48 = 96 bytes), "BQUFBQ==" (4 bytes), END
        assert_eq!(lines.len(), 5);
        let join = |lines: &[&str]| {
            let mut text = lines.join("\n");
            text.push('\n');
            text.into_bytes()
        };
        let cases: Vec<(Vec<u8>, u32, &str)> = vec![
            (
                join(&["-----BEGIN AGE ENCRYPTED FILE----", lines[1]]),
                1,
                "the first line is not",
            ),
            (
                join(&["-----BEGIN PGP MESSAGE-----", lines[1]]),
                1,
                "the first line is not",
            ),
            (
                join(&[lines[0], &lines[1][..62], lines[2], lines[3], lines[4]]),
                2,
                "base64 not padded",
            ),
            (
                join(&[lines[0], &lines[1][..8], lines[2], lines[3], lines[4]]),
                3,
                "a line after the last",
            ),
            (
                join(&[lines[0], &[lines[1], "AAAA"].concat(), lines[4]]),
                2,
                "longer than 64 columns",
            ),
            (
                join(&[lines[0], lines[1], "", lines[2], lines[3], lines[4]]),
                3,
                "an empty line",
            ),
            (
                join(&[lines[0], &lines[1].replacen('B', " ", 1), lines[4]]),
                2,
                "not base64",
            ),
            (
                join(&[lines[0], lines[1], lines[2], "BQUFBR==", lines[4]]),
                4,
                "not canonical",
            ),
            (
                join(&[lines[0], lines[1], lines[2], "BQ=FBQ==", lines[4]]),
                4,
                "not canonical",
            ),
            (
                join(&[lines[0], lines[1], lines[2], lines[3]]),
                5,
                "cut short",
            ),
            (
                join(&[lines[0], lines[1], lines[2], lines[3], lines[4], "", "x"]),
                7,
                "data after the END line",
            ),
            (
                join(&["junk", lines[0], lines[1]]),
                1,
                "the first line is not",
            ),
            (b"  \n\n".to_vec(), 3, "no armor"),
        ];
        for (text, line, needle) in cases {
            let (got_line, got) = what(unarmor(&text));
            assert!(
                got.contains(needle),
                "{:?}: said {got:?}, wanted {needle:?}",
                String::from_utf8_lossy(&text)
            );
            assert_eq!(got_line, line, "{got}");
        }
        let mixed = good.replacen('\n', "\r\n", 2).into_bytes();
        let (line, got) = what(unarmor(&mixed));
        assert_eq!((line, got), (3, "mixed line endings (LF and CRLF)"));
        // A valid armor still decodes: the cases above fail for their one
        // fault.
        assert_eq!(unarmor(&join(&lines)), Ok(data));
    }

    #[test]
    fn the_first_byte_tells_armor_from_binary() {
        assert!(looks_armored(ARMOR_BEGIN));
        assert!(looks_armored(b"\n-----BEGIN"));
        assert!(!looks_armored(b"age-encryption.org/v1\n"));
        assert!(!looks_armored(b""));
    }
}
