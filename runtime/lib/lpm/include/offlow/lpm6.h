/* IPv6 longest-prefix match. Lookups (ofl_lpm6_lookup, _batch) walk a multibit trie
 * (struct ofl_lpm6_trie, below); built beside it, and read by the gpu target (and by
 * ofl_lpm6_lookup_bsl), binary search on prefix lengths over hash tables with
 * markers (Waldvogel, Varghese, Turner, Plattner 1997; as in Knapp), behind a
 * direct-indexed front.
 *
 * The front answers every length up to 32: dir1 (indexed by the top 16 bits), dir2
 * blocks (bits 16..23) for the /16s that hold longer prefixes, dir3 blocks (bits
 * 24..31) for the /24s that do. A dir3 entry gives the hop of the longest prefix of
 * length <= 32 and the /32's search tree over the longer lengths present in it.
 *
 * Every distinct prefix length 33..128 present in the routes is a level; level L holds
 * an open-addressing hash table keyed by the address masked to L bits. A lookup
 * searches a binary search tree over the levels (ordered by length): a hit at a level
 * means "a prefix of this length or longer may match", so the search goes to the
 * longer side, a miss to the shorter side. For a hit to be seen wherever a longer
 * prefix exists, every prefix leaves a marker (its address masked to the level's
 * length) at each level where the search for its own level goes right. Each entry,
 * prefix or marker, stores its best-matching prefix (bmp): the hop of the longest
 * route of this length or shorter (the /0 default included) that contains its key,
 * computed at build time, so the search never backtracks: the answer is the bmp of
 * the last hit (the front's hop when there is none), and a hit on an entry that is
 * not a marker ends the search.
 *
 * Trees: tree 1 is the binary search tree over all the levels with the fewest
 * expected probes when lookups end at each level in proportion to the routes of that
 * length (an optimal BST, Knuth's algorithm: Waldvogel's "asymmetric binary search";
 * equal weights give a balanced tree). Its root level (/48 on the BGP table) is the
 * root of every tree; below it each /32 gets the optimal trees over the shorter and
 * the longer lengths present in it, shared by all /32s with the same set.
 *
 * A level's table is made of 64-byte buckets (one cache line): eight packed slots (key
 * and 16-bit value in one word) for levels of up to 48 bits, three two-word keys and
 * their values for longer ones. A probe reads one bucket and compares its slots at
 * once, without branches.
 *
 * Building accepts routes in any order; of two equal prefixes the later wins. A built
 * table is immutable; lookups on it are thread-safe. A table opened for updates
 * (ofl_lpm6_open_live, lpm6_live.c) is a handle whose routes change while lookups
 * run: each update (or batch of updates) builds a new table off to the side and
 * publishes it with one atomic pointer swap; lookups on the handle (the functions
 * below, unchanged for the caller) see the table before or after each update, never a
 * mix, and the old table is freed once no lookup can still be reading it (see
 * ofl_lpm6_live below). */
#ifndef OFL_LPM6_H
#define OFL_LPM6_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "offlow/routes.h"

struct ofl_lpm6_live;

#define OFL_LPM6_BMP 0x7FFFu      /* value bits: the best-matching prefix's hop */
#define OFL_LPM6_MARKER 0x8000u    /* value flag: longer prefixes pass through here */
#define OFL_LPM6_PREFIX 0x10000u   /* value flag while building: a route of this length */

/* The front: the top DIR1_BITS of an address index dir1, the next DIR2_BITS a block
 * of dir2, the next DIR3_BITS a block of dir3 where the /24 needs one; lengths up to
 * DIR_LEN (= 32) are answered there. */
#define OFL_LPM6_DIR1_BITS 16
#define OFL_LPM6_DIR2_BITS 8
#define OFL_LPM6_DIR3_BITS 8
#define OFL_LPM6_DIR_LEN 32
#define OFL_LPM6_SEE3 0x80000000u   /* dir2 entry flag: the rest is a dir3 block */

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

