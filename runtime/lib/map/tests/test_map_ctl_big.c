/* Tests of control requests and replies longer than one message (offlow/ctl_stage.h)
 * on a map whose 57-byte keys and 8-byte values fit no message ('s' takes 66 bytes, 'g'
 * and 'd' 58, a walk's reply 73), through the mailbox to its owning core as the channel
 * manager runs them:
 *   - a staged set is applied whole when 'X' runs it, never before (the map unchanged
 *     while its parts arrive); get, delete and a walk, their long replies read back in
 *     parts;
 *   - a client that died half-way through staging: the next one's 'S' starts afresh,
 *     and an 'X' before that is refused as incomplete;
 *   - malformed parts (out of order, past the end, empty, of the wrong size), an 'X'
 *     with nothing staged, reads with nothing kept or past its end: one error reply
 *     each (within one message), the map unchanged;
 *   - an array of 64-byte elements: a staged set, a get read back in parts, and the
 *     one-message get refused;
 *   - a "core" thread changing its own keys between serves while this thread sets,
 *     deletes, reads and walks others through staged requests: the map equal to both
 *     models at the end (under ASan+UBSan too). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ctl_reply.h"
#include "offlow/ctl_stage.h"
#include "offlow/map_ctl.h"

#define KS 57u
#define VS 8u
#define CAP OFL_MAP_CTL_STAGE(KS, VS)

/* The channel manager's side of one map: its staging buffers, as generated code has. */
struct served {
    struct ofl_map *m;
    struct ofl_ctl_stage stage;
    uint8_t req[CAP], rep[CAP];
    uint32_t peer;   /* the client's session (ofl_chan_peer_session) */
};

static void run_on_map(void *ctx, const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                       struct ofl_ctl_reply *r)
{
    struct served *s = ctx;
    ofl_map_ctl_call_out(s->m, msg, len, out, r);
}

/* One message to the served map; its reply's status (every reply fits a message). */
static int32_t one(struct served *s, const void *msg, size_t len, struct ofl_ctl_reply *r)
{
    ofl_ctl_stage_msg(&s->stage, s->peer, run_on_map, s, msg, len, r);
    if (r->n < 4 || r->n > OFL_CTL_MSG_MAX) CHECK(0, "a reply of %zu bytes", r->n);
    return reply_status(r);
}

/* A message of a letter and a u32. */
static int32_t letter_u32(struct served *s, char c, uint32_t x, struct ofl_ctl_reply *r)
{
    uint8_t msg[5] = {(uint8_t)c};
    memcpy(msg + 1, &x, 4);
    return one(s, msg, 5, r);
}

/* Stage `len` bytes of request in parts ('S', 'P'...), without running it. */
static int32_t stage(struct served *s, const uint8_t *req, size_t len)
{
    struct ofl_ctl_reply r;
    int32_t st = letter_u32(s, 'S', (uint32_t)len, &r);
    for (size_t at = 0; st == 0 && at < len; at += OFL_CTL_PART_MAX) {
        uint8_t msg[OFL_CTL_MSG_MAX] = {'P'};
        size_t n = len - at < OFL_CTL_PART_MAX ? len - at : OFL_CTL_PART_MAX;
        uint32_t a = (uint32_t)at;
        memcpy(msg + 1, &a, 4);
        memcpy(msg + 5, req + at, n);
        st = one(s, msg, 5 + n, &r);
    }
    return st;
}

/* A request as a client sends it: in one message when it fits, else staged and run;
 * a reply kept on the serving side read back in parts into `got` (its length in
 * *n). Returns the request's status (0 or a negative errno). */
static int32_t request(struct served *s, const uint8_t *req, size_t len, uint8_t *got,
                       size_t *n)
{
    struct ofl_ctl_reply r;
    int32_t st;
    if (len <= OFL_CTL_MSG_MAX) {
        st = one(s, req, len, &r);
    } else {
        st = stage(s, req, len);
        if (st == 0) st = one(s, "X", 1, &r);
    }
    *n = 0;
    if (st == 0) {
        *n = r.n - 4;
        memcpy(got, r.b + 4, *n);
    }
    if (st <= 0) return st;
    for (uint32_t at = 0; at < (uint32_t)st;) {   /* kept: read it back */
        if (letter_u32(s, 'R', at, &r) != 0 || r.n == 4) return -EIO;
        memcpy(got + at, r.b + 4, r.n - 4);
        at += (uint32_t)(r.n - 4);
    }
    *n = (size_t)st;
    return 0;
}

