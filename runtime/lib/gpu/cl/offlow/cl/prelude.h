/* What a generated OpenCL C 1.2 kernel (offlow/codegen/opencl.py) gives the element
 * bodies: C's fixed-size integer types, memcpy and friends over private memory, the
 * GCC builtins pkt.c uses, pkt.h's parsers and checksums (compiled in) and the body
 * macros of body.h. A body sees its packet and state in private memory (the kernel
 * copies them in and out), so its plain pointers are private pointers as in C. */
#ifndef OFL_CL_PRELUDE_H
#define OFL_CL_PRELUDE_H

typedef uchar uint8_t;
typedef ushort uint16_t;
typedef uint uint32_t;
typedef ulong uint64_t;
typedef char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;

/* OpenCL 1.2 has no C library: byte loops over private memory. */
static inline void *ofl_cl_memcpy(void *d, const void *s, size_t n)
{
    uchar *dd = d;
    const uchar *ss = s;
    for (size_t i = 0; i < n; i++) dd[i] = ss[i];
    return d;
}

static inline void *ofl_cl_memset(void *d, int c, size_t n)
{
    uchar *dd = d;
    for (size_t i = 0; i < n; i++) dd[i] = (uchar)c;
    return d;
}

static inline int ofl_cl_memcmp(const void *a, const void *b, size_t n)
{
    const uchar *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

static inline uint ofl_cl_bswap32(uint x)
{
    return (x >> 24) | (x >> 8 & 0xFF00u) | (x << 8 & 0xFF0000u) | (x << 24);
}

static inline ulong ofl_cl_bswap64(ulong x)
{
    return (ulong)ofl_cl_bswap32((uint)x) << 32 | ofl_cl_bswap32((uint)(x >> 32));
}

#define memcpy ofl_cl_memcpy
#define memset ofl_cl_memset
#define memcmp ofl_cl_memcmp
#define __builtin_memcpy ofl_cl_memcpy
#define __builtin_memset ofl_cl_memset
#define __builtin_bswap16(x) ((ushort)((ushort)(x) >> 8 | (ushort)(x) << 8))
#define __builtin_bswap32 ofl_cl_bswap32
#define __builtin_bswap64 ofl_cl_bswap64
#define __builtin_expect(x, v) (x)

#include "offlow/pkt.h"
#include "pkt.c" /* runtime/core/src: the kernel is built with -I there */
#include "offlow/body.h"

/* A compile-time check of a layout the host shares (OpenCL 1.2 has no _Static_assert). */
#define OFL_CL_CHECK(name, cond) typedef char ofl_cl_check_##name[(cond) ? 1 : -1]

#endif
