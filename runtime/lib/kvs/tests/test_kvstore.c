/* Tests of the key-value store (runtime/lib/kvs/src/kvstore.c) and of request execution
 * (runtime/lib/kvs/src/kvexec.c): configuration errors, get/set/add/replace/delete, CAS rules,
 * flags, expiry, hash collisions, CLOCK eviction by item count and by bytes, the
 * stats, and threads hammering one store (each thread checks its own keys against a
 * private model; shared keys must never show a torn value).
 *
 * usage: test_kvstore [OPS_PER_THREAD] */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "offlow/kvexec.h"
#include "offlow/kvstore.h"

#define THREADS 4
#define OWN_KEYS 200
#define SHARED_KEYS 16

static struct ofl_kv *make(uint64_t capacity, uint64_t mem, uint32_t value_max, uint32_t stripes)
{
    struct ofl_kv_config cfg = {capacity, mem, value_max, stripes};
    struct ofl_kv *kv = NULL;
    int rc = ofl_kv_create(&kv, &cfg);
    if (rc) {
        printf("FAIL: ofl_kv_create: %d\n", rc);
        exit(1);
    }
    return kv;
}

static int put(struct ofl_kv *kv, enum ofl_kv_mode mode, const char *k, const char *v,
               uint32_t flags, uint64_t cas_in, uint64_t *cas_out)
{
    return ofl_kv_store(kv, mode, k, strlen(k), ofl_kv_hash(k, strlen(k)), v, strlen(v), flags,
                        0, cas_in, cas_out);
}

/* 0 and the value in buf (NUL-terminated), or the error. */
static int get(struct ofl_kv *kv, const char *k, char *buf, size_t cap, struct ofl_kv_meta *m)
{
    int rc = ofl_kv_get(kv, k, strlen(k), ofl_kv_hash(k, strlen(k)), buf, cap - 1, m);
    if (rc == 0) buf[m->value_len] = 0;
    return rc;
}

static int has(struct ofl_kv *kv, const char *k)
{
    char buf[2048];
    struct ofl_kv_meta m;
    return get(kv, k, buf, sizeof buf, &m) == 0;
}

static int del(struct ofl_kv *kv, const char *k, uint64_t cas)
{
    return ofl_kv_delete(kv, k, strlen(k), ofl_kv_hash(k, strlen(k)), cas);
}

static void test_config(void)
{
    struct ofl_kv *kv = NULL;
    struct ofl_kv_config bad[] = {
        {0, 0, 100, 1},           /* no capacity */
        {100, 0, 100, 3},         /* stripes not a power of two */
        {4, 0, 100, 8},           /* fewer items than stripes */
        {100, 1000, 1000, 4},     /* 250 bytes per stripe < one item */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ofl_kv_create(&kv, &bad[i]) == -EINVAL && kv == NULL, "bad config %zu: -EINVAL", i);
    struct ofl_kv_config ok = {1000, 0, 100, 0};
    CHECK(ofl_kv_create(&kv, &ok) == 0 && kv, "stripes 0 picks a default");
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    CHECK(st.capacity == 1000 && st.items == 0, "an empty store's stats");
    ofl_kv_destroy(kv);
    ofl_kv_destroy(NULL);
}

