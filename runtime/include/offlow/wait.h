/* Waiting without sleeping: bounded spin, then yield, with peer liveness checks.
 *
 * Cores never block in the kernel (waking an idle vCPU costs ~100 us); they spin
 * with a pause hint, then fall back to sched_yield(). While waiting they watch the
 * liveness pipes of the peer processes (EOF = the peer died) and the window-wide
 * abort word. */
#ifndef OFL_WAIT_H
#define OFL_WAIT_H

#include <stdint.h>
#include <sys/types.h>

#define OFL_WAIT_MAX_PEERS 4
/* Waits that pause before yielding the CPU. */
#define OFL_WAIT_SPINS 2000u
/* Interval between liveness polls of the peer fds. */
#define OFL_WAIT_CHECK_NS 1000000ull

/* Per-thread waiting state; owned by the caller, not shared between threads. */
struct ofl_waiter {
    int peer_fds[OFL_WAIT_MAX_PEERS];    /* read ends of liveness pipes: EOF = peer died */
    int npeers;
    const volatile uint32_t *abort_flag; /* window-wide abort word, may be NULL */
    uint32_t spins;                      /* waits since the last progress */
    uint64_t next_check_ns;              /* when to poll the peer fds next */
    uint32_t calls;                      /* busy-loop checks since the last clock read */
    int dead;                            /* sticky: -EPIPE/-EBADF once a peer was found dead */
};

/* Set up `w` to watch `npeers` (at most 4; extra are ignored) peer fds and the
 * abort word `abort_flag` (may be NULL). */
void ofl_waiter_init(struct ofl_waiter *w, const int *peer_fds, int npeers,
                     const volatile uint32_t *abort_flag);

/* Called when no progress was made: pause (up to OFL_WAIT_SPINS times), then
 * sched_yield(); about every millisecond polls the peer fds.
 * Returns 0 (keep waiting), -EPIPE (a peer died), -ECANCELED (abort word set),
 * -EBADF (a peer fd is not open). */
int ofl_wait(struct ofl_waiter *w);

/* Called when progress was made: the next wait starts spinning again. */
void ofl_waiter_progress(struct ofl_waiter *w);

/* Rate-limited liveness check for busy loops that never wait: reads the abort
 * word every call, the clock every 64 calls, the peer fds every ~1 ms.
 * Returns 0 or -EPIPE / -ECANCELED / -EBADF as ofl_wait. */
int ofl_waiter_check(struct ofl_waiter *w);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ofl_now_ns(void);

/* Whether process `pid` is alive: 1, or 0 when it has exited (a zombie not reaped
 * yet counts as exited; pid <= 0 is never alive). `pidfd` caches a pidfd between
 * calls (start it at -1; -2: unsupported here; NULL: kill(pid, 0) and /proc only). */
int ofl_pid_alive(pid_t pid, int *pidfd);

/* One spin of a busy wait: a pause hint on x86, a compiler barrier elsewhere. */
static inline void ofl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

#endif
