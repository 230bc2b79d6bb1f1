/* Incremental updates of the IPv4 table (ofl_lpm4_add, ofl_lpm4_del) against a
 * reference: a plain list of the routes the table should hold, searched by brute
 * force. Cases (/0, /32, overlapping prefixes, deleting a covering route, replacing a
 * hop, errors, tbl8 group exhaustion), random update sequences on random tables, and
 * a lookup thread racing an update thread, every answer checked against the table as
 * it was before or after the updates the lookup overlapped.
 *
 * usage: test_lpm_update [--quick]   (--quick: smaller sets, for sanitizer builds) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctl_reply.h"
#include "offlow/ctl.h"
#include "offlow/lpm4.h"
#include "offlow/lpm_tables.h"
#include "offlow/synth.h"

static int quick;

/* ---- the reference: the routes, unique prefixes ----------------------------------- */

struct ref {
    struct ofl_route4 *v;
    size_t n, cap;
};

static uint32_t mask(unsigned len)
{
    return len ? ~(uint32_t)0 << (32 - len) : 0;
}

static size_t ref_find(const struct ref *r, uint32_t a, unsigned len)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].len == len && r->v[i].addr == (a & mask(len))) return i;
    return r->n;
}

static void ref_add(struct ref *r, uint32_t a, unsigned len, uint16_t hop)
{
    size_t i = ref_find(r, a, len);
    if (i == r->n) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->v = realloc(r->v, r->cap * sizeof *r->v);
        }
        r->n++;
    }
    r->v[i] = (struct ofl_route4){a & mask(len), hop, (uint8_t)len};
}

static int ref_del(struct ref *r, uint32_t a, unsigned len)
{
    size_t i = ref_find(r, a, len);
    if (i == r->n) return 0;
    r->v[i] = r->v[--r->n];
    return 1;
}

static uint16_t ref_lookup(const struct ref *r, uint32_t a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < r->n; i++)
        if ((a & mask(r->v[i].len)) == r->v[i].addr && (int)r->v[i].len > best) {
            best = r->v[i].len;
            hop = r->v[i].hop;
        }
    return hop;
}

/* Mismatches of t against r on the edges of every route (first, last, their
 * neighbours) and `nrand` random addresses of `g`; scalar and batch. */
static size_t compare(const struct ofl_lpm4 *t, const struct ref *r, size_t nrand,
                      struct ofl_rng *g)
{
    size_t m = 4 * r->n + nrand, k = 0, bad = 0;
    uint32_t *a = calloc(m + 1, sizeof *a);
    uint16_t *h = malloc((m + 1) * sizeof *h);
    for (size_t i = 0; i < r->n; i++) {
        uint32_t first = r->v[i].addr, last = first | ~mask(r->v[i].len);
        a[k++] = first;
        a[k++] = last;
        a[k++] = first - 1;
        a[k++] = last + 1;
    }
    for (size_t i = 0; i < nrand; i++) a[k++] = (uint32_t)ofl_rng_next(g);
    ofl_lpm4_lookup_batch(t, a, h, (unsigned)m);
    for (size_t i = 0; i < m; i++) {
        uint16_t want = ref_lookup(r, a[i]), got = ofl_lpm4_lookup(t, a[i]);
        if ((got != want || h[i] != want) && bad++ < 5)
            printf("  %08x: scalar %u, batch %u, reference %u\n", a[i], got, h[i], want);
    }
    free(a);
    free(h);
    return bad;
}

/* ---- cases ------------------------------------------------------------------------- */

