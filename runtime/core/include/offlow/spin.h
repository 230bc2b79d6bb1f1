/* A spin lock for short critical sections shared by threads that never sleep (the
 * key-value store's stripes, the NIC cache's sets): bounded spin with a pause hint,
 * then sched_yield; nothing sleeps in the kernel. */
#ifndef OFL_SPIN_H
#define OFL_SPIN_H

#include <stdatomic.h>

#include "offlow/wait.h"

/* Take the lock (0 = free, 1 = held). */
static inline void ofl_spin_lock(atomic_uint *l)
{
    uint32_t spins = 0;
    for (;;) {
        if (!atomic_load_explicit(l, memory_order_relaxed) &&
            !atomic_exchange_explicit(l, 1, memory_order_acquire))
            return;
        ofl_spin_pause(&spins);
    }
}

/* Release the lock. */
static inline void ofl_spin_unlock(atomic_uint *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif
