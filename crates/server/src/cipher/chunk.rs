//! A reusable chunk buffer with headroom.
//!
//! Network payloads are read into the buffer after [`ChunkBuf::HEADROOM`]
//! bytes, so the cipher can prepend up to one block carried over from the
//! previous chunk and then work on whole blocks in place. The region
//! `start..end` is the buffer's live content.

use super::BLOCK;

/// A buffer holding one chunk of a stream, reused from chunk to chunk.
#[derive(Debug)]
pub struct ChunkBuf {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl ChunkBuf {
    /// Bytes reserved before the payload for a carried block.
    pub const HEADROOM: usize = BLOCK;

    /// A buffer for payloads of up to `capacity` bytes (plus room for one
    /// carried block before and one padding block after).
    pub fn with_capacity(capacity: usize) -> Self {
        ChunkBuf {
            bytes: vec![0; Self::HEADROOM + capacity + BLOCK],
            start: Self::HEADROOM,
            end: Self::HEADROOM,
        }
    }

    /// The largest payload [`ChunkBuf::payload_mut`] can hand out.
    pub fn capacity(&self) -> usize {
        self.bytes.len() - Self::HEADROOM - BLOCK
    }

    /// Empties the buffer and returns `len` bytes to fill with a payload.
    ///
    /// # Panics
    /// If `len` exceeds [`ChunkBuf::capacity`]; callers check frame lengths
    /// against the same limit first.
    pub fn payload_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(
            len <= self.capacity(),
            "payload larger than the chunk buffer"
        );
        self.start = Self::HEADROOM;
        self.end = Self::HEADROOM + len;
        &mut self.bytes[self.start..self.end]
    }

    /// Empties the buffer.
    pub fn clear(&mut self) {
        self.start = Self::HEADROOM;
        self.end = Self::HEADROOM;
    }

    /// The live content.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    /// Length of the live content.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether there is no live content.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Puts `carried` (at most one block) in front of the live content.
    pub(crate) fn prepend(&mut self, carried: &[u8]) {
        assert!(carried.len() <= self.start, "carry exceeds the headroom");
        self.start -= carried.len();
        self.bytes[self.start..self.start + carried.len()].copy_from_slice(carried);
    }

    /// Appends up to one block after the live content (padding).
    pub(crate) fn append(&mut self, tail: &[u8]) {
        assert!(
            self.end + tail.len() <= self.bytes.len(),
            "no room to append"
        );
        self.bytes[self.end..self.end + tail.len()].copy_from_slice(tail);
        self.end += tail.len();
    }

    /// Drops `n` bytes from the front of the live content.
    pub(crate) fn advance(&mut self, n: usize) {
        assert!(n <= self.len());
        self.start += n;
    }

    /// Drops everything after the first `len` bytes of the live content.
    pub(crate) fn truncate(&mut self, len: usize) {
        assert!(len <= self.len());
        self.end = self.start + len;
    }

    /// The live content, mutable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.end]
    }
}
