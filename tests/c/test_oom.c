/* Out of memory: every allocation that the runtime's constructors make is made to
 * fail in turn, and each failure must come back as -ENOMEM with nothing built and
 * nothing leaked (LeakSanitizer checks the leaks in the ASan build), or be one the
 * constructor may do without (it then succeeds).
 *
 * Linked with -Wl,--wrap for malloc, calloc, realloc, aligned_alloc and mmap: the
 * runtime's calls come here, the C library's own do not. The failure plan is file
 * state because the wrappers get no context from their callers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "offlow/chan.h"
#include "offlow/file.h"
#include "offlow/kvcache.h"
#include "offlow/kvstore.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/pcap_port.h"
#include "offlow/queue.h"
#include "offlow/ring.h"
#include "offlow/routes.h"
#include "offlow/synth.h"
#include "offlow/tcp_gw.h"
#include "offlow/udp_port.h"
#include "offlow/window.h"

/* The failure plan: the call numbered fail_at (from 0) fails; -1: none does. */
static long fail_at = -1, calls;
static int failed;

static int fail_now(void)
{
    if (fail_at >= 0 && calls++ == fail_at) {
        failed = 1;
        return 1;
    }
    return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
    return fail_now() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    return fail_now() ? NULL : __real_aligned_alloc(a, n);
}

void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    if (fail_now()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return __real_mmap(a, n, prot, flags, fd, off);
}

/* One try of a constructor: 0 (it built, checked and freed what it built), its
 * negative errno, or -EFAULT when it broke its contract (a failure that left *out
 * set, a table that answers wrongly). */
typedef int (*attempt_fn)(void *arg);

/* Fail each allocation of `attempt` in turn until a try fails none. */
static void sweep(const char *what, attempt_fn attempt, void *arg)
{
    int wrong = 0, tolerated = 0;
    long n = 0;
    for (; n < 100000; n++) {
        calls = 0;
        failed = 0;
        fail_at = n;
        int rc = attempt(arg);
        fail_at = -1;
        if (rc == 0 && !failed) break;  /* every allocation made: the sweep is done */
        if (rc == 0)
            tolerated++;
        else if (rc != -ENOMEM && wrong++ < 5)
            printf("  %s: allocation %ld failing gave %d\n", what, n, rc);
    }
    CHECK(n > 0 && n < 100000 && wrong == 0,
          "%s: each of its %ld allocations failing gives -ENOMEM (%d done without)", what, n,
          tolerated);
}

/* Routes with every prefix length, so that every part of the tables is built. */
static void make_routes(struct ofl_routes *r)
{
    ofl_routes_init(r);
    uint64_t s = 7;
    for (unsigned len = 0; len <= 32; len++)
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t a = (uint32_t)(s >> 32);
            ofl_routes_add4(r, len ? a & (0xFFFFFFFFu << (32 - len)) : 0, (uint8_t)len,
                            (uint16_t)(1 + k));
        }
    for (unsigned len = 0; len <= 128; len++)
        for (int k = 0; k < 3; k++) {
            uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8};
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            memcpy(a + 4, &s, 8);
            for (unsigned b = len; b < 128; b++) a[b / 8] &= (uint8_t)~(0x80u >> (b % 8));
            ofl_routes_add6(r, a, (uint8_t)len, (uint16_t)(1 + k));
        }
}

/* The routes, and tables built from them with every allocation made: a table built
 * while one failed (and done without it) must answer as they do. */
struct lpm_try {
    struct ofl_routes r;
    struct ofl_lpm4 *ref4;
    struct ofl_lpm6 *ref6;
};

static int try_lpm4(void *arg)
{
    const struct lpm_try *x = arg;
    struct ofl_lpm4 *t = (void *)1;
    char err[256];
    int rc = ofl_lpm4_build(&t, x->r.v4, x->r.n4, err);
    if (rc < 0) return t == NULL ? rc : -EFAULT;
    size_t bad = 0;
    for (size_t i = 0; i < x->r.n4; i++)
        for (uint32_t d = 0; d < 2; d++) {  /* each route's first address and its last */
            uint32_t a = x->r.v4[i].addr | (d && x->r.v4[i].len < 32
                                                ? 0xFFFFFFFFu >> x->r.v4[i].len : 0);
            bad += ofl_lpm4_lookup(t, a) != ofl_lpm4_lookup(x->ref4, a);
        }
    ofl_lpm4_free(t);
    return bad ? -EFAULT : 0;
}

static int try_lpm6(void *arg)
{
    const struct lpm_try *x = arg;
    struct ofl_lpm6 *t = (void *)1;
    char err[256];
    int rc = ofl_lpm6_build(&t, x->r.v6, x->r.n6, err);
    if (rc < 0) return t == NULL ? rc : -EFAULT;
    size_t bad = 0;
    for (size_t i = 0; i < x->r.n6; i++)
        bad += ofl_lpm6_lookup(t, x->r.v6[i].addr) != ofl_lpm6_lookup(x->ref6, x->r.v6[i].addr);
    ofl_lpm6_free(t);
    return bad ? -EFAULT : 0;
}

