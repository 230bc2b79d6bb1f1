/* The paths of the batched IPv4 lookup (ofl_lpm4_lookup_batch_at in lpm4.h says what
 * each does): the scalar reference (lpm4.c) and the vector kernels (lpm4_simd.c). Each
 * has the contract of ofl_lpm4_lookup_batch; a vector kernel may be called only where
 * ofl_simd_cpu() has its level. */
#ifndef OFL_LPM4_SIMD_H
#define OFL_LPM4_SIMD_H

#include "offlow/lpm4.h"

/* G-Opt style batches of scalar lookups (lpm4.c). */
void ofl_lpm4_batch_scalar(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n);

/* 8 addresses per AVX2 vector (the CPU must have AVX2). */
void ofl_lpm4_batch_avx2(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                         unsigned n);

/* 16 addresses per AVX-512 vector (the CPU must have AVX-512 F, BW and VL). */
void ofl_lpm4_batch_avx512(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n);

#endif
