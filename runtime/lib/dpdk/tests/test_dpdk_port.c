/* The dpdk source and sink (runtime/lib/dpdk/src/dpdk_port.c) on DPDK's net_ring PMD,
 * whose TX queue feeds its own RX queue (a loopback: no NIC, no hugepages):
 *   - frames written to the sink come back through the source, byte for byte;
 *   - zero copy: a packet the source delivered points into its mbuf, and sent back as
 *     it is (changed in place, moved, shortened) it comes round in the same buffer,
 *     written one at a time or as a batch's burst (write_burst);
 *   - packets the program drops are given back to the pool (none leaks over rounds);
 *   - counters: a frame longer than the source's mtu (dropped), one longer than an
 *     mbuf (refused by the sink), a full TX ring (refused, counted, none lost);
 *   - bad arguments, each one clear error: no port=, a second set of arguments for an
 *     open device, more cores than TX queues, more cores than a source reads; a
 *     driver that does not exist (in a child process: the EAL is one per process).
 * Usage: test_dpdk_port */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "offlow/dpdk_port.h"
#include "offlow/gen.h"
#include "offlow/src.h"

#define MTU 1600u
#define BATCH 32u
#define NFRAMES 40u

static struct ofl_args args_of(const char *spec_rx, const char *spec_tx)
{
    static char *argv[10];
    static char rx[128], tx[128];
    int argc = 0;
    argv[argc++] = "test";
    argv[argc++] = "--window";
    argv[argc++] = "unused";
    snprintf(rx, sizeof rx, "rx.port=%s", spec_rx);
    snprintf(tx, sizeof tx, "tx.port=%s", spec_tx);
    argv[argc++] = "--opt";
    argv[argc++] = rx;
    argv[argc++] = "--opt";
    argv[argc++] = tx;
    argv[argc] = NULL;
    struct ofl_args a;
    memset(&a, 0, sizeof a);
    if (ofl_args_parse(&a, argc, argv, "test") < 0) {
        fprintf(stderr, "bad test arguments\n");
        exit(2);
    }
    return a;
}

static struct ofl_src_opts src_opts(unsigned part, unsigned nparts)
{
    return (struct ofl_src_opts){ .part = part, .nparts = nparts, .mtu = MTU };
}

/* Frame i: its length and a pattern of its index. */
static uint32_t frame_len(unsigned i)
{
    return 60u + (i * 97u) % 1400u;
}

static void fill(uint8_t *f, unsigned i)
{
    for (uint32_t k = 0; k < frame_len(i); k++) f[k] = (uint8_t)(i * 31u + k);
}

/* Read until `want` packets came or the source stays empty; hand each batch to `fn`
 * (which may send packets back) before the next call, as a segment's turn does. */
typedef void (*batch_fn)(struct ofl_pkt *p, int n, unsigned first, void *arg);
static unsigned drain(struct ofl_src *s, uint8_t *bufs, unsigned want, batch_fn fn, void *arg)
{
    struct ofl_pkt pkts[BATCH];
    unsigned got = 0;
    for (int idle = 0; got < want && idle < 100000;) {
        int n = ofl_src_next(s, pkts, bufs, want - got < BATCH ? want - got : BATCH);
        if (n < 0) {
            printf("source error %d: %s\n", n, s->error);
            break;
        }
        if (n == 0) {
            idle++;
            continue;
        }
        if (fn) fn(pkts, n, got, arg);
        got += (unsigned)n;
    }
    return got;
}

struct round {
    struct ofl_port_sink *k;
    uint8_t *bufs;
    uint8_t *where[NFRAMES];     /* where each packet's data was */
    unsigned bad_data, in_bufs, send_every;
    int change;                  /* 1: change each frame in place before sending it */
    int burst;                   /* 1: send the batch's packets in one write_burst */
};

static void check_and_send(struct ofl_pkt *p, int n, unsigned first, void *arg)
{
    struct round *r = arg;
    struct ofl_pkt *burst[BATCH];
    uint32_t nburst = 0;
    for (int j = 0; j < n; j++) {
        unsigned i = first + (unsigned)j;
        uint8_t want[2048];
        fill(want, i);
        if (r->change == 2) {  /* the second lap: what the first lap made of it */
            want[2] = 0xEE;
            if (p[j].len != frame_len(i) - 2 - (i % 2) * 4 || memcmp(p[j].data, want + 2, 1) ||
                memcmp(p[j].data + 1, want + 3, p[j].len - 1))
                r->bad_data++;
        } else if (p[j].len != frame_len(i) || memcmp(p[j].data, want, p[j].len)) {
            r->bad_data++;
        }
        if (p[j].data >= r->bufs && p[j].data < r->bufs + BATCH * MTU) r->in_bufs++;
        if (i < NFRAMES) r->where[i] = p[j].data;
        if (r->change == 1) {  /* as a body would: strip 2 bytes, mark one, cut odd ones */
            p[j].data[2] = 0xEE;
            p[j].data += 2;
            p[j].len -= 2 + (i % 2) * 4;
        }
        if (r->send_every && i % r->send_every == 0) {
            if (r->burst) burst[nburst++] = &p[j];
            else r->k->ops->write(r->k, 0, &p[j]);
        }
    }
    if (nburst) r->k->ops->write_burst(r->k, 0, burst, nburst);
    r->k->ops->flush(r->k, 0);
}

