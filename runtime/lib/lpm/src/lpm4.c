/* DIR-24-8-basic IPv4 longest-prefix match, tbl24 in /16 blocks: build and batched
 * lookups. */
#include "offlow/lpm4.h"

#include "lpm4_rules.h"
#include "lpm4_simd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE ((size_t)4096)

/* The most tbl24 bytes a table can need: one block per /16. */
#define TBL24_MAX_BYTES ((size_t)OFL_LPM4_DIR_ENTRIES * OFL_LPM4_BLOCK * sizeof(uint16_t))
/* The most tbl8 entries a table can need. */
#define TBL8_MAX ((size_t)OFL_LPM4_MAX_GROUPS * 256)
/* Entries past the end of the directory and tbl8 that the vector lookups may read: a
 * 32-bit gather of the last 16-bit entry reads the 2 bytes after it (lpm4_simd.c). The
 * tbl24 mapping has a page past its last block for the same reason. */
#define GATHER_PAD 2

/* Room for every block a table can need, and a page past it (GATHER_PAD): an
 * anonymous mapping aligned to 2 MiB and advised to huge pages where the kernel allows
 * (random lookups would otherwise miss the TLB too). Only the pages the blocks touch
 * are ever backed; the build gives the rest back (trim_tbl24) but keeps the room:
 * updates add blocks in place, so that lookups never see the table move. Sets *len to
 * the mapping's length; NULL when out of memory. */
static uint16_t *map_tbl24(size_t *len)
{
    size_t keep = TBL24_MAX_BYTES + PAGE, all = keep + HUGE_PAGE;
    uint8_t *p = mmap(NULL, all, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    /* Keep exactly [a, a + keep) so that ofl_lpm4_free can unmap it. */
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + all > a + keep) munmap(a + keep, (size_t)(p + all - a - keep));
    (void)madvise(a, TBL24_MAX_BYTES, MADV_HUGEPAGE);
    *len = keep;
    return (uint16_t *)a;
}

/* Give back the pages of the tbl24 mapping past its blocks (whole pages), keeping the
 * mapping. */
static void trim_tbl24(struct ofl_lpm4 *t)
{
    size_t used = (size_t)t->blocks * OFL_LPM4_BLOCK * sizeof *t->tbl24;
    used = (used + PAGE - 1) / PAGE * PAGE;
    if (used < t->tbl24_bytes)
        (void)madvise((uint8_t *)t->tbl24 + used, t->tbl24_bytes - used, MADV_DONTNEED);
}

/* Set n entries from p to v, and their depths from d to dv. */
static void fill(uint16_t *p, uint8_t *d, size_t n, uint16_t v, uint8_t dv)
{
    for (size_t i = 0; i < n; i++) p[i] = v;
    memset(d, dv, n);
}

/* A fresh tbl24 block, filled with the hop `e` at depth `dep`; returns its number. */
static uint32_t new_block(struct ofl_lpm4 *t, uint16_t e, uint8_t dep)
{
    uint32_t b = t->blocks++;
    fill(t->tbl24 + (size_t)b * OFL_LPM4_BLOCK, t->dep24 + (size_t)b * OFL_LPM4_BLOCK,
         OFL_LPM4_BLOCK, e, dep);
    return b;
}

/* A fresh tbl8 group, filled with the tbl24 entry `e` (at depth `dep`) it replaces. */
static int new_group(struct ofl_lpm4 *t, uint16_t e, uint8_t dep, uint32_t *g, char *errbuf)
{
    if (t->groups == OFL_LPM4_MAX_GROUPS) {
        snprintf(errbuf, 256, "more than %u /24s hold prefixes longer than /24 "
                 "(the tbl8 groups of DIR-24-8 are full)", OFL_LPM4_MAX_GROUPS);
        return -ENOSPC;
    }
    *g = t->groups++;
    fill(t->tbl8 + (size_t)*g * 256, t->dep8 + (size_t)*g * 256, 256, e, dep);
    return 0;
}

/* Write the routes, sorted by length (order), into t with their depths (1 + length):
 * prefixes up to /16 into the directory as hops (no block exists yet), longer ones
 * into the /16's own block (t->own, -1 until the first longer prefix copies the /16's
 * hop into a fresh one) and its tbl8 groups. */
