/*
 * A small table-driven ("T-table") AES-256-CBC encryption in C, written for
 * aesd's firmware (firmware/README.md): it stands for the C code that
 * `openssl enc` / `openssl speed` run on a core without an AES instruction
 * (OpenSSL's generic 32-bit build), to measure its cycles per byte on the
 * same simulated VexRiscv as aesd's constant-time AES. Not OpenSSL's code:
 * same technique (four 1 KiB tables that fold SubBytes, ShiftRows and
 * MixColumns into four lookups per column and round, a byte S-box for the
 * last round, byte-wise loads and stores of the data), own layout.
 *
 * Not constant time: the table lookups depend on the key and the data.
 *
 * Words are little-endian columns: byte r of column word c is the state's
 * row r, column c (the byte at offset 4c + r of a block).
 */
#include "ttable.h"

/* te[k][x]: the column that byte x at row k contributes after SubBytes and
 * MixColumns; te[k] is te[0] rotated left by 8k bits. */
static uint32_t te[4][256];
static uint8_t sbox[256];

static uint8_t xtime(uint8_t x)
{
    return (uint8_t)((x << 1) ^ ((x & 0x80) ? 0x1b : 0));
}

static uint8_t rotl8(uint8_t x, unsigned n)
{
    return (uint8_t)((x << n) | (x >> (8 - n)));
}

