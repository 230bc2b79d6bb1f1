/* Channel benchmark: offlow channels (chan.h) between a host process pinned to CPU 0
 * and a forked "device" process pinned to CPU 1 that share a MAP_SHARED region, and,
 * in the same program, the ceilings and peers they are judged against.
 *
 * Modes (each prints one JSON object on stdout; errors go to stderr, exit status 1):
 *
 *   pingpong BATCHES PER   cache-line ping-pong: the host writes a counter into its
 *                          64-byte line, the device copies it into its own line, the
 *                          host waits for it; round-trip time per exchange. The
 *                          lines are the harness's own (two lines of its shared
 *                          state).
 *   pipe BATCHES PER       the same exchange as 1-byte write/read over two pipes.
 *   copy SIZES REPS        single-thread bandwidth at each size: memcpy between two
 *                          preallocated, touched buffers; process_vm_readv of a
 *                          child's buffer (the cross-process copy a device process
 *                          does); CRC32C (ofl_crc32c) over the buffer; copy with
 *                          CRC32C in one pass (ofl_crc32c_copy: what a bulk
 *                          receiver does with every byte it lands); and both copies
 *                          again by a thread on the device's CPU, of bytes a thread
 *                          on the host's CPU has just written before each copy
 *                          (xcore_*: where a bulk receiver finds a sender's bytes).
 *   lat BATCHES PER BULKSIZES
 *                          channel latency, NFComms' method (its Table 2): BATCHES
 *                          timed batches of PER synchronous messages, after one
 *                          untimed warm-up batch; the time per message is
 *                          the batch time / PER, timed on the sending side (a send
 *                          returns once the receiver has taken the message, so it
 *                          includes the acknowledgement's way back). Rows: direct
 *                          56 B host->device and device->host, direct round trip
 *                          (the host's send and receive, the device's receive and
 *                          its reply posted as a handler's REPLY is, with
 *                          ofl_chan_post; timed on the host; before each of its
 *                          batches both processes run a batch of the cache-line
 *                          ping-pong above on the harness's lines, as the pingpong
 *                          mode does, then one on the channel's own two message
 *                          lines: the paired ceiling, the lines a round trip moves
 *                          (a word of each payload, the headers untouched, while
 *                          no message is pending)), and bulk transfers of each
 *                          BULKSIZES size in both directions. Direct
 *                          payloads are written before each batch and checked
 *                          after it (untimed), as the ping-pong has no payload.
 *   tput DIR K SERVE SIZES REPS [COPY]
 *                          bulk throughput, DIR h2d or d2h: K channels, each moving
 *                          one transfer of SIZE bytes at the same time (K sending
 *                          threads on one side, K receiving threads on the other,
 *                          or with SERVE mgr a one-thread channel manager on each
 *                          side: the sender's runs the sends its side queues with
 *                          ofl_chan_mgr_bulk_send, the receiver's lands them; COPY
 *                          auto only). Per repetition: K * SIZE bytes over the
 *                          time from releasing the host's transfers to the last
 *                          one's end; REPS repetitions after one warm-up. Before each
 *                          repetition the host times a memcpy of the same K * SIZE
 *                          bytes (the paired ceiling); both are also printed per
 *                          repetition ("samples"). Payloads are filled before
 *                          and checked after each timed transfer.
 *
 * lat and tput also report the bulk bytes the device's ends moved by each copy
 * path (memcpy, process_vm_readv/writev, bounce through the region).
 *
 * SIZES and BULKSIZES are comma lists of byte counts, multiples of 8. Every
 * transferred byte is checked; a wrong byte fails the run (exit 1). Statistics:
 * min, max, mean, std (sample), median. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "offlow/chan.h"
#include "offlow/crc32c.h"
#include "offlow/err.h"
#include "offlow/thread.h"
#include "offlow/wait.h"

/* The channels' internal layout: the round-trip row's paired ping-pong runs on the
 * channel's own message lines (struct chan_line). */
#include "chan_int.h"

#define HOST_CPU 0
#define DEV_CPU 1
#define MAX_SIZES 16
#define MAX_CONC 16
#define MAX_BATCHES 1000000ull
#define MAX_PER 100000ull
#define MAX_REPS 100000ull
#define MAX_SIZE (256ull << 20)
#define TMO_NS (60ull * 1000000000ull)
/* Tight spins before a wait falls back to ofl_wait (which spins more, then yields). */
#define TIGHT_SPINS 1024u
#define DIRECT_LEN OFL_CHAN_MSG_MAX

/* ---- small helpers ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats {
    double min, max, mean, std, median;
    size_t n;
};

/* Statistics of v[0..n) (sorts v). */
static struct stats stats_of(double *v, size_t n)
{
    struct stats s = {0, 0, 0, 0, 0, n};
    if (n == 0) return s;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.mean = sum / (double)n;
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.std = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
    s.min = v[0];
    s.max = v[n - 1];
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

/* Print `"key": [v0, v1, ...]` (no trailing separator). */
static void print_samples(const char *key, const double *v, size_t n)
{
    printf("\"%s\": [", key);
    for (size_t i = 0; i < n; i++) printf("%s%.6g", i ? ", " : "", v[i]);
    printf("]");
}

/* Print `"key": {stats}` (no trailing separator). */
static void print_stats(const char *key, const struct stats *s)
{
    printf("\"%s\": {\"n\": %zu, \"min\": %.6g, \"max\": %.6g, \"mean\": %.6g, "
           "\"std\": %.6g, \"median\": %.6g}", key, s->n, s->min, s->max, s->mean, s->std,
           s->median);
}

/* Parse a comma list of sizes (multiples of 8, 8..MAX_SIZE); returns the count or -1. */
static int parse_sizes(const char *s, uint64_t *out)
{
    int n = 0;
    while (*s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || n == MAX_SIZES || v < 8 || v > MAX_SIZE || v % 8) return -1;
        out[n++] = v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return n;
}

/* Parse a count in [1, max]; 0 when invalid. */
static uint64_t parse_count(const char *s, uint64_t max)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return (end == s || *end || v > max) ? 0 : v;
}

/* Page-aligned private buffer of `len` bytes, touched; NULL on failure. */
static uint8_t *alloc_buf(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    memset(p, 0x5a, len);
    return p;
}

static void free_buf(void *p, size_t len)
{
    if (p) munmap(p, len);
}

/* Word i of the pattern with seed `seed`. */
static inline uint64_t pattern(uint64_t seed, uint64_t i)
{
    return (seed * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull) ^ i;
}

/* Fill `len` bytes (a multiple of 8) with the pattern of `seed`. */
static void fill_words(void *buf, size_t len, uint64_t seed)
{
    uint64_t *w = buf;
    for (size_t i = 0; i < len / 8; i++) w[i] = pattern(seed, i);
}

/* Words of `buf` that differ from the pattern of `seed`. */
static uint64_t check_words(const void *buf, size_t len, uint64_t seed)
{
    const uint64_t *w = buf;
    uint64_t bad = 0;
    for (size_t i = 0; i < len / 8; i++) bad += w[i] != pattern(seed, i);
    return bad;
}

/* ---- the two processes ---- */

/* State both processes see: the abort word, sync counters, the ping-pong lines, the
 * device's error and its timed samples. */
struct shared {
    _Alignas(64) uint32_t abort_word;
    _Alignas(64) uint64_t ready;     /* device -> host: transfers it is ready for */
    _Alignas(64) uint64_t go;        /* host -> device: rounds released (tput d2h mgr) */
    _Alignas(64) uint64_t line_host; /* ping-pong: written only by the host */
    _Alignas(64) uint64_t line_dev;  /* ping-pong: written only by the device */
    _Alignas(64) int32_t dev_err;    /* the device's first error (negative errno) */
    int32_t dev_line;                /* where in this file it happened */
    uint64_t dev_bad;                /* payload words that arrived wrong on the device */
    int dev_pinned;                  /* 1: the device runs on its own CPU */
    uint64_t dev_rounds;             /* device: rounds (or, in lat, phases) finished */
    uint64_t dev_bytes[4];           /* bulk bytes the device's ends moved by memcpy,
                                        process_vm_readv/writev, bounce, registered
                                        memory */
    _Alignas(64) uint64_t samples[]; /* device-timed batch times (ns) */
};

