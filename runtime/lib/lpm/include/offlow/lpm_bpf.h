/* The IPv4 LPM table (lpm4.h's DIR-24-8) in an XDP program (offlow/codegen/bpf.py):
 * the same lookup, `ofl_lpm4_lookup(t, addr)`, over three BPF array maps that the
 * host side fills from the table the runtime built (runtime/tools/xdp_tables.c):
 *
 *   NAME_dir    one 16-bit entry per /16: its tbl24 block (lpm4.h's `dir`);
 *   NAME_tbl24  one value per tbl24 block of 256 entries;
 *   NAME_tbl8   one value per tbl8 group of 256 entries.
 *
 * An element body written for the NIC (a `const struct ofl_lpm4 *` table) compiles
 * unchanged: here the struct holds the three maps. Include only from generated XDP
 * programs, after offlow/bpf.h; never beside lpm4.h. */
#ifndef OFL_LPM_BPF_H
#define OFL_LPM_BPF_H

#include <stdint.h>

/* lpm4.h's OFL_LPM4_GROUP and OFL_LPM4_BLOCK (xdp_tables.c checks they agree). */
#define OFL_LPM4_BPF_GROUP 0x8000u
#define OFL_LPM4_BPF_BLOCK 256u

/* A table in an XDP program: its three maps. */
struct ofl_lpm4 {
    void *dir, *tbl24, *tbl8;
};

/* 256 entries: a tbl24 block or a tbl8 group. */
struct ofl_lpm4_block {
    uint16_t e[OFL_LPM4_BPF_BLOCK];
};

/* An array map NAME of N values of type VT (OFL_LPM4_BPF_MAPS). */
#define OFL_LPM4_BPF_ARRAY(NAME, VT, N)                                                \
    struct {                                                                           \
        __uint(type, BPF_MAP_TYPE_ARRAY);                                              \
        __uint(map_flags, BPF_F_MMAPABLE);                                             \
        __type(key, uint32_t);                                                         \
        __type(value, VT);                                                             \
        __uint(max_entries, N);                                                        \
    } NAME SEC(".maps")

/* The three maps of IPv4 table NAME (the sizes of the last two set by the host before
 * loading). */
#define OFL_LPM4_BPF_MAPS(NAME)                                                        \
    OFL_LPM4_BPF_ARRAY(NAME##_dir, uint16_t, 65536);                                   \
    OFL_LPM4_BPF_ARRAY(NAME##_tbl24, struct ofl_lpm4_block, 1);                        \
    OFL_LPM4_BPF_ARRAY(NAME##_tbl8, struct ofl_lpm4_block, 1)

/* The next hop of `addr` (host byte order), 0 when no route covers it: lpm4.h's
 * ofl_lpm4_lookup, each array read a map lookup (a missing value, which a table the
 * host filled never has, answers 0). */
static __always_inline uint16_t ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint32_t addr)
{
    uint32_t k = addr >> 16;
    uint16_t *b = bpf_map_lookup_elem(t->dir, &k);
    if (!b) return 0;
    k = *b;
    struct ofl_lpm4_block *blk = bpf_map_lookup_elem(t->tbl24, &k);
    if (!blk) return 0;
    uint16_t e = blk->e[addr >> 8 & 0xFF];
    if (!(e & OFL_LPM4_BPF_GROUP)) return e;
    k = e & ~OFL_LPM4_BPF_GROUP;
    struct ofl_lpm4_block *grp = bpf_map_lookup_elem(t->tbl8, &k);
    return grp ? grp->e[addr & 0xFF] : 0;
}

#endif
