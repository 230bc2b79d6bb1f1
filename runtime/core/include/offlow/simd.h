/* Which vector instructions a kernel may use: the widest level this CPU has, capped by
 * the environment so that tests and benchmarks can force every path on one machine.
 *
 *   OFFLOW_SIMD=scalar|avx2|avx512   use at most this level (unset: the CPU's widest)
 *
 * A kernel with vector forms (the LPM lookups, CRC32C) asks ofl_simd_level() once
 * (when its table is built, or per call for a stateless kernel) and keeps its portable
 * form for OFL_SIMD_SCALAR. A cap above what the CPU has gives the CPU's level: forcing
 * AVX-512 on a CPU without it runs AVX2 (a test checks ofl_simd_cpu() and skips). */
#ifndef OFL_SIMD_H
#define OFL_SIMD_H

enum ofl_simd {
    OFL_SIMD_SCALAR = 0, /* portable C */
    OFL_SIMD_AVX2 = 1,   /* AVX2 (+ VPCLMULQDQ where a kernel needs it, checked there) */
    OFL_SIMD_AVX512 = 2, /* AVX-512 F, BW and VL */
};

/* The widest level this CPU has (AVX-512 needs F, BW and VL). */
enum ofl_simd ofl_simd_cpu(void);

/* The level kernels use: ofl_simd_cpu() capped by OFFLOW_SIMD when it is set to a known
 * name (an unknown name is ignored here; ofl_simd_check_env() reports it). */
enum ofl_simd ofl_simd_level(void);

/* 0, or -EINVAL with a message in errbuf (256 bytes) when OFFLOW_SIMD names no level,
 * for a C program run on its own to refuse a typo (`offlow run` and `offlow bench` refuse
 * one before anything starts: offlow/runner.py check_simd_env). */
int ofl_simd_check_env(char *errbuf);

/* "scalar", "avx2" or "avx512". */
const char *ofl_simd_name(enum ofl_simd s);

/* The level named `name` into *out: 0, or -EINVAL for a name that is none of them. */
int ofl_simd_parse(const char *name, enum ofl_simd *out);

#endif
