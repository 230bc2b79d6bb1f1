/* Small integer hash helpers for element bodies. */
#ifndef OFL_HASH_H
#define OFL_HASH_H

#include <stdint.h>

/* The murmur3 32-bit finalizer: every input bit affects every output bit. Used after
 * a linear hash such as CRC32C, whose outputs for consecutive inputs are correlated. */
static inline uint32_t ofl_fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

#endif
