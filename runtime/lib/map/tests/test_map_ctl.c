/* Tests of a shared map's control messages (offlow/map_ctl.h): every message's size
 * checked, info and the layout text (paged), get/set/delete against what the map holds,
 * a full map refusing a new key (counted `full`), a walk seeing every key once; then the
 * mailbox: a "core" thread changing its own keys between serves while this thread sets,
 * deletes and reads others through ofl_map_ctl_call, the map checked against both models
 * at the end (a request run beside the core, not by it, corrupts the probe runs they
 * share: under ASan+UBSan too); and after ofl_map_ctl_owner_done, requests run here. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ctl_reply.h"
#include "offlow/map_ctl.h"

/* A 7-byte key (an address, a protocol, a port) and 2-byte values. */
#define KS 7u
#define VS 2u

static void key_of(uint8_t *k, uint32_t i)
{
    memset(k, 0, KS);
    memcpy(k, &i, 4);
    k[4] = 17;
    k[5] = (uint8_t)(i * 3u);
}

/* Send `n` bytes of message: op, then `a` (na bytes), then `b` (nb bytes). */
static int32_t req(struct ofl_map *m, int via_box, char op, const void *a, size_t na,
                   const void *b, size_t nb, struct ofl_ctl_reply *r)
{
    uint8_t msg[OFL_CTL_MSG_MAX];
    msg[0] = (uint8_t)op;
    if (na) memcpy(msg + 1, a, na);
    if (nb) memcpy(msg + 1 + na, b, nb);
    if (via_box) ofl_map_ctl_call(m, msg, 1 + na + nb, r);
    else ofl_map_ctl(m, msg, 1 + na + nb, r);
    return reply_status(r);
}

static void messages(void)
{
    struct ofl_map *m;
    CHECK(ofl_map_open(&m, KS, VS, 3) == 0, "open");
    /* a layout longer than one reply, read in pieces */
    m->layout = "peer_address_of_the_sender:ipv4,protocol_number:uint8_t,"
                "destination_port:uint16_t;uint16_t";
    struct ofl_ctl_reply r;
    char text[256] = "";
    for (uint16_t at = 0;;) {
        CHECK(req(m, 0, 'k', &at, 2, NULL, 0, &r) == 0, "layout at %u", at);
        strncat(text, (const char *)r.b + 4, r.n - 4);
        at = (uint16_t)(at + r.n - 4);
        if (r.n < OFL_CTL_MSG_MAX) break;
    }
    CHECK(strcmp(text, m->layout) == 0, "the layout read in pieces: %s", text);
    uint16_t far = 500;
    CHECK(req(m, 0, 'k', &far, 2, NULL, 0, &r) == -ERANGE, "a layout offset past its end");

    uint8_t k[KS];
    uint16_t v = 0xbeef, got;
    key_of(k, 1);
    CHECK(req(m, 0, 'g', k, KS, NULL, 0, &r) == -ENOENT, "get of a key it lacks");
    CHECK(req(m, 0, 's', k, KS, &v, VS, &r) == 0, "set");
    CHECK(req(m, 0, 'g', k, KS, NULL, 0, &r) == 0 && r.n == 4 + VS, "get");
    memcpy(&got, r.b + 4, 2);
    CHECK(got == 0xbeef, "the value set: %x", got);
    /* wrong sizes: refused, nothing changed */
    CHECK(req(m, 0, 's', k, KS, &v, 1, &r) == -EINVAL, "a 1-byte value");
    CHECK(req(m, 0, 's', k, KS - 1, NULL, 0, &r) == -EINVAL, "a short key");
    CHECK(req(m, 0, 'g', k, KS, &v, 1, &r) == -EINVAL, "a get with a byte more");
    CHECK(req(m, 0, 'd', k, 3, NULL, 0, &r) == -EINVAL, "a short delete");
    CHECK(req(m, 0, 'n', k, 3, NULL, 0, &r) == -EINVAL, "a short walk");
    CHECK(req(m, 0, 'z', NULL, 0, NULL, 0, &r) == -EOPNOTSUPP, "an unknown request");
    ofl_map_ctl(m, k, 0, &r);
    CHECK(reply_status(&r) == -EINVAL, "an empty message");
    CHECK(m->count == 1 && m->ctl_updates == 1, "one key, one update: %u", m->count);
    /* full at 3 keys: a new one refused and counted, a held one replaced */
    for (uint32_t i = 2; i <= 3; i++) {
        key_of(k, i);
        CHECK(req(m, 0, 's', k, KS, &v, VS, &r) == 0, "set key %u", i);
    }
    key_of(k, 4);
    CHECK(req(m, 0, 's', k, KS, &v, VS, &r) == -ENOSPC && m->full == 1, "full");
    key_of(k, 2);
    v = 7;
    CHECK(req(m, 0, 's', k, KS, &v, VS, &r) == 0, "a held key replaced when full");
    /* info: kind, type, value size, keys, updates, entries, key size, full */
    CHECK(req(m, 0, 'i', NULL, 0, NULL, 0, &r) == 0 && r.n == 4 + 24 + 16, "info");
    struct ofl_ctl_info in;
    uint32_t more[2];
    uint64_t full;
    memcpy(&in, r.b + 4, sizeof in);
    memcpy(more, r.b + 4 + sizeof in, 8);
    memcpy(&full, r.b + 4 + sizeof in + 8, 8);
    CHECK(in.kind == OFL_CTL_MAP && in.type == 'u' && in.size == VS && in.length == 3 &&
          in.updates == 4 && more[0] == 3 && more[1] == KS && full == 1, "info fields");
    /* a walk sees keys 1..3 once each */
    int seen[5] = {0};
    uint32_t slot = 0, at;
    while (req(m, 0, 'n', &slot, 4, NULL, 0, &r) == 0) {
        uint32_t i;
        memcpy(&at, r.b + 4, 4);
        memcpy(&i, r.b + 8, 4);
        CHECK(r.n == 8 + KS + VS && i >= 1 && i <= 3 && at >= slot, "walk: key %u at %u", i, at);
        if (i <= 4) seen[i]++;
        slot = at + 1;
    }
    CHECK(reply_status(&r) == -ENOENT && seen[1] == 1 && seen[2] == 1 && seen[3] == 1 && !seen[4],
          "the walk saw each key once");
    key_of(k, 3);
    CHECK(req(m, 0, 'd', k, KS, NULL, 0, &r) == 0 && m->count == 2, "delete");
    CHECK(req(m, 0, 'd', k, KS, NULL, 0, &r) == -ENOENT, "delete twice");
    ofl_map_close(m);
    /* a map whose walk's reply exceeds a message: what fits one runs; the walk is
     * refused without a place to keep its reply (ofl_map_ctl_out: test_map_ctl_big.c) */
    CHECK(ofl_map_open(&m, OFL_MAP_CTL_KV_MAX, 1, 2) == 0, "open a wide map");
    uint8_t wide[OFL_CTL_MSG_MAX] = {0}, one = 9;
    uint32_t zero = 0;
    CHECK(req(m, 0, 's', wide, OFL_MAP_CTL_KV_MAX, &one, 1, &r) == 0, "a set in a wide map");
    CHECK(req(m, 0, 'g', wide, OFL_MAP_CTL_KV_MAX, NULL, 0, &r) == 0 && r.n == 5 &&
          r.b[4] == 9, "a get in a wide map");
    CHECK(req(m, 0, 'n', &zero, 4, NULL, 0, &r) == -EMSGSIZE && r.n <= OFL_CTL_MSG_MAX,
          "a walk's reply too long for one message, and nowhere to keep it");
    CHECK(req(m, 0, 'i', NULL, 0, NULL, 0, &r) == 0, "info of a wide map");
    ofl_map_close(m);
}

