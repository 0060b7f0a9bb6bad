//! Text from the server made safe to print on a terminal.
//!
//! A server's error message and name are chosen by the server. Printed as
//! they are, control characters in them (ESC, carriage return, ...) could
//! move the cursor, rewrite earlier lines or change the terminal's state.

/// `text` with every control character escaped as Rust does (`\n`,
/// `\u{1b}`); everything else, including non-ASCII letters, kept as is.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientError;
    use aesd_proto::{ErrorCode, ErrorFrame};

    #[test]
    fn control_characters_are_escaped_and_unicode_kept() {
        assert_eq!(
            escape_controls("a\u{1b}[2Jb\r\n\u{7}\u{9b}é ü ✓"),
            "a\\u{1b}[2Jb\\r\\n\\u{7}\\u{9b}é ü ✓"
        );
        assert_eq!(escape_controls("plain text"), "plain text");
    }

    #[test]
    fn a_server_error_prints_without_escape_sequences() {
        let err = ClientError::Server(ErrorFrame {
            code: ErrorCode::Internal,
            message: "oops\u{1b}]0;pwned\u{7}\rdone".into(),
        });
        let printed = err.to_string();
        assert!(!printed.chars().any(char::is_control), "{printed:?}");
        assert!(printed.contains("oops\\u{1b}]0;pwned"), "{printed}");
    }
}
