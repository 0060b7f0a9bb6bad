//! The chunk buffer a job's stages pass around: aesd-cipher's
//! [`ChunkBuf`](aesd_cipher::stream::ChunkBuf) over heap bytes that are
//! wiped when the buffer is dropped (`WipedBytes`): a chunk holds plaintext (an
//! encryption's input, a decryption's output), which must not stay in
//! freed memory for the next allocation to find.
//!
//! Network payloads are read into the buffer after its headroom, so the
//! cipher can prepend the block carried over from the previous chunk and
//! then work on whole blocks in place.

use std::sync::{Mutex, MutexGuard, PoisonError};

use aesd_cipher::stream::WipedBytes;

/// A buffer holding one chunk of a stream, reused from chunk to chunk and
/// wiped on drop.
pub type ChunkBuf = aesd_cipher::stream::ChunkBuf<WipedBytes>;

/// Chunk buffers that finished jobs gave back, wiped, for the next jobs
/// to take instead of allocating new ones; shared by a server's
/// connections ([`Settings`](crate::connection::Settings)).
///
/// Why: on the boards, musl's allocator gives a 16 KiB chunk's buffer a
/// mapping of its own and unmaps it when it is freed, so every job paid
/// for mapping its buffers and a page fault per page to touch them
/// (docs/board-rtl.md, "Pages mapped and unmapped per chunk"). Only
/// buffers of one capacity (the server's `chunk-size`) are kept, as many
/// as fit in a byte budget; any other buffer given back, or one beyond
/// the budget, is dropped (wiped and freed) as before.
#[derive(Debug)]
pub struct SpareBuffers {
    kept: Mutex<Vec<ChunkBuf>>,
    capacity: usize,
    max_kept: usize,
}

impl SpareBuffers {
    /// What a server keeps by default: 256 KiB, sixteen of the boards'
    /// 16 KiB buffers (four jobs' worth), one job's at aesd's default
    /// 64 KiB `chunk-size`, none above 256 KiB.
    pub const DEFAULT_MAX_BYTES: usize = 256 * 1024;

    /// Keeps buffers for payloads of `capacity` bytes, as many as fit in
    /// `max_bytes` (fewer than one: none, every buffer is freed when its
    /// job ends).
    pub fn new(capacity: usize, max_bytes: usize) -> SpareBuffers {
        SpareBuffers {
            kept: Mutex::new(Vec::new()),
            capacity,
            max_kept: max_bytes.checked_div(capacity).unwrap_or(0),
        }
    }

    /// A server's: buffers of its `chunk-size`, within
    /// [`SpareBuffers::DEFAULT_MAX_BYTES`].
    pub fn for_chunk_size(chunk_size: u32) -> SpareBuffers {
        SpareBuffers::new(chunk_size as usize, SpareBuffers::DEFAULT_MAX_BYTES)
    }

    /// A buffer for payloads of up to `capacity` bytes, all zeros: a kept
    /// one if `capacity` is the kept buffers', or a new one.
    pub fn take(&self, capacity: usize) -> ChunkBuf {
        let kept = (capacity == self.capacity)
            .then(|| self.lock().pop())
            .flatten();
        kept.unwrap_or_else(|| ChunkBuf::with_capacity(capacity))
    }

    /// Wipes `buf` and keeps it for a later [`SpareBuffers::take`]; a
    /// buffer of another capacity, or one more than the budget holds, is
    /// dropped (which wipes it too).
    pub fn give_back(&self, mut buf: ChunkBuf) {
        if buf.capacity() != self.capacity {
            return;
        }
        buf.wipe();
        let mut kept = self.lock();
        if kept.len() < self.max_kept {
            kept.push(buf);
        }
    }

    /// How many buffers are kept.
    pub fn kept(&self) -> usize {
        self.lock().len()
    }

    /// The kept buffers (a panic elsewhere while holding the lock leaves
    /// them whole: every change to the list is a single push or pop).
    fn lock(&self) -> MutexGuard<'_, Vec<ChunkBuf>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeroize::ZeroizeOnDrop;

    /// Compiles only while the chunk's storage wipes itself when dropped.
    fn storage_wiped_on_drop<S: ZeroizeOnDrop>(_: &aesd_cipher::stream::ChunkBuf<S>) {}

