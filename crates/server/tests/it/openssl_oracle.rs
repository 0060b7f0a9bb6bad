//! The real `openssl` binary is the oracle for the file format: what aesd
//! encrypts (through the real server over TCP), `openssl enc -d` decrypts,
//! and what `openssl enc` encrypts, aesd decrypts; with the key derived on
//! the server from the password (key source 1) and on the client (key
//! source 2).

use crate::common;

use aesd_client::{Client, JobSpec, KeyDerivation};
use aesd_proto::{Operation, Password};
use aesd_server::ConfigLayer;
use aesd_testkit::{TempDir, openssl_decrypt_file, openssl_encrypt_file, pattern_bytes};
use common::start_server;

const SIZES: [usize; 8] = [0, 1, 15, 16, 17, 4095, 65536, (1 << 20) + 3];
const PASSWORD: &str = "correct horse battery staple";

fn spec(operation: Operation, iterations: u32, key_derivation: KeyDerivation) -> JobSpec {
    JobSpec {
        operation,
        password: Password::new(PASSWORD.as_bytes().to_vec()),
        iterations,
        key_derivation,
    }
}

async fn run(client: &mut Client, spec: &JobSpec, input: &[u8]) -> Vec<u8> {
    let mut output = Vec::new();
    client
        .run_job(spec, &mut &input[..], &mut output)
        .await
        .expect("job succeeds");
    output
}

async fn aesd_to_openssl(iterations: u32, key_derivation: KeyDerivation) {
    let server = start_server(ConfigLayer::default()).await;
    let dir = TempDir::new("oracle-enc");
    let password = dir.password_file(PASSWORD);
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    for size in SIZES {
        let plain = pattern_bytes(size as u64, size);
        let spec = spec(Operation::Encrypt, iterations, key_derivation);
        let cipher = run(&mut client, &spec, &plain).await;
        assert_eq!(cipher.len(), 16 + (size / 16 + 1) * 16, "size {size}");
        assert_eq!(&cipher[..8], b"Salted__");
        let (enc, dec) = (dir.join("enc"), dir.join("dec"));
        std::fs::write(&enc, &cipher).expect("write");
        openssl_decrypt_file(&password, iterations, &enc, &dec);
        assert!(
            std::fs::read(&dec).expect("read") == plain,
            "size {size}: openssl recovered other bytes"
        );
    }
    client.close().await;
    server.shutdown().await;
}

async fn openssl_to_aesd(iterations: u32, key_derivation: KeyDerivation) {
    let server = start_server(ConfigLayer::default()).await;
    let dir = TempDir::new("oracle-dec");
    let password = dir.password_file(PASSWORD);
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    for size in SIZES {
        let plain = pattern_bytes(size as u64 + 7, size);
        let (pt, enc) = (dir.join("pt"), dir.join("enc"));
        std::fs::write(&pt, &plain).expect("write");
        openssl_encrypt_file(&password, iterations, &pt, &enc);
        let cipher = std::fs::read(&enc).expect("read");
        let spec = spec(Operation::Decrypt, iterations, key_derivation);
        let recovered = run(&mut client, &spec, &cipher).await;
        assert!(
            recovered == plain,
            "size {size}: aesd recovered other bytes"
        );
    }
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_decrypts_what_aesd_encrypts() {
    aesd_to_openssl(10_000, KeyDerivation::Server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aesd_decrypts_what_openssl_encrypts() {
    openssl_to_aesd(10_000, KeyDerivation::Server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_default_iteration_count_both_ways() {
    aesd_to_openssl(2_500, KeyDerivation::Server).await;
    openssl_to_aesd(2_500, KeyDerivation::Server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_derived_by_the_client_both_ways() {
    aesd_to_openssl(10_000, KeyDerivation::Client).await;
    openssl_to_aesd(10_000, KeyDerivation::Client).await;
    aesd_to_openssl(2_500, KeyDerivation::Client).await;
    openssl_to_aesd(2_500, KeyDerivation::Client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_encryption_draws_a_fresh_salt() {
    let server = start_server(ConfigLayer::default()).await;
    let mut client = Client::connect(&server.addr().to_string())
        .await
        .expect("connect");
    let spec = spec(Operation::Encrypt, 1000, KeyDerivation::Auto);
    let first = run(&mut client, &spec, b"same input").await;
    let second = run(&mut client, &spec, b"same input").await;
    assert_ne!(first[8..16], second[8..16], "salt reused");
    assert_ne!(first[16..], second[16..]);
    server.shutdown().await;
}
