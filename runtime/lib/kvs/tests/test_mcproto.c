/* Tests of the memcached protocol module (runtime/lib/kvs/src/mcproto.c): every binary opcode
 * and text command, every parse error with its span, fatality and reply, requests cut
 * at every byte offset (as a TCP stream delivers them), the UDP frame header, and the
 * response writers / client-side response parser.
 *
 * Every parse reads from a heap buffer of exactly the input's size, so that ASan
 * catches a read past the end. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/err.h"
#include "offlow/mcproto.h"

#define MAXREQ (3u << 20)

/* ---- helpers -------------------------------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t n;
};

static struct buf mk(const void *data, size_t n)
{
    struct buf b = {malloc(n ? n : 1), n};
    if (n) memcpy(b.p, data, n);
    return b;
}

static struct buf mks(const char *s)
{
    return mk(s, strlen(s));
}

static void freeb(struct buf b)
{
    free(b.p);
}

/* A binary request with explicit length fields. */
static struct buf breq_raw(uint8_t magic, uint8_t op, uint16_t klen, uint8_t elen,
                           uint32_t blen, uint32_t opaque, uint64_t cas, const void *body,
                           size_t body_n)
{
    uint8_t *p = malloc(24 + body_n);
    p[0] = magic;
    p[1] = op;
    p[2] = (uint8_t)(klen >> 8);
    p[3] = (uint8_t)klen;
    p[4] = elen;
    p[5] = 0;
    p[6] = p[7] = 0;
    for (int i = 0; i < 4; i++) p[8 + i] = (uint8_t)(blen >> (24 - 8 * i));
    for (int i = 0; i < 4; i++) p[12 + i] = (uint8_t)(opaque >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) p[16 + i] = (uint8_t)(cas >> (56 - 8 * i));
    if (body_n) memcpy(p + 24, body, body_n);
    return (struct buf){p, 24 + body_n};
}

/* A well-formed binary request. */
static struct buf breq(uint8_t op, const void *extras, size_t elen, const char *key,
                       const void *value, size_t vlen, uint32_t opaque, uint64_t cas)
{
    size_t klen = key ? strlen(key) : 0;
    uint8_t *body = malloc(elen + klen + vlen + 1);
    if (elen) memcpy(body, extras, elen);
    if (klen) memcpy(body + elen, key, klen);
    if (vlen) memcpy(body + elen + klen, value, vlen);
    struct buf b = breq_raw(0x80, op, (uint16_t)klen, (uint8_t)elen,
                            (uint32_t)(elen + klen + vlen), opaque, cas, body, elen + klen + vlen);
    free(body);
    return b;
}

static int view_is(const uint8_t *p, uint32_t n, const char *s)
{
    return n == strlen(s) && (n == 0 || memcmp(p, s, n) == 0);
}

static int inside(const struct buf *b, const uint8_t *p, uint32_t n)
{
    return n == 0 || (p >= b->p && p + n <= b->p + b->n);
}

static ssize_t parse(const struct buf *b, enum ofl_mc_proto proto,
                     const struct ofl_mc_limits *lim, struct ofl_mc_req *r)
{
    return ofl_mc_parse(b->p, b->n, proto, lim, r);
}

/* The reply that ofl_mc_write_error() gives, as a string (binary: status + text). */
static int error_reply_is(const struct ofl_mc_req *r, int err, const void *want, size_t n)
{
    uint8_t out[512];
    ssize_t k = ofl_mc_write_error(out, sizeof out, r, err);
    return k == (ssize_t)n && (n == 0 || memcmp(out, want, n) == 0);
}

static int bin_error_is(const struct ofl_mc_req *r, int err, uint16_t status)
{
    uint8_t out[512];
    ssize_t k = ofl_mc_write_error(out, sizeof out, r, err);
    struct ofl_mc_res res;
    if (k <= 0 || ofl_mc_parse_response(out, (size_t)k, &res, NULL) != k) return 0;
    const char *text = ofl_mc_status_text(status);
    return res.status == status && res.opcode == r->opcode && res.opaque == r->opaque &&
           view_is(res.value, res.value_len, text) && res.key_len == 0 && res.extras_len == 0;
}

/* ---- binary: every opcode ------------------------------------------------------- */

