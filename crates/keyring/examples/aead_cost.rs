//! One encryption and one decryption of N bytes with a fresh key of the
//! given type, for counting instructions under qemu-user (docs/keyring.md,
//! "AEAD cost on riscv32imac"): the count at N minus the count at 0, over
//! N, is the cost per byte of the keyring's AEAD (the key schedule and
//! the call's fixed cost fall out).
//!
//! Usage: aead_cost aes256-gcm96|chacha20-poly1305 N

use std::process::ExitCode;

use aesd_keyring::{KeyType, Keyring, OsEntropy};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(len)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: aead_cost aes256-gcm96|chacha20-poly1305 N");
        return ExitCode::from(2);
    };
    let (Ok(kind), Ok(len)) = (KeyType::parse(kind), len.parse::<usize>()) else {
        eprintln!("aead_cost: unknown type or bad length");
        return ExitCode::from(2);
    };
    let mut ring = Keyring::new();
    let mut run = || -> Result<u8, aesd_keyring::KeyringError> {
        ring.create("k", kind, 0, &mut OsEntropy)?;
        let plain = vec![0x5a; len];
        let (version, sealed) = ring.encrypt_raw("k", None, &plain, b"", &mut OsEntropy)?;
        let back = ring.decrypt_raw("k", version, &sealed, b"")?;
        Ok(back.iter().fold(0u8, |a, b| a ^ b))
    };
    match run() {
        Ok(check) => {
            let expected = if len % 2 == 1 { 0x5a } else { 0 };
            if check != expected {
                eprintln!("aead_cost: round trip wrong");
                return ExitCode::FAILURE;
            }
            println!("ok {len}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("aead_cost: {err}");
            ExitCode::FAILURE
        }
    }
}
