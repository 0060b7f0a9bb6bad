//! Key names, by OpenBao's rule (`framework.GenericNameRegex`): ASCII
//! letters, digits and `_`, with `-`, `.` and `@` allowed inside, so a name
//! starts and ends with a letter, digit or `_`. aesd adds a length limit,
//! [`MAX_NAME_LEN`] bytes, so a name always fits a protocol header.

use crate::KeyringError;

/// The longest key name accepted, in bytes (aesd's limit; OpenBao has
/// none).
pub const MAX_NAME_LEN: usize = 128;

fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Checks `name` against OpenBao's rule and [`MAX_NAME_LEN`].
pub fn validate(name: &str) -> Result<(), KeyringError> {
    let refuse = |reason| {
        Err(KeyringError::InvalidName {
            name: name.chars().take(80).collect(),
            reason,
        })
    };
    let bytes = name.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return refuse("empty");
    };
    if bytes.len() > MAX_NAME_LEN {
        return refuse("longer than 128 bytes");
    }
    if !is_word(first) || !is_word(last) {
        return refuse("must start and end with an ASCII letter, digit or _");
    }
    if !bytes
        .iter()
        .all(|&b| is_word(b) || matches!(b, b'-' | b'.' | b'@'))
    {
        return refuse("only ASCII letters, digits and _ - . @ are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openbao_names_accepted() {
        for name in [
            "k",
            "k1",
            "my-key",
            "a.b@c_d",
            "_",
            "x-y",
            &"a".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(validate(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn names_outside_the_rule_refused_with_the_reason() {
        let cases = [
            ("", "empty"),
            ("-k", "start and end"),
            ("k.", "start and end"),
            ("@", "start and end"),
            ("a/b", "only ASCII"),
            ("a b", "only ASCII"),
            ("kä", "start and end"),
            ("kä1", "only ASCII"),
            ("a\0b", "only ASCII"),
        ];
        for (name, reason) in cases {
            match validate(name) {
                Err(KeyringError::InvalidName { reason: got, .. }) => {
                    assert!(got.contains(reason), "{name:?}: {got}")
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert!(matches!(
            validate(&long),
            Err(KeyringError::InvalidName { reason, .. }) if reason.contains("longer")
        ));
    }
}
