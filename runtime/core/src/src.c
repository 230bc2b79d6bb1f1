/* The common part of packet sources: dispatch, duration, pacing, counters. */
#include "offlow/src.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t ofl_src_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ofl_src_init(struct ofl_src *s, const struct ofl_src_ops *ops,
                 const struct ofl_src_opts *o, const char *name, char *errbuf)
{
    memset(s, 0, sizeof *s);
    s->ops = ops;
    s->o = *o;
    snprintf(s->name, sizeof s->name, "%s", name ? name : ops->kind);
    if (s->o.nparts == 0) s->o.nparts = 1;
    if (s->o.loops == 0) s->o.loops = 1;
    if (s->o.part >= s->o.nparts) {
        if (errbuf)
            snprintf(errbuf, 256, "part %u is not below nparts %u", s->o.part, s->o.nparts);
        return -EINVAL;
    }
    if (s->o.mtu == 0) {
        if (errbuf) snprintf(errbuf, 256, "the mtu must be positive");
        return -EINVAL;
    }
    if (!(s->o.rate_pps >= 0) || isinf(s->o.rate_pps)) {
        if (errbuf) snprintf(errbuf, 256, "bad rate %g packets/s", s->o.rate_pps);
        return -EINVAL;
    }
    /* About a millisecond of traffic may go out at once after a pause. */
    s->burst = fmax(1.0, s->o.rate_pps * 1e-3);
    s->tokens = 1.0;
    return 0;
}

int ofl_src_next(struct ofl_src *s, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    if (s->done) return OFL_SRC_DONE;
    if (n == 0) return 0;
    int timed = s->o.duration_ns > 0 || s->o.rate_pps > 0;
    uint64_t now = timed ? ofl_src_clock_ns() : 0;
    s->now_ns = now;
    if (!s->started) {
        s->started = 1;
        s->t_start_ns = s->t_last_ns = now;
    }
    if (s->o.duration_ns > 0 && now - s->t_start_ns >= s->o.duration_ns) {
        s->done = 1;
        return OFL_SRC_DONE;
    }
    if (s->o.rate_pps > 0) {
        s->tokens += (double)(now - s->t_last_ns) * 1e-9 * s->o.rate_pps;
        if (s->tokens > s->burst) s->tokens = s->burst;
        s->t_last_ns = now;
        if (s->tokens < 1.0) return 0;
        if ((double)n > s->tokens) n = (uint32_t)s->tokens;
    }
    int rc = s->ops->next(s, pkts, bufs, n);
    if (rc == OFL_SRC_DONE) {
        s->done = 1;
        return rc;
    }
    if (rc <= 0) return rc;
    if (s->o.rate_pps > 0) s->tokens -= rc;
    s->packets += (uint64_t)rc;
    for (int i = 0; i < rc; i++) {
        s->bytes += pkts[i].len;
        pkts[i].seg = 0;  /* not a UDP segmentation request (the caller's array is not
                             cleared: a sink in the source's segment reads it) */
    }
    return rc;
}

void ofl_src_close(struct ofl_src *s)
{
    if (s) s->ops->close(s);
}

uint64_t ofl_src_packets(const struct ofl_src *s)
{
    return s->packets;
}

uint64_t ofl_src_bytes(const struct ofl_src *s)
{
    return s->bytes;
}

uint64_t ofl_src_dropped(const struct ofl_src *s)
{
    return s->dropped;
}

uint64_t ofl_src_cut(const struct ofl_src *s)
{
    return s->cut;
}

uint64_t ofl_src_missed(const struct ofl_src *s)
{
    return s->missed;
}

const char *ofl_src_kind(const struct ofl_src *s)
{
    return s->ops->kind;
}

const char *ofl_src_error(const struct ofl_src *s)
{
    return s->error[0] ? s->error : NULL;
}