static void test_basic(void)
{
    struct ofl_kv *kv = make(1000, 0, 100, 8);
    char buf[256];
    struct ofl_kv_meta m;
    uint64_t c1 = 0, c2 = 0, c3 = 0;
    CHECK(get(kv, "a", buf, sizeof buf, &m) == -ENOENT, "get of an absent key: -ENOENT");
    CHECK(put(kv, OFL_KV_SET, "a", "hello", 7, 0, &c1) == 0 && c1 != 0, "set: a non-zero CAS");
    CHECK(get(kv, "a", buf, sizeof buf, &m) == 0 && !strcmp(buf, "hello") && m.flags == 7 &&
              m.cas == c1 && m.value_len == 5,
          "get returns value, flags and CAS");
    CHECK(put(kv, OFL_KV_SET, "a", "a longer value than before", 8, 0, &c2) == 0 && c2 != c1,
          "overwrite: a new CAS");
    CHECK(get(kv, "a", buf, sizeof buf, &m) == 0 && !strcmp(buf, "a longer value than before") &&
              m.flags == 8 && m.cas == c2,
          "get after overwrite");
    char small[4];
    CHECK(ofl_kv_get(kv, "a", 1, ofl_kv_hash("a", 1), small, sizeof small, &m) == -ENOBUFS &&
              m.value_len == 26 && m.cas == c2,
          "a buffer too small: -ENOBUFS with the size in meta");
    CHECK(put(kv, OFL_KV_ADD, "a", "x", 0, 0, NULL) == -EEXIST, "add of a present key: -EEXIST");
    CHECK(put(kv, OFL_KV_ADD, "b", "bee", 1, 0, &c3) == 0 && has(kv, "b"), "add of a new key");
    CHECK(put(kv, OFL_KV_REPLACE, "c", "x", 0, 0, NULL) == -ENOENT && !has(kv, "c"),
          "replace of an absent key: -ENOENT");
    CHECK(put(kv, OFL_KV_REPLACE, "b", "B", 0, 0, NULL) == 0 &&
              get(kv, "b", buf, sizeof buf, &m) == 0 && !strcmp(buf, "B"),
          "replace of a present key");
    /* CAS rules */
    CHECK(put(kv, OFL_KV_SET, "a", "stale", 0, c1, NULL) == -EEXIST, "set with a stale CAS: -EEXIST");
    CHECK(put(kv, OFL_KV_SET, "zz", "x", 0, 5, NULL) == -ENOENT && !has(kv, "zz"),
          "set with a CAS on an absent key: -ENOENT");
    CHECK(put(kv, OFL_KV_ADD, "zz", "x", 0, 5, NULL) == -ENOENT,
          "add with a CAS on an absent key: -ENOENT (as memcached)");
    uint64_t c4 = 0;
    CHECK(put(kv, OFL_KV_SET, "a", "fresh", 0, c2, &c4) == 0 && c4 != c2,
          "set with the current CAS");
    CHECK(put(kv, OFL_KV_REPLACE, "a", "again", 0, c2, NULL) == -EEXIST,
          "replace with the previous CAS: -EEXIST");
    CHECK(del(kv, "a", c2) == -EEXIST && has(kv, "a"), "delete with a stale CAS: -EEXIST");
    CHECK(del(kv, "a", c4) == 0 && !has(kv, "a"), "delete with the current CAS");
    CHECK(del(kv, "a", 0) == -ENOENT, "delete of an absent key: -ENOENT");
    CHECK(del(kv, "b", 0) == 0 && !has(kv, "b"), "delete without a CAS");
    /* a given CAS (a cache writing back an item whose CAS it gave out) */
    const uint64_t given = (1ull << 63) | 7;
    CHECK(put(kv, OFL_KV_SET_CAS, "g", "x", 0, 0, NULL) == -EINVAL && !has(kv, "g"),
          "set with a given CAS of 0: -EINVAL");
    uint64_t cg = 0;
    CHECK(put(kv, OFL_KV_SET_CAS, "g", "new", 2, given, &cg) == 0 && cg == given &&
              get(kv, "g", buf, sizeof buf, &m) == 0 && !strcmp(buf, "new") && m.cas == given,
          "set with a given CAS on an absent key: stored with that CAS");
    CHECK(put(kv, OFL_KV_SET_CAS, "g", "newer", 2, given + 1, &cg) == 0 && cg == given + 1 &&
              get(kv, "g", buf, sizeof buf, &m) == 0 && !strcmp(buf, "newer") &&
              m.cas == given + 1,
          "... on a present key with another CAS: replaced, with the given CAS");
    CHECK(put(kv, OFL_KV_SET, "g", "client", 0, given + 1, &cg) == 0 && cg != given + 1 &&
              !(cg >> 63),
          "a client's CAS compare matches it; the store's next CAS is its own");
    /* limits */
    char key[260];
    memset(key, 'k', sizeof key);
    key[250] = 0;
    CHECK(put(kv, OFL_KV_SET, key, "v", 0, 0, NULL) == 0 && has(kv, key), "a 250-byte key");
    key[250] = 'k';
    key[251] = 0;
    CHECK(put(kv, OFL_KV_SET, key, "v", 0, 0, NULL) == -E2BIG, "a 251-byte key: -E2BIG");
    CHECK(put(kv, OFL_KV_SET, "", "v", 0, 0, NULL) == -E2BIG, "an empty key: -E2BIG");
    char val[102];
    memset(val, 'v', 101);
    val[101] = 0;
    CHECK(put(kv, OFL_KV_SET, "big", val, 0, 0, NULL) == -E2BIG, "value_max + 1: -E2BIG");
    val[100] = 0;
    CHECK(put(kv, OFL_KV_SET, "big", val, 0, 0, NULL) == 0, "a value of value_max bytes");
    CHECK(put(kv, OFL_KV_SET, "e", "", 3, 0, NULL) == 0 &&
              get(kv, "e", buf, sizeof buf, &m) == 0 && m.value_len == 0 && m.flags == 3,
          "an empty value");
    /* CAS values are unique over all keys */
    uint64_t seen[200];
    int unique = 1;
    for (int i = 0; i < 200; i++) {
        char k[16];
        snprintf(k, sizeof k, "u%d", i);
        put(kv, OFL_KV_SET, k, "x", 0, 0, &seen[i]);
        for (int j = 0; j < i; j++) unique &= seen[j] != seen[i] && seen[i] != 0;
    }
    CHECK(unique, "200 sets over 8 stripes: 200 distinct non-zero CAS values");
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    CHECK(st.items == 204 && st.evictions == 0 && st.deletes == 2,
          "stats: %llu items, %llu deletes", (unsigned long long)st.items,
          (unsigned long long)st.deletes);
    ofl_kv_destroy(kv);
}

