/* Queue tests: qout -> qin across two threads with inline and thread copy engines,
 * 16- and 256-byte entries, exactly once and in order; with the thread engine the
 * producer's copies overlap its work (flushes of partial batches, rings smaller than
 * two batches, copies in flight while the ring is full), and a copy in flight is
 * invisible to the consumer until committed, finished by close, and waited for
 * after a dead peer's -EPIPE; entries with packet bytes
 * at data_off cross only as far as they are used (len 0, 1, 7, 8, max, ...) and
 * round-trip exactly; a dead peer and the abort word end waits with -EPIPE /
 * -ECANCELED; a corrupted seq or len gives -EBADMSG; a producer set to drop on a
 * full ring drops and counts instead of waiting; entries staged on one producer end
 * move to another's in order (ofl_qout_take). Batch reservations (ofl_qout_reserve /
 * _produce): partial batches, entries given back, wrap-around, a full ring, misuse;
 * a stale entry anywhere in a batch is -EBADMSG. The copy engine's entry jobs are
 * checked on their own, also the seq they stamp and check. A ring whose consumer
 * finds a corrupt entry mid-transfer ends both ends with an error (the producer's
 * wait for room included), the entries not delivered counted as lost; so does a
 * consumer that fails after its producer closed the ring, or at the same moment (the
 * entries left counted by one end only).
 * Usage: test_queue [ENTRIES]  (default 300000 per configuration) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "offlow/copy.h"
#include "offlow/err.h"
#include "offlow/queue.h"
#include "offlow/wait.h"

#define RING_SIZE 64u
#define BATCH 16u

static void *ring_mem_off(uint32_t size, uint32_t es, uint32_t batch, uint32_t data_off,
                          size_t *len)
{
    *len = ofl_ring_mem_size(size, es);
    void *m = aligned_alloc(64, *len);
    CHECK(ofl_ring_format(m, *len, size, es, batch, data_off) == 0,
          "ring %u x %uB, batch %u, data_off %u formatted", size, es, batch, data_off);
    return m;
}

static void *ring_mem(uint32_t size, uint32_t es, uint32_t batch, size_t *len)
{
    *len = ofl_ring_mem_size(size, es);
    void *m = aligned_alloc(64, *len);
    ofl_ring_format(m, *len, size, es, batch, 0);
    return m;
}

/* A ring with its producer end `o` and consumer end `in`, each on its own copy
 * engine, sharing a waiter without file descriptors. */
struct qpair {
    uint8_t *mem;
    size_t len;
    struct ofl_ce pce, cce;
    struct ofl_waiter w;
    struct ofl_qout o;
    struct ofl_qin in;
};

/* Format a ring (size entries of es bytes, batch, data_off) and attach both ends, the
 * producer's engine in mode pmode and the consumer's in cmode. */
static void qpair_open(struct qpair *q, uint32_t size, uint32_t es, uint32_t batch,
                       uint32_t data_off, int pmode, int cmode)
{
    q->mem = ring_mem_off(size, es, batch, data_off, &q->len);
    CHECK(ofl_ce_start(&q->pce, pmode, -1) == 0 && ofl_ce_start(&q->cce, cmode, -1) == 0,
          "copy engines started");
    ofl_waiter_init(&q->w, NULL, 0, NULL);
    CHECK(ofl_qout_init(&q->o, q->mem, q->len, &q->pce, &q->w) == 0 &&
          ofl_qin_init(&q->in, q->mem, q->len, &q->cce, &q->w) == 0, "both ends attached");
}

/* Detach both ends, stop the engines (their counters stay readable) and free the ring. */
static void qpair_close(struct qpair *q)
{
    ofl_qin_destroy(&q->in);
    ofl_qout_destroy(&q->o);
    ofl_ce_stop(&q->pce);
    ofl_ce_stop(&q->cce);
    free(q->mem);
}

/* Flush until nothing is staged or in flight: everything committed (a THREAD
 * engine's flush may return with its copy still running). */
static int qout_sync(struct ofl_qout *o)
{
    int rc = 0;
    while (rc == 0 && ofl_qout_pending(o)) rc = ofl_qout_flush(o);
    return rc;
}

/* A large copy queued on a THREAD engine ahead of the queue's jobs (the engine runs
 * jobs in order), so that those are really still running for a while. */
struct blocker {
    struct ofl_ce_job job;
    uint8_t *src, *dst;
};

static void block_engine(struct ofl_ce *ce, struct blocker *b)
{
    const size_t sz = (size_t)16 << 20;   /* 8 x 16 MiB: tens of milliseconds */
    b->src = calloc(1, sz);
    b->dst = malloc(sz);
    memset(&b->job, 0, sizeof b->job);
    b->job.nseg = OFL_CE_MAX_SEGS;
    for (unsigned k = 0; k < OFL_CE_MAX_SEGS; k++)
        b->job.seg[k] = (struct ofl_ce_seg){ b->dst, b->src, sz };
    CHECK(b->src && b->dst && ofl_ce_submit(ce, &b->job) == 0, "engine kept busy");
}

static void unblock_engine(struct ofl_ce *ce, struct blocker *b)
{
    ofl_ce_wait(ce, &b->job, NULL);
    free(b->src);
    free(b->dst);
}

/* Byte k of the payload of entry i. */
static uint8_t pattern(uint64_t i, size_t k)
{
    return (uint8_t)(i * 31 + k * 7);
}

/* Packet length of entry i on a ring whose entries hold up to `max` packet bytes:
 * the edge cases first in every cycle of 16, then spread over 0..max. */
static uint16_t len_for(uint64_t i, uint32_t max)
{
    static const uint32_t edge[] = { 0, 1, 7, 8, 9, 15, 16, 17 };
    uint64_t k = i % 16;
    uint32_t l;
    if (k < 8) l = edge[k];
    else if (k == 8) l = max;
    else if (k == 9) l = max - 1;
    else l = (uint32_t)((i * 2654435761u) % (max + 1));
    return (uint16_t)(l < max ? l : max);
}

struct side {
    void *mem;
    size_t len;
    int mode;
    uint32_t es;
    uint32_t data_off;      /* 0: fixed entries; else fields at 8..data_off, then data */
    uint32_t size, batch;   /* ring geometry */
    uint32_t flush_mod;     /* the producer also flushes after entry i when i % it == 0 */
    uint64_t n;
    uint64_t got, bad;
    int err;
    struct ofl_ring ring;   /* copy of the endpoint's counters at the end */
    uint64_t used;          /* producer: sum of the entries' used bytes */
    uint64_t ce_bytes;      /* the side's copy engine: bytes copied */
    uint64_t q_bytes;       /* producer: the endpoint's bytes counter */
    uint64_t flushes;       /* producer: explicit flushes */
    uint64_t overlapped;    /* producer: flushes that returned with a copy in flight */
    uint64_t max_pending;   /* producer: most entries staged + in flight after a flush */
    int reserve;            /* producer: fills through ofl_qout_reserve */
    uint64_t made;          /* producer: entries the endpoint took (staged) */
    uint64_t lost;          /* producer: the endpoint's lost counter at the end */
    uint64_t pause_at;      /* consumer: once it got this many (0: never), it waits
                             * (paused set) until `resume` is set */
    int paused, resume;     /* (atomics) */
};

/* Fill entry e as entry i of side s's stream (what the consumer checks). */
static void fill_entry(struct side *s, uint8_t *e, uint64_t i)
{
    if (s->data_off) {
        /* Fields: i at +8, ~i in the rest; then len packet bytes. */
        uint16_t l = len_for(i, s->es - s->data_off);
        uint64_t ni = ~i;
        ((struct ofl_entry_hdr *)e)->len = l;
        ((struct ofl_entry_hdr *)e)->flags = 0;
        memcpy(e + 8, &i, 8);
        for (size_t k = 16; k + 8 <= s->data_off; k += 8) memcpy(e + k, &ni, 8);
        for (size_t k = 0; k < l; k++) e[s->data_off + k] = pattern(i, k);
        s->used += ofl_entry_used(s->es, s->data_off, l);
    } else {
        ((struct ofl_entry_hdr *)e)->len = (uint16_t)i;
        ((struct ofl_entry_hdr *)e)->flags = 0;
        memcpy(e + 8, &i, 8);
        for (size_t k = 16; k < s->es; k++) e[k] = pattern(i, k);
    }
}

/* The producer's next entries from i on, filled: one through ofl_qout_next or
 * ofl_qout_slot, or (with s->reserve) a reservation of 1..13 entries of which all but
 * sometimes the last are produced (that one is reserved again next time). Returns how
 * many, 0 on error. */
static uint32_t produce_some(struct side *s, struct ofl_qout *q, uint64_t i)
{
    if (!s->reserve) {   /* one entry: the inline path and the call, in turn */
        uint8_t *e = i % 2 ? ofl_qout_next(q) : ofl_qout_slot(q);
        if (!e) return 0;
        fill_entry(s, e, i);
        return 1;
    }
    uint64_t left = s->n - i;
    uint32_t want = 1 + (uint32_t)(i % 13), got = 0;
    if (want > left) want = (uint32_t)left;
    uint8_t *e = ofl_qout_reserve(q, want, &got);
    if (!e) return 0;
    if (got < 1 || got > want) {
        s->err = -ERANGE;
        return 0;
    }
    uint32_t keep = got > 1 && i % 3 == 0 ? got - 1 : got;   /* give one back at times */
    for (uint32_t k = 0; k < keep; k++) fill_entry(s, e + (size_t)k * s->es, i + k);
    return ofl_qout_produce(q, keep) < 0 ? 0 : keep;
}

