/* The host side of an XDP program's crossing (xdp_cross.h). */
#include "xdp_cross.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Frames taken from the socket per call. */
#define OFL_XDP_TAKE 64u

int ofl_xdp_cross_open(struct ofl_xdp_cross *x, const struct ofl_xdp_desc *d,
                       const struct ofl_args *a)
{
    memset(x, 0, sizeof *x);
    x->d = d;
    x->a = a;
    x->win.fd = -1;
    size_t *ring_off = calloc(d->nrings + 1, sizeof *ring_off);
    if (!ring_off) return ofl_start_failf(a, "segment %s: out of memory", d->segment), -ENOMEM;
    size_t chan_off;
    int rc = ofl_proc_open(&x->win, a, d->layout(ring_off, &chan_off));
    if (rc == 0)
        rc = ofl_core_init(d->core, a, &x->win, d->segment, 0, 1, 0, d->mtu);
    for (const struct ofl_xdp_queue *q = d->queues; rc == 0 && q->name; q++) {
        *q->out = calloc(q->instances, sizeof **q->out);
        if (!*q->out) {
            ofl_start_failf(a, "segment %s: out of memory", d->segment);
            rc = -ENOMEM;
            break;
        }
        for (unsigned i = 0; rc == 0 && i < q->instances; i++) {
            const struct ofl_ring_spec *r = &d->rings[q->first_ring + i];
            rc = ofl_qout_init(&(*q->out)[i], ofl_window_at(&x->win, ring_off[q->first_ring + i]),
                               ofl_ring_mem_size(r->size, r->entry_size), d->core->ce,
                               &d->core->waiter);
            if (rc < 0)
                ofl_start_failf(a, "cannot attach ring %s instance %u: %s", q->name, i,
                                ofl_strerror(rc));
            (*q->out)[i].drop_full = q->drop_full;
        }
    }
    free(ring_off);
    return rc;
}

volatile uint32_t *ofl_xdp_cross_abort(struct ofl_xdp_cross *x)
{
    return &((struct ofl_window_hdr *)x->win.base)->abort;
}

int ofl_xdp_cross_socket(struct ofl_xdp_cross *x, const char *ifname, uint32_t ring,
                         int map_fd)
{
    char err[256];
    int rc = ofl_xsk_open(&x->xsk, ifname, 0, x->d->xsk_frame, ring, map_fd, err, sizeof err);
    if (rc < 0) ofl_start_failf(x->a, "%s", err);
    return rc;
}

/* One frame from the socket into its queue (ofl_xsk_fn). */
static void take_one(void *arg, uint8_t *data, uint32_t len, uint32_t room)
{
    struct ofl_xdp_cross *x = arg;
    struct ofl_pkt p = { .data = data, .len = len, .cap = len, .ts_ns = x->ts_ns };
    x->taken++;
    if (x->d->up(&p, data, room) < 0) x->bad_meta++;
    (*x->d->steer)++;  /* (round robin over a queue's instances: per packet) */
}

/* Ring every queue's doorbells; the core's error, or 0. */
static int flush(struct ofl_xdp_cross *x)
{
    for (const struct ofl_xdp_queue *q = x->d->queues; q->name; q++)
        for (unsigned i = 0; i < q->instances; i++) {
            int rc = ofl_qout_flush(&(*q->out)[i]);
            if (rc < 0) ofl_core_fail(x->d->core, rc, "doorbell on a queue from xdp");
        }
    return x->d->core->err;
}

static uint64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int ofl_xdp_cross_poll(struct ofl_xdp_cross *x)
{
    x->ts_ns = realtime_ns();  /* (frames from an interface: their time of arrival here) */
    unsigned n = 0, got;
    while ((got = ofl_xsk_take(&x->xsk, OFL_XDP_TAKE, take_one, x)) > 0) n += got;
    int rc = n ? flush(x) : x->d->core->err;
    return rc < 0 ? rc : (int)n;
}

