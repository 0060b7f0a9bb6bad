//! The chunk buffer a job's stages pass around: aesd-cipher's
//! [`ChunkBuf`](aesd_cipher::stream::ChunkBuf) over a `Vec<u8>` that is
//! wiped when the buffer is dropped: a chunk holds plaintext (an
//! encryption's input, a decryption's output), which must not stay in
//! freed memory for the next allocation to find.
//!
//! Network payloads are read into the buffer after its headroom, so the
//! cipher can prepend the block carried over from the previous chunk and
//! then work on whole blocks in place.

use zeroize::Zeroizing;

/// A buffer holding one chunk of a stream, reused from chunk to chunk and
/// wiped on drop.
pub type ChunkBuf = aesd_cipher::stream::ChunkBuf<Zeroizing<Vec<u8>>>;

#[cfg(test)]
mod tests {
    use super::*;
    use zeroize::ZeroizeOnDrop;

    /// Compiles only while the chunk's storage wipes itself when dropped.
    fn storage_wiped_on_drop<S: ZeroizeOnDrop>(_: &aesd_cipher::stream::ChunkBuf<S>) {}

    #[test]
    fn chunk_storage_is_wiped_on_drop() {
        let mut buf = ChunkBuf::with_capacity(64);
        buf.payload_mut(5).copy_from_slice(b"plain");
        storage_wiped_on_drop(&buf);
        assert_eq!(buf.as_slice(), b"plain");
        assert_eq!(buf.capacity(), 64);
    }
}
