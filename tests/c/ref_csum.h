/* The Internet checksum (RFC 1071) the slow way, 16-bit big-endian words at a time:
 * the reference the tests and the fuzz target check ofl_csum against. */
#ifndef OFL_TEST_REF_CSUM_H
#define OFL_TEST_REF_CSUM_H

#include <stddef.h>
#include <stdint.h>

static inline uint16_t ref_csum(const uint8_t *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        s += (uint32_t)(p[i] << 8 | p[i + 1]);
        s = (s & 0xFFFF) + (s >> 16);
    }
    if (n & 1) s += (uint32_t)p[n - 1] << 8;
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)~s;
}

#endif
