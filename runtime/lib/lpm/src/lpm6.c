/* IPv6 longest-prefix match by binary search on prefix lengths (the gpu target's
 * structure, built beside the trie of lpm6_trie.c): build and batched lookups. */
#include "offlow/lpm6.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lpm6_live.h"

#define HUGE_PAGE (2u << 20)

#define BUCKET_WORDS 8   /* a bucket is 64 bytes, either kind */

/* Slots per bucket. */
static unsigned per_bucket(const struct ofl_lpm6_level *l)
{
    return l->packed ? OFL_LPM6_PSLOTS : OFL_LPM6_WSLOTS;
}

/* While the table is being built every level has wide buckets, whose slots these
 * helpers walk; ofl_lpm6_probe reads them too. */

/* The value of slot s (bucket s / OFL_LPM6_WSLOTS, slot s % OFL_LPM6_WSLOTS) of the
 * wide level l, and its key in *hi, *lo. */
static uint32_t *slot_at(const struct ofl_lpm6_level *l, uint64_t s, uint64_t *hi, uint64_t *lo)
{
    uint64_t i = s / OFL_LPM6_WSLOTS;
    unsigned j = (unsigned)(s % OFL_LPM6_WSLOTS);
    *hi = l->wb[i].key[j][0];
    *lo = l->wb[i].key[j][1];
    return &l->wb[i].val[j];
}

/* The value of key (hi, lo) (already masked) in the wide level l: its entry's, or
 * that of the empty slot that takes it (key written, value left 0 for the caller to
 * set, never to 0). The first empty slot of the chain of buckets is the end of the
 * chain: slots fill in order and never empty. */
static uint32_t *slot_of(struct ofl_lpm6_level *l, uint64_t hi, uint64_t lo)
{
    for (uint64_t i = ofl_lpm6_hash(hi, lo, l->shift);; i = (i + 1) & l->mask) {
        for (unsigned j = 0; j < OFL_LPM6_WSLOTS; j++) {
            uint64_t khi, klo;
            uint32_t *v = slot_at(l, i * OFL_LPM6_WSLOTS + j, &khi, &klo);
            if (*v == 0) {
                l->wb[i].key[j][0] = hi;
                l->wb[i].key[j][1] = lo;
                l->used++;
                return v;
            }
            if (khi == hi && klo == lo) return v;
        }
    }
}

/* Put key hi (masked, its low 16 bits 0) with the value v (bmp | flags) into the
 * packed level l, where it is not yet. */
static void put_packed(struct ofl_lpm6_level *l, uint64_t hi, uint32_t v)
{
    uint64_t word = hi | (v & (OFL_LPM6_BMP | OFL_LPM6_MARKER));
    for (uint64_t i = ofl_lpm6_hash(hi, 0, l->shift);; i = (i + 1) & l->mask) {
        uint64_t *b = &l->p[OFL_LPM6_PSLOTS * i];
        for (unsigned j = 0; j < OFL_LPM6_PSLOTS; j++)
            if (b[j] == 0) {
                b[j] = word;
                l->used++;
                return;
            }
    }
}

/* Mask of the first `len` bits of a 64-bit half (len clamped to 0..64). */
static uint64_t mask64(int len)
{
    return len <= 0 ? 0 : len >= 64 ? ~0ull : ~0ull << (64 - len);
}

/* Give level l `buckets` buckets (a power of two >= 2) of its kind (l->packed)
 * starting at `at` (zeroed, 64 byte aligned). */
static void size_level(struct ofl_lpm6_level *l, uint64_t *at, uint64_t buckets)
{
    unsigned bits = 0;
    while ((1ull << bits) < buckets) bits++;
    l->p = l->packed ? at : NULL;
    l->wb = l->packed ? NULL : (struct ofl_lpm6_wbucket *)(void *)at;
    l->mask = buckets - 1;
    l->shift = (uint8_t)(64 - bits);
    l->used = 0;
}

/* Buckets for `used` entries in level l: a power of two >= 2 with at most 60% of the
 * slots used in packed buckets (eight slots: about one in twenty fills up and sends
 * a probe on) and half in wide ones (three slots); never all of them. */
static uint64_t buckets_for(const struct ofl_lpm6_level *l, uint64_t used)
{
    uint64_t cap = 2;
    if (l->packed)
        while (cap * OFL_LPM6_PSLOTS * 6 < 10 * used) cap *= 2;
    else
        while (cap * OFL_LPM6_WSLOTS < 2 * used) cap *= 2;
    return cap;
}

/* Zeroed words, 64-byte aligned (a bucket is a cache line); from 2 MiB up, 2 MiB
 * aligned and backed by huge pages where the kernel allows: random probes over
 * megabytes would otherwise miss the TLB as well. */