static void test_cases(void)
{
    char err[256] = "";
    struct ofl_lpm4 *t;
    struct ref r = {0};
    struct ofl_rng g = {11};
    CHECK(ofl_lpm4_build(&t, NULL, 0, err) == 0, "empty table %s", err);

    /* Nested, added shortest first and longest first, across a /16 and a /24. */
    static const struct { uint32_t a; uint8_t len; uint16_t hop; } add[] = {
        {0x0A010203, 32, 5}, {0x0A010280, 25, 4}, {0x0A010200, 24, 3}, {0x0A000000, 8, 1},
        {0x00000000, 0, 9}, {0x0A010000, 16, 2}, {0x0A010000, 17, 6}, {0xC0A80000, 12, 7},
        {0xFFFFFFFF, 32, 8}, {0x00000000, 32, 10}, {0x0A010204, 30, 11},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof add / sizeof add[0]; i++) {
        rc |= ofl_lpm4_add(t, add[i].a, add[i].len, add[i].hop, err);
        ref_add(&r, add[i].a, add[i].len, add[i].hop);
    }
    CHECK(rc == 0 && compare(t, &r, 2000, &g) == 0 && t->updates == 11,
          "11 nested adds (/0, /32s at both ends, /8 after /32): %llu updates %s",
          (unsigned long long)t->updates, err);

    /* Delete the covering routes: what they covered takes the next shorter one. */
    rc = ofl_lpm4_del(t, 0x0A000000, 8, err) | ofl_lpm4_del(t, 0x0A010200, 24, err);
    ref_del(&r, 0x0A000000, 8);
    ref_del(&r, 0x0A010200, 24);
    CHECK(rc == 0 && compare(t, &r, 2000, &g) == 0 && ofl_lpm4_lookup(t, 0x0A020000) == 9 &&
          ofl_lpm4_lookup(t, 0x0A010201) == 6, "delete /8 and /24 under longer routes: "
          "they fall back to /0 and /17 %s", err);
    rc = ofl_lpm4_del(t, 0, 0, err);
    ref_del(&r, 0, 0);
    CHECK(rc == 0 && compare(t, &r, 2000, &g) == 0 && ofl_lpm4_lookup(t, 0x0B000000) == 0,
          "delete /0: unrouted is 0 %s", err);

    /* Replace a hop; re-add what was deleted. */
    rc = ofl_lpm4_add(t, 0x0A010280, 25, 12, err) | ofl_lpm4_add(t, 0x0A000000, 8, 13, err);
    ref_add(&r, 0x0A010280, 25, 12);
    ref_add(&r, 0x0A000000, 8, 13);
    CHECK(rc == 0 && compare(t, &r, 2000, &g) == 0 && ofl_lpm4_route(t, 0x0A010280, 25) == 12,
          "replace a /25's hop, add the /8 back %s", err);

    /* Errors leave the table unchanged. */
    uint64_t updates = t->updates;
    err[0] = 0;
    int e1 = ofl_lpm4_add(t, 0, 33, 1, err);
    int e2 = ofl_lpm4_add(t, 0, 8, 0, err);
    int e3 = ofl_lpm4_add(t, 0, 8, OFL_ROUTE_MAX_HOP + 1, err);
    int e4 = ofl_lpm4_del(t, 0x0B000000, 8, err);
    CHECK(e1 == -EINVAL && e2 == -EINVAL && e3 == -EINVAL && e4 == -ENOENT &&
          strstr(err, "no route 11.0.0.0/8") && t->updates == updates &&
          compare(t, &r, 2000, &g) == 0, "/33, hop 0, hop 0x8000: -EINVAL; a route "
          "it lacks: -ENOENT (%s); table unchanged", err);
    ofl_lpm4_free(t);
    free(r.v);
}

/* Every tbl8 group used: one more /24 with a longer prefix is refused, the table
 * unchanged; a longer prefix in a /24 that has a group still fits; deleting leaves
 * the groups in place. */
