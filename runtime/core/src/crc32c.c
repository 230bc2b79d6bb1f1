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
 * pass over the bytes.
 *
 * Where the CPU has AVX-512 (and ofl_simd_level() allows it) the same scheme runs on
 * 512-bit vectors: four accumulators of four 128-bit lanes take 256-byte stripes
 * (D = 2048 bits), then fold down to the 256-bit kernel's end. The constants
 * (crc32c_fold.h) are checked by tests/c/test_crc32c.c, which derives them again and
 * forces every path (OFFLOW_SIMD) against a bitwise reference. */
#include "offlow/crc32c.h"

#include <string.h>

#include "crc32c_fold.h"
#include "offlow/simd.h"

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

/* The fold constants of D bits as one 128-bit lane: x^(63+D) mod P low, x^(D-1) high. */
#define LANE(d) (long long)OFL_CRC_K_##d##_HI, (long long)OFL_CRC_K_##d##_LO

/* Bytes below which the crc32 instruction path is used. */
#define FOLD_MIN 256

#define FOLD_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2,prfchw")))
#define FOLD512_TARGET                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx2,vpclmulqdq,pclmul,sse4.2,prfchw")))
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

/* The end both folding kernels share: the two lanes of x (congruent to the `off`
 * bytes done) fold into one, which takes the remaining whole 16-byte blocks (copied to
 * `dst` too when it is not NULL); returns the raw register, *used the bytes done. */
FOLD_TARGET static uint32_t fold_finish(__m256i x2, uint8_t *dst, const uint8_t *src, size_t n,
                                        size_t off, size_t *used)
{
    const __m128i k128 = _mm_set_epi64x(LANE(128));
    __m128i x = _mm_xor_si128(fold128(_mm256_castsi256_si128(x2), k128),
                              _mm256_extracti128_si256(x2, 1));
    for (; n - off >= 16; off += 16) {
        __m128i d = _mm_loadu_si128((const __m128i *)(src + off));
        if (dst) _mm_storeu_si128((__m128i *)(dst + off), d);
        x = _mm_xor_si128(fold128(x, k128), d);
    }
    *used = off;
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
}

/* Raw register update over the whole 16-byte blocks of `n` >= 128 bytes at `src`,
 * copying them to `dst` as well when it is not NULL. *used gets the bytes done.
 * Four 256-bit accumulators: 128-byte stripes, D = 1024. */
FOLD_TARGET static uint32_t fold_blocks(uint32_t r, uint8_t *dst, const uint8_t *src, size_t n,
                                        size_t *used)
{
    const __m256i k1024 = _mm256_set_epi64x(LANE(1024), LANE(1024));
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
    const __m256i k768 = _mm256_set_epi64x(LANE(768), LANE(768));
    const __m256i k512 = _mm256_set_epi64x(LANE(512), LANE(512));
    const __m256i k256 = _mm256_set_epi64x(LANE(256), LANE(256));
    x3 = _mm256_xor_si256(x3, fold256(x0, k768));
    x3 = _mm256_xor_si256(x3, fold256(x1, k512));
    x3 = _mm256_xor_si256(x3, fold256(x2, k256));
    return fold_finish(x3, dst, src, n, off, used);
}

/* Each 128-bit lane of x moved on by D bits, plus d (one three-way XOR). */
FOLD512_TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i d)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), d, 0x96);
}

/* fold_blocks with 512-bit lanes, for `n` >= 256: four 512-bit accumulators take
 * 256-byte stripes (D = 2048); x0, x1, x2 then move on by 1536, 1024 and 512 bits onto
 * x3, whose low half moves on by 256 bits onto its high half, and fold_finish goes on
 * from those 32 bytes as the 256-bit kernel does. */
