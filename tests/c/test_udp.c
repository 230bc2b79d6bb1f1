/* The UDP socket port: frames around datagrams (built, then parsed back by pkt.h's
 * parsers), the frame parser on malformed and mutated frames, the recvmmsg source
 * and the sendmmsg sink on real sockets on 127.0.0.1, stop signals, open errors.
 *   test_udp      run the tests; prints its checks and "N failure(s)" */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "offlow/pkt.h"
#include "offlow/src.h"
#include "offlow/stop.h"
#include "offlow/udp_port.h"

#define MTU 128u
#define HDRS OFL_UDP_FRAME_HDRS
#define LOOPBACK 0x7F000001u

/* ---- helpers ----------------------------------------------------------------------- */

/* A UDP socket bound to 127.0.0.1 on a free port; its port in *port. */
static int udp_bound(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(LOOPBACK) };
    socklen_t al = sizeof a;
    int big = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        perror("udp socket");
        exit(2);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void send_to(int fd, uint16_t port, const void *p, size_t n)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(LOOPBACK) };
    if (sendto(fd, p, n, 0, (struct sockaddr *)&a, sizeof a) != (ssize_t)n) {
        perror("sendto");
        exit(2);
    }
}

/* Receive one datagram within a second; its length, or -1. Sets *from_port. */
static ssize_t recv_one(int fd, uint8_t *buf, size_t cap, uint16_t *from_port)
{
    struct sockaddr_in a;
    for (int i = 0; i < 1000; i++) {
        socklen_t al = sizeof a;
        ssize_t n = recvfrom(fd, buf, cap, MSG_DONTWAIT, (struct sockaddr *)&a, &al);
        if (n >= 0) {
            if (from_port) *from_port = ntohs(a.sin_port);
            return n;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return -1;
}

/* 1 when no datagram is waiting on `fd` (loopback delivers during the send). */
static int nothing_waiting(int fd)
{
    uint8_t b[16];
    return recv(fd, b, sizeof b, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static struct ofl_src_opts opts(uint32_t mtu)
{
    struct ofl_src_opts o;
    memset(&o, 0, sizeof o);
    o.nparts = 1;
    o.mtu = mtu;
    return o;
}

/* Read from `s` until `want` frames (or 1000 idle calls); returns how many came. */
static int read_frames(struct ofl_src *s, struct ofl_pkt *pkts, uint8_t *bufs, int want,
                       uint32_t n)
{
    int got = 0;
    for (int idle = 0; got < want && idle < 1000;) {
        int rc = ofl_src_next(s, pkts + got, bufs + (size_t)got * s->o.mtu, n);
        if (rc < 0) return rc;
        if (rc == 0) {
            idle++;
            struct timespec us = {0, 100000};
            nanosleep(&us, NULL);
        }
        got += rc;
    }
    return got;
}

/* ---- frames ------------------------------------------------------------------------- */

static void test_build(void)
{
    uint8_t f[HDRS + 5];
    memcpy(f + HDRS, "hello", 5);
    ofl_udp_frame_build(f, 0x0A000001u, 40000, LOOPBACK, 11211, 5);
    static const uint8_t macs[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
    CHECK(!memcmp(f, macs, 12) && ofl_get_be16(f + 12) == 0x0800,
          "Ethernet 02:..:02 -> 02:..:01, type 0x0800");
    uint16_t et, sp = 0, dp = 0;
    uint32_t l3;
    struct ofl_ipv4_info ip;
    int ok = ofl_parse_eth(f, sizeof f, &et, &l3) == 0 && et == 0x0800 && l3 == 14 &&
             ofl_parse_ipv4(f, sizeof f, l3, &ip) == 0 &&
             ofl_parse_udp(f, sizeof f, l3 + ip.hdr_len, &sp, &dp) == 0;
    CHECK(ok && ip.hdr_len == 20 && ip.proto == 17 && ip.ttl == 64 && ip.src == 0x0A000001u &&
          ip.dst == LOOPBACK, "IPv4 10.0.0.1 -> 127.0.0.1, UDP, TTL 64 (pkt.h parsers)");
    CHECK(ok && ofl_ipv4_csum_ok(f + 14, 20), "IPv4 header checksum valid");
    CHECK(ofl_get_be16(f + 16) == 33 && ofl_get_be16(f + 20) == 0, "total length 33, no fragment");
    CHECK(sp == 40000 && dp == 11211 && ofl_get_be16(f + 38) == 13 && ofl_get_be16(f + 40) == 0,
          "UDP 40000 -> 11211, length 13, checksum 0");
    CHECK(!memcmp(f + HDRS, "hello", 5), "payload untouched");

    struct ofl_udp_dgram d;
    CHECK(ofl_udp_frame_parse(f, sizeof f, &d) == 0 && d.dst == LOOPBACK && d.dport == 11211 &&
          d.payload_off == HDRS && d.payload_len == 5, "ofl_udp_frame_parse reads it back");

    uint8_t big[HDRS + OFL_UDP_MAX_PAYLOAD];
    memset(big, 0xAB, sizeof big);
    ofl_udp_frame_build(big, 1, 2, 3, 4, OFL_UDP_MAX_PAYLOAD);
    CHECK(ofl_get_be16(big + 16) == 65535 && ofl_ipv4_csum_ok(big + 14, 20) &&
          ofl_udp_frame_parse(big, sizeof big, &d) == 0 && d.payload_len == OFL_UDP_MAX_PAYLOAD,
          "largest payload: total length 65535, parses back");
    uint8_t empty[HDRS];
    ofl_udp_frame_build(empty, 1, 2, 3, 4, 0);
    CHECK(ofl_udp_frame_parse(empty, HDRS, &d) == 0 && d.payload_len == 0,
          "empty payload: a 42-byte frame");
}

static void test_parse_bad(void)
{
    uint8_t f[HDRS + 8], g[HDRS + 12];
    struct ofl_udp_dgram d;
    memcpy(f + HDRS, "abcdefgh", 8);
    ofl_udp_frame_build(f, 1, 2, 3, 4, 8);
    int bad = 0;
    for (uint32_t len = 0; len < sizeof f; len++) bad += ofl_udp_frame_parse(f, len, &d) < 0;
    CHECK(bad == (int)sizeof f, "every truncation is rejected (%d of %zu)", bad, sizeof f);

    memcpy(g, f, sizeof f);
    g[12] = 0x86, g[13] = 0xDD;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EUNSUPP, "IPv6 ethertype: unsupported");
    memcpy(g, f, sizeof f);
    g[12] = 0x08, g[13] = 0x06;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EUNSUPP, "ARP: unsupported");
    memcpy(g, f, sizeof f);
    g[14 + 9] = 6;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EUNSUPP, "TCP: unsupported");
    memcpy(g, f, sizeof f);
    g[14] = 0x65;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EVERSION, "IP version 6 in an IPv4 frame");
    memcpy(g, f, sizeof f);
    g[14 + 6] = 0x20;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EUNSUPP, "more fragments: unsupported");
    memcpy(g, f, sizeof f);
    g[14 + 7] = 0x01;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EUNSUPP, "fragment offset: unsupported");
    memcpy(g, f, sizeof f);
    g[14 + 6] = 0x40;
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == 0, "don't-fragment alone is fine");
    memcpy(g, f, sizeof f);
    ofl_put_be16(g + 38, 17);
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_ETRUNC, "UDP length past the IPv4 payload");
    memcpy(g, f, sizeof f);
    ofl_put_be16(g + 38, 7);
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_EBADHDR, "UDP length below 8");
    memcpy(g, f, sizeof f);
    ofl_put_be16(g + 38, 12);
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == 0 && d.payload_len == 4,
          "UDP length shorter than the IPv4 payload: the UDP length wins");
    memcpy(g, f, sizeof f);
    ofl_put_be16(g + 16, 100);
    CHECK(ofl_udp_frame_parse(g, sizeof f, &d) == OFL_ETRUNC, "IPv4 total length past the frame");

    /* Ethernet padding after the datagram; a VLAN tag; IPv4 options. */
    memset(g, 0xEE, sizeof g);
    memcpy(g, f, sizeof f);
    CHECK(ofl_udp_frame_parse(g, sizeof g, &d) == 0 && d.payload_len == 8,
          "Ethernet padding is not payload");
    memcpy(g, f, 12);
    g[12] = 0x81, g[13] = 0x00, g[14] = 0, g[15] = 7;
    memcpy(g + 16, f + 12, sizeof f - 12);
    CHECK(ofl_udp_frame_parse(g, sizeof f + 4, &d) == 0 && d.payload_off == HDRS + 4 &&
          !memcmp(g + d.payload_off, "abcdefgh", 8), "a VLAN tag is skipped");
    memcpy(g, f, 34);
    memset(g + 34, 1, 4);                      /* 4 bytes of NOP options */
    memcpy(g + 38, f + 34, sizeof f - 34);
    g[14] = 0x46;
    ofl_put_be16(g + 16, (uint16_t)(ofl_get_be16(f + 16) + 4));
    CHECK(ofl_udp_frame_parse(g, sizeof f + 4, &d) == 0 && d.payload_off == HDRS + 4 &&
          d.dport == 4 && !memcmp(g + d.payload_off, "abcdefgh", 8), "IPv4 options are skipped");

    /* Random mutations: any result must stay inside the frame (ASan checks the reads). */
    uint64_t x = 88172645463325252ull;
    int inside = 1, accepted = 0;
    for (int i = 0; i < 200000; i++) {
        uint8_t m[HDRS + 12];
        memcpy(m, g, sizeof m);
        uint32_t len = sizeof m;
        for (int k = 0; k < 3; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            m[x % sizeof m] = (uint8_t)(x >> 32);
        }
        len = (uint32_t)((x >> 40) % (sizeof m + 1));
        if (ofl_udp_frame_parse(m, len, &d) == 0) {
            accepted++;
            inside &= d.payload_off <= len && d.payload_len <= len - d.payload_off;
        }
    }
    CHECK(inside && accepted > 0, "200000 mutated frames: %d accepted, payloads inside", accepted);
}

