/* Offload batch size sweep (Knapp, Figure 6): a host process sends batches of B
 * lookups to a "NIC" process, which looks them up in its own LPM table and sends the
 * next hops back, both over offlow's runtime queues in an interconnect window.
 *
 * usage: bench_offload FAMILY PREFIXES NPORTS ADDRS BATCHES LAT_LOOKUPS STREAM_LOOKUPS
 *                      DEPTH REPS CPU_HOST CPU_NIC WINDOW
 *   FAMILY          4 or 6
 *   PREFIXES        prefix file; the NIC builds its table from it (ofl_lpm*_open_file,
 *                   hops by the file rule for NPORTS); after the timing the host builds
 *                   its own copy to check every answer it received
 *   ADDRS           destination addresses: u32 host order (IPv4) or 16 bytes network
 *                   order (IPv6), one after the other
 *   BATCHES         comma-separated batch sizes B (1..65536)
 *   LAT_LOOKUPS     latency runs: about this many lookups per B (at least 50 batches,
 *                   after a tenth as many warm-up batches)
 *   STREAM_LOOKUPS  throughput runs: about this many lookups per B and repetition
 *   DEPTH           throughput runs: batches in flight at most (1..64)
 *   REPS            throughput repetitions per B (1..64)
 *   CPU_HOST, CPU_NIC  CPUs the two processes are pinned to (modulo the CPU count)
 *   WINDOW          path of the window file to create (removed at the end)
 *
 * The window holds a control block and, per B, a request ring (host -> NIC) and a
 * response ring (NIC -> host), each with a doorbell batch of B and room for DEPTH
 * batches. A request entry carries only the region of interest: the destination
 * address (4 or 16 bytes) and the lookup's index; a response entry the index and the
 * hop. Both sides use the queue endpoints generated programs use (ofl_qout_* /
 * ofl_qin_*, inline copy engine), wait by spinning then yielding (ofl_wait) and watch
 * the other process through a liveness pipe.
 *
 * Per B:
 *   latency: one batch in flight; per batch, the time from the host's first
 *     ofl_qout_slot of the batch to the receipt of its last answer (min, median, p99,
 *     mean over the measured batches); sync rate = B / mean latency.
 *   throughput: up to DEPTH batches in flight; lookups per second over the whole
 *     run (median and min-max of REPS), and the per-batch latency in that run.
 * The NIC looks each received chunk up with the batched lookup
 * (ofl_lpm4_lookup_batch / ofl_lpm6_lookup_batch) and answers with one flush.
 * Answers must arrive in order (checked per entry); the first answer to every address
 * is compared with the host's scalar lookup on its own copy of the table, after all
 * timing. Prints one JSON object; exits 1 on an error or any wrong answer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "offlow/copy.h"
#include "offlow/err.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/queue.h"
#include "offlow/ring.h"
#include "offlow/thread.h"
#include "offlow/wait.h"
#include "offlow/window.h"

#define MAX_B 16
#define MAX_BATCH 65536u
#define MAX_DEPTH 64u
#define MAX_REPS 64
#define MIN_LAT_BATCHES 50u
#define NO_HOP 0xFFFFu

/* Request entries: the region of interest of one lookup. */
struct req4 {
    struct ofl_entry_hdr h;
    uint32_t idx;
    uint32_t addr;       /* host order */
};
struct req6 {
    struct ofl_entry_hdr h;
    uint32_t idx;
    uint32_t pad;
    uint8_t addr[16];    /* network order */
};
/* Response entries: the lookup's index and its next hop. */
struct resp {
    struct ofl_entry_hdr h;
    uint32_t idx;
    uint16_t hop;
    uint16_t pad;
};
_Static_assert(sizeof(struct req4) == 16, "req4 layout");
_Static_assert(sizeof(struct req6) == 32, "req6 layout");
_Static_assert(sizeof(struct resp) == 16, "resp layout");

/* Shared control block, right after the window header. */
struct ctl {
    uint32_t ready;      /* set (release) by the NIC when its table is built */
    int32_t err;         /* NIC: first error, 0 if none */
    uint64_t build_ns;   /* NIC: table build (file read included) */
    uint64_t routes;
    uint64_t memory;
    uint64_t lookups;    /* NIC: lookups answered */
    uint64_t chunks;     /* NIC: ofl_qin_next chunks looked up */
    char msg[320];
};

