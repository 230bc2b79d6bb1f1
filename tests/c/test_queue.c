/* Queue tests: qout -> qin across two threads with inline and thread copy engines,
 * 16- and 256-byte entries, exactly once and in order; a dead peer and the abort
 * word end waits with -EPIPE / -ECANCELED; a corrupted entry gives -EBADMSG.
 * Usage: test_queue [ENTRIES]  (default 300000 per configuration) */
#include <errno.h>
#include <pthread.h>
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

static void *ring_mem(uint32_t size, uint32_t es, uint32_t batch, size_t *len)
{
    *len = ofl_ring_mem_size(size, es);
    void *m = aligned_alloc(64, *len);
    ofl_ring_format(m, *len, size, es, batch);
    return m;
}

/* Byte k of the payload of entry i. */
static uint8_t pattern(uint64_t i, size_t k)
{
    return (uint8_t)(i * 31 + k * 7);
}

struct side {
    void *mem;
    size_t len;
    int mode;
    uint32_t es;
    uint64_t n;
    uint64_t got, bad;
    int err;
    struct ofl_ring ring;   /* copy of the endpoint's counters at the end */
};

static void *producer(void *arg)
{
    struct side *s = arg;
    struct ofl_ce ce;
    struct ofl_waiter w;
    struct ofl_qout q;
    ofl_waiter_init(&w, NULL, 0, NULL);
    if ((s->err = ofl_ce_start(&ce, s->mode, -1)) < 0) return NULL;
    if ((s->err = ofl_qout_init(&q, s->mem, s->len, &ce, &w)) < 0) return NULL;
    for (uint64_t i = 0; i < s->n; i++) {
        uint8_t *e = ofl_qout_slot(&q);
        if (!e) {
            s->err = q.err;
            break;
        }
        ((struct ofl_entry_hdr *)e)->len = (uint16_t)i;
        memcpy(e + 8, &i, 8);
        for (size_t k = 16; k < s->es; k++) e[k] = pattern(i, k);
        /* Flush at odd points too, not only at full batches. */
        if (i % 37 == 0 && (s->err = ofl_qout_flush(&q)) < 0) break;
    }
    if (!s->err) s->err = ofl_qout_close(&q);
    s->ring = q.ring;
    ofl_qout_destroy(&q);
    ofl_ce_stop(&ce);
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
            int ok = v == s->got && ((const struct ofl_entry_hdr *)e)->len == (uint16_t)v;
            for (size_t k = 16; ok && k < s->es; k++) ok = e[k] == pattern(v, k);
            if (!ok) s->bad++;
            s->got++;
        }
    }
    s->ring = q.ring;
    ofl_qin_destroy(&q);
    ofl_ce_stop(&ce);
    return NULL;
}

static void test_transfer(int mode, uint32_t es, uint64_t n)
{
    const char *mn = mode == OFL_CE_THREAD ? "thread" : "inline";
    struct side p = { .mode = mode, .es = es, .n = n }, c;
    p.mem = ring_mem(RING_SIZE, es, BATCH, &p.len);
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
    printf("info: %s %uB: doorbells %llu full_waits %llu, %.1f ms\n", mn, es,
           (unsigned long long)p.ring.batches, (unsigned long long)p.ring.full_waits,
           (double)(ofl_now_ns() - t0) / 1e6);
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
    int want = mode == 0 ? -EPIPE : -ECANCELED;
    CHECK(rc == want, "producer blocked on a full ring: %s (want %s)", ofl_strerror(rc),
          ofl_strerror(want));
    CHECK(t1 - d.t_event < 1000000000ull, "within 1 s (%.3f ms)", (double)(t1 - d.t_event) / 1e6);
    CHECK(q.err == want && ofl_qout_slot(&q) == NULL, "the error sticks");
    CHECK(q.ring.full_waits >= 1, "the wait counted in full_waits (%llu)",
          (unsigned long long)q.ring.full_waits);
    CHECK(ofl_wait(&w) == want, "ofl_wait itself reports it too");
    ofl_qout_destroy(&q);
    close(fds[0]);
    if (mode) close(fds[1]);
    free(mem);
}

static void test_corrupt(int mode)
{
    size_t len;
    void *mem = ring_mem(RING_SIZE, 16, BATCH, &len);
    struct ofl_ce pce, cce;
    struct ofl_waiter w;
    struct ofl_qout o;
    struct ofl_qin in;
    ofl_ce_start(&pce, mode, -1);
    ofl_ce_start(&cce, mode, -1);
    ofl_waiter_init(&w, NULL, 0, NULL);
    ofl_qout_init(&o, mem, len, &pce, &w);
    ofl_qin_init(&in, mem, len, &cce, &w);
    for (int i = 0; i < 40; i++) ((struct ofl_entry_hdr *)ofl_qout_slot(&o))->len = (uint16_t)i;
    ofl_qout_flush(&o);
    /* Damage entry 20 (in the second batch the consumer takes). */
    ((struct ofl_entry_hdr *)(o.ring.entries + 20 * 16))->seq ^= 0x100;
    const uint8_t *es;
    int n1 = ofl_qin_next(&in, &es);
    int n2 = ofl_qin_next(&in, &es);
    CHECK(n1 == (int)BATCH, "%s: first batch intact (%d)", mode ? "thread" : "inline", n1);
    CHECK(n2 == -EBADMSG, "%s: corrupted entry reported: %s", mode ? "thread" : "inline",
          ofl_strerror(n2));
    CHECK(ofl_qin_next(&in, &es) == -EBADMSG, "the error sticks");
    ofl_qin_destroy(&in);
    ofl_qout_destroy(&o);
    ofl_ce_stop(&pce);
    ofl_ce_stop(&cce);
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

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 300000;
    test_close_empty();
    test_corrupt(OFL_CE_INLINE);
    test_corrupt(OFL_CE_THREAD);
    for (int mode = 0; mode < 2; mode++) {
        test_transfer(mode, 16, n);
        test_transfer(mode, 256, n);
    }
    test_peer_death_qin();
    test_blocked_qout(0);
    test_blocked_qout(1);
    return CHECK_DONE();
}