static void key_of(uint8_t *k, uint32_t i)
{
    for (uint32_t j = 0; j < KS; j++) k[j] = (uint8_t)(i * 7u + j);
    memcpy(k + KS - 4, &i, 4);   /* the last bytes tell keys apart */
}

static int32_t map_op(struct served *s, char op, uint32_t i, uint64_t v, uint8_t *got,
                      size_t *n)
{
    uint8_t req[1 + KS + VS] = {(uint8_t)op};
    key_of(req + 1, i);
    memcpy(req + 1 + KS, &v, VS);
    return request(s, req, op == 's' ? 1 + KS + VS : 1 + KS, got, n);
}

static void served_open(struct served *s, uint32_t entries)
{
    memset(s, 0, sizeof *s);
    CHECK(ofl_map_open(&s->m, KS, VS, entries) == 0, "open");
    CHECK(ofl_ctl_stage_init(&s->stage, s->req, s->rep, CAP) == 0, "stage init");
    s->peer = 1;
}

static void whole_requests(void)
{
    struct served s;
    served_open(&s, 4);
    ofl_map_ctl_owner_done(s.m);   /* (no core: requests run here) */
    uint8_t got[CAP], k[KS];
    size_t n;
    uint64_t v;
    /* a set staged: the map unchanged until 'X' runs it whole */
    uint8_t req[1 + KS + VS] = {'s'};
    key_of(req + 1, 1);
    v = 0x1122334455667788ull;
    memcpy(req + 1 + KS, &v, VS);
    CHECK(stage(&s, req, sizeof req) == 0, "a set of %zu bytes staged", sizeof req);
    CHECK(s.m->count == 0 && !ofl_map_lookup(s.m, req + 1) && s.m->ctl_updates == 0,
          "nothing applied before 'X'");
    struct ofl_ctl_reply r;
    CHECK(one(&s, "X", 1, &r) == 0 && r.n == 4, "'X' runs it");
    const uint64_t *at = ofl_map_lookup(s.m, req + 1);
    CHECK(at && *at == v && s.m->count == 1 && s.m->ctl_updates == 1, "the set applied");
    CHECK(one(&s, "X", 1, &r) == -EINVAL && s.m->ctl_updates == 1, "a second 'X': refused");
    /* get, delete: staged requests, short replies */
    CHECK(map_op(&s, 'g', 1, 0, got, &n) == 0 && n == VS && !memcmp(got, &v, VS), "get");
    CHECK(map_op(&s, 'g', 2, 0, got, &n) == -ENOENT, "get of a key it lacks");
    CHECK(map_op(&s, 's', 2, 5, got, &n) == 0 && map_op(&s, 's', 3, 6, got, &n) == 0, "sets");
    /* a walk: 5-byte requests, each reply (slot, key, value: 69 bytes) kept and read in
     * parts */
    int seen[4] = {0};
    uint32_t slot = 0;
    for (;;) {
        uint8_t next[5] = {'n'};
        memcpy(next + 1, &slot, 4);
        int32_t st = request(&s, next, 5, got, &n);
        if (st == -ENOENT) break;
        uint32_t i;
        memcpy(&i, got + 4 + KS - 4, 4);
        key_of(k, i);
        CHECK(st == 0 && n == 4 + KS + VS && i >= 1 && i <= 3 && !memcmp(got + 4, k, KS) &&
              !memcmp(got + 4 + KS, ofl_map_lookup(s.m, k), VS), "walk: key %u", i);
        if (i <= 3) seen[i]++;
        memcpy(&slot, got, 4);
        slot++;
    }
    CHECK(seen[1] == 1 && seen[2] == 1 && seen[3] == 1, "the walk saw each key once");
    CHECK(map_op(&s, 'd', 2, 0, got, &n) == 0 && s.m->count == 2, "a staged delete");
    CHECK(map_op(&s, 'd', 2, 0, got, &n) == -ENOENT, "delete twice");
    /* a kept reply is read back from any offset; not past its end */
    uint8_t next0[5] = {'n'};
    CHECK(one(&s, next0, 5, &r) == (int32_t)(4 + KS + VS), "a kept reply's status: its length");
    CHECK(letter_u32(&s, 'R', 60, &r) == 0 && r.n == 4 + (4 + KS + VS - 60), "read from 60");
    CHECK(letter_u32(&s, 'R', 4 + KS + VS, &r) == -ERANGE, "a read past the end");
    CHECK(one(&s, "i", 1, &r) == 0 && letter_u32(&s, 'R', 0, &r) == -ENOENT,
          "another request drops the kept reply");
    ofl_map_close(s.m);
}

