//! Every `hex frame-…` vector in PROTOCOL.md matches the encoder, and
//! decodes back to the same message.

use aesd_proto::frame::HEADER_LEN;
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{
    AgeFileKey, AuthToken, Begin, DerivedKeyParams, Done, ErrorCode, ErrorFrame, Format,
    FrameHeader, Hello, KeySource, Message, Operation, Password, Queued, Started, Welcome,
};

/// The `hex NAME` blocks of PROTOCOL.md, decoded.
fn vectors() -> Vec<(String, Vec<u8>)> {
    let text = include_str!("../PROTOCOL.md");
    let mut vectors = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```hex ") else {
            continue;
        };
        let hex: String = lines
            .by_ref()
            .take_while(|line| !line.starts_with("```"))
            .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
            .collect();
        vectors.push((
            name.trim().to_owned(),
            hex::decode(&hex).expect("valid hex"),
        ));
    }
    vectors
}

fn hex_array<const N: usize>(text: &str) -> [u8; N] {
    hex::decode(text).expect("hex").try_into().expect("length")
}

fn expected(name: &str) -> Option<Message> {
    Some(match name {
        "frame-welcome" => Message::Welcome(Welcome {
            version: 1,
            max_data: 65536,
            server: "aesd 0.1.0".into(),
            token_required: false,
            derived_keys: false,
        }),
        "frame-welcome-derived" => Message::Welcome(Welcome {
            version: 1,
            max_data: 65536,
            server: "aesd 0.1.0".into(),
            token_required: false,
            derived_keys: true,
        }),
        "frame-welcome-token" => Message::Welcome(Welcome {
            version: 1,
            max_data: 16384,
            server: "aesd".into(),
            token_required: true,
            derived_keys: false,
        }),
        "frame-auth" => Message::Auth(AuthToken::new(b"0123456789abcdef".to_vec())),
        "frame-authorized" => Message::Authorized,
        "frame-error-unauthorized" => {
            Message::Error(ErrorFrame::new(ErrorCode::Unauthorized, "bad token"))
        }
        "frame-begin" => Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Password {
                iterations: 10_000,
                password: Password::new(b"hunter2".to_vec()),
            },
        }),
        "frame-begin-derived" => Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::OpensslSaltedPbkdf2,
            key: KeySource::Derived(DerivedKeyParams {
                salt: [0, 1, 2, 3, 4, 5, 6, 7],
                key: hex_array("6827bd488a4c5d38d28131175369843dc41c73284eff746252231b58fe384b1e")
                    .into(),
                iv: hex_array("77532013c6cb46fda992eda58456ddee").into(),
            }),
        }),
        "frame-begin-age-encrypt" => Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::Age,
            key: KeySource::AgeRecipients(vec![hex_array(
                "132c442be010fbd57e72603328aa76e71fccc1503aae219327d14d9c9993f472",
            )]),
        }),
        "frame-begin-age-decrypt" => Message::Begin(Begin {
            operation: Operation::Decrypt,
            format: Format::Age,
            key: KeySource::AgeFileKey(AgeFileKey(
                hex_array("000102030405060708090a0b0c0d0e0f").into(),
            )),
        }),
        "frame-begin-by-name" => Message::Begin(Begin {
            operation: Operation::Encrypt,
            format: Format::Age,
            key: KeySource::KeyName("files".into()),
        }),
        "frame-begin-rewrap" => Message::Begin(Begin {
            operation: Operation::Rewrap,
            format: Format::Age,
            key: KeySource::KeyName("files".into()),
        }),
        "frame-begin-datakey" => Message::Begin(Begin {
            operation: Operation::DataKey,
            format: Format::Age,
            key: KeySource::KeyName("files".into()),
        }),
        "frame-begin-unwrap" => Message::Begin(Begin {
            operation: Operation::Unwrap,
            format: Format::Age,
            key: KeySource::KeyName("files".into()),
        }),
        "frame-begin-datakey-wrapped" => Message::Begin(Begin {
            operation: Operation::DataKeyWrapped,
            format: Format::Age,
            key: KeySource::KeyName("files".into()),
        }),
        "frame-key-token" => Message::KeyToken(aesd_proto::Secret::new(b"root".to_vec())),
        "frame-data" => Message::Data(b"abc".to_vec()),
        "frame-end" => Message::End,
        "frame-queued" => Message::Queued(Queued { position: 3 }),
        "frame-started" => Message::Started(Started { queue_us: 1500 }),
        "frame-done" => Message::Done(Done {
            bytes_in: 3,
            bytes_out: 32,
            queue_us: 1500,
            processing_us: 2500,
        }),
        "frame-error" => Message::Error(ErrorFrame::new(ErrorCode::Busy, "queue full")),
        _ => return None,
    })
}

#[test]
fn every_frame_vector_matches_the_codec() {
    let vectors = vectors();
    let frames: Vec<_> = vectors
        .iter()
        .filter(|(name, _)| name.starts_with("frame-"))
        .collect();
    assert_eq!(frames.len(), 24, "PROTOCOL.md lost a frame vector");
    for (name, bytes) in frames {
        if name == "frame-hello" {
            assert_eq!(&Hello::current().encode()[..], &bytes[..], "{name}");
            continue;
        }
        if name == "frame-hello-password-only" {
            assert_eq!(&Hello::password_only().encode()[..], &bytes[..], "{name}");
            continue;
        }
        let message = expected(name).unwrap_or_else(|| panic!("no expectation for {name}"));
        assert_eq!(
            message.to_bytes().expect("encodes"),
            *bytes,
            "{name}: encoding"
        );
        let header = FrameHeader::decode(
            bytes[..HEADER_LEN].try_into().expect("header"),
            MAX_FRAME_PAYLOAD,
        )
        .expect("header decodes");
        assert_eq!(
            Message::decode(header.kind, &bytes[HEADER_LEN..]).expect("decodes"),
            message,
            "{name}: decoding"
        );
    }
}

/// PROTOCOL.md's error table: every row's code, name and "closes the
/// connection" cell agree with `ErrorCode`, and every code is in the table.
#[test]
fn the_error_table_matches_the_codes_and_their_closing_rule() {
    let text = include_str!("../PROTOCOL.md");
    let table = text
        .split("## Error codes")
        .nth(1)
        .expect("PROTOCOL.md has an error code section");
    let mut rows = 0;
    for line in table.lines().skip_while(|line| !line.starts_with("| code")) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(wire) = cells[1].parse::<u16>() else {
            continue; // header and separator rows
        };
        let code = ErrorCode::from_wire(wire);
        assert!(
            !matches!(code, ErrorCode::Other(_)),
            "row {wire}: unknown code"
        );
        assert_eq!(cells[2], format!("`{}`", code.name()), "row {wire}: name");
        let closes = match cells[3].split([' ', ',', '(']).next() {
            Some("yes") => true,
            Some("no") => false,
            other => panic!("row {wire}: closes cell starts with {other:?}, not yes or no"),
        };
        assert_eq!(
            code.closes_connection(),
            closes,
            "row {wire} ({})",
            code.name()
        );
        rows += 1;
    }
    let known = (0..=u16::MAX)
        .filter(|&wire| !matches!(ErrorCode::from_wire(wire), ErrorCode::Other(_)))
        .count();
    assert_eq!(rows, known, "every code has exactly one row");
    assert!(
        ErrorCode::Other(4242).closes_connection(),
        "unknown codes close"
    );
}
