//! The frame header: one byte of kind, four bytes of payload length.
//!
//! ```text
//! offset  size  field
//! 0       1     kind (see FrameKind)
//! 1       4     payload length, big-endian
//! 5       len   payload
//! ```

use crate::error::ProtoError;
use crate::limits::{MAX_CONTROL_PAYLOAD, MAX_FRAME_PAYLOAD};

/// Length of a frame header in bytes.
pub const HEADER_LEN: usize = 5;

/// Every kind of frame, with its number on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// Server → client, once after the hello: version and limits.
    Welcome,
    /// Client → server, once after the welcome when the server requires
    /// it: the pre-shared access token.
    Auth,
    /// Server → client: the token was accepted; jobs may begin.
    Authorized,
    /// Client → server, between jobs: the keyring token its by-name jobs
    /// (key source 5) run under; not answered (each by-name begin checks
    /// it).
    KeyToken,
    /// Client → server: start a job.
    Begin,
    /// Both ways: a chunk of the file (input from the client, output from
    /// the server).
    Data,
    /// Client → server: the input is complete.
    End,
    /// Server → client: the job waits for admission at this position.
    Queued,
    /// Server → client: the job was admitted; send data now.
    Started,
    /// Server → client: the job is complete, with its figures.
    Done,
    /// Server → client: the job (or the connection) failed.
    Error,
}

impl FrameKind {
    /// The kind's number on the wire.
    pub fn to_wire(self) -> u8 {
        match self {
            FrameKind::Welcome => 0x01,
            FrameKind::Auth => 0x02,
            FrameKind::Authorized => 0x03,
            FrameKind::KeyToken => 0x04,
            FrameKind::Begin => 0x10,
            FrameKind::Data => 0x11,
            FrameKind::End => 0x12,
            FrameKind::Queued => 0x20,
            FrameKind::Started => 0x21,
            FrameKind::Done => 0x22,
            FrameKind::Error => 0x7f,
        }
    }

    /// The kind for a number on the wire.
    pub fn from_wire(byte: u8) -> Result<Self, ProtoError> {
        Ok(match byte {
            0x01 => FrameKind::Welcome,
            0x02 => FrameKind::Auth,
            0x03 => FrameKind::Authorized,
            0x04 => FrameKind::KeyToken,
            0x10 => FrameKind::Begin,
            0x11 => FrameKind::Data,
            0x12 => FrameKind::End,
            0x20 => FrameKind::Queued,
            0x21 => FrameKind::Started,
            0x22 => FrameKind::Done,
            0x7f => FrameKind::Error,
            other => return Err(ProtoError::UnknownFrameKind(other)),
        })
    }

    /// The kind's name, for errors and logs.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Welcome => "welcome",
            FrameKind::Auth => "auth",
            FrameKind::Authorized => "authorized",
            FrameKind::KeyToken => "key_token",
            FrameKind::Begin => "begin",
            FrameKind::Data => "data",
            FrameKind::End => "end",
            FrameKind::Queued => "queued",
            FrameKind::Started => "started",
            FrameKind::Done => "done",
            FrameKind::Error => "error",
        }
    }

    /// The largest payload a frame of this kind may announce, given the
    /// receiver's data limit (capped at [`MAX_FRAME_PAYLOAD`]).
    pub fn max_payload(self, max_data: u32) -> u32 {
        match self {
            FrameKind::Data => max_data.min(MAX_FRAME_PAYLOAD),
            _ => MAX_CONTROL_PAYLOAD,
        }
    }
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the payload is.
    pub kind: FrameKind,
    /// How many payload bytes follow.
    pub len: u32,
}

impl FrameHeader {
    /// The header's bytes on the wire.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[0] = self.kind.to_wire();
        bytes[1..].copy_from_slice(&self.len.to_be_bytes());
        bytes
    }

    /// Parses a header and checks its length against the limit for its
    /// kind, before any payload is read.
    pub fn decode(bytes: &[u8; HEADER_LEN], max_data: u32) -> Result<Self, ProtoError> {
        let kind = FrameKind::from_wire(bytes[0])?;
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let max = kind.max_payload(max_data);
        if len > max {
            return Err(ProtoError::FrameTooLarge {
                kind: kind.name(),
                len,
                max,
            });
        }
        Ok(FrameHeader { kind, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        for byte in 0..=255u8 {
            if let Ok(kind) = FrameKind::from_wire(byte) {
                assert_eq!(kind.to_wire(), byte);
            }
        }
    }

    #[test]
    fn oversize_data_frame_is_rejected_before_reading_it() {
        let header = [0x11, 0x00, 0x10, 0x00, 0x01];
        let err = FrameHeader::decode(&header, 64 * 1024).unwrap_err();
        assert!(matches!(
            err,
            ProtoError::FrameTooLarge {
                len: 0x0010_0001,
                max: 65536,
                ..
            }
        ));
    }

    #[test]
    fn control_frames_have_a_small_cap_whatever_the_data_limit() {
        let header = FrameHeader {
            kind: FrameKind::Begin,
            len: MAX_CONTROL_PAYLOAD + 1,
        };
        assert!(FrameHeader::decode(&header.encode(), MAX_FRAME_PAYLOAD).is_err());
    }
}