static void test_binary_opcodes(void)
{
    const uint8_t ex[8] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0x0e, 0x10};   /* flags, 3600 s */
    struct {
        uint8_t op;
        int shape;   /* 0 key, 1 store, 2 empty */
        uint8_t cmd, quiet, want_key;
    } ops[] = {
        {OFL_MC_OP_GET, 0, OFL_MC_CMD_GET, 0, 0},
        {OFL_MC_OP_GETQ, 0, OFL_MC_CMD_GET, 1, 0},
        {OFL_MC_OP_GETK, 0, OFL_MC_CMD_GET, 0, 1},
        {OFL_MC_OP_GETKQ, 0, OFL_MC_CMD_GET, 1, 1},
        {OFL_MC_OP_DELETE, 0, OFL_MC_CMD_DELETE, 0, 0},
        {OFL_MC_OP_DELETEQ, 0, OFL_MC_CMD_DELETE, 1, 0},
        {OFL_MC_OP_SET, 1, OFL_MC_CMD_SET, 0, 0},
        {OFL_MC_OP_SETQ, 1, OFL_MC_CMD_SET, 1, 0},
        {OFL_MC_OP_ADD, 1, OFL_MC_CMD_ADD, 0, 0},
        {OFL_MC_OP_ADDQ, 1, OFL_MC_CMD_ADD, 1, 0},
        {OFL_MC_OP_REPLACE, 1, OFL_MC_CMD_REPLACE, 0, 0},
        {OFL_MC_OP_REPLACEQ, 1, OFL_MC_CMD_REPLACE, 1, 0},
        {OFL_MC_OP_NOOP, 2, OFL_MC_CMD_NOOP, 0, 0},
        {OFL_MC_OP_VERSION, 2, OFL_MC_CMD_VERSION, 0, 0},
        {OFL_MC_OP_QUIT, 2, OFL_MC_CMD_QUIT, 0, 0},
        {OFL_MC_OP_QUITQ, 2, OFL_MC_CMD_QUIT, 1, 0},
        {OFL_MC_OP_APPEND, 3, OFL_MC_CMD_APPEND, 0, 0},
        {OFL_MC_OP_APPENDQ, 3, OFL_MC_CMD_APPEND, 1, 0},
        {OFL_MC_OP_PREPEND, 3, OFL_MC_CMD_PREPEND, 0, 0},
        {OFL_MC_OP_PREPENDQ, 3, OFL_MC_CMD_PREPEND, 1, 0},
        {OFL_MC_OP_INCREMENT, 4, OFL_MC_CMD_INCR, 0, 0},
        {OFL_MC_OP_INCREMENTQ, 4, OFL_MC_CMD_INCR, 1, 0},
        {OFL_MC_OP_DECREMENT, 4, OFL_MC_CMD_DECR, 0, 0},
        {OFL_MC_OP_DECREMENTQ, 4, OFL_MC_CMD_DECR, 1, 0},
        {OFL_MC_OP_TOUCH, 5, OFL_MC_CMD_TOUCH, 0, 0},
        {OFL_MC_OP_GAT, 5, OFL_MC_CMD_GAT, 0, 0},
        {OFL_MC_OP_GATQ, 5, OFL_MC_CMD_GAT, 1, 0},
        {OFL_MC_OP_GATK, 5, OFL_MC_CMD_GAT, 0, 1},
        {OFL_MC_OP_GATKQ, 5, OFL_MC_CMD_GAT, 1, 1},
        {OFL_MC_OP_FLUSH, 2, OFL_MC_CMD_FLUSH, 0, 0},
        {OFL_MC_OP_FLUSHQ, 2, OFL_MC_CMD_FLUSH, 1, 0},
        {OFL_MC_OP_STAT, 2, OFL_MC_CMD_STATS, 0, 0},
    };
    /* extras of the arithmetic (delta 5, initial 7, expiry 60) and touch shapes */
    const uint8_t arith[20] = {0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 60};
    const uint8_t touch[4] = {0, 0, 0, 60};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int sh = ops[i].shape;
        struct buf b = sh == 0   ? breq(ops[i].op, NULL, 0, "mykey", NULL, 0, 77, 5)
                       : sh == 1 ? breq(ops[i].op, ex, 8, "mykey", "value!", 6, 77, 5)
                       : sh == 3 ? breq(ops[i].op, NULL, 0, "mykey", "value!", 6, 77, 5)
                       : sh == 4 ? breq(ops[i].op, arith, 20, "mykey", NULL, 0, 77, 5)
                       : sh == 5 ? breq(ops[i].op, touch, 4, "mykey", NULL, 0, 77, 5)
                                 : breq(ops[i].op, NULL, 0, NULL, NULL, 0, 77, 5);
        struct ofl_mc_req r;
        ssize_t n = parse(&b, OFL_MC_ANY, NULL, &r);
        int ok = n == (ssize_t)b.n && r.len == b.n && r.proto == OFL_MC_BINARY &&
                 r.opcode == ops[i].op && r.cmd == ops[i].cmd && r.quiet == ops[i].quiet &&
                 r.want_key == ops[i].want_key && r.opaque == 77 && r.cas == 5;
        if (sh != 2)
            ok = ok && view_is(r.key, r.key_len, "mykey") && inside(&b, r.key, r.key_len) &&
                 r.nkeys == 1;
        else
            ok = ok && r.key_len == 0 && r.nkeys == 0;
        if (sh == 1)
            ok = ok && view_is(r.value, r.value_len, "value!") && inside(&b, r.value, 6) &&
                 r.flags == 0xdeadbeef && r.exptime == 3600 && r.extras_len == 8 &&
                 r.extras == b.p + 24;
        else if (sh == 3)
            ok = ok && view_is(r.value, r.value_len, "value!") && r.extras_len == 0;
        else
            ok = ok && r.value_len == 0;
        if (sh == 4) ok = ok && r.delta == 5 && r.initial == 7 && r.exptime == 60;
        if (sh == 5) ok = ok && r.exptime == 60;
        CHECK(ok, "binary opcode 0x%02x parses (cmd %d quiet %d want_key %d)", ops[i].op,
              ops[i].cmd, ops[i].quiet, ops[i].want_key);
        /* Forcing the protocol gives the same; forcing text reads it as a text line. */
        struct ofl_mc_req r2;
        CHECK(parse(&b, OFL_MC_BINARY, NULL, &r2) == n && r2.cmd == r.cmd,
              "opcode 0x%02x parses with the protocol forced to binary", ops[i].op);
        freeb(b);
    }
    /* Unknown opcodes: every value not in the list above. */
    int unknown_ok = 1, count = 0;
    for (int op = 0; op < 256; op++) {
        int known = 0;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) known |= ops[i].op == op;
        if (known) continue;
        count++;
        struct buf b = breq((uint8_t)op, NULL, 0, "k", "zz", 2, 9, 0);
        struct ofl_mc_req r;
        ssize_t n = parse(&b, OFL_MC_ANY, NULL, &r);
        unknown_ok &= n == OFL_MC_EUNKNOWN && r.len == b.n && !r.fatal && r.opcode == op &&
                      r.opaque == 9 && bin_error_is(&r, (int)n, OFL_MC_ST_UNKNOWN_COMMAND);
        freeb(b);
    }
    CHECK(unknown_ok && count == 256 - (int)(sizeof ops / sizeof ops[0]), "all %d other opcodes: EUNKNOWN, body skipped, "
          "UNKNOWN_COMMAND reply, connection kept", count);
}

/* ---- binary: every error -------------------------------------------------------- */

