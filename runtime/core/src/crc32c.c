/* CRC32C: carry-less multiply folding (VPCLMULQDQ), the SSE4.2 crc32 instruction,
 * or a byte table.
 *
 * The crc32 instruction has a latency of about 3 cycles and a throughput of one per
 * cycle, so one dependent stream reaches a third of its speed. Large buffers are cut
 * into blocks of three equal parts whose CRCs run side by side; the three raw CRC
 * registers are then joined: a register r followed by n zero bytes is r * x^(8n)
 * mod P, done with one carry-less multiply by a constant and one crc32 reduction.
 * That reaches 8 bytes a cycle, below a memcpy of cached data.
 *
 * Folding goes further where the CPU multiplies 256-bit vectors (VPCLMULQDQ, AVX2):
 * 16-byte blocks are read as polynomials (bit-reflected: byte 0's low bit is the
 * highest power). Eight 128-bit accumulators take the blocks of each 128-byte
 * stripe; to move on by one stripe an accumulator X = hi * x^64 + lo (lo: its low
 * 8 bytes, the earlier ones) becomes lo * x^(64+D) + hi * x^D mod P plus the next
 * block, D = 1024 bits: two carry-less multiplies by constants. A product of
 * reflected 64-bit values is the reflected 128-bit x * a * b, so the constants are
 * x^(63+D) mod P and x^(D-1) mod P. At the end the accumulators fold into one 128-bit
 * X congruent to the data; the register after the data is X * x^32 mod P, which is
 * what the crc32 instruction computes from a zero register over X's 16 bytes. The
 * starting register enters as the data's first 32 bits (r * x^(8n) = (r * x^(8n-32))
 * * x^32). The same loop stores each loaded vector, which makes ofl_crc32c_copy one
 * pass over the bytes. The constants were computed with polynomial arithmetic over
 * GF(2) (a few lines of Python) and the results are checked against the byte table
 * by tests/c/test_chan.c. */
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

/* x^n mod P as the reflected 64-bit operand of a carry-less multiply, for the fold
 * distances used below (D bits: x^(63+D) in the low half, x^(D-1) in the high). */
#define K_1024_LO 0x6577b24500000000ull
#define K_1024_HI 0x7417153f00000000ull
#define K_768_LO 0xc92f998d00000000ull
#define K_768_HI 0x3365346a00000000ull
#define K_512_LO 0x1c19243b00000000ull
#define K_512_HI 0x75bba45b00000000ull
#define K_256_LO 0x33ccbbbc00000000ull
#define K_256_HI 0xa2158b3400000000ull
#define K_128_LO 0x3743f7bd00000000ull
#define K_128_HI 0x3171d43000000000ull

/* Bytes below which the crc32 instruction path is used. */
#define FOLD_MIN 256

#define FOLD_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2,prfchw")))
/* How far ahead a copy asks for its destination lines in exclusive state (PREFETCHW):
 * a staging ring's lines sit in the reading core's cache, and stores that first have
 * to take them one by one stall the copy. */
#define PREFETCHW_AHEAD 512

/* Each 128-bit lane of x moved on by D bits (k: the constants of D in every lane). */
FOLD_TARGET static inline __m256i fold256(__m256i x, __m256i k)
{
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00),
                            _mm256_clmulepi64_epi128(x, k, 0x11));
}

