//! AES-256 and CBC on the AES instruction, generic over who executes it
//! (the [model](crate::model) in tests, the CPU on the board).
//!
//! State and round keys are AES columns as little-endian words: row `r` in
//! byte `r` (`u32::from_le_bytes` of the column's 4 bytes, what `lw` reads),
//! the layout of the plugin's tables. A round is 16 instructions: output
//! column `c` starts from the round key and takes row `r` from column
//! `c + r` (ShiftRows) for encryption, `c - r` for decryption, with byte
//! select `r`. Decryption is FIPS-197's
//! equivalent inverse cipher (InvMixColumns applied to the middle round
//! keys, computed with the instruction too). Two independent blocks are
//! interleaved where the data allows it (two CBC chains, or two blocks of
//! one chain's decryption), so one instruction's result is not needed by
//! the next: the plugin writes its result late (memory stage).

use zeroize::Zeroize;

use crate::insn::AesInstruction;

/// AES-256 rounds.
const ROUNDS: usize = 14;

/// Words of an expanded key.
pub(crate) const KEY_WORDS: usize = 4 * (ROUNDS + 1);

/// A block as 4 little-endian column words (row `r` in byte `r`).
pub type State = [u32; 4];

/// The words of a 16-byte block.
#[inline(always)]
pub fn load(block: &[u8]) -> State {
    core::array::from_fn(|c| {
        u32::from_le_bytes([
            block[4 * c],
            block[4 * c + 1],
            block[4 * c + 2],
            block[4 * c + 3],
        ])
    })
}

/// Writes a state as its 16 bytes.
#[inline(always)]
pub fn store(state: &State, out: &mut [u8]) {
    for (c, word) in state.iter().enumerate() {
        out[4 * c..4 * c + 4].copy_from_slice(&word.to_le_bytes());
    }
}

/// An expanded AES-256 key: encryption round keys and the equivalent
/// inverse cipher's round keys (the CPU's CBC kernels read them as they
/// are); wiped when dropped.
#[derive(Clone)]
pub struct Aes256Key {
    encrypt: [u32; KEY_WORDS],
    decrypt: [u32; KEY_WORDS],
}

impl Drop for Aes256Key {
    fn drop(&mut self) {
        self.encrypt.zeroize();
        self.decrypt.zeroize();
    }
}

/// SubWord: the S-box on each byte, in place (4 last-round instructions).
#[inline(always)]
fn sub_word<I: AesInstruction>(word: u32) -> u32 {
    I::enc_last::<0>(0, word)
        ^ I::enc_last::<1>(0, word)
        ^ I::enc_last::<2>(0, word)
        ^ I::enc_last::<3>(0, word)
}

/// InvMixColumns of a column: InvMixColumns(S⁻¹(S(x))).
#[inline(always)]
fn inv_mix_column<I: AesInstruction>(word: u32) -> u32 {
    let s = sub_word::<I>(word);
    I::dec::<0>(0, s) ^ I::dec::<1>(0, s) ^ I::dec::<2>(0, s) ^ I::dec::<3>(0, s)
}

impl Aes256Key {
    /// FIPS-197 key expansion, SubWord through the instruction.
    pub fn new<I: AesInstruction>(key: &[u8; 32]) -> Self {
        let mut encrypt = [0u32; KEY_WORDS];
        for (i, word) in encrypt.iter_mut().take(8).enumerate() {
            *word =
                u32::from_le_bytes([key[4 * i], key[4 * i + 1], key[4 * i + 2], key[4 * i + 3]]);
        }
        let mut rcon = 1u8;
        for i in 8..KEY_WORDS {
            let mut temp = encrypt[i - 1];
            if i % 8 == 0 {
                // RotWord moves row 1 to row 0: byte 1 to byte 0.
                temp = sub_word::<I>(temp.rotate_right(8)) ^ u32::from(rcon);
                rcon = (rcon << 1) ^ (0x1b * (rcon >> 7));
            } else if i % 8 == 4 {
                temp = sub_word::<I>(temp);
            }
            encrypt[i] = encrypt[i - 8] ^ temp;
        }
        let mut decrypt = [0u32; KEY_WORDS];
        for round in 0..=ROUNDS {
            let from = &encrypt[4 * (ROUNDS - round)..4 * (ROUNDS - round) + 4];
            for c in 0..4 {
                decrypt[4 * round + c] = if round == 0 || round == ROUNDS {
                    from[c]
                } else {
                    inv_mix_column::<I>(from[c])
                };
            }
        }
        Aes256Key { encrypt, decrypt }
    }

    /// The encryption schedule as the CPU's CBC kernel reads it.
    #[cfg(target_arch = "riscv32")]
    pub(crate) fn encrypt_schedule(&self) -> &[u32; KEY_WORDS] {
        &self.encrypt
    }

