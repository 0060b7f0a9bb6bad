/* Stands in for the configuration.h that OpenSSL's Configure generates:
 * the firmware compiles only crypto/aes/aes_core.c, crypto/aes/aes_cbc.c and
 * crypto/modes/cbc128.c (from the openssl-src crate's sources), which need
 * no more than this. OPENSSL_NO_ASM: the C code, as on a target without
 * assembly (OpenSSL has no rv32 AES assembly without Zkn). */
#ifndef AESD_FW_OPENSSL_CONFIGURATION_H
#define AESD_FW_OPENSSL_CONFIGURATION_H
#define OPENSSL_CONFIGURED_API 30000
#define OPENSSL_NO_ASM
#endif