/* ---- source ----------------------------------------------------------------------- */

static void test_source(void)
{
    uint16_t sport, cport;
    int srv = udp_bound(&sport), cli = udp_bound(&cport);
    char err[256] = "";
    struct ofl_src *s = NULL;
    struct ofl_src_opts o = opts(MTU);
    int rc = ofl_udp_src_open(&s, srv, &o, err);
    CHECK(rc == 0 && !strcmp(ofl_src_kind(s), "udp"), "open a UDP source: %s", err);
    if (rc) exit(1);
    static uint8_t bufs[100 * MTU];
    struct ofl_pkt pkts[100];
    CHECK(ofl_src_next(s, pkts, bufs, 8) == 0, "nothing pending: 0, without blocking");

    uint8_t pay[MTU];
    for (unsigned i = 0; i < sizeof pay; i++) pay[i] = (uint8_t)(i * 7 + 1);
    const uint32_t sizes[] = {0, 5, MTU - HDRS + 1, MTU - HDRS, 1000};
    for (unsigned i = 0; i < 5; i++) {
        if (sizes[i] <= sizeof pay) send_to(cli, sport, pay, sizes[i]);
        else {
            uint8_t *huge = calloc(1, sizes[i]);
            send_to(cli, sport, huge, sizes[i]);
            free(huge);
        }
    }
    int got = read_frames(s, pkts, bufs, 3, 8);
    CHECK(got == 3 && ofl_src_dropped(s) == 2 && ofl_src_packets(s) == 3,
          "3 datagrams delivered, 2 longer than mtu - 42 dropped (got %d, dropped %llu)", got,
          (unsigned long long)ofl_src_dropped(s));
    const uint32_t want[] = {0, 5, MTU - HDRS};
    int good = got == 3;
    for (int i = 0; good && i < 3; i++) {
        struct ofl_udp_dgram d;
        struct ofl_ipv4_info ip;
        uint16_t sp = 0, dp = 0;
        good &= pkts[i].data == bufs + (size_t)i * MTU && pkts[i].cap == MTU &&
                pkts[i].len == HDRS + want[i];
        good &= ofl_parse_ipv4(pkts[i].data, pkts[i].len, 14, &ip) == 0 &&
                ofl_ipv4_csum_ok(pkts[i].data + 14, 20) && ip.src == LOOPBACK &&
                ip.dst == LOOPBACK;
        good &= ofl_parse_udp(pkts[i].data, pkts[i].len, 34, &sp, &dp) == 0 && sp == cport &&
                dp == sport;
        good &= ofl_udp_frame_parse(pkts[i].data, pkts[i].len, &d) == 0 &&
                d.payload_len == want[i] && !memcmp(pkts[i].data + HDRS, pay, want[i]);
        good &= pkts[i].ts_ns > 1500000000ull * 1000000000ull;
    }
    CHECK(good, "frames: client -> server addresses and ports, valid checksum, payload intact, "
          "contiguous in the buffers after a drop");
    CHECK(ofl_src_bytes(s) == 3 * HDRS + 0 + 5 + (MTU - HDRS), "bytes counted");

    for (int i = 0; i < 70; i++) send_to(cli, sport, &i, sizeof i);
    int first = read_frames(s, pkts, bufs, 1, 100);
    int rest = read_frames(s, pkts, bufs, 70 - first, 100);
    CHECK(first == (int)OFL_UDP_BATCH_MAX && rest == 70 - first,
          "one call returns at most %u datagrams (%d, then %d)", OFL_UDP_BATCH_MAX, first, rest);
    ofl_src_close(s);

    o.duration_ns = 30000000;  /* 30 ms */
    rc = ofl_udp_src_open(&s, srv, &o, err);
    uint64_t t0 = ofl_src_clock_ns();
    int n = 0;
    while ((n = ofl_src_next(s, pkts, bufs, 8)) != OFL_SRC_DONE && n >= 0 &&
           ofl_src_clock_ns() - t0 < 5000000000ull) {
    }
    uint64_t took = ofl_src_clock_ns() - t0;
    CHECK(rc == 0 && n == OFL_SRC_DONE && took >= 30000000ull && took < 5000000000ull,
          "duration: done after %.0f ms", (double)took / 1e6);
    ofl_src_close(s);
    close(srv);
    close(cli);
}

