/* Ring tests: geometry and data_off checks, used bytes of an entry, exactly-once
 * in-order delivery across two threads under backpressure, seq corruption, finish
 * after close and drain, doorbells held back for a link's latency.
 * Usage: test_ring [ENTRIES]  (default 1000000) */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/ring.h"
#include "offlow/wait.h"

/* Aligned, zeroed ring memory. */
static void *ring_mem(uint32_t size, uint32_t es, size_t *len)
{
    *len = ofl_ring_mem_size(size, es);
    void *m = aligned_alloc(64, *len);
    memset(m, 0xa5, *len);
    return m;
}

static void test_format(void)
{
    size_t len;
    uint8_t *m = ring_mem(64, 64, &len);
    CHECK(ofl_ring_mem_size(8, 16) % 64 == 0 && ofl_ring_mem_size(8, 16) >= 8 * 16 + 192,
          "mem_size is 64-aligned and holds header + entries (%zu)", ofl_ring_mem_size(8, 16));
    CHECK(ofl_ring_format(m, len, 0, 16, 1, 0) == -EINVAL, "size 0 rejected");
    CHECK(ofl_ring_format(m, len, 1, 16, 1, 0) == -EINVAL, "size 1 rejected");
    CHECK(ofl_ring_format(m, len, 6, 16, 1, 0) == -EINVAL, "size 6 (not a power of two) rejected");
    CHECK(ofl_ring_format(m, len, 8, 0, 1, 0) == -EINVAL, "entry_size 0 rejected");
    CHECK(ofl_ring_format(m, len, 8, 4, 1, 0) == -EINVAL, "entry_size 4 rejected");
    CHECK(ofl_ring_format(m, len, 8, 12, 1, 0) == -EINVAL, "entry_size 12 rejected");
    CHECK(ofl_ring_format(m, len, 8, 16, 0, 0) == -EINVAL, "batch 0 rejected");
    CHECK(ofl_ring_format(m, len, 8, 16, 9, 0) == -EINVAL, "batch > size rejected");
    CHECK(ofl_ring_format(m, ofl_ring_mem_size(8, 16) - 1, 8, 16, 4, 0) == -EINVAL,
          "too little memory rejected");
    CHECK(ofl_ring_format(m + 8, len - 8, 8, 16, 4, 0) == -EINVAL, "unaligned memory rejected");
    struct ofl_ring r;
    CHECK(ofl_ring_attach(&r, m, len) == -EINVAL, "attach to unformatted memory rejected");
    CHECK(ofl_ring_format(m, len, 8, 16, 4, 0) == 0, "size 8, entry 16, batch 4 accepted");
    CHECK(ofl_ring_attach(&r, m, ofl_ring_mem_size(8, 16) - 64) == -EINVAL,
          "attach with too short a length rejected");
    CHECK(ofl_ring_attach(&r, m, len) == 0 && r.size == 8 && r.entry_size == 16 && r.batch == 4,
          "attach reads the geometry");
    CHECK(ofl_ring_free(&r) == 8 && ofl_ring_ready(&r) == 0, "a new ring is empty");
    CHECK(r.data_off == 0, "data_off 0 read back");
    free(m);
}

