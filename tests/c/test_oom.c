/* Out of memory: every allocation that the runtime's constructors make is made to
 * fail in turn, and each failure must come back as -ENOMEM with nothing built and
 * nothing leaked (LeakSanitizer checks the leaks in the ASan build), or be one the
 * constructor may do without (it then succeeds). The key-value store's TCP server is
 * swept while serving too: every allocation of a session (a connection's buffers as
 * they grow for a 100 KB value, the store's items, the replies) fails in turn, and
 * the client must get memcached's out-of-memory answers in place of the lost
 * replies (or see the connection closed), never a wrong answer or a crash.
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
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "offlow/chan.h"
#include "offlow/file.h"
#include "offlow/gen.h"
#include "offlow/kvcache.h"
#include "offlow/kvs_tcp.h"
#include "offlow/kvstore.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/pcap_port.h"
#include "offlow/queue.h"
#include "offlow/ring.h"
#include "offlow/routes.h"
#include "offlow/synth.h"
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

/* An IPv6 table opened for updates, then a batch of one update: a failed open sets no
 * table; a failed update leaves every answer as before; a done one adds its route. */
static int try_lpm6_live(void *arg)
{
    const struct lpm_try *x = arg;
    struct ofl_lpm6 *t = (void *)1;
    char err[256];
    int rc = ofl_lpm6_open_live(&t, x->r.v6, x->r.n6, err);
    if (rc < 0) return t == NULL ? rc : -EFAULT;
    static const uint8_t host[16] = {0xff, 0x0e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
    rc = ofl_lpm6_add(t, host, 128, 77, err);
    size_t bad = rc == 0 ? ofl_lpm6_lookup(t, host) != 77
                         : ofl_lpm6_lookup(t, host) != ofl_lpm6_lookup(x->ref6, host);
    for (size_t i = 0; i < x->r.n6; i++)
        if (memcmp(x->r.v6[i].addr, host, 16) != 0)
            bad += ofl_lpm6_lookup(t, x->r.v6[i].addr) !=
                   ofl_lpm6_lookup(x->ref6, x->r.v6[i].addr);
    ofl_lpm6_free(t);
    return bad ? -EFAULT : rc;
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
        struct ofl_pkt p = {frame, sizeof frame, sizeof frame, (uint64_t)i, 0};
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

/* A small store (1 MiB values) and the TCP engine's shared part over it. */
static int tcp_store(struct ofl_kv **kv, struct ofl_kvs_tcp_shared *sh)
{
    struct ofl_kv_config cfg = {.capacity = 64, .mem_bytes = 0, .value_max = 1 << 20};
    int rc = ofl_kv_create(kv, &cfg);
    if (rc >= 0) ofl_kvs_tcp_shared_init(sh, *kv, 0, 0, NULL);
    return rc;
}

/* The key-value store's TCP server with threads of its own (arg: a listening
 * socket's fd). */
static int try_tcp_server(void *arg)
{
    struct ofl_kv *kv;
    struct ofl_kvs_tcp_shared sh;
    int rc = tcp_store(&kv, &sh);
    if (rc < 0) return rc;
    struct ofl_kvs_tcp_server *srv = (void *)1;
    char err[256];
    rc = ofl_kvs_tcp_server_start(&srv, &sh, *(int *)arg, 2, err);
    if (rc < 0 && srv) rc = -EFAULT;
    ofl_kvs_tcp_server_stop(rc < 0 ? NULL : srv);
    ofl_kv_destroy(kv);
    return rc;
}

/* ---- serving -------------------------------------------------------------------- */

/* A session's requests: a 100 KB value (the input buffer grows for it), a multi-get,
 * a stats answer, arithmetic, meta commands; "version" last, as a marker. */
static char *session_text(size_t *len)
{
    static const char tail[] =
        "get big small nope big\r\nset small 0 0 2\r\n42\r\nincr small 8\r\nstats\r\n"
        "ms m 3 T0\r\nabc\r\nmg m v s\r\nappend big 0 0 1\r\n!\r\nversion\r\n";
    size_t v = 100000, head = 64;
    char *s = malloc(head + v + 2 + sizeof tail);
    int n = snprintf(s, head, "set big 0 0 %zu\r\n", v);
    memset(s + n, 'v', v);
    memcpy(s + n + v, "\r\n", 2);
    memcpy(s + n + v + 2, tail, sizeof tail);
    *len = (size_t)n + v + 2 + sizeof tail - 1;
    return s;
}

/* The same over the binary protocol: SET of 100 KB, GET, GETK of a miss, STAT, NOOP
 * last as the marker. */
static uint8_t *session_binary(size_t *len)
{
    size_t v = 100000, cap = 2 * v + 4096, n = 0;
    uint8_t *s = malloc(cap), *val = malloc(v);
    memset(val, 'b', v);
    const uint8_t ex[8] = {0};
    n += (size_t)ofl_mc_write_request(s + n, cap - n, OFL_MC_OP_SET, 1, 0, ex, 8, "big", 3, val, v);
    n += (size_t)ofl_mc_write_request(s + n, cap - n, OFL_MC_OP_GET, 2, 0, NULL, 0, "big", 3, NULL, 0);
    n += (size_t)ofl_mc_write_request(s + n, cap - n, OFL_MC_OP_GETK, 3, 0, NULL, 0, "no", 2, NULL, 0);
    n += (size_t)ofl_mc_write_request(s + n, cap - n, OFL_MC_OP_STAT, 4, 0, NULL, 0, NULL, 0, NULL, 0);
    n += (size_t)ofl_mc_write_request(s + n, cap - n, OFL_MC_OP_NOOP, 5, 0, NULL, 0, NULL, 0, NULL, 0);
    free(val);
    *len = n;
    return s;
}

/* Is `line` (without CRLF) one of memcached's answers that this session may get? */
static int text_answer_ok(const char *line, int *oom)
{
    static const char *const plain[] = {"STORED", "NOT_STORED", "END", "HD", "EN", "NS",
                                        "NOT_FOUND", "RESET", "ERROR"};
    static const char *const ooms[] = {"SERVER_ERROR out of memory storing object",
                                       "SERVER_ERROR out of memory writing get response",
                                       "SERVER_ERROR out of memory"};
    for (size_t i = 0; i < sizeof ooms / sizeof ooms[0]; i++)
        if (!strcmp(line, ooms[i])) return *oom = 1;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(line, plain[i])) return 1;
    if (!strncmp(line, "STAT ", 5) || !strncmp(line, "VERSION ", 8)) return 1;
    return line[0] >= '0' && line[0] <= '9' && strspn(line, "0123456789") == strlen(line);
}

/* Answers a session gets, one per request (a get's VALUE blocks and END are one, so
 * are the STAT lines and END; an out-of-memory answer takes the place of one). */
#define TEXT_ANSWERS 9
#define BINARY_ANSWERS 5

/* Check a text session's answers (`n` bytes, `closed`: the server closed the
 * connection): every one is an answer memcached gives here, values included, one per
 * request, the marker's last, unless the connection was closed. Returns 0 (the whole
 * answer, no out-of-memory answer in it), -ENOMEM (out-of-memory answers, or closed),
 * or -EFAULT (something else: a wrong or missing answer). */
static int check_text(const char *r, size_t n, int closed)
{
    int oom = 0, marker = 0, answers = 0, open_block = 0;
    size_t off = 0;
    while (off < n) {
        const char *eol = memmem(r + off, n - off, "\r\n", 2);
        if (!eol) return closed ? -ENOMEM : -EFAULT;
        char line[512];
        size_t ll = (size_t)(eol - (r + off));
        if (ll >= sizeof line) return -EFAULT;
        memcpy(line, r + off, ll);
        line[ll] = 0;
        off += ll + 2;
        unsigned long vlen;
        int value = sscanf(line, "VALUE %*s %*u %lu", &vlen) == 1;
        if (value || sscanf(line, "VA %lu", &vlen) == 1) {
            if (n - off < vlen + 2) return closed ? -ENOMEM : -EFAULT;
            for (size_t i = 0; i < vlen; i++)
                if (!strchr("v!42abc50", r[off + i])) return -EFAULT;
            off += vlen + 2;
            if (value) open_block = 1;   /* a get's answer goes on to END */
            else answers++;
            continue;
        }
        if (!text_answer_ok(line, &oom)) {
            printf("  unexpected answer: %s\n", line);
            return -EFAULT;
        }
        if (!strncmp(line, "STAT ", 5)) {
            open_block = 1;
            continue;
        }
        answers++;   /* END closes an open block; any other line is an answer itself */
        open_block = 0;
        marker = !strncmp(line, "VERSION ", 8);
    }
    if (!closed && (!marker || answers != TEXT_ANSWERS || open_block)) {
        printf("  %d answers (want %d), marker %d\n", answers, TEXT_ANSWERS, marker);
        return -EFAULT;
    }
    return oom || closed ? -ENOMEM : 0;
}

/* The same for a binary session: every response parses, its status OK, not found or
 * ENOMEM, a value only of the bytes stored; NOOP (opaque 5) last unless closed. */
static int check_binary(const uint8_t *r, size_t n, int closed)
{
    int oom = 0, marker = 0, answers = 0;
    size_t off = 0;
    while (off < n) {
        struct ofl_mc_res res;
        ssize_t k = ofl_mc_parse_response(r + off, n - off, &res, NULL);
        if (k <= 0) return closed && k == 0 ? -ENOMEM : -EFAULT;
        if (res.status == OFL_MC_ST_ENOMEM) oom = 1;
        else if (res.status != OFL_MC_ST_OK && res.status != OFL_MC_ST_NOT_FOUND) return -EFAULT;
        if (res.status == OFL_MC_ST_OK && res.opcode == OFL_MC_OP_GET)
            for (size_t i = 0; i < res.value_len; i++)
                if (res.value[i] != 'b') return -EFAULT;
        marker = res.opcode == OFL_MC_OP_NOOP && res.opaque == 5;
        /* a STAT answer is one response per statistic, then one with no key */
        answers += !(res.opcode == OFL_MC_OP_STAT && res.status == OFL_MC_ST_OK && res.key_len);
        off += (size_t)k;
    }
    if (!closed && (!marker || answers != BINARY_ANSWERS)) {
        printf("  %d binary answers (want %d), marker %d\n", answers, BINARY_ANSWERS, marker);
        return -EFAULT;
    }
    return oom || closed ? -ENOMEM : 0;
}

struct serve_try {
    int listen_fd;
    int binary;
};

/* One session against a TCP worker driven here (one thread: the client's writes and
 * reads interleave with the worker's events), with an allocation failing somewhere. */
static int try_serving(void *arg)
{
    const struct serve_try *t = arg;
    struct ofl_kv *kv;
    struct ofl_kvs_tcp_shared sh;
    int rc = tcp_store(&kv, &sh);
    if (rc < 0) return rc;
    struct ofl_kvs_tcp_worker w;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    getsockname(t->listen_fd, (struct sockaddr *)&a, &al);
    int cl = socket(AF_INET, SOCK_STREAM, 0);
    if (ep < 0 || cl < 0 || ofl_kvs_tcp_worker_init(&w, &sh, ep, t->listen_fd) < 0 ||
        connect(cl, (struct sockaddr *)&a, sizeof a) < 0) {
        printf("  cannot set up a session\n");
        return -EFAULT;
    }
    fcntl(cl, F_SETFL, fcntl(cl, F_GETFL) | O_NONBLOCK);
    long saved = fail_at;   /* the session's own buffers are not the runtime's */
    fail_at = -1;
    size_t len;
    uint8_t *req = t->binary ? session_binary(&len) : (uint8_t *)session_text(&len);
    size_t cap = 1 << 20, got = 0, sent = 0;
    char *resp = malloc(cap);
    fail_at = saved;
    int closed = 0, idle = 0;
    while (!closed && idle < 200) {
        int progress = 0;
        if (sent < len) {
            ssize_t k = send(cl, req + sent, len - sent, MSG_NOSIGNAL);
            if (k > 0) sent += (size_t)k, progress = 1;
        }
        struct epoll_event evs[8];
        int ne = epoll_wait(ep, evs, 8, 1);
        for (int i = 0; i < ne; i++) ofl_kvs_tcp_worker_event(&w, evs[i].data.ptr, evs[i].events);
        progress |= ne > 0;
        ssize_t k = recv(cl, resp + got, cap - got, 0);
        if (k > 0) got += (size_t)k, progress = 1;
        else if (k == 0) closed = 1;
        idle = progress ? 0 : idle + 1;
    }
    rc = t->binary ? check_binary((const uint8_t *)resp, got, closed)
                   : check_text(resp, got, closed);
    ofl_kvs_tcp_worker_fini(&w);
    close(ep);
    close(cl);
    ofl_kv_destroy(kv);
    free(resp);
    free(req);
    return rc;
}

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

/* A core's init (ofl_core_init) in a window: a failure leaves nothing allocated (one
 * after its buffers, at its copy engine, left them to a caller that destroyed the core
 * only once the engine was made: the xdp crossing's close); a core built, failed
 * (its error's text) and destroyed leaves nothing either. */
static int try_core(void *arg)
{
    struct ofl_window w;
    int rc = ofl_window_create(&w, arg, 1u << 20);
    if (rc < 0) return rc;
    struct ofl_args a = {.device = "host", .ce_mode = OFL_CE_INLINE, .udp_fd = -1,
                         .runner_fd = -1};
    struct ofl_core c;
    rc = ofl_core_init(&c, &a, &w, "seg", 0, 1, 0, 2048);
    if (rc == 0) {
        ofl_core_fail(&c, -EIO, "a failure's text");
        ofl_core_destroy(&c);
    }
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
    sweep("IPv6 table opened for updates, one update", try_lpm6_live, &x);
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
    sweep("core init, failed and destroyed", try_core, path);
    snprintf(path, sizeof path, "%s/oom.pcap", tmp);
    sweep("pcap sink and source open", try_pcap, path);
    remove(path);
    int udp = local_socket(SOCK_DGRAM), tcp = local_socket(SOCK_STREAM);
    CHECK(udp >= 0 && tcp >= 0, "local UDP and TCP sockets");
    if (udp >= 0) sweep("UDP source and sink open", try_udp, &udp);
    if (tcp >= 0) sweep("key-value TCP server start", try_tcp_server, &tcp);
    struct serve_try st = {tcp, 0};
    if (tcp >= 0) sweep("key-value store serving text over TCP", try_serving, &st);
    st.binary = 1;
    if (tcp >= 0) sweep("key-value store serving binary over TCP", try_serving, &st);
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