    /// The decryption schedule as the CPU's CBC kernel reads it.
    #[cfg(target_arch = "riscv32")]
    pub(crate) fn decrypt_schedule(&self) -> &[u32; KEY_WORDS] {
        &self.decrypt
    }
}

/// One encryption round of a state (`LAST` without MixColumns).
#[inline(always)]
fn encrypt_round<I: AesInstruction, const LAST: bool>(s: &State, key: &[u32]) -> State {
    core::array::from_fn(|c| {
        let (r0, r1, r2, r3) = (s[c], s[(c + 1) % 4], s[(c + 2) % 4], s[(c + 3) % 4]);
        if LAST {
            let t = I::enc_last::<0>(key[c], r0);
            let t = I::enc_last::<1>(t, r1);
            let t = I::enc_last::<2>(t, r2);
            I::enc_last::<3>(t, r3)
        } else {
            let t = I::enc::<0>(key[c], r0);
            let t = I::enc::<1>(t, r1);
            let t = I::enc::<2>(t, r2);
            I::enc::<3>(t, r3)
        }
    })
}

/// One decryption round (equivalent inverse cipher; `LAST` without
/// InvMixColumns).
#[inline(always)]
fn decrypt_round<I: AesInstruction, const LAST: bool>(s: &State, key: &[u32]) -> State {
    core::array::from_fn(|c| {
        let (r0, r1, r2, r3) = (s[c], s[(c + 3) % 4], s[(c + 2) % 4], s[(c + 1) % 4]);
        if LAST {
            let t = I::dec_last::<0>(key[c], r0);
            let t = I::dec_last::<1>(t, r1);
            let t = I::dec_last::<2>(t, r2);
            I::dec_last::<3>(t, r3)
        } else {
            let t = I::dec::<0>(key[c], r0);
            let t = I::dec::<1>(t, r1);
            let t = I::dec::<2>(t, r2);
            I::dec::<3>(t, r3)
        }
    })
}

#[inline(always)]
fn xor(a: &State, b: &[u32]) -> State {
    core::array::from_fn(|c| a[c] ^ b[c])
}

/// Encrypts two blocks, each with its key, their rounds interleaved.
#[inline(always)]
pub fn encrypt2<I: AesInstruction>(
    k0: &Aes256Key,
    b0: &State,
    k1: &Aes256Key,
    b1: &State,
) -> (State, State) {
    let mut s0 = xor(b0, &k0.encrypt[..4]);
    let mut s1 = xor(b1, &k1.encrypt[..4]);
    for round in 1..ROUNDS {
        let key = 4 * round..4 * round + 4;
        let n0 = encrypt_round::<I, false>(&s0, &k0.encrypt[key.clone()]);
        let n1 = encrypt_round::<I, false>(&s1, &k1.encrypt[key]);
        s0 = n0;
        s1 = n1;
    }
    let last = 4 * ROUNDS..4 * ROUNDS + 4;
    (
        encrypt_round::<I, true>(&s0, &k0.encrypt[last.clone()]),
        encrypt_round::<I, true>(&s1, &k1.encrypt[last]),
    )
}

/// Encrypts one block.
#[inline(always)]
pub fn encrypt<I: AesInstruction>(key: &Aes256Key, block: &State) -> State {
    let mut s = xor(block, &key.encrypt[..4]);
    for round in 1..ROUNDS {
        s = encrypt_round::<I, false>(&s, &key.encrypt[4 * round..4 * round + 4]);
    }
    encrypt_round::<I, true>(&s, &key.encrypt[4 * ROUNDS..4 * ROUNDS + 4])
}

/// Decrypts two blocks with one key, their rounds interleaved.
#[inline(always)]
pub fn decrypt2<I: AesInstruction>(key: &Aes256Key, b0: &State, b1: &State) -> (State, State) {
    let mut s0 = xor(b0, &key.decrypt[..4]);
    let mut s1 = xor(b1, &key.decrypt[..4]);
    for round in 1..ROUNDS {
        let round_key = &key.decrypt[4 * round..4 * round + 4];
        let n0 = decrypt_round::<I, false>(&s0, round_key);
        let n1 = decrypt_round::<I, false>(&s1, round_key);
        s0 = n0;
        s1 = n1;
    }
    let last = &key.decrypt[4 * ROUNDS..4 * ROUNDS + 4];
    (
        decrypt_round::<I, true>(&s0, last),
        decrypt_round::<I, true>(&s1, last),
    )
}