static int try_routes_load(void *arg)
{
    struct ofl_routes r;
    ofl_routes_init(&r);
    char err[256];
    int rc = ofl_routes_load(&r, arg, 4, err);
    size_t n = r.n4 + r.n6;
    ofl_routes_free(&r);
    return rc < 0 ? rc : n == 40 ? 0 : -EFAULT;
}

static int try_kv(void *arg)
{
    (void)arg;
    struct ofl_kv_config cfg = {.capacity = 1024, .mem_bytes = 0, .value_max = 100};
    struct ofl_kv *kv = (void *)1;
    int rc = ofl_kv_create(&kv, &cfg);
    if (rc < 0) return kv == NULL ? rc : -EFAULT;
    ofl_kv_destroy(kv);
    return 0;
}

static int try_kvc(void *arg)
{
    (void)arg;
    struct ofl_kvc_config cfg = {.entries = 256, .ways = 4, .value_max = 100,
                                 .policy = OFL_KVC_WRITE_BACK, .eviction = OFL_KVC_CLOCK};
    struct ofl_kvc *c = (void *)1;
    int rc = ofl_kvc_create(&c, &cfg);
    if (rc < 0) return c == NULL ? rc : -EFAULT;
    ofl_kvc_destroy(c);
    return 0;
}

/* Both ends of a ring (formatted outside the sweep) attached and detached. */
struct ring_try {
    void *mem;
    size_t len;
    struct ofl_ce ce;
    struct ofl_waiter w;
};

static int try_queue(void *arg)
{
    struct ring_try *t = arg;
    struct ofl_qout o;
    struct ofl_qin in;
    int rc = ofl_qout_init(&o, t->mem, t->len, &t->ce, &t->w);
    if (rc < 0) return rc;
    rc = ofl_qin_init(&in, t->mem, t->len, &t->ce, &t->w);
    if (rc == 0) ofl_qin_destroy(&in);
    ofl_qout_destroy(&o);
    return rc;
}

static struct ofl_src_opts src_opts(void)
{
    struct ofl_src_opts o = {.loops = 1, .mtu = 2048, .count = 100, .seed = 1};
    return o;
}

/* A synthetic source with a size mix and a prefix file (arg: its path). */
static int try_synth(void *arg)
{
    struct ofl_synth_opts so = {.sizes = "64:7,576:4,1500:1", .prefixes = arg};
    struct ofl_src_opts o = src_opts();
    struct ofl_src *src = (void *)1;
    char err[256];
    int rc = ofl_synth_src_open(&src, &so, &o, err);
    if (rc < 0) return src == NULL ? rc : -EFAULT;
    ofl_src_close(src);
    return 0;
}

/* A capture written by a pcap sink (arg: its path), then replayed by a pcap source. */
static int try_pcap(void *arg)
{
    struct ofl_pcap_sink *k = (void *)1;
    char err[256];
    int rc = ofl_pcap_sink_open(&k, arg, 65535, err);
    if (rc < 0) return k == NULL ? rc : -EFAULT;
    uint8_t frame[60] = {0};
    for (int i = 0; i < 8; i++) {
        struct ofl_pkt p = {frame, sizeof frame, sizeof frame, (uint64_t)i};
        ofl_pcap_sink_write(k, &p);
    }
    if ((rc = ofl_pcap_sink_close(k)) < 0) return rc;
    struct ofl_src_opts o = src_opts();
    struct ofl_src *src = (void *)1;
    rc = ofl_pcap_src_open(&src, arg, &o, err);
    if (rc < 0) return src == NULL ? rc : -EFAULT;
    ofl_src_close(src);
    return 0;
}

/* A UDP source and a sink of 4 slots on one socket (arg: its fd). */
static int try_udp(void *arg)
{
    int fd = *(int *)arg;
    struct ofl_src_opts o = src_opts();
    struct ofl_src *src = (void *)1;
    char err[256];
    int rc = ofl_udp_src_open(&src, fd, &o, err);
    if (rc < 0) return src == NULL ? rc : -EFAULT;
    ofl_src_close(src);
    struct ofl_udp_sink *k = (void *)1;
    rc = ofl_udp_sink_open(&k, fd, 4, err);
    if (rc < 0) return k == NULL ? rc : -EFAULT;
    ofl_udp_sink_close(k);
    return 0;
}

/* The TCP gateway in front of a UDP server (arg: a listening socket's fd). */
static int try_tcp_gw(void *arg)
{
    struct ofl_tcp_gw_config cfg = {.listen_fd = *(int *)arg, .server_addr = INADDR_LOOPBACK,
                                    .server_port = 9, .max_conns = 16};
    struct ofl_tcp_gw *gw = (void *)1;
    char err[256];
    int rc = ofl_tcp_gw_create(&gw, &cfg, err);
    if (rc < 0) return gw == NULL ? rc : -EFAULT;
    ofl_tcp_gw_destroy(gw);
    return 0;
}

