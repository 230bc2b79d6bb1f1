/* IPv6 longest-prefix match: binary search on prefix lengths over hash tables with
 * markers (Waldvogel, Varghese, Turner, Plattner 1997; as in Knapp).
 *
 * Every distinct prefix length 1..128 present in the routes is a level; level L holds
 * an open-addressing hash table (linear probing, load <= 0.7) keyed by the address
 * masked to L bits. A lookup searches a binary search tree over the levels (ordered
 * by length): a hit at a level means "a prefix of this length or longer may match",
 * so the search goes to the longer side, a miss to the shorter side. For a hit to be
 * seen wherever a longer prefix exists, every prefix leaves a marker (its address
 * masked to the level's length) at each level where the search for its own level goes
 * right. Each entry, prefix or marker, stores its best-matching prefix (bmp): the hop
 * of the longest route of this length or shorter (the /0 default included) that
 * contains its key, computed at build time, so the search never backtracks: the
 * answer is the bmp of the last hit (the default route when there is none), and a hit
 * on an entry that is not a marker ends the search.
 *
 * The tree is any binary search tree over the levels; the build picks the one with
 * the fewest expected probes when lookups end at each level in proportion to the
 * routes of that length (an optimal BST, Knuth's algorithm: Waldvogel's "asymmetric
 * binary search"). On the BGP table the /48 level becomes the root. Equal weights
 * give a balanced tree.
 *
 * Levels of up to 64 bits keep 16-byte slots (key, value), longer ones 32-byte slots
 * (two key words, value, padding). A value is bmp | flags, never 0 in a used slot.
 *
 * Building accepts routes in any order; of two equal prefixes the later wins. A table
 * is immutable once built: to change routes, build a new one. Lookups on a built
 * table are thread-safe. */
#ifndef OFL_LPM6_H
#define OFL_LPM6_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "offlow/routes.h"

#define OFL_LPM6_MARKER 0x10000u   /* value flag: longer prefixes pass through here */
#define OFL_LPM6_PREFIX 0x20000u   /* value flag: a route of this length */

/* The direct-indexed front: the top DIR1_BITS of an address index dir1, the next
 * DIR2_BITS a block of dir2; lengths up to DIR_LEN are answered there. */
#define OFL_LPM6_DIR1_BITS 16
#define OFL_LPM6_DIR2_BITS 16
#define OFL_LPM6_DIR_LEN (OFL_LPM6_DIR1_BITS + OFL_LPM6_DIR2_BITS)

/* One prefix length's hash table. */
struct ofl_lpm6_level {
    uint64_t mhi, mlo;    /* the length's mask, high and low 64 bits */
    uint64_t *slots;      /* (mask + 1) slots of 2 words (wide = 0) or 4 (wide = 1) */
    uint64_t mask;        /* slots - 1; slots is a power of two >= 2 */
    uint8_t shift;        /* 64 - log2(slots): the hash's top bits index the slots */
    uint8_t wide;         /* len > 64: keys of two words */
    uint8_t len;          /* prefix length 1..128 */
    uint32_t used;        /* entries (prefixes and markers) */
};

/* A node of a search tree over levels: the level, and the child nodes (shorter,
 * longer; -1 = none). */
struct ofl_lpm6_node {
    int32_t left, right;
    uint32_t lv;
};

/* A built table (read its fields, never write them). */
struct ofl_lpm6 {
    struct ofl_lpm6_level *lv;   /* levels by increasing length */
    unsigned nlv;
    unsigned depth;              /* most memory steps of one search past dir1: the dir2
                                    read plus the tallest tree's height */
    uint16_t def;                /* hop of the /0 route, 0 = none */
    size_t routes;               /* routes it was built from (duplicates included) */
    size_t prefixes;             /* distinct prefixes of length >= 1 */
    size_t markers;              /* entries that are markers only */
    uint32_t *dir1;              /* 2^DIR1_BITS entries: hop | (block + 1) << 16 */
    uint32_t *dir2;              /* nblocks blocks of 2^DIR2_BITS: hop | tree << 16 */
    unsigned nblocks;
    int32_t *tree;               /* root node of tree id 1..ntrees ([0] unused) */
    unsigned ntrees;
    struct ofl_lpm6_node *node;  /* every tree's nodes */
    unsigned nnodes;
    uint64_t *arena;             /* every level's slots */
    size_t arena_words;
};

/* Build a table from `n` routes (hops 1..OFL_ROUTE_MAX_HOP, lengths 0..128, host bits
 * ignored; duplicates: the last wins). Returns 0 and sets `*t`, or a negative errno
 * with a message in `errbuf` (256 bytes): -EINVAL for a bad route, -ENOMEM. */
int ofl_lpm6_build(struct ofl_lpm6 **t, const struct ofl_route6 *r, size_t n, char *errbuf);

