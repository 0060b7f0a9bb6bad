//! The AES instruction path (VexRiscv's AesPlugin) on a core that has it:
//! the self-test aesd runs before it uses the instruction, known answers
//! through aesd's CBC kernels, and the kernels' cycles per byte, each bulk
//! result checked against OpenSSL's own AES.
//!
//! Generic over who executes the instruction: the CPU
//! (`aesd_vexriscv::hardware::Hardware`) on the `imac-aes` core, the
//! instruction's model on the host (`cargo test`).

use core::fmt::Write;

use aesd_vexriscv::AesInstruction;
use aesd_vexriscv::aes::{Aes256Key, CbcLane, cbc_decrypt, cbc_encrypt_lanes};

use crate::{
    Buffers, Counters, FIPS_CIPHER, FIPS_KEY, FIPS_PLAIN, IV1, IV2, KEY1, KEY2, Report, SEED1,
    SEED2, SP_CIPHER, SP_IV, SP_KEY, SP_PLAIN, fill, measure, openssl,
};

/// Word-aligned storage for known-answer data (the kernels use `lw`/`sw`).
#[repr(C, align(4))]
struct Aligned<const N: usize>([u8; N]);

/// aesd's start-up self-test and the FIPS-197 / SP 800-38A answers through
/// the instruction path's CBC kernels, both directions.
pub(crate) fn known_answers<W: Write, I: AesInstruction>(report: &mut Report<'_, W>) {
    report.check(
        "insn-self-test",
        &[u8::from(aesd_vexriscv::self_test::<I>())],
        &[1],
    );

    let fips = Aes256Key::new::<I>(&FIPS_KEY);
    let mut block = Aligned(FIPS_PLAIN);
    let mut iv = [0; 16];
    cbc_encrypt_lanes::<I>(&mut [CbcLane {
        key: &fips,
        iv: &mut iv,
        data: &mut block.0,
    }]);
    report.check("fips197-insn", &block.0, &FIPS_CIPHER);

    let sp = Aes256Key::new::<I>(&SP_KEY);
    let plain: [u8; 64] = SP_PLAIN.as_flattened().try_into().expect("64 bytes");
    let cipher: [u8; 64] = SP_CIPHER.as_flattened().try_into().expect("64 bytes");
    let mut data = Aligned(plain);
    let mut iv = SP_IV;
    cbc_encrypt_lanes::<I>(&mut [CbcLane {
        key: &sp,
        iv: &mut iv,
        data: &mut data.0,
    }]);
    report.check("sp800-38a-insn", &data.0, &cipher);
    report.check("sp800-38a-insn-iv", &iv, &SP_CIPHER[3]);

    let mut iv = SP_IV;
    cbc_decrypt::<I>(&sp, &mut iv, &mut data.0);
    report.check("sp800-38a-insn-decrypt", &data.0, &plain);
}

/// The kernels' cycles: encryption of one chain, of two chains with
/// different keys in one call (as aesd's lane engine hands them over), and
/// decryption; each output against OpenSSL's or the original plaintext.
pub(crate) fn workloads<W: Write, I: AesInstruction>(
    report: &mut Report<'_, W>,
    counters: &dyn Fn() -> Counters,
    buffers: Buffers<'_>,
) {
    let Buffers { x, y, z } = buffers;
    let n = x.len();
    let k1 = Aes256Key::new::<I>(&KEY1);
    let k2 = Aes256Key::new::<I>(&KEY2);

    fill(x, SEED1);
    let mut iv_x = IV1;
    let counted = measure(counters, || {
        cbc_encrypt_lanes::<I>(&mut [CbcLane {
            key: &k1,
            iv: &mut iv_x,
            data: x,
        }])
    });
    report.result("aesd-insn-encrypt-1chain", n, counted, format_args!(""));
    fill(z, SEED1);
    let mut iv_z = IV1;
    openssl::Key::encrypt(&KEY1).cbc(&mut iv_z, z);
    report.check("bulk-insn-1chain-vs-openssl", x, z);
    report.check("bulk-insn-1chain-vs-openssl-iv", &iv_x, &iv_z);

    fill(x, SEED1);
    fill(y, SEED2);
    let (mut iv_x, mut iv_y) = (IV1, IV2);
    let counted = measure(counters, || {
        cbc_encrypt_lanes::<I>(&mut [
            CbcLane {
                key: &k1,
                iv: &mut iv_x,
                data: x,
            },
            CbcLane {
                key: &k2,
                iv: &mut iv_y,
                data: y,
            },
        ])
    });
    report.result(
        "aesd-insn-encrypt-2chains",
        2 * n,
        counted,
        format_args!(""),
    );
    report.check("bulk-insn-2chains-chain0-vs-openssl", x, z);
    fill(z, SEED2);
    let mut iv_z = IV2;
    openssl::Key::encrypt(&KEY2).cbc(&mut iv_z, z);
    report.check("bulk-insn-2chains-chain1-vs-openssl", y, z);
    report.check("bulk-insn-2chains-chain1-vs-openssl-iv", &iv_y, &iv_z);

    let mut iv_y = IV2;
    let counted = measure(counters, || cbc_decrypt::<I>(&k2, &mut iv_y, y));
    report.result("aesd-insn-decrypt", n, counted, format_args!(""));
    fill(z, SEED2);
    report.check("bulk-insn-decrypt-roundtrip", y, z);
}
