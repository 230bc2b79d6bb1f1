/* Tests of the NIC cache of the key-value store (runtime/lib/kvs/src/kvcache.c), driven with
 * request packets against a real host store (kvstore.c through ofl_kvs_reply):
 * configuration and options, hits / misses / fills for both protocols, both
 * policies, eviction with write-backs reaching the store, stale fills, DELETE of
 * dirty entries, requests the cache does not serve (dirty keys written back first),
 * quiet requests and header-only replies, several requests in one datagram (each run, as
 * memcached runs them; the shard walk past a bad one), malformed packets, flush, a randomized
 * model check (random GET/SET/DELETE over a few keys, a tiny cache, requests to the
 * store in FIFO order with random delays, every GET answer checked against the
 * history of writes) and two threads running the lookup and update sides at once.
 *
 * usage: test_kvcache [MODEL_OPS] */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/gen.h"
#include "offlow/kvcache.h"
#include "offlow/kvs_pkt.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"
#include "offlow/udp_port.h"

#define L3 14u
#define L4 34u
#define DGRAM (L4 + 8u)   /* the memcached datagram: frame header, then requests */
#define CAP 2048u
#define QMAX 256

/* ---- packets ---------------------------------------------------------------- */

struct msg {
    uint8_t buf[CAP];
    struct ofl_pkt pkt;
    uint64_t ticket;
    int op;               /* index of the model operation (-1: none) */
    int keep;             /* deliver/drain leave it to the test to free */
};

static struct msg *new_msg(uint16_t id, const void *req, size_t n)
{
    struct msg *m = calloc(1, sizeof *m);
    ofl_udp_frame_build(m->buf, 0x0a000001, 40000, 0x0a000002, 11211,
                        (uint32_t)(OFL_MC_UDP_HDR_LEN + n));
    ofl_mc_udp_write(m->buf + DGRAM, id, 0, 1);
    memcpy(m->buf + DGRAM + OFL_MC_UDP_HDR_LEN, req, n);
    m->pkt = (struct ofl_pkt){m->buf, (uint32_t)(DGRAM + OFL_MC_UDP_HDR_LEN + n), CAP, 0, 0};
    m->op = -1;
    return m;
}

static size_t bin_req(uint8_t *out, uint8_t op, const char *key, const char *val,
                      uint32_t flags, uint32_t exptime, uint64_t cas)
{
    uint8_t ex[8];
    ofl_put_be32(ex, flags);
    ofl_put_be32(ex + 4, exptime);
    int set = op == OFL_MC_OP_SET || op == OFL_MC_OP_SETQ || op == OFL_MC_OP_ADD;
    ssize_t n = ofl_mc_write_request(out, 1600, op, 0x1234, cas, set ? ex : NULL, set ? 8 : 0,
                                     key, strlen(key), val, val ? strlen(val) : 0);
    if (n < 0) abort();
    return (size_t)n;
}

static struct msg *bin(uint8_t op, const char *key, const char *val, uint32_t flags)
{
    uint8_t b[1600];
    return new_msg(7, b, bin_req(b, op, key, val, flags, 0, 0));
}

static struct msg *text(const char *s)
{
    return new_msg(9, s, strlen(s));
}

/* The reply's memcached bytes (frame header excluded). */
static const uint8_t *body(const struct msg *m, size_t *n)
{
    uint32_t ulen = ofl_get_be16(m->pkt.data + L4 + 4);
    *n = ulen - 16;
    return m->pkt.data + DGRAM + OFL_MC_UDP_HDR_LEN;
}

/* ---- a cache in front of a store ---------------------------------------------- */

struct world {
    struct ofl_kvc *c;
    struct ofl_kv *kv;
    struct ofl_kvs store;  /* kv as a program's table (no TCP) */
    struct msg *q[QMAX];   /* FIFO of requests on their way to the store */
    int head, n;
    int header_only;       /* replies to quiet requests: a header-only datagram */
    int wb_seen;           /* write-backs emitted */
    int wb_bad_ret;        /* ofl_kvc_reply did not drop a write-back's reply */
};

static void push(struct world *w, struct msg *m)
{
    if (w->n == QMAX) abort();
    w->q[(w->head + w->n++) % QMAX] = m;
}

static void emit(void *arg, struct ofl_pkt *pkt, uint64_t hash)
{
    struct world *w = arg;
    struct msg *m = calloc(1, sizeof *m);
    memcpy(m->buf, pkt->data, pkt->len);
    m->pkt = (struct ofl_pkt){m->buf, pkt->len, CAP, 0, 0};
    m->ticket = OFL_KVC_INTERNAL;
    m->op = -1;
    uint64_t h;
    if (ofl_kvs_key_hash(&m->pkt, L4, &h) || h != hash) {
        printf("FAIL: write-back steered by a hash that is not its key's\n");
        ofl_test_failures++;
    }
    w->wb_seen++;
    push(w, m);
}

static void world_init(struct world *w, int policy, int eviction, uint32_t entries,
                       uint32_t ways, uint32_t value_max)
{
    memset(w, 0, sizeof *w);
    struct ofl_kvc_config cfg = {entries, ways, value_max, policy, eviction};
    struct ofl_kv_config kcfg = {100000, 0, 1400, 0};
    if (ofl_kvc_create(&w->c, &cfg) || ofl_kv_create(&w->kv, &kcfg)) abort();
    w->store.kv = w->kv;
    w->store.value_max = kcfg.value_max;
}

static void world_free(struct world *w)
{
    while (w->n) {
        free(w->q[w->head]);
        w->head = (w->head + 1) % QMAX;
        w->n--;
    }
    ofl_kvc_destroy(w->c);
    ofl_kv_destroy(w->kv);
}

/* Lookup side: HIT (m is the reply), MISS (m queued to the store), or an error. */
static int submit(struct world *w, struct msg *m)
{
    int rc = ofl_kvc_request(w->c, &m->pkt, L3, L4, &m->ticket, emit, w);
    if (rc == OFL_KVC_MISS) push(w, m);
    return rc;
}

/* The store runs the oldest queued request; the update side sees its reply.
 * Returns the message (its packet now the reply; pkt.len 0: no reply at all) or
 * NULL when the cache dropped the reply (write-backs) or the queue is empty.
 * *popped is set to the message in all cases (for write-backs it is freed). */
static struct msg *deliver(struct world *w, struct msg **popped)
{
    *popped = NULL;
    if (!w->n) return NULL;
    struct msg *m = w->q[w->head];
    w->head = (w->head + 1) % QMAX;
    w->n--;
    *popped = m;
    int rc = ofl_kvs_reply(&w->store, &m->pkt, L3, L4, m->ticket == OFL_KVC_INTERNAL);
    if (rc == OFL_KVS_NONE && w->header_only) {   /* what memcached sends for a silent request */
        ofl_put_be16(m->pkt.data + L4 + 4, 16);
        m->pkt.len = DGRAM + OFL_MC_UDP_HDR_LEN;
        rc = 0;
    }
    if (!ofl_kvs_sends(rc)) {
        if (m->ticket == OFL_KVC_INTERNAL) {
            free(m);
            *popped = NULL;
            return NULL;
        }
        m->pkt.len = 0;
        return m;
    }
    int r = ofl_kvc_reply(w->c, &m->pkt, L3, L4, rc == OFL_KVS_SEND_EXPIRING, m->ticket);
    if (m->ticket == OFL_KVC_INTERNAL) {
        if (r != 1) w->wb_bad_ret++;
        free(m);
        *popped = NULL;
        return NULL;
    }
    if (r != 0) w->wb_bad_ret++;
    return m;
}

/* Run until the request `m` is answered: deliver everything ahead of it too. */
static struct msg *roundtrip(struct world *w, struct msg *m, int *hit)
{
    int rc = submit(w, m);
    *hit = rc == OFL_KVC_HIT;
    if (rc != OFL_KVC_MISS) return m;
    for (;;) {
        struct msg *p, *r = deliver(w, &p);
        if (p == m) return r;
        if (r && !r->keep) free(r);
        if (!w->n && !p) return NULL;
    }
}

static void drain(struct world *w)
{
    while (w->n) {
        struct msg *p, *r = deliver(w, &p);
        if (r && !r->keep) free(r);
    }
}

/* A binary response in a reply packet. */
static int bin_res(const struct msg *m, struct ofl_mc_res *res)
{
    size_t n;
    const uint8_t *b = body(m, &n);
    return ofl_mc_parse_response(b, n, res, NULL) == (ssize_t)n ? 0 : -1;
}

