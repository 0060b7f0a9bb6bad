//! AES-256 built on the instruction's model against FIPS-197, NIST SP
//! 800-38A and the `aes` crate.

use aes::cipher::{Array, BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};

use crate::aes::{
    Aes256Key, CbcLane, State, cbc_decrypt, cbc_encrypt_lanes, decrypt, decrypt2, encrypt,
    encrypt2, load, store,
};
use crate::insn::Model;

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

fn block_of(state: &State) -> [u8; 16] {
    let mut out = [0u8; 16];
    store(state, &mut out);
    out
}

#[test]
fn fips_197_c3_both_directions() {
    let key: [u8; 32] = core::array::from_fn(|i| i as u8);
    let plain: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
    let expected = hex::decode("8ea2b7ca516745bfeafc49904b496089").unwrap();
    let key = Aes256Key::new::<Model>(&key);
    let cipher = encrypt::<Model>(&key, &load(&plain));
    assert_eq!(block_of(&cipher).to_vec(), expected);
    assert_eq!(block_of(&decrypt::<Model>(&key, &cipher)), plain);
}

#[test]
fn matches_the_aes_crate_on_random_keys_and_blocks() {
    let mut seed = 0xae5;
    for _ in 0..300 {
        let (k0, k1) = (bytes::<32>(&mut seed), bytes::<32>(&mut seed));
        let (b0, b1) = (bytes::<16>(&mut seed), bytes::<16>(&mut seed));
        let (r0, r1) = (
            aes::Aes256::new(&Array::from(k0)),
            aes::Aes256::new(&Array::from(k1)),
        );
        let (mut e0, mut e1) = (Array::from(b0), Array::from(b1));
        r0.encrypt_block(&mut e0);
        r1.encrypt_block(&mut e1);
        let (x0, x1) = (Aes256Key::new::<Model>(&k0), Aes256Key::new::<Model>(&k1));
        let (c0, c1) = encrypt2::<Model>(&x0, &load(&b0), &x1, &load(&b1));
        assert_eq!(block_of(&c0), <[u8; 16]>::from(e0));
        assert_eq!(block_of(&c1), <[u8; 16]>::from(e1));
        let mut d = Array::from(b1);
        r0.decrypt_block(&mut d);
        let (p0, p1) = decrypt2::<Model>(&x0, &load(&b0), &load(&b1));
        assert_eq!(block_of(&p1), <[u8; 16]>::from(d));
        assert_eq!(block_of(&decrypt::<Model>(&x0, &c0)), b0);
        assert_eq!(block_of(&encrypt::<Model>(&x0, &p0)), b0);
    }
}

/// NIST SP 800-38A F.2.5 / F.2.6 (CBC-AES256), with one chain and two
/// chains in one call.
#[test]
fn sp800_38a_cbc_aes256() {
    let key: [u8; 32] =
        hex::decode("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
            .unwrap()
            .try_into()
            .unwrap();
    let iv: [u8; 16] = hex::decode("000102030405060708090a0b0c0d0e0f")
        .unwrap()
        .try_into()
        .unwrap();
    let plain = hex::decode(
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
         30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
    )
    .unwrap();
    let cipher = hex::decode(
        "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d\
         39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b",
    )
    .unwrap();
    let key = Aes256Key::new::<Model>(&key);
    let (mut a, mut b) = (plain.clone(), plain[..32].to_vec());
    let (mut iv_a, mut iv_b) = (iv, iv);
    cbc_encrypt_lanes::<Model>(&mut [
        CbcLane {
            key: &key,
            iv: &mut iv_a,
            data: &mut a,
        },
        CbcLane {
            key: &key,
            iv: &mut iv_b,
            data: &mut b,
        },
    ]);
    assert_eq!(a, cipher);
    assert_eq!(b, cipher[..32]);
    // The chain goes on from the updated IV.
    let mut rest = plain[32..].to_vec();
    cbc_encrypt_lanes::<Model>(&mut [CbcLane {
        key: &key,
        iv: &mut iv_b,
        data: &mut rest,
    }]);
    assert_eq!(rest, cipher[32..]);
    for split in [16, 48] {
        let mut data = cipher.clone();
        let mut chain = iv;
        let (first, second) = data.split_at_mut(split);
        cbc_decrypt::<Model>(&key, &mut chain, first);
        cbc_decrypt::<Model>(&key, &mut chain, second);
        assert_eq!(data, plain, "split at {split}");
    }
}