static void test_data_off(void)
{
    size_t len;
    uint8_t *m = ring_mem(8, 64, &len);
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 4) == -EINVAL, "data_off 4 (< 8) rejected");
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 12) == -EINVAL, "data_off 12 (not 8k) rejected");
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 72) == -EINVAL, "data_off > entry_size rejected");
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 64) == 0, "data_off == entry_size accepted");
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 8) == 0, "data_off 8 accepted");
    CHECK(ofl_ring_format(m, len, 8, 64, 4, 24) == 0, "data_off 24 accepted");
    struct ofl_ring r;
    CHECK(ofl_ring_attach(&r, m, len) == 0 && r.data_off == 24, "attach reads data_off (%u)",
          r.data_off);
    ((struct ofl_ring_shm *)m)->data_off = 20;
    CHECK(ofl_ring_attach(&r, m, len) == -EINVAL, "attach rejects a bad data_off in the header");
    ((struct ofl_ring_shm *)m)->data_off = 80;
    CHECK(ofl_ring_attach(&r, m, len) == -EINVAL, "attach rejects data_off > entry_size");
    free(m);

    CHECK(ofl_entry_used(64, 0, 0) == 64 && ofl_entry_used(64, 0, 60000) == 64,
          "data_off 0: the whole entry, whatever len says");
    CHECK(ofl_entry_used(64, 24, 0) == 24, "len 0: header and fields only");
    CHECK(ofl_entry_used(64, 24, 1) == 32 && ofl_entry_used(64, 24, 7) == 32 &&
              ofl_entry_used(64, 24, 8) == 32 && ofl_entry_used(64, 24, 9) == 40,
          "len rounded up to 8");
    CHECK(ofl_entry_used(64, 24, 40) == 64, "max len: the whole entry");
    CHECK(ofl_entry_used(64, 24, 41) == 64 && ofl_entry_used(64, 24, 65535) == 64,
          "len past the entry: clamped");
    CHECK(ofl_entry_used(64, 64, 0) == 64 && ofl_entry_used(64, 64, 5) == 64,
          "data_off == entry_size: no packet bytes");
    CHECK(ofl_entry_used(0xfffffff8u, 0xfffffff0u, 65535) == 0xfffffff8u,
          "no overflow near UINT32_MAX");
    CHECK(ofl_entry_len_ok(64, 24, 40) && !ofl_entry_len_ok(64, 24, 41) &&
              ofl_entry_len_ok(64, 0, 65535) && ofl_entry_len_ok(64, 64, 0) &&
              !ofl_entry_len_ok(64, 64, 1),
          "len fits the packet area or not");
}

static void test_seq_and_finish(void)
{
    size_t len;
    uint8_t *m = ring_mem(8, 16, &len);
    struct ofl_ring p, c;
    ofl_ring_format(m, len, 8, 16, 4, 0);
    ofl_ring_attach(&p, m, len);
    ofl_ring_attach(&c, m, len);
    CHECK(!ofl_ring_finished(&c), "not finished before close (empty)");
    for (uint32_t i = 0; i < 3; i++) memset(ofl_ring_slot(&p, i), 0, 16);
    ofl_ring_commit(&p, 3);
    CHECK(p.pushed == 3 && p.batches == 1, "one commit of 3 = one doorbell");
    CHECK(ofl_ring_ready(&c) == 3, "3 ready");
    /* Corrupt the seq of the second entry. */
    ((struct ofl_entry_hdr *)ofl_ring_slot(&p, (uint32_t)-2))->seq = 77;
    CHECK(ofl_ring_peek(&c, 0) != NULL && ofl_ring_check(&c, 0) == 0, "entry 0 has a good seq");
    CHECK(ofl_ring_check(&c, 1) == -EBADMSG, "corrupted seq: check gives -EBADMSG");
    CHECK(ofl_ring_peek(&c, 1) == NULL && c.err == -EBADMSG, "corrupted seq: peek NULL, err set");
    ((struct ofl_entry_hdr *)ofl_ring_slot(&p, (uint32_t)-2))->seq = 2;
    ofl_ring_close(&p);
    CHECK(!ofl_ring_finished(&c), "closed but not drained: not finished");
    ofl_ring_release(&c, 2);
    CHECK(!ofl_ring_finished(&c), "closed, 1 left: not finished");
    ofl_ring_release(&c, 1);
    CHECK(ofl_ring_finished(&c) && c.popped == 3, "closed and drained: finished");
    free(m);
}

/* A producer with a 50 ms delay: the consumer sees a batch only once its delay has
 * passed since its commit (a lower bound by the clock: a late look, after a preemption,
 * may only see it later), and close publishes the held ones in their time. */
