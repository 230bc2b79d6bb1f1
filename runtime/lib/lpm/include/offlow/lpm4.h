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
 * A table is immutable once built: to change routes, build a new one. Lookups on a
 * built table are thread-safe. */
#ifndef OFL_LPM4_H
#define OFL_LPM4_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/routes.h"

#define OFL_LPM4_TBL24_ENTRIES (1u << 24)   /* logical tbl24 entries */
#define OFL_LPM4_DIR_ENTRIES (1u << 16)     /* directory entries: one per /16 */
#define OFL_LPM4_BLOCK 256u                 /* tbl24 entries per block (one /16) */
#define OFL_LPM4_GROUP 0x8000u              /* tbl24 entry flag: the rest is a group */
#define OFL_LPM4_MAX_GROUPS (1u << 15)

/* A built table (read its fields, never write them). */
struct ofl_lpm4 {
    uint16_t *dir;         /* OFL_LPM4_DIR_ENTRIES entries: the block of each /16 */
    uint16_t *tbl24;       /* blocks * OFL_LPM4_BLOCK entries */
    uint16_t *tbl8;        /* groups * 256 entries */
    uint32_t blocks;       /* tbl24 blocks stored (at most OFL_LPM4_DIR_ENTRIES) */
    uint32_t groups;       /* tbl8 groups in use */
    uint32_t cap_groups;   /* allocated */
    size_t tbl24_bytes;    /* length of the tbl24 mapping */
    size_t routes;         /* routes it was built from (duplicates included) */
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

/* Bytes the table holds: the directory, the tbl24 blocks, the tbl8 groups allocated
 * and the struct. */
size_t ofl_lpm4_memory(const struct ofl_lpm4 *t);

/* Index in t->tbl24 of the entry of `addr` (host byte order): its /16's block, then
 * bits 8..15. */
static inline uint32_t ofl_lpm4_at(const struct ofl_lpm4 *t, uint32_t addr)
{
    return (uint32_t)t->dir[addr >> 16] << 8 | (addr >> 8 & 0xFF);
}

/* The next hop of `addr` (host byte order): the hop of the longest prefix that
 * contains it, 0 when none does. The plain scalar lookup: the directory, one tbl24
 * entry, and one tbl8 entry for a group, each read waiting for the one before. */
static inline uint16_t ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint32_t addr)
{
    uint16_t e = t->tbl24[ofl_lpm4_at(t, addr)];
    if (e & OFL_LPM4_GROUP) e = t->tbl8[(uint32_t)(e & ~OFL_LPM4_GROUP) << 8 | (addr & 0xFF)];
    return e;
}

/* hops[i] = ofl_lpm4_lookup(t, addrs[i]) for i < n, hiding memory latency: in groups
 * of addresses it reads the directory and prefetches every tbl24 entry first, then
 * reads them and prefetches the tbl8 entries the group needs, then reads those (G-Opt
 * style), so the cache misses of a group overlap. `addrs` and `hops` must not
 * overlap. */
void ofl_lpm4_lookup_batch(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n);

#endif
