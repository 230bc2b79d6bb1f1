/* Live stats: a process answers requests for its counters while it runs.
 *
 * A reader (offlow stats, the metrics server of offlow run --metrics) raises the
 * window header's stats_req word; one thread per process sleeps in 5 ms steps,
 * sees the word change and calls the process's report function with the new value,
 * which writes the stats file's live copy (gen.h: ofl_prog_report_live; the file:
 * live_file.h).  The counters are read while the cores run, without pausing them:
 * each is a 64-bit word written by one core, so a reader sees a value it had
 * (possibly one batch old).
 * This is an idle wait, not a hand-off: a reader waits for the file, not a core. */
#ifndef OFL_LIVE_H
#define OFL_LIVE_H

#include <pthread.h>
#include <stdint.h>

/* Sleep between looks at the request word. */
#define OFL_LIVE_POLL_NS 5000000ull

/* Bit 0 of a request: answer with the tables' contents (every element of a shared
 * array, every pair of a hash map), not only their lengths and table objects'
 * counters. A reader raises the
 * word by 2 (the request's number is the rest), setting this bit when it wants the
 * contents. A process's first answer (request 0) has none; its last (live_final)
 * has them (gen.h: ofl_prog_report_live). */
#define OFL_LIVE_TABLES 1u

/* The report function: write the counters, answering request `seq`. */
typedef void (*ofl_live_fn)(void *arg, uint32_t seq);

/* One process's live-stats thread; owned by the process (not copied once started). */
struct ofl_live {
    volatile uint32_t *req;   /* the window's stats_req word */
    ofl_live_fn fn;
    void *arg;
    uint32_t stop;            /* set by ofl_live_stop (atomic) */
    int started;
    pthread_t thread;
};

/* Answer request 0 at once (so a reader sees this process), then start the thread
 * that answers each new value of `*req` with fn(arg, value). Returns 0 or a negative
 * errno (the thread could not start: the process runs without live stats). */
int ofl_live_start(struct ofl_live *l, volatile uint32_t *req, ofl_live_fn fn, void *arg);

/* Stop the thread and wait for it (a report in progress completes first). Safe on a
 * live that was never started. */
void ofl_live_stop(struct ofl_live *l);

#endif
