/* IPv4 longest-prefix match: DIR-24-8-basic (Gupta, Lin, McKeown 1998; as in Knapp
 * and DPDK's rte_lpm), with tbl24 stored in blocks behind a /16 directory.
 *
 * tbl24 has one 16-bit entry per /24 (2^24 of them). An entry without the high bit is
 * the next hop of every address in that /24 (0 = no route); an entry with it points to
 * a tbl8 group: 256 entries, one per address of the /24, allocated only for the /24s
 * that hold a prefix longer than /24 (at most 2^15 groups).
 *
 * tbl24 is not one 32 MiB array: it is cut into 65,536 blocks of 256 entries, one per
 * /16, and a directory (`dir`, 65,536 16-bit block numbers, 128 KiB) says where each
 * /16's block is. A /16 that holds no prefix longer than /16 has the same entry in all
 * 256 places, and all such /16s with the same hop share one block. On the BGP table
 * that leaves about 22,800 blocks (11 MiB) instead of 32 MiB, and a third of the
 * address space (the unrouted /16s and the ones covered by /8../16 prefixes) is
 * answered by a few shared blocks that stay in the cache. A lookup reads the
 * directory (cached), one tbl24 entry and, for a group, one tbl8 entry.
 *
 * Building accepts routes in any order: they are sorted by length (stable), so
 * longer prefixes overwrite shorter ones, and of two equal prefixes the later wins.
 * Lookups on a built table are thread-safe, also while one thread changes it with
 * ofl_lpm4_add and ofl_lpm4_del (incremental updates, lpm4_update.c): each lookup
 * sees the table as it was before or after each update, never a mix.
 *
 * Why: for the updates the table keeps, beside what lookups read, the routes (a hash
 * set) and for every entry (/16 without a block of its own, tbl24 entry, tbl8 entry)
 * its depth: 1 + the length of the prefix that set it (0: none). An update rewrites
 * only the entries of its prefix's range whose depth says they are its own (an insert:
 * depth <= its own; a delete: depth == its own, which get the longest shorter route
 * covering the prefix), each with one atomic 16-bit store whose old value is the
 * entry's answer before the update and whose new value its answer after. Where a
 * range needs storage it has not got (a /16 that shares a block, a /24 without a
 * group), the update fills a fresh block or group off to the side, paints it, then
 * publishes it with one release store of the directory or tbl24 entry (copy on
 * write). Shared blocks are never written, and nothing is freed or reused while the
 * table lives (a /16 keeps its own block and a /24 its group once it has one), so a
 * lookup that read a directory or tbl24 entry just before an update reads a block or
 * group that still answers as before. A lookup reads one final entry, so it returns
 * the answer of before or of after every update it raced with. */
#ifndef OFL_LPM4_H
#define OFL_LPM4_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/routes.h"
#include "offlow/simd.h"

#define OFL_LPM4_TBL24_ENTRIES (1u << 24)   /* logical tbl24 entries */
#define OFL_LPM4_DIR_ENTRIES (1u << 16)     /* directory entries: one per /16 */
#define OFL_LPM4_BLOCK 256u                 /* tbl24 entries per block (one /16) */
#define OFL_LPM4_GROUP 0x8000u              /* tbl24 entry flag: the rest is a group */
#define OFL_LPM4_MAX_GROUPS (1u << 15)

struct ofl_lpm4_rules;

/* A built table (read its fields, never write them). */
struct ofl_lpm4 {
    uint16_t *dir;         /* OFL_LPM4_DIR_ENTRIES entries: the block of each /16 */
    uint16_t *tbl24;       /* blocks * OFL_LPM4_BLOCK entries (room for every block) */
    uint16_t *tbl8;        /* groups * 256 entries (room for OFL_LPM4_MAX_GROUPS) */
    uint32_t blocks;       /* tbl24 blocks stored (at most OFL_LPM4_DIR_ENTRIES) */
    uint32_t groups;       /* tbl8 groups in use */
    size_t tbl24_bytes;    /* length of the tbl24 mapping */
    size_t routes;         /* routes it was built from (duplicates included) */
    uint64_t updates;      /* updates applied since it was built (ofl_lpm4_add, _del) */
    enum ofl_simd simd;    /* the path of ofl_lpm4_lookup_batch: ofl_simd_level() at build */
    struct ofl_routes_file file; /* its prefix file's lines that were no routes (set by
                                    lpm_tables.c; zero when built otherwise) */
    /* What only updates read (see above): depths of the /16s (dep16), of the tbl24
     * entries (dep24, beside tbl24) and of the tbl8 entries (dep8); each /16's own
     * block (-1: it shares one), each hop's shared block (-1: none yet); the route
     * set, made by the first update from the routes the table was built from (given,
     * then freed). */
    uint8_t *dep16, *dep24, *dep8;
    int32_t *own, *shared;
    struct ofl_lpm4_rules *rules;
    struct ofl_route4 *given;
};

/* Build a table from `n` routes (hops 1..OFL_ROUTE_MAX_HOP, lengths 0..32, host bits
 * ignored; duplicates: the last wins). Returns 0 and sets `*t`, or a negative errno
 * with a message in `errbuf` (256 bytes): -EINVAL for a bad route, -ENOSPC when more
 * than OFL_LPM4_MAX_GROUPS /24s hold longer prefixes, -ENOMEM. */
