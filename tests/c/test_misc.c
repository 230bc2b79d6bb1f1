/* Error text, the vector level, the JSON writer, CPU pinning, the waiter, whole-file reads and
 * writes, the runner's lifeline, a core's idle turn after a peer ended. usage: test_misc TMPDIR */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "offlow/err.h"
#include "offlow/file.h"
#include "offlow/gen.h"
#include "offlow/lifeline.h"
#include "offlow/live.h"
#include "offlow/live_file.h"
#include "offlow/simd.h"
#include "offlow/queue.h"
#include "offlow/stats.h"
#include "offlow/stop.h"
#include "offlow/thread.h"
#include "offlow/wait.h"

static void test_strerror(void)
{
    CHECK(!strcmp(ofl_strerror(-EPIPE), "Broken pipe"), "-EPIPE: %s", ofl_strerror(-EPIPE));
    CHECK(!strcmp(ofl_strerror(OFL_ETRUNC), "truncated packet"), "OFL_ETRUNC: %s",
          ofl_strerror(OFL_ETRUNC));
    CHECK(!strcmp(ofl_strerror(OFL_ECSUM), "bad checksum"), "OFL_ECSUM: %s",
          ofl_strerror(OFL_ECSUM));
    CHECK(!strcmp(ofl_strerror(OFL_EUNSUPP), "unsupported protocol"), "OFL_EUNSUPP");
    CHECK(!strcmp(ofl_strerror(OFL_Q_DONE), "queue finished"), "OFL_Q_DONE");
    CHECK(!strcmp(ofl_strerror(OFL_EFAIL), "failed by the element"), "OFL_EFAIL: %s",
          ofl_strerror(OFL_EFAIL));
    CHECK(OFL_Q_DONE < -4095 && OFL_ETRUNC < -4095 && OFL_EFAIL < -4095,
          "sentinels are outside the errno range");
    CHECK(!strcmp(ofl_strerror(-4500), "unknown error"), "unknown codes have text");
}

static void test_json(void)
{
    char *buf = NULL;
    size_t len = 0;
    struct ofl_json j;
    memset(&j, 0, sizeof j);
    j.f = open_memstream(&buf, &len);
    ofl_json_begin_obj(&j, NULL);
    ofl_json_str(&j, "s", "a\"b\\c\n\x01");
    ofl_json_u64(&j, "u", 18446744073709551615ull);
    ofl_json_begin_arr(&j, "a");
    ofl_json_u64(&j, NULL, 0);
    ofl_json_u64(&j, NULL, 10);
    ofl_json_f64(&j, NULL, 0.5);
    ofl_json_f64(&j, NULL, NAN);
    ofl_json_f64(&j, NULL, -INFINITY);
    ofl_json_begin_obj(&j, NULL);
    ofl_json_end_obj(&j);
    ofl_json_end_arr(&j);
    ofl_json_str(&j, "n", NULL);
    ofl_json_end_obj(&j);
    fclose(j.f);
    const char *want =
        "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"u\":18446744073709551615,"
        "\"a\":[0,10,0.5,null,null,{}],\"n\":null}";
    CHECK(!strcmp(buf, want), "json: %s", buf);
    free(buf);
}

static void test_pin(void)
{
    int n = ofl_ncpus();
    CHECK(n >= 1, "%d CPUs", n);
    CHECK(ofl_pin_self(0) == 0, "pin to CPU 0");
    CHECK(ofl_pin_self(n) == 1, "pin to CPU %d wraps (oversubscribed)", n);
    CHECK(ofl_pin_self(-1) == -EINVAL, "negative CPU rejected");
}

