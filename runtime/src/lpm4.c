/* DIR-24-8-basic IPv4 longest-prefix match: build and batched lookups. */
#include "offlow/lpm4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>

#define HUGE_PAGE (2u << 20)

#define TBL24_BYTES ((size_t)OFL_LPM4_TBL24_ENTRIES * sizeof(uint16_t))

/* A zeroed tbl24: an anonymous mapping aligned to 2 MiB and backed by huge pages
 * where the kernel allows (random lookups would otherwise miss the TLB too). Its
 * pages are zero until touched, so a small table costs little. NULL when out of
 * memory. */
static uint16_t *map_tbl24(void)
{
    size_t len = TBL24_BYTES + HUGE_PAGE;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    /* Keep exactly [a, a + TBL24_BYTES) so that ofl_lpm4_free can unmap it. */
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + len > a + TBL24_BYTES) munmap(a + TBL24_BYTES, (size_t)(p + len - a - TBL24_BYTES));
    (void)madvise(a, TBL24_BYTES, MADV_HUGEPAGE);
    return (uint16_t *)a;
}

/* Set n entries from p to v. */
static void fill16(uint16_t *p, size_t n, uint16_t v)
{
    for (size_t i = 0; i < n; i++) p[i] = v;
}

/* A fresh tbl8 group, filled with the tbl24 entry `e` it replaces. */
static int new_group(struct ofl_lpm4 *t, uint16_t e, uint32_t *g, char *errbuf)
{
    if (t->groups == OFL_LPM4_MAX_GROUPS) {
        snprintf(errbuf, 256, "more than %u /24s hold prefixes longer than /24 "
                 "(the tbl8 groups of DIR-24-8 are full)", OFL_LPM4_MAX_GROUPS);
        return -ENOSPC;
    }
    if (t->groups == t->cap_groups) {
        uint32_t c = t->cap_groups ? t->cap_groups * 2 : 64;
        if (c > OFL_LPM4_MAX_GROUPS) c = OFL_LPM4_MAX_GROUPS;
        uint16_t *p = realloc(t->tbl8, (size_t)c * 256 * sizeof *p);
        if (!p) {
            snprintf(errbuf, 256, "out of memory for %u tbl8 groups", c);
            return -ENOMEM;
        }
        t->tbl8 = p;
        t->cap_groups = c;
    }
    *g = t->groups++;
    fill16(t->tbl8 + (size_t)*g * 256, 256, e);
    return 0;
}

int ofl_lpm4_build(struct ofl_lpm4 **out, const struct ofl_route4 *r, size_t n, char *errbuf)
{
    *out = NULL;
    if (n > UINT32_MAX) {
        snprintf(errbuf, 256, "%zu routes: at most %u fit one table", n, UINT32_MAX);
        return -EINVAL;
    }
    /* Counting sort by length, stable: shorter first, equal prefixes in input order. */
    size_t start[34] = {0};
    for (size_t i = 0; i < n; i++) {
        if (r[i].len > 32 || r[i].hop < 1 || r[i].hop > OFL_ROUTE_MAX_HOP) {
            snprintf(errbuf, 256, "route %zu: length %u, hop %u: want a length 0..32 and "
                     "a hop 1..%u", i, r[i].len, r[i].hop, OFL_ROUTE_MAX_HOP);
            return -EINVAL;
        }
        start[r[i].len + 1]++;
    }
    for (int l = 1; l < 34; l++) start[l] += start[l - 1];
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    struct ofl_lpm4 *t = calloc(1, sizeof *t);
    if (t) t->tbl24 = map_tbl24();
    if (!order || !t || !t->tbl24) {
        free(order);
        ofl_lpm4_free(t);
        snprintf(errbuf, 256, "out of memory for an IPv4 table of %zu routes", n);
        return -ENOMEM;
    }
    t->routes = n;
    for (size_t i = 0; i < n; i++) order[start[r[i].len]++] = (uint32_t)i;

    for (size_t k = 0; k < n; k++) {
        const struct ofl_route4 *e = &r[order[k]];
        uint32_t a = e->len ? e->addr & ~(uint32_t)0 << (32 - e->len) : 0;
        if (e->len <= 24) {
            /* No group exists yet: groups come only from longer prefixes, later. */
            fill16(t->tbl24 + (a >> 8), (size_t)1 << (24 - e->len), e->hop);
            continue;
        }
        uint16_t *slot = &t->tbl24[a >> 8];
        if (!(*slot & OFL_LPM4_GROUP)) {
            uint32_t g;
            int rc = new_group(t, *slot, &g, errbuf);
            if (rc < 0) {
                free(order);
                ofl_lpm4_free(t);
                return rc;
            }
            *slot = (uint16_t)(OFL_LPM4_GROUP | g);
        }
        size_t g = *slot & ~OFL_LPM4_GROUP;
        fill16(t->tbl8 + g * 256 + (a & 0xFF), (size_t)1 << (32 - e->len), e->hop);
    }
    free(order);
    *out = t;
    return 0;
}

int ofl_lpm4_open_file(struct ofl_lpm4 **t, const char *path, unsigned nports, char *errbuf)
{
    struct ofl_routes r;
    ofl_routes_init(&r);
    *t = NULL;
    int rc = ofl_routes_load(&r, path, nports, errbuf);
    if (rc == 0) rc = ofl_lpm4_build(t, r.v4, r.n4, errbuf);
    ofl_routes_free(&r);
    return rc;
}

void ofl_lpm4_free(struct ofl_lpm4 *t)
{
    if (!t) return;
    if (t->tbl24) munmap(t->tbl24, TBL24_BYTES);
    free(t->tbl8);
    free(t);
}

size_t ofl_lpm4_memory(const struct ofl_lpm4 *t)
{
    return sizeof *t + (size_t)OFL_LPM4_TBL24_ENTRIES * sizeof *t->tbl24 +
           (size_t)t->cap_groups * 256 * sizeof *t->tbl8;
}

/* Addresses per group of the batched lookup: enough misses in flight to cover the
 * memory latency, few enough that the prefetched lines stay in L1. */
#define LPM4_GROUP_ADDRS 32

void ofl_lpm4_lookup_batch(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n)
{
    const uint16_t *tbl24 = t->tbl24, *tbl8 = t->tbl8;
    for (unsigned base = 0; base < n; base += LPM4_GROUP_ADDRS) {
        unsigned m = n - base < LPM4_GROUP_ADDRS ? n - base : LPM4_GROUP_ADDRS;
        const uint32_t *a = addrs + base;
        uint16_t *h = hops + base;
        for (unsigned i = 0; i < m; i++) __builtin_prefetch(&tbl24[a[i] >> 8]);
        unsigned deep = 0;
        for (unsigned i = 0; i < m; i++) {
            uint16_t e = tbl24[a[i] >> 8];
            h[i] = e;
            if (e & OFL_LPM4_GROUP) {
                __builtin_prefetch(&tbl8[(uint32_t)(e & ~OFL_LPM4_GROUP) << 8 | (a[i] & 0xFF)]);
                deep = 1;
            }
        }
        if (!deep) continue;
        for (unsigned i = 0; i < m; i++)
            if (h[i] & OFL_LPM4_GROUP)
                h[i] = tbl8[(uint32_t)(h[i] & ~OFL_LPM4_GROUP) << 8 | (a[i] & 0xFF)];
    }
}