/* Different keys with the same hash share a chain and stay apart. */
static void test_collisions(void)
{
    struct ofl_kv *kv = make(64, 0, 64, 1);
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        char k[16], v[16];
        snprintf(k, sizeof k, "c%d", i);
        snprintf(v, sizeof v, "v%d", i);
        ok &= ofl_kv_store(kv, OFL_KV_SET, k, strlen(k), 42, v, strlen(v), 0, 0, 0, NULL) == 0;
    }
    ok &= ofl_kv_delete(kv, "c7", 2, 42, 0) == 0;
    for (int i = 0; i < 20; i++) {
        char k[16], v[16], got[16];
        struct ofl_kv_meta m;
        snprintf(k, sizeof k, "c%d", i);
        snprintf(v, sizeof v, "v%d", i);
        int rc = ofl_kv_get(kv, k, strlen(k), 42, got, sizeof got, &m);
        ok &= i == 7 ? rc == -ENOENT : rc == 0 && m.value_len == strlen(v) &&
                                          memcmp(got, v, m.value_len) == 0;
    }
    CHECK(ok, "20 keys with one hash: each keeps its value, deleting one leaves the rest");
    ofl_kv_destroy(kv);
}

static void test_expiry(void)
{
    struct ofl_kv *kv = make(100, 0, 64, 1);
    const char *k = "exp";
    uint64_t h = ofl_kv_hash(k, 3);
    char buf[64];
    struct ofl_kv_meta m;
    CHECK(ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "v", 1, 0, -1, 0, NULL) == 0 &&
              ofl_kv_get(kv, k, 3, h, buf, sizeof buf, &m) == -ENOENT,
          "negative exptime: stored as already expired");
    ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "v", 1, 0, 0, 0, NULL);
    CHECK(ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "w", 1, 0, -1, 0, NULL) == 0 &&
              ofl_kv_get(kv, k, 3, h, buf, sizeof buf, &m) == -ENOENT,
          "negative exptime over a present key removes it");
    CHECK(ofl_kv_get(kv, "never", 5, ofl_kv_hash("never", 5), buf, sizeof buf, &m) == -ENOENT,
          "absent key");
    ofl_kv_store(kv, OFL_KV_SET, "never", 5, ofl_kv_hash("never", 5), "v", 1, 0, 0, 0, NULL);
    CHECK(ofl_kv_get(kv, "never", 5, ofl_kv_hash("never", 5), buf, sizeof buf, &m) == 0 &&
              m.expires == 0,
          "exptime 0: the get says the item never expires");
    CHECK(ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "v", 1, 0, 3600, 0, NULL) == 0 &&
              ofl_kv_get(kv, k, 3, h, buf, sizeof buf, &m) == 0 && m.expires == 1,
          "relative exptime of an hour: present now, and the get says it expires");
    int32_t past = 60 * 60 * 24 * 30 + 1;   /* an absolute time in January 1970 */
    CHECK(ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "v", 1, 0, past, 0, NULL) == 0 &&
              ofl_kv_get(kv, k, 3, h, buf, sizeof buf, &m) == -ENOENT,
          "absolute exptime in the past: expired");
    int32_t future = (int32_t)time(NULL) + 3600;
    CHECK(ofl_kv_store(kv, OFL_KV_SET, k, 3, h, "v", 1, 0, future, 0, NULL) == 0 &&
              ofl_kv_get(kv, k, 3, h, buf, sizeof buf, &m) == 0,
          "absolute exptime an hour ahead: present");
    ofl_kv_destroy(kv);
}

