/* Queue throughput and one-way latency: the offlow queue (qout -> ring -> qin, inline
 * copy engine, fixed-size entries: data_off 0, copied whole; the producer fills
 * entries through batch reservations, ofl_qout_reserve) against a minimal
 * hand-written SPSC ring (the ceiling), in the same run, same entry size, same ring
 * size, producer pinned to CPU 0 and consumer to CPU 1 (modulo the CPU count).
 *
 * Throughput: ENTRIES entries streamed as fast as they go, median of REPS runs.
 * Latency (unloaded, no queueing): LAT_ITERS times, the producer reads
 * CLOCK_MONOTONIC into the first entry of a batch (flag OFL_BENCH_TS), sends that one
 * batch and waits until the consumer has released it; the consumer records now - ts
 * when it dequeues that first entry. p50 and p99 over the iterations (after a
 * warm-up).
 * Single thread: the CPU work per entry of each ring, producer and consumer taking
 * turns on one thread (single_thread()), also with one ofl_qout_next per entry (what
 * generated code calls).
 *
 * Usage: bench_queue ENTRIES REPS BATCHES SIZES [LAT_ITERS]
 *        e.g. 2000000 5 1,4,16,32,64,256 16,64,256 10000
 * Prints one JSON line per (batch, entry size). Both consumers check that every entry
 * arrives once and in order; a wrong count exits with status 1. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "offlow/copy.h"
#include "offlow/err.h"
#include "offlow/queue.h"
#include "offlow/thread.h"
#include "offlow/wait.h"

#define RING_SIZE 1024u
#define MAX_LIST 16
#define MAX_REPS 64
#define MAX_LAT_ITERS 10000000ull
/* Single-thread runs per configuration (the least counts), and the entries of each
 * (at most): many short runs (well under a millisecond each), so that on a loaded
 * machine some run from start to end without another process between (a switch
 * leaves cold caches behind, which CPU time does count). */
#define ST_RUNS 31
#define ST_ENTRIES 50000ull
/* A pair of transfers counts when each thread of both ran on its own CPU for at least
 * this share of each transfer's wall time (its thread CPU time / wall time); pairs
 * run until `reps` such pairs, or PAIR_TRIES x reps pairs in all. */
#define MIN_SHARE 0.9
#define PAIR_TRIES 3
/* Entry flag: the entry carries the send timestamp at +8 (latency runs). */
#define OFL_BENCH_TS 1u

/* ---- the ceiling: a minimal SPSC ring, entries used in place ---- */

struct ceil_ring {
    _Alignas(64) uint32_t tail;
    _Alignas(64) uint32_t head;
    _Alignas(64) uint8_t entries[];
};

/* ---- one measured transfer ---- */

struct run {
    int offlow;              /* 1: offlow queue, 0: ceiling ring */
    void *mem;
    size_t len;
    uint32_t batch, es;
    uint64_t n;              /* entries to move (latency: iters * batch) */
    uint64_t iters;          /* latency run: batches sent one at a time; 0 = throughput */
    uint64_t *lat;           /* latency run: one sample (ns) per batch, iters of them */
    uint64_t nlat;           /* consumer: samples recorded */
    volatile uint32_t *go;
    uint64_t received, bad;  /* consumer */
    uint64_t t_end;          /* consumer: when the last entry arrived */
    uint64_t cpu_ns;         /* this side's thread CPU time over the transfer */
    int cpu;                 /* the CPU this side ended on */
    uint64_t doorbells, full_waits;
    int err;
};

/* CPU time of this thread, ns (time the scheduler gave others is not counted). */
static uint64_t thread_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A side's transfer is over: its CPU time since `cpu0` and the CPU it is on. */
static void side_done(struct run *r, uint64_t cpu0)
{
    r->cpu_ns = thread_ns() - cpu0;
    r->cpu = sched_getcpu();
}

/* Fill entry e (es bytes) for counter i: header, counter at +8 and in the last word. */
static inline void fill(uint8_t *e, uint32_t es, uint64_t i)
{
    ((struct ofl_entry_hdr *)e)->len = (uint16_t)es;
    ((struct ofl_entry_hdr *)e)->flags = 0;
    if (es > 24) memset(e + 16, (int)(i & 0xff), es - 24);
    memcpy(e + 8, &i, 8);
    memcpy(e + es - 8, &i, 8);
}

