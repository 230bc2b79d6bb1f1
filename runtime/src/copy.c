/* The copy engine: inline copies or a polling copy thread. */
#include "offlow/copy.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "offlow/thread.h"

static void run_job(struct ofl_ce_job *job)
{
    for (unsigned i = 0; i < job->nseg; i++)
        memcpy(job->seg[i].dst, job->seg[i].src, job->seg[i].len);
    __atomic_store_n(&job->done, 1u, __ATOMIC_RELEASE);
}

/* The engine thread: take jobs in order; spin a while when idle, then yield. */
static void *engine_main(void *arg)
{
    struct ofl_ce *ce = arg;
    if (ce->cpu >= 0) ofl_pin_self(ce->cpu);
    uint32_t head = ce->q_head, idle = 0;
    for (;;) {
        uint32_t tail = __atomic_load_n(&ce->q_tail, __ATOMIC_ACQUIRE);
        if (head != tail) {
            while (head != tail) {
                run_job(ce->q[head & (OFL_CE_QLEN - 1)]);
                head++;
                __atomic_store_n(&ce->q_head, head, __ATOMIC_RELEASE);
            }
            idle = 0;
            continue;
        }
        /* Stop only with an empty queue, so every queued job completes. */
        if (__atomic_load_n(&ce->stop, __ATOMIC_ACQUIRE)) {
            if (head == __atomic_load_n(&ce->q_tail, __ATOMIC_ACQUIRE)) break;
            continue;
        }
        if (idle < OFL_WAIT_SPINS) {
            idle++;
            ofl_cpu_relax();
        } else {
            sched_yield();
        }
    }
    return NULL;
}

int ofl_ce_start(struct ofl_ce *ce, int mode, int cpu)
{
    memset(ce, 0, sizeof *ce);
    if (mode != OFL_CE_INLINE && mode != OFL_CE_THREAD) return -EINVAL;
    ce->mode = mode;
    ce->cpu = cpu < 0 ? -1 : cpu;
    if (mode == OFL_CE_THREAD) {
        int rc = pthread_create(&ce->thread, NULL, engine_main, ce);
        if (rc) return -rc;
        ce->thread_live = true;
    }
    ce->started = true;
    return 0;
}

int ofl_ce_submit(struct ofl_ce *ce, struct ofl_ce_job *job)
{
    if (!ce->started || job->nseg == 0 || job->nseg > OFL_CE_MAX_SEGS) return -EINVAL;
    job->done = 0;
    ce->jobs++;
    for (unsigned i = 0; i < job->nseg; i++) ce->bytes += job->seg[i].len;
    if (ce->mode == OFL_CE_INLINE) {
        run_job(job);
        return 0;
    }
    /* The engine thread is in this process and always drains; wait out a full queue. */
    uint32_t spins = 0;
    while (ce->q_tail - __atomic_load_n(&ce->q_head, __ATOMIC_ACQUIRE) >= OFL_CE_QLEN) {
        if (spins++ < OFL_WAIT_SPINS) ofl_cpu_relax();
        else sched_yield();
    }
    ce->q[ce->q_tail & (OFL_CE_QLEN - 1)] = job;
    __atomic_store_n(&ce->q_tail, ce->q_tail + 1, __ATOMIC_RELEASE);
    return 0;
}

int ofl_ce_wait(struct ofl_ce *ce, struct ofl_ce_job *job, struct ofl_waiter *w)
{
    (void)ce;
    uint32_t spins = 0;
    while (!ofl_ce_done(job)) {
        if (w) {
            int rc = ofl_wait(w);
            if (rc < 0) return rc;
        } else if (spins++ < OFL_WAIT_SPINS) {
            ofl_cpu_relax();
        } else {
            sched_yield();
        }
    }
    return 0;
}

void ofl_ce_stop(struct ofl_ce *ce)
{
    if (ce->thread_live) {
        __atomic_store_n(&ce->stop, 1u, __ATOMIC_RELEASE);
        pthread_join(ce->thread, NULL);
        ce->thread_live = false;
    }
    ce->started = false;
}