static uint64_t *alloc_words(size_t words)
{
    size_t bytes = (words ? words : 1) * sizeof(uint64_t);
    size_t align = bytes < HUGE_PAGE ? 64 : HUGE_PAGE;
    bytes = (bytes + align - 1) / align * align;
    uint64_t *p = aligned_alloc(align, bytes);
    if (!p) return NULL;
    if (align == HUGE_PAGE) (void)madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

/* Nodes of the optimal binary search tree over the levels lvs[0 .. n) (increasing)
 * with weights w (Knuth 1971: the root of [i, j] lies between the roots of [i, j-1]
 * and [i+1, j]), appended to t->node (room for n more is there). Returns the root
 * node, -1 for n = 0, -2 without memory. */
static int32_t nodes_of(struct ofl_lpm6 *t, const unsigned *lvs, const uint64_t *w,
                        unsigned n, unsigned *root, uint64_t *cost, uint64_t *sum)
{
    if (n == 0) return -1;
#define AT(i, j) ((size_t)(i) * (n + 1) + (j))
    for (unsigned i = 0; i < n; i++) sum[i + 1] = sum[i] + w[i];
    for (unsigned i = 0; i < n; i++) {
        cost[AT(i, i + 1)] = w[i];
        root[AT(i, i + 1)] = i;
    }
    for (unsigned len = 2; len <= n; len++) {
        for (unsigned i = 0; i + len <= n; i++) {
            unsigned j = i + len, best = root[AT(i, j - 1)];
            uint64_t bc = UINT64_MAX;
            for (unsigned r = root[AT(i, j - 1)]; r <= root[AT(i + 1, j)]; r++) {
                uint64_t c = (r > i ? cost[AT(i, r)] : 0) + (r + 1 < j ? cost[AT(r + 1, j)] : 0);
                if (c < bc) {
                    bc = c;
                    best = r;
                }
            }
            cost[AT(i, j)] = bc + sum[j] - sum[i];
            root[AT(i, j)] = best;
        }
    }
    /* Nodes from the root table: an explicit stack of intervals, each with the child
     * field of its parent to fill. */
    struct span {
        unsigned i, j;
        int32_t *link;
    } stack[260];
    int sp = 0;
    int32_t top = -1;
    stack[sp++] = (struct span){0, n, &top};
    while (sp) {
        struct span e = stack[--sp];
        if (e.i >= e.j) {
            *e.link = -1;
            continue;
        }
        unsigned r = root[AT(e.i, e.j)];
        int32_t k = (int32_t)t->nnodes++;
        *e.link = k;
        t->node[k].lv = lvs[r];
        stack[sp++] = (struct span){e.i, r, &t->node[k].left};
        stack[sp++] = (struct span){r + 1, e.j, &t->node[k].right};
    }
#undef AT
    return top;
}

/* A search tree over the levels lvs[0 .. n) (increasing, weights w): level t->first at
 * the root, whether the set holds it or not, and optimal trees over the shorter and
 * the longer levels of the set below it. */
static int32_t tree_of(struct ofl_lpm6 *t, const unsigned *lvs, const uint64_t *w,
                       unsigned n, unsigned *root, uint64_t *cost, uint64_t *sum)
{
    unsigned below = 0;
    while (below < n && lvs[below] < (unsigned)t->first) below++;
    unsigned above = below + (below < n && lvs[below] == (unsigned)t->first);
    int32_t top = (int32_t)t->nnodes++;
    t->node[top].lv = (uint32_t)t->first;
    t->node[top].left = nodes_of(t, lvs, w, below, root, cost, sum);
    t->node[top].right = nodes_of(t, lvs + above, w + above, n - above, root, cost, sum);
    return top;
}

/* Height of the subtree at node n. */
static unsigned height(const struct ofl_lpm6 *t, int32_t n)
{
    if (n < 0) return 0;
    unsigned a = height(t, t->node[n].left), b = height(t, t->node[n].right);
    return 1 + (a > b ? a : b);
}

/* The levels a search of tree `tr` for level `j` goes right at (markers needed
 * there), into `path`; returns how many. */
static unsigned marker_levels(const struct ofl_lpm6 *t, unsigned tr, unsigned j, unsigned *path)
{
    unsigned k = 0;
    for (int32_t n = t->tree[tr]; n >= 0 && t->node[n].lv != j;) {
        if (t->node[n].lv < j) {
            path[k++] = t->node[n].lv;
            n = t->node[n].right;
        } else {
            n = t->node[n].left;
        }
    }
    return k;
}

/* Move every level into a table of buckets_for(used) buckets in a fresh arena,
 * packed for the levels of up to OFL_LPM6_PACKED_LEN. */
static int compact(struct ofl_lpm6 *t)
{
    size_t words = 0;
    for (unsigned j = 0; j < t->nlv; j++) {
        struct ofl_lpm6_level n = t->lv[j];
        n.packed = n.len <= OFL_LPM6_PACKED_LEN;
        words += buckets_for(&n, n.used) * BUCKET_WORDS;
    }
    uint64_t *arena = alloc_words(words);
    if (!arena) return -ENOMEM;
    uint64_t *at = arena;
    for (unsigned j = 0; j < t->nlv; j++) {
        struct ofl_lpm6_level *l = &t->lv[j], n = *l;
        n.packed = n.len <= OFL_LPM6_PACKED_LEN;
        size_level(&n, at, buckets_for(&n, l->used));
        at += (n.mask + 1) * BUCKET_WORDS;
        if (l->len <= OFL_LPM6_DIR_LEN) {   /* answered by the front: left empty */
            *l = n;
            continue;
        }
        for (uint64_t s = 0; s < (l->mask + 1) * OFL_LPM6_WSLOTS; s++) {
            uint64_t hi, lo;
            uint32_t v = *slot_at(l, s, &hi, &lo);
            if (!v) continue;
            if (n.packed) put_packed(&n, hi, v);
            else *slot_of(&n, hi, lo) = v;
        }
        *l = n;
    }
    free(t->arena);
    t->arena = arena;
    t->arena_words = words;
    return 0;
}

/* Paint hop over the entries of dir (2^bits of them, indexing the `bits` address bits
 * after the first `skip`) that the prefix (hi, len) covers, len in (skip, skip + bits]. */
static void paint(uint32_t *dir, unsigned skip, unsigned bits, uint64_t hi, unsigned len,
                  uint16_t hop)
{
    uint64_t first = (hi << skip) >> (64 - bits), n = 1ull << (skip + bits - len);
    first &= ~(n - 1);
    for (uint64_t i = first; i < first + n; i++) dir[i] = (dir[i] & 0xFFFF0000u) | hop;
}

/* The /32s of the /32 table, sorted, with their values while the build computes them. */
struct keys32 {
    uint32_t *key, *val;
    size_t n;
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Index of the first key >= k. */
static size_t lower32(const struct keys32 *ks, uint32_t k)
{
    size_t lo = 0, hi = ks->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->key[mid] < k) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* dir1 (prefixes up to /16), dir2 (up to /24) and the /32s that need an entry of
 * their own in dir3, with the hops of their prefixes up to /32 (ks): every /32 that a
 * prefix of length 25..32 covers or that holds a longer one. Shortest prefixes first,
 * input order within a length (the later wins). Returns 0 or -ENOMEM. */
static int build_front(struct ofl_lpm6 *t, const struct ofl_route6 *r, size_t n,
                       const uint64_t *per_len, struct keys32 *ks)
{
    const unsigned B1 = OFL_LPM6_DIR1_BITS, B2 = OFL_LPM6_DIR2_BITS;
    t->dir1 = (uint32_t *)alloc_words(((size_t)1 << B1) / 2);
    if (!t->dir1) return -ENOMEM;
    for (size_t i = 0; i < (size_t)1 << B1; i++) t->dir1[i] = t->def;
    for (unsigned l = 1; l <= B1; l++)
        if (per_len[l])
            for (size_t i = 0; i < n; i++)
                if (r[i].len == l) paint(t->dir1, 0, B1, ofl_lpm6_be64(r[i].addr), l, r[i].hop);
    /* A dir2 block for every dir1 entry with longer prefixes (at most 2^16 - 1 of
     * them: 2^B1 entries, and a route of length > B1 makes the 2^B1 the default). */
    for (size_t i = 0; i < n; i++) {
        if (r[i].len <= B1) continue;
        uint32_t *e = &t->dir1[ofl_lpm6_be64(r[i].addr) >> (64 - B1)];
        if (!(*e >> 16)) {
            if (t->nblocks == 0xFFFF) return -ENOMEM;   /* cannot happen with B1 <= 16 */
            *e |= ++t->nblocks << 16;
        }
    }
    t->dir2 = (uint32_t *)alloc_words(((size_t)t->nblocks << B2) / 2 + 1);
    if (!t->dir2) return -ENOMEM;
    for (size_t b = 0; b < (size_t)1 << B1; b++) {
        uint32_t e = t->dir1[b];
        if (!(e >> 16)) continue;
        uint32_t *blk = t->dir2 + ((size_t)((e >> 16) - 1) << B2);
        for (size_t i = 0; i < (size_t)1 << B2; i++) blk[i] = e & 0xFFFF;
    }
    for (unsigned l = B1 + 1; l <= B1 + B2; l++)
        if (per_len[l])
            for (size_t i = 0; i < n; i++) {
                if (r[i].len != l) continue;
                uint64_t hi = ofl_lpm6_be64(r[i].addr);
                uint32_t e = t->dir1[hi >> (64 - B1)];
                paint(t->dir2 + ((size_t)((e >> 16) - 1) << B2), B1, B2, hi, l, r[i].hop);
            }
    /* The /32s, each with its /24's hop, then the prefixes of 25..32 over them. */
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].len > B1 + B2) nk += r[i].len >= 32 ? 1 : (size_t)1 << (32 - r[i].len);
    ks->key = malloc((nk ? nk : 1) * sizeof *ks->key);
    ks->val = malloc((nk ? nk : 1) * sizeof *ks->val);
    if (!ks->key || !ks->val) return -ENOMEM;
    nk = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].len <= B1 + B2) continue;
        uint32_t top = (uint32_t)(ofl_lpm6_be64(r[i].addr) >> 32);
        uint32_t cnt = r[i].len >= 32 ? 1 : 1u << (32 - r[i].len);
        top &= ~(cnt - 1);
        for (uint32_t k = 0; k < cnt; k++) ks->key[nk++] = top + k;
    }
    qsort(ks->key, nk, sizeof *ks->key, cmp_u32);
    ks->n = 0;
    for (size_t i = 0; i < nk; i++) {
        if (ks->n && ks->key[ks->n - 1] == ks->key[i]) continue;
        uint64_t hi = (uint64_t)ks->key[i] << 32;
        ks->val[ks->n] = ofl_lpm6_dir2(t, t->dir1[hi >> (64 - B1)], hi) & 0xFFFF;
        ks->key[ks->n++] = ks->key[i];
    }
    for (unsigned l = B1 + B2 + 1; l <= 32; l++)
        if (per_len[l])
            for (size_t i = 0; i < n; i++) {
                if (r[i].len != l) continue;
                uint32_t top = (uint32_t)(ofl_lpm6_be64(r[i].addr) >> 32);
                uint32_t cnt = 1u << (32 - l);
                top &= ~(cnt - 1);
                for (size_t k = lower32(ks, top); k < ks->n && ks->key[k] - top < cnt; k++)
                    ks->val[k] = (ks->val[k] & 0xFFFF0000u) | r[i].hop;
            }
    return 0;
}

