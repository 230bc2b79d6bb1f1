/* IPv4 longest-prefix match: DIR-24-8-basic (Gupta, Lin, McKeown 1998; as in Knapp
 * and DPDK's rte_lpm).
 *
 * tbl24 has one 16-bit entry per /24 (2^24 entries, 32 MiB). An entry without the
 * high bit is the next hop of every address in that /24 (0 = no route); an entry
 * with it points to a tbl8 group: 256 entries, one per address of the /24, allocated
 * only for the /24s that hold a prefix longer than /24 (at most 2^15 groups). A
 * lookup reads one entry, or two.
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

#define OFL_LPM4_TBL24_ENTRIES (1u << 24)
#define OFL_LPM4_GROUP 0x8000u              /* tbl24 entry flag: the rest is a group */
#define OFL_LPM4_MAX_GROUPS (1u << 15)

/* A built table (read its fields, never write them). */
struct ofl_lpm4 {
    uint16_t *tbl24;       /* OFL_LPM4_TBL24_ENTRIES entries */
    uint16_t *tbl8;        /* groups * 256 entries */
    uint32_t groups;       /* tbl8 groups in use */
    uint32_t cap_groups;   /* allocated */
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

/* Bytes the table holds: tbl24, the tbl8 groups allocated and the struct. */
size_t ofl_lpm4_memory(const struct ofl_lpm4 *t);

/* The next hop of `addr` (host byte order): the hop of the longest prefix that
 * contains it, 0 when none does. The plain scalar lookup: one dependent read, or
 * two. */
static inline uint16_t ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint32_t addr)
{
    uint16_t e = t->tbl24[addr >> 8];
    if (e & OFL_LPM4_GROUP) e = t->tbl8[(uint32_t)(e & ~OFL_LPM4_GROUP) << 8 | (addr & 0xFF)];
    return e;
}

/* hops[i] = ofl_lpm4_lookup(t, addrs[i]) for i < n, hiding memory latency: in groups
 * of addresses it prefetches every tbl24 entry first, then reads them and prefetches
 * the tbl8 entries the group needs, then reads those (G-Opt style), so the cache
 * misses of a group overlap. `addrs` and `hops` must not overlap. */
void ofl_lpm4_lookup_batch(const struct ofl_lpm4 *t, const uint32_t *addrs, uint16_t *hops,
                           unsigned n);

#endif
