//! aesd raises its soft open-file limit to the hard limit and keeps
//! `max-connections` within it: connections past what it can open get
//! `busy` at once instead of making `accept` fail with EMFILE while new
//! clients hang. The real `aesd`, started through a shell that lowers the
//! limits (soft 200, hard 300) the way BusyBox init leaves them low.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use aesd_proto::{ErrorCode, FrameReader, Hello, Message};
use aesd_testkit::{AesdProcess, TempDir};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The limits in `/proc/PID/limits`: (soft, hard) open files.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .expect("open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soft_limit_is_raised_and_connections_past_the_fds_get_busy() {
    const CONNECTIONS: usize = 260;
    let dir = TempDir::new("fd-limit");
    let wrapper = dir.join("aesd-low-fds");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nulimit -Sn 200 && ulimit -Hn 300 && exec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_aesd")
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let aesd = AesdProcess::start(
        Path::new(&wrapper),
        &[
            "--max-connections-per-client",
            "1000",
            "--handshake-timeout",
            "30",
        ],
    );
    assert_eq!(
        open_file_limits(aesd.pid()),
        ("300".to_owned(), "300".to_owned())
    );
    let mut held = Vec::new();
    let (mut welcomed, mut busy) = (0, 0);
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(aesd.addr).await.expect("connect");
        stream
            .write_all(&Hello::current().encode())
            .await
            .expect("hello");
        let mut reader = FrameReader::new(stream, 1 << 20);
        let answer = tokio::time::timeout(Duration::from_secs(5), reader.read_message()).await;
        match answer {
            Ok(Ok(Some(Message::Welcome(_)))) => welcomed += 1,
            Ok(Ok(Some(Message::Error(error)))) if error.code == ErrorCode::Busy => busy += 1,
            other => panic!(
                "connection {} got {other:?} ({welcomed} welcomed, {busy} busy)",
                welcomed + busy + 1
            ),
        }
        held.push(reader);
    }
    println!("{welcomed} connections welcomed, {busy} got busy");
    assert_eq!(welcomed, 300 - 64, "max-connections lowered to the limit");
    assert_eq!(busy, CONNECTIONS - welcomed);
    let log = aesd.log();
    assert!(
        log.iter()
            .any(|line| line.contains("max-connections 1024 lowered to 236")),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|line| line.contains("raised from 200 to 300")),
        "{log:#?}"
    );
    assert!(
        !log.iter().any(|line| line.contains("accept failed")),
        "{log:#?}"
    );
}