/* ---- the multibit trie that CPU lookups walk (lpm6_trie.c) --------------------------
 *
 * A Poptrie (Asai and Ohara, SIGCOMM 2015) over the 128-bit address: a direct table
 * indexed by the top OFL_LPM6_TOP_BITS bits, then nodes of 6-bit strides. A node's 64
 * slots are compressed with two bit vectors: bit i of `vec` says slot i has a child
 * node (the children of a node are consecutive: slot i's is node[base1 + the number of
 * vec bits at or below i, minus 1]); the other slots are leaves (hops), run-length
 * compressed: bit i of `leafvec` says a run of equal hops starts at slot i (counting
 * leaf slots only), and slot i's hop is leaf[base0 + the leafvec bits at or below i,
 * minus 1]. The last stride (bits 124..127) reads two zero bits past the address. A
 * direct entry is OFL_LPM6_TLEAF | hop, or the index of its node.
 *
 * The hash levels above stay: the gpu target's OpenCL lookup reads them (lpm6.cl), and
 * ofl_lpm6_lookup_bsl walks them on the CPU (a second reference in the tests). */
#define OFL_LPM6_TOP_BITS 16
#define OFL_LPM6_STRIDE 6
#define OFL_LPM6_TLEAF 0x80000000u

struct ofl_lpm6_pnode {
    uint64_t vec;       /* bit i: slot i is a child node */
    uint64_t leafvec;   /* bit i: a run of equal leaves starts at slot i */
    uint32_t base1;     /* the first child in node[] */
    uint32_t base0;     /* the first leaf in leaf[] */
};

struct ofl_lpm6_trie {
    uint32_t *top;                  /* 2^OFL_LPM6_TOP_BITS entries */
    struct ofl_lpm6_pnode *node;
    size_t nnodes;
    uint16_t *leaf;
    size_t nleaves;
    unsigned depth;                 /* most nodes one lookup reads */
    int simd;                       /* the batch's path: enum ofl_simd (simd.h) */
};

/* A built table (read its fields, never write them). */
struct ofl_lpm6 {
    struct ofl_lpm6_trie trie;   /* what ofl_lpm6_lookup and _batch walk */
    struct ofl_lpm6_level *lv;   /* levels by increasing length */
    unsigned nlv;
    unsigned depth;              /* most memory steps of one search past dir1 and dir2:
                                    dir3 plus the tallest tree's height */
    uint16_t def;                /* hop of the /0 route, 0 = none */
    size_t routes;               /* routes it was built from (duplicates included) */
    struct ofl_routes_file file; /* its prefix file's lines that were no routes (set by
                                    lpm_tables.c on a handle; zero otherwise) */
    size_t prefixes;             /* distinct prefixes of length >= 1 */
    size_t markers;              /* entries that are markers only */
    uint32_t *dir1;              /* 2^DIR1_BITS entries: hop | (block + 1) << 16 */
    uint32_t *dir2;              /* nblocks blocks of 2^DIR2_BITS entries (a block per
                                    dir1 entry with one, an entry per /24): the hop of
                                    the longest prefix of length <= 24 covering the
                                    /24, or OFL_LPM6_SEE3 | a dir3 block when the /24
                                    holds longer prefixes */
    unsigned nblocks;
    uint32_t *dir3;              /* nblocks3 blocks of 2^DIR3_BITS entries, an entry per
                                    /32: the hop of the longest prefix of length <= 32
                                    covering it | its search tree << 16 (0 = none) */
    size_t nblocks3;
    int32_t *tree;               /* root node of tree id 1..ntrees ([0] unused) */
    unsigned ntrees;
    int32_t first;               /* the level at the root of every tree: the root of
                                    the optimal tree over all the levels longer than
                                    DIR_LEN (tree 1; -1: no trees).
                                    Its markers cover every longer prefix, so a prefix
                                    found there that is not a marker is the answer:
                                    the batched lookup probes it beside dir3 */
    struct ofl_lpm6_node *node;  /* every tree's nodes */
    unsigned nnodes;
    uint64_t *arena;             /* every level's slots */
    size_t arena_words;
    struct ofl_lpm6_live *live;  /* a handle opened for updates (ofl_lpm6_open_live):
                                    the fields above are empty and lookups go to the
                                    table it publishes; NULL for a built table */
};

