//! CBC encryption of several independent chains at once, one per lane.

use zeroize::Zeroize;

use crate::fixslice::{Block, BlockWords, KeySchedule, LANES, LaneKeys, block_words, store_block};

#[cfg(all(target_arch = "riscv32", not(target_feature = "e")))]
mod rv32;

/// AES block size in bytes.
pub const BLOCK: usize = 16;

/// One CBC chain's part of a call: its key, its chaining value (the IV,
/// then the last ciphertext block: updated, so the chain continues in the
/// next call) and whole blocks of plaintext, encrypted in place. `K` is the
/// expanded key of the AES that runs it: the fixsliced [`KeySchedule`]
/// here, `cpu_aes::CpuAesKey` with the CPU's AES instructions.
pub struct CbcLane<'a, K = KeySchedule> {
    /// The chain's expanded key.
    pub key: &'a K,
    /// The chaining value.
    pub iv: &'a mut Block,
    /// Whole blocks (a multiple of 16 bytes), plaintext in, ciphertext out.
    pub data: &'a mut [u8],
}

/// Encrypts up to [`LANES`] chains together. Each lane's data must be whole
/// blocks; lanes may differ in length: all lanes run together while they
/// all have blocks, then the longer ones go on with fewer lanes busy.
///
/// # Panics
/// If more than [`LANES`] lanes are given or a lane's data is not a
/// multiple of 16 bytes (callers hand over whole blocks only).
pub fn encrypt_lanes(lanes: &mut [CbcLane<'_>]) {
    assert!(lanes.len() <= LANES, "more chains than lanes");
    assert!(
        lanes.iter().all(|lane| lane.data.len() % BLOCK == 0),
        "CBC data must be whole blocks"
    );
    let mut done = 0;
    loop {
        // The lanes with blocks left, in order: they take the cipher's
        // lanes 0, 1, ... (their keys merged in that order), so the busy
        // lanes always come first and the idle ones cost nothing.
        let mut busy: [Option<&mut CbcLane<'_>>; LANES] = core::array::from_fn(|_| None);
        let mut count = 0;
        for lane in lanes.iter_mut().filter(|lane| lane.data.len() > done) {
            busy[count] = Some(lane);
            count += 1;
        }
        let Some(shortest) = busy.iter().flatten().map(|lane| lane.data.len()).min() else {
            return;
        };
        // (The cipher's lanes from `count` on get no key: idle.)
        let key = |l: usize| busy[l].as_ref().or(busy[0].as_ref()).map(|lane| lane.key);
        let keys: [&KeySchedule; LANES] = core::array::from_fn(|l| key(l).expect("a busy lane"));
        let round_keys = LaneKeys::new(&keys[..count]);
        let mut chain: [BlockWords; LANES] = [[0; 4]; LANES];
        for (words, lane) in chain.iter_mut().zip(busy.iter().flatten()) {
            *words = block_words(&lane.iv[..]);
        }
        let aligned = busy
            .iter()
            .flatten()
            .all(|lane| bytemuck::try_cast_slice::<u8, u32>(&lane.data[done..shortest]).is_ok());
        if aligned && cfg!(target_endian = "little") {
            // Word loads and stores straight from the buffers.
            let mut words: [&mut [u32]; LANES] = Default::default();
            for (slot, lane) in words.iter_mut().zip(busy.iter_mut().flatten()) {
                if let Ok(view) = bytemuck::try_cast_slice_mut(&mut lane.data[done..shortest]) {
                    *slot = view;
                }
            }
            match count {
                1 => encrypt_words::<1>(&round_keys, &mut chain, &mut words),
                2 => encrypt_words::<2>(&round_keys, &mut chain, &mut words),
                3 => encrypt_words::<3>(&round_keys, &mut chain, &mut words),
                _ => encrypt_words::<LANES>(&round_keys, &mut chain, &mut words),
            }
        } else {
            let mut blocks: [BlockWords; LANES] = [[0; 4]; LANES];
            for at in (done..shortest).step_by(BLOCK) {
                for ((block, words), lane) in
                    blocks.iter_mut().zip(&chain).zip(busy.iter().flatten())
                {
                    let plain = block_words(&lane.data[at..at + BLOCK]);
                    *block = core::array::from_fn(|c| words[c] ^ plain[c]);
                }
                chain = round_keys.encrypt(&blocks);
                for (words, lane) in chain.iter().zip(busy.iter_mut().flatten()) {
                    store_block(words, &mut lane.data[at..at + BLOCK]);
                }
            }
            blocks.zeroize();
        }
        for (words, lane) in chain.iter().zip(busy.iter_mut().flatten()) {
            store_block(words, &mut lane.iv[..]);
        }
        done = shortest;
        chain.zeroize();
    }
}

/// The CBC loop over word-aligned buffers: `words[..N]` (the busy lanes,
/// all of the same length, whole blocks as little-endian words) is
/// encrypted in place, `chain[..N]` holding their chaining values; the
/// cipher's lanes from `N` on are idle (fed zeros, their output dropped).
/// Out of line, with the AES inlined into it: the loop, packing, the
/// rounds and unpacking are one compact piece of code that a board's 4 KiB
/// instruction cache holds whole (docs/performance.md, *Measured on the
/// RTL*); the ciphertext of a block stays in registers to be stored and
/// XORed into the next block.
#[cfg(not(all(target_arch = "riscv32", not(target_feature = "e"))))]
#[inline(never)]
fn encrypt_words<const N: usize>(
    round_keys: &LaneKeys,
    chain: &mut [BlockWords; LANES],
    words: &mut [&mut [u32]; LANES],
) {
    let (busy, _) = words.split_at_mut(N);
    let mut blocks = busy.iter_mut().map(|lane| lane.chunks_exact_mut(4));
    let mut lanes: [core::slice::ChunksExactMut<'_, u32>; N] =
        core::array::from_fn(|_| blocks.next().expect("N busy lanes"));
    let count = lanes[0].len();
    assert!(
        lanes.iter().all(|lane| lane.len() == count),
        "lanes of one length"
    );
    let mut cipher = *chain;
    for _ in 0..count {
        let mut plain: [&mut [u32]; N] =
            core::array::from_fn(|l| lanes[l].next().expect("as many blocks as lane 0"));
        let mut input = [[0u32; 4]; LANES];
        for ((input, words), cipher) in input.iter_mut().zip(plain.iter()).zip(&cipher) {
            *input = core::array::from_fn(|c| cipher[c] ^ words[c]);
        }
        cipher = round_keys.encrypt_inline(&input);
        for (words, cipher) in plain.iter_mut().zip(&cipher) {
            words.copy_from_slice(cipher);
        }
    }
    chain[..N].copy_from_slice(&cipher[..N]);
}

/// The CBC loop over word-aligned buffers on riscv32: the assembly kernel
/// ([`rv32`]) with one or two busy lanes.
#[cfg(all(target_arch = "riscv32", not(target_feature = "e")))]
fn encrypt_words<const N: usize>(
    round_keys: &LaneKeys,
    chain: &mut [BlockWords; LANES],
    words: &mut [&mut [u32]; LANES],
) {
    let [lane0, lane1] = words;
    rv32::encrypt(round_keys, chain, lane0, (N == 2).then_some(&mut **lane1));
}

/// Encrypts one chain (one lane busy).
pub fn encrypt(key: &KeySchedule, iv: &mut Block, data: &mut [u8]) {
    encrypt_lanes(&mut [CbcLane { key, iv, data }]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cbc::cipher::{Array, BlockModeEncrypt, KeyIvInit};

    type Reference = cbc::Encryptor<aes::Aes256>;

    fn reference(key: &[u8; 32], iv: &Block, data: &[u8]) -> ([u8; 4096], Block) {
        let mut out = [0u8; 4096];
        out[..data.len()].copy_from_slice(data);
        let mut encryptor = Reference::new(&Array::from(*key), &Array::from(*iv));
        let (blocks, _) = Array::slice_as_chunks_mut(&mut out[..data.len()]);
        encryptor.encrypt_blocks(blocks);
        let mut last = *iv;
        if !data.is_empty() {
            last.copy_from_slice(&out[data.len() - BLOCK..data.len()]);
        }
        (out, last)
    }

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

    /// NIST SP 800-38A F.2.5 (CBC-AES256.Encrypt): plaintext and ciphertext.
    const SP800_38A_PLAIN: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
                                   30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
    const SP800_38A_CIPHER: &str = "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d\
                                    39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b";

    /// NIST SP 800-38A F.2.5 (CBC-AES256.Encrypt) through `encrypt`, one
    /// lane in two calls: the chain continues through the updated IV.
    fn check_sp800_38a<K>(
        expand: impl Fn(&[u8; 32]) -> K,
        encrypt: impl Fn(&mut [CbcLane<'_, K>]),
    ) {
        let key: [u8; 32] =
            hex::decode("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
                .unwrap()
                .try_into()
                .unwrap();
        let mut iv: Block = hex::decode("000102030405060708090a0b0c0d0e0f")
            .unwrap()
            .try_into()
            .unwrap();
        let mut data = hex::decode(SP800_38A_PLAIN).unwrap();
        let key = expand(&key);
        let (first, second) = data.split_at_mut(32);
        for data in [first, second] {
            encrypt(&mut [CbcLane {
                key: &key,
                iv: &mut iv,
                data,
            }]);
        }
        assert_eq!(hex::encode(&data), SP800_38A_CIPHER);
    }

    #[test]
    fn sp800_38a_f25() {
        check_sp800_38a(KeySchedule::new, encrypt_lanes);
    }

    /// Up to `max` lanes of random keys, IVs and lengths (0 to 39 blocks),
    /// encrypted in one call of `encrypt`, give the reference's ciphertext
    /// and chaining value in every lane.
    fn check_lanes<K>(
        max: usize,
        expand: impl Fn(&[u8; 32]) -> K,
        encrypt: impl Fn(&mut [CbcLane<'_, K>]),
    ) {
        const MOST: usize = 8;
        let mut seed = 99;
        for count in 1..=max {
            for round in 0..20 {
                let keys: [[u8; 32]; MOST] = core::array::from_fn(|_| bytes::<32>(&mut seed));
                let ivs: [Block; MOST] = core::array::from_fn(|_| bytes::<16>(&mut seed));
                let lens: [usize; MOST] =
                    core::array::from_fn(|l| BLOCK * ((round * 7 + l * 13) % 40));
                let mut datas: Vec<[u8; 4096]> = (0..MOST).map(|_| [0u8; 4096]).collect();
                for data in datas.iter_mut() {
                    for byte in data.iter_mut() {
                        *byte = bytes::<1>(&mut seed)[0];
                    }
                }
                let originals = datas.clone();
                let schedules: Vec<K> = keys.iter().map(&expand).collect();
                let mut chain = ivs;
                {
                    let mut lanes: Vec<CbcLane<'_, K>> = datas
                        .iter_mut()
                        .zip(chain.iter_mut())
                        .zip(schedules.iter())
                        .zip(lens)
                        .take(count)
                        .map(|(((data, iv), key), len)| CbcLane {
                            key,
                            iv,
                            data: &mut data[..len],
                        })
                        .collect();
                    encrypt(&mut lanes);
                }
                for l in 0..count {
                    let (expected, last) = reference(&keys[l], &ivs[l], &originals[l][..lens[l]]);
                    assert_eq!(
                        &datas[l][..lens[l]],
                        &expected[..lens[l]],
                        "{count} lanes, lane {l}"
                    );
                    assert_eq!(chain[l], last, "{count} lanes, lane {l}: chaining value");
                }
            }
        }
    }

    #[test]
    fn lanes_of_any_count_and_length_match_the_reference() {
        check_lanes(LANES, KeySchedule::new, encrypt_lanes);
    }

    /// The kernels on the CPU's AES instructions (AES-NI, ARMv8), on a CPU
    /// that has them (else the test says so: no key can be made).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn cpu_aes_lanes_match_the_reference() {
        use crate::cpu_aes::{self, CpuAesKey};
        if CpuAesKey::new(&[0; 32]).is_none() {
            // CI sets this where the kernels must run (qemu's aarch64 CPU).
            let required = std::env::var_os("AESD_REQUIRE_CPU_AES").is_some();
            assert!(
                !required,
                "AESD_REQUIRE_CPU_AES: this CPU has no AES instructions"
            );
            eprintln!("this CPU has no AES instructions: the kernels cannot run here");
            return;
        }
        let expand = |key: &[u8; 32]| CpuAesKey::new(key).expect("checked above");
        check_lanes(cpu_aes::CPU_AES_LANES, expand, cpu_aes::encrypt_lanes);
        check_sp800_38a(expand, cpu_aes::encrypt_lanes);
    }

    /// The word path (buffers aligned to 4 bytes) and the byte path give
    /// the same ciphertext.
    #[test]
    fn aligned_and_unaligned_buffers_agree() {
        let mut seed = 5;
        let key = bytes::<32>(&mut seed);
        let iv = bytes::<16>(&mut seed);
        let schedule = KeySchedule::new(&key);
        let plain: Vec<u8> = (0..1024).map(|_| bytes::<1>(&mut seed)[0]).collect();
        let (expected, _) = reference(&key, &iv, &plain);
        let mut words = [0u32; 260];
        let aligned: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for offset in [0, 1, 2, 3, 4] {
            let data = &mut aligned[offset..offset + 1024];
            data.copy_from_slice(&plain);
            let mut chain = iv;
            encrypt(&schedule, &mut chain, data);
            assert_eq!(&data[..], &expected[..1024], "offset {offset}");
        }
    }
}
