/* The vector paths of the batched IPv4 lookup (lpm4_simd.c) against the scalar lookup:
 * the path is forced with OFFLOW_SIMD (the table takes ofl_simd_level() when it is
 * built), and every answer of ofl_lpm4_lookup_batch is compared with ofl_lpm4_lookup's
 * on random and hit-heavy addresses (inside routes, at their edges) of a random table
 * and of one whose routes are mostly /25-/32 (tbl8 groups), for batch lengths that are
 * no multiple of a vector and arrays that start off any vector alignment.
 *
 * usage: OFFLOW_SIMD=scalar|avx2|avx512 test_lpm4_simd [--quick]
 *   a level the CPU lacks prints "skipped: CPU lacks LEVEL" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/lpm4.h"
#include "offlow/simd.h"
#include "offlow/synth.h"

static const unsigned LENGTHS[] = {1, 7, 15, 17, 33, 1000};

static struct ofl_route4 route(uint32_t addr, unsigned len, uint16_t hop)
{
    struct ofl_route4 r = {.addr = addr, .hop = hop, .len = (uint8_t)len};
    return r;
}

/* n random routes: lengths 8..32 (BGP-like, most /24), or with `deep` mostly /25../32
 * inside 64 /16s so that many /24s need a tbl8 group; plus the edges of the address
 * space (0/0 only in the random table; 255.255.255.255/32 reads the last directory
 * entry). */
static struct ofl_route4 *gen(size_t n, int deep, uint64_t seed, size_t *out)
{
    struct ofl_rng g = {seed};
    struct ofl_route4 *r = malloc((n + 3) * sizeof *r);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = (uint32_t)ofl_rng_next(&g);
        unsigned len;
        if (deep) {
            a = (uint32_t)(0x0A000000u | ofl_rng_below(&g, 64) << 16) | (a & 0xFFFF);
            len = 25 + (unsigned)ofl_rng_below(&g, 8);
            if (ofl_rng_below(&g, 8) == 0) len = 16 + (unsigned)ofl_rng_below(&g, 9);
        } else {
            unsigned p = (unsigned)ofl_rng_below(&g, 100);
            len = p < 60 ? 24 : p < 90 ? 16 + (unsigned)ofl_rng_below(&g, 8)
                               : p < 95 ? 8 + (unsigned)ofl_rng_below(&g, 8)
                                        : 25 + (unsigned)ofl_rng_below(&g, 8);
        }
        r[k++] = route(a, len, (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP)));
    }
    if (!deep) r[k++] = route(0, 0, 7);
    r[k++] = route(0xFFFFFFFFu, 32, 9);
    r[k++] = route(0xFFFFFF00u, 25, 11);
    *out = k;
    return r;
}

/* m addresses: random ones, or hit-heavy ones (a random address inside a random route,
 * or its first or last address, or the one just outside it). */
static void addresses(const struct ofl_route4 *r, size_t n, int hits, uint64_t seed,
                      uint32_t *a, size_t m)
{
    struct ofl_rng g = {seed};
    for (size_t i = 0; i < m; i++) {
        uint32_t x = (uint32_t)ofl_rng_next(&g);
        if (hits) {
            const struct ofl_route4 *e = &r[ofl_rng_below(&g, n)];
            uint32_t mask = e->len ? ~(uint32_t)0 << (32 - e->len) : 0;
            uint32_t lo = e->addr & mask, hi = lo | ~mask;
            switch (ofl_rng_below(&g, 5)) {
            case 0: x = lo; break;
            case 1: x = hi; break;
            case 2: x = lo - 1; break;
            case 3: x = hi + 1; break;
            default: x = lo | (x & ~mask);
            }
        }
        a[i] = x;
    }
}

/* Compare the table's batched lookups with the scalar ones over a[0..m) in calls of
 * each length of LENGTHS, the arrays starting at each offset 0..3 entries off their
 * allocation. */
