/* The vector level kernels may use (simd.h). */
#include "offlow/simd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"scalar", "avx2", "avx512"};

const char *ofl_simd_name(enum ofl_simd s)
{
    return (unsigned)s < sizeof NAMES / sizeof NAMES[0] ? NAMES[s] : "?";
}

int ofl_simd_parse(const char *name, enum ofl_simd *out)
{
    for (unsigned i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strcmp(name, NAMES[i]) == 0) {
            *out = (enum ofl_simd)i;
            return 0;
        }
    return -EINVAL;
}

/* __builtin_cpu_supports reads libgcc's CPU model data, filled before main. */
enum ofl_simd ofl_simd_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return OFL_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2")) return OFL_SIMD_AVX2;
#endif
    return OFL_SIMD_SCALAR;
}

enum ofl_simd ofl_simd_level(void)
{
    enum ofl_simd cpu = ofl_simd_cpu(), cap;
    const char *env = getenv("OFFLOW_SIMD");
    if (env && *env && ofl_simd_parse(env, &cap) == 0 && cap < cpu) return cap;
    return cpu;
}

int ofl_simd_check_env(char *errbuf)
{
    const char *env = getenv("OFFLOW_SIMD");
    enum ofl_simd s;
    if (!env || !*env || ofl_simd_parse(env, &s) == 0) return 0;
    snprintf(errbuf, 256, "OFFLOW_SIMD=%.64s names no vector level (scalar, avx2, avx512)", env);
    return -EINVAL;
}
