/* Updates of IPv6 tables opened for updates (ofl_lpm6_open_live: ofl_lpm6_update,
 * _add, _del) against a reference: a plain list of the routes the table should hold,
 * searched by brute force. Cases (/0, /128, overlapping prefixes, deleting a covering
 * route, replacing a hop, errors and refused batches), random batches of updates on
 * random tables, and a lookup thread racing an update thread: every answer is the
 * table's before or after the updates the lookup overlapped, and the lookup thread
 * completes batches while an update is being built (it never waits for one).
 *
 * usage: test_lpm6_update [--quick]   (--quick: smaller sets, for sanitizer builds) */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctl_reply.h"
#include "offlow/ctl.h"
#include "offlow/lpm6.h"
#include "offlow/lpm_tables.h"
#include "offlow/synth.h"

static int quick;

/* ---- the reference: the routes, unique prefixes ----------------------------------- */

struct ref {
    struct ofl_route6 *v;
    size_t n, cap;
};

/* a masked to len bits, into out. */
static void mask6(const uint8_t *a, unsigned len, uint8_t *out)
{
    for (unsigned b = 0; b < 16; b++) {
        int keep = (int)len - 8 * (int)b;
        out[b] = a[b] & (keep >= 8 ? 0xFF : keep <= 0 ? 0 : (uint8_t)(0xFF00 >> keep));
    }
}

/* Prefix p/len contains address a. */
static int covers(const uint8_t *p, unsigned len, const uint8_t *a)
{
    uint8_t m[16];
    mask6(a, len, m);
    return memcmp(m, p, 16) == 0;
}

static size_t ref_find(const struct ref *r, const uint8_t *a, unsigned len)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].len == len && !memcmp(r->v[i].addr, a, 16)) return i;
    return r->n;
}

static void ref_add(struct ref *r, const uint8_t *a, unsigned len, uint16_t hop)
{
    size_t i = ref_find(r, a, len);
    if (i == r->n) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->v = realloc(r->v, r->cap * sizeof *r->v);
        }
        r->n++;
    }
    memcpy(r->v[i].addr, a, 16);
    r->v[i].len = (uint8_t)len;
    r->v[i].hop = hop;
}

static int ref_del(struct ref *r, const uint8_t *a, unsigned len)
{
    size_t i = ref_find(r, a, len);
    if (i == r->n) return 0;
    r->v[i] = r->v[--r->n];
    return 1;
}

static uint16_t ref_lookup(const struct ref *r, const uint8_t *a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < r->n; i++)
        if ((int)r->v[i].len > best && covers(r->v[i].addr, r->v[i].len, a)) {
            best = r->v[i].len;
            hop = r->v[i].hop;
        }
    return hop;
}

/* out = the first len bits of p, then the rest of x. */
static void graft(const uint8_t *p, unsigned len, const uint8_t *x, uint8_t *out)
{
    uint8_t m[16], hm[16], ones[16];
    memset(ones, 0xFF, 16);
    mask6(p, len, m);
    mask6(ones, len, hm);
    for (unsigned b = 0; b < 16; b++) out[b] = (uint8_t)(m[b] | (x[b] & ~hm[b]));
}

/* A random prefix inside base/blen (lengths blen..128, biased to 32..64), or now and
 * then a short one (0..blen) covering it. */
static void rand_prefix(struct ofl_rng *g, const uint8_t *base, unsigned blen, uint8_t *a,
                        uint8_t *len)
{
    unsigned l;
    if (ofl_rng_below(g, 12) == 0) l = (unsigned)ofl_rng_below(g, blen + 1);
    else if (ofl_rng_below(g, 6) == 0) l = 128 - (unsigned)ofl_rng_below(g, 8);
    else l = blen + (unsigned)ofl_rng_below(g, 128 - blen + 1);
    uint8_t x[16];
    for (unsigned b = 0; b < 16; b++) x[b] = (uint8_t)ofl_rng_next(g);
    /* Few distinct bits under /40 so that prefixes overlap. */
    for (unsigned b = 5; b < 16; b++) x[b] &= ofl_rng_below(g, 2) ? 0x0F : 0x00;
    uint8_t y[16];
    graft(base, blen, x, y);
    mask6(y, l, a);
    *len = (uint8_t)l;
}

