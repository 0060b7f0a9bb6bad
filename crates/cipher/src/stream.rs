//! The `openssl enc -aes-256-cbc -salt` file format, streamed: the logic
//! that keeps one CBC chain across any chunking of a file, whatever AES
//! runs it.
//!
//! A file is `Salted__`, an 8-byte salt, then the CBC ciphertext of the
//! plaintext with PKCS#7 padding (1 to 16 bytes, always present). Chunks
//! arrive in any size, so:
//!
//! * encryption ([`EncryptFraming`]) carries the partial last block of a
//!   chunk into the next one and pads the end;
//! * decryption ([`DecryptFraming`]) reads the header first (the salt
//!   selects the key), carries partial blocks, holds back the last whole
//!   block until the end (only it carries the padding), checks the length
//!   and removes the padding in constant time ([`unpadded_len`]).
//!
//! A chunk lives in a [`ChunkBuf`]: headroom in front for a carried block,
//! room behind for the padding, so every block is encrypted or decrypted
//! in place. The framing never touches the AES: after each call the buffer
//! holds whole blocks for the caller's CBC chain (aesd's lanes, the CPU's
//! AES instructions, the VexRiscv instruction).
//!
//! Nothing here allocates; [`ChunkBuf`] works on any byte storage (with the
//! `alloc` feature, `ChunkBuf::<Vec<u8>>::with_capacity` makes one).

use zeroize::Zeroize;

use crate::cbc::BLOCK;

/// The 8 bytes that start every salted file.
pub const SALTED_MAGIC: [u8; 8] = *b"Salted__";

/// Salt length in bytes.
pub const SALT_LEN: usize = 8;

/// Length of the `Salted__` + salt header.
pub const HEADER_LEN: usize = SALTED_MAGIC.len() + SALT_LEN;

/// The file header for `salt`.
pub fn header(salt: &[u8; SALT_LEN]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..SALTED_MAGIC.len()].copy_from_slice(&SALTED_MAGIC);
    header[SALTED_MAGIC.len()..].copy_from_slice(salt);
    header
}

/// What is wrong with a file to decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// The input does not start with `Salted__` and a salt.
    MissingHeader,
    /// The ciphertext after the header is empty or not whole blocks.
    BadLength {
        /// Ciphertext bytes after the 16-byte header.
        len: u64,
    },
    /// The last block's padding is not PKCS#7: a wrong key or corrupted
    /// data (the two cannot be told apart).
    BadPadding,
}

impl core::fmt::Display for FormatError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FormatError::MissingHeader => f.write_str(
                "input does not start with the \"Salted__\" header of `openssl enc -salt`",
            ),
            FormatError::BadLength { len } => write!(
                f,
                "ciphertext after the header is {len} bytes, not a positive multiple of 16"
            ),
            FormatError::BadPadding => f.write_str("the last block's padding is not PKCS#7"),
        }
    }
}

impl core::error::Error for FormatError {}

/// One chunk of a stream in reusable storage `S` (a `Vec<u8>`, an array, a
/// slice), with [`ChunkBuf::HEADROOM`] bytes in front of the payload for a
/// carried block and one block behind it for padding. The region
/// `start..end` is the live content.
#[derive(Debug)]
pub struct ChunkBuf<S> {
    bytes: S,
    start: usize,
    end: usize,
}

#[cfg(feature = "alloc")]
impl ChunkBuf<alloc::vec::Vec<u8>> {
    /// A buffer for payloads of up to `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(alloc::vec![0; Self::HEADROOM + capacity + BLOCK])
    }
}

#[cfg(feature = "alloc")]
impl ChunkBuf<WipedBytes> {
    /// A buffer for payloads of up to `capacity` bytes whose storage is
    /// wiped when it is dropped (a chunk holds plaintext, before an
    /// encryption or after a decryption).
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(WipedBytes::zeroed(Self::HEADROOM + capacity + BLOCK))
    }

    /// Overwrites the whole storage with zeros (the headroom's carried
    /// block and the padding room too) and empties the buffer: nothing of
    /// the stream it held is left for the next one to use it.
    pub fn wipe(&mut self) {
        self.bytes.wipe();
        self.clear();
    }
}

