/* Channels: direct messages, bulk transfers, every error path in both directions,
 * names, managers, and a many-channel stress test verifying every byte.
 *
 * Two processes share a MAP_SHARED | MAP_ANONYMOUS region across fork(); threads
 * of one process share it too (the memcpy path). A child's checks print like the
 * parent's; its exit status carries its failure count back.
 *
 * usage: test_chan [STRESS_CHANNELS [STRESS_MAX_BYTES]] */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "offlow/chan.h"
#include "offlow/err.h"
#include "offlow/synth.h"
#include "chan_int.h"   /* chan_mem_map: the mapping's own checks */

#define MS 1000000ull
#define LONG_WAIT (20000 * MS)   /* never reached in a passing run */
/* Transfers cut short on purpose (closed, stopped, killed mid-way): long enough
 * that the helper thread acts well before the end. Their bytes are not checked. */
#define MID_LEN (64u << 20)

/* ---- helpers ---- */

struct region {
    void *mem;
    size_t size;
    uint32_t nchan;
};

static struct region region_new(uint32_t nchan)
{
    struct region r = {.size = ofl_chan_region_size(nchan), .nchan = nchan};
    r.mem = mmap(NULL, r.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r.mem == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    if (ofl_chan_region_format(r.mem, r.size, nchan) != 0) {
        fprintf(stderr, "format failed\n");
        exit(2);
    }
    return r;
}

static void region_free(struct region *r)
{
    munmap(r->mem, r->size);
}

/* A word of shared memory for flags between processes. */
static volatile uint32_t *shared_words(size_t n)
{
    void *m = mmap(NULL, n * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) exit(2);
    return m;
}

/* Deterministic bytes: byte i of stream `seed` (both sides compute it). */
static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    struct ofl_rng s = {seed};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = ofl_rng_next(&s);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = ofl_rng_next(&s);
        memcpy(p + i, &v, n - i);
    }
}

/* Index of the first byte that differs from fill(seed), or -1. */
static long long first_bad(const uint8_t *p, size_t n, uint64_t seed)
{
    struct ofl_rng s = {seed};
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = ofl_rng_next(&s);
        size_t k = n - i < 8 ? n - i : 8;
        if (memcmp(p + i, &v, k)) {
            for (size_t j = 0; j < k; j++)
                if (p[i + j] != ((uint8_t *)&v)[j]) return (long long)(i + j);
        }
    }
    return -1;
}

static int open_end(struct ofl_chan_end *e, struct region *r, int id, int side)
{
    int rc = ofl_chan_open(e, r->mem, (uint32_t)id, side, NULL);
    if (rc) printf("open side %d of %d: %s\n", side, id, ofl_strerror(rc));
    return rc;
}

/* Create channel `name` in `r` and open both of its ends in this process; its id. */
static int open_pair(struct region *r, const char *name, struct ofl_chan_end *a,
                     struct ofl_chan_end *b)
{
    int id = ofl_chan_create(r->mem, name);
    open_end(a, r, id, OFL_CHAN_A);
    open_end(b, r, id, OFL_CHAN_B);
    return id;
}

/* Run fn(arg) in a child process; returns its pid. The child exits with its
 * failure count (capped). */
static pid_t spawn(void (*fn)(void *), void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        ofl_test_failures = 0;
        fn(arg);
        fflush(stdout);
        _exit(ofl_test_failures > 100 ? 100 : ofl_test_failures);
    }
    return pid;
}