static int body_is(const struct msg *m, const char *s)
{
    size_t n;
    const uint8_t *b = body(m, &n);
    return n == strlen(s) && !memcmp(b, s, n);
}

static int res_value_is(const struct ofl_mc_res *r, const char *v)
{
    return r->value_len == strlen(v) && !memcmp(r->value, v, r->value_len);
}

/* Binary GET through the cache: status, value (NUL-terminated), hit, cas. */
static int do_bget(struct world *w, const char *key, char *val, int *hit, uint64_t *cas,
                   uint32_t *flags)
{
    struct msg *r = roundtrip(w, bin(OFL_MC_OP_GET, key, NULL, 0), hit);
    struct ofl_mc_res res;
    int st = -1;
    if (r && r->pkt.len && bin_res(r, &res) == 0) {
        st = res.status;
        if (st == 0) {
            memcpy(val, res.value, res.value_len);
            val[res.value_len] = 0;
            if (cas) *cas = res.cas;
            if (flags) *flags = ofl_get_be32(res.extras);
        }
    }
    free(r);
    return st;
}

static int store_has(struct world *w, const char *key, const char *val)
{
    char buf[2048];
    struct ofl_kv_meta meta;
    int rc = ofl_kv_get(w->kv, key, strlen(key), ofl_kv_hash(key, strlen(key)), buf,
                        sizeof buf, &meta);
    if (!val) return rc == -ENOENT;
    return rc == 0 && meta.value_len == strlen(val) && !memcmp(buf, val, meta.value_len);
}

static void store_put(struct world *w, const char *key, const char *val)
{
    if (ofl_kv_store(w->kv, OFL_KV_SET, key, strlen(key), ofl_kv_hash(key, strlen(key)), val,
                     strlen(val), 5, 0, 0, NULL))
        abort();
}

/* ---- deterministic tests ------------------------------------------------------ */

static void test_config(void)
{
    struct ofl_kvc *c = NULL;
    struct ofl_kvc_config bad[] = {
        {0, 8, 256, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU},
        {64, 0, 256, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU},
        {4, 8, 256, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU},
        {64, 8, OFL_KVC_VALUE_MAX + 1, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU},
        {64, 8, 256, 3, OFL_KVC_LRU},
        {64, 8, 256, OFL_KVC_WRITE_BACK, 0},
        {64, OFL_KVC_WAYS_MAX + 1, 256, OFL_KVC_WRITE_BACK, OFL_KVC_CLOCK},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ofl_kvc_create(&c, &bad[i]) == -EINVAL, "bad configuration %zu refused", i);
    struct ofl_kvc_config ok = {100, 8, 0, OFL_KVC_WRITE_BACK, OFL_KVC_CLOCK};
    CHECK(ofl_kvc_create(&c, &ok) == 0, "entries not a multiple of ways, value_max 0");
    ofl_kvc_destroy(c);

    struct ofl_args a;
    memset(&a, 0, sizeof a);
    a.device = "nic";
    c = NULL;
    CHECK(ofl_kvc_open_opts(&c, &a, "cache") == 0 && c, "open with the defaults");
    ofl_kvc_destroy(c);
    const char *cases[][2] = {
        {"cache.entries", "12x"}, {"cache.ways", "0"},       {"cache.value_max", "5000"},
        {"cache.policy", "wb"},   {"cache.eviction", "fifo"}, {"cache.entries", "-3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        a.nopts = 1;
        a.opt_key[0] = cases[i][0];
        a.opt_val[0] = cases[i][1];
        a.opt_keylen[0] = strlen(cases[i][0]);
        printf("(expect a message) ");
        fflush(stdout);
        CHECK(ofl_kvc_open_opts(&c, &a, "cache") == -EINVAL, "%s=%s refused", cases[i][0],
              cases[i][1]);
    }
    const char *good[][2] = {{"cache.policy", "write_back"}, {"cache.eviction", "clock"},
                             {"cache.entries", "64"}, {"cache.ways", "4"}};
    a.nopts = 4;
    for (int i = 0; i < 4; i++) {
        a.opt_key[i] = good[i][0];
        a.opt_val[i] = good[i][1];
        a.opt_keylen[i] = strlen(good[i][0]);
    }
    c = NULL;
    CHECK(ofl_kvc_open_opts(&c, &a, "cache") == 0 && c, "open write_back / clock / 64 x 4");
    ofl_kvc_destroy(c);
}

static void test_basic(int policy)
{
    const char *pn = policy == OFL_KVC_WRITE_BACK ? "write-back" : "write-through";
    struct world w;
    world_init(&w, policy, OFL_KVC_LRU, 64, 4, 256);
    char val[2048];
    int hit;
    uint64_t cas = 0;
    uint32_t flags = 0;
    CHECK(do_bget(&w, "a", val, &hit, NULL, NULL) == OFL_MC_ST_NOT_FOUND && !hit,
          "%s: GET of a missing key: NOT_FOUND from the store", pn);
    CHECK(do_bget(&w, "a", val, &hit, NULL, NULL) == OFL_MC_ST_NOT_FOUND && !hit,
          "%s: again a miss (reservation released)", pn);

    struct msg *r = roundtrip(&w, bin(OFL_MC_OP_SET, "a", "alpha", 42), &hit);
    struct ofl_mc_res res;
    CHECK(r && bin_res(r, &res) == 0 && res.status == 0 && res.opaque == 0x1234 && res.cas,
          "%s: SET answered (status 0, opaque, a CAS)", pn);
    uint64_t set_cas = r ? res.cas : 0;
    CHECK(hit == (policy == OFL_KVC_WRITE_BACK), "%s: SET is a hit only in write-back", pn);
    CHECK(r && ofl_get_be16(r->pkt.data + L4) == 11211 && r->pkt.data[5] == 2 &&
              ofl_get_be32(r->pkt.data + L3 + 16) == 0x0a000001 && ofl_get_be16(r->buf + DGRAM) == 7,
          "%s: reply addressed to the client, request id kept", pn);
    CHECK(r && ofl_ipv4_csum_ok(r->pkt.data + L3, 20), "%s: reply IPv4 checksum", pn);
    if (policy == OFL_KVC_WRITE_BACK)
        CHECK(set_cas >> 63, "write-back: the cache's CAS has the high bit set");
    free(r);
    CHECK(do_bget(&w, "a", val, &hit, &cas, &flags) == 0 && hit && !strcmp(val, "alpha") &&
              flags == 42 && cas == set_cas,
          "%s: GET hit: value, flags, the SET's CAS", pn);
    CHECK(store_has(&w, "a", policy == OFL_KVC_WRITE_BACK ? NULL : "alpha"),
          "%s: the store %s the value", pn,
          policy == OFL_KVC_WRITE_BACK ? "does not have yet" : "has");

    r = roundtrip(&w, text("get a\r\n"), &hit);
    CHECK(r && hit && body_is(r, "VALUE a 42 5\r\nalpha\r\nEND\r\n"), "%s: text get hit", pn);
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_GETK, "a", NULL, 0), &hit);
    CHECK(r && hit && bin_res(r, &res) == 0 && res.key_len == 1 && res.key[0] == 'a' &&
              res_value_is(&res, "alpha") && res.opcode == OFL_MC_OP_GETK,
          "%s: GETK hit carries the key", pn);
    free(r);

    /* text SET: STORED without a CAS; binary GETs must then ask the store */
    r = roundtrip(&w, text("set b 3 4\r\nbeta\r\n"), &hit);
    CHECK(r, "%s: text set", pn);
    free(r);
    r = roundtrip(&w, text("set b 3 0 4\r\nbeta\r\n"), &hit);
    CHECK(r && body_is(r, "STORED\r\n"), "%s: text set answered STORED", pn);
    free(r);
    r = roundtrip(&w, text("get b\r\n"), &hit);
    CHECK(r && hit && body_is(r, "VALUE b 3 4\r\nbeta\r\nEND\r\n"), "%s: text get hit of b", pn);
    free(r);
    if (policy == OFL_KVC_WRITE_THROUGH) {
        CHECK(do_bget(&w, "b", val, &hit, &cas, NULL) == 0 && !hit && !strcmp(val, "beta"),
              "write-through: binary GET after a text SET: the store answers (no CAS known)");
        CHECK(do_bget(&w, "b", val, &hit, &cas, NULL) == 0 && hit && cas,
              "write-through: ... and fills the CAS: the next one hits");
    }
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.hits >= 4 && st.drops == 0 && st.wb_errors == 0, "%s: stats hits %" PRIu64, pn,
          st.hits);
    world_free(&w);
}