/* Turn a filled entry into the batch's timestamped first entry. */
static inline void stamp(uint8_t *e, uint64_t ts)
{
    ((struct ofl_entry_hdr *)e)->flags = OFL_BENCH_TS;
    memcpy(e + 8, &ts, 8);
}

/* Check entry e carries counter `want`; a timestamped entry only counts. */
static inline int good(const uint8_t *e, uint32_t es, uint64_t want)
{
    if (((const struct ofl_entry_hdr *)e)->flags & OFL_BENCH_TS) return 1;
    uint64_t a, b;
    memcpy(&a, e + 8, 8);
    memcpy(&b, e + es - 8, 8);
    return a == want && b == want;
}

/* Consumer: record the latency of a timestamped entry dequeued at `now`. */
static inline void record(struct run *r, const uint8_t *e, uint64_t now)
{
    if (!r->lat || !(((const struct ofl_entry_hdr *)e)->flags & OFL_BENCH_TS)) return;
    uint64_t ts;
    memcpy(&ts, e + 8, 8);
    if (r->nlat < r->iters) r->lat[r->nlat++] = now - ts;
}

static void wait_go(volatile uint32_t *go)
{
    while (!__atomic_load_n(go, __ATOMIC_ACQUIRE)) ofl_cpu_relax();
}

/* Spin until *idx == want (acquire), yielding after a while (one CPU shared). */
static void wait_index(const uint32_t *idx, uint32_t want)
{
    uint32_t spins = 0;
    while (__atomic_load_n(idx, __ATOMIC_ACQUIRE) != want) {
        if (spins++ < OFL_WAIT_SPINS) ofl_cpu_relax();
        else sched_yield();
    }
}

/* Stage `want` entries on q, filled for counters *i, *i + 1, ... (advanced), through
 * reservations (one, or two when the staging buffer ends first); the first carries
 * timestamp ts unless it is 0. Returns 0 or q's error. */
static int send_batch(struct ofl_qout *q, uint32_t es, uint32_t want, uint64_t *i, uint64_t ts)
{
    while (want) {
        uint32_t got;
        uint8_t *e = ofl_qout_reserve(q, want, &got);
        if (!e) return q->err;
        for (uint32_t k = 0; k < got; k++) fill(e + (size_t)k * es, es, *i + k);
        if (ts) stamp(e, ts);
        ts = 0;
        ofl_qout_produce(q, got);
        *i += got;
        want -= got;
    }
    return 0;
}

static void *producer(void *arg)
{
    struct run *r = arg;
    ofl_pin_self(0);
    if (r->offlow) {
        struct ofl_ce ce;
        struct ofl_waiter w;
        struct ofl_qout q;
        ofl_waiter_init(&w, NULL, 0, NULL);
        ofl_ce_start(&ce, OFL_CE_INLINE, -1);
        if ((r->err = ofl_qout_init(&q, r->mem, r->len, &ce, &w)) < 0) return NULL;
        wait_go(r->go);
        uint64_t cpu0 = thread_ns();
        if (r->iters) {
            /* One batch at a time: stamp, send, wait until the consumer released it. */
            uint64_t i = 0;
            for (uint64_t it = 0; it < r->iters && !r->err; it++) {
                uint64_t ts = ofl_now_ns();
                if (!(r->err = send_batch(&q, r->es, r->batch, &i, ts)))
                    r->err = ofl_qout_flush(&q);
                if (!r->err) wait_index(&q.ring.shm->head, q.ring.tail);
            }
        } else {
            for (uint64_t i = 0; i < r->n && !r->err;) {
                uint32_t want = r->n - i < r->batch ? (uint32_t)(r->n - i) : r->batch;
                r->err = send_batch(&q, r->es, want, &i, 0);
            }
        }
        int rc = ofl_qout_close(&q);
        side_done(r, cpu0);
        if (!r->err) r->err = rc;
        r->doorbells = q.ring.batches;
        r->full_waits = q.ring.full_waits;
        ofl_qout_destroy(&q);
        ofl_ce_stop(&ce);
        return NULL;
    }
    struct ceil_ring *c = r->mem;
    uint32_t mask = RING_SIZE - 1, tail = 0, head = 0;
    struct ofl_waiter w;   /* waits as offlow's ends do: spin, then yield */
    ofl_waiter_init(&w, NULL, 0, NULL);
    wait_go(r->go);
    uint64_t cpu0 = thread_ns();
    for (uint64_t i = 0; i < r->n;) {
        uint32_t want = r->n - i < r->batch ? (uint32_t)(r->n - i) : r->batch;
        uint64_t ts = r->iters ? ofl_now_ns() : 0;
        if (RING_SIZE - (tail - head) < want) {
            head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
            while (RING_SIZE - (tail - head) < want) {
                ofl_wait(&w);
                head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
            }
            ofl_waiter_progress(&w);
        }
        for (uint32_t k = 0; k < want; k++)
            fill(c->entries + (size_t)((tail + k) & mask) * r->es, r->es, i + k);
        if (r->iters) stamp(c->entries + (size_t)(tail & mask) * r->es, ts);
        tail += want;
        __atomic_store_n(&c->tail, tail, __ATOMIC_RELEASE);
        r->doorbells++;
        i += want;
        if (r->iters) {
            wait_index(&c->head, tail);
            head = tail;
        }
    }
    side_done(r, cpu0);
    return NULL;
}