static void test_waiter(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    volatile uint32_t abort_word = 0;
    struct ofl_waiter w;
    ofl_waiter_init(&w, &fds[0], 1, &abort_word);
    int rc = 0;
    uint64_t t0 = ofl_now_ns();
    while (rc == 0 && ofl_now_ns() - t0 < 20000000) rc = ofl_wait(&w);
    CHECK(rc == 0, "a live peer: waits go on");
    /* A byte written by the peer is not a death. */
    CHECK(write(fds[1], "x", 1) == 1, "peer wrote a byte");
    t0 = ofl_now_ns();
    while (rc == 0 && ofl_now_ns() - t0 < 20000000) rc = ofl_waiter_check(&w);
    CHECK(rc == 0, "readable with data: alive");
    close(fds[1]);
    t0 = ofl_now_ns();
    while (rc == 0 && ofl_now_ns() - t0 < 1000000000) rc = ofl_waiter_check(&w);
    CHECK(rc == -EPIPE, "busy-loop check finds the dead peer: %s", ofl_strerror(rc));
    close(fds[0]);

    /* Idle: spin, yield, then nap. A waiter idle for 300 ms uses a few ms of CPU, and
     * a death or an interrupt ends its nap. */
    CHECK(pipe(fds) == 0, "pipe");
    int intr[2];
    CHECK(pipe(intr) == 0, "interrupt pipe");
    ofl_waiter_init(&w, &fds[0], 1, &abort_word);
    w.intr_fd = intr[0];
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    t0 = ofl_now_ns();
    rc = 0;
    while (rc == 0 && ofl_now_ns() - t0 < 300000000) rc = ofl_wait(&w);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
    CHECK(rc == 0 && cpu_ms < 60, "an idle wait of 300 ms took %.1f ms of CPU", cpu_ms);
    CHECK(write(intr[1], "i", 1) == 1, "a signal's byte");
    rc = ofl_wait(&w);
    CHECK(rc == -EINTR && ofl_wait(&w) == -EINTR, "the interrupt fd ends the nap: %s",
          ofl_strerror(rc));
    char b;
    CHECK(read(intr[0], &b, 1) == 1 && ofl_wait(&w) == 0, "drained: waiting again");
    close(fds[1]);
    rc = 0;
    for (int i = 0; i < 1000 && rc == 0; i++) rc = ofl_wait(&w);
    CHECK(rc == -EPIPE, "a peer's death ends the nap: %s", ofl_strerror(rc));
    ofl_waiter_progress(&w);
    CHECK(ofl_wait(&w) == -EPIPE, "and stays found");
    close(fds[0]);
    close(intr[0]);
    close(intr[1]);

    /* Of two peers, the one that exits is told apart (a consumer's producer may still
     * be running when another process finished and left). */
    int two[2][2];
    CHECK(pipe(two[0]) == 0 && pipe(two[1]) == 0, "two peers' pipes");
    int ends[2] = {two[0][0], two[1][0]};
    ofl_waiter_init(&w, ends, 2, &abort_word);
    close(two[1][1]);
    rc = 0;
    for (int i = 0; i < 100000 && rc == 0; i++) rc = ofl_wait(&w);
    CHECK(rc == -EPIPE && w.dead_peers == 2u, "the second peer gone: dead_peers %u",
          w.dead_peers);
    close(two[0][1]);
    close(two[0][0]);
    close(two[1][0]);

    ofl_waiter_init(&w, NULL, 0, &abort_word);
    abort_word = 1;
    CHECK(ofl_wait(&w) == -ECANCELED && ofl_waiter_check(&w) == -ECANCELED,
          "abort word: -ECANCELED");
}

/* A core whose waiter found one peer gone (which then reports only that) still ends
 * on the abort word: a shard's store, fed by the host while its sibling shard was the
 * peer that died, ran on until killed (tests/test_remote_kvs.py). */
static void test_core_idle_abort_after_a_peer(void)
{
    volatile uint32_t abort_word = 0;
    struct ofl_core c;
    memset(&c, 0, sizeof c);
    c.abort = &abort_word;
    int two[2][2];
    CHECK(pipe(two[0]) == 0 && pipe(two[1]) == 0, "two peers' pipes");
    int ends[2] = {two[0][0], two[1][0]};
    ofl_waiter_init(&c.waiter, ends, 2, &abort_word);
    close(two[1][1]);   /* the second peer ends; the first (the producer) still runs */
    for (int i = 0; i < 100000 && !c.peer_gone; i++) ofl_core_idle(&c, 0);
    CHECK(c.peer_gone == 2 && c.err == 0, "the second peer gone, no error: %d %d",
          c.peer_gone, c.err);
    abort_word = 1;
    ofl_core_idle(&c, 0);
    CHECK(c.err == -ECANCELED, "then the abort ends it: %s", ofl_strerror(c.err));
    ofl_core_destroy(&c);   /* (its error's text) */
    memset(&c, 0, sizeof c);   /* the same after a turn that moved something */
    c.abort = &abort_word;
    abort_word = 0;
    ofl_waiter_init(&c.waiter, ends, 2, &abort_word);
    for (int i = 0; i < 100000 && !c.peer_gone; i++) ofl_core_idle(&c, 0);
    abort_word = 1;
    ofl_core_idle(&c, 1);
    CHECK(c.err == -ECANCELED, "after progress too: %s", ofl_strerror(c.err));
    ofl_core_destroy(&c);
    close(two[0][1]);
    close(two[0][0]);
    close(two[1][0]);
}

