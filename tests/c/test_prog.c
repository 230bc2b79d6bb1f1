/* The program descriptor (gen.h: ofl_prog): what a generated main hands the runtime.
 * A descriptor written here by hand, as the compiler writes one: two segment cores of
 * one process, "a" producing on two rings of queue a->b (dropping when full) from a
 * synthetic source, "b" polling both; a sink; a table with stats and one
 * freed at the end. Checked: --init creates the window and formats every ring;
 * ofl_prog_open attaches each core's ring ends where its core keeps them (and says
 * which ring it cannot attach); ofl_prog_run runs every thread and reports (and
 * raises the window's abort word on) a core's failure; ofl_prog_report writes each
 * core's counters, elements, rings, their mapping and sources, the tables and sinks;
 * ofl_prog_close frees all of it (ASan's leak check) and each table's close runs once.
 * Usage: test_prog TMPDIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "offlow/err.h"
#include "offlow/file.h"
#include "offlow/gen.h"
#include "offlow/live.h"
#include "offlow/ring.h"

#define NEL 2

/* What a generated struct ofl_ctx holds for the runtime (names as the compiler's). */
struct ctx {
    struct ofl_core core;
    uint64_t el_in[NEL], el_drop[NEL], el_used[NEL], el_copies[NEL], el_made[NEL], el_why[2];
    uint64_t el_ticks[NEL];
    uint64_t el_ch_in[2], el_ch_bytes[2];  /* the channels of a->b: 0, 1 */
    struct ofl_qout *out_ab;
    struct ofl_qin *in_ab;
    unsigned nin_ab;
    struct ofl_src *src_gen;
    int fail;                 /* this core's thread fails (ofl_prog_run's error path) */
};

static struct ctx ctxs[2];
static struct ofl_sink *sinks[1];
static uint64_t counts[3] = {7, 0, 9};
static int closed;

static const struct ofl_ring_spec rings[] = {
    {64, 64, 4, 0},
    {64, 64, 4, 0},
};

static const char *const el_names[] = {"parse", "count", NULL};
static const unsigned why_n[] = {2, 0, 0};
static const unsigned why_base[] = {0, 2, 0};
static const char *const why_names[] = {"short", "bad", NULL};
static const char *const ch_queue[] = {"a->b", "a->b", NULL};
static const unsigned ch_index[] = {0, 1, 0};

static const struct ofl_ring_use a_rings[] = {{0, 0, 0, 0, false}, {1, 0, 1, 0, false}};
static const struct ofl_ring_use b_rings[] = {{0, 0, 0, 0, false}, {1, 0, 1, 0, false}};
static const struct ofl_ring_use a_rings_same_thread[] = {{0, 0, 0, 0, true}};
static const struct ofl_qside a_queues[] = {
    {"a->b", &ctxs[0].out_ab, NULL, NULL, a_rings, 2, true, true, -1},  /* enqueue=drop */
};
static const struct ofl_qside b_queues[] = {
    {"a->b", NULL, &ctxs[1].in_ab, &ctxs[1].nin_ab, b_rings, 2, true, false, -1},
};
static const struct ofl_src_use a_sources[] = {{"gen", &ctxs[0].src_gen}};

#define COUNTS(k)                                                                  \
    {ctxs[k].el_in, ctxs[k].el_drop, ctxs[k].el_used, ctxs[k].el_copies, ctxs[k].el_made, \
     ctxs[k].el_why, ctxs[k].el_ch_in, ctxs[k].el_ch_bytes, ctxs[k].el_ticks}

static const struct ofl_core_use cores[] = {
    {&ctxs[0].core, "a", 0, 1, 0, COUNTS(0), a_queues, 1, a_sources, 1},
    {&ctxs[1].core, "b", 0, 1, 1, COUNTS(1), b_queues, 1, NULL, 0},
};

/* As a generated program's: the elements when asked for them, else the length. */
static void table_stats(struct ofl_json *j, const char *name, bool contents)
{
    if (contents) ofl_stats_table(j, name, counts, 3, sizeof counts[0], 0);
    else ofl_stats_table_length(j, name, 3);
}

static void table_close(void) { closed++; }

