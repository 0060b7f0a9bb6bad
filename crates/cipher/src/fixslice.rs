//! Constant-time fixsliced AES-256 encryption whose lanes carry different
//! keys.
//!
//! # Representation
//!
//! The state of [`LANES`] blocks is held in 8 words, one per bit of a byte
//! ("bit planes"): plane `j` holds bit `j` of every byte of every lane. In a
//! plane, the bit of the byte at row `i`, column `c` of lane `l` sits at
//! position `l + L·c + 4L·i` (`L` = [`LANES`]): each row is a group of
//! `4L` bits, and inside a group the columns follow one another with the
//! lanes interleaved. SubBytes is then a Boolean circuit on the 8 planes
//! (the 113-gate circuit of Boyar, Peralta and Calik), with no table and no
//! branch; the byte at row `i + 1` is a rotation of the word by `4L` bits.
//! The circuits themselves (SubBytes, MixColumns from a frame's neighbour
//! maps, the transposition into planes) are in `circuit`, generic over
//! the plane type: the crate's build script runs the same code to write
//! the riscv32 kernel (`cbc::rv32`).
//!
//! # Fixslicing
//!
//! ShiftRows is never applied. After round `k` the bytes are stored in
//! "frame" `k mod 4`: the byte of the true state at row `i`, column `c`
//! sits at column `c + k·i (mod 4)`. MixColumns in frame `r` then takes the
//! byte `k` rows below from `k·r` columns further right, which is again a
//! fixed rotation (of the rows, and of the columns inside each row group),
//! so each frame has its own MixColumns ([`mix_columns`]`::<R>`), and each
//! round key is stored in its round's frame (the key schedule moves its
//! bytes, a fixed public permutation). After the last round (frame 14 mod 4
//! = 2) the output bytes are moved back (ShiftRows twice).
//!
//! # Lanes with different keys
//!
//! A key's round keys are packed into lane 0 only ([`KeySchedule`]); the
//! schedule of a call is the OR of each lane's keys shifted to its lane
//! ([`LaneKeys`]): 120 words, cheap next to even one block.
//!
//! The 4 NOT gates of the S-box circuit are folded into the round keys
//! (MixColumns maps a state of equal bytes to itself, so a complement
//! pattern passes through it unchanged).

use zeroize::Zeroize;

mod circuit;

/// The machine word the planes live in: 2 lanes in a `u32` on 32-bit
/// targets, 4 lanes in a `u64` on 64-bit ones.
#[cfg(target_pointer_width = "64")]
pub type Word = u64;
/// The machine word the planes live in: 2 lanes in a `u32` on 32-bit
/// targets, 4 lanes in a `u64` on 64-bit ones.
#[cfg(not(target_pointer_width = "64"))]
pub type Word = u32;

/// Blocks (and keys) processed together per call.
pub const LANES: usize = Word::BITS as usize / 16;

/// Bits per row group in a plane.
const GROUP: u32 = 4 * LANES as u32;

/// AES-256 rounds.
const ROUNDS: usize = 14;

/// Words of a packed key schedule: 15 round keys of 8 planes.
const SCHEDULE_WORDS: usize = (ROUNDS + 1) * 8;

/// A block of 16 bytes.
pub type Block = [u8; 16];

/// A block as 4 little-endian words: word `c` is column `c`, its byte `i`
/// (bits `8i..8i + 8`) row `i`.
pub type BlockWords = [u32; 4];

/// The words of a block.
#[inline(always)]
pub fn block_words(block: &[u8]) -> BlockWords {
    core::array::from_fn(|c| {
        u32::from_le_bytes([
            block[4 * c],
            block[4 * c + 1],
            block[4 * c + 2],
            block[4 * c + 3],
        ])
    })
}

/// Writes the words of a block as its 16 bytes.
#[inline(always)]
pub fn store_block(words: &BlockWords, out: &mut [u8]) {
    for (c, word) in words.iter().enumerate() {
        out[4 * c..4 * c + 4].copy_from_slice(&word.to_le_bytes());
    }
}

/// Planes with a bit set for every byte position of lane 0.
const LANE0: Word = {
    let mut mask: Word = 0;
    let mut bit = 0;
    while bit < Word::BITS {
        mask |= 1 << bit;
        bit += LANES as u32;
    }
    mask
};