static void reap(pid_t pid, const char *what)
{
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child exited cleanly (status %#x)", what, st);
}

static void reap_quiet(pid_t pid)
{
    int st;
    waitpid(pid, &st, 0);
}

/* ---- region and names ---- */

static void test_names(void)
{
    struct region r = region_new(1024);
    CHECK(ofl_chan_region_size(0) == 0, "no region of 0 channels");
    CHECK(ofl_chan_region_format(r.mem, r.size - 1, 1024) == -EINVAL, "format: too small");
    CHECK(ofl_chan_region_format((uint8_t *)r.mem + 8, r.size - 64, 4) == -EINVAL,
          "format: misaligned");
    CHECK(ofl_chan_create(r.mem, "") == -EINVAL, "create: empty name");
    CHECK(ofl_chan_create(r.mem, "0123456789012345678901234567890123") == -EINVAL,
          "create: name too long");
    uint64_t junk[64] = {0};
    CHECK(ofl_chan_create(junk, "x") == -EINVAL, "create: not a region");
    CHECK(ofl_chan_lookup(r.mem, "nope") == -ENOENT, "lookup: no such channel");
    int ids_ok = 1;
    char name[40];
    static int ids[1024];
    for (int i = 0; i < 1024; i++) {
        snprintf(name, sizeof name, "chan-%d", i);
        ids[i] = ofl_chan_create(r.mem, name);
        if (ids[i] < 0 || ids[i] >= 1024) ids_ok = 0;
    }
    CHECK(ids_ok, "1024 channels created");
    CHECK(ofl_chan_create(r.mem, "chan-5") == -EEXIST, "create: name exists");
    CHECK(ofl_chan_create(r.mem, "one-more") == -ENOSPC, "create: table full");
    int look_ok = 1, name_ok = 1;
    for (int i = 0; i < 1024; i++) {
        snprintf(name, sizeof name, "chan-%d", i);
        if (ofl_chan_lookup(r.mem, name) != ids[i]) look_ok = 0;
        const char *n = ofl_chan_name(r.mem, (uint32_t)ids[i]);
        if (!n || strcmp(n, name)) name_ok = 0;
    }
    CHECK(look_ok, "every name looks up to its id");
    CHECK(name_ok, "every id names its channel");
    CHECK(ofl_chan_lookup(r.mem, "one-more") == -ENOENT, "lookup in a full table: -ENOENT");
    static struct ofl_chan_end ends[1024][2];
    int open_ok = 1;
    for (int i = 0; i < 1024; i++)
        for (int s = 0; s < 2; s++)
            if (ofl_chan_open(&ends[i][s], r.mem, (uint32_t)ids[i], s, NULL)) open_ok = 0;
    CHECK(open_ok, "1024 channels open on both sides at once");
    int msg_ok = 1;
    for (int i = 0; i < 1024; i += 97) {
        uint32_t v = (uint32_t)i * 3, got = 0;
        if (ofl_chan_post(&ends[i][0], &v, 4) || ofl_chan_recv(&ends[i][1], &got, 4, LONG_WAIT) != 4 ||
            got != v)
            msg_ok = 0;
    }
    CHECK(msg_ok, "messages on a sample of the 1024 channels");
    for (int i = 0; i < 1024; i++)
        for (int s = 0; s < 2; s++) ofl_chan_close(&ends[i][s]);
    region_free(&r);

    /* Concurrent creators in two processes: each name exists once. */
    struct region r2 = region_new(64);
    fflush(stdout);
    pid_t pid = fork();
    int mine = 0;
    for (int i = 0; i < 48; i++) {
        snprintf(name, sizeof name, "n%d", i);
        if (ofl_chan_create(r2.mem, name) >= 0) mine++;
    }
    if (pid == 0) _exit(mine);
    int st;
    waitpid(pid, &st, 0);
    int total = mine + (WIFEXITED(st) ? WEXITSTATUS(st) : 1000);
    CHECK(total == 48, "two processes creating the same 48 names: %d creations succeed", total);
    region_free(&r2);
}

static void test_open_close(void)
{
    struct region r = region_new(4);
    int id = ofl_chan_create(r.mem, "oc");
    struct ofl_chan_end a, b, c;
    CHECK(ofl_chan_open(&a, r.mem, 4, OFL_CHAN_A, NULL) == -EINVAL, "open: id out of range");
    CHECK(ofl_chan_open(&b, r.mem, 4, OFL_CHAN_B, NULL) == -EINVAL, "open side B: id out of range");
    CHECK(ofl_chan_open(&b, r.mem, (uint32_t)(id + 2) % 4, OFL_CHAN_B, NULL) == -EINVAL,
          "open side B: id of no channel");
    CHECK(ofl_chan_bulk_recv(&b, NULL, 0, 0) == -EINVAL, "bulk recv on a failed side B end: -EINVAL");
    CHECK(ofl_chan_open(&a, r.mem, (uint32_t)(id + 1) % 4, OFL_CHAN_A, NULL) == -EINVAL,
          "open: id of no channel");
    CHECK(ofl_chan_open(&a, r.mem, (uint32_t)id, 2, NULL) == -EINVAL, "open: bad side");
    uint8_t buf[8];
    CHECK(ofl_chan_send(&a, "x", 1, 0) == -EINVAL, "send on an end whose open failed: -EINVAL");
    CHECK(ofl_chan_recv(&a, buf, 8, 0) == -EINVAL, "recv on an end whose open failed: -EINVAL");
    CHECK(ofl_chan_bulk_send(&a, buf, 8, 0) == -EINVAL, "bulk send on a failed end: -EINVAL");
    CHECK(ofl_chan_open(&a, r.mem, (uint32_t)id, OFL_CHAN_A, NULL) == 0, "open side A");
    CHECK(ofl_chan_open(&c, r.mem, (uint32_t)id, OFL_CHAN_A, NULL) == -EBUSY, "side A twice: -EBUSY");
    CHECK(ofl_chan_set_chunk(&a, 0) == -EINVAL && ofl_chan_set_chunk(&a, 65) == -EINVAL &&
              ofl_chan_set_chunk(&a, 64) == 0,
          "set_chunk accepts 1..64");
    CHECK(ofl_chan_set_copy(&a, 7) == -EINVAL, "set_copy: bad mode");
    CHECK(ofl_chan_send(&a, buf, 57, 0) == -EMSGSIZE, "send of 57 bytes: -EMSGSIZE");
    CHECK(ofl_chan_open(&b, r.mem, (uint32_t)id, OFL_CHAN_B, NULL) == 0, "open side B");
    ofl_chan_close(&b);
    ofl_chan_close(&b);
    CHECK(ofl_chan_send(&a, "x", 1, LONG_WAIT) == -EPIPE, "send to a closed peer: -EPIPE");
    CHECK(ofl_chan_recv(&a, buf, 8, LONG_WAIT) == -EPIPE, "recv from a closed peer: -EPIPE");
    CHECK(ofl_chan_bulk_recv(&a, buf, 8, LONG_WAIT) == -EPIPE, "bulk recv, closed peer: -EPIPE");
    CHECK(ofl_chan_send(&b, "x", 1, 0) == -EPIPE, "send on our closed end: -EPIPE");
    CHECK(ofl_chan_open(&b, r.mem, (uint32_t)id, OFL_CHAN_B, NULL) == 0, "reopen side B");
    CHECK(ofl_chan_post(&a, "hi", 2) == 0, "post to the reopened peer");
    CHECK(ofl_chan_recv(&b, buf, 8, LONG_WAIT) == 2 && !memcmp(buf, "hi", 2),
          "the reopened end receives");
    ofl_chan_close(&a);
    ofl_chan_close(&b);
    region_free(&r);
}

/* ---- direct messages between threads ---- */

struct echo_arg {
    struct ofl_chan_end *e;
    int count;
};

/* Receive `count` messages and send each back with its bytes incremented. */
static void *echo_main(void *p)
{
    struct echo_arg *a = p;
    uint8_t buf[OFL_CHAN_MSG_MAX];
    for (int i = 0; i < a->count; i++) {
        int n = ofl_chan_recv(a->e, buf, sizeof buf, LONG_WAIT);
        if (n < 0) return (void *)(intptr_t)n;
        for (int k = 0; k < n; k++) buf[k]++;
        int rc = ofl_chan_send(a->e, buf, (size_t)n, LONG_WAIT);
        if (rc) return (void *)(intptr_t)rc;
    }
    return NULL;
}

static void echo_rounds(struct ofl_chan_end *near, int count, const char *what)
{
    int bad = 0;
    uint8_t out[OFL_CHAN_MSG_MAX], in[OFL_CHAN_MSG_MAX];
    for (int i = 0; i < count; i++) {
        size_t len = (size_t)i % (OFL_CHAN_MSG_MAX + 1);
        for (size_t k = 0; k < len; k++) out[k] = (uint8_t)(i + k);
        if (ofl_chan_send(near, out, len, LONG_WAIT)) bad++;
        int n = ofl_chan_recv(near, in, sizeof in, LONG_WAIT);
        if (n != (int)len) {
            bad++;
            continue;
        }
        for (size_t k = 0; k < len; k++)
            if (in[k] != (uint8_t)(out[k] + 1)) bad++;
    }
    CHECK(bad == 0, "%s: %d echoed messages of 0..56 bytes (%d bad)", what, count, bad);
}

static void test_direct_threads(void)
{
    struct region r = region_new(2);
    struct ofl_chan_end a, b;
    open_pair(&r, "direct", &a, &b);
    /* A -> B -> A, then B -> A -> B. */
    for (int dir = 0; dir < 2; dir++) {
        struct echo_arg ea = {.e = dir ? &a : &b, .count = 2000};
        pthread_t t;
        pthread_create(&t, NULL, echo_main, &ea);
        echo_rounds(dir ? &b : &a, ea.count, dir ? "threads B->A" : "threads A->B");
        void *ret;
        pthread_join(t, &ret);
        CHECK(ret == NULL, "echo thread finished cleanly (%d)", (int)(intptr_t)ret);
    }
    /* A message longer than the receiver's buffer stays pending. */
    uint8_t big[40] = {1, 2, 3}, small[8];
    CHECK(ofl_chan_post(&a, big, sizeof big) == 0, "post 40 bytes");
    CHECK(ofl_chan_post(&a, big, 1) == -ENOBUFS, "a second post before the first is taken: -ENOBUFS");
    CHECK(ofl_chan_post_done(&a) == 0, "post not done yet");
    CHECK(ofl_chan_recv(&b, small, sizeof small, LONG_WAIT) == -EMSGSIZE,
          "recv into 8 bytes: -EMSGSIZE");
    CHECK(ofl_chan_recv(&b, big, sizeof big, LONG_WAIT) == 40 && big[2] == 3,
          "then the whole message with a big enough buffer");
    CHECK(ofl_chan_post_done(&a) == 1, "post done once taken");
    struct ofl_chan_stats st;
    ofl_chan_get_stats(&b, &st);
    CHECK(st.received == 4001, "B's stats count its received messages (%llu)",
          (unsigned long long)st.received);
    /* With two threads on one end, a receiving thread can store its header hint
     * after a send posted, leaving the hint a message behind. A send must still
     * wait for its own message, not report the one before it taken. */
    CHECK(ofl_chan_post(&a, "x", 1) == 0 && ofl_chan_recv(&b, small, sizeof small, LONG_WAIT) == 1 &&
              ofl_chan_try_recv(&b, small, sizeof small) == -EAGAIN,
          "x taken, and B's acknowledgement of it published");
    a.tx_hdr = h_make(h_seq(a.tx_hdr) - 1, h_ack(a.tx_hdr), h_len(a.tx_hdr), h_kind(a.tx_hdr));
    int rc = ofl_chan_send(&a, "y", 1, 50 * MS);
    CHECK(rc == -ETIMEDOUT && ofl_chan_try_recv(&b, small, sizeof small) == -EAGAIN,
          "a stale header hint: the send waits for its own message, then withdraws it (%s)",
          ofl_strerror(rc));
    ofl_chan_close(&a);
    ofl_chan_close(&b);
    region_free(&r);
}

/* ---- try variants, timeouts, withdrawal ---- */

struct recv_arg {
    struct ofl_chan_end *e;
    uint64_t timeout;
    int rc;
    uint8_t buf[OFL_CHAN_MSG_MAX];
};

static void *recv_main(void *p)
{
    struct recv_arg *a = p;
    a->rc = ofl_chan_recv(a->e, a->buf, sizeof a->buf, a->timeout);
    return NULL;
}

static void test_try_and_timeouts(void)
{
    struct region r = region_new(2);
    struct ofl_chan_end a, b;
    int id = open_pair(&r, "try", &a, &b);
    uint8_t buf[OFL_CHAN_MSG_MAX];
    for (int s = 0; s < 2; s++) {
        struct ofl_chan_end *x = s ? &b : &a, *y = s ? &a : &b;
        const char *d = s ? "B->A" : "A->B";
        CHECK(ofl_chan_try_recv(y, buf, sizeof buf) == -EAGAIN, "%s try_recv, nothing pending: -EAGAIN", d);
        CHECK(ofl_chan_try_send(x, "m", 1) == -EAGAIN, "%s try_send, no receiver: -EAGAIN", d);
        CHECK(ofl_chan_try_recv(y, buf, sizeof buf) == -EAGAIN,
              "%s the failed try_send left nothing behind", d);
        CHECK(ofl_chan_recv(y, buf, sizeof buf, 2 * MS) == -ETIMEDOUT, "%s recv timeout: -ETIMEDOUT", d);
        CHECK(ofl_chan_send(x, "old", 3, 2 * MS) == -ETIMEDOUT, "%s send timeout: -ETIMEDOUT", d);
        CHECK(ofl_chan_try_recv(y, buf, sizeof buf) == -EAGAIN,
              "%s the timed-out send was withdrawn: the peer never sees it", d);
        /* A receiver blocked in recv takes a try_send. */
        struct recv_arg ra = {.e = y, .timeout = LONG_WAIT};
        pthread_t t;
        pthread_create(&t, NULL, recv_main, &ra);
        int rc;
        while ((rc = ofl_chan_try_send(x, "new", 3)) == -EAGAIN) sched_yield();
        pthread_join(t, NULL);
        CHECK(rc == 0 && ra.rc == 3 && !memcmp(ra.buf, "new", 3),
              "%s try_send to a blocked receiver delivers (rc %d, recv %d)", d, rc, ra.rc);
        CHECK(ofl_chan_post(x, "p", 1) == 0 && ofl_chan_try_recv(y, buf, sizeof buf) == 1,
              "%s try_recv takes a pending message", d);
    }
    struct ofl_chan_stats st;
    ofl_chan_get_stats(&a, &st);
    CHECK(st.withdrawn >= 1, "A's stats count its withdrawn sends (%llu)", (unsigned long long)st.withdrawn);

    /* The abort word ends a wait. */
    uint32_t abort_word = 0;
    struct ofl_chan_end c;
    ofl_chan_close(&a);
    CHECK(ofl_chan_open(&c, r.mem, (uint32_t)id, OFL_CHAN_A, &abort_word) == 0, "open with an abort word");
    abort_word = 1;
    CHECK(ofl_chan_recv(&c, buf, sizeof buf, LONG_WAIT) == -ECANCELED, "abort word set: -ECANCELED");
    CHECK(ofl_chan_bulk_send(&c, buf, 8, LONG_WAIT) == -ECANCELED, "abort word, bulk: -ECANCELED");
    ofl_chan_close(&c);
    ofl_chan_close(&b);
    region_free(&r);
}

/* A message that arrives as a receive's wait ends (its deadline, the abort word, an
 * interrupt) is still that receive's, a zero-length one too (issue 28: the host's
 * first try of a receive, 200 us, ended as a remote device's empty answer came; the
 * look after the wait took it, and its length 0 read as "nothing": the receive waited
 * on and the answer was lost, uncounted). Here the receiver naps (idle for 50 ms), a
 * message and the abort word come together: the nap ends with the abort, and the look
 * after it takes the message. Several rounds, each message kind. */
static void test_message_at_a_wait_end(void)
{
    struct region r = region_new(1);
    int id = ofl_chan_create(r.mem, "late");
    for (int i = 0; i < 8; i++) {
        uint32_t abort_word = 0;
        size_t len = (size_t)(i & 1);   /* zero-length, then one byte */
        struct ofl_chan_end a, b;
        CHECK(ofl_chan_open(&a, r.mem, (uint32_t)id, OFL_CHAN_A, &abort_word) == 0 &&
                  ofl_chan_open(&b, r.mem, (uint32_t)id, OFL_CHAN_B, NULL) == 0,
              "wait end %d: open", i);
        struct recv_arg ra = {.e = &a, .timeout = LONG_WAIT};
        pthread_t t;
        pthread_create(&t, NULL, recv_main, &ra);
        usleep(50000);   /* (the receiver naps: idle past OFL_WAIT_NAP_AFTER_NS) */
        int rc = ofl_chan_post(&b, "z", len);
        __atomic_store_n(&abort_word, 1u, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        CHECK(rc == 0 && ra.rc == (int)len && ofl_chan_post_done(&b),
              "wait end %d: a %zu-byte message arriving with the abort is received "
              "(post %d, recv %d)", i, len, rc, ra.rc);
        ofl_chan_close(&a);
        ofl_chan_close(&b);
    }
    region_free(&r);
}

/* Sends and receives with tiny random timeouts racing each other across two
 * processes: a send that returned 0 was received exactly once, in order; a send
 * that timed out was never received. */
#define RACE_N 6000

struct race {
    struct region *r;
    int id;
    volatile uint32_t *got;     /* [RACE_N]: times the receiver took message i */
    volatile uint32_t *sent;    /* [RACE_N]: 1 delivered, 2 withdrawn */
    volatile uint32_t *flags;   /* [0]: sender done; [1]: order violations */
};

/* Pin the calling thread to `cpu` when the machine has more than one (the race
 * needs sender and receiver running at once; unpinned, the scheduler may stack
 * them on one CPU). Returns the previous mask in *old (and 1), or 0. */
static int race_pin(int cpu, cpu_set_t *old)
{
    if (sched_getaffinity(0, sizeof *old, old) || CPU_COUNT(old) < 2) return 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
}

static void race_receiver(void *p)
{
    struct race *x = p;
    struct ofl_chan_end e;
    cpu_set_t old;
    race_pin(1, &old);
    if (open_end(&e, x->r, x->id, OFL_CHAN_B)) return;
    struct ofl_rng s = {99};
    int32_t last = -1;
    for (;;) {
        uint32_t v;
        /* Now and then stay away from the channel for up to 40 us, so that sends
         * time out while no receiver waits (withdrawals) as well as while one does
         * (takes racing the sender's timeout). */
        uint64_t r = ofl_rng_next(&s);
        if (r % 4 == 0) {
            uint64_t until = ofl_now_ns() + (r >> 8) % 40000;
            while (ofl_now_ns() < until) {}
        }
        int n = ofl_chan_recv(&e, &v, sizeof v, ofl_rng_next(&s) % 30000);
        if (n == 4 && v < RACE_N) {
            __atomic_fetch_add(&x->got[v], 1, __ATOMIC_RELAXED);
            if ((int32_t)v <= last) x->flags[1]++;
            last = (int32_t)v;
        } else if (n == -ETIMEDOUT && __atomic_load_n(&x->flags[0], __ATOMIC_ACQUIRE)) {
            break;
        } else if (n != -ETIMEDOUT) {
            CHECK(0, "race receiver: unexpected %d", n);
            break;
        }
    }
    ofl_chan_close(&e);
}

static void test_withdraw_race(void)
{
    struct region r = region_new(2);
    int id = ofl_chan_create(r.mem, "race");
    volatile uint32_t *w = shared_words(2 * RACE_N + 2);
    struct race x = {.r = &r, .id = id, .got = w, .sent = w + RACE_N, .flags = w + 2 * RACE_N};
    pid_t pid = spawn(race_receiver, &x);
    cpu_set_t old;
    int pinned = race_pin(0, &old);
    struct ofl_chan_end e;
    open_end(&e, &r, id, OFL_CHAN_A);
    struct ofl_rng s = {5};
    int other = 0;
    for (uint32_t i = 0; i < RACE_N; i++) {
        int rc = ofl_chan_send(&e, &i, sizeof i, ofl_rng_next(&s) % 20000);
        if (rc == 0)
            x.sent[i] = 1;
        else if (rc == -ETIMEDOUT)
            x.sent[i] = 2;
        else
            other++;
    }
    __atomic_store_n(&x.flags[0], 1, __ATOMIC_RELEASE);
    if (pinned) sched_setaffinity(0, sizeof old, &old);
    reap(pid, "race receiver");
    int delivered = 0, withdrawn = 0, lost = 0, ghost = 0, dup = 0;
    for (int i = 0; i < RACE_N; i++) {
        if (x.sent[i] == 1) {
            delivered++;
            if (x.got[i] == 0) lost++;
        } else if (x.sent[i] == 2) {
            withdrawn++;
            if (x.got[i]) ghost++;
        }
        if (x.got[i] > 1) dup++;
    }
    printf("race: %d delivered, %d withdrawn\n", delivered, withdrawn);
    CHECK(other == 0, "race: sends end in 0 or -ETIMEDOUT only (%d others)", other);
    CHECK(delivered > 0 && withdrawn > 0, "race: both outcomes happened");
    CHECK(lost == 0, "race: every delivered send was received (%d lost)", lost);
    CHECK(ghost == 0, "race: no withdrawn send was ever received (%d seen)", ghost);
    CHECK(dup == 0 && x.flags[1] == 0, "race: no duplicates, in order (%d dup, %u out of order)",
          dup, x.flags[1]);
    ofl_chan_close(&e);
    region_free(&r);
}

/* ---- peers in a child process ---- */

enum { J_IDLE, J_SEND, J_RECV, J_BULK_SEND, J_BULK_RECV };

/* What the child does on its end. */
struct job {
    struct region *r;
    int id;
    int side;
    int op;                  /* J_* */
    size_t len;
    uint64_t seed;           /* data pattern */
    uint64_t timeout;
    uint64_t corrupt;        /* inject at this offset (UINT64_MAX: no) */
    int copy;                /* enum ofl_chan_copy */
    uint32_t k;              /* SG entries per chunk (0: default) */
    int expect;              /* the result the child checks for */
    int expect2;             /* also acceptable (0: same as expect) */
    int close_mid;           /* close the end from another thread once bytes moved */
    int exit_after_open_ms;  /* J_IDLE: exit this long after opening (0: sleep until killed) */
    unsigned expect_path;    /* OFL_CHAN_PATH_* the child's stats must show (0: any) */
    const char *what;
};

struct closer {
    struct ofl_chan_end *e;
    volatile int stop;
};

/* Close the end once its transfer has moved some bytes (the mid-transfer case). */
static void *closer_main(void *p)
{
    struct closer *c = p;
    struct ofl_chan_bulk_stat st;
    do {
        ofl_chan_bulk_progress(c->e, &st);
        if (c->stop) return NULL;
    } while (st.done == 0);
    ofl_chan_close(c->e);
    return NULL;
}

/* Run job `j` on `e` with buffer `buf`, or with registered memory `m` (not NULL:
 * then buf is m->addr) for the bulk calls. */
static int do_job(struct ofl_chan_end *e, const struct job *j, uint8_t *buf,
                  const struct ofl_chan_mem *m)
{
    switch (j->op) {
    case J_SEND: return ofl_chan_send(e, buf, j->len, j->timeout);
    case J_RECV: return ofl_chan_recv(e, buf, j->len, j->timeout);
    case J_BULK_SEND:
        return m ? ofl_chan_bulk_send_mem(e, m, 0, j->len, j->timeout)
                 : ofl_chan_bulk_send(e, buf, j->len, j->timeout);
    case J_BULK_RECV:
        return m ? ofl_chan_bulk_recv_mem(e, m, 0, j->len, j->timeout)
                 : ofl_chan_bulk_recv(e, buf, j->len, j->timeout);
    default: return 0;
    }
}

static void job_main(void *p)
{
    const struct job *j = p;
    struct ofl_chan_end e;
    if (ofl_chan_open(&e, j->r->mem, (uint32_t)j->id, j->side, NULL)) {
        CHECK(0, "%s: child open", j->what);
        return;
    }
    if (j->op == J_IDLE) {
        if (j->exit_after_open_ms) {
            usleep((useconds_t)j->exit_after_open_ms * 1000);
            _exit(0);   /* dies without closing */
        }
        for (;;) pause();
    }
    if (j->copy) ofl_chan_set_copy(&e, j->copy);
    if (j->k) ofl_chan_set_chunk(&e, j->k);
    if (j->corrupt != UINT64_MAX) ofl_chan_inject_corruption(&e, j->corrupt);
    uint8_t *buf = malloc(j->len ? j->len : 1);
    if ((j->op == J_BULK_SEND || j->op == J_SEND) && j->len < MID_LEN) fill(buf, j->len, j->seed);
    struct closer c = {.e = &e};
    pthread_t t;
    if (j->close_mid) pthread_create(&t, NULL, closer_main, &c);
    int rc = do_job(&e, j, buf, NULL);
    if (j->close_mid) {
        c.stop = 1;
        pthread_join(t, NULL);
    }
    CHECK(rc == j->expect || (j->expect2 && rc == j->expect2), "%s: child side got %s", j->what,
          ofl_strerror(rc));
    if (rc == 0 && j->op == J_BULK_RECV) {
        long long bad = first_bad(buf, j->len, j->seed);
        CHECK(bad < 0, "%s: child received every byte right (first bad %lld)", j->what, bad);
    }
    if (j->expect_path) {
        struct ofl_chan_stats st;
        ofl_chan_get_stats(&e, &st);
        CHECK(st.paths == j->expect_path, "%s: child's copies took path %u (wanted %u)", j->what,
              st.paths, j->expect_path);
    }
    free(buf);
    ofl_chan_close(&e);
}

/* The parent's side of a two-process case: runs `op` on side A against the child's
 * job on side B and checks both results. */
struct pcase {
    int op;
    size_t len;
    uint64_t timeout;
    uint64_t corrupt;
    int copy;
    uint32_t k;
    int expect, expect2;
    int close_mid;           /* parent closes its own end mid-transfer */
    int signal_mid;          /* parent sends this signal to the child mid-transfer */
    int signal_after_ms;     /* ... or this long after starting (waits, not transfers) */
    int mem;                 /* the parent's buffer in registered memory */
};

struct sig_arg {
    struct ofl_chan_end *e;
    pid_t pid;
    int sig;
    int after_ms;
    volatile int stop;
};

static void *signaller_main(void *p)
{
    struct sig_arg *s = p;
    if (s->after_ms) {
        usleep((useconds_t)s->after_ms * 1000);
    } else {
        struct ofl_chan_bulk_stat st;
        do {
            ofl_chan_bulk_progress(s->e, &st);
            if (s->stop) return NULL;
        } while (st.done == 0);
    }
    kill(s->pid, s->sig);
    return NULL;
}

static void run_pair(struct region *r, const char *what, struct job cj, struct pcase pc)
{
    int id = ofl_chan_create(r->mem, what);
    if (id < 0) id = ofl_chan_lookup(r->mem, what);
    cj.r = r;
    cj.id = id;
    cj.side = OFL_CHAN_B;
    cj.what = what;
    if (!cj.seed) cj.seed = (uint64_t)id * 1000003u + 17;
    if (!cj.corrupt) cj.corrupt = UINT64_MAX;
    struct ofl_chan_end e;
    open_end(&e, r, id, OFL_CHAN_A);
    if (pc.copy) ofl_chan_set_copy(&e, pc.copy);
    if (pc.k) ofl_chan_set_chunk(&e, pc.k);
    if (pc.corrupt) ofl_chan_inject_corruption(&e, pc.corrupt);
    pid_t pid = spawn(job_main, &cj);
    struct ofl_chan_mem m;
    uint8_t *buf = NULL;
    if (pc.mem) {
        int mrc = ofl_chan_mem_alloc(&m, pc.len ? pc.len : 1);
        CHECK(mrc == 0, "%s: registered memory: %s", what, ofl_strerror(mrc));
        buf = mrc == 0 ? m.addr : NULL;
    } else {
        buf = malloc(pc.len ? pc.len : 1);
    }
    if (!buf) abort();
    if ((pc.op == J_BULK_SEND || pc.op == J_SEND) && pc.len < MID_LEN) fill(buf, pc.len, cj.seed);
    struct closer c = {.e = &e};
    struct sig_arg sa = {.e = &e, .pid = pid, .sig = pc.signal_mid, .after_ms = pc.signal_after_ms};
    pthread_t t;
    if (pc.close_mid) pthread_create(&t, NULL, closer_main, &c);
    if (pc.signal_mid) pthread_create(&t, NULL, signaller_main, &sa);
    uint64_t t0 = ofl_now_ns();
    int rc = do_job(&e, &(struct job){.op = pc.op, .len = pc.len, .timeout = pc.timeout}, buf,
                    pc.mem ? &m : NULL);
    double ms = (double)(ofl_now_ns() - t0) / 1e6;
    if (pc.close_mid || pc.signal_mid) {
        c.stop = sa.stop = 1;
        pthread_join(t, NULL);
    }
    CHECK(rc == pc.expect || (pc.expect2 && rc == pc.expect2), "%s: parent side got %s (%.1f ms)",
          what, ofl_strerror(rc), ms);
    if (rc == 0 && pc.op == J_BULK_RECV) {
        long long bad = first_bad(buf, pc.len, cj.seed);
        CHECK(bad < 0, "%s: parent received every byte right (first bad %lld)", what, bad);
    }
    if (pc.signal_mid == SIGSTOP) kill(pid, SIGCONT);
    if (pc.signal_mid == SIGKILL || (cj.op == J_IDLE && !cj.exit_after_open_ms)) {
        kill(pid, SIGKILL);
        reap_quiet(pid);
    } else {
        reap(pid, what);
    }
    ofl_chan_close(&e);
    if (pc.mem)
        ofl_chan_mem_free(&m);
    else
        free(buf);
}

static void test_bulk_errors(void)
{
    struct region r = region_new(64);
    const uint64_t T = LONG_WAIT;
    /* Success first, both directions, every path. */
    for (int copy = 0; copy < 3; copy++) {
        char n1[32], n2[32];
        snprintf(n1, sizeof n1, "ok A->B copy%d", copy);
        snprintf(n2, sizeof n2, "ok B->A copy%d", copy);
        run_pair(&r, n1, (struct job){.op = J_BULK_RECV, .len = 3000001, .timeout = T, .copy = copy},
                 (struct pcase){.op = J_BULK_SEND, .len = 3000001, .timeout = T});
        run_pair(&r, n2, (struct job){.op = J_BULK_SEND, .len = 3000001, .timeout = T, .copy = copy},
                 (struct pcase){.op = J_BULK_RECV, .len = 3000001, .timeout = T});
    }
    /* Size mismatch (Algorithm 2): both sides -EMSGSIZE. */
    run_pair(&r, "size A->B",
             (struct job){.op = J_BULK_RECV, .len = 9999, .timeout = T, .expect = -EMSGSIZE},
             (struct pcase){.op = J_BULK_SEND, .len = 10000, .timeout = T, .expect = -EMSGSIZE});
    run_pair(&r, "size B->A",
             (struct job){.op = J_BULK_SEND, .len = 10000, .timeout = T, .expect = -EMSGSIZE},
             (struct pcase){.op = J_BULK_RECV, .len = 9999, .timeout = T, .expect = -EMSGSIZE});
    /* A corrupted byte in the landed data: both sides -EBADMSG. */
    run_pair(&r, "crc A->B",
             (struct job){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 123457,
                          .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_SEND, .len = 200000, .timeout = T, .expect = -EBADMSG});
    run_pair(&r, "crc B->A",
             (struct job){.op = J_BULK_SEND, .len = 200000, .timeout = T, .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 99999,
                            .expect = -EBADMSG});
    run_pair(&r, "crc A->B bounce",
             (struct job){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 1,
                          .copy = OFL_CHAN_COPY_BOUNCE, .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_SEND, .len = 200000, .timeout = T, .expect = -EBADMSG});
    run_pair(&r, "crc B->A bounce",
             (struct job){.op = J_BULK_SEND, .len = 200000, .timeout = T, .copy = OFL_CHAN_COPY_BOUNCE,
                          .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 199999,
                            .expect = -EBADMSG});
    /* Timeouts with an idle peer, each side and direction. */
    run_pair(&r, "timeout A bulk send", (struct job){.op = J_IDLE},
             (struct pcase){.op = J_BULK_SEND, .len = 5000, .timeout = 20 * MS, .expect = -ETIMEDOUT});
    run_pair(&r, "timeout A bulk recv", (struct job){.op = J_IDLE},
             (struct pcase){.op = J_BULK_RECV, .len = 5000, .timeout = 20 * MS, .expect = -ETIMEDOUT});
    run_pair(&r, "timeout B bulk send",
             (struct job){.op = J_BULK_SEND, .len = 5000, .timeout = 20 * MS, .expect = -ETIMEDOUT},
             (struct pcase){.op = J_SEND, .len = 0, .timeout = 5 * MS, .expect = -ETIMEDOUT});
    run_pair(&r, "timeout B bulk recv",
             (struct job){.op = J_BULK_RECV, .len = 5000, .timeout = 20 * MS, .expect = -ETIMEDOUT},
             (struct pcase){.op = J_RECV, .len = 8, .timeout = 5 * MS, .expect = -ETIMEDOUT});
    /* A transfer whose peer stops mid-way: our side times out, theirs is aborted. */
    run_pair(&r, "stalled A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .expect = -ECONNABORTED},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = 100 * MS, .k = 1,
                            .signal_mid = SIGSTOP, .expect = -ETIMEDOUT});
    run_pair(&r, "stalled B->A",
             (struct job){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .expect = -ECONNABORTED},
             (struct pcase){.op = J_BULK_RECV, .len = MID_LEN, .timeout = 100 * MS, .k = 1,
                            .signal_mid = SIGSTOP, .expect = -ETIMEDOUT});
    /* Closed mid-transfer, by either side, either direction: both get -EPIPE. */
    run_pair(&r, "B closes A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .close_mid = 1,
                          .expect = -EPIPE},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .k = 1, .expect = -EPIPE});
    run_pair(&r, "B closes B->A",
             (struct job){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .close_mid = 1,
                          .expect = -EPIPE},
             (struct pcase){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .k = 1, .expect = -EPIPE});
    run_pair(&r, "A closes A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .expect = -EPIPE},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .k = 1, .close_mid = 1,
                            .expect = -EPIPE});
    run_pair(&r, "A closes B->A",
             (struct job){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .expect = -EPIPE},
             (struct pcase){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .k = 1, .close_mid = 1,
                            .expect = -EPIPE});
    /* Dead peer: its process exits or is killed while we wait; -EPIPE long before
     * the 20 s timeout (the time is printed). */
    run_pair(&r, "peer exits, A recv", (struct job){.op = J_IDLE, .exit_after_open_ms = 30},
             (struct pcase){.op = J_RECV, .len = 8, .timeout = T, .expect = -EPIPE});
    run_pair(&r, "peer exits, A bulk recv", (struct job){.op = J_IDLE, .exit_after_open_ms = 30},
             (struct pcase){.op = J_BULK_RECV, .len = 8000, .timeout = T, .expect = -EPIPE});
    run_pair(&r, "peer killed, A send", (struct job){.op = J_IDLE},
             (struct pcase){.op = J_SEND, .len = 8, .timeout = T, .signal_mid = SIGKILL,
                            .signal_after_ms = 30, .expect = -EPIPE});
    run_pair(&r, "peer killed mid A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .k = 1,
                            .signal_mid = SIGKILL, .expect = -EPIPE});
    run_pair(&r, "peer killed mid B->A",
             (struct job){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T},
             (struct pcase){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .k = 1,
                            .signal_mid = SIGKILL, .expect = -EPIPE});
    region_free(&r);
}