static const struct ofl_sink_use sink_uses[] = {{"out", &sinks[0], 1}};
static const struct ofl_table_use tables[] = {
    {"counts", table_stats, NULL, false, NULL},
    {"store", NULL, table_close, false, NULL},
};

/* Core a: three entries on instance 0, two on instance 1, then close both rings. */
static void *run_a(void *arg)
{
    struct ctx *c = arg;
    for (int i = 0; i < 5; i++) {
        struct ofl_qout *q = &c->out_ab[i < 3 ? 0 : 1];
        struct ofl_entry_hdr *e = ofl_qout_slot(q);
        if (!e) { ofl_core_fail(&c->core, q->err, "enqueue"); return NULL; }
        e->len = 0;
        c->el_in[0]++;
        c->core.pkts_in++;
    }
    c->el_drop[0] = 1;
    c->el_why[1] = 1;  /* parse dropped one packet: bad */
    for (int i = 0; i < 2; i++)
        if (ofl_qout_close(&c->out_ab[i]) < 0) ofl_core_fail(&c->core, -EIO, "close");
    return NULL;
}

/* Core b: every entry of both rings until each is closed. */
static void *run_b(void *arg)
{
    struct ctx *c = arg;
    int done[2] = {0, 0};
    for (unsigned live = c->nin_ab, i = 0; live; i = (i + 1) % c->nin_ab) {
        const uint8_t *es;
        if (done[i]) continue;
        int n = ofl_qin_next(&c->in_ab[i], &es);
        if (n == OFL_Q_DONE) { done[i] = 1; live--; continue; }
        if (n < 0) { ofl_core_fail(&c->core, n, "dequeue"); return NULL; }
        c->el_in[1] += (uint64_t)n;
        c->el_used[1] += (uint64_t)n;
        c->el_ch_in[1] += (uint64_t)n;     /* as if all were on channel 1 ... */
        c->el_ch_bytes[1] += 60u * (uint64_t)n;  /* ... of 60 B each */
    }
    if (c->fail) ofl_core_fail(&c->core, -EIO, "told to fail");
    return NULL;
}

static const struct ofl_thread_use threads[] = {{run_a, &ctxs[0]}, {run_b, &ctxs[1]}};

static const struct ofl_prog prog = {
    .el_names = el_names, .why_n = why_n, .why_base = why_base, .why_names = why_names,
    .ch_queue = ch_queue, .ch_index = ch_index, .rings = rings, .cores = cores, .ncores = 2, .sinks = sink_uses, .nsinks = 1,
    .tables = tables, .ntables = 2, .threads = threads, .nthreads = 2, .instances = true,
    .mtu = 2048, .bufsize = 4 * 2048,
};

/* The window: header, then the two rings. */
static size_t layout(size_t ring_off[2])
{
    size_t off = OFL_WINDOW_HDR_SIZE;
    for (int i = 0; i < 2; i++) {
        ring_off[i] = off;
        off += ofl_ring_mem_size(rings[i].size, rings[i].entry_size);
    }
    return off;
}

static int contains(const char *text, const char *what)
{
    int ok = strstr(text, what) != NULL;
    if (!ok) printf("  missing: %s\n", what);
    return ok;
}

/* The text of file `path` (the caller frees it), or NULL. */
static char *text_of(const char *path)
{
    size_t len;
    char *text = NULL;
    if (ofl_file_read(path, (void **)&text, &len) < 0) return NULL;
    char *t = realloc(text, len + 1);
    if (!t) { free(text); return NULL; }
    t[len] = 0;
    return t;
}

/* The live copy of `stats` (PATH.live) after ofl_prog_report_live(seq, final): its
 * text (the caller frees it), or NULL. */
static char *live_copy(const char *stats, const struct ofl_args *a, uint32_t seq, bool final)
{
    char path[600];
    snprintf(path, sizeof path, "%s.live", stats);
    CHECK(ofl_prog_report_live(&prog, a, seq, final) == 0, "live copy %u written", seq);
    return text_of(path);
}

/* A live answer carries the shared arrays' elements only when its request asked for
 * them (OFL_LIVE_TABLES) or it is the last one; else each array's length. */