static void test_loopback(void)
{
    struct ofl_args a = args_of("net_ring0", "net_ring0");
    char err[256] = "";
    struct ofl_port_sink *k = NULL;
    struct ofl_src *s = NULL;
    int rc = ofl_dpdk_sink_open(&k, &a, "tx", 1, err);
    CHECK(rc == 0, "sink on net_ring0 opens (%d %s)", rc, err);
    struct ofl_src_opts o = src_opts(0, 1);
    rc = ofl_dpdk_src_open(&s, &a, "rx", &o, err);
    CHECK(rc == 0, "source on net_ring0 opens (%d %s)", rc, err);
    if (!k || !s) return;

    /* Bad arguments once the port is open: each one clear error, nothing changed. */
    struct ofl_args b = args_of("net_ring0,nodeaction=r0:0:CREATE", "net_ring0");
    struct ofl_src *s2 = NULL;
    rc = ofl_dpdk_src_open(&s2, &b, "rx", &o, err);
    CHECK(rc == -EINVAL && strstr(err, "device net_ring0 is opened twice with other arguments"),
          "a device opened again with other arguments: %d '%s'", rc, err);
    a = args_of("net_ring0", "net_ring0");  /* (args_of's strings are one set) */
    struct ofl_port_sink *k2 = NULL;
    rc = ofl_dpdk_sink_open(&k2, &a, "tx", 40, err);
    CHECK(rc == -EINVAL && strstr(err, "TX queues; this process needs 1 and 41 (one per core"),
          "a sink of more cores than the port has TX queues: %d '%s'", rc, err);
    struct ofl_src_opts many = src_opts(0, 17);
    rc = ofl_dpdk_src_open(&s2, &a, "rx", &many, err);
    CHECK(rc == -EINVAL && strstr(err, "at most 16 RX queues"),
          "17 cores: %d '%s'", rc, err);

    uint8_t *bufs = malloc(BATCH * MTU);
    uint8_t frame[4096];
    for (unsigned i = 0; i < NFRAMES; i++) {
        fill(frame, i);
        k->ops->write(k, 0, &(struct ofl_pkt){ frame, frame_len(i), frame_len(i), 0, 0 });
    }
    k->ops->flush(k, 0);
    /* First lap: copied in by the sink, read in place, changed and sent back. */
    struct round r1 = { .k = k, .bufs = bufs, .send_every = 1, .change = 1 };
    unsigned got = drain(s, bufs, NFRAMES, check_and_send, &r1);
    CHECK(got == NFRAMES && r1.bad_data == 0, "lap 1: %u of %u frames, %u differ", got,
          NFRAMES, r1.bad_data);
    CHECK(r1.in_bufs == 0, "lap 1: every packet points into its mbuf (%u copied to bufs)",
          r1.in_bufs);
    /* Second lap: the frames as the first lap changed them, in the same buffers; sent
     * back a batch at a time (write_burst). */
    struct round r2 = { .k = k, .bufs = bufs, .change = 2, .send_every = 1, .burst = 1 };
    got = drain(s, bufs, NFRAMES, check_and_send, &r2);
    unsigned same = 0;
    for (unsigned i = 0; i < NFRAMES; i++) same += r2.where[i] == r1.where[i] + 2;
    CHECK(got == NFRAMES && r2.bad_data == 0, "lap 2: %u frames, %u differ", got, r2.bad_data);
    CHECK(same == NFRAMES, "zero copy: %u of %u frames came round in the buffer they left in",
          same, NFRAMES);
    /* Third lap: the bursts came round as they were, in order, in the same buffers. */
    struct round r3 = { .k = k, .bufs = bufs, .change = 2 };
    got = drain(s, bufs, NFRAMES, check_and_send, &r3);
    same = 0;
    for (unsigned i = 0; i < NFRAMES; i++) same += r3.where[i] == r1.where[i] + 2;
    CHECK(got == NFRAMES && r3.bad_data == 0, "lap 3 (sent in bursts): %u frames, %u differ",
          got, r3.bad_data);
    CHECK(same == NFRAMES, "zero copy in bursts: %u of %u frames in the buffer they left in",
          same, NFRAMES);

    /* Drops give the mbufs back: 200 rounds of 40 frames, every third one sent on. */
    unsigned before = ofl_dpdk_mbufs_in_use();
    unsigned total = 0;
    for (unsigned round = 0; round < 200; round++) {
        for (unsigned i = 0; i < NFRAMES; i++) {
            fill(frame, i);
            k->ops->write(k, 0, &(struct ofl_pkt){ frame, frame_len(i), frame_len(i), 0, 0 });
        }
        k->ops->flush(k, 0);
        struct round r = { .k = k, .bufs = bufs, .send_every = 3 };
        total += drain(s, bufs, NFRAMES, check_and_send, &r);
        total += drain(s, bufs, (NFRAMES + 2) / 3, NULL, NULL);  /* the ones sent on */
    }
    drain(s, bufs, 1, NULL, NULL);
    unsigned after = ofl_dpdk_mbufs_in_use();
    CHECK(total == 200 * (NFRAMES + (NFRAMES + 2) / 3),
          "drop rounds: %u packets read", total);
    CHECK(after <= before + BATCH, "dropped packets' mbufs go back to the pool: %u in use "
          "before, %u after 8,000 drops", before, after);

    /* Counters. */
    uint64_t refused0 = k->ops->dropped(k), dropped0 = s->dropped;
    memset(frame, 7, sizeof frame);
    k->ops->write(k, 0, &(struct ofl_pkt){ frame, 3000, 3000, 0, 0 });
    k->ops->write(k, 0, &(struct ofl_pkt){ frame, MTU + 100, MTU + 100, 0, 0 });
    k->ops->flush(k, 0);
    got = drain(s, bufs, 1, NULL, NULL);
    CHECK(k->ops->dropped(k) == refused0 + 1, "a frame longer than an mbuf: refused, counted "
          "(%llu)", (unsigned long long)(k->ops->dropped(k) - refused0));
    CHECK(got == 0 && s->dropped == dropped0 + 1, "a frame longer than the mtu: dropped, "
          "counted (%llu), not delivered (%u)", (unsigned long long)(s->dropped - dropped0), got);
    refused0 = k->ops->dropped(k);
    const unsigned many_frames = 3000;
    for (unsigned i = 0; i < many_frames; i++) {
        fill(frame, i);
        k->ops->write(k, 0, &(struct ofl_pkt){ frame, 64, 64, 0, 0 });
    }
    k->ops->flush(k, 0);
    unsigned refused = (unsigned)(k->ops->dropped(k) - refused0);
    got = drain(s, bufs, many_frames, NULL, NULL);
    CHECK(refused > 0 && got + refused == many_frames, "a full TX ring: %u refused and counted, "
          "%u delivered, of %u", refused, got, many_frames);
    ofl_src_close(s);
    k->ops->close(k);
    free(bufs);
}