static void test_fill(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_THROUGH, OFL_KVC_CLOCK, 64, 4, 256);
    store_put(&w, "k", "from-store");
    char val[2048];
    int hit;
    uint64_t cas;
    CHECK(do_bget(&w, "k", val, &hit, &cas, NULL) == 0 && !hit && !strcmp(val, "from-store"),
          "GET miss answered by the store");
    uint64_t cas2;
    uint32_t flags;
    CHECK(do_bget(&w, "k", val, &hit, &cas2, &flags) == 0 && hit && cas2 == cas && flags == 5,
          "then a hit with the store's CAS and flags");
    store_put(&w, "t", "text-fill");
    struct msg *r = roundtrip(&w, text("get t\r\n"), &hit);
    CHECK(r && !hit && body_is(r, "VALUE t 5 9\r\ntext-fill\r\nEND\r\n"), "text get miss");
    free(r);
    r = roundtrip(&w, text("get t\r\n"), &hit);
    CHECK(r && hit && body_is(r, "VALUE t 5 9\r\ntext-fill\r\nEND\r\n"), "text get hit");
    free(r);
    CHECK(do_bget(&w, "t", val, &hit, &cas, NULL) == 0 && !hit,
          "binary GET of a text-filled entry goes to the store (CAS unknown)");
    CHECK(do_bget(&w, "t", val, &hit, &cas2, NULL) == 0 && hit && cas2 == cas,
          "... which fills the CAS");

    /* two GETs in flight share one reservation */
    struct msg *g1 = bin(OFL_MC_OP_GET, "s", NULL, 0), *g2 = text("get s\r\n");
    store_put(&w, "s", "shared");
    g1->keep = g2->keep = 1;
    submit(&w, g1);
    submit(&w, g2);
    CHECK(g1->ticket && g1->ticket == g2->ticket, "two GETs in flight share a ticket");
    drain(&w);
    free(g1);
    free(g2);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.stale_fills == 0, "no stale fills (%" PRIu64 ")", st.stale_fills);
    CHECK(do_bget(&w, "s", val, &hit, NULL, NULL) == 0 && hit && !strcmp(val, "shared"),
          "filled once, then hits");
    world_free(&w);
}

/* An item with an expiry time is never kept: the cache cannot see the expiry in the
 * store's reply (memcached's GET replies carry none), so a copy could outlive it. */
static void test_expiring(int policy)
{
    const char *pn = policy == OFL_KVC_WRITE_BACK ? "write-back" : "write-through";
    struct world w;
    world_init(&w, policy, OFL_KVC_LRU, 64, 4, 256);
    if (ofl_kv_store(w.kv, OFL_KV_SET, "e", 1, ofl_kv_hash("e", 1), "soon", 4, 5, 3600, 0, NULL))
        abort();
    char val[2048];
    int hit;
    for (int i = 0; i < 2; i++)
        CHECK(do_bget(&w, "e", val, &hit, NULL, NULL) == 0 && !hit && !strcmp(val, "soon"),
              "%s: binary GET %d of an expiring item: a miss, the store's value", pn, i);
    struct msg *r = roundtrip(&w, text("get e\r\n"), &hit);
    CHECK(r && !hit && body_is(r, "VALUE e 5 4\r\nsoon\r\nEND\r\n"),
          "%s: text get of it: a miss too", pn);
    free(r);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.uncached == 3 && st.fills == 0 && st.hits == 0,
          "%s: three replies not kept (uncached %" PRIu64 ", fills %" PRIu64 ")", pn,
          st.uncached, st.fills);
    /* The same key stored again without an expiry is cached as usual. */
    store_put(&w, "e", "kept");
    CHECK(do_bget(&w, "e", val, &hit, NULL, NULL) == 0 && !hit &&
              do_bget(&w, "e", val, &hit, NULL, NULL) == 0 && hit && !strcmp(val, "kept"),
          "%s: without an expiry: filled, then a hit", pn);
    /* Two GETs share a reservation and the first reply fills the entry; if the
     * store's item gains an expiry before the second is answered, that reply removes
     * the entry. */
    store_put(&w, "c", "lasting");
    struct msg *g1 = bin(OFL_MC_OP_GET, "c", NULL, 0), *g2 = bin(OFL_MC_OP_GET, "c", NULL, 0);
    g1->keep = g2->keep = 1;
    submit(&w, g1);
    submit(&w, g2);
    CHECK(g1->ticket && g1->ticket == g2->ticket, "%s: two GETs share a ticket", pn);
    struct msg *popped;
    deliver(&w, &popped);
    if (ofl_kv_store(w.kv, OFL_KV_SET, "c", 1, ofl_kv_hash("c", 1), "lasting", 7, 5, 3600, 0,
                     NULL))
        abort();
    deliver(&w, &popped);
    free(g1);
    free(g2);
    ofl_kvc_stats(w.c, &st);
    CHECK(st.uncached == 4 && do_bget(&w, "c", val, &hit, NULL, NULL) == 0 && !hit,
          "%s: the second reply removed the filled entry (uncached %" PRIu64 ")", pn,
          st.uncached);
    /* A reply over one datagram becomes the out-of-memory answer, which holds no
     * value: plainly sent, even when the values it replaced belong to expiring items. */
    char big[1001];
    memset(big, 'x', 1000);
    big[1000] = 0;
    for (const char *k = "pq"; *k; k++)
        if (ofl_kv_store(w.kv, OFL_KV_SET, k, 1, ofl_kv_hash(k, 1), big, 1000, 0, 3600, 0, NULL))
            abort();
    struct msg *mg = text("get p q\r\n");
    int rc = ofl_kvs_reply(&w.store, &mg->pkt, L3, L4, 0);
    CHECK(rc == OFL_KVS_SEND &&
              body_is(mg, "SERVER_ERROR out of memory writing get response\r\n"),
          "%s: an over-long reply of expiring items: the out-of-memory answer, sent plainly (%d)",
          pn, rc);
    free(mg);
    world_free(&w);
}

static void test_stale(int policy)
{
    const char *pn = policy == OFL_KVC_WRITE_BACK ? "write-back" : "write-through";
    struct world w;
    world_init(&w, policy, OFL_KVC_LRU, 64, 4, 256);
    store_put(&w, "k", "old");
    struct msg *g = bin(OFL_MC_OP_GET, "k", NULL, 0);
    CHECK(submit(&w, g) == OFL_KVC_MISS && g->ticket, "%s: GET miss in flight", pn);
    struct msg *s = bin(OFL_MC_OP_SET, "k", "new", 1);
    g->keep = s->keep = 1;
    submit(&w, s);
    drain(&w);
    free(s);
    free(g);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.stale_fills == 1, "%s: the old GET reply did not fill (stale %" PRIu64 ")", pn,
          st.stale_fills);
    char val[2048];
    int hit;
    CHECK(do_bget(&w, "k", val, &hit, NULL, NULL) == 0 && hit && !strcmp(val, "new"),
          "%s: GET after the SET: the new value, from the cache", pn);

    /* GET miss, DELETE, GET reply (old value) must not fill */
    store_put(&w, "d", "old");
    g = bin(OFL_MC_OP_GET, "d", NULL, 0);
    g->keep = 1;
    submit(&w, g);
    struct msg *d = bin(OFL_MC_OP_DELETE, "d", NULL, 0);
    d->keep = 1;
    CHECK(submit(&w, d) == OFL_KVC_MISS && d->ticket == 0, "%s: DELETE forwarded, ticket 0", pn);
    drain(&w);
    free(g);
    free(d);
    CHECK(do_bget(&w, "d", val, &hit, NULL, NULL) == OFL_MC_ST_NOT_FOUND && !hit,
          "%s: GET after DELETE: NOT_FOUND", pn);
    world_free(&w);
}