    /// Age's output (Payload::Owned, a job's outs): the whole capacity is
    /// wiped, also what a truncate or a split_off left behind the length.
    #[test]
    fn wiped_vec_wipes_its_whole_capacity() {
        use aesd_cipher::stream::WipedVec;
        fn wiped_on_drop<T: ZeroizeOnDrop>(_: &T) {}
        for capacity in [1, 7, 8, 100, 65_600] {
            let mut bytes = WipedVec::with_capacity(capacity);
            wiped_on_drop(&bytes);
            let full = bytes.capacity();
            bytes.resize(full, 0xa5);
            let rest = bytes.split_off(full / 2);
            assert!(rest.iter().all(|b| *b == 0xa5));
            bytes.truncate(full / 4);
            bytes.wipe();
            // The wipe leaves the vector as long as its capacity: every
            // byte of it, the ones behind the old length too, is zero.
            assert_eq!(bytes.len(), full, "{capacity}");
            assert!(bytes.iter().all(|b| *b == 0), "{capacity}");
        }
    }

    #[test]
    fn wiped_bytes_are_exactly_their_length_and_wipe_to_zero() {
        for len in [1, 13, 32, 96, 65_568] {
            let mut bytes = WipedBytes::zeroed(len);
            assert_eq!(bytes.as_ref().len(), len);
            bytes.as_mut().fill(0xa5);
            assert!(bytes.as_ref().iter().all(|b| *b == 0xa5));
            bytes.wipe();
            assert!(bytes.as_ref().iter().all(|b| *b == 0), "{len}");
        }
    }

    /// A buffer holding `byte` in every byte of its storage: a full
    /// payload, a carried block in the headroom, a padding block behind.
    fn filled(capacity: usize, byte: u8) -> ChunkBuf {
        let mut buf = ChunkBuf::with_capacity(capacity);
        buf.payload_mut(capacity).fill(byte);
        buf.prepend(&[byte; 16]);
        buf.append(&[byte; 16]);
        assert!(buf.storage().iter().all(|b| *b == byte));
        buf
    }

    #[test]
    fn a_spare_buffer_comes_back_wiped_and_empty() {
        let spare = SpareBuffers::new(4096, 64 * 1024);
        let mut buf = filled(4096, 0xa5);
        buf.advance(100);
        spare.give_back(buf);
        assert_eq!(spare.kept(), 1);
        let again = spare.take(4096);
        assert_eq!(spare.kept(), 0, "taken, not copied");
        assert_eq!(again.capacity(), 4096);
        assert!(again.as_slice().is_empty());
        assert!(again.storage().iter().all(|b| *b == 0));
    }

    #[test]
    fn only_buffers_of_the_kept_capacity_are_kept_and_handed_out() {
        let spare = SpareBuffers::new(4096, 64 * 1024);
        // A finish's 16-byte block, an age output's buffer: not kept.
        spare.give_back(filled(16, 1));
        spare.give_back(filled(8192, 1));
        assert_eq!(spare.kept(), 0);
        spare.give_back(filled(4096, 1));
        let other = spare.take(8192);
        assert_eq!(other.capacity(), 8192);
        assert_eq!(spare.kept(), 1, "the 4 KiB one is still kept");
        assert_eq!(spare.take(4096).capacity(), 4096);
        assert_eq!(spare.kept(), 0);
    }

    #[test]
    fn no_more_than_the_budget_is_kept() {
        let spare = SpareBuffers::new(4096, 3 * 4096 + 4095);
        for _ in 0..5 {
            spare.give_back(filled(4096, 2));
        }
        assert_eq!(spare.kept(), 3);
        let none = SpareBuffers::new(4096, 4095);
        none.give_back(filled(4096, 4));
        assert_eq!(none.kept(), 0);
        let zero = SpareBuffers::new(0, 1024);
        zero.give_back(ChunkBuf::with_capacity(0));
        assert_eq!(zero.kept(), 0);
    }

    #[test]
    fn a_server_keeps_four_jobs_of_the_boards_chunks_one_of_its_default_none_above_256k() {
        for (chunk_size, kept) in [(16 * 1024, 16), (64 * 1024, 4), (512 * 1024, 0)] {
            let spare = SpareBuffers::for_chunk_size(chunk_size);
            for _ in 0..20 {
                spare.give_back(ChunkBuf::with_capacity(chunk_size as usize));
            }
            assert_eq!(spare.kept(), kept, "{chunk_size}");
        }
    }

    #[test]
    fn chunk_storage_is_wiped_on_drop() {
        let mut buf = ChunkBuf::with_capacity(64);
        buf.payload_mut(5).copy_from_slice(b"plain");
        storage_wiped_on_drop(&buf);
        assert_eq!(buf.as_slice(), b"plain");
        assert_eq!(buf.capacity(), 64);
    }
}
