/* Live stats: a thread that answers the window's stats requests (live.h). */
#include "offlow/live.h"

#include <errno.h>
#include <time.h>

static void *watch(void *arg)
{
    struct ofl_live *l = arg;
    uint32_t seen = 0;
    const struct timespec step = {0, (long)OFL_LIVE_POLL_NS};
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        uint32_t now = __atomic_load_n(l->req, __ATOMIC_ACQUIRE);
        if (now != seen) {
            seen = now;
            l->fn(l->arg, now);
        }
        nanosleep(&step, NULL);
    }
    return NULL;
}

int ofl_live_start(struct ofl_live *l, volatile uint32_t *req, ofl_live_fn fn, void *arg)
{
    l->req = req;
    l->fn = fn;
    l->arg = arg;
    l->stop = 0;
    l->started = 0;
    fn(arg, 0);
    int rc = pthread_create(&l->thread, NULL, watch, l);
    if (rc) return -rc;
    l->started = 1;
    return 0;
}

void ofl_live_stop(struct ofl_live *l)
{
    if (!l->started) return;
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    pthread_join(l->thread, NULL);
    l->started = 0;
}
