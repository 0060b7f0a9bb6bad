//! `aescrypt --generate man|complete-bash|complete-zsh|complete-fish`:
//! made from the clap definitions, they name the binary and its flags,
//! and bash accepts the completion script.

use std::process::Command;

fn generated(kind: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_aescrypt"))
        .args(["--generate", kind])
        .output()
        .expect("run aescrypt");
    assert!(output.status.success(), "--generate {kind}");
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn man_page_and_completions_name_every_main_flag() {
    for (kind, marker) in [
        ("man", ".TH aescrypt 1"),
        ("complete-bash", "complete -F _aescrypt"),
        ("complete-zsh", "#compdef aescrypt"),
        ("complete-fish", "complete -c aescrypt"),
    ] {
        let text = generated(kind);
        assert!(text.contains(marker), "{kind}: no {marker:?}");
        for flag in ["server", "pass", "iter", "timeout"] {
            assert!(text.contains(flag), "{kind}: no --{flag}");
        }
    }
    let man = generated("man");
    assert!(man.contains("openssl"), "the man page has the long help");
}

#[test]
fn bash_loads_the_completion_script() {
    let script = format!(
        "source <('{}' --generate complete-bash) && complete -p aescrypt",
        env!("CARGO_BIN_EXE_aescrypt")
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("aescrypt"));
}