/* Everything both processes know from the command line. */
struct cfg {
    int family;
    const char *prefixes;
    unsigned nports;
    const uint8_t *addrs;
    size_t naddr, addr_size;
    uint32_t batch[MAX_B];
    int nb;
    uint64_t lat_lookups, stream_lookups;
    uint32_t depth;
    int reps;
    int cpu_host, cpu_nic;
    const char *window;
    size_t ring_off[MAX_B][2];   /* request, response ring offsets in the window */
    size_t ring_len[MAX_B][2];
    size_t wsize;
};

/* One B's results on the host. */
struct result {
    uint64_t lat_batches;
    uint64_t lat_min, lat_p50, lat_p99;
    double lat_mean;
    double stream_mlps[MAX_REPS];
    uint64_t stream_p50, stream_p99;
    uint64_t stream_batches;
    uint64_t doorbells, full_waits;
};

/* A table of either family. */
struct table {
    struct ofl_lpm4 *t4;
    struct ofl_lpm6 *t6;
};

/* qsort order of uint64_t values. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The whole file at `path` (its size in *len), or NULL after printing why. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    uint8_t *p = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        p = malloc(n > 0 ? (size_t)n : 1);
        if (p && n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n) {
            free(p);
            p = NULL;
        }
    }
    fclose(f);
    if (!p) fprintf(stderr, "bench_offload: cannot read %s\n", path);
    *len = n > 0 ? (size_t)n : 0;
    return p;
}

/* Parse "32,64,..." into b[]; returns the count or -1. */
static int parse_batches(const char *s, uint32_t *b)
{
    int n = 0;
    while (*s) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v < 1 || v > MAX_BATCH || n == MAX_B) return -1;
        b[n++] = (uint32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return n;
}

/* The smallest power of two >= v (and >= 2). */
static uint32_t pow2_at_least(uint64_t v)
{
    uint32_t p = 2;
    while (p < v) p <<= 1;
    return p;
}

/* Window layout: header, control block, then per B a request and a response ring,
 * each with room for `depth` batches. */
static int layout(struct cfg *c)
{
    size_t off = OFL_WINDOW_HDR_SIZE + (sizeof(struct ctl) + 63) / 64 * 64;
    uint32_t req_es = c->family == 4 ? sizeof(struct req4) : sizeof(struct req6);
    for (int i = 0; i < c->nb; i++) {
        uint32_t size = pow2_at_least((uint64_t)c->depth * c->batch[i]);
        uint32_t es[2] = { req_es, sizeof(struct resp) };
        for (int k = 0; k < 2; k++) {
            size_t len = ofl_ring_mem_size(size, es[k]);
            if (!len) return -EINVAL;
            c->ring_off[i][k] = off;
            c->ring_len[i][k] = len;
            off += len;
        }
    }
    c->wsize = off;
    return 0;
}