static void *producer(void *arg)
{
    struct side *s = arg;
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qout q;
    ofl_waiter_init(&w, NULL, 0, NULL);
    if ((s->err = ofl_ce_start(&ce, s->mode, -1)) < 0) return NULL;
    if ((s->err = ofl_qout_init(&q, s->mem, s->len, &ce, &w)) < 0) return NULL;
    uint64_t i = 0;
    while (i < s->n) {
        uint32_t k = produce_some(s, &q, i);
        if (!k) {
            if (!s->err) s->err = q.err;
            break;
        }
        /* Flush at odd points too, not only at full batches: after the entries made
         * now when one of them is a multiple of flush_mod. */
        uint64_t was = i;
        i += k;
        if (was == 0 || (i - 1) / s->flush_mod != (was - 1) / s->flush_mod) {
            if ((s->err = ofl_qout_flush(&q)) < 0) break;
            unsigned pend = ofl_qout_pending(&q);
            s->flushes++;
            s->overlapped += pend > 0;
            if (pend > s->max_pending) s->max_pending = pend;
        }
    }
    if (!s->err) s->err = ofl_qout_close(&q);
    if (!s->err && ofl_qout_pending(&q)) s->err = -EINVAL;   /* close left something */
    s->made = i;
    s->lost = q.lost;
    s->q_bytes = q.bytes;
    s->ring = q.ring;
    ofl_qout_destroy(&q);
    ofl_ce_stop(&ce);
    s->ce_bytes = ce.bytes;
    return NULL;
}

static void *consumer(void *arg)
{
    struct side *s = arg;
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qin q;
    ofl_waiter_init(&w, NULL, 0, NULL);
    if ((s->err = ofl_ce_start(&ce, s->mode, -1)) < 0) return NULL;
    if ((s->err = ofl_qin_init(&q, s->mem, s->len, &ce, &w)) < 0) return NULL;
    for (;;) {
        if (s->pause_at && s->got >= s->pause_at) {
            __atomic_store_n(&s->paused, 1, __ATOMIC_RELEASE);
            while (!__atomic_load_n(&s->resume, __ATOMIC_ACQUIRE)) sched_yield();
            s->pause_at = 0;
        }
        const uint8_t *es;
        int n = ofl_qin_next(&q, &es);
        if (n == OFL_Q_DONE) break;
        if (n < 0) {
            s->err = n;
            break;
        }
        if (n == 0) {
            ofl_wait(&w);
            continue;
        }
        ofl_waiter_progress(&w);
        for (int j = 0; j < n; j++) {
            const uint8_t *e = es + (size_t)j * s->es;
            uint64_t v;
            memcpy(&v, e + 8, 8);
            uint16_t l = ((const struct ofl_entry_hdr *)e)->len;
            int ok;
            if (s->data_off) {
                /* Only the fields and the first len packet bytes mean anything. */
                ok = v == s->got && l == len_for(v, s->es - s->data_off);
                for (size_t k = 16; ok && k + 8 <= s->data_off; k += 8) {
                    uint64_t f;
                    memcpy(&f, e + k, 8);
                    ok = f == ~v;
                }
                for (size_t k = 0; ok && k < l; k++) ok = e[s->data_off + k] == pattern(v, k);
            } else {
                ok = v == s->got && l == (uint16_t)v;
                for (size_t k = 16; ok && k < s->es; k++) ok = e[k] == pattern(v, k);
            }
            if (!ok) s->bad++;
            s->got++;
        }
    }
    s->ring = q.ring;
    ofl_qin_destroy(&q);
    ofl_ce_stop(&ce);
    s->ce_bytes = ce.bytes;
    return NULL;
}

/* n entries from a producer thread to a consumer thread through a ring of `size`
 * entries, `batch` per doorbell; the producer also flushes every flush_mod entries,
 * and fills entries one by one (ofl_qout_next, ofl_qout_slot) or in reservations
 * (`reserve`). */
static void test_transfer_geo(int mode, uint32_t es, uint32_t data_off, uint64_t n,
                              uint32_t size, uint32_t batch, uint32_t flush_mod, int reserve)
{
    const char *mn = mode == OFL_CE_THREAD ? (reserve ? "thread+reserve" : "thread")
                                           : (reserve ? "inline+reserve" : "inline");
    struct side p = { .mode = mode, .es = es, .data_off = data_off, .n = n, .size = size,
                      .batch = batch, .flush_mod = flush_mod, .reserve = reserve }, c;
    p.mem = data_off ? ring_mem_off(size, es, batch, data_off, &p.len)
                     : ring_mem(size, es, batch, &p.len);
    c = p;
    pthread_t tp, tc;
    uint64_t t0 = ofl_now_ns();
    pthread_create(&tc, NULL, consumer, &c);
    pthread_create(&tp, NULL, producer, &p);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    CHECK(p.err == 0 && c.err == 0, "%s engine, %u-byte entries: no errors (%s / %s)", mn, es,
          ofl_strerror(p.err), ofl_strerror(c.err));
    CHECK(c.got == n && c.bad == 0,
          "%s engine, %u-byte entries: %llu of %llu received, %llu wrong or out of order", mn,
          es, (unsigned long long)c.got, (unsigned long long)n, (unsigned long long)c.bad);
    CHECK(p.ring.pushed == n && c.ring.popped == n, "%s engine, %u-byte: pushed %llu popped %llu",
          mn, es, (unsigned long long)p.ring.pushed, (unsigned long long)c.ring.popped);
    uint64_t want_bytes = data_off ? p.used : n * es;
    CHECK(p.q_bytes == want_bytes, "%s engine, %u-byte entries: the queue counted %llu bytes "
          "(%llu)", mn, es, (unsigned long long)p.q_bytes, (unsigned long long)want_bytes);
    if (mode == OFL_CE_THREAD)
        CHECK(p.flushes == 0 || p.overlapped > 0,
              "thread engine, %u-byte entries, ring %u / batch %u: %llu of %llu flushes "
              "returned with the copy in flight (at most %llu entries pending)", es, size,
              batch, (unsigned long long)p.overlapped, (unsigned long long)p.flushes,
              (unsigned long long)p.max_pending);
    else
        CHECK(p.overlapped == 0, "inline engine, %u-byte entries: every flush committed", es);
    if (data_off) {
        CHECK(p.ce_bytes == p.used && c.ce_bytes == p.used,
              "%s engine, %u-byte entries, data_off %u: only used bytes copied (%llu produced, "
              "%llu consumed, %llu used; whole entries would be %llu)", mn, es, data_off,
              (unsigned long long)p.ce_bytes, (unsigned long long)c.ce_bytes,
              (unsigned long long)p.used, (unsigned long long)(n * es));
    } else {
        CHECK(p.ce_bytes == n * es && c.ce_bytes == n * es,
              "%s engine, %u-byte entries: whole entries copied", mn, es);
    }
    printf("info: %s %uB data_off %u ring %u batch %u flush/%u: doorbells %llu full_waits "
           "%llu, %.1f ms\n", mn, es, data_off, size, batch, flush_mod,
           (unsigned long long)p.ring.batches, (unsigned long long)p.ring.full_waits,
           (double)(ofl_now_ns() - t0) / 1e6);
    free(p.mem);
}

static void test_transfer(int mode, uint32_t es, uint32_t data_off, uint64_t n, int reserve)
{
    test_transfer_geo(mode, es, data_off, n, RING_SIZE, BATCH, 37, reserve);
}

