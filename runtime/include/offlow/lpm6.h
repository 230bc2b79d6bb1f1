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
 * A level's table is made of 64-byte buckets (one cache line): five slots of a 64-bit
 * key and a 32-bit value for levels of up to 64 bits, three of a two-word key for
 * longer ones. A probe reads one bucket and compares its slots without branches. A
 * value is bmp | flags, never 0 in a used slot.
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

#define OFL_LPM6_BMP 0x7FFFu      /* value bits: the best-matching prefix's hop */
#define OFL_LPM6_MARKER 0x8000u    /* value flag: longer prefixes pass through here */
#define OFL_LPM6_PREFIX 0x10000u   /* value flag while building: a route of this length */

/* The front: the top DIR1_BITS of an address index dir1, the next DIR2_BITS a block
 * of dir2, and a hash table holds the /DIR_LEN (= /32) entries that dir2 cannot
 * give; lengths up to DIR_LEN are answered there. */
#define OFL_LPM6_DIR1_BITS 16
#define OFL_LPM6_DIR2_BITS 8
#define OFL_LPM6_DIR_LEN 32
#define OFL_LPM6_SEE32 0x10000u   /* dir2 entry flag: look the /32 up in the /32 table */

/* A bucket of the /32 table: one cache line of eight 32-bit keys (an address's top 32
 * bits) and their values (hop | tree << 16, never 0 in a used slot), filled in order
 * as the level buckets below. */
#define OFL_LPM6_SLOTS32 8
struct ofl_lpm6_bucket32 {
    uint32_t key[OFL_LPM6_SLOTS32];
    uint32_t val[OFL_LPM6_SLOTS32];
};

/* Levels of up to PACKED_LEN bits keep "packed" slots: one 64-bit word holding the
 * key (the address's top 64 bits masked to the level) in its top bits and, in the low
 * 16 bits that every key leaves 0, the value: bmp | OFL_LPM6_MARKER for a marker. A
 * bucket is one cache line of eight such slots. An empty slot is 0, and a used one
 * never is (its bmp is >= 1 or it is a marker). Slots fill in order and never empty,
 * so a bucket whose last slot is used is full, and a key that is in none of the
 * slots of a bucket that is not full is in no later bucket either. */
#define OFL_LPM6_PACKED_LEN 48
#define OFL_LPM6_PSLOTS 8

/* A bucket of a longer level (and of every level while the table is being built):
 * three keys of two words and their values (bmp | flags, never 0 in a used slot). */
#define OFL_LPM6_WSLOTS 3
struct ofl_lpm6_wbucket {
    uint64_t key[OFL_LPM6_WSLOTS][2];
    uint32_t val[OFL_LPM6_WSLOTS];
    uint32_t pad;
};

/* One prefix length's hash table: buckets of slots, open addressing (a full bucket
 * sends keys on to the next one), at most about half the slots used. */