static void *consumer(void *arg)
{
    struct run *r = arg;
    ofl_pin_self(1);
    if (r->offlow) {
        struct ofl_ce ce;
        struct ofl_waiter w;
        struct ofl_qin q;
        ofl_waiter_init(&w, NULL, 0, NULL);
        ofl_ce_start(&ce, OFL_CE_INLINE, -1);
        if ((r->err = ofl_qin_init(&q, r->mem, r->len, &ce, &w)) < 0) return NULL;
        wait_go(r->go);
        uint64_t cpu0 = thread_ns();
        for (;;) {
            const uint8_t *es;
            int n = ofl_qin_next(&q, &es);
            if (n == OFL_Q_DONE) break;
            if (n < 0) {
                r->err = n;
                break;
            }
            if (n == 0) {
                ofl_wait(&w);
                continue;
            }
            if (r->lat) record(r, es, ofl_now_ns());
            ofl_waiter_progress(&w);
            for (int k = 0; k < n; k++) {
                if (!good(es + (size_t)k * r->es, r->es, r->received)) r->bad++;
                r->received++;
            }
        }
        r->t_end = ofl_now_ns();
        side_done(r, cpu0);
        ofl_qin_destroy(&q);
        ofl_ce_stop(&ce);
        return NULL;
    }
    struct ceil_ring *c = r->mem;
    uint32_t mask = RING_SIZE - 1, head = 0, tail = 0;
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    wait_go(r->go);
    uint64_t cpu0 = thread_ns();
    while (r->received < r->n) {
        if (tail == head) {
            tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
            if (tail == head) {
                ofl_wait(&w);
                continue;
            }
            ofl_waiter_progress(&w);
        }
        uint32_t n = tail - head < r->batch ? tail - head : r->batch;
        if (r->lat) record(r, c->entries + (size_t)(head & mask) * r->es, ofl_now_ns());
        for (uint32_t k = 0; k < n; k++) {
            if (!good(c->entries + (size_t)((head + k) & mask) * r->es, r->es, r->received))
                r->bad++;
            r->received++;
        }
        head += n;
        __atomic_store_n(&c->head, head, __ATOMIC_RELEASE);
    }
    r->t_end = ofl_now_ns();
    side_done(r, cpu0);
    return NULL;
}

/* What one throughput transfer measured. */
struct xfer {
    double mps;      /* entries per second / 1e6 */
    double share;    /* the least of the two threads' CPU time / the transfer's wall time */
    int on_two;      /* producer ended on CPU 0 and consumer on CPU 1, as pinned */
};

/* One transfer of r->n entries (a latency run when r->iters); returns Mentries/s,
 * or -1 on a setup error; *x (may be NULL) gets what it measured. */