/* Side A's buffer in registered memory: B (another process) copies it once, with
 * every error path of the plain transfers. */
static void test_bulk_mem(void)
{
    struct region r = region_new(32);
    const uint64_t T = LONG_WAIT;
    const unsigned MEM = OFL_CHAN_PATH_MEM;
    run_pair(&r, "mem A->B",
             (struct job){.op = J_BULK_RECV, .len = 3000001, .timeout = T, .expect_path = MEM},
             (struct pcase){.op = J_BULK_SEND, .len = 3000001, .timeout = T, .mem = 1});
    run_pair(&r, "mem B->A",
             (struct job){.op = J_BULK_SEND, .len = 3000001, .timeout = T, .expect_path = MEM},
             (struct pcase){.op = J_BULK_RECV, .len = 3000001, .timeout = T, .mem = 1});
    run_pair(&r, "mem A->B K=64",
             (struct job){.op = J_BULK_RECV, .len = 1 << 20, .timeout = T, .expect_path = MEM},
             (struct pcase){.op = J_BULK_SEND, .len = 1 << 20, .timeout = T, .k = 64, .mem = 1});
    /* A copy mode asked for binds: the bounce, not registered memory. */
    run_pair(&r, "mem A->B bounce asked",
             (struct job){.op = J_BULK_RECV, .len = 300000, .timeout = T,
                          .copy = OFL_CHAN_COPY_BOUNCE, .expect_path = OFL_CHAN_PATH_BOUNCE},
             (struct pcase){.op = J_BULK_SEND, .len = 300000, .timeout = T, .mem = 1});
    run_pair(&r, "mem size A->B",
             (struct job){.op = J_BULK_RECV, .len = 9999, .timeout = T, .expect = -EMSGSIZE},
             (struct pcase){.op = J_BULK_SEND, .len = 10000, .timeout = T, .mem = 1,
                            .expect = -EMSGSIZE});
    run_pair(&r, "mem crc A->B",
             (struct job){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 4097,
                          .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_SEND, .len = 200000, .timeout = T, .mem = 1,
                            .expect = -EBADMSG});
    run_pair(&r, "mem crc B->A",
             (struct job){.op = J_BULK_SEND, .len = 200000, .timeout = T, .expect = -EBADMSG},
             (struct pcase){.op = J_BULK_RECV, .len = 200000, .timeout = T, .corrupt = 150001,
                            .mem = 1, .expect = -EBADMSG});
    run_pair(&r, "mem B closes A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .close_mid = 1,
                          .expect = -EPIPE},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .k = 1, .mem = 1,
                            .expect = -EPIPE});
    run_pair(&r, "mem B closes B->A",
             (struct job){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .close_mid = 1,
                          .expect = -EPIPE},
             (struct pcase){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T, .k = 1, .mem = 1,
                            .expect = -EPIPE});
    run_pair(&r, "mem peer killed mid A->B",
             (struct job){.op = J_BULK_RECV, .len = MID_LEN, .timeout = T},
             (struct pcase){.op = J_BULK_SEND, .len = MID_LEN, .timeout = T, .k = 1, .mem = 1,
                            .signal_mid = SIGKILL, .expect = -EPIPE});
    region_free(&r);

    /* The calls' own checks. */
    struct ofl_chan_mem m;
    CHECK(ofl_chan_mem_alloc(&m, 0) == -EINVAL, "registered memory of 0 bytes refused");
    CHECK(ofl_chan_mem_alloc(&m, 8192) == 0, "registered memory of 8 KB");
    struct ofl_chan_mem bad;
    int fd = memfd_create("unsealed", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "an unsealed memfd");
    CHECK(ofl_chan_mem_attach(&bad, fd, m.addr, 4096) == -EINVAL,
          "a memfd that may shrink is not registered memory");
    CHECK(ofl_chan_mem_attach(&bad, m.fd, m.addr, 8193) == -EINVAL,
          "registered memory larger than its file refused");
    close(fd);
    struct region r2 = region_new(1);
    int id = ofl_chan_create(r2.mem, "mem range");
    struct ofl_chan_end e;
    open_end(&e, &r2, id, OFL_CHAN_A);
    CHECK(ofl_chan_bulk_send_mem(&e, &m, 4096, 4097, 0) == -EINVAL,
          "a range past the registered memory's end refused");
    CHECK(ofl_chan_bulk_recv_mem(&e, &m, 8193, 0, 0) == -EINVAL,
          "an offset past the registered memory's end refused");
    ofl_chan_close(&e);
    region_free(&r2);
    ofl_chan_mem_free(&m);
    CHECK(m.addr == NULL && m.fd == -1, "freed registered memory is emptied");
}