static void test_eviction(int eviction)
{
    const char *en = eviction == OFL_KVC_CLOCK ? "clock" : "lru";
    struct world w;
    world_init(&w, OFL_KVC_WRITE_BACK, eviction, 4, 2, 64);
    char key[32], v[64];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "key%d", i);
        snprintf(v, sizeof v, "value-%d", i);
        int hit;
        struct msg *r = roundtrip(&w, bin(OFL_MC_OP_SETQ, key, v, (uint32_t)i), &hit);
        size_t n;
        CHECK(r && hit && (body(r, &n), n == 0) && r->pkt.len == DGRAM + 8,
              "%s: SETQ %d: hit, header-only reply", en, i);
        free(r);
    }
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.evictions >= 36 && st.writebacks == st.evictions && w.n == (int)st.writebacks,
          "%s: evictions %" PRIu64 " = write-backs %" PRIu64 " queued", en, st.evictions,
          st.writebacks);
    drain(&w);
    int in_store = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "key%d", i);
        snprintf(v, sizeof v, "value-%d", i);
        in_store += store_has(&w, key, v);
    }
    CHECK(in_store == (int)st.writebacks, "%s: every write-back reached the store (%d)", en,
          in_store);
    uint8_t tb[64];
    struct msg *tmpl = new_msg(0, tb, bin_req(tb, OFL_MC_OP_NOOP, "", NULL, 0, 0, 0));
    int f = ofl_kvc_flush(w.c, emit, &w, &tmpl->pkt, L3, L4);
    CHECK(f == 40 - in_store, "%s: flush wrote back the %d others", en, f);
    drain(&w);
    free(tmpl);
    in_store = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "key%d", i);
        snprintf(v, sizeof v, "value-%d", i);
        in_store += store_has(&w, key, v);
    }
    ofl_kvc_stats(w.c, &st);
    CHECK(in_store == 40 && st.wb_errors == 0 && !w.wb_bad_ret,
          "%s: all 40 in the store, no write-back errors, their replies dropped", en);
    char val[2048];
    int hit;
    snprintf(key, sizeof key, "key%d", 39);
    uint64_t cas = 0;
    struct ofl_kv_meta meta;
    CHECK(do_bget(&w, key, val, &hit, &cas, NULL) == 0 && hit && !strcmp(val, "value-39") &&
              ofl_kv_get(w.kv, key, strlen(key), ofl_kv_hash(key, strlen(key)), val,
                         sizeof val, &meta) == 0 && meta.cas == cas && cas >> 63,
          "%s: a flushed entry stays valid with its CAS, which the store kept", en);
    world_free(&w);
}

/* A binary request with a CAS through the cache: its status. */
static int cas_req(struct world *w, uint8_t op, const char *key, const char *val, uint64_t cas,
                   int *hit)
{
    uint8_t b[1600];
    struct msg *r = roundtrip(w, new_msg(1, b, bin_req(b, op, key, val, 0, 0, cas)), hit);
    struct ofl_mc_res res;
    int st = r && bin_res(r, &res) == 0 ? res.status : -1;
    free(r);
    return st;
}

/* Write-back: a client holding the CAS the cache gave an item can still use it once
 * the item is written back (the write-back's SETQ carries it and the store keeps it,
 * ofl_kvs_reply's from_cache). It got EXISTS before. */
static void test_cas_after_writeback(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_BACK, OFL_KVC_LRU, 4, 2, 64);
    int hit;
    uint64_t x = 0;
    char val[2048];
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "k", "v1", 0), &hit));
    CHECK(do_bget(&w, "k", val, &hit, &x, NULL) == 0 && hit && x >> 63,
          "write-back SET: the cache's CAS");
    CHECK(cas_req(&w, OFL_MC_OP_SET, "k", "v2", x, &hit) == 0 && !hit &&
              store_has(&w, "k", "v2"),
          "a CAS SET with it (not cacheable: written back first) matches at the store");
    CHECK(cas_req(&w, OFL_MC_OP_SET, "k", "v3", x, &hit) == OFL_MC_ST_EXISTS,
          "... and only once: the same CAS again is EXISTS");

    free(roundtrip(&w, bin(OFL_MC_OP_SET, "d", "D", 0), &hit));
    CHECK(do_bget(&w, "d", val, &hit, &x, NULL) == 0 && hit, "a dirty d");
    CHECK(cas_req(&w, OFL_MC_OP_DELETE, "d", NULL, x, &hit) == 0 && !hit &&
              store_has(&w, "d", NULL),
          "a DELETE with the cache's CAS matches at the store");

    /* evicted dirty: written back with its CAS; a later GET fills it back with it */
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "e", "E", 0), &hit));
    CHECK(do_bget(&w, "e", val, &hit, &x, NULL) == 0 && hit, "a dirty e");
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "f%d", i);
        free(roundtrip(&w, bin(OFL_MC_OP_SET, key, "F", 0), &hit));
    }
    drain(&w);
    uint64_t y = 0;
    CHECK(store_has(&w, "e", "E") && do_bget(&w, "e", val, &hit, &y, NULL) == 0 && !hit &&
              y == x,
          "e evicted and written back: the store's GET answers with the cache's CAS");
    CHECK(cas_req(&w, OFL_MC_OP_SET, "e", "E2", x, &hit) == 0 && store_has(&w, "e", "E2"),
          "a CAS SET with it matches");
    drain(&w);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.evictions >= 1 && st.wb_errors == 0 && !w.wb_bad_ret, "no write-back errors");
    world_free(&w);
}

static void test_delete_dirty(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_BACK, OFL_KVC_LRU, 64, 4, 256);
    store_put(&w, "k", "old");
    int hit;
    struct msg *r = roundtrip(&w, bin(OFL_MC_OP_SET, "k", "dirty", 0), &hit);
    free(r);
    CHECK(store_has(&w, "k", "old"), "the store holds an older copy");
    r = roundtrip(&w, bin(OFL_MC_OP_DELETE, "k", NULL, 0), &hit);
    struct ofl_mc_res res;
    CHECK(r && hit && bin_res(r, &res) == 0 && res.status == 0 &&
              res.opcode == OFL_MC_OP_DELETE && w.n == 1,
          "DELETE of a dirty entry: a hit, DELETEQ queued");
    free(r);
    drain(&w);
    CHECK(store_has(&w, "k", NULL), "the DELETEQ removed the store's copy");
    char val[2048];
    CHECK(do_bget(&w, "k", val, &hit, NULL, NULL) == OFL_MC_ST_NOT_FOUND, "GET: NOT_FOUND");
    r = roundtrip(&w, bin(OFL_MC_OP_DELETE, "k", NULL, 0), &hit);
    CHECK(r && !hit && bin_res(r, &res) == 0 && res.status == OFL_MC_ST_NOT_FOUND,
          "DELETE of a missing key: the store answers NOT_FOUND");
    free(r);
    /* dirty entry deleted although the store never had it: DELETEQ answered NOT_FOUND */
    r = roundtrip(&w, text("set n 0 0 1 noreply\r\nx\r\n"), &hit);
    CHECK(r && hit && (r->pkt.len == DGRAM + 8), "text set noreply: header-only hit");
    free(r);
    r = roundtrip(&w, text("delete n\r\n"), &hit);
    CHECK(r && hit && body_is(r, "DELETED\r\n"), "text delete of a dirty entry: DELETED");
    free(r);
    drain(&w);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.wb_errors == 0, "a DELETEQ of a key the store lacks is no write-back error");
    world_free(&w);
}

