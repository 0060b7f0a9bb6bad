//! aesd's benchmarks, one criterion binary (one fat-LTO link):
//!
//! | group | what is timed | throughput |
//! | --- | --- | --- |
//! | `aes256cbc_encrypt/<size>` | `EncryptStream::update` on one chunk | bytes |
//! | `aes256cbc_decrypt/<size>` | `DecryptStream::update` on one chunk | bytes |
//! | `aes256cbc_encrypt_chains/<n>` | `encrypt_chains`: n chains (different keys) of 16 KiB in one call, as the lane engine runs concurrent jobs | bytes of all chains |
//! | `pbkdf2_sha256/10000` | `derive_key` with 10 000 iterations | iterations |
//! | `frame_data_64KiB/{encode,decode}` | a 64 KiB data frame | frame bytes |
//! | `frame_begin/{encode,decode}` | a begin frame | frame bytes |
//! | `loopback_encrypt_1MiB/{1,10}` | 1 or 10 clients at once, 1 MiB each | file bytes |
//!
//! `cargo bench -p aesd-bench` runs them all; `-- --quick` is the short
//! mode for CI; a filter selects groups (`-- aes256cbc_encrypt/16384`).
//! Results are also written to `target/criterion/<group>/<id>/new/`
//! (`estimates.json`, `benchmark.json`), which `scripts/bench/` reads.

use std::hint::black_box;
use std::time::Duration;

use aesd_bench::{
    CIPHER_SIZES, DecryptFixture, EncryptFixture, PASSWORD, PBKDF2_ITERATIONS, SALT, begin_frame,
    check_round_trip, data_frame, run_clients,
};
use aesd_core::engine::{Chain, Engine, encrypt_chains};
use aesd_core::openssl_enc::derive_key;
use aesd_proto::frame::HEADER_LEN;
use aesd_proto::{FrameHeader, Message};
use aesd_server::ConfigLayer;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};

fn aes256cbc(c: &mut Criterion) {
    for size in CIPHER_SIZES {
        check_round_trip(size);
    }
    cipher_group(c, "aes256cbc_encrypt", |size| {
        let mut fixture = EncryptFixture::new(size);
        move || fixture.run()
    });
    cipher_group(c, "aes256cbc_decrypt", |size| {
        let mut fixture = DecryptFixture::new(size);
        move || fixture.run()
    });
}

/// Concurrent jobs' CBC chains encrypted together on this process's engine
/// (the fixsliced AES's lanes, the AES-NI kernels' interleaved rounds).
fn chains(c: &mut Criterion) {
    const CHAIN_BYTES: usize = 16 * 1024;
    let engine = Engine::detect();
    let mut group = c.benchmark_group("aes256cbc_encrypt_chains");
    for count in [1usize, 2, 4] {
        let mut chains: Vec<Chain> = (0..count)
            .map(|n| Chain::new(&[n as u8 + 1; 32], &[n as u8; 16]))
            .collect();
        let mut buffers = vec![vec![0x5au8; CHAIN_BYTES]; count];
        group.throughput(Throughput::Bytes((count * CHAIN_BYTES) as u64));
        group.bench_function(BenchmarkId::from_parameter(count), |b| {
            b.iter(|| {
                let mut calls: Vec<(&mut Chain, &mut [u8])> = chains
                    .iter_mut()
                    .zip(buffers.iter_mut())
                    .map(|(chain, data)| (chain, &mut data[..]))
                    .collect();
                encrypt_chains(&mut calls);
                black_box(&buffers);
            });
        });
    }
    eprintln!("aes256cbc_encrypt_chains: engine {}", engine.name());
    group.finish();
}

/// One bench per size in [`CIPHER_SIZES`], each timing the closure that
/// `fixture` builds for that size (outside the timed loop).
fn cipher_group<F>(c: &mut Criterion, name: &str, fixture: impl Fn(usize) -> F)
where
    F: FnMut() -> usize,
{
    let mut group = c.benchmark_group(name);
    for size in CIPHER_SIZES {
        group.throughput(Throughput::Bytes(size as u64));
        let mut run = fixture(size);
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| black_box(run()));
        });
    }
    group.finish();
}

fn pbkdf2(c: &mut Criterion) {
    let mut group = c.benchmark_group("pbkdf2_sha256");
    group.sample_size(10);
    group.throughput(Throughput::Elements(u64::from(PBKDF2_ITERATIONS)));
    group.bench_function(BenchmarkId::from_parameter(PBKDF2_ITERATIONS), |b| {
        b.iter(|| derive_key(black_box(PASSWORD), black_box(&SALT), PBKDF2_ITERATIONS));
    });
    group.finish();
}

fn frames(c: &mut Criterion) {
    for (name, message) in [
        ("frame_data_64KiB", data_frame(64 * 1024)),
        ("frame_begin", begin_frame()),
    ] {
        let bytes = message.to_bytes().expect("frame encodes");
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        let mut out = Vec::with_capacity(bytes.len());
        group.bench_function("encode", |b| {
            b.iter(|| {
                out.clear();
                black_box(&message).encode(&mut out).expect("frame encodes");
                black_box(out.len())
            });
        });
        let max_data = aesd_proto::limits::DEFAULT_DATA_CHUNK;
        let decode = |frame: &[u8]| {
            let header: &[u8; HEADER_LEN] = frame[..HEADER_LEN].try_into().expect("5 bytes");
            let header = FrameHeader::decode(header, max_data).expect("header decodes");
            Message::decode(header.kind, &frame[HEADER_LEN..]).expect("payload decodes")
        };
        assert!(decode(&bytes) == message, "{name} round trip");
        group.bench_function("decode", |b| {
            b.iter(|| decode(black_box(&bytes)));
        });
        group.finish();
    }
}

fn loopback(c: &mut Criterion) {
    const SIZE: u64 = 1024 * 1024;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = runtime
        .block_on(aesd_server::start_loopback(ConfigLayer::default()))
        .expect("the bench server starts");
    let addr = server.addr();
    let mut group = c.benchmark_group("loopback_encrypt_1MiB");
    group.sample_size(10);
    for clients in [1usize, 10] {
        group.throughput(Throughput::Bytes(clients as u64 * SIZE));
        group.bench_function(BenchmarkId::from_parameter(clients), |b| {
            b.iter(|| runtime.block_on(run_clients(addr, clients, SIZE)));
        });
    }
    group.finish();
    runtime.block_on(server.shutdown());
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// Every group, with [`config`] overridden by the command line (what
/// `criterion_group!` generates, written out to carry a doc comment).
fn benches() {
    let mut criterion = config().configure_from_args();
    aes256cbc(&mut criterion);
    chains(&mut criterion);
    pbkdf2(&mut criterion);
    frames(&mut criterion);
    loopback(&mut criterion);
}

criterion_main!(benches);