/* What a handle opened for updates holds (lpm6_live.c). Lookups never wait: a lookup
 * reads `idx` (which of the two places holds the current table), counts itself in
 * `in[idx]`, reads `idx` again (a swap in between: it counts itself out and starts
 * over), then searches `cur[idx]` and counts itself out (`out[idx]`). The updating
 * thread builds the new table, stores it in the other place, swaps `idx` (seq_cst),
 * then polls until it reads out[old] and then in[old] equal (nobody inside the old
 * place at that moment: every lookup that counted itself in before the swap has left,
 * at most one batch on each lookup core), and frees the old table. A lookup counted in
 * after the swap re-reads `idx`, sees the new place and never touches the old table. */
struct ofl_lpm6_live {
    struct ofl_lpm6 *cur[2];     /* the published tables (one, or two during a swap) */
    unsigned idx;                /* the current place: 0 or 1 */
    unsigned char pad0[64 - 2 * sizeof(void *) - sizeof(unsigned)];
    uint64_t in[2], out[2];      /* lookups counted in, out of each place (atomics) */
    unsigned char pad1[64 - 4 * sizeof(uint64_t)];
    /* Only the updating thread reads or writes the rest. */
    struct ofl_route6 *routes;   /* the routes: distinct prefixes, sorted, host bits 0 */
    size_t nroutes, cap;
    uint64_t updates;            /* route changes applied */
    uint64_t rebuilds;           /* tables built for them (one per ofl_lpm6_update) */
    uint64_t during;             /* lookups (batches) that began while a rebuild ran:
                                    a design that paused lookups for updates has none */
    uint64_t waits;              /* swaps after which a lookup was still in the old table */
    struct ofl_lpm6_op *staged;  /* a batch being received (ofl_lpm6_stage) */
    size_t nstaged, staged_cap;
    size_t refused_at;           /* > 0: update refused_at - 1 of the batch was refused */
};

/* An update: add addr/len -> hop (hop 1..OFL_ROUTE_MAX_HOP) or, with hop 0, delete
 * addr/len. addr in network order; host bits must be 0. */
struct ofl_lpm6_op {
    uint8_t addr[16];
    uint16_t hop;
    uint8_t len;
};

/* Open a table for updates from `n` routes (as ofl_lpm6_build; duplicates: the last
 * wins). Returns 0 and sets `*t` (a handle: lookups as on any table, ofl_lpm6_free),
 * or the errors of ofl_lpm6_build. */
int ofl_lpm6_open_live(struct ofl_lpm6 **t, const struct ofl_route6 *r, size_t n,
                       char *errbuf);

/* Apply `n` updates in order with one rebuild and one swap, while lookups run in other
 * threads (one updating thread at a time). Returns 0, or a negative errno with a
 * message in `errbuf` (256 bytes) and the table unchanged (none of the n applied):
 * -EINVAL for a bad length, a set host bit or a bad hop, -ENOENT for deleting a route
 * the table lacks (counting the updates before it in the batch), -EOPNOTSUPP for a
 * table not opened for updates, -ENOMEM. Waits for lookups that were in the old table
 * (one batch each) before freeing it; lookups never wait. */
int ofl_lpm6_update(struct ofl_lpm6 *t, const struct ofl_lpm6_op *ops, size_t n,
                    char *errbuf);