static void test_noncacheable(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_BACK, OFL_KVC_LRU, 64, 4, 16);
    int hit;
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "a", "A1", 0), &hit));
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "b", "B1", 0), &hit));
    CHECK(w.n == 0 && store_has(&w, "a", NULL), "two dirty keys, nothing sent yet");
    struct msg *m = text("get a b\r\n");
    m->keep = 1;
    int rc = submit(&w, m);
    CHECK(rc == OFL_KVC_HIT && w.n == 2 && body_is(m, OFL_KVC_BUSY_TEXT "\r\n"),
          "multi-key get naming a key being written back: both written back, the get "
          "refused (it could pass b's write-back on another host core)");
    free(m);
    drain(&w);   /* the write-backs reach the store; their replies come back */
    m = text("get a b\r\n");
    m->keep = 1;
    rc = submit(&w, m);
    CHECK(rc == OFL_KVC_MISS && m->ticket == 0 && w.n == 1,
          "once their replies came back, the retry goes to the store");
    drain(&w);
    CHECK(body_is(m, "VALUE a 0 2\r\nA1\r\nVALUE b 0 2\r\nB1\r\nEND\r\n"),
          "the store answers with the written-back values");
    free(m);

    free(roundtrip(&w, bin(OFL_MC_OP_SET, "a", "A2", 0), &hit));
    uint8_t b[512];
    size_t n = bin_req(b, OFL_MC_OP_GET, "x", NULL, 0, 0, 0);
    n += bin_req(b + n, OFL_MC_OP_GET, "a", NULL, 0, 0, 0);
    m = new_msg(3, b, n);
    m->keep = 1;
    rc = submit(&w, m);
    CHECK(rc == OFL_KVC_HIT && w.n == 1,
          "two requests in one datagram, the second's key dirty: written back, refused");
    drain(&w);
    free(m);
    CHECK(store_has(&w, "a", "A2"), "the store has A2");
    m = new_msg(4, b, n);
    m->keep = 1;
    CHECK(submit(&w, m) == OFL_KVC_MISS && w.n == 1, "the retry goes to the store");
    drain(&w);
    free(m);
    /* steered by its key: the first request's own write-back goes ahead of it */
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "a", "A3", 0), &hit));
    m = text("get a x\r\n");
    m->keep = 1;
    CHECK(submit(&w, m) == OFL_KVC_MISS && w.n == 2,
          "a dirty first key is written back ahead of the request, which goes on");
    drain(&w);
    CHECK(body_is(m, "VALUE a 0 2\r\nA3\r\nEND\r\n"), "and gets the value");
    free(m);

    struct ofl_kvc_stats st0, st;
    free(roundtrip(&w, bin(OFL_MC_OP_SET, "a", "A3", 0), &hit));
    ofl_kvc_stats(w.c, &st0);
    n = bin_req(b, OFL_MC_OP_SET, "a", "expiring", 0, 1000, 0);
    struct msg *r = roundtrip(&w, new_msg(1, b, n), &hit);
    CHECK(r && !hit && bin_res(r, &(struct ofl_mc_res){0}) == 0,
          "SET with an exptime goes to the store");
    free(r);
    ofl_kvc_stats(w.c, &st);
    CHECK(st.bypass == st0.bypass + 1 && st.writebacks == st0.writebacks + 1 &&
              st.invalidations == st0.invalidations + 1,
          "... after writing the dirty value back and dropping the entry");
    char val[2048];
    CHECK(do_bget(&w, "a", val, &hit, NULL, NULL) == 0 && !hit && !strcmp(val, "expiring"),
          "GET: the store's value");

    free(roundtrip(&w, bin(OFL_MC_OP_SET, "c", "C1", 0), &hit));
    r = roundtrip(&w, bin(OFL_MC_OP_SET, "c", "a value longer than sixteen", 0), &hit);
    CHECK(r && !hit, "SET over value_max goes to the store");
    free(r);
    CHECK(do_bget(&w, "c", val, &hit, NULL, NULL) == 0 && !hit &&
              !strcmp(val, "a value longer than sixteen"),
          "GET: the long value from the store");

    free(roundtrip(&w, bin(OFL_MC_OP_SET, "d", "D1", 0), &hit));
    n = bin_req(b, OFL_MC_OP_ADD, "d", "D2", 0, 0, 0);
    r = roundtrip(&w, new_msg(1, b, n), &hit);
    struct ofl_mc_res res;
    CHECK(r && !hit && bin_res(r, &res) == 0 && res.status == OFL_MC_ST_EXISTS,
          "ADD of a dirty key: written back first, so the store says EXISTS");
    free(r);
    n = bin_req(b, OFL_MC_OP_SET, "d", "D3", 0, 0, 777);
    r = roundtrip(&w, new_msg(1, b, n), &hit);
    CHECK(r && !hit && bin_res(r, &res) == 0 && res.status == OFL_MC_ST_EXISTS,
          "CAS-compare SET goes to the store");
    free(r);
    r = roundtrip(&w, text("gets d\r\n"), &hit);
    CHECK(r && !hit, "gets goes to the store");
    free(r);
    r = roundtrip(&w, text("bogus\r\n"), &hit);
    CHECK(r && !hit && body_is(r, "ERROR\r\n"), "an unknown command: the store answers ERROR");
    free(r);
    drain(&w);
    ofl_kvc_stats(w.c, &st);
    CHECK(st.wb_errors == 0 && !w.wb_bad_ret, "no write-back errors");
    world_free(&w);
}

static void test_quiet(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU, 64, 4, 256);
    w.header_only = 1;
    int hit;
    struct msg *r = roundtrip(&w, bin(OFL_MC_OP_GETQ, "q", NULL, 0), &hit);
    CHECK(r && !hit && r->pkt.len == DGRAM + 8, "GETQ miss: header-only reply passed on");
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_SETQ, "q", "quiet", 0), &hit);
    CHECK(r && !hit && r->pkt.len == DGRAM + 8, "SETQ: header-only reply");
    free(r);
    r = roundtrip(&w, text("get q\r\n"), &hit);
    CHECK(r && hit && body_is(r, "VALUE q 0 5\r\nquiet\r\nEND\r\n"),
          "the SETQ's header-only reply made the entry valid");
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_GETKQ, "q", NULL, 0), &hit);
    CHECK(r && !hit, "binary GETKQ: no CAS known, the store answers");
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_GETKQ, "q", NULL, 0), &hit);
    struct ofl_mc_res res;
    CHECK(r && hit && bin_res(r, &res) == 0 && res_value_is(&res, "quiet") && res.key_len == 1,
          "then a hit");
    free(r);
    r = roundtrip(&w, text("set t 0 0 2 noreply\r\nhi\r\n"), &hit);
    CHECK(r && !hit, "text set noreply: forwarded");
    free(r);
    r = roundtrip(&w, text("get t\r\n"), &hit);
    CHECK(r && !hit && body_is(r, "VALUE t 0 2\r\nhi\r\nEND\r\n"),
          "noreply set: outcome unknown, entry released, get asks the store");
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_DELETEQ, "q", NULL, 0), &hit);
    CHECK(r && !hit, "DELETEQ forwarded");
    free(r);
    r = roundtrip(&w, bin(OFL_MC_OP_GET, "q", NULL, 0), &hit);
    CHECK(r && !hit && bin_res(r, &res) == 0 && res.status == OFL_MC_ST_NOT_FOUND,
          "deleted: NOT_FOUND");
    free(r);
    world_free(&w);
}

static void test_malformed(int policy)
{
    struct world w;
    world_init(&w, policy, OFL_KVC_LRU, 16, 2, 64);
    struct msg *m = bin(OFL_MC_OP_GET, "k", NULL, 0);
    uint64_t t;
    uint32_t full = m->pkt.len;
    int rc = 0;
    for (uint32_t len = 0; len < full; len++) {
        m->pkt.len = len;
        rc = ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w);
        if (!((rc < 0) || (rc == OFL_KVC_MISS && t == 0))) break;
    }
    CHECK(rc < 0 || (rc == OFL_KVC_MISS && t == 0), "truncated frames: dropped or bypassed");
    m->pkt.len = full;
    ofl_put_be16(m->pkt.data + L4 + 4, 7);
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) < 0, "UDP length < 8: dropped");
    ofl_put_be16(m->pkt.data + L4 + 4, (uint16_t)(full - L4 + 1));
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) < 0,
          "UDP length past the frame: dropped");
    ofl_put_be16(m->pkt.data + L4 + 4, (uint16_t)(full - L4));
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, 5000, &t, emit, &w) < 0, "l4_off past the frame");
    CHECK(ofl_kvc_request(w.c, &m->pkt, 30, L4, &t, emit, &w) < 0, "l3_off too close to l4");
    m->pkt.data[DGRAM + 8 + 1] = 0x77;   /* unknown opcode */
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) == OFL_KVC_MISS && t == 0,
          "unknown opcode: bypass");
    ofl_put_be16(m->pkt.data + DGRAM + 4, 2);   /* a request of two datagrams */
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) == OFL_KVC_MISS && t == 0,
          "frame header count 2: bypass");
    free(m);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(w.c, &st);
    CHECK(st.drops >= 4, "drops counted (%" PRIu64 ")", st.drops);

    /* the reply side with junk for a live reservation, and with bad tickets */
    m = bin(OFL_MC_OP_GET, "k", NULL, 0);
    CHECK(ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) == OFL_KVC_MISS && t,
          "a reservation");
    uint8_t junk[][40] = {
        {0x81, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 200},   /* body past the datagram */
        {'V', 'A', 'L', 'U', 'E', ' ', 'k', ' ', '1', ' ', '9', '9', '\r', '\n', 'x'},
        {'V', 'A', 'L', 'U', 'E', ' ', 'k', ' ', '9', '9', '9', '9', '9', '9', '9', '9', '9',
         '9', '9', '9', '9', '9', '9', '9', '9', '9', '9', '9', ' ', '1', '\r', '\n'},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        for (size_t len = 0; len <= 40; len++) {
            struct msg *j = new_msg(1, junk[i], len);
            if (ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) != OFL_KVC_MISS || !t) bad++;
            bad += ofl_kvc_reply(w.c, &j->pkt, L3, L4, 0, t) != 0;
            bad += ofl_kvc_reply(w.c, &j->pkt, L3, L4, 0, ((uint64_t)999999 << 32) | 1) != 0;
            bad += ofl_kvc_reply(w.c, &j->pkt, L3, L4, 0, OFL_KVC_INTERNAL) != 1;
            j->pkt.len = 10;
            if (ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w) != OFL_KVC_MISS || !t) bad++;
            bad += ofl_kvc_reply(w.c, &j->pkt, L3, L4, 0, t) != 0;
            bad += ofl_kvc_reply(w.c, &j->pkt, L3, L4, 0, OFL_KVC_INTERNAL) != 1;
            free(j);
        }
    }
    CHECK(bad == 0, "junk replies: passed on (reservations released), write-backs' dropped");
    char val[2048];
    int hit;
    store_put(&w, "k", "fine");
    CHECK(do_bget(&w, "k", val, &hit, NULL, NULL) == 0 && !strcmp(val, "fine"),
          "after junk replies the key still reads right");
    free(m);

    /* a packet too small for the hit's reply: the store answers */
    free(roundtrip(&w, bin(OFL_MC_OP_GET, "k", NULL, 0), &hit));
    m = bin(OFL_MC_OP_GET, "k", NULL, 0);
    m->pkt.cap = m->pkt.len;
    m->keep = 1;
    rc = ofl_kvc_request(w.c, &m->pkt, L3, L4, &t, emit, &w);
    CHECK(rc == OFL_KVC_MISS && t == 0, "no room for the reply in the packet: bypass");
    drain(&w);
    free(m);
    world_free(&w);
}