static void test_binary_errors(void)
{
    const uint8_t ex[8] = {0};
    struct ofl_mc_req r;
    ssize_t n;

    struct buf b = breq_raw(0x42, OFL_MC_OP_GET, 1, 0, 1, 0, 0, "k", 1);
    n = parse(&b, OFL_MC_BINARY, NULL, &r);
    CHECK(n == OFL_MC_EMAGIC && r.fatal && r.len == b.n && error_reply_is(&r, (int)n, "", 0),
          "bad magic with the protocol forced to binary: EMAGIC, fatal, no reply");
    n = parse(&b, OFL_MC_ANY, NULL, &r);
    CHECK(n != OFL_MC_EMAGIC && r.proto == OFL_MC_TEXT,
          "a first byte other than 0x80 is read as text when the protocol is not forced");
    freeb(b);
    b = breq_raw(0x81, OFL_MC_OP_GET, 1, 0, 1, 0, 0, "k", 1);
    CHECK(parse(&b, OFL_MC_BINARY, NULL, &r) == OFL_MC_EMAGIC,
          "a response magic (0x81) in a request stream: EMAGIC");
    freeb(b);

    /* extras + key longer than the body */
    b = breq_raw(0x80, OFL_MC_OP_GET, 5, 0, 0, 3, 0, NULL, 0);
    n = parse(&b, OFL_MC_ANY, NULL, &r);
    CHECK(n == OFL_MC_EBADLEN && r.fatal && r.len == 24 &&
              bin_error_is(&r, (int)n, OFL_MC_ST_UNKNOWN_COMMAND),
          "key length past the body: EBADLEN, fatal, UNKNOWN_COMMAND (as memcached)");
    freeb(b);
    b = breq_raw(0x80, OFL_MC_OP_SET, 2, 8, 9, 3, 0, "abcdefghi", 9);
    n = parse(&b, OFL_MC_ANY, NULL, &r);
    CHECK(n == OFL_MC_EBADLEN && r.fatal, "extras + key = body + 1: EBADLEN");
    freeb(b);

    /* key too long: 250 fine, 251 not */
    char key[300];
    memset(key, 'k', sizeof key);
    key[250] = 0;
    b = breq(OFL_MC_OP_GET, NULL, 0, key, NULL, 0, 0, 0);
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.key_len == 250,
          "a 250-byte key is accepted");
    freeb(b);
    key[250] = 'k';
    key[251] = 0;
    const uint8_t kops[] = {OFL_MC_OP_GET, OFL_MC_OP_GETK, OFL_MC_OP_DELETE, OFL_MC_OP_SET};
    for (size_t i = 0; i < sizeof kops; i++) {
        int store = kops[i] == OFL_MC_OP_SET;
        b = breq(kops[i], store ? ex : NULL, store ? 8 : 0, key, "v", store, 4, 0);
        n = parse(&b, OFL_MC_ANY, NULL, &r);
        CHECK(n == OFL_MC_EKEY && r.fatal && r.len == b.n &&
                  bin_error_is(&r, (int)n, OFL_MC_ST_EINVAL),
              "opcode 0x%02x with a 251-byte key: EKEY, fatal, EINVAL reply", kops[i]);
        freeb(b);
    }

    /* bodies the opcode does not allow */
    struct {
        const char *what;
        uint8_t op;
        size_t elen;
        const char *key;
        size_t vlen;
    } bad[] = {
        {"get with extras", OFL_MC_OP_GET, 4, "k", 0},
        {"get without a key", OFL_MC_OP_GET, 0, NULL, 0},
        {"get with a value", OFL_MC_OP_GETK, 0, "k", 3},
        {"delete with extras", OFL_MC_OP_DELETE, 4, "k", 0},
        {"delete without a key", OFL_MC_OP_DELETEQ, 0, NULL, 0},
        {"delete with a value", OFL_MC_OP_DELETE, 0, "k", 1},
        {"set without extras", OFL_MC_OP_SET, 0, "k", 1},
        {"set with 4 bytes of extras", OFL_MC_OP_ADD, 4, "k", 1},
        {"set without a key", OFL_MC_OP_REPLACE, 8, NULL, 1},
        {"noop with a key", OFL_MC_OP_NOOP, 0, "k", 0},
        {"noop with a value", OFL_MC_OP_NOOP, 0, NULL, 2},
        {"version with extras", OFL_MC_OP_VERSION, 4, NULL, 0},
        {"quit with a key", OFL_MC_OP_QUIT, 0, "k", 0},
    };
    uint8_t zeros[16] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = breq(bad[i].op, zeros, bad[i].elen, bad[i].key, "vvv", bad[i].vlen, 6, 0);
        n = parse(&b, OFL_MC_ANY, NULL, &r);
        CHECK(n == OFL_MC_EINVAL && r.fatal && r.len == b.n &&
                  bin_error_is(&r, (int)n, OFL_MC_ST_EINVAL),
              "%s: EINVAL, fatal, EINVAL reply", bad[i].what);
        freeb(b);
    }

    /* values over the limit: found from the header alone, body skipped, kept open */
    struct ofl_mc_limits lim = {.value_max = 100, .line_max = 1024};
    uint8_t val[101];
    memset(val, 'v', sizeof val);
    b = breq(OFL_MC_OP_SET, ex, 8, "k", val, 100, 0, 0);
    CHECK(parse(&b, OFL_MC_ANY, &lim, &r) == (ssize_t)b.n && r.value_len == 100,
          "a value of exactly value_max is accepted");
    freeb(b);
    b = breq(OFL_MC_OP_SETQ, ex, 8, "k", val, 101, 8, 0);
    n = parse(&b, OFL_MC_ANY, &lim, &r);
    CHECK(n == OFL_MC_E2BIG && !r.fatal && r.len == b.n &&
              bin_error_is(&r, (int)n, OFL_MC_ST_E2BIG),
          "value_max + 1: E2BIG, not fatal, E2BIG reply (quiet opcodes too)");
    struct ofl_mc_req r2;
    CHECK(ofl_mc_parse(b.p, 24, OFL_MC_ANY, &lim, &r2) == OFL_MC_E2BIG && r2.len == b.n,
          "E2BIG is found from the 24-byte header, span includes the missing body");
    freeb(b);
    b = breq_raw(0x80, OFL_MC_OP_SET, 1, 8, 0xffffffffu, 0, 0, NULL, 0);
    n = parse(&b, OFL_MC_ANY, NULL, &r);
    CHECK(n == OFL_MC_E2BIG && r.len == 24 + (size_t)0xffffffffu,
          "a 4 GB body: E2BIG with its full span (the caller skips it)");
    freeb(b);
    b = breq_raw(0x80, 0x5f, 0, 0, 0xffffffffu, 0, 0, NULL, 0);
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == OFL_MC_EUNKNOWN && r.len == 24 + (size_t)0xffffffffu,
          "an unknown opcode with a 4 GB body: EUNKNOWN with its full span");
    freeb(b);
}