/* A batch received one update at a time (the control channel's messages, each one
 * direct message): ofl_lpm6_stage checks update `op`, an add (`add`: hop 1..) or a
 * delete (hop 0), (length, host bits, hop) and
 * keeps it, or refuses it with the reason, and then the whole batch (-EINVAL, or
 * -ENOSPC past OFL_LPM6_STAGE_MAX updates); ofl_lpm6_commit applies what was kept as
 * one ofl_lpm6_update (one rebuild, one swap: all of it or, refused, none), sets
 * `*applied` and empties the batch; a batch with a refused update is refused whole.
 * ofl_lpm6_unstage empties it (a new batch). */
#define OFL_LPM6_STAGE_MAX (1u << 22)
int ofl_lpm6_stage(struct ofl_lpm6 *t, const struct ofl_lpm6_op *op, int add,
                   char *errbuf);
int ofl_lpm6_commit(struct ofl_lpm6 *t, size_t *applied, char *errbuf);
void ofl_lpm6_unstage(struct ofl_lpm6 *t);
/* Refuse the batch being received (an update of it could not be read). */
void ofl_lpm6_refuse(struct ofl_lpm6 *t);

/* One update (ofl_lpm6_update of one op): add or replace route addr/len -> hop, or
 * delete it. */
int ofl_lpm6_add(struct ofl_lpm6 *t, const uint8_t addr[16], uint8_t len, uint16_t hop,
                 char *errbuf);
int ofl_lpm6_del(struct ofl_lpm6 *t, const uint8_t addr[16], uint8_t len, char *errbuf);

/* The current table of `t` and the place it was counted in (`*slot`), for lookups
 * until ofl_lpm6_leave; for a built table: t itself. Never waits. */
const struct ofl_lpm6 *ofl_lpm6_enter(const struct ofl_lpm6 *t, unsigned *slot);

/* The end of the lookups begun with ofl_lpm6_enter (a quiescent point). */
void ofl_lpm6_leave(const struct ofl_lpm6 *t, unsigned slot);

/* Lookups (batches, and single lookups) begun on a table opened for updates, 0 for
 * a built one (read while lookups run: a snapshot). */
uint64_t ofl_lpm6_entered(const struct ofl_lpm6 *t);

/* The distinct routes of a table opened for updates (the /0 included), else of the
 * table as built (prefixes + default). */
size_t ofl_lpm6_count(const struct ofl_lpm6 *t);

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

/* Bytes the table holds: the trie, the slots of every level, the front, the trees, the
 * level array and the struct. */
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

/* Comparing all the slots of a bucket at once: with AVX2, in 256-bit vectors (GCC /
 * Clang vector extensions, halved with __builtin_shufflevector); without it, slot by
 * slot with masks, without branches (generic 256-bit vectors would compare 64-bit
 * lanes one by one where SSE2 has no such compare). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#if defined(__AVX2__)
#define OFL_LPM6_VECTORS 2
#elif defined(__SSE2__)
#define OFL_LPM6_VECTORS 1
#endif
#endif
#ifdef OFL_LPM6_VECTORS
typedef uint64_t ofl_lpm6_u64x4 __attribute__((vector_size(32)));
typedef uint64_t ofl_lpm6_u64x2 __attribute__((vector_size(16)));
typedef uint32_t ofl_lpm6_u32x4 __attribute__((vector_size(16)));
#endif

/* The low 16 bits of the slot of the packed bucket b (OFL_LPM6_PSLOTS words) whose key
 * is `hi` under the level's mask `m`, 0 when none is (an empty slot is 0). */