/* Join thread t within `s` seconds; false when it is still running (it hangs). */
static bool join_within(pthread_t t, int s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += s;
    return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

/* Wait up to 10 s for `cond` to hold (checked every millisecond). */
#define WAIT_FOR(cond)                                                          \
    do {                                                                        \
        for (int w_ = 0; w_ < 10000 && !(cond); w_++) usleep(1000);             \
    } while (0)

/* A transfer whose ring is corrupted while it runs (a device that wrote an entry
 * wrong): the consumer stops on the entry with -EBADMSG and marks the ring broken; the
 * producer, which waits for room on the full ring, fails with OFL_RING_EBROKEN instead
 * of waiting for ever. Every entry the producer took either reached the consumer
 * (intact and in order, up to the bad one) or is counted lost. Without the broken
 * mark the producer hangs: the joins are bounded so that the test fails instead. */
static void test_broken_transfer(int mode, int reserve)
{
    const char *mn = mode == OFL_CE_THREAD ? (reserve ? "thread+reserve" : "thread")
                                           : (reserve ? "inline+reserve" : "inline");
    struct side p = { .mode = mode, .es = 16, .n = 1000000, .size = RING_SIZE,
                      .batch = BATCH, .flush_mod = 37, .reserve = reserve }, c;
    p.mem = ring_mem(RING_SIZE, 16, BATCH, &p.len);
    c = p;
    c.pause_at = 1000;
    struct ofl_ring_shm *shm = p.mem;
    pthread_t tp, tc;
    pthread_create(&tc, NULL, consumer, &c);
    pthread_create(&tp, NULL, producer, &p);
    /* The consumer pauses; the producer fills the ring and waits for room. Then the
     * last entry published gets a wrong seq: no copy of either side touches it now
     * (the consumer's copies are at most two batches past its head). */
    WAIT_FOR(__atomic_load_n(&c.paused, __ATOMIC_ACQUIRE));
    WAIT_FOR(__atomic_load_n(&shm->tail, __ATOMIC_ACQUIRE) -
             __atomic_load_n(&shm->head, __ATOMIC_ACQUIRE) == RING_SIZE);
    uint32_t tail = __atomic_load_n(&shm->tail, __ATOMIC_ACQUIRE);
    uint32_t head = __atomic_load_n(&shm->head, __ATOMIC_ACQUIRE);
    CHECK(c.paused && tail - head == RING_SIZE, "%s: consumer paused at %llu, ring full", mn,
          (unsigned long long)c.got);
    ((struct ofl_entry_hdr *)(shm->entries + (size_t)((tail - 1) & (RING_SIZE - 1)) * 16))->seq
        ^= 0x100;
    __atomic_store_n(&c.resume, 1, __ATOMIC_RELEASE);
    bool cdone = join_within(tc, 10), pdone = join_within(tp, 10);
    CHECK(cdone && pdone, "%s: both ends ended within 10 s (consumer %s, producer %s)", mn,
          cdone ? "ended" : "hangs", pdone ? "ended" : "hangs");
    if (!cdone || !pdone) exit(CHECK_DONE());   /* the threads still use the ring */
    CHECK(c.err == -EBADMSG, "%s: the consumer stopped on the corrupt entry: %s", mn,
          ofl_strerror(c.err));
    CHECK(p.err == OFL_RING_EBROKEN, "%s: the producer stopped: %s", mn, ofl_strerror(p.err));
    CHECK(ofl_ring_broken(&c.ring), "%s: the ring is marked broken in its header", mn);
    CHECK(c.bad == 0 && c.got >= c.pause_at && c.got <= tail - 1,
          "%s: %llu entries delivered intact and in order, none from the corrupt one on", mn,
          (unsigned long long)c.got);
    CHECK(c.got + p.lost == p.made && p.lost > 0,
          "%s: each of the %llu entries the producer took delivered (%llu) or counted lost "
          "(%llu)", mn, (unsigned long long)p.made, (unsigned long long)c.got,
          (unsigned long long)p.lost);
    free(p.mem);
}

/* A waiter whose only peer is the read end of a pipe; the "peer" holds the write end. */
struct death {
    int wfd;
    int mode;           /* 0: close the write end, 1: set the abort word */
    volatile uint32_t *abort_word;
    uint64_t t_event;
};

static void *kill_peer(void *arg)
{
    struct death *d = arg;
    usleep(50 * 1000);
    d->t_event = ofl_now_ns();
    if (d->mode == 0) close(d->wfd);
    else __atomic_store_n(d->abort_word, 1u, __ATOMIC_RELEASE);
    return NULL;
}

static void test_peer_death_qin(void)
{
    int fds[2];
    volatile uint32_t abort_word = 0;
    CHECK(pipe(fds) == 0, "pipe created");
    size_t len;
    void *mem = ring_mem(RING_SIZE, 16, BATCH, &len);
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qin q;
    ofl_ce_start(&ce, OFL_CE_INLINE, -1);
    ofl_waiter_init(&w, &fds[0], 1, &abort_word);
    ofl_qin_init(&q, mem, len, &ce, &w);
    struct death d = { .wfd = fds[1], .mode = 0 };
    pthread_t t;
    pthread_create(&t, NULL, kill_peer, &d);
    int rc = 0;
    uint64_t t0 = ofl_now_ns();
    while (rc == 0 && ofl_now_ns() - t0 < 5000000000ull) {
        const uint8_t *es;
        rc = ofl_qin_next(&q, &es);
        if (rc == 0) rc = ofl_wait(&w);
    }
    uint64_t t1 = ofl_now_ns();
    pthread_join(t, NULL);
    CHECK(rc == -EPIPE, "consumer waiting on an empty queue sees the dead peer: %s",
          ofl_strerror(rc));
    CHECK(t1 - d.t_event < 1000000000ull, "within 1 s (%.3f ms)", (double)(t1 - d.t_event) / 1e6);
    ofl_qin_destroy(&q);
    close(fds[0]);
    free(mem);
}

/* A producer waiting for room finds a peer process dead while the ring's own consumer
 * is still up (the peer that died is another one): it marks the ring broken on the
 * consumer's behalf and counts what the ring holds and what it had staged; the
 * consumer, breaking it in turn (as a core stopped by the failure does), counts
 * nothing: every entry is taken or counted lost once. */
static void test_peer_death_consumer_up(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe created");
    struct qpair q;
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    ofl_waiter_init(&q.w, &fds[0], 1, NULL);   /* the producer's wait watches the peer */
    for (int i = 0; i < 8; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0 && q.o.ring.pushed == 8, "%s, peer dies: 8 fill the ring", mn);
    const uint8_t *es;
    int taken = 0;
    for (int k = 0; k < 100 && taken < 3; k++) {
        int n = ofl_qin_next(&q.in, &es);   /* (their slots free at once, or by the next) */
        if (n > 0) taken += n;
    }
    for (int i = 0; i < 8; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    close(fds[1]);   /* the peer dies while the producer waits for room for 8 */
    int rc = qout_sync(&q.o);
    ofl_qin_break(&q.in);   /* the consumer, stopped by the failure */
    CHECK(rc == OFL_RING_EBROKEN && q.in.lost == 0 &&
              (uint64_t)taken + q.o.lost == 16,
          "%s, peer dies, consumer up: %s; %d taken + %llu lost by the producer + %u by the "
          "consumer = 16, each once", mn, ofl_strerror(rc), taken,
          (unsigned long long)q.o.lost, q.in.lost);
    close(fds[0]);
    qpair_close(&q);
}

static void test_blocked_qout(int mode)
{
    int fds[2];
    volatile uint32_t abort_word = 0;
    pipe(fds);
    size_t len;
    void *mem = ring_mem(8, 16, 4, &len);
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qout q;
    ofl_ce_start(&ce, OFL_CE_INLINE, -1);
    ofl_waiter_init(&w, &fds[0], 1, &abort_word);
    ofl_qout_init(&q, mem, len, &ce, &w);
    struct death d = { .wfd = fds[1], .mode = mode, .abort_word = &abort_word };
    pthread_t t;
    pthread_create(&t, NULL, kill_peer, &d);
    /* Nobody consumes: the ring fills and the producer waits on backpressure. */
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++) {
        if (!ofl_qout_slot(&q)) rc = q.err;
    }
    if (rc == 0) rc = ofl_qout_flush(&q);
    uint64_t t1 = ofl_now_ns();
    pthread_join(t, NULL);
    /* the consumer's process dead: the ring broken as by its producer, what it held
     * lost (the secondary error: the death is the cause); the abort word: cancelled */
    int want = mode == 0 ? OFL_RING_EBROKEN : -ECANCELED;
    CHECK(rc == want, "producer blocked on a full ring: %s (want %s)", ofl_strerror(rc),
          ofl_strerror(want));
    CHECK(t1 - d.t_event < 1000000000ull, "within 1 s (%.3f ms)", (double)(t1 - d.t_event) / 1e6);
    CHECK(q.err == want && ofl_qout_slot(&q) == NULL, "the error sticks");
    CHECK(q.ring.full_waits >= 1, "the wait counted in full_waits (%llu)",
          (unsigned long long)q.ring.full_waits);
    if (mode == 0)
        CHECK(ofl_ring_broken_by(&q.ring) == OFL_RING_BROKEN_BY_CONSUMER && q.lost >= 8,
              "peer dead: the ring marked broken on its consumer's behalf, its 8 entries "
              "and the staged ones lost (%llu), counted by the producer",
              (unsigned long long)q.lost);
    CHECK(ofl_wait(&w) == (mode == 0 ? -EPIPE : -ECANCELED), "ofl_wait itself reports it too");
    ofl_qout_destroy(&q);
    close(fds[0]);
    if (mode) close(fds[1]);
    free(mem);
}

static void test_corrupt(int mode)
{
    struct qpair q;
    qpair_open(&q, RING_SIZE, 16, BATCH, 0, mode, mode);
    for (int i = 0; i < 40; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0, "%s: 40 entries committed", mode ? "thread" : "inline");
    /* Damage entry 20 (in the second batch the consumer takes). */
    ((struct ofl_entry_hdr *)(q.o.ring.entries + 20 * 16))->seq ^= 0x100;
    const uint8_t *es;
    int n1 = ofl_qin_next(&q.in, &es);
    int n2 = ofl_qin_next(&q.in, &es);
    CHECK(n1 == (int)BATCH, "%s: first batch intact (%d)", mode ? "thread" : "inline", n1);
    CHECK(n2 == -EBADMSG, "%s: corrupted entry reported: %s", mode ? "thread" : "inline",
          ofl_strerror(n2));
    CHECK(ofl_qin_next(&q.in, &es) == -EBADMSG, "the error sticks");
    qpair_close(&q);
}

/* enqueue=drop: a flush that finds the ring full drops what does not fit (counted,
 * not pushed) instead of waiting, and what was committed arrives intact and in order;
 * once the consumer makes room, entries go through again. */
static void test_drop_full(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    struct qpair q;
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    q.o.drop_full = true;
    /* No consumer yet: 8 fit, the other 12 are dropped (a blocking queue would hang). */
    for (int i = 0; i < 20; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0, "%s: 20 entries flushed without waiting", mn);
    CHECK(q.o.ring.pushed == 8 && q.o.dropped == 12 && q.o.ring.full_waits == 0,
          "%s: 8 pushed, 12 dropped, no waits (%llu, %llu, %llu)", mn,
          (unsigned long long)q.o.ring.pushed, (unsigned long long)q.o.dropped,
          (unsigned long long)q.o.ring.full_waits);
    const uint8_t *es;
    uint32_t got = 0, bad = 0;
    for (int n; (n = ofl_qin_next(&q.in, &es)) > 0;)
        for (int i = 0; i < n; i++, got++)
            bad += ((const struct ofl_entry_hdr *)(es + (size_t)i * 16))->len != got;
    CHECK(got == 8 && bad == 0, "%s: the first 8 arrive in order (%u, %u bad)", mn, got, bad);
    /* Room again: the next entries go through, nothing more is dropped. */
    for (int i = 0; i < 4; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)(100 + i);
    CHECK(ofl_qout_close(&q.o) == 0, "%s: closed", mn);
    CHECK(q.o.ring.pushed == 12 && q.o.dropped == 12, "%s: 4 more pushed, none dropped", mn);
    got = bad = 0;
    int n;
    while ((n = ofl_qin_next(&q.in, &es)) >= 0)
        for (int i = 0; i < n; i++, got++)
            bad += ((const struct ofl_entry_hdr *)(es + (size_t)i * 16))->len != 100 + got;
    CHECK(got == 4 && bad == 0 && n == OFL_Q_DONE, "%s: then 100..103 and the end", mn);
    qpair_close(&q);
}

/* enqueue=drop on a ring its consumer broke: the producer stops (OFL_RING_EBROKEN)
 * and counts what never arrived as lost, rather than dropping every later entry as
 * if the ring were only full. */
static void test_broken_drop(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    struct qpair q;
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    q.o.drop_full = true;
    for (int i = 0; i < 8; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0 && q.o.ring.pushed == 8, "%s, drop: 8 entries fill the ring", mn);
    ((struct ofl_entry_hdr *)q.o.ring.entries)->seq ^= 0x100;   /* the first one */
    const uint8_t *es;
    CHECK(ofl_qin_next(&q.in, &es) == -EBADMSG, "%s, drop: the consumer stops on it", mn);
    for (int i = 0; i < 3; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    int rc = ofl_qout_flush(&q.o);
    CHECK(rc == OFL_RING_EBROKEN && q.o.lost == 11 && q.o.dropped == 0,
          "%s, drop: the next flush stops (%s), 8 + 3 lost (%llu), none dropped as if full "
          "(%llu)", mn, ofl_strerror(rc), (unsigned long long)q.o.lost,
          (unsigned long long)q.o.dropped);
    CHECK(ofl_qout_slot(&q.o) == NULL && ofl_qout_close(&q.o) == OFL_RING_EBROKEN &&
              q.o.lost == 11, "%s, drop: it stays stopped, nothing counted twice", mn);
    qpair_close(&q);
}

/* A consumer that fails for another reason than a corrupt entry breaks its ring
 * (ofl_qin_break): its producer's next flush, or its wait for room, stops with
 * OFL_RING_EBROKEN and counts what never arrived. A producer that fails breaks its
 * own (ofl_qout_break): its consumer takes what was published, then gets
 * OFL_RING_EBROKEN instead of waiting; what was staged is the producer's loss, what
 * was published and not taken (a consumer stopped by the abort word) the consumer's. */
static void test_break_on_failure(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    struct qpair q;
    const uint8_t *es;
    /* the consumer fails: 8 committed (the ring full), 3 staged: 11 lost */
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    for (int i = 0; i < 8; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0 && q.o.ring.pushed == 8, "%s, consumer fails: ring full", mn);
    ofl_qin_break(&q.in);
    ofl_qin_break(&q.in);   /* twice: nothing more */
    CHECK(q.in.lost == 0, "%s, consumer fails: it counts nothing itself (%u)", mn, q.in.lost);
    for (int i = 0; i < 3; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    int rc = ofl_qout_flush(&q.o);
    CHECK(rc == OFL_RING_EBROKEN && q.o.lost == 11,
          "%s, consumer fails: the producer's flush stops (%s), 8 + 3 lost (%llu)", mn,
          ofl_strerror(rc), (unsigned long long)q.o.lost);
    ofl_qout_break(&q.o);   /* the producer stopped by it: nothing counted twice */
    CHECK(q.o.lost == 11, "%s, consumer fails: still 11 lost (%llu)", mn,
          (unsigned long long)q.o.lost);
    qpair_close(&q);

    /* the producer fails: 4 published (2 taken), 3 staged */
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    for (int i = 0; i < 4; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0, "%s, producer fails: 4 published", mn);
    for (int i = 0; i < 3; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    ofl_qout_break(&q.o);
    CHECK(q.o.lost == 3, "%s, producer fails: its 3 staged lost (%llu)", mn,
          (unsigned long long)q.o.lost);
    int got = 0;
    for (int k = 0; k < 100 && got < 4; k++) {
        rc = ofl_qin_next(&q.in, &es);
        if (rc > 0) got += rc;
    }
    CHECK(got == 4, "%s, producer fails: the consumer takes the 4 published (%d)", mn, got);
    rc = ofl_qin_next(&q.in, &es);
    CHECK(rc == OFL_RING_EBROKEN, "%s, producer fails: then it stops (%s), not waits", mn,
          ofl_strerror(rc));
    ofl_qin_break(&q.in);
    CHECK(q.in.lost == 0, "%s, producer fails: nothing left to lose (%u)", mn, q.in.lost);
    qpair_close(&q);

    /* the producer fails, its consumer stopped (the abort word) before taking them */
    qpair_open(&q, 8, 16, 4, 0, mode, mode);
    for (int i = 0; i < 6; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0, "%s, producer fails first: 6 published", mn);
    ofl_qout_break(&q.o);
    ofl_qin_break(&q.in);
    CHECK(q.o.lost == 0 && q.in.lost == 6, "%s, producer fails first: the consumer counts the "
          "6 it never took (%u), the producer none (%llu)", mn, q.in.lost,
          (unsigned long long)q.o.lost);
    qpair_close(&q);
}

/* A producer that finished (closed its ring) before its consumer fails: the entries it
 * left in the ring are counted by the consumer (the producer publishes nothing more
 * and is never asked again), once: a later break of the producer adds nothing. */
static void test_close_then_break(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    struct qpair q;
    const uint8_t *es;
    qpair_open(&q, 16, 16, 4, 0, mode, mode);
    for (int i = 0; i < 10; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(ofl_qout_close(&q.o) == 0 && q.o.ring.pushed == 10, "%s, closed then broken: 10 "
          "published, closed", mn);
    int got = ofl_qin_next(&q.in, &es);
    CHECK(got == 4, "%s, closed then broken: the consumer takes a batch (%d)", mn, got);
    ofl_qin_break(&q.in);
    CHECK(q.in.lost == 6 && q.o.lost == 0,
          "%s, closed then broken: the consumer counts the 6 it never took (%u), the "
          "producer none (%llu)", mn, q.in.lost, (unsigned long long)q.o.lost);
    ofl_qout_break(&q.o);   /* (a producer failing after its close: nothing of its own) */
    CHECK(q.o.lost == 0, "%s, closed then broken: a later break of the producer counts "
          "nothing twice (%llu)", mn, (unsigned long long)q.o.lost);
    CHECK(ofl_ring_broken_by(&q.in.ring) == OFL_RING_CLOSED_FIRST && !ofl_ring_broken(&q.o.ring),
          "%s, closed then broken: the ring says it was closed first (%u)", mn,
          ofl_ring_broken_by(&q.in.ring));
    qpair_close(&q);
}

/* The consumer fails first, its producer then closes: the close finds the ring broken
 * and counts what was published and not taken and what it still held (staged), the
 * consumer nothing; the ring is not marked finished. */
static void test_break_then_close(int mode)
{
    const char *mn = mode ? "thread" : "inline";
    struct qpair q;
    const uint8_t *es;
    qpair_open(&q, 16, 16, 4, 0, mode, mode);
    for (int i = 0; i < 10; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    CHECK(qout_sync(&q.o) == 0 && q.o.ring.pushed == 10, "%s, broken then closed: 10 "
          "published", mn);
    int got = ofl_qin_next(&q.in, &es);
    ofl_qin_break(&q.in);
    for (int i = 0; i < 3; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q.o))->len = (uint16_t)i;
    int rc = ofl_qout_close(&q.o);
    CHECK(got == 4 && rc == OFL_RING_EBROKEN && q.o.lost == 9 && q.in.lost == 0,
          "%s, broken then closed: took %d, the close stops (%s), the producer counts "
          "6 + 3 (%llu), the consumer none (%u)", mn, got, ofl_strerror(rc),
          (unsigned long long)q.o.lost, q.in.lost);
    CHECK(!__atomic_load_n(&q.o.ring.shm->closed, __ATOMIC_ACQUIRE) &&
              ofl_ring_broken_by(&q.o.ring) == OFL_RING_BROKEN_BY_CONSUMER,
          "%s, broken then closed: not marked closed, broken by the consumer", mn);
    qpair_close(&q);
}

/* One round of the race: the producer makes `make` entries and closes, the consumer
 * takes up to `take` and fails (ofl_qin_break), both let go at once. */
struct race {
    struct ofl_qout *o;
    struct ofl_qin *in;
    uint32_t make, take;
    uint64_t made, taken;
    int go;              /* both wait for it, then start */
};

static void race_wait(struct race *r)
{
    while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE)) ofl_cpu_relax();
}

static void *race_producer(void *arg)
{
    struct race *r = arg;
    race_wait(r);
    for (uint32_t i = 0; i < r->make; i++) {
        struct ofl_entry_hdr *h = ofl_qout_slot(r->o);
        if (!h) break;   /* the consumer broke the ring: the rest is never made */
        h->len = (uint16_t)i;
        r->made++;
    }
    (void)ofl_qout_close(r->o);   /* 0, or OFL_RING_EBROKEN when it broke first */
    return NULL;
}

static void *race_consumer(void *arg)
{
    struct race *r = arg;
    const uint8_t *es;
    race_wait(r);
    while (r->taken < r->take) {
        int n = ofl_qin_next(r->in, &es);
        if (n < 0) break;   /* done (all taken) */
        if (n == 0) sched_yield();
        r->taken += (uint64_t)n;
    }
    ofl_qin_break(r->in);
    return NULL;
}

/* A producer closing its ring while its consumer fails, from two threads, many times,
 * at varied points (before, during and after the close): every entry made is taken or
 * counted lost by exactly one end (taken + both ends' lost == made), whichever end
 * marked the ring first. */
static void test_close_break_race(int mode, unsigned rounds)
{
    const char *mn = mode ? "thread" : "inline";
    struct ofl_ce pce, cce;
    struct ofl_waiter w;
    size_t len = ofl_ring_mem_size(16, 16);
    void *mem = aligned_alloc(64, len);
    CHECK(mem && ofl_ce_start(&pce, mode, -1) == 0 && ofl_ce_start(&cce, mode, -1) == 0,
          "%s, race: engines started", mn);
    ofl_waiter_init(&w, NULL, 0, NULL);
    unsigned bad = 0, closed_first = 0, broke_first = 0;
    for (unsigned k = 0; k < rounds; k++) {
        struct ofl_qout o;
        struct ofl_qin in;
        ofl_ring_format(mem, len, 16, 16, 4, 0);
        if (ofl_qout_init(&o, mem, len, &pce, &w) || ofl_qin_init(&in, mem, len, &cce, &w)) {
            bad++;
            break;
        }
        uint32_t make = 4 + k % 29;   /* up to two ring's worth: the producer may wait */
        struct race r = { .o = &o, .in = &in, .make = make,
                          .take = k % 5 == 0 ? 0 : make - k % 7 };
        pthread_t tp, tc;
        pthread_create(&tp, NULL, race_producer, &r);
        pthread_create(&tc, NULL, race_consumer, &r);
        __atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
        pthread_join(tp, NULL);
        pthread_join(tc, NULL);
        uint32_t first = ofl_ring_broken_by(&o.ring);
        closed_first += first == OFL_RING_CLOSED_FIRST;
        broke_first += first == OFL_RING_BROKEN_BY_CONSUMER;
        if (r.taken + o.lost + in.lost != r.made) {
            if (bad++ < 5)
                printf("  round %u: made %llu, taken %llu, lost by the producer %llu and by "
                       "the consumer %u (first mark %u)\n", k, (unsigned long long)r.made,
                       (unsigned long long)r.taken, (unsigned long long)o.lost, in.lost, first);
        }
        ofl_qin_destroy(&in);
        ofl_qout_destroy(&o);
    }
    CHECK(bad == 0, "%s, race: in %u rounds (closed first %u, broken first %u) every entry "
          "made was taken or counted lost once (%u rounds off)", mn, rounds, closed_first,
          broke_first, bad);
    ofl_ce_stop(&pce);
    ofl_ce_stop(&cce);
    free(mem);
}

/* The copy engine on its own: entry jobs are validated, copy only used bytes (the
 * rest of the destination is untouched) and count what they copied. */
static void test_ce_jobs(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    enum { ES = 32, DOFF = 16, N = 5 };
    static const uint16_t lens[N] = { 0, 1, 9, 16, 200 };   /* 200: clamped */
    uint8_t src[N * ES], dst[N * ES];
    for (size_t k = 0; k < sizeof src; k++) src[k] = (uint8_t)(k * 13 + 1);
    for (int i = 0; i < N; i++) ((struct ofl_entry_hdr *)(src + i * ES))->len = lens[i];
    memset(dst, 0xee, sizeof dst);
    struct ofl_ce ce;
    CHECK(ofl_ce_start(&ce, mode, -1) == 0, "%s engine started", mn);
    struct ofl_ce_job job;
    memset(&job, 0, sizeof job);
    job.kind = OFL_CE_ENTRIES;
    job.nseg = 1;
    job.seg[0] = (struct ofl_ce_seg){ dst, src, N };
    job.stride = 12;
    job.data_off = 8;
    CHECK(ofl_ce_submit(&ce, &job) == -EINVAL, "%s: stride 12 rejected", mn);
    job.stride = ES;
    job.data_off = 4;
    CHECK(ofl_ce_submit(&ce, &job) == -EINVAL, "%s: data_off 4 rejected", mn);
    job.data_off = ES + 8;
    CHECK(ofl_ce_submit(&ce, &job) == -EINVAL, "%s: data_off > stride rejected", mn);
    job.kind = 7;
    job.data_off = DOFF;
    CHECK(ofl_ce_submit(&ce, &job) == -EINVAL, "%s: unknown kind rejected", mn);
    job.kind = OFL_CE_ENTRIES;
    /* Two runs, as a wrapped ring gives: entries 0..1, then 2..4. */
    job.nseg = 2;
    job.seg[0] = (struct ofl_ce_seg){ dst, src, 2 };
    job.seg[1] = (struct ofl_ce_seg){ dst + 2 * ES, src + 2 * ES, N - 2 };
    CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0,
          "%s: entry job done", mn);
    uint64_t want = 0;
    int ok = 1;
    for (int i = 0; i < N; i++) {
        uint32_t used = ofl_entry_used(ES, DOFF, lens[i]);
        want += used;
        for (uint32_t k = 0; k < ES; k++) {
            uint8_t d = dst[i * ES + k];
            if (k < used ? d != src[i * ES + k] : d != 0xee) ok = 0;
        }
    }
    CHECK(ok, "%s: each entry copied up to its used bytes (16, 24, 32, 32, 32), no further",
          mn);
    CHECK(job.bytes == want, "%s: job.bytes %llu == %llu", mn, (unsigned long long)job.bytes,
          (unsigned long long)want);
    /* data_off 0: whole entries. */
    memset(dst, 0, sizeof dst);
    job.data_off = 0;
    CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0 &&
              !memcmp(dst, src, sizeof src) && job.bytes == sizeof src,
          "%s: data_off 0 copies whole entries", mn);
    /* A plain byte job still works (kind 0). */
    struct ofl_ce_job bj;
    memset(&bj, 0, sizeof bj);
    memset(dst, 0, sizeof dst);
    bj.nseg = 1;
    bj.seg[0] = (struct ofl_ce_seg){ dst, src, 40 };
    CHECK(ofl_ce_submit(&ce, &bj) == 0 && ofl_ce_wait(&ce, &bj, NULL) == 0 &&
              !memcmp(dst, src, 40) && dst[40] == 0 && bj.bytes == 40,
          "%s: byte job copies its bytes", mn);
    ofl_ce_stop(&ce);
    CHECK(ce.bytes == want + sizeof src + 40 && ce.jobs == 3, "%s: engine counted %llu bytes",
          mn, (unsigned long long)ce.bytes);
}

/* Entry jobs that stamp or check seqs (the queue's own copies, OFL_CE_SEQ_*): for
 * 16-byte entries (two 8-byte moves), larger whole entries and entries with packet
 * bytes, in two segments as a wrapped ring gives, with seqs that wrap past 2^32.
 * STAMP writes first + i into entry i's header and copies the rest as it is; CHECK
 * passes those and flags a wrong seq in any position (first, inside the first
 * segment, first and last of the second) and a len past the packet area. */
static void test_ce_seq(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    enum { N = 7, MAXES = 48 };
    static const uint32_t geo[][2] = { { 16, 0 }, { 32, 0 }, { 48, 16 } };   /* stride, data_off */
    static const uint32_t firsts[] = { 1, 0xfffffffdu };   /* the second wraps to 0 at i = 3 */
    struct ofl_ce ce;
    CHECK(ofl_ce_start(&ce, mode, -1) == 0, "%s engine started", mn);
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        uint32_t es = geo[g][0], doff = geo[g][1];
        for (size_t f = 0; f < 2; f++) {
            uint32_t first = firsts[f];
            uint8_t src[N * MAXES], ring[N * MAXES], back[N * MAXES];
            for (size_t k = 0; k < sizeof src; k++) src[k] = (uint8_t)(k * 7 + 3);
            for (uint32_t i = 0; i < N; i++) {
                struct ofl_entry_hdr *h = (struct ofl_entry_hdr *)(src + i * es);
                h->seq = 0xdeadbeefu;   /* whatever the producer left: stamped over */
                h->len = (uint16_t)(doff ? i % (es - doff + 1) : i);
            }
            struct ofl_ce_job job;
            memset(&job, 0, sizeof job);
            job.kind = OFL_CE_ENTRIES;
            job.stride = es;
            job.data_off = doff;
            job.seq_op = OFL_CE_SEQ_STAMP;
            job.seq = first;
            job.nseg = 2;
            job.seg[0] = (struct ofl_ce_seg){ ring, src, 3 };
            job.seg[1] = (struct ofl_ce_seg){ ring + 3 * es, src + 3 * es, N - 3 };
            CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0,
                  "%s: stamp job done", mn);
            int ok = 1;
            for (uint32_t i = 0; i < N; i++) {
                const struct ofl_entry_hdr *h = (const struct ofl_entry_hdr *)(ring + i * es);
                uint32_t used = ofl_entry_used(es, doff, h->len);
                ok &= h->seq == first + i && h->len == ((struct ofl_entry_hdr *)(src + i * es))->len;
                ok &= !memcmp(ring + i * es + 4, src + i * es + 4, used - 4);
            }
            CHECK(ok, "%s, %u B, data_off %u, seq from %#x: each entry stamped first + i, "
                  "the rest copied", mn, es, doff, first);
            job.seq_op = OFL_CE_SEQ_CHECK;
            job.seg[0] = (struct ofl_ce_seg){ back, ring, 3 };
            job.seg[1] = (struct ofl_ce_seg){ back + 3 * es, ring + 3 * es, N - 3 };
            CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0 &&
                      job.bad == 0,
                  "%s, %u B, data_off %u: the stamped entries pass the check", mn, es, doff);
            for (uint32_t at = 0; at < N; at++) {
                if (at != 0 && at != 2 && at != 3 && at != N - 1) continue;
                struct ofl_entry_hdr *h = (struct ofl_entry_hdr *)(ring + at * es);
                h->seq ^= 0x40;   /* a stale entry: another lap's seq */
                CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0 &&
                          job.bad != 0,
                      "%s, %u B, data_off %u: a wrong seq at %u of %u is caught", mn, es, doff,
                      at, N);
                h->seq ^= 0x40;
            }
            if (doff) {
                struct ofl_entry_hdr *h = (struct ofl_entry_hdr *)(ring + 4 * es);
                uint16_t l = h->len;
                h->len = (uint16_t)(es - doff + 1);
                CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0 &&
                          job.bad != 0,
                      "%s, %u B, data_off %u: a len past the packet area is caught", mn, es,
                      doff);
                h->len = l;
            }
            CHECK(ofl_ce_submit(&ce, &job) == 0 && ofl_ce_wait(&ce, &job, NULL) == 0 &&
                      job.bad == 0,
                  "%s: the flag is cleared at each submit", mn);
        }
    }
    struct ofl_ce_job job;
    memset(&job, 0, sizeof job);
    uint8_t a[16], b[16];
    job.kind = OFL_CE_ENTRIES;
    job.stride = 16;
    job.nseg = 1;
    job.seg[0] = (struct ofl_ce_seg){ a, b, 1 };
    job.seq_op = 3;
    CHECK(ofl_ce_submit(&ce, &job) == -EINVAL, "%s: an unknown seq_op is rejected", mn);
    ofl_ce_stop(&ce);
}

