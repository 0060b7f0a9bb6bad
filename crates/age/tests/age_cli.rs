//! Interoperability with the `age` command (Debian's age 1.1.1, installed
//! by scripts/setup.sh), an implementation no one here wrote: it decrypts
//! what this crate writes, this crate decrypts what it writes, and each
//! refuses the other's tampered or truncated files. A missing `age` is a
//! failure, not a skip.

use std::path::Path;
use std::process::{Command, Output};

use aesd_age::{
    AgeError, FileKey, HeaderReader, Identity, PayloadDecryptor, PayloadEncryptor, Recipient,
    header, parse_identities,
};
use zeroize::Zeroizing;

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes
}

/// Test data of `len` bytes (a counter pattern, so a misplaced piece shows).
fn data(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9e37_79b9) >> 13) as u8)
        .collect()
}

/// Sizes around the chunk edges plus a few drawn at run time, so the test
/// does not only pass on sizes someone chose.
fn sizes() -> Vec<usize> {
    let mut sizes = vec![0, 1, 65535, 65536, 65537, 2 * 65536];
    let drawn: [u8; 8] = random();
    sizes.push(3 << 20 | usize::from(u16::from_le_bytes([drawn[0], drawn[1]])));
    sizes.push(usize::from(u16::from_le_bytes([drawn[2], drawn[3]])) * 7 + 1);
    sizes
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e} (scripts/setup.sh installs age)"))
}

/// `age-keygen -o FILE`: a new identity; returns its recipient line.
fn keygen(path: &Path) -> String {
    let out = run(Command::new("age-keygen").arg("-o").arg(path));
    assert!(out.status.success(), "age-keygen: {out:?}");
    let text = std::fs::read_to_string(path).expect("identity file");
    text.lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("public key comment")
        .to_owned()
}

/// This crate's whole encryption of `plain` to `recipients`, pushed in
/// pieces of `piece` bytes as a stream would arrive.
fn encrypt(plain: &[u8], recipients: &[Recipient], piece: usize) -> Vec<u8> {
    let file_key = FileKey::new(random());
    let with_secrets: Vec<_> = recipients
        .iter()
        .map(|r| (*r, Zeroizing::new(random::<32>())))
        .collect();
    let mut out = header::write(&file_key, &with_secrets).expect("header");
    let mut payload = PayloadEncryptor::new(&file_key, random());
    for part in plain.chunks(piece) {
        payload.push(part, &mut out).expect("push");
    }
    payload.finish(&mut out).expect("finish");
    out
}

/// This crate's whole decryption, fed in pieces of `piece` bytes.
fn decrypt(file: &[u8], identities: &[Identity], piece: usize) -> Result<Vec<u8>, AgeError> {
    let mut reader = HeaderReader::new();
    let mut pieces = file.chunks(piece);
    let (header, rest) = loop {
        let Some(part) = pieces.next() else {
            return Err(reader.finish());
        };
        if let Some((header, used)) = reader.push(part)? {
            break (header, &part[used..]);
        }
    };
    let file_key = header.unwrap_file_key(identities)?;
    let mut decryptor = PayloadDecryptor::new(file_key);
    let mut out = Vec::new();
    decryptor.push(rest, &mut out)?;
    for part in pieces {
        decryptor.push(part, &mut out)?;
    }
    decryptor.finish(&mut out)?;
    Ok(out)
}

#[test]
fn age_decrypts_what_this_crate_encrypts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("key.txt");
    let recipient = Recipient::parse(&keygen(&key)).expect("age-keygen's recipient");
    // A second recipient the age command does not hold: its stanza is skipped.
    let other = Identity::from_bytes(random()).recipient();
    for len in sizes() {
        let plain = data(len);
        let file = encrypt(&plain, &[other, recipient], 4096.min(len.max(1)));
        let path = dir.path().join("file.age");
        std::fs::write(&path, &file).expect("write");
        let out = run(Command::new("age").arg("-d").arg("-i").arg(&key).arg(&path));
        assert!(
            out.status.success(),
            "age -d, {len} bytes: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == plain, "age -d gave other bytes for {len}");
    }
}

#[test]
fn this_crate_decrypts_what_age_encrypts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("key.txt");
    let recipient = keygen(&key);
    let identities =
        parse_identities(&std::fs::read_to_string(&key).expect("key")).expect("identities");
    for len in sizes() {
        let plain = data(len);
        let input = dir.path().join("plain");
        std::fs::write(&input, &plain).expect("write");
        let out = run(Command::new("age").arg("-r").arg(&recipient).arg(&input));
        assert!(out.status.success(), "age -r: {out:?}");
        for piece in [1000, 65536 + 16, usize::MAX] {
            let got = decrypt(&out.stdout, &identities, piece.min(out.stdout.len()))
                .unwrap_or_else(|e| panic!("{len} bytes in pieces of {piece}: {e}"));
            assert!(got == plain, "{len} bytes: other plaintext");
        }
    }
}