/* An address inside a random route of r (random host bits), or anywhere in base/blen. */
static void rand_addr(struct ofl_rng *g, const struct ref *r, const uint8_t *base,
                      unsigned blen, uint8_t *a)
{
    uint8_t x[16], p[16];
    unsigned len = blen;
    memcpy(p, base, 16);
    if (r->n && ofl_rng_below(g, 4)) {
        const struct ofl_route6 *v = &r->v[ofl_rng_below(g, r->n)];
        memcpy(p, v->addr, 16);
        len = v->len;
    }
    for (unsigned b = 0; b < 16; b++) x[b] = (uint8_t)ofl_rng_next(g);
    graft(p, len, x, a);
}

/* Lookups (scalar and batched) of `nrand` addresses against the reference: how many
 * differ. */
static size_t compare(const struct ofl_lpm6 *t, const struct ref *r, struct ofl_rng *g,
                      const uint8_t *base, unsigned blen, size_t nrand)
{
    size_t bad = 0;
    uint8_t a[64][16];
    uint16_t h[64];
    for (size_t k = 0; k < nrand; k += 64) {
        for (unsigned i = 0; i < 64; i++) rand_addr(g, r, base, blen, a[i]);
        ofl_lpm6_lookup_batch(t, &a[0][0], h, 64);
        for (unsigned i = 0; i < 64; i++) {
            uint16_t want = ref_lookup(r, a[i]), one = ofl_lpm6_lookup(t, a[i]);
            if ((want != h[i] || want != one) && bad++ < 5)
                printf("  address %02x%02x:%02x%02x:...: table %u (batched %u), want %u\n",
                       a[i][0], a[i][1], a[i][2], a[i][3], one, h[i], want);
        }
    }
    return bad;
}

static const uint8_t DOC[16] = {0x20, 0x01, 0x0d, 0xb8};   /* 2001:db8::/32 */

/* ---- cases ------------------------------------------------------------------------ */