/* ---- text ------------------------------------------------------------------------ */

static void test_text_commands(void)
{
    struct ofl_mc_req r;
    struct buf b = mks("get alpha\r\n");
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.proto == OFL_MC_TEXT &&
              r.cmd == OFL_MC_CMD_GET && r.nkeys == 1 && view_is(r.key, r.key_len, "alpha"),
          "text get of one key");
    freeb(b);

    b = mks("gets  a bb  ccc \r\n");
    int ok = parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.cmd == OFL_MC_CMD_GETS &&
             r.nkeys == 3 && inside(&b, r.keys, r.keys_len);
    const uint8_t *pos = r.keys, *end = r.keys + r.keys_len, *k;
    uint32_t kl;
    const char *want[] = {"a", "bb", "ccc"};
    for (int i = 0; i < 3; i++) ok &= ofl_mc_next_key(&pos, end, &k, &kl) && view_is(k, kl, want[i]);
    ok &= !ofl_mc_next_key(&pos, end, &k, &kl);
    CHECK(ok, "text gets of three keys, runs of spaces, keys iterated in order");
    freeb(b);

    b = mks("set foo 4294967295 -5 5\r\nhello\r\n");
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.cmd == OFL_MC_CMD_SET &&
              view_is(r.key, r.key_len, "foo") && r.flags == 4294967295u && r.exptime == -5 &&
              view_is(r.value, r.value_len, "hello") && !r.quiet && inside(&b, r.value, 5),
          "text set: key, largest flags, negative exptime, value view");
    freeb(b);

    struct {
        const char *line;
        uint8_t cmd, quiet;
        uint64_t cas;
    } stores[] = {
        {"add k 1 2 3 noreply\r\nabc\r\n", OFL_MC_CMD_ADD, 1, 0},
        {"replace k 1 2 3\r\nabc\r\n", OFL_MC_CMD_REPLACE, 0, 0},
        {"cas k 1 2 3 18446744073709551615\r\nabc\r\n", OFL_MC_CMD_CAS, 0, UINT64_MAX},
        {"cas k 1 2 3 42 noreply\r\nabc\r\n", OFL_MC_CMD_CAS, 1, 42},
        {"set k 1 2 3 whatever\r\nabc\r\n", OFL_MC_CMD_SET, 0, 0},
        {"set k 1 2 +3\nabc\r\n", OFL_MC_CMD_SET, 0, 0},
    };
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
        b = mks(stores[i].line);
        CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.cmd == stores[i].cmd &&
                  r.quiet == stores[i].quiet && r.cas == stores[i].cas &&
                  view_is(r.value, r.value_len, "abc") && r.flags == 1 && r.exptime == 2,
              "text %.*s", (int)(strcspn(stores[i].line, "\r\n")), stores[i].line);
        freeb(b);
    }

    const char *dels[][2] = {{"delete k\r\n", "0"}, {"delete k noreply\r\n", "1"},
                             {"delete k 0\r\n", "0"}, {"delete k 0 noreply\r\n", "1"}};
    for (int i = 0; i < 4; i++) {
        b = mks(dels[i][0]);
        CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.cmd == OFL_MC_CMD_DELETE &&
                  view_is(r.key, r.key_len, "k") && r.quiet == (dels[i][1][0] == '1'),
              "text %.*s", (int)strcspn(dels[i][0], "\r"), dels[i][0]);
        freeb(b);
    }
    b = mks("version\r\nquit\r\n");
    ssize_t n = parse(&b, OFL_MC_ANY, NULL, &r);
    struct ofl_mc_req r2;
    ssize_t n2 = ofl_mc_parse(b.p + n, b.n - (size_t)n, OFL_MC_TEXT, NULL, &r2);
    CHECK(n == 9 && r.cmd == OFL_MC_CMD_VERSION && n2 == 6 && r2.cmd == OFL_MC_CMD_QUIT,
          "text version and quit, back to back");
    freeb(b);
    b = mks("version please\r\n");
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.cmd == OFL_MC_CMD_VERSION,
          "version ignores arguments (as memcached)");
    freeb(b);
    b = mks("get k\r\n");
    CHECK(parse(&b, OFL_MC_BINARY, NULL, &r) == OFL_MC_EMAGIC,
          "a text line on a connection forced to binary: EMAGIC");
    freeb(b);
    b = mk("set k 0 0 0\r\n\r\n", 15);
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == 15 && r.value_len == 0,
          "text set of an empty value");
    freeb(b);
}

