/* The gpu climber's kernel (OpenCL C 1.2): one work-item per job of climbs, the climb
 * of offlow/tsp_climb.h (the same code the host's and the NIC's climbers run). Built
 * with -DOFL_TSP_N=n -DOFL_TSP_K=k for the instance (private arrays of n entries).
 *
 * Arguments (runtime/lib/gpu's layout, offlow/gpu.h): 0 the jobs (struct job), 1 no
 * packet bytes, 2 the results (struct result: the best of the job's climbs), 3 the
 * job count, 4 the distances (n*n int), 5 the neighbour lists (n*k uint). */
#include "offlow/cl/prelude.h"
#define OFL_TSP_GLOBAL __global
#include "offlow/tsp_climb.h"

struct job {
    ulong seed;
    uint count;
    uint pad;
};

struct result {
    long length;
    ulong seed;
    uint tour[OFL_TSP_N];
};

__kernel void ofl_tsp_climbs(__global const struct job *jobs, __global uchar *bytes,
                             __global struct result *out, uint njobs,
                             __global const int *dist, __global const uint *nbr)
{
    (void)bytes;
    size_t i = get_global_id(0);
    if (i >= njobs)
        return;
    const struct ofl_tsp_view v = {OFL_TSP_N, OFL_TSP_K, dist, nbr};
    uint tour[OFL_TSP_N], scratch[3 * OFL_TSP_N];
    struct job j = jobs[i];
    long best = LONG_MAX;
    for (uint c = 0; c < j.count; c++) {
        long len = ofl_tsp_climb_view(&v, j.seed + c, tour, scratch);
        if (len < best) {
            best = len;
            out[i].seed = j.seed + c;
            for (uint k = 0; k < OFL_TSP_N; k++)
                out[i].tour[k] = tour[k];
        }
    }
    out[i].length = best;
}