static void test_cases(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    struct ofl_route6 seed = {{0x20, 0x01}, 3, 16};
    CHECK(ofl_lpm6_open_live(&t, &seed, 1, err) == 0, "open 2001::/16 -> 3: %s", err);
    uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    uint8_t z[16] = {0}, full[16], p48[16], other[16] = {0x30};
    memset(full, 0xFF, 16);
    mask6(a, 48, p48);
    int before = ofl_lpm6_lookup(t, a) == 3 && ofl_lpm6_lookup(t, other) == 0;
    int rc = ofl_lpm6_add(t, z, 0, 7, err);
    int def = rc == 0 && ofl_lpm6_lookup(t, other) == 7 && ofl_lpm6_lookup(t, a) == 3;
    rc |= ofl_lpm6_add(t, a, 128, 9, err) | ofl_lpm6_add(t, full, 128, 10, err) |
          ofl_lpm6_add(t, p48, 48, 5, err);
    uint8_t a2[16];
    memcpy(a2, a, 16);
    a2[15] = 2;
    int host = rc == 0 && ofl_lpm6_lookup(t, a) == 9 && ofl_lpm6_lookup(t, a2) == 5 &&
               ofl_lpm6_lookup(t, full) == 10;
    rc |= ofl_lpm6_add(t, p48, 48, 6, err);   /* replaces the hop */
    int replaced = rc == 0 && ofl_lpm6_lookup(t, a2) == 6 && ofl_lpm6_count(t) == 5;
    rc |= ofl_lpm6_del(t, seed.addr, 16, err);   /* under it: /48 stays, the rest -> /0 */
    uint8_t a3[16] = {0x20, 0x01, 0x0e};
    int covering = rc == 0 && ofl_lpm6_lookup(t, a2) == 6 && ofl_lpm6_lookup(t, a3) == 7;
    rc |= ofl_lpm6_del(t, z, 0, err) | ofl_lpm6_del(t, full, 128, err);
    int gone = rc == 0 && ofl_lpm6_lookup(t, a3) == 0 && ofl_lpm6_lookup(t, full) == 0 &&
               ofl_lpm6_lookup(t, a) == 9 && ofl_lpm6_count(t) == 2;
    CHECK(before && def && host && replaced && covering && gone,
          "/0 added under a /16, /128 at both ends, /48 between, a hop replaced, the "
          "covering /16 and the /0 deleted: every answer as it should be %s", err);

    uint64_t updates = t->live->updates, rebuilds = t->live->rebuilds;
    int e1 = ofl_lpm6_del(t, seed.addr, 16, err) == -ENOENT &&
             !strcmp(err, "no route 2001::/16");
    int e2 = ofl_lpm6_add(t, a, 64, 3, err) == -EINVAL;    /* host bits set */
    int e3 = ofl_lpm6_add(t, p48, 129, 3, err) == -EINVAL;
    int e4 = ofl_lpm6_add(t, p48, 48, 0, err) == -EINVAL &&
             ofl_lpm6_add(t, p48, 48, OFL_ROUTE_MAX_HOP + 1, err) == -EINVAL;
    /* A batch with a bad update in the middle: none of it applied. */
    struct ofl_lpm6_op ops[3] = {{.len = 0, .hop = 4}, {.len = 20, .hop = 0}, {.len = 0}};
    memcpy(ops[1].addr, other, 16);
    int e5 = ofl_lpm6_update(t, ops, 3, err) == -ENOENT && ofl_lpm6_lookup(t, other) == 0;
    ops[1] = (struct ofl_lpm6_op){.len = 0, .hop = 8};
    int batch = ofl_lpm6_update(t, ops, 3, err) == 0 && ofl_lpm6_lookup(t, other) == 0 &&
                t->live->rebuilds == rebuilds + 1 && ofl_lpm6_count(t) == 2;
    CHECK(e1 && e2 && e3 && e4 && e5 && batch && t->live->updates == updates + 3,
          "refused, the table unchanged: deleting a route it lacks, host bits set, /129, hop 0 "
          "and %u, a batch whose second update fails; a batch of 3 (add /0, replace, "
          "delete): one rebuild", OFL_ROUTE_MAX_HOP + 1);
    ofl_lpm6_free(t);

    struct ofl_lpm6 *b;
    CHECK(ofl_lpm6_build(&b, &seed, 1, err) == 0 &&
          ofl_lpm6_add(b, p48, 48, 5, err) == -EOPNOTSUPP && ofl_lpm6_lookup(b, a) == 3,
          "a table built (not opened for updates) refuses updates");
    ofl_lpm6_free(b);
}

/* ---- random batches --------------------------------------------------------------- */