static inline uint32_t ofl_lpm6_pmatch(const uint64_t *b, uint64_t hi, uint64_t m)
{
#if OFL_LPM6_VECTORS == 2
    ofl_lpm6_u64x4 x, y;
    memcpy(&x, b, sizeof x);
    memcpy(&y, b + 4, sizeof y);
    ofl_lpm6_u64x4 hit = (x & (ofl_lpm6_u64x4)(((x ^ hi) & m) == 0)) |
                         (y & (ofl_lpm6_u64x4)(((y ^ hi) & m) == 0));
    ofl_lpm6_u64x2 h = __builtin_shufflevector(hit, hit, 0, 1) |
                       __builtin_shufflevector(hit, hit, 2, 3);
    return (uint32_t)((h[0] | h[1]) & 0xFFFF);
#elif OFL_LPM6_VECTORS == 1
    /* SSE2 compares 32-bit lanes: a slot matches when both of its halves do. */
    ofl_lpm6_u64x2 any = {0, 0}, k = {hi, hi}, mm = {m, m};
    for (int j = 0; j < OFL_LPM6_PSLOTS; j += 2) {
        ofl_lpm6_u64x2 x;
        memcpy(&x, b + j, sizeof x);
        ofl_lpm6_u32x4 z = (ofl_lpm6_u32x4)((x ^ k) & mm);
        ofl_lpm6_u32x4 eq = (ofl_lpm6_u32x4)(z == 0);
        eq &= __builtin_shufflevector(eq, eq, 1, 0, 3, 2);
        any |= x & (ofl_lpm6_u64x2)eq;
    }
    return (uint32_t)((any[0] | any[1]) & 0xFFFF);
#else
    uint64_t any = 0;
    for (int j = 0; j < OFL_LPM6_PSLOTS; j++) any |= b[j] & -(uint64_t)(((b[j] ^ hi) & m) == 0);
    return (uint32_t)(any & 0xFFFF);
#endif
}

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
            uint32_t v = ofl_lpm6_pmatch(b, hi, l->mhi);
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

/* The dir3 entry of address `hi` (its high 64 bits) under the dir2 entry e (which
 * has OFL_LPM6_SEE3). */
static inline uint32_t ofl_lpm6_dir3(const struct ofl_lpm6 *t, uint32_t e, uint64_t hi)
{
    return t->dir3[((size_t)(e & ~OFL_LPM6_SEE3) << OFL_LPM6_DIR3_BITS) |
                   (hi >> (64 - OFL_LPM6_DIR_LEN) & ((1u << OFL_LPM6_DIR3_BITS) - 1))];
}

/* The rest of ofl_lpm6_lookup for an address whose /32 has a search tree (`hi`: its
 * top 64 bits, `e`: its dir3 entry): the root level, then one hash probe per level
 * further down the tree, with branches: the core predicts the way and starts the next
 * probe before this one's bucket is in. Not inline: most addresses end before it,
 * and the inline part stays small enough to be inlined. */
uint16_t ofl_lpm6_lookup_deep(const struct ofl_lpm6 *t, const uint8_t addr[16], uint64_t hi,
                              uint32_t e);

/* ofl_lpm6_lookup on a handle opened for updates: enter, look up, leave. */
uint16_t ofl_lpm6_lookup_live(const struct ofl_lpm6 *t, const uint8_t addr[16]);

/* The hop of the address (hi, lo) (its high and low 64 bits) in trie p: the direct
 * entry, then one node per stride down to a leaf. */
static inline uint16_t ofl_lpm6_trie_lookup(const struct ofl_lpm6_trie *p, uint64_t hi,
                                            uint64_t lo)
{
    uint32_t e = p->top[hi >> (64 - OFL_LPM6_TOP_BITS)];
    /* (h, l): the address's bits past those read so far, zeros shifted in */
    uint64_t h = hi << OFL_LPM6_TOP_BITS | lo >> (64 - OFL_LPM6_TOP_BITS);
    uint64_t l = lo << OFL_LPM6_TOP_BITS;
    while (!(e & OFL_LPM6_TLEAF)) {
        const struct ofl_lpm6_pnode *nd = &p->node[e];
        unsigned s = (unsigned)(h >> (64 - OFL_LPM6_STRIDE));
        uint64_t upto = (2ull << s) - 1;   /* slots 0..s (s = 63: 2 << 63 is 0) */
        if (!(nd->vec >> s & 1))
            return p->leaf[nd->base0 + (unsigned)__builtin_popcountll(nd->leafvec & upto) - 1];
        e = nd->base1 + (uint32_t)__builtin_popcountll(nd->vec & upto) - 1;
        h = h << OFL_LPM6_STRIDE | l >> (64 - OFL_LPM6_STRIDE);
        l <<= OFL_LPM6_STRIDE;
    }
    return (uint16_t)e;
}