/* Read the IPv6 routes of a prefix file (ofl_routes_load: hops by the file rule for
 * `nports`, 0 = OFL_ROUTE_DEFAULT_PORTS) and build a table from them. Returns 0 and
 * sets `*t`, or the errors of ofl_routes_load and ofl_lpm6_build. */
int ofl_lpm6_open_file(struct ofl_lpm6 **t, const char *path, unsigned nports, char *errbuf);

/* Free a table (NULL is fine). */
void ofl_lpm6_free(struct ofl_lpm6 *t);

/* Bytes the table holds: the slots of every level, the level array and the struct. */
size_t ofl_lpm6_memory(const struct ofl_lpm6 *t);

/* ---- lookups (inline: the fast path) ---------------------------------------------- */

/* The 64-bit big-endian number at p. */
static inline uint64_t ofl_lpm6_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Slot index of key (hi, lo) in a level whose slots are indexed by the top
 * (64 - shift) bits of the hash. */
static inline uint64_t ofl_lpm6_hash(uint64_t hi, uint64_t lo, unsigned shift)
{
    uint64_t x = hi ^ (lo * 0x9E3779B97F4A7C15ull);
    x ^= x >> 32;
    return (x * 0xD6E8FEB86659FD93ull) >> shift;
}

/* The value stored for the address (hi, lo) masked to level l, 0 when absent;
 * `i` is its first slot (ofl_lpm6_hash of the masked address). */
static inline uint32_t ofl_lpm6_probe(const struct ofl_lpm6_level *l, uint64_t hi,
                                      uint64_t lo, uint64_t i)
{
    if (!l->wide) {
        for (;; i = (i + 1) & l->mask) {
            const uint64_t *s = l->slots + 2 * i;
            if (s[1] == 0 || s[0] == hi) return (uint32_t)s[1];
        }
    }
    for (;; i = (i + 1) & l->mask) {
        const uint64_t *s = l->slots + 4 * i;
        if (s[2] == 0 || (s[0] == hi && s[1] == lo)) return (uint32_t)s[2];
    }
}

/* The value stored for address (hi, lo) (unmasked) at level l, 0 when absent. */
static inline uint32_t ofl_lpm6_find(const struct ofl_lpm6_level *l, uint64_t hi, uint64_t lo)
{
    uint64_t kh = hi & l->mhi, kl = lo & l->mlo;
    return ofl_lpm6_probe(l, kh, kl, ofl_lpm6_hash(kh, kl, l->shift));
}

/* The front of a lookup: dir1, then dir2 when dir1 points to a block. Returns the
 * entry: the hop of the longest prefix of length <= DIR_LEN in the low 16 bits, the
 * tree to search for longer ones in the high 16 (0 = none). */
static inline uint32_t ofl_lpm6_front(const struct ofl_lpm6 *t, uint64_t hi)
{
    uint32_t e = t->dir1[hi >> (64 - OFL_LPM6_DIR1_BITS)];
    if (e >> 16)
        e = t->dir2[((size_t)((e >> 16) - 1) << OFL_LPM6_DIR2_BITS) |
                    ((hi >> (64 - OFL_LPM6_DIR_LEN)) & ((1u << OFL_LPM6_DIR2_BITS) - 1))];
    return e;
}

/* The next hop of `addr` (16 bytes, network order): the hop of the longest prefix
 * that contains it, 0 when none does. The plain scalar lookup: dir1, dir2 where the
 * /16 holds longer prefixes, then one hash probe per level of the /32's tree. */
static inline uint16_t ofl_lpm6_lookup(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    uint64_t hi = ofl_lpm6_be64(addr);
    uint32_t e = ofl_lpm6_front(t, hi);
    uint16_t best = (uint16_t)e;
    if (!(e >> 16)) return best;
    uint64_t lo = ofl_lpm6_be64(addr + 8);
    int n = t->tree[e >> 16];
    while (n >= 0) {
        const struct ofl_lpm6_node *d = &t->node[n];
        const struct ofl_lpm6_level *l = &t->lv[d->lv];
        uint32_t v = ofl_lpm6_find(l, hi, lo);
        if (!v) {
            n = d->left;
            continue;
        }
        best = (uint16_t)v;
        n = v & OFL_LPM6_MARKER ? d->right : -1;
    }
    return best;
}

/* hops[i] = ofl_lpm6_lookup(t, addrs + 16 * i) for i < n, hiding memory latency:
 * a few lanes search at once, interleaved (AMAC style: asynchronous memory access
 * chaining): each step of a lane probes the slot prefetched one round before, then
 * computes and prefetches the slot of its next level; a lane that finishes takes the
 * next address. The cache misses of all lanes overlap. */
void ofl_lpm6_lookup_batch(const struct ofl_lpm6 *t, const uint8_t *addrs, uint16_t *hops,
                           unsigned n);

#endif