static void test_random_updates(void)
{
    struct ofl_rng g = {1337};
    size_t bad = 0, rounds = quick ? 4 : 10, steps = quick ? 30 : 60, nupd = 0;
    char err[256] = "";
    int rc = 0;
    for (size_t round = 0; round < rounds && rc == 0; round++) {
        struct ref r = {0};
        size_t n0 = ofl_rng_below(&g, 200);
        struct ofl_route6 *init = malloc((n0 + 1) * sizeof *init);
        for (size_t i = 0; i < n0; i++) {
            rand_prefix(&g, DOC, 32, init[i].addr, &init[i].len);
            init[i].hop = (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP));
            ref_add(&r, init[i].addr, init[i].len, init[i].hop);
        }
        struct ofl_lpm6 *t;
        rc = ofl_lpm6_open_live(&t, init, n0, err);
        free(init);
        if (rc) break;
        bad += compare(t, &r, &g, DOC, 32, 256);
        for (size_t s = 0; s < steps && rc == 0; s++) {
            struct ofl_lpm6_op ops[16];
            unsigned n = 1 + (unsigned)ofl_rng_below(&g, 16);
            for (unsigned k = 0; k < n; k++) {
                if (r.n && ofl_rng_below(&g, 3) == 0) {
                    const struct ofl_route6 *v = &r.v[ofl_rng_below(&g, r.n)];
                    memcpy(ops[k].addr, v->addr, 16);
                    ops[k].len = v->len;
                    ops[k].hop = 0;
                    ref_del(&r, ops[k].addr, ops[k].len);
                } else {
                    rand_prefix(&g, DOC, 32, ops[k].addr, &ops[k].len);
                    ops[k].hop = (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP));
                    ref_add(&r, ops[k].addr, ops[k].len, ops[k].hop);
                }
            }
            rc = ofl_lpm6_update(t, ops, n, err);
            nupd += n;
            bad += compare(t, &r, &g, DOC, 32, 128);
            if (ofl_lpm6_count(t) != r.n && bad++ < 5)
                printf("  %zu routes, want %zu\n", ofl_lpm6_count(t), r.n);
        }
        ofl_lpm6_free(t);
        free(r.v);
    }
    CHECK(rc == 0 && bad == 0, "%zu random tables in 2001:db8::/32, %zu updates in batches "
          "of 1..16 (lengths 0..128, overlapping, deletes of covering routes): %zu wrong "
          "answers %s", rounds, nupd, bad, rc ? err : "");
}

/* ---- a lookup thread racing the updates ------------------------------------------- */

#define RACE_ADDRS 1024

struct race {
    struct ofl_lpm6 *t;
    uint8_t addr[RACE_ADDRS][16];
    uint16_t *want;          /* (updates + 1) x RACE_ADDRS: each address's answer after k */
    unsigned updates;
    unsigned started, done;  /* updates begun, finished (atomics) */
    size_t lookups, raced, inside, bad, during;
};

static void *reader(void *arg)
{
    struct race *x = arg;
    uint16_t h[64];
    for (unsigned i = 0;; i = (i + 64) % RACE_ADDRS) {
        unsigned s0 = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);
        unsigned b0 = __atomic_load_n(&x->started, __ATOMIC_ACQUIRE);
        if (i % 128) {
            ofl_lpm6_lookup_batch(x->t, x->addr[i], h, 64);
        } else {
            for (unsigned j = 0; j < 64; j++) h[j] = ofl_lpm6_lookup(x->t, x->addr[i + j]);
        }
        unsigned s1 = __atomic_load_n(&x->started, __ATOMIC_ACQUIRE);
        unsigned d1 = __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);
        for (unsigned j = 0; j < 64; j++) {
            int ok = 0;
            for (unsigned k = s0; k <= s1 && !ok; k++)
                ok = x->want[(size_t)k * RACE_ADDRS + i + j] == h[j];
            if (!ok && x->bad++ < 5)
                printf("  address %u: %u, not the answer after any of updates %u..%u\n",
                       i + j, h[j], s0, s1);
        }
        x->lookups += 64;
        x->raced += s1 > s0;
        /* The whole batch ran while one update was being applied (begun, not done). */
        x->inside += b0 == s1 && s0 == d1 && s1 == s0 + 1;
        if (s0 == x->updates) return NULL;
    }
}

/* A table of `nbase` routes in 3000::/4 (to make every rebuild cost something) and the
 * race's updates in 2001:db8::/32, where the lookups are. */
