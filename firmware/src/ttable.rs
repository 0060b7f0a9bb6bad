//! Safe wrappers of the C T-table AES-256-CBC (c/ttable.c).

use core::sync::atomic::{AtomicU8, Ordering};

use aesd_cipher::Block;

const ROUND_KEY_WORDS: usize = 60;

unsafe extern "C" {
    fn tt_init();
    fn tt_expand_key(key: *const u8, rk: *mut u32);
    fn tt_encrypt_block(rk: *const u32, input: *const u8, output: *mut u8);
    fn tt_cbc_encrypt(rk: *const u32, iv: *mut u8, data: *mut u8, len: usize);
}

/// Proof that the C tables are filled.
pub struct Tables(());

/// 0: not filled, 1: being filled, 2: filled.
static STATE: AtomicU8 = AtomicU8::new(0);

impl Tables {
    /// Fills the tables (once, whoever calls first).
    pub fn init() -> Tables {
        match STATE.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                // SAFETY: tt_init writes only the C file's static tables, and
                // nobody reads them before STATE says they are filled.
                unsafe { tt_init() };
                STATE.store(2, Ordering::Release);
            }
            Err(_) => {
                while STATE.load(Ordering::Acquire) != 2 {
                    core::hint::spin_loop();
                }
            }
        }
        Tables(())
    }
}

/// An expanded AES-256 key for the T-table code.
pub struct Key {
    rk: [u32; ROUND_KEY_WORDS],
}

impl Key {
    /// Expands `key` (the tables must be filled: `Tables`).
    pub fn new(_tables: &Tables, key: &[u8; 32]) -> Key {
        let mut rk = [0u32; ROUND_KEY_WORDS];
        // SAFETY: reads 32 bytes of key, writes the 60 words of rk.
        unsafe { tt_expand_key(key.as_ptr(), rk.as_mut_ptr()) };
        Key { rk }
    }

    /// Encrypts one block.
    pub fn encrypt_block(&self, input: &Block, output: &mut Block) {
        // SAFETY: reads 60 words of round keys and 16 bytes, writes 16.
        unsafe { tt_encrypt_block(self.rk.as_ptr(), input.as_ptr(), output.as_mut_ptr()) };
    }

    /// CBC-encrypts whole blocks in place; `iv` becomes the last block.
    ///
    /// # Panics
    /// If `data` is not a whole number of blocks.
    pub fn cbc_encrypt(&self, iv: &mut Block, data: &mut [u8]) {
        assert!(data.len() % 16 == 0, "CBC data must be whole blocks");
        // SAFETY: reads and writes data.len() bytes of data (the C code
        // touches whole blocks below len only) and the 16 bytes of iv.
        unsafe {
            tt_cbc_encrypt(
                self.rk.as_ptr(),
                iv.as_mut_ptr(),
                data.as_mut_ptr(),
                data.len(),
            )
        };
    }
}
