/* Climbers: threads of the process that holds the TSP table (the emulated NIC's or the
 * host's) that run 2-opt climbs (tsp.h) handed to them as jobs, and the circular result
 * queue they answer through.
 *
 * A job is `count` climbs from seeds seed, seed+1, ...; its result is the best of them
 * (length, seed, tour). Job j goes to slot j mod OFL_TSP_SLOTS of the work ring and of
 * the result queue; the host's manager posts jobs in order (0, 1, ...) and fetches
 * results in order; a post that would reuse the slot of a result not fetched yet is
 * refused (-EBUSY). A fetch is answered in bulk from the slot after the handler
 * returns: the manager takes it whole before its next post, so the slot is not
 * written meanwhile. Climbers take jobs
 * with a compare-and-swap and wait for work with a bounded spin, then yield (wait.h).
 *
 * The table `NAME` is opened with the options path= (a TSPLIB EUC_2D file) and
 * climbers= (threads, 1..OFL_TSP_MAX_CLIMBERS, default 1); on a device other than
 * the host its cities travel as 2*n doubles over the bulk channel table.NAME. */
#ifndef OFL_TSP_CLIMBERS_H
#define OFL_TSP_CLIMBERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "offlow/gen.h"
#include "offlow/tsp.h"

#define OFL_TSP_SLOTS 64

/* Messages on the table's channel: op, then its arguments (little-endian, packed). */
enum ofl_tsp_op {
    OFL_TSP_OP_INFO = 1,  /* -> {int32 0, uint32 n, climbers, slots, the next job's number} */
    OFL_TSP_OP_POST = 2,  /* {uint32 op, uint32 job, uint32 count, uint64 seed} -> {int32} */
    OFL_TSP_OP_READY = 3, /* {uint32 op, uint32 job} -> {int32 1 ready, 0 not yet, <0} */
    OFL_TSP_OP_FETCH = 4, /* {uint32 op, uint32 job} -> BULK_REPLY the slot (or {int32 <0}) */
};

/* A result slot as it crosses: the header, then n uint32 city indices. */
struct ofl_tsp_result {
    uint32_t job;
    uint32_t count;
    uint64_t best_seed;
    int64_t length;
};

struct ofl_tsp_job {
    uint64_t seed;
    uint32_t count;
};

struct ofl_tsp_climbers {
    struct ofl_tsp tsp;
    uint32_t nthreads, started;
    pthread_t threads[OFL_TSP_MAX_CLIMBERS];
    atomic_uint stop;
    atomic_uint posted;                 /* jobs posted so far (the next job's number) */
    atomic_uint taken;                  /* jobs taken by climbers so far */
    atomic_uint done[OFL_TSP_SLOTS];    /* job + 1 once slot's result is written */
    uint32_t fetched;                   /* jobs fetched (the channel handler's alone) */
    struct ofl_tsp_job work[OFL_TSP_SLOTS];
    uint8_t *slots;                     /* OFL_TSP_SLOTS results, `stride` bytes apart */
    uint32_t *scratch;                  /* each climber's scratch and tour (allocated
                                           before they start: none can fail later) */
    atomic_uint ids;                    /* climbers started: each takes its scratch */
    size_t stride;
};

/* The table's open function (host placement): the cities from the file at option
 * path=, `climbers=` threads started. Returns 0 or a negative errno (said:
 * ofl_start_failf). */
int ofl_tsp_climbers_open(struct ofl_tsp_climbers **c, const struct ofl_args *a,
                          const char *name);

/* Read the file at path= into the blob that crosses: 2*n doubles. */
int ofl_tsp_climbers_pack(void **blob, size_t *len, const struct ofl_args *a,
                          const char *name);

/* The table's open function on a device: the cities from the blob (2*n finite
 * doubles; anything else -EINVAL, said: ofl_start_failf). */
int ofl_tsp_climbers_open_blob(struct ofl_tsp_climbers **c, const void *blob, size_t len,
                               const struct ofl_args *a, const char *name);

/* Stop and join the climbers, free everything (NULL: nothing). */
void ofl_tsp_climbers_free(struct ofl_tsp_climbers *c);

/* Serve one channel message (enum ofl_tsp_op above): returns the int32 status to
 * REPLY (with `info` filled for OFL_TSP_OP_INFO), or 0 with *bulk and *bulk_len set
 * when the answer is a slot to BULK_REPLY.
 * A message that is short or of an unknown op, a post out of order or of a count of
 * 0, a ready or fetch of a job not posted, and a fetch out of order give -EINVAL; a
 * post OFL_TSP_SLOTS ahead of the oldest job not fetched -EBUSY; a fetch of a job not
 * done -EAGAIN. */
int32_t ofl_tsp_climbers_handle(struct ofl_tsp_climbers *c, const uint8_t *msg, size_t len,
                                const void **bulk, size_t *bulk_len, uint32_t info[4]);

#endif