static uint32_t rotl32(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

void tt_init(void)
{
    /* Powers of the generator 3 and their logarithms give inverses in
     * GF(2^8): inv(x) = 3^(255 - log3(x)). */
    uint8_t exp[256];
    uint8_t log[256];
    uint8_t x = 1;
    for (unsigned i = 0; i < 255; i++) {
        exp[i] = x;
        log[x] = (uint8_t)i;
        x = (uint8_t)(x ^ xtime(x));
    }
    for (unsigned v = 0; v < 256; v++) {
        uint8_t inv = v == 0 ? 0 : exp[(255 - log[v]) % 255];
        /* The affine transform of FIPS-197 5.1.1. */
        sbox[v] = (uint8_t)(inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ 0x63);
    }
    for (unsigned v = 0; v < 256; v++) {
        uint8_t s = sbox[v];
        uint8_t s2 = xtime(s);
        uint8_t s3 = (uint8_t)(s2 ^ s);
        /* Row 0's byte goes to rows 0..3 times 2, 1, 1, 3. */
        uint32_t col = (uint32_t)s2 | ((uint32_t)s << 8) | ((uint32_t)s << 16) | ((uint32_t)s3 << 24);
        te[0][v] = col;
        te[1][v] = rotl32(col, 8);
        te[2][v] = rotl32(col, 16);
        te[3][v] = rotl32(col, 24);
    }
}

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void store32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t sub_word(uint32_t w)
{
    return (uint32_t)sbox[w & 0xff] | ((uint32_t)sbox[(w >> 8) & 0xff] << 8) |
           ((uint32_t)sbox[(w >> 16) & 0xff] << 16) | ((uint32_t)sbox[w >> 24] << 24);
}

void tt_expand_key(const uint8_t key[32], uint32_t rk[TT_ROUND_KEY_WORDS])
{
    uint8_t rcon = 1;
    for (unsigned i = 0; i < 8; i++) {
        rk[i] = load32(key + 4 * i);
    }
    for (unsigned i = 8; i < TT_ROUND_KEY_WORDS; i++) {
        uint32_t t = rk[i - 1];
        if (i % 8 == 0) {
            /* RotWord moves byte 1 to byte 0: a right rotation of the
             * little-endian word. */
            t = sub_word((t >> 8) | (t << 24)) ^ rcon;
            rcon = xtime(rcon);
        } else if (i % 8 == 4) {
            t = sub_word(t);
        }
        rk[i] = rk[i - 8] ^ t;
    }
}

/* One AES-256 encryption of the columns s0..s3 (already XORed with the
 * first round key), in place. */
static void encrypt_columns(const uint32_t *rk, uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3)
{
    uint32_t s0 = *c0, s1 = *c1, s2 = *c2, s3 = *c3;
    uint32_t t0, t1, t2, t3;
    const uint32_t *k = rk + 4;
    /* Rounds 1..13, two per turn (13 = 6 turns + 1). */
    for (unsigned turn = 0; turn < 6; turn++) {
        t0 = te[0][s0 & 0xff] ^ te[1][(s1 >> 8) & 0xff] ^ te[2][(s2 >> 16) & 0xff] ^ te[3][s3 >> 24] ^ k[0];
        t1 = te[0][s1 & 0xff] ^ te[1][(s2 >> 8) & 0xff] ^ te[2][(s3 >> 16) & 0xff] ^ te[3][s0 >> 24] ^ k[1];
        t2 = te[0][s2 & 0xff] ^ te[1][(s3 >> 8) & 0xff] ^ te[2][(s0 >> 16) & 0xff] ^ te[3][s1 >> 24] ^ k[2];
        t3 = te[0][s3 & 0xff] ^ te[1][(s0 >> 8) & 0xff] ^ te[2][(s1 >> 16) & 0xff] ^ te[3][s2 >> 24] ^ k[3];
        s0 = te[0][t0 & 0xff] ^ te[1][(t1 >> 8) & 0xff] ^ te[2][(t2 >> 16) & 0xff] ^ te[3][t3 >> 24] ^ k[4];
        s1 = te[0][t1 & 0xff] ^ te[1][(t2 >> 8) & 0xff] ^ te[2][(t3 >> 16) & 0xff] ^ te[3][t0 >> 24] ^ k[5];
        s2 = te[0][t2 & 0xff] ^ te[1][(t3 >> 8) & 0xff] ^ te[2][(t0 >> 16) & 0xff] ^ te[3][t1 >> 24] ^ k[6];
        s3 = te[0][t3 & 0xff] ^ te[1][(t0 >> 8) & 0xff] ^ te[2][(t1 >> 16) & 0xff] ^ te[3][t2 >> 24] ^ k[7];
        k += 8;
    }
    t0 = te[0][s0 & 0xff] ^ te[1][(s1 >> 8) & 0xff] ^ te[2][(s2 >> 16) & 0xff] ^ te[3][s3 >> 24] ^ k[0];
    t1 = te[0][s1 & 0xff] ^ te[1][(s2 >> 8) & 0xff] ^ te[2][(s3 >> 16) & 0xff] ^ te[3][s0 >> 24] ^ k[1];
    t2 = te[0][s2 & 0xff] ^ te[1][(s3 >> 8) & 0xff] ^ te[2][(s0 >> 16) & 0xff] ^ te[3][s1 >> 24] ^ k[2];
    t3 = te[0][s3 & 0xff] ^ te[1][(s0 >> 8) & 0xff] ^ te[2][(s1 >> 16) & 0xff] ^ te[3][s2 >> 24] ^ k[3];
    k += 4;
    /* Round 14: SubBytes and ShiftRows only. */
    *c0 = ((uint32_t)sbox[t0 & 0xff] | ((uint32_t)sbox[(t1 >> 8) & 0xff] << 8) |
           ((uint32_t)sbox[(t2 >> 16) & 0xff] << 16) | ((uint32_t)sbox[t3 >> 24] << 24)) ^ k[0];
    *c1 = ((uint32_t)sbox[t1 & 0xff] | ((uint32_t)sbox[(t2 >> 8) & 0xff] << 8) |
           ((uint32_t)sbox[(t3 >> 16) & 0xff] << 16) | ((uint32_t)sbox[t0 >> 24] << 24)) ^ k[1];
    *c2 = ((uint32_t)sbox[t2 & 0xff] | ((uint32_t)sbox[(t3 >> 8) & 0xff] << 8) |
           ((uint32_t)sbox[(t0 >> 16) & 0xff] << 16) | ((uint32_t)sbox[t1 >> 24] << 24)) ^ k[2];
    *c3 = ((uint32_t)sbox[t3 & 0xff] | ((uint32_t)sbox[(t0 >> 8) & 0xff] << 8) |
           ((uint32_t)sbox[(t1 >> 16) & 0xff] << 16) | ((uint32_t)sbox[t2 >> 24] << 24)) ^ k[3];
}

void tt_encrypt_block(const uint32_t rk[TT_ROUND_KEY_WORDS], const uint8_t in[16], uint8_t out[16])
{
    uint32_t c0 = load32(in) ^ rk[0];
    uint32_t c1 = load32(in + 4) ^ rk[1];
    uint32_t c2 = load32(in + 8) ^ rk[2];
    uint32_t c3 = load32(in + 12) ^ rk[3];
    encrypt_columns(rk, &c0, &c1, &c2, &c3);
    store32(out, c0);
    store32(out + 4, c1);
    store32(out + 8, c2);
    store32(out + 12, c3);
}

void tt_cbc_encrypt(const uint32_t rk[TT_ROUND_KEY_WORDS], uint8_t iv[16], uint8_t *data, size_t len)
{
    /* The chaining value stays in registers between blocks. */
    uint32_t c0 = load32(iv), c1 = load32(iv + 4), c2 = load32(iv + 8), c3 = load32(iv + 12);
    for (size_t at = 0; at + 16 <= len; at += 16) {
        uint8_t *block = data + at;
        c0 ^= load32(block) ^ rk[0];
        c1 ^= load32(block + 4) ^ rk[1];
        c2 ^= load32(block + 8) ^ rk[2];
        c3 ^= load32(block + 12) ^ rk[3];
        encrypt_columns(rk, &c0, &c1, &c2, &c3);
        store32(block, c0);
        store32(block + 4, c1);
        store32(block + 8, c2);
        store32(block + 12, c3);
    }
    store32(iv, c0);
    store32(iv + 4, c1);
    store32(iv + 8, c2);
    store32(iv + 12, c3);
}