static int paint(struct ofl_lpm4 *t, const struct ofl_route4 *r, const uint32_t *order,
                 size_t n, char *errbuf)
{
    for (size_t k = 0; k < n; k++) {
        const struct ofl_route4 *e = &r[order[k]];
        uint32_t a = e->len ? e->addr & ~(uint32_t)0 << (32 - e->len) : 0;
        uint8_t dep = (uint8_t)(e->len + 1);
        if (e->len <= 16) {
            fill(t->dir + (a >> 16), t->dep16 + (a >> 16), (size_t)1 << (16 - e->len), e->hop,
                 dep);
            continue;
        }
        int32_t *own = &t->own[a >> 16];
        if (*own < 0) *own = (int32_t)new_block(t, t->dir[a >> 16], t->dep16[a >> 16]);
        size_t at = (size_t)*own * OFL_LPM4_BLOCK + (a >> 8 & 0xFF);
        if (e->len <= 24) {
            fill(t->tbl24 + at, t->dep24 + at, (size_t)1 << (24 - e->len), e->hop, dep);
            continue;
        }
        if (!(t->tbl24[at] & OFL_LPM4_GROUP)) {
            uint32_t g;
            int rc = new_group(t, t->tbl24[at], t->dep24[at], &g, errbuf);
            if (rc < 0) return rc;
            t->tbl24[at] = (uint16_t)(OFL_LPM4_GROUP | g);
        }
        size_t g = (size_t)(t->tbl24[at] & ~OFL_LPM4_GROUP) * 256 + (a & 0xFF);
        fill(t->tbl8 + g, t->dep8 + g, (size_t)1 << (32 - e->len), e->hop, dep);
    }
    return 0;
}

/* Give up the own blocks that came out uniform, hop and depth alike (a /16 covered by
 * longer prefixes of one hop and length): their /16s take the shared block of that hop
 * instead (the directory holds the hop until link_blocks, dep16 the depth), and the
 * blocks left move down to close the gaps. */
static void drop_uniform(struct ofl_lpm4 *t)
{
    int32_t *moved = malloc((t->blocks ? t->blocks : 1) * sizeof *moved);
    if (!moved) return;   /* out of memory: keep every block as it is */
    uint32_t kept = 0;
    for (uint32_t b = 0; b < t->blocks; b++) {
        const uint16_t *blk = t->tbl24 + (size_t)b * OFL_LPM4_BLOCK;
        const uint8_t *dep = t->dep24 + (size_t)b * OFL_LPM4_BLOCK;
        unsigned same = !(blk[0] & OFL_LPM4_GROUP);
        for (unsigned i = 1; i < OFL_LPM4_BLOCK; i++) same &= blk[i] == blk[0] && dep[i] == dep[0];
        if (same) {
            moved[b] = -1 - (int32_t)(blk[0] | dep[0] << 16);
            continue;
        }
        if (kept != b) {
            memcpy(t->tbl24 + (size_t)kept * OFL_LPM4_BLOCK, blk, OFL_LPM4_BLOCK * sizeof *blk);
            memcpy(t->dep24 + (size_t)kept * OFL_LPM4_BLOCK, dep, OFL_LPM4_BLOCK);
        }
        moved[b] = (int32_t)kept++;
    }
    for (uint32_t d = 0; d < OFL_LPM4_DIR_ENTRIES; d++) {
        if (t->own[d] < 0) continue;
        int32_t m = moved[t->own[d]];
        if (m < 0) {
            t->dir[d] = (uint16_t)((-1 - m) & 0xFFFF);
            t->dep16[d] = (uint8_t)((-1 - m) >> 16);
        }
        t->own[d] = m < 0 ? -1 : m;
    }
    t->blocks = kept;
    free(moved);
}

/* Point the directory at the blocks: a /16 with its own block at it, the others at a
 * block shared by every /16 of the same hop (t->shared). */
static void link_blocks(struct ofl_lpm4 *t)
{
    for (uint32_t b = 0; b < OFL_LPM4_DIR_ENTRIES; b++) {
        if (t->own[b] >= 0) {
            t->dir[b] = (uint16_t)t->own[b];
            continue;
        }
        uint16_t hop = t->dir[b];
        if (t->shared[hop] < 0) t->shared[hop] = (int32_t)new_block(t, hop, 0);
        t->dir[b] = (uint16_t)t->shared[hop];
    }
}

