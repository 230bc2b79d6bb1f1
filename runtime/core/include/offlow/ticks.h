/* The clock that timed regions count in: the CPU's time-stamp counter. */
#ifndef OFL_TICKS_H
#define OFL_TICKS_H

#include <stdint.h>

#include "offlow/wait.h"

/* The CPU's time-stamp counter (x86), else the monotonic clock in ns: what element
 * timing and the copy engine's timing count in. ofl_stats_core converts ticks to ns
 * over the core's run. */
static inline uint64_t ofl_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return ofl_now_ns();
#endif
}

#endif