/* dir3, from the /32s and their final values: a block for every /24 holding one of
 * them (the /24's hop everywhere else), its dir2 entry pointing there. Returns 0 or
 * -ENOMEM. */
static int fill_dir3(struct ofl_lpm6 *t, const struct keys32 *ks)
{
    const unsigned B1 = OFL_LPM6_DIR1_BITS, B2 = OFL_LPM6_DIR2_BITS, B3 = OFL_LPM6_DIR3_BITS;
    size_t nb = 0;
    for (size_t k = 0; k < ks->n; k++) nb += k == 0 || ks->key[k] >> B3 != ks->key[k - 1] >> B3;
    if (nb >= OFL_LPM6_SEE3) return -ENOMEM;   /* block numbers keep 31 bits */
    t->dir3 = (uint32_t *)alloc_words(((nb ? nb : 1) << B3) / 2);
    if (!t->dir3) return -ENOMEM;
    for (size_t k = 0; k < ks->n; k++) {
        uint64_t hi = (uint64_t)ks->key[k] << 32;
        uint32_t *e2 = &t->dir2[((size_t)((t->dir1[hi >> (64 - B1)] >> 16) - 1) << B2) |
                                (ks->key[k] >> B3 & ((1u << B2) - 1))];
        if (!(*e2 & OFL_LPM6_SEE3)) {
            uint32_t *blk = t->dir3 + (t->nblocks3 << B3);
            for (size_t i = 0; i < (size_t)1 << B3; i++) blk[i] = *e2 & 0xFFFF;
            *e2 = OFL_LPM6_SEE3 | (uint32_t)t->nblocks3++;
        }
        t->dir3[((size_t)(*e2 & ~OFL_LPM6_SEE3) << B3) | (ks->key[k] & ((1u << B3) - 1))] =
            ks->val[k];
    }
    return 0;
}

/* The front of a lookup (for the build): dir1; dir2 when dir1 points to a block; dir3
 * when the dir2 entry does. Returns the hop of the longest prefix of
 * length <= DIR_LEN in the low 16 bits, the tree to search for longer ones in the
 * high 16 (0 = none). */
static uint32_t front_of(const struct ofl_lpm6 *t, uint64_t hi)
{
    uint32_t e = t->dir1[hi >> (64 - OFL_LPM6_DIR1_BITS)];
    if (!(e >> 16)) return e;
    e = ofl_lpm6_dir2(t, e, hi);
    return e & OFL_LPM6_SEE3 ? ofl_lpm6_dir3(t, e, hi) : e;
}

/* A route with a length > DIR_LEN, for grouping by its /DIR_LEN. */
struct longer {
    uint64_t top;    /* the address's top DIR_LEN bits */
    size_t i;        /* the route */
};

static int by_top(const void *a, const void *b)
{
    const struct longer *x = a, *y = b;
    return x->top < y->top ? -1 : x->top > y->top ? 1 : x->i < y->i ? -1 : x->i > y->i;
}

int ofl_lpm6_build(struct ofl_lpm6 **out, const struct ofl_route6 *r, size_t n, char *errbuf)
{
    *out = NULL;
    int idx[129];
    uint64_t per_len[129] = {0};
    uint16_t def = 0;
    struct longer *lg = NULL;
    uint64_t *mk = NULL, *cost = NULL, *sum = NULL;
    unsigned *root = NULL;
    uint32_t *ids = NULL;
    struct keys32 ks = {NULL, NULL, 0};
    int rc = -ENOMEM;
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
    for (int l = 1; l < 129; l++) idx[l] = per_len[l] ? (int)t->nlv++ : -1;
    t->lv = calloc(t->nlv ? t->nlv : 1, sizeof *t->lv);
    if (!t->lv) goto nomem;
    for (int l = 1; l < 129; l++) {
        if (idx[l] < 0) continue;
        struct ofl_lpm6_level *lv = &t->lv[idx[l]];
        lv->len = (uint8_t)l;
        lv->mhi = mask64(l);
        lv->mlo = mask64(l - 64);
    }

    const unsigned DL = OFL_LPM6_DIR_LEN;
    if (build_front(t, r, n, per_len, &ks) < 0) goto nomem;

    /* Longer routes grouped by /DIR_LEN: each group's set of lengths gets a tree over
     * just those levels (one per distinct set; tree 1, over every longer level, takes
     * the groups past 65535 distinct sets). */
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) nl += r[i].len > DL;
    lg = malloc((nl ? nl : 1) * sizeof *lg);
    if (!lg) goto nomem;
    nl = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].len > DL) lg[nl++] = (struct longer){ofl_lpm6_be64(r[i].addr) >> (64 - DL), i};
    qsort(lg, nl, sizeof *lg, by_top);
    size_t ngroups = 0;
    for (size_t i = 0; i < nl; i++) ngroups += i == 0 || lg[i].top != lg[i - 1].top;
    size_t maxtrees = (ngroups < 0xFFFE ? ngroups : 0xFFFE) + 2;
    size_t hsz = 4;
    while (hsz < 2 * maxtrees) hsz *= 2;
    mk = calloc(2 * hsz, sizeof *mk);   /* length sets of the trees, hashed */
    ids = calloc(hsz, sizeof *ids);
    t->tree = calloc(maxtrees, sizeof *t->tree);
    unsigned nlong = 0;
    for (unsigned j = 0; j < t->nlv; j++) nlong += t->lv[j].len > DL;
    t->node = malloc((maxtrees * (size_t)nlong + 1) * sizeof *t->node);
    root = malloc((size_t)(nlong + 1) * (nlong + 1) * sizeof *root);
    cost = malloc((size_t)(nlong + 1) * (nlong + 1) * sizeof *cost);
    sum = calloc(nlong + 1, sizeof *sum);
    if (!mk || !ids || !t->tree || !t->node || !root || !cost || !sum) goto nomem;
    unsigned lvs[128];
    uint64_t w[128];
    t->first = -1;
    if (nlong) {   /* tree 1: every longer level; its root is every tree's */
        unsigned k = 0;
        for (unsigned j = 0; j < t->nlv; j++)
            if (t->lv[j].len > DL) {
                lvs[k] = j;
                w[k++] = per_len[t->lv[j].len];
            }
        t->tree[++t->ntrees] = nodes_of(t, lvs, w, k, root, cost, sum);
        t->first = (int32_t)t->node[t->tree[1]].lv;
    }
    for (size_t g = 0; g < nl;) {
        size_t h = g;
        uint64_t m0 = 0, m1 = 0;   /* lengths DL+1..128 as bits len-DL-1 */
        for (; h < nl && lg[h].top == lg[g].top; h++) {
            unsigned b = r[lg[h].i].len - DL - 1;
            if (b < 64) m0 |= 1ull << b;
            else m1 |= 1ull << (b - 64);
        }
        size_t at = (size_t)(((m0 ^ (m1 * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull) >> 20) & (hsz - 1);
        while (ids[at] && (mk[2 * at] != m0 || mk[2 * at + 1] != m1)) at = (at + 1) & (hsz - 1);
        if (!ids[at]) {
            if (t->ntrees >= 0xFFFF) {
                ids[at] = 0;   /* full: this group takes tree 1 */
            } else {
                unsigned k = 0;
                for (unsigned j = 0; j < t->nlv; j++) {
                    unsigned l = t->lv[j].len;
                    if (l > DL && ((l - DL - 1 < 64 ? m0 >> (l - DL - 1) : m1 >> (l - DL - 65)) & 1)) {
                        lvs[k] = j;
                        w[k++] = per_len[l];
                    }
                }
                t->tree[++t->ntrees] = tree_of(t, lvs, w, k, root, cost, sum);
                ids[at] = t->ntrees;
                mk[2 * at] = m0;
                mk[2 * at + 1] = m1;
            }
        }
        uint32_t id = ids[at] ? ids[at] : 1;
        ks.val[lower32(&ks, (uint32_t)lg[g].top)] |= id << 16;
        g = h;
    }
    if (fill_dir3(t, &ks) < 0) goto nomem;
    t->depth = 1;
    for (unsigned k = 1; k <= t->ntrees; k++) {
        unsigned d = 1 + height(t, t->tree[k]);
        if (d > t->depth) t->depth = d;
    }

    /* Upper bounds of the entries per level (shared markers counted per prefix);
     * routes of up to DIR_LEN go in their levels too (for the markers' bmps below),
     * never probed by a lookup. */
    unsigned path[128];
    size_t count[128] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        unsigned j = (unsigned)idx[r[i].len];
        count[j]++;
        if (r[i].len <= DL) continue;
        uint32_t tr = front_of(t, ofl_lpm6_be64(r[i].addr)) >> 16;
        unsigned np = marker_levels(t, tr, j, path);
        for (unsigned k = 0; k < np; k++) count[path[k]]++;
    }
    size_t words = 0;
    for (unsigned j = 0; j < t->nlv; j++) words += buckets_for(&t->lv[j], count[j]) * BUCKET_WORDS;
    t->arena = alloc_words(words);
    if (!t->arena) goto nomem;
    t->arena_words = words;
    uint64_t *at = t->arena;
    for (unsigned j = 0; j < t->nlv; j++) {
        size_level(&t->lv[j], at, buckets_for(&t->lv[j], count[j]));
        at += (t->lv[j].mask + 1) * BUCKET_WORDS;
    }

    /* Prefixes in input order (a later equal prefix overwrites), and their markers. */
    for (size_t i = 0; i < n; i++) {
        if (!r[i].len) continue;
        uint64_t hi = ofl_lpm6_be64(r[i].addr), lo = ofl_lpm6_be64(r[i].addr + 8);
        unsigned j = (unsigned)idx[r[i].len];
        struct ofl_lpm6_level *lv = &t->lv[j];
        uint32_t *v = slot_of(lv, hi & lv->mhi, lo & lv->mlo);
        *v = (*v & OFL_LPM6_MARKER) | OFL_LPM6_PREFIX | r[i].hop;
        if (r[i].len <= DL) continue;
        unsigned np = marker_levels(t, front_of(t, hi) >> 16, j, path);
        for (unsigned k = 0; k < np; k++) {
            struct ofl_lpm6_level *m = &t->lv[path[k]];
            *slot_of(m, hi & m->mhi, lo & m->mlo) |= OFL_LPM6_MARKER;
        }
    }

    /* Best-matching prefixes of the markers, shortest level first: the nearest
     * shorter level holding an entry for the key already knows the answer (a prefix
     * there is its own bmp, a marker there got its bmp before). */
    for (unsigned j = 0; j < t->nlv; j++) {
        struct ofl_lpm6_level *lv = &t->lv[j];
        for (uint64_t sl = 0; sl < (lv->mask + 1) * per_bucket(lv); sl++) {
            uint64_t hi, lo;
            uint32_t *s = slot_at(lv, sl, &hi, &lo);
            if (*s == 0) continue;
            if (*s & OFL_LPM6_PREFIX) {
                t->prefixes++;
                continue;
            }
            t->markers++;
            uint16_t bmp = def;
            for (unsigned k = j; k-- > 0;) {
                uint32_t v = ofl_lpm6_find(&t->lv[k], hi, lo);
                if (v) {
                    bmp = (uint16_t)(v & OFL_LPM6_BMP);
                    break;
                }
            }
            *s |= bmp;
        }
    }
    /* Rehash into tables sized by what they really hold; the levels up to DIR_LEN,
     * answered by dir1 / dir2, are dropped. */
    for (unsigned j = 0; j < t->nlv; j++)
        if (t->lv[j].len <= DL) t->lv[j].used = 0;
    if (compact(t) < 0) goto nomem;
    if (ofl_lpm6_trie_build(&t->trie, r, n) < 0) goto nomem;
    struct ofl_lpm6_node *fit = realloc(t->node, (t->nnodes + 1) * sizeof *t->node);
    if (fit) t->node = fit;
    *out = t;
    rc = 0;
nomem: /* and the end of a successful build (rc 0) */
    free(lg);
    free(mk);
    free(ids);
    free(root);
    free(cost);
    free(sum);
    free(ks.key);
    free(ks.val);
    if (rc == 0) return 0;
    ofl_lpm6_free(t);
    snprintf(errbuf, 256, "out of memory for an IPv6 table of %zu routes", n);
    return rc;
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
    ofl_lpm6_live_free(t->live);
    free(t->arena);
    free(t->lv);
    free(t->dir1);
    free(t->dir2);
    free(t->dir3);
    free(t->tree);
    free(t->node);
    ofl_lpm6_trie_free(&t->trie);
    free(t);
}