/* One thread, a ring with data_off: lens 0, 1, 7, 8, max-1, max across wraps. Ring
 * bytes past each entry's used part are never written; fields and the first len
 * packet bytes arrive intact. */
static void test_used_only(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    enum { ES = 64, DOFF = 24, MAX = ES - DOFF, RS = 8, B = 4 };
    static const uint16_t lens[] = { 0, 1, 7, 8, MAX - 1, MAX, 2, 33 };
    const uint32_t nl = sizeof lens / sizeof lens[0];
    struct qpair q;
    qpair_open(&q, RS, ES, B, DOFF, mode, mode);
    CHECK(q.o.ring.data_off == DOFF && q.in.ring.data_off == DOFF, "%s: both sides see data_off",
          mn);
    uint64_t sent = 0, got = 0, bad = 0, untouched_bad = 0, used_sum = 0;
    for (int round = 0; round < 7; round++) {
        /* The ring is empty here: mark every slot, so writes past `used` show. */
        memset(q.o.ring.entries, 0x5a, (size_t)RS * ES);
        uint32_t cnt = 3 + (uint32_t)round % 4;   /* 3..6 entries: runs wrap the ring */
        uint64_t first = sent;
        for (uint32_t j = 0; j < cnt; j++, sent++) {
            uint8_t *e = ofl_qout_slot(&q.o);
            memset(e + 8, 0xee, ES - 8);          /* stale bytes that must not cross */
            uint16_t l = lens[sent % nl];
            ((struct ofl_entry_hdr *)e)->len = l;
            ((struct ofl_entry_hdr *)e)->flags = (uint16_t)sent;
            memcpy(e + 8, &sent, 8);
            memset(e + 16, (int)(sent & 0xff), 8);
            for (uint32_t k = 0; k < l; k++) e[DOFF + k] = pattern(sent, k);
            used_sum += ofl_entry_used(ES, DOFF, l);
        }
        CHECK(ofl_qout_flush(&q.o) == 0 && qout_sync(&q.o) == 0, "%s: round %d flushed", mn,
              round);
        for (uint64_t i = first; i < sent; i++) {
            const uint8_t *e = q.o.ring.entries + (size_t)(i % RS) * ES;
            uint32_t used = ofl_entry_used(ES, DOFF, lens[i % nl]);
            for (uint32_t k = used; k < ES; k++) untouched_bad += e[k] != 0x5a;
        }
        const uint8_t *es;
        int n;
        while (got < sent && (n = ofl_qin_next(&q.in, &es)) > 0) {
            for (int j = 0; j < n; j++, got++) {
                const uint8_t *e = es + (size_t)j * ES;
                const struct ofl_entry_hdr *h = (const struct ofl_entry_hdr *)e;
                uint64_t v;
                memcpy(&v, e + 8, 8);
                int ok = v == got && h->len == lens[got % nl] && h->flags == (uint16_t)got &&
                         h->seq == (uint32_t)got + 1;
                for (int k = 16; ok && k < DOFF; k++) ok = e[k] == (uint8_t)(got & 0xff);
                for (uint32_t k = 0; ok && k < h->len; k++) ok = e[DOFF + k] == pattern(got, k);
                bad += !ok;
            }
        }
        CHECK(got == sent, "%s: round %d: %llu of %llu received", mn, round,
              (unsigned long long)got, (unsigned long long)sent);
    }
    CHECK(bad == 0, "%s: fields and the first len packet bytes round-trip (%llu bad)", mn,
          (unsigned long long)bad);
    CHECK(untouched_bad == 0, "%s: ring bytes past each entry's used part untouched (%llu)", mn,
          (unsigned long long)untouched_bad);
    CHECK(ofl_qout_close(&q.o) == 0, "%s: closed", mn);
    const uint8_t *es;
    CHECK(ofl_qin_next(&q.in, &es) == OFL_Q_DONE, "%s: then done", mn);
    qpair_close(&q);
    CHECK(q.pce.bytes == used_sum && q.cce.bytes == used_sum,
          "%s: engines copied %llu / %llu bytes = the used bytes %llu (whole: %llu)", mn,
          (unsigned long long)q.pce.bytes, (unsigned long long)q.cce.bytes,
          (unsigned long long)used_sum, (unsigned long long)(sent * ES));
}

