/* The IPv6 multibit trie (a Poptrie, lpm6.h): its build from the routes and its
 * batched walk.
 *
 * Build: the routes, host bits cleared, sorted by address then length (equal prefixes:
 * the later in the input wins). In that order a prefix comes before every prefix
 * nested in it, so painting the slots a node's routes cover, in order, leaves each slot
 * the hop of its longest one. A node covers the routes below it that are longer than
 * its depth (a contiguous run of the sorted list): those ending within its stride paint
 * its slots over the hop it inherits, the longer ones, grouped by slot, become its
 * children, built depth first; a node reserves its children's places (consecutive) in
 * the node array before building them. */
#include "offlow/lpm6.h"
#include "offlow/simd.h"

#include <errno.h>
#include <stdlib.h>

#define SLOTS (1u << OFL_LPM6_STRIDE)

/* A route as the build reads it: the address as two numbers, host bits 0. */
struct rt {
    uint64_t hi, lo;
    uint32_t i;   /* its place in the input */
    uint16_t hop;
    uint8_t len;
};

static uint64_t keep(unsigned len)   /* the top len bits of a word (len may pass 64) */
{
    return len >= 64 ? ~0ull : len ? ~0ull << (64 - len) : 0;
}

static int by_prefix(const void *a, const void *b)
{
    const struct rt *x = a, *y = b;
    if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The `bits` bits of the address starting at bit d (bits past 128 read as 0). */
static unsigned bits_at(const struct rt *r, unsigned d, unsigned bits)
{
    uint64_t h = d >= 64 ? r->lo << (d - 64) : d ? r->hi << d | r->lo >> (64 - d) : r->hi;
    return (unsigned)(h >> (64 - bits));
}

struct build {
    struct ofl_lpm6_trie *p;
    const struct rt *r;
    size_t cap_nodes, cap_leaves;
};

static int grow(void **v, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < want) c *= 2;
    void *n = realloc(*v, c * size);
    if (!n) return -ENOMEM;
    *v = n;
    *cap = c;
    return 0;
}

/* Fill node k, at depth d (bits read before it), from the routes [a, b) (all longer
 * than d, all under the node's prefix) over the inherited hop `h`. */
static int fill(struct build *b, size_t k, size_t a, size_t e, unsigned d, uint16_t h,
                unsigned level)
{
    struct ofl_lpm6_trie *p = b->p;
    if (level > p->depth) p->depth = level;
    uint16_t hop[SLOTS];
    for (unsigned s = 0; s < SLOTS; s++) hop[s] = h;
    uint64_t vec = 0;
    unsigned end = d + OFL_LPM6_STRIDE;
    for (size_t i = a; i < e; i++) {
        unsigned s = bits_at(&b->r[i], d, OFL_LPM6_STRIDE);
        if (b->r[i].len > end) {
            vec |= 1ull << s;
            continue;
        }
        unsigned n = 1u << (end - b->r[i].len);
        for (unsigned j = s; j < s + n; j++) hop[j] = b->r[i].hop;
    }
    uint64_t leafvec = 0;
    size_t base0 = p->nleaves;
    int any = 0;
    uint16_t last = 0;
    for (unsigned s = 0; s < SLOTS; s++) {
        if (vec >> s & 1) continue;
        if (!any || hop[s] != last) {
            if (grow((void **)&p->leaf, &b->cap_leaves, p->nleaves + 1, sizeof *p->leaf) < 0)
                return -ENOMEM;
            p->leaf[p->nleaves++] = hop[s];
            leafvec |= 1ull << s;
        }
        any = 1;
        last = hop[s];
    }
    size_t base1 = p->nnodes, nk = (size_t)__builtin_popcountll(vec);
    if (base1 + nk > OFL_LPM6_TLEAF || p->nleaves > UINT32_MAX) return -ENOMEM;
    if (grow((void **)&p->node, &b->cap_nodes, base1 + nk, sizeof *p->node) < 0) return -ENOMEM;
    p->nnodes += nk;
    p->node[k] = (struct ofl_lpm6_pnode){vec, leafvec, (uint32_t)base1, (uint32_t)base0};
    /* The children, slot by slot: each one's routes are a run of the sorted list. */
    size_t c = base1;
    for (size_t i = a; i < e;) {
        unsigned s = bits_at(&b->r[i], d, OFL_LPM6_STRIDE);
        if (b->r[i].len <= end) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < e && b->r[j].len > end && bits_at(&b->r[j], d, OFL_LPM6_STRIDE) == s) j++;
        int rc = fill(b, c++, i, j, end, hop[s], level + 1);
        if (rc < 0) return rc;
        i = j;
    }
    return 0;
}

