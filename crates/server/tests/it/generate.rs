//! `aesd --generate man|complete-bash|complete-zsh|complete-fish`: from
//! the same clap definitions as `--help`, and alone on the command line.

use std::process::Command;

#[test]
fn aesd_generates_its_man_page_and_completions() {
    for (kind, marker) in [
        ("man", ".TH aesd 1"),
        ("complete-bash", "complete -F _aesd"),
        ("complete-zsh", "#compdef aesd"),
        ("complete-fish", "complete -c aesd"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_aesd"))
            .args(["--generate", kind])
            .output()
            .expect("run aesd");
        assert!(output.status.success(), "--generate {kind}");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains(marker), "{kind}: no {marker:?}");
        for word in ["listen", "workers", "token"] {
            assert!(text.contains(word), "{kind}: no {word}");
        }
    }
    let output = Command::new(env!("CARGO_BIN_EXE_aesd"))
        .args(["--generate", "man", "--workers", "2"])
        .output()
        .expect("run aesd");
    assert_eq!(output.status.code(), Some(2), "--generate goes alone");
}