static void compare(const struct ofl_lpm4 *t, const char *what, const uint32_t *a, size_t m)
{
    uint16_t *want = malloc(m * sizeof *want);
    uint32_t *in = malloc((m + 4) * sizeof *in);
    uint16_t *got = malloc((m + 4) * sizeof *got);
    size_t found = 0, deep = 0;
    for (size_t i = 0; i < m; i++) {
        want[i] = ofl_lpm4_lookup(t, a[i]);
        found += want[i] != 0;
        deep += (ofl_lpm4_read(&t->tbl24[ofl_lpm4_at(t, a[i])]) & OFL_LPM4_GROUP) != 0;
    }
    printf("%s: %zu addresses, %zu with a route, %zu through tbl8\n", what, m, found, deep);
    for (unsigned l = 0; l < sizeof LENGTHS / sizeof LENGTHS[0]; l++)
        for (unsigned off = 0; off < 4; off++) {
            size_t bad = 0, first = m;
            memcpy(in + off, a, m * sizeof *a);
            memset(got, 0xAB, (m + 4) * sizeof *got);
            for (size_t i = 0; i < m; i += LENGTHS[l]) {
                unsigned k = (unsigned)(m - i < LENGTHS[l] ? m - i : LENGTHS[l]);
                ofl_lpm4_lookup_batch(t, in + off + i, got + off + i, k);
            }
            for (size_t i = 0; i < m; i++)
                if (got[off + i] != want[i] && bad++ == 0) first = i;
            int fence = got[m + off] == 0xABAB && (off == 0 || got[off - 1] == 0xABAB);
            CHECK(bad == 0 && fence, "%s, batches of %u, arrays %u entries off: %zu of %zu "
                  "answers differ from the scalar lookup (first at %zu: %08x -> %u, want %u); "
                  "entries beside the output untouched: %d", what, LENGTHS[l], off, bad, m,
                  first, first < m ? a[first] : 0, first < m ? got[off + first] : 0,
                  first < m ? want[first] : 0, fence);
        }
    free(want);
    free(in);
    free(got);
}

static void run_table(const char *name, int deep, size_t n, size_t m, enum ofl_simd level)
{
    size_t nr;
    struct ofl_route4 *r = gen(n, deep, 0x5EED + (uint64_t)deep, &nr);
    struct ofl_lpm4 *t;
    char err[256] = "";
    int rc = ofl_lpm4_build(&t, r, nr, err);
    CHECK(rc == 0, "%s table: %zu routes built (%s)", name, nr, err);
    if (rc < 0) {
        free(r);
        return;
    }
    CHECK(t->simd == level, "%s table: its batched lookups take the path OFFLOW_SIMD forced "
          "(%s, want %s); %u tbl8 groups", name, ofl_simd_name(t->simd), ofl_simd_name(level),
          t->groups);
    uint32_t *a = malloc(m * sizeof *a);
    char what[96];
    for (int hits = 0; hits < 2; hits++) {
        addresses(r, nr, hits, 0xADD + (uint64_t)hits, a, m);
        snprintf(what, sizeof what, "%s table, %s addresses", name, hits ? "hit-heavy" : "random");
        compare(t, what, a, m);
    }
    /* The answers of every path agree on one table too (ofl_lpm4_lookup_batch_at). */
    uint16_t *h0 = malloc(m * sizeof *h0), *h1 = malloc(m * sizeof *h1);
    ofl_lpm4_lookup_batch_at(t, OFL_SIMD_SCALAR, a, h0, (unsigned)m);
    ofl_lpm4_lookup_batch_at(t, level, a, h1, (unsigned)m);
    CHECK(memcmp(h0, h1, m * sizeof *h0) == 0, "%s table: ofl_lpm4_lookup_batch_at %s == scalar",
          name, ofl_simd_name(level));
    free(h0);
    free(h1);
    free(a);
    ofl_lpm4_free(t);
    free(r);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const char *env = getenv("OFFLOW_SIMD");
    enum ofl_simd want;
    if (!env || ofl_simd_parse(env, &want) < 0) {
        fprintf(stderr, "usage: OFFLOW_SIMD=scalar|avx2|avx512 test_lpm4_simd [--quick]\n");
        return 2;
    }
    if (ofl_simd_cpu() < want) {
        printf("skipped: CPU lacks %s (it has %s)\n", ofl_simd_name(want),
               ofl_simd_name(ofl_simd_cpu()));
        return 0;
    }
    printf("path %s (CPU: %s)\n", ofl_simd_name(want), ofl_simd_name(ofl_simd_cpu()));
    size_t m = quick ? 6000 : 60000;
    run_table("random", 0, quick ? 5000 : 50000, m, want);
    run_table("deep (/25-/32)", 1, quick ? 5000 : 50000, m, want);
    return CHECK_DONE();
}
