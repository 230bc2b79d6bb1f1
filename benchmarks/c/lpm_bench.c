/* What both sides of `offlow bench router` share (see lpm_bench.h). */
#include "lpm_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_io.h"

void lpm_print_list(const double *v, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%.6g", i ? ", " : "", v[i]);
    putchar(']');
}

long lpm_anon_huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

void lpm_read_routes(const char *path, int family, struct ofl_route4 **r4,
                     struct ofl_route6 **r6, size_t *n, uint16_t *def_hop)
{
    size_t len;
    uint8_t *raw = tool_read(path, &len);
    size_t rec = family == 4 ? 8 : 20;
    if (len % rec) {
        fprintf(stderr, "%s: not a whole number of %zu-byte records\n", path, rec);
        exit(1);
    }
    size_t nr = len / rec;
    *r4 = family == 4 ? calloc(nr + 1, sizeof **r4) : NULL;
    *r6 = family == 4 ? NULL : calloc(nr + 1, sizeof **r6);
    if (!*r4 && !*r6) {
        fprintf(stderr, "%s: out of memory for %zu routes\n", path, nr);
        exit(1);
    }
    *def_hop = 0;
    for (size_t i = 0; i < nr; i++) {
        const uint8_t *p = raw + i * rec;
        uint16_t hop;
        uint8_t plen = p[rec == 8 ? 6 : 18];
        memcpy(&hop, p + rec - 4, 2);
        if (family == 4) {
            memcpy(&(*r4)[i].addr, p, 4);
            (*r4)[i].hop = hop;
            (*r4)[i].len = plen;
        } else {
            memcpy((*r6)[i].addr, p, 16);
            (*r6)[i].hop = hop;
            (*r6)[i].len = plen;
        }
        if (plen == 0) *def_hop = hop;
    }
    free(raw);
    *n = nr;
}

void *lpm_read_addrs(char *arg, int family, const char *prog, char **name, size_t *n)
{
    char *eq = strchr(arg, '=');
    if (!eq) {
        fprintf(stderr, "%s: expected NAME=ADDRS, got %s\n", prog, arg);
        exit(2);
    }
    *eq = 0;
    *name = arg;
    size_t len;
    void *a = tool_read(eq + 1, &len);
    *n = len / (family == 4 ? 4 : 16);
    if (*n == 0 || *n % LPM_BURST) {
        fprintf(stderr, "%s: %zu addresses, not a positive multiple of %d\n", eq + 1, *n,
                LPM_BURST);
        exit(2);
    }
    return a;
}

int lpm_ofl_kinds(int family)
{
    return family == 4 ? 3 : 2;
}

const char *lpm_ofl_name(enum lpm_ofl_kind k)
{
    return k == LPM_OFL_SCALAR ? "offlow scalar" : k == LPM_OFL_BATCHED ? "offlow batched"
                                                                        : "offlow vector";
}

/* Not inlined into the callers' loops, so that both programs time the same code. */
__attribute__((noinline)) uint64_t lpm_ofl_pass(const struct ofl_lpm4 *o4,
                                                const struct ofl_lpm6 *o6, const void *a,
                                                size_t n, enum lpm_ofl_kind k)
{
    uint16_t out[LPM_BURST];
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        lpm_ofl_answers(o4, o6, (const uint8_t *)a + (o4 ? 4 : 16) * i, LPM_BURST, k, out);
        for (unsigned j = 0; j < LPM_BURST; j++) s += out[j];
    }
    return s;
}

void lpm_ofl_answers(const struct ofl_lpm4 *o4, const struct ofl_lpm6 *o6, const void *a,
                     size_t n, enum lpm_ofl_kind k, uint16_t *hops)
{
    const uint32_t *ip = a;
    const uint8_t *ip6 = a;
    int batched = k != LPM_OFL_SCALAR;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        if (o4 && k == LPM_OFL_VECTOR)
            ofl_lpm4_lookup_batch(o4, ip + i, hops + i, LPM_BURST);
        else if (o4 && batched)
            ofl_lpm4_lookup_batch_at(o4, OFL_SIMD_SCALAR, ip + i, hops + i, LPM_BURST);
        else if (o4)
            for (unsigned j = 0; j < LPM_BURST; j++) hops[i + j] = ofl_lpm4_lookup(o4, ip[i + j]);
        else if (batched)
            ofl_lpm6_lookup_batch(o6, ip6 + 16 * i, hops + i, LPM_BURST);
        else
            for (unsigned j = 0; j < LPM_BURST; j++)
                hops[i + j] = ofl_lpm6_lookup(o6, ip6 + 16 * (i + j));
    }
}

void lpm_write_hops(const char *outdir, const char *prefix, const char *lookup,
                    const char *name, const uint16_t *hops, size_t n)
{
    char out[256];
    snprintf(out, sizeof out, "%s-%s-%s.u16", prefix, lookup, name);
    for (char *c = out; *c; c++)
        if (*c == ' ') *c = '_';
    tool_write(outdir, out, hops, n * sizeof *hops);
}

unsigned lpm_passes(double t, double min_time)
{
    double p = ceil(min_time / (t > 1e-9 ? t : 1e-9));
    return p < 1 ? 1 : p > 100000 ? 100000 : (unsigned)p;
}
