/* CRC32C: the SSE4.2 crc32 instruction, or a byte table.
 *
 * The crc32 instruction has a latency of about 3 cycles and a throughput of one per
 * cycle, so one dependent stream reaches a third of its speed. Large buffers are cut
 * into blocks of three equal parts whose CRCs run side by side; the three raw CRC
 * registers are then joined: a register r followed by n zero bytes is r * x^(8n)
 * mod P, done with one carry-less multiply by a constant and one crc32 reduction. */
#include "offlow/crc32c.h"

#include <string.h>

/* The Castagnoli polynomial, bit-reflected. */
#define POLY 0x82F63B78u

/* Table entry for byte n: eight reflected shift/reduce steps (computed by the
 * compiler, so the table is read-only data, not start-up state). */
#define S1(c) (((c) >> 1) ^ (((c) & 1u) ? POLY : 0u))
#define S2(c) S1(S1(c))
#define S8(c) S2(S2(S2(S2((uint32_t)(c)))))
#define R4(n) S8(n), S8((n) + 1), S8((n) + 2), S8((n) + 3)
#define R16(n) R4(n), R4((n) + 4), R4((n) + 8), R4((n) + 12)
#define R64(n) R16(n), R16((n) + 16), R16((n) + 32), R16((n) + 48)

static const uint32_t table[256] = {R64(0), R64(64), R64(128), R64(192)};

/* Raw register update (no pre/post inversion) one byte at a time. */
static uint32_t sw_update(uint32_t r, const uint8_t *p, size_t n)
{
    while (n--) r = (r >> 8) ^ table[(r ^ *p++) & 0xFFu];
    return r;
}

uint32_t ofl_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    return ~sw_update(~crc, buf, len);
}

#if defined(__x86_64__)
#include <immintrin.h>

/* Block geometry of the three-stream loop: part length and the constants
 * x^(8L-33) and x^(16L-33) mod P (reflected) that shift a register past one and
 * two parts. The 33 absorbs the multiply's one-bit offset and crc32's x^32. */
struct block3 {
    size_t part;
    uint64_t k1, k2;
};

static const struct block3 big = {4096, 0x82F89C77u, 0x54A86326u};
static const struct block3 small = {256, 0xB9E02B86u, 0xDD7E3B0Cu};

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* r * x^(8L) mod P for the part length L whose constant is k. */
__attribute__((target("sse4.2,pclmul"))) static inline uint32_t shift(uint32_t r, uint64_t k)
{
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)r), _mm_cvtsi64_si128((long long)k), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* Whole blocks of three parts of b->part bytes; returns the register, advances *pp. */
__attribute__((target("sse4.2,pclmul"))) static uint32_t hw_blocks(uint32_t r, const uint8_t **pp,
                                                                  size_t *np, const struct block3 *b)
{
    const uint8_t *p = *pp;
    size_t n = *np, part = b->part;
    while (n >= 3 * part) {
        uint64_t c0 = r, c1 = 0, c2 = 0;
        for (size_t i = 0; i < part; i += 8) {
            c0 = _mm_crc32_u64(c0, load64(p + i));
            c1 = _mm_crc32_u64(c1, load64(p + part + i));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * part + i));
        }
        r = shift((uint32_t)c0, b->k2) ^ shift((uint32_t)c1, b->k1) ^ (uint32_t)c2;
        p += 3 * part;
        n -= 3 * part;
    }
    *pp = p;
    *np = n;
    return r;
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t hw_update(uint32_t r, const uint8_t *p,
                                                                  size_t n)
{
    /* Byte steps up to 8-byte alignment keep the loads aligned. */
    while (n && ((uintptr_t)p & 7u)) {
        r = _mm_crc32_u8(r, *p++);
        n--;
    }
    r = hw_blocks(r, &p, &n, &big);
    r = hw_blocks(r, &p, &n, &small);
    uint64_t c = r;
    for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, load64(p));
    r = (uint32_t)c;
    while (n--) r = _mm_crc32_u8(r, *p++);
    return r;
}

/* __builtin_cpu_supports reads libgcc's CPU model data, filled before main. */
static int have_hw(void)
{
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
}

uint32_t ofl_crc32c(uint32_t crc, const void *buf, size_t len)
{
    if (have_hw()) return ~hw_update(~crc, buf, len);
    return ~sw_update(~crc, buf, len);
}
#else
uint32_t ofl_crc32c(uint32_t crc, const void *buf, size_t len)
{
    return ~sw_update(~crc, buf, len);
}
#endif

/* Blocks small enough that the CRC reads them back from L1. */
#define COPY_BLOCK 8192

uint32_t ofl_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (len) {
        size_t n = len < COPY_BLOCK ? len : COPY_BLOCK;
        memcpy(d, s, n);
        crc = ofl_crc32c(crc, d, n);
        d += n;
        s += n;
        len -= n;
    }
    return crc;
}
