//! The `aesload` binary, as a user runs it.

use std::path::Path;
use std::process::Command;

use aesd_server::ConfigLayer;
use aesd_testkit::TempDir;

/// Runs aesload with `args`, requires success, returns its stdout.
fn aesload_ok(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(args)
        .output()
        .expect("run aesload");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn aesload_runs_against_its_embedded_server_and_verifies() {
    let stdout = aesload_ok(&[
        "--clients",
        "6",
        "--chunk",
        "3",
        "--sizes",
        "64K,1M",
        "--iter",
        "1000",
        "--quiet",
    ]);
    assert!(
        stdout.contains("server: embedded aesd on 127.0.0.1:"),
        "{stdout}"
    );
    for row in [
        "Total Bytes Processed (MB)",
        "Avg Bytes per Second (MB/s)",
        "Test Duration (s)",
        "Total Network Time (s)",
        "Total Processing Time (s)",
        "Avg Queue Time (s)",
    ] {
        assert!(stdout.contains(row), "missing row {row}:\n{stdout}");
    }
    let verified = stdout
        .lines()
        .find(|line| line.starts_with("Transfers Verified"))
        .expect("row");
    assert!(verified.trim_end().ends_with("6 / 6"), "{verified}");
}

#[test]
fn aesload_reports_failures_with_a_non_zero_exit() {
    // Nothing listens on port 1: every transfer fails to connect.
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args([
            "--server",
            "127.0.0.1:1",
            "--clients",
            "2",
            "--size",
            "1K",
            "--quiet",
        ])
        .output()
        .expect("run aesload");
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("0 / 2"), "{stdout}");
    let row = stdout
        .lines()
        .find(|line| line.starts_with("Failed (connect)"))
        .unwrap_or_else(|| panic!("no failure row:\n{stdout}"));
    assert!(row.trim_end().ends_with(" 2"), "{row}");
}

