//! `aesload --key NAME`: by-name runs, every result decrypted by name
//! through the server and compared; and the clear refusals of a run whose
//! key, token or keyring the server does not accept.

use std::process::{Command, Output};

use aesd_testkit::{AesdProcess, TempDir, aesd_binary};

fn aesload(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(args)
        .env_remove("AESD_TOKEN_FILE")
        .output()
        .expect("run aesload")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every study suite by name on the embedded server's dev keyring (tiny
/// files: the plumbing, not the speed), every transfer verified, the
/// JSON saying so; then the same with the root token from --token-file.
#[test]
fn every_suite_runs_by_name_on_the_embedded_keyring_and_verifies() {
    let dir = TempDir::new("aesload-by-name");
    let json = dir.join("run.json");
    let json_arg = json.display().to_string();
    let output = aesload(&[
        "--key",
        "payroll",
        "--suite",
        "all",
        "--scale",
        "0.0001",
        "--rate",
        "100",
        "--duration",
        "0.2s",
        "--quiet",
        "--json",
        &json_arg,
    ]);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let verified = stdout
        .lines()
        .find(|line| line.starts_with("Transfers Verified"))
        .expect("the verified row");
    let cells: Vec<&str> = verified["Transfers Verified".len()..]
        .split_whitespace()
        .collect();
    assert_eq!(
        cells.join(" "),
        "1 / 1 10 / 10 20 / 20 100 / 100 1000 / 1000 20 / 20"
    );
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(document["parameters"]["format"], "by-name");
    assert_eq!(document["summary"]["failed"], 0);

    // The embedded keyring's root token is the file's when one is given.
    let token = dir.secret_file("token", "a-chosen-root-token");
    let output = aesload(&[
        "--key",
        "payroll",
        "--token-file",
        &token.display().to_string(),
        "--clients",
        "3",
        "--sizes",
        "1K,300K",
        "--quiet",
    ]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(stdout.contains("3 / 3"), "{stdout}");
}

/// One slot on the server and batches of many by-name transfers: no
/// decryption may take the slot while its encryption waits in the queue
/// behind it (it would wait for data that cannot come until the server's
/// 60 s idle timeout), so every transfer verifies.
#[test]
fn by_name_transfers_verify_with_a_single_server_slot() {
    let output = aesload(&[
        "--key",
        "payroll",
        "--suite",
        "basic3,thousand",
        "--scale",
        "0.0001",
        "--max-active",
        "1",
        "--quiet",
    ]);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|line| line.starts_with("Transfers Verified")
                && line
                    .split_whitespace()
                    .skip(2)
                    .collect::<Vec<_>>()
                    .join(" ")
                    == "20 / 20 1000 / 1000"),
        "{stdout}"
    );
}

/// Against a real `aesd --dev` (root token `root`, no key created): a
/// wrong token is refused with bad_key_token, the right one then fails
/// on the missing key (unknown_key): each says why, exits 2, and runs
/// no transfer.
#[test]
fn a_wrong_token_or_a_missing_key_stops_the_run_with_a_typed_refusal() {
    let aesd = AesdProcess::start(
        &aesd_binary(),
        &[
            "--dev",
            "--dev-root-token-id",
            "root",
            "--http-listen",
            "127.0.0.1:0",
        ],
    );
    let dir = TempDir::new("aesload-by-name-refused");
    let server = aesd.addr.to_string();
    let run = |token: &str| {
        let file = dir.secret_file(token, token);
        aesload(&[
            "--server",
            &server,
            "--key",
            "payroll",
            "--token-file",
            &file.display().to_string(),
            "--clients",
            "2",
            "--size",
            "1K",
            "--quiet",
        ])
    };
    let wrong = run("not-the-root-token");
    let stderr = text(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad_key_token")
            && stderr.contains("the keyring token in --token-file was refused"),
        "{stderr}"
    );
    assert!(
        !text(&wrong.stdout).contains("Transfers Verified"),
        "no run after a refusal"
    );
    // The control: the right token passes the token check and the run
    // stops on the key instead.
    let right = run("root");
    let stderr = text(&right.stderr);
    assert_eq!(right.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown_key") && stderr.contains("bao write -f transit/keys/payroll"),
        "{stderr}"
    );
    assert!(!stderr.contains("bad_key_token"), "{stderr}");

    // Without a token file, --key against a server is a usage error.
    let none = aesload(&["--server", &server, "--key", "payroll", "--size", "1K"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none.stderr).contains("--key with --server needs the keyring token"));
}