/* A len past the entry's packet area: corrupted in the ring, or set so by the
 * producer (the copy is clamped to the entry): the consumer gives -EBADMSG. */
static void test_corrupt_len(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    enum { ES = 64, DOFF = 16, MAX = ES - DOFF };
    for (int how = 0; how < 2; how++) {
        struct qpair q;
        qpair_open(&q, RING_SIZE, ES, BATCH, DOFF, mode, mode);
        for (int i = 0; i < 40; i++) {
            struct ofl_entry_hdr *h = ofl_qout_slot(&q.o);
            h->len = (uint16_t)(i % (MAX + 1));
            if (how == 1 && i == 20) h->len = 0xffff;
        }
        qout_sync(&q.o);
        if (how == 0) ((struct ofl_entry_hdr *)(q.o.ring.entries + 20 * ES))->len = MAX + 1;
        const uint8_t *es;
        int n1 = ofl_qin_next(&q.in, &es);
        int n2 = ofl_qin_next(&q.in, &es);
        const char *what = how ? "producer's len 0xffff" : "len corrupted in the ring";
        CHECK(n1 == (int)BATCH, "%s, %s: first batch intact (%d)", mn, what, n1);
        CHECK(n2 == -EBADMSG, "%s, %s: reported: %s", mn, what, ofl_strerror(n2));
        CHECK(ofl_qin_next(&q.in, &es) == -EBADMSG && q.in.err == -EBADMSG, "the error sticks");
        CHECK(q.in.ring.popped == BATCH, "%s: the bad batch is not released (%llu popped)", mn,
              (unsigned long long)q.in.ring.popped);
        qpair_close(&q);
    }
}