/* ---- the model check ------------------------------------------------------------ */

#define NKEYS 10
#define MAXW 200000

struct write {
    long send, done;   /* done: LONG_MAX while in flight */
    int id;            /* the value's id; -1: absent (DELETE / initial) */
};

struct hist {
    struct write *w;
    int n, cap;
};

enum { OP_GET, OP_SET, OP_DEL, OP_MGET };

struct op {
    int kind, key, key2, proto_text, quiet, opcode;
    long send;
    int widx;          /* the write's index in its key's history */
};

struct model {
    struct world w;
    struct hist h[NKEYS];
    struct op *ops;
    long t;
    int nops, checks, errors, value_max, nwrites, refused;
    uint64_t rng;
};

static uint32_t rnd(struct model *m, uint32_t n)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return (uint32_t)((m->rng >> 11) % n);
}

static int add_write(struct model *m, int key, long send, int id)
{
    struct hist *h = &m->h[key];
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->w = realloc(h->w, sizeof *h->w * (size_t)h->cap);
    }
    h->w[h->n] = (struct write){send, __LONG_MAX__, id};
    return h->n++;
}

/* Is `id` a value a GET of `key` sent at gs and answered at ga may return? */
static int acceptable(const struct model *m, int key, long gs, long ga, int id)
{
    const struct hist *h = &m->h[key];
    long last = -1;   /* latest send among writes completed before the GET */
    for (int i = 0; i < h->n; i++)
        if (h->w[i].done < gs && h->w[i].send > last) last = h->w[i].send;
    for (int i = 0; i < h->n; i++)
        if (h->w[i].id == id && h->w[i].send < ga && h->w[i].done >= last) return 1;
    return 0;
}

static void value_of_id(int id, int len, char *out)
{
    int n = snprintf(out, 32, "%d:", id);
    for (int i = n; i < len; i++) out[i] = (char)('a' + (id + i) % 26);
    out[len > n ? len : n] = 0;
}

/* Check one key's answer: id -1 absent, else the value bytes and flags. */
static void check_answer(struct model *m, int key, long gs, const uint8_t *v, size_t vlen,
                         uint32_t flags, int present)
{
    int id = -1;
    if (present) {
        id = atoi((const char *)v);   /* digits then ':' (the buffer is not NUL-ended) */
        char want[64];
        value_of_id(id, (int)vlen, want);
        if (strlen(want) != vlen || memcmp(want, v, vlen) || flags != (uint32_t)id) {
            printf("FAIL: key%d: torn or wrong value (%.*s) flags %u\n", key, (int)vlen,
                   (const char *)v, flags);
            m->errors++;
            return;
        }
    }
    m->checks++;
    if (!acceptable(m, key, gs, m->t, id)) {
        printf("FAIL: key%d: GET sent at %ld answered at %ld returned write %d\n", key, gs, m->t,
               id);
        m->errors++;
    }
}

static void mark_done(struct model *m, const struct op *o)
{
    if (o->kind == OP_SET || o->kind == OP_DEL)
        m->h[o->key].w[o->widx].done = m->t;
}

/* The client reads the reply `r` (pkt.len 0: none) to op `o`. */
static void answer(struct model *m, struct op *o, struct msg *r)
{
    m->t++;
    size_t n = 0;
    const uint8_t *b = r->pkt.len ? body(r, &n) : NULL;
    if (o->kind == OP_SET || o->kind == OP_DEL) {
        mark_done(m, o);
        if (!b) return;
        if (o->proto_text) {
            int ok = n == 0 ? o->quiet
                            : (o->kind == OP_SET ? body_is(r, "STORED\r\n")
                                                 : body_is(r, "DELETED\r\n") ||
                                                       body_is(r, "NOT_FOUND\r\n"));
            if (!ok) {
                printf("FAIL: bad text reply to a write (%zu bytes)\n", n);
                m->errors++;
            }
        } else if (n) {
            struct ofl_mc_res res;
            if (bin_res(r, &res) || (res.status && !(o->kind == OP_DEL &&
                                                     res.status == OFL_MC_ST_NOT_FOUND))) {
                printf("FAIL: bad binary reply to a write\n");
                m->errors++;
            }
        }
        return;
    }
    if (!b) return;   /* a quiet GET's miss without a header-only reply */
    if (!o->proto_text) {
        if (n == 0) {
            if (!o->quiet) {
                printf("FAIL: empty reply to a GET\n");
                m->errors++;
            } else {
                check_answer(m, o->key, o->send, NULL, 0, 0, 0);
            }
            return;
        }
        struct ofl_mc_res res;
        if (bin_res(r, &res) || (res.status && res.status != OFL_MC_ST_NOT_FOUND)) {
            printf("FAIL: bad binary GET reply\n");
            m->errors++;
            return;
        }
        check_answer(m, o->key, o->send, res.value, res.value_len,
                     res.status ? 0 : ofl_get_be32(res.extras), res.status == 0);
        return;
    }
    /* text: VALUE blocks, END; or, for a get of two keys while one is being written back
     * (write-back), the cache's refusal: retried by a client, it says nothing here */
    static const char busy[] = OFL_KVC_BUSY_TEXT "\r\n";
    if (n == sizeof busy - 1 && !memcmp(b, busy, n)) {
        if (o->kind != OP_MGET) {
            printf("FAIL: a request of one key refused\n");
            m->errors++;
        }
        m->refused++;
        return;
    }
    int seen[2] = {0, 0};
    size_t i = 0;
    while (n - i >= 6 && !memcmp(b + i, "VALUE ", 6)) {
        int k, used;
        unsigned fl, len;
        char line[128];
        size_t e = i;
        while (e < n && b[e] != '\n') e++;
        if (e == n || e - i >= sizeof line) break;
        memcpy(line, b + i, e - i);
        line[e - i] = 0;
        if (sscanf(line, "VALUE key%d %u %u%n", &k, &fl, &len, &used) != 3 || k < 0 ||
            k >= NKEYS || e + 1 + len + 2 > n)
            break;
        int which = k == o->key ? 0 : k == o->key2 && o->kind == OP_MGET ? 1 : -1;
        if (which < 0 || seen[which]) break;
        seen[which] = 1;
        check_answer(m, k, o->send, b + e + 1, len, fl, 1);
        i = e + 1 + len + 2;
    }
    if (n - i != 5 || memcmp(b + i, "END\r\n", 5)) {
        printf("FAIL: bad text GET reply: %.*s\n", (int)n, (const char *)b);
        m->errors++;
        return;
    }
    if (!seen[0]) check_answer(m, o->key, o->send, NULL, 0, 0, 0);
    if (o->kind == OP_MGET && !seen[1]) check_answer(m, o->key2, o->send, NULL, 0, 0, 0);
}

