/* Support for generated programs: options, segment cores, ports by name, stats. */
#include "offlow/gen.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "offlow/ctl_stage.h"
#include "offlow/err.h"
#include "offlow/live.h"
#include "offlow/live_file.h"
#include "offlow/live_port.h"
#include "offlow/pcap_port.h"
#include "offlow/ring.h"
#include "offlow/stop.h"
#include "offlow/synth.h"
#include "offlow/thread.h"
#include "offlow/udp_port.h"

int ofl_fatal(const char *msg)
{
    fprintf(stderr, "offlow: %s\n", msg);
    return 1;
}

int ofl_fatal_err(const char *msg, int err)
{
    fprintf(stderr, "offlow: %s: %s\n", msg, ofl_strerror(err));
    return 1;
}

static int bad_opt(const char *what, const char *arg)
{
    fprintf(stderr, "offlow: bad option %s %s\n", what, arg ? arg : "(missing)");
    return -EINVAL;
}

/* A file descriptor number, or -1 when `v` is not one. */
static int parse_fd(const char *v)
{
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    return errno || end == v || *end || fd < 0 || fd > 1 << 20 ? -1 : (int)fd;
}

int ofl_args_parse(struct ofl_args *a, int argc, char **argv, const char *device)
{
    memset(a, 0, sizeof *a);
    a->device = device;
    a->ce_mode = OFL_CE_INLINE;
    a->udp_fd = -1;
    a->runner_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--init")) { a->init = true; continue; }
        if (!strcmp(k, "--serve")) { a->serve = true; continue; }
        if (!v) return bad_opt(k, v);
        i++;
        if (!strcmp(k, "--window")) a->window = v;
        else if (!strcmp(k, "--stats")) a->stats = v;
        else if (!strcmp(k, "--reload")) a->reload = v;
        else if (!strcmp(k, "--cpu-base")) a->cpu_base = atoi(v);
        else if (!strcmp(k, "--ce")) {
            if (!strcmp(v, "inline")) a->ce_mode = OFL_CE_INLINE;
            else if (!strcmp(v, "thread")) a->ce_mode = OFL_CE_THREAD;
            else return bad_opt(k, v);
        } else if (!strcmp(k, "--udp-fd")) {
            if ((a->udp_fd = parse_fd(v)) < 0) return bad_opt(k, v);
        } else if (!strcmp(k, "--runner-fd")) {
            if ((a->runner_fd = parse_fd(v)) < 0) return bad_opt(k, v);
        } else if (!strcmp(k, "--peer-fd")) {
            if (a->npeers == 4) return bad_opt(k, v);
            a->peer_fds[a->npeers++] = atoi(v);
        } else if (!strcmp(k, "--opt") || !strcmp(k, "--user-opt")) {
            const char *eq = strchr(v, '=');
            if (!eq) return bad_opt(k, v);
            if (a->nopts == OFL_MAX_OPTS) {
                fprintf(stderr, "offlow: more than %d --opt options (at %s)\n", OFL_MAX_OPTS, v);
                return -E2BIG;
            }
            a->opt_key[a->nopts] = v;
            a->opt_keylen[a->nopts] = (size_t)(eq - v);
            a->opt_user[a->nopts] = k[2] == 'u';
            a->opt_val[a->nopts++] = eq + 1;
        } else {
            return bad_opt(k, v);
        }
    }
    if (!a->window) return bad_opt("--window", NULL);
    /* SIGINT/SIGTERM end the loops' sources, not the process: queues drain and the
     * stats are written (a UDP run serves until then; others may stop early). */
    if (ofl_stop_signals_block() < 0)
        return ofl_fatal("cannot block SIGINT and SIGTERM"), -EINVAL;
    return 0;
}

/* Whether option i names NAME (nl bytes), and KEY (kl bytes) when key is not NULL. */
static bool opt_is(const struct ofl_args *a, int i, const char *name, size_t nl,
                   const char *key, size_t kl)
{
    const char *k = a->opt_key[i];
    if (a->opt_keylen[i] <= nl || strncmp(k, name, nl) || k[nl] != '.') return false;
    return !key || (a->opt_keylen[i] == nl + 1 + kl && !strncmp(k + nl + 1, key, kl));
}

/* Add "NAME.KEY" to u->keys unless it is there (or there is no room: messages only). */
static void note_asked(struct ofl_opt_use *u, const char *name, const char *key)
{
    char nk[256];
    int n = snprintf(nk, sizeof nk, "%s.%s", name, key);
    if (n < 0 || (size_t)n >= sizeof nk) return;
    for (size_t off = 0; off < u->len; off += strlen(u->keys + off) + 1)
        if (!strcmp(u->keys + off, nk)) return;
    if (u->len + (size_t)n + 1 > sizeof u->keys) return;
    memcpy(u->keys + u->len, nk, (size_t)n + 1);
    u->len += (size_t)n + 1;
}

const char *ofl_args_get(const struct ofl_args *a, const char *name, const char *key,
                         const char *dflt)
{
    size_t nl = strlen(name), kl = strlen(key);
    const char *v = NULL;
    for (int i = a->nopts - 1; i >= 0; i--) {
        if (!opt_is(a, i, name, nl, key, kl)) continue;
        if (!v) v = a->opt_val[i];
        if (!a->use) break;   /* (recording: every one given is marked asked for) */
        a->use->asked[i] = true;
    }
    if (a->use) note_asked(a->use, name, key);
    return v ? v : dflt;
}

const char *ofl_args_get_own(const struct ofl_args *a, const char *name, const char *key,
                             const char *dflt)
{
    size_t nl = strlen(name), kl = strlen(key);
    for (int i = a->nopts - 1; i >= 0; i--)
        if (!a->opt_user[i] && opt_is(a, i, name, nl, key, kl)) return a->opt_val[i];
    return dflt;
}

void ofl_start_failf(const struct ofl_args *a, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char path[4096];
    FILE *f = NULL;
    if (a->stats && snprintf(path, sizeof path, "%s.error", a->stats) < (int)sizeof path) {
        f = fopen(path, "wx");   /* (exclusive: the first failure said is the cause) */
        if (!f && errno == EEXIST) return;
    }
    bool said = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) said = false;
    if (!said) fprintf(stderr, "offlow %s: %s\n", a->device, text);
}

size_t ofl_args_asked(const struct ofl_args *a, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name), n = 0;
    if (!a->use) return 0;
    for (size_t off = 0; off < a->use->len; off += strlen(a->use->keys + off) + 1) {
        const char *nk = a->use->keys + off;
        if (strncmp(nk, name, nl) || nk[nl] != '.') continue;
        size_t kl = strlen(nk + nl + 1) + 1;
        if (n + kl > cap) break;
        memcpy(buf + n, nk + nl + 1, kl);
        n += kl;
    }
    return n;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

int ofl_args_check_unread(const struct ofl_args *a, const char *what, const char *name)
{
    if (!a->use) return 0;
    size_t nl = strlen(name);
    for (int i = 0; i < a->nopts; i++) {
        if (!a->opt_user[i] || a->use->asked[i] || !opt_is(a, i, name, nl, NULL, 0)) continue;
        /* the keys asked for `name`, sorted, for the message */
        const char *keys[OFL_OPT_ASKED_MAX / 2];
        size_t nkeys = 0;
        for (size_t off = 0; off < a->use->len; off += strlen(a->use->keys + off) + 1) {
            const char *nk = a->use->keys + off;
            if (!strncmp(nk, name, nl) && nk[nl] == '.') keys[nkeys++] = nk + nl + 1;
        }
        qsort(keys, nkeys, sizeof *keys, by_name);
        char msg[2048];
        const size_t kl = a->opt_keylen[i] - nl - 1;
        size_t n = (size_t)snprintf(msg, sizeof msg, "--opt %s: %s %s (on %s) takes no option "
                                    "`%.*s` (it takes", a->opt_key[i], what, name, a->device,
                                    (int)kl, a->opt_key[i] + nl + 1);
        for (size_t k = 0; k < nkeys && n < sizeof msg; k++)
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", k ? ", " : " ", keys[k]);
        if (n < sizeof msg) snprintf(msg + n, sizeof msg - n, ")");
        ofl_start_failf(a, "%s", msg);
        return -EINVAL;
    }
    return 0;
}