size_t ofl_lpm6_memory(const struct ofl_lpm6 *t)
{
    if (t->live) return sizeof *t + ofl_lpm6_live_memory(t->live);
    return sizeof *t + t->nlv * sizeof *t->lv + t->arena_words * sizeof *t->arena +
           (((size_t)1 << OFL_LPM6_DIR1_BITS) + ((size_t)t->nblocks << OFL_LPM6_DIR2_BITS)) *
               sizeof *t->dir1 +
           (t->nblocks3 << OFL_LPM6_DIR3_BITS) * sizeof *t->dir3 +
           (t->ntrees + 1) * sizeof *t->tree + t->nnodes * sizeof *t->node +
           ofl_lpm6_trie_memory(&t->trie);
}

/* ofl_lpm6_find for one address at a time: the slots one by one, with branches, up to
 * the key or the first empty slot (the usual bucket holds the key, or ends, within its
 * first few slots). */
static uint32_t find_one(const struct ofl_lpm6_level *l, uint64_t hi, uint64_t lo)
{
    if (!l->packed) return ofl_lpm6_find(l, hi, lo);
    uint64_t k = hi & l->mhi;
    for (uint64_t i = ofl_lpm6_hash(k, 0, l->shift);; i = (i + 1) & l->mask) {
        const uint64_t *b = &l->p[OFL_LPM6_PSLOTS * i];
        for (unsigned j = 0; j < OFL_LPM6_PSLOTS; j++) {
            if (b[j] == 0) return 0;
            if (((b[j] ^ k) & l->mhi) == 0) return (uint32_t)(b[j] & 0xFFFF);
        }
    }
}

