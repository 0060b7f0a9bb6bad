/* Stands in for OpenSSL's generated safestack.h: no stacks are used. */