/* One process's view of the pair: its peer liveness fd and, in the host, the child. */
struct pair {
    struct shared *sh;
    size_t sh_len;
    pid_t child;     /* host: the device's pid; device: 0 */
    int watch_fd;    /* EOF when the other process has exited */
    int hold_fd;     /* kept open for the other's watch_fd */
    int host;        /* 1 in the host process */
    int pinned;      /* this side has its CPU to itself (pin) */
};

/* Map the shared state with room for `nsamples` device samples; 0 or -errno. */
static int pair_map(struct pair *p, uint64_t nsamples)
{
    p->sh_len = sizeof(struct shared) + (size_t)nsamples * sizeof(uint64_t);
    void *m = mmap(NULL, p->sh_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -errno;
    p->sh = m;
    return 0;
}

/* Pin the calling thread (threads it creates inherit it); 1 when it has the CPU to
 * itself among the two processes, 0 when the CPUs were too few or pinning failed. */
static int pin(int cpu)
{
    return ofl_pin_self(cpu) == 0 && ofl_ncpus() > 1;
}

/* Fork the device process; both return (the host with p->host = 1) with their
 * liveness fds set up, each pinned to its CPU (the device's result in
 * sh->dev_pinned too). Returns 0 or -errno (host, nothing forked). */
static int pair_fork(struct pair *p)
{
    int to_dev[2], to_host[2];
    if (pipe(to_dev) < 0) return -errno;
    if (pipe(to_host) < 0) {
        int e = -errno;
        close(to_dev[0]);
        close(to_dev[1]);
        return e;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(to_dev[0]), close(to_dev[1]), close(to_host[0]), close(to_host[1]);
        return e;
    }
    if (pid == 0) {
        close(to_dev[1]);
        close(to_host[0]);
        p->watch_fd = to_dev[0];
        p->hold_fd = to_host[1];
        p->child = 0;
        p->host = 0;
    } else {
        close(to_dev[0]);
        close(to_host[1]);
        p->watch_fd = to_host[0];
        p->hold_fd = to_dev[1];
        p->child = pid;
        p->host = 1;
    }
    p->pinned = pin(p->host ? HOST_CPU : DEV_CPU);
    if (!p->host) p->sh->dev_pinned = p->pinned;
    return 0;
}

/* Host: wait for the device to exit; returns its exit status (or 128 + signal). */
static int pair_join(struct pair *p)
{
    close(p->hold_fd);
    int st = 0;
    while (waitpid(p->child, &st, 0) < 0)
        if (errno != EINTR) return 1;
    close(p->watch_fd);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A waiter for this thread watching the other process and the abort word. */
static void pair_waiter(const struct pair *p, struct ofl_waiter *w)
{
    ofl_waiter_init(w, &p->watch_fd, 1, &p->sh->abort_word);
}

/* Record a failure: in the device, the first error goes to the shared state; in
 * both, the abort word stops the other side's waits. Returns rc. */
static int pair_fail(const struct pair *p, int rc, int line, const char *what)
{
    if (!p->host && !p->sh->dev_err) {
        p->sh->dev_err = rc;
        p->sh->dev_line = line;
    }
    if (p->host) fprintf(stderr, "bench_chan: host: %s: %s\n", what, ofl_strerror(rc));
    else fprintf(stderr, "bench_chan: device: %s: %s\n", what, ofl_strerror(rc));
    __atomic_store_n(&p->sh->abort_word, 1, __ATOMIC_RELEASE);
    return rc;
}

/* Spin (then yield) until *word == want (exact) or >= want; 0, or -EPIPE /
 * -ECANCELED. */
static int wait_until(const uint64_t *word, uint64_t want, bool exact, struct ofl_waiter *w)
{
    uint32_t spins = 0;
    for (;;) {
        uint64_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (exact ? v == want : v >= want) break;
        if (spins < TIGHT_SPINS) {
            spins++;
            ofl_cpu_relax();
            continue;
        }
        int rc = ofl_wait(w);
        if (rc < 0) return rc;
    }
    ofl_waiter_progress(w);
    return 0;
}

static int wait_ge(const uint64_t *word, uint64_t want, struct ofl_waiter *w)
{
    return wait_until(word, want, false, w);
}

/* Yield until *word >= want: the harness's bookkeeping waits, which share a CPU
 * with the threads being measured and so must not spin; 0, or -EPIPE / -ECANCELED. */
static int wait_ge_yield(const uint64_t *word, uint64_t want, struct ofl_waiter *w)
{
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < want) {
        int rc = ofl_waiter_check(w);
        if (rc < 0) return rc;
        sched_yield();
    }
    return 0;
}

/* Host: wait until the device has finished `n` rounds, so that neither side closes
 * a channel the other still uses. */
static int host_wait_device(struct pair *p, uint64_t n)
{
    struct ofl_waiter w;
    pair_waiter(p, &w);
    int rc = wait_ge_yield(&p->sh->dev_rounds, n, &w);
    return rc < 0 ? pair_fail(p, rc, __LINE__, "waiting for the device to finish") : 0;
}

/* Add the bulk bytes end `e` moved, by copy path, to the device's counters. */
static void add_copy_bytes(struct shared *sh, const struct ofl_chan_stats *st)
{
    __atomic_fetch_add(&sh->dev_bytes[0], st->bytes_memcpy, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sh->dev_bytes[1], st->bytes_vm, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sh->dev_bytes[2], st->bytes_bounce, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sh->dev_bytes[3], st->bytes_mem, __ATOMIC_RELAXED);
}

static void print_copy_bytes(const struct shared *sh)
{
    printf(", \"device_copy_bytes\": {\"memcpy\": %llu, \"vm\": %llu, \"bounce\": %llu, "
           "\"mem\": %llu}",
           (unsigned long long)sh->dev_bytes[0], (unsigned long long)sh->dev_bytes[1],
           (unsigned long long)sh->dev_bytes[2], (unsigned long long)sh->dev_bytes[3]);
}

static void print_common(const char *mode, int host_pinned, int dev_pinned)
{
    printf("\"mode\": \"%s\", \"cpus\": %d, \"host_cpu\": %d, \"device_cpu\": %d, "
           "\"pinned\": %s, \"crc_path\": \"%s\"", mode, ofl_ncpus(), HOST_CPU, DEV_CPU,
           host_pinned && dev_pinned ? "true" : "false", ofl_crc32c_path());
    if (!(host_pinned && dev_pinned))
        printf(", \"pin_note\": \"fewer than 2 CPUs or pinning failed: host and device "
               "share a CPU\"");
}

/* ---- mode pingpong / pipe: the ceiling and peer for a round trip ---- */

/* The two words a ping-pong exchanges: one in a line only the host writes, one in
 * a line only the device writes. */
struct pp_words {
    uint64_t *host, *dev;
};

/* The harness's own ping-pong lines. */
static struct pp_words pp_harness(const struct pair *p)
{
    return (struct pp_words){&p->sh->line_host, &p->sh->line_dev};
}

/* Tags the exchanged counter: in the channel's lines the word holds message bytes
 * between ping-pong batches, so a wait looks for the exact tagged value. */
#define PP_TAG 0x5050000000000000ull

/* One batch of `per` cache-line exchanges on `pw`, the counter continuing from *i:
 * the host writes the counter into its word and waits for the device to copy it
 * into its own. An untimed exchange comes first, so that the clock starts with
 * both processes in the loop (before a paired batch the device may still be in
 * its last send of the round-trip batch: that send returns once it sees the host's
 * take). Returns the batch time in ns (the device: 0), or a negative errno. */
static int64_t pingpong_batch(struct pair *p, struct ofl_waiter *w, uint64_t *i, uint64_t per,
                              struct pp_words pw)
{
    uint64_t t0 = 0;
    for (uint64_t k = 0; k <= per; k++) {
        if (k == 1) t0 = ofl_now_ns();
        uint64_t n = ++*i | PP_TAG;
        int rc;
        if (p->host) {
            __atomic_store_n(pw.host, n, __ATOMIC_RELEASE);
            rc = wait_until(pw.dev, n, true, w);
        } else {
            rc = wait_until(pw.host, n, true, w);
            __atomic_store_n(pw.dev, n, __ATOMIC_RELEASE);
        }
        if (rc < 0) return pair_fail(p, rc, __LINE__, "ping-pong wait");
    }
    return p->host ? (int64_t)(ofl_now_ns() - t0) : 0;
}

/* Either side of the standalone ping-pong; the host's batch times (ns per
 * exchange) go to t[]. */
static int pingpong_side(struct pair *p, uint64_t batches, uint64_t per, double *t)
{
    struct ofl_waiter w;
    pair_waiter(p, &w);
    uint64_t i = 0;
    for (uint64_t b = 0; b <= batches; b++) { /* batch 0: warm-up */
        int64_t dt = pingpong_batch(p, &w, &i, per, pp_harness(p));
        if (dt < 0) return (int)dt;
        if (p->host && b) t[b - 1] = (double)dt / (double)per;
    }
    return 0;
}

/* Read or write exactly one byte, retrying on EINTR; 0 or -errno (-EPIPE at EOF). */
static int one_byte(int fd, int wr)
{
    char c = 'x';
    for (;;) {
        ssize_t n = wr ? write(fd, &c, 1) : read(fd, &c, 1);
        if (n == 1) return 0;
        if (n == 0) return -EPIPE;
        if (errno != EINTR) return -errno;
    }
}

/* Round trips: cache-line ping-pong (pipe = 0) or pipes (pipe = 1). */
static int mode_roundtrip(int use_pipe, uint64_t batches, uint64_t per)
{
    struct pair p;
    int rc = pair_map(&p, 0);
    int fwd[2] = {-1, -1}, back[2] = {-1, -1};
    if (rc == 0 && use_pipe && (pipe(fwd) < 0 || pipe(back) < 0)) rc = -errno;
    double *t = rc == 0 ? malloc(batches * sizeof *t) : NULL;
    if (rc == 0 && !t) rc = -ENOMEM;
    if (rc == 0) rc = pair_fork(&p);
    if (rc < 0) {
        fprintf(stderr, "bench_chan: setup: %s\n", ofl_strerror(rc));
        return 1;
    }
    uint64_t total = (batches + 1) * per;
    if (!p.host) {
        if (use_pipe) {
            close(fwd[1]);
            close(back[0]);
            for (uint64_t i = 0; i < total && rc == 0; i++) {
                rc = one_byte(fwd[0], 0);
                if (rc == 0) rc = one_byte(back[1], 1);
            }
            if (rc < 0) pair_fail(&p, rc, __LINE__, "pipe");
        } else {
            rc = pingpong_side(&p, batches, per, t);
        }
        _exit(rc < 0 ? 1 : 0);
    }
    if (use_pipe) {
        close(fwd[0]);
        close(back[1]);
        uint64_t b = 0;
        for (; b <= batches && rc == 0; b++) {
            uint64_t t0 = ofl_now_ns();
            for (uint64_t k = 0; k < per && rc == 0; k++) {
                rc = one_byte(fwd[1], 1);
                if (rc == 0) rc = one_byte(back[0], 0);
            }
            if (b && rc == 0) t[b - 1] = (double)(ofl_now_ns() - t0) / (double)per;
        }
        if (rc < 0) pair_fail(&p, rc, __LINE__, "pipe");
        close(fwd[1]);
        close(back[0]);
    } else {
        rc = pingpong_side(&p, batches, per, t);
    }
    int st = pair_join(&p);
    if (rc < 0 || st != 0) {
        fprintf(stderr, "bench_chan: %s failed (device exit %d)\n",
                use_pipe ? "pipe" : "pingpong", st);
        return 1;
    }
    struct stats s = stats_of(t, batches);
    printf("{");
    print_common(use_pipe ? "pipe" : "pingpong", p.pinned, p.sh->dev_pinned);
    printf(", \"batches\": %llu, \"per\": %llu, ", (unsigned long long)batches,
           (unsigned long long)per);
    print_stats("rtt_ns", &s);
    printf("}\n");
    free(t);
    return 0;
}

/* ---- mode copy: single-thread copy ceilings at each size ---- */

/* Copies per timed sample: enough for about 1 MiB, so small sizes are not lost in
 * the clock's resolution. */
static uint64_t inner_count(uint64_t size)
{
    return size >= (1u << 20) ? 1 : (1u << 20) / size;
}

enum copy_kind { COPY_MEMCPY, COPY_PVR, COPY_CRC, COPY_CRC_COPY, COPY_XMEMCPY, COPY_XCRC_COPY };

/* One timed sample of `kind` at `size`: Gb/s, or a negative errno. */
static double copy_sample(int kind, uint8_t *dst, const uint8_t *src, uint64_t size,
                          pid_t child, uint32_t *sink)
{
    uint64_t n = inner_count(size);
    uint64_t t0 = ofl_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        if (kind == COPY_MEMCPY) {
            memcpy(dst, src, size);
            __asm__ __volatile__("" : : "r"(dst) : "memory");
        } else if (kind == COPY_PVR) {
            struct iovec l = {dst, size}, r = {(void *)(uintptr_t)src, size};
            ssize_t got = process_vm_readv(child, &l, 1, &r, 1, 0);
            if (got != (ssize_t)size) return got < 0 ? -(double)errno : -(double)EIO;
        } else if (kind == COPY_CRC) {
            *sink ^= ofl_crc32c(0, src, size);
        } else {
            *sink ^= ofl_crc32c_copy(0, dst, src, size);
        }
    }
    uint64_t dt = ofl_now_ns() - t0;
    return (double)(n * size * 8) / (double)(dt ? dt : 1);
}