/* Format every ring of the layout in the new window. */
static int format_rings(const struct cfg *c, struct ofl_window *w)
{
    uint32_t req_es = c->family == 4 ? sizeof(struct req4) : sizeof(struct req6);
    for (int i = 0; i < c->nb; i++) {
        uint32_t size = pow2_at_least((uint64_t)c->depth * c->batch[i]);
        uint32_t es[2] = { req_es, sizeof(struct resp) };
        for (int k = 0; k < 2; k++) {
            int rc = ofl_ring_format(ofl_window_at(w, c->ring_off[i][k]), c->ring_len[i][k],
                                     size, es[k], c->batch[i], 0);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* The control block of a mapped window. */
static struct ctl *ctl_of(struct ofl_window *w)
{
    return ofl_window_at(w, OFL_WINDOW_HDR_SIZE);
}

/* Set the window's abort word: every wait of both processes ends. */
static void window_abort(struct ofl_window *w)
{
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    __atomic_store_n(&h->abort, 1u, __ATOMIC_RELEASE);
}

/* Build the table of the configured family from the prefix file. */
static int table_open(struct table *t, const struct cfg *c, char *err)
{
    t->t4 = NULL;
    t->t6 = NULL;
    return c->family == 4 ? ofl_lpm4_open_file(&t->t4, c->prefixes, c->nports, err)
                          : ofl_lpm6_open_file(&t->t6, c->prefixes, c->nports, err);
}

/* Free a table of either family. */
static void table_free(struct table *t)
{
    ofl_lpm4_free(t->t4);
    ofl_lpm6_free(t->t6);
}

/* ---- the NIC process ---------------------------------------------------------- */

/* Record the NIC's first error in the control block and stop everyone. */
static int nic_fail(struct ofl_window *w, int err, const char *what)
{
    struct ctl *ctl = ctl_of(w);
    if (!ctl->err) {
        snprintf(ctl->msg, sizeof ctl->msg, "NIC: %s: %s", what, ofl_strerror(err));
        __atomic_store_n(&ctl->err, err ? err : -EIO, __ATOMIC_RELEASE);
    }
    window_abort(w);
    return 1;
}

/* Serve the rings of batch size number i until the host closes the request ring:
 * every chunk of requests is looked up with the batched lookup and answered with one
 * flush. Returns 0, or 1 after recording the error. */
static int nic_serve(const struct cfg *c, struct ofl_window *w, int i, const struct table *t,
                     struct ofl_ce *ce, struct ofl_waiter *wt, uint8_t *keys, uint16_t *hops)
{
    struct ctl *ctl = ctl_of(w);
    struct ofl_qin in;
    struct ofl_qout out;
    int rc = ofl_qin_init(&in, ofl_window_at(w, c->ring_off[i][0]), c->ring_len[i][0], ce, wt);
    if (rc < 0) return nic_fail(w, rc, "cannot attach the request ring");
    rc = ofl_qout_init(&out, ofl_window_at(w, c->ring_off[i][1]), c->ring_len[i][1], ce, wt);
    if (rc < 0) {
        ofl_qin_destroy(&in);
        return nic_fail(w, rc, "cannot attach the response ring");
    }
    int failed = 0;
    while (!failed) {
        const uint8_t *es;
        int n = ofl_qin_next(&in, &es);
        if (n == OFL_Q_DONE) break;
        if (n < 0) {
            failed = nic_fail(w, n, "dequeue requests");
            break;
        }
        if (n == 0) {
            rc = ofl_wait(wt);
            if (rc < 0) failed = nic_fail(w, rc, "wait for requests");
            continue;
        }
        ofl_waiter_progress(wt);
        if (c->family == 4) {
            const struct req4 *r = (const struct req4 *)(const void *)es;
            uint32_t *a = (uint32_t *)(void *)keys;
            for (int k = 0; k < n; k++) a[k] = r[k].addr;
            ofl_lpm4_lookup_batch(t->t4, a, hops, (unsigned)n);
        } else {
            const struct req6 *r = (const struct req6 *)(const void *)es;
            for (int k = 0; k < n; k++) memcpy(keys + 16 * (size_t)k, r[k].addr, 16);
            ofl_lpm6_lookup_batch(t->t6, keys, hops, (unsigned)n);
        }
        for (int k = 0; k < n; k++) {
            struct resp *o = ofl_qout_slot(&out);
            if (!o) {
                failed = nic_fail(w, out.err, "enqueue answers");
                break;
            }
            const struct ofl_entry_hdr *h =
                (const struct ofl_entry_hdr *)(const void *)(es + (size_t)k * in.entry_size);
            uint32_t idx;
            memcpy(&idx, (const uint8_t *)h + sizeof *h, 4);
            o->h.len = 0;
            o->idx = idx;
            o->hop = hops[k];
            o->pad = 0;
        }
        if (!failed && (rc = ofl_qout_flush(&out)) < 0) failed = nic_fail(w, rc, "send answers");
        ctl->lookups += (uint64_t)n;
        ctl->chunks++;
    }
    if (!failed && (rc = ofl_qout_close(&out)) < 0) failed = nic_fail(w, rc, "close answers");
    ofl_qout_destroy(&out);
    ofl_qin_destroy(&in);
    return failed;
}

/* The NIC process: open the window, build the table in its own memory, say ready,
 * serve every batch size in turn. Returns the exit status. */
static int nic_main(const struct cfg *c, int host_fd)
{
    ofl_pin_self(c->cpu_nic);
    struct ofl_window w;
    int rc = ofl_window_open(&w, c->window);
    if (rc < 0) {
        fprintf(stderr, "bench_offload: NIC: cannot open the window: %s\n", ofl_strerror(rc));
        return 1;
    }
    struct ctl *ctl = ctl_of(&w);
    struct ofl_waiter wt;
    ofl_waiter_init(&wt, &host_fd, 1, &((struct ofl_window_hdr *)(void *)w.base)->abort);
    char err[256] = "";
    uint64_t t0 = ofl_now_ns();
    struct table t;
    rc = table_open(&t, c, err);
    if (rc < 0) {
        snprintf(ctl->msg, sizeof ctl->msg, "NIC: cannot build the table: %s", err);
        __atomic_store_n(&ctl->err, rc, __ATOMIC_RELEASE);
        window_abort(&w);
        ofl_window_close(&w);
        return 1;
    }
    ctl->build_ns = ofl_now_ns() - t0;
    ctl->routes = t.t4 ? t.t4->routes : t.t6->routes;
    ctl->memory = t.t4 ? ofl_lpm4_memory(t.t4) : ofl_lpm6_memory(t.t6);
    uint32_t maxb = 1;
    for (int i = 0; i < c->nb; i++) maxb = c->batch[i] > maxb ? c->batch[i] : maxb;
    uint8_t *keys = malloc((size_t)maxb * 16);
    uint16_t *hops = malloc((size_t)maxb * sizeof *hops);
    struct ofl_ce ce;
    memset(&ce, 0, sizeof ce);
    int failed = 0;
    if (!keys || !hops) failed = nic_fail(&w, -ENOMEM, "buffers");
    else if ((rc = ofl_ce_start(&ce, OFL_CE_INLINE, -1)) < 0)
        failed = nic_fail(&w, rc, "copy engine");
    if (!failed) __atomic_store_n(&ctl->ready, 1u, __ATOMIC_RELEASE);
    for (int i = 0; i < c->nb && !failed; i++)
        failed = nic_serve(c, &w, i, &t, &ce, &wt, keys, hops);
    ofl_ce_stop(&ce);
    free(keys);
    free(hops);
    table_free(&t);
    ofl_window_close(&w);
    return failed;
}

/* ---- the host process --------------------------------------------------------- */

/* The host's side of one batch size. */
struct host {
    const struct cfg *c;
    struct ofl_qout out;
    struct ofl_qin in;
    struct ofl_waiter *w;
    uint32_t B;
    uint64_t seq;        /* next lookup to send */
    uint64_t next;       /* next answer expected */
    uint64_t out_of_order;
    uint16_t *got;       /* first answer per address (NO_HOP: none yet) */
    const char *what;    /* what failed */
};

/* Stage and send lookups seq .. seq + B - 1 (the addresses cycle). */
static int host_send(struct host *h)
{
    const struct cfg *c = h->c;
    for (uint32_t k = 0; k < h->B; k++, h->seq++) {
        size_t a = (size_t)(h->seq % c->naddr);
        if (c->family == 4) {
            struct req4 *e = ofl_qout_slot(&h->out);
            if (!e) return h->out.err;
            e->h.len = 0;
            e->idx = (uint32_t)h->seq;
            memcpy(&e->addr, c->addrs + 4 * a, 4);
        } else {
            struct req6 *e = ofl_qout_slot(&h->out);
            if (!e) return h->out.err;
            e->h.len = 0;
            e->idx = (uint32_t)h->seq;
            e->pad = 0;
            memcpy(e->addr, c->addrs + 16 * a, 16);
        }
    }
    return ofl_qout_flush(&h->out);
}

/* Take the answers there are now: their count (0: none), or a negative error.
 * Checks that they come in order; keeps the first answer to every address. */
static int host_recv(struct host *h)
{
    const uint8_t *es;
    int n = ofl_qin_next(&h->in, &es);
    if (n == OFL_Q_DONE) return -EPIPE;   /* the NIC closed its answers early */
    if (n <= 0) return n;
    const struct resp *r = (const struct resp *)(const void *)es;
    for (int k = 0; k < n; k++, h->next++) {
        if (r[k].idx != (uint32_t)h->next) h->out_of_order++;
        else if (h->next < h->c->naddr && h->got[h->next] == NO_HOP) h->got[h->next] = r[k].hop;
    }
    return n;
}

/* Wait until every lookup sent has its answer. */
static int host_drain(struct host *h)
{
    while (h->next < h->seq) {
        int n = host_recv(h);
        if (n < 0) return n;
        if (n == 0) {
            int rc = ofl_wait(h->w);
            if (rc < 0) return rc;
        } else {
            ofl_waiter_progress(h->w);
        }
    }
    return 0;
}

/* One batch in flight: per batch, send to last answer. */
static int host_latency(struct host *h, uint64_t *lat, uint64_t warm, uint64_t n)
{
    for (uint64_t it = 0; it < warm + n; it++) {
        uint64_t t0 = ofl_now_ns();
        int rc = host_send(h);
        if (rc == 0) rc = host_drain(h);
        if (rc < 0) {
            h->what = "latency run";
            return rc;
        }
        if (it >= warm) lat[it - warm] = ofl_now_ns() - t0;
    }
    return 0;
}

/* Up to `depth` batches in flight: lookups per second over `n` batches, and each
 * batch's send-to-last-answer time in lat[]. */
static int host_stream(struct host *h, uint64_t n, uint32_t depth, uint64_t *lat, double *mlps)
{
    uint64_t t_send[MAX_DEPTH];
    uint64_t sent = 0, done = 0, base = h->seq;
    uint64_t start = ofl_now_ns();
    while (done < n) {
        int progress = 0;
        while (sent < n && sent - done < depth) {
            t_send[sent % depth] = ofl_now_ns();
            int rc = host_send(h);
            if (rc < 0) {
                h->what = "throughput run: send";
                return rc;
            }
            sent++;
            progress = 1;
        }
        int k = host_recv(h);
        if (k < 0) {
            h->what = "throughput run: receive";
            return k;
        }
        if (k > 0) {
            progress = 1;
            uint64_t now = ofl_now_ns();
            while (done < sent && h->next >= base + (done + 1) * h->B) {
                lat[done] = now - t_send[done % depth];
                done++;
            }
        }
        if (progress) {
            ofl_waiter_progress(h->w);
        } else {
            int rc = ofl_wait(h->w);
            if (rc < 0) {
                h->what = "throughput run: wait";
                return rc;
            }
        }
    }
    *mlps = (double)(n * h->B) / (double)(ofl_now_ns() - start) * 1e3;
    return 0;
}

/* Everything for batch size number i; results in *res. */
static int host_run(const struct cfg *c, struct ofl_window *win, int i, struct ofl_ce *ce,
                    struct ofl_waiter *w, uint16_t *got, uint64_t *buf, size_t bufn,
                    struct result *res, const char **what, uint64_t *answered)
{
    struct host h = { .c = c, .w = w, .B = c->batch[i], .got = got, .what = "setup" };
    int rc = ofl_qout_init(&h.out, ofl_window_at(win, c->ring_off[i][0]), c->ring_len[i][0],
                           ce, w);
    if (rc < 0) {
        *what = "cannot attach the request ring";
        return rc;
    }
    rc = ofl_qin_init(&h.in, ofl_window_at(win, c->ring_off[i][1]), c->ring_len[i][1], ce, w);
    if (rc < 0) {
        ofl_qout_destroy(&h.out);
        *what = "cannot attach the response ring";
        return rc;
    }
    memset(res, 0, sizeof *res);
    uint64_t nlat = c->lat_lookups / h.B;
    if (nlat < MIN_LAT_BATCHES) nlat = MIN_LAT_BATCHES;
    if (nlat > bufn) nlat = bufn;
    rc = host_latency(&h, buf, nlat / 10 + 2, nlat);
    if (rc == 0) {
        qsort(buf, (size_t)nlat, sizeof buf[0], cmp_u64);
        double sum = 0;
        for (uint64_t k = 0; k < nlat; k++) sum += (double)buf[k];
        res->lat_batches = nlat;
        res->lat_min = buf[0];
        res->lat_p50 = buf[nlat / 2];
        res->lat_p99 = buf[nlat * 99 / 100];
        res->lat_mean = sum / (double)nlat;
    }
    uint64_t ns = c->stream_lookups / h.B;
    if (ns < 4ull * c->depth) ns = 4ull * c->depth;
    if (ns * (uint64_t)c->reps > bufn) ns = bufn / (uint64_t)c->reps;
    for (int r = 0; r < c->reps && rc == 0; r++)
        rc = host_stream(&h, ns, c->depth, buf + (size_t)r * ns, &res->stream_mlps[r]);
    if (rc == 0) {
        uint64_t all = ns * (uint64_t)c->reps;
        qsort(buf, (size_t)all, sizeof buf[0], cmp_u64);
        res->stream_batches = ns;
        res->stream_p50 = buf[all / 2];
        res->stream_p99 = buf[all * 99 / 100];
    }
    if (rc == 0) {
        /* The NIC closes its answers once the requests are closed and answered. */
        rc = ofl_qout_close(&h.out);
        uint64_t gone_at = 0;
        while (rc == 0) {
            const uint8_t *es;
            int n = ofl_qin_next(&h.in, &es);
            if (n == OFL_Q_DONE) break;
            if (n > 0) rc = -EPROTO;   /* answers nobody asked for */
            else if (n < 0) rc = n;
            else if (gone_at) {
                /* it exited without closing them (a copy engine's last job is ms) */
                if (ofl_now_ns() - gone_at > 100000000u) rc = -EPIPE;
                else sched_yield();
            } else if ((rc = ofl_wait(w)) == -EPIPE) {
                /* The NIC closes its answers, then exits: both may have come since the
                 * look above, so keep looking a while before calling it gone. */
                gone_at = ofl_now_ns();
                rc = 0;
            }
        }
        if (rc < 0) h.what = "closing the rings";
    }
    res->doorbells = h.out.ring.batches;
    res->full_waits = h.out.ring.full_waits;
    if (rc == 0 && h.out_of_order) {
        rc = -EBADMSG;
        h.what = "answers out of order";
    }
    *what = h.what;
    *answered = h.next;
    ofl_qout_destroy(&h.out);
    ofl_qin_destroy(&h.in);
    return rc;
}

/* Compare the recorded answers with the scalar lookup on the host's own copy of the
 * table; returns the mismatches (addresses without an answer count too). */
static uint64_t check_answers(const struct cfg *c, const struct table *t, const uint16_t *got,
                              uint64_t answered, uint64_t *checked)
{
    uint64_t bad = 0, n = answered < c->naddr ? answered : c->naddr;
    for (uint64_t a = 0; a < n; a++) {
        uint16_t want = t->t4 ? ofl_lpm4_lookup(t->t4, ((const uint32_t *)(const void *)c->addrs)[a])
                              : ofl_lpm6_lookup(t->t6, c->addrs + 16 * a);
        if (got[a] != want) bad++;
    }
    *checked = n;
    return bad;
}

/* The result as one JSON object on stdout. */
static void print_json(const struct cfg *c, const struct ctl *ctl, const struct result *res,
                       const uint64_t *checked, const uint64_t *bad, int oversub, double check_s)
{
    printf("{\"family\": %d, \"routes\": %llu, \"table_memory\": %llu, \"nic_build_s\": %.6g, "
           "\"addresses\": %zu, \"cpus\": %d, \"cpu_host\": %d, \"cpu_nic\": %d, "
           "\"oversubscribed\": %s, \"request_entry_bytes\": %zu, \"response_entry_bytes\": %zu, "
           "\"roi_bytes\": %d, \"depth\": %u, \"reps\": %d, \"nic_lookups\": %llu, "
           "\"nic_chunks\": %llu, \"check_s\": %.6g, \"batches\": [",
           c->family, (unsigned long long)ctl->routes, (unsigned long long)ctl->memory,
           (double)ctl->build_ns * 1e-9, c->naddr, ofl_ncpus(), c->cpu_host % ofl_ncpus(),
           c->cpu_nic % ofl_ncpus(), oversub ? "true" : "false",
           c->family == 4 ? sizeof(struct req4) : sizeof(struct req6), sizeof(struct resp),
           c->family == 4 ? 4 : 16, c->depth, c->reps, (unsigned long long)ctl->lookups,
           (unsigned long long)ctl->chunks, check_s);
    for (int i = 0; i < c->nb; i++) {
        const struct result *r = &res[i];
        printf("%s{\"batch\": %u, \"latency_batches\": %llu, \"latency_ns\": {\"min\": %llu, "
               "\"p50\": %llu, \"p99\": %llu, \"mean\": %.1f}, \"sync_mlps\": %.6g, "
               "\"stream_batches\": %llu, \"stream_mlps\": [", i ? ", " : "", c->batch[i],
               (unsigned long long)r->lat_batches, (unsigned long long)r->lat_min,
               (unsigned long long)r->lat_p50, (unsigned long long)r->lat_p99, r->lat_mean,
               r->lat_mean > 0 ? (double)c->batch[i] / r->lat_mean * 1e3 : 0.0,
               (unsigned long long)r->stream_batches);
        for (int k = 0; k < c->reps; k++) printf("%s%.6g", k ? ", " : "", r->stream_mlps[k]);
        printf("], \"stream_latency_ns\": {\"p50\": %llu, \"p99\": %llu}, \"doorbells\": %llu, "
               "\"full_waits\": %llu, \"checked\": %llu, \"mismatches\": %llu}",
               (unsigned long long)r->stream_p50, (unsigned long long)r->stream_p99,
               (unsigned long long)r->doorbells, (unsigned long long)r->full_waits,
               (unsigned long long)checked[i], (unsigned long long)bad[i]);
    }
    printf("]}\n");
}

/* Parse the command line into *c (addresses read); returns 0 or prints why not. */
static int parse(struct cfg *c, int argc, char **argv, uint8_t **addrs)
{
    if (argc != 13) {
        fprintf(stderr, "usage: bench_offload FAMILY PREFIXES NPORTS ADDRS BATCHES LAT_LOOKUPS "
                        "STREAM_LOOKUPS DEPTH REPS CPU_HOST CPU_NIC WINDOW\n");
        return -1;
    }
    memset(c, 0, sizeof *c);
    c->family = atoi(argv[1]);
    c->prefixes = argv[2];
    c->nports = (unsigned)strtoul(argv[3], NULL, 10);
    c->nb = parse_batches(argv[5], c->batch);
    c->lat_lookups = strtoull(argv[6], NULL, 10);
    c->stream_lookups = strtoull(argv[7], NULL, 10);
    c->depth = (uint32_t)strtoul(argv[8], NULL, 10);
    c->reps = atoi(argv[9]);
    c->cpu_host = atoi(argv[10]);
    c->cpu_nic = atoi(argv[11]);
    c->window = argv[12];
    if ((c->family != 4 && c->family != 6) || c->nb < 1 || c->depth < 1 ||
        c->depth > MAX_DEPTH || c->reps < 1 || c->reps > MAX_REPS || c->cpu_host < 0 ||
        c->cpu_nic < 0) {
        fprintf(stderr, "bench_offload: bad arguments\n");
        return -1;
    }
    size_t len;
    *addrs = slurp(argv[4], &len);
    if (!*addrs) return -1;
    c->addr_size = c->family == 4 ? 4 : 16;
    c->naddr = len / c->addr_size;
    if (c->naddr == 0 || len % c->addr_size) {
        fprintf(stderr, "bench_offload: %s: expected a non-empty list of %zu-byte addresses\n",
                argv[4], c->addr_size);
        return -1;
    }
    c->addrs = *addrs;
    if (layout(c) < 0) {
        fprintf(stderr, "bench_offload: batch sizes too large for a ring\n");
        return -1;
    }
    return 0;
}

/* Wait until the NIC says its table is built (or failed, or died). */
static int wait_ready(struct ofl_window *w, struct ofl_waiter *wt)
{
    struct ctl *ctl = ctl_of(w);
    while (!__atomic_load_n(&ctl->ready, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&ctl->err, __ATOMIC_ACQUIRE)) return -ECANCELED;
        int rc = ofl_wait(wt);
        if (rc < 0) return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cfg c;
    uint8_t *addrs = NULL;
    if (parse(&c, argc, argv, &addrs) < 0) return 2;
    struct ofl_window win;
    int rc = ofl_window_create(&win, c.window, c.wsize);
    if (rc < 0) {
        fprintf(stderr, "bench_offload: cannot create the window %s: %s\n", c.window,
                ofl_strerror(rc));
        return 1;
    }
    if ((rc = format_rings(&c, &win)) < 0) {
        fprintf(stderr, "bench_offload: cannot format the rings: %s\n", ofl_strerror(rc));
        unlink(c.window);
        return 1;
    }
    int p_host[2], p_nic[2];
    if (pipe(p_host) < 0 || pipe(p_nic) < 0) {
        perror("bench_offload: pipe");
        unlink(c.window);
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench_offload: fork");
        unlink(c.window);
        return 1;
    }
    if (pid == 0) {
        /* The NIC: a process of its own, with its own mapping of the window. */
        close(p_host[1]);
        close(p_nic[0]);
        ofl_window_close(&win);
        _exit(nic_main(&c, p_host[0]));
    }
    close(p_host[0]);
    close(p_nic[1]);
    ofl_pin_self(c.cpu_host);
    int oversub = c.cpu_host % ofl_ncpus() == c.cpu_nic % ofl_ncpus();
    struct ofl_waiter wt;
    ofl_waiter_init(&wt, &p_nic[0], 1, &((struct ofl_window_hdr *)(void *)win.base)->abort);
    struct ofl_ce ce;
    memset(&ce, 0, sizeof ce);
    struct result res[MAX_B];
    uint64_t checked[MAX_B] = { 0 }, bad[MAX_B] = { 0 }, answered[MAX_B] = { 0 };
    memset(res, 0, sizeof res);
    const size_t bufn = 1u << 20;
    uint64_t *buf = malloc(bufn * sizeof *buf);
    uint16_t *got = malloc((size_t)c.nb * c.naddr * sizeof *got);
    const char *what = "setup";
    rc = (!buf || !got) ? -ENOMEM : ofl_ce_start(&ce, OFL_CE_INLINE, -1);
    if (rc == 0) {
        memset(got, 0xFF, (size_t)c.nb * c.naddr * sizeof *got);
        what = "waiting for the NIC's table";
        rc = wait_ready(&win, &wt);
    }
    for (int i = 0; i < c.nb && rc == 0; i++) {
        rc = host_run(&c, &win, i, &ce, &wt, got + (size_t)i * c.naddr, buf, bufn, &res[i],
                      &what, &answered[i]);
    }
    if (rc < 0) window_abort(&win);
    ofl_ce_stop(&ce);
    int status = 0;
    waitpid(pid, &status, 0);
    close(p_host[1]);
    close(p_nic[0]);
    struct ctl ctl = *ctl_of(&win);
    ofl_window_close(&win);
    unlink(c.window);
    int failed = 0;
    if (ctl.err) {
        fprintf(stderr, "bench_offload: %s\n", ctl.msg);
        failed = 1;
    } else if (rc < 0) {
        fprintf(stderr, "bench_offload: host: %s: %s\n", what, ofl_strerror(rc));
        failed = 1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_offload: the NIC process %s %d\n",
                WIFSIGNALED(status) ? "died of signal" : "exited with status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        failed = 1;
    }
    if (!failed) {
        /* After all timing: the host's own copy of the table checks the answers. */
        char err[256] = "";
        struct table t;
        uint64_t t0 = ofl_now_ns();
        rc = table_open(&t, &c, err);
        if (rc < 0) {
            fprintf(stderr, "bench_offload: host: cannot build the table: %s\n", err);
            failed = 1;
        } else {
            uint64_t total = 0;
            for (int i = 0; i < c.nb; i++) {
                bad[i] = check_answers(&c, &t, got + (size_t)i * c.naddr, answered[i],
                                       &checked[i]);
                total += bad[i];
            }
            table_free(&t);
            print_json(&c, &ctl, res, checked, bad, oversub, (double)(ofl_now_ns() - t0) * 1e-9);
            if (total) {
                fprintf(stderr, "bench_offload: %llu wrong answers\n", (unsigned long long)total);
                failed = 1;
            }
        }
    }
    free(buf);
    free(got);
    free(addrs);
    return failed;
}