/* A channel manager of one thread serving one end (arg: a region with channel 0). */
static int try_chan_mgr(void *arg)
{
    struct ofl_chan_mgr *m = ofl_chan_mgr_start(1, NULL);
    if (!m) return -ENOMEM;   /* here only when its allocation failed */
    int rc = ofl_chan_mgr_serve(m, arg, 0, OFL_CHAN_B, NULL, NULL, NULL);
    ofl_chan_mgr_stop(m);
    return rc;
}

/* Registered channel memory allocated and freed. */
static int try_chan_mem(void *arg)
{
    (void)arg;
    struct ofl_chan_mem m;
    int rc = ofl_chan_mem_alloc(&m, 1u << 20);
    if (rc == 0) ofl_chan_mem_free(&m);
    return rc;
}

/* A file read whole (arg: its path, 100 KB, so that the buffer grows). */
static int try_file_read(void *arg)
{
    void *data = (void *)1;
    size_t len = 1;
    int rc = ofl_file_read(arg, &data, &len);
    if (rc < 0) return data == NULL && len == 0 ? rc : -EFAULT;
    free(data);
    return len == 100000 ? 0 : -EFAULT;
}

/* A window created, then opened a second time (arg: its path, removed after). */
static int try_window(void *arg)
{
    struct ofl_window w, v;
    int rc = ofl_window_create(&w, arg, 1u << 20);
    if (rc < 0) return rc;
    rc = ofl_window_open(&v, arg);
    if (rc == 0) ofl_window_close(&v);
    ofl_window_close(&w);
    unlink(arg);
    return rc;
}

/* A socket bound to a free port on 127.0.0.1 (listening when TCP), or -1. */
static int local_socket(int type)
{
    int fd = socket(AF_INET, type, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
                    (type == SOCK_STREAM && listen(fd, 4) < 0))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    const char *tmp = argc > 2 && !strcmp(argv[1], "--tmp") ? argv[2] : "/tmp";
    struct lpm_try x;
    char err[256];
    make_routes(&x.r);
    CHECK(ofl_lpm4_build(&x.ref4, x.r.v4, x.r.n4, err) == 0 &&
              ofl_lpm6_build(&x.ref6, x.r.v6, x.r.n6, err) == 0,
          "reference tables of %zu IPv4 and %zu IPv6 routes", x.r.n4, x.r.n6);
    sweep("IPv4 DIR-24-8 build", try_lpm4, &x);
    sweep("IPv6 table build", try_lpm6, &x);
    ofl_lpm4_free(x.ref4);
    ofl_lpm6_free(x.ref6);
    ofl_routes_free(&x.r);

    char path[4096];
    snprintf(path, sizeof path, "%s/oom-routes.txt", tmp);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "route file %s written", path);
    if (f) {
        for (int i = 0; i < 20; i++) fprintf(f, "10.%d.0.0/16 x\n2001:db8:%x::/48\n", i, i);
        fclose(f);
        sweep("route file load", try_routes_load, path);
        sweep("synthetic source open", try_synth, path);
        remove(path);
    }
    sweep("registered channel memory", try_chan_mem, NULL);
    snprintf(path, sizeof path, "%s/oom-file", tmp);
    f = fopen(path, "w");
    CHECK(f != NULL, "a 100 KB file written");
    if (f) {
        for (int i = 0; i < 100000; i++) fputc('a' + i % 26, f);
        fclose(f);
        sweep("file read", try_file_read, path);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/oom-window", tmp);
    sweep("window create and open", try_window, path);
    snprintf(path, sizeof path, "%s/oom.pcap", tmp);
    sweep("pcap sink and source open", try_pcap, path);
    remove(path);
    int udp = local_socket(SOCK_DGRAM), tcp = local_socket(SOCK_STREAM);
    CHECK(udp >= 0 && tcp >= 0, "local UDP and TCP sockets");
    if (udp >= 0) sweep("UDP source and sink open", try_udp, &udp);
    if (tcp >= 0) sweep("TCP gateway create", try_tcp_gw, &tcp);
    close(udp);
    close(tcp);

    sweep("key-value store create", try_kv, NULL);
    sweep("NIC cache create", try_kvc, NULL);

    size_t rlen = ofl_chan_region_size(1);
    void *region = aligned_alloc(4096, rlen);
    CHECK(region && ofl_chan_region_format(region, rlen, 1) == 0 &&
              ofl_chan_create(region, "oom") == 0, "channel region formatted");
    sweep("channel manager start and serve", try_chan_mgr, region);
    free(region);

    struct ring_try q;
    q.len = ofl_ring_mem_size(64, 128);
    q.mem = aligned_alloc(64, q.len);
    CHECK(q.mem && ofl_ring_format(q.mem, q.len, 64, 128, 8, 0) == 0, "ring formatted");
    CHECK(ofl_ce_start(&q.ce, OFL_CE_INLINE, -1) == 0, "copy engine started");
    ofl_waiter_init(&q.w, NULL, 0, NULL);
    sweep("queue ends attach", try_queue, &q);
    ofl_ce_stop(&q.ce);
    free(q.mem);
    return CHECK_DONE();
}