/// Heap bytes that are wiped when dropped, a 64-bit word at a time (the
/// server's chunk buffers: they hold plaintext).
///
/// Why not `Zeroizing<Vec<u8>>`: that wipes byte by byte, each a volatile
/// store, which on the rv32 board cost about 1 M instructions for a job's
/// four 64 KiB buffers, more than the rest of a small job. Words are
/// stored as `u64` (so the bytes are 8-aligned, which also suits the
/// ciphers' word loops) and viewed as bytes through `bytemuck`.
#[cfg(feature = "alloc")]
pub struct WipedBytes {
    words: alloc::vec::Vec<u64>,
    len: usize,
}

#[cfg(feature = "alloc")]
impl WipedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        WipedBytes {
            words: alloc::vec![0; len.div_ceil(8)],
            len,
        }
    }

    /// Overwrites every byte with zero (volatile word stores the compiler
    /// keeps); done on drop.
    pub fn wipe(&mut self) {
        self.words.as_mut_slice().zeroize();
    }
}

#[cfg(feature = "alloc")]
impl AsRef<[u8]> for WipedBytes {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
}

#[cfg(feature = "alloc")]
impl AsMut<[u8]> for WipedBytes {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

#[cfg(feature = "alloc")]
impl Drop for WipedBytes {
    fn drop(&mut self) {
        self.wipe();
    }
}

#[cfg(feature = "alloc")]
impl zeroize::ZeroizeOnDrop for WipedBytes {}

/// A byte vector of any length (age's output, which is not the size of
/// its input) that is wiped when dropped: its whole capacity, so bytes
/// left behind by a `truncate` or a `split_off` go too. Reserve what it
/// will hold before filling it: a reallocation would leave a copy in the
/// freed block (`AgeJob::update` reserves its bound).
///
/// Wiped like [`WipedBytes`], a 64-bit word at a time (volatile stores),
/// not byte by byte as `Zeroizing<Vec<u8>>` does.
#[cfg(feature = "alloc")]
#[derive(Default)]
pub struct WipedVec(alloc::vec::Vec<u8>);

#[cfg(feature = "alloc")]
impl WipedVec {
    /// An empty vector.
    pub fn new() -> Self {
        WipedVec(alloc::vec::Vec::new())
    }

    /// An empty vector with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        WipedVec(alloc::vec::Vec::with_capacity(capacity))
    }

    /// Overwrites every byte of the capacity with zero (volatile stores
    /// the compiler keeps) and leaves the vector that long, all zeros;
    /// done on drop.
    pub fn wipe(&mut self) {
        let capacity = self.0.capacity();
        self.0.resize(capacity, 0);
        let (head, words, tail) = bytemuck::pod_align_to_mut::<u8, u64>(&mut self.0);
        head.zeroize();
        words.zeroize();
        tail.zeroize();
    }

    /// The rest from `at` on, as a vector of its own that is wiped too.
    pub fn split_off(&mut self, at: usize) -> WipedVec {
        WipedVec(self.0.split_off(at))
    }
}

#[cfg(feature = "alloc")]
impl core::ops::Deref for WipedVec {
    type Target = alloc::vec::Vec<u8>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

#[cfg(feature = "alloc")]
impl core::ops::DerefMut for WipedVec {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

#[cfg(feature = "alloc")]
impl Drop for WipedVec {
    fn drop(&mut self) {
        self.wipe();
    }
}

#[cfg(feature = "alloc")]
impl zeroize::ZeroizeOnDrop for WipedVec {}

#[cfg(feature = "alloc")]
impl core::fmt::Debug for WipedVec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "WipedVec(<{} bytes>)", self.0.len())
    }
}