#[test]
fn an_identity_this_crate_makes_works_with_age() {
    let dir = tempfile::tempdir().expect("temp dir");
    let identity = Identity::from_bytes(random());
    let key = dir.path().join("ours.txt");
    std::fs::write(&key, format!("{}\n", identity.to_secret_string().as_str())).expect("write");
    let plain = data(100_000);
    let input = dir.path().join("plain");
    std::fs::write(&input, &plain).expect("write");
    let recipient = identity.recipient().to_string();
    let out = run(Command::new("age").arg("-r").arg(&recipient).arg(&input));
    assert!(out.status.success(), "age -r {recipient}: {out:?}");
    assert_eq!(
        decrypt(&out.stdout, &[identity], 4096).as_deref(),
        Ok(&plain[..])
    );
    let converted = run(Command::new("age-keygen").arg("-y").arg(&key));
    assert_eq!(
        String::from_utf8_lossy(&converted.stdout).trim(),
        recipient,
        "age-keygen -y derives the same recipient"
    );
}

#[test]
fn tampered_and_truncated_files_fail_closed_on_both_sides() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("key.txt");
    let recipient = keygen(&key);
    let identities =
        parse_identities(&std::fs::read_to_string(&key).expect("key")).expect("identities");
    let plain = data(3 * 65536 + 10);
    let input = dir.path().join("plain");
    std::fs::write(&input, &plain).expect("write");
    let theirs = run(Command::new("age").arg("-r").arg(&recipient).arg(&input)).stdout;
    let header_len = HeaderReader::new()
        .push(&theirs)
        .expect("header")
        .expect("complete")
        .1;

    // age's file, changed or cut: this crate refuses with the reason.
    let mut flipped = theirs.clone();
    flipped[header_len + 16 + 65536 + 16 + 3] ^= 0x80;
    assert_eq!(
        decrypt(&flipped, &identities, 4096),
        Err(AgeError::ChunkAuthentication { chunk: 1 })
    );
    let cut_at_boundary = &theirs[..header_len + 16 + 2 * (65536 + 16)];
    assert_eq!(
        decrypt(cut_at_boundary, &identities, 4096),
        Err(AgeError::TruncatedPayload)
    );
    let mut header_changed = theirs.clone();
    let mac_at = header_len - 10;
    header_changed[mac_at] = if header_changed[mac_at] == b'A' {
        b'B'
    } else {
        b'A'
    };
    assert_eq!(
        decrypt(&header_changed, &identities, 4096),
        Err(AgeError::HeaderMac)
    );

    // This crate's file, changed or cut: age refuses it too.
    let recipient = Recipient::parse(&recipient).expect("recipient");
    let ours = encrypt(&plain, &[recipient], 65536);
    let path = dir.path().join("ours.age");
    for (what, file) in [
        (
            "cut at a chunk boundary",
            ours[..ours.len() - 10 - 16].to_vec(),
        ),
        ("last byte changed", {
            let mut f = ours.clone();
            *f.last_mut().expect("bytes") ^= 1;
            f
        }),
    ] {
        std::fs::write(&path, &file).expect("write");
        let out = run(Command::new("age").arg("-d").arg("-i").arg(&key).arg(&path));
        assert!(!out.status.success(), "age accepted ours, {what}");
        assert!(
            !String::from_utf8_lossy(&out.stderr).is_empty(),
            "age says why ({what})"
        );
    }
}

/// The block named `name` in PROTOCOL.md (```text NAME or ```hex NAME).
fn protocol_block(name: &str) -> String {
    let text = include_str!("../../proto/PROTOCOL.md");
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("```") else {
            continue;
        };
        if rest.split_whitespace().nth(1) == Some(name) {
            return lines
                .take_while(|line| !line.starts_with("```"))
                .map(|line| format!("{line}\n"))
                .collect();
        }
    }
    panic!("PROTOCOL.md has no block {name}");
}

fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// PROTOCOL.md's format-2 file vector: this crate makes exactly those bytes
/// from the stated inputs, and `age -d` with the spec's identity reads
/// `abc` from them.
#[test]
fn the_protocol_file_vector_is_reproduced_and_age_decrypts_it() {
    const SPEC_IDENTITY: &str =
        "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX";
    let mut vector = protocol_block("file-age-abc-header").into_bytes();
    vector.extend(unhex(&protocol_block("file-age-abc-payload")));

    let identity = Identity::parse(SPEC_IDENTITY).expect("identity");
    let file_key = FileKey::new(std::array::from_fn(|i| i as u8));
    let mut made = header::write(
        &file_key,
        &[(identity.recipient(), Zeroizing::new([0x42; 32]))],
    )
    .expect("header");
    let mut payload = PayloadEncryptor::new(&file_key, [0x01; 16]);
    payload.push(b"abc", &mut made).expect("push");
    payload.finish(&mut made).expect("finish");
    assert_eq!(made, vector, "PROTOCOL.md's vector");

    let dir = tempfile::tempdir().expect("temp dir");
    let (key, file) = (dir.path().join("spec.key"), dir.path().join("abc.age"));
    std::fs::write(&key, format!("{SPEC_IDENTITY}\n")).expect("write");
    std::fs::write(&file, &vector).expect("write");
    let out = run(Command::new("age").arg("-d").arg("-i").arg(&key).arg(&file));
    assert!(out.status.success(), "age -d: {out:?}");
    assert_eq!(out.stdout, b"abc");
}
