//! The `/metrics` endpoint under abuse: idle scrapers hold at most
//! `MAX_CONNECTIONS` places (the next one gets 503 at once, the job port
//! serves on), and its connections count under the server's connection cap.

use crate::common;

use std::time::Duration;

use aesd_proto::Operation;
use aesd_server::ConfigLayer;
use aesd_server::caps::{
    METRICS_CONNECTIONS as MAX_CONNECTIONS, METRICS_CONNECTIONS_PER_CLIENT as MAX_PER_CLIENT,
};
use aesd_testkit::connect_from;
use common::{encrypt_verified, job_spec, start_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends a scrape on `stream` and reads the whole response (the server
/// closes after it), within 10 s.
async fn scrape(mut stream: TcpStream) -> String {
    let _ = stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\n\r\n")
        .await;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("answered in time")
        .expect("read");
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_scrapers_hold_at_most_the_cap_and_the_job_port_serves_on() {
    let server = start_server(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..ConfigLayer::default()
    })
    .await;
    let metrics = server.metrics_addr().expect("metrics port");
    let mut idle = Vec::new();
    // Each address holds its share: 4 addresses x 2 fill the 8 places.
    for n in 0..MAX_CONNECTIONS {
        let source = format!("127.0.0.{}", 10 + n / MAX_PER_CLIENT);
        idle.push(connect_from(&source, metrics).await);
    }
    // Give the server time to accept them all.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = scrape(connect_from("127.0.0.9", metrics).await).await;
    assert!(
        refused.starts_with("HTTP/1.1 503 Service Unavailable"),
        "{refused}"
    );
    assert!(refused.contains("scrapes are being served"), "{refused}");
    let addr = server.addr().to_string();
    encrypt_verified(&addr, &job_spec(Operation::Encrypt, "pw"), 1, 100_000)
        .await
        .expect("the job port serves while scrapers idle");
    // One idle scraper leaves: its place is free again.
    drop(idle.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let served = scrape(connect_from("127.0.0.9", metrics).await).await;
    assert!(served.starts_with("HTTP/1.1 200 OK"), "{served}");
    assert!(
        served.contains("aesd_errors_total{kind=\"busy\"} 1"),
        "{served}"
    );
    server.shutdown().await;
}

/// The "metrics blinded" attack: one address keeps unfinished requests
/// open (re-opening each one the server closes); scrapes from another
/// address still succeed, because one client holds at most its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_requests_cannot_blind_another_scraper() {
    let server = start_server(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..ConfigLayer::default()
    })
    .await;
    let metrics = server.metrics_addr().expect("metrics port");
    let mut attacker = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        attacker.push(connect_from("127.0.0.1", metrics).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut served = 0;
    for _ in 0..10 {
        let answer = scrape(connect_from("127.0.0.2", metrics).await).await;
        if answer.starts_with("HTTP/1.1 200 OK") {
            served += 1;
        }
    }
    println!(
        "{served} of 10 scrapes from another address served while one held {MAX_CONNECTIONS} requests"
    );
    assert_eq!(served, 10);
    let refused = scrape(connect_from("127.0.0.1", metrics).await).await;
    assert!(refused.contains("scrapes of 127.0.0.1"), "{refused}");
    drop(attacker);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_count_under_the_servers_connection_cap() {
    let server = start_server(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        max_connections: Some(1),
        ..ConfigLayer::default()
    })
    .await;
    let metrics = server.metrics_addr().expect("metrics port");
    let _held = TcpStream::connect(metrics).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = scrape(TcpStream::connect(metrics).await.expect("connect")).await;
    assert!(
        refused.starts_with("HTTP/1.1 503 Service Unavailable"),
        "{refused}"
    );
    assert!(refused.contains("too many connections"), "{refused}");
    server.shutdown().await;
}

/// `metrics-allow`: a connection from another address is closed before
/// its request is read (no answer at all, no scrape place taken) and
/// counted; an allowed address is served and sees the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_from_outside_metrics_allow_are_closed_unanswered_and_counted() {
    let server = start_server(ConfigLayer {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        metrics_allow: Some("127.0.0.1/32,::1/128".into()),
        ..ConfigLayer::default()
    })
    .await;
    let metrics = server.metrics_addr().expect("metrics port");
    // More than every scrape place, all from an address outside the list.
    let mut outsiders = Vec::new();
    for _ in 0..MAX_CONNECTIONS + 2 {
        outsiders.push(connect_from("127.0.0.2", metrics).await);
    }
    let mut stream = connect_from("127.0.0.2", metrics).await;
    let _ = stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: aesd\r\n\r\n")
        .await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("closed in time");
    assert!(
        answer.is_empty(),
        "nothing answered to 127.0.0.2 ({read:?}): {}",
        String::from_utf8_lossy(&answer)
    );
    let served = scrape(connect_from("127.0.0.1", metrics).await).await;
    assert!(served.starts_with("HTTP/1.1 200 OK"), "{served}");
    let refused = MAX_CONNECTIONS + 3;
    assert!(
        served.contains(&format!(
            "aesd_connections_refused_total{{reason=\"metrics_not_allowed\"}} {refused}"
        )),
        "{served}"
    );
    drop(outsiders);
    server.shutdown().await;
}
