/* The IPv4 LPM table (runtime/lib/lpm: lpm4.h, DIR-24-8 behind a /16 directory) as a
 * kernel reads it from device buffers (offlow/gpu_lpm.h: ofl_gpu_lpm4_upload). The
 * lookup is lpm4.h's, read through global pointers. */
#ifndef OFL_CL_LPM4_H
#define OFL_CL_LPM4_H

#define OFL_LPM4_GROUP 0x8000u

/* The table: its buffers, in the order of the kernel's arguments. */
struct ofl_lpm4 {
    __global const ushort *dir;
    __global const ushort *tbl24;
    __global const ushort *tbl8;
};

/* The next hop of `addr` (host byte order), 0 when no prefix contains it. */
static inline ushort ofl_lpm4_lookup(const struct ofl_lpm4 *t, uint addr)
{
    ushort e = t->tbl24[(uint)t->dir[addr >> 16] << 8 | (addr >> 8 & 0xFF)];
    if (e & OFL_LPM4_GROUP) e = t->tbl8[(uint)(e & ~OFL_LPM4_GROUP) << 8 | (addr & 0xFF)];
    return e;
}

#endif