/* The routes, host bits cleared, sorted, duplicates dropped (the later kept); the /0
 * into *def. Returns the count, or -1 when out of memory. */
static ptrdiff_t distinct(struct rt **out, const struct ofl_route6 *r, size_t n, uint16_t *def)
{
    struct rt *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].len == 0) {
            *def = r[i].hop;
            continue;
        }
        v[m++] = (struct rt){ofl_lpm6_be64(r[i].addr) & keep(r[i].len),
                             ofl_lpm6_be64(r[i].addr + 8) & keep(r[i].len > 64 ? r[i].len - 64 : 0),
                             (uint32_t)i, r[i].hop, r[i].len};
    }
    qsort(v, m, sizeof *v, by_prefix);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && v[k - 1].hi == v[i].hi && v[k - 1].lo == v[i].lo && v[k - 1].len == v[i].len)
            k--;   /* the same prefix again, later in the input: it wins */
        v[k++] = v[i];
    }
    *out = v;
    return (ptrdiff_t)k;
}

int ofl_lpm6_trie_build(struct ofl_lpm6_trie *p, const struct ofl_route6 *r, size_t n)
{
    *p = (struct ofl_lpm6_trie){0};
    p->simd = (int)ofl_simd_level();
    uint16_t def = 0;
    struct rt *v = NULL;
    ptrdiff_t m = distinct(&v, r, n, &def);
    p->top = malloc(sizeof *p->top << OFL_LPM6_TOP_BITS);
    if (m < 0 || !p->top) {
        free(v);
        ofl_lpm6_trie_free(p);
        return -ENOMEM;
    }
    for (size_t i = 0; i < (size_t)1 << OFL_LPM6_TOP_BITS; i++) p->top[i] = OFL_LPM6_TLEAF | def;
    const unsigned T = OFL_LPM6_TOP_BITS;
    for (size_t i = 0; i < (size_t)m; i++)   /* the short routes paint the direct table */
        if (v[i].len <= T) {
            size_t s = v[i].hi >> (64 - T), k = (size_t)1 << (T - v[i].len);
            for (size_t j = s; j < s + k; j++) p->top[j] = OFL_LPM6_TLEAF | v[i].hop;
        }
    struct build b = {p, v, 0, 0};
    int rc = 0;
    for (size_t i = 0; i < (size_t)m && rc == 0;) {   /* a node per /T holding longer ones */
        if (v[i].len <= T) {
            i++;
            continue;
        }
        size_t s = v[i].hi >> (64 - T), j = i + 1;
        while (j < (size_t)m && v[j].len > T && v[j].hi >> (64 - T) == s) j++;
        size_t k = p->nnodes;
        rc = grow((void **)&p->node, &b.cap_nodes, k + 1, sizeof *p->node);
        if (rc == 0) {
            p->nnodes++;
            rc = fill(&b, k, i, j, T, (uint16_t)(p->top[s] & 0xFFFF), 1);
            p->top[s] = (uint32_t)k;
        }
        i = j;
    }
    free(v);
    if (rc < 0) {
        ofl_lpm6_trie_free(p);
        return rc;
    }
    return 0;
}

void ofl_lpm6_trie_free(struct ofl_lpm6_trie *p)
{
    free(p->top);
    free(p->node);
    free(p->leaf);
    *p = (struct ofl_lpm6_trie){0};
}

size_t ofl_lpm6_trie_memory(const struct ofl_lpm6_trie *p)
{
    return (p->top ? sizeof *p->top << OFL_LPM6_TOP_BITS : 0) + p->nnodes * sizeof *p->node +
           p->nleaves * sizeof *p->leaf;
}