/* The other core's ceilings (COPY_X*): a thread on the device's CPU copies, or
 * copies with CRC32C, a buffer the host's CPU has just written, as a bulk receiver
 * finds a sender's bytes (dirty in the other core's cache). It times its copies. */
struct xcore {
    const uint8_t *src;
    uint8_t *dst;
    uint64_t size;
    int kind;       /* COPY_XMEMCPY or COPY_XCRC_COPY */
    uint64_t go;    /* host: copies asked for; XCORE_STOP ends the thread */
    uint64_t done;  /* thread: copies made */
    uint64_t ns;    /* thread: time in them since the host reset it */
    uint32_t sink;
    int pinned;
};

#define XCORE_STOP UINT64_MAX

static void *xcore_main(void *arg)
{
    struct xcore *x = arg;
    x->pinned = pin(DEV_CPU);
    /* No peers and no abort word: the waits below cannot fail. */
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    for (uint64_t n = 1;; n++) {
        wait_ge(&x->go, n, &w);
        if (__atomic_load_n(&x->go, __ATOMIC_ACQUIRE) == XCORE_STOP) break;
        uint64_t t0 = ofl_now_ns();
        if (x->kind == COPY_XMEMCPY) {
            memcpy(x->dst, x->src, x->size);
            __asm__ __volatile__("" : : "r"(x->dst) : "memory");
        } else {
            x->sink ^= ofl_crc32c_copy(0, x->dst, x->src, x->size);
        }
        x->ns += ofl_now_ns() - t0;
        __atomic_store_n(&x->done, n, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* One sample of the thread's `kind` at `size`: the host writes the pattern of a new
 * seed (*seed + 1, kept in *seed) into `src` before each copy; Gb/s over the
 * thread's time in its copies. */
static double xcore_sample(struct xcore *x, int kind, uint8_t *src, uint64_t size,
                           uint64_t *seed)
{
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);   /* as in xcore_main: cannot fail */
    uint64_t n = inner_count(size);
    x->kind = kind;
    x->size = size;
    x->ns = 0;   /* the thread is waiting for go: it reads ns only after it */
    for (uint64_t i = 0; i < n; i++) {
        fill_words(src, size, ++*seed);
        uint64_t g = x->go + 1;
        __atomic_store_n(&x->go, g, __ATOMIC_RELEASE);
        wait_ge(&x->done, g, &w);
    }
    return (double)(n * size * 8) / (double)(x->ns ? x->ns : 1);
}

static int mode_copy(const uint64_t *sizes, int ns, uint64_t reps)
{
    uint64_t maxs = 0;
    for (int i = 0; i < ns; i++)
        if (sizes[i] > maxs) maxs = sizes[i];
    uint8_t *src = alloc_buf(maxs), *dst = alloc_buf(maxs);
    uint8_t *xsrc = alloc_buf(maxs), *xdst = alloc_buf(maxs);
    double *v = malloc(reps * sizeof *v);
    if (!src || !dst || !xsrc || !xdst || !v) {
        fprintf(stderr, "bench_chan: copy: out of memory\n");
        return 1;
    }
    fill_words(src, maxs, 7);
    /* A child holding the same pages (copy-on-write, not written): the source of
     * process_vm_readv, as a device process reads a host buffer. */
    int hold[2];
    if (pipe(hold) < 0) {
        perror("bench_chan: pipe");
        return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("bench_chan: fork");
        return 1;
    }
    if (child == 0) {
        close(hold[1]);
        char c;
        while (read(hold[0], &c, 1) < 0 && errno == EINTR) {}
        _exit(0);
    }
    close(hold[0]);
    int hp = pin(HOST_CPU);
    uint32_t sink = 0;
    int rc = 0;
    printf("{");
    print_common("copy", hp, 1);
    printf(", \"reps\": %llu, \"rows\": [", (unsigned long long)reps);
    static const char *const names[] = {"memcpy_gbps",     "pvr_gbps",          "crc32c_gbps",
                                        "crc32c_copy_gbps", "xcore_memcpy_gbps",
                                        "xcore_crc32c_copy_gbps"};
    /* The cross-core kinds copy from their own source, which the host rewrites. */
    struct xcore x = {.src = xsrc, .dst = xdst};
    pthread_t xt;
    bool xstarted = (rc = -pthread_create(&xt, NULL, xcore_main, &x)) == 0;
    if (!xstarted)
        fprintf(stderr, "bench_chan: copy: pthread_create: %s\n", ofl_strerror(rc));
    uint64_t seed = 100;
    for (int si = 0; si < ns && rc == 0; si++) {
        printf("%s{\"size\": %llu, \"inner\": %llu", si ? ", " : "",
               (unsigned long long)sizes[si], (unsigned long long)inner_count(sizes[si]));
        for (int kind = COPY_MEMCPY; kind <= COPY_XCRC_COPY && rc == 0; kind++) {
            bool xc = kind >= COPY_XMEMCPY;
            if (xc) xcore_sample(&x, kind, xsrc, sizes[si], &seed); /* warm-up */
            else copy_sample(kind, dst, src, sizes[si], child, &sink);
            for (uint64_t r = 0; r < reps; r++) {
                v[r] = xc ? xcore_sample(&x, kind, xsrc, sizes[si], &seed)
                          : copy_sample(kind, dst, src, sizes[si], child, &sink);
                if (v[r] < 0) {
                    rc = (int)v[r];
                    fprintf(stderr, "bench_chan: process_vm_readv: %s\n", ofl_strerror(rc));
                    break;
                }
            }
            if (rc) break;
            struct stats s = stats_of(v, reps);
            printf(", ");
            print_stats(names[kind], &s);
        }
        printf("}");
        if (rc == 0 && (check_words(dst, sizes[si], 7) || check_words(xdst, sizes[si], seed))) {
            fprintf(stderr, "bench_chan: copy: wrong bytes at size %llu\n",
                    (unsigned long long)sizes[si]);
            rc = -EIO;
        }
    }
    if (xstarted) {
        __atomic_store_n(&x.go, XCORE_STOP, __ATOMIC_RELEASE);
        pthread_join(xt, NULL);
    }
    printf("], \"crc_sink\": %u, \"xcore_pinned\": %s}\n", sink ^ x.sink,
           x.pinned ? "true" : "false");
    close(hold[1]);
    waitpid(child, NULL, 0);
    free(v);
    free_buf(src, maxs);
    free_buf(dst, maxs);
    free_buf(xsrc, maxs);
    free_buf(xdst, maxs);
    return rc ? 1 : 0;
}

/* ---- channels: shared setup ---- */

/* The channel region (shared) with `n` channels named c0, c1, ... created; their
 * ids (the region places names by hash) go to ids[]. */
static void *chan_region(uint32_t n, size_t *len, uint32_t *ids)
{
    *len = ofl_chan_region_size(n);
    void *r = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    int rc = ofl_chan_region_format(r, *len, n);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%u", i);
        int id = ofl_chan_create(r, name);
        rc = id < 0 ? id : 0;
        if (id >= 0) ids[i] = (uint32_t)id;
    }
    if (rc < 0) {
        fprintf(stderr, "bench_chan: channel region: %s\n", ofl_strerror(rc));
        munmap(r, *len);
        return NULL;
    }
    return r;
}

/* ---- mode lat ---- */

enum lat_kind { LAT_DIRECT, LAT_RTT, LAT_BULK };

struct lat_row {
    int kind;
    int d2h;       /* 1: the device sends (for LAT_RTT: the host asks, the device replies) */
    uint64_t len;
};

/* Direct rows: what this process sends as message `seq` of row `r` (0: nothing),
 * and what it expects to receive (0: nothing). In a round trip the host asks with
 * the pattern of seq and the device answers with that of ~seq. */
static uint64_t direct_sends(const struct lat_row *r, int host, uint64_t seq)
{
    if (r->kind == LAT_RTT) return host ? seq : ~seq;
    return host != r->d2h ? seq : 0;
}

static uint64_t direct_expects(const struct lat_row *r, int host, uint64_t seq)
{
    if (r->kind == LAT_RTT) return host ? ~seq : seq;
    return host != r->d2h ? 0 : seq;
}

/* A batch of direct messages from `seq`: the payloads are written before the batch
 * (out[k]) and checked after it (in[k]), untimed, so that the timed loop holds the
 * channel calls only, as the ping-pong's holds only its stores and loads. */
static void direct_fill(const struct lat_row *r, int host, uint64_t seq, uint64_t per,
                        uint8_t *out)
{
    for (uint64_t k = 0; k < per; k++) {
        uint64_t s = direct_sends(r, host, seq + k);
        if (s) fill_words(out + k * DIRECT_LEN, DIRECT_LEN, s);
    }
}

static uint64_t direct_check(const struct lat_row *r, int host, uint64_t seq, uint64_t per,
                             const uint8_t *in)
{
    uint64_t bad = 0;
    for (uint64_t k = 0; k < per; k++) {
        uint64_t s = direct_expects(r, host, seq + k);
        if (s) bad += check_words(in + k * DIRECT_LEN, DIRECT_LEN, s);
    }
    return bad;
}

/* The device's reply in a round trip, posted as a channel handler's REPLY posts it
 * (ofl_chan_post: it carries the acknowledgement of the request; the host takes it
 * with its receive). -ENOBUFS only while the host has not taken the previous reply:
 * retried, for TMO_NS at most. */
static int reply_post(struct ofl_chan_end *e, const uint8_t *out)
{
    uint64_t deadline = 0;
    for (uint32_t n = 1;; n++) {
        int rc = ofl_chan_post(e, out, DIRECT_LEN);
        if (rc != -ENOBUFS) return rc;
        ofl_cpu_relax();
        if (n % 1024) continue;
        uint64_t now = ofl_now_ns();
        if (!deadline) deadline = now + TMO_NS;
        if (now >= deadline) return -ETIMEDOUT;
    }
}

/* Message k of a direct batch as seen by this process: send out, receive into in,
 * or both for a round trip. A received length other than DIRECT_LEN counts in *bad. */
static int direct_step(struct ofl_chan_end *e, const struct lat_row *r, int host,
                       const uint8_t *out, uint8_t *in, uint64_t *bad)
{
    int rc = 0;
    bool sends = r->kind == LAT_RTT || host != r->d2h;
    bool recvs = r->kind == LAT_RTT || host == r->d2h;
    /* In a round trip the host sends first, the device receives first. */
    if (sends && (r->kind != LAT_RTT || host) && (rc = ofl_chan_send(e, out, DIRECT_LEN, TMO_NS)) < 0)
        return rc;
    if (recvs) {
        if ((rc = ofl_chan_recv(e, in, DIRECT_LEN, TMO_NS)) < 0) return rc;
        *bad += rc != DIRECT_LEN;
    }
    if (r->kind == LAT_RTT && !host) return reply_post(e, out);
    return 0;
}

/* Bulk message `seq` of row `r`: the payload is the row's pattern with the sequence
 * number stamped into its first and last words; the receiver checks those (the CRC
 * covers the rest; the whole payload is checked after the row). */
static int bulk_step(struct ofl_chan_end *e, const struct lat_row *r, int host, uint64_t seq,
                     uint8_t *buf, uint64_t *bad)
{
    uint64_t *w = (uint64_t *)buf, last = r->len / 8 - 1;
    if (host != r->d2h) {
        w[0] = w[last] = seq;
        return ofl_chan_bulk_send(e, buf, r->len, TMO_NS);
    }
    w[0] = w[last] = ~seq;
    int rc = ofl_chan_bulk_recv(e, buf, r->len, TMO_NS);
    if (rc < 0) return rc;
    *bad += (w[0] != seq) + (w[last] != seq);
    return 0;
}

/* The channel's own message lines as ping-pong words: the first payload word of
 * each side's line (A: the host's). */
static struct pp_words pp_channel(const struct pair *p, const struct ofl_chan_end *e)
{
    struct chan_line *mine = e->line_mine, *peer = (struct chan_line *)e->line_peer;
    uint64_t *a = (uint64_t *)(void *)(p->host ? mine : peer)->payload;
    uint64_t *b = (uint64_t *)(void *)(p->host ? peer : mine)->payload;
    return (struct pp_words){a, b};
}

/* Run every row as this process; the timing side stores batch times (ns per
 * batch) into the shared samples (row-major, `batches` per row). Before each batch
 * of the round-trip row, both sides run a batch of cache-line ping-pong on the
 * harness's lines, whose times go to the extra row `nrows` + 1, then one on the
 * channel's own message lines, to row `nrows`: the ceiling paired with each batch.
 * No message is pending then: the host took the last reply before it starts the
 * exchanges, and the device writes only after the host has. `msgs` holds 2 * per
 * direct payloads (sent, received). */
static int lat_side(struct pair *p, struct ofl_chan_end *e, const struct lat_row *rows,
                    int nrows, uint64_t batches, uint64_t per, uint8_t *buf, uint8_t *msgs,
                    uint64_t *bad)
{
    uint64_t seq = 1, pp = 0;
    uint8_t *out = msgs, *in = msgs + per * DIRECT_LEN;
    struct ofl_waiter w;
    pair_waiter(p, &w);
    for (int ri = 0; ri < nrows; ri++) {
        const struct lat_row *r = &rows[ri];
        int timer = r->kind == LAT_RTT ? p->host : p->host != r->d2h;
        uint64_t row_seed = 1000 + (uint64_t)ri;
        if (r->kind == LAT_BULK) fill_words(buf, r->len, row_seed);
        for (uint64_t b = 0; b <= batches; b++) { /* batch 0: warm-up, untimed */
            for (int on = 1; r->kind == LAT_RTT && on >= 0; on--) {
                int64_t dt = pingpong_batch(p, &w, &pp, per, on ? pp_harness(p) : pp_channel(p, e));
                if (dt < 0) return (int)dt;
                if (p->host && b)
                    p->sh->samples[(uint64_t)(nrows + on) * batches + b - 1] = (uint64_t)dt;
            }
            bool direct = r->kind != LAT_BULK;
            if (direct) direct_fill(r, p->host, seq, per, out);
            uint64_t t0 = ofl_now_ns();
            for (uint64_t k = 0; k < per; k++) {
                int rc = direct ? direct_step(e, r, p->host, out + k * DIRECT_LEN,
                                              in + k * DIRECT_LEN, bad)
                                : bulk_step(e, r, p->host, seq + k, buf, bad);
                if (rc < 0) return pair_fail(p, rc, __LINE__, "latency step");
            }
            uint64_t dt = ofl_now_ns() - t0;
            if (timer && b) p->sh->samples[(uint64_t)ri * batches + b - 1] = dt;
            if (direct) *bad += direct_check(r, p->host, seq, per, in);
            seq += per;
        }
        if (r->kind == LAT_BULK) {
            /* The last message's payload, in full (outside the timed batches). */
            uint64_t *w = (uint64_t *)buf, last = r->len / 8 - 1;
            uint64_t s = seq - 1;
            int sender = p->host != r->d2h;
            if (!sender) {
                *bad += (w[0] != s) + (w[last] != s);
                w[0] = pattern(row_seed, 0);
                w[last] = pattern(row_seed, last);
                *bad += check_words(buf, r->len, row_seed);
            }
        }
    }
    return 0;
}

static const char *lat_name(int kind)
{
    return kind == LAT_DIRECT ? "direct" : kind == LAT_RTT ? "direct_rtt" : "bulk";
}

static int mode_lat(uint64_t batches, uint64_t per, const uint64_t *bulk, int nbulk)
{
    struct lat_row rows[3 + 2 * MAX_SIZES];
    int nrows = 0;
    rows[nrows++] = (struct lat_row){LAT_DIRECT, 0, DIRECT_LEN};
    rows[nrows++] = (struct lat_row){LAT_DIRECT, 1, DIRECT_LEN};
    rows[nrows++] = (struct lat_row){LAT_RTT, 0, DIRECT_LEN};
    uint64_t maxb = DIRECT_LEN;
    for (int i = 0; i < nbulk; i++) {
        rows[nrows++] = (struct lat_row){LAT_BULK, 0, bulk[i]};
        rows[nrows++] = (struct lat_row){LAT_BULK, 1, bulk[i]};
        if (bulk[i] > maxb) maxb = bulk[i];
    }
    struct pair p;
    size_t rlen;
    int rc = pair_map(&p, (uint64_t)(nrows + 2) * batches);
    uint32_t id = 0;
    void *region = rc == 0 ? chan_region(1, &rlen, &id) : NULL;
    uint8_t *buf = region ? alloc_buf(maxb) : NULL;
    uint8_t *msgs = buf ? alloc_buf(2 * per * DIRECT_LEN) : NULL;
    if (!msgs) {
        fprintf(stderr, "bench_chan: lat: setup failed\n");
        return 1;
    }
    if ((rc = pair_fork(&p)) < 0) {
        fprintf(stderr, "bench_chan: fork: %s\n", ofl_strerror(rc));
        return 1;
    }
    struct ofl_chan_end e = {0};
    uint64_t bad = 0;
    rc = ofl_chan_open(&e, region, id, p.host ? OFL_CHAN_A : OFL_CHAN_B, &p.sh->abort_word);
    if (rc < 0) pair_fail(&p, rc, __LINE__, "open");
    else rc = lat_side(&p, &e, rows, nrows, batches, per, buf, msgs, &bad);
    uint32_t k = e.sg_per_chunk;
    if (!p.host) {
        p.sh->dev_bad = bad;
        struct ofl_chan_stats st;
        ofl_chan_get_stats(&e, &st);
        add_copy_bytes(p.sh, &st);
        __atomic_store_n(&p.sh->dev_rounds, 1, __ATOMIC_RELEASE);
        /* Close only after the host has closed, so that its last receive never sees
         * the channel closed. */
        if (rc == 0) {
            char c;
            while (read(p.watch_fd, &c, 1) < 0 && errno == EINTR) {}
        }
        ofl_chan_close(&e);
        _exit(rc < 0 || bad ? 1 : 0);
    }
    if (rc == 0) rc = host_wait_device(&p, 1);
    ofl_chan_close(&e);
    int st = pair_join(&p);
    if (rc < 0 || st != 0 || bad || p.sh->dev_bad) {
        fprintf(stderr, "bench_chan: lat failed (device exit %d, device error %s at line %d, "
                "wrong words host %llu device %llu)\n", st,
                p.sh->dev_err ? ofl_strerror(p.sh->dev_err) : "none",
                p.sh->dev_line, (unsigned long long)bad, (unsigned long long)p.sh->dev_bad);
        return 1;
    }
    double *v = malloc(batches * sizeof *v);
    if (!v) return 1;
    printf("{");
    print_common("lat", p.pinned, p.sh->dev_pinned);
    printf(", \"batches\": %llu, \"per\": %llu, \"sg_per_chunk\": %u",
           (unsigned long long)batches, (unsigned long long)per, k);
    print_copy_bytes(p.sh);
    printf(", \"rows\": [");
    for (int ri = 0; ri < nrows; ri++) {
        for (uint64_t b = 0; b < batches; b++)
            v[b] = (double)p.sh->samples[(uint64_t)ri * batches + b] / (double)per;
        struct stats s = stats_of(v, batches);
        const struct lat_row *r = &rows[ri];
        int host_timed = r->kind == LAT_RTT || !r->d2h;
        printf("%s{\"kind\": \"%s\", \"dir\": \"%s\", \"size\": %llu, \"timed_on\": \"%s\", ",
               ri ? ", " : "", lat_name(r->kind), r->kind == LAT_RTT ? "rtt" :
               r->d2h ? "d2h" : "h2d", (unsigned long long)r->len,
               host_timed ? "host" : "device");
        print_stats("per_msg_ns", &s);
        if (r->kind == LAT_RTT) {
            /* The paired ceilings: the ping-pong batches run just before each batch,
             * on the channel's lines (the ceiling) and on the harness's. */
            static const char *const names[2][2] = {
                {"pingpong_paired_ns", "ratio_to_pingpong"},
                {"pingpong_harness_paired_ns", "ratio_to_pingpong_harness"}};
            const uint64_t *rt = p.sh->samples + (uint64_t)ri * batches;
            for (int on = 0; on < 2; on++) {
                const uint64_t *pp = p.sh->samples + (uint64_t)(nrows + on) * batches;
                for (uint64_t b = 0; b < batches; b++) v[b] = (double)pp[b] / (double)per;
                s = stats_of(v, batches);
                printf(", ");
                print_stats(names[on][0], &s);
                for (uint64_t b = 0; b < batches; b++)
                    v[b] = (double)rt[b] / (double)(pp[b] ? pp[b] : 1);
                s = stats_of(v, batches);
                printf(", ");
                print_stats(names[on][1], &s);
            }
            printf(", \"pingpong_paired_on\": \"the channel's message lines\"");
        }
        printf("}");
    }
    printf("]}\n");
    free(v);
    return 0;
}

/* ---- mode tput ---- */

/* The threads of one side moving one bulk transfer per channel per round: the
 * calling thread serves channel 0, workers the others. */
struct crew {
    struct pair *p;
    struct ofl_chan_end ends[MAX_CONC];
    uint8_t *bufs[MAX_CONC];
    const struct ofl_chan_mem *mems;  /* host: registered memory holding bufs[i] */
    uint64_t t_end[MAX_CONC];
    int err[MAX_CONC];
    uint32_t k;
    int send;          /* 1: this side sends */
    uint64_t len;      /* this round's transfer size (set before the round) */
    uint64_t round;    /* rounds released (workers start round r when this reaches r) */
    uint64_t finished; /* worker transfers finished, over all rounds */
    uint64_t stop;     /* 1: workers exit */
};

struct crew_worker {
    struct crew *c;
    uint32_t i;
};

/* One transfer on channel i of the crew. */
static int crew_op(struct crew *c, uint32_t i)
{
    uint64_t len = __atomic_load_n(&c->len, __ATOMIC_ACQUIRE);
    if (c->mems)
        return c->send ? ofl_chan_bulk_send_mem(&c->ends[i], &c->mems[i], 0, len, TMO_NS)
                       : ofl_chan_bulk_recv_mem(&c->ends[i], &c->mems[i], 0, len, TMO_NS);
    return c->send ? ofl_chan_bulk_send(&c->ends[i], c->bufs[i], len, TMO_NS)
                   : ofl_chan_bulk_recv(&c->ends[i], c->bufs[i], len, TMO_NS);
}

static void *crew_main(void *arg)
{
    struct crew_worker *cw = arg;
    struct crew *c = cw->c;
    struct ofl_waiter w;
    pair_waiter(c->p, &w);
    for (uint64_t r = 1;; r++) {
        int rc = wait_ge_yield(&c->round, r, &w);
        if (rc == 0 && __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) break;
        if (rc == 0) rc = crew_op(c, cw->i);
        c->t_end[cw->i] = ofl_now_ns();
        if (rc < 0) {
            c->err[cw->i] = rc;
            pair_fail(c->p, rc, __LINE__, "bulk transfer (worker)");
        }
        __atomic_fetch_add(&c->finished, 1, __ATOMIC_RELEASE);
        if (rc < 0) break;
    }
    return NULL;
}

/* One round: release the workers, do channel 0, wait for all; returns the latest
 * finishing time (ns) or 0 on error. */
static uint64_t crew_round(struct crew *c, uint64_t r)
{
    __atomic_store_n(&c->round, r, __ATOMIC_RELEASE);
    int rc = crew_op(c, 0);
    c->t_end[0] = ofl_now_ns();
    if (rc < 0) {
        c->err[0] = rc;
        pair_fail(c->p, rc, __LINE__, "bulk transfer");
    }
    struct ofl_waiter w;
    pair_waiter(c->p, &w);
    int wrc = wait_ge_yield(&c->finished, r * (c->k - 1), &w);
    uint64_t t = 0;
    for (uint32_t i = 0; i < c->k; i++) {
        if (c->err[i] < 0) return 0;
        if (c->t_end[i] > t) t = c->t_end[i];
    }
    return wrc < 0 ? 0 : t;
}

/* One side's manager state for one channel (SERVE mgr). */
struct mgr_chan {
    uint8_t *buf;
    const uint64_t *expect;  /* the current round's size */
    uint64_t done;           /* transfers finished */
    uint64_t t_end;          /* when the last one finished (ns) */
    int status;              /* the last transfer's status */
    struct ofl_chan_stats st;  /* the end's counters after the last transfer */
};

static void *mgr_begin(void *ctx, struct ofl_chan_end *e, size_t len)
{
    (void)e;
    struct mgr_chan *m = ctx;
    return len == __atomic_load_n(m->expect, __ATOMIC_ACQUIRE) ? m->buf : NULL;
}

static void mgr_done(void *ctx, struct ofl_chan_end *e, void *buf, size_t len, int status)
{
    (void)buf, (void)len;
    struct mgr_chan *m = ctx;
    m->t_end = ofl_now_ns();
    m->status = status;
    ofl_chan_get_stats(e, &m->st);
    __atomic_fetch_add(&m->done, 1, __ATOMIC_RELEASE);
}

static void mgr_sent(void *ctx, struct ofl_chan_end *e, const void *buf, size_t len, int status)
{
    mgr_done(ctx, e, (void *)(uintptr_t)buf, len, status);
}

struct tput_cfg {
    int d2h, mgr;
    int copy;                 /* enum ofl_chan_copy for both ends (AUTO under
                                 managers: served ends take no other) */
    int mem;                  /* the host's buffers in registered memory (COPY mem) */
    uint32_t k;
    uint32_t ids[MAX_CONC];   /* the channels' ids */
    const uint64_t *sizes;
    int ns;
    uint64_t reps;
};

/* Names of the copy modes (enum ofl_chan_copy). */
static const char *const copy_names[] = {"auto", "vm", "bounce"};

/* Seed of channel i's payload in round r. */
static uint64_t tput_seed(uint64_t r, uint32_t i)
{
    return (r << 8) | i;
}

/* Host: memcpy of the round's K payloads into `scratch`, one after the other, on
 * this thread (repeated to about 1 MiB, as in mode copy); Gb/s. The ceiling paired
 * with each repetition. */
static double paired_memcpy(uint8_t *const *bufs, uint32_t k, uint64_t len, uint8_t *scratch)
{
    uint64_t n = inner_count(k * len);
    uint64_t t0 = ofl_now_ns();
    for (uint64_t j = 0; j < n; j++) {
        for (uint32_t i = 0; i < k; i++) {
            memcpy(scratch, bufs[i], len);
            __asm__ __volatile__("" : : "r"(scratch) : "memory");
        }
    }
    uint64_t dt = ofl_now_ns() - t0;
    return (double)(n * k * len * 8) / (double)(dt ? dt : 1);
}

/* Round r of one tput side, before its transfers: the sending side fills the
 * payloads; the host times the paired memcpy (into *mt unless NULL: the warm-up's is
 * not kept), waits until the device is ready, takes the start time (*t0) and then
 * releases the device's managed sends; the device says it is ready and, when it
 * sends under a manager, waits for that release. 0 or a negative errno (reported). */
static int round_begin(struct pair *p, const struct tput_cfg *cfg, uint8_t **bufs, uint64_t len,
                       uint64_t r, int send, uint8_t *scratch, double *mt,
                       struct ofl_waiter *w, uint64_t *t0)
{
    if (send)
        for (uint32_t i = 0; i < cfg->k; i++) fill_words(bufs[i], len, tput_seed(r, i));
    int rc;
    if (p->host) {
        double m = paired_memcpy(bufs, cfg->k, len, scratch);
        if (mt) *mt = m;
        if ((rc = wait_ge_yield(&p->sh->ready, r * cfg->k, w)) < 0)
            return pair_fail(p, rc, __LINE__, "waiting for the device");
        *t0 = ofl_now_ns();
        __atomic_store_n(&p->sh->go, r, __ATOMIC_RELEASE);
    } else {
        __atomic_fetch_add(&p->sh->ready, cfg->k, __ATOMIC_RELEASE);
        if (send && cfg->mgr && (rc = wait_ge_yield(&p->sh->go, r, w)) < 0)
            return pair_fail(p, rc, __LINE__, "waiting for the host");
    }
    return 0;
}

/* Round r of one tput side, after its transfers (from t0 to t1 on the host): the
 * host records the rate (into *t unless NULL), the receiving side checks every
 * payload, the device says the round is done. 0 or -EBADMSG (reported). */
static int round_end(struct pair *p, const struct tput_cfg *cfg, uint8_t **bufs, uint64_t len,
                     uint64_t r, int send, uint64_t t0, uint64_t t1, double *t)
{
    if (t) *t = (double)(cfg->k * len * 8) / (double)(t1 - t0);
    int rc = 0;
    uint64_t bad = 0;
    for (uint32_t i = 0; i < cfg->k && !send; i++) bad += check_words(bufs[i], len, tput_seed(r, i));
    if (bad) {
        if (!p->host) p->sh->dev_bad += bad;
        fprintf(stderr, "bench_chan: %llu wrong words at size %llu\n", (unsigned long long)bad,
                (unsigned long long)len);
        rc = pair_fail(p, -EBADMSG, __LINE__, "payload check");
    }
    if (!p->host) __atomic_store_n(&p->sh->dev_rounds, r, __ATOMIC_RELEASE);
    return rc;
}

/* One side's K channels served by a one-thread channel manager (SERVE mgr), on
 * each side: no thread per channel. The sending side queues a send per channel
 * each round (ofl_chan_mgr_bulk_send), the receiving side's manager lands the
 * transfers into bufs as they are announced. The device queues its sends (d2h) only
 * once the host has taken its start time, so a transfer never starts before it.
 * The host times the rounds into t[] (to the last transfer's end, which its manager
 * thread records) and a memcpy of the same bytes before each round into mt[]. */
static int tput_mgr(struct pair *p, const struct tput_cfg *cfg, void *region, uint8_t **bufs,
                    double *t, double *mt, uint8_t *scratch)
{
    int send = p->host != cfg->d2h;
    struct mgr_chan mc[MAX_CONC];
    uint64_t expect = 0;
    static const struct ofl_chan_bulk_handler on_bulk = {
        .begin = mgr_begin, .done = mgr_done, .sent = mgr_sent};
    struct ofl_chan_mgr *m = ofl_chan_mgr_start(1, &p->sh->abort_word);
    if (!m) return pair_fail(p, -ENOMEM, __LINE__, "manager start");
    int side = p->host ? OFL_CHAN_A : OFL_CHAN_B, rc = 0;
    for (uint32_t i = 0; i < cfg->k && rc == 0; i++) {
        mc[i] = (struct mgr_chan){.buf = bufs[i], .expect = &expect};
        rc = ofl_chan_mgr_serve(m, region, cfg->ids[i], side, NULL, &on_bulk, &mc[i]);
        if (rc < 0) pair_fail(p, rc, __LINE__, "manager serve");
    }
    const char *what = send ? "managed bulk send" : "managed bulk receive";
    struct ofl_waiter w;
    pair_waiter(p, &w);
    uint64_t r = 0, ti = 0;
    for (int si = 0; si < cfg->ns && rc == 0; si++) {
        uint64_t len = cfg->sizes[si];
        __atomic_store_n(&expect, len, __ATOMIC_RELEASE);
        for (uint64_t rep = 0; rep <= cfg->reps && rc == 0; rep++) { /* rep 0: warm-up */
            uint64_t t0 = 0, t1 = 0;
            bool kept = p->host && rep;
            if ((rc = round_begin(p, cfg, bufs, len, ++r, send, scratch, kept ? &mt[ti] : NULL,
                                  &w, &t0)) < 0)
                break;
            for (uint32_t i = 0; i < cfg->k && rc == 0 && send; i++)
                if ((rc = ofl_chan_mgr_bulk_send(m, region, cfg->ids[i], side, bufs[i], len)) < 0)
                    pair_fail(p, rc, __LINE__, what);
            for (uint32_t i = 0; i < cfg->k && rc == 0; i++) {
                rc = wait_ge_yield(&mc[i].done, r, &w);
                if (rc == 0) rc = mc[i].status;
                if (rc < 0) pair_fail(p, rc, __LINE__, what);
                else if (mc[i].t_end > t1) t1 = mc[i].t_end;
            }
            if (rc == 0) rc = round_end(p, cfg, bufs, len, r, send, t0, t1, kept ? &t[ti++] : NULL);
        }
    }
    if (p->host && rc == 0) rc = host_wait_device(p, r);
    if (!p->host) {
        for (uint32_t i = 0; i < cfg->k; i++) add_copy_bytes(p->sh, &mc[i].st);
        /* Keep serving until the host is done, then stop (closing the ends). */
        char c;
        while (rc == 0 && read(p->watch_fd, &c, 1) < 0 && errno == EINTR) {}
    }
    ofl_chan_mgr_stop(m);
    return rc;
}

/* One side with a crew of K threads. The host times the rounds into t[] and a
 * memcpy of the same bytes before each round into mt[]. */
static int tput_crew(struct pair *p, const struct tput_cfg *cfg, void *region, uint8_t **bufs,
                     const struct ofl_chan_mem *mems, double *t, double *mt, uint8_t *scratch)
{
    struct crew *c = calloc(1, sizeof *c);
    if (!c) return pair_fail(p, -ENOMEM, __LINE__, "crew");
    c->p = p;
    c->k = cfg->k;
    c->send = p->host != cfg->d2h;
    c->mems = p->host && cfg->mem ? mems : NULL;
    int rc = 0;
    uint32_t opened = 0;
    for (; opened < cfg->k && rc == 0; opened++) {
        c->bufs[opened] = bufs[opened];
        rc = ofl_chan_open(&c->ends[opened], region, cfg->ids[opened],
                           p->host ? OFL_CHAN_A : OFL_CHAN_B, &p->sh->abort_word);
        if (rc == 0) rc = ofl_chan_set_copy(&c->ends[opened], cfg->copy);
        if (rc < 0) {
            pair_fail(p, rc, __LINE__, "open");
            break;
        }
    }
    pthread_t th[MAX_CONC];
    struct crew_worker cw[MAX_CONC];
    uint32_t started = 1;
    for (; rc == 0 && started < cfg->k; started++) {
        cw[started] = (struct crew_worker){c, started};
        if ((rc = -pthread_create(&th[started], NULL, crew_main, &cw[started])) < 0) {
            pair_fail(p, rc, __LINE__, "pthread_create");
            break;
        }
    }
    struct ofl_waiter w;
    pair_waiter(p, &w);
    uint64_t r = 0, ti = 0;
    for (int si = 0; si < cfg->ns && rc == 0; si++) {
        uint64_t len = cfg->sizes[si];
        __atomic_store_n(&c->len, len, __ATOMIC_RELEASE);
        for (uint64_t rep = 0; rep <= cfg->reps && rc == 0; rep++) { /* rep 0: warm-up */
            uint64_t t0 = 0;
            bool kept = p->host && rep;
            if ((rc = round_begin(p, cfg, bufs, len, ++r, c->send, scratch,
                                  kept ? &mt[ti] : NULL, &w, &t0)) < 0)
                break;
            uint64_t t1 = crew_round(c, r);
            if (!t1) {
                rc = -EIO;
                break;
            }
            rc = round_end(p, cfg, bufs, len, r, c->send, t0, t1, kept ? &t[ti++] : NULL);
        }
    }
    if (p->host && rc == 0) rc = host_wait_device(p, r);
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&c->round, UINT64_MAX, __ATOMIC_RELEASE);
    for (uint32_t i = 1; i < started; i++) pthread_join(th[i], NULL);
    if (!p->host && rc == 0) {
        /* Close only after the host has closed (see mode_lat). */
        char ch;
        while (read(p->watch_fd, &ch, 1) < 0 && errno == EINTR) {}
    }
    for (uint32_t i = 0; i < opened; i++) {
        if (!p->host) {
            struct ofl_chan_stats st;
            ofl_chan_get_stats(&c->ends[i], &st);
            add_copy_bytes(p->sh, &st);
        }
        ofl_chan_close(&c->ends[i]);
    }
    free(c);
    return rc;
}