#[cfg(feature = "alloc")]
impl core::fmt::Debug for WipedBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "WipedBytes(<{} bytes>)", self.len)
    }
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> ChunkBuf<S> {
    /// Bytes reserved before the payload for a carried block.
    pub const HEADROOM: usize = BLOCK;

    /// A buffer in `bytes`, for payloads of up to `bytes.len() − 32`.
    ///
    /// # Panics
    /// If `bytes` is shorter than the headroom and the padding room (32
    /// bytes).
    pub fn new(bytes: S) -> Self {
        assert!(
            bytes.as_ref().len() >= Self::HEADROOM + BLOCK,
            "a chunk buffer needs at least 32 bytes"
        );
        ChunkBuf {
            bytes,
            start: Self::HEADROOM,
            end: Self::HEADROOM,
        }
    }

    /// The largest payload [`ChunkBuf::payload_mut`] can hand out.
    pub fn capacity(&self) -> usize {
        self.bytes.as_ref().len() - Self::HEADROOM - BLOCK
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
        &mut self.bytes.as_mut()[self.start..self.end]
    }

    /// Empties the buffer.
    pub fn clear(&mut self) {
        self.start = Self::HEADROOM;
        self.end = Self::HEADROOM;
    }

    /// The whole storage: headroom, live content, the rest.
    pub fn storage(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The live content.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes.as_ref()[self.start..self.end]
    }

    /// The live content, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes.as_mut()[self.start..self.end]
    }

    /// Length of the live content.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether there is no live content.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Puts `carried` (at most the headroom left) in front of the live
    /// content.
    pub fn prepend(&mut self, carried: &[u8]) {
        assert!(carried.len() <= self.start, "carry exceeds the headroom");
        self.start -= carried.len();
        self.bytes.as_mut()[self.start..self.start + carried.len()].copy_from_slice(carried);
    }

    /// Appends `tail` after the live content (padding: there is room for a
    /// block behind a full payload).
    pub fn append(&mut self, tail: &[u8]) {
        assert!(
            self.end + tail.len() <= self.bytes.as_ref().len(),
            "no room to append"
        );
        self.bytes.as_mut()[self.end..self.end + tail.len()].copy_from_slice(tail);
        self.end += tail.len();
    }

    /// Drops `n` bytes from the front of the live content.
    pub fn advance(&mut self, n: usize) {
        assert!(n <= self.len(), "advance past the live content");
        self.start += n;
    }

    /// Drops everything after the first `len` bytes of the live content.
    pub fn truncate(&mut self, len: usize) {
        assert!(len <= self.len(), "truncate past the live content");
        self.end = self.start + len;
    }

    /// Moves the partial last block of the live content into `carry`
    /// (after putting `carry`'s `carried` bytes in front of it): the live
    /// content is then whole blocks. Returns the new carry length.
    fn exchange_tail(&mut self, carry: &mut [u8; BLOCK], carried: usize, keep: usize) -> usize {
        self.prepend(&carry[..carried]);
        let release = self.len() - keep;
        carry[..keep].copy_from_slice(&self.as_slice()[release..]);
        self.truncate(release);
        keep
    }
}

/// The framing of an encryption: whole blocks out of chunks of any size,
/// then the padded last block. Its carried plaintext is wiped when dropped.
#[derive(Default)]
pub struct EncryptFraming {
    carry: [u8; BLOCK],
    carry_len: usize,
}

impl Drop for EncryptFraming {
    fn drop(&mut self) {
        self.carry.zeroize();
    }
}

impl EncryptFraming {
    /// A stream at its start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts the bytes carried from the previous chunk in front of `buf` and
    /// carries `buf`'s partial last block: `buf` then holds whole blocks of
    /// plaintext (possibly none), to be encrypted in place, in order.
    pub fn begin_chunk<S: AsRef<[u8]> + AsMut<[u8]>>(&mut self, buf: &mut ChunkBuf<S>) {
        let keep = (self.carry_len + buf.len()) % BLOCK;
        self.carry_len = buf.exchange_tail(&mut self.carry, self.carry_len, keep);
    }

    /// Clears `buf` and puts the last block in it: the carried bytes and
    /// their PKCS#7 padding, to be encrypted (the end of the stream).
    pub fn last_block<S: AsRef<[u8]> + AsMut<[u8]>>(&mut self, buf: &mut ChunkBuf<S>) {
        buf.clear();
        buf.prepend(&self.carry[..self.carry_len]);
        let pad = BLOCK - self.carry_len;
        buf.append(&[pad as u8; BLOCK][..pad]);
        self.carry.zeroize();
        self.carry_len = 0;
    }
}

/// The framing of a decryption: the header, then whole blocks of
/// ciphertext with the last one held back, then the held-back block.
#[derive(Default)]
pub struct DecryptFraming {
    header: [u8; HEADER_LEN],
    header_len: usize,
    carry: [u8; BLOCK],
    carry_len: usize,
    ciphertext_len: u64,
}

impl Drop for DecryptFraming {
    fn drop(&mut self) {
        self.carry.zeroize();
    }
}

impl DecryptFraming {
    /// A stream at its start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the whole header has been read.
    pub fn has_header(&self) -> bool {
        self.header_len == HEADER_LEN
    }

