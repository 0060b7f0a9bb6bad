//! The aesd wire protocol.
//!
//! # Layout
//!
//! * [`limits`]: every hard cap on a length or count, in one place.
//! * [`handshake`]: the 8-byte [`Hello`](handshake::Hello) a client opens with
//!   (magic `AESD`, protocol version).
//! * [`frame`]: the 5-byte frame header (kind, payload length) and the
//!   [`FrameKind`](frame::FrameKind) registry.
//! * [`message`]: typed messages ([`Message`](message::Message)) and their
//!   byte layouts, with a sans-I/O encoder and decoder.
//! * [`error`]: [`ProtoError`](error::ProtoError) for malformed input and the
//!   [`ErrorCode`](error::ErrorCode)s a server sends back.
//! * [`secret_file`]: passwords and access tokens read from the first line
//!   of a file, with a warning for files others can read.
//! * `io` (feature `tokio`): async `FrameReader` and `FrameWriter` over any
//!   tokio byte stream; they only move frames and enforce the caps, they
//!   make no policy decisions (timeouts, admission, retries belong to the
//!   server and client). Without the feature the crate does no network
//!   I/O (aesd-core's protocol state machine builds on that); only
//!   `secret_file` reads files, through `std::fs`.
//!
//! It depends on no other aesd crate: `thiserror` and `zeroize`, plus
//! `tokio` and `bytes` with the `tokio` feature.
//!
//! The byte layouts, the session state machine and hex test vectors are
//! written down in `PROTOCOL.md` beside this crate; a test checks every
//! vector there against this code.

pub mod error;
pub mod frame;
pub mod handshake;
#[cfg(feature = "tokio")]
pub mod io;
pub mod limits;
pub mod message;
#[cfg(feature = "tokio")]
mod read_buffer;
pub mod secret_file;

pub use error::{ErrorCode, ProtoError};
pub use frame::{FrameHeader, FrameKind};
pub use handshake::{HELLO_DERIVED_KEYS, Hello};
#[cfg(feature = "tokio")]
pub use io::{FrameError, FrameReader, FrameWriter};
pub use message::{
    AgeFileKey, AuthToken, Begin, DERIVED_KEY_PARAMS_LEN, DerivedKeyParams, Done, ErrorFrame,
    Format, KeySource, MAX_AGE_RECIPIENTS, Message, Operation, Password, Queued, Secret, Started,
    Welcome,
};