static void live_contents(const char *stats, const struct ofl_args *a)
{
    char *t = live_copy(stats, a, 2, false);
    CHECK(t && contains(t, "\"live_seq\":2,") &&
          contains(t, "\"tables\":{\"counts\":{\"kind\":\"array\",\"length\":3}}") &&
          !strstr(t, "[7,0,9]"), "request 2 (counters): the array's length, no element");
    free(t);
    t = live_copy(stats, a, 4 | OFL_LIVE_TABLES, false);
    CHECK(t && contains(t, "\"live_seq\":5,") &&
          contains(t, "\"tables\":{\"counts\":[7,0,9]}"),
          "request 5 (OFL_LIVE_TABLES): every element");
    free(t);
    t = live_copy(stats, a, 6, true);
    CHECK(t && contains(t, "\"live_final\":1") &&
          contains(t, "\"tables\":{\"counts\":[7,0,9]}"),
          "the last copy (final): every element, whatever the request");
    free(t);
}


/* At exit the stats file and the last live copy come from one serialization: the
 * same members after their heads, every element of the array, and the answers
 * withdrawn (which the last live copy once left out) in both. */
static void last_counts(const char *stats, const struct ofl_args *a)
{
    char path[600];
    snprintf(path, sizeof path, "%s.live", stats);
    ofl_prog_report_last(&prog, a, 3);
    char *file = text_of(stats), *live = text_of(path);
    const char *head = "{\"device\":\"nic\",";
    const char *body = live ? strstr(live, "\"now_ns\":") : NULL;
    body = body ? strchr(body, ',') : NULL;
    CHECK(file && live && !strncmp(file, head, strlen(head)) &&
          contains(live, "\"live_seq\":0,\"live_final\":1,") && body,
          "both written, with their heads");
    CHECK(file && body && !strcmp(file + strlen(head) - 1, body),
          "the same members after the heads");
    CHECK(file && contains(file, "\"tables\":{\"counts\":[7,0,9]}") &&
          contains(file, "\"chan_withdrawn\":3}\n"), "every element, and the withdrawn");
    free(file);
    free(live);
}