int ofl_proc_open(struct ofl_window *w, const struct ofl_args *a, size_t size)
{
    int rc = ofl_window_open(w, a->window);
    if (rc < 0) {
        ofl_start_failf(a, "cannot open the interconnect window %s: %s", a->window,
                        ofl_strerror(rc));
        return rc;
    }
    if (w->size < size) {
        ofl_window_close(w);
        ofl_start_failf(a, "window %s is %zu bytes, the program needs %zu (built by another "
                        "version of the program?)", a->window, w->size, size);
        return -EINVAL;
    }
    return 0;
}

void ofl_window_mark_runner(struct ofl_window *w)
{
    ((struct ofl_window_hdr *)w->base)->runner = (int32_t)getppid();
}

void ofl_window_abort(struct ofl_window *w)
{
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    __atomic_store_n(&h->abort, 1u, __ATOMIC_RELEASE);
}

/* Turns between two looks at the pending signals in ofl_core_stopping. */
#define STOP_POLL_EVERY 256u

int ofl_core_stopping(struct ofl_core *c)
{
    return ++c->stop_polls % STOP_POLL_EVERY == 0 && ofl_stop_requested();
}

int ofl_serve_until_stopped(struct ofl_window *w)
{
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    pid_t parent = getppid();
    const struct timespec ms = {0, 1000000};
    __atomic_add_fetch(&h->drained, 1u, __ATOMIC_RELEASE);
    for (;;) {
        if (__atomic_load_n(&h->abort, __ATOMIC_ACQUIRE)) return -ECANCELED;
        if (__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) return 0;
        if (ofl_stop_requested()) return 0;
        if (getppid() != parent) return -EPIPE;
        nanosleep(&ms, NULL);
    }
}

/* The calling thread's CPU time in ns (0 if the clock is missing). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether `name` is one of the comma-separated names of `list`. */
static bool listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* The dilation options of a profile-scaled run (dilate.integer, .lookup, .hash: each
 * kind's slow-down factor, >= 1; dilate.only=SEG,SEG: only those segments' cores are
 * slowed, the others timed at factor 1); -EINVAL on a bad one. */
static int dilate_init(struct ofl_core *c, const struct ofl_args *a)
{
    static const char *const kinds[OFL_WORK_KINDS] = {"integer", "lookup", "hash"};
    double f[OFL_WORK_KINDS];
    int given = 0;
    for (int k = 0; k < OFL_WORK_KINDS; k++) {
        const char *v = ofl_args_get(a, "dilate", kinds[k], NULL);
        char *end = NULL;
        f[k] = v ? strtod(v, &end) : 1.0;
        if (v && (end == v || *end || !(f[k] >= 1.0) || f[k] > 1e6)) {
            ofl_start_failf(a, "--opt dilate.%s=%s: give a factor from 1 to 1e6", kinds[k], v);
            return -EINVAL;
        }
        given |= v != NULL;
    }
    c->dilating = given;
    const char *only = ofl_args_get(a, "dilate", "only", NULL);
    const bool slowed = !only || listed(only, c->segment);
    for (int k = 0; k < OFL_WORK_KINDS; k++)
        c->dilate_kind[k] = given && slowed ? f[k] - 1.0 : 0.0;
    c->dilate_kind[OFL_WORK_WIRE] = 0.0;
    static const char *const rates[2] = {"gbps", "dma_gbps"};
    double *to[2] = {&c->link_gbps, &c->dma_gbps};
    for (int k = 0; k < 2; k++) {
        const char *v = ofl_args_get(a, "link", rates[k], NULL);
        if (!v) continue;
        char *end = NULL;
        *to[k] = strtod(v, &end);
        if (end == v || *end || !(*to[k] > 0) || *to[k] > 1e6) {
            ofl_start_failf(a, "--opt link.%s=%s: give a rate from 0 to 1e6 Gb/s", rates[k], v);
            return -EINVAL;
        }
    }
    const char *v = ofl_args_get(a, "link", "latency_us", NULL);
    if (v) {
        char *end = NULL;
        double us = strtod(v, &end);
        if (end == v || *end || !(us >= 0) || us > 1e6) {
            ofl_start_failf(a, "--opt link.latency_us=%s: give a latency from 0 to 1e6 us", v);
            return -EINVAL;
        }
        c->link_delay_ns = (uint64_t)(us * 1000.0 + 0.5);
    }
    if (given) {
        /* The counter's rate (ticks per ns), to count the stretched time in ns: 2 ms. */
        uint64_t t0 = ofl_now_ns(), k0 = ofl_ticks(), t1;
        while ((t1 = ofl_now_ns()) - t0 < 2000000) ofl_cpu_relax();
        c->ticks_per_ns = (double)(ofl_ticks() - k0) / (double)(t1 - t0);
    }
    return 0;
}

int ofl_core_init(struct ofl_core *c, const struct ofl_args *a, struct ofl_window *w,
                  const char *segment, unsigned idx, unsigned n, int core_no, size_t bufsize)
{
    memset(c, 0, sizeof *c);
    c->device = a->device;
    c->segment = segment;
    c->idx = idx;
    c->n = n;
    c->cpu = a->cpu_base + core_no;
    int bad = dilate_init(c, a);
    if (bad < 0) return bad;
    c->link = (struct ofl_window_link *)(w->base + OFL_WINDOW_LINK_OFF);
    c->link_dir = strcmp(a->device, "host") == 0;
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    c->abort = &h->abort;
    ofl_waiter_init(&c->waiter, a->peer_fds, a->npeers, &h->abort);
    ofl_waiter_init(&c->local, NULL, 0, &h->abort);
    for (int i = 0; i < OFL_WAIT_MAX_PEERS; i++) {
        ofl_waiter_init(&c->peer[i], &a->peer_fds[i], i < a->npeers, &h->abort);
        c->peer[i].timed = c->dilating;
    }
    c->local.timed = c->dilating;
    c->ce = calloc(1, sizeof *c->ce);
    c->bufs = aligned_alloc(64, (bufsize + 63) / 64 * 64);
    c->scratch = calloc(1, bufsize);
    if (!c->ce || !c->bufs || !c->scratch) {
        ofl_core_destroy(c);   /* (what was made: nothing is left to the caller) */
        ofl_start_failf(a, "segment %s core %u: out of memory", segment, idx);
        return -ENOMEM;
    }
    int rc = ofl_ce_start(c->ce, a->ce_mode, -1);
    if (rc < 0) {
        free(c->ce);   /* (not started: nothing to stop) */
        c->ce = NULL;
        ofl_core_destroy(c);
        ofl_start_failf(a, "segment %s core %u: cannot start the copy engine: %s", segment,
                        idx, ofl_strerror(rc));
        return rc;
    }
    c->ce->timed = c->dilating;  /* (ofl_ce_start cleared it) */
    return 0;
}

/* The bytes this core has sent to other processes (its rings' producer ends there). */
static uint64_t link_bytes(const struct ofl_core *c)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < c->nlink; i++) sum += c->link_out[i]->bytes;
    return sum;
}

/* Take `need` ns of a shared bucket whose bytes so far cross at `*free` (ns): the
 * bytes just sent cross from then, or from `now` if it is idle. Returns when they will
 * have crossed. */