static void test_stop_signal(void)
{
    uint16_t sport;
    int srv = udp_bound(&sport);
    char err[256] = "";
    struct ofl_src *s = NULL;
    struct ofl_src_opts o = opts(MTU);
    static uint8_t bufs[8 * MTU];
    struct ofl_pkt pkts[8];
    CHECK(ofl_stop_signals_block() == 0 && ofl_stop_requested() == 0, "signals blocked, no stop");
    CHECK(ofl_udp_src_open(&s, srv, &o, err) == 0 && ofl_src_next(s, pkts, bufs, 8) == 0,
          "source idle");
    kill(getpid(), SIGTERM);
    CHECK(ofl_stop_requested() == 1, "SIGTERM pending: stop requested (the process lives)");
    CHECK(ofl_src_next(s, pkts, bufs, 8) == OFL_SRC_DONE &&
          ofl_src_next(s, pkts, bufs, 8) == OFL_SRC_DONE, "the source finishes and stays done");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    struct timespec zero = {0, 0};
    CHECK(sigtimedwait(&set, NULL, &zero) == SIGTERM && ofl_stop_requested() == 0,
          "nothing consumed the signal until the test took it");
    kill(getpid(), SIGINT);
    CHECK(ofl_stop_requested() == 1, "SIGINT too");
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigtimedwait(&set, NULL, &zero);
    ofl_src_close(s);
    close(srv);
}

