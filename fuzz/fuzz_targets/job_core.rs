//! Fuzzes the job transform of format 1 (`aesd_core::job::OpensslJob`),
//! the sans-I/O code the server and the cost benchmark drive: the
//! input's first byte picks the operation and its chunking, the rest is
//! the job's input, fed in chunks of varying size.
//!
//! Checks, besides "never panics":
//! * decryption (key source 1: the key is derived when the salt is in, as
//!   the server does): when a file decrypts, encrypting the plaintext
//!   again with the file's salt gives back exactly the file (the format
//!   has one encoding, so nothing was dropped or altered); `bytes_in` is
//!   the file's length either way;
//! * encryption: the output decrypts to the input, `bytes_in` is its length.

#![no_main]

use aesd_proto::{Begin, Format, KeySource, Operation, Password};
use aesd_core::ChunkBuf;
use aesd_core::job::{JobError, OpensslJob};
use aesd_core::openssl_enc::{HEADER_LEN, SALT_LEN, decrypt_buffer, derive_key, encrypt_buffer};
use libfuzzer_sys::fuzz_target;

const PASSWORD: &[u8] = b"fuzz";
const ITERATIONS: u32 = 1;

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let operation = if control & 1 == 0 {
        Operation::Encrypt
    } else {
        Operation::Decrypt
    };
    // Chunk sizes 1..=64, varying along the input.
    let step = usize::from(control >> 1) % 64 + 1;
    let (core, header) = OpensslJob::start_derived(begin(operation)).expect("start");
    let (output, result) = run(core, header, input, step);
    match operation {
        Operation::Encrypt => {
            let bytes_in = result.expect("an encryption takes any input");
            assert_eq!(bytes_in, input.len() as u64);
            let plain = decrypt_buffer(PASSWORD, ITERATIONS, &output, 16).expect("decrypts");
            assert_eq!(plain, input);
        }
        Operation::Rewrap | Operation::DataKey | Operation::Unwrap | Operation::DataKeyWrapped => {
            unreachable!("only encrypt and decrypt are fuzzed here")
        }
        Operation::Decrypt => {
            if let Ok(bytes_in) = result {
                assert_eq!(bytes_in, input.len() as u64);
                let mut salt = [0u8; SALT_LEN];
                salt.copy_from_slice(&input[HEADER_LEN - SALT_LEN..HEADER_LEN]);
                let again = encrypt_buffer(PASSWORD, &salt, ITERATIONS, &output, 64);
                assert_eq!(again, input, "a file that decrypts re-encrypts to itself");
            }
        }
    }
});

fn begin(operation: Operation) -> Begin {
    Begin {
        operation,
        format: Format::OpensslSaltedPbkdf2,
        key: KeySource::Password {
            password: Password::new(PASSWORD.to_vec()),
            iterations: ITERATIONS,
        },
    }
}

/// Feeds `input` in chunks of `step`, `step + 1`, ... bytes (wrapping at
/// 64), deriving a decryption's key when the core asks, as the server
/// does. The output, and the core's result (bytes taken in, or why not).
fn run(
    mut core: OpensslJob,
    header: Option<[u8; HEADER_LEN]>,
    input: &[u8],
    mut step: usize,
) -> (Vec<u8>, Result<u64, JobError>) {
    let mut output = header.map(|h| h.to_vec()).unwrap_or_default();
    let mut rest = input;
    while !rest.is_empty() {
        let (piece, after) = rest.split_at(step.min(rest.len()));
        rest = after;
        step = step % 64 + 1;
        let mut buf = ChunkBuf::with_capacity(64);
        buf.payload_mut(piece.len()).copy_from_slice(piece);
        if let Some(request) = core.key_request(&buf) {
            let derived = derive_key(request.password, &request.salt, request.iterations);
            let salt = request.salt;
            core.provide_key(derived, salt);
        }
        if let Err(error) = core.update(&mut buf) {
            return (output, Err(error));
        }
        output.extend_from_slice(buf.as_slice());
    }
    let mut last = ChunkBuf::with_capacity(16);
    let result = core.finish(&mut last);
    output.extend_from_slice(last.as_slice());
    (output, result)
}