/* Fill entry i of a 64-byte, data_off 16 ring: i at +8, len_for(i) packet bytes. */
static void fill64(uint8_t *e, uint64_t i)
{
    uint16_t l = len_for(i, 64 - 16);
    ((struct ofl_entry_hdr *)e)->len = l;
    memcpy(e + 8, &i, 8);
    for (uint32_t k = 0; k < l; k++) e[16 + k] = pattern(i, k);
}

/* Entries of a 64-byte, data_off 16 ring as filled by fill64, from *next on;
 * returns how many were wrong. */
static uint64_t check64(const uint8_t *es, int n, uint64_t *next)
{
    uint64_t bad = 0;
    for (int j = 0; j < n; j++, (*next)++) {
        const uint8_t *e = es + (size_t)j * 64;
        uint64_t v;
        memcpy(&v, e + 8, 8);
        uint16_t l = ((const struct ofl_entry_hdr *)e)->len;
        int ok = v == *next && l == len_for(v, 64 - 16);
        for (uint32_t k = 0; ok && k < l; k++) ok = e[16 + k] == pattern(v, k);
        bad += !ok;
    }
    return bad;
}

/* One thread, THREAD engine on the producer, a ring of 16 with batches of 12: a
 * flushed batch stays invisible to the consumer while its copy is in flight; a
 * second flush reserves the slots after it; both are committed in order, one
 * doorbell each. */
static void test_overlap_order(void)
{
    enum { ES = 64, DOFF = 16, RS = 16, B = 12 };
    struct qpair q;
    struct blocker bl;
    qpair_open(&q, RS, ES, B, DOFF, OFL_CE_THREAD, OFL_CE_INLINE);
    block_engine(&q.pce, &bl);
    uint64_t sent = 0, got = 0, bad = 0, used = 0;
    const uint8_t *es;
    for (; sent < B; sent++) {
        fill64(ofl_qout_slot(&q.o), sent);
        used += ofl_entry_used(ES, DOFF, len_for(sent, ES - DOFF));
    }
    CHECK(ofl_qout_flush(&q.o) == 0 && ofl_qout_pending(&q.o) == B,
          "overlap: flush returns with its %u entries in flight (%u pending)", B,
          ofl_qout_pending(&q.o));
    CHECK(ofl_qin_next(&q.in, &es) == 0 && q.o.ring.shm->tail == 0 && q.o.ring.batches == 0,
          "overlap: nothing visible to the consumer before the commit");
    for (; sent < RS; sent++) {
        fill64(ofl_qout_slot(&q.o), sent);
        used += ofl_entry_used(ES, DOFF, len_for(sent, ES - DOFF));
    }
    CHECK(ofl_qout_flush(&q.o) == 0 && ofl_qout_pending(&q.o) == RS,
          "overlap: a second flush reserves the last %u slots after those in flight (%u "
          "pending)", RS - B, ofl_qout_pending(&q.o));
    int blocked = !ofl_ce_done(&bl.job);
    CHECK(ofl_qin_next(&q.in, &es) == 0 && q.o.ring.shm->tail == 0,
          "overlap: still nothing visible");
    printf("info: copies %s in flight at the check\n", blocked ? "really still" : "no longer");
    unblock_engine(&q.pce, &bl);
    CHECK(qout_sync(&q.o) == 0 && ofl_qout_pending(&q.o) == 0 && q.o.ring.pushed == RS &&
              q.o.ring.batches == 2 && q.o.bytes == used,
          "overlap: both committed, one doorbell each (%llu), %llu bytes counted (%llu)",
          (unsigned long long)q.o.ring.batches, (unsigned long long)q.o.bytes,
          (unsigned long long)used);
    int n1 = ofl_qin_next(&q.in, &es);
    if (n1 > 0) bad += check64(es, n1, &got);
    int n2 = ofl_qin_next(&q.in, &es);
    if (n2 > 0) bad += check64(es, n2, &got);
    CHECK(n1 == B && n2 == RS - B && got == RS && bad == 0,
          "overlap: consumer gets %d then %d entries, in order, intact (%llu bad)", n1, n2,
          (unsigned long long)bad);
    /* The slots came back: a flush now copies a full batch, across the ring's end. */
    for (uint64_t end = sent + B; sent < end; sent++) fill64(ofl_qout_slot(&q.o), sent);
    CHECK(ofl_qout_flush(&q.o) == 0 && qout_sync(&q.o) == 0 && q.o.ring.pushed == RS + B,
          "overlap: next batch committed");
    int n3 = ofl_qin_next(&q.in, &es);
    if (n3 > 0) bad += check64(es, n3, &got);
    CHECK(n3 == B && bad == 0, "overlap: and received intact (%d)", n3);
    CHECK(ofl_qout_close(&q.o) == 0 && ofl_qin_next(&q.in, &es) == OFL_Q_DONE, "overlap: done");
    qpair_close(&q);
}

/* Close with copies in flight (one flushed, one still staged): close waits for
 * them, commits them in order and only then marks the ring finished. */
