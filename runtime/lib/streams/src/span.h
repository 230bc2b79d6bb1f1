/* Distances between order attributes without signed overflow: t is any int64 (a
 * tuple's value or its ts), so t - size, t + size and a - b can leave int64. */
#ifndef OFL_STREAMS_SPAN_H
#define OFL_STREAMS_SPAN_H

#include <stdint.h>

/* b - a for a <= b, exact (it fits uint64 for any two int64). */
static inline uint64_t ofl_span(int64_t a, int64_t b)
{
    return (uint64_t)b - (uint64_t)a;
}

/* Whether a and b are at most `size` (>= 0) apart. */
static inline int ofl_within(int64_t a, int64_t b, int64_t size)
{
    return (a <= b ? ofl_span(a, b) : ofl_span(b, a)) <= (uint64_t)size;
}

/* Whether x < t - size (size >= 0): x is more than `size` before t. */
static inline int ofl_before(int64_t x, int64_t t, int64_t size)
{
    return x < t && ofl_span(x, t) > (uint64_t)size;
}

#endif
