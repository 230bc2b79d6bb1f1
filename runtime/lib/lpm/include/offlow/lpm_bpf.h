/* The LPM tables in an XDP program (offlow/codegen/bpf.py): the same lookups as on
 * every device, `ofl_lpm4_lookup(t, addr)` and `ofl_lpm6_lookup(t, addr)`, each over
 * three BPF array maps that the host side fills from the table the runtime built
 * (runtime/tools/xdp_tables.c). The IPv4 table (lpm4.h's DIR-24-8):
 *
 *   NAME_dir    one 32-bit entry per /16, 256 per value (one value per /8): the /16's
 *               hop (OFL_LPM4_BPF_LEAF | hop) when its tbl24 block holds one hop in all
 *               its 256 entries, else the block (lpm4.h's `dir`): derived from the
 *               runtime's table when the maps are filled, it spares the block's read for
 *               every address of such a /16 (most of the address space);
 *   NAME_tbl24  one value per tbl24 block of 256 entries;
 *   NAME_tbl8   one value per tbl8 group of 256 entries.
 *
 * The IPv6 table (lpm6.h's multibit trie, struct ofl_lpm6_trie):
 *
 *   NAME_top    one 32-bit entry per /16: a leaf (OFL_LPM6_BPF_TLEAF | hop) or a node;
 *   NAME_node   one value per node (vec, leafvec, base1, base0);
 *   NAME_leaf   one 16-bit hop per value.
 *
 * An element body written for the NIC (a `const struct ofl_lpm4 *` or `ofl_lpm6 *`
 * table) compiles unchanged: here the struct holds the three maps. Include only from
 * generated XDP programs, after offlow/bpf.h; never beside lpm4.h or lpm6.h. */
#ifndef OFL_LPM_BPF_H
#define OFL_LPM_BPF_H

#include <stdint.h>

#include "offlow/lpm_bpf_layout.h"

/* A table in an XDP program: its three maps. */
struct ofl_lpm4 {
    void *dir, *tbl24, *tbl8;
};

/* 256 entries: a tbl24 block or a tbl8 group. */
struct ofl_lpm4_block {
    uint16_t e[OFL_LPM4_BPF_BLOCK];
};

/* 256 directory entries: the /16s of one /8. */
struct ofl_lpm4_dir {
    uint32_t e[OFL_LPM4_BPF_BLOCK];
};