/* End a test that played side A by hand (its bulk buffer set directly): forget
 * the buffer, close both ends and free the region. */
static void hand_pair_close(struct region *r, struct ofl_chan_end *a, struct ofl_chan_end *b)
{
    a->bulk_buf = NULL;
    a->bulk_len = 0;
    ofl_chan_close(a);
    ofl_chan_close(b);
    region_free(r);
}

/* Side B's mapping of a peer's registered memory refuses what it must: a
 * descriptor whose inode is another file's (a reused fd number), a file that may
 * shrink, a bad fd; it keeps a good mapping and drops it at close. */
/* Side B copies an SG list whose entries are not in buffer order (a side A that
 * describes pages out of order, or a foreign peer): each run of entries that continue
 * one another is copied in one piece, the runs in list order. Here a chunk posted by
 * hand: page 2, then page 0 in two entries that continue each other. */
static void test_sg_runs(void)
{
    struct region r = region_new(1);
    struct ofl_chan_end a, b;
    open_pair(&r, "runs", &a, &b);
    enum { PAGE = 4096 };
    uint8_t *src = aligned_alloc(PAGE, 3 * PAGE), *dst = malloc(2 * PAGE), *want = malloc(2 * PAGE);
    if (!src || !dst || !want) abort();
    for (size_t i = 0; i < 3 * PAGE; i++) src[i] = (uint8_t)(i * 7 + i / PAGE);
    memcpy(want, src + 2 * PAGE, PAGE);
    memcpy(want + PAGE, src, PAGE);
    a.bulk_buf = src;   /* as during a transfer of A's: B may copy within it */
    a.bulk_len = 3 * PAGE;
    struct chan_sg *sg = end_ctl(&a)->sg;
    sg[0] = (struct chan_sg){(uint64_t)(uintptr_t)(src + 2 * PAGE), PAGE};
    sg[1] = (struct chan_sg){(uint64_t)(uintptr_t)src, 1000};
    sg[2] = (struct chan_sg){(uint64_t)(uintptr_t)(src + 1000), PAGE - 1000};
    struct chan_chunk_msg m = {.xfer = 2, .index = 0, .total = 2 * PAGE, .offset = 0,
                               .bytes = 2 * PAGE, .nent = 3, .flags = 0};
    chan_line_post(&a, KIND_CHUNK, &m, sizeof m);
    /* the chunk's CRC, published in A's status line as A does after posting it */
    struct chan_bulk_st *ast = &side_mine(&a)->st[0];
    ast->crc[0] = ofl_crc32c(0, want, 2 * PAGE);
    __atomic_store_n(&ast->prog, prog_make(2, 0, 1), __ATOMIC_RELEASE);
    CHECK(ofl_chan_bulk_recv(&b, dst, 2 * PAGE, 1000000000ull) == 0, "out-of-order entries received");
    CHECK(memcmp(dst, want, 2 * PAGE) == 0, "the runs land in list order");
    struct ofl_chan_stats st;
    ofl_chan_get_stats(&b, &st);
    CHECK(st.bytes_memcpy == 2 * PAGE && st.chunks == 1, "one chunk by memcpy");
    hand_pair_close(&r, &a, &b);
    free(src);
    free(dst);
    free(want);
}

static void test_mem_mapping(void)
{
    struct region r = region_new(1);
    struct ofl_chan_end a, b;
    open_pair(&r, "mapping", &a, &b);
    struct ofl_chan_mem m;
    if (ofl_chan_mem_alloc(&m, 3 * 4096) < 0) abort();
    struct chan_side *sa = side_mine(&a);
    pid_t me = getpid();
    sa->mem_fd = m.fd, sa->mem_ino = m.ino + 1, sa->mem_len = m.len;
    CHECK(chan_mem_map(&b, me) == -EPERM && !b.mem_base, "another file's inode: not mapped");
    int loose = memfd_create("loose", MFD_CLOEXEC);
    struct stat st;
    CHECK(loose >= 0 && ftruncate(loose, 4096) == 0 && fstat(loose, &st) == 0, "unsealed memfd");
    sa->mem_fd = loose, sa->mem_ino = (uint64_t)st.st_ino, sa->mem_len = 4096;
    CHECK(chan_mem_map(&b, me) == -EPERM && !b.mem_base, "a file that may shrink: not mapped");
    sa->mem_fd = -1;
    CHECK(chan_mem_map(&b, me) == -EPERM, "no descriptor: not mapped");
    sa->mem_fd = m.fd, sa->mem_ino = m.ino, sa->mem_len = m.len + 1;
    CHECK(chan_mem_map(&b, me) == -EPERM, "longer than its file: not mapped");
    sa->mem_len = m.len;
    CHECK(chan_mem_map(&b, me) == 0 && b.mem_base && b.mem_len == m.len, "mapped");
    uint8_t *first = b.mem_base;
    m.addr[5] = 42;
    CHECK(first[5] == 42, "the mapping shows the peer's bytes");
    CHECK(chan_mem_map(&b, me) == 0 && b.mem_base == first, "a second use keeps the mapping");
    ofl_chan_close(&b);
    CHECK(b.mem_base == NULL, "close drops the mapping");
    close(loose);
    ofl_chan_close(&a);
    ofl_chan_mem_free(&m);
    region_free(&r);
}

/* The parent as side B, the child as side A dying: B's waits end with -EPIPE. */
static void dead_a_main(void *p)
{
    struct job *j = p;
    struct ofl_chan_end e;
    if (ofl_chan_open(&e, j->r->mem, (uint32_t)j->id, OFL_CHAN_A, NULL)) return;
    if (j->op == J_BULK_SEND) {
        uint8_t *buf = calloc(1, j->len);
        ofl_chan_set_chunk(&e, 1);
        ofl_chan_bulk_send(&e, buf, j->len, LONG_WAIT);   /* killed during this */
    }
    usleep(30000);
    _exit(0);
}

static void test_dead_a(void)
{
    struct region r = region_new(8);
    const int ops[] = {J_RECV, J_SEND, J_BULK_RECV, J_BULK_SEND};
    const char *names[] = {"A exits, B recv", "A exits, B send", "A exits, B bulk recv",
                           "A exits, B bulk send"};
    for (int i = 0; i < 4; i++) {
        int id = ofl_chan_create(r.mem, names[i]);
        struct ofl_chan_end e;
        open_end(&e, &r, id, OFL_CHAN_B);
        struct job j = {.r = &r, .id = id, .op = J_IDLE};
        pid_t pid = spawn(dead_a_main, &j);
        uint8_t buf[64];
        uint64_t t0 = ofl_now_ns();
        int rc = do_job(&e, &(struct job){.op = ops[i], .len = 8, .timeout = LONG_WAIT}, buf,
                        NULL);
        CHECK(rc == -EPIPE, "%s: %s after %.1f ms", names[i], ofl_strerror(rc),
              (double)(ofl_now_ns() - t0) / 1e6);
        reap_quiet(pid);
        ofl_chan_close(&e);
    }
    /* Killed in the middle of its bulk send. */
    int id = ofl_chan_create(r.mem, "A killed mid A->B");
    struct ofl_chan_end e;
    open_end(&e, &r, id, OFL_CHAN_B);
    struct job j = {.r = &r, .id = id, .op = J_BULK_SEND, .len = MID_LEN};
    pid_t pid = spawn(dead_a_main, &j);
    uint8_t *buf = malloc(j.len);
    struct sig_arg sa = {.e = &e, .pid = pid, .sig = SIGKILL};
    pthread_t t;
    pthread_create(&t, NULL, signaller_main, &sa);
    int rc = ofl_chan_bulk_recv(&e, buf, j.len, LONG_WAIT);
    sa.stop = 1;
    pthread_join(t, NULL);
    CHECK(rc == -EPIPE, "A killed mid-transfer: B's bulk recv got %s", ofl_strerror(rc));
    reap_quiet(pid);
    free(buf);
    ofl_chan_close(&e);
    region_free(&r);
}

/* Side B in a child: opens, then blocks in a recv (J_RECV) or idles until killed. */
static void try_peer_main(void *p)
{
    struct job *j = p;
    struct ofl_chan_end e;
    if (ofl_chan_open(&e, j->r->mem, (uint32_t)j->id, OFL_CHAN_B, NULL)) _exit(1);
    uint8_t buf[64];
    if (j->op == J_RECV) ofl_chan_recv(&e, buf, sizeof buf, LONG_WAIT);
    for (;;) pause();
}

/* try_send / try_recv toward a peer whose process is killed (not reaped at first: a
 * zombie): -EPIPE within a bounded loop, not -EAGAIN for ever. */
static void test_try_dead_peer(void)
{
    struct region r = region_new(8);
    for (int waiting = 0; waiting < 2; waiting++) {
        const char *what = waiting ? "try: B killed in recv" : "try: B killed idle";
        int id = ofl_chan_create(r.mem, what);
        struct ofl_chan_end e;
        open_end(&e, &r, id, OFL_CHAN_A);
        struct job j = {.r = &r, .id = id, .op = waiting ? J_RECV : J_IDLE};
        pid_t pid = spawn(try_peer_main, &j);
        uint64_t t0 = ofl_now_ns();
        while (ofl_chan_peer_state(&e) == 0 && ofl_now_ns() - t0 < LONG_WAIT) usleep(100);
        usleep(20000);   /* into its recv */
        uint8_t buf[64];
        CHECK(ofl_chan_peer_state(&e) == 1 && ofl_chan_try_recv(&e, buf, sizeof buf) == -EAGAIN,
              "%s: alive, nothing pending: -EAGAIN", what);
        if (!waiting)
            CHECK(ofl_chan_try_send(&e, "x", 1) == -EAGAIN, "%s: not receiving: -EAGAIN", what);
        kill(pid, SIGKILL);
        int sent = -EAGAIN, got = -EAGAIN;
        long tries = 0;
        t0 = ofl_now_ns();
        while ((sent == -EAGAIN || got == -EAGAIN) && ofl_now_ns() - t0 < LONG_WAIT) {
            if (sent == -EAGAIN) sent = ofl_chan_try_send(&e, "x", 1);
            if (got == -EAGAIN) got = ofl_chan_try_recv(&e, buf, sizeof buf);
            tries++;
        }
        CHECK(sent == -EPIPE && got == -EPIPE, "%s: try_send %s, try_recv %s (after %ld tries)",
              what, ofl_strerror(sent), ofl_strerror(got), tries);
        CHECK(ofl_chan_try_send(&e, "x", 1) == -EPIPE &&
                  ofl_chan_try_recv(&e, buf, sizeof buf) == -EPIPE &&
                  ofl_chan_peer_state(&e) == -EPIPE, "%s: and so it stays", what);
        reap_quiet(pid);
        ofl_chan_close(&e);
    }
    region_free(&r);
}

/* ---- bulk inside one process (memcpy path) and the copy paths ---- */

struct bulk_thr {
    struct ofl_chan_end *e;
    int send;
    uint8_t *buf;
    size_t len;
    int rc;
};

static void *bulk_thr_main(void *p)
{
    struct bulk_thr *t = p;
    t->rc = t->send ? ofl_chan_bulk_send(t->e, t->buf, t->len, LONG_WAIT)
                    : ofl_chan_bulk_recv(t->e, t->buf, t->len, LONG_WAIT);
    return NULL;
}

/* One transfer between two ends of this process: `from` sends `len` bytes (at an
 * odd offset), `to` receives `len2`. Returns the receiver's result and checks the
 * bytes when it is 0. */
static int local_bulk(struct ofl_chan_end *from, struct ofl_chan_end *to, size_t len, size_t len2,
                      uint64_t seed, int *sender_rc)
{
    uint8_t *src = malloc(len + 8), *dst = malloc(len2 + 8);
    fill(src + 3, len, seed);
    struct bulk_thr t = {.e = from, .send = 1, .buf = src + 3, .len = len};
    pthread_t th;
    pthread_create(&th, NULL, bulk_thr_main, &t);
    int rc = ofl_chan_bulk_recv(to, dst + 5, len2, LONG_WAIT);
    pthread_join(th, NULL);
    *sender_rc = t.rc;
    if (rc == 0 && first_bad(dst + 5, len, seed) >= 0) rc = -1000;
    free(src);
    free(dst);
    return rc;
}

/* Side B checks each landed chunk against A's CRC of it, which A publishes after
 * posting the chunk, in one of 4 slots. A side A that posts a fifth chunk before B
 * could acknowledge the first is refused with -EPROTO (B's status line says so)
 * rather than B reusing a slot it has not checked. Chunks posted by hand; no CRC is
 * ever published, so B can acknowledge none. */
