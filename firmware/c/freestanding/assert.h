/* freestanding stand-in: assertions are compiled out (-DNDEBUG, as OpenSSL release builds). */
#define assert(x) ((void)0)
