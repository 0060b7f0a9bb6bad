//! An error as the one line a person reads: the message and its causes
//! joined by `: `, each said once. Many errors put their cause in their
//! own message as well as in their `source()` (a `thiserror` field named
//! `source` is both), which `anyhow`'s `{:#}` would print twice ("No such
//! file or directory (os error 2): No such file or directory (os error
//! 2)"); here a cause already in the line is left out.

use std::error::Error;

/// `error` and its causes on one line, every message once.
pub fn error_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read password file /x: {source}")]
    struct SaysItsSource {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connecting")]
    struct Wraps {
        #[source]
        inner: std::io::Error,
    }

    #[test]
    fn a_cause_is_said_once() {
        let err = SaysItsSource {
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let anyhow_line = format!("{:#}", anyhow::Error::new(err));
        let err = SaysItsSource {
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let line = error_line(&err);
        assert_eq!(line, "cannot read password file /x: entity not found");
        assert_ne!(line, anyhow_line, "anyhow repeats it");
    }

    #[test]
    fn a_cause_not_in_the_message_is_appended() {
        let err = anyhow::Error::new(Wraps {
            inner: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        })
        .context("aescrypt");
        assert_eq!(
            error_line(err.as_ref()),
            "aescrypt: connecting: connection refused"
        );
    }
}