static void test_chunk_window(void)
{
    struct region r = region_new(1);
    struct ofl_chan_end a, b;
    open_pair(&r, "window", &a, &b);
    enum { PAGE = 4096, N = 5 };
    uint8_t *src = aligned_alloc(PAGE, N * PAGE), *dst = malloc(N * PAGE);
    if (!src || !dst) abort();
    memset(src, 7, N * PAGE);
    a.bulk_buf = src;   /* as during a transfer of A's: B may copy within it */
    a.bulk_len = N * PAGE;
    __atomic_store_n(&side_mine(&a)->st[0].prog, prog_make(2, 0, 0), __ATOMIC_RELEASE);
    struct bulk_thr t = {.e = &b, .send = 0, .buf = dst, .len = N * PAGE};
    pthread_t th;
    pthread_create(&th, NULL, bulk_thr_main, &t);
    uint32_t taken = 0;
    for (uint32_t i = 0; i < N; i++) {
        end_ctl(&a)->sg[0] = (struct chan_sg){(uint64_t)(uintptr_t)(src + i * PAGE), PAGE};
        struct chan_chunk_msg m = {.xfer = 2, .index = i, .total = N * PAGE,
                                   .offset = (uint64_t)i * PAGE, .bytes = PAGE, .nent = 1};
        chan_line_post(&a, KIND_CHUNK, &m, sizeof m);
        uint64_t until = ofl_now_ns() + 5000 * MS;
        while (chan_out_pending(&a) && ofl_now_ns() < until) sched_yield();
        if (chan_out_pending(&a)) break;
        taken++;
    }
    pthread_join(th, NULL);
    uint64_t bp = __atomic_load_n(&side_mine(&b)->st[0].prog, __ATOMIC_ACQUIRE);
    CHECK(taken == N && t.rc == -EPROTO && prog_err(bp) == -EPROTO && prog_count(bp) == 4,
          "a fifth chunk before the first is acknowledged: -EPROTO (%u taken, %s, count %u)",
          taken, ofl_strerror(t.rc), prog_count(bp));
    hand_pair_close(&r, &a, &b);
    free(src);
    free(dst);
}

static void test_bulk_local(void)
{
    struct region r = region_new(4);
    struct ofl_chan_end a, b;
    open_pair(&r, "local", &a, &b);
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, 65536, 100003, 3000017};
    for (int mode = 0; mode < 3; mode++) {
        ofl_chan_set_copy(&b, mode);
        int bad = 0, srcbad = 0;
        for (int dir = 0; dir < 2; dir++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
                int src_rc;
                int rc = dir ? local_bulk(&b, &a, sizes[i], sizes[i], i, &src_rc)
                             : local_bulk(&a, &b, sizes[i], sizes[i], i, &src_rc);
                if (rc) bad++;
                if (src_rc) srcbad++;
            }
        struct ofl_chan_stats st;
        ofl_chan_get_stats(&b, &st);
        unsigned want = mode == 0 ? OFL_CHAN_PATH_MEMCPY
                        : mode == 1 ? OFL_CHAN_PATH_VM : OFL_CHAN_PATH_BOUNCE;
        CHECK(bad == 0 && srcbad == 0,
              "one process, copy mode %d: 0..3 MB both ways, unaligned, bytes right (%d/%d bad)",
              mode, bad, srcbad);
        CHECK(st.paths & want, "copy mode %d used path %u (paths seen %u)", mode, want, st.paths);
    }
    /* Through the ring a transfer is a two-stage pipeline (staged, then copied out): one
     * of at most a staging slot goes as a quarter, a half and a quarter of it, so that
     * the stages overlap; longer ones in whole slots. Chunks counted by the end that
     * copies them out (B from A, A verifying what B staged). */
    const struct { size_t len; uint64_t chunks; } ramp[] = {
        {16384, 1}, {32768, 2}, {49152, 3}, {65536, 3}, {65537, 2}, {1 << 20, 16}};
    for (int dir = 0; dir < 2; dir++)
        for (size_t i = 0; i < sizeof ramp / sizeof *ramp; i++) {
            struct ofl_chan_end *to = dir ? &a : &b;
            struct ofl_chan_stats s0, s1;
            ofl_chan_get_stats(to, &s0);
            int src_rc;
            int rc = dir ? local_bulk(&b, &a, ramp[i].len, ramp[i].len, 7, &src_rc)
                         : local_bulk(&a, &b, ramp[i].len, ramp[i].len, 7, &src_rc);
            ofl_chan_get_stats(to, &s1);
            CHECK(rc == 0 && src_rc == 0 && s1.chunks - s0.chunks == ramp[i].chunks &&
                      s1.bytes_bounce - s0.bytes_bounce == ramp[i].len,
                  "bounce %s %zu bytes: %llu chunks (want %llu)", dir ? "B->A" : "A->B",
                  ramp[i].len, (unsigned long long)(s1.chunks - s0.chunks),
                  (unsigned long long)ramp[i].chunks);
        }
    ofl_chan_set_copy(&b, OFL_CHAN_COPY_AUTO);
    int src_rc;
    int rc = local_bulk(&a, &b, 5000, 4999, 1, &src_rc);
    CHECK(rc == -EMSGSIZE && src_rc == -EMSGSIZE, "one process A->B size mismatch: %d / %d", rc, src_rc);
    rc = local_bulk(&b, &a, 5000, 5001, 1, &src_rc);
    CHECK(rc == -EMSGSIZE && src_rc == -EMSGSIZE, "one process B->A size mismatch: %d / %d", rc, src_rc);
    ofl_chan_inject_corruption(&b, 70000);
    rc = local_bulk(&a, &b, 100000, 100000, 2, &src_rc);
    CHECK(rc == -EBADMSG && src_rc == -EBADMSG, "one process A->B corrupted: %d / %d", rc, src_rc);
    /* B checks a chunk once A's CRC of it is out (A computes it after posting): a
     * bad last byte still fails both sides rather than completing the transfer. */
    ofl_chan_inject_corruption(&b, 99999);
    rc = local_bulk(&a, &b, 100000, 100000, 4, &src_rc);
    CHECK(rc == -EBADMSG && src_rc == -EBADMSG, "one process A->B last byte corrupted: %d / %d",
          rc, src_rc);
    ofl_chan_inject_corruption(&a, 0);
    rc = local_bulk(&b, &a, 100000, 100000, 2, &src_rc);
    CHECK(rc == -EBADMSG && src_rc == -EBADMSG, "one process B->A corrupted: %d / %d", rc, src_rc);
    rc = local_bulk(&a, &b, 100000, 100000, 3, &src_rc);
    CHECK(rc == 0 && src_rc == 0, "the channel works after the errors");
    struct ofl_chan_bulk_stat bs;
    ofl_chan_bulk_progress(&b, &bs);
    CHECK(bs.done == 100000 && bs.outstanding == 0 && bs.status == 0 && bs.chunks > 0,
          "progress: %llu done, %llu outstanding, %u chunks", (unsigned long long)bs.done,
          (unsigned long long)bs.outstanding, bs.chunks);

    /* Misuse inside one process: a second receive on the same end, wrong kinds. */
    uint8_t buf[64];
    struct recv_arg ra = {.e = &b, .timeout = LONG_WAIT};
    pthread_t t;
    pthread_create(&t, NULL, recv_main, &ra);
    for (int i = 0; i < 1000 && ofl_chan_try_recv(&b, buf, sizeof buf) != -EBUSY; i++) usleep(1000);
    CHECK(ofl_chan_try_recv(&b, buf, sizeof buf) == -EBUSY, "a second receive on one end: -EBUSY");
    ofl_chan_send(&a, "u", 1, LONG_WAIT);
    pthread_join(t, NULL);
    CHECK(ra.rc == 1, "the first receive got its message");
    CHECK(ofl_chan_post(&a, "d", 1) == 0 && ofl_chan_bulk_recv(&b, buf, 8, LONG_WAIT) == -EPROTO,
          "bulk recv while a direct message is pending: -EPROTO");
    CHECK(ofl_chan_recv(&b, buf, sizeof buf, LONG_WAIT) == 1, "the direct message is still there");
    uint8_t *big = malloc(100000);
    fill(big, 100000, 9);
    struct bulk_thr bt = {.e = &a, .send = 1, .buf = big, .len = 100000};
    pthread_create(&t, NULL, bulk_thr_main, &bt);
    while ((rc = ofl_chan_recv(&b, buf, sizeof buf, LONG_WAIT)) != -EPROTO && rc >= 0) continue;
    CHECK(rc == -EPROTO, "recv while the peer starts a bulk transfer: -EPROTO");
    uint8_t *got = malloc(100000);
    rc = ofl_chan_bulk_recv(&b, got, 100000, LONG_WAIT);
    pthread_join(t, NULL);
    CHECK(rc == 0 && bt.rc == 0 && first_bad(got, 100000, 9) < 0, "then bulk recv takes it");
    /* Both ends start a bulk send: side B gives way with -EPROTO, A's goes on. */
    pthread_create(&t, NULL, bulk_thr_main, &bt);
    rc = ofl_chan_bulk_send(&b, big, 100000, LONG_WAIT);
    CHECK(rc == -EPROTO, "bulk sends from both ends: B's gets -EPROTO (%s)", ofl_strerror(rc));
    rc = ofl_chan_bulk_recv(&b, got, 100000, LONG_WAIT);
    pthread_join(t, NULL);
    CHECK(rc == 0 && bt.rc == 0 && first_bad(got, 100000, 9) < 0, "and A's transfer completes");
    free(big);
    free(got);
    ofl_chan_close(&a);
    ofl_chan_close(&b);
    region_free(&r);
}

/* Side B in a process that may not read or write side A's memory (another user):
 * process_vm_* fails with EPERM and both directions bounce through the region. */
static void unprivileged_main(void *p)
{
    if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) {
        CHECK(0, "drop privileges");
        return;
    }
    job_main(p);
}

static void test_eperm_bounce(void)
{
    if (geteuid() != 0) {
        printf("skip: EPERM fallback test needs root to drop privileges in a child\n");
        return;
    }
    struct region r = region_new(4);
    static const char *const names[] = {"EPERM bounce A->B", "EPERM bounce B->A",
                                        "mem not mappable A->B", "mem not mappable B->A"};
    for (int v = 0; v < 4; v++) {
        int dir = v & 1, mem = v >> 1;
        const char *what = names[v];
        int id = ofl_chan_create(r.mem, what);
        size_t len = 1000003;
        /* The child asks for process_vm_* (AUTO would take the bounce anyway); or,
         * with A's buffer registered, AUTO: it cannot open /proc/<pid>/fd of ours. */
        struct job j = {.r = &r, .id = id, .side = OFL_CHAN_B, .op = dir ? J_BULK_SEND : J_BULK_RECV,
                        .len = len, .seed = 77, .timeout = LONG_WAIT, .corrupt = UINT64_MAX,
                        .copy = mem ? OFL_CHAN_COPY_AUTO : OFL_CHAN_COPY_VM,
                        .expect_path = OFL_CHAN_PATH_BOUNCE, .what = what};
        struct ofl_chan_end e;
        open_end(&e, &r, id, OFL_CHAN_A);
        pid_t pid = spawn(unprivileged_main, &j);
        struct ofl_chan_mem m;
        if (mem && ofl_chan_mem_alloc(&m, len) < 0) abort();
        uint8_t *buf = mem ? m.addr : malloc(len);
        if (!dir) fill(buf, len, 77);
        int rc = mem ? (dir ? ofl_chan_bulk_recv_mem(&e, &m, 0, len, LONG_WAIT)
                            : ofl_chan_bulk_send_mem(&e, &m, 0, len, LONG_WAIT))
                     : (dir ? ofl_chan_bulk_recv(&e, buf, len, LONG_WAIT)
                            : ofl_chan_bulk_send(&e, buf, len, LONG_WAIT));
        CHECK(rc == 0, "%s: parent side %s", what, ofl_strerror(rc));
        if (dir) CHECK(first_bad(buf, len, 77) < 0, "%s: every byte right", what);
        struct ofl_chan_stats st;
        ofl_chan_get_stats(&e, &st);
        CHECK(st.paths == OFL_CHAN_PATH_BOUNCE, "%s: A's stats show the bounce (%u)", what, st.paths);
        reap(pid, what);
        ofl_chan_close(&e);
        if (mem)
            ofl_chan_mem_free(&m);
        else
            free(buf);
    }
    region_free(&r);
}

/* ---- stress: hundreds of channels, random sizes, both directions ---- */

#define STRESS_THREADS 4
#define STRESS_ROUNDS 2

struct stress {
    struct region *r;
    int nchan;
    size_t maxlen;
    int side;
    int tid;
    const int *ids;
    uint64_t bytes;
    unsigned paths;
    int bad;
};

static size_t stress_len(uint64_t seed, size_t maxlen)
{
    struct ofl_rng s = {seed};
    uint64_t c = ofl_rng_next(&s) % 10, v = ofl_rng_next(&s);
    size_t cap = c < 4 ? 4096 : c < 8 ? 300000 : maxlen;
    return v % ((cap < maxlen ? cap : maxlen) + 1);
}

