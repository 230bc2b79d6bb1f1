/* Vector batched IPv4 lookups over DIR-24-8 (lpm4.h): AVX2 (8 lanes) and AVX-512 (16
 * lanes), the same steps at two widths. Per vector of addresses: a gather of the
 * directory entries (the block of each /16), a gather of the tbl24 entries, and, only
 * when a lane's entry is a group, a gather over tbl8 masked to those lanes. The
 * addresses left over after the last whole vector take the scalar lookup.
 *
 * Entries are 16 bits and the gathers read 32: each lane reads its entry and the 2
 * bytes after it, and keeps the low half (x86 is little endian). lpm4.c pads the
 * directory, tbl24 and tbl8 so that the bytes after the last entry exist.
 *
 * Racing updates (lpm4_update.c) see what the scalar lookup sees: each entry is read
 * by one load (the 2 bytes of an aligned entry lie in one cache line even when the
 * 4-byte lane crosses into the next), and the address of every tbl24 and tbl8 read
 * depends on the entry read before it, which x86 keeps in order as the acquire loads
 * of ofl_lpm4_lookup do. */
#include "lpm4_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The hops of the 8 addresses in `a`, one per 32-bit lane. */
AVX2 static inline __m256i lookup8(const struct ofl_lpm4 *t, __m256i a)
{
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF), byte = _mm256_set1_epi32(0xFF);
    __m256i blk = _mm256_and_si256(
        _mm256_i32gather_epi32((const int *)t->dir, _mm256_srli_epi32(a, 16), 2), lo16);
    __m256i at = _mm256_or_si256(_mm256_slli_epi32(blk, 8),
                                 _mm256_and_si256(_mm256_srli_epi32(a, 8), byte));
    __m256i e = _mm256_and_si256(_mm256_i32gather_epi32((const int *)t->tbl24, at, 2), lo16);
    /* Entries are at most 0xFFFF: the signed compare finds the group flag. */
    __m256i grp = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(OFL_LPM4_GROUP - 1));
    if (_mm256_testz_si256(grp, grp)) return e;
    __m256i g8 = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(e, _mm256_set1_epi32(OFL_LPM4_GROUP - 1)), 8),
        _mm256_and_si256(a, byte));
    return _mm256_and_si256(_mm256_mask_i32gather_epi32(e, (const int *)t->tbl8, g8, grp, 2),
                            lo16);
}

AVX2 void ofl_lpm4_batch_avx2(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                              unsigned n)
{
    unsigned i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i e = lookup8(t, _mm256_loadu_si256((const __m256i *)(addrs + i)));
        /* Hops fit 16 bits: the unsigned saturating pack keeps them. */
        _mm_storeu_si128((__m128i *)(hops + i),
                         _mm_packus_epi32(_mm256_castsi256_si128(e),
                                          _mm256_extracti128_si256(e, 1)));
    }
    for (; i < n; i++) hops[i] = ofl_lpm4_lookup(t, addrs[i]);
}

/* The hops of the 16 addresses in `a`, one per 32-bit lane (lookup8, wider). */
AVX512 static inline __m512i lookup16(const struct ofl_lpm4 *t, __m512i a)
{
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF), byte = _mm512_set1_epi32(0xFF);
    __m512i blk = _mm512_and_si512(
        _mm512_i32gather_epi32(_mm512_srli_epi32(a, 16), (const void *)t->dir, 2), lo16);
    __m512i at = _mm512_or_si512(_mm512_slli_epi32(blk, 8),
                                 _mm512_and_si512(_mm512_srli_epi32(a, 8), byte));
    __m512i e = _mm512_and_si512(_mm512_i32gather_epi32(at, (const void *)t->tbl24, 2), lo16);
    __mmask16 grp = _mm512_test_epi32_mask(e, _mm512_set1_epi32(OFL_LPM4_GROUP));
    if (!grp) return e;
    __m512i g8 = _mm512_or_si512(
        _mm512_slli_epi32(_mm512_and_si512(e, _mm512_set1_epi32(OFL_LPM4_GROUP - 1)), 8),
        _mm512_and_si512(a, byte));
    return _mm512_and_si512(_mm512_mask_i32gather_epi32(e, grp, g8, (const void *)t->tbl8, 2),
                            lo16);
}

AVX512 void ofl_lpm4_batch_avx512(const struct ofl_lpm4 *t, const uint32_t *addrs,
                                  uint16_t *hops, unsigned n)
{
    unsigned i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i e = lookup16(t, _mm512_loadu_si512((const void *)(addrs + i)));
        _mm256_storeu_si256((__m256i *)(hops + i), _mm512_cvtepi32_epi16(e));
    }
    for (; i < n; i++) hops[i] = ofl_lpm4_lookup(t, addrs[i]);
}

#else /* no x86 vectors: ofl_simd_cpu() is OFL_SIMD_SCALAR, these are never chosen */

void ofl_lpm4_batch_avx2(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                         unsigned n)
{
    ofl_lpm4_batch_scalar(t, addrs, hops, n);
}

void ofl_lpm4_batch_avx512(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n)
{
    ofl_lpm4_batch_scalar(t, addrs, hops, n);
}

#endif
