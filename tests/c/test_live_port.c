/* The afpacket source and sink (runtime/core/src/live_port.c) on a veth pair the caller
 * made (tests/test_ports_c.py: in a network namespace of its own):
 *   - frames a sink writes on one end are read by a source on the other, byte for byte;
 *   - a source sees only frames that arrive, not those sent from its interface;
 *   - two sources of one segment (a fanout group) share the frames: each once;
 *   - counters: a frame longer than the source's mtu (dropped), one longer than the
 *     interface takes (refused by the sink);
 *   - bad arguments, each one clear error: an interface that is not there, mtu 0, a
 *     part outside its parts.
 * Usage: test_live_port IFACE_A IFACE_B (the two ends of a veth pair, up) */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "offlow/live_port.h"
#include "offlow/src.h"

#define MTU 2048u
#define BATCH 32u
#define NFRAMES 300u
#define MARK "OFLT"          /* after the IPv4 and UDP headers: one of our frames */

/* Frame i: broadcast, IPv4/UDP from 10.0.i (the fanout hashes the flow; the
 * interfaces have no address, so the kernel keeps none), MARK, then a pattern of i; its
 * length varies. The source MAC holds i. */
static uint32_t frame(uint8_t *f, unsigned i)
{
    uint32_t len = 60u + (i * 37u) % 1400u;
    memset(f, 0, len);
    memset(f, 0xFF, 6);
    f[6] = 0x02, f[9] = (uint8_t)(i >> 16), f[10] = (uint8_t)(i >> 8), f[11] = (uint8_t)i;
    f[12] = 0x08, f[13] = 0x00;
    uint8_t *ip = f + 14;
    ip[0] = 0x45, ip[2] = (uint8_t)((len - 14) >> 8), ip[3] = (uint8_t)(len - 14);
    ip[8] = 64, ip[9] = 17;
    ip[12] = 10, ip[14] = (uint8_t)(i >> 8), ip[15] = (uint8_t)i;
    ip[16] = 10, ip[17] = 255, ip[19] = 1;
    uint8_t *udp = ip + 20;
    udp[0] = 0x30, udp[1] = (uint8_t)i, udp[3] = 53;
    udp[4] = (uint8_t)((len - 34) >> 8), udp[5] = (uint8_t)(len - 34);
    memcpy(udp + 8, MARK, 4);
    for (uint32_t k = 46; k < len; k++) f[k] = (uint8_t)(i * 7u + k);
    return len;
}

/* Index of our frame `p` if it is one, byte for byte; -1 if it is not ours, -2 if
 * it is ours but differs. */