/* One side's thread: its share of the channels, each round A->B then B->A. */
static void *stress_main(void *p)
{
    struct stress *x = p;
    int mine = (x->nchan + STRESS_THREADS - 1) / STRESS_THREADS;
    struct ofl_chan_end *ends = calloc((size_t)mine, sizeof *ends);
    int n = 0;
    for (int c = x->tid; c < x->nchan; c += STRESS_THREADS, n++) {
        if (ofl_chan_open(&ends[n], x->r->mem, (uint32_t)x->ids[c], x->side, NULL)) x->bad++;
        if (x->side == OFL_CHAN_A) ofl_chan_set_chunk(&ends[n], 1 + (uint32_t)c % OFL_CHAN_SG_MAX);
        if (c % 5 == 0) ofl_chan_set_copy(&ends[n], OFL_CHAN_COPY_BOUNCE);
        if (c % 7 == 0 && x->side == OFL_CHAN_B) ofl_chan_set_copy(&ends[n], OFL_CHAN_COPY_VM);
    }
    uint8_t *buf = malloc(x->maxlen + 64);
    /* Side A: every third channel's buffer in registered memory, a different one
     * each round (B's mapping follows). */
    struct ofl_chan_mem mem[2];
    for (int i = 0; i < 2 && x->side == OFL_CHAN_A; i++)
        if (ofl_chan_mem_alloc(&mem[i], x->maxlen + 64) < 0) abort();
    for (int round = 0; round < STRESS_ROUNDS; round++) {
        int k = 0;
        for (int c = x->tid; c < x->nchan; c += STRESS_THREADS, k++) {
            for (int dir = 0; dir < 2; dir++) {
                uint64_t seed = ((uint64_t)c << 20) + (uint64_t)round * 2 + (uint64_t)dir;
                size_t len = stress_len(seed, x->maxlen);
                const struct ofl_chan_mem *m =
                    x->side == OFL_CHAN_A && c % 3 == 1 ? &mem[round % 2] : NULL;
                size_t off = seed % 61;   /* any alignment */
                uint8_t *p = (m ? m->addr : buf) + off;
                bool sending = (dir == 0) == (x->side == OFL_CHAN_A);
                int rc;
                if (sending) {
                    fill(p, len, seed);
                    rc = m ? ofl_chan_bulk_send_mem(&ends[k], m, off, len, LONG_WAIT)
                           : ofl_chan_bulk_send(&ends[k], p, len, LONG_WAIT);
                } else {
                    rc = m ? ofl_chan_bulk_recv_mem(&ends[k], m, off, len, LONG_WAIT)
                           : ofl_chan_bulk_recv(&ends[k], p, len, LONG_WAIT);
                    if (rc == 0 && first_bad(p, len, seed) >= 0) rc = -1000;
                }
                if (rc) {
                    printf("stress: channel %d round %d dir %d len %zu: %d (%s)\n", c, round, dir,
                           len, rc, ofl_strerror(rc));
                    x->bad++;
                }
                x->bytes += len;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        struct ofl_chan_stats st;
        ofl_chan_get_stats(&ends[i], &st);
        x->paths |= st.paths;
        ofl_chan_close(&ends[i]);
    }
    for (int i = 0; i < 2 && x->side == OFL_CHAN_A; i++) ofl_chan_mem_free(&mem[i]);
    free(buf);
    free(ends);
    return NULL;
}

static int stress_side(struct region *r, int nchan, size_t maxlen, int side, const int *ids,
                       uint64_t *bytes, unsigned *paths)
{
    struct stress x[STRESS_THREADS];
    pthread_t t[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        x[i] = (struct stress){.r = r, .nchan = nchan, .maxlen = maxlen, .side = side, .tid = i,
                               .ids = ids};
        pthread_create(&t[i], NULL, stress_main, &x[i]);
    }
    int bad = 0;
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(t[i], NULL);
        bad += x[i].bad;
        *bytes += x[i].bytes;
        *paths |= x[i].paths;
    }
    return bad;
}

struct stress_child {
    struct region *r;
    int nchan;
    size_t maxlen;
    const int *ids;
};

static void stress_child_main(void *p)
{
    struct stress_child *c = p;
    uint64_t bytes = 0;
    unsigned paths = 0;
    int bad = stress_side(c->r, c->nchan, c->maxlen, OFL_CHAN_B, c->ids, &bytes, &paths);
    CHECK(bad == 0, "stress, side B: every transfer succeeded and verified (%d bad)", bad);
    CHECK(paths == (OFL_CHAN_PATH_VM | OFL_CHAN_PATH_BOUNCE | OFL_CHAN_PATH_MEM),
          "stress, side B: copies used process_vm, the bounce and registered memory (paths %u)",
          paths);
}

static void test_stress(int nchan, size_t maxlen)
{
    struct region r = region_new((uint32_t)nchan);
    int *ids = malloc((size_t)nchan * sizeof *ids);
    char name[32];
    for (int i = 0; i < nchan; i++) {
        snprintf(name, sizeof name, "stress%d", i);
        ids[i] = ofl_chan_create(r.mem, name);
    }
    struct stress_child sc = {.r = &r, .nchan = nchan, .maxlen = maxlen, .ids = ids};
    uint64_t t0 = ofl_now_ns();
    pid_t pid = spawn(stress_child_main, &sc);
    uint64_t bytes = 0;
    unsigned paths = 0;
    int bad = stress_side(&r, nchan, maxlen, OFL_CHAN_A, ids, &bytes, &paths);
    reap(pid, "stress side B");
    double s = (double)(ofl_now_ns() - t0) / 1e9;
    printf("stress: %d channels, %d transfers, %.1f MB in %.2f s\n", nchan, nchan * 2 * STRESS_ROUNDS,
           (double)bytes / 1e6, s);
    CHECK(bad == 0, "stress, side A: %d channels x %d transfers, 0..%zu bytes, every byte verified "
          "(%d bad)", nchan, 2 * STRESS_ROUNDS, maxlen, bad);
    free(ids);
    region_free(&r);
}

/* ---- managers ---- */

#define MGR_CHANNELS 1024
#define MGR_HOSTS 64
#define MGR_ROUNDS 3

struct mgr_reply {
    int32_t status;
    uint32_t crc;
    uint64_t len;
};

static int echo_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)ctx;
    uint8_t out[OFL_CHAN_MSG_MAX];
    for (size_t i = 0; i < len; i++) out[i] = (uint8_t)(((const uint8_t *)msg)[i] ^ 0x5A);
    return ofl_chan_post(e, out, len);
}

static void *bulk_begin(void *ctx, struct ofl_chan_end *e, size_t len)
{
    (void)ctx;
    (void)e;
    return len == 7 ? NULL : malloc(len ? len : 1);   /* 7 bytes: refused */
}

static void bulk_done(void *ctx, struct ofl_chan_end *e, void *buf, size_t len, int status)
{
    (void)ctx;
    struct mgr_reply rep = {.status = status, .len = len};
    if (status == 0) rep.crc = ofl_crc32c(0, buf, len);
    free(buf);
    ofl_chan_post(e, &rep, sizeof rep);
}

struct mgr_child {
    struct region *r;
    int fd;    /* read end of a pipe: EOF = stop */
    int wfd;   /* its write end (the child closes its copy) */
};

/* In a manager child: its manager with 2 threads (NULL if it did not start). */
static struct ofl_chan_mgr *mgr_child_begin(struct mgr_child *c)
{
    close(c->wfd);
    struct ofl_chan_mgr *m = ofl_chan_mgr_start(2, NULL);
    CHECK(m != NULL, "manager with 2 threads started");
    return m;
}

/* In a manager child: wait until the parent closes its end of the pipe. */
static void mgr_child_wait(const struct mgr_child *c)
{
    char x;
    while (read(c->fd, &x, 1) > 0) continue;
}

static void mgr_child_main(void *p)
{
    struct mgr_child *c = p;
    struct ofl_chan_mgr *m = mgr_child_begin(c);
    if (!m) return;
    struct ofl_chan_bulk_handler bh = {.begin = bulk_begin, .done = bulk_done};
    int bad = 0;
    for (uint32_t i = 0; i < MGR_CHANNELS; i++)
        if (ofl_chan_mgr_serve(m, c->r->mem, i, OFL_CHAN_B, echo_handler, &bh, NULL)) bad++;
    CHECK(bad == 0, "manager serves side B of %d channels", MGR_CHANNELS);
    CHECK(ofl_chan_mgr_serve(m, c->r->mem, 0, OFL_CHAN_B, echo_handler, &bh, NULL) == -EBUSY,
          "serving a served end again: -EBUSY");
    mgr_child_wait(c);
    ofl_chan_mgr_stop(m);
}

struct host {
    struct region *r;
    int tid;
    pthread_barrier_t *bar;
    int bad;
    int msgs, bulks;
};

static void *host_main(void *p)
{
    struct host *h = p;
    struct ofl_chan_end e[MGR_CHANNELS / MGR_HOSTS];
    int n = 0;
    for (int c = h->tid; c < MGR_CHANNELS; c += MGR_HOSTS, n++)
        if (ofl_chan_open(&e[n], h->r->mem, (uint32_t)c, OFL_CHAN_A, NULL)) h->bad++;
    pthread_barrier_wait(h->bar);   /* 64 senders at once */
    for (int round = 0; round < MGR_ROUNDS; round++)
        for (int i = 0; i < n; i++) {
            uint8_t msg[OFL_CHAN_MSG_MAX], rep[OFL_CHAN_MSG_MAX];
            size_t len = 1 + (size_t)(i + round) % OFL_CHAN_MSG_MAX;
            for (size_t k = 0; k < len; k++) msg[k] = (uint8_t)(h->tid + i + round + k);
            int rc = ofl_chan_send(&e[i], msg, len, LONG_WAIT);
            int got = rc ? rc : ofl_chan_recv(&e[i], rep, sizeof rep, LONG_WAIT);
            bool ok = got == (int)len;
            for (size_t k = 0; ok && k < len; k++) ok = rep[k] == (msg[k] ^ 0x5A);
            if (!ok) h->bad++;
            h->msgs++;
        }
    /* Bulk transfers through the manager's bulk handler, and one it refuses. */
    for (int i = 0; i < n; i += 4) {
        size_t len = i == 8 ? 7 : (size_t)(h->tid * 7919 + i * 104729) % 200000;
        uint8_t *buf = malloc(len + 1);
        fill(buf, len, (uint64_t)h->tid * 100 + (uint64_t)i);
        int rc = ofl_chan_bulk_send(&e[i], buf, len, LONG_WAIT);
        struct mgr_reply rep;
        int got = ofl_chan_recv(&e[i], &rep, sizeof rep, LONG_WAIT);
        if (len == 7) {
            if (rc != -EMSGSIZE || got != sizeof rep || rep.status != -EMSGSIZE) h->bad++;
        } else if (rc || got != sizeof rep || rep.status || rep.len != len ||
                   rep.crc != ofl_crc32c(0, buf, len)) {
            printf("host %d chan %d bulk %zu: rc %d got %d status %d\n", h->tid, i, len, rc, got,
                   rep.status);
            h->bad++;
        }
        h->bulks++;
        free(buf);
    }
    for (int i = 0; i < n; i++) ofl_chan_close(&e[i]);
    return NULL;
}

/* Create the `n` channels of `r`, named `prefix`0.. */
static void name_channels(struct region *r, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%d", prefix, i);
        ofl_chan_create(r->mem, name);
    }
}

/* Name the `n` channels of `r` `prefix`0.. and run `fn(mc)` in a child that stops
 * when the parent closes mc->wfd. Returns the child's pid. */
static pid_t mgr_child_start(struct region *r, const char *prefix, int n,
                             void (*fn)(void *), struct mgr_child *mc)
{
    name_channels(r, prefix, n);
    int fds[2];
    if (pipe(fds)) exit(2);
    *mc = (struct mgr_child){.r = r, .fd = fds[0], .wfd = fds[1]};
    pid_t pid = spawn(fn, mc);
    close(fds[0]);
    return pid;
}

static void test_manager(void)
{
    struct region r = region_new(MGR_CHANNELS);
    struct mgr_child mc;
    pid_t pid = mgr_child_start(&r, "svc", MGR_CHANNELS, mgr_child_main, &mc);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, MGR_HOSTS);
    struct host h[MGR_HOSTS];
    pthread_t t[MGR_HOSTS];
    uint64_t t0 = ofl_now_ns();
    for (int i = 0; i < MGR_HOSTS; i++) {
        h[i] = (struct host){.r = &r, .tid = i, .bar = &bar};
        pthread_create(&t[i], NULL, host_main, &h[i]);
    }
    int bad = 0, msgs = 0, bulks = 0;
    for (int i = 0; i < MGR_HOSTS; i++) {
        pthread_join(t[i], NULL);
        bad += h[i].bad;
        msgs += h[i].msgs;
        bulks += h[i].bulks;
    }
    printf("manager: %d messages and %d bulk transfers in %.2f s\n", msgs, bulks,
           (double)(ofl_now_ns() - t0) / 1e9);
    CHECK(bad == 0 && msgs == MGR_CHANNELS * MGR_ROUNDS,
          "%d channels, 2 manager threads, %d host threads sending at once: %d round trips and "
          "%d bulk transfers complete (%d bad)", MGR_CHANNELS, MGR_HOSTS, msgs, bulks, bad);
    close(mc.wfd);
    reap(pid, "manager");
    pthread_barrier_destroy(&bar);
    region_free(&r);
}

/* Managed bulk sends (ofl_chan_mgr_bulk_send): the device answers a direct request
 * with a bulk transfer that its manager thread runs, and reports the transfer's end
 * in a direct message from the `sent` handler. */
#define MSEND_CHANNELS 8
#define MSEND_MAX 300000
#define MSEND_ROUNDS 3

struct msend_req {
    uint64_t len, seed;
};

#define MSEND_FAIL 999   /* a request seed whose handler fails after queueing its send */

struct msend_ctx {
    struct ofl_chan_mgr *m;
    void *region;
    uint32_t id;
    uint8_t *buf;
    int queued, busy;   /* queue results seen by the handler */
    int sent_status;    /* the last sent handler's */
    size_t sent_len;
};

static int msend_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)e;
    struct msend_ctx *c = ctx;
    struct msend_req q;
    if (len != sizeof q) return -EPROTO;   /* closes the end */
    memcpy(&q, msg, sizeof q);
    if (q.len > MSEND_MAX) return -EMSGSIZE;
    fill(c->buf, q.len, q.seed);
    int rc = ofl_chan_mgr_bulk_send(c->m, c->region, c->id, OFL_CHAN_B, c->buf, q.len);
    c->queued += rc == 0;
    /* The mailbox holds one send until the thread starts it: it starts after this
     * handler returns, so a second one is refused. */
    c->busy += ofl_chan_mgr_bulk_send(c->m, c->region, c->id, OFL_CHAN_B, c->buf, q.len) ==
               -EBUSY;
    return q.seed == MSEND_FAIL ? -ECANCELED : 0;   /* fails after queueing: closes the end */
}

static void msend_sent(void *ctx, struct ofl_chan_end *e, const void *buf, size_t len, int status)
{
    struct msend_ctx *c = ctx;
    struct mgr_reply rep = {.status = status, .len = len};
    if (buf != c->buf) rep.status = -EFAULT;   /* not the buffer it was given */
    c->sent_len = len;
    __atomic_store_n(&c->sent_status, rep.status, __ATOMIC_RELEASE);
    ofl_chan_post(e, &rep, sizeof rep);
}