#[test]
fn aesload_runs_every_suite_and_writes_json_csv_and_plot() {
    let dir = TempDir::new("aesload-all");
    let (json, csv, svg) = (
        dir.join("run.json"),
        dir.join("run.csv"),
        dir.join("run.svg"),
    );
    // Tiny files (10 MiB × 0.0001 = 1 KiB) and few iterations: this checks
    // the plumbing of all six suites, not the speed.
    let (json_arg, csv_arg, svg_arg) = (path(&json), path(&csv), path(&svg));
    let stdout = aesload_ok(&[
        "--suite",
        "all",
        "--scale",
        "0.0001",
        "--iter",
        "1000",
        "--rate",
        "100",
        "--duration",
        "0.2s",
        "--warmup",
        "2",
        "--quiet",
        "--json",
        &json_arg,
        "--csv",
        &csv_arg,
        "--plot",
        &svg_arg,
    ]);
    let header = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("basic1"))
        .unwrap_or_else(|| panic!("no table header:\n{stdout}"));
    let names: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        names,
        [
            "basic1", "basic2", "basic3", "large", "thousand", "drowning"
        ]
    );
    for row in [
        "Total Time p99 (s)",
        "Queue Time p50 (s)",
        "Warm-up Excluded",
    ] {
        assert!(stdout.contains(row), "missing row {row}:\n{stdout}");
    }

    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(document["schema_version"], 1);
    let clients: Vec<u64> = document["suites"]
        .as_array()
        .expect("suites")
        .iter()
        .map(|suite| suite["clients"].as_u64().expect("clients"))
        .collect();
    assert_eq!(clients, [1, 10, 20, 100, 1000, 20]);
    let transfers = document["transfers"].as_array().expect("transfers");
    assert_eq!(transfers.len(), 1151);
    assert_eq!(
        document["summary"]["transfers"],
        1151 - 6 * 2 + 1,
        "warm-up: 2 per suite, basic1 has 1"
    );
    assert_eq!(document["summary"]["failed"], 0);
    assert!(
        transfers
            .iter()
            .all(|transfer| transfer["verified"] == true)
    );

    let csv = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(csv.lines().count(), 1 + 1151);
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for name in ["basic1:", "thousand:", "drowning:"] {
        assert!(svg.contains(name), "plot lacks {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aesload_breaks_results_down_per_server() {
    let (a, b) = (
        aesd_server::start_loopback(ConfigLayer::default())
            .await
            .expect("the test server starts"),
        aesd_server::start_loopback(ConfigLayer::default())
            .await
            .expect("the test server starts"),
    );
    let servers = format!("{},{}", a.addr(), b.addr());
    let stdout = tokio::task::spawn_blocking(move || {
        aesload_ok(&[
            "--server",
            &servers,
            "--clients",
            "4",
            "--size",
            "16K",
            "--iter",
            "1000",
            "--quiet",
        ])
    })
    .await
    .expect("join");
    assert!(stdout.contains("servers (round-robin): "), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("custom per server:"))
        .skip(2)
        .take(2)
        .collect();
    for (row, server) in rows.iter().zip([a.addr(), b.addr()]) {
        assert!(row.starts_with(&server.to_string()), "{row}\n{stdout}");
        assert!(row.contains("2 / 2"), "{row}");
    }
    assert_eq!(rows.len(), 2, "{stdout}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aesload_samples_the_server_metrics_into_json_and_plot() {
    let dir = TempDir::new("aesload-metrics");
    let sensor = dir.join("temp1_input");
    std::fs::write(&sensor, "51250\n").expect("sensor");
    let server = aesd_server::start_loopback(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        temperature: Some(format!("hwmon:{}", sensor.display())),
        // aesload's 8 clients all come from 127.0.0.1: queue them all.
        max_queued_per_client: Some(64),
        ..ConfigLayer::default()
    })
    .await
    .expect("the test server starts");
    let addr = server.addr().to_string();
    let url = format!("http://{}/metrics", server.metrics_addr().expect("metrics"));
    let (json, svg) = (dir.join("run.json"), dir.join("run.svg"));
    let output = tokio::task::spawn_blocking({
        let (json, svg) = (path(&json), path(&svg));
        move || {
            Command::new(env!("CARGO_BIN_EXE_aesload"))
                .args([
                    "--server",
                    &addr,
                    "--metrics-url",
                    &url,
                    "--clients",
                    "8",
                    "--size",
                    "1M",
                ])
                .args(["--iter", "1000", "--quiet", "--json", &json, "--plot", &svg])
                .output()
                .expect("run aesload")
        }
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("server metrics: "), "{stdout}");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid JSON");
    let samples = document["server_metrics"]
        .as_array()
        .expect("server_metrics");
    assert!(
        samples.len() >= 2,
        "a first and a last sample at least: {samples:?}"
    );
    assert!(
        samples.iter().all(|s| s["temperature_c"] == 51.25),
        "{samples:?}"
    );
    assert!(
        samples
            .iter()
            .all(|s| s["resident_bytes"].as_f64().unwrap_or(0.0) > 1e6)
    );
    assert!(
        samples[1..].iter().all(|s| s["cpu_percent"].is_number()),
        "{samples:?}"
    );
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        svg.contains("server (--metrics-url, "),
        "plot lacks the server row"
    );
    server.shutdown().await;
}

#[test]
fn aesload_compare_lays_runs_and_the_study_side_by_side() {
    let dir = TempDir::new("aesload-compare");
    let (first, second, svg) = (
        dir.join("first.json"),
        dir.join("second.json"),
        dir.join("compare.svg"),
    );
    for (json, workers) in [(&first, "1"), (&second, "2")] {
        aesload_ok(&[
            "--suite",
            "basic2,large",
            "--scale",
            "0.001",
            "--iter",
            "1000",
            "--workers",
            workers,
            "--quiet",
            "--json",
            &path(json),
        ]);
    }
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/study-baseline.json");
    let stdout = aesload_ok(&[
        "compare",
        &format!("{}#study-dual-core", path(&baseline)),
        &path(&first),
        &path(&second),
        "--suite",
        "basic2,large",
        "--plot",
        &path(&svg),
    ]);
    let runs_row = stdout.lines().nth(1).expect("run labels");
    assert_eq!(
        runs_row.split_whitespace().collect::<Vec<_>>(),
        [
            "study-dual-core",
            "first",
            "second",
            "study-dual-core",
            "first",
            "second"
        ],
        "{stdout}"
    );
    // The study's dual core processed 84.93 MB at 265.26 kB/s in basic 2.
    let throughput = stdout
        .lines()
        .find(|line| line.starts_with("Avg Bytes per Second (MB/s)"))
        .expect("throughput row");
    assert!(throughput.contains(" 0.27 "), "{throughput}");
    assert!(stdout.contains("Ratio to the first run"), "{stdout}");
    let svg = std::fs::read_to_string(&svg).expect("plot written");
    assert!(svg.contains("study-dual-core, basic2"), "{svg}");

    let missing = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(["compare", &path(&dir.join("nope.json"))])
        .output()
        .expect("run aesload");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope.json"));
}

/// `--pass` as openssl's `-pass`: every source is read and the run
/// verifies (which password the jobs used is not visible from outside:
/// aescrypt's tests check that through openssl), a bad form is refused
/// at parse time and an unset variable is one line.
#[test]
fn aesload_takes_the_password_from_every_source() {
    let dir = TempDir::new("aesload-pass");
    let file = dir.password_file("load pw");
    let small = ["--clients", "1", "--size", "4K", "--iter", "1", "--quiet"];
    let file_source = format!("file:{}", file.display());
    for source in ["pass:load pw", "env:AESLOAD_TEST_PW", file_source.as_str()] {
        let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
            .args(small)
            .args(["--pass", source])
            .env("AESLOAD_TEST_PW", "load pw")
            .output()
            .expect("run aesload");
        assert!(
            output.status.success(),
            "{source}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let script = format!(
        "echo 'load pw' | '{}' {} --pass stdin && '{}' {} --pass fd:3 3<'{}'",
        env!("CARGO_BIN_EXE_aesload"),
        small.join(" "),
        env!("CARGO_BIN_EXE_aesload"),
        small.join(" "),
        file.display()
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
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(small)
        .args(["--pass", "pw.txt"])
        .output()
        .expect("run aesload");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a password source"));
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(small)
        .args(["--pass", "env:AESLOAD_SURELY_UNSET"])
        .env_remove("AESLOAD_SURELY_UNSET")
        .output()
        .expect("run aesload");
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "aesload: environment variable AESLOAD_SURELY_UNSET (--pass env:AESLOAD_SURELY_UNSET) is not set"
    );
}

/// `aesload --generate ...`: a man page with the compare subcommand and
/// completion scripts naming the flags.
#[test]
fn aesload_generates_its_man_page_and_completions() {
    for (kind, marker) in [
        ("man", ".TH aesload 1"),
        ("complete-bash", "complete -F _aesload"),
        ("complete-zsh", "#compdef aesload"),
        ("complete-fish", "complete -c aesload"),
    ] {
        let text = aesload_ok(&["--generate", kind]);
        assert!(text.contains(marker), "{kind}: no {marker:?}");
        for word in ["suite", "clients", "quiet", "compare"] {
            assert!(text.contains(word), "{kind}: no {word}");
        }
    }
    let output = Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(["--generate", "man", "--clients", "2"])
        .output()
        .expect("run aesload");
    assert_eq!(output.status.code(), Some(2), "--generate goes alone");
}

/// Paragraphs of a `--help` text that repeat the one before them within
/// one option (its summary line, then the same words again): each one
/// found, as text.
fn repeated_paragraphs(help: &str) -> Vec<String> {
    // (whether the paragraph starts an option, its words but the flags)
    let paragraphs: Vec<(bool, String)> = help
        .split("\n\n")
        .map(|paragraph| {
            let starts_option = paragraph.lines().any(|line| line.trim().starts_with('-'));
            let text = paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.starts_with('-'))
                .collect::<Vec<_>>()
                .join(" ");
            (starts_option, text)
        })
        .filter(|(_, text)| text.len() >= 24)
        .collect();
    paragraphs
        .windows(2)
        .filter(|pair| !pair[1].0 && pair[1].1.starts_with(&pair[0].1[..24]))
        .map(|pair| pair[1].1.clone())
        .collect()
}

/// `aesload --help` says each thing once (its first line, --scale, --iter
/// were each said twice), `-h` stays a summary, and the --generate help
/// names no other program.
#[test]
fn the_help_says_each_thing_once() {
    let long = aesload_ok(&["--help"]);
    assert_eq!(repeated_paragraphs(&long), Vec::<String>::new(), "{long}");
    let first = long.lines().next().expect("a first line");
    assert_eq!(long.matches(first).count(), 1, "{first}");
    assert!(!long.contains("aescrypt --generate"), "{long}");
    for flag in ["--scale", "--iter", "--server"] {
        assert!(long.contains(flag), "{flag}");
    }
    let short = aesload_ok(&["-h"]);
    assert!(short.lines().count() <= 40, "{short}");
    // The check catches a repetition.
    let doubled = "  --scale <F>\n    Multiply every file size by F\n\n    Multiply every file size by F (more)\n";
    assert_eq!(repeated_paragraphs(doubled).len(), 1);
}
