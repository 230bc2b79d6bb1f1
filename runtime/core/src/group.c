/* Core groups: batch hand-out from a master to its workers (see group.h). */
#include "offlow/group.h"

#include <string.h>

void ofl_group_init(struct ofl_group *g, uint32_t size)
{
    memset(g, 0, sizeof *g);
    g->size = size ? size : 1;
}

void ofl_group_post(struct ofl_group *g, uint32_t input, const uint8_t *entries, uint32_t n)
{
    g->input = input;
    g->entries = entries;
    g->n = n;
    g->batches++;
    __atomic_store_n(&g->done, 0u, __ATOMIC_RELAXED);
    /* Release: a worker that sees the new epoch also sees the batch and done = 0. */
    __atomic_store_n(&g->epoch, g->epoch + 1, __ATOMIC_RELEASE);
}

int ofl_group_join(struct ofl_group *g, struct ofl_waiter *w)
{
    while (__atomic_load_n(&g->done, __ATOMIC_ACQUIRE) + 1 < g->size) {
        int rc = ofl_wait(w);
        if (rc < 0) return rc;
    }
    ofl_waiter_progress(w);
    return 0;
}

void ofl_group_stop(struct ofl_group *g)
{
    __atomic_store_n(&g->stop, 1u, __ATOMIC_RELEASE);
}

int ofl_group_next(struct ofl_group *g, struct ofl_waiter *w, uint32_t *seen)
{
    for (;;) {
        uint32_t e = __atomic_load_n(&g->epoch, __ATOMIC_ACQUIRE);
        if (e != *seen) {
            *seen = e;
            ofl_waiter_progress(w);
            return 0;
        }
        /* The master stops only after joining its last batch, so a stop seen with
         * no new epoch means there is nothing left to do. */
        if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) return 1;
        int rc = ofl_wait(w);
        if (rc < 0) return rc;
    }
}

void ofl_group_done(struct ofl_group *g)
{
    __atomic_add_fetch(&g->done, 1u, __ATOMIC_ACQ_REL);
}