uint16_t ofl_lpm6_lookup_deep(const struct ofl_lpm6 *t, const uint8_t addr[16], uint64_t hi,
                              uint32_t e)
{
    uint64_t lo = ofl_lpm6_be64(addr + 8);
    uint16_t best = (uint16_t)e;
    for (int32_t n = t->tree[e >> 16]; n >= 0;) {
        const struct ofl_lpm6_node *d = &t->node[n];
        uint32_t w = find_one(&t->lv[d->lv], hi, lo);
        if (!w) {
            n = d->left;
            continue;
        }
        best = (uint16_t)(w & OFL_LPM6_BMP);
        n = w & OFL_LPM6_MARKER ? d->right : -1;
    }
    return best;
}

/* Addresses whose front (dir1, dir2, the /32 table) is read in one pass before their
 * searches. */
#define LPM6_CHUNK 64

/* One step of a search at node d whose probe found the value v (0 = none): the best
 * hop so far in *best (v's bmp on a hit, else `was`), and the node to go on with:
 * the left child on a miss, the right one on a marker, -1 (done) on a prefix that is
 * not a marker. Without branches: which way a search goes cannot be predicted. */
static inline int32_t step(const struct ofl_lpm6_node *d, uint32_t v, uint16_t was,
                           uint16_t *best)
{
    const int32_t next[3] = {d->left, -1, d->right};
    *best = (uint16_t)((v & OFL_LPM6_BMP) | (was & -(uint32_t)(v == 0)));
    return next[(v != 0) + (v >> 15 & 1)];   /* OFL_LPM6_MARKER is bit 15 */
}