/* The next hop of `addr` (16 bytes, network order): the hop of the longest prefix
 * that contains it, 0 when none does (the trie's walk). */
static inline uint16_t ofl_lpm6_lookup(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    if (__builtin_expect(t->live != NULL, 0)) return ofl_lpm6_lookup_live(t, addr);
    return ofl_lpm6_trie_lookup(&t->trie, ofl_lpm6_be64(addr), ofl_lpm6_be64(addr + 8));
}

/* hops[i] = ofl_lpm6_lookup(t, addrs + 16 * i) for i < n: groups of addresses walk the
 * trie together, a stride at a time, each node prefetched a pass before it is read
 * (the cache misses of a group overlap). The path (t->trie.simd, from ofl_simd_level()
 * when the table was built): OFL_SIMD_SCALAR portable C; AVX2 and AVX-512 the same walk
 * compiled for the POPCNT instruction (every CPU with AVX2 has it; portable C may call
 * a library routine for each popcount). */
void ofl_lpm6_lookup_batch(const struct ofl_lpm6 *t, const uint8_t *addrs, uint16_t *hops,
                           unsigned n);

/* The same answers from the hash levels (binary search on lengths), the structure the
 * gpu target reads: a built table only (not a handle opened for updates). dir1, dir2
 * where the /16 holds longer prefixes, dir3 where the /24 does, and
 * ofl_lpm6_lookup_deep where the /32 does. */
static inline uint16_t ofl_lpm6_lookup_bsl(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    uint64_t hi = ofl_lpm6_be64(addr);
    uint32_t e = t->dir1[hi >> (64 - OFL_LPM6_DIR1_BITS)];
    if (!(e >> 16)) return (uint16_t)e;
    e = ofl_lpm6_dir2(t, e, hi);
    if (!(e & OFL_LPM6_SEE3)) return (uint16_t)e;
    e = ofl_lpm6_dir3(t, e, hi);
    if (!(e >> 16)) return (uint16_t)e;
    return ofl_lpm6_lookup_deep(t, addr, hi, e);
}

/* hops[i] = ofl_lpm6_lookup_bsl(t, addrs + 16 * i) for i < n (a built table), hiding
 * memory latency (G-Opt style): for a group of addresses it reads dir1 and dir2 (small,
 * cached) and prefetches the dir3 entries and the root level's buckets, then reads and
 * probes those; the addresses left with a tree search it takes one level at a time,
 * all together: a pass prefetches every address's bucket, the next probes them without
 * branches and keeps the addresses that go on. */
void ofl_lpm6_lookup_batch_bsl(const struct ofl_lpm6 *t, const uint8_t *addrs,
                               uint16_t *hops, unsigned n);

/* Build the trie of `n` checked routes (as ofl_lpm6_build takes them: any order, host
 * bits ignored, of equal prefixes the later wins) into *p, its batch path from
 * ofl_simd_level() (lpm6_trie.c). 0, or -ENOMEM (*p then empty). */
int ofl_lpm6_trie_build(struct ofl_lpm6_trie *p, const struct ofl_route6 *r, size_t n);

/* Free the trie's arrays (the struct is the caller's). */
void ofl_lpm6_trie_free(struct ofl_lpm6_trie *p);

/* Bytes the trie's arrays hold. */
size_t ofl_lpm6_trie_memory(const struct ofl_lpm6_trie *p);

#endif
