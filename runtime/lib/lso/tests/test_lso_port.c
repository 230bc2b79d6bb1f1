/* Tests of the send port (lso_port.h, lso_nic.h): a host thread posts sends of random
 * sizes through the double-buffered send buffer while a device thread takes their
 * descriptors from the port's source and cuts them (PIO, DMA, AUTO); every byte the
 * device cuts must be the byte the host wrote (a half reused too early would show),
 * completions come back in order with their tags; malformed descriptors are refused
 * and completed with their reason; each side notices the other's death. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "offlow/lso_nic.h"
#include "offlow/lso_port.h"
#include "offlow/pkt.h"

#define SENDS 400u
#define SEC 1000000000ull

static char path[128];

static uint8_t byte_of(uint32_t send, uint32_t i)
{
    return (uint8_t)(send * 131u + i * 7u + (i >> 8));
}

static uint32_t size_of(uint32_t send)
{
    static const uint32_t sizes[] = { 0, 1, 700, 1460, 1461, 9000, 30000, 65535, 40000, 123 };
    return sizes[send % 10] + (send % 10 > 1 && send % 10 != 7 ? send % 97 : 0);
}

static uint32_t tmpl_tcp4(uint8_t *h)
{
    memset(h, 0, 54);
    ofl_put_be16(h + 12, 0x0800);
    h[14] = 0x45;
    h[14 + 8] = 64;
    h[14 + 9] = 6;
    ofl_put_be32(h + 14 + 12, 0x0A000001);
    ofl_put_be32(h + 14 + 16, 0x0A000002);
    ofl_put_be16(h + 34, 1234);
    ofl_put_be16(h + 36, 80);
    h[34 + 12] = 0x50;
    h[34 + 13] = 0x18;
    return 54;
}

struct dev {
    int move;
    uint32_t sends, packets, bad, refused[8];
    int err;
};

/* The device: source -> cut -> check each packet's payload against byte_of. */
static void *device(void *arg)
{
    struct dev *d = arg;
    struct ofl_src_opts so = { .mtu = 2048 };
    char errbuf[256] = "";
    struct ofl_src *src;
    int rc = ofl_lso_src_open(&src, path, &so, errbuf);
    struct ofl_lso_nic_opts no = { .path = path, .mtu = 1500, .move = d->move, .dma_min = 1000,
                                   .dma_cpu = -1 };
    struct ofl_lso_nic *nic = NULL;
    if (rc == 0) rc = ofl_lso_nic_open(&nic, &no, errbuf);
    if (rc < 0) {
        printf("device open: %s\n", errbuf);
        d->err = rc;
        return NULL;
    }
    static uint8_t bufs[32 * 2048];
    struct ofl_pkt pk[32];
    for (;;) {
        int n = ofl_src_next(src, pk, bufs, 32);
        if (n == OFL_SRC_DONE) break;
        if (n < 0) { d->err = n; break; }
        for (int i = 0; i < n; i++) {
            rc = ofl_lso_nic_begin(nic, pk[i].data, pk[i].len, 9000);
            if (rc < 0) {
                int why = OFL_ERR_LSO_FIRST - rc;  /* EDESC 1, ETEMPLATE 2, ... */
                d->refused[why < 8 ? why : 0]++;
                continue;
            }
            uint32_t tag = nic->cut.tag, pos = 0;
            struct ofl_pkt out;
            unsigned kind;
            while ((rc = ofl_lso_nic_next(nic, &out, &kind)) > 0) {
                uint32_t pay = out.len - 54;
                for (uint32_t k = 0; k < pay; k++)
                    if (out.data[54 + k] != byte_of(tag, pos + k)) { d->bad++; break; }
                pos += pay;
                d->packets++;
            }
            if (rc < 0) d->err = rc;
            if (pos != size_of(tag)) d->bad++;
            d->sends++;
        }
    }
    ofl_lso_nic_close(nic);
    ofl_src_close(src);
    return NULL;
}