static void test_eviction(void)
{
    /* CLOCK by item count: slots are taken in order, the hand starts at slot 0. */
    struct ofl_kv *kv = make(8, 0, 64, 1);
    char k[16];
    for (int i = 0; i < 8; i++) {
        snprintf(k, sizeof k, "k%d", i);
        put(kv, OFL_KV_SET, k, "v", 0, 0, NULL);
    }
    put(kv, OFL_KV_SET, "k8", "v", 0, 0, NULL);   /* all used: a full sweep, then k0 goes */
    CHECK(!has(kv, "k0") && has(kv, "k8"), "full table: k0 (first in CLOCK order) is evicted");
    CHECK(has(kv, "k1"), "k1 read (used again)");
    put(kv, OFL_KV_SET, "k9", "v", 0, 0, NULL);   /* hand at k1: second chance; k2 goes */
    CHECK(has(kv, "k1") && !has(kv, "k2") && has(kv, "k9"),
          "a key read since the last sweep survives; the next unused one is evicted");
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    CHECK(st.items == 8 && st.evictions == 2, "8 items, 2 evictions");
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "x%d", i);
        put(kv, OFL_KV_SET, k, "v", 0, 0, NULL);
    }
    ofl_kv_get_stats(kv, &st);
    CHECK(st.items == 8 && st.evictions == 1002 && has(kv, "x999"),
          "1000 more keys: still 8 items, the newest present");
    ofl_kv_destroy(kv);

    /* By bytes: a budget of a few items per stripe. */
    kv = make(1000, 4 * 1024, 1000, 1);
    char val[1001];
    memset(val, 'b', 1000);
    val[1000] = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "b%d", i);
        put(kv, OFL_KV_SET, k, val, 0, 0, NULL);
    }
    ofl_kv_get_stats(kv, &st);
    CHECK(st.bytes <= 4 * 1024 && st.items >= 3 && st.items <= 4 && has(kv, "b19"),
          "byte budget 4 KiB, 1 KB values: %llu items, %llu bytes",
          (unsigned long long)st.items, (unsigned long long)st.bytes);
    /* Growing a value in place evicts others, never the item itself. */
    val[0] = 'B';
    CHECK(put(kv, OFL_KV_SET, "b19", val, 0, 0, NULL) == 0 && has(kv, "b19"),
          "overwriting under a full budget keeps the key");
    ofl_kv_destroy(kv);
}

/* ---- request execution ---------------------------------------------------------- */

static int exec_text(struct ofl_kv *kv, const char *in, const char *want)
{
    struct ofl_mc_out out = {.max = 1 << 20};
    size_t off = 0, len = strlen(in);
    int rc = 0;
    while (off < len && rc == 0) {
        struct ofl_mc_req r;
        ssize_t n = ofl_mc_parse((const uint8_t *)in + off, len - off, OFL_MC_TEXT, NULL, &r);
        if (n == 0) break;
        if (n < 0) {
            rc = ofl_kv_exec_error(&r, (int)n, &out);
            off += r.len;
        } else {
            rc = ofl_kv_exec(kv, &r, &out);
            off += (size_t)n;
        }
    }
    int ok = out.len == strlen(want) && memcmp(out.buf, want, out.len) == 0;
    if (!ok) printf("      got: %.*s\n", (int)out.len, out.buf);
    ofl_mc_out_free(&out);
    return ok;
}

static void test_exec(void)
{
    struct ofl_kv *kv = make(1000, 0, 1 << 20, 4);
    CHECK(exec_text(kv, "set a 3 0 2\r\nhi\r\nget a b a\r\n",
                    "STORED\r\nVALUE a 3 2\r\nhi\r\nVALUE a 3 2\r\nhi\r\nEND\r\n"),
          "exec: text set and multi-get");
    CHECK(exec_text(kv, "add a 0 0 1\r\nx\r\nreplace q 0 0 1\r\nx\r\ncas q 0 0 1 5\r\nx\r\n",
                    "NOT_STORED\r\nNOT_STORED\r\nNOT_FOUND\r\n"),
          "exec: add present, replace absent, cas absent");
    CHECK(exec_text(kv, "delete a\r\ndelete a\r\nflurb\r\n", "DELETED\r\nNOT_FOUND\r\nERROR\r\n"),
          "exec: delete twice, unknown command");
    /* A value larger than the first guess at its room: fetched again into more room. */
    size_t vlen = 300000;
    char *big = malloc(vlen + 64);
    int h = snprintf(big, 64, "set big 0 0 %zu\r\n", vlen);
    memset(big + h, 'z', vlen);
    memcpy(big + h + vlen, "\r\nget big\r\n", 12);
    char *want = malloc(vlen + 64);
    int w = snprintf(want, 64, "STORED\r\nVALUE big 0 %zu\r\n", vlen);
    memset(want + w, 'z', vlen);
    memcpy(want + w + vlen, "\r\nEND\r\n", 8);
    CHECK(exec_text(kv, big, want), "exec: a 300 KB value set and read back");
    free(big);
    free(want);
    struct ofl_mc_out out = {.max = 64};
    struct ofl_mc_req r;
    const char *g = "get big\r\n";
    ofl_mc_parse((const uint8_t *)g, strlen(g), OFL_MC_TEXT, NULL, &r);
    CHECK(ofl_kv_exec(kv, &r, &out) == -ENOBUFS, "exec: a reply over the buffer's max: -ENOBUFS");
    ofl_mc_out_free(&out);
    ofl_kv_destroy(kv);
}