static void test_held_doorbells(void)
{
    const uint64_t delay = 50000000u;
    size_t len;
    uint8_t *m = ring_mem(8, 16, &len);
    struct ofl_ring p, c;
    ofl_ring_format(m, len, 8, 16, 4, 0);
    ofl_ring_attach(&p, m, len);
    ofl_ring_attach(&c, m, len);
    ofl_ring_set_delay(&p, delay);
    for (uint32_t i = 0; i < 4; i++) memset(ofl_ring_slot(&p, i), 0, 16);
    uint64_t t0 = ofl_now_ns();
    ofl_ring_commit(&p, 4);
    CHECK(p.batches == 1 && p.held_n == 1, "a commit with a delay holds its doorbell");
    uint32_t seen = ofl_ring_ready(&c);
    CHECK(seen == 0 || ofl_now_ns() - t0 >= delay, "nothing ready before the delay");
    uint64_t saw = 0;
    while (!ofl_ring_ready(&c)) {
        ofl_ring_publish_due(&p);
        saw = ofl_now_ns();
    }
    CHECK(saw - t0 >= delay, "the batch published no sooner than its delay");
    CHECK(ofl_ring_ready(&c) == 4 && p.held_n == 0, "then all 4 ready, nothing held");
    ofl_ring_release(&c, 4);
    for (uint32_t i = 0; i < 2; i++) memset(ofl_ring_slot(&p, i), 0, 16);
    uint64_t t1 = ofl_now_ns();
    ofl_ring_commit(&p, 2);
    ofl_ring_close(&p);
    CHECK(ofl_now_ns() - t1 >= delay, "close waits for the held doorbell's time");
    CHECK(ofl_ring_ready(&c) == 2, "and publishes it");
    ofl_ring_release(&c, 2);
    CHECK(ofl_ring_finished(&c), "closed and drained: finished");
    free(m);
}

struct pc {
    struct ofl_ring r;
    uint64_t n;        /* entries to move */
    uint64_t got, bad; /* consumer: received, out of order */
    int err;
};

static void *producer(void *arg)
{
    struct pc *x = arg;
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    uint64_t next = 0;
    while (next < x->n) {
        uint32_t f = ofl_ring_free(&x->r);
        if (!f) {
            x->r.full_waits++;
            ofl_wait(&w);
            continue;
        }
        ofl_waiter_progress(&w);
        uint32_t n = f < x->r.batch ? f : x->r.batch;
        if (n > x->n - next) n = (uint32_t)(x->n - next);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t *e = ofl_ring_slot(&x->r, i);
            e[1] = next + i;
        }
        ofl_ring_commit(&x->r, n);
        next += n;
    }
    ofl_ring_close(&x->r);
    return NULL;
}

static void *consumer(void *arg)
{
    struct pc *x = arg;
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    for (;;) {
        uint32_t n = ofl_ring_ready(&x->r);
        if (!n) {
            if (ofl_ring_finished(&x->r)) break;
            ofl_wait(&w);
            continue;
        }
        ofl_waiter_progress(&w);
        for (uint32_t i = 0; i < n; i++) {
            const uint64_t *e = ofl_ring_peek(&x->r, i);
            if (!e) {
                x->err = x->r.err;
                return NULL;
            }
            if (e[1] != x->got) x->bad++;
            x->got++;
        }
        ofl_ring_release(&x->r, n);
    }
    return NULL;
}

static void test_threads(uint64_t n)
{
    size_t len;
    void *m = ring_mem(8, 16, &len);
    struct pc p = { .n = n }, c = { .n = n };
    ofl_ring_format(m, len, 8, 16, 4, 0);
    ofl_ring_attach(&p.r, m, len);
    ofl_ring_attach(&c.r, m, len);
    pthread_t tp, tc;
    pthread_create(&tc, NULL, consumer, &c);
    pthread_create(&tp, NULL, producer, &p);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    CHECK(c.err == 0, "two threads: no seq error");
    CHECK(c.got == n, "two threads: received %llu of %llu", (unsigned long long)c.got,
          (unsigned long long)n);
    CHECK(c.bad == 0, "two threads: all in order, exactly once (%llu out of place)",
          (unsigned long long)c.bad);
    CHECK(p.r.pushed == n && c.r.popped == n, "counters: pushed %llu popped %llu",
          (unsigned long long)p.r.pushed, (unsigned long long)c.r.popped);
    CHECK(p.r.occupancy_max <= 8 && c.r.occupancy_max <= 8, "occupancy never above the size");
    printf("info: doorbells %llu, full waits %llu, mean occupancy %.2f\n",
           (unsigned long long)p.r.batches, (unsigned long long)p.r.full_waits,
           c.r.samples ? (double)c.r.occupancy_sum / (double)c.r.samples : 0.0);
    free(m);
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    test_format();
    test_data_off();
    test_seq_and_finish();
    test_held_doorbells();
    test_threads(n);
    return CHECK_DONE();
}