/* An array map NAME of N values of type VT (OFL_LPM4_BPF_MAPS, OFL_LPM6_BPF_MAPS). */
#define OFL_LPM_BPF_ARRAY(NAME, VT, N)                                                \
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
    OFL_LPM_BPF_ARRAY(NAME##_dir, struct ofl_lpm4_dir, 256);                          \
    OFL_LPM_BPF_ARRAY(NAME##_tbl24, struct ofl_lpm4_block, 1);                        \
    OFL_LPM_BPF_ARRAY(NAME##_tbl8, struct ofl_lpm4_block, 1)

/* The next hop of `addr` (host byte order), 0 when no route covers it: lpm4.h's
 * ofl_lpm4_lookup, each array read a map lookup (a missing value, which a table the
 * host filled never has, answers 0), the block's read spared where the directory holds
 * the hop. */
static __always_inline uint16_t ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint32_t addr)
{
    uint32_t k = addr >> 24;
    struct ofl_lpm4_dir *d = bpf_map_lookup_elem(t->dir, &k);
    if (!d) return 0;
    k = d->e[addr >> 16 & 0xFF];
    if (k & OFL_LPM4_BPF_LEAF) return (uint16_t)k;
    struct ofl_lpm4_block *blk = bpf_map_lookup_elem(t->tbl24, &k);
    if (!blk) return 0;
    uint16_t e = blk->e[addr >> 8 & 0xFF];
    if (!(e & OFL_LPM4_BPF_GROUP)) return e;
    k = e & ~OFL_LPM4_BPF_GROUP;
    struct ofl_lpm4_block *grp = bpf_map_lookup_elem(t->tbl8, &k);
    return grp ? grp->e[addr & 0xFF] : 0;
}

/* The three maps of IPv6 table NAME (the sizes of the last two set by the host before
 * loading). */
#define OFL_LPM6_BPF_MAPS(NAME)                                                        \
    OFL_LPM_BPF_ARRAY(NAME##_top, uint32_t, 65536);                                   \
    OFL_LPM_BPF_ARRAY(NAME##_node, struct ofl_lpm6_bpf_node, 1);                      \
    OFL_LPM_BPF_ARRAY(NAME##_leaf, uint16_t, 1)

/* The table in a body: the struct of its maps. */
#define OFL_LPM4_BPF_TABLE(NAME) { &NAME##_dir, &NAME##_tbl24, &NAME##_tbl8 }
#define OFL_LPM6_BPF_TABLE(NAME) { &NAME##_top, &NAME##_node, &NAME##_leaf }

/* The most nodes a lookup reads: a stride at a time past the top bits, the last stride
 * reading zero bits past the address (19). */
#define OFL_LPM6_BPF_DEPTH \
    ((128 - OFL_LPM6_BPF_TOP_BITS + OFL_LPM6_BPF_STRIDE - 1) / OFL_LPM6_BPF_STRIDE)

/* An IPv6 table in an XDP program: its three maps. */
struct ofl_lpm6 {
    void *top, *node, *leaf;
};

/* lpm6.h's struct ofl_lpm6_pnode (xdp_tables.c checks the layout). */
struct ofl_lpm6_bpf_node {
    uint64_t vec;       /* bit i: slot i is a child node */
    uint64_t leafvec;   /* bit i: a run of equal leaves starts at slot i */
    uint32_t base1;     /* the first child in NAME_node */
    uint32_t base0;     /* the first leaf in NAME_leaf */
};

/* The 64-bit big-endian number at p. */
static __always_inline uint64_t ofl_lpm6_bpf_be64(const uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* The next hop of `addr` (16 bytes, network order), 0 when no route covers it:
 * lpm6.h's ofl_lpm6_trie_lookup, each array read a map lookup, the walk a loop of at
 * most OFL_LPM6_BPF_DEPTH nodes (a missing value, which a table the host filled never
 * has, answers 0). */
static __always_inline uint16_t ofl_lpm6_lookup(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    uint64_t hi = ofl_lpm6_bpf_be64(addr), lo = ofl_lpm6_bpf_be64(addr + 8);
    uint32_t k = (uint32_t)(hi >> (64 - OFL_LPM6_BPF_TOP_BITS));
    uint32_t *top = bpf_map_lookup_elem(t->top, &k);
    if (!top) return 0;
    uint32_t e = *top;
    /* (h, l): the address's bits past those read so far, zeros shifted in */
    uint64_t h = hi << OFL_LPM6_BPF_TOP_BITS | lo >> (64 - OFL_LPM6_BPF_TOP_BITS);
    uint64_t l = lo << OFL_LPM6_BPF_TOP_BITS;
    for (int d = 0; d < OFL_LPM6_BPF_DEPTH; d++) {
        if (e & OFL_LPM6_BPF_TLEAF) return (uint16_t)e;
        struct ofl_lpm6_bpf_node *nd = bpf_map_lookup_elem(t->node, &e);
        if (!nd) return 0;
        unsigned s = (unsigned)(h >> (64 - OFL_LPM6_BPF_STRIDE));
        uint64_t upto = (2ull << s) - 1;   /* slots 0..s (s = 63: 2 << 63 is 0) */
        if (!(nd->vec >> s & 1)) {
            k = nd->base0 + (uint32_t)__builtin_popcountll(nd->leafvec & upto) - 1;
            uint16_t *leaf = bpf_map_lookup_elem(t->leaf, &k);
            return leaf ? *leaf : 0;
        }
        e = nd->base1 + (uint32_t)__builtin_popcountll(nd->vec & upto) - 1;
        h = h << OFL_LPM6_BPF_STRIDE | l >> (64 - OFL_LPM6_BPF_STRIDE);
        l <<= OFL_LPM6_BPF_STRIDE;
    }
    return (e & OFL_LPM6_BPF_TLEAF) ? (uint16_t)e : 0;
}

#endif