/// Per row group, the bits that stay inside the group when it is rotated
/// right by `shift` bits (the low `GROUP - shift` bits of each group).
const fn group_low_mask(shift: u32) -> Word {
    let mut mask: Word = 0;
    let mut group = 0;
    while group < Word::BITS / GROUP {
        let mut bit = 0;
        while bit < GROUP - shift {
            mask |= 1 << (group * GROUP + bit);
            bit += 1;
        }
        group += 1;
    }
    mask
}

/// Every row group of `x` rotated right by `shift` bits (`0 < shift <
/// GROUP`): two shifts and a merge through one mask (the low `GROUP -
/// shift` bits of each group come from the right shift).
#[inline(always)]
fn rotate_groups(x: Word, shift: u32, low: Word) -> Word {
    let right = x >> shift;
    let left = x << (GROUP - shift);
    left ^ ((left ^ right) & low)
}

/// The plane of the byte `ROWS` rows below and `ROWS·R` columns to the
/// right, in frame `R` (see the module documentation): every row group
/// rotated right by `L·(ROWS·R mod 4)` bits, then the word by `4L·ROWS`.
#[inline(always)]
fn neighbour<const R: u32, const ROWS: u32>(x: Word) -> Word {
    let shift = const { LANES as u32 * ((ROWS * R) % 4) };
    let x = if shift == 0 {
        x
    } else {
        rotate_groups(
            x,
            shift,
            const { group_low_mask(LANES as u32 * ((ROWS * R) % 4)) },
        )
    };
    x.rotate_right(GROUP * ROWS)
}

/// MixColumns in frame `R` ([`circuit::mix_columns`] with this frame's
/// neighbour maps).
#[inline(always)]
fn mix_columns<const R: u32>(state: &mut [Word; 8]) {
    circuit::mix_columns(state, neighbour::<R, 1>, neighbour::<R, 2>);
}

/// SubBytes on the 8 planes ([`circuit::sub_bytes`]).
#[inline(always)]
fn sub_bytes(state: &mut [Word; 8]) {
    circuit::sub_bytes(state);
}

/// The planes whose S-box output is complemented (S1, S2, S6, S7: bits 6,
/// 5, 1, 0), applied through the round keys of rounds 1 to 14.
const NOT_PLANES: [usize; 4] = [0, 1, 5, 6];

/// [`circuit::transpose_bytes`] on words.
#[inline(always)]
fn transpose_bytes(x: &mut [u32; 8]) {
    circuit::transpose_bytes(x, [0x5555_5555, 0x3333_3333, 0x0f0f_0f0f]);
}

/// Packs [`LANES`] blocks into planes (each block's bytes are column-major:
/// byte `4c + i` is row `i`, column `c`).
#[inline(always)]
fn pack(blocks: &[BlockWords; LANES]) -> [Word; 8] {
    // Word m = lane + L·c of one 8-lane-column group holds column c of a
    // lane, row i in byte i; the transpose turns that into bit planes with
    // bit m of byte i, i.e. position m + 8i.
    let mut planes = [0 as Word; 8];
    for half in 0..LANES / 2 {
        let mut x = [0u32; 8];
        for (m, word) in x.iter_mut().enumerate() {
            let lane = half * 2 + m % 2;
            *word = blocks[lane][m / 2];
        }
        transpose_bytes(&mut x);
        for (plane, word) in planes.iter_mut().zip(x) {
            *plane |= spread(word, half);
        }
    }
    planes
}

/// Unpacks planes into [`LANES`] blocks (the inverse of [`pack`]).
#[inline(always)]
fn unpack(planes: &[Word; 8]) -> [BlockWords; LANES] {
    let mut blocks = [[0u32; 4]; LANES];
    for half in 0..LANES / 2 {
        let mut x = [0u32; 8];
        for (word, plane) in x.iter_mut().zip(planes) {
            *word = gather(*plane, half);
        }
        transpose_bytes(&mut x);
        for (m, word) in x.iter().enumerate() {
            blocks[half * 2 + m % 2][m / 2] = *word;
        }
    }
    blocks
}