struct ofl_lpm6_level {
    uint64_t mhi, mlo;    /* the length's mask, high and low 64 bits */
    uint64_t *p;          /* packed = 1: (mask + 1) buckets of OFL_LPM6_PSLOTS words */
    struct ofl_lpm6_wbucket *wb;   /* packed = 0: (mask + 1) buckets */
    uint64_t mask;        /* buckets - 1; buckets is a power of two >= 2 */
    uint8_t shift;        /* 64 - log2(buckets): the hash's top bits index the buckets */
    uint8_t packed;       /* packed slots (len <= OFL_LPM6_PACKED_LEN, once built) */
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
    unsigned depth;              /* most memory steps of one search past dir1 and dir2:
                                    the /32 table plus the tallest tree's height */
    uint16_t def;                /* hop of the /0 route, 0 = none */
    size_t routes;               /* routes it was built from (duplicates included) */
    size_t prefixes;             /* distinct prefixes of length >= 1 */
    size_t markers;              /* entries that are markers only */
    uint32_t *dir1;              /* 2^DIR1_BITS entries: hop | (block + 1) << 16 */
    uint32_t *dir2;              /* nblocks blocks of 2^DIR2_BITS, one per /24: the hop
                                    of the longest prefix of length <= 24 covering it,
                                    | OFL_LPM6_SEE32 when it holds longer prefixes */
    unsigned nblocks;
    struct ofl_lpm6_bucket32 *x32;   /* the /32 table: every /32 under a SEE32 /24 that
                                        a prefix of length 25..32 covers or that holds
                                        longer ones, keyed by its top 32 bits: the hop
                                        of the longest prefix of length <= 32 covering
                                        it | its tree << 16 (0 = none) */
    uint64_t x32_mask;           /* buckets - 1 (a power of two >= 2) */
    uint8_t x32_shift;           /* 64 - log2(buckets) */
    size_t x32_used;             /* entries */
    int32_t *tree;               /* root node of tree id 1..ntrees ([0] unused) */
    unsigned ntrees;
    int32_t first;               /* the level at the root of every tree: the root of
                                    the optimal tree over all the levels longer than
                                    DIR_LEN (tree 1; -1: no trees).
                                    Its markers cover every longer prefix, so a prefix
                                    found there that is not a marker is the answer:
                                    the batched lookup probes it beside the /32 table */
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

/* Bucket index of key (hi, lo) in a level whose buckets are indexed by the top
 * (64 - shift) bits of the hash. */
static inline uint64_t ofl_lpm6_hash(uint64_t hi, uint64_t lo, unsigned shift)
{
    uint64_t x = hi ^ (lo * 0x9E3779B97F4A7C15ull);
    x ^= x >> 32;
    return (x * 0xD6E8FEB86659FD93ull) >> shift;
}

/* The address of the bucket `i` of level l (for a prefetch). */
static inline const void *ofl_lpm6_bucket_at(const struct ofl_lpm6_level *l, uint64_t i)
{
    return l->packed ? (const void *)&l->p[OFL_LPM6_PSLOTS * i] : (const void *)&l->wb[i];
}

/* Four and eight 64-bit lanes, eight 32-bit lanes (GCC / Clang vector extension: AVX2
 * registers, SSE2 pairs or scalar code, whatever the target has). */
typedef uint64_t ofl_lpm6_u64x4 __attribute__((vector_size(32)));
typedef uint32_t ofl_lpm6_u32x8 __attribute__((vector_size(32)));
typedef uint64_t ofl_lpm6_u64x2 __attribute__((vector_size(16)));
typedef uint32_t ofl_lpm6_u32x4 __attribute__((vector_size(16)));

/* The OR of all lanes of a vector (a macro: a function taking a 32-byte vector would
 * change the ABI on targets without AVX). Halving with shuffles where the compiler has
 * __builtin_shufflevector (Clang, GCC 12 on), lane by lane elsewhere. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define OFL_LPM6_OR4X64(v, out)                                                         \
    do {                                                                                \
        ofl_lpm6_u64x2 h_ = __builtin_shufflevector((v), (v), 0, 1) |                   \
                            __builtin_shufflevector((v), (v), 2, 3);                    \
        (out) = h_[0] | h_[1];                                                          \
    } while (0)
#define OFL_LPM6_OR8X32(v, out)                                                         \
    do {                                                                                \
        ofl_lpm6_u32x4 h_ = __builtin_shufflevector((v), (v), 0, 1, 2, 3) |             \
                            __builtin_shufflevector((v), (v), 4, 5, 6, 7);              \
        h_ |= __builtin_shufflevector(h_, h_, 2, 3, 0, 1);                              \
        (out) = h_[0] | h_[1];                                                          \
    } while (0)
#else
#define OFL_LPM6_OR4X64(v, out) ((out) = (v)[0] | (v)[1] | (v)[2] | (v)[3])
#define OFL_LPM6_OR8X32(v, out)                                                         \
    ((out) = (v)[0] | (v)[1] | (v)[2] | (v)[3] | (v)[4] | (v)[5] | (v)[6] | (v)[7])
#endif

/* The value stored for the address (hi, lo) masked to level l, 0 when absent (bmp,
 * | OFL_LPM6_MARKER for a marker); `i` is its first bucket (ofl_lpm6_hash of the masked
 * address). The slots of a bucket are compared at once, without branches (an empty
 * slot yields 0); only a full bucket without the key sends the search on to the next
 * one. */
static inline uint32_t ofl_lpm6_probe(const struct ofl_lpm6_level *l, uint64_t hi,
                                      uint64_t lo, uint64_t i)
{
    if (l->packed) {
        for (;; i = (i + 1) & l->mask) {
            const uint64_t *b = &l->p[OFL_LPM6_PSLOTS * i];
            ofl_lpm6_u64x4 x, y;
            memcpy(&x, b, sizeof x);
            memcpy(&y, b + 4, sizeof y);
            ofl_lpm6_u64x4 hit = (x & (ofl_lpm6_u64x4)(((x ^ hi) & l->mhi) == 0)) |
                                 (y & (ofl_lpm6_u64x4)(((y ^ hi) & l->mhi) == 0));
            uint64_t any;
            OFL_LPM6_OR4X64(hit, any);
            uint32_t v = (uint32_t)(any & 0xFFFF);
            /* Not found in a full bucket: full > v, one compare (a branch on v alone
             * would be a coin toss where half the probes miss). */
            uint32_t full = b[OFL_LPM6_PSLOTS - 1] != 0;
            if (__builtin_expect(full <= v, 1)) return v;
        }
    }
    for (;; i = (i + 1) & l->mask) {
        const struct ofl_lpm6_wbucket *b = &l->wb[i];
        uint32_t v = 0;
        for (int j = 0; j < OFL_LPM6_WSLOTS; j++)
            v |= b->val[j] & -(uint32_t)((b->key[j][0] == hi) & (b->key[j][1] == lo));
        uint32_t full = b->val[OFL_LPM6_WSLOTS - 1] != 0;
        if (__builtin_expect(full <= v, 1)) return v;
    }
}

/* The value stored for address (hi, lo) (unmasked) at level l, 0 when absent. */
static inline uint32_t ofl_lpm6_find(const struct ofl_lpm6_level *l, uint64_t hi, uint64_t lo)
{
    uint64_t kh = hi & l->mhi, kl = lo & l->mlo;
    return ofl_lpm6_probe(l, kh, kl, ofl_lpm6_hash(kh, kl, l->shift));
}

/* The dir2 entry of address `hi` (its high 64 bits) under the dir1 entry e (which
 * points to a block). */
static inline uint32_t ofl_lpm6_dir2(const struct ofl_lpm6 *t, uint32_t e, uint64_t hi)
{
    return t->dir2[((size_t)((e >> 16) - 1) << OFL_LPM6_DIR2_BITS) |
                   (hi >> (64 - OFL_LPM6_DIR1_BITS - OFL_LPM6_DIR2_BITS) &
                    ((1u << OFL_LPM6_DIR2_BITS) - 1))];
}

/* First bucket of the /32 `key` in the /32 table. */
static inline uint64_t ofl_lpm6_hash32(const struct ofl_lpm6 *t, uint32_t key)
{
    return ((uint64_t)key * 0x9E3779B97F4A7C15ull) >> t->x32_shift;
}

/* The value of the /32 `key` in the /32 table, 0 when absent; `i` is its first bucket.
 * Without branches but for a full bucket, as ofl_lpm6_probe. */
static inline uint32_t ofl_lpm6_probe32(const struct ofl_lpm6 *t, uint32_t key, uint64_t i)
{
    for (;; i = (i + 1) & t->x32_mask) {
        const struct ofl_lpm6_bucket32 *b = &t->x32[i];
        ofl_lpm6_u32x8 k, val;
        memcpy(&k, b->key, sizeof k);
        memcpy(&val, b->val, sizeof val);
        val &= (ofl_lpm6_u32x8)(k == key);
        uint32_t v;
        OFL_LPM6_OR8X32(val, v);
        uint32_t full = b->val[OFL_LPM6_SLOTS32 - 1] != 0;
        if (__builtin_expect(full <= v, 1)) return v;
    }
}

/* One step of a search at node d whose probe found the value v (0 = none): the best
 * hop so far in *best (v's bmp on a hit, else `was`), and the node to go on with:
 * the left child on a miss, the right one on a marker, -1 (done) on a prefix that is
 * not a marker. Without branches: which way a search goes cannot be predicted. */
static inline int32_t ofl_lpm6_step(const struct ofl_lpm6_node *d, uint32_t v, uint16_t was,
                                    uint16_t *best)
{
    const int32_t next[3] = {d->left, -1, d->right};
    *best = (uint16_t)((v & OFL_LPM6_BMP) | (was & -(uint32_t)(v == 0)));
    return next[(v != 0) + (v >> 15 & 1)];   /* OFL_LPM6_MARKER is bit 15 */
}

/* The rest of ofl_lpm6_lookup for an address whose /24 sends it to the /32 table
 * (`hi`: its top 64 bits, `e`: its dir2 entry): the /32 table and, beside it (it does
 * not wait for the /32 table's answer), the root level; then one hash probe per level
 * further down the /32's tree, with branches: the core predicts the way and starts
 * the next probe before this one's bucket is in. Not inline: most addresses end
 * before it, and the inline part stays small enough to be inlined. */
uint16_t ofl_lpm6_lookup_deep(const struct ofl_lpm6 *t, const uint8_t addr[16], uint64_t hi,
                              uint32_t e);

/* The next hop of `addr` (16 bytes, network order): the hop of the longest prefix
 * that contains it, 0 when none does. The plain scalar lookup: dir1, dir2 where the
 * /16 holds longer prefixes, and ofl_lpm6_lookup_deep where the /24 does. */
static inline uint16_t ofl_lpm6_lookup(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    uint64_t hi = ofl_lpm6_be64(addr);
    uint32_t e = t->dir1[hi >> (64 - OFL_LPM6_DIR1_BITS)];
    if (!(e >> 16)) return (uint16_t)e;
    e = ofl_lpm6_dir2(t, e, hi);
    if (!(e & OFL_LPM6_SEE32)) return (uint16_t)e;
    return ofl_lpm6_lookup_deep(t, addr, hi, e);
}

/* hops[i] = ofl_lpm6_lookup(t, addrs + 16 * i) for i < n, hiding memory latency
 * (G-Opt style): for a group of addresses it reads dir1 and dir2 (small, cached) and
 * prefetches the /32 table's buckets, then probes those; the addresses left with a
 * tree search it takes one level
 * at a time, all together: a pass prefetches every address's bucket, the next probes
 * them without branches and keeps the addresses that go on. The cache misses of a
 * group overlap. */
void ofl_lpm6_lookup_batch(const struct ofl_lpm6 *t, const uint8_t *addrs, uint16_t *hops,
                           unsigned n);

#endif