/* In a child (the EAL is once per process): a driver DPDK does not have. */
static void test_no_such_driver(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct ofl_args a = args_of("net_nosuchdriver0", "net_nosuchdriver0");
        struct ofl_src_opts o = src_opts(0, 1);
        struct ofl_src *s = NULL;
        char err[256] = "";
        int rc = ofl_dpdk_src_open(&s, &a, "rx", &o, err);
        printf("no such driver: %d '%s'\n", rc, err);
        fflush(stdout);
        _exit(rc < 0 && !s && !strncmp(err, "DPDK", 4) ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a driver DPDK lacks: one error naming DPDK");
}

int main(void)
{
    struct ofl_args a = args_of("", "");
    char err[256] = "";
    struct ofl_src_opts o = src_opts(0, 1);
    struct ofl_src *s = NULL;
    struct ofl_port_sink *k = NULL;
    int rc = ofl_dpdk_src_open(&s, &a, "rx", &o, err);
    CHECK(rc == -EINVAL && !strcmp(err, "kind=dpdk needs port=ARGS"), "no port=: '%s'", err);
    rc = ofl_dpdk_sink_open(&k, &a, "tx", 1, err);
    CHECK(rc == -EINVAL && !strcmp(err, "kind=dpdk needs port=ARGS"), "sink, no port=: '%s'",
          err);
    test_no_such_driver();
    test_loopback();
    return CHECK_DONE();
}