FOLD512_TARGET static uint32_t fold512_blocks(uint32_t r, uint8_t *dst, const uint8_t *src,
                                              size_t n, size_t *used)
{
    const __m512i k2048 = _mm512_set_epi64(LANE(2048), LANE(2048), LANE(2048), LANE(2048));
    __m512i x0 = _mm512_loadu_si512(src);
    __m512i x1 = _mm512_loadu_si512(src + 64);
    __m512i x2 = _mm512_loadu_si512(src + 128);
    __m512i x3 = _mm512_loadu_si512(src + 192);
    if (dst) {
        _mm512_storeu_si512(dst, x0);
        _mm512_storeu_si512(dst + 64, x1);
        _mm512_storeu_si512(dst + 128, x2);
        _mm512_storeu_si512(dst + 192, x3);
    }
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)r)));
    size_t off = 256;
    for (; n - off >= 256; off += 256) {
        if (dst)
            for (int l = 0; l < 256; l += 64)
                __builtin_prefetch(dst + off + PREFETCHW_AHEAD + l, 1, 3);
        __m512i d0 = _mm512_loadu_si512(src + off);
        __m512i d1 = _mm512_loadu_si512(src + off + 64);
        __m512i d2 = _mm512_loadu_si512(src + off + 128);
        __m512i d3 = _mm512_loadu_si512(src + off + 192);
        if (dst) {
            _mm512_storeu_si512(dst + off, d0);
            _mm512_storeu_si512(dst + off + 64, d1);
            _mm512_storeu_si512(dst + off + 128, d2);
            _mm512_storeu_si512(dst + off + 192, d3);
        }
        x0 = fold512(x0, k2048, d0);
        x1 = fold512(x1, k2048, d1);
        x2 = fold512(x2, k2048, d2);
        x3 = fold512(x3, k2048, d3);
    }
    const __m512i k1536 = _mm512_set_epi64(LANE(1536), LANE(1536), LANE(1536), LANE(1536));
    const __m512i k1024 = _mm512_set_epi64(LANE(1024), LANE(1024), LANE(1024), LANE(1024));
    const __m512i k512 = _mm512_set_epi64(LANE(512), LANE(512), LANE(512), LANE(512));
    x3 = fold512(x0, k1536, x3);
    x3 = fold512(x1, k1024, x3);
    x3 = fold512(x2, k512, x3);
    const __m256i k256 = _mm256_set_epi64x(LANE(256), LANE(256));
    __m256i x = _mm256_xor_si256(fold256(_mm512_castsi512_si256(x3), k256),
                                 _mm512_extracti64x4_epi64(x3, 1));
    return fold_finish(x, dst, src, n, off, used);
}

/* __builtin_cpu_supports reads libgcc's CPU model data, filled before main. */
static int have_hw(void)
{
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
}

enum crc_path { PATH_TABLE, PATH_SSE42, PATH_FOLD256, PATH_FOLD512 };

/* The path buffers of FOLD_MIN bytes and more take: the widest fold ofl_simd_level()
 * allows where the CPU multiplies vectors (VPCLMULQDQ), else the crc32 instruction,
 * else the table. Asked per call (no state): reading OFFLOW_SIMD costs about 0.1 us
 * on the development machine, which doubles a 256-byte CRC (0.09 -> 0.2 us) and is
 * lost in a bulk transfer's chunks. */
static enum crc_path large_path(void)
{
    if (!have_hw()) return PATH_TABLE;
    if (!__builtin_cpu_supports("vpclmulqdq")) return PATH_SSE42;
    enum ofl_simd s = ofl_simd_level();
    return s >= OFL_SIMD_AVX512 ? PATH_FOLD512 : s >= OFL_SIMD_AVX2 ? PATH_FOLD256 : PATH_SSE42;
}

/* Folding over `len` >= FOLD_MIN bytes when a fold path is chosen (copying them as
 * well when dst is not NULL): *r becomes the raw register and the bytes done are
 * returned (0: no folding path, nothing done). */
static size_t fold_any(uint32_t *r, uint8_t *dst, const uint8_t *src, size_t len)
{
    size_t used = 0;
    switch (large_path()) {
    case PATH_FOLD512: *r = fold512_blocks(*r, dst, src, len, &used); break;
    case PATH_FOLD256: *r = fold_blocks(*r, dst, src, len, &used); break;
    default: break;
    }
    return used;
}

const char *ofl_crc32c_path(void)
{
    static const char *const names[] = {"table", "sse4.2", "avx2+vpclmulqdq", "avx512+vpclmulqdq"};
    return names[large_path()];
}

uint32_t ofl_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t r = ~crc;
    size_t used = len >= FOLD_MIN ? fold_any(&r, NULL, p, len) : 0;
    if (used) return ~hw_update(r, p + used, len - used);
    if (have_hw()) return ~hw_update(~crc, buf, len);
    return ~sw_update(~crc, buf, len);
}

/* One pass when folding is available: *done gets the bytes copied (0: none). */
static uint32_t copy_fold(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len,
                          size_t *done)
{
    *done = 0;
    uint32_t r = ~crc;
    size_t used = len >= FOLD_MIN ? fold_any(&r, dst, src, len) : 0;
    if (!used) return crc;
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

const char *ofl_crc32c_path(void)
{
    return "table";
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
