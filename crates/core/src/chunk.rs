//! The chunk buffer a job's stages pass around: aesd-cipher's
//! [`ChunkBuf`](aesd_cipher::stream::ChunkBuf) over heap bytes that are
//! wiped when the buffer is dropped (`WipedBytes`): a chunk holds plaintext (an
//! encryption's input, a decryption's output), which must not stay in
//! freed memory for the next allocation to find.
//!
//! Network payloads are read into the buffer after its headroom, so the
//! cipher can prepend the block carried over from the previous chunk and
//! then work on whole blocks in place.

use aesd_cipher::stream::WipedBytes;

/// A buffer holding one chunk of a stream, reused from chunk to chunk and
/// wiped on drop.
pub type ChunkBuf = aesd_cipher::stream::ChunkBuf<WipedBytes>;

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

    #[test]
    fn chunk_storage_is_wiped_on_drop() {
        let mut buf = ChunkBuf::with_capacity(64);
        buf.payload_mut(5).copy_from_slice(b"plain");
        storage_wiped_on_drop(&buf);
        assert_eq!(buf.as_slice(), b"plain");
        assert_eq!(buf.capacity(), 64);
    }
}
