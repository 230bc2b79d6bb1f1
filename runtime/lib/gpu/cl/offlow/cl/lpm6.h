/* The IPv6 LPM table (runtime/lib/lpm: lpm6.h, binary search on prefix lengths behind
 * a direct-indexed front) as a kernel reads it from device buffers
 * (offlow/gpu_lpm.h: ofl_gpu_lpm6_upload): the levels' slots in one arena, each level
 * at a word offset. The scalar lookup of lpm6.h and lpm6.c (ofl_lpm6_lookup_deep,
 * find_one), read through global pointers. */
#ifndef OFL_CL_LPM6_H
#define OFL_CL_LPM6_H

#define OFL_LPM6_BMP 0x7FFFu
#define OFL_LPM6_MARKER 0x8000u
#define OFL_LPM6_SEE3 0x80000000u
#define OFL_LPM6_PSLOTS 8u
#define OFL_LPM6_WSLOTS 3u

struct ofl_lpm6_node {
    int left, right;
    uint lv;
};

struct ofl_lpm6_level {
    ulong mhi, mlo, off, mask;
    uint shift, packed;
};

OFL_CL_CHECK(lpm6_level, sizeof(struct ofl_lpm6_level) == 40);
OFL_CL_CHECK(lpm6_node, sizeof(struct ofl_lpm6_node) == 12);

/* The table: its buffers, in the order of the kernel's arguments. */
struct ofl_lpm6 {
    __global const uint *dir1;
    __global const uint *dir2;
    __global const uint *dir3;
    __global const int *tree;
    __global const struct ofl_lpm6_node *node;
    __global const struct ofl_lpm6_level *lv;
    __global const ulong *arena;
};

static inline ulong ofl_lpm6_be64(const uchar *p)
{
    ulong v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static inline ulong ofl_lpm6_hash(ulong hi, ulong lo, uint shift)
{
    ulong x = hi ^ (lo * 0x9E3779B97F4A7C15ul);
    x ^= x >> 32;
    return (x * 0xD6E8FEB86659FD93ul) >> shift;
}

/* The value stored for (hi, lo) masked to level l, 0 when absent. */
static inline uint ofl_lpm6_find(const struct ofl_lpm6 *t, __global const struct ofl_lpm6_level *l,
                                 ulong hi, ulong lo)
{
    ulong kh = hi & l->mhi, kl = lo & l->mlo;
    __global const ulong *slots = t->arena + l->off;
    for (ulong i = ofl_lpm6_hash(kh, kl, l->shift);; i = (i + 1) & l->mask) {
        __global const ulong *b = slots + 8 * i;  /* a bucket: 64 bytes either way */
        if (l->packed) {
            for (uint j = 0; j < OFL_LPM6_PSLOTS; j++) {
                if (b[j] == 0) return 0;
                if (((b[j] ^ kh) & l->mhi) == 0) return (uint)(b[j] & 0xFFFF);
            }
        } else {
            /* three keys of two words, then three 32-bit values and padding */
            __global const uint *val = (__global const uint *)(b + 6);
            uint v = 0;
            for (uint j = 0; j < OFL_LPM6_WSLOTS; j++)
                if (b[2 * j] == kh && b[2 * j + 1] == kl) v |= val[j];
            if (v || val[OFL_LPM6_WSLOTS - 1] == 0) return v;
        }
    }
}

/* The next hop of `addr` (16 bytes, network order), 0 when no prefix contains it. */
static inline ushort ofl_lpm6_lookup(const struct ofl_lpm6 *t, const uchar *addr)
{
    ulong hi = ofl_lpm6_be64(addr);
    uint e = t->dir1[hi >> 48];
    if (!(e >> 16)) return (ushort)e;
    e = t->dir2[((ulong)((e >> 16) - 1) << 8) | (hi >> 40 & 0xFF)];
    if (!(e & OFL_LPM6_SEE3)) return (ushort)e;
    e = t->dir3[((ulong)(e & ~OFL_LPM6_SEE3) << 8) | (hi >> 32 & 0xFF)];
    if (!(e >> 16)) return (ushort)e;
    ulong lo = ofl_lpm6_be64(addr + 8);
    ushort best = (ushort)e;
    for (int n = t->tree[e >> 16]; n >= 0;) {
        __global const struct ofl_lpm6_node *d = &t->node[n];
        uint w = ofl_lpm6_find(t, &t->lv[d->lv], hi, lo);
        if (!w) {
            n = d->left;
            continue;
        }
        best = (ushort)(w & OFL_LPM6_BMP);
        n = (w & OFL_LPM6_MARKER) ? d->right : -1;
    }
    return best;
}

#endif
