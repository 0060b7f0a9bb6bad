//! The shipped HAProxy configuration (deploy/haproxy/haproxy.cfg): Debian's
//! `haproxy -c` accepts it, and its health check speaks the protocol of
//! PROTOCOL.md: it sends the hello vector and its expectation matches the
//! welcome vectors (and not an error frame).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn config() -> String {
    std::fs::read_to_string(repo_file("deploy/haproxy/haproxy.cfg")).expect("haproxy.cfg")
}

/// The hex of the `hex NAME` block of PROTOCOL.md, without whitespace.
fn vector(name: &str) -> String {
    let text = std::fs::read_to_string(repo_file("crates/proto/PROTOCOL.md")).expect("PROTOCOL.md");
    let start = text
        .find(&format!("```hex {name}\n"))
        .unwrap_or_else(|| panic!("vector {name}"));
    let body = &text[start..];
    let body = &body[body.find('\n').expect("newline") + 1..];
    let end = body.find("```").expect("end of block");
    body[..end].split_whitespace().collect()
}

/// The argument of the first line that starts with `directive`.
fn directive<'a>(config: &'a str, directive: &str) -> &'a str {
    config
        .lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(directive))
        .unwrap_or_else(|| panic!("no `{directive}` in haproxy.cfg"))
        .trim()
}

/// HAProxy's `rbinary`: a regular expression over the answer in upper- or
/// lower-case hex. This test only needs `^`, literal hex and `.`.
fn rbinary_matches(pattern: &str, answer_hex: &str) -> bool {
    let pattern = pattern.strip_prefix('^').expect("anchored pattern");
    pattern.len() <= answer_hex.len()
        && pattern
            .chars()
            .zip(answer_hex.chars())
            .all(|(want, got)| want == '.' || want.eq_ignore_ascii_case(&got))
}

#[test]
fn haproxy_accepts_the_shipped_config() {
    let output = Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(repo_file("deploy/haproxy/haproxy.cfg"))
        .output()
        .expect("Debian's haproxy is installed (bash scripts/setup.sh)");
    assert!(
        output.status.success(),
        "haproxy -c: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_health_check_speaks_the_protocol() {
    let config = config();
    for needed in [
        "mode tcp",
        "balance leastconn",
        "send-proxy-v2",
        "check-send-proxy",
    ] {
        assert!(config.contains(needed), "haproxy.cfg lacks `{needed}`");
    }
    assert_eq!(
        directive(&config, "tcp-check send-binary"),
        vector("frame-hello-password-only")
    );
    let expect = directive(&config, "tcp-check expect rbinary");
    for welcome in [
        "frame-welcome",
        "frame-welcome-derived",
        "frame-welcome-token",
    ] {
        assert!(
            rbinary_matches(expect, &vector(welcome)),
            "{expect} does not match {welcome}"
        );
    }
    for error in ["frame-error", "frame-error-unauthorized"] {
        assert!(
            !rbinary_matches(expect, &vector(error)),
            "{expect} matches {error}"
        );
    }
}