static void test_close_in_flight(void)
{
    enum { ES = 64, DOFF = 16 };
    struct qpair q;
    struct blocker bl;
    qpair_open(&q, RING_SIZE, ES, BATCH, DOFF, OFL_CE_THREAD, OFL_CE_THREAD);
    block_engine(&q.pce, &bl);
    uint64_t sent = 0, used = 0;
    for (; sent < 10; sent++) {
        fill64(ofl_qout_slot(&q.o), sent);
        used += ofl_entry_used(ES, DOFF, len_for(sent, ES - DOFF));
    }
    ofl_qout_flush(&q.o);
    for (; sent < 15; sent++) {
        fill64(ofl_qout_slot(&q.o), sent);
        used += ofl_entry_used(ES, DOFF, len_for(sent, ES - DOFF));
    }
    int blocked = !ofl_ce_done(&bl.job);
    CHECK(ofl_qout_pending(&q.o) == 15 && q.o.ring.shm->tail == 0,
          "close: 10 entries in flight, 5 staged, none committed (copy %s running)",
          blocked ? "really still" : "no longer");
    CHECK(ofl_qout_close(&q.o) == 0, "close: closed with a copy in flight");
    CHECK(ofl_qout_pending(&q.o) == 0 && q.o.ring.pushed == 15 && q.o.ring.batches == 2 &&
              q.o.bytes == used && q.o.ring.shm->closed,
          "close: nothing left in flight, 15 committed in 2 doorbells, %llu bytes (%llu)",
          (unsigned long long)q.o.bytes, (unsigned long long)used);
    CHECK(ofl_qout_slot(&q.o) == NULL && q.o.err == -EINVAL, "close: no slots after close");
    unblock_engine(&q.pce, &bl);
    uint64_t got = 0, bad = 0;
    int n, done = 0;
    uint64_t t0 = ofl_now_ns();
    while (ofl_now_ns() - t0 < 5000000000ull) {
        const uint8_t *es;
        n = ofl_qin_next(&q.in, &es);
        if (n == OFL_Q_DONE) {
            done = 1;
            break;
        }
        if (n < 0) break;
        bad += check64(es, n, &got);
    }
    CHECK(done && got == 15 && bad == 0, "close: consumer gets all 15 in order, then done");
    qpair_close(&q);
}

/* THREAD engine, nobody consuming, two copies in flight when the peer dies: the
 * producer then blocked on the full ring gets -EPIPE from flush (how 0) or close
 * (how 1) within a second; the error sticks; nothing is left in flight or leaked. */
static void test_epipe_in_flight(int how)
{
    const char *what = how ? "close" : "flush";
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe created");
    size_t len;
    void *mem = ring_mem(8, 16, 4, &len);
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qout q;
    struct blocker bl;
    ofl_ce_start(&ce, OFL_CE_THREAD, -1);
    ofl_waiter_init(&w, &fds[0], 1, NULL);
    ofl_qout_init(&q, mem, len, &ce, &w);
    block_engine(&ce, &bl);
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 4; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&q))->len = 1;
        ofl_qout_flush(&q);
    }
    int blocked = !ofl_ce_done(&bl.job);
    CHECK(ofl_qout_pending(&q) == 8 && q.ring.shm->tail == 0,
          "%s: two copies in flight fill the ring (copies %s running)", what,
          blocked ? "really still" : "no longer");
    uint64_t t_event = ofl_now_ns();
    close(fds[1]);
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        struct ofl_entry_hdr *h = ofl_qout_slot(&q);
        if (!h) rc = q.err;
        else h->len = 2;
    }
    if (rc == 0) rc = how ? ofl_qout_close(&q) : ofl_qout_flush(&q);
    uint64_t t1 = ofl_now_ns();
    CHECK(rc == OFL_RING_EBROKEN, "%s with copies in flight, peer dead: %s (the ring "
          "broken: what it holds never drains)", what, ofl_strerror(rc));
    CHECK(t1 - t_event < 1000000000ull, "%s: within 1 s (%.3f ms)", what,
          (double)(t1 - t_event) / 1e6);
    CHECK(q.err == OFL_RING_EBROKEN && ofl_qout_slot(&q) == NULL &&
              ofl_qout_flush(&q) == OFL_RING_EBROKEN, "%s: the error sticks", what);
    CHECK(ofl_qout_close(&q) == OFL_RING_EBROKEN && q.inflight == 0 && !q.ring.shm->closed,
          "%s: close reports it, leaves nothing in flight, does not finish the ring", what);
    CHECK(q.ring.pushed == 8 && q.ring.full_waits >= 1,
          "%s: the 8 entries copied before were committed (%llu), the wait counted", what,
          (unsigned long long)q.ring.pushed);
    CHECK(q.lost == 12 && ofl_ring_broken_by(&q.ring) == OFL_RING_BROKEN_BY_CONSUMER,
          "%s: the 8 in the ring and the 4 staged counted lost (%llu), once", what,
          (unsigned long long)q.lost);
    ofl_qout_destroy(&q);
    unblock_engine(&ce, &bl);
    ofl_ce_stop(&ce);
    close(fds[0]);
    free(mem);
}

static void test_close_empty(void)
{
    size_t len;
    void *mem = ring_mem(8, 16, 4, &len);
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qout o;
    struct ofl_qin in;
    ofl_ce_start(&ce, OFL_CE_INLINE, -1);
    ofl_waiter_init(&w, NULL, 0, NULL);
    ofl_qout_init(&o, mem, len, &ce, &w);
    ofl_qin_init(&in, mem, len, &ce, &w);
    const uint8_t *es;
    CHECK(ofl_qin_next(&in, &es) == 0, "empty open queue: 0");
    CHECK(ofl_qout_close(&o) == 0, "close an empty queue");
    CHECK(ofl_qin_next(&in, &es) == OFL_Q_DONE, "closed empty queue: OFL_Q_DONE");
    CHECK(OFL_Q_DONE < 0 && !strcmp(ofl_strerror(OFL_Q_DONE), "queue finished"),
          "OFL_Q_DONE is negative, text '%s'", ofl_strerror(OFL_Q_DONE));
    ofl_qin_destroy(&in);
    ofl_qout_destroy(&o);
    free(mem);
}

/* ofl_qout_take: entries staged on one producer end (never flushed there) go to the end
 * of another's staging, after its own, in order, with their channel flags and used
 * bytes; the source is left empty and its ring never sees them; rings of another
 * layout are refused. */
static void test_take(void)
{
    struct qpair a, b, odd;
    qpair_open(&a, RING_SIZE, 64, BATCH, 16, OFL_CE_INLINE, OFL_CE_INLINE);
    qpair_open(&b, RING_SIZE, 64, BATCH, 16, OFL_CE_INLINE, OFL_CE_INLINE);
    qpair_open(&odd, RING_SIZE, 128, BATCH, 16, OFL_CE_INLINE, OFL_CE_INLINE);
    for (uint32_t i = 0; i < 9; i++) { /* 2 on b itself, then 7 staged on a */
        struct qpair *q = i < 2 ? &b : &a;
        uint8_t *e = ofl_qout_slot(&q->o);
        struct ofl_entry_hdr *h = (struct ofl_entry_hdr *)e;
        h->len = (uint16_t)(i * 5 % 48);
        h->flags = (uint16_t)(i % 3);
        memset(e + 16, (int)(0x40 + i), h->len);
    }
    CHECK(ofl_qout_slot(&odd.o) != NULL, "odd has a reservation open");
    CHECK(ofl_qout_take(&odd.o, &a.o) == -EINVAL, "another layout refused");
    CHECK(ofl_qout_next(&odd.o) == NULL, "and odd hands out no entry after that error");
    CHECK(ofl_qout_pending(&a.o) == 0, "the source is left empty even then");
    /* stage them again and take them for real */
    for (uint32_t i = 2; i < 9; i++) {
        uint8_t *e = ofl_qout_slot(&a.o);
        struct ofl_entry_hdr *h = (struct ofl_entry_hdr *)e;
        h->len = (uint16_t)(i * 5 % 48);
        h->flags = (uint16_t)(i % 3);
        memset(e + 16, (int)(0x40 + i), h->len);
    }
    CHECK(ofl_qout_take(&b.o, &a.o) == 0 && ofl_qout_pending(&a.o) == 0 &&
          ofl_qout_pending(&b.o) == 9, "7 entries taken after b's own 2");
    CHECK(ofl_qout_flush(&b.o) == 0 && ofl_qout_flush(&a.o) == 0, "both flushed");
    const uint8_t *es = NULL;
    int n = ofl_qin_next(&b.in, &es);
    int good = n == 9;
    for (int i = 0; good && i < 9; i++) {
        const uint8_t *e = es + (size_t)i * 64;
        const struct ofl_entry_hdr *h = (const struct ofl_entry_hdr *)e;
        good = h->len == (uint16_t)(i * 5 % 48) && h->flags == (uint16_t)(i % 3);
        for (uint32_t k = 0; good && k < h->len; k++) good = e[16 + k] == 0x40 + i;
    }
    CHECK(good, "b's ring delivers all 9 in order with their flags and bytes (%d)", n);
    CHECK(ofl_qin_next(&a.in, &es) == 0, "a's ring got nothing");
    qpair_close(&a);
    qpair_close(&b);
    qpair_close(&odd);
}

/* Write entry i of the reservation tests: len i, flags 1, the counter at +8. */
static void put(uint8_t *e, uint64_t i)
{
    ((struct ofl_entry_hdr *)e)->len = (uint16_t)i;
    ((struct ofl_entry_hdr *)e)->flags = 1;
    memcpy(e + 8, &i, 8);
}

/* Take everything ready from `in` and check it continues the stream at *next. */
static uint32_t drain(struct ofl_qin *in, uint64_t *next, uint32_t *bad)
{
    const uint8_t *es;
    uint32_t got = 0;
    for (int n; (n = ofl_qin_next(in, &es)) > 0;)
        for (int i = 0; i < n; i++, got++, (*next)++) {
            const uint8_t *e = es + (size_t)i * 16;
            uint64_t v;
            memcpy(&v, e + 8, 8);
            *bad += v != *next || ((const struct ofl_entry_hdr *)e)->len != (uint16_t)*next ||
                    ((const struct ofl_entry_hdr *)e)->flags != 1;
        }
    return got;
}

/* ofl_qout_reserve / ofl_qout_produce on one thread: a reservation never runs past
 * the staging buffer (partial batches: the rest comes from the next call), entries
 * produced arrive in order and those given back do not, the ring indices wrap many
 * times over (runs split at the ring's end), and misuse is one clear error. */