int ofl_lpm4_build(struct ofl_lpm4 **t, const struct ofl_route4 *r, size_t n, char *errbuf);

/* Read the IPv4 routes of a prefix file (ofl_routes_load: hops by the file rule for
 * `nports`, 0 = OFL_ROUTE_DEFAULT_PORTS) and build a table from them. Returns 0 and
 * sets `*t`, or the errors of ofl_routes_load and ofl_lpm4_build. */
int ofl_lpm4_open_file(struct ofl_lpm4 **t, const char *path, unsigned nports, char *errbuf);

/* Free a table (NULL is fine). */
void ofl_lpm4_free(struct ofl_lpm4 *t);

/* Bytes the table holds: the directory, the tbl24 blocks and tbl8 groups in use,
 * their depths and the route set (what updates need) and the struct. */
size_t ofl_lpm4_memory(const struct ofl_lpm4 *t);

/* Add route addr/len -> hop (addr host order, host bits ignored; len 0..32, hop
 * 1..OFL_ROUTE_MAX_HOP), replacing the hop of an equal prefix, while lookups run in
 * other threads (one updating thread at a time). Returns 0, or a negative errno with
 * a message in `errbuf` (256 bytes), the table unchanged: -EINVAL for a bad length or
 * hop, -ENOSPC when the tbl8 groups or the tbl24 blocks are all used, -ENOMEM. */
int ofl_lpm4_add(struct ofl_lpm4 *t, uint32_t addr, uint8_t len, uint16_t hop, char *errbuf);

/* Delete route addr/len: its addresses take the hop of the longest shorter route that
 * contains them (none: 0). Same rules as ofl_lpm4_add; -ENOENT when the table has no
 * such route. */
int ofl_lpm4_del(struct ofl_lpm4 *t, uint32_t addr, uint8_t len, char *errbuf);

/* The hop of route addr/len itself (not a lookup): 1..OFL_ROUTE_MAX_HOP, 0 when the
 * table has no such route (or no memory for its route set). By the updating thread. */
uint16_t ofl_lpm4_route(struct ofl_lpm4 *t, uint32_t addr, uint8_t len);

/* The distinct routes the table holds (0 when out of memory for its route set). By
 * the updating thread. */
size_t ofl_lpm4_count(struct ofl_lpm4 *t);

/* Read an entry that an update may be storing at the same time (lpm4_update.c: every
 * store is atomic, and a block or group is published with a release store after it
 * was filled, so reading the entry that points to it with acquire sees it filled). */
static inline uint16_t ofl_lpm4_read(const uint16_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Index in t->tbl24 of the entry of `addr` (host byte order): its /16's block, then
 * bits 8..15. */
static inline uint32_t ofl_lpm4_at(const struct ofl_lpm4 *t, uint32_t addr)
{
    return (uint32_t)ofl_lpm4_read(&t->dir[addr >> 16]) << 8 | (addr >> 8 & 0xFF);
}

/* The next hop of `addr` (host byte order): the hop of the longest prefix that
 * contains it, 0 when none does. The plain scalar lookup: the directory, one tbl24
 * entry, and one tbl8 entry for a group, each read waiting for the one before. */
static inline uint16_t ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint32_t addr)
{
    uint16_t e = ofl_lpm4_read(&t->tbl24[ofl_lpm4_at(t, addr)]);
    if (e & OFL_LPM4_GROUP)
        e = ofl_lpm4_read(&t->tbl8[(uint32_t)(e & ~OFL_LPM4_GROUP) << 8 | (addr & 0xFF)]);
    return e;
}

/* hops[i] = ofl_lpm4_lookup(t, addrs[i]) for i < n, on the path the table chose when
 * it was built (t->simd, from ofl_simd_level(): OFFLOW_SIMD caps it), as
 * ofl_lpm4_lookup_batch_at does. `addrs` and `hops` must not overlap; neither needs
 * any alignment. */
void ofl_lpm4_lookup_batch(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n);

/* hops[i] = ofl_lpm4_lookup(t, addrs[i]) for i < n, on the path `level` (capped by
 * ofl_simd_cpu(): a level the CPU lacks runs the widest it has):
 *   OFL_SIMD_SCALAR  G-Opt style: in groups of addresses it reads the directory and
 *                    prefetches every tbl24 entry first, then reads them and
 *                    prefetches the tbl8 entries the group needs, then reads those,
 *                    so the cache misses of a group overlap (the reference);
 *   OFL_SIMD_AVX2    8 addresses per vector: gathers over the directory and tbl24,
 *                    then a masked gather over tbl8 for the lanes whose entry is a
 *                    group (lpm4_simd.c);
 *   OFL_SIMD_AVX512  the same with 16 addresses per vector.
 * The vector paths give the same answers as the scalar one, also while updates run. */
void ofl_lpm4_lookup_batch_at(const struct ofl_lpm4 *t, enum ofl_simd level,
                              const uint32_t *addrs, uint16_t *hops, unsigned n);

#endif