static double transfer(struct run *r, void *mem, size_t len, struct xfer *x)
{
    volatile uint32_t go = 0;
    memset(mem, 0, len);
    r->mem = mem;
    r->len = len;
    r->go = &go;
    r->received = r->bad = r->doorbells = r->full_waits = r->nlat = 0;
    r->err = 0;
    if (r->iters) r->n = r->iters * r->batch;
    if (r->offlow && ofl_ring_format(mem, len, RING_SIZE, r->es, r->batch, 0) < 0) return -1;
    struct run p = *r;
    p.lat = NULL;   /* the consumer's samples */
    pthread_t tp, tc;
    pthread_create(&tc, NULL, consumer, r);
    pthread_create(&tp, NULL, producer, &p);
    ofl_pin_self(0);
    uint64_t t0 = ofl_now_ns();
    __atomic_store_n(&go, 1u, __ATOMIC_RELEASE);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    if (p.err && !r->err) r->err = p.err;
    r->doorbells = p.doorbells;
    r->full_waits = p.full_waits;
    double wall = (double)(r->t_end - t0), mps = (double)r->n / wall * 1e3;
    if (x) {
        uint64_t least = p.cpu_ns < r->cpu_ns ? p.cpu_ns : r->cpu_ns;
        x->mps = mps;
        x->share = (double)least / wall;
        x->on_two = p.cpu == 0 % ofl_ncpus() && r->cpu == 1 % ofl_ncpus();
    }
    return mps;
}

/* Take what q has ready and check it continues the stream at *rec. Returns the
 * entries taken, or a negative error. The counters are locals in the loop, as in the
 * ceiling's: through the pointers, each entry's check would wait for the last one's
 * store (the entries' bytes may alias them). */
static int take_batch(struct ofl_qin *q, uint32_t es, uint64_t *rec, uint64_t *bad)
{
    const uint8_t *p;
    int n = ofl_qin_next(q, &p);
    uint64_t r = *rec, b = 0;
    for (int k = 0; k < n; k++, r++) b += !good(p + (size_t)k * es, es, r);
    *rec = r;
    *bad += b;
    return n;
}

/* Single-thread cost per entry. */
struct st {
    double offlow, next, ceiling;   /* ns of CPU per entry, least over the runs */
    uint64_t bad;                   /* entries that arrived wrong or out of order */
    int err;
};

/* One core, no hand-off between cores: a producer and a consumer alternate on this
 * thread, a batch each, through the offlow queue (reservations; then one
 * ofl_qout_next per entry, as generated code does) and through the bare ring; n entries each way, thread CPU
 * time per entry, the least of `reps` runs. What it shows: each side's own work per
 * entry, without the cache-line transfers between cores (which both rings pay alike)
 * or another engineer's load (CPU time, not wall time). */
