/* Core groups (Knapp's vDevices): one segment on a group of cores where the master
 * takes each offload batch from the segment's input rings and every member of the
 * group (the master included) processes one contiguous slice of it.
 *
 * The master publishes a batch by bumping an epoch word; workers spin (bounded,
 * then yield) on it, process their slice and count themselves done; the master
 * processes slice 0, then waits for the others before it releases the batch. Each
 * member has its own output rings, so outputs need no locks. */
#ifndef OFL_GROUP_H
#define OFL_GROUP_H

#include <stdint.h>

#include "offlow/wait.h"

/* Shared by the threads of one grouped segment (in process memory). */
struct ofl_group {
    uint32_t size;            /* members, master included */
    uint32_t epoch;           /* bumped (release) by the master for each batch */
    uint32_t done;            /* workers finished with the current epoch */
    uint32_t stop;            /* set by the master when no batch will follow */
    uint32_t input;           /* which input queue the batch came from */
    uint32_t n;               /* entries in the batch */
    const uint8_t *entries;   /* the batch, in the master's copy-engine buffer */
    uint64_t batches;         /* batches the master published */
};

/* Prepare a group of `size` >= 1 members. */
void ofl_group_init(struct ofl_group *g, uint32_t size);

/* The slice [*lo, *hi) of an `n`-entry batch that member `idx` processes. */
static inline void ofl_group_slice(const struct ofl_group *g, uint32_t idx, uint32_t n,
                                   uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)((uint64_t)n * idx / g->size);
    *hi = (uint32_t)((uint64_t)n * (idx + 1) / g->size);
}

/* Master: publish batch `entries` (n entries) of input queue `input` to the workers. */
void ofl_group_post(struct ofl_group *g, uint32_t input, const uint8_t *entries, uint32_t n);

/* Master: wait until every worker finished the batch last posted. Returns 0, or the
 * waiter's error (-ECANCELED when the abort word is set). */
int ofl_group_join(struct ofl_group *g, struct ofl_waiter *w);

/* Master: no more batches; the workers' ofl_group_next returns 1. */
void ofl_group_stop(struct ofl_group *g);

/* Worker: wait for the batch after epoch `*seen`. Returns 0 with *seen updated (the
 * batch is in g->input, g->entries, g->n), 1 when the master stopped the group, or
 * the waiter's error. */
int ofl_group_next(struct ofl_group *g, struct ofl_waiter *w, uint32_t *seen);

/* Worker: this member finished its slice of the current batch. */
void ofl_group_done(struct ofl_group *g);

#endif