/* Run one binary request through ofl_kv_exec or ofl_kv_exec_trusted: its status. */
static int exec_bin(struct ofl_kv *kv, int trusted, uint8_t op, const char *key, const char *val,
                    uint64_t cas)
{
    uint8_t req[256], extras[8] = {0};
    int set = op == OFL_MC_OP_SET || op == OFL_MC_OP_SETQ || op == OFL_MC_OP_ADD;
    ssize_t n = ofl_mc_write_request(req, sizeof req, op, 0, cas, set ? extras : NULL,
                                     set ? 8 : 0, key, strlen(key), val, val ? strlen(val) : 0);
    struct ofl_mc_req r;
    struct ofl_mc_out out = {.max = 1 << 16};
    struct ofl_mc_res res;
    int st = -1;
    if (n > 0 && ofl_mc_parse(req, (size_t)n, OFL_MC_BINARY, NULL, &r) == n &&
        (trusted ? ofl_kv_exec_trusted(kv, &r, &out) : ofl_kv_exec(kv, &r, &out)) == 0)
        st = out.len == 0 ? 0 : ofl_mc_parse_response(out.buf, out.len, &res, NULL) > 0
                                    ? res.status : -1;
    ofl_mc_out_free(&out);
    return st;
}

static void test_exec_trusted(void)
{
    struct ofl_kv *kv = make(1000, 0, 1 << 20, 4);
    const uint64_t given = (1ull << 63) | 42;
    char buf[64];
    struct ofl_kv_meta m;
    CHECK(exec_bin(kv, 0, OFL_MC_OP_SETQ, "k", "v1", given) == OFL_MC_ST_NOT_FOUND,
          "a client's SETQ with a CAS compares it (absent key: NOT_FOUND)");
    CHECK(exec_bin(kv, 1, OFL_MC_OP_SETQ, "k", "v1", given) == 0 &&
              get(kv, "k", buf, sizeof buf, &m) == 0 && !strcmp(buf, "v1") && m.cas == given,
          "a trusted SETQ with a CAS stores the item with it (quiet: no reply)");
    CHECK(exec_bin(kv, 0, OFL_MC_OP_SET, "k", "v2", given) == 0,
          "a client's CAS compare with that CAS then matches");
    CHECK(exec_bin(kv, 1, OFL_MC_OP_ADD, "k", "v3", given) == OFL_MC_ST_EXISTS,
          "trusted, other commands run as a client's: ADD with a stale CAS is EXISTS");
    CHECK(exec_bin(kv, 1, OFL_MC_OP_SET, "n", "v", 0) == 0 &&
              get(kv, "n", buf, sizeof buf, &m) == 0 && !(m.cas >> 63),
          "trusted SET without a CAS: the store's own CAS");
    ofl_kv_destroy(kv);
}

/* ---- threads -------------------------------------------------------------------- */

struct worker {
    struct ofl_kv *kv;
    int id;
    long ops;
    int evicting;   /* the store is too small: an own key may have been evicted */
    int failures;
    uint64_t rng;
};

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A shared key's value: its writer's tag repeated, so a torn copy shows. */
static void shared_value(char *v, size_t n, uint64_t tag)
{
    for (size_t i = 0; i < n; i++) v[i] = (char)('A' + (tag + i / 8) % 26);
}

static int shared_ok(const char *v, size_t n)
{
    if (n < 8) return 0;
    char want[128];
    uint64_t tag = (uint64_t)(v[0] - 'A');
    shared_value(want, n, tag);
    return memcmp(v, want, n) == 0;
}