/* One whole run: init, open, run, report, close; `fail`: core b fails. */
static void one_run(const char *dir, int fail)
{
    char window[512], stats[512];
    snprintf(window, sizeof window, "%s/window-%d", dir, fail);
    snprintf(stats, sizeof stats, "%s/stats-%d.json", dir, fail);
    char *argv[] = {"test_prog", "--window", window, "--stats", stats, "--opt", "gen.count=5",
                    NULL};
    struct ofl_args a;
    struct ofl_window w;
    size_t ring_off[2];
    size_t wsize = layout(ring_off);
    CHECK(ofl_args_parse(&a, 7, argv, "nic") == 0, "arguments parsed");
    CHECK(ofl_prog_init_window(&w, &a, wsize, rings, 2, ring_off, 0, 0, NULL) == 0,
          "--init: the window is made, its rings formatted");
    CHECK(ofl_proc_open(&w, &a, wsize) == 0, "the window opens at its size");
    struct ofl_ring r;
    CHECK(ofl_ring_attach(&r, ofl_window_at(&w, ring_off[1]),
                          ofl_ring_mem_size(64, 64)) == 0 && r.shm->size == 64,
          "ring 1 is formatted in the window (64 entries)");
    memset(ctxs, 0, sizeof ctxs);
    ctxs[1].fail = fail;
    closed = 0;
    CHECK(ofl_prog_open(&prog, &a, &w, ring_off) == 0, "every core opened");
    CHECK(ctxs[0].out_ab && ctxs[1].in_ab && ctxs[1].nin_ab == 2 && ctxs[0].src_gen &&
          sinks[0], "ring ends, source and sink are where the cores keep them");
    CHECK(ctxs[0].out_ab[0].drop_full && ctxs[0].out_ab[1].drop_full &&
          !ctxs[0].out_ab[0].fail_full, "the producer's ends drop when full (enqueue=drop)");
    CHECK(ctxs[0].core.segment && !strcmp(ctxs[0].core.segment, "a") &&
          ctxs[1].core.cpu == a.cpu_base + 1, "cores named and placed (core 1 on CPU base+1)");
    CHECK(ofl_prog_run(&prog, &w) == fail, "run: %s", fail ? "a core failed" : "no failure");
    uint32_t aborted = ((struct ofl_window_hdr *)w.base)->abort;
    CHECK(!!aborted == fail, "the window's abort word is %s", fail ? "raised" : "left alone");
    CHECK(ctxs[1].el_in[1] == 5, "core b took all 5 entries of both rings");
    if (!fail) last_counts(stats, &a);
    ofl_prog_report(&prog, &a, 0);
    if (!fail) live_contents(stats, &a);
    size_t len;
    char *text = NULL;
    CHECK(ofl_file_read(stats, (void **)&text, &len) == 0, "stats file written");
    if (text) {
        text = realloc(text, len + 1);
        text[len] = 0;
        CHECK(contains(text, "\"segment\":\"a\"") && contains(text, "\"segment\":\"b\""),
              "both cores reported");
        CHECK(contains(text, "\"parse\":{\"in\":5,\"drop\":1,\"consumed\":0,"
                             "\"why\":{\"short\":0,\"bad\":1}}"),
              "core a's element with its counters and drop reasons");
        CHECK(contains(text, "\"count\":{\"in\":5,\"drop\":0,\"consumed\":5}"),
              "core b's element; elements that saw nothing are left out");
        CHECK(contains(text, "{\"queue\":\"a->b\",\"side\":\"out\",\"prod\":0,\"cons\":0,"
                             "\"pushed\":3") &&
              contains(text, "{\"queue\":\"a->b\",\"side\":\"in\",\"prod\":0,\"cons\":0,"
                             "\"pushed\":0,\"popped\":2,"),
              "each ring's producer and consumer ends, in ring order");
        CHECK(contains(text, "\"bytes\":0,\"occupancy_now\":0}"),
              "each ring's occupancy now: every entry released");
        CHECK(contains(text, "\"instances\":[{\"queue\":\"a->b\",\"prod\":0,\"instance\":0,"
                             "\"cons\":0,\"pushed\":3,\"dropped\":0},{\"queue\":\"a->b\","
                             "\"prod\":0,\"instance\":1,\"cons\":0,\"pushed\":2,"
                             "\"dropped\":0}]"),
              "the producer's mapping of its rings (instances)");
        CHECK(contains(text, "\"sources\":{\"gen\":{\"packets\":0"),
              "the source, under its core");
        CHECK(contains(text, "\"channels\":[{\"queue\":\"a->b\",\"channel\":1,"
                             "\"packets\":5,\"bytes\":300}]"),
              "the channel core b took packets from, and only that one");
        CHECK(contains(text, "\"tables\":{\"counts\":[7,0,9]}"), "the table's stats");
        CHECK(contains(text, "\"sinks\":{\"out\":{\"packets\":0"), "the sink");
        CHECK(!fail || contains(text, "\"error\":"), "a failed core says so");
        free(text);
    }
    ofl_prog_close(&prog);
    CHECK(closed == 1, "the table's close ran once");
    CHECK(!ctxs[0].out_ab && !ctxs[1].in_ab && !ctxs[0].src_gen && !sinks[0],
          "ring ends, source and sink freed and forgotten");
    ofl_window_close(&w);
    unlink(window);
}