FOLD_TARGET static inline __m128i fold128(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Raw register update over the whole 16-byte blocks of `n` >= 128 bytes at `src`,
 * copying them to `dst` as well when it is not NULL. *used gets the bytes done. */
FOLD_TARGET static uint32_t fold_blocks(uint32_t r, uint8_t *dst, const uint8_t *src, size_t n,
                                        size_t *used)
{
    const __m256i k1024 = _mm256_set_epi64x((long long)K_1024_HI, (long long)K_1024_LO,
                                            (long long)K_1024_HI, (long long)K_1024_LO);
    __m256i x0 = _mm256_loadu_si256((const __m256i *)src);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(src + 32));
    __m256i x2 = _mm256_loadu_si256((const __m256i *)(src + 64));
    __m256i x3 = _mm256_loadu_si256((const __m256i *)(src + 96));
    if (dst) {
        _mm256_storeu_si256((__m256i *)dst, x0);
        _mm256_storeu_si256((__m256i *)(dst + 32), x1);
        _mm256_storeu_si256((__m256i *)(dst + 64), x2);
        _mm256_storeu_si256((__m256i *)(dst + 96), x3);
    }
    x0 = _mm256_xor_si256(x0, _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, (int)r));
    size_t off = 128;
    for (; n - off >= 128; off += 128) {
        if (dst) {
            __builtin_prefetch(dst + off + PREFETCHW_AHEAD, 1, 3);
            __builtin_prefetch(dst + off + PREFETCHW_AHEAD + 64, 1, 3);
        }
        __m256i d0 = _mm256_loadu_si256((const __m256i *)(src + off));
        __m256i d1 = _mm256_loadu_si256((const __m256i *)(src + off + 32));
        __m256i d2 = _mm256_loadu_si256((const __m256i *)(src + off + 64));
        __m256i d3 = _mm256_loadu_si256((const __m256i *)(src + off + 96));
        if (dst) {
            _mm256_storeu_si256((__m256i *)(dst + off), d0);
            _mm256_storeu_si256((__m256i *)(dst + off + 32), d1);
            _mm256_storeu_si256((__m256i *)(dst + off + 64), d2);
            _mm256_storeu_si256((__m256i *)(dst + off + 96), d3);
        }
        x0 = _mm256_xor_si256(fold256(x0, k1024), d0);
        x1 = _mm256_xor_si256(fold256(x1, k1024), d1);
        x2 = _mm256_xor_si256(fold256(x2, k1024), d2);
        x3 = _mm256_xor_si256(fold256(x3, k1024), d3);
    }
    /* Lanes of x0, x1, x2 move on by 768, 512 and 256 bits onto those of x3. */
    const __m256i k768 = _mm256_set_epi64x((long long)K_768_HI, (long long)K_768_LO,
                                           (long long)K_768_HI, (long long)K_768_LO);
    const __m256i k512 = _mm256_set_epi64x((long long)K_512_HI, (long long)K_512_LO,
                                           (long long)K_512_HI, (long long)K_512_LO);
    const __m256i k256 = _mm256_set_epi64x((long long)K_256_HI, (long long)K_256_LO,
                                           (long long)K_256_HI, (long long)K_256_LO);
    x3 = _mm256_xor_si256(x3, fold256(x0, k768));
    x3 = _mm256_xor_si256(x3, fold256(x1, k512));
    x3 = _mm256_xor_si256(x3, fold256(x2, k256));
    const __m128i k128 = _mm_set_epi64x((long long)K_128_HI, (long long)K_128_LO);
    __m128i x = _mm_xor_si128(fold128(_mm256_castsi256_si128(x3), k128),
                              _mm256_extracti128_si256(x3, 1));
    for (; n - off >= 16; off += 16) {
        __m128i d = _mm_loadu_si128((const __m128i *)(src + off));
        if (dst) _mm_storeu_si128((__m128i *)(dst + off), d);
        x = _mm_xor_si128(fold128(x, k128), d);
    }
    *used = off;
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
}

static int have_fold(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
}

/* __builtin_cpu_supports reads libgcc's CPU model data, filled before main. */
static int have_hw(void)
{
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
}

uint32_t ofl_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (len >= FOLD_MIN && have_fold()) {
        size_t used;
        uint32_t r = fold_blocks(~crc, NULL, p, len, &used);
        return ~hw_update(r, p + used, len - used);
    }
    if (have_hw()) return ~hw_update(~crc, buf, len);
    return ~sw_update(~crc, buf, len);
}

/* One pass when folding is available: *done gets the bytes copied (0: none). */
static uint32_t copy_fold(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len,
                          size_t *done)
{
    *done = 0;
    if (len < FOLD_MIN || !have_fold()) return crc;
    size_t used;
    uint32_t r = fold_blocks(~crc, dst, src, len, &used);
    memcpy(dst + used, src + used, len - used);
    *done = len;
    return ~hw_update(r, src + used, len - used);
}
#else
static uint32_t copy_fold(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len,
                          size_t *done)
{
    (void)dst, (void)src, (void)len;
    *done = 0;
    return crc;
}

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
    size_t done;
    crc = copy_fold(crc, d, s, len, &done);
    if (done) return crc;
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