static void abandoned_and_malformed(void)
{
    struct served s;
    served_open(&s, 4);
    ofl_map_ctl_owner_done(s.m);
    struct ofl_ctl_reply r;
    uint8_t req[1 + KS + VS] = {'s'}, got[CAP];
    size_t n;
    key_of(req + 1, 9);
    /* a client dies after the first part of two: an 'X' now is refused */
    CHECK(letter_u32(&s, 'S', sizeof req, &r) == 0, "'S'");
    uint8_t part[OFL_CTL_MSG_MAX] = {'P'};   /* offset 0 */
    memcpy(part + 5, req, OFL_CTL_PART_MAX);
    CHECK(one(&s, part, OFL_CTL_MSG_MAX, &r) == 0, "the first part");
    CHECK(one(&s, "X", 1, &r) == -EINVAL && s.m->count == 0, "an 'X' of an incomplete request");
    /* it dies again half-way; the next client's 'S' starts afresh */
    CHECK(letter_u32(&s, 'S', sizeof req, &r) == 0 && one(&s, part, OFL_CTL_MSG_MAX, &r) == 0,
          "half-staged again");
    CHECK(map_op(&s, 's', 9, 42, got, &n) == 0, "the next client's set");
    CHECK(map_op(&s, 'g', 9, 0, got, &n) == 0 && got[0] == 42 && s.m->count == 1, "its value");
    /* half-staged once more; the next client sends a one-message request: served */
    CHECK(letter_u32(&s, 'S', 60, &r) == 0 && one(&s, part, 10, &r) == 0, "half-staged");
    CHECK(one(&s, "i", 1, &r) == 0, "a one-message request beside a staged one");
    /* malformed */
    CHECK(one(&s, "S", 1, &r) == -EINVAL, "'S' without its total");
    CHECK(letter_u32(&s, 'S', 0, &r) == -EMSGSIZE, "'S' of 0 bytes");
    CHECK(letter_u32(&s, 'S', CAP + 1, &r) == -EMSGSIZE, "'S' past what the table takes");
    CHECK(one(&s, "X", 1, &r) == -EINVAL, "an 'X' with nothing staged");
    CHECK(one(&s, part, 9, &r) == -EINVAL, "a part with no request begun");
    CHECK(letter_u32(&s, 'S', 20, &r) == 0, "'S' of 20");
    uint32_t far = 7;
    memcpy(part + 1, &far, 4);
    CHECK(one(&s, part, 10, &r) == -EINVAL, "a part out of order");
    CHECK(one(&s, "X", 1, &r) == -EINVAL, "it dropped the request");
    CHECK(letter_u32(&s, 'S', 20, &r) == 0, "'S' of 20 again");
    far = 0;
    memcpy(part + 1, &far, 4);
    CHECK(one(&s, part, 5, &r) == -EINVAL, "an empty part");
    CHECK(letter_u32(&s, 'S', 3, &r) == 0 && one(&s, part, 9, &r) == -EINVAL,
          "a part past the request's end");
    CHECK(one(&s, "P\0\0", 3, &r) == -EINVAL, "a part without its offset");
    CHECK(one(&s, "XX", 2, &r) == -EINVAL, "'X' with a byte more");
    CHECK(one(&s, "R\0\0\0\0\0", 6, &r) == -EINVAL, "'R' with a byte more");
    /* staged requests the map refuses: one error, nothing changed */
    uint8_t bad[60] = {'s'};
    CHECK(stage(&s, bad, 60) == 0 && one(&s, "X", 1, &r) == -EINVAL, "a set of 59 bytes");
    bad[0] = 'S';
    CHECK(stage(&s, bad, 60) == 0 && one(&s, "X", 1, &r) == -EOPNOTSUPP,
          "a staged 'S' is no request a map takes");
    CHECK(s.m->count == 1 && s.m->ctl_updates == 1, "the map as it was");
    uint8_t big[OFL_CTL_STAGE_MAX + 1];
    CHECK(ofl_ctl_stage_init(&s.stage, big, big, sizeof big) == -EMSGSIZE,
          "buffers past OFL_CTL_STAGE_MAX");
    ofl_map_close(s.m);
}

