/* IPv6 longest-prefix match by binary search on prefix lengths: build and batched
 * lookups. */
#include "offlow/lpm6.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

/* Words per slot and the index of the value word. */
static unsigned stride(const struct ofl_lpm6_level *l)
{
    return l->wide ? 4 : 2;
}

static unsigned val_word(const struct ofl_lpm6_level *l)
{
    return l->wide ? 2 : 1;
}

/* The slot of key (hi, lo) (already masked) in level l: its entry, or the empty slot
 * that takes it (key written, value left 0 for the caller to set). */
static uint64_t *slot_of(struct ofl_lpm6_level *l, uint64_t hi, uint64_t lo)
{
    unsigned w = stride(l), v = val_word(l);
    for (uint64_t i = ofl_lpm6_hash(hi, lo, l->shift);; i = (i + 1) & l->mask) {
        uint64_t *s = l->slots + w * i;
        if (s[v] == 0) {
            s[0] = hi;
            if (l->wide) s[1] = lo;
            l->used++;
            return s;
        }
        if (s[0] == hi && (!l->wide || s[1] == lo)) return s;
    }
}

/* Mask of the first `len` bits of a 64-bit half (len clamped to 0..64). */
static uint64_t mask64(int len)
{
    return len <= 0 ? 0 : len >= 64 ? ~0ull : ~0ull << (64 - len);
}

/* Give level l `slots` slots (a power of two >= 2) starting at `at`. */
static void size_level(struct ofl_lpm6_level *l, uint64_t *at, uint64_t slots)
{
    unsigned bits = 0;
    while ((1ull << bits) < slots) bits++;
    l->slots = at;
    l->mask = slots - 1;
    l->shift = (uint8_t)(64 - bits);
    l->used = 0;
}

/* Slots for `used` entries: a power of two >= 2, load at most 0.7. */
static uint64_t slots_for(uint64_t used)
{
    uint64_t cap = 2;
    while (cap * 7 < used * 10) cap *= 2;
    return cap;
}

/* Zeroed words, 2 MiB aligned and backed by huge pages where the kernel allows:
 * random probes over megabytes would otherwise miss the TLB as well. */