static void test_group_exhaustion(void)
{
    char err[256] = "";
    struct ofl_lpm4 *t;
    size_t ng = OFL_LPM4_MAX_GROUPS;
    struct ofl_route4 *g = malloc(ng * sizeof *g);
    for (size_t i = 0; i < ng; i++) g[i] = (struct ofl_route4){(uint32_t)i << 9, 1 + i % 7, 25};
    int rc = ofl_lpm4_build(&t, g, ng - 1, err);
    int last = ofl_lpm4_add(t, g[ng - 1].addr, 25, g[ng - 1].hop, err);
    uint32_t next = (uint32_t)ng << 9;
    err[0] = 0;
    int over = ofl_lpm4_add(t, next, 26, 3, err);
    CHECK(rc == 0 && last == 0 && t->groups == OFL_LPM4_MAX_GROUPS && over == -ENOSPC &&
          strstr(err, "tbl8 groups") && ofl_lpm4_lookup(t, next) == 0 &&
          ofl_lpm4_route(t, next, 26) == 0, "group 2^15 added live; one more refused "
          "(%s), table unchanged", err);
    rc = ofl_lpm4_add(t, 5u << 9 | 0x10, 28, 99, err);
    int del = ofl_lpm4_del(t, 0, 25, err);
    CHECK(rc == 0 && ofl_lpm4_lookup(t, 5u << 9 | 0x1F) == 99 && del == 0 &&
          ofl_lpm4_lookup(t, 0) == 0 && ofl_lpm4_lookup(t, 5u << 9) == g[5].hop &&
          t->groups == OFL_LPM4_MAX_GROUPS, "a /28 in a /24 with a group still fits; "
          "a delete keeps the groups %s", err);
    ofl_lpm4_free(t);
    free(g);
}

/* ---- random sequences --------------------------------------------------------------- */

/* A random prefix: mostly inside the region `base`/12 (so updates overlap), sometimes
 * anywhere, any length 0..32 with /0, /8, /16, /24, /25 and /32 favoured. */
static void rand_prefix(struct ofl_rng *g, uint32_t base, uint32_t *a, uint8_t *len)
{
    static const uint8_t fav[] = {0, 8, 16, 24, 25, 32, 12, 20, 28};
    unsigned k = (unsigned)ofl_rng_below(g, 10);
    *len = k < 4 ? fav[ofl_rng_below(g, sizeof fav)] : (uint8_t)ofl_rng_below(g, 33);
    uint32_t x = (uint32_t)ofl_rng_next(g);
    *a = (k < 8 ? (base & 0xFFF00000u) | (x & 0x000FFFFFu) : x) & mask(*len);
}

static void test_random_updates(void)
{
    char err[256] = "";
    unsigned seeds = quick ? 2 : 4, steps = quick ? 1500 : 4000;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        struct ofl_rng g = {seed * 7919};
        uint32_t base = (uint32_t)ofl_rng_next(&g);
        struct ref r = {0};
        /* start from a built table of 300 random routes */
        struct ofl_route4 init[300];
        for (size_t i = 0; i < 300; i++) {
            rand_prefix(&g, base, &init[i].addr, &init[i].len);
            init[i].hop = (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP));
            ref_add(&r, init[i].addr, init[i].len, init[i].hop);
        }
        struct ofl_lpm4 *t;
        int rc = ofl_lpm4_build(&t, init, 300, err);
        size_t bad = 0, dels = 0, missing = 0;
        for (unsigned s = 0; rc == 0 && s < steps; s++) {
            uint32_t a;
            uint8_t len;
            if (ofl_rng_below(&g, 3) == 0 && r.n) {   /* delete one it holds */
                const struct ofl_route4 *v = &r.v[ofl_rng_below(&g, r.n)];
                a = v->addr;
                len = v->len;
                rc = ofl_lpm4_del(t, a, len, err);
                ref_del(&r, a, len);
                dels++;
            } else if (ofl_rng_below(&g, 20) == 0) {   /* delete one it may lack */
                rand_prefix(&g, base, &a, &len);
                int want = ref_del(&r, a, len) ? 0 : -ENOENT;
                int got = ofl_lpm4_del(t, a, len, err);
                missing += got == -ENOENT;
                rc = got == want ? 0 : -1;
            } else {
                rand_prefix(&g, base, &a, &len);
                uint16_t hop = (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP));
                rc = ofl_lpm4_add(t, a, len, hop, err);
                ref_add(&r, a, len, hop);
            }
            /* the prefix's edges every step, everything now and then */
            uint32_t edge[4] = {a, a | ~mask(len), a - 1, (a | ~mask(len)) + 1};
            for (int i = 0; i < 4; i++) bad += ofl_lpm4_lookup(t, edge[i]) != ref_lookup(&r, edge[i]);
            if (s % 500 == 499) bad += compare(t, &r, 500, &g);
        }
        if (rc == 0) bad += compare(t, &r, 5000, &g);
        CHECK(rc == 0 && bad == 0, "seed %llu: %u random adds and deletes (%zu deletes, "
              "%zu of routes it lacked) on 300 routes: %zu mismatches, %u groups, %u blocks %s",
              (unsigned long long)seed, steps, dels, missing, bad, t ? t->groups : 0,
              t ? t->blocks : 0, rc ? err : "");
        ofl_lpm4_free(t);
        free(r.v);
    }
}