/* An element's FAIL (ofl_core_fail_element): its error is OFL_EFAIL, its text the
 * element's name and the formatted text, whole however long; the abort word raised; a
 * second failure keeps the first; the text freed by ofl_core_destroy (LeakSanitizer). */
static void test_core_fail_element(void)
{
    volatile uint32_t abort_word = 0;
    struct ofl_core c;
    memset(&c, 0, sizeof c);
    c.abort = &abort_word;
    char name[300];
    memset(name, 'm', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    ofl_core_fail_element(&c, name, "quota of %d frames used up (%s)", 999, "frame 1000");
    char want[400];
    snprintf(want, sizeof want, "element %s: quota of 999 frames used up (frame 1000)", name);
    CHECK(c.err == OFL_EFAIL && strcmp(ofl_strerror(c.err), "failed by the element") == 0,
          "the element's error: %d %s", c.err, ofl_strerror(c.err));
    CHECK(c.where && strcmp(c.where, want) == 0, "its whole text: %s", c.where ? c.where : "-");
    CHECK(abort_word == 1, "the abort word raised");
    CHECK(!ofl_core_err_secondary(c.err), "said as the cause, not as a secondary failure");
    ofl_core_fail_element(&c, "other", "later");
    CHECK(strcmp(c.where, want) == 0, "a second failure keeps the first");
    ofl_core_destroy(&c);
}

/* A timed waiter sums the time of each wait episode (first ofl_wait to the
 * ofl_waiter_progress that ends it), not the work between episodes; an untimed one
 * sums nothing. */
static void test_waiter_accounting(void)
{
    volatile uint32_t abort_word = 0;
    struct ofl_waiter w, plain;
    ofl_waiter_init(&w, NULL, 0, &abort_word);
    ofl_waiter_init(&plain, NULL, 0, &abort_word);
    w.timed = true;
    uint64_t t0 = ofl_now_ns();
    for (int i = 0; i < 200; i++) {
        CHECK(ofl_wait(&w) == 0 && ofl_wait(&plain) == 0, "a wait");
    }
    ofl_waiter_progress(&w);
    ofl_waiter_progress(&plain);
    uint64_t episode = ofl_now_ns() - t0, first = w.waited_ns;
    CHECK(first > 0 && first <= episode, "an episode's time: %llu of %llu ns",
          (unsigned long long)first, (unsigned long long)episode);
    CHECK(plain.waited_ns == 0 && !plain.in_wait, "untimed: nothing summed");
    volatile uint64_t acc = 1;  /* work between episodes: not a wait */
    for (uint64_t i = 0; i < 2000000; i++) acc = acc * 31u + i;
    ofl_waiter_progress(&w);
    CHECK(w.waited_ns == first, "progress without a wait adds nothing");
    CHECK(ofl_wait(&w) == 0 && w.in_wait, "a second episode begins");
    ofl_waiter_progress(&w);
    CHECK(w.waited_ns >= first && !w.in_wait, "and ends at progress");
}

/* ofl_spin_pause (the spin lock's and the tools' idle turns): a pause each turn, the
 * OFL_WAIT_SPINS-th a yield that starts the count over. */
static void test_spin_pause(void)
{
    uint32_t spins = 0;
    for (uint32_t i = 1; i < OFL_WAIT_SPINS; i++) ofl_spin_pause(&spins);
    CHECK(spins == OFL_WAIT_SPINS - 1, "%u turns counted (%u)", OFL_WAIT_SPINS - 1, spins);
    ofl_spin_pause(&spins);
    CHECK(spins == 0, "turn %u yields and starts over (%u)", OFL_WAIT_SPINS, spins);
    ofl_spin_pause(&spins);
    CHECK(spins == 1, "and counts again (%u)", spins);
}

static void test_file(const char *dir)
{
    /* A regular file: written, read back whole, NUL after the data. */
    size_t big = 70000 + 123;   /* > the pipe's 60000 below */
    uint8_t *src = malloc(big);
    for (size_t i = 0; i < big; i++) src[i] = (uint8_t)(i * 7 + 1);
    CHECK(ofl_file_write(dir, "f.bin", src, big) == 0, "write %zu bytes", big);
    void *p = NULL;
    size_t n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/f.bin", dir);
    CHECK(ofl_file_read(path, &p, &n) == 0 && n == big && !memcmp(p, src, big) &&
              ((char *)p)[n] == 0, "read back %zu bytes, NUL after them", n);
    free(p);
    /* Rewritten shorter: truncated, not overlaid. */
    CHECK(ofl_file_write(dir, "f.bin", "abc", 3) == 0, "rewrite 3 bytes");
    CHECK(ofl_file_read(path, &p, &n) == 0 && n == 3 && !strcmp(p, "abc"), "read 3 bytes");
    free(p);
    /* Empty. */
    CHECK(ofl_file_write(dir, "empty", "", 0) == 0, "write an empty file");
    snprintf(path, sizeof path, "%s/empty", dir);
    CHECK(ofl_file_read(path, &p, &n) == 0 && n == 0 && p && ((char *)p)[0] == 0,
          "empty file: 0 bytes, a buffer");
    free(p);
    /* A stream (a pipe): no size to ask for, grown as it reads. */
    int fds[2];
    size_t plen = 60000;
    CHECK(pipe(fds) == 0, "pipe");
    CHECK(write(fds[1], src, plen) == (ssize_t)plen, "fill the pipe");
    close(fds[1]);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    CHECK(ofl_file_read(path, &p, &n) == 0 && n == plen && !memcmp(p, src, plen),
          "pipe: %zu bytes", n);
    free(p);
    close(fds[0]);
    /* Errors: the errno, nothing allocated. */
    snprintf(path, sizeof path, "%s/missing", dir);
    p = src;
    n = 9;
    int rc = ofl_file_read(path, &p, &n);
    CHECK(rc == -ENOENT && !p && n == 0, "missing file: %s", ofl_strerror(rc));
    rc = ofl_file_read(dir, &p, &n);
    CHECK(rc == -EISDIR && !p && n == 0, "a directory: %s", ofl_strerror(rc));
    rc = ofl_file_write(path, "x", "abc", 3);
    CHECK(rc == -ENOENT, "write into a missing directory: %s", ofl_strerror(rc));
    memset(path, 'a', sizeof path - 1);
    path[sizeof path - 1] = 0;
    rc = ofl_file_write(dir, path, "abc", 3);
    CHECK(rc == -ENAMETOOLONG, "a name past PATH_MAX: %s", ofl_strerror(rc));
    rc = ofl_file_write(NULL, "/proc/version", "abc", 3);
    CHECK(rc < 0, "an unwritable path: %s", ofl_strerror(rc));
    rc = ofl_file_write(NULL, "/dev/full", "abc", 3);
    CHECK(rc == -ENOSPC, "a write that fails after the open: %s", ofl_strerror(rc));
    free(src);
}

/* A device process of a run whose runner (this process) holds the write end of
 * `life`: it blocks the stop signals, watches the runner, and either loops until a
 * stop is pending (`obeys`: then exits 0 after removing the run's files) or never
 * stops (the lifeline ends it). */
static void lifeline_child(int life[2], const char *win, const char *stats, int obeys)
{
    close(life[1]);
    volatile uint32_t abort_word = 0;
    if (ofl_stop_signals_block() < 0) _exit(3);
    struct ofl_lifeline l;
    if (ofl_lifeline_start(&l, life[0], &abort_word, win, stats, NULL) < 0) _exit(4);
    __atomic_store_n(&l.grace_ns, 50000000ull, __ATOMIC_RELAXED);
    for (;;) {
        if (obeys && ofl_stop_requested()) {
            ofl_lifeline_finish(&l);
            _exit(ofl_lifeline_gone(&l) ? 0 : 6);
        }
        usleep(1000);
    }
}

/* Run a child as above, end the "runner" (close the write end) and return the
 * child's exit status (or 128 + its signal). */
static int lifeline_run(const char *win, const char *stats, int obeys)
{
    int life[2];
    if (pipe(life) < 0) return -1;
    FILE *f = fopen(win, "w");
    if (f) fclose(f);
    f = fopen(stats, "w");
    if (f) fclose(f);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) lifeline_child(life, win, stats, obeys);
    close(life[0]);
    usleep(20000);
    int alive = waitpid(pid, NULL, WNOHANG) == 0;
    CHECK(alive, "a process with its runner alive goes on");
    close(life[1]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A run folder `dir`/offlow-run-1-TAG with a stats file host.json in it, and a window
 * file `dir`/win-TAG beside it (paths in folder[4096], win[4200], stats[4200]). */
static void run_files(const char *dir, const char *tag, char *folder, char *win, char *stats)
{
    snprintf(folder, 4096, "%s/offlow-run-1-%s", dir, tag);
    snprintf(win, 4200, "%s/win-%s", dir, tag);
    snprintf(stats, 4200, "%s/host.json", folder);
    CHECK(mkdir(folder, 0700) == 0, "a run folder");
    FILE *f = fopen(win, "w");
    FILE *g = fopen(stats, "w");
    CHECK(f && g, "a window and a stats file");
    if (f) fclose(f);
    if (g) fclose(g);
}

/* The device process of a runner that exits while a sibling (standing for the
 * runner's threads, which SIGKILL ends one by one) still holds the pipe for 50 ms:
 * reparented at once, it finishes before the pipe closes; finish must still remove
 * the run's files. Writes 'y' (removed) or 'n' to `res`. */
static void lifeline_orphan(const char *win, const char *stats, int res)
{
    int life[2], ready[2];
    if (pipe(life) < 0 || pipe(ready) < 0) _exit(2);
    if (fork() == 0) {
        close(life[1]);
        close(ready[0]);
        struct ofl_lifeline l;
        if (ofl_stop_signals_block() < 0 || ofl_lifeline_start(&l, life[0], NULL, win, stats, NULL) < 0)
            _exit(4);
        /* (the runner waits for this: started after it exited, the lifeline would take
         * init for the runner and never see the reparenting this test is about) */
        if (write(ready[1], "r", 1) != 1) _exit(6);
        close(ready[1]);
        for (int i = 0; i < 5000 && getppid() == l.parent; i++) usleep(1000);
        ofl_lifeline_finish(&l);
        struct stat st;
        char ok = stat(win, &st) < 0 && stat(stats, &st) < 0 ? 'y' : 'n';
        if (write(res, &ok, 1) != 1) _exit(5);
        _exit(0);
    }
    close(ready[1]);
    char r;
    if (read(ready[0], &r, 1) != 1) _exit(7);
    if (fork() == 0) {
        close(life[0]);
        close(res);
        close(ready[0]);
        usleep(50000);
        _exit(0);
    }
    _exit(0);
}

static void test_lifeline_reparented(const char *dir)
{
    char folder[4096], win[4200], stats[4200];
    run_files(dir, "orphan", folder, win, stats);
    int res[2];
    CHECK(pipe(res) == 0, "a pipe");
    fflush(stdout);
    pid_t runner = fork();
    if (runner == 0) {
        close(res[0]);
        lifeline_orphan(win, stats, res[1]);
    }
    close(res[1]);
    waitpid(runner, NULL, 0);
    char ok = 0;
    ssize_t n = read(res[0], &ok, 1);
    close(res[0]);
    struct stat st;
    CHECK(n == 1 && ok == 'y' && stat(folder, &st) < 0,
          "reparented before the runner's pipe closed: finish waits and removes the run's "
          "files (read %zd, '%c')", n, ok ? ok : '0');
}

static void test_lifeline(const char *dir)
{
    struct ofl_lifeline l;
    CHECK(ofl_lifeline_start(&l, -1, NULL, NULL, NULL, NULL) == 0 && !ofl_lifeline_gone(&l),
          "no runner to watch: nothing watched");
    ofl_lifeline_finish(&l);
    int fd = open(dir, O_RDONLY);
    CHECK(ofl_lifeline_start(&l, fd, NULL, NULL, NULL, NULL) == -EBADF, "not a pipe: -EBADF");
    close(fd);
    char folder[4096], win[4200], stats[4200];
    for (int obeys = 1; obeys >= 0; obeys--) {
        snprintf(folder, sizeof folder, "%s/offlow-run-1-%d", dir, obeys);
        snprintf(win, sizeof win, "%s/win%d", dir, obeys);
        snprintf(stats, sizeof stats, "%s/host.json", folder);
        CHECK(mkdir(folder, 0700) == 0, "a run folder");
        int rc = lifeline_run(win, stats, obeys);
        CHECK(rc == (obeys ? 0 : 1), "runner gone: the process %s (status %d)",
              obeys ? "stops as on SIGTERM" : "that does not stop ends itself", rc);
        struct stat st;
        CHECK(stat(win, &st) < 0 && stat(stats, &st) < 0 && stat(folder, &st) < 0,
              "its window, stats file and run folder are removed");
    }
    /* The process ends on its own after the runner went (its serve loop saw getppid
     * change) before the watching thread woke: finish still cleans up. A lifeline
     * whose thread never ran stands for that moment. */
    int life[2];
    CHECK(pipe(life) == 0, "a pipe");
    run_files(dir, "early", folder, win, stats);
    char live[4300];
    snprintf(live, sizeof live, "%s.live", stats);
    FILE *h = fopen(live, "w");
    CHECK(h != NULL, "a live copy of the stats file");
    if (h) fclose(h);
    struct ofl_lifeline early = {.fd = life[0], .window = win, .stats = stats,
                                 .parent = (int)getppid()};
    struct stat st;
    ofl_lifeline_finish(&early);
    CHECK(stat(win, &st) == 0 && stat(stats, &st) == 0,
          "the runner alive: finish removes nothing");
    close(life[1]);
    ofl_lifeline_finish(&early);
    CHECK(stat(win, &st) < 0 && stat(stats, &st) < 0 && stat(live, &st) < 0 &&
          stat(folder, &st) < 0,
          "the runner gone before the thread saw it: finish removes its files (the live "
          "copy too) and its folder");
    close(life[0]);
}

/* A live copy's body for the tests: `arg` is the number of 'x' in member "pad". */
static void live_pad(struct ofl_json *j, const void *arg)
{
    static char pad[2048];
    size_t n = *(const size_t *)arg;
    memset(pad, 'x', n);
    pad[n] = 0;
    ofl_json_str(j, "pad", pad);
}

/* The whole of file `path` (NULL when it cannot be read); the caller frees it. */
static char *slurp(const char *path)
{
    void *p = NULL;
    size_t n = 0;
    return ofl_file_read(path, &p, &n) == 0 ? p : NULL;
}

static void test_live_file(const char *dir)
{
    char stats[4096], live[4200], tmp[4200];
    snprintf(stats, sizeof stats, "%s/dev.json", dir);
    snprintf(live, sizeof live, "%s.live", stats);
    snprintf(tmp, sizeof tmp, "%s.live.tmp", stats);
    size_t pad = 3;
    struct stat st;
    CHECK(ofl_live_write(NULL, "dev", 1, false, live_pad, &pad) == 0 && stat(live, &st) < 0,
          "no stats file (no --stats): nothing written");
    CHECK(ofl_live_write(stats, "dev", 7, false, live_pad, &pad) == 0, "a live copy");
    char *text = slurp(live);
    CHECK(text && strstr(text, "\"device\":\"dev\"") && strstr(text, "\"live_seq\":7") &&
              strstr(text, "\"now_ns\":") && strstr(text, "\"pad\":\"xxx\"") &&
              !strstr(text, "live_final") && stat(tmp, &st) < 0,
          "its header members, then the body's; no file left beside it: %s", text);
    free(text);
    CHECK(ofl_live_write(stats, "dev", 8, true, live_pad, &pad) == 0, "the last copy");
    text = slurp(live);
    CHECK(text && strstr(text, "\"live_seq\":8") && strstr(text, "\"live_final\":1"),
          "the last copy says so: %s", text);
    free(text);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no-such-folder/dev.json", dir);
    CHECK(ofl_live_write(missing, "dev", 1, false, live_pad, &pad) == -ENOENT,
          "a folder that is gone: -ENOENT");
    char *longpath = malloc(5000);
    memset(longpath, 'a', 4999);
    longpath[4999] = 0;
    CHECK(ofl_live_write(longpath, "dev", 1, false, live_pad, &pad) == -ENAMETOOLONG,
          "a path too long: -ENAMETOOLONG");
    free(longpath);
    /* A copy whose end cannot be written (here: the file size limit, hit when the
     * stream's buffer is written at the close) is not renamed over the last whole one. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {200, 200};
        size_t big = 1000;  /* beyond the limit, within one buffer of the stream */
        if (setrlimit(RLIMIT_FSIZE, &lim) < 0) _exit(3);
        _exit(ofl_live_write(stats, "dev", 9, false, live_pad, &big) == -EFBIG ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "a copy cut short by a write error at its close: -EFBIG (status %d)", status);
    text = slurp(live);
    CHECK(text && strstr(text, "\"live_seq\":8") && strstr(text, "\"live_final\":1") &&
              stat(tmp, &st) < 0,
          "and the previous copy stays, whole; nothing left beside it: %s", text);
    free(text);
}

/* What a live-stats thread was asked (ofl_live_fn). */
struct live_calls {
    uint32_t n, last; /* atomic */
};

static void live_answer(void *arg, uint32_t seq)
{
    struct live_calls *c = arg;
    __atomic_store_n(&c->last, seq, __ATOMIC_RELEASE);
    __atomic_add_fetch(&c->n, 1, __ATOMIC_ACQ_REL);
}

/* Wait up to 2 s for `c` to have answered `seq`. */
static int live_answered(struct live_calls *c, uint32_t seq)
{
    for (int i = 0; i < 2000; i++) {
        if (__atomic_load_n(&c->last, __ATOMIC_ACQUIRE) == seq) return 1;
        usleep(1000);
    }
    return 0;
}

/* OFFLOW_SIMD caps the level, never raises it above the CPU's, and a name that is no
 * level is an error for ofl_simd_check_env (and ignored by ofl_simd_level). */
static void test_simd(void)
{
    char err[256];
    enum ofl_simd cpu = ofl_simd_cpu(), s;
    CHECK(unsetenv("OFFLOW_SIMD") == 0, "OFFLOW_SIMD unset");
    CHECK(ofl_simd_level() == cpu, "unset: the CPU's level (%s)", ofl_simd_name(cpu));
    CHECK(ofl_simd_check_env(err) == 0, "unset: no error");
    for (int i = OFL_SIMD_SCALAR; i <= OFL_SIMD_AVX512; i++) {
        CHECK(ofl_simd_parse(ofl_simd_name((enum ofl_simd)i), &s) == 0 && (int)s == i,
              "%s parses back", ofl_simd_name((enum ofl_simd)i));
        CHECK(setenv("OFFLOW_SIMD", ofl_simd_name((enum ofl_simd)i), 1) == 0, "set");
        CHECK((int)ofl_simd_level() == (i < (int)cpu ? i : (int)cpu), "OFFLOW_SIMD=%s caps at %s",
              ofl_simd_name((enum ofl_simd)i), ofl_simd_name(ofl_simd_level()));
        CHECK(ofl_simd_check_env(err) == 0, "a known name is no error");
    }
    CHECK(setenv("OFFLOW_SIMD", "avx1024", 1) == 0, "set");
    CHECK(ofl_simd_level() == cpu, "an unknown name is ignored by the level");
    CHECK(ofl_simd_check_env(err) == -EINVAL && strstr(err, "avx1024"), "and named by the check: %s", err);
    CHECK(ofl_simd_parse("AVX2", &s) == -EINVAL, "names are lower case");
    CHECK(unsetenv("OFFLOW_SIMD") == 0, "OFFLOW_SIMD unset");
}

static void test_live(void)
{
    volatile uint32_t req = 0;
    struct live_calls c = {0, 99};
    struct ofl_live l;
    CHECK(ofl_live_start(&l, &req, live_answer, &c) == 0, "a live-stats thread starts");
    CHECK(c.n == 1 && c.last == 0, "it answers request 0 before it returns");
    req = 7;
    CHECK(live_answered(&c, 7), "a new request is answered with its number");
    req = 8;
    CHECK(live_answered(&c, 8), "and the next one");
    ofl_live_stop(&l);
    uint32_t n = __atomic_load_n(&c.n, __ATOMIC_ACQUIRE);
    req = 9;
    usleep(3 * (OFL_LIVE_POLL_NS / 1000));
    CHECK(c.n == n && c.last == 8, "stopped: no more answers");
    ofl_live_stop(&l); /* twice is fine */
    struct ofl_live never = {0};
    ofl_live_stop(&never);
    CHECK(1, "stopping one never started does nothing");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_misc TMPDIR\n");
        return 2;
    }
    test_strerror();
    test_json();
    test_pin();
    test_waiter();
    test_waiter_accounting();
    test_spin_pause();
    test_core_idle_abort_after_a_peer();
    test_core_fail_element();
    test_file(argv[1]);
    test_live();
    test_live_file(argv[1]);
    test_simd();
    test_lifeline(argv[1]);
    test_lifeline_reparented(argv[1]);
    return CHECK_DONE();
}
