/* freestanding stand-in */
#include <stdint.h>