/* A ring that is not formatted cannot be attached: named in the error. */
static void bad_ring(const char *dir)
{
    char window[512];
    snprintf(window, sizeof window, "%s/window-bad", dir);
    char *argv[] = {"test_prog", "--window", window, NULL};
    struct ofl_args a;
    struct ofl_window w;
    size_t ring_off[2];
    size_t wsize = layout(ring_off);
    CHECK(ofl_args_parse(&a, 3, argv, "nic") == 0, "arguments parsed");
    CHECK(ofl_window_create(&w, window, wsize) == 0, "a window whose rings are not formatted");
    memset(ctxs, 0, sizeof ctxs);
    struct ofl_prog p = prog;
    p.nsinks = 0;
    p.ncores = 1;
    struct ofl_core_use one = cores[0];
    one.nsources = 0;
    p.cores = &one;
    CHECK(ofl_prog_open(&p, &a, &w, ring_off) < 0, "opening fails at the first ring");
    p.ntables = 0;
    ofl_prog_close(&p);
    ofl_window_close(&w);
    unlink(window);
    /* a ring whose consumer runs in the producer's thread fails when full */
    memset(ctxs, 0, sizeof ctxs);
    CHECK(ofl_prog_init_window(&w, &a, wsize, rings, 2, ring_off, 0, 0, NULL) == 0,
          "the window made again, formatted");
    CHECK(ofl_proc_open(&w, &a, wsize) == 0, "and opened");
    struct ofl_qside same = {"a->b", &ctxs[0].out_ab, NULL, NULL, a_rings_same_thread, 1,
                             true, false, -1};
    one.queues = &same;
    CHECK(ofl_prog_open(&p, &a, &w, ring_off) == 0 && ctxs[0].out_ab[0].fail_full &&
          !ctxs[0].out_ab[0].drop_full, "its end fails when full instead of waiting");
    ofl_prog_close(&p);
    ofl_window_close(&w);
    unlink(window);
}

/* An option the user gave (--user-opt) that its source never read is refused when the
 * source opens: the window's abort word is raised (the other processes stop) and the
 * one error, naming the keys the source read, is in STATS.error. Read, or with nothing
 * recorded (a->use NULL: a tool's own args), it is not. */
static void unread_opt(const char *dir)
{
    char window[512], stats[512], errpath[600];
    snprintf(window, sizeof window, "%s/window-opt", dir);
    snprintf(stats, sizeof stats, "%s/stats-opt.json", dir);
    snprintf(errpath, sizeof errpath, "%s.error", stats);
    const char *given[] = {"gen.cuont=7", "gen.count=7", "gen.cuont=7"};
    for (int k = 0; k < 3; k++) {
        char *argv[] = {"test_prog", "--window", window, "--stats", stats, "--opt",
                        "gen.count=5", "--user-opt", (char *)given[k], NULL};
        struct ofl_args a;
        struct ofl_opt_use use;
        struct ofl_window w;
        size_t ring_off[2];
        size_t wsize = layout(ring_off);
        CHECK(ofl_args_parse(&a, 9, argv, "nic") == 0 && a.opt_user[1] && !a.opt_user[0],
              "arguments parsed: the second option is the user's");
        memset(&use, 0, sizeof use);
        if (k < 2) a.use = &use;
        CHECK(ofl_prog_init_window(&w, &a, wsize, rings, 2, ring_off, 0, 0, NULL) == 0 &&
              ofl_proc_open(&w, &a, wsize) == 0, "the window made and opened");
        memset(ctxs, 0, sizeof ctxs);
        unlink(errpath);
        struct ofl_prog pr = prog;
        pr.ntables = 0;   /* (its tables' close counts: none is opened here) */
        int rc = ofl_prog_open(&pr, &a, &w, ring_off);
        uint32_t aborted = ((struct ofl_window_hdr *)w.base)->abort;
        size_t len = 0;
        char *text = NULL;
        bool said = ofl_file_read(errpath, (void **)&text, &len) == 0;
        if (k == 0) {
            CHECK(rc == -EINVAL && aborted, "a misspelt key is refused, the window aborted");
            text = said ? realloc(text, len + 1) : NULL;
            if (text) text[len] = 0;
            const char want[] = "--opt gen.cuont=7: source gen (on nic) takes no option "
                                "`cuont` (it takes ";
            CHECK(text && !strncmp(text, want, sizeof want - 1) && contains(text, " count,") &&
                      contains(text, " loops,"),
                  "the one error names the key and what the source reads: %s", text ? text : "");
        } else {
            CHECK(rc == 0 && !aborted && !said, "%s: opened, nothing said",
                  k == 1 ? "a key the source reads" : "nothing recorded");
        }
        free(text);
        ofl_prog_close(&pr);
        ofl_window_close(&w);
        unlink(window);
        unlink(errpath);
    }
}