/* ---- sink ------------------------------------------------------------------------- */

/* A reply frame from the server (port `sport`) to the client at `cport`. */
static uint32_t reply(uint8_t *f, uint16_t sport, uint16_t cport, const void *p, uint32_t n)
{
    memcpy(f + HDRS, p, n);
    ofl_udp_frame_build(f, LOOPBACK, sport, LOOPBACK, cport, n);
    return HDRS + n;
}

static void test_sink(void)
{
    uint16_t sport, cport, from = 0;
    int srv = udp_bound(&sport), cli = udp_bound(&cport);
    char err[256] = "";
    struct ofl_udp_sink *k = NULL;
    int rc = ofl_udp_sink_open(&k, srv, 2, err);
    CHECK(rc == 0, "open a UDP sink with 2 slots: %s", err);
    if (rc) exit(1);
    static uint8_t f[HDRS + 60000];
    uint8_t got[65536];
    struct ofl_pkt p = { .data = f, .cap = sizeof f };

    p.len = reply(f, sport, cport, "one", 3);
    ofl_udp_sink_write(k, 0, &p);
    /* Clobber the caller's frame after the write: the client must still get "one"
     * below, which holds only if the sink kept its own copy of the payload. */
    memcpy(f + HDRS, "xxx", 3);
    p.len = reply(f, sport, cport, "two!", 4);
    ofl_udp_sink_write(k, 1, &p);
    CHECK(nothing_waiting(cli), "written, nothing sent before the flush");
    CHECK(ofl_udp_sink_flush(k, 0) == 1, "flush slot 0: 1 sent");
    ssize_t n = recv_one(cli, got, sizeof got, &from);
    CHECK(n == 3 && !memcmp(got, "one", 3) && from == sport,
          "the client receives \"one\" from the server's port");
    CHECK(ofl_udp_sink_flush(k, 1) == 1 && recv_one(cli, got, sizeof got, NULL) == 4 &&
              !memcmp(got, "two!", 4), "slot 1 has its own batch");
    CHECK(ofl_udp_sink_flush(k, 0) == 0, "an empty flush sends nothing");

    p.len = reply(f, sport, cport, "bad", 3);
    f[12] = 0x86, f[13] = 0xDD;
    ofl_udp_sink_write(k, 0, &p);
    p.len = reply(f, sport, cport, "bad", 3);
    f[14 + 9] = 6;
    ofl_udp_sink_write(k, 0, &p);
    p.len = 20;
    ofl_udp_sink_write(k, 1, &p);
    p.len = reply(f, sport, cport, "slot", 4);
    ofl_udp_sink_write(k, 7, &p);
    CHECK(ofl_udp_sink_flush(k, 0) == 0 && ofl_udp_sink_flush(k, 1) == 0 &&
          ofl_udp_sink_dropped(k) == 4 && nothing_waiting(cli),
          "not IPv4 / not UDP / truncated / slot out of range: 4 dropped, none sent");

    /* A frame to the sink's own socket would come back through the source. */
    p.len = reply(f, cport, sport, "loop", 4);
    ofl_udp_sink_write(k, 0, &p);
    ofl_udp_frame_build(f, LOOPBACK, cport, 0, sport, 4);   /* to 0.0.0.0:sport */
    ofl_udp_sink_write(k, 1, &p);
    CHECK(ofl_udp_sink_flush(k, 0) == 0 && ofl_udp_sink_flush(k, 1) == 0 &&
          ofl_udp_sink_to_self(k) == 2 && ofl_udp_sink_dropped(k) == 4 && nothing_waiting(srv),
          "to its own address and port, or 0.0.0.0 and its port: 2 refused, none sent");

    p.len = reply(f, sport, 0, "port0", 5);
    ofl_udp_sink_write(k, 0, &p);
    p.len = reply(f, sport, cport, "after", 5);
    ofl_udp_sink_write(k, 0, &p);
    CHECK(ofl_udp_sink_flush(k, 0) == 1 && ofl_udp_sink_send_errors(k) == 1 &&
          recv_one(cli, got, sizeof got, NULL) == 5 && !memcmp(got, "after", 5),
          "a datagram the kernel refuses (port 0) is a send error; the next one goes");

    for (int i = 0; i < 70; i++) {
        p.len = reply(f, sport, cport, &i, sizeof i);
        ofl_udp_sink_write(k, 0, &p);
    }
    unsigned last = ofl_udp_sink_flush(k, 0);
    int order = 1, count = 0;
    for (int i = 0; i < 70; i++) {
        int v = -1;
        if (recv_one(cli, got, sizeof got, NULL) == sizeof v) {
            memcpy(&v, got, sizeof v);
            count++;
        }
        order &= v == i;
    }
    CHECK(last == 70 - OFL_UDP_BATCH_MAX && count == 70 && order,
          "70 writes: a full batch of %u goes at once, 6 at the flush, all in order",
          OFL_UDP_BATCH_MAX);

    memset(f + HDRS, 'L', 60000);
    for (int i = 0; i < 3; i++) {
        p.len = HDRS + 60000;
        ofl_udp_frame_build(f, LOOPBACK, sport, LOOPBACK, cport, 60000);
        ofl_udp_sink_write(k, 1, &p);
    }
    last = ofl_udp_sink_flush(k, 1);
    int big = 0;
    for (int i = 0; i < 3; i++)
        big += recv_one(cli, got, sizeof got, NULL) == 60000 && got[0] == 'L' && got[59999] == 'L';
    CHECK(last == 1 && big == 3, "3 payloads of 60000 B: the batch's buffer fills after 2, "
          "all 3 arrive (%d)", big);
    CHECK(ofl_udp_sink_sent(k) == 2 + 1 + 70 + 3, "sent counted over the slots (%llu)",
          (unsigned long long)ofl_udp_sink_sent(k));

    p.len = reply(f, sport, cport, "at close", 8);
    ofl_udp_sink_write(k, 1, &p);
    ofl_udp_sink_close(k);
    CHECK(recv_one(cli, got, sizeof got, NULL) == 8, "closing sends what is left");
    close(srv);
    close(cli);
}

