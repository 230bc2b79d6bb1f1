/* Vector batched IPv4 lookups over DIR-24-8 (lpm4.h): AVX2 (8 lanes) and AVX-512 (16
 * lanes), the same steps at two widths. Per vector of addresses: a gather of the
 * directory entries (the block of each /16), a gather of the tbl24 entries, and, only
 * when a lane's entry is a group, a gather over tbl8 masked to those lanes; in groups
 * of addresses whose tbl24 and tbl8 entries are prefetched before they are gathered
 * (G-Opt, as the scalar path). The addresses left over after the last whole vector
 * take the scalar lookup.
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

/* Addresses per group: as in the scalar path (lpm4.c), every tbl24 entry of a group is
 * prefetched before the first is read, so that the group's cache misses overlap (a
 * gather waits for all its lanes, and a CPU keeps few gathers in flight: without the
 * prefetches AVX2 ran at a third of the scalar path's rate on the full table). */
#define GROUP 64

/* Index of a tbl8 entry of a lane whose tbl24 entry e is a group. */
#define TBL8_AT(e, a) (((e) & (OFL_LPM4_GROUP - 1)) << 8 | ((a) & 0xFF))

/* One group of m addresses (m a multiple of 8, at most GROUP): gathers of the directory
 * give every tbl24 index (at), prefetched; gathers of tbl24 give the entries (ev), and
 * the tbl8 entries of the lanes that are groups are prefetched; then a masked gather
 * over tbl8 for the vectors that have such lanes, packed into the hops. */
AVX2 static void group8(const struct ofl_lpm4 *t, const uint32_t *a, uint16_t *h, unsigned m)
{
    uint32_t at[GROUP] __attribute__((aligned(32)));
    uint32_t ev[GROUP] __attribute__((aligned(32)));
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF), byte = _mm256_set1_epi32(0xFF);
    const __m256i low15 = _mm256_set1_epi32(OFL_LPM4_GROUP - 1);
    for (unsigned j = 0; j < m; j += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(a + j));
        __m256i blk = _mm256_and_si256(
            _mm256_i32gather_epi32((const int *)t->dir, _mm256_srli_epi32(v, 16), 2), lo16);
        _mm256_store_si256((__m256i *)(at + j),
                           _mm256_or_si256(_mm256_slli_epi32(blk, 8),
                                           _mm256_and_si256(_mm256_srli_epi32(v, 8), byte)));
    }
    for (unsigned j = 0; j < m; j++) __builtin_prefetch(&t->tbl24[at[j]]);
    unsigned deep = 0;
    for (unsigned j = 0; j < m; j += 8) {
        __m256i e = _mm256_and_si256(
            _mm256_i32gather_epi32((const int *)t->tbl24,
                                   _mm256_load_si256((const __m256i *)(at + j)), 2), lo16);
        _mm256_store_si256((__m256i *)(ev + j), e);
        /* Entries are at most 0xFFFF: the signed compare finds the group flag. */
        unsigned grp = (unsigned)_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(e, low15)));
        deep |= grp;
        for (; grp; grp &= grp - 1) {
            unsigned k = j + (unsigned)__builtin_ctz(grp);
            __builtin_prefetch(&t->tbl8[TBL8_AT(ev[k], a[k])]);
        }
    }
    for (unsigned j = 0; j < m; j += 8) {
        __m256i e = _mm256_load_si256((const __m256i *)(ev + j));
        __m256i grp = _mm256_cmpgt_epi32(e, low15);
        if (deep && !_mm256_testz_si256(grp, grp)) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(a + j));
            __m256i g8 = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(e, low15), 8),
                                         _mm256_and_si256(v, byte));
            e = _mm256_and_si256(
                _mm256_mask_i32gather_epi32(e, (const int *)t->tbl8, g8, grp, 2), lo16);
        }
        /* Hops fit 16 bits: the unsigned saturating pack keeps them. */
        _mm_storeu_si128((__m128i *)(h + j), _mm_packus_epi32(_mm256_castsi256_si128(e),
                                                              _mm256_extracti128_si256(e, 1)));
    }
}

AVX2 void ofl_lpm4_batch_avx2(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                              unsigned n)
{
    unsigned i = 0;
    for (unsigned m; (m = n - i >= GROUP ? GROUP : (n - i) & ~7u) != 0; i += m)
        group8(t, addrs + i, hops + i, m);
    for (; i < n; i++) hops[i] = ofl_lpm4_lookup(t, addrs[i]);
}

/* group8 with 16 lanes (m a multiple of 16). */
AVX512 static void group16(const struct ofl_lpm4 *t, const uint32_t *a, uint16_t *h,
                           unsigned m)
{
    uint32_t at[GROUP] __attribute__((aligned(64)));
    uint32_t ev[GROUP] __attribute__((aligned(64)));
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF), byte = _mm512_set1_epi32(0xFF);
    const __m512i low15 = _mm512_set1_epi32(OFL_LPM4_GROUP - 1);
    const __m512i flag = _mm512_set1_epi32(OFL_LPM4_GROUP);
    for (unsigned j = 0; j < m; j += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(a + j));
        __m512i blk = _mm512_and_si512(
            _mm512_i32gather_epi32(_mm512_srli_epi32(v, 16), (const void *)t->dir, 2), lo16);
        _mm512_store_si512((void *)(at + j),
                           _mm512_or_si512(_mm512_slli_epi32(blk, 8),
                                           _mm512_and_si512(_mm512_srli_epi32(v, 8), byte)));
    }
    for (unsigned j = 0; j < m; j++) __builtin_prefetch(&t->tbl24[at[j]]);
    unsigned deep = 0;
    for (unsigned j = 0; j < m; j += 16) {
        __m512i e = _mm512_and_si512(
            _mm512_i32gather_epi32(_mm512_load_si512((const void *)(at + j)),
                                   (const void *)t->tbl24, 2), lo16);
        _mm512_store_si512((void *)(ev + j), e);
        unsigned grp = _mm512_test_epi32_mask(e, flag);
        deep |= grp;
        for (; grp; grp &= grp - 1) {
            unsigned k = j + (unsigned)__builtin_ctz(grp);
            __builtin_prefetch(&t->tbl8[TBL8_AT(ev[k], a[k])]);
        }
    }
    for (unsigned j = 0; j < m; j += 16) {
        __m512i e = _mm512_load_si512((const void *)(ev + j));
        __mmask16 grp = _mm512_test_epi32_mask(e, flag);
        if (deep && grp) {
            __m512i v = _mm512_loadu_si512((const void *)(a + j));
            __m512i g8 = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(e, low15), 8),
                                         _mm512_and_si512(v, byte));
            e = _mm512_and_si512(
                _mm512_mask_i32gather_epi32(e, grp, g8, (const void *)t->tbl8, 2), lo16);
        }
        _mm256_storeu_si256((__m256i *)(h + j), _mm512_cvtepi32_epi16(e));
    }
}

AVX512 void ofl_lpm4_batch_avx512(const struct ofl_lpm4 *t, const uint32_t *addrs,
                                  uint16_t *hops, unsigned n)
{
    unsigned i = 0;
    for (unsigned m; (m = n - i >= GROUP ? GROUP : (n - i) & ~15u) != 0; i += m)
        group16(t, addrs + i, hops + i, m);
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