static void test_sends(int move, const char *what)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    int rc = ofl_lso_host_create(&h, path, 65536 * 2, 16);
    CHECK(rc == 0, "%s: port created (%s)", what, rc ? ofl_strerror(rc) : "ok");
    if (rc) return;
    struct dev d = { .move = move };
    pthread_t t;
    pthread_create(&t, NULL, device, &d);
    uint8_t tmpl[64], *pay = malloc(70000);
    uint32_t tl = tmpl_tcp4(tmpl), bad_tags = 0, got = 0, errs = 0;
    struct ofl_lso_done done[64];
    for (uint32_t s = 0; s < SENDS && !errs; s++) {
        uint32_t len = size_of(s);
        for (uint32_t i = 0; i < len; i++) pay[i] = byte_of(s, i);
        struct ofl_lso_send x = { tmpl, tl, pay, len, 1460, 0, 0, s };
        if (ofl_lso_host_send(&h, &x, 10 * SEC) < 0) errs++;
        /* scribble on what the caller gave: the port holds its own copy */
        memset(pay, 0xEE, len);
        uint32_t n = ofl_lso_host_reap(&h, done, 64);
        for (uint32_t k = 0; k < n; k++, got++) bad_tags += done[k].tag != got || done[k].status;
    }
    rc = ofl_lso_host_finish(&h, 10 * SEC);
    uint32_t n;
    while ((n = ofl_lso_host_reap(&h, done, 64)) > 0)
        for (uint32_t k = 0; k < n; k++, got++) bad_tags += done[k].tag != got || done[k].status;
    pthread_join(t, NULL);
    CHECK(!errs && rc == 0 && d.err == 0, "%s: %u sends posted and finished", what, SENDS);
    CHECK(d.sends == SENDS && d.bad == 0 && d.packets == h.packets,
          "%s: the device cut every send and read every byte as written (%u packets)", what,
          d.packets);
    CHECK(got == SENDS && bad_tags == 0, "%s: %u completions, in order, with their tags", what,
          got);
    CHECK(h.waits > 0, "%s: the host waited for the device (halves, FIFO) %llu times", what,
          (unsigned long long)h.waits);
    ofl_lso_host_destroy(&h);
    CHECK(access(path, F_OK) != 0, "%s: the port's file is gone", what);
    free(pay);
}

static void test_refused(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    ofl_lso_host_create(&h, path, 65536, 4);
    struct dev d = { .move = OFL_LSO_PIO };
    pthread_t t;
    pthread_create(&t, NULL, device, &d);
    uint8_t tmpl[64];
    uint32_t tl = tmpl_tcp4(tmpl);
    struct ofl_lso_desc good = { .off = 0, .len = 100, .mss = 1460, .hdr_len = (uint16_t)tl,
                                 .tag = 0 };
    memcpy(good.hdr, tmpl, tl);
    struct ofl_lso_desc x;
    int posted = 0;
    x = good; x.off = 2 * h.p.hdr->half - 50;  /* past the send buffer's end */
    posted += ofl_lso_host_post_raw(&h, &x, 24 + tl, SEC) == 0;
    x = good; x.mss = 0;
    posted += ofl_lso_host_post_raw(&h, &x, 24 + tl, SEC) == 0;
    x = good; x.mss = 1461;
    posted += ofl_lso_host_post_raw(&h, &x, 24 + tl, SEC) == 0;
    x = good; x.hdr_len = 40;
    posted += ofl_lso_host_post_raw(&h, &x, 24 + 40, SEC) == 0;
    posted += ofl_lso_host_post_raw(&h, &good, 20, SEC) == 0;   /* cut in its fixed part */
    CHECK(ofl_lso_host_post_raw(&h, &good, sizeof good + 1, SEC) == -EMSGSIZE,
          "a raw descriptor longer than one: -EMSGSIZE");
    struct ofl_lso_send bad = { tmpl, 30, "x", 1, 1460, 0, 0, 9 };
    CHECK(ofl_lso_host_send(&h, &bad, SEC) == -EINVAL, "the host refuses a cut template itself");
    bad.tlen = tl;
    bad.mss = 0;
    CHECK(ofl_lso_host_send(&h, &bad, SEC) == -EINVAL, "the host refuses MSS 0 itself");
    int rc = ofl_lso_host_finish(&h, 10 * SEC);
    struct ofl_lso_done done[8];
    uint32_t n = ofl_lso_host_reap(&h, done, 8);
    pthread_join(t, NULL);
    int want[5] = { OFL_LSO_EBUFFER, OFL_LSO_EMSS, OFL_LSO_EMSS, OFL_LSO_ETEMPLATE, OFL_LSO_EDESC };
    int ok = n == 5 && posted == 5 && rc == 0;
    for (uint32_t k = 0; ok && k < 5; k++) ok = done[k].status == want[k] && done[k].packets == 0;
    CHECK(ok, "five malformed descriptors completed with their reasons, in order (%u)", n);
    CHECK(d.refused[3] == 1 && d.refused[4] == 2 && d.refused[2] == 1 && d.refused[1] == 1 &&
          h.refused == 5, "the device counted them: beyond_buffer 1, bad_mss 2, bad_template 1, "
          "bad_desc 1");
    ofl_lso_host_destroy(&h);
}

