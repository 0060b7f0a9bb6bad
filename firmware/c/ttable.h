/* T-table AES-256-CBC encryption (firmware/c/ttable.c). */
#ifndef AESD_FIRMWARE_TTABLE_H
#define AESD_FIRMWARE_TTABLE_H

#include <stddef.h>
#include <stdint.h>

/* 15 round keys of 4 words. */
#define TT_ROUND_KEY_WORDS 60

/* Fills the tables; call once before anything else. */
void tt_init(void);

/* FIPS-197 key expansion of an AES-256 key. */
void tt_expand_key(const uint8_t key[32], uint32_t rk[TT_ROUND_KEY_WORDS]);

/* Encrypts one block (in and out may be the same). */
void tt_encrypt_block(const uint32_t rk[TT_ROUND_KEY_WORDS], const uint8_t in[16], uint8_t out[16]);

/* CBC-encrypts the whole blocks of data (len a multiple of 16) in place and
 * leaves the last ciphertext block in iv. */
void tt_cbc_encrypt(const uint32_t rk[TT_ROUND_KEY_WORDS], uint8_t iv[16], uint8_t *data, size_t len);

#endif
