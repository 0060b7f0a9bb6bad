/* Stands in for OpenSSL's generated opensslv.h (see configuration.h). */
#ifndef AESD_FW_OPENSSL_OPENSSLV_H
#define AESD_FW_OPENSSL_OPENSSLV_H
#define OPENSSL_VERSION_MAJOR 3
#define OPENSSL_VERSION_MINOR 0
#define OPENSSL_VERSION_PATCH 0
#endif
