//! The riscv32 machine code of the instruction path, run under qemu-user
//! with the trap-and-emulate handler (feature `emulate`): the hardware
//! implementation must give the model's (and FIPS-197's) answers.
#![cfg(all(target_arch = "riscv32", target_os = "linux", feature = "emulate"))]

use aesd_vexriscv::aes::{Aes256Key, CbcLane, cbc_decrypt, cbc_encrypt_lanes};
use aesd_vexriscv::hardware::Hardware;
use aesd_vexriscv::insn::Model;
use aesd_vexriscv::self_test;
use aesd_vexriscv::sigill::{Probe, install_emulator, probe};

fn emulator() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| assert!(install_emulator(), "SIGILL handler installed"));
}

#[test]
fn hardware_path_passes_the_known_answer_test() {
    emulator();
    assert!(self_test::<Hardware>());
}

#[test]
fn hardware_path_equals_the_model_on_cbc() {
    emulator();
    let mut seed = 11u32;
    let mut next = || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 24) as u8
    };
    for round in 0..8 {
        let keys: [[u8; 32]; 2] = [
            core::array::from_fn(|_| next()),
            core::array::from_fn(|_| next()),
        ];
        let iv: [u8; 16] = core::array::from_fn(|_| next());
        let data: Vec<u8> = (0..16 * (round + 3)).map(|_| next()).collect();
        let mut outputs = Vec::new();
        for use_hardware in [false, true] {
            let (k0, k1) = if use_hardware {
                (
                    Aes256Key::new::<Hardware>(&keys[0]),
                    Aes256Key::new::<Hardware>(&keys[1]),
                )
            } else {
                (
                    Aes256Key::new::<Model>(&keys[0]),
                    Aes256Key::new::<Model>(&keys[1]),
                )
            };
            let (mut a, mut b) = (data.clone(), data[..data.len() - 16].to_vec());
            let (mut iv_a, mut iv_b) = (iv, iv);
            let mut lanes = [
                CbcLane {
                    key: &k0,
                    iv: &mut iv_a,
                    data: &mut a,
                },
                CbcLane {
                    key: &k1,
                    iv: &mut iv_b,
                    data: &mut b,
                },
            ];
            if use_hardware {
                cbc_encrypt_lanes::<Hardware>(&mut lanes);
            } else {
                cbc_encrypt_lanes::<Model>(&mut lanes);
            }
            let mut back = a.clone();
            let mut chain = iv;
            if use_hardware {
                cbc_decrypt::<Hardware>(&k0, &mut chain, &mut back);
            } else {
                cbc_decrypt::<Model>(&k0, &mut chain, &mut back);
            }
            assert_eq!(
                back, data,
                "round {round}: decryption restores the plaintext"
            );
            outputs.push((a, b));
        }
        assert_eq!(outputs[0], outputs[1], "round {round}: hardware = model");
    }
}

#[test]
fn the_probe_sees_the_emulated_instruction_work() {
    emulator();
    assert_eq!(probe(self_test::<Hardware>), Probe::Works);
}

/// The CPU's kernels take word-aligned data; other data takes the generic
/// rounds. Both, at every length from 0 to 5 blocks and as a chain
/// continued over two calls, give the model's answers.
#[test]
fn kernels_and_unaligned_data_equal_the_model() {
    emulator();
    let key_bytes: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0x5c);
    let (hardware_key, model_key) = (
        Aes256Key::new::<Hardware>(&key_bytes),
        Aes256Key::new::<Model>(&key_bytes),
    );
    let iv: [u8; 16] = core::array::from_fn(|i| 0xa0 ^ i as u8);
    for blocks in 0..=5usize {
        for offset in [0usize, 1, 2, 4] {
            let plain: Vec<u8> = (0..16 * blocks).map(|i| (i * 7 + blocks) as u8).collect();
            // `offset` bytes into a word-aligned buffer: aligned only when
            // the offset is a multiple of 4.
            let mut buffer = Aligned([0; 5 * 16 + 4]);
            let data = &mut buffer.0[offset..offset + 16 * blocks];
            data.copy_from_slice(&plain);
            let split = 16 * (blocks / 2);
            let mut hardware_iv = iv;
            let (head, tail) = data.split_at_mut(split);
            for part in [head, tail] {
                cbc_encrypt_lanes::<Hardware>(&mut [CbcLane {
                    key: &hardware_key,
                    iv: &mut hardware_iv,
                    data: part,
                }]);
            }
            let mut expected = plain.clone();
            let mut model_iv = iv;
            cbc_encrypt_lanes::<Model>(&mut [CbcLane {
                key: &model_key,
                iv: &mut model_iv,
                data: &mut expected,
            }]);
            assert_eq!(data, &expected[..], "{blocks} blocks at offset {offset}");
            assert_eq!(hardware_iv, model_iv, "chain after {blocks} blocks");
            let mut back_iv = iv;
            cbc_decrypt::<Hardware>(&hardware_key, &mut back_iv, data);
            assert_eq!(
                data,
                &plain[..],
                "decrypted {blocks} blocks at offset {offset}"
            );
            assert_eq!(
                back_iv, model_iv,
                "decryption's chain after {blocks} blocks"
            );
        }
    }
}

/// Word-aligned bytes: room for 5 blocks at an offset of up to 4.
#[repr(align(4))]
struct Aligned([u8; 5 * 16 + 4]);