static uint64_t link_take(uint64_t *free, double need, uint64_t now)
{
    uint64_t old = __atomic_load_n(free, __ATOMIC_RELAXED), next;
    do {
        next = (old > now ? old : now) + (uint64_t)need;
    } while (!__atomic_compare_exchange_n(free, &old, next, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return next;
}

/* The link throttle (link.gbps, link.dma_gbps): the bytes sent to other processes since
 * the last turn take their time of this process's link direction and of the DMA engine,
 * both shared (the window's struct ofl_window_link); the core spins while either is
 * more than OFL_LINK_DEPTH_NS behind (the ns spun are returned). */
#define OFL_LINK_DEPTH_NS 20000u
static uint64_t link_throttle(struct ofl_core *c)
{
    uint64_t sent = link_bytes(c), now = ofl_now_ns();
    double bits = (double)(sent - c->link_sent) * 8.0;
    c->link_sent = sent;
    if (bits <= 0) return 0;
    uint64_t done = 0;
    if (c->link_gbps > 0) done = link_take(&c->link->free_ns[c->link_dir], bits / c->link_gbps, now);
    if (c->dma_gbps > 0) {
        uint64_t dma = link_take(&c->link->dma_free_ns, bits / c->dma_gbps, now);
        if (dma > done) done = dma;
    }
    if (done <= now + OFL_LINK_DEPTH_NS) return 0;
    uint64_t until = done - OFL_LINK_DEPTH_NS;
    while (ofl_now_ns() < until) ofl_cpu_relax();
    c->throttled_ns += until - now;
    return until - now;
}

/* The CPU time the core's threads spent waiting on its rings and its group so far. */
static uint64_t waited_ns(const struct ofl_core *c)
{
    uint64_t sum = c->local.waited_ns;
    for (int i = 0; i < OFL_WAIT_MAX_PEERS; i++) sum += c->peer[i].waited_ns;
    return sum;
}

/* Publish the doorbells of the core's rings to other processes whose latency has
 * passed (link.latency_us); returns how many are still held. */
static unsigned link_publish(struct ofl_core *c)
{
    unsigned held = 0;
    for (unsigned i = 0; i < c->nlink; i++) held += ofl_ring_publish_due(&c->link_out[i]->ring);
    return held;
}

void ofl_dilate_begin(struct ofl_core *c)
{
    if (c->link_delay_ns) link_publish(c);  /* (outside the turn's time) */
    if (!c->t_start) {  /* this turn may be the first to move packets: its start */
        c->turn0_ns = ofl_now_ns();
        c->turn0_tick = ofl_ticks();
        c->turn0_cpu = thread_cpu_ns();
    }
    c->dilate_extra = 0;
    c->dilate_work = 0;
    c->turn_timed = 0;
    c->turn_regions = 0;
    if (c->dilating) {
        c->turn_copy0 = c->ce->copy_ticks;
        c->turn_tick = ofl_ticks();
        c->turn_waited = waited_ns(c);
        c->turn_wall = ofl_now_ns();
    }
}

void ofl_dilate_end(struct ofl_core *c, int progress)
{
    if (!c->dilating || !progress) return;
    c->busy_ticks += c->dilate_work;
    /* The turn is timed by the counter, as the elements are (the thread's CPU clock is
     * a system call here, about 1 us a read, whose cost the emulation stretched as the
     * loop's work). A loop longer than a timed region may be was preempted: the mean
     * loop of the turns so far stands for it. */
    uint64_t ticks = ofl_ticks() - c->turn_tick;
    uint64_t waited = waited_ns(c) - c->turn_waited;
    double wticks = (double)waited * c->ticks_per_ns;
    /* The copy engine's copies in this thread (between the rings and the core's
     * buffers) are the emulated device's DMA engine at work, whose rate the link
     * throttle emulates: counted busy at this host's speed, never slowed. */
    uint64_t copied = c->ce->copy_ticks - c->turn_copy0;
    if (copied > ticks) copied = ticks;
    c->copy_ticks += copied;
    /* (each timed region's second read of the counter is outside it: not loop) */
    double loop = (double)ticks - wticks - (double)c->turn_timed - (double)copied -
                  (double)c->turn_regions * (double)c->timer_ticks;
    if (loop > (double)OFL_ETIME_MAX_TICKS)
        loop = c->loop_turns ? (double)c->loop_ticks / (double)c->loop_turns : 0.0;
    if (loop < 0) loop = 0;
    /* The loop and the rings are integer work: stretched as that kind is. */
    c->dilate_extra += loop * c->dilate_kind[OFL_WORK_INTEGER];
    c->loop_ticks += (uint64_t)loop;
    c->loop_turns++;
    /* Busy: the turn's own time (its elements and its loop, not its waits: a wait on a
     * full ring or for the group is the peer's time, and on a shared machine the peer
     * may be waiting for a CPU), and the time the spins stand for (what was asked, not
     * what a neighbour's preemption made of it). */
    uint64_t spun = c->link_gbps > 0 || c->dma_gbps > 0 ? link_throttle(c) : 0;
    if (c->dilate_extra >= 1.0) {
        uint64_t now = ofl_ticks(), until = now + (uint64_t)c->dilate_extra;
        while (ofl_ticks() < until) ofl_cpu_relax();
        c->dilated_ticks += ofl_ticks() - now;
        c->asked_ticks += (uint64_t)c->dilate_extra;
        spun += (uint64_t)(c->dilate_extra / c->ticks_per_ns);
    }
    uint64_t turn = (uint64_t)((double)ticks / c->ticks_per_ns);
    c->waited_ns += waited < turn ? waited : turn;
    c->busy_cpu_ns += (uint64_t)(((double)c->turn_timed + loop + (double)copied) /
                                 c->ticks_per_ns) + spun;
    uint64_t wall = ofl_now_ns() - c->turn_wall;
    c->busy_wall_ns += wall > waited ? wall - waited : 0;
}

/* The ticks an empty timed region takes, as OFL_ETIME_BEGIN/END time one: the median
 * of 64 (the least is a read the pipeline overlapped; the regions' reads cost more). */
static uint64_t timer_cost(void)
{
    enum { N = 64 };
    uint64_t dt[N];
    for (int k = 0; k < N; k++) {
        const uint64_t t0 = ofl_ticks();
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        dt[k] = ofl_ticks() - t0;
    }
    for (int i = 1; i < N; i++)  /* insertion sort: 64 values */
        for (int k = i; k > 0 && dt[k - 1] > dt[k]; k--) {
            const uint64_t t = dt[k];
            dt[k] = dt[k - 1];
            dt[k - 1] = t;
        }
    return dt[N / 2];
}

void ofl_core_begin(struct ofl_core *c)
{
    int rc = ofl_pin_self(c->cpu);
    c->oversubscribed = rc > 0;
    c->t_start = 0;  /* set when the first packet arrives: waiting for peers to start
                        (or to build their tables) is not processing time */
    c->timer_ticks = timer_cost();
}

bool ofl_core_err_secondary(int err)
{
    return err == -ECANCELED || err == OFL_RING_EBROKEN;
}

/* Record the core's first error with `where`, a heap string or NULL (no memory for
 * it: a fixed text is said instead); frees it when the core had failed already. The
 * text is published before the error (release): the live report's thread reads the
 * error first (acquire), then the text (ofl_stats_core). */
static void core_fail_with(struct ofl_core *c, int err, char *where)
{
    if (c->err) {
        free(where);
        return;
    }
    __atomic_store_n(&c->where, where, __ATOMIC_RELAXED);
    __atomic_store_n(&c->err, err ? err : -EIO, __ATOMIC_RELEASE);
    if (c->err != -ECANCELED && c->abort) __atomic_store_n(c->abort, 1u, __ATOMIC_RELEASE);
}

void ofl_core_fail(struct ofl_core *c, int err, const char *what)
{
    core_fail_with(c, err, c->err ? NULL : strdup(what));
}

/* `prefix` then `fmt` formatted with `ap`, on the heap (NULL: no memory, or a bad
 * format). */
static char *format_text(const char *prefix, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    size_t pre = strlen(prefix);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n >= 0 ? malloc(pre + (size_t)n + 1) : NULL;
    if (text) {
        memcpy(text, prefix, pre);
        vsnprintf(text + pre, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    return text;
}

void ofl_core_failf(struct ofl_core *c, int err, const char *fmt, ...)
{
    if (c->err) return;
    va_list ap;
    va_start(ap, fmt);
    char *text = format_text("", fmt, ap);
    va_end(ap);
    core_fail_with(c, err, text);
}

void ofl_core_fail_element(struct ofl_core *c, const char *element, const char *fmt, ...)
{
    if (c->err) return;
    size_t len = strlen(element) + sizeof "element : ";
    char *prefix = malloc(len);
    if (!prefix) {
        core_fail_with(c, OFL_EFAIL, NULL);
        return;
    }
    snprintf(prefix, len, "element %s: ", element);
    va_list ap;
    va_start(ap, fmt);
    char *text = format_text(prefix, fmt, ap);
    va_end(ap);
    free(prefix);
    core_fail_with(c, OFL_EFAIL, text);
}

/* What a failed core was doing, as said on stderr and in its stats. */
static const char *core_where(const struct ofl_core *c)
{
    const char *w = __atomic_load_n(&c->where, __ATOMIC_RELAXED);
    return w ? w : "(no memory to say where)";
}

/* Idle turns a segment core spins (pause hint) before it yields the CPU at every idle
 * turn. One turn of a segment's loop polls all its inputs: tens of nanoseconds for a
 * few rings, a system call (about a microsecond) for a UDP source, so 16 turns are
 * about 1 to 30 us: enough to catch the next batch of a peer running on its own CPU.
 * A core that shares its CPU (two segments placed on one CPU, a NIC and a host core
 * on the same CPU, more busy threads than CPUs) then hands it over at once instead of
 * spinning out OFL_WAIT_SPINS turns first: with a system call per turn that was about
 * 2 ms, for every request a kvs segment served when it shared a CPU (measured with
 * `offlow bench kvs`: see docs/kvs.md). */
#define OFL_CORE_IDLE_SPINS 16u

void ofl_core_progressed(struct ofl_core *c)
{
    if (c->t_start) return;
    if (c->turn0_ns) {
        /* from the start of the turn that moved them (a profile-scaled core's first
         * turn, stretched, used to run before its clock) */
        c->t_start = c->turn0_ns;
        c->tick_start = c->turn0_tick;
        c->cpu_start = c->turn0_cpu;
    } else {  /* (a core group's worker: called before its turn) */
        c->t_start = ofl_now_ns();
        c->tick_start = ofl_ticks();
        c->cpu_start = thread_cpu_ns();
    }
}

void ofl_core_assist(struct ofl_core *c, int (*fn)(void *arg), void *arg)
{
    c->waiter.assist = c->local.assist = fn;
    c->waiter.assist_arg = c->local.assist_arg = arg;
    for (int i = 0; i < OFL_WAIT_MAX_PEERS; i++) {
        c->peer[i].assist = fn;
        c->peer[i].assist_arg = arg;
    }
}

void ofl_core_idle(struct ofl_core *c, int progress)
{
    int rc;
    /* A core holding doorbells yields while idle but never naps: they are due soon. */
    if (c->link_delay_ns && link_publish(c)) c->waiter.idle_since = 0;
    if (progress) {
        ofl_waiter_progress(&c->waiter);
        rc = ofl_waiter_check(&c->waiter);
    } else {
        /* Past its few idle spins, the core yields at every idle turn (see
         * OFL_CORE_IDLE_SPINS), until it makes progress again. */
        if (c->waiter.spins >= OFL_CORE_IDLE_SPINS && c->waiter.spins < OFL_WAIT_SPINS)
            c->waiter.spins = OFL_WAIT_SPINS;
        rc = ofl_wait(&c->waiter);
    }
    /* A waiter that found a peer gone reports only that from then on (its later
     * deaths and the abort word are not looked at): the abort is read here, or a
     * core whose producer is another peer than the first gone waits forever (a
     * shard's device after its sibling died: the stand-in passed the abort on). */
    if (rc == -EPIPE && c->abort && __atomic_load_n(c->abort, __ATOMIC_ACQUIRE))
        rc = -ECANCELED;
    if (rc == -EPIPE) {
        /* which peers: bit i is the i-th --peer-fd (all of them when it is unknown) */
        c->peer_gone = (int)(c->waiter.dead_peers ? c->waiter.dead_peers : ~0u);
        if (!progress) sched_yield();  /* the waiter no longer waits once a peer is gone */
    } else if (rc == -ECANCELED) {
        ofl_core_fail(c, rc, "stopped: another core or process failed");
    } else if (rc < 0) {
        ofl_core_fail(c, rc, "waiting");
    }
}

void ofl_core_end(struct ofl_core *c)
{
    /* The last doorbells (rung as the rings closed) take their time of the link too. */
    if (c->dilating && (c->link_gbps > 0 || c->dma_gbps > 0)) link_throttle(c);
    c->t_end = ofl_now_ns();
    c->tick_end = ofl_ticks();
    c->cpu_end = thread_cpu_ns();
    if (!c->t_start) {
        c->t_start = c->t_end;
        c->tick_start = c->tick_end;
        c->cpu_start = c->cpu_end;
    }
    if (c->err && !ofl_core_err_secondary(c->err))
        fprintf(stderr, "offlow %s: segment %s core %u: %s: %s\n", c->device, c->segment, c->idx,
                core_where(c), ofl_strerror(c->err));
}

void ofl_core_destroy(struct ofl_core *c)
{
    if (c->ce) ofl_ce_stop(c->ce);
    free(c->ce);
    free(c->bufs);
    free(c->scratch);
    free(c->where);
    c->ce = NULL;
    c->bufs = c->scratch = NULL;
    c->where = NULL;
}

/* ---- sources ------------------------------------------------------------------ */

/* ", NAME" for each kind the libraries add (those with a sink, when `sinks`), in `out`:
 * the rest of a message's list of kinds. */
static void kind_names(const struct ofl_args *a, bool sinks, char *out, size_t size)
{
    size_t n = 0;
    out[0] = 0;
    for (const struct ofl_src_kind *k = a->src_kinds; k && k->name && n < size; k++)
        if (!sinks || k->sink_open) n += (size_t)snprintf(out + n, size - n, ", %s", k->name);
}

/* Option "<name>.<key>" as an unsigned number; -EINVAL (with a message) if malformed. */
static int opt_u64(const struct ofl_args *a, const char *name, const char *key, uint64_t dflt,
                   uint64_t *out)
{
    const char *v = ofl_args_get(a, name, key, NULL);
    if (!v) { *out = dflt; return 0; }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        ofl_start_failf(a, "source %s: %s=%s is not a number", name, key, v);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

int ofl_source_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                    unsigned part, unsigned nparts, uint32_t mtu)
{
    struct ofl_src_opts o = { .part = part, .nparts = nparts, .mtu = mtu };
    int rc = 0;
    rc |= opt_u64(a, name, "loops", 1, &o.loops);
    rc |= opt_u64(a, name, "duration_ns", 0, &o.duration_ns);
    rc |= opt_u64(a, name, "count", 10000, &o.count);
    rc |= opt_u64(a, name, "seed", 1, &o.seed);
    uint64_t advance = 0;
    rc |= opt_u64(a, name, "advance_ts", 0, &advance);
    o.advance_ts = advance != 0;
    const char *rate = ofl_args_get(a, name, "rate", "0");
    char *end;
    o.rate_pps = strtod(rate, &end);
    if (end == rate || *end || !(o.rate_pps >= 0)) {
        ofl_start_failf(a, "source %s: rate=%s is not a rate (packets a second, 0 or more)",
                        name, rate);
        rc = -EINVAL;
    }
    if (rc) return -EINVAL;
    const char *kind = ofl_args_get(a, name, "kind", "synth");
    char errbuf[256] = "";
    if (!strcmp(kind, "pcap")) {
        const char *path = ofl_args_get(a, name, "path", NULL);
        if (!path) {
            ofl_start_failf(a, "source %s: kind=pcap needs path=", name);
            return -EINVAL;
        }
        rc = ofl_pcap_src_open(s, path, &o, errbuf);
    } else if (!strcmp(kind, "synth")) {
        struct ofl_synth_opts so = { .sizes = ofl_args_get(a, name, "sizes", NULL),
                                     .prefixes = ofl_args_get(a, name, "prefixes", NULL) };
        rc = ofl_synth_src_open(s, &so, &o, errbuf);
    } else if (!strcmp(kind, "udp")) {
        if (a->udp_fd < 0) {
            ofl_start_failf(a, "source %s: kind=udp needs --udp-fd", name);
            return -EINVAL;
        }
        rc = ofl_udp_src_open(s, a->udp_fd, &o, errbuf);
    } else if (!strcmp(kind, "afpacket")) {
        const char *iface = ofl_args_get(a, name, "port", NULL);
        if (!iface) {
            ofl_start_failf(a, "source %s: kind=afpacket needs port=IFACE", name);
            return -EINVAL;
        }
        rc = ofl_live_src_open(s, iface, &o, errbuf);
    } else {
        const struct ofl_src_kind *k = a->src_kinds;
        while (k && k->name && strcmp(k->name, kind)) k++;
        if (!k || !k->name) {
            char more[256];
            kind_names(a, false, more, sizeof more);
            ofl_start_failf(a, "source %s: unknown kind `%s` (pcap, synth, udp, afpacket%s)",
                            name, kind, more);
            return -EINVAL;
        }
        rc = k->open(s, a, name, &o, errbuf);
    }
    if (rc < 0)
        ofl_start_failf(a, "source %s: %s", name, errbuf[0] ? errbuf : ofl_strerror(rc));
    return rc;
}

/* ---- sinks -------------------------------------------------------------------- */

struct ofl_sink {
    struct ofl_pcap_sink *pcap;   /* a capture, or */
    struct ofl_udp_sink *udp;     /* the run's UDP socket, or */
    struct ofl_port_sink *port;   /* a port (afpacket, dpdk); all NULL: count only */
    const char *port_name;        /* the port's option (IFACE, ARGS) */
    const char *path;
    unsigned ncores;
    /* Per core of the sink's segment (a plain store by its one writer, no locked add
     * per packet; the stats sum them). */
    struct sink_count { uint64_t packets, bytes; } __attribute__((aligned(64))) count[];
};

/* A zeroed sink with counters for `ncores` writers; NULL when out of memory. */
static struct ofl_sink *sink_alloc(unsigned ncores)
{
    ncores = ncores ? ncores : 1;
    size_t size = sizeof(struct ofl_sink) + ncores * sizeof(struct sink_count);
    struct ofl_sink *k = aligned_alloc(64, (size + 63) / 64 * 64);
    if (!k) return NULL;
    memset(k, 0, size);
    k->ncores = ncores;
    return k;
}

/* Packets or bytes (`bytes`) a sink took, over its writers. */
static uint64_t sink_total(const struct ofl_sink *s, int bytes)
{
    uint64_t n = 0;
    for (unsigned c = 0; c < s->ncores; c++)
        n += __atomic_load_n(bytes ? &s->count[c].bytes : &s->count[c].packets,
                             __ATOMIC_RELAXED);
    return n;
}

/* Sink `name` of kind `kind` on a port: afpacket, or a library's (struct ofl_src_kind). */
static int port_sink_open(struct ofl_sink **s, const struct ofl_args *a, const char *name,
                          const char *kind, unsigned ncores)
{
    const char *port = ofl_args_get(a, name, "port", NULL);
    const struct ofl_src_kind *k = a->src_kinds;
    while (k && k->name && (strcmp(k->name, kind) || !k->sink_open)) k++;
    if (strcmp(kind, "afpacket") && (!k || !k->name)) {
        char more[256];
        kind_names(a, true, more, sizeof more);
        ofl_start_failf(a, "sink %s: unknown kind `%s` (pcap, udp, afpacket%s)", name, kind,
                        more);
        return -EINVAL;
    }
    if (!port) {
        ofl_start_failf(a, "sink %s: kind=%s needs port=", name, kind);
        return -EINVAL;
    }
    struct ofl_sink *out = sink_alloc(ncores);
    if (!out) return ofl_start_failf(a, "sink %s: out of memory", name), -ENOMEM;
    char errbuf[256] = "";
    int rc = strcmp(kind, "afpacket") ? k->sink_open(&out->port, a, name, ncores, errbuf)
                                      : ofl_live_sink_open(&out->port, port, ncores, errbuf);
    if (rc < 0) {
        ofl_start_failf(a, "sink %s: %s", name, errbuf[0] ? errbuf : ofl_strerror(rc));
        free(out);
        return rc;
    }
    out->port_name = port;
    *s = out;
    return 0;
}

int ofl_sink_open(struct ofl_sink **s, const struct ofl_args *a, const char *name,
                  unsigned ncores)
{
    const char *kind = ofl_args_get(a, name, "kind", NULL);
    if (kind && strcmp(kind, "udp") && strcmp(kind, "pcap"))
        return port_sink_open(s, a, name, kind, ncores);
    if (kind && !strcmp(kind, "udp") && a->udp_fd < 0) {
        ofl_start_failf(a, "sink %s: kind=udp needs --udp-fd", name);
        return -EINVAL;
    }
    struct ofl_sink *k = sink_alloc(ncores);
    if (!k) return ofl_start_failf(a, "sink %s: out of memory", name), -ENOMEM;
    k->path = ofl_args_get(a, name, "path", NULL);
    if (kind && !strcmp(kind, "udp")) {
        char errbuf[256] = "";
        int rc = ofl_udp_sink_open(&k->udp, a->udp_fd, ncores, errbuf);
        if (rc < 0) {
            ofl_start_failf(a, "sink %s: %s", name, errbuf[0] ? errbuf : ofl_strerror(rc));
            free(k);
            return rc;
        }
        k->path = NULL;
    } else if (k->path) {
        char errbuf[256] = "";
        int rc = ofl_pcap_sink_open(&k->pcap, k->path, OFL_SINK_SNAPLEN, errbuf);
        if (rc < 0) {
            ofl_start_failf(a, "sink %s: cannot write %s: %s", name, k->path,
                            errbuf[0] ? errbuf : ofl_strerror(rc));
            free(k);
            return rc;
        }
    }
    *s = k;
    return 0;
}

/* Count `n` packets of `bytes` bytes written by core `core`. */
static void count_written(struct ofl_sink *s, unsigned core, uint64_t n, uint64_t bytes)
{
    struct sink_count *c = &s->count[core < s->ncores ? core : 0];
    __atomic_store_n(&c->packets, c->packets + n, __ATOMIC_RELAXED);
    __atomic_store_n(&c->bytes, c->bytes + bytes, __ATOMIC_RELAXED);
}

/* Packet `p` to the sink's port, socket or capture (counted by the caller). */
static void sink_put(struct ofl_sink *s, unsigned core, const struct ofl_pkt *p)
{
    if (s->port) {
        s->port->ops->write(s->port, core, p);
    } else if (s->udp) {
        ofl_udp_sink_write(s->udp, core, p);
    } else if (s->pcap && p->seg) {   /* a capture holds each datagram as sent */
        uint8_t frame[OFL_SINK_SNAPLEN];
        int n;
        for (uint32_t k = 0; (n = ofl_udp_frame_segment(p, k, frame, sizeof frame)) > 0; k++) {
            struct ofl_pkt part = {frame, (uint32_t)n, (uint32_t)n, p->ts_ns, 0};
            ofl_pcap_sink_write(s->pcap, &part);
        }
    } else if (s->pcap) {
        ofl_pcap_sink_write(s->pcap, p);
    }
}

void ofl_sink_write(struct ofl_sink *s, unsigned core, const struct ofl_pkt *p)
{
    count_written(s, core, 1, p->len);
    sink_put(s, core, p);
}

void ofl_sink_write_burst(struct ofl_sink *s, unsigned core, struct ofl_pkt *const *p,
                          uint32_t n)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += p[i]->len;
    count_written(s, core, n, bytes);
    if (s->port && s->port->ops->write_burst) {
        s->port->ops->write_burst(s->port, core, p, n);
        return;
    }
    for (uint32_t i = 0; i < n; i++) sink_put(s, core, p[i]);
}

void ofl_sink_flush(struct ofl_sink *s, unsigned core)
{
    if (s->udp) ofl_udp_sink_flush(s->udp, core);
    else if (s->port) s->port->ops->flush(s->port, core);
}

void ofl_sink_close(struct ofl_sink *s)
{
    if (!s) return;
    if (s->port) s->port->ops->close(s->port);
    ofl_udp_sink_close(s->udp);
    if (s->pcap && ofl_pcap_sink_close(s->pcap) < 0)
        fprintf(stderr, "offlow: cannot finish writing %s\n", s->path);
    free(s);
}

/* ---- the program's descriptor ------------------------------------------------------ */

int ofl_prog_init_window(struct ofl_window *w, const struct ofl_args *a, size_t wsize,
                         const struct ofl_ring_spec *rings, unsigned n, const size_t *ring_off,
                         size_t chan_off, unsigned nchan, const char *const *names)
{
    int rc = ofl_window_create(w, a->window, wsize);
    for (unsigned i = 0; rc == 0 && i < n; i++)
        rc = ofl_ring_format(ofl_window_at(w, ring_off[i]),
                             ofl_ring_mem_size(rings[i].size, rings[i].entry_size),
                             rings[i].size, rings[i].entry_size, rings[i].batch,
                             rings[i].data_off);
    if (rc == 0 && nchan) rc = ofl_gen_channels(w, chan_off, nchan, names);
    if (rc < 0) return ofl_fatal_err("cannot create the window", rc);
    ofl_window_mark_runner(w);
    ofl_window_close(w);
    return 0;
}

/* Attach the ends of the rings of one queue side of core `c`. */
static int attach_side(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_core *c,
                       const struct ofl_qside *q, struct ofl_window *w, const size_t *ring_off)
{
    if (!q->n) return 0;  /* a core group's worker, or a core polling no instance */
    if (q->out) *q->out = calloc(q->n, sizeof **q->out);
    else *q->in = calloc(q->n, sizeof **q->in);
    if (q->out ? !*q->out : !*q->in)
        return ofl_start_failf(a, "queue %s: out of memory", q->queue), -ENOMEM;
    if (q->in) *q->nin = q->n;
    struct ofl_waiter *waiter = q->local ? &c->local
                              : q->peer >= 0 && q->peer < OFL_WAIT_MAX_PEERS ? &c->peer[q->peer]
                                                                              : &c->waiter;
    for (unsigned i = 0; i < q->n; i++) {
        const struct ofl_ring_use *r = &q->rings[i];
        const struct ofl_ring_spec *spec = &p->rings[r->ring];
        void *mem = ofl_window_at(w, ring_off[r->ring]);
        size_t len = ofl_ring_mem_size(spec->size, spec->entry_size);
        int rc = q->out ? ofl_qout_init(&(*q->out)[i], mem, len, c->ce, waiter)
                        : ofl_qin_init(&(*q->in)[i], mem, len, c->ce, waiter);
        if (rc < 0) {
            ofl_start_failf(a, "cannot attach ring %s core %u -> instance %u: %s", q->queue,
                            r->prod, r->inst, ofl_strerror(rc));
            return rc;
        }
        if (q->in) {   /* which ring it is, for its errors */
            (*q->in)[i].prod = r->prod;
            (*q->in)[i].inst = r->inst;
        }
        if (q->out && !q->local && c->nlink < OFL_LINK_MAX) {  /* the link's */
            c->link_out[c->nlink++] = &(*q->out)[i];
            ofl_ring_set_delay(&(*q->out)[i].ring, c->link_delay_ns);
        }
        if (q->out && q->drop_full) (*q->out)[i].drop_full = true;
        else if (q->out && r->fail_full) (*q->out)[i].fail_full = true;
    }
    return 0;
}

static int prog_open(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                     const size_t *ring_off);

static void stats_ring(struct ofl_json *j, const char *queue, const char *side, unsigned prod,
                       unsigned cons, const struct ofl_ring *r, uint64_t bytes, uint64_t lost);

void ofl_prog_fail(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                   const size_t *ring_off)
{
    struct ofl_json j = {0};
    char path[4096];
    for (unsigned k = 0; k < p->ncores; k++) {
        const struct ofl_core_use *u = &p->cores[k];
        for (unsigned n = 0; n < u->nqueues; n++) {
            const struct ofl_qside *q = &u->queues[n];
            for (unsigned i = 0; q->in && i < q->n; i++) {
                const struct ofl_ring_use *ru = &q->rings[i];
                const struct ofl_ring_spec *spec = &p->rings[ru->ring];
                struct ofl_ring r;
                if (ofl_ring_attach(&r, ofl_window_at(w, ring_off[ru->ring]),
                                    ofl_ring_mem_size(spec->size, spec->entry_size)) < 0 ||
                    ofl_ring_break(&r) != OFL_RING_CLOSED_FIRST)
                    continue;   /* (broken here first: its producer counts) */
                /* closed by a producer that finished: what it holds is final, this
                 * process's never taken, said in STATS.untaken */
                uint32_t left = __atomic_load_n(&r.shm->tail, __ATOMIC_ACQUIRE) -
                                __atomic_load_n(&r.shm->head, __ATOMIC_ACQUIRE);
                if (!left) continue;
                if (!j.f && a->stats &&
                    snprintf(path, sizeof path, "%s.untaken", a->stats) < (int)sizeof path &&
                    (j.f = fopen(path, "w")) != NULL) {
                    ofl_json_begin_obj(&j, NULL);
                    ofl_json_str(&j, "device", a->device);
                    ofl_json_begin_arr(&j, "untaken");
                }
                if (j.f) stats_ring(&j, q->queue, "in", ru->prod, ru->cons, &r, 0, left);
            }
        }
    }
    if (j.f) {
        ofl_json_end_arr(&j);
        ofl_stats_end(&j);
    }
    ofl_window_abort(w);
}

int ofl_prog_open(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                  const size_t *ring_off)
{
    int rc = prog_open(p, a, w, ring_off);
    /* the run ends: the other processes stop as after a failed core (their cores'
     * errors are secondary: this one's is the run's) */
    if (rc < 0) ofl_prog_fail(p, a, w, ring_off);
    return rc;
}

static int prog_open(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                     const size_t *ring_off)
{
    int rc;
    for (unsigned k = 0; k < p->ntables; k++)
        if (p->tables[k].opts && (rc = ofl_args_check_unread(a, "table", p->tables[k].name)) < 0)
            return rc;
    for (unsigned k = 0; k < p->nsinks; k++) {
        const struct ofl_sink_use *s = &p->sinks[k];
        if ((rc = ofl_sink_open(s->sink, a, s->name, s->ncores)) < 0) return rc;
        if ((rc = ofl_args_check_unread(a, "sink", s->name)) < 0) return rc;
    }
    for (unsigned k = 0; k < p->ncores; k++) {
        const struct ofl_core_use *u = &p->cores[k];
        rc = ofl_core_init(u->core, a, w, u->segment, u->idx, u->n, u->core_no, p->bufsize);
        if (rc < 0) return rc;
        for (unsigned i = 0; i < u->nsources; i++) {
            rc = ofl_source_open(u->sources[i].src, a, u->sources[i].name, u->idx, u->n,
                                 p->mtu);
            if (rc < 0) return rc;
            if ((rc = ofl_args_check_unread(a, "source", u->sources[i].name)) < 0) return rc;
        }
        for (unsigned i = 0; i < u->nqueues; i++)
            if ((rc = attach_side(p, a, u->core, &u->queues[i], w, ring_off)) < 0) return rc;
    }
    return 0;
}

int ofl_prog_run(const struct ofl_prog *p, struct ofl_window *w)
{
    pthread_t *tids = calloc(p->nthreads ? p->nthreads : 1, sizeof *tids);
    if (!tids) return ofl_fatal("out of memory");
    unsigned started = 0;
    int failed = 0;
    for (; started < p->nthreads; started++) {
        if (pthread_create(&tids[started], NULL, p->threads[started].fn,
                           p->threads[started].arg)) {
            ofl_fatal("cannot start a segment thread");
            ofl_window_abort(w);  /* the threads started stop; so do the peers */
            failed = 1;
            break;
        }
    }
    for (unsigned i = 0; i < started; i++) pthread_join(tids[i], NULL);
    free(tids);
    for (unsigned k = 0; k < p->ncores; k++) {
        if (p->cores[k].core->err) {
            failed = 1;
            ofl_window_abort(w);
        }
    }
    return failed;
}

/* The mapping of one producer ring (which instance, which consumer core) and the
 * packets it took and dropped (a full ring under enqueue=drop; lost in a ring its
 * consumer broke: `why` then tells them apart). */
static void stats_qmap(struct ofl_json *j, const char *queue, const struct ofl_ring_use *r,
                       const struct ofl_qout *q)
{
    ofl_json_begin_obj(j, NULL);
    ofl_json_str(j, "queue", queue);
    ofl_json_u64(j, "prod", r->prod);
    ofl_json_u64(j, "instance", r->inst);
    ofl_json_u64(j, "cons", r->cons);
    ofl_json_u64(j, "pushed", q->ring.pushed);
    ofl_json_u64(j, "dropped", q->dropped + q->lost);
    if (q->lost) {   /* why, when some were lost in a ring its consumer broke */
        ofl_json_begin_obj(j, "why");
        ofl_json_u64(j, "ring_full", q->dropped);
        ofl_json_u64(j, "ring_broken", q->lost);
        ofl_json_end_obj(j);
    }
    ofl_json_end_obj(j);
}

/* Nanoseconds of `ticks` of core `c`'s ofl_ticks(), from its run's ticks and ns. */
static double ticks_ns(const struct ofl_core *c, uint64_t ticks)
{
    if (c->tick_end <= c->tick_start || c->t_end <= c->t_start) return 0;
    return (double)ticks * (double)(c->t_end - c->t_start) /
           (double)(c->tick_end - c->tick_start);
}

/* Element `i`'s counters on one core (elements that saw no packet are left out);
 * `ns`: the time in its body, when timed. */
static void stats_element(struct ofl_json *j, const struct ofl_prog *p,
                          const struct ofl_el_counts *c, unsigned i, const struct ofl_core *core)
{
    ofl_json_begin_obj(j, p->el_names[i]);
    ofl_json_u64(j, "in", c->in[i]);
    if (c->ticks[i]) ofl_json_u64(j, "ns", (uint64_t)ticks_ns(core, c->ticks[i]));
    ofl_json_u64(j, "drop", c->drop[i]);
    ofl_json_u64(j, "consumed", c->used[i]);
    if (c->copies[i]) ofl_json_u64(j, "copies", c->copies[i]);
    if (c->made[i]) ofl_json_u64(j, "made", c->made[i]);
    if (p->why_n[i]) {
        ofl_json_begin_obj(j, "why");
        for (unsigned r = 0; r < p->why_n[i]; r++)
            ofl_json_u64(j, p->why_names[p->why_base[i] + r], c->why[p->why_base[i] + r]);
        ofl_json_end_obj(j);
    }
    ofl_json_end_obj(j);
}

static void stats_core(struct ofl_json *j, const struct ofl_prog *p, const struct ofl_core_use *u)
{
    ofl_stats_core(j, u->core);
    bool timed = false;
    for (unsigned i = 0; p->el_names[i]; i++) timed |= u->el.ticks[i] != 0;
    if (timed) ofl_json_f64(j, "timer_ns", ticks_ns(u->core, u->core->timer_ticks));
    ofl_json_begin_obj(j, "elements");
    for (unsigned i = 0; p->el_names[i]; i++)
        if (u->el.in[i]) stats_element(j, p, &u->el, i, u->core);
    ofl_json_end_obj(j);
    ofl_json_begin_arr(j, "channels");  /* those it took packets from */
    for (unsigned k = 0; p->ch_queue && u->el.ch_in && p->ch_queue[k]; k++) {
        if (!u->el.ch_in[k]) continue;
        ofl_json_begin_obj(j, NULL);
        ofl_json_str(j, "queue", p->ch_queue[k]);
        ofl_json_u64(j, "channel", p->ch_index[k]);
        ofl_json_u64(j, "packets", u->el.ch_in[k]);
        ofl_json_u64(j, "bytes", u->el.ch_bytes[k]);
        ofl_json_end_obj(j);
    }
    ofl_json_end_arr(j);
    ofl_json_begin_arr(j, "queues");
    for (unsigned q = 0; q < u->nqueues; q++) {
        const struct ofl_qside *s = &u->queues[q];
        for (unsigned i = 0; i < s->n; i++) {
            if (s->out) ofl_stats_qout(j, s->queue, s->rings[i].prod, s->rings[i].cons,
                                       &(*s->out)[i]);
            else ofl_stats_qin(j, s->queue, s->rings[i].prod, s->rings[i].cons, &(*s->in)[i]);
        }
    }
    ofl_json_end_arr(j);
    if (p->instances) {
        ofl_json_begin_arr(j, "instances");
        for (unsigned q = 0; q < u->nqueues; q++) {
            const struct ofl_qside *s = &u->queues[q];
            for (unsigned i = 0; s->out && i < s->n; i++)
                stats_qmap(j, s->queue, &s->rings[i], &(*s->out)[i]);
        }
        ofl_json_end_arr(j);
    }
    ofl_json_begin_obj(j, "sources");
    for (unsigned i = 0; i < u->nsources; i++)
        ofl_stats_source(j, u->sources[i].name, *u->sources[i].src);
    ofl_json_end_obj(j);
    ofl_json_end_obj(j);
}

/* "ctl_dropped": the requests staged on each table's control channel whose client
 * went away before running them (ctl_stage.h), by table; only when some were. */
static void stats_ctl_dropped(struct ofl_json *j, const struct ofl_prog *p)
{
    bool any = false;
    for (unsigned t = 0; t < p->ntables; t++) {
        uint64_t n = p->tables[t].ctl ? ofl_ctl_stage_dropped(p->tables[t].ctl) : 0;
        if (!n) continue;
        if (!any) ofl_json_begin_obj(j, "ctl_dropped");
        any = true;
        ofl_json_u64(j, p->tables[t].name, n);
    }
    if (any) ofl_json_end_obj(j);
}

/* The stats object's members after "device": cores, tables (the arrays' elements
 * when `contents`, else their lengths), sinks, control drops (when some). */
static void report_body(struct ofl_json *j, const struct ofl_prog *p, bool contents)
{
    ofl_json_begin_arr(j, "cores");
    for (unsigned k = 0; k < p->ncores; k++) stats_core(j, p, &p->cores[k]);
    ofl_json_end_arr(j);
    ofl_json_begin_obj(j, "tables");
    for (unsigned t = 0; t < p->ntables; t++)
        if (p->tables[t].stats) p->tables[t].stats(j, p->tables[t].name, contents);
    ofl_json_end_obj(j);
    ofl_json_begin_obj(j, "sinks");
    for (unsigned k = 0; k < p->nsinks; k++)
        ofl_stats_sink(j, p->sinks[k].name, *p->sinks[k].sink);
    ofl_json_end_obj(j);
    stats_ctl_dropped(j, p);
}

void ofl_prog_report(const struct ofl_prog *p, const struct ofl_args *a,
                     uint64_t chan_withdrawn)
{
    struct ofl_json j;
    if (!ofl_stats_begin(&j, a)) return;
    report_body(&j, p, true);
    if (chan_withdrawn) ofl_json_u64(&j, "chan_withdrawn", chan_withdrawn);
    ofl_stats_end(&j);
}

/* The last counts' body: every table's contents, then the withdrawn answers. */
struct last_ask {
    const struct ofl_prog *p;
    uint64_t chan_withdrawn;
};

static void last_body(struct ofl_json *j, const void *arg)
{
    const struct last_ask *ask = arg;
    report_body(j, ask->p, true);
    if (ask->chan_withdrawn) ofl_json_u64(j, "chan_withdrawn", ask->chan_withdrawn);
}

void ofl_prog_report_last(const struct ofl_prog *p, const struct ofl_args *a,
                          uint64_t chan_withdrawn)
{
    struct last_ask ask = { p, chan_withdrawn };
    ofl_stats_write_last(a, last_body, &ask);
}

/* A live answer's program, and whether it carries the arrays' elements. */
struct live_ask {
    const struct ofl_prog *p;
    bool contents;
};

/* The live copy's body (ofl_live_body_fn; `arg`: a struct live_ask). */
static void live_body(struct ofl_json *j, const void *arg)
{
    const struct live_ask *ask = arg;
    report_body(j, ask->p, ask->contents);
}

int ofl_prog_report_live(const struct ofl_prog *p, const struct ofl_args *a, uint32_t seq,
                         bool final)
{
    struct live_ask ask = { p, final || (seq & OFL_LIVE_TABLES) };
    return ofl_live_write(a->stats, a->device, seq, final, live_body, &ask);
}

void ofl_prog_close(const struct ofl_prog *p)
{
    for (unsigned k = 0; k < p->nsinks; k++) {
        ofl_sink_close(*p->sinks[k].sink);
        *p->sinks[k].sink = NULL;
    }
    for (unsigned k = 0; k < p->ncores; k++) {
        const struct ofl_core_use *u = &p->cores[k];
        for (unsigned i = 0; i < u->nsources; i++) {
            ofl_src_close(*u->sources[i].src);
            *u->sources[i].src = NULL;
        }
        for (unsigned q = 0; q < u->nqueues; q++) {
            const struct ofl_qside *s = &u->queues[q];
            if (s->out && *s->out) {
                for (unsigned i = 0; i < s->n; i++) ofl_qout_destroy(&(*s->out)[i]);
                free(*s->out);
                *s->out = NULL;
            } else if (s->in && *s->in) {
                for (unsigned i = 0; i < s->n; i++) ofl_qin_destroy(&(*s->in)[i]);
                free(*s->in);
                *s->in = NULL;
            }
        }
        ofl_core_destroy(u->core);
    }
    for (unsigned t = 0; t < p->ntables; t++)
        if (p->tables[t].close) p->tables[t].close();
}

/* ---- stats file ------------------------------------------------------------------ */

bool ofl_stats_begin(struct ofl_json *j, const struct ofl_args *a)
{
    memset(j, 0, sizeof *j);
    if (!a->stats) return false;
    j->f = fopen(a->stats, "w");
    if (!j->f) {
        fprintf(stderr, "offlow %s: cannot write stats to %s: %s\n", a->device, a->stats,
                strerror(errno));
        return false;
    }
    ofl_json_begin_obj(j, NULL);
    ofl_json_str(j, "device", a->device);
    return true;
}

void ofl_stats_core(struct ofl_json *j, const struct ofl_core *c)
{
    ofl_json_begin_obj(j, NULL);
    ofl_json_str(j, "segment", c->segment);
    ofl_json_u64(j, "core", c->idx);
    ofl_json_u64(j, "cpu", (uint64_t)c->cpu);
    ofl_json_u64(j, "oversubscribed", (uint64_t)c->oversubscribed);
    /* while it runs (a live report: no end yet), the time since its first packet */
    uint64_t start = __atomic_load_n(&c->t_start, __ATOMIC_RELAXED);
    uint64_t end = __atomic_load_n(&c->t_end, __ATOMIC_RELAXED);
    if (!end && start) end = ofl_now_ns();
    ofl_json_u64(j, "elapsed_ns", end > start ? end - start : 0);
    ofl_json_u64(j, "cpu_ns", c->cpu_end > c->cpu_start ? c->cpu_end - c->cpu_start : 0);
    if (c->dilating) {
        ofl_json_u64(j, "work_ns", (uint64_t)ticks_ns(c, c->busy_ticks));
        ofl_json_u64(j, "dilated_ns", (uint64_t)ticks_ns(c, c->dilated_ticks));
        ofl_json_u64(j, "asked_ns", (uint64_t)ticks_ns(c, c->asked_ticks));
        ofl_json_u64(j, "busy_cpu_ns", c->busy_cpu_ns);
        ofl_json_u64(j, "waited_ns", c->waited_ns);
        ofl_json_u64(j, "loop_ns", (uint64_t)ticks_ns(c, c->loop_ticks));
        ofl_json_u64(j, "copy_ns", (uint64_t)ticks_ns(c, c->copy_ticks));
        ofl_json_u64(j, "turns", c->loop_turns);  /* the turns that moved packets */
        if (c->link_gbps > 0 || c->dma_gbps > 0) {
            ofl_json_u64(j, "link_bytes", c->link_sent);
            ofl_json_u64(j, "throttled_ns", c->throttled_ns);
        }
    }
    ofl_json_u64(j, "pkts_in", c->pkts_in);
    ofl_json_u64(j, "bytes_in", c->bytes_in);
    const int err = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);  /* (core_fail_with) */
    if (err) {
        ofl_json_str(j, "error", ofl_strerror(err));
        ofl_json_str(j, "where", core_where(c));
        if (ofl_core_err_secondary(err)) ofl_json_u64(j, "secondary", 1);
    }
}

/* One side's counters of a ring; `lost`: a consumer's entries published and never
 * taken from a ring its producer broke (said when not 0). */
static void stats_ring(struct ofl_json *j, const char *queue, const char *side, unsigned prod,
                       unsigned cons, const struct ofl_ring *r, uint64_t bytes, uint64_t lost)
{
    ofl_json_begin_obj(j, NULL);
    ofl_json_str(j, "queue", queue);
    ofl_json_str(j, "side", side);
    ofl_json_u64(j, "prod", prod);
    ofl_json_u64(j, "cons", cons);
    ofl_json_u64(j, "pushed", r->pushed);
    ofl_json_u64(j, "popped", r->popped);
    ofl_json_u64(j, "doorbells", r->batches);
    ofl_json_u64(j, "full_waits", r->full_waits);
    ofl_json_u64(j, "occupancy_sum", r->occupancy_sum);
    ofl_json_u64(j, "occupancy_max", r->occupancy_max);
    ofl_json_u64(j, "occupancy_samples", r->samples);
    ofl_json_u64(j, "bytes", bytes);
    /* entries published and not yet released, now: the ring's shared indices (both
     * sides see the same; a live report reads them while the cores run) */
    uint32_t tail = __atomic_load_n(&r->shm->tail, __ATOMIC_ACQUIRE);
    uint32_t head = __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
    ofl_json_u64(j, "occupancy_now", tail - head);
    if (lost) ofl_json_u64(j, "lost", lost);
    ofl_json_end_obj(j);
}

void ofl_stats_qout(struct ofl_json *j, const char *queue, unsigned prod, unsigned cons,
                    const struct ofl_qout *q)
{
    stats_ring(j, queue, "out", prod, cons, &q->ring, q->bytes, 0);
}

void ofl_stats_qin(struct ofl_json *j, const char *queue, unsigned prod, unsigned cons,
                   const struct ofl_qin *q)
{
    stats_ring(j, queue, "in", prod, cons, &q->ring, 0, q->lost);
}

void ofl_stats_source(struct ofl_json *j, const char *name, const struct ofl_src *s)
{
    ofl_json_begin_obj(j, name);
    ofl_json_u64(j, "packets", ofl_src_packets(s));
    ofl_json_u64(j, "bytes", ofl_src_bytes(s));
    ofl_json_u64(j, "dropped", ofl_src_dropped(s));
    if (ofl_src_cut(s)) ofl_json_u64(j, "cut_short", ofl_src_cut(s));
    if (ofl_src_missed(s)) ofl_json_u64(j, "missed", ofl_src_missed(s));
    if (ofl_src_error(s)) ofl_json_str(j, "error", ofl_src_error(s));
    ofl_json_end_obj(j);
}

void ofl_stats_table(struct ofl_json *j, const char *name, const void *t, unsigned n,
                     size_t size, int is_signed)
{
    ofl_json_begin_arr(j, name);
    const uint8_t *p = t;
    for (unsigned i = 0; i < n; i++, p += size) {
        uint64_t u = 0;
        int64_t s = 0;
        switch (size) {
        case 1: { uint8_t v; memcpy(&v, p, 1); u = v; s = (int8_t)v; break; }
        case 2: { uint16_t v; memcpy(&v, p, 2); u = v; s = (int16_t)v; break; }
        case 4: { uint32_t v; memcpy(&v, p, 4); u = v; s = (int32_t)v; break; }
        default: { uint64_t v; memcpy(&v, p, 8); u = v; s = (int64_t)v; break; }
        }
        if (is_signed && s < 0) ofl_json_f64(j, NULL, (double)s);
        else ofl_json_u64(j, NULL, u);
    }
    ofl_json_end_arr(j);
}

void ofl_stats_table_length(struct ofl_json *j, const char *name, unsigned n)
{
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "array");
    ofl_json_u64(j, "length", n);
    ofl_json_end_obj(j);
}

void ofl_stats_sink(struct ofl_json *j, const char *name, const struct ofl_sink *s)
{
    ofl_json_begin_obj(j, name);
    ofl_json_u64(j, "packets", sink_total(s, 0));
    ofl_json_u64(j, "bytes", sink_total(s, 1));
    if (s->port) {
        ofl_json_u64(j, "refused", s->port->ops->dropped(s->port));
        ofl_json_str(j, "port", s->port_name);
    }
    if (s->path) ofl_json_str(j, "path", s->path);
    if (s->udp) {
        ofl_json_u64(j, "sent", ofl_udp_sink_sent(s->udp));
        ofl_json_u64(j, "dropped", ofl_udp_sink_dropped(s->udp));
        ofl_json_u64(j, "to_self", ofl_udp_sink_to_self(s->udp));
        ofl_json_u64(j, "send_errors", ofl_udp_sink_send_errors(s->udp));
    }
    ofl_json_end_obj(j);
}

void ofl_stats_end(struct ofl_json *j)
{
    ofl_json_end_obj(j);
    fputc('\n', j->f);
    fclose(j->f);
    j->f = NULL;
}

/* Bytes serialized once, written as a body (ofl_live_body_fn; `arg`: struct raw). */
struct raw {
    const char *b;
    size_t n;
};

static void raw_body(struct ofl_json *j, const void *arg)
{
    const struct raw *r = arg;
    if (j->f && r->n) fwrite(r->b, 1, r->n, j->f);
}

void ofl_stats_write_last(const struct ofl_args *a,
                          void (*body)(struct ofl_json *j, const void *arg), const void *arg)
{
    if (!a->stats) return;
    struct raw r = { NULL, 0 };
    char *buf = NULL;
    /* in memory as inside the top object after "device": each member after a comma */
    struct ofl_json m;
    memset(&m, 0, sizeof m);
    m.f = open_memstream(&buf, &r.n);
    if (m.f) {
        m.depth = 1;
        m.first[1] = 1;
        body(&m, arg);
        bool bad = ferror(m.f) != 0;
        if (fclose(m.f) != 0 || bad) {
            free(buf);
            buf = NULL;
        }
    }
    r.b = buf;
    int rc = buf ? ofl_live_write(a->stats, a->device, 0, true, raw_body, &r)
                 : ofl_live_write(a->stats, a->device, 0, true, body, arg);
    if (rc < 0)
        fprintf(stderr, "offlow %s: the last live copy: %s\n", a->device, ofl_strerror(rc));
    struct ofl_json j;
    if (ofl_stats_begin(&j, a)) {
        if (buf) raw_body(&j, &r);
        else body(&j, arg);
        ofl_stats_end(&j);
    }
    free(buf);
}