/* ---- a lookup thread racing the updates --------------------------------------------- */

#define RACE_ADDRS 1024

struct race {
    struct ofl_lpm4 *t;
    uint32_t addr[RACE_ADDRS];
    uint16_t *want;          /* (updates + 1) x RACE_ADDRS: each address's answer after k */
    unsigned updates;
    unsigned started, done;  /* updates begun, finished (atomics) */
    size_t batches;          /* lookup batches done (atomic: the updater waits on it) */
    size_t lookups, raced, bad;
    size_t during, inside;   /* batches begun while an update ran; run wholly inside one */
};

static void *reader(void *arg)
{
    struct race *x = arg;
    uint16_t h[64];
    for (unsigned i = 0;; i = (i + 64) % RACE_ADDRS) {
        unsigned s0 = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);
        unsigned b0 = __atomic_load_n(&x->started, __ATOMIC_ACQUIRE);
        if (i % 128) {
            ofl_lpm4_lookup_batch(x->t, &x->addr[i], h, 64);
        } else {
            for (unsigned j = 0; j < 64; j++) h[j] = ofl_lpm4_lookup(x->t, x->addr[i + j]);
        }
        unsigned s1 = __atomic_load_n(&x->started, __ATOMIC_ACQUIRE);
        unsigned d1 = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);
        for (unsigned j = 0; j < 64; j++) {
            int ok = 0;
            for (unsigned k = s0; k <= s1 && !ok; k++)
                ok = x->want[(size_t)k * RACE_ADDRS + i + j] == h[j];
            if (!ok && x->bad++ < 5)
                printf("  %08x: %u, not the answer after any of updates %u..%u\n",
                       x->addr[i + j], h[j], s0, s1);
        }
        x->lookups += 64;
        x->raced += s1 > s0;
        x->during += b0 > s0;  /* an update had begun and not finished */
        /* The whole batch ran while one update was being applied (begun, not done). */
        x->inside += b0 == s1 && s0 == d1 && s1 == s0 + 1;
        __atomic_add_fetch(&x->batches, 1, __ATOMIC_RELEASE);
        if (s0 == x->updates) return NULL;
    }
}

/* A prefix for the race: inside 10.1.0.0/16 (where the lookups are), lengths 16..32
 * (tbl24 entries, copies of blocks and groups), now and then one covering the /16. */
static void race_prefix(struct ofl_rng *g, uint32_t *a, uint8_t *len)
{
    static const uint8_t cover[] = {0, 8, 12, 15};
    *len = ofl_rng_below(g, 10) ? (uint8_t)(16 + ofl_rng_below(g, 17))
                                : cover[ofl_rng_below(g, sizeof cover)];
    *a = (0x0A010000u | ((uint32_t)ofl_rng_next(g) & 0xFFFF)) & mask(*len);
}

/* One round on a fresh table (so that blocks and groups are copied again): `n`
 * updates while a thread looks up four addresses in each /24 of 10.1.0.0/16. */