/* What a client staged or kept is its own: another client's first message drops a
 * request it staged whole and never ran (counted) and a reply it did not read, so the
 * next client's 'X' or 'R' finds none; one staged when the channel stops is dropped
 * and counted too. A client that begins again itself drops nothing counted. */
static void clients_own_what_they_stage(void)
{
    struct served s;
    served_open(&s, 4);
    ofl_map_ctl_owner_done(s.m);
    struct ofl_ctl_reply r;
    uint8_t req[1 + KS + VS] = {'s'}, got[CAP];
    size_t n;
    key_of(req + 1, 5);
    CHECK(stage(&s, req, sizeof req) == 0, "client 1 stages a whole set and dies");
    s.peer = 3;
    CHECK(one(&s, "X", 1, &r) == -EINVAL && s.m->count == 0 && s.m->ctl_updates == 0,
          "client 3's 'X' runs nothing of client 1's");
    CHECK(ofl_ctl_stage_dropped(&s.stage) == 1, "client 1's request counted dropped");
    CHECK(stage(&s, req, sizeof req) == 0 && stage(&s, req, sizeof req) == 0 &&
          one(&s, "X", 1, &r) == 0 && s.m->count == 1, "client 3 stages twice, runs once");
    CHECK(ofl_ctl_stage_dropped(&s.stage) == 1, "its own second 'S' is no drop");
    CHECK(letter_u32(&s, 'n', 0, &r) > 0, "client 3's walk: a reply kept");
    s.peer = 4;   /* (the same client closed its end: another session) */
    CHECK(letter_u32(&s, 'R', 0, &r) == -ENOENT, "the next client reads none of it");
    CHECK(ofl_ctl_stage_dropped(&s.stage) == 1, "an unread reply is no drop");
    CHECK(map_op(&s, 'g', 5, 0, got, &n) == 0 && n == VS, "client 4 is served");
    CHECK(letter_u32(&s, 'S', sizeof req, &r) == 0, "client 4 begins a request");
    ofl_ctl_stage_end(&s.stage);
    CHECK(ofl_ctl_stage_dropped(&s.stage) == 2 && one(&s, "X", 1, &r) == -EINVAL,
          "the channel stops: client 4's request dropped and counted");
    ofl_ctl_stage_end(&s.stage);
    CHECK(ofl_ctl_stage_dropped(&s.stage) == 2, "nothing staged: nothing counted");
    ofl_map_close(s.m);
}

/* An array of 64-byte elements. */
struct arr {
    uint8_t e[3][64];
    uint64_t updates;
    struct ofl_ctl_stage stage;
    uint8_t req[OFL_CTL_ARRAY_STAGE(64)], rep[OFL_CTL_ARRAY_STAGE(64)];
};

static void run_on_array(void *ctx, const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                         struct ofl_ctl_reply *r)
{
    struct arr *a = ctx;
    ofl_ctl_array_out(a->e, 64, 3, 'b', &a->updates, msg, len, out, r);
}

static void wide_array(void)
{
    static struct arr a;
    CHECK(ofl_ctl_stage_init(&a.stage, a.req, a.rep, sizeof a.req) == 0, "stage init");
    uint8_t set[5 + 64] = {'s', 2}, got[64];
    for (int i = 0; i < 64; i++) set[5 + i] = (uint8_t)(i * 3 + 1);
    struct ofl_ctl_reply r;
    ofl_ctl_stage_msg(&a.stage, 1, run_on_array, &a, (const uint8_t *)"S\x45\0\0\0", 5, &r);
    CHECK(reply_status(&r) == 0, "'S' of 69");
    for (uint32_t at = 0; at < sizeof set; at += OFL_CTL_PART_MAX) {
        uint8_t part[OFL_CTL_MSG_MAX] = {'P'};
        size_t k = sizeof set - at < OFL_CTL_PART_MAX ? sizeof set - at : OFL_CTL_PART_MAX;
        memcpy(part + 1, &at, 4);
        memcpy(part + 5, set + at, k);
        ofl_ctl_stage_msg(&a.stage, 1, run_on_array, &a, part, 5 + k, &r);
        CHECK(reply_status(&r) == 0 && a.updates == 0, "part at %u, nothing set yet", at);
    }
    ofl_ctl_stage_msg(&a.stage, 1, run_on_array, &a, (const uint8_t *)"X", 1, &r);
    CHECK(reply_status(&r) == 0 && a.updates == 1 && !memcmp(a.e[2], set + 5, 64) &&
          a.e[1][63] == 0, "element 2 set whole, element 1 untouched");
    ofl_ctl_stage_msg(&a.stage, 1, run_on_array, &a, (const uint8_t *)"g\2\0\0\0", 5, &r);
    CHECK(reply_status(&r) == 64, "a get: 64 bytes kept");
    for (uint32_t at = 0; at < 64;) {
        uint8_t rd[5] = {'R'};
        memcpy(rd + 1, &at, 4);
        ofl_ctl_stage_msg(&a.stage, 1, run_on_array, &a, rd, 5, &r);
        CHECK(reply_status(&r) == 0 && r.n > 4, "read at %u", at);
        memcpy(got + at, r.b + 4, r.n - 4);
        at += (uint32_t)(r.n - 4);
    }
    CHECK(!memcmp(got, set + 5, 64), "the element read back in parts");
    ofl_ctl_array(a.e, 64, 3, 'b', &a.updates, (const uint8_t *)"g\2\0\0\0", 5, &r);
    CHECK(reply_status(&r) == -EMSGSIZE, "a get with nowhere to keep the reply");
}