static void test_reserve(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    struct qpair q;
    qpair_open(&q, 16, 16, 8, 0, mode, mode);   /* 16 slots, batch 8 */
    uint32_t got = 0, bad = 0, delivered = 0, sizes_bad = 0;
    uint64_t sent = 0, next = 0;
    uint8_t *e = ofl_qout_reserve(&q.o, 5, &got);
    CHECK(e && got == 5, "%s: 5 of 5 reserved in an empty staging buffer (%u)", mn, got);
    for (uint32_t k = 0; k < 5; k++) put(e + k * 16, sent++);
    CHECK(ofl_qout_produce(&q.o, 5) == 0 && ofl_qout_pending(&q.o) == 5, "%s: 5 staged", mn);
    e = ofl_qout_reserve(&q.o, 10, &got);
    CHECK(e && got == 3, "%s: 10 asked, the 3 left in the batch given (%u)", mn, got);
    put(e, sent++);
    put(e + 16, 999);   /* reserved, written, but given back: never sent */
    CHECK(ofl_qout_produce(&q.o, 1) == 0 && ofl_qout_pending(&q.o) == 6,
          "%s: 1 of 3 produced, 6 staged", mn);
    /* Many rounds of odd sizes: runs wrap the 16-slot ring (indices pass 16 many times). */
    for (uint32_t round = 0; round < 40; round++) {
        uint32_t want = 1 + round % 11;
        e = ofl_qout_reserve(&q.o, want, &got);
        sizes_bad += !e || got < 1 || got > want || got > 8;
        if (!e) break;
        uint32_t keep = round % 4 == 3 ? got / 2 : got;
        for (uint32_t k = 0; k < got; k++) put(e + k * 16, k < keep ? sent + k : 777);
        sent += keep;
        sizes_bad += ofl_qout_produce(&q.o, keep) != 0;
        if (round % 3 == 2) qout_sync(&q.o);
        delivered += drain(&q.in, &next, &bad);
    }
    CHECK(sizes_bad == 0, "%s: every reservation 1..asked and within a batch, every "
          "produce accepted", mn);
    CHECK(qout_sync(&q.o) == 0, "%s: flushed", mn);
    delivered += drain(&q.in, &next, &bad);
    CHECK(delivered == sent && bad == 0 && q.o.ring.tail > 3 * 16,
          "%s: %u of %llu arrive in order, %u wrong; the ring wrapped (%u entries through 16 "
          "slots)", mn, delivered, (unsigned long long)sent, bad, q.o.ring.tail);
    /* Misuse: producing more than reserved, or asking for none. */
    e = ofl_qout_reserve(&q.o, 2, &got);
    CHECK(ofl_qout_produce(&q.o, got + 1) == -EINVAL && q.o.err == -EINVAL,
          "%s: producing past the reservation is -EINVAL and sticks", mn);
    CHECK(ofl_qout_reserve(&q.o, 1, &got) == NULL && got == 0, "%s: then no reservation", mn);
    qpair_close(&q);
    qpair_open(&q, 16, 16, 8, 0, mode, mode);
    CHECK(ofl_qout_reserve(&q.o, 0, &got) == NULL && got == 0 && q.o.err == -EINVAL,
          "%s: a reservation of 0 entries is -EINVAL", mn);
    qpair_close(&q);
    qpair_open(&q, 16, 16, 8, 0, mode, mode);
    CHECK(ofl_qout_close(&q.o) == 0 && ofl_qout_reserve(&q.o, 1, &got) == NULL &&
          q.o.err == -EINVAL, "%s: no reservation after close", mn);
    qpair_close(&q);
}

/* Reservations on a full ring: with drop_full the batch that finds no room is
 * dropped and counted, with fail_full the reservation that must flush it fails with
 * -EDEADLK; what fit arrives intact. */
static void test_reserve_full(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    for (int fail = 0; fail < 2; fail++) {
        struct qpair q;
        qpair_open(&q, 8, 16, 4, 0, mode, mode);   /* 8 slots, batch 4, no consumer */
        q.o.drop_full = !fail;
        q.o.fail_full = fail;
        uint64_t sent = 0;
        uint32_t got = 0;
        uint8_t *e = NULL;
        for (int r = 0; r < 4; r++) {   /* 4 batches of 4: the ring holds 2 of them */
            e = ofl_qout_reserve(&q.o, 4, &got);
            if (!e) break;
            for (uint32_t k = 0; k < got; k++) put(e + k * 16, sent++);
            ofl_qout_produce(&q.o, got);
        }
        if (fail) {
            CHECK(e == NULL && q.o.err == -EDEADLK,
                  "%s, fail_full: the reservation after the ring filled is -EDEADLK (%s)", mn,
                  ofl_strerror(q.o.err));
        } else {
            CHECK(e != NULL && qout_sync(&q.o) == 0 && q.o.ring.pushed == 8 &&
                      q.o.dropped == 8,
                  "%s, drop_full: 8 pushed, 8 dropped (%llu, %llu)", mn,
                  (unsigned long long)q.o.ring.pushed, (unsigned long long)q.o.dropped);
        }
        uint64_t next = 0;
        uint32_t bad = 0, n = drain(&q.in, &next, &bad);
        CHECK(n == 8 && bad == 0, "%s, %s: the 8 that fit arrive in order (%u, %u bad)", mn,
              fail ? "fail_full" : "drop_full", n, bad);
        qpair_close(&q);
    }
}

/* A torn or stale entry: a producer that publishes its tail before the entries are
 * in their slots (the slots still hold the previous lap's) is caught by the seq,
 * wherever the stale entry falls in the consumer's batch. */
static void test_torn(int mode)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    for (uint32_t at = 0; at < 8; at += 3) {   /* stale entry first, inside, last */
        struct qpair q;
        qpair_open(&q, 8, 16, 8, 0, mode, mode);
        uint64_t sent = 0, next = 0;
        uint32_t got = 0, bad = 0;
        for (int lap = 0; lap < 2; lap++) {   /* one full lap through the ring and back */
            uint8_t *e = ofl_qout_reserve(&q.o, 8, &got);
            for (uint32_t k = 0; k < got; k++) put(e + k * 16, sent++);
            ofl_qout_produce(&q.o, got);
            qout_sync(&q.o);
            drain(&q.in, &next, &bad);
        }
        CHECK(next == 16 && bad == 0, "%s: two laps of 8 delivered", mn);
        /* A faulty producer fills the next 8 slots (seq included) but the one at `at`,
         * which keeps the previous lap's entry, and publishes its tail. */
        struct ofl_ring *r = &q.o.ring;
        for (uint32_t k = 0; k < 8; k++) {
            if (k == at) continue;
            uint8_t *e = ofl_ring_slot(r, k);
            put(e, sent + k);
            ((struct ofl_entry_hdr *)e)->seq = r->tail + k + 1;
        }
        __atomic_store_n(&r->shm->tail, r->tail + 8, __ATOMIC_RELEASE);
        const uint8_t *es;
        int n = ofl_qin_next(&q.in, &es);
        CHECK(n == -EBADMSG, "%s: a stale entry at %u of the batch is -EBADMSG (%d)", mn, at, n);
        qpair_close(&q);
    }
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 300000;
    test_close_empty();
    test_take();
    test_reserve(OFL_CE_INLINE);
    test_reserve(OFL_CE_THREAD);
    test_reserve_full(OFL_CE_INLINE);
    test_reserve_full(OFL_CE_THREAD);
    test_torn(OFL_CE_INLINE);
    test_torn(OFL_CE_THREAD);
    test_corrupt(OFL_CE_INLINE);
    test_corrupt(OFL_CE_THREAD);
    test_broken_drop(OFL_CE_INLINE);
    test_broken_drop(OFL_CE_THREAD);
    test_break_on_failure(OFL_CE_INLINE);
    test_break_on_failure(OFL_CE_THREAD);
    test_close_then_break(OFL_CE_INLINE);
    test_close_then_break(OFL_CE_THREAD);
    test_break_then_close(OFL_CE_INLINE);
    test_break_then_close(OFL_CE_THREAD);
    test_close_break_race(OFL_CE_INLINE, 2000);
    test_close_break_race(OFL_CE_THREAD, 500);
    for (int res = 0; res < 2; res++) {
        test_broken_transfer(OFL_CE_INLINE, res);
        test_broken_transfer(OFL_CE_THREAD, res);
    }
    test_drop_full(OFL_CE_INLINE);
    test_drop_full(OFL_CE_THREAD);
    test_ce_jobs(OFL_CE_INLINE);
    test_ce_jobs(OFL_CE_THREAD);
    test_ce_seq(OFL_CE_INLINE);
    test_ce_seq(OFL_CE_THREAD);
    test_used_only(OFL_CE_INLINE);
    test_used_only(OFL_CE_THREAD);
    test_corrupt_len(OFL_CE_INLINE);
    test_corrupt_len(OFL_CE_THREAD);
    test_overlap_order();
    test_close_in_flight();
    for (int mode = 0; mode < 2; mode++) {
        for (int res = 0; res < 2; res++) {
            uint64_t m = res ? n / 4 : n;   /* reservations: a quarter as many */
            test_transfer(mode, 16, 0, m, res);
            test_transfer(mode, 256, 0, m, res);
            test_transfer(mode, 128, 16, m, res);      /* 16 B of header and fields, 112 data */
            test_transfer(mode, 24 + 1536, 24, m / 4, res); /* a 1536-byte MTU */
            /* Rings smaller than two batches (the thread engine's copy in flight holds
             * slots while the next batch waits for space), partial-batch flushes. */
            test_transfer_geo(mode, 16, 0, m / 16, 16, 12, 5, res);
            test_transfer_geo(mode, 128, 24, m / 16, 16, 12, 7, res);
            test_transfer_geo(mode, 64, 16, m / 32, 8, 8, 3, res);   /* batch == ring size */
            test_transfer_geo(mode, 32, 16, m / 32, 4, 3, 2, res);
        }
    }
    test_peer_death_qin();
    test_peer_death_consumer_up(OFL_CE_INLINE);
    test_peer_death_consumer_up(OFL_CE_THREAD);
    test_blocked_qout(0);
    test_blocked_qout(1);
    test_epipe_in_flight(0);
    test_epipe_in_flight(1);
    return CHECK_DONE();
}
