//! Safe wrappers of OpenSSL's own AES (`crypto/aes/aes_core.c`: the T-table
//! AES of its C build, not constant time) and its CBC loop
//! (`crypto/aes/aes_cbc.c` → `crypto/modes/cbc128.c`), compiled by build.rs
//! from the `openssl-src` crate's copy of OpenSSL's sources with `-O3`, as
//! OpenSSL's `linux32-riscv32` release configuration builds them.

use aesd_cipher::Block;

/// `AES_MAXNR` in `<openssl/aes.h>`.
const MAX_ROUNDS: usize = 14;

/// `AES_KEY` (`struct aes_key_st` in `<openssl/aes.h>`).
#[repr(C)]
struct AesKey {
    rd_key: [u32; 4 * (MAX_ROUNDS + 1)],
    rounds: i32,
}

/// `AES_ENCRYPT` / `AES_DECRYPT` in `<openssl/aes.h>`.
const AES_ENCRYPT: i32 = 1;
const AES_DECRYPT: i32 = 0;

unsafe extern "C" {
    fn AES_set_encrypt_key(user_key: *const u8, bits: i32, key: *mut AesKey) -> i32;
    fn AES_set_decrypt_key(user_key: *const u8, bits: i32, key: *mut AesKey) -> i32;
    fn AES_encrypt(input: *const u8, output: *mut u8, key: *const AesKey);
    fn AES_cbc_encrypt(
        input: *const u8,
        output: *mut u8,
        length: usize,
        key: *const AesKey,
        ivec: *mut u8,
        enc: i32,
    );
}

/// An AES-256 key expanded by OpenSSL, for one direction.
pub struct Key {
    schedule: AesKey,
    direction: i32,
}

impl Key {
    fn expand(key: &[u8; 32], direction: i32) -> Key {
        let mut schedule = AesKey {
            rd_key: [0; 4 * (MAX_ROUNDS + 1)],
            rounds: 0,
        };
        // SAFETY: reads the 32 key bytes (256 bits), writes the AES_KEY.
        let status = unsafe {
            if direction == AES_ENCRYPT {
                AES_set_encrypt_key(key.as_ptr(), 256, &mut schedule)
            } else {
                AES_set_decrypt_key(key.as_ptr(), 256, &mut schedule)
            }
        };
        assert_eq!(status, 0, "OpenSSL refused a 256-bit key");
        Key {
            schedule,
            direction,
        }
    }

    /// `AES_set_encrypt_key` of an AES-256 key.
    pub fn encrypt(key: &[u8; 32]) -> Key {
        Key::expand(key, AES_ENCRYPT)
    }

    /// `AES_set_decrypt_key` of an AES-256 key.
    pub fn decrypt(key: &[u8; 32]) -> Key {
        Key::expand(key, AES_DECRYPT)
    }

    /// `AES_encrypt` of one block (an encryption key).
    pub fn encrypt_block(&self, input: &Block, output: &mut Block) {
        assert_eq!(self.direction, AES_ENCRYPT, "an encryption key");
        // SAFETY: reads 16 bytes and the AES_KEY, writes 16 bytes.
        unsafe { AES_encrypt(input.as_ptr(), output.as_mut_ptr(), &self.schedule) };
    }

    /// `AES_cbc_encrypt` of whole blocks in place, in the key's direction;
    /// `iv` becomes the next chaining value (the last ciphertext block).
    ///
    /// # Panics
    /// If `data` is not a whole number of blocks.
    pub fn cbc(&self, iv: &mut Block, data: &mut [u8]) {
        assert!(data.len() % 16 == 0, "CBC data must be whole blocks");
        let at = data.as_mut_ptr();
        // SAFETY: OpenSSL's CBC reads and writes `len` bytes at `at` (input
        // and output may be the same buffer: cbc128.c handles in place),
        // reads the AES_KEY and reads and writes the 16 bytes of `iv`.
        unsafe {
            AES_cbc_encrypt(
                at,
                at,
                data.len(),
                &self.schedule,
                iv.as_mut_ptr(),
                self.direction,
            )
        };
    }
}