static void msend_child_main(void *p)
{
    struct mgr_child *c = p;
    struct ofl_chan_mgr *m = mgr_child_begin(c);
    if (!m) return;
    struct ofl_chan_bulk_handler bh = {.sent = msend_sent};
    struct msend_ctx ctx[MSEND_CHANNELS];
    int bad = 0;
    for (uint32_t i = 0; i < MSEND_CHANNELS; i++) {
        ctx[i] = (struct msend_ctx){m, c->r->mem, i, malloc(MSEND_MAX), 0, 0, 0, 0};
        bad += ofl_chan_mgr_serve(m, c->r->mem, i, OFL_CHAN_B, msend_handler, &bh, &ctx[i]) != 0;
    }
    CHECK(bad == 0, "the manager serves side B of %d channels", MSEND_CHANNELS);
    mgr_child_wait(c);
    /* Channel 0's handler queued a send, then failed, which closed its end; the
     * manager's thread drops the send at its next sweep (waited for: bounded). */
    for (uint64_t until = ofl_now_ns() + 5000 * MS;
         !__atomic_load_n(&ctx[0].sent_status, __ATOMIC_ACQUIRE) && ofl_now_ns() < until;)
        sched_yield();
    CHECK(ctx[0].sent_status == -EPIPE && ctx[0].sent_len == 1000,
          "a send queued by a handler that then failed ends with -EPIPE (%d)",
          ctx[0].sent_status);
    CHECK(ofl_chan_mgr_bulk_send(m, c->r->mem, 0, OFL_CHAN_B, ctx[0].buf, 1) == -EPIPE,
          "a send on an end its handler closed: -EPIPE");
    int queued = 0, busy = 0;
    for (int i = 0; i < MSEND_CHANNELS; i++) {
        queued += ctx[i].queued;
        busy += ctx[i].busy;
    }
    CHECK(queued == MSEND_ROUNDS * (MSEND_CHANNELS - 1) + 1 && busy == queued,
          "each request queued one send (%d) and a second one at once was -EBUSY (%d)", queued,
          busy);
    ofl_chan_mgr_stop(m);
    for (int i = 0; i < MSEND_CHANNELS; i++) free(ctx[i].buf);
}

/* A handler that fails, which closes its end. */
static int fail_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)ctx, (void)e, (void)msg, (void)len;
    return -EPROTO;
}

/* A handler that holds its manager thread until *ctx is set (tests only: handlers
 * must not block). */
static int hold_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)e, (void)msg, (void)len;
    while (!__atomic_load_n((int *)ctx, __ATOMIC_ACQUIRE)) sched_yield();
    return 0;
}

static void *stop_main(void *p)
{
    ofl_chan_mgr_stop(p);
    return NULL;
}

/* One host thread of test_manager_send: MSEND_ROUNDS requests on channel `id`,
 * each answered in bulk; round 1 posts a smaller buffer (-EMSGSIZE both sides). */

struct msend_host {
    struct region *r;
    struct ofl_chan_end e;
    uint32_t id;
    int bad;
};

static void *msend_host_main(void *p)
{
    struct msend_host *h = p;
    uint8_t *buf = malloc(MSEND_MAX);
    h->bad += ofl_chan_open(&h->e, h->r->mem, h->id, OFL_CHAN_A, NULL) != 0;
    for (int round = 0; round < MSEND_ROUNDS; round++) {
        struct msend_req q = {round == 1 ? 5000 : 1 + (h->id * 37501u + (uint64_t)round * 999) %
                                                          MSEND_MAX,
                              h->id * 10 + (uint64_t)round};
        size_t want = round == 1 ? 4000 : q.len;
        int rc = ofl_chan_send(&h->e, &q, sizeof q, LONG_WAIT);
        int got = rc ? rc : ofl_chan_bulk_recv(&h->e, buf, want, LONG_WAIT);
        struct mgr_reply rep;
        int n = ofl_chan_recv(&h->e, &rep, sizeof rep, LONG_WAIT);
        bool ok = round == 1 ? got == -EMSGSIZE && rep.status == -EMSGSIZE
                             : got == 0 && rep.status == 0 && first_bad(buf, q.len, q.seed) < 0;
        if (!ok || n != (int)sizeof rep || rep.len != q.len) {
            printf("channel %u round %d: bulk %d, sent status %d len %llu\n", h->id, round, got,
                   rep.status, (unsigned long long)rep.len);
            h->bad++;
        }
    }
    free(buf);
    return NULL;
}

static void test_manager_send(void)
{
    struct region r = region_new(MSEND_CHANNELS);
    struct mgr_child mc;
    pid_t pid = mgr_child_start(&r, "out", MSEND_CHANNELS, msend_child_main, &mc);
    struct msend_host hosts[MSEND_CHANNELS];
    pthread_t th[MSEND_CHANNELS];
    int bad = 0;
    for (uint32_t i = 1; i < MSEND_CHANNELS; i++) {
        hosts[i] = (struct msend_host){.r = &r, .id = i};
        pthread_create(&th[i], NULL, msend_host_main, &hosts[i]);
    }
    for (uint32_t i = 1; i < MSEND_CHANNELS; i++) {
        pthread_join(th[i], NULL);
        bad += hosts[i].bad;
    }
    CHECK(bad == 0, "managed sends: %d channels at once on 2 manager threads, each request "
          "answered in bulk; a smaller buffer is -EMSGSIZE on both sides", MSEND_CHANNELS - 1);
    /* Channel 0's handler queues its send, then fails: the end closes. */
    struct ofl_chan_end e0;
    ofl_chan_open(&e0, r.mem, 0, OFL_CHAN_A, NULL);
    struct msend_req fq = {1000, MSEND_FAIL};
    CHECK(ofl_chan_send(&e0, &fq, sizeof fq, LONG_WAIT) == 0, "a failing request is taken");
    uint64_t until = ofl_now_ns() + 5000 * MS;
    while (__atomic_load_n(&side_peer(&e0)->gen, __ATOMIC_ACQUIRE) & 1u && ofl_now_ns() < until)
        sched_yield();
    ofl_chan_close(&e0);
    for (int i = 1; i < MSEND_CHANNELS; i++) ofl_chan_close(&hosts[i].e);
    close(mc.wfd);
    reap(pid, "managed sends");

    region_free(&r);

    /* In this process, on channels whose side A never opened (a send toward a closed
     * side A would fail with -EPIPE at once): bad arguments, and a send still waiting
     * for its peer when the manager stops: -ECANCELED in its sent handler. */
    r = region_new(MSEND_CHANNELS);
    name_channels(&r, "in", MSEND_CHANNELS);
    struct ofl_chan_mgr *m = ofl_chan_mgr_start(1, NULL);
    struct msend_ctx c = {m, r.mem, 3, malloc(64), 0, 0, 1, 0};
    struct ofl_chan_bulk_handler bh = {.sent = msend_sent};
    CHECK(ofl_chan_mgr_serve(m, r.mem, 3, OFL_CHAN_B, NULL, &bh, &c) == 0, "serve channel 3");
    CHECK(ofl_chan_mgr_bulk_send(m, r.mem, 4, OFL_CHAN_B, c.buf, 8) == -ENOENT &&
              ofl_chan_mgr_bulk_send(m, r.mem, 3, OFL_CHAN_A, c.buf, 8) == -ENOENT,
          "a send on an end the manager does not serve: -ENOENT");
    CHECK(ofl_chan_mgr_bulk_send(NULL, r.mem, 3, OFL_CHAN_B, c.buf, 8) == -EINVAL &&
              ofl_chan_mgr_bulk_send(m, NULL, 3, OFL_CHAN_B, c.buf, 8) == -EINVAL &&
              ofl_chan_mgr_bulk_send(m, r.mem, MSEND_CHANNELS, OFL_CHAN_B, c.buf, 8) == -EINVAL &&
              ofl_chan_mgr_bulk_send(m, r.mem, 3, OFL_CHAN_B, NULL, 8) == -EINVAL,
          "no manager, no region, an id past the region, no buffer: -EINVAL");
    /* A length the transfer cannot have: queued, then refused when it starts. */
    CHECK(ofl_chan_mgr_bulk_send(m, r.mem, 3, OFL_CHAN_B, c.buf, (size_t)1 << 36) == 0,
          "a 64 GiB send is queued");
    for (uint64_t until = ofl_now_ns() + 5000 * MS;
         __atomic_load_n(&c.sent_status, __ATOMIC_ACQUIRE) == 1 && ofl_now_ns() < until;)
        sched_yield();
    CHECK(c.sent_status == -EINVAL && c.sent_len == (size_t)1 << 36,
          "... and ends with -EINVAL in its sent handler when it starts (%d)", c.sent_status);
    CHECK(ofl_chan_mgr_bulk_send(m, r.mem, 3, OFL_CHAN_B, c.buf, 64) == 0, "a send queued");
    usleep(100000);   /* its thread starts it, which then waits for side A */
    ofl_chan_mgr_stop(m);
    CHECK(c.sent_status == -ECANCELED && c.sent_len == 64,
          "stopping the manager ends the waiting send: -ECANCELED (%d)", c.sent_status);
    /* A send still in the mailbox at the stop (its thread held in another end's
     * handler until the stop began) is ended the same way, never started. */
    m = ofl_chan_mgr_start(1, NULL);
    int release = 0;
    c = (struct msend_ctx){m, r.mem, 3, c.buf, 0, 0, 1, 0};
    ofl_chan_mgr_serve(m, r.mem, 3, OFL_CHAN_B, NULL, &bh, &c);
    /* An end whose handler failed (which closed it), served again: the new service
     * takes the sends (the closed one refuses them with -EPIPE). */
    struct msend_ctx c6 = {m, r.mem, 6, malloc(16), 0, 0, 1, 0};
    struct ofl_chan_end a6;
    CHECK(ofl_chan_mgr_serve(m, r.mem, 6, OFL_CHAN_B, fail_handler, &bh, &c6) == 0 &&
              ofl_chan_open(&a6, r.mem, 6, OFL_CHAN_A, NULL) == 0 &&
              ofl_chan_send(&a6, "x", 1, LONG_WAIT) == 0,
          "a message to a handler that fails");
    int closed = 0;
    for (uint64_t until = ofl_now_ns() + 5000 * MS; !closed && ofl_now_ns() < until;)
        if (!(closed = ofl_chan_mgr_bulk_send(m, r.mem, 6, OFL_CHAN_B, c6.buf, 16) == -EPIPE))
            sched_yield();
    CHECK(closed, "the failed handler's end refuses sends: -EPIPE");
    CHECK(ofl_chan_mgr_serve(m, r.mem, 6, OFL_CHAN_B, NULL, &bh, &c6) == 0 &&
              ofl_chan_mgr_bulk_send(m, r.mem, 6, OFL_CHAN_B, c6.buf, 16) == 0,
          "served again, the end takes a send");
    ofl_chan_mgr_serve(m, r.mem, 5, OFL_CHAN_B, hold_handler, NULL, &release);
    struct ofl_chan_end a5;
    ofl_chan_open(&a5, r.mem, 5, OFL_CHAN_A, NULL);
    CHECK(ofl_chan_send(&a5, "h", 1, LONG_WAIT) == 0 &&
              ofl_chan_mgr_bulk_send(m, r.mem, 3, OFL_CHAN_B, c.buf, 32) == 0,
          "the manager's thread held in a handler; a send queued behind it");
    pthread_t st;
    pthread_create(&st, NULL, stop_main, m);
    usleep(200000);   /* the stop begins; either way the send must end -ECANCELED */
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    pthread_join(st, NULL);
    ofl_chan_close(&a5);
    CHECK(c.sent_status == -ECANCELED && c.sent_len == 32,
          "a send queued when the manager stops: -ECANCELED (%d)", c.sent_status);
    CHECK(c6.sent_status == -ECANCELED && c6.sent_len == 16,
          "... and the one on the end served again: -ECANCELED (%d)", c6.sent_status);
    ofl_chan_close(&a6);
    free(c6.buf);
    free(c.buf);
    region_free(&r);
}

/* A relay's calls on a served end from outside its handlers (the remote link's ends,
 * runtime/tools/remote_chan.c): posts taken in order by side A, one at a time; the
 * post's state and the peer's as they change; a queued bulk send holds posts back. */
static void test_manager_post(void)
{
    struct region r = region_new(4);
    static const char big[OFL_CHAN_MSG_MAX + 1];
    name_channels(&r, "relay", 4);
    struct ofl_chan_mgr *m = ofl_chan_mgr_start(1, NULL);
    CHECK(ofl_chan_mgr_serve(m, r.mem, 2, OFL_CHAN_B, NULL, NULL, NULL) == 0, "serve channel 2");
    CHECK(ofl_chan_mgr_post(m, r.mem, 1, OFL_CHAN_B, "x", 1) == -ENOENT &&
              ofl_chan_mgr_post(NULL, r.mem, 2, OFL_CHAN_B, "x", 1) == -EINVAL &&
              ofl_chan_mgr_peer_state(m, r.mem, 1, OFL_CHAN_B) == -EINVAL,
          "an end it does not serve, no manager: -ENOENT, -EINVAL");
    CHECK(ofl_chan_mgr_peer_state(m, r.mem, 2, OFL_CHAN_B) == 0, "side A not opened yet: 0");
    struct ofl_chan_end a;
    ofl_chan_open(&a, r.mem, 2, OFL_CHAN_A, NULL);
    CHECK(ofl_chan_mgr_peer_state(m, r.mem, 2, OFL_CHAN_B) == 1, "side A open: 1");
    CHECK(ofl_chan_mgr_post_done(m, r.mem, 2, OFL_CHAN_B) == 1 &&
              ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, "first", 5) == 0 &&
              ofl_chan_mgr_post_done(m, r.mem, 2, OFL_CHAN_B) == 0,
          "a post: not done until taken");
    CHECK(ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, "second", 6) == -ENOBUFS &&
              ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, big, sizeof big) == -EMSGSIZE,
          "a second post before the first is taken: -ENOBUFS; 57 bytes: -EMSGSIZE");
    char got[64];
    int n = ofl_chan_recv(&a, got, sizeof got, LONG_WAIT);
    CHECK(n == 5 && !memcmp(got, "first", 5) && ofl_chan_mgr_post_done(m, r.mem, 2, OFL_CHAN_B),
          "side A takes it; the post is done");
    CHECK(ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, "second", 6) == 0 &&
              ofl_chan_recv(&a, got, sizeof got, LONG_WAIT) == 6 && !memcmp(got, "second", 6),
          "then the next one");
    static char blob[4096];
    CHECK(ofl_chan_mgr_bulk_send(m, r.mem, 2, OFL_CHAN_B, blob, sizeof blob) == 0 &&
              ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, "x", 1) == -EBUSY,
          "a bulk send queued or running: a post waits (-EBUSY)");
    CHECK(ofl_chan_bulk_recv(&a, blob, sizeof blob, LONG_WAIT) == 0, "side A takes the bulk");
    int rc = -EBUSY;
    for (uint64_t until = ofl_now_ns() + 5000 * MS; rc == -EBUSY && ofl_now_ns() < until;)
        if ((rc = ofl_chan_mgr_post(m, r.mem, 2, OFL_CHAN_B, "y", 1)) == -EBUSY) sched_yield();
    CHECK(rc == 0 && ofl_chan_recv(&a, got, sizeof got, LONG_WAIT) == 1 && got[0] == 'y',
          "after it, a post again (%d)", rc);
    ofl_chan_close(&a);
    CHECK(ofl_chan_mgr_peer_state(m, r.mem, 2, OFL_CHAN_B) == -EPIPE, "side A closed: -EPIPE");
    ofl_chan_mgr_stop(m);
    region_free(&r);
}