/// Places a 32-bit plane of lanes `2h, 2h + 1` (2 lanes: position
/// `lane + 2c + 8i`) at its positions in a [`Word`] of [`LANES`] lanes.
#[inline(always)]
fn spread(word: u32, half: usize) -> Word {
    if LANES == 2 {
        return word as Word;
    }
    // 4 lanes: position lane + 4c + 16i. Byte i moves to row group i, and
    // inside it the bit pair of column c from bit 2c to bit 4c + 2h.
    let mut x = u64::from(word);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x << (2 * half)) as Word
}

/// The inverse of [`spread`]: the 32-bit plane of lanes `2h, 2h + 1`.
#[allow(clippy::unnecessary_cast)]
#[inline(always)]
fn gather(plane: Word, half: usize) -> u32 {
    if LANES == 2 {
        return plane as u32;
    }
    let mut x = ((plane as u64) >> (2 * half)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    x = (x | (x >> 16)) & 0x0000_0000_ffff_ffff;
    x as u32
}

/// The bytes of `block` (in frame 0) moved to frame `r`: the byte at row
/// `i`, column `c` goes to column `c + r·i (mod 4)`.
fn to_frame(block: &Block, r: usize) -> Block {
    let mut out = [0u8; 16];
    for column in 0..4 {
        for row in 0..4 {
            out[4 * ((column + r * row) % 4) + row] = block[4 * column + row];
        }
    }
    out
}

/// A block in frame 2 (after the last round) moved back to the AES byte
/// order (ShiftRows applied twice): rows 0 and 2 stay, rows 1 and 3 of
/// columns `c` and `c + 2` change places.
#[inline(always)]
fn from_frame_2(block: &mut BlockWords) {
    for c in 0..2 {
        let swap = (block[c] ^ block[c + 2]) & 0xff00_ff00;
        block[c] ^= swap;
        block[c + 2] ^= swap;
    }
}

/// One key's round keys, in their rounds' frames, in lane 0 of the planes;
/// wiped when dropped.
#[derive(Clone)]
pub struct KeySchedule {
    words: [Word; SCHEDULE_WORDS],
}

impl Drop for KeySchedule {
    fn drop(&mut self) {
        self.words.zeroize();
    }
}

impl KeySchedule {
    /// Expands an AES-256 key (FIPS-197 key expansion, SubWord through the
    /// bitsliced S-box: no table, no branch on the key).
    pub fn new(key: &[u8; 32]) -> Self {
        let mut round_keys = expand(key);
        let mut words = [0 as Word; SCHEDULE_WORDS];
        for (round, round_key) in round_keys.iter().enumerate() {
            let mut lanes = [[0u32; 4]; LANES];
            lanes[0] = block_words(&to_frame(round_key, round % 4));
            let mut planes = pack(&lanes);
            if round > 0 {
                for plane in NOT_PLANES {
                    planes[plane] ^= LANE0;
                }
            }
            lanes[0].zeroize();
            words[round * 8..round * 8 + 8].copy_from_slice(&planes);
            planes.zeroize();
        }
        round_keys.zeroize();
        KeySchedule { words }
    }
}

/// The round keys of one call: each lane's key in its lane.
pub struct LaneKeys {
    words: [Word; SCHEDULE_WORDS],
}

impl Drop for LaneKeys {
    fn drop(&mut self) {
        self.words.zeroize();
    }
}

impl LaneKeys {
    /// The merged round keys: round `r`'s plane `j` at `8r + j` (what the
    /// riscv32 kernel's record is built from).
    #[cfg(all(target_arch = "riscv32", not(target_feature = "e")))]
    pub(crate) fn words(&self) -> &[Word; SCHEDULE_WORDS] {
        &self.words
    }

    /// Merges up to [`LANES`] keys; lane `l` gets `keys[l]` (lanes without
    /// a key get all-zero round keys, and their output is meaningless).
    pub fn new(keys: &[&KeySchedule]) -> Self {
        let mut words = [0 as Word; SCHEDULE_WORDS];
        for (lane, key) in keys.iter().enumerate().take(LANES) {
            for (word, own) in words.iter_mut().zip(key.words.iter()) {
                *word |= *own << lane;
            }
        }
        LaneKeys { words }
    }

    /// Encrypts one block per lane.
    pub fn encrypt(&self, blocks: &[BlockWords; LANES]) -> [BlockWords; LANES] {
        self.encrypt_inline(blocks)
    }

    /// [`Self::encrypt`], inlined into its caller (the CBC loop over
    /// aligned words, where the loop and the AES must be one piece of
    /// code: see `cbc::encrypt_words`).
    #[inline(always)]
    pub(crate) fn encrypt_inline(&self, blocks: &[BlockWords; LANES]) -> [BlockWords; LANES] {
        let mut state = pack(blocks);
        rounds(&mut state, &self.words);
        // The planes now hold the ciphertext: public, nothing to wipe.
        let mut blocks = unpack(&state);
        for block in blocks.iter_mut() {
            from_frame_2(block);
        }
        blocks
    }
}

/// The 14 rounds on packed planes, two rounds per turn of a loop (as the
/// riscv32 kernel has them): a round's frame (which MixColumns it takes)
/// depends on the public round number only. The first round of a turn is
/// in frame 1 or 3, the second in frame 2 or 0.
#[inline(always)]
fn rounds(state: &mut [Word; 8], rk: &[Word; SCHEDULE_WORDS]) {
    add_round_key(state, &rk[0..8]);
    // Rounds `round` and `round + 1`: frames 1 and 2 when round % 4 == 1,
    // frames 3 and 0 when round % 4 == 3.
    let mut round = 1;
    loop {
        sub_bytes(state);
        if round % 4 == 1 {
            mix_columns::<1>(state);
        } else {
            mix_columns::<3>(state);
        }
        add_round_key(state, &rk[round * 8..round * 8 + 8]);
        sub_bytes(state);
        if round + 1 == ROUNDS {
            break;
        }
        if round % 4 == 1 {
            mix_columns::<2>(state);
        } else {
            mix_columns::<0>(state);
        }
        add_round_key(state, &rk[round * 8 + 8..round * 8 + 16]);
        round += 2;
    }
    // The last round has no MixColumns; its output is in frame 2.
    add_round_key(state, &rk[ROUNDS * 8..]);
}

#[inline(always)]
fn add_round_key(state: &mut [Word; 8], round_key: &[Word]) {
    for (plane, key) in state.iter_mut().zip(round_key) {
        *plane ^= *key;
    }
}

/// SubBytes on up to 4 bytes, through the bitsliced circuit (for the key
/// schedule's SubWord).
fn sub_word(word: [u8; 4]) -> [u8; 4] {
    let mut planes = [0 as Word; 8];
    for (index, byte) in word.iter().enumerate() {
        for (bit, plane) in planes.iter_mut().enumerate() {
            *plane |= Word::from((byte >> bit) & 1) << index;
        }
    }
    sub_bytes(&mut planes);
    for plane in NOT_PLANES {
        planes[plane] ^= 0b1111;
    }
    let mut out = [0u8; 4];
    for (index, byte) in out.iter_mut().enumerate() {
        for (bit, plane) in planes.iter().enumerate() {
            *byte |= (((plane >> index) & 1) as u8) << bit;
        }
    }
    planes.zeroize();
    out
}

/// The FIPS-197 AES-256 key expansion: 15 round keys.
pub(crate) fn expand(key: &[u8; 32]) -> [Block; ROUNDS + 1] {
    let mut words = [[0u8; 4]; 4 * (ROUNDS + 1)];
    for (index, word) in words.iter_mut().take(8).enumerate() {
        word.copy_from_slice(&key[4 * index..4 * index + 4]);
    }
    let mut rcon = 1u8;
    for index in 8..words.len() {
        let mut temp = words[index - 1];
        if index % 8 == 0 {
            temp = sub_word([temp[1], temp[2], temp[3], temp[0]]);
            temp[0] ^= rcon;
            rcon = (rcon << 1) ^ (0x1b * (rcon >> 7));
        } else if index % 8 == 4 {
            temp = sub_word(temp);
        }
        for byte in 0..4 {
            words[index][byte] = words[index - 8][byte] ^ temp[byte];
        }
    }
    let mut round_keys = [[0u8; 16]; ROUNDS + 1];
    for (round, round_key) in round_keys.iter_mut().enumerate() {
        for column in 0..4 {
            round_key[4 * column..4 * column + 4].copy_from_slice(&words[4 * round + column]);
        }
    }
    words.zeroize();
    round_keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

    fn reference(key: &[u8; 32], block: &Block) -> Block {
        let cipher = aes::Aes256::new(&Array::from(*key));
        let mut out = Array::from(*block);
        cipher.encrypt_block(&mut out);
        out.into()
    }

    fn encrypt(keys: &LaneKeys, blocks: &[Block; LANES]) -> [Block; LANES] {
        let words = blocks.map(|block| block_words(&block));
        keys.encrypt(&words).map(|words| {
            let mut block = [0u8; 16];
            store_block(&words, &mut block);
            block
        })
    }

    /// A tiny deterministic generator for test data.
    fn bytes<const N: usize>(seed: &mut u64) -> [u8; N] {
        let mut out = [0u8; N];
        for byte in out.iter_mut() {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *byte = (*seed >> 24) as u8;
        }
        out
    }

    #[test]
    fn packing_round_trips() {
        let mut seed = 1;
        let blocks: [BlockWords; LANES] =
            core::array::from_fn(|_| block_words(&bytes::<16>(&mut seed)));
        assert_eq!(unpack(&pack(&blocks)), blocks);
    }

    #[test]
    fn sub_word_is_the_aes_s_box() {
        // FIPS-197 figure 7: S(0x00) = 0x63, S(0x53) = 0xed, S(0xff) = 0x16.
        assert_eq!(sub_word([0x00, 0x53, 0xff, 0x01]), [0x63, 0xed, 0x16, 0x7c]);
    }

    /// The AES S-box from its definition (FIPS-197 5.1.1): the inverse in
    /// GF(2^8) (0 to 0), then the affine map.
    fn s_box(byte: u8) -> u8 {
        let multiply = |mut a: u8, mut b: u8| {
            let mut product = 0;
            while b != 0 {
                if b & 1 != 0 {
                    product ^= a;
                }
                a = (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 };
                b >>= 1;
            }
            product
        };
        let inverse = (1..=255).find(|&x| multiply(byte, x) == 1).unwrap_or(0);
        inverse
            ^ inverse.rotate_left(1)
            ^ inverse.rotate_left(2)
            ^ inverse.rotate_left(3)
            ^ inverse.rotate_left(4)
            ^ 0x63
    }

    #[test]
    fn the_s_box_circuit_is_the_aes_s_box_for_every_byte() {
        for first in (0..=255u8).step_by(4) {
            let bytes: [u8; 4] = core::array::from_fn(|i| first + i as u8);
            assert_eq!(sub_word(bytes), bytes.map(s_box), "bytes from {first:#04x}");
        }
    }

    #[test]
    fn fips_197_c3_aes_256() {
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let plain: Block = core::array::from_fn(|i| (i as u8) * 0x11);
        let schedule = KeySchedule::new(&key);
        let keys = LaneKeys::new(&[&schedule; LANES]);
        let out = encrypt(&keys, &[plain; LANES]);
        let expected = [
            0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49,
            0x60, 0x89,
        ];
        for lane in out {
            assert_eq!(lane, expected);
        }
    }

    #[test]
    fn every_lane_matches_the_aes_crate_with_its_own_key() {
        let mut seed = 0x5eed;
        for _ in 0..200 {
            let keys: [[u8; 32]; LANES] = core::array::from_fn(|_| bytes::<32>(&mut seed));
            let blocks: [Block; LANES] = core::array::from_fn(|_| bytes::<16>(&mut seed));
            let schedules: [KeySchedule; LANES] =
                core::array::from_fn(|l| KeySchedule::new(&keys[l]));
            let refs: [&KeySchedule; LANES] = core::array::from_fn(|l| &schedules[l]);
            let out = encrypt(&LaneKeys::new(&refs), &blocks);
            for lane in 0..LANES {
                assert_eq!(
                    out[lane],
                    reference(&keys[lane], &blocks[lane]),
                    "lane {lane}"
                );
            }
        }
    }

    #[test]
    fn fewer_keys_than_lanes_leave_the_given_lanes_right() {
        let mut seed = 77;
        let key = bytes::<32>(&mut seed);
        let block = bytes::<16>(&mut seed);
        let schedule = KeySchedule::new(&key);
        let mut blocks = [[0u8; 16]; LANES];
        blocks[0] = block;
        let out = encrypt(&LaneKeys::new(&[&schedule]), &blocks);
        assert_eq!(out[0], reference(&key, &block));
    }
}