static long ours(const struct ofl_pkt *p)
{
    if (p->len < 46 || memcmp(p->data + 42, MARK, 4)) return -1;
    unsigned i = (unsigned)p->data[9] << 16 | (unsigned)p->data[10] << 8 | p->data[11];
    uint8_t want[MTU];
    uint32_t len = frame(want, i);
    return len == p->len && !memcmp(want, p->data, len) ? (long)i : -2;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Read our frames from the sources for up to `secs` or until `want` came: seen[i]
 * counts frame i, *bad the ones that differ. */
static unsigned collect(struct ofl_src **s, unsigned ns, unsigned *seen, unsigned want,
                        double secs, unsigned *bad, unsigned *per)
{
    uint8_t *bufs = malloc(BATCH * MTU);
    struct ofl_pkt pkts[BATCH];
    unsigned got = 0;
    for (double end = now_s() + secs; got < want && now_s() < end;)
        for (unsigned k = 0; k < ns; k++) {
            int n = ofl_src_next(s[k], pkts, bufs, BATCH);
            for (int j = 0; j < n; j++) {
                long i = ours(&pkts[j]);
                if (i == -2) ++*bad;
                if (i >= 0 && i < NFRAMES) {
                    seen[i]++;
                    got++;
                    if (per) per[k]++;
                }
            }
        }
    free(bufs);
    return got;
}

static void send_frames(struct ofl_port_sink *k, unsigned from, unsigned to)
{
    uint8_t f[MTU];
    for (unsigned i = from; i < to; i++) {
        uint32_t len = frame(f, i);
        k->ops->write(k, 0, &(struct ofl_pkt){ f, len, len, 0, 0 });
        if (i % 32 == 31) {
            k->ops->flush(k, 0);
            nanosleep(&(struct timespec){ 0, 1000000 }, NULL);  /* gently: the ring */
        }
    }
    k->ops->flush(k, 0);
}

static void test_errors(const char *a)
{
    char err[256] = "";
    struct ofl_src *s = NULL;
    struct ofl_port_sink *k = NULL;
    struct ofl_src_opts o = { .mtu = MTU };
    int rc = ofl_live_src_open(&s, "nosuch-if0", &o, err);
    CHECK(rc < 0 && !s && strstr(err, "interface nosuch-if0: "), "no such interface: %d '%s'",
          rc, err);
    rc = ofl_live_sink_open(&k, "nosuch-if0", 1, err);
    CHECK(rc < 0 && !k && strstr(err, "interface nosuch-if0: "), "sink, no such interface: "
          "%d '%s'", rc, err);
    struct ofl_src_opts zero = { .mtu = 0 };
    rc = ofl_live_src_open(&s, a, &zero, err);
    CHECK(rc == -EINVAL && !strcmp(err, "the mtu must be positive"), "mtu 0: '%s'", err);
    struct ofl_src_opts part = { .mtu = MTU, .part = 2, .nparts = 2 };
    rc = ofl_live_src_open(&s, a, &part, err);
    CHECK(rc == -EINVAL && !strcmp(err, "part 2 is not below nparts 2"), "part 2 of 2: '%s'",
          err);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_live_port IFACE_A IFACE_B\n");
        return 2;
    }
    const char *a = argv[1], *b = argv[2];
    test_errors(a);

    char err[256] = "";
    struct ofl_port_sink *k = NULL;
    struct ofl_src *rx = NULL, *self = NULL;
    struct ofl_src_opts o = { .mtu = MTU };
    int rc = ofl_live_sink_open(&k, a, 1, err);
    CHECK(rc == 0, "sink on %s (%s)", a, err);
    rc = ofl_live_src_open(&rx, b, &o, err);
    CHECK(rc == 0, "source on %s (%s)", b, err);
    rc = ofl_live_src_open(&self, a, &o, err);
    CHECK(rc == 0, "source on %s, the sink's own (%s)", a, err);
    if (!k || !rx || !self) return CHECK_DONE();

    /* Across the pair, byte for byte; none back on the sending side. */
    static unsigned seen[NFRAMES], back[NFRAMES];
    unsigned bad = 0;
    send_frames(k, 0, NFRAMES);
    unsigned got = collect(&rx, 1, seen, NFRAMES, 10.0, &bad, NULL);
    unsigned once = 0;
    for (unsigned i = 0; i < NFRAMES; i++) once += seen[i] == 1;
    CHECK(got == NFRAMES && once == NFRAMES && bad == 0, "%u of %u frames across the pair, "
          "each once, %u differ", got, NFRAMES, bad);
    unsigned own = collect(&self, 1, back, 1, 0.3, &bad, NULL);
    CHECK(own == 0, "the sending side's source saw %u of its own frames", own);
    CHECK(rx->packets >= NFRAMES && rx->dropped == 0, "source counts: %llu delivered, %llu "
          "dropped", (unsigned long long)rx->packets, (unsigned long long)rx->dropped);

    /* Counters: longer than the source's mtu; longer than the interface takes. */
    ofl_src_close(rx);
    struct ofl_src_opts small = { .mtu = 200 };
    rc = ofl_live_src_open(&rx, b, &small, err);
    memset(seen, 0, sizeof seen);
    send_frames(k, 0, 40);  /* frames 0..39: 60..1503 bytes */
    unsigned longer = 0;
    uint8_t f[MTU];
    for (unsigned i = 0; i < 40; i++) longer += frame(f, i) > 200;
    got = collect(&rx, 1, seen, 40 - longer, 5.0, &bad, NULL);
    for (double end = now_s() + 2.0; rx->dropped < longer && now_s() < end;)
        collect(&rx, 1, seen, 1, 0.05, &bad, NULL);
    CHECK(rc == 0 && got == 40 - longer && rx->dropped == longer, "mtu 200: %u delivered, "
          "%llu dropped as longer, of %u longer", got, (unsigned long long)rx->dropped, longer);
    uint64_t refused0 = k->ops->dropped(k);
    uint8_t big[9000];
    memset(big, 0xAB, sizeof big);
    k->ops->write(k, 0, &(struct ofl_pkt){ big, sizeof big, sizeof big, 0, 0 });
    k->ops->flush(k, 0);
    CHECK(k->ops->dropped(k) == refused0 + 1, "a 9,000-byte frame on a 1,500-byte link: "
          "refused, counted (%llu)", (unsigned long long)(k->ops->dropped(k) - refused0));
    ofl_src_close(rx);

    /* Two cores of one segment: a fanout group, each frame to one of them. */
    struct ofl_src *two[2] = { NULL, NULL };
    for (unsigned p = 0; p < 2; p++) {
        struct ofl_src_opts op = { .mtu = MTU, .part = p, .nparts = 2 };
        rc = ofl_live_src_open(&two[p], b, &op, err);
        CHECK(rc == 0, "fanout source %u of 2 (%s)", p, err);
    }
    if (two[0] && two[1]) {
        memset(seen, 0, sizeof seen);
        unsigned per[2] = { 0, 0 };
        send_frames(k, 0, NFRAMES);
        got = collect(two, 2, seen, NFRAMES, 10.0, &bad, per);
        once = 0;
        for (unsigned i = 0; i < NFRAMES; i++) once += seen[i] == 1;
        CHECK(got == NFRAMES && once == NFRAMES && bad == 0 && per[0] && per[1],
              "two sources in a fanout group: %u of %u frames, each once, to both (%u and "
              "%u)", got, NFRAMES, per[0], per[1]);
    }
    ofl_src_close(two[0]);
    ofl_src_close(two[1]);
    ofl_src_close(self);
    k->ops->close(k);
    return CHECK_DONE();
}