/* ofl_prog_fail, a process failing before its first packet (core b's, the consumer
 * of both rings): ring 0's producer had finished and closed it holding 3 entries, ring
 * 1's still runs holding 2. Ring 1 is marked broken by its consumer (its producer
 * counts the 2 at its end); ring 0 keeps its mark and its 3 are written to
 * STATS.untaken as the consumer side's lost, since no end will count them; the window
 * is aborted. */
static void failed_at_start(const char *dir)
{
    char window[512], stats[512], untaken[600];
    snprintf(window, sizeof window, "%s/window-fail", dir);
    snprintf(stats, sizeof stats, "%s/stats-fail-start.json", dir);
    snprintf(untaken, sizeof untaken, "%s.untaken", stats);
    unlink(untaken);
    char *argv[] = {"test_prog", "--window", window, "--stats", stats, NULL};
    struct ofl_args a;
    struct ofl_window w;
    size_t ring_off[2];
    size_t wsize = layout(ring_off);
    CHECK(ofl_args_parse(&a, 5, argv, "host") == 0 &&
              ofl_prog_init_window(&w, &a, wsize, rings, 2, ring_off, 0, 0, NULL) == 0 &&
              ofl_proc_open(&w, &a, wsize) == 0,
          "the window made and opened");
    struct ofl_ring r[2];
    for (int i = 0; i < 2; i++) {
        CHECK(ofl_ring_attach(&r[i], ofl_window_at(&w, ring_off[i]),
                              ofl_ring_mem_size(64, 64)) == 0, "ring %d attached", i);
        ofl_ring_publish(&r[i], i == 0 ? 3 : 2);
    }
    ofl_ring_close(&r[0]);
    CHECK(ofl_ring_close_first(&r[0]) == OFL_RING_CLOSED_FIRST, "ring 0 closed first");
    ofl_prog_fail(&prog, &a, &w, ring_off);
    CHECK(ofl_ring_broken_by(&r[1]) == OFL_RING_BROKEN_BY_CONSUMER,
          "the running producer's ring is broken by its consumer");
    CHECK(ofl_ring_broken_by(&r[0]) == OFL_RING_CLOSED_FIRST, "the closed one keeps its mark");
    CHECK(((struct ofl_window_hdr *)w.base)->abort, "the window is aborted");
    char *text = NULL;
    size_t len = 0;
    bool said = ofl_file_read(untaken, (void **)&text, &len) == 0;
    text = said ? realloc(text, len + 1) : NULL;
    if (text) text[len] = 0;
    CHECK(text && contains(text, "\"device\":\"host\"") &&
              contains(text, "\"queue\":\"a->b\"") && contains(text, "\"side\":\"in\"") &&
              contains(text, "\"lost\":3}") && !strstr(text, "\"lost\":2"),
          "STATS.untaken holds the closed ring's 3 entries only: %s", text ? text : "(none)");
    free(text);
    unlink(untaken);
    ofl_window_close(&w);
    unlink(window);
}

/* ofl_start_failf: the first failure said before the first packet is the one in
 * STATS.error, formatted; a later one (a consequence of the first: a transfer its
 * peer ended) leaves it as it is. */
static void first_failure_kept(const char *dir)
{
    char stats[512], errpath[600];
    snprintf(stats, sizeof stats, "%s/stats-fail.json", dir);
    snprintf(errpath, sizeof errpath, "%s.error", stats);
    unlink(errpath);
    char *argv[] = {"test_prog", "--window", "unused", "--stats", stats, NULL};
    struct ofl_args a;
    CHECK(ofl_args_parse(&a, 5, argv, "nic") == 0, "arguments parsed");
    ofl_start_failf(&a, "source %s: rate=%s is not a rate", "rx", "abc");
    ofl_start_failf(&a, "table %s: receiving it: %s", "routes", "Broken pipe");
    char *text = NULL;
    size_t len = 0;
    bool said = ofl_file_read(errpath, (void **)&text, &len) == 0;
    const char want[] = "source rx: rate=abc is not a rate";
    CHECK(said && len == sizeof want - 1 && !memcmp(text, want, len),
          "STATS.error holds the first failure only: %.*s", said ? (int)len : 0,
          said ? text : "");
    free(text);
    unlink(errpath);
}