/* ---- open errors ------------------------------------------------------------------ */

static void test_open_errors(void)
{
    char err[256];
    struct ofl_src *s = NULL;
    struct ofl_udp_sink *k = NULL;
    struct ofl_src_opts o = opts(MTU);
    uint16_t port;
    int rc = ofl_udp_src_open(&s, -1, &o, err);
    CHECK(rc == -EBADF, "fd -1: %s", err);
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    rc = ofl_udp_src_open(&s, tcp, &o, err);
    CHECK(rc == -EPROTOTYPE, "a TCP socket: %s", err);
    close(tcp);
    int unbound = socket(AF_INET, SOCK_DGRAM, 0);
    rc = ofl_udp_sink_open(&k, unbound, 1, err);
    CHECK(rc == -EINVAL, "an unbound socket: %s", err);
    close(unbound);
    int v6 = socket(AF_INET6, SOCK_DGRAM, 0);
    if (v6 >= 0) {
        struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
        if (bind(v6, (struct sockaddr *)&a, sizeof a) == 0) {
            rc = ofl_udp_src_open(&s, v6, &o, err);
            CHECK(rc == -EAFNOSUPPORT, "an IPv6 socket: %s", err);
        }
        close(v6);
    }
    int fd = udp_bound(&port);
    o.mtu = HDRS - 1;
    rc = ofl_udp_src_open(&s, fd, &o, err);
    CHECK(rc == -EINVAL, "mtu 41: %s", err);
    o.mtu = MTU;
    o.part = 1;
    rc = ofl_udp_src_open(&s, fd, &o, err);
    CHECK(rc == -EINVAL, "bad common options: %s", err);
    rc = ofl_udp_sink_open(&k, fd, 0, err);
    CHECK(rc == -EINVAL, "a sink with no slot: %s", err);
    close(fd);
}

int main(void)
{
    test_build();
    test_parse_bad();
    test_source();
    test_sink();
    test_open_errors();
    test_stop_signal();
    return CHECK_DONE();
}
