/* Stands in for OpenSSL's generated crypto.h: the AES and CBC files use
 * nothing from it but what e_os2.h declares. */
#ifndef AESD_FW_OPENSSL_CRYPTO_H
#define AESD_FW_OPENSSL_CRYPTO_H
#include <openssl/e_os2.h>
#endif