/* A handler that answers every message with itself, counting them in *ctx. */
static int mirror_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    __atomic_add_fetch((int *)ctx, 1, __ATOMIC_RELAXED);
    return ofl_chan_post(e, msg, len);
}

/* Poll `cond` until it holds or 5 s pass. */
#define WAIT_UNTIL(cond)                                                            \
    for (uint64_t until_ = ofl_now_ns() + 5000 * MS; !(cond) && ofl_now_ns() < until_;) \
    sched_yield()

/* A relay that posts on a served end while the end's handler runs (the handler
 * waits for its first try), then again until the post is taken in. */
struct relay_race {
    struct ofl_chan_mgr *m;
    void *region;
    int in_handler;    /* set by the handler: the relay tries now */
    int tried;         /* set by the relay after its first try */
    int first_rc;      /* that try's result */
    int rc;            /* the last try's */
    int seen;          /* messages the handler got */
};

/* Answers nothing; on the first message, has the relay post while it runs. */
static int quiet_handler(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)e;
    (void)msg;
    (void)len;
    struct relay_race *x = ctx;
    if (__atomic_add_fetch(&x->seen, 1, __ATOMIC_ACQ_REL) == 1) {
        __atomic_store_n(&x->in_handler, 1, __ATOMIC_RELEASE);
        for (uint64_t until = ofl_now_ns() + 5000 * MS;
             !__atomic_load_n(&x->tried, __ATOMIC_ACQUIRE) && ofl_now_ns() < until;)
            sched_yield();
    }
    return 0;
}

static void *relay_main(void *p)
{
    struct relay_race *x = p;
    WAIT_UNTIL(__atomic_load_n(&x->in_handler, __ATOMIC_ACQUIRE));
    int rc = ofl_chan_mgr_post(x->m, x->region, 0, OFL_CHAN_B, "note", 4);
    x->first_rc = rc;
    __atomic_store_n(&x->tried, 1, __ATOMIC_RELEASE);
    for (uint64_t until = ofl_now_ns() + 5000 * MS; rc == -EBUSY && ofl_now_ns() < until;)
        if ((rc = ofl_chan_mgr_post(x->m, x->region, 0, OFL_CHAN_B, "note", 4)) == -EBUSY)
            sched_yield();
    x->rc = rc;
    return NULL;
}

/* The manager knows exactly whether a handler replied: a relay's post made while the
 * handler runs (it waits, -EBUSY, until the handler returns) is not taken for the
 * handler's reply, so the peer's next message is handled at once instead of waiting
 * until the peer took the relay's post (the old guess from the end's sequence before
 * and after the handler held it: chan_mgr.c's `replied`). */
static void test_manager_replied_exact(void)
{
    struct region r = region_new(1);
    name_channels(&r, "race", 1);
    struct relay_race x = {0};
    x.m = ofl_chan_mgr_start(1, NULL);
    x.region = r.mem;
    struct ofl_chan_end a;
    CHECK(ofl_chan_mgr_serve(x.m, r.mem, 0, OFL_CHAN_B, quiet_handler, NULL, &x) == 0 &&
              ofl_chan_open(&a, r.mem, 0, OFL_CHAN_A, NULL) == 0,
          "relay race: a served end that answers nothing, and its peer");
    pthread_t t;
    pthread_create(&t, NULL, relay_main, &x);
    CHECK(ofl_chan_send(&a, "1", 1, LONG_WAIT) == 0, "relay race: the first message taken");
    pthread_join(t, NULL);
    CHECK(x.first_rc == -EBUSY && x.rc == 0,
          "relay race: the relay's post during the handler waits for it (%d), then goes (%d)",
          x.first_rc, x.rc);
    int rc = ofl_chan_send(&a, "2", 1, 1000 * MS);
    WAIT_UNTIL(__atomic_load_n(&x.seen, __ATOMIC_ACQUIRE) == 2);
    CHECK(rc == 0 && x.seen == 2,
          "relay race: with the relay's post untaken, the next message is handled (%s, seen %d)",
          ofl_strerror(rc), x.seen);
    char got[8];
    CHECK(ofl_chan_recv(&a, got, sizeof got, LONG_WAIT) == 4 && !memcmp(got, "note", 4),
          "relay race: the relay's post arrives");
    ofl_chan_close(&a);
    struct ofl_chan_stats st;
    ofl_chan_mgr_stop_sum(x.m, &st);
    CHECK(st.received == 2 && st.posted == 1 && st.withdrawn == 0,
          "relay race: 2 received, 1 posted, none withdrawn (%llu, %llu, %llu)",
          (unsigned long long)st.received, (unsigned long long)st.posted,
          (unsigned long long)st.withdrawn);
    region_free(&r);
}

/* Side A in a child: sends one byte, then exits without closing (nor receiving). */
static void send_exit_main(void *p)
{
    struct job *j = p;
    struct ofl_chan_end e;
    if (ofl_chan_open(&e, j->r->mem, (uint32_t)j->id, OFL_CHAN_A, NULL)) _exit(1);
    _exit(ofl_chan_send(&e, "x", 1, LONG_WAIT) ? 1 : 0);
}

/* Messages a stop must not lose uncounted (issue 28: the remote relay's hop inside a
 * device machine). A relay (side A served by a manager that is slow to take the
 * device's answers: here it never does) posts the next request as soon as the last
 * is taken: the device's end takes it only after its answer was taken, so its
 * handler's reply never fails (ENOBUFS closed the channel: the answer withdrawn and
 * the request after it lost, none counted). What is still pending when an end
 * closes, or its peer does, is withdrawn and counted (`withdrawn`), and a manager's
 * stop adds up its ends' counters. */
static void test_manager_withdrawn(void)
{
    struct region r = region_new(4);
    name_channels(&r, "hop", 4);
    int seen = 0;
    struct ofl_chan_mgr *dev = ofl_chan_mgr_start(1, NULL);
    struct ofl_chan_mgr *relay = ofl_chan_mgr_start(1, NULL);
    CHECK(ofl_chan_mgr_serve(dev, r.mem, 0, OFL_CHAN_B, mirror_handler, NULL, &seen) == 0 &&
              ofl_chan_mgr_serve(relay, r.mem, 0, OFL_CHAN_A, NULL, NULL, NULL) == 0,
          "hop: a device's end and a relay's end served");
    CHECK(ofl_chan_mgr_post(relay, r.mem, 0, OFL_CHAN_A, "one", 3) == 0, "hop: the relay posts one");
    WAIT_UNTIL(ofl_chan_mgr_post_done(relay, r.mem, 0, OFL_CHAN_A));
    int rc = ofl_chan_mgr_post(relay, r.mem, 0, OFL_CHAN_A, "two", 3);
    usleep(100000);   /* (the device's manager sweeps about every ms at most) */
    CHECK(rc == 0 && __atomic_load_n(&seen, __ATOMIC_RELAXED) == 1 &&
              !ofl_chan_mgr_post_done(relay, r.mem, 0, OFL_CHAN_A) &&
              ofl_chan_mgr_peer_state(relay, r.mem, 0, OFL_CHAN_A) == 1,
          "hop: the next request waits while the answer to the first is untaken; the "
          "device's end stays open (post %d, the handler saw %d)", rc, seen);
    struct ofl_chan_stats rs, ds;
    ofl_chan_mgr_stop_sum(relay, &rs);   /* "two" still pending: withdrawn at its close */
    WAIT_UNTIL(ofl_chan_mgr_post_done(dev, r.mem, 0, OFL_CHAN_B));
    ofl_chan_mgr_stop_sum(dev, &ds);     /* "one"'s answer: withdrawn at the peer's close */
    CHECK(rs.posted == 2 && rs.withdrawn == 1 && rs.received == 0,
          "hop: the relay's stop counts its request never taken (posted %llu, withdrawn %llu)",
          (unsigned long long)rs.posted, (unsigned long long)rs.withdrawn);
    CHECK(ds.received == 1 && ds.posted == 1 && ds.withdrawn == 1,
          "hop: the device's answer its peer never took is counted (received %llu, posted "
          "%llu, withdrawn %llu)", (unsigned long long)ds.received,
          (unsigned long long)ds.posted, (unsigned long long)ds.withdrawn);

    /* A plain peer: its second send waits for it to take the answer to the first. */
    seen = 0;
    dev = ofl_chan_mgr_start(1, NULL);
    struct ofl_chan_end a;
    char got[8];
    CHECK(ofl_chan_mgr_serve(dev, r.mem, 1, OFL_CHAN_B, mirror_handler, NULL, &seen) == 0 &&
              ofl_chan_open(&a, r.mem, 1, OFL_CHAN_A, NULL) == 0 &&
              ofl_chan_send(&a, "x", 1, LONG_WAIT) == 0 &&
              ofl_chan_send(&a, "y", 1, 50 * MS) == -ETIMEDOUT,
          "hop: a second send before the answer is taken times out (withdrawn)");
    CHECK(ofl_chan_recv(&a, got, sizeof got, LONG_WAIT) == 1 && got[0] == 'x' &&
              ofl_chan_send(&a, "y", 1, LONG_WAIT) == 0 &&
              ofl_chan_recv(&a, got, sizeof got, LONG_WAIT) == 1 && got[0] == 'y' && seen == 2,
          "hop: once it is taken, the next one goes and is answered (seen %d)", seen);
    CHECK(ofl_chan_send(&a, "z", 1, LONG_WAIT) == 0, "hop: a third, its answer left untaken");
    WAIT_UNTIL(__atomic_load_n(&seen, __ATOMIC_RELAXED) == 3);
    usleep(20000);
    ofl_chan_mgr_stop_sum(dev, &ds);     /* the peer is open: withdrawn at its own close */
    CHECK(ds.withdrawn == 1 && ds.posted == 3,
          "hop: a stop with an answer untaken counts it (withdrawn %llu)",
          (unsigned long long)ds.withdrawn);
    ofl_chan_close(&a);

    /* A peer that dies with the answer untaken: the next peer's request is answered
     * (the stale answer withdrawn, counted), not left waiting behind it. */
    seen = 0;
    dev = ofl_chan_mgr_start(1, NULL);
    CHECK(ofl_chan_mgr_serve(dev, r.mem, 3, OFL_CHAN_B, mirror_handler, NULL, &seen) == 0,
          "hop: serve channel 3");
    struct job j = {.r = &r, .id = 3};
    reap_quiet(spawn(send_exit_main, &j));
    WAIT_UNTIL(__atomic_load_n(&seen, __ATOMIC_RELAXED) == 1);
    CHECK(ofl_chan_open(&a, r.mem, 3, OFL_CHAN_A, NULL) == 0 &&
              ofl_chan_send(&a, "n", 1, 2000 * MS) == 0 &&
              ofl_chan_recv(&a, got, sizeof got, 2000 * MS) == 1 && got[0] == 'n',
          "hop: a peer dead with its answer untaken; the next one is answered (seen %d)", seen);
    ofl_chan_close(&a);
    ofl_chan_mgr_stop_sum(dev, &ds);
    CHECK(ds.withdrawn == 1 && ds.posted == 2, "hop: the dead peer's answer is counted "
          "withdrawn (%llu)", (unsigned long long)ds.withdrawn);

    /* A plain end that closes with its post pending. */
    struct ofl_chan_end b;
    ofl_chan_open(&a, r.mem, 2, OFL_CHAN_A, NULL);
    ofl_chan_open(&b, r.mem, 2, OFL_CHAN_B, NULL);
    CHECK(ofl_chan_post(&b, "w", 1) == 0, "hop: a post");
    ofl_chan_close(&b);
    ofl_chan_get_stats(&b, &ds);
    CHECK(ds.withdrawn == 1 && ofl_chan_try_recv(&a, got, sizeof got) == -EPIPE,
          "hop: closed with it pending: withdrawn, counted (%llu), never seen",
          (unsigned long long)ds.withdrawn);
    ofl_chan_close(&a);
    region_free(&r);
}

int main(int argc, char **argv)
{
    int nchan = argc > 1 ? atoi(argv[1]) : 256;
    size_t maxlen = argc > 2 ? strtoull(argv[2], NULL, 0) : 3u << 20;
    signal(SIGPIPE, SIG_IGN);
    if (argc > 3) {   /* debugging: the stress test only */
        test_stress(nchan, maxlen);
        return CHECK_DONE();
    }
    test_names();
    test_open_close();
    test_direct_threads();
    test_try_and_timeouts();
    test_message_at_a_wait_end();
    test_withdraw_race();
    test_bulk_local();
    test_bulk_errors();
    test_bulk_mem();
    test_mem_mapping();
    test_sg_runs();
    test_chunk_window();
    test_dead_a();
    test_try_dead_peer();
    test_eperm_bounce();
    test_manager();
    test_manager_send();
    test_manager_post();
    test_manager_withdrawn();
    test_manager_replied_exact();
    test_stress(nchan, maxlen);
    return CHECK_DONE();
}