static struct msg *make_op(struct model *m, struct op *o)
{
    char key[16], key2[16], val[128], line[256];
    snprintf(key, sizeof key, "key%d", o->key);
    snprintf(key2, sizeof key2, "key%d", o->key2);
    uint8_t b[512];
    size_t n = 0;
    int id = m->nwrites;
    int vlen = 3 + (int)rnd(m, (uint32_t)m->value_max + 8);   /* some over value_max */
    int exp = o->kind == OP_SET && rnd(m, 10) == 0 ? 3600 : 0;   /* some not cacheable */
    if (o->kind == OP_SET) {
        value_of_id(id, vlen, val);
        o->widx = add_write(m, o->key, o->send, id);
        m->nwrites++;
    } else if (o->kind == OP_DEL) {
        o->widx = add_write(m, o->key, o->send, -1);
    }
    if (o->proto_text) {
        switch (o->kind) {
        case OP_GET: n = (size_t)snprintf(line, sizeof line, "get %s\r\n", key); break;
        case OP_MGET: n = (size_t)snprintf(line, sizeof line, "get %s %s\r\n", key, key2); break;
        case OP_SET:
            n = (size_t)snprintf(line, sizeof line, "set %s %d %d %zu%s\r\n%s\r\n", key, id, exp,
                                 strlen(val), o->quiet ? " noreply" : "", val);
            break;
        default:
            n = (size_t)snprintf(line, sizeof line, "delete %s%s\r\n", key,
                                 o->quiet ? " noreply" : "");
        }
        return new_msg((uint16_t)rnd(m, 65536), line, n);
    }
    n = bin_req(b, (uint8_t)o->opcode, key, o->kind == OP_SET ? val : NULL, (uint32_t)id,
                (uint32_t)exp, 0);
    return new_msg((uint16_t)rnd(m, 65536), b, n);
}

static void model_run(int policy, int eviction, int header_only, int nops, uint64_t seed)
{
    struct model m;
    memset(&m, 0, sizeof m);
    m.rng = seed * 0x9E3779B97F4A7C15ull + 1;
    m.value_max = 24;
    world_init(&m.w, policy, eviction, 6, 2, (uint32_t)m.value_max);
    m.w.header_only = header_only;
    m.ops = calloc((size_t)nops, sizeof *m.ops);
    for (int k = 0; k < NKEYS; k++) add_write(&m, k, 0, -1), m.h[k].w[0].done = 0;
    int maxflight = 1 + (int)rnd(&m, 12);
    while (m.nops < nops || m.w.n) {
        int deliver_now = m.w.n && (m.nops == nops || m.w.n >= maxflight || rnd(&m, 3) == 0);
        if (deliver_now) {
            struct msg *p, *r = deliver(&m.w, &p);
            m.t++;
            if (r) {
                if (r->op >= 0) answer(&m, &m.ops[r->op], r);
                free(r);
            }
            if (rnd(&m, 200) == 0) maxflight = 1 + (int)rnd(&m, 12);
            continue;
        }
        struct op *o = &m.ops[m.nops];
        uint32_t k = rnd(&m, 100);
        o->kind = k < 45 ? OP_GET : k < 80 ? OP_SET : k < 92 ? OP_DEL : OP_MGET;
        o->key = (int)rnd(&m, NKEYS);
        o->key2 = (o->key + 1 + (int)rnd(&m, NKEYS - 1)) % NKEYS;
        o->proto_text = o->kind == OP_MGET || rnd(&m, 4) == 0;
        o->quiet = o->kind != OP_MGET && rnd(&m, 5) == 0;
        if (o->proto_text && o->kind == OP_GET) o->quiet = 0;
        static const uint8_t gets[] = {OFL_MC_OP_GET, OFL_MC_OP_GETK, OFL_MC_OP_GETQ,
                                       OFL_MC_OP_GETKQ};
        o->opcode = o->kind == OP_GET   ? gets[rnd(&m, 4)]
                    : o->kind == OP_SET ? (o->quiet ? OFL_MC_OP_SETQ : OFL_MC_OP_SET)
                                        : (o->quiet ? OFL_MC_OP_DELETEQ : OFL_MC_OP_DELETE);
        if (o->kind == OP_GET && !o->proto_text)
            o->quiet = o->opcode == OFL_MC_OP_GETQ || o->opcode == OFL_MC_OP_GETKQ;
        m.t++;
        o->send = m.t;
        struct msg *msg = make_op(&m, o);
        msg->op = m.nops++;
        int rc = submit(&m.w, msg);
        if (rc == OFL_KVC_HIT) {
            answer(&m, o, msg);
            free(msg);
        } else if (rc < 0) {
            printf("FAIL: request refused: %d\n", rc);
            m.errors++;
            free(msg);
        }
    }
    /* write back what is dirty, then every key must read its latest value */
    uint8_t tb[64];
    struct msg *tmpl = new_msg(0, tb, bin_req(tb, OFL_MC_OP_NOOP, "", NULL, 0, 0, 0));
    int f = ofl_kvc_flush(m.w.c, emit, &m.w, &tmpl->pkt, L3, L4);
    free(tmpl);
    drain(&m.w);
    m.t++;
    for (int k = 0; k < NKEYS; k++) {
        char key[16], buf[256];
        snprintf(key, sizeof key, "key%d", k);
        struct ofl_kv_meta meta;
        int rc = ofl_kv_get(m.w.kv, key, strlen(key), ofl_kv_hash(key, strlen(key)), buf,
                            sizeof buf, &meta);
        check_answer(&m, k, m.t, (uint8_t *)buf, rc ? 0 : meta.value_len, rc ? 0 : meta.flags,
                     rc == 0);
    }
    struct ofl_kvc_stats st;
    ofl_kvc_stats(m.w.c, &st);
    CHECK(m.errors == 0 && m.w.wb_bad_ret == 0 && st.wb_errors == 0 && st.drops == 0,
          "model %s/%s%s seed %" PRIu64 ": %d ops, %d answers checked, %d errors; hits %" PRIu64
          " misses %" PRIu64 " bypass %" PRIu64 " fills %" PRIu64 " stale %" PRIu64
          " evictions %" PRIu64 " write-backs %" PRIu64 " (flush %d)",
          policy == OFL_KVC_WRITE_BACK ? "write-back" : "write-through",
          eviction == OFL_KVC_LRU ? "lru" : "clock", header_only ? "/header-only" : "", seed,
          nops, m.checks, m.errors, st.hits, st.misses, st.bypass, st.fills, st.stale_fills,
          st.evictions, st.writebacks, f);
    CHECK(st.hits > 0 && st.fills > 0 && st.evictions > 0 && st.stale_fills > 0,
          "the model run exercised hits, fills, evictions and stale fills");
    CHECK((int64_t)st.refused == m.refused && (m.refused > 0) == (policy == OFL_KVC_WRITE_BACK),
          "%d multi-key gets refused while a key's write-back was on its way (write-back "
          "only), all counted", m.refused);
    for (int k = 0; k < NKEYS; k++) free(m.h[k].w);
    free(m.ops);
    world_free(&m.w);
}

/* ---- two threads: lookup and update side at once ------------------------------- */

#define TQ 1024

struct tworld {
    struct world w;
    struct msg *ring[TQ];
    _Atomic unsigned head, tail;   /* lookup thread writes tail, update thread head */
    _Atomic int stop;
    long ops;
    int errors;
};

static void tpush(struct tworld *t, struct msg *m)
{
    unsigned tail = atomic_load(&t->tail);
    while (tail - atomic_load(&t->head) == TQ) sched_yield();
    t->ring[tail % TQ] = m;
    atomic_store(&t->tail, tail + 1);
}

static void temit(void *arg, struct ofl_pkt *pkt, uint64_t hash)
{
    (void)hash;
    struct tworld *t = arg;
    struct msg *m = calloc(1, sizeof *m);
    memcpy(m->buf, pkt->data, pkt->len);
    m->pkt = (struct ofl_pkt){m->buf, pkt->len, CAP, 0, 0};
    m->ticket = OFL_KVC_INTERNAL;
    tpush(t, m);
}