static void race_round(struct race *x, struct ofl_rng *g, unsigned n, int *rc, char *err)
{
    uint32_t *ua = malloc(n * sizeof *ua);
    uint8_t *ul = malloc(n);
    uint16_t *uh = malloc(n * sizeof *uh);   /* 0: a delete */
    struct ref r = {0};
    *rc = ofl_lpm4_build(&x->t, NULL, 0, err);
    x->updates = n;
    x->started = x->done = 0;
    for (unsigned i = 0; i < RACE_ADDRS; i++)
        x->addr[i] = 0x0A010000u | (i / 4) << 8 | ((uint32_t)ofl_rng_next(g) & 0xFF);
    memset(x->want, 0, RACE_ADDRS * sizeof *x->want);
    /* The updates (a third deletes of what is there) and the reference's answer for
     * every address after each. */
    for (unsigned k = 0; k < n; k++) {
        if (r.n && ofl_rng_below(g, 3) == 0) {
            const struct ofl_route4 *v = &r.v[ofl_rng_below(g, r.n)];
            ua[k] = v->addr;
            ul[k] = v->len;
            uh[k] = 0;
            ref_del(&r, ua[k], ul[k]);
        } else {
            race_prefix(g, &ua[k], &ul[k]);
            uh[k] = (uint16_t)(1 + ofl_rng_below(g, OFL_ROUTE_MAX_HOP));
            ref_add(&r, ua[k], ul[k], uh[k]);
        }
        uint16_t *w = &x->want[(size_t)(k + 1) * RACE_ADDRS];
        const uint16_t *before = w - RACE_ADDRS;
        for (unsigned i = 0; i < RACE_ADDRS; i++)
            w[i] = (x->addr[i] & mask(ul[k])) == ua[k] ? ref_lookup(&r, x->addr[i]) : before[i];
    }
    pthread_t th;
    pthread_create(&th, NULL, reader, x);
    for (unsigned k = 0; k < n && *rc == 0; k++) {
        /* The lookup thread is running (a batch since the last update), not waiting
         * to be scheduled: the updates overlap its lookups. */
        size_t seen = __atomic_load_n(&x->batches, __ATOMIC_ACQUIRE);
        while (__atomic_load_n(&x->batches, __ATOMIC_ACQUIRE) == seen) sched_yield();
        __atomic_store_n(&x->started, k + 1, __ATOMIC_RELEASE);
        *rc = uh[k] ? ofl_lpm4_add(x->t, ua[k], ul[k], uh[k], err)
                    : ofl_lpm4_del(x->t, ua[k], ul[k], err);
        __atomic_store_n(&x->done, k + 1, __ATOMIC_RELEASE);
    }
    if (*rc) __atomic_store_n(&x->done, n, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    ofl_lpm4_free(x->t);
    free(ua);
    free(ul);
    free(uh);
    free(r.v);
}

static void test_race(void)
{
    char err[256] = "";
    struct race *x = calloc(1, sizeof *x);
    struct ofl_rng g = {4242};
    unsigned rounds = quick ? 8 : 30, n = 300;
    x->want = malloc((size_t)(n + 1) * RACE_ADDRS * sizeof *x->want);
    int rc = 0;
    for (unsigned i = 0; i < rounds && rc == 0; i++) race_round(x, &g, n, &rc, err);
    CHECK(rc == 0 && x->bad == 0 && x->lookups > 0,
          "%u rounds of %u updates on a fresh table raced by a lookup thread: %zu lookups "
          "(%zu batches overlapped an update), %zu answers that were neither before nor "
          "after %s", rounds, n, x->lookups, x->raced, x->bad, rc ? err : "");
    /* No pause: lookups go on while an update runs (a design that held them back during
     * an update would begin none then). */
    CHECK(x->during > 0 && x->inside > 0, "%zu lookup batches began while an update ran, %zu ran wholly "
          "inside one", x->during, x->inside);
    free(x->want);
    free(x);
}

/* ---- control messages (ctl.h): the route table's and an array's ------------------- */

static void test_ctl_messages(void)
{
    char err[256];
    struct ofl_lpm4 *t;
    struct ofl_route4 seed = {0x0A000000, 3, 8};
    CHECK(ofl_lpm4_build(&t, &seed, 1, err) == 0, "build %s", err);
    struct ofl_ctl_reply r;
    uint8_t add[20] = {'a', 24, 9, 0, 10, 1, 2, 0}, del[18] = {'d', 8, 10};
    ofl_lpm4_ctl(t, add, sizeof add, &r);
    int ok_add = reply_status(&r) == 0 && r.n == 4 && ofl_lpm4_lookup(t, 0x0A010203) == 9;
    ofl_lpm4_ctl(t, del, sizeof del, &r);
    int ok_del = reply_status(&r) == 0 && ofl_lpm4_lookup(t, 0x0A000001) == 0 &&
                 ofl_lpm4_lookup(t, 0x0A010201) == 9;
    ofl_lpm4_ctl(t, (const uint8_t *)"i", 1, &r);
    struct ofl_ctl_info in;
    memcpy(&in, r.b + 4, sizeof in);
    CHECK(ok_add && ok_del && reply_status(&r) == 0 && r.n == 4 + sizeof in &&
          in.kind == OFL_CTL_LPM4 && in.length == 1 && in.updates == 2,
          "route add 10.1.2.0/24 9, delete 10.0.0.0/8, info: 1 route, 2 updates");
    ofl_lpm4_ctl(t, del, sizeof del, &r);
    int gone = reply_status(&r) == -ENOENT && r.n > 4 &&
               !memcmp(r.b + 4, "no route 10.0.0.0/8", 19);
    ofl_lpm4_ctl(t, add, 19, &r);
    int short_msg = reply_status(&r) == -EINVAL;
    add[1] = 33;
    ofl_lpm4_ctl(t, add, sizeof add, &r);
    int long_len = reply_status(&r) == -EINVAL;
    ofl_lpm4_ctl(t, (const uint8_t *)"s", 1, &r);
    int unknown = reply_status(&r) == -EOPNOTSUPP;
    ofl_lpm4_ctl(t, NULL, 0, &r);
    CHECK(gone && short_msg && long_len && unknown && reply_status(&r) == -EINVAL &&
          t->updates == 2 && r.n <= OFL_CTL_MSG_MAX, "refused: a route it lacks, 19 bytes, "
          "/33, an array's request, nothing; the table unchanged");
    ofl_lpm4_free(t);

    uint16_t a[3] = {1, 2, 3};
    uint64_t updates = 0;
    uint8_t set[7] = {'s', 2, 0, 0, 0, 0x34, 0x12}, get[5] = {'g', 2, 0, 0, 0};
    ofl_ctl_array(a, 2, 3, 'u', &updates, set, sizeof set, &r);
    int ok_set = reply_status(&r) == 0 && a[2] == 0x1234 && updates == 1;
    ofl_ctl_array(a, 2, 3, 'u', &updates, get, sizeof get, &r);
    int ok_get = reply_status(&r) == 0 && r.n == 6 && r.b[4] == 0x34 && r.b[5] == 0x12;
    ofl_ctl_array(a, 2, 3, 'u', &updates, set, 6, &r);
    int wrong_size = reply_status(&r) == -EINVAL && a[2] == 0x1234;
    get[1] = 3;
    ofl_ctl_array(a, 2, 3, 'u', &updates, get, sizeof get, &r);
    int range = reply_status(&r) == -ERANGE;
    ofl_ctl_array(a, 2, 3, 'u', &updates, get, 4, &r);
    CHECK(ok_set && ok_get && wrong_size && range && reply_status(&r) == -EINVAL && updates == 1,
          "array: set and get element 2; a 1-byte value, index 3, no index: refused");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: test_lpm_update [--quick]\n");
            return 2;
        }
    }
    test_cases();
    test_ctl_messages();
    test_group_exhaustion();
    test_random_updates();
    test_race();
    return CHECK_DONE();
}
