/*
 * openssl-cbc: OpenSSL's AES-256-CBC, the C code that `openssl enc` and
 * `openssl speed` run on a core without AES instructions or assembly (the
 * VexRiscv: OpenSSL's generic 32-bit build, T-table AES), driven the way
 * aesd's `cost` bench drives aesd's cipher, for scripts/bench/icount.sh:
 *
 *   openssl-cbc encrypt|decrypt BYTES
 *
 * transforms BYTES (a multiple of 16) in place in one 64 KiB buffer, chunk
 * after chunk, keeping one CBC chain (the IV carries over), and prints a
 * checksum of the final chaining value. BYTES = 0 is the baseline. The buffer's
 * previous content is the next chunk's input; AES-CBC costs the same
 * whatever the bytes (up to cache effects, which qemu does not model).
 *
 * Built by icount.sh against OpenSSL's crypto/aes/aes_core.c, aes_cbc.c and
 * crypto/modes/cbc128.c from the openssl-src crate's sources (fetched into a
 * cache outside the repository), with the board's C compiler (zig).
 * Exit status: 0 done, 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/aes.h>

#define CHUNK (64 * 1024)

static unsigned char buffer[CHUNK];

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "encrypt") != 0 && strcmp(argv[1], "decrypt") != 0)) {
        fprintf(stderr, "usage: openssl-cbc encrypt|decrypt BYTES\n");
        return 2;
    }
    int encrypt = strcmp(argv[1], "encrypt") == 0;
    char *end = NULL;
    unsigned long long bytes = strtoull(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || bytes % 16 != 0) {
        fprintf(stderr, "openssl-cbc: BYTES must be a multiple of 16, not %s\n", argv[2]);
        return 2;
    }

    unsigned char key_bytes[32];
    unsigned char iv[16];
    for (int i = 0; i < 32; i++) {
        key_bytes[i] = (unsigned char)(7 * i + 1);
    }
    for (int i = 0; i < 16; i++) {
        iv[i] = (unsigned char)(3 * i + 2);
    }
    AES_KEY key;
    int rc = encrypt ? AES_set_encrypt_key(key_bytes, 256, &key)
                     : AES_set_decrypt_key(key_bytes, 256, &key);
    if (rc != 0) {
        fprintf(stderr, "openssl-cbc: key setup failed\n");
        return 1;
    }

    while (bytes > 0) {
        size_t len = bytes < CHUNK ? (size_t)bytes : CHUNK;
        AES_cbc_encrypt(buffer, buffer, len, &key, iv, encrypt ? AES_ENCRYPT : AES_DECRYPT);
        bytes -= len;
    }
    /* The chaining value (the last ciphertext block) depends on every byte. */
    unsigned sum = 0;
    for (int i = 0; i < 16; i++) {
        sum = sum * 31 + iv[i];
    }
    printf("%s checksum=%08x\n", argv[1], sum);
    return 0;
}