/* The core: its own keys 0..31, updated and deleted in a pseudo-random order, a serve
 * after each change; its model in `has`/`val`. */
struct core {
    struct ofl_map *m;
    int has[32];
    uint16_t val[32];
    uint32_t stop;
};

static void *core_run(void *arg)
{
    struct core *c = arg;
    uint64_t s = 88172645463325252ull;
    uint8_t k[KS];
    for (uint32_t n = 0; !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) || n < 20000; n++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t i = (uint32_t)(s % 32);
        key_of(k, i);
        if ((s >> 8) & 1) {
            uint16_t v = (uint16_t)(s >> 16);
            if (ofl_map_update(c->m, k, &v) == 0) { c->has[i] = 1; c->val[i] = v; }
        } else if (ofl_map_delete(c->m, k) == 0) {
            c->has[i] = 0;
        }
        ofl_map_ctl_serve(c->m);
    }
    ofl_map_ctl_owner_done(c->m);
    return NULL;
}

static void mailbox(void)
{
    struct core c;
    memset(&c, 0, sizeof c);
    CHECK(ofl_map_open(&c.m, KS, VS, 64) == 0, "open");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, core_run, &c) == 0, "the core thread");
    int has[32] = {0};
    uint16_t val[32] = {0};
    struct ofl_ctl_reply r;
    uint8_t k[KS];
    int ok = 1;
    uint64_t s = 1234567;
    for (int n = 0; n < 20000 && ok; n++) {   /* the client's keys 32..63 */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t i = (uint32_t)(s % 32);
        key_of(k, 32 + i);
        uint16_t v = (uint16_t)(s >> 20);
        switch ((s >> 8) % 3) {
        case 0:
            ok = req(c.m, 1, 's', k, KS, &v, VS, &r) == 0;
            has[i] = 1; val[i] = v;
            break;
        case 1:
            ok = req(c.m, 1, 'd', k, KS, NULL, 0, &r) == (has[i] ? 0 : -ENOENT);
            has[i] = 0;
            break;
        default: {
            int32_t st = req(c.m, 1, 'g', k, KS, NULL, 0, &r);
            uint16_t got = 0;
            if (st == 0) memcpy(&got, r.b + 4, 2);
            ok = has[i] ? st == 0 && got == val[i] : st == -ENOENT;
        }
        }
    }
    CHECK(ok, "every request answered as the client's model says");
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    /* the map holds exactly both models' keys */
    uint32_t want = 0;
    for (uint32_t i = 0; i < 64; i++) {
        key_of(k, i);
        const uint16_t *v = ofl_map_lookup(c.m, k);
        int h = i < 32 ? c.has[i] : has[i - 32];
        uint16_t w = i < 32 ? c.val[i] : val[i - 32];
        want += (uint32_t)h;
        CHECK(!!v == h && (!v || *v == w), "key %u after the race", i);
    }
    CHECK(c.m->count == want, "count %u, want %u", c.m->count, want);
    /* the owner is done: a request runs on this thread */
    key_of(k, 40);
    uint16_t v = 99;
    CHECK(req(c.m, 1, 's', k, KS, &v, VS, &r) == 0 && *(uint16_t *)ofl_map_lookup(c.m, k) == 99,
          "a request after the owner's end");
    ofl_map_close(c.m);
}

int main(void)
{
    messages();
    mailbox();
    return CHECK_DONE();
}