/* The arrays of an empty table with room for `n` routes in its route set. */
static struct ofl_lpm4 *alloc_table(size_t n)
{
    struct ofl_lpm4 *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dir = calloc(OFL_LPM4_DIR_ENTRIES + GATHER_PAD, sizeof *t->dir);
    t->dep16 = calloc(OFL_LPM4_DIR_ENTRIES, 1);
    t->tbl24 = map_tbl24(&t->tbl24_bytes);
    /* Room for every block and group: large callocs are mapped, so only the pages the
     * table uses are backed. */
    t->dep24 = calloc(TBL24_MAX_BYTES / sizeof *t->tbl24, 1);
    t->tbl8 = calloc(TBL8_MAX + GATHER_PAD, sizeof *t->tbl8);
    t->dep8 = calloc(TBL8_MAX, 1);
    t->own = malloc(OFL_LPM4_DIR_ENTRIES * sizeof *t->own);
    t->shared = malloc(((size_t)OFL_ROUTE_MAX_HOP + 1) * sizeof *t->shared);
    /* The routes as given: the first update makes the route set of them (lazily: the
     * set costs a cache miss per route, 3x the rest of the build). */
    t->given = malloc((n ? n : 1) * sizeof *t->given);
    if (!t->dir || !t->dep16 || !t->tbl24 || !t->dep24 || !t->tbl8 || !t->dep8 || !t->own ||
        !t->shared || !t->given) {
        ofl_lpm4_free(t);
        return NULL;
    }
    memset(t->own, 0xFF, OFL_LPM4_DIR_ENTRIES * sizeof *t->own);
    memset(t->shared, 0xFF, ((size_t)OFL_ROUTE_MAX_HOP + 1) * sizeof *t->shared);
    return t;
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
    struct ofl_lpm4 *t = alloc_table(n);
    int rc = 0;
    if (!order || !t) {
        snprintf(errbuf, 256, "out of memory for an IPv4 table of %zu routes", n);
        rc = -ENOMEM;
        goto out;
    }
    t->routes = n;
    t->simd = ofl_simd_level();
    if (n) memcpy(t->given, r, n * sizeof *r);
    for (size_t i = 0; i < n; i++) order[start[r[i].len]++] = (uint32_t)i;
    rc = paint(t, r, order, n, errbuf);
    if (rc == 0) {
        drop_uniform(t);
        link_blocks(t);
        trim_tbl24(t);
    }
out:
    free(order);
    if (rc < 0) ofl_lpm4_free(t);
    else *out = t;
    return rc;
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
    if (t->tbl24) munmap(t->tbl24, t->tbl24_bytes);
    free(t->dir);
    free(t->tbl8);
    free(t->dep16);
    free(t->dep24);
    free(t->dep8);
    free(t->own);
    free(t->shared);
    ofl_lpm4_rules_free(t->rules);
    free(t->given);
    free(t);
}

size_t ofl_lpm4_memory(const struct ofl_lpm4 *t)
{
    size_t entries = (size_t)t->blocks * OFL_LPM4_BLOCK + (size_t)t->groups * 256;
    return sizeof *t + (size_t)OFL_LPM4_DIR_ENTRIES * (sizeof *t->dir + 1 + 2 * sizeof(int32_t)) +
           entries * (sizeof *t->tbl24 + 1) + ((size_t)OFL_ROUTE_MAX_HOP + 1) * sizeof(int32_t) +
           (t->rules ? t->rules->cap * sizeof *t->rules->slot : t->routes * sizeof *t->given);
}

/* Addresses per group of the batched lookup: enough misses in flight to cover the
 * memory latency (a call of 64 addresses is one group). */
#define LPM4_GROUP_ADDRS 64

void ofl_lpm4_batch_scalar(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n)
{
    const uint16_t *tbl24 = t->tbl24, *tbl8 = t->tbl8;
    uint32_t at[LPM4_GROUP_ADDRS];
    for (unsigned base = 0; base < n; base += LPM4_GROUP_ADDRS) {
        unsigned m = n - base < LPM4_GROUP_ADDRS ? n - base : LPM4_GROUP_ADDRS;
        const uint32_t *a = addrs + base;
        uint16_t *h = hops + base;
        /* The directory is small and stays cached: no wait here. */
        for (unsigned i = 0; i < m; i++) {
            at[i] = ofl_lpm4_at(t, a[i]);
            __builtin_prefetch(&tbl24[at[i]]);
        }
        unsigned deep = 0;
        for (unsigned i = 0; i < m; i++) {
            uint16_t e = ofl_lpm4_read(&tbl24[at[i]]);
            h[i] = e;
            if (e & OFL_LPM4_GROUP) {
                __builtin_prefetch(&tbl8[(uint32_t)(e & ~OFL_LPM4_GROUP) << 8 | (a[i] & 0xFF)]);
                deep = 1;
            }
        }
        if (!deep) continue;
        for (unsigned i = 0; i < m; i++)
            if (h[i] & OFL_LPM4_GROUP)
                h[i] = ofl_lpm4_read(&tbl8[(uint32_t)(h[i] & ~OFL_LPM4_GROUP) << 8 |
                                           (a[i] & 0xFF)]);
    }
}

/* The path `level` runs (t->simd is capped already: ofl_lpm4_lookup_batch skips this). */
static void batch(const struct ofl_lpm4 *t, enum ofl_simd level, const uint32_t *addrs,
                  uint16_t *hops, unsigned n)
{
    switch (level) {
    case OFL_SIMD_AVX512:
        ofl_lpm4_batch_avx512(t, addrs, hops, n);
        return;
    case OFL_SIMD_AVX2:
        ofl_lpm4_batch_avx2(t, addrs, hops, n);
        return;
    default:
        ofl_lpm4_batch_scalar(t, addrs, hops, n);
    }
}

void ofl_lpm4_lookup_batch(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n)
{
    batch(t, t->simd, addrs, hops, n);
}

void ofl_lpm4_lookup_batch_at(const struct ofl_lpm4 *t, enum ofl_simd level,
                              const uint32_t *addrs, uint16_t *hops, unsigned n)
{
    enum ofl_simd cpu = ofl_simd_cpu();
    batch(t, level < cpu ? level : cpu, addrs, hops, n);
}
