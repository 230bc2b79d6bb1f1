/* Small integer hash helpers, for element bodies and the runtime. */
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

/* The murmur3 64-bit finalizer (fmix64): the same for 64-bit values. */
static inline uint64_t ofl_fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

#endif