/* ---- the batched walk ------------------------------------------------------------ */

#define GROUP 32

/* The walk of ofl_lpm6_lookup_batch for n addresses: the addresses of a group go
 * down together, a stride per pass; a pass reads the nodes the previous one
 * prefetched, and prefetches the next node (or the leaf) of the addresses that go on.
 * Inline: compiled once per path (the popcount instruction or not). */
static inline __attribute__((always_inline)) void
walk(const struct ofl_lpm6_trie *p, const uint8_t *addrs, uint16_t *hops, unsigned n)
{
    uint64_t h[GROUP], l[GROUP];
    uint32_t e[GROUP];
    unsigned who[GROUP];
    for (unsigned c = 0; c < n; c += GROUP) {
        unsigned len = n - c < GROUP ? n - c : GROUP, m = 0;
        for (unsigned i = 0; i < len; i++) {
            const uint8_t *a = addrs + 16 * (size_t)(c + i);
            uint64_t hi = ofl_lpm6_be64(a), lo = ofl_lpm6_be64(a + 8);
            e[i] = hi >> (64 - OFL_LPM6_TOP_BITS);
            __builtin_prefetch(&p->top[e[i]]);
            h[i] = hi << OFL_LPM6_TOP_BITS | lo >> (64 - OFL_LPM6_TOP_BITS);
            l[i] = lo << OFL_LPM6_TOP_BITS;
        }
        for (unsigned i = 0; i < len; i++) {
            uint32_t x = p->top[e[i]];
            hops[c + i] = (uint16_t)x;
            if (x & OFL_LPM6_TLEAF) continue;
            __builtin_prefetch(&p->node[x]);
            e[m] = x;
            h[m] = h[i];
            l[m] = l[i];
            who[m++] = c + i;
        }
        while (m) {
            unsigned live = 0;
            for (unsigned i = 0; i < m; i++) {
                const struct ofl_lpm6_pnode *nd = &p->node[e[i]];
                unsigned s = (unsigned)(h[i] >> (64 - OFL_LPM6_STRIDE));
                uint64_t upto = (2ull << s) - 1;
                if (!(nd->vec >> s & 1)) {
                    hops[who[i]] = p->leaf[nd->base0 +
                                           (unsigned)__builtin_popcountll(nd->leafvec & upto) - 1];
                    continue;
                }
                uint32_t x = nd->base1 + (uint32_t)__builtin_popcountll(nd->vec & upto) - 1;
                __builtin_prefetch(&p->node[x]);
                e[live] = x;
                h[live] = h[i] << OFL_LPM6_STRIDE | l[i] >> (64 - OFL_LPM6_STRIDE);
                l[live] = l[i] << OFL_LPM6_STRIDE;
                who[live++] = who[i];
            }
            m = live;
        }
    }
}

static void walk_scalar(const struct ofl_lpm6_trie *p, const uint8_t *addrs, uint16_t *hops,
                        unsigned n)
{
    walk(p, addrs, hops, n);
}

#if defined(__x86_64__)
__attribute__((target("popcnt"))) static void
walk_popcnt(const struct ofl_lpm6_trie *p, const uint8_t *addrs, uint16_t *hops, unsigned n)
{
    walk(p, addrs, hops, n);
}
#else
#define walk_popcnt walk_scalar
#endif

void ofl_lpm6_lookup_batch(const struct ofl_lpm6 *t, const uint8_t *addrs, uint16_t *hops,
                           unsigned n)
{
    if (__builtin_expect(t->live != NULL, 0)) {
        unsigned slot;
        const struct ofl_lpm6 *now = ofl_lpm6_enter(t, &slot);
        ofl_lpm6_lookup_batch(now, addrs, hops, n);
        ofl_lpm6_leave(t, slot);
        return;
    }
    if (t->trie.simd >= OFL_SIMD_AVX2)
        walk_popcnt(&t->trie, addrs, hops, n);
    else
        walk_scalar(&t->trie, addrs, hops, n);
}
