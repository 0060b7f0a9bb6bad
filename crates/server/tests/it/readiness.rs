//! The real `aesd` tells a supervisor when it is ready: `--pid-file`
//! appears (atomically) only once it listens, names the process, and is
//! removed at a normal exit; the notification socket (`NOTIFY_SOCKET`) gets
//! `READY=1` with the bound addresses (the test kit starts every aesd that
//! way), then `STOPPING=1`. A pid file that cannot be written stops aesd
//! with a clear error instead of leaving a supervisor waiting.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aesd_client::Client;
use aesd_testkit::{AesdProcess, TempDir};

fn aesd_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_aesd"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pid_file_names_the_listening_aesd_and_goes_at_exit() {
    let dir = TempDir::new("pid-file");
    let pid_file = dir.join("aesd.pid");
    let pid_arg = pid_file.display().to_string();
    let mut aesd = AesdProcess::start(
        aesd_binary(),
        &["--pid-file", &pid_arg, "--metrics-listen", "127.0.0.1:0"],
    );
    // AesdProcess::start returned: the readiness message came, so the
    // pid file was already written (it is written first).
    let text = std::fs::read_to_string(&pid_file).expect("pid file written when ready");
    assert_eq!(text, format!("{}\n", aesd.pid()));
    Client::connect(&aesd.addr.to_string())
        .await
        .expect("listening when the pid file appeared");
    let metrics = aesd.metrics.expect("AESD_METRICS in the readiness message");
    tokio::net::TcpStream::connect(metrics)
        .await
        .expect("metrics port listening");
    let only_pid_file: Vec<_> = std::fs::read_dir(dir.join(""))
        .expect("list")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(only_pid_file, ["aesd.pid"], "temporary file left behind");

    aesd.signal("TERM");
    assert_eq!(aesd.wait_exit(Duration::from_secs(20)), Some(0));
    assert!(!pid_file.exists(), "pid file removed at exit");
}

#[test]
fn an_unwritable_pid_file_stops_aesd_with_a_clear_error() {
    let started = Instant::now();
    let output = Command::new(aesd_binary())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--pid-file",
            "/nonexistent-aesd-folder/aesd.pid",
        ])
        .output()
        .expect("run aesd");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("aesd: cannot write the pid file /nonexistent-aesd-folder/aesd.pid"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}
