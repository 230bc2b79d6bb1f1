/* A device process and the runner that started it.
 *
 * The runner holds the only write end of a pipe whose read end each process of its
 * run gets (--runner-fd N).  The kernel closes that end when the runner exits,
 * however it exits (SIGKILL and the OOM killer included), so the read end turns to
 * end-of-file: the process then stops as on SIGTERM (stop.h: sources end, queues
 * drain, sinks finish their captures), raises the window's abort word if it has
 * not stopped OFL_LIFELINE_GRACE_NS later, and exits at once after twice that.  On
 * its way out it removes what only the runner would have removed: the window file,
 * the run's description beside it (offlow reload), its stats file (and its live copy),
 * and their run folder once empty.
 *
 * One thread per process sleeps in poll() on the pipe: no CPU, and no dependence on
 * which thread of the runner started the process (unlike PR_SET_PDEATHSIG). */
#ifndef OFL_LIFELINE_H
#define OFL_LIFELINE_H

#include <pthread.h>
#include <stdint.h>

/* After the runner is gone: how long a clean stop may take before the abort word is
 * raised, and (again as long) before the process exits regardless. */
#define OFL_LIFELINE_GRACE_NS 3000000000ull

/* How long finish waits for the pipe of a runner that has reparented its children. */
#define OFL_LIFELINE_CLOSE_MS 5000

/* The watch of one process's runner; owned by the process (not copied once started). */
struct ofl_lifeline {
    int fd;                       /* read end of the runner's pipe, -1: none watched */
    volatile uint32_t *abort;     /* the window's abort word (may be NULL) */
    const char *window;           /* what to remove when orphaned (either may be NULL) */
    const char *stats;
    const char *also;             /* another file of the run (--reload PATH), or NULL */
    uint64_t grace_ns;            /* OFL_LIFELINE_GRACE_NS (tests shorten it; atomic) */
    uint32_t gone;                /* the runner has exited (atomic) */
    int started;                  /* the watching thread runs */
    int parent;                   /* the runner's pid when the watch began (getppid) */
    pthread_t thread;
};

/* Watch the runner through pipe read end `fd` (-1: none; then nothing is watched and
 * 0 is returned): start the thread described above, with the window's abort word
 * `abort_word` and the paths of the window, of the stats file and of one more file of
 * the run (`also`: the reload description) to remove if the runner goes (NULL: none).
 * Returns 0, -EBADF when `fd` is not an open pipe or FIFO, or the negative errno of
 * pthread_create. */
int ofl_lifeline_start(struct ofl_lifeline *l, int fd, volatile uint32_t *abort_word,
                       const char *window, const char *stats, const char *also);

/* 1 once the runner has exited, else 0. */
int ofl_lifeline_gone(const struct ofl_lifeline *l);

/* Called last before the process exits: when the runner is gone (the watching thread
 * saw it, or the pipe says so now, the thread not awake yet), remove the window file,
 * the `also` file, the stats file, and the stats file's folder if it is a run folder ("offlow-run-...")
 * left empty.  Nothing when the runner is alive.  A process already reparented (its
 * runner's forking thread has exited) waits up to OFL_LIFELINE_CLOSE_MS for the pipe
 * to close: the runner's other threads may still hold it while they exit. */
void ofl_lifeline_finish(struct ofl_lifeline *l);

#endif
