/* Hot reload of a process's segment loops (offlow reload, docs/reload.md).
 *
 * Each segment core's thread runs its loop one turn at a time through a table of
 * turn functions. A reload message names a shared object built from a compatible
 * program (the same layout: tables, queues, segments, elements); the channel manager
 * loads it, checks its layout, stores its turn functions, bumps the epoch, and waits
 * until every thread has started a turn of the new epoch: that thread finished its
 * last turn of the old code (a whole batch, doorbells rung) before it loaded the new
 * pointer, so no packet is between codes. The old code is never unloaded. */
#ifndef OFL_RELOAD_H
#define OFL_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/ctl.h"

/* One turn of a segment's loop on one core (its loop state); returns progress. */
typedef int (*ofl_turn_fn)(void *loop);

/* What a device file exports as `ofl_reload_entry`: its layout's hash (from the
 * compiler) and its turn functions, one per segment core of the process. */
struct ofl_reload_entry {
    uint64_t layout;
    uint32_t nturns;
    const ofl_turn_fn *turns;
};

/* The process's reload state: `turns` (nturns) is read by the loops; `seen`
 * (nthreads) is the epoch each thread last started a turn in (UINT64_MAX: done). */
struct ofl_reload {
    uint64_t layout;
    uint32_t nturns, nthreads;
    ofl_turn_fn *turns;
    uint64_t *seen;
    uint64_t epoch;
    uint64_t reloads;  /* reloads applied */
};

#define OFL_RELOAD_DONE UINT64_MAX
/* How long a reload waits for every thread to take the new code. */
#define OFL_RELOAD_WAIT_NS 2000000000ull

/* A thread about to run a round of turns: note the epoch it runs in (acquire, so the
 * turn pointers it loads next are at least that epoch's). */
static inline void ofl_reload_enter(struct ofl_reload *r, unsigned thread)
{
    uint64_t e = __atomic_load_n(&r->epoch, __ATOMIC_ACQUIRE);
    __atomic_store_n(&r->seen[thread], e, __ATOMIC_RELEASE);
}

/* The turn function of loop `i` now. */
static inline ofl_turn_fn ofl_reload_turn(struct ofl_reload *r, unsigned i)
{
    return __atomic_load_n(&r->turns[i], __ATOMIC_ACQUIRE);
}

/* A thread whose loops have all ended: no reload waits for it. */
static inline void ofl_reload_leave(struct ofl_reload *r, unsigned thread)
{
    __atomic_store_n(&r->seen[thread], OFL_RELOAD_DONE, __ATOMIC_RELEASE);
}

/* Answer reload message `msg` (`len` bytes): "l" then the path of the shared object
 * (at most OFL_CTL_MSG_MAX - 1 bytes, no NUL needed), or "i" (info: layout hash,
 * reloads applied). A load failure, a missing entry, another layout or another number
 * of turns is refused (-ENOENT, -EPROTO, -EINVAL) with the reason and changes
 * nothing; -ETIMEDOUT when a thread did not take the new code within `wait_ns` (it
 * will at its next turn). */
void ofl_reload_msg(struct ofl_reload *r, const uint8_t *msg, size_t len, uint64_t wait_ns,
                    struct ofl_ctl_reply *rep);

#endif
