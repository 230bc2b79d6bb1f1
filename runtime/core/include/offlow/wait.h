/* Waiting: bounded spin, then yield, then short naps, with peer liveness checks.
 *
 * A core that waits for a peer running on its own CPU spins with a pause hint (a
 * hand-off costs tens of nanoseconds that way; waking a sleeping vCPU costs ~100 us
 * here), then falls back to sched_yield() so oversubscribed runs make progress. A
 * waiter idle for OFL_WAIT_NAP_AFTER_NS (the peer itself is idle: no packets, no
 * requests) naps instead, in poll(): each nap lasts a sixteenth of the idle time so
 * far, at least OFL_WAIT_NAP_MIN_NS and at most OFL_WAIT_NAP_MAX_NS. So new work is
 * seen within max(50 us, idle time / 16), never more than 1 ms (plus the ~100 us a
 * sleeping vCPU takes to wake) after it arrives, and an idle waiter costs about a
 * thousand wake-ups a second: well under 1% of a core. A nap ends at once when a
 * peer dies or the interrupt fd turns readable. While waiting, the waiter watches
 * the liveness pipes of the peer processes (EOF = the peer died), the window-wide
 * abort word and an optional interrupt fd (readable = stop waiting: Python's signal
 * wakeup fd, see channels.py). */
#ifndef OFL_WAIT_H
#define OFL_WAIT_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define OFL_WAIT_MAX_PEERS 4
/* Waits that pause before yielding the CPU. */
#define OFL_WAIT_SPINS 2000u
/* Interval between liveness polls of the peer fds. */
#define OFL_WAIT_CHECK_NS 1000000ull
/* Idle time (since the spins ended) after which a waiter naps instead of yielding,
 * and the shortest and longest nap. */
#define OFL_WAIT_NAP_AFTER_NS 1000000ull
#define OFL_WAIT_NAP_MIN_NS 50000ull
#define OFL_WAIT_NAP_MAX_NS 1000000ull

/* Per-thread waiting state; owned by the caller, not shared between threads. */
struct ofl_waiter {
    int peer_fds[OFL_WAIT_MAX_PEERS];    /* read ends of liveness pipes: EOF = peer died */
    int npeers;
    const volatile uint32_t *abort_flag; /* window-wide abort word, may be NULL */
    uint32_t spins;                      /* waits since the last progress */
    uint64_t next_check_ns;              /* when to poll the peer fds next */
    uint32_t calls;                      /* busy-loop checks since the last clock read */
    int dead;                            /* sticky: -EPIPE/-EBADF once a peer was found dead */
    uint32_t dead_peers;                 /* bit i: peer_fds[i] was found dead (EOF) */
    int intr_fd;                         /* readable: end the wait with -EINTR; -1: none */
    uint64_t idle_since;                 /* when the yields began (0: not idle yet) */
    /* Wait accounting (set `timed`: profile-scaled runs, for the planner's validation):
     * the time (ofl_now_ns: no system call) from the first ofl_wait of an episode to
     * the ofl_waiter_progress that ends it, summed in waited_ns. */
    bool timed, in_wait;
    uint64_t wait_t0, waited_ns;
    /* Set by a thread that runs the loops of several segments (ofl_core_assist): while
     * one of them waits for room in a ring, the others' turns, which may be what frees
     * it (their consumer feeds back through this thread). Returns whether they moved
     * packets. NULL: none. */
    int (*assist)(void *arg);
    void *assist_arg;
};

/* Set up `w` to watch `npeers` (at most 4; extra are ignored) peer fds and the
 * abort word `abort_flag` (may be NULL); no interrupt fd (set w->intr_fd for one). */
void ofl_waiter_init(struct ofl_waiter *w, const int *peer_fds, int npeers,
                     const volatile uint32_t *abort_flag);

/* Called when no progress was made: pause (up to OFL_WAIT_SPINS times), then
 * sched_yield(), then, once idle for OFL_WAIT_NAP_AFTER_NS, nap (see above); about
 * every millisecond polls the peer fds and the interrupt fd.
 * Returns 0 (keep waiting), -EPIPE (a peer died), -ECANCELED (abort word set),
 * -EBADF (a peer fd is not open), -EINTR (the interrupt fd is readable). */
int ofl_wait(struct ofl_waiter *w);

/* Called when progress was made: the next wait starts spinning again. */
void ofl_waiter_progress(struct ofl_waiter *w);

/* Rate-limited liveness check for busy loops that never wait: reads the abort
 * word every call, the clock every 64 calls, the peer fds every ~1 ms.
 * Returns 0 or -EPIPE / -ECANCELED / -EBADF / -EINTR as ofl_wait. */
int ofl_waiter_check(struct ofl_waiter *w);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ofl_now_ns(void);

/* Sleep about `ns` nanoseconds (a signal may end it early): for loops that have
 * nothing to wait for but time, such as a stopped manager's. */
void ofl_sleep_ns(uint64_t ns);

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

/* One turn of a busy wait that has no waiter to watch peers with: a pause hint, and
 * each OFL_WAIT_SPINS-th turn a sched_yield() instead, with `*spins` (turns since the
 * last yield; the caller zeroes it when work comes) starting over. */
static inline void ofl_spin_pause(uint32_t *spins)
{
    if (++*spins < OFL_WAIT_SPINS) {
        ofl_cpu_relax();
    } else {
        *spins = 0;
        sched_yield();
    }
}

#endif
