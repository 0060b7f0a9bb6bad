//! Fuzzes the frame decoder: arbitrary bytes through the async
//! `FrameReader` the server reads clients with (hello, headers, payloads,
//! every message kind), at a small and at the largest data limit.
//!
//! Besides "never panics, never allocates past a cap", it checks that
//! decoding is exact: every message that decodes encodes back to the very
//! bytes it came from, so no two inputs mean the same thing and nothing
//! is silently dropped or altered.

#![no_main]

use aesd_proto::frame::HEADER_LEN;
use aesd_proto::limits::MAX_FRAME_PAYLOAD;
use aesd_proto::{FrameReader, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    for max_data in [4096, MAX_FRAME_PAYLOAD] {
        runtime.block_on(read_all(data, max_data));
    }
});

/// Reads a hello (when the input starts with one) and then frames until
/// the input ends or is rejected; checks each accepted frame re-encodes to
/// its own bytes.
async fn read_all(data: &[u8], max_data: u32) {
    let mut reader = FrameReader::new(data, max_data);
    let mut offset = 0;
    if data.starts_with(b"AESD") {
        if reader.read_hello().await.is_err() {
            return;
        }
        offset = 8;
    }
    loop {
        match reader.read_message().await {
            Ok(Some(message)) => {
                let bytes = message.to_bytes().expect("a decoded message encodes");
                let end = offset + bytes.len();
                assert!(end <= data.len(), "decoded past the input");
                assert_eq!(
                    bytes,
                    data[offset..end],
                    "{} frame does not re-encode to its bytes",
                    message.kind().name()
                );
                let payload = bytes.len() - HEADER_LEN;
                match &message {
                    Message::Data(_) => assert!(payload as u32 <= max_data),
                    _ => assert!(payload as u32 <= aesd_proto::limits::MAX_CONTROL_PAYLOAD),
                }
                offset = end;
            }
            Ok(None) | Err(_) => return,
        }
    }
}