/* A descriptor whose len is past its entry (a host that wrote it wrong) is a corrupt
 * entry to the device's source, as a wrong seq is: -EBADMSG, the ring broken for the
 * host, the good descriptor before it still delivered (before, the bad one was cut to
 * its entry and sent on as a packet). */
static void test_bad_desc_len(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    CHECK(ofl_lso_host_create(&h, path, 65536, 4) == 0, "a host port");
    ((struct ofl_entry_hdr *)ofl_ring_slot(&h.desc, 0))->len = 40;
    ((struct ofl_entry_hdr *)ofl_ring_slot(&h.desc, 1))->len = OFL_LSO_DESC_ENTRY - 8 + 1;
    ofl_ring_commit(&h.desc, 2);
    struct ofl_src_opts so = { .mtu = 2048 };
    char errbuf[256] = "";
    struct ofl_src *src;
    CHECK(ofl_lso_src_open(&src, path, &so, errbuf) == 0, "the device's source: %s", errbuf);
    static uint8_t bufs[4 * 2048];
    struct ofl_pkt pk[4];
    int n = ofl_src_next(src, pk, bufs, 4);
    CHECK(n == 1 && pk[0].len == 40, "the good descriptor first (%d)", n);
    n = ofl_src_next(src, pk, bufs, 4);
    CHECK(n == -EBADMSG, "then the one past its entry is corrupt (%d)", n);
    CHECK(ofl_ring_broken(&h.desc), "and the ring is broken for the host");
    ofl_src_close(src);
    ofl_lso_host_destroy(&h);
}

/* A host that dies without finishing: the device's source says so. */
static void test_host_dies(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d-h", (int)getpid());
    unlink(path);
    int ready[2];
    if (pipe(ready)) return;
    pid_t host = fork();
    if (host == 0) {
        struct ofl_lso_host h;
        int rc = ofl_lso_host_create(&h, path, 65536, 4);
        char c = rc == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1) _exit(2);
        pause();
        _exit(0);
    }
    char c = 0;
    if (read(ready[0], &c, 1) != 1) c = 0;
    struct ofl_src_opts so = { .mtu = 2048 };
    char errbuf[256];
    struct ofl_src *src = NULL;
    int rc = c == 'y' ? ofl_lso_src_open(&src, path, &so, errbuf) : -1;
    kill(host, SIGKILL);
    waitpid(host, NULL, 0);
    static uint8_t bufs[4 * 2048];
    struct ofl_pkt pk[4];
    int n = 0;
    uint64_t t0 = ofl_now_ns();
    while (rc == 0 && (n = ofl_src_next(src, pk, bufs, 4)) == 0 && ofl_now_ns() - t0 < 5 * SEC)
        sched_yield();
    CHECK(rc == 0 && n == -EPIPE, "the host died without finishing: the source ends with -EPIPE "
          "(%d) within %.1f ms", n, (double)(ofl_now_ns() - t0) / 1e6);
    ofl_src_close(src);
    unlink(path);
    close(ready[0]);
    close(ready[1]);
}

/* A device that dies: the host's wait for room says so. */
static void test_device_dies(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d-d", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    ofl_lso_host_create(&h, path, 65536, 2);
    pid_t dev = fork();
    if (dev == 0) {
        struct ofl_src_opts so = { .mtu = 2048 };
        char errbuf[256];
        struct ofl_src *src;
        if (ofl_lso_src_open(&src, path, &so, errbuf) < 0) _exit(2);
        pause();   /* takes nothing */
        _exit(0);
    }
    uint8_t tmpl[64], pay[100] = { 0 };
    uint32_t tl = tmpl_tcp4(tmpl);
    struct ofl_lso_send x = { tmpl, tl, pay, 100, 1460, 0, 0, 1 };
    while (!__atomic_load_n(&h.p.hdr->nic_pid, __ATOMIC_ACQUIRE)) sched_yield();
    int a = ofl_lso_host_send(&h, &x, SEC), b = ofl_lso_host_send(&h, &x, SEC);
    int full = ofl_lso_host_send(&h, &x, 200000000ull);
    kill(dev, SIGKILL);
    waitpid(dev, NULL, 0);
    uint64_t t0 = ofl_now_ns();
    int rc = ofl_lso_host_send(&h, &x, 5 * SEC);
    CHECK(a == 0 && b == 0 && full == -ETIMEDOUT && rc == -EPIPE,
          "a FIFO the device does not drain times out; a device that died is -EPIPE (%d) "
          "within %.1f ms", rc, (double)(ofl_now_ns() - t0) / 1e6);
    ofl_lso_host_destroy(&h);
}