    /// The salt, if the header would be complete with the first bytes of
    /// `buf` and starts with `Salted__`; consumes nothing (to derive the
    /// key before [`DecryptFraming::take_header`] asks for it).
    pub fn salt_ahead<S: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        buf: &ChunkBuf<S>,
    ) -> Option<[u8; SALT_LEN]> {
        if self.has_header() || self.header_len + buf.len() < HEADER_LEN {
            return None;
        }
        let mut header = self.header;
        let take = HEADER_LEN - self.header_len;
        header[self.header_len..].copy_from_slice(&buf.as_slice()[..take]);
        salt_of(&header)
    }

    /// Takes header bytes from the front of `buf`. Returns the salt once,
    /// when the header becomes complete; `None` before (then `buf` is
    /// empty) and after. A wrong magic fails as soon as its bytes are
    /// seen.
    pub fn take_header<S: AsRef<[u8]> + AsMut<[u8]>>(
        &mut self,
        buf: &mut ChunkBuf<S>,
    ) -> Result<Option<[u8; SALT_LEN]>, FormatError> {
        if self.has_header() {
            return Ok(None);
        }
        let take = (HEADER_LEN - self.header_len).min(buf.len());
        self.header[self.header_len..self.header_len + take]
            .copy_from_slice(&buf.as_slice()[..take]);
        self.header_len += take;
        buf.advance(take);
        let seen = self.header_len.min(SALTED_MAGIC.len());
        if self.header[..seen] != SALTED_MAGIC[..seen] {
            return Err(FormatError::MissingHeader);
        }
        if !self.has_header() {
            return Ok(None);
        }
        Ok(salt_of(&self.header))
    }

    /// Ciphertext after the header: puts the carried bytes in front of
    /// `buf` and holds back its partial last block, or its last whole
    /// block: `buf` then holds whole blocks to decrypt in place, in order
    /// (possibly none).
    pub fn hold_back<S: AsRef<[u8]> + AsMut<[u8]>>(&mut self, buf: &mut ChunkBuf<S>) {
        self.ciphertext_len += buf.len() as u64;
        let mut keep = (self.carry_len + buf.len()) % BLOCK;
        if keep == 0 && self.carry_len + buf.len() > 0 {
            keep = BLOCK;
        }
        self.carry_len = buf.exchange_tail(&mut self.carry, self.carry_len, keep);
    }

    /// The end of the input: checks the header and the ciphertext's
    /// length and puts the held-back block in `buf` (cleared first), to be
    /// decrypted and then unpadded with [`unpadded_len`].
    pub fn last_block<S: AsRef<[u8]> + AsMut<[u8]>>(
        &mut self,
        buf: &mut ChunkBuf<S>,
    ) -> Result<(), FormatError> {
        buf.clear();
        if !self.has_header() {
            return Err(FormatError::MissingHeader);
        }
        if self.ciphertext_len == 0 || self.ciphertext_len % BLOCK as u64 != 0 {
            return Err(FormatError::BadLength {
                len: self.ciphertext_len,
            });
        }
        buf.prepend(&self.carry[..self.carry_len]);
        self.carry.zeroize();
        self.carry_len = 0;
        Ok(())
    }
}

/// The salt of a complete header, if it starts with `Salted__`.
fn salt_of(header: &[u8; HEADER_LEN]) -> Option<[u8; SALT_LEN]> {
    if header[..SALTED_MAGIC.len()] != SALTED_MAGIC {
        return None;
    }
    let mut salt = [0u8; SALT_LEN];
    salt.copy_from_slice(&header[SALTED_MAGIC.len()..]);
    Some(salt)
}