static void single_thread(uint32_t es, uint32_t batch, uint64_t n, int reps, void *mem,
                          size_t len, struct st *out)
{
    out->offlow = out->next = out->ceiling = 1e18;
    out->bad = 0;
    out->err = 0;
    for (int rep = 0; rep < reps && !out->err; rep++) {
        struct ofl_ce ce;
        struct ofl_qout qo;
        struct ofl_qin qi;
        memset(mem, 0, len);
        ofl_ring_format(mem, len, RING_SIZE, es, batch, 0);
        ofl_ce_start(&ce, OFL_CE_INLINE, -1);
        if ((out->err = ofl_qout_init(&qo, mem, len, &ce, NULL)) < 0 ||
            (out->err = ofl_qin_init(&qi, mem, len, &ce, NULL)) < 0)
            break;
        uint64_t rec = 0, t0 = thread_ns();
        for (uint64_t i = 0; i < n && !out->err;) {
            uint32_t want = n - i < batch ? (uint32_t)(n - i) : batch;
            if (!(out->err = send_batch(&qo, es, want, &i, 0))) out->err = ofl_qout_flush(&qo);
            while (!out->err && rec < i) {
                int k = take_batch(&qi, es, &rec, &out->bad);
                if (k <= 0) out->err = k < 0 ? k : -EIO;
            }
        }
        uint64_t t1 = thread_ns();
        for (uint64_t i = 0; i < n && !out->err;) {
            uint32_t want = n - i < batch ? (uint32_t)(n - i) : batch;
            for (uint32_t k = 0; k < want; k++, i++) {
                uint8_t *e = ofl_qout_next(&qo);
                if (!e) {
                    out->err = qo.err;
                    break;
                }
                fill(e, es, n + i);   /* the stream goes on from n */
            }
            if (!out->err) out->err = ofl_qout_flush(&qo);
            while (!out->err && rec < n + i) {
                int k = take_batch(&qi, es, &rec, &out->bad);
                if (k <= 0) out->err = k < 0 ? k : -EIO;
            }
        }
        uint64_t t2 = thread_ns();
        ofl_qout_destroy(&qo);
        ofl_qin_destroy(&qi);
        ofl_ce_stop(&ce);
        struct ceil_ring *c = mem;
        uint32_t mask = RING_SIZE - 1, tail = 0, head = 0;
        memset(mem, 0, len);
        uint64_t t3 = thread_ns();
        uint64_t cbad = 0;
        for (uint64_t i = 0, r = 0; i < n;) {
            uint32_t want = n - i < batch ? (uint32_t)(n - i) : batch;
            for (uint32_t k = 0; k < want; k++)
                fill(c->entries + (size_t)((tail + k) & mask) * es, es, i + k);
            tail += want;
            __atomic_store_n(&c->tail, tail, __ATOMIC_RELEASE);
            i += want;
            uint32_t t = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
            for (; head != t; head++, r++)
                cbad += !good(c->entries + (size_t)(head & mask) * es, es, r);
            __atomic_store_n(&c->head, head, __ATOMIC_RELEASE);
        }
        uint64_t t4 = thread_ns();
        out->bad += cbad;
        double o = (double)(t1 - t0) / (double)n, sl = (double)(t2 - t1) / (double)n,
               ce_ = (double)(t4 - t3) / (double)n;
        if (o < out->offlow) out->offlow = o;
        if (sl < out->next) out->next = sl;
        if (ce_ < out->ceiling) out->ceiling = ce_;
    }
}

static int parse_list(const char *s, uint32_t *out)
{
    int n = 0;
    while (*s && n < MAX_LIST) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) return -1;
        out[n++] = (uint32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Latency percentiles of one side. */
struct lat {
    uint64_t p50, p99, samples;
};

/* Run a latency measurement like `cfg` (its side, batch, entry size): `iters`
 * batches after `warm` warm-up batches; p50 / p99 of the measured ones. Returns 0,
 * or 1 after printing what failed. */
static int latency(const struct run *cfg, void *mem, size_t len, uint64_t warm, uint64_t iters,
                   uint64_t *buf, struct lat *out)
{
    const char *name = cfg->offlow ? "offlow queue" : "ceiling ring";
    struct run r = { .offlow = cfg->offlow, .batch = cfg->batch, .es = cfg->es,
                     .iters = warm + iters, .lat = buf };
    transfer(&r, mem, len, NULL);
    if (r.err || r.received != r.n || r.bad || r.nlat != r.iters) {
        fprintf(stderr, "bench_queue: %s latency batch %u size %u: received %llu of %llu, "
                "%llu bad, %llu of %llu samples, error %s\n", name, r.batch, r.es,
                (unsigned long long)r.received, (unsigned long long)r.n,
                (unsigned long long)r.bad, (unsigned long long)r.nlat,
                (unsigned long long)r.iters, ofl_strerror(r.err));
        return 1;
    }
    uint64_t *s = buf + warm;
    qsort(s, (size_t)iters, sizeof s[0], cmp_u64);
    out->p50 = s[iters / 2];
    out->p99 = s[iters * 99 / 100];
    out->samples = iters;
    return 0;
}

/* Throughput of one (batch, entry size): pairs of transfers. */
struct pairs {
    double offlow[3], ceiling[3];   /* min, median, max Mentries/s over the counted pairs */
    double ratio;                   /* median of offlow / ceiling over the counted pairs */
    double ratio_all;               /* the same over every pair */
    double share_min, share_median; /* threads' CPU time / wall time, over every transfer */
    int pairs, clean;               /* pairs run; pairs counted (MIN_SHARE, on two CPUs) */
};

/* Min, median and max of v[0..n) (sorted in place) into out[3]. */
static void spread(double *v, int n, double out[3])
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    out[0] = v[0];
    out[1] = v[n / 2];
    out[2] = v[n - 1];
}