static int mode_tput(struct tput_cfg *cfg)
{
    uint64_t maxs = 0;
    for (int i = 0; i < cfg->ns; i++)
        if (cfg->sizes[i] > maxs) maxs = cfg->sizes[i];
    struct pair p;
    size_t rlen;
    int rc = pair_map(&p, 0);
    void *region = rc == 0 ? chan_region(cfg->k, &rlen, cfg->ids) : NULL;
    uint64_t nt = (uint64_t)cfg->ns * cfg->reps;
    double *t = malloc(nt * sizeof *t), *mt = malloc(nt * sizeof *mt);
    double *ratio = malloc(cfg->reps * sizeof *ratio);
    if (!region || !t || !mt || !ratio) {
        fprintf(stderr, "bench_chan: tput: setup failed\n");
        return 1;
    }
    if ((rc = pair_fork(&p)) < 0) {
        fprintf(stderr, "bench_chan: fork: %s\n", ofl_strerror(rc));
        return 1;
    }
    uint8_t *bufs[MAX_CONC] = {0};
    struct ofl_chan_mem mems[MAX_CONC];
    memset(mems, 0, sizeof mems);
    for (uint32_t i = 0; i < cfg->k && rc == 0; i++) {
        if (p.host && cfg->mem) {
            if ((rc = ofl_chan_mem_alloc(&mems[i], maxs)) < 0) {
                pair_fail(&p, rc, __LINE__, "registered memory");
                break;
            }
            bufs[i] = mems[i].addr;
            memset(bufs[i], 0x5a, maxs);
        } else if (!(bufs[i] = alloc_buf(maxs))) {
            rc = pair_fail(&p, -ENOMEM, __LINE__, "buffers");
        }
    }
    uint8_t *scratch = p.host && rc == 0 ? alloc_buf(maxs) : NULL;
    if (p.host && !scratch && rc == 0) rc = pair_fail(&p, -ENOMEM, __LINE__, "buffers");
    if (rc == 0) {
        if (cfg->mgr) rc = tput_mgr(&p, cfg, region, bufs, t, mt, scratch);
        else rc = tput_crew(&p, cfg, region, bufs, mems, t, mt, scratch);
    }
    for (uint32_t i = 0; i < cfg->k; i++) {
        if (mems[i].addr) ofl_chan_mem_free(&mems[i]);
        else free_buf(bufs[i], maxs);
    }
    free_buf(scratch, maxs);
    if (!p.host) _exit(rc < 0 || p.sh->dev_bad ? 1 : 0);
    int st = pair_join(&p);
    if (rc < 0 || st != 0 || p.sh->dev_bad) {
        fprintf(stderr, "bench_chan: tput failed (device exit %d, device error %s at line %d, "
                "wrong words on the device %llu)\n", st,
                p.sh->dev_err ? ofl_strerror(p.sh->dev_err) : "none",
                p.sh->dev_line, (unsigned long long)p.sh->dev_bad);
        return 1;
    }
    printf("{");
    print_common("tput", p.pinned, p.sh->dev_pinned);
    printf(", \"dir\": \"%s\", \"k\": %u, \"serve\": \"%s\", \"copy\": \"%s\", "
           "\"reps\": %llu", cfg->d2h ? "d2h" : "h2d", cfg->k, cfg->mgr ? "mgr" : "thr",
           cfg->mem ? "mem" : copy_names[cfg->copy], (unsigned long long)cfg->reps);
    print_copy_bytes(p.sh);
    printf(", \"rows\": [");
    for (int si = 0; si < cfg->ns; si++) {
        printf("%s{\"size\": %llu", si ? ", " : "", (unsigned long long)cfg->sizes[si]);
        struct stats s;
        /* Per repetition: the transfer's rate over the memcpy timed just before it
         * (before sorting either). */
        double *tt = t + (uint64_t)si * cfg->reps, *mm = mt + (uint64_t)si * cfg->reps;
        for (uint64_t i = 0; i < cfg->reps; i++) ratio[i] = tt[i] / mm[i];
        /* The repetitions in order, so that runs can be merged (offlow bench channels
         * runs each configuration in several processes). */
        printf(", \"samples\": {");
        print_samples("gbps", tt, cfg->reps);
        printf(", ");
        print_samples("memcpy_paired_gbps", mm, cfg->reps);
        printf("}");
        s = stats_of(ratio, cfg->reps);
        printf(", ");
        print_stats("ratio_to_memcpy", &s);
        s = stats_of(tt, cfg->reps);
        printf(", ");
        print_stats("gbps", &s);
        s = stats_of(mm, cfg->reps);
        printf(", ");
        print_stats("memcpy_paired_gbps", &s);
        printf("}");
    }
    printf("]}\n");
    free(t);
    free(mt);
    free(ratio);
    return 0;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s pingpong BATCHES PER\n"
            "       %s pipe BATCHES PER\n"
            "       %s copy SIZES REPS\n"
            "       %s lat BATCHES PER BULKSIZES\n"
            "       %s tput h2d|d2h K thr|mgr SIZES REPS [auto|vm|bounce|mem]\n"
            "SIZES: comma list of byte counts (multiples of 8), e.g. 4096,1048576\n",
            prog, prog, prog, prog, prog);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(argv[0]);
    const char *mode = argv[1];
    uint64_t sizes[MAX_SIZES];
    if ((!strcmp(mode, "pingpong") || !strcmp(mode, "pipe")) && argc == 4) {
        uint64_t b = parse_count(argv[2], MAX_BATCHES), per = parse_count(argv[3], MAX_PER);
        if (!b || !per) return usage(argv[0]);
        return mode_roundtrip(!strcmp(mode, "pipe"), b, per);
    }
    if (!strcmp(mode, "copy") && argc == 4) {
        int ns = parse_sizes(argv[2], sizes);
        uint64_t reps = parse_count(argv[3], MAX_REPS);
        if (ns < 1 || !reps) return usage(argv[0]);
        return mode_copy(sizes, ns, reps);
    }
    if (!strcmp(mode, "lat") && argc == 5) {
        uint64_t b = parse_count(argv[2], MAX_BATCHES), per = parse_count(argv[3], MAX_PER);
        int ns = parse_sizes(argv[4], sizes);
        if (!b || !per || ns < 1) return usage(argv[0]);
        return mode_lat(b, per, sizes, ns);
    }
    if (!strcmp(mode, "tput") && (argc == 7 || argc == 8)) {
        struct tput_cfg cfg = {0};
        cfg.copy = -1;
        const char *copy = argc == 8 ? argv[7] : "auto";
        for (int i = 0; i < 3; i++)
            if (!strcmp(copy, copy_names[i])) cfg.copy = i;
        if (!strcmp(copy, "mem")) { /* AUTO copying, the host's buffers registered */
            cfg.copy = OFL_CHAN_COPY_AUTO;
            cfg.mem = 1;
        }
        cfg.d2h = !strcmp(argv[2], "d2h");
        cfg.mgr = !strcmp(argv[4], "mgr");
        cfg.k = (uint32_t)parse_count(argv[3], MAX_CONC);
        cfg.ns = parse_sizes(argv[5], sizes);
        cfg.sizes = sizes;
        cfg.reps = parse_count(argv[6], MAX_REPS);
        if ((!cfg.d2h && strcmp(argv[2], "h2d")) || (!cfg.mgr && strcmp(argv[4], "thr")) ||
            !cfg.k || cfg.ns < 1 || !cfg.reps || cfg.copy < 0 ||
            (cfg.mgr && (cfg.copy != OFL_CHAN_COPY_AUTO || cfg.mem))) /* served ends: auto */
            return usage(argv[0]);
        return mode_tput(&cfg);
    }
    return usage(argv[0]);
}