/// The plaintext length of a decrypted last block with valid PKCS#7
/// padding. Every byte is inspected whatever the padding looks like, so the
/// time taken does not depend on where the padding is wrong.
pub fn unpadded_len(block: &[u8; BLOCK]) -> Option<usize> {
    let pad = block[BLOCK - 1];
    let mut bad = u8::from(pad == 0) | u8::from(usize::from(pad) > BLOCK);
    for (index, byte) in block.iter().enumerate() {
        let in_padding = u8::from(BLOCK - index <= usize::from(pad));
        bad |= in_padding & u8::from(*byte != pad);
    }
    (bad == 0).then(|| BLOCK - usize::from(pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Buf = ChunkBuf<[u8; 96]>;

    fn buf(payload: &[u8]) -> Buf {
        let mut buf = ChunkBuf::new([0u8; 96]);
        buf.payload_mut(payload.len()).copy_from_slice(payload);
        buf
    }

    /// The framing alone (no AES): chunks in any size give the same whole
    /// blocks, in order, and the padded tail.
    #[test]
    fn encryption_framing_yields_whole_blocks_and_the_padding() {
        let plain: Vec<u8> = (0..61u8).collect();
        for chunk in [1, 5, 16, 17, 61] {
            let mut framing = EncryptFraming::new();
            let mut out = Vec::new();
            for piece in plain.chunks(chunk) {
                let mut b = buf(piece);
                framing.begin_chunk(&mut b);
                assert_eq!(b.len() % BLOCK, 0, "chunk {chunk}");
                out.extend_from_slice(b.as_slice());
            }
            let mut b = buf(&[]);
            framing.last_block(&mut b);
            out.extend_from_slice(b.as_slice());
            let mut expected = plain.clone();
            expected.extend_from_slice(&[3, 3, 3]);
            assert_eq!(out, expected, "chunk {chunk}");
        }
        let mut framing = EncryptFraming::new();
        let mut b = buf(&[7; 32]);
        framing.begin_chunk(&mut b);
        framing.last_block(&mut b);
        assert_eq!(
            b.as_slice(),
            &[16; 16],
            "a whole-block input gets a whole padding block"
        );
    }

    #[test]
    fn decryption_framing_reads_the_header_and_holds_back_the_last_block() {
        let mut file = header(&[9; 8]).to_vec();
        file.extend((0..48u8).map(|i| i ^ 0x5a));
        for chunk in [1, 7, 16, 17, 64] {
            let mut framing = DecryptFraming::new();
            let mut blocks = Vec::new();
            let mut salt = None;
            for piece in file.chunks(chunk) {
                let mut b = buf(piece);
                if let Some(found) = framing.take_header(&mut b).expect("header") {
                    salt = Some(found);
                }
                if framing.has_header() {
                    framing.hold_back(&mut b);
                    assert_eq!(b.len() % BLOCK, 0);
                    blocks.extend_from_slice(b.as_slice());
                }
            }
            assert_eq!(salt, Some([9; 8]), "chunk {chunk}");
            assert_eq!(
                blocks,
                file[16..48],
                "chunk {chunk}: all but the last block"
            );
            let mut b = buf(&[]);
            framing.last_block(&mut b).expect("whole blocks");
            assert_eq!(b.as_slice(), &file[48..], "chunk {chunk}: the last block");
        }
    }

    #[test]
    fn header_and_length_errors_are_told_apart() {
        let mut framing = DecryptFraming::new();
        assert_eq!(
            framing.take_header(&mut buf(b"Salted_!")),
            Err(FormatError::MissingHeader)
        );
        let mut framing = DecryptFraming::new();
        assert_eq!(framing.take_header(&mut buf(b"Salt")), Ok(None));
        assert_eq!(
            framing.last_block(&mut buf(&[])),
            Err(FormatError::MissingHeader)
        );
        let mut framing = DecryptFraming::new();
        let mut b = buf(b"Salted__12345678");
        assert!(framing.salt_ahead(&b).is_some());
        assert_eq!(framing.take_header(&mut b), Ok(Some(*b"12345678")));
        assert_eq!(
            framing.last_block(&mut buf(&[])),
            Err(FormatError::BadLength { len: 0 })
        );
        let mut framing = DecryptFraming::new();
        let mut b = buf(&[b"Salted__12345678".as_slice(), &[0; 17]].concat());
        framing.take_header(&mut b).expect("header");
        framing.hold_back(&mut b);
        assert_eq!(
            framing.last_block(&mut buf(&[])),
            Err(FormatError::BadLength { len: 17 })
        );
    }

    #[test]
    fn padding_check_accepts_only_pkcs7() {
        let mut block = [0u8; 16];
        block[15] = 1;
        assert_eq!(unpadded_len(&block), Some(15));
        block = [16; 16];
        assert_eq!(unpadded_len(&block), Some(0));
        block[0] = 15;
        assert_eq!(unpadded_len(&block), None);
        block = [0; 16];
        assert_eq!(unpadded_len(&block), None);
        block[15] = 17;
        assert_eq!(unpadded_len(&block), None);
        block[14] = 3;
        block[15] = 2;
        assert_eq!(unpadded_len(&block), None);
    }
}