static uint64_t *alloc_words(size_t words)
{
    size_t bytes = (words ? words : 1) * sizeof(uint64_t);
    if (bytes < HUGE_PAGE) return calloc(words ? words : 1, sizeof(uint64_t));
    bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    uint64_t *p = aligned_alloc(HUGE_PAGE, bytes);
    if (!p) return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

/* The optimal binary search tree over levels [0, n) for weights w (Knuth 1971: the
 * root of [i, j] lies between the roots of [i, j-1] and [i+1, j]); sets every
 * level's children and returns the root. */
static int build_tree(struct ofl_lpm6 *t, const uint64_t *w)
{
    unsigned n = t->nlv;
    if (n == 0) return -1;
    /* cost and root of [i, j) at [i * (n + 1) + j]. */
    size_t sz = (size_t)(n + 1) * (n + 1);
    uint64_t *cost = calloc(sz, sizeof *cost), *sum = calloc(n + 1, sizeof *sum);
    unsigned *root = calloc(sz, sizeof *root);
    if (!cost || !sum || !root) {
        free(cost);
        free(sum);
        free(root);
        return -2;
    }
    for (unsigned i = 0; i < n; i++) sum[i + 1] = sum[i] + w[i];
#define AT(i, j) ((size_t)(i) * (n + 1) + (j))
    for (unsigned i = 0; i < n; i++) {
        cost[AT(i, i + 1)] = w[i];
        root[AT(i, i + 1)] = i;
    }
    for (unsigned len = 2; len <= n; len++) {
        for (unsigned i = 0; i + len <= n; i++) {
            unsigned j = i + len, best = root[AT(i, j - 1)];
            uint64_t bc = UINT64_MAX;
            for (unsigned r = root[AT(i, j - 1)]; r <= root[AT(i + 1, j)]; r++) {
                uint64_t c = cost[AT(i, r)] + cost[AT(r + 1, j)];
                if (c < bc) {
                    bc = c;
                    best = r;
                }
            }
            cost[AT(i, j)] = bc + sum[j] - sum[i];
            root[AT(i, j)] = best;
        }
    }
    /* Children from the root table: an explicit stack of intervals (a parent's
     * sibling interval waits on it, so it never holds more than n + 1). */
    struct span {
        unsigned i, j;
        int parent, right;
    } stack[256];
    int sp = 0, top = (int)root[AT(0, n)];
    stack[sp++] = (struct span){0, n, -1, 0};
    while (sp) {
        struct span e = stack[--sp];
        if (e.i >= e.j) {
            if (e.parent >= 0) {
                if (e.right) t->lv[e.parent].right = -1;
                else t->lv[e.parent].left = -1;
            }
            continue;
        }
        int r = (int)root[AT(e.i, e.j)];
        if (e.parent >= 0) {
            if (e.right) t->lv[e.parent].right = (int8_t)r;
            else t->lv[e.parent].left = (int8_t)r;
        }
        stack[sp++] = (struct span){e.i, (unsigned)r, r, 0};
        stack[sp++] = (struct span){(unsigned)r + 1, e.j, r, 1};
    }
#undef AT
    free(cost);
    free(sum);
    free(root);
    return top;
}

/* Height of the subtree at level n. */
static unsigned height(const struct ofl_lpm6 *t, int n)
{
    if (n < 0) return 0;
    unsigned a = height(t, t->lv[n].left), b = height(t, t->lv[n].right);
    return 1 + (a > b ? a : b);
}

/* The levels a search for level `j` goes right at (markers needed there), into
 * `path`; returns how many. */
static unsigned marker_levels(const struct ofl_lpm6 *t, unsigned j, unsigned *path)
{
    unsigned k = 0;
    for (int n = t->root; n >= 0 && (unsigned)n != j;) {
        if ((unsigned)n < j) {
            path[k++] = (unsigned)n;
            n = t->lv[n].right;
        } else {
            n = t->lv[n].left;
        }
    }
    return k;
}

/* Move every level into a table of slots_for(used) slots in a fresh arena. */
static int compact(struct ofl_lpm6 *t)
{
    size_t words = 0;
    for (unsigned j = 0; j < t->nlv; j++) words += slots_for(t->lv[j].used) * stride(&t->lv[j]);
    uint64_t *arena = alloc_words(words);
    if (!arena) return -ENOMEM;
    uint64_t *at = arena;
    for (unsigned j = 0; j < t->nlv; j++) {
        struct ofl_lpm6_level *l = &t->lv[j], n = *l;
        unsigned w = stride(l), vw = val_word(l);
        size_level(&n, at, slots_for(l->used));
        at += (n.mask + 1) * w;
        for (uint64_t i = 0; i <= l->mask; i++) {
            const uint64_t *s = l->slots + w * i;
            if (s[vw]) slot_of(&n, s[0], l->wide ? s[1] : 0)[vw] = s[vw];
        }
        *l = n;
    }
    free(t->arena);
    t->arena = arena;
    t->arena_words = words;
    return 0;
}

int ofl_lpm6_build(struct ofl_lpm6 **out, const struct ofl_route6 *r, size_t n, char *errbuf)
{
    *out = NULL;
    int idx[129];
    uint64_t per_len[129] = {0};
    uint16_t def = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].len > 128 || r[i].hop < 1 || r[i].hop > OFL_ROUTE_MAX_HOP) {
            snprintf(errbuf, 256, "route %zu: length %u, hop %u: want a length 0..128 and "
                     "a hop 1..%u", i, r[i].len, r[i].hop, OFL_ROUTE_MAX_HOP);
            return -EINVAL;
        }
        if (r[i].len == 0) def = r[i].hop;
        per_len[r[i].len]++;
    }
    struct ofl_lpm6 *t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->def = def;
    t->routes = n;
    uint64_t weight[128];
    for (int l = 1; l < 129; l++) {
        idx[l] = per_len[l] ? (int)t->nlv : -1;
        if (per_len[l]) weight[t->nlv++] = per_len[l];
    }
    t->lv = calloc(t->nlv ? t->nlv : 1, sizeof *t->lv);
    if (!t->lv) goto nomem;
    for (int l = 1; l < 129; l++) {
        if (idx[l] < 0) continue;
        struct ofl_lpm6_level *lv = &t->lv[idx[l]];
        lv->len = (uint8_t)l;
        lv->wide = l > 64;
        lv->mhi = mask64(l);
        lv->mlo = mask64(l - 64);
    }
    t->root = build_tree(t, weight);
    if (t->root == -2) goto nomem;
    t->depth = height(t, t->root);

    unsigned paths[128][128], npath[128];
    size_t count[128] = {0};
    for (unsigned j = 0; j < t->nlv; j++) npath[j] = marker_levels(t, j, paths[j]);
    /* Upper bounds of the entries per level (shared markers counted per prefix). */
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        unsigned j = (unsigned)idx[r[i].len];
        count[j]++;
        for (unsigned k = 0; k < npath[j]; k++) count[paths[j][k]]++;
    }
    size_t words = 0;
    for (unsigned j = 0; j < t->nlv; j++) words += slots_for(count[j]) * stride(&t->lv[j]);
    t->arena = calloc(words ? words : 1, sizeof *t->arena);
    if (!t->arena) goto nomem;
    t->arena_words = words;
    uint64_t *at = t->arena;
    for (unsigned j = 0; j < t->nlv; j++) {
        size_level(&t->lv[j], at, slots_for(count[j]));
        at += (t->lv[j].mask + 1) * stride(&t->lv[j]);
    }

    /* Prefixes in input order (a later equal prefix overwrites), and their markers. */
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        uint64_t hi = ofl_lpm6_be64(r[i].addr), lo = ofl_lpm6_be64(r[i].addr + 8);
        unsigned j = (unsigned)idx[r[i].len];
        struct ofl_lpm6_level *lv = &t->lv[j];
        uint64_t *s = slot_of(lv, hi & lv->mhi, lo & lv->mlo);
        uint64_t *v = &s[val_word(lv)];
        *v = (*v & OFL_LPM6_MARKER) | OFL_LPM6_PREFIX | r[i].hop;
        for (unsigned k = 0; k < npath[j]; k++) {
            struct ofl_lpm6_level *m = &t->lv[paths[j][k]];
            s = slot_of(m, hi & m->mhi, lo & m->mlo);
            s[val_word(m)] |= OFL_LPM6_MARKER;
        }
    }

    /* Best-matching prefixes of the markers, shortest level first: the nearest
     * shorter level holding an entry for the key already knows the answer (a prefix
     * there is its own bmp, a marker there got its bmp before). */
    for (unsigned j = 0; j < t->nlv; j++) {
        struct ofl_lpm6_level *lv = &t->lv[j];
        unsigned w = stride(lv), vw = val_word(lv);
        for (uint64_t i = 0; i <= lv->mask; i++) {
            uint64_t *s = lv->slots + w * i;
            if (s[vw] == 0) continue;
            if (s[vw] & OFL_LPM6_PREFIX) {
                t->prefixes++;
                continue;
            }
            t->markers++;
            uint64_t hi = s[0], lo = lv->wide ? s[1] : 0;
            uint16_t bmp = def;
            for (unsigned k = j; k-- > 0;) {
                uint32_t v = ofl_lpm6_find(&t->lv[k], hi, lo);
                if (v) {
                    bmp = (uint16_t)v;
                    break;
                }
            }
            s[vw] |= bmp;
        }
    }
    /* Rehash into tables sized by what they really hold. */
    if (compact(t) < 0) goto nomem;
    *out = t;
    return 0;