static void race_round(struct race *x, struct ofl_rng *g, unsigned n, size_t nbase, int *rc,
                       char *err)
{
    struct ofl_lpm6_op *u = malloc(n * sizeof *u);
    struct ref r = {0};
    struct ofl_route6 *base = malloc((nbase + 1) * sizeof *base);
    static const uint8_t far[16] = {0x30};
    for (size_t i = 0; i < nbase; i++) {
        rand_prefix(g, far, 16, base[i].addr, &base[i].len);
        if (base[i].len < 16) mask6(far, base[i].len = 16, base[i].addr);
        base[i].hop = (uint16_t)(1 + ofl_rng_below(g, 100));
    }
    *rc = ofl_lpm6_open_live(&x->t, base, nbase, err);
    free(base);
    x->updates = n;
    x->started = x->done = 0;
    for (unsigned i = 0; i < RACE_ADDRS; i++) rand_addr(g, &r, DOC, 32, x->addr[i]);
    memset(x->want, 0, RACE_ADDRS * sizeof *x->want);
    for (unsigned k = 0; k < n; k++) {
        if (r.n && ofl_rng_below(g, 3) == 0) {
            const struct ofl_route6 *v = &r.v[ofl_rng_below(g, r.n)];
            memcpy(u[k].addr, v->addr, 16);
            u[k].len = v->len;
            u[k].hop = 0;
            ref_del(&r, u[k].addr, u[k].len);
        } else {
            rand_prefix(g, DOC, 32, u[k].addr, &u[k].len);
            u[k].hop = (uint16_t)(1 + ofl_rng_below(g, OFL_ROUTE_MAX_HOP));
            ref_add(&r, u[k].addr, u[k].len, u[k].hop);
        }
        uint16_t *w = &x->want[(size_t)(k + 1) * RACE_ADDRS];
        const uint16_t *before = w - RACE_ADDRS;
        for (unsigned i = 0; i < RACE_ADDRS; i++)
            w[i] = covers(u[k].addr, u[k].len, x->addr[i]) ? ref_lookup(&r, x->addr[i])
                                                           : before[i];
    }
    pthread_t th;
    if (*rc == 0) pthread_create(&th, NULL, reader, x);
    for (unsigned k = 0; k < n && *rc == 0; k++) {
        __atomic_store_n(&x->started, k + 1, __ATOMIC_RELEASE);
        *rc = ofl_lpm6_update(x->t, &u[k], 1, err);
        __atomic_store_n(&x->done, k + 1, __ATOMIC_RELEASE);
    }
    if (x->t) {
        __atomic_store_n(&x->done, n, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        x->during += x->t->live->during;
    }
    ofl_lpm6_free(x->t);
    x->t = NULL;
    free(u);
    free(r.v);
}

static void test_race(void)
{
    char err[256] = "";
    struct race *x = calloc(1, sizeof *x);
    struct ofl_rng g = {4242};
    unsigned rounds = quick ? 3 : 5, n = quick ? 60 : 100;
    /* 2000: each update's rebuild still holds thousands of lookup batches whole */
    size_t nbase = quick ? 1000 : 2000;
    x->want = malloc((size_t)(n + 1) * RACE_ADDRS * sizeof *x->want);
    int rc = 0;
    for (unsigned i = 0; i < rounds && rc == 0; i++) race_round(x, &g, n, nbase, &rc, err);
    CHECK(rc == 0 && x->bad == 0 && x->lookups > 0,
          "%u rounds of %u updates (rebuilds of %zu routes) raced by a lookup thread: %zu "
          "lookups (%zu batches overlapped an update), %zu answers that were neither "
          "before nor after %s", rounds, n, nbase, x->lookups, x->raced, x->bad,
          rc ? err : "");
    /* A design that paused lookups during an update would complete none inside one. */
    CHECK(x->inside > 0 && x->during > 0, "the lookup thread completed %zu batches "
          "entirely while an update was being built and swapped in (it never waits for "
          "one); the table counted %zu begun during rebuilds", x->inside, x->during);
    free(x->want);
    free(x);
}

/* ---- control messages ------------------------------------------------------------- */

static void test_ctl_messages(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    struct ofl_route6 seed = {{0x20, 0x01}, 3, 16};
    CHECK(ofl_lpm6_open_live(&t, &seed, 1, err) == 0, "open 2001::/16 -> 3 %s", err);
    struct ofl_ctl_reply r;
    uint8_t add[20] = {'a', 32, 9, 0, 0x20, 0x01, 0x0d, 0xb8}, del[18] = {'d', 16, 0x20, 0x01};
    uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8, 1}, b[16] = {0x20, 0x01, 0x0e};
    ofl_lpm6_ctl(t, add, sizeof add, &r);
    int ok_add = reply_status(&r) == 0 && r.n == 4 && ofl_lpm6_lookup(t, a) == 9;
    ofl_lpm6_ctl(t, del, sizeof del, &r);
    int ok_del = reply_status(&r) == 0 && ofl_lpm6_lookup(t, b) == 0 && ofl_lpm6_lookup(t, a) == 9;
    ofl_lpm6_ctl(t, (const uint8_t *)"i", 1, &r);
    struct ofl_ctl_info in;
    uint64_t lookups;
    memcpy(&in, r.b + 4, sizeof in);
    memcpy(&lookups, r.b + 4 + sizeof in, 8);
    CHECK(ok_add && ok_del && reply_status(&r) == 0 && r.n == 4 + sizeof in + 16 &&
          in.kind == OFL_CTL_LPM6 && in.length == 1 && in.updates == 2 && lookups == 3,
          "route add 2001:db8::/32 9, delete 2001::/16, info: 1 route, 2 updates, 3 lookups");
    ofl_lpm6_ctl(t, del, sizeof del, &r);
    int gone = reply_status(&r) == -ENOENT && !memcmp(r.b + 4, "no route 2001::/16", 18);
    add[1] = 129;
    ofl_lpm6_ctl(t, add, sizeof add, &r);
    int long_len = reply_status(&r) == -EINVAL;
    add[1] = 8;   /* 2001:db8:: has bits past /8 */
    ofl_lpm6_ctl(t, add, sizeof add, &r);
    int host = reply_status(&r) == -EINVAL;
    ofl_lpm6_ctl(t, add, 19, &r);
    int short_msg = reply_status(&r) == -EINVAL;
    ofl_lpm6_ctl(t, (const uint8_t *)"s", 1, &r);
    int unknown = reply_status(&r) == -EOPNOTSUPP;
    ofl_lpm6_ctl(t, NULL, 0, &r);
    CHECK(gone && long_len && host && short_msg && unknown && reply_status(&r) == -EINVAL &&
          t->live->updates == 2 && ofl_lpm6_lookup(t, a) == 9,
          "refused: a route it lacks, /129, host bits, 19 bytes, an array's request, "
          "nothing; the table unchanged");
    ofl_lpm6_free(t);
}