/* The searches of a chunk that go on past the root: per address its slot in hops,
 * key, best hop so far and next node. */
struct lanes {
    uint64_t hi[LPM6_CHUNK], lo[LPM6_CHUNK];
    int32_t node[LPM6_CHUNK];
    unsigned who[LPM6_CHUNK];
    uint16_t best[LPM6_CHUNK];
};

/* The tree searches of the m lanes of s: one level per round for all of them, a pass
 * that prefetches each one's bucket and a pass that probes them, without branches,
 * and keeps those whose search goes on. (Aiming at the next bucket right after a
 * probe, in the same pass, makes each step one long chain of dependent reads and runs
 * slower.) */
static void search_batch(const struct ofl_lpm6 *t, uint16_t *hops, struct lanes *s, unsigned m)
{
    uint64_t at[LPM6_CHUNK];
    while (m) {
        for (unsigned k = 0; k < m; k++) {
            const struct ofl_lpm6_level *l = &t->lv[t->node[s->node[k]].lv];
            at[k] = ofl_lpm6_hash(s->hi[k] & l->mhi, s->lo[k] & l->mlo, l->shift);
            __builtin_prefetch(ofl_lpm6_bucket_at(l, at[k]));
        }
        unsigned live = 0;
        for (unsigned k = 0; k < m; k++) {
            const struct ofl_lpm6_node *d = &t->node[s->node[k]];
            const struct ofl_lpm6_level *l = &t->lv[d->lv];
            uint32_t v = ofl_lpm6_probe(l, s->hi[k] & l->mhi, s->lo[k] & l->mlo, at[k]);
            uint16_t b;
            int32_t next = step(d, v, s->best[k], &b);
            hops[s->who[k]] = b;
            /* Keep it (moved down to `live`) when its search goes on. */
            s->hi[live] = s->hi[k];
            s->lo[live] = s->lo[k];
            s->who[live] = s->who[k];
            s->best[live] = b;
            s->node[live] = next;
            live += next >= 0;
        }
        m = live;
    }
}