nomem:
    ofl_lpm6_free(t);
    snprintf(errbuf, 256, "out of memory for an IPv6 table of %zu routes", n);
    return -ENOMEM;
}

int ofl_lpm6_open_file(struct ofl_lpm6 **t, const char *path, unsigned nports, char *errbuf)
{
    struct ofl_routes r;
    ofl_routes_init(&r);
    *t = NULL;
    int rc = ofl_routes_load(&r, path, nports, errbuf);
    if (rc == 0) rc = ofl_lpm6_build(t, r.v6, r.n6, errbuf);
    ofl_routes_free(&r);
    return rc;
}

void ofl_lpm6_free(struct ofl_lpm6 *t)
{
    if (!t) return;
    free(t->arena);
    free(t->lv);
    free(t);
}

size_t ofl_lpm6_memory(const struct ofl_lpm6 *t)
{
    return sizeof *t + t->nlv * sizeof *t->lv + t->arena_words * sizeof *t->arena;
}

/* Lanes searching at once: enough misses in flight to cover the memory latency. */
#define LPM6_LANES 16

void ofl_lpm6_lookup_batch(const struct ofl_lpm6 *t, const uint8_t *addrs, uint16_t *hops,
                           unsigned n)
{
    if (t->root < 0) {
        for (unsigned i = 0; i < n; i++) hops[i] = t->def;
        return;
    }
    uint64_t hi[LPM6_LANES], lo[LPM6_LANES], slot[LPM6_LANES];
    int node[LPM6_LANES];
    unsigned who[LPM6_LANES];
    uint16_t best[LPM6_LANES];
    unsigned next = 0, live = 0;
    for (unsigned k = 0; k < LPM6_LANES; k++) node[k] = -1;
    /* Start lane k on the next address (at the root), prefetching its first slot. */
#define START(k)                                                                        \
    do {                                                                                \
        hi[k] = ofl_lpm6_be64(addrs + 16 * (size_t)next);                               \
        lo[k] = ofl_lpm6_be64(addrs + 16 * (size_t)next + 8);                           \
        who[k] = next++;                                                                \
        best[k] = t->def;                                                               \
        node[k] = t->root;                                                              \
    } while (0)
#define AIM(k)                                                                          \
    do {                                                                                \
        const struct ofl_lpm6_level *l_ = &t->lv[node[k]];                              \
        slot[k] = ofl_lpm6_hash(hi[k] & l_->mhi, lo[k] & l_->mlo, l_->shift);           \
        __builtin_prefetch(l_->slots + (l_->wide ? 4 : 2) * slot[k]);                   \
    } while (0)
    for (unsigned k = 0; k < LPM6_LANES && next < n; k++, live++) {
        START(k);
        AIM(k);
    }
    while (live) {
        for (unsigned k = 0; k < LPM6_LANES; k++) {
            if (node[k] < 0) continue;
            const struct ofl_lpm6_level *l = &t->lv[node[k]];
            uint32_t v = ofl_lpm6_probe(l, hi[k] & l->mhi, lo[k] & l->mlo, slot[k]);
            if (!v) {
                node[k] = l->left;
            } else {
                best[k] = (uint16_t)v;
                node[k] = v & OFL_LPM6_MARKER ? l->right : -1;
            }
            if (node[k] < 0) {
                hops[who[k]] = best[k];
                if (next == n) {
                    live--;
                    continue;
                }
                START(k);
            }
            AIM(k);
        }
    }
#undef START
#undef AIM
}
