//! The Zkne/Zknd path's riscv32 machine code under qemu-user. Run twice by
//! scripts/cross/ci.sh: on a CPU with the extensions
//! (`AESD_QEMU_CPU=rv32,...,zkne=true,zknd=true`, and `AESD_EXPECT_ZKNE=1`)
//! it must pass the known-answer test and equal the instruction's model on
//! CBC in both directions; on the default rv32imac CPU the probe must report
//! the trap instead of dying of SIGILL.
#![cfg(all(target_arch = "riscv32", target_os = "linux"))]

use aesd_vexriscv::aes::{Aes256Key, CbcLane, cbc_decrypt, cbc_encrypt_lanes};
use aesd_vexriscv::hardware::Zkne;
use aesd_vexriscv::insn::Model;
use aesd_vexriscv::self_test;
use aesd_vexriscv::sigill::{Probe, probe};

fn cpu_has_zkne() -> bool {
    std::env::var("AESD_EXPECT_ZKNE").as_deref() == Ok("1")
}

#[test]
fn the_probe_finds_what_the_cpu_has() {
    let expected = if cpu_has_zkne() {
        Probe::Works
    } else {
        Probe::Trapped
    };
    assert_eq!(probe(self_test::<Zkne>), expected);
}

#[test]
fn zkne_kernels_equal_the_model_on_cbc() {
    if !cpu_has_zkne() {
        eprintln!("not a Zkne CPU: the_probe_finds_what_the_cpu_has covers this run");
        return;
    }
    let mut seed = 7u32;
    let mut next = || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 24) as u8
    };
    for round in 0..8 {
        let key: [u8; 32] = core::array::from_fn(|_| next());
        let iv: [u8; 16] = core::array::from_fn(|_| next());
        // Word aligned (the kernels) and one byte off (the generic rounds).
        let data: Vec<u8> = (0..16 * (round + 3)).map(|_| next()).collect();
        let mut backing = vec![0u8; data.len() + 8];
        let aligned = backing.as_ptr().align_offset(4);
        for offset in [aligned, aligned + 1] {
            let buffer = &mut backing[offset..offset + data.len()];
            buffer.copy_from_slice(&data);
            let mut expected = data.clone();
            let mut chain_model = iv;
            cbc_encrypt_lanes::<Model>(&mut [CbcLane {
                key: &Aes256Key::new::<Model>(&key),
                iv: &mut chain_model,
                data: &mut expected,
            }]);
            let zkne_key = Aes256Key::new::<Zkne>(&key);
            let mut chain = iv;
            cbc_encrypt_lanes::<Zkne>(&mut [CbcLane {
                key: &zkne_key,
                iv: &mut chain,
                data: buffer,
            }]);
            assert_eq!(buffer, &expected[..], "round {round} offset {offset}");
            assert_eq!(chain, chain_model, "round {round} offset {offset}: chain");
            let mut chain = iv;
            cbc_decrypt::<Zkne>(&zkne_key, &mut chain, buffer);
            assert_eq!(
                buffer,
                &data[..],
                "round {round} offset {offset}: decrypted"
            );
        }
    }
}