static void test_text_errors(void)
{
    struct ofl_mc_limits lim = {.value_max = 100, .line_max = 64};
    struct {
        const char *in;
        int err;
        size_t span;   /* 0: the first line */
        int fatal;
        const char *reply;
    } cases[] = {
        {"flurb\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"   \r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"GET k\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"get\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"get\tk\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"set k 0 0\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        /* a readable length: the data block (1 byte + CRLF) is part of the error */
        {"set k 0 0 1 noreply x\r\n", OFL_MC_EUNKNOWN, 23 + 3, 0, "ERROR\r\n"},
        {"cas k 0 0 1\r\n", OFL_MC_EUNKNOWN, 13 + 3, 0, "ERROR\r\n"},
        {"set k 0 1\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"delete\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"delete a b c d\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"set k abc 0 1\r\n", OFL_MC_EINVAL, 15 + 3, 0,
         "CLIENT_ERROR bad command line format\r\n"},
        {"set k -1 0 1\r\n", OFL_MC_EINVAL, 14 + 3, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"set k 4294967296 0 1\r\n", OFL_MC_EINVAL, 22 + 3, 0,
         "CLIENT_ERROR bad command line format\r\n"},
        {"set k 0 x 1\r\n", OFL_MC_EINVAL, 13 + 3, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"set k 0 0 -1\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"set k 0 0 1x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"cas k 0 0 1 -3\r\n", OFL_MC_EINVAL, 16 + 3, 0,
         "CLIENT_ERROR bad command line format\r\n"},
        {"set k abc 0 1 noreply\r\n", OFL_MC_EINVAL, 23 + 3, 0, ""},
        {"set k 0 0 noreply\r\n", OFL_MC_EINVAL, 0, 0, ""},
        {"ms k 1 Mx\r\n", OFL_MC_EINVAL, 11 + 3, 0,
         "CLIENT_ERROR invalid mode for ms M token\r\n"},
        {"ms k 1 F1 F2\r\n", OFL_MC_EINVAL, 14 + 3, 0, "CLIENT_ERROR duplicate flag\r\n"},
        {"ms k 1 Z\r\n", OFL_MC_EINVAL, 10 + 3, 0, "CLIENT_ERROR invalid flag\r\n"},
        {"ms k 1 Tx\r\n", OFL_MC_EINVAL, 11 + 3, 0,
         "CLIENT_ERROR bad token in command line format\r\n"},
        {"ms k 1 q Fx\r\n", OFL_MC_EINVAL, 13 + 3, 0,
         "CLIENT_ERROR bad command line format\r\n"},
        {"ms k x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"ms k\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"ms\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"ms k 101\r\n", OFL_MC_E2BIG, 10 + 101 + 2, 0,
         "SERVER_ERROR object too large for cache\r\n"},
        {"ms k 3 q\r\nabcXY\r\n", OFL_MC_ECHUNK, 10 + 5, 0, "CLIENT_ERROR bad data chunk\r\n"},
        {"mg k Tx Fy\r\n", OFL_MC_EINVAL, 0, 0,
         "CLIENT_ERROR bad token in command line format\r\n"},
        {"md k Tx\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid or duplicate flag\r\n"},
        {"ma k Mx\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid mode for ma M token\r\n"},
        {"mg k O123456789012345678901234567890123\r\n", OFL_MC_EINVAL, 0, 0,
         "CLIENT_ERROR opaque token too long\r\n"},
        {"mx k\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"incr k x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid numeric delta argument\r\n"},
        {"touch k x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid exptime argument\r\n"},
        {"gat x k\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid exptime argument\r\n"},
        {"flush_all x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR invalid exptime argument\r\n"},
        {"flush_all 1 2 3\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"verbosity\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"verbosity x\r\n", OFL_MC_EINVAL, 0, 0, "CLIENT_ERROR bad command line format\r\n"},
        {"incr k\r\n", OFL_MC_EUNKNOWN, 0, 0, "ERROR\r\n"},
        {"delete k 5\r\n", OFL_MC_EINVAL, 0, 0,
         "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"},
        {"delete k 5 noreply\r\n", OFL_MC_EINVAL, 0, 0, ""},
        {"set k 0 0 101\r\n", OFL_MC_E2BIG, 15 + 101 + 2, 0,
         "SERVER_ERROR object too large for cache\r\n"},
        {"set k 0 0 101 noreply\r\n", OFL_MC_E2BIG, 23 + 101 + 2, 0, ""},
        {"set k 0 0 2147483645\r\n", OFL_MC_E2BIG, 22 + 2147483645ull + 2, 0,
         "SERVER_ERROR object too large for cache\r\n"},
        {"set k 0 0 2147483646\r\n", OFL_MC_EINVAL, 0, 0,
         "CLIENT_ERROR bad command line format\r\n"},
        {"set k 0 0 3\r\nabcXY\r\n", OFL_MC_ECHUNK, 13 + 5, 0, "CLIENT_ERROR bad data chunk\r\n"},
        {"set k 0 0 3\r\nabc\n\n", OFL_MC_ECHUNK, 13 + 5, 0, "CLIENT_ERROR bad data chunk\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct buf b = mks(cases[i].in);
        struct ofl_mc_req r;
        ssize_t n = parse(&b, OFL_MC_ANY, &lim, &r);
        size_t line = (size_t)(strchr(cases[i].in, '\n') - cases[i].in) + 1;
        size_t span = cases[i].span ? cases[i].span : line;
        CHECK(n == cases[i].err && r.len == span && r.fatal == cases[i].fatal &&
                  r.proto == OFL_MC_TEXT &&
                  error_reply_is(&r, (int)n, cases[i].reply, strlen(cases[i].reply)),
              "text %.*s: %s, span %zu, reply %.*s", (int)strcspn(cases[i].in, "\r\n"),
              cases[i].in, ofl_mc_strerror(cases[i].err), span,
              (int)strcspn(cases[i].reply, "\r"), cases[i].reply);
        freeb(b);
    }
    /* keys of 250 and 251 bytes in get, set and delete */
    char line[400];
    char key[252];
    memset(key, 'q', 251);
    key[251] = 0;
    struct ofl_mc_limits big = {.value_max = 100, .line_max = 4096};
    const char *fmts[] = {"get a %s b\r\n", "set %s 0 0 1\r\nx\r\n", "delete %s\r\n"};
    for (int f = 0; f < 3; f++) {
        for (int len = 250; len <= 251; len++) {
            key[len] = 0;
            snprintf(line, sizeof line, fmts[f], key);
            key[len] = 'q';
            struct buf b = mks(line);
            struct ofl_mc_req r;
            ssize_t n = parse(&b, OFL_MC_ANY, &big, &r);
            size_t first = (size_t)(strchr(line, '\n') - line) + 1;
            if (len == 250)
                CHECK(n == (ssize_t)b.n, "%.6s with a 250-byte key parses", fmts[f]);
            else   /* a set's data block goes with its line */
                CHECK(n == OFL_MC_EKEY && r.len == (f == 1 ? b.n : first) && !r.fatal &&
                          error_reply_is(&r, (int)n, "CLIENT_ERROR bad command line format\r\n",
                                         38),
                      "%.6s with a 251-byte key: EKEY, the line (and a data block) skipped, "
                      "CLIENT_ERROR", fmts[f]);
            freeb(b);
        }
    }
    /* a line longer than the limit */
    char longline[200];
    memset(longline, 'g', sizeof longline);
    struct buf b = mk(longline, sizeof longline);
    struct ofl_mc_req r;
    ssize_t n = parse(&b, OFL_MC_ANY, &lim, &r);
    CHECK(n == OFL_MC_ELINE && r.fatal && r.len == b.n &&
              error_reply_is(&r, (int)n, "CLIENT_ERROR line too long\r\n", 28),
          "no newline within line_max bytes: ELINE, fatal, CLIENT_ERROR line too long");
    freeb(b);
    b = mk(longline, 63);
    CHECK(parse(&b, OFL_MC_ANY, &lim, &r) == 0 && r.need == 1,
          "63 bytes without a newline (limit 64): incomplete, need 1");
    freeb(b);
}

/* ---- a storage command's data block is never read as commands -------------------- */

/* Parse `in` as a TCP stream delivered in two pieces cut at `cut` (an error's span
 * past what has arrived is skipped as the rest arrives, as the servers do); record
 * the commands of the complete requests (OFL_MC_CMD_NONE for an error) in `cmds`.
 * Returns how many requests there were. */
static size_t stream_cmds(const char *in, size_t cut, uint8_t *cmds, size_t max)
{
    size_t len = strlen(in), start = 0, have = cut, n = 0, skip = 0;
    enum ofl_mc_proto proto = OFL_MC_ANY;
    while (start < len && n < max) {
        if (skip) {   /* drop what arrived of a refused request's span */
            size_t drop = have - start < skip ? have - start : skip;
            start += drop;
            skip -= drop;
            if (skip) {
                have = len;
                continue;
            }
            if (start == len) break;
        }
        struct buf b = mk(in + start, have - start);
        struct ofl_mc_req r;
        ssize_t k = parse(&b, proto, NULL, &r);
        freeb(b);
        if (have > start) proto = (enum ofl_mc_proto)r.proto;
        if (k == 0) {
            if (have == len) break;
            have = len;
            continue;
        }
        cmds[n++] = k > 0 ? r.cmd : OFL_MC_CMD_NONE;
        size_t span = k > 0 ? (size_t)k : r.len;
        if (k < 0 && r.fatal) break;
        if (span > have - start) {
            skip = span - (have - start);
            start = have;
        } else {
            start += span;
        }
    }
    return n;
}

static void test_data_blocks_are_never_commands(void)
{
    /* Every storage command, right and wrong in every way whose length can be read;
     * the data block "delete victim" (13 bytes) must never run as a delete, and the
     * "get victim" after it must be the next request. */
    const char *lines[] = {
        "set k 0 0 13", "add k 0 0 13", "replace k 0 0 13", "append k 0 0 13",
        "prepend k 0 0 13", "cas k 0 0 13 5", "ms k 13", "ms k 13 MA", "ms k 13 MP",
        "ms k 13 T0 F5 q", "set k 0 0 13 noreply", "append k 0 0 13 noreply",
        "set k 0 0 13 noreply extra", "append k 0 0 13 a b", "cas k 0 0 13",
        "prepend k 0 0 13 1 2 3", "set k x 0 13", "add k 0 x 13", "cas k 0 0 13 x",
        "append k x 0 13 noreply", "set kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk 0 0 13",
        "ms k 13 Z", "ms k 13 Mx", "ms k 13 F1 F1", "ms k 13 Tx", "ms k 13 Fx q",
        "ms k 13 O1234567890123456789012345678901234", "ms k 13 b", "ms k 13 Cx",
        "ms k 13 a b c d e f g h i j k l m n o p q r s t u v",
        "set k 0 0 13\r\ndelete victimXY", /* no CRLF after the block: bad data chunk */
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char in[1024];
        int chunk = strstr(lines[i], "\r\n") != NULL;
        snprintf(in, sizeof in, chunk ? "%sget victim\r\n" : "%s\r\ndelete victim\r\nget victim\r\n",
                 lines[i]);
        size_t len = strlen(in);
        int ok = 1;
        for (size_t cut = 0; cut <= len && ok; cut++) {
            uint8_t cmds[8];
            size_t n = stream_cmds(in, cut, cmds, 8);
            ok = n == 2 && cmds[1] == OFL_MC_CMD_GET && cmds[0] != OFL_MC_CMD_DELETE;
        }
        CHECK(ok, "%.40s + a data block that reads as \"delete victim\": the block is "
              "skipped whatever the line's fault, at every cut; the next request is the get",
              lines[i]);
    }
    /* When the length cannot be read, only the line goes (the next line is a command:
     * memcached reads it so too, and a client that sends such a line sends no block). */
    const char *unreadable[] = {"set k 0 0", "set k 0 0 x", "set k 0 0 -1", "ms k", "ms k x",
                                "append k 0 0 99999999999"};
    for (size_t i = 0; i < sizeof unreadable / sizeof unreadable[0]; i++) {
        char in[256];
        snprintf(in, sizeof in, "%s\r\ndelete victim\r\n", unreadable[i]);
        uint8_t cmds[8];
        size_t n = stream_cmds(in, strlen(in), cmds, 8);
        CHECK(n == 2 && cmds[0] == OFL_MC_CMD_NONE && cmds[1] == OFL_MC_CMD_DELETE,
              "%s: no readable length, only the line is an error", unreadable[i]);
    }
}

/* ---- incomplete input: every split --------------------------------------------- */

/* Parse `whole` as a stream delivered in two pieces cut at every offset; the parsed
 * requests (command, key, value, length) must be those of the whole buffer. For
 * binary requests and text data blocks, `need` must be exact. */
static void test_splits(const char *what, const uint8_t *whole, size_t len)
{
    struct ofl_mc_req ref[64];
    size_t ref_n = 0, off = 0;
    struct buf all = mk(whole, len);   /* the reference views point here */
    while (off < len && ref_n < 64) {
        ssize_t n = ofl_mc_parse(all.p + off, len - off, OFL_MC_ANY, NULL, &ref[ref_n]);
        if (n <= 0) break;
        off += (size_t)n;
        ref_n++;
    }
    CHECK(off == len, "%s: %zu requests parse back to back over %zu bytes", what, ref_n, len);
    int ok = 1;
    size_t bad_cut = 0;
    for (size_t cut = 0; cut <= len && ok; cut++) {
        /* The receiver holds bytes [start, have); it gets the rest in one go after `cut`. */
        size_t start = 0, have = cut, got = 0;
        int phase = 0;
        while (got < ref_n && ok) {
            struct buf b = mk(whole + start, have - start);
            struct ofl_mc_req r;
            ssize_t n = parse(&b, OFL_MC_ANY, NULL, &r);
            if (n == 0) {
                freeb(b);
                /* need must not overshoot the request (exact for binary) */
                size_t rest = ref[got].len - (have - start);
                /* (with no byte yet the protocol is unknown: need is 1) */
                if (r.need == 0 || r.need > rest ||
                    (ref[got].proto == OFL_MC_BINARY && have > start &&
                     r.need != (have - start < 24
                                                                       ? 24 - (have - start)
                                                                       : rest)))
                    ok = 0;
                if (phase == 1) {
                    ok = 0;   /* everything arrived and it is still incomplete */
                    break;
                }
                have = len;
                phase = 1;
                continue;
            }
            ok &= n == (ssize_t)ref[got].len && r.cmd == ref[got].cmd &&
                  r.opcode == ref[got].opcode && r.key_len == ref[got].key_len &&
                  r.value_len == ref[got].value_len && r.nkeys == ref[got].nkeys &&
                  inside(&b, r.key, r.key_len) && inside(&b, r.value, r.value_len) &&
                  (r.key_len == 0 || memcmp(r.key, ref[got].key, r.key_len) == 0) &&
                  (r.value_len == 0 || memcmp(r.value, ref[got].value, r.value_len) == 0);
            freeb(b);
            start += (size_t)n;
            got++;
        }
        if (!ok) bad_cut = cut;
    }
    CHECK(ok, "%s: cut at every one of %zu offsets, the same requests come out%s", what,
          len + 1, ok ? "" : " (failed)");
    if (!ok) printf("      first bad cut at %zu\n", bad_cut);
    freeb(all);
}

static size_t append(uint8_t *dst, size_t off, struct buf b)
{
    memcpy(dst + off, b.p, b.n);
    freeb(b);
    return off + b.n;
}

static void test_incomplete(void)
{
    const uint8_t ex[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    uint8_t *s = malloc(8192);
    size_t n = 0;
    n = append(s, n, breq(OFL_MC_OP_GET, NULL, 0, "key-one", NULL, 0, 1, 0));
    n = append(s, n, breq(OFL_MC_OP_SET, ex, 8, "key-two", "a value of some length", 22, 2, 0));
    n = append(s, n, breq(OFL_MC_OP_NOOP, NULL, 0, NULL, NULL, 0, 3, 0));
    n = append(s, n, breq(OFL_MC_OP_GETKQ, NULL, 0, "k3", NULL, 0, 4, 0));
    n = append(s, n, breq(OFL_MC_OP_SET, ex, 8, "empty", NULL, 0, 5, 0));
    n = append(s, n, breq(OFL_MC_OP_DELETE, NULL, 0, "key-one", NULL, 0, 6, 9));
    test_splits("binary stream of get/set/noop/getkq/set-empty/delete", s, n);
    const char *text = "get a bb ccc\r\nset k 1 2 5\r\nhello\r\ndelete k\r\nversion\r\n"
                       "set e 0 0 0\r\n\r\ncas k 0 0 3 99 noreply\r\nabc\r\nget x\n";
    test_splits("text stream of get/set/delete/version/set-empty/cas", (const uint8_t *)text,
                strlen(text));
    /* Each binary request alone: need is exact at every cut. */
    struct buf one = breq(OFL_MC_OP_SET, ex, 8, "kk", "vvvvvvvv", 8, 0, 0);
    int ok = 1;
    for (size_t cut = 0; cut < one.n; cut++) {
        struct buf b = mk(one.p, cut);
        struct ofl_mc_req r;
        ssize_t k = parse(&b, cut ? OFL_MC_ANY : OFL_MC_BINARY, NULL, &r);
        ok &= k == 0 && r.need == (cut < 24 ? 24 - cut : one.n - cut);
        freeb(b);
    }
    freeb(one);
    CHECK(ok, "a lone binary SET cut anywhere: incomplete with need = exactly the missing bytes");
    /* Errors are found as soon as the bytes that prove them arrive. */
    char key[260];
    memset(key, 'z', 251);
    key[251] = 0;
    one = breq(OFL_MC_OP_GET, NULL, 0, key, NULL, 0, 0, 0);
    struct ofl_mc_req r;
    struct buf head = mk(one.p, 24);
    CHECK(parse(&head, OFL_MC_ANY, NULL, &r) == OFL_MC_EKEY,
          "a 251-byte key is refused from the header alone");
    freeb(head);
    freeb(one);
    free(s);
}

/* ---- UDP, writers, response parser ---------------------------------------------- */

static void test_udp(void)
{
    uint8_t d[16];
    ofl_mc_udp_write(d, 0xabcd, 3, 1);
    struct ofl_mc_udp_hdr h;
    CHECK(ofl_mc_udp_parse(d, 8, &h) == 8 && h.request_id == 0xabcd && h.seq == 3 &&
              h.count == 1 && h.reserved == 0 && d[0] == 0xab && d[1] == 0xcd,
          "UDP frame header written and read back (big-endian)");
    CHECK(ofl_mc_udp_parse(d, 7, &h) == OFL_MC_ETRUNC, "a 7-byte datagram: ETRUNC");
    ofl_mc_udp_write(d, 1, 0, 2);
    CHECK(ofl_mc_udp_parse(d, 8, &h) == OFL_MC_EUDP, "count 2: EUDP (multi-datagram request)");
    ofl_mc_udp_write(d, 1, 0, 0);
    CHECK(ofl_mc_udp_parse(d, 8, &h) == OFL_MC_EUDP, "count 0: EUDP");
}

static void test_writers(void)
{
    uint8_t out[256];
    ssize_t n = ofl_mc_write_response(out, sizeof out, OFL_MC_OP_GETK, OFL_MC_ST_OK, 0x01020304,
                                      0x1122334455667788ull, "\0\0\0\7", 4, "key", 3, "val", 3);
    struct ofl_mc_res res;
    size_t need = 0;
    CHECK(n == 34 && out[0] == 0x81 && ofl_mc_parse_response(out, (size_t)n, &res, &need) == 34 &&
              res.opcode == OFL_MC_OP_GETK && res.status == 0 && res.opaque == 0x01020304 &&
              res.cas == 0x1122334455667788ull && res.extras_len == 4 &&
              view_is(res.key, res.key_len, "key") && view_is(res.value, res.value_len, "val"),
          "binary response written and parsed back");
    int ok = 1;
    for (size_t cut = 0; cut < 34; cut++)
        ok &= ofl_mc_parse_response(out, cut, &res, &need) == 0 &&
              need == (cut < 24 ? 24 - cut : 34 - cut);
    CHECK(ok, "a response cut anywhere: incomplete with the exact missing count");
    CHECK(ofl_mc_write_response(out, 33, OFL_MC_OP_GETK, 0, 0, 0, "abcd", 4, "key", 3, "val", 3)
              == -ENOSPC,
          "a response one byte over the room: -ENOSPC");
    out[0] = 0x80;
    CHECK(ofl_mc_parse_response(out, 34, &res, NULL) == OFL_MC_EMAGIC,
          "a request magic where a response is expected: EMAGIC");
    n = ofl_mc_write_request(out, sizeof out, OFL_MC_OP_SET, 5, 6, "ffffeeee", 8, "k", 1, "v", 1);
    struct ofl_mc_req r;
    CHECK(n == 34 && ofl_mc_parse(out, 34, OFL_MC_ANY, NULL, &r) == 34 &&
              r.cmd == OFL_MC_CMD_SET && r.opaque == 5 && r.cas == 6,
          "binary request written and parsed back");
    static const struct {
        uint16_t st;
        const char *text;
    } texts[] = {{OFL_MC_ST_NOT_FOUND, "Not found"},
                 {OFL_MC_ST_EXISTS, "Data exists for key."},
                 {OFL_MC_ST_E2BIG, "Too large."},
                 {OFL_MC_ST_EINVAL, "Invalid arguments"},
                 {OFL_MC_ST_NOT_STORED, "Not stored."},
                 {OFL_MC_ST_UNKNOWN_COMMAND, "Unknown command"},
                 {OFL_MC_ST_ENOMEM, "Out of memory"}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        n = ofl_mc_write_status(out, sizeof out, OFL_MC_OP_GET, 7, texts[i].st);
        CHECK(n == (ssize_t)(24 + strlen(texts[i].text)) &&
                  ofl_mc_parse_response(out, (size_t)n, &res, NULL) == n &&
                  res.status == texts[i].st && res.cas == 0 && res.opaque == 7 &&
                  view_is(res.value, res.value_len, texts[i].text),
              "status 0x%04x carries \"%s\"", texts[i].st, texts[i].text);
    }
    n = ofl_mc_write_text_value(out, sizeof out, "kk", 2, 42, "data", 4, 0, 0);
    CHECK(n == 21 && memcmp(out, "VALUE kk 42 4\r\ndata\r\n", 21) == 0, "text VALUE line");
    n = ofl_mc_write_text_value(out, sizeof out, "kk", 2, 0, "", 0, 1, 123456789012ull);
    CHECK(n == 29 && memcmp(out, "VALUE kk 0 0 123456789012\r\n\r\n", 29) == 0,
          "text VALUE line with a CAS and an empty value");
    CHECK(ofl_mc_write_text_value(out, 20, "kk", 2, 42, "data", 4, 0, 0) == -ENOSPC,
          "text VALUE over the room: -ENOSPC");
    n = ofl_mc_write_text_line(out, sizeof out, "STORED");
    CHECK(n == 8 && memcmp(out, "STORED\r\n", 8) == 0, "text reply line");
    CHECK(ofl_mc_write_text_line(out, 7, "STORED") == -ENOSPC, "text reply over the room");
    const int errs[] = {OFL_MC_EMAGIC, OFL_MC_EUNKNOWN, OFL_MC_EINVAL, OFL_MC_EKEY,
                        OFL_MC_E2BIG, OFL_MC_EBADLEN, OFL_MC_ECHUNK, OFL_MC_ELINE,
                        OFL_MC_ETRUNC, OFL_MC_EUDP};
    ok = 1;
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        ok &= strncmp(ofl_mc_strerror(errs[i]), "memcached: ", 11) == 0 &&
              strcmp(ofl_strerror(errs[i]), "unknown error") == 0;
    CHECK(ok && strcmp(ofl_mc_strerror(-EINVAL), "Invalid argument") == 0 &&
              strcmp(ofl_mc_strerror(OFL_ETRUNC), "truncated packet") == 0,
          "ofl_mc_strerror has a text for every memcached error, the core's ofl_strerror "
          "none; the core's texts still come through");
    ok = 1;  /* the memcached errors' range (err.h) is apart from the core's and the parsers' */
    for (int e = OFL_ERR_PKT_FIRST; e >= OFL_ERR_CORE_LAST; e--)
        ok &= strcmp(ofl_mc_strerror(e), ofl_strerror(e)) == 0;
    CHECK(ok, "no code in the core's or the packet parsers' ranges is a memcached error");
}

/* A 1 MiB value (the default limit) parses in both protocols; one more byte does not. */
static void test_default_limit(void)
{
    uint8_t *v = malloc(MAXREQ);
    memset(v, 'x', MAXREQ);
    const uint8_t ex[8] = {0};
    struct buf b = breq(OFL_MC_OP_SET, ex, 8, "big", v, 1u << 20, 0, 0);
    struct ofl_mc_req r;
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.value_len == 1u << 20,
          "binary: a 1 MiB value is accepted by default");
    freeb(b);
    b = breq(OFL_MC_OP_SET, ex, 8, "big", v, (1u << 20) + 1, 0, 0);
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == OFL_MC_E2BIG, "binary: 1 MiB + 1 is E2BIG");
    freeb(b);
    char head[64];
    int hn = snprintf(head, sizeof head, "set big 0 0 %u\r\n", 1u << 20);
    memcpy(v, head, (size_t)hn);
    memcpy(v + hn + (1u << 20), "\r\n", 2);
    b = mk(v, (size_t)hn + (1u << 20) + 2);
    CHECK(parse(&b, OFL_MC_ANY, NULL, &r) == (ssize_t)b.n && r.value_len == 1u << 20,
          "text: a 1 MiB value is accepted by default");
    freeb(b);
    free(v);
}

int main(void)
{
    test_binary_opcodes();
    test_binary_errors();
    test_text_commands();
    test_text_errors();
    test_data_blocks_are_never_commands();
    test_incomplete();
    test_udp();
    test_writers();
    test_default_limit();
    return CHECK_DONE();
}