static void *update_thread(void *arg)
{
    struct tworld *t = arg;
    for (;;) {
        unsigned head = atomic_load(&t->head);
        if (head == atomic_load(&t->tail)) {
            if (atomic_load(&t->stop)) return NULL;
            sched_yield();
            continue;
        }
        struct msg *m = t->ring[head % TQ];
        atomic_store(&t->head, head + 1);
        int rc = ofl_kvs_reply(&t->w.store, &m->pkt, L3, L4, m->ticket == OFL_KVC_INTERNAL);
        if (ofl_kvs_sends(rc)) {
            int r = ofl_kvc_reply(t->w.c, &m->pkt, L3, L4, rc == OFL_KVS_SEND_EXPIRING,
                                  m->ticket);
            if (r != (m->ticket == OFL_KVC_INTERNAL)) t->errors++;
            size_t n;
            const uint8_t *b = body(m, &n);
            /* every GET answer carries "<key>=" in front: no torn or misplaced value */
            struct ofl_mc_res res;
            if (m->ticket != OFL_KVC_INTERNAL && n && b[0] == OFL_MC_RES_MAGIC &&
                ofl_mc_parse_response(b, n, &res, NULL) > 0 && res.status == 0 &&
                res.value_len && (res.value_len < 4 || memcmp(res.value, "key", 3)))
                t->errors++;
        }
        free(m);
    }
}

static void test_threads(int policy, long ops)
{
    struct tworld *t = calloc(1, sizeof *t);
    world_init(&t->w, policy, OFL_KVC_CLOCK, 64, 4, 64);
    pthread_t th;
    pthread_create(&th, NULL, update_thread, t);
    uint64_t rng = 12345;
    long hits = 0;
    for (long i = 0; i < ops; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((rng >> 33) % 200), kind = (int)((rng >> 20) % 10);
        char key[16], val[64];
        snprintf(key, sizeof key, "key%d", k);
        snprintf(val, sizeof val, "key%d=%ld", k, i);
        struct msg *m = kind < 6   ? bin(OFL_MC_OP_GET, key, NULL, 0)
                        : kind < 9 ? bin(OFL_MC_OP_SET, key, val, 0)
                                   : bin(OFL_MC_OP_DELETE, key, NULL, 0);
        int rc = ofl_kvc_request(t->w.c, &m->pkt, L3, L4, &m->ticket, temit, t);
        if (rc == OFL_KVC_MISS) {
            tpush(t, m);
            continue;
        }
        if (rc == OFL_KVC_HIT) {
            hits++;
            size_t n;
            const uint8_t *b = body(m, &n);
            struct ofl_mc_res res;
            if (kind < 6 && (ofl_mc_parse_response(b, n, &res, NULL) <= 0 || res.status ||
                             res.value_len < (uint32_t)strlen(key) + 1 ||
                             memcmp(res.value, key, strlen(key)) ||
                             res.value[strlen(key)] != '='))
                t->errors++;
        } else {
            t->errors++;
        }
        free(m);
    }
    atomic_store(&t->stop, 1);
    pthread_join(th, NULL);
    struct ofl_kvc_stats st;
    ofl_kvc_stats(t->w.c, &st);
    CHECK(t->errors == 0 && st.wb_errors == 0,
          "two threads (%s): %ld requests, %ld hits, %d errors, fills %" PRIu64
          " stale %" PRIu64,
          policy == OFL_KVC_WRITE_BACK ? "write-back" : "write-through", ops, hits, t->errors,
          st.fills, st.stale_fills);
    world_free(&t->w);
    free(t);
}

/* Every request of a datagram runs, in order, as memcached 1.6 runs them: a set behind
 * a get, requests behind a NOOP and behind an error (it ran none after a text get, a
 * NOOP or an error reply). The shard walk steps over a bad request as the store does,
 * so a key behind it on another shard is seen (it ended the walk there). */
static void test_pipelined(void)
{
    struct world w;
    world_init(&w, OFL_KVC_WRITE_THROUGH, OFL_KVC_LRU, 64, 4, 256);
    store_put(&w, "pa", "1");
    struct msg *m = text("get pa\r\nset pb 0 0 5\r\nafter\r\nbogus\r\nget pb\r\n");
    CHECK(ofl_kvs_reply(&w.store, &m->pkt, L3, L4, 0) == 0, "pipelined text datagram runs");
    CHECK(body_is(m, "VALUE pa 5 1\r\n1\r\nEND\r\nSTORED\r\nERROR\r\n"
                     "VALUE pb 0 5\r\nafter\r\nEND\r\n"),
          "every request answered in order, the set behind the get run");
    free(m);
    CHECK(store_has(&w, "pb", "after"), "the set behind a get is in the store");
    uint8_t b[1600];
    size_t n = ofl_mc_write_request(b, sizeof b, OFL_MC_OP_NOOP, 1, 0, NULL, 0, NULL, 0, NULL, 0);
    n += ofl_mc_write_request(b + n, sizeof b - n, 0x5F, 2, 0, NULL, 0, NULL, 0, NULL, 0);
    n += bin_req(b + n, OFL_MC_OP_DELETE, "pa", NULL, 0, 0, 0);
    m = new_msg(5, b, n);
    CHECK(ofl_kvs_reply(&w.store, &m->pkt, L3, L4, 0) == 0, "pipelined binary datagram runs");
    free(m);
    CHECK(store_has(&w, "pa", NULL), "the delete behind a NOOP and an unknown opcode ran");
    world_free(&w);

    /* keys on shards 0 and 1 of two (shard_of: instance i -> i % 2) */
    static const uint8_t two[4] = {0, 1, 0, 1};
    char first[16] = "s0", other[16] = "";
    uint64_t h0, h;
    struct msg *k = text("get s0\r\n");
    CHECK(ofl_kvs_key_hash(&k->pkt, L4, &h0) == 0, "first key hashed");
    free(k);
    for (int i = 1; i < 100 && !other[0]; i++) {
        char line[32];
        snprintf(line, sizeof line, "get s%d\r\n", i);
        k = text(line);
        if (ofl_kvs_key_hash(&k->pkt, L4, &h) == 0 && two[(h >> 32) % 4] != two[(h0 >> 32) % 4])
            snprintf(other, sizeof other, "s%d", i);
        free(k);
    }
    CHECK(other[0], "a key of the other shard found");
    char dg[96];
    snprintf(dg, sizeof dg, "get %s\r\nbogus\r\nget %s\r\n", first, other);
    k = text(dg);
    CHECK(ofl_kvs_keys_span(&k->pkt, L4, (uint32_t)(h0 >> 32), two, 4) == 1,
          "a key behind a bad request on another shard spans");
    CHECK(ofl_kvs_refuse_span(&k->pkt, L3, L4) == 0, "refused");
    CHECK(body_is(k, "SERVER_ERROR multi-key request spans shards; use TCP or one key per "
                     "request\r\n"
                     "SERVER_ERROR multi-key request spans shards; use TCP or one key per "
                     "request\r\n"
                     "SERVER_ERROR multi-key request spans shards; use TCP or one key per "
                     "request\r\n"),
          "each of the three requests refused, none run");
    free(k);
}

int main(int argc, char **argv)
{
    int ops = argc > 1 ? atoi(argv[1]) : 20000;
    test_config();
    test_basic(OFL_KVC_WRITE_THROUGH);
    test_basic(OFL_KVC_WRITE_BACK);
    test_fill();
    test_stale(OFL_KVC_WRITE_THROUGH);
    test_stale(OFL_KVC_WRITE_BACK);
    test_expiring(OFL_KVC_WRITE_THROUGH);
    test_expiring(OFL_KVC_WRITE_BACK);
    test_eviction(OFL_KVC_LRU);
    test_eviction(OFL_KVC_CLOCK);
    test_delete_dirty();
    test_cas_after_writeback();
    test_noncacheable();
    test_quiet();
    test_pipelined();
    test_malformed(OFL_KVC_WRITE_THROUGH);
    test_malformed(OFL_KVC_WRITE_BACK);
    uint64_t seed = 1;
    for (int policy = OFL_KVC_WRITE_THROUGH; policy <= OFL_KVC_WRITE_BACK; policy++)
        for (int ev = OFL_KVC_LRU; ev <= OFL_KVC_CLOCK; ev++)
            for (int ho = 0; ho < 2; ho++)
                for (int s = 0; s < 2; s++) model_run(policy, ev, ho, ops, seed++);
    test_threads(OFL_KVC_WRITE_THROUGH, ops * 5L);
    test_threads(OFL_KVC_WRITE_BACK, ops * 5L);
    return CHECK_DONE();
}