int ofl_xdp_cross_drain(struct ofl_xdp_cross *x, uint64_t up, uint64_t wait_ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (x->taken + ofl_xsk_dropped(&x->xsk) < up) {
        if (ofl_xsk_take(&x->xsk, OFL_XDP_TAKE, take_one, x)) continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t spent = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull +
                         (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec;
        if (spent > wait_ns) return -ETIMEDOUT;
        ofl_xsk_wait(&x->xsk, 1);
    }
    return flush(x);
}

int ofl_xdp_cross_end(struct ofl_xdp_cross *x, int failed)
{
    int rc = 0;
    if (!x->d || !x->win.base) return 0;
    if (failed) {
        ofl_window_abort(&x->win);
        return 0;
    }
    for (const struct ofl_xdp_queue *q = x->d->queues; q->name; q++)
        for (unsigned i = 0; i < q->instances && *q->out; i++) {
            int e = ofl_qout_close(&(*q->out)[i]);
            if (e < 0 && !rc) rc = e;
        }
    return rc;
}

void ofl_xdp_cross_report(struct ofl_xdp_cross *x, struct ofl_json *j, const uint64_t *xdp_why)
{
    const struct ofl_xdp_desc *d = x->d;
    ofl_json_begin_arr(j, "queues");
    for (const struct ofl_xdp_queue *q = d->queues; q->name && *q->out; q++)
        for (unsigned i = 0; i < q->instances; i++)
            ofl_stats_qout(j, q->name, 0, i % q->consumers, &(*q->out)[i]);
    ofl_json_end_arr(j);
    ofl_json_begin_arr(j, "instances");
    uint64_t afxdp = ofl_xsk_dropped(&x->xsk);
    for (unsigned k = 0; d->queues[k].name && *d->queues[k].out; k++) {
        const struct ofl_xdp_queue *q = &d->queues[k];
        for (unsigned i = 0; i < q->instances; i++) {
            const struct ofl_qout *o = &(*q->out)[i];
            int first = k == 0 && i == 0;
            uint64_t dropped = o->dropped + (first ? afxdp + x->bad_meta : 0);
            ofl_json_begin_obj(j, NULL);
            ofl_json_str(j, "queue", q->name);
            ofl_json_u64(j, "prod", 0);
            ofl_json_u64(j, "instance", i);
            ofl_json_u64(j, "cons", i % q->consumers);
            ofl_json_u64(j, "pushed", o->ring.pushed);
            ofl_json_begin_obj(j, "why");
            if (o->dropped) ofl_json_u64(j, "ring_full", o->dropped);
            if (first && afxdp) ofl_json_u64(j, "afxdp_full", afxdp);
            if (first && x->bad_meta) ofl_json_u64(j, "bad_meta", x->bad_meta);
            /* the XDP side's drops of the queue's crossings, on its instance 0 */
            for (unsigned w = 0; i == 0 && w < d->ncross_why; w++) {
                uint64_t n = 0;
                for (unsigned c = 0; c < d->ncross; c++)
                    if (d->cross_queue[c] == k) n += xdp_why[c * d->ncross_why + w];
                if (n) ofl_json_u64(j, d->cross_why[w], n);
                dropped += n;
            }
            ofl_json_end_obj(j);
            ofl_json_u64(j, "dropped", dropped);
            ofl_json_end_obj(j);
        }
    }
    ofl_json_end_arr(j);
}

void ofl_xdp_cross_close(struct ofl_xdp_cross *x)
{
    if (!x->d) return;
    ofl_xsk_close(&x->xsk);
    for (const struct ofl_xdp_queue *q = x->d->queues; q->name; q++) {
        for (unsigned i = 0; i < q->instances && *q->out; i++) ofl_qout_destroy(&(*q->out)[i]);
        free(*q->out);
        *q->out = NULL;
    }
    ofl_core_destroy(x->d->core);   /* (its error's text too; nothing if never made) */
    if (x->win.base) ofl_window_close(&x->win);
}
