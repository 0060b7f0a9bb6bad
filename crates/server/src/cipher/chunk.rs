//! The chunk buffer a job's stages pass around: aesd-cipher's
//! [`ChunkBuf`](aesd_cipher::stream::ChunkBuf) over a `Vec<u8>`.
//!
//! Network payloads are read into the buffer after its headroom, so the
//! cipher can prepend the block carried over from the previous chunk and
//! then work on whole blocks in place.

/// A buffer holding one chunk of a stream, reused from chunk to chunk.
pub type ChunkBuf = aesd_cipher::stream::ChunkBuf<Vec<u8>>;