/* The core: its own keys 0..31 changed between serves. */
struct core {
    struct ofl_map *m;
    int has[32];
    uint64_t val[32];
    uint32_t stop;
};

static void *core_run(void *arg)
{
    struct core *c = arg;
    uint64_t s = 88172645463325252ull;
    uint8_t k[KS];
    for (uint32_t n = 0; !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) || n < 5000; n++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t i = (uint32_t)(s % 32);
        key_of(k, i);
        if ((s >> 8) & 1) {
            if (ofl_map_update(c->m, k, &s) == 0) { c->has[i] = 1; c->val[i] = s; }
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
    static struct served sv;
    served_open(&sv, 64);
    struct core c;
    memset(&c, 0, sizeof c);
    c.m = sv.m;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, core_run, &c) == 0, "the core thread");
    int has[32] = {0};
    uint64_t val[32] = {0};
    uint8_t got[CAP];
    size_t n;
    int ok = 1;
    uint64_t s = 1234567;
    for (int k = 0; k < 3000 && ok; k++) {   /* the client's keys 32..63 */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t i = (uint32_t)(s % 32);
        switch ((s >> 8) % 4) {
        case 0:
            ok = map_op(&sv, 's', 32 + i, s, got, &n) == 0;
            has[i] = 1; val[i] = s;
            break;
        case 1:
            ok = map_op(&sv, 'd', 32 + i, 0, got, &n) == (has[i] ? 0 : -ENOENT);
            has[i] = 0;
            break;
        case 2: {
            int32_t st = map_op(&sv, 'g', 32 + i, 0, got, &n);
            ok = has[i] ? st == 0 && n == VS && !memcmp(got, &val[i], VS) : st == -ENOENT;
            break;
        }
        default: {   /* a walk's step: a whole entry, a key of its own with its value */
            uint8_t next[5] = {'n'};
            uint32_t slot = (uint32_t)(s >> 32) % 128;
            memcpy(next + 1, &slot, 4);
            int32_t st = request(&sv, next, 5, got, &n);
            uint32_t j;
            memcpy(&j, got + 4 + KS - 4, 4);
            uint64_t w;
            memcpy(&w, got + 4 + KS, 8);
            ok = st == -ENOENT || (st == 0 && n == 4 + KS + VS && j < 64 &&
                                   (j < 32 || (has[j - 32] && w == val[j - 32])));
        }
        }
    }
    CHECK(ok, "every request answered as the client's model says");
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    uint8_t k[KS];
    uint32_t want = 0;
    for (uint32_t i = 0; i < 64; i++) {
        key_of(k, i);
        const uint64_t *v = ofl_map_lookup(sv.m, k);
        int h = i < 32 ? c.has[i] : has[i - 32];
        uint64_t w = i < 32 ? c.val[i] : val[i - 32];
        want += (uint32_t)h;
        CHECK(!!v == h && (!v || *v == w), "key %u after the race", i);
    }
    CHECK(sv.m->count == want, "count %u, want %u", sv.m->count, want);
    ofl_map_close(sv.m);
}

int main(void)
{
    whole_requests();
    abandoned_and_malformed();
    wide_array();
    clients_own_what_they_stage();
    mailbox();
    return CHECK_DONE();
}