/* A table object opened in this process (`opts`): a user's key that neither its open
 * nor its sender asked for is refused, naming what they asked for; a key its sender
 * asked for (its keys from ofl_args_asked, each asked here in turn, as
 * ofl_table_recv does) is not. */
static void unread_table_opt(const char *dir)
{
    char window[512], stats[512], errpath[600];
    snprintf(window, sizeof window, "%s/window-topt", dir);
    snprintf(stats, sizeof stats, "%s/stats-topt.json", dir);
    snprintf(errpath, sizeof errpath, "%s.error", stats);
    static const struct ofl_table_use store[] = {{"store", NULL, NULL, true, NULL}};
    const char *given[] = {"store.sise=2", "store.size=2", "store.path=x"};
    for (int k = 0; k < 3; k++) {
        char *argv[] = {"test_prog", "--window", window, "--stats", stats, "--user-opt",
                        (char *)given[k], NULL};
        struct ofl_args a, sender;
        struct ofl_opt_use use, sender_use;
        struct ofl_window w;
        size_t ring_off[2];
        size_t wsize = layout(ring_off);
        CHECK(ofl_args_parse(&a, 7, argv, "nic") == 0 && ofl_args_parse(&sender, 7, argv,
                                                                          "host") == 0,
              "arguments parsed");
        memset(&use, 0, sizeof use);
        memset(&sender_use, 0, sizeof sender_use);
        a.use = &use;
        sender.use = &sender_use;
        CHECK(ofl_prog_init_window(&w, &a, wsize, rings, 2, ring_off, 0, 0, NULL) == 0 &&
              ofl_proc_open(&w, &a, wsize) == 0, "the window made and opened");
        (void)ofl_args_get(&a, "store", "size", "1");   /* what its open reads here */
        /* its sender read path= (and another table's key): passed on, asked here */
        (void)ofl_args_get(&sender, "store", "path", NULL);
        (void)ofl_args_get(&sender, "storex", "nports", NULL);
        char keys[16];
        size_t n = ofl_args_asked(&sender, "store", keys, sizeof keys);
        CHECK(n == 5 && !memcmp(keys, "path", 5), "the sender's keys of store: path (%zu B)", n);
        CHECK(ofl_args_asked(&sender, "store", keys, 4) == 0, "no part of a key that does not fit");
        sender.use = NULL;
        CHECK(ofl_args_asked(&sender, "store", keys, sizeof keys) == 0, "none unrecorded");
        for (size_t off = 0; off < n; off += strlen(keys + off) + 1)
            (void)ofl_args_get(&a, "store", keys + off, NULL);
        memset(ctxs, 0, sizeof ctxs);
        unlink(errpath);
        struct ofl_prog pr = prog;
        pr.tables = store;
        pr.ntables = 1;
        int rc = ofl_prog_open(&pr, &a, &w, ring_off);
        uint32_t aborted = ((struct ofl_window_hdr *)w.base)->abort;
        size_t len = 0;
        char *text = NULL;
        bool said = ofl_file_read(errpath, (void **)&text, &len) == 0;
        text = said ? realloc(text, len + 1) : NULL;
        if (text) text[len] = 0;
        if (k == 0) {
            const char want[] = "--opt store.sise=2: table store (on nic) takes no option "
                                "`sise` (it takes path, size)";
            CHECK(rc == -EINVAL && aborted && text && !strcmp(text, want),
                  "a misspelt table key is refused, the window aborted: %s", text ? text : "");
        } else {
            CHECK(rc == 0 && !aborted && !said, "%s: opened, nothing said",
                  k == 1 ? "a key its open reads" : "a key its sender read");
        }
        free(text);
        ofl_prog_close(&pr);
        ofl_window_close(&w);
        unlink(window);
        unlink(errpath);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_prog TMPDIR\n");
        return 2;
    }
    one_run(argv[1], 0);
    one_run(argv[1], 1);
    bad_ring(argv[1]);
    unread_opt(argv[1]);
    first_failure_kept(argv[1]);
    failed_at_start(argv[1]);
    unread_table_opt(argv[1]);
    return CHECK_DONE();
}