static void *hammer(void *arg)
{
    struct worker *w = arg;
    /* model of this thread's own keys: value length, or -1 when absent */
    int model[OWN_KEYS];
    for (int i = 0; i < OWN_KEYS; i++) model[i] = -1;
    char k[32], v[128], got[128];
    struct ofl_kv_meta m;
    for (long op = 0; op < w->ops; op++) {
        uint64_t r = next(&w->rng);
        int shared = r % 4 == 0;
        int i = (int)((r >> 8) % (shared ? SHARED_KEYS : OWN_KEYS));
        int kind = (int)((r >> 20) % 10);   /* 0-5 get, 6-8 set, 9 delete */
        if (shared) snprintf(k, sizeof k, "shared-%d", i);
        else snprintf(k, sizeof k, "t%d-key-%d", w->id, i);
        uint64_t h = ofl_kv_hash(k, strlen(k));
        if (kind <= 5) {
            int rc = ofl_kv_get(w->kv, k, strlen(k), h, got, sizeof got, &m);
            if (shared) {
                if (rc == 0 && !shared_ok(got, m.value_len)) w->failures++;
            } else if (model[i] < 0 ? rc != -ENOENT
                                    : !(rc == -ENOENT && w->evicting) &&
                                          (rc != 0 || (int)m.value_len != model[i] ||
                                           got[0] != (char)('a' + model[i] % 26))) {
                w->failures++;
            }
        } else if (kind <= 8) {
            size_t n = 8 + (r >> 40) % 100;
            if (shared) shared_value(v, n, (r >> 32) % 26);
            else memset(v, 'a' + (int)(n % 26), n);
            if (ofl_kv_store(w->kv, OFL_KV_SET, k, strlen(k), h, v, n, 0, 0, 0, NULL))
                w->failures++;
            if (!shared) model[i] = (int)n;
        } else {
            int rc = ofl_kv_delete(w->kv, k, strlen(k), h, 0);
            if (!shared && rc != (model[i] < 0 ? -ENOENT : 0) &&
                !(w->evicting && rc == -ENOENT))
                w->failures++;
            if (!shared) model[i] = -1;
        }
    }
    return NULL;
}

/* A text request run through the parser and ofl_kv_exec: the reply, NUL-terminated. */
static const char *ask(struct ofl_kv *kv, const char *req, char *buf, size_t cap)
{
    struct ofl_mc_out out = {.max = 1 << 16};
    size_t off = 0, len = strlen(req);
    while (off < len) {
        struct ofl_mc_req r;
        ssize_t n = ofl_mc_parse((const uint8_t *)req + off, len - off, OFL_MC_ANY, NULL, &r);
        if (n <= 0) {
            if (n < 0) ofl_kv_exec_error(&r, (int)n, &out);
            off += n < 0 ? r.len : len - off;
            continue;
        }
        ofl_kv_exec(kv, &r, &out);
        off += (size_t)n;
    }
    size_t k = out.len < cap - 1 ? out.len : cap - 1;
    memcpy(buf, out.buf, k);
    buf[k] = 0;
    ofl_mc_out_free(&out);
    return buf;
}

static void test_concat(void)
{
    struct ofl_kv *kv = make(100, 0, 8, 1);
    char buf[256];
    struct ofl_kv_meta m;
    CHECK(put(kv, OFL_KV_APPEND, "a", "x", 0, 0, NULL) == -ENOENT && !has(kv, "a"),
          "append to an absent key: -ENOENT, nothing stored");
    uint64_t h = ofl_kv_hash("a", 1), c1;
    CHECK(ofl_kv_store(kv, OFL_KV_SET, "a", 1, h, "mid", 3, 7, 1000, 0, &c1) == 0, "set");
    CHECK(put(kv, OFL_KV_APPEND, "a", ">>", 9, 0, NULL) == 0 &&
              put(kv, OFL_KV_PREPEND, "a", "<<", 9, 0, NULL) == 0 &&
              get(kv, "a", buf, sizeof buf, &m) == 0 && strcmp(buf, "<<mid>>") == 0 &&
              m.flags == 7 && m.expires,
          "append and prepend: the value grows at both ends, flags and expiry are kept");
    CHECK(put(kv, OFL_KV_APPEND, "a", "xy", 0, 0, NULL) == -E2BIG && has(kv, "a"),
          "an append past value_max: -E2BIG, the item unchanged");
    CHECK(put(kv, OFL_KV_APPEND, "a", "z", 0, c1, NULL) == -EEXIST,
          "an append with a stale CAS: -EEXIST");
    ofl_kv_destroy(kv);
}