/// Decrypts one block.
#[inline(always)]
pub fn decrypt<I: AesInstruction>(key: &Aes256Key, block: &State) -> State {
    let mut s = xor(block, &key.decrypt[..4]);
    for round in 1..ROUNDS {
        s = decrypt_round::<I, false>(&s, &key.decrypt[4 * round..4 * round + 4]);
    }
    decrypt_round::<I, true>(&s, &key.decrypt[4 * ROUNDS..4 * ROUNDS + 4])
}

/// One CBC encryption chain's part of a call (whole blocks, in place; the
/// IV is updated so the chain continues).
pub struct CbcLane<'a> {
    /// The chain's key.
    pub key: &'a Aes256Key,
    /// The chaining value.
    pub iv: &'a mut [u8; 16],
    /// Whole blocks, plaintext in, ciphertext out.
    pub data: &'a mut [u8],
}

/// Encrypts CBC chains, each with its key, IV and data, through `I`
/// ([`AesInstruction::cbc_encrypt_lanes`]: the CPU runs its assembly
/// kernel, the model the generic rounds).
///
/// # Panics
/// If a lane's data is not whole blocks.
pub fn cbc_encrypt_lanes<I: AesInstruction>(lanes: &mut [CbcLane<'_>]) {
    assert!(
        lanes.iter().all(|lane| lane.data.len() % 16 == 0),
        "CBC data must be whole blocks"
    );
    I::cbc_encrypt_lanes(lanes);
}

/// Decrypts whole CBC blocks in place through `I`
/// ([`AesInstruction::cbc_decrypt`]); the IV is updated to the last
/// ciphertext block.
///
/// # Panics
/// If the data is not whole blocks.
pub fn cbc_decrypt<I: AesInstruction>(key: &Aes256Key, iv: &mut [u8; 16], data: &mut [u8]) {
    assert!(data.len() % 16 == 0, "CBC data must be whole blocks");
    I::cbc_decrypt(key, iv, data);
}

/// [`cbc_encrypt_lanes`] in Rust on the instruction's four forms: two
/// chains are interleaved while both have blocks, more than two lanes are
/// taken two at a time. Lanes must be whole blocks.
pub fn generic_cbc_encrypt_lanes<I: AesInstruction>(lanes: &mut [CbcLane<'_>]) {
    for pair in lanes.chunks_mut(2) {
        match pair {
            [a, b] => {
                let both = a.data.len().min(b.data.len());
                let (mut ca, mut cb) = (load(&a.iv[..]), load(&b.iv[..]));
                let mut at = 0;
                while at < both {
                    let pa = xor(&ca, &load(&a.data[at..at + 16]));
                    let pb = xor(&cb, &load(&b.data[at..at + 16]));
                    (ca, cb) = encrypt2::<I>(a.key, &pa, b.key, &pb);
                    store(&ca, &mut a.data[at..at + 16]);
                    store(&cb, &mut b.data[at..at + 16]);
                    at += 16;
                }
                store(&ca, &mut a.iv[..]);
                store(&cb, &mut b.iv[..]);
                cbc_encrypt_one::<I>(a, both);
                cbc_encrypt_one::<I>(b, both);
            }
            [one] => cbc_encrypt_one::<I>(one, 0),
            _ => {}
        }
    }
}

fn cbc_encrypt_one<I: AesInstruction>(lane: &mut CbcLane<'_>, from: usize) {
    let mut chain = load(&lane.iv[..]);
    let mut at = from;
    while at < lane.data.len() {
        chain = encrypt::<I>(lane.key, &xor(&chain, &load(&lane.data[at..at + 16])));
        store(&chain, &mut lane.data[at..at + 16]);
        at += 16;
    }
    store(&chain, &mut lane.iv[..]);
}

/// [`cbc_decrypt`] in Rust on the instruction's four forms, two blocks at
/// a time (the blocks of one chain are independent when decrypting). The
/// data must be whole blocks.
pub fn generic_cbc_decrypt<I: AesInstruction>(key: &Aes256Key, iv: &mut [u8; 16], data: &mut [u8]) {
    let mut previous = load(&iv[..]);
    let mut at = 0;
    while at + 32 <= data.len() {
        let (c0, c1) = (load(&data[at..at + 16]), load(&data[at + 16..at + 32]));
        let (p0, p1) = decrypt2::<I>(key, &c0, &c1);
        store(&xor(&p0, &previous), &mut data[at..at + 16]);
        store(&xor(&p1, &c0), &mut data[at + 16..at + 32]);
        previous = c1;
        at += 32;
    }
    if at < data.len() {
        let c0 = load(&data[at..at + 16]);
        store(
            &xor(&decrypt::<I>(key, &c0), &previous),
            &mut data[at..at + 16],
        );
        previous = c0;
    }
    store(&previous, &mut iv[..]);
}