/* Run offlow (o) and the ceiling (c) back to back, the first of each pair alternating,
 * until `reps` pairs ran undisturbed (each thread of both transfers on its own CPU
 * for MIN_SHARE of the time: what the rings do, not what other load does) or
 * PAIR_TRIES x reps pairs ran. Medians over the undisturbed pairs; over every pair
 * when none was. Returns 0, or 1 after printing what failed. */
static int run_pairs(struct run *o, struct run *c, int reps, void *mem, size_t len,
                     struct pairs *out)
{
    enum { MAXP = MAX_REPS * PAIR_TRIES };
    double om[MAXP], cm[MAXP], ratio[MAXP], oall[MAXP], call[MAXP], all[MAXP];
    double share[2 * MAXP];
    int k = 0, clean = 0;
    for (; k < PAIR_TRIES * reps && clean < reps; k++) {
        struct xfer xo, xc;
        for (int side = 0; side < 2; side++) {
            if ((side == 0) == (k % 2 == 0)) transfer(o, mem, len, &xo);
            else transfer(c, mem, len, &xc);
        }
        if (o->err || o->received != o->n || o->bad) {
            fprintf(stderr, "bench_queue: offlow queue batch %u size %u: received %llu of "
                    "%llu, %llu bad, error %s\n", o->batch, o->es,
                    (unsigned long long)o->received, (unsigned long long)o->n,
                    (unsigned long long)o->bad, ofl_strerror(o->err));
            return 1;
        }
        if (c->received != c->n || c->bad) {
            fprintf(stderr, "bench_queue: ceiling ring: received %llu of %llu\n",
                    (unsigned long long)c->received, (unsigned long long)c->n);
            return 1;
        }
        oall[k] = xo.mps;
        call[k] = xc.mps;
        all[k] = xo.mps / xc.mps;
        share[2 * k] = xo.share;
        share[2 * k + 1] = xc.share;
        if (xo.share >= MIN_SHARE && xc.share >= MIN_SHARE && xo.on_two && xc.on_two) {
            om[clean] = xo.mps;
            cm[clean] = xc.mps;
            ratio[clean++] = all[k];
        }
    }
    out->pairs = k;
    out->clean = clean;
    double tmp[3];
    spread(share, 2 * k, tmp);
    out->share_min = tmp[0];
    out->share_median = tmp[1];
    spread(all, k, tmp);
    out->ratio_all = tmp[1];
    if (!clean) {
        /* None undisturbed: the spread of every pair, said so by clean_pairs 0. */
        out->ratio = tmp[1];
        spread(oall, k, out->offlow);
        spread(call, k, out->ceiling);
        return 0;
    }
    spread(om, clean, out->offlow);
    spread(cm, clean, out->ceiling);
    spread(ratio, clean, tmp);
    out->ratio = tmp[1];
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s ENTRIES REPS BATCHES SIZES [LAT_ITERS]\n", argv[0]);
        return 2;
    }
    uint64_t n = strtoull(argv[1], NULL, 10);
    int reps = atoi(argv[2]);
    uint32_t batches[MAX_LIST], sizes[MAX_LIST];
    int nb = parse_list(argv[3], batches), ns = parse_list(argv[4], sizes);
    uint64_t iters = argc == 6 ? strtoull(argv[5], NULL, 10) : 2000;
    if (n == 0 || reps < 1 || reps > MAX_REPS || nb < 1 || ns < 1 || iters < 1 ||
        iters > MAX_LAT_ITERS) {
        fprintf(stderr, "bench_queue: bad arguments\n");
        return 2;
    }
    uint64_t warm = iters / 10 + 10;
    uint64_t *lat_buf = malloc((size_t)(warm + iters) * sizeof *lat_buf);
    if (!lat_buf) {
        perror("bench_queue: malloc");
        return 1;
    }
    for (int si = 0; si < ns; si++) {
        uint32_t es = sizes[si];
        size_t len = ofl_ring_mem_size(RING_SIZE, es);
        size_t clen = sizeof(struct ceil_ring) + (size_t)RING_SIZE * es;
        if (clen > len) len = clen;
        /* Shared memory, as between processes. */
        void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            perror("bench_queue: mmap");
            return 1;
        }
        for (int bi = 0; bi < nb; bi++) {
            uint32_t batch = batches[bi];
            if (es < 16 || es % 8 || batch < 1 || batch > RING_SIZE) {
                fprintf(stderr, "bench_queue: bad config batch %u size %u\n", batch, es);
                return 2;
            }
            struct run o = { .offlow = 1, .batch = batch, .es = es, .n = n };
            struct run c = { .offlow = 0, .batch = batch, .es = es, .n = n };
            /* Warm up both (page faults, caches, CPU frequency). */
            struct run wo = o, wc = c;
            wo.n = wc.n = n / 10 + 1;
            transfer(&wo, mem, len, NULL);
            transfer(&wc, mem, len, NULL);
            struct pairs pp;
            if (run_pairs(&o, &c, reps, mem, len, &pp)) return 1;
            struct lat ol, cl;
            if (latency(&o, mem, len, warm, iters, lat_buf, &ol) ||
                latency(&c, mem, len, warm, iters, lat_buf, &cl))
                return 1;
            struct st st;
            single_thread(es, batch, n < ST_ENTRIES ? n : ST_ENTRIES, ST_RUNS, mem, len, &st);
            if (st.err || st.bad) {
                fprintf(stderr, "bench_queue: single-thread batch %u size %u: %llu bad, "
                        "error %s\n", batch, es, (unsigned long long)st.bad,
                        ofl_strerror(st.err));
                return 1;
            }
            printf("{\"batch\": %u, \"entry_size\": %u, \"ring_size\": %u, \"entries\": %llu, "
                   "\"reps\": %d, \"offlow_received\": %llu, \"ceiling_received\": %llu, "
                   "\"offlow_mps\": %.3f, \"offlow_mps_min\": %.3f, \"offlow_mps_max\": %.3f, "
                   "\"ceiling_mps\": %.3f, \"ceiling_mps_min\": %.3f, \"ceiling_mps_max\": %.3f, "
                   "\"ratio\": %.4f, \"ratio_all\": %.4f, \"pairs\": %d, \"clean_pairs\": %d, "
                   "\"min_share\": %.3f, \"share_min\": %.6g, \"share_median\": %.6g, "
                   "\"offlow_doorbells\": %llu, \"offlow_full_waits\": %llu, "
                   "\"lat_iters\": %llu, \"offlow_lat_p50_ns\": %llu, "
                   "\"offlow_lat_p99_ns\": %llu, \"ceiling_lat_p50_ns\": %llu, "
                   "\"ceiling_lat_p99_ns\": %llu, \"lat_ratio\": %.6g, "
                   "\"st_offlow_ns\": %.3f, \"st_next_ns\": %.3f, \"st_ceiling_ns\": %.3f, "
                   "\"st_ratio\": %.4f, \"st_runs\": %d}\n",
                   batch, es, RING_SIZE, (unsigned long long)n, reps,
                   (unsigned long long)o.received, (unsigned long long)c.received,
                   pp.offlow[1], pp.offlow[0], pp.offlow[2], pp.ceiling[1], pp.ceiling[0],
                   pp.ceiling[2], pp.ratio, pp.ratio_all, pp.pairs, pp.clean, MIN_SHARE,
                   pp.share_min, pp.share_median,
                   (unsigned long long)o.doorbells, (unsigned long long)o.full_waits,
                   (unsigned long long)ol.samples, (unsigned long long)ol.p50,
                   (unsigned long long)ol.p99, (unsigned long long)cl.p50,
                   (unsigned long long)cl.p99,
                   cl.p50 > 0 ? (double)ol.p50 / (double)cl.p50 : 0.0, st.offlow, st.next,
                   st.ceiling, st.offlow > 0 ? st.ceiling / st.offlow : 0.0, ST_RUNS);
            fflush(stdout);
        }
        munmap(mem, len);
    }
    free(lat_buf);
    return 0;
}