static void test_arith(void)
{
    struct ofl_kv *kv = make(100, 0, 64, 1);
    char buf[512];
    CHECK(strcmp(ask(kv, "set n 5 0 3\r\n100\r\ndecr n 95\r\nget n\r\n", buf, sizeof buf),
                 "STORED\r\n5\r\nVALUE n 5 3\r\n5  \r\nEND\r\n") == 0,
          "decr rewrites in place, padded with spaces (as memcached): %s", buf);
    CHECK(strcmp(ask(kv, "set n 0 0 2\r\n99\r\nincr n 1\r\nget n\r\n", buf, sizeof buf),
                 "STORED\r\n100\r\nVALUE n 0 3\r\n100\r\nEND\r\n") == 0,
          "incr past a new digit makes a longer value: %s", buf);
    CHECK(strcmp(ask(kv, "set n 0 0 20\r\n18446744073709551615\r\nincr n 2\r\ndecr n 9\r\n", buf,
                     sizeof buf),
                 "STORED\r\n1\r\n0\r\n") == 0,
          "incr wraps at 2^64, decr stops at 0: %s", buf);
    CHECK(strcmp(ask(kv, "set n 0 0 3\r\n 12\r\nincr n 1\r\nset n 0 0 3\r\n-12\r\nincr n 1\r\n"
                         "set n 0 0 0\r\n\r\nincr n 1\r\nincr none 1\r\n", buf, sizeof buf),
                 "STORED\r\n13\r\nSTORED\r\nCLIENT_ERROR cannot increment or decrement "
                 "non-numeric value\r\nSTORED\r\nCLIENT_ERROR cannot increment or decrement "
                 "non-numeric value\r\nNOT_FOUND\r\n") == 0,
          "leading spaces are a number, a negative or empty value is not, a miss: %s", buf);
    struct ofl_kv_arith a = {.incr = 1, .delta = 1, .initial = 42, .create = 1};
    uint64_t v = 0;
    struct ofl_kv_meta m;
    CHECK(ofl_kv_arith(kv, "c", 1, ofl_kv_hash("c", 1), &a, &v, &m) == 0 && v == 42 && m.created &&
              ofl_kv_arith(kv, "c", 1, ofl_kv_hash("c", 1), &a, &v, &m) == 0 && v == 43 &&
              !m.created,
          "arithmetic's create stores the initial value once, then counts from it");
    ofl_kv_destroy(kv);
}

static void test_meta_marks(void)
{
    struct ofl_kv *kv = make(100, 0, 64, 1);
    uint64_t h = ofl_kv_hash("k", 1), cas;
    struct ofl_kv_meta m;
    struct ofl_kv_read viv = {.vivify = 1, .vivify_exptime = 30};
    CHECK(ofl_kv_read(kv, "k", 1, h, NULL, 0, &viv, &m) == 0 && m.created && m.win &&
              m.value_len == 0 && m.ttl > 0,
          "vivify on a miss creates an empty item and wins");
    CHECK(ofl_kv_read(kv, "k", 1, h, NULL, 0, &viv, &m) == 0 && !m.created && !m.win &&
              m.token_sent,
          "the next reader sees that another client won");
    CHECK(ofl_kv_invalidate(kv, "k", 1, h, 0, 0, 0, &cas) == 0 &&
              ofl_kv_read(kv, "k", 1, h, NULL, 0, NULL, &m) == 0 && m.stale && m.win &&
              m.cas == cas,
          "invalidate marks the item stale with a new CAS; the first reader after wins");
    CHECK(ofl_kv_store(kv, OFL_KV_CAS | OFL_KV_INVALIDATE, "k", 1, h, "v", 1, 0, 0, 1, NULL) == 0 &&
              ofl_kv_read(kv, "k", 1, h, NULL, 0, NULL, &m) == 0 && m.stale,
          "a CAS older than the item's stores with OFL_KV_INVALIDATE, still stale");
    CHECK(ofl_kv_store(kv, OFL_KV_CAS, "k", 1, h, "v", 1, 0, 0, 1, NULL) == -EEXIST,
          "without it the old CAS is refused");
    struct ofl_kv_read rec = {.recache = 1, .recache_s = 100};
    ofl_kv_store(kv, OFL_KV_SET, "r", 1, ofl_kv_hash("r", 1), "v", 1, 0, 50, 0, NULL);
    CHECK(ofl_kv_read(kv, "r", 1, ofl_kv_hash("r", 1), NULL, 0, &rec, &m) == 0 && m.win &&
              ofl_kv_read(kv, "r", 1, ofl_kv_hash("r", 1), NULL, 0, &rec, &m) == 0 && !m.win &&
              m.token_sent,
          "recache: with less TTL left than asked the first reader wins, once");
    CHECK(ofl_kv_read(kv, "r", 1, ofl_kv_hash("r", 1), NULL, 0, NULL, &m) == 0 && m.fetched,
          "an item read before says so (mg h)");
    ofl_kv_destroy(kv);
}

