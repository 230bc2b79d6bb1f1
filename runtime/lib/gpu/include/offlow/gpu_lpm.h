/* The router's LPM tables (runtime/lib/lpm) in device buffers: their gpu form, as the
 * OpenCL lookups of runtime/lib/gpu/cl/offlow/cl/lpm4.h and lpm6.h read them. */
#ifndef OFL_GPU_LPM_H
#define OFL_GPU_LPM_H

#include <stdint.h>

#include "offlow/gpu.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"

/* Kernel arguments each table takes, from its first. */
#define OFL_GPU_LPM4_ARGS 3u   /* dir, tbl24, tbl8 */
#define OFL_GPU_LPM6_ARGS 7u   /* dir1, dir2, dir3, tree, node, levels, arena */

/* A level of an IPv6 table as the device reads it: its slots at word `off` of the arena
 * buffer (the host table's pointers become offsets). The same layout in lpm6.h of the
 * OpenCL side (checked there and here). */
struct ofl_gpu_lpm6_level {
    uint64_t mhi, mlo, off, mask;
    uint32_t shift, packed;
};
_Static_assert(sizeof(struct ofl_gpu_lpm6_level) == 40, "the OpenCL side reads 40 bytes");
_Static_assert(sizeof(struct ofl_lpm6_node) == 12, "the OpenCL side reads 12 bytes");

/* Copy IPv4 table `t` into device buffers, kernel arguments first..first+2. 0 or the
 * errors of ofl_gpu_table. */
int ofl_gpu_lpm4_upload(struct ofl_gpu *g, unsigned first, const struct ofl_lpm4 *t);

/* Copy IPv6 table `t` into device buffers, kernel arguments first..first+6. 0, -ENOMEM
 * or the errors of ofl_gpu_table. */
int ofl_gpu_lpm6_upload(struct ofl_gpu *g, unsigned first, const struct ofl_lpm6 *t);

#endif
