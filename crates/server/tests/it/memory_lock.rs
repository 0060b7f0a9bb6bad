//! `--mlock` (issue 38 item 4: root and key material locked in memory
//! where the OS allows): an aesd holding a keyring has its pages locked
//! (`VmLck` in /proc/PID/status) when its limits allow; where they do not
//! (here: `CAP_IPC_LOCK` dropped with setpriv and `RLIMIT_MEMLOCK`
//! lowered with prlimit), `--mlock auto` warns and locks nothing, and
//! `--mlock on` refuses to start, naming the limit. (Core dumps are off
//! in every case: shutdown.rs checks the running aesd's core limit.)

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this process has CAP_IPC_LOCK (bit 14 of CapEff).
fn has_ipc_lock() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let caps = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .expect("CapEff");
    u64::from_str_radix(caps.trim(), 16).expect("hex") & (1 << 14) != 0
}

fn memlock_unlimited() -> bool {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("limits");
    limits
        .lines()
        .find(|line| line.starts_with("Max locked memory"))
        .is_some_and(|line| line.split_whitespace().nth(3) == Some("unlimited"))
}

/// `aesd --dev` with `args`, under `wrap` (a command and its arguments
/// that run the rest), its stderr in `log`.
fn start(wrap: &[&str], args: &[&str], log: &Path) -> Child {
    let aesd = aesd_testkit::aesd_binary();
    let mut command = match wrap.split_first() {
        Some((program, rest)) => {
            let mut command = Command::new(program);
            command.args(rest).arg(aesd);
            command
        }
        None => Command::new(aesd),
    };
    command
        .args([
            "--dev",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--workers", "1"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("start aesd")
}

/// Waits until the log shows `marker` or the process exits; the log.
fn wait_for(child: &mut Child, log: &Path, marker: &str) -> String {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(marker) {
            return text;
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "aesd exited before {marker:?}:\n{text}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {marker:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn vm_locked_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmLck")
}

#[test]
fn a_keyring_holding_aesd_locks_its_memory_where_allowed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("aesd.log");
    let mut aesd = start(&[], &[], &log);
    let text = wait_for(&mut aesd, &log, "HTTP API listening");
    let locked = vm_locked_kib(aesd.id());
    if has_ipc_lock() || memlock_unlimited() {
        assert!(text.contains("memory locked (mlockall)"), "{text}");
        assert!(locked > 0, "VmLck {locked} kB:\n{text}");
    } else {
        assert!(text.contains("RLIMIT_MEMLOCK is"), "{text}");
        assert_eq!(locked, 0);
    }
    let _ = aesd.kill();
    let _ = aesd.wait();
    // --mlock off: nothing locked.
    let mut aesd = start(&[], &["--mlock", "off"], &log);
    wait_for(&mut aesd, &log, "HTTP API listening");
    assert_eq!(vm_locked_kib(aesd.id()), 0, "--mlock off locked memory");
    let _ = aesd.kill();
    let _ = aesd.wait();
}

/// Negative control: the limits forbid locking. `auto` warns, names the
/// limit and locks nothing; `on` exits 1 saying why.
#[test]
fn where_the_limits_forbid_it_auto_warns_and_on_refuses_to_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("aesd.log");
    let mut wrap = Vec::new();
    if has_ipc_lock() {
        wrap.extend([
            "setpriv",
            "--inh-caps=-ipc_lock",
            "--bounding-set=-ipc_lock",
        ]);
    }
    wrap.extend(["prlimit", "--memlock=65536:65536"]);
    let mut aesd = start(&wrap, &[], &log);
    let text = wait_for(&mut aesd, &log, "HTTP API listening");
    assert!(
        text.contains("RLIMIT_MEMLOCK is 65536 bytes and the process lacks CAP_IPC_LOCK"),
        "{text}"
    );
    assert_eq!(vm_locked_kib(aesd.id()), 0);
    let _ = aesd.kill();
    let _ = aesd.wait();

    let mut aesd = start(&wrap, &["--mlock", "on"], &log);
    let status = aesd.wait().expect("exit");
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("aesd: --mlock on: RLIMIT_MEMLOCK is 65536 bytes"),
        "{text}"
    );
}