static void test_flush(void)
{
    struct ofl_kv *kv = make(100, 0, 64, 4);
    for (int i = 0; i < 20; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        put(kv, OFL_KV_SET, k, "v", 0, 0, NULL);
    }
    ofl_kv_flush(kv, 100000);
    CHECK(has(kv, "k3") && has(kv, "k19"), "a flush a day ahead leaves the items for now");
    ofl_kv_flush(kv, 0);
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    CHECK(!has(kv, "k3") && st.items == 0 && st.flushed == 20 && st.flushes == 2,
          "a flush now frees every item (20 flushed, 2 flushes counted)");
    put(kv, OFL_KV_SET, "after", "v", 0, 0, NULL);
    CHECK(has(kv, "after"), "items stored after a flush stay");
    ofl_kv_reset_stats(kv);
    ofl_kv_get_stats(kv, &st);
    CHECK(st.flushes == 0 && st.stores == 0 && st.items == 1, "reset zeroes the counters only");
    ofl_kv_destroy(kv);
}

/* "stats" reports the uptime from the env's started_s in ofl_kv_now_s's clock (the
 * servers set started_s with it), and 0 with no env. */
static unsigned long long uptime_of(struct ofl_kv *kv, const struct ofl_kv_env *env)
{
    struct ofl_mc_out out = {.max = 1 << 16};
    struct ofl_mc_req r;
    unsigned long long up = ~0ull;
    if (ofl_mc_parse((const uint8_t *)"stats\r\n", 7, OFL_MC_ANY, NULL, &r) > 0 &&
        ofl_kv_exec_env(kv, &r, &out, env) == 0 && ofl_mc_out_reserve(&out, 1) == 0) {
        out.buf[out.len] = 0;
        const char *at = strstr((const char *)out.buf, "STAT uptime ");
        if (at) up = strtoull(at + 12, NULL, 10);
    }
    ofl_mc_out_free(&out);
    return up;
}

static void test_stats_uptime(void)
{
    struct ofl_kv *kv = make(100, 0, 64, 4);
    uint64_t t0 = ofl_kv_now_s();
    struct ofl_kv_env env = {.started_s = t0 - 100};
    unsigned long long up = uptime_of(kv, &env);
    uint64_t waited = ofl_kv_now_s() - t0;   /* (the clock may tick meanwhile) */
    CHECK(up >= 100 && up <= 100 + waited, "started 100 s ago by ofl_kv_now_s: uptime %llu",
          up);
    up = uptime_of(kv, NULL);
    CHECK(up == 0, "no server around the store: uptime %llu", up);
    ofl_kv_destroy(kv);
}

static void test_threads(long ops)
{
    /* Room for every key: nothing is evicted, so each thread's model is exact. */
    struct ofl_kv *kv = make(THREADS * OWN_KEYS * 4, 0, 128, 4);
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){kv, i, ops, 0, 0, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    CHECK(failures == 0 && st.evictions == 0,
          "%d threads x %ld ops on 4 stripes: own keys match their models, shared values "
          "never torn (%d failures)", THREADS, ops, failures);
    ofl_kv_destroy(kv);

    /* A store far too small: evictions all the time; shared values still whole, and
     * own keys are either absent or hold their model's value. */
    kv = make(64, 0, 128, 2);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){kv, i, ops / 2, 1, 0, 0x2545f4914f6cdd1dull * (uint64_t)(i + 1)};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    ofl_kv_get_stats(kv, &st);
    CHECK(failures == 0 && st.items <= 64 && st.evictions > 0,
          "under eviction: %llu items <= 64, %llu evictions; own keys absent or as modelled, "
          "shared values whole (%d failures)", (unsigned long long)st.items,
          (unsigned long long)st.evictions, failures);
    ofl_kv_destroy(kv);
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 500000;
    test_config();
    test_basic();
    test_collisions();
    test_expiry();
    test_eviction();
    test_exec();
    test_exec_trusted();
    test_concat();
    test_arith();
    test_meta_marks();
    test_flush();
    test_stats_uptime();
    test_threads(ops);
    return CHECK_DONE();
}
