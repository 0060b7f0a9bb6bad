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