/* A device whose source failed breaks the FIFO (its consumer's mark) while the host
 * waits for room: the host's send stops at once with -EPIPE, not at its timeout (nor
 * only once the device's process exits); so does its finish. */
static void test_fifo_broken(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d-b", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    CHECK(ofl_lso_host_create(&h, path, 65536, 2) == 0, "a host port");
    uint8_t tmpl[64], pay[100] = { 0 };
    uint32_t tl = tmpl_tcp4(tmpl);
    struct ofl_lso_send x = { tmpl, tl, pay, 100, 1460, 0, 0, 1 };
    int a = ofl_lso_host_send(&h, &x, SEC), b = ofl_lso_host_send(&h, &x, SEC);
    struct ofl_ring dev;   /* the device's view of the FIFO, as its failed source leaves it */
    CHECK(ofl_ring_attach(&dev, h.desc.shm, ofl_ring_mem_size(h.desc.size, h.desc.entry_size))
              == 0, "the device's end");
    ofl_ring_break(&dev);
    uint64_t t0 = ofl_now_ns();
    int full = ofl_lso_host_send(&h, &x, 60 * SEC);
    int fin = ofl_lso_host_finish(&h, 60 * SEC);
    CHECK(a == 0 && b == 0 && full == -EPIPE && fin == -EPIPE,
          "a full FIFO broken by the device: -EPIPE (%d, finish %d) in %.1f ms, not at the "
          "60 s timeout", full, fin, (double)(ofl_now_ns() - t0) / 1e6);
    ofl_lso_host_destroy(&h);
}

/* A device that completes everything and exits before the host looks: the host's
 * finish still takes those completions (no -EPIPE). */
static void test_device_done_then_gone(void)
{
    snprintf(path, sizeof path, "/dev/shm/offlow-test-lso-%d-g", (int)getpid());
    unlink(path);
    struct ofl_lso_host h;
    ofl_lso_host_create(&h, path, 65536, 8);
    uint8_t tmpl[64], pay[3000] = { 0 };
    uint32_t tl = tmpl_tcp4(tmpl);
    struct ofl_lso_send x = { tmpl, tl, pay, 3000, 1460, 0, 0, 1 };
    int posted = 0;
    for (int i = 0; i < 4; i++) posted += ofl_lso_host_send(&h, &x, SEC) == 0;
    ofl_ring_close(&h.desc);   /* finished posting, not yet waiting */
    pid_t dev = fork();
    if (dev == 0) {
        struct dev d = { .move = OFL_LSO_PIO };
        device(&d);
        _exit(d.sends == 4 ? 0 : 3);
    }
    int st = 0;
    waitpid(dev, &st, 0);
    int rc = ofl_lso_host_finish(&h, 5 * SEC);
    CHECK(posted == 4 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && rc == 0 && h.completed == 4,
          "a device that completed every send and exited: finish takes them all (%d, %llu)",
          rc, (unsigned long long)h.completed);
    ofl_lso_host_destroy(&h);
}

static void test_not_a_port(void)
{
    struct ofl_src_opts so = { .mtu = 2048 };
    char errbuf[256] = "";
    struct ofl_src *src;
    int rc = ofl_lso_src_open(&src, "/dev/shm/offlow-test-no-such-port", &so, errbuf);
    CHECK(rc == -ENOENT && strstr(errbuf, "offlow-test-no-such-port"), "a missing port: %s",
          errbuf);
    so.nparts = 2;
    rc = ofl_lso_src_open(&src, "/x", &so, errbuf);
    CHECK(rc == -EINVAL && strstr(errbuf, "one core"), "two cores on one port: %s", errbuf);
    struct ofl_lso_host h;
    CHECK(ofl_lso_host_create(&h, "/dev/shm/offlow-test-x", 1000, 4) == -EINVAL &&
          ofl_lso_host_create(&h, "/dev/shm/offlow-test-x", 65536, 3) == -EINVAL,
          "a half below 64 KB, FIFOs that are not a power of two: -EINVAL");
}

int main(void)
{
    test_sends(OFL_LSO_PIO, "PIO");
    test_sends(OFL_LSO_DMA, "DMA");
    test_sends(OFL_LSO_AUTO, "AUTO");
    test_sends(OFL_LSO_PLACE, "PLACE");
    test_refused();
    test_bad_desc_len();
    test_host_dies();
    test_device_dies();
    test_fifo_broken();
    test_device_done_then_gone();
    test_not_a_port();
    return CHECK_DONE();
}
