//! aesload interrupted mid-run (SIGINT): no new clients, the running ones
//! finish or are cancelled, and the table and the `--json` document of
//! what completed are still written, marked `interrupted`. While it runs,
//! core dumps are off.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use aesd_testkit::TempDir;

#[test]
fn sigint_mid_run_writes_the_partial_report_marked_interrupted() {
    let dir = TempDir::new("aesload-sigint");
    let json = dir.join("run.json");
    // An open-loop run of 5 clients a second for 60 s: still arriving
    // when the first progress line (after 2 s) shows it is under way.
    let mut child = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args([
            "--rate",
            "5",
            "--duration",
            "60s",
            "--size",
            "64K",
            "--iter",
            "1",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn aesload");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    stderr.read_line(&mut first).expect("a progress line");
    assert!(
        !first.is_empty(),
        "aesload ended before its first progress line"
    );
    // Mid-run it holds the password and its embedded server's secrets: no
    // core file (limit 0, soft and hard).
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).expect("limits");
    let core = limits
        .lines()
        .find(|line| line.starts_with("Max core file size"))
        .expect("a core file size line");
    let fields: Vec<&str> = core.split_whitespace().collect();
    assert_eq!(fields.get(4..6), Some(&["0", "0"][..]), "{core}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("stderr");
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stdout}\n{rest}");
    assert!(rest.contains("aesload: interrupted"), "{rest}");
    assert!(!rest.contains("panicked"), "{rest}");
    assert!(
        stdout.contains("Transfers Verified"),
        "the table:\n{stdout}"
    );

    let document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON is written"))
            .expect("valid JSON");
    assert_eq!(document["interrupted"], serde_json::Value::Bool(true));
    let transfers = document["transfers"].as_array().expect("transfers");
    assert!(
        !transfers.is_empty() && transfers.len() < 300,
        "{} transfers: some, not all",
        transfers.len()
    );
    for transfer in transfers {
        let verified = transfer["verified"].as_bool() == Some(true);
        let cancelled = transfer["error_kind"].as_str() == Some("interrupted");
        assert!(verified || cancelled, "{transfer}");
    }
}