void ofl_lpm6_lookup_batch_bsl(const struct ofl_lpm6 *t, const uint8_t *addrs,
                               uint16_t *hops, unsigned n)
{
    unsigned who[LPM6_CHUNK];
    const uint32_t *e3[LPM6_CHUNK];
    uint64_t atr[LPM6_CHUNK], hi[LPM6_CHUNK], lo[LPM6_CHUNK];
    struct lanes s;
    const struct ofl_lpm6_level *rl = t->first >= 0 ? &t->lv[t->first] : NULL;
    for (unsigned c = 0; c < n; c += LPM6_CHUNK) {
        unsigned len = n - c < LPM6_CHUNK ? n - c : LPM6_CHUNK, m = 0, m3 = 0;
        /* dir1 and dir2 for the chunk (small, cached). Where dir2 sends the address on
         * to dir3, prefetch its entry there and its bucket in the root level. */
        for (unsigned i = 0; i < len; i++) {
            const uint8_t *a = addrs + 16 * (size_t)(c + i);
            uint64_t h = ofl_lpm6_be64(a);
            uint32_t e = t->dir1[h >> (64 - OFL_LPM6_DIR1_BITS)];
            if (e >> 16) {
                e = ofl_lpm6_dir2(t, e, h);
                if (e & OFL_LPM6_SEE3) {
                    e3[m3] = &t->dir3[((size_t)(e & ~OFL_LPM6_SEE3) << OFL_LPM6_DIR3_BITS) |
                                      (h >> (64 - OFL_LPM6_DIR_LEN) &
                                       ((1u << OFL_LPM6_DIR3_BITS) - 1))];
                    __builtin_prefetch(e3[m3]);
                    hi[m3] = h;
                    lo[m3] = ofl_lpm6_be64(a + 8);
                    if (rl) {
                        atr[m3] = ofl_lpm6_hash(h & rl->mhi, lo[m3] & rl->mlo, rl->shift);
                        __builtin_prefetch(ofl_lpm6_bucket_at(rl, atr[m3]));
                    }
                    who[m3++] = c + i;
                }
            }
            hops[c + i] = (uint16_t)e;
        }
        /* dir3 and, for a /32 with a tree, its root level: a prefix there that is not
         * a marker ends the search; the others go on to the searches. */
        for (unsigned i = 0; i < m3; i++) {
            uint32_t v = *e3[i];
            uint16_t h = (uint16_t)v, b = h;
            int32_t next = -1;
            if (rl) {
                uint32_t vr = ofl_lpm6_probe(rl, hi[i] & rl->mhi, lo[i] & rl->mlo, atr[i]);
                /* tree[0] is 0, some tree's root: a /32 without a tree (where the root
                 * level holds nothing of it) goes through it, its answers dropped. */
                int32_t nx = step(&t->node[t->tree[v >> 16]], vr, h, &b);
                int32_t has = -(int32_t)((v >> 16) != 0);
                next = (nx & has) | ~has;
                b = (uint16_t)((b & has) | (h & ~has));
            }
            hops[who[i]] = b;
            s.hi[m] = hi[i];
            s.lo[m] = lo[i];
            s.who[m] = who[i];
            s.best[m] = b;
            s.node[m] = next;
            m += next >= 0;
        }
        if (m) search_batch(t, hops, &s, m);
    }
}