/* Whether reply r's text holds `text`. */
static int says(const struct ofl_ctl_reply *r, const char *text)
{
    return r->n >= 4 && memmem(r->b + 4, r->n - 4, text, strlen(text)) != NULL;
}

/* A staged route message ('A' / 'D'): the route of prefix 2001:db8:X::/48 -> hop. */
static void staged(struct ofl_lpm6 *t, char op, unsigned x, uint8_t len, uint16_t hop,
                   struct ofl_ctl_reply *r)
{
    uint8_t m[20] = {(uint8_t)op, len};
    uint8_t *addr = m + (op == 'A' ? 4 : 2);
    if (op == 'A') memcpy(m + 2, &hop, 2);
    addr[0] = 0x20, addr[1] = 0x01, addr[2] = 0x0d, addr[3] = 0xb8;
    addr[4] = (uint8_t)(x >> 8), addr[5] = (uint8_t)x;
    ofl_lpm6_ctl(t, m, op == 'A' ? 20 : 18, r);
}

/* Batches over control messages: 'b', then many 'A' / 'D', then 'c' applies them with
 * one rebuild; a batch holding a refused update (at staging: host bits, hop 0; at
 * commit: a delete of a route it lacks) changes nothing; 'b' drops what was staged. */
static void test_ctl_batches(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    struct ofl_route6 seed = {{0x20, 0x01}, 3, 16};
    CHECK(ofl_lpm6_open_live(&t, &seed, 1, err) == 0, "open 2001::/16 -> 3 %s", err);
    struct ofl_ctl_reply r;
    uint64_t rebuilds = t->live->rebuilds, applied = 0;
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    int ok = reply_status(&r) == 0;
    for (unsigned x = 0; x < 1000; x++) {
        staged(t, 'A', x, 48, (uint16_t)(1 + x % 100), &r);
        ok &= reply_status(&r) == 0;
    }
    staged(t, 'D', 7, 48, 0, &r);  /* a delete of a route added earlier in the batch */
    ok &= reply_status(&r) == 0;
    uint8_t a5[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
    uint8_t a7[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 7};
    int before = ofl_lpm6_lookup(t, a5) == 3;  /* staged is not applied */
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    memcpy(&applied, r.b + 4, 8);
    CHECK(ok && before && reply_status(&r) == 0 && r.n == 12 && applied == 1001 &&
          t->live->rebuilds == rebuilds + 1 && ofl_lpm6_count(t) == 1000 &&
          ofl_lpm6_lookup(t, a5) == 6 && ofl_lpm6_lookup(t, a7) == 3,
          "a batch of 1,000 adds and a delete: one rebuild, applied %llu, %zu routes",
          (unsigned long long)applied, ofl_lpm6_count(t));

    /* Refused while staged: host bits (update 2); the rest of the batch is refused. */
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    staged(t, 'A', 2000, 48, 5, &r);
    staged(t, 'A', 2001, 48, 5, &r);
    staged(t, 'A', 2002, 32, 5, &r);
    int host = reply_status(&r) == -EINVAL && says(&r, "(update 2)");
    staged(t, 'A', 2003, 48, 5, &r);
    int after = reply_status(&r) == -EINVAL;
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    int commit = reply_status(&r) == -EINVAL && says(&r, "refused at update 2");
    CHECK(host && after && commit && ofl_lpm6_count(t) == 1000 &&
          t->live->rebuilds == rebuilds + 1,
          "host bits in update 2: refused, later updates and the commit too, nothing applied");
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    staged(t, 'A', 2000, 48, 5, &r);
    uint8_t cut[19] = {'A', 48, 5};  /* a staged add one byte short */
    ofl_lpm6_ctl(t, cut, sizeof cut, &r);
    int short_msg = reply_status(&r) == -EINVAL;
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    CHECK(short_msg && reply_status(&r) == -EINVAL && says(&r, "refused at update 1") &&
          ofl_lpm6_count(t) == 1000, "a staged message of the wrong size refuses its batch");
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    staged(t, 'A', 2000, 48, 0, &r);
    int hop0 = reply_status(&r) == -EINVAL && says(&r, "next hop 0");
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    CHECK(hop0 && reply_status(&r) == -EINVAL && ofl_lpm6_count(t) == 1000,
          "an add with hop 0 refuses its batch");

    /* Refused at commit: a delete of a route the table lacks, after an add. */
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    staged(t, 'A', 3000, 48, 5, &r);
    staged(t, 'D', 7, 48, 0, &r);
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    int lacks = reply_status(&r) == -ENOENT && says(&r, "no route 2001:db8:7::/48");
    CHECK(lacks && ofl_lpm6_count(t) == 1000 && t->live->rebuilds == rebuilds + 1,
          "a delete of a route the table lacks: the batch refused, nothing applied (%.*s)",
          (int)r.n - 4, (char *)r.b + 4);

    /* 'b' drops a batch not committed; an empty commit applies nothing. */
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    staged(t, 'A', 4000, 48, 5, &r);
    ofl_lpm6_ctl(t, (const uint8_t *)"b", 1, &r);
    ofl_lpm6_ctl(t, (const uint8_t *)"c", 1, &r);
    memcpy(&applied, r.b + 4, 8);
    CHECK(reply_status(&r) == 0 && applied == 0 && ofl_lpm6_count(t) == 1000 &&
          t->live->rebuilds == rebuilds + 1, "'b' drops what was staged; an empty commit "
          "applies nothing and builds nothing");
    ofl_lpm6_free(t);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: test_lpm6_update [--quick]\n");
            return 2;
        }
    }
    test_cases();
    test_ctl_messages();
    test_ctl_batches();
    test_random_updates();
    test_race();
    return CHECK_DONE();
}
