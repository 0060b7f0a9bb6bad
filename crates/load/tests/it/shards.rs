//! Sharded runs as a user runs them: two `aesload --shard` processes
//! against one server, `aesload merge`, and the unsharded run beside it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use aesd_client::connection::{Client, ConnectOptions};
use aesd_load::output::json::Document;
use aesd_server::ConfigLayer;
use aesd_testkit::TempDir;

fn aesload(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aesload"))
        .args(args)
        .output()
        .expect("run aesload")
}

fn ok(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn read(path: &Path) -> Document {
    let text = std::fs::read_to_string(path).expect("json written");
    serde_json::from_str(&text).expect("a document")
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_merged_make_the_unsharded_run() {
    let server = aesd_server::start_loopback(ConfigLayer {
        max_queued_per_client: Some(64),
        max_active_per_client: Some(64),
        min_input_rate: Some(0),
        ..ConfigLayer::default()
    })
    .await
    .expect("the test server starts");
    let dir = TempDir::new("aesload-shards");
    let file = |name: &str| dir.join(name).display().to_string();
    let common = strings(&[
        "--server",
        &server.addr().to_string(),
        "--clients",
        "7",
        "--chunk",
        "3",
        "--sizes",
        "16K,48K,100K",
        "--seed",
        "11",
        "--iter",
        "1000",
        "--quiet",
    ]);
    let with = |extra: &[&str]| -> Vec<String> {
        let mut args = common.clone();
        args.extend(strings(extra));
        args
    };
    let (whole, shard0, shard1, merged) = (
        file("whole.json"),
        file("s0.json"),
        file("s1.json"),
        file("merged.json"),
    );
    let runs = [
        with(&["--json", &whole]),
        with(&[
            "--shard",
            "0/2",
            "--bind",
            "127.0.0.2",
            "--start-in",
            "0s",
            "--json",
            &shard0,
        ]),
        with(&["--shard", "1/2", "--bind", "127.0.0.3", "--json", &shard1]),
    ];
    tokio::task::spawn_blocking(move || {
        for args in &runs {
            ok(&aesload(args));
        }
    })
    .await
    .expect("join");
    let (a, b) = (read(Path::new(&shard0)), read(Path::new(&shard1)));
    let clients = |document: &Document| -> Vec<usize> {
        document
            .transfers
            .iter()
            .map(|transfer| transfer.client)
            .collect()
    };
    assert_eq!(clients(&a), [0, 2, 4, 6]);
    assert_eq!(clients(&b), [1, 3, 5]);
    assert_eq!(a.parameters.bind.as_deref(), Some("127.0.0.2"));

    let stdout = ok(&aesload(&strings(&[
        "merge", &shard1, &shard0, "--json", &merged,
    ])));
    assert!(stdout.contains("Transfers Verified"), "{stdout}");
    assert!(stdout.contains("7 / 7"), "{stdout}");
    let (merged_doc, whole_doc) = (read(Path::new(&merged)), read(Path::new(&whole)));
    assert_eq!(merged_doc.shard, None);
    assert_eq!(
        merged_doc.parameters.bind.as_deref(),
        Some("127.0.0.2,127.0.0.3")
    );
    let (m, w) = (&merged_doc.summary, &whole_doc.summary);
    assert_eq!(
        (m.bytes_processed, m.transfers, m.verified, m.failed),
        (w.bytes_processed, w.transfers, w.verified, w.failed)
    );
    assert_eq!(m.verified, 7);
    let sizes = |document: &Document| -> Vec<(usize, u64)> {
        document
            .transfers
            .iter()
            .map(|transfer| (transfer.client, transfer.bytes))
            .collect()
    };
    assert_eq!(
        sizes(&merged_doc),
        sizes(&whole_doc),
        "same jobs, same sizes"
    );
    let histogram = m.total_time_histogram.as_ref().expect("histogram");
    let counted: u64 = histogram.counts.iter().map(|[_, count]| count).sum();
    assert_eq!(counted, 7);

    // compare takes the merged run like any other.
    let table = ok(&aesload(&strings(&["compare", &whole, &merged])));
    assert!(table.contains("merged"), "{table}");

    // The same shard twice, or one missing: refused, saying which.
    let twice = aesload(&strings(&["merge", &shard0, &shard0]));
    assert_eq!(twice.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert!(stderr.contains("shard 0/2 is given twice"), "{stderr}");
    let missing = aesload(&strings(&["merge", &shard1]));
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("shards missing: 0/2"), "{stderr}");
    server.shutdown().await;
}

#[test]
fn bad_shard_and_start_values_are_refused_with_the_reason() {
    for (args, reason) in [
        (&["--shard", "3/3"][..], "numbered 0 to 2"),
        (&["--shard", "0/0"], "at least 1"),
        (&["--shard", "two"], "expected I/N"),
        (&["--start-at", "2001-01-01T00:00:00Z"], "s ago"),
        (&["--start-at", "18:00"], "invalid start time"),
        (&["--bind", "localhost"], "invalid IP address"),
        (
            &["--bind", "192.0.2.1"],
            "cannot connect from --bind 192.0.2.1",
        ),
    ] {
        let output = aesload(&strings(args));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn bind_chooses_the_source_address() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let addr = listener.local_addr().expect("address").to_string();
    let connect = tokio::spawn(async move {
        let options = ConnectOptions {
            bind: Some("127.0.0.3".parse().expect("ip")),
            ..ConnectOptions::default()
        };
        // No aesd answers: the connection itself is what is checked.
        Client::connect_within(&addr, &options, Duration::from_secs(2)).await
    });
    let (_stream, peer) = listener.accept().await.expect("accept");
    assert_eq!(peer.ip().to_string(), "127.0.0.3");
    drop(_stream);
    let _ = connect.await;

    // An address not on this host cannot be bound: a bind error, named.
    let options = ConnectOptions {
        bind: Some("192.0.2.1".parse().expect("ip")),
        ..ConnectOptions::default()
    };
    let err = match Client::connect_within("127.0.0.1:9", &options, Duration::from_secs(2)).await {
        Ok(_) => panic!("bound a foreign address"),
        Err(err) => err,
    };
    assert_eq!(err.kind(), "bind", "{err}");
    assert!(err.to_string().contains("192.0.2.1"), "{err}");
}
