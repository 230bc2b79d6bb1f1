/* libFuzzer target: the memcached request parser (binary, text and UDP-framed input),
 * the requests run against a small key-value store, and the client-side response
 * parser.
 *
 * The first input byte picks the framing (0: binary stream, 1: text stream, 2: UDP
 * datagram, 3: decided by the first request byte) and a value limit; the second
 * byte is where the stream is cut in two. The rest is parsed as a TCP connection
 * would be, request after request (a rejected request's span skipped, a fatal error
 * ending the stream), and every result must be consistent: a complete request lies
 * within the input and its views within the request; an incomplete one needs at
 * least one byte and no more than its declared length; an error has a span. The
 * stream cut in two pieces must give the same requests as whole. Replies are
 * produced for everything (ofl_kv_exec / ofl_kv_exec_error) into a bounded buffer;
 * with bit 4 of the first byte set, requests run as a trusted writer's
 * (ofl_kv_exec_trusted: a SET's CAS is the item's new one).
 *
 * With bit 5 set, the rest of the input is the arguments of a text storage command
 * (the second byte picks set, add, replace, append, prepend, cas or ms) whose length
 * token is 13, followed by a 13-byte data block that is itself a command, "delete
 * victim", and by "get victim": whatever the fuzzed arguments make of the line, the
 * block must never be parsed as a request, and the get must come next.
 * Pieces are parsed from exactly sized heap copies so ASan sees any over-read. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/kvexec.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"

#define MAX_REQS 256

struct outcome {
    ssize_t rc;
    uint8_t cmd, opcode, fatal;
    size_t len;
    uint32_t key_len, value_len, nkeys;
};

static int is_error(ssize_t rc)
{
    return rc == OFL_MC_EMAGIC || rc == OFL_MC_EUNKNOWN || rc == OFL_MC_EINVAL ||
           rc == OFL_MC_EKEY || rc == OFL_MC_E2BIG || rc == OFL_MC_EBADLEN ||
           rc == OFL_MC_ECHUNK || rc == OFL_MC_ELINE;
}

static void check_views(const uint8_t *p, size_t n, const struct ofl_mc_req *r)
{
    if (r->key_len && (r->key < p || r->key + r->key_len > p + n)) abort();
    if (r->value_len && (r->value < p || r->value + r->value_len > p + n)) abort();
    if (r->keys_len && (r->keys < p || r->keys + r->keys_len > p + n)) abort();
    if (r->extras_len && (r->extras < p || r->extras + r->extras_len > p + n)) abort();
    if (r->key_len > OFL_MC_KEY_MAX) abort();
    if (r->proto == OFL_MC_TEXT && (r->cmd == OFL_MC_CMD_GET || r->cmd == OFL_MC_CMD_GETS)) {
        const uint8_t *pos = r->keys, *end = r->keys + r->keys_len, *k;
        uint32_t kl, count = 0;
        while (ofl_mc_next_key(&pos, end, &k, &kl)) {
            if (kl == 0 || kl > OFL_MC_KEY_MAX) abort();
            count++;
        }
        if (count != r->nkeys) abort();
    }
}

/* Parse `len` bytes as a stream; fill `out` with what came out. Runs each request
 * against `kv` when it is not NULL. Returns the number of outcomes. */
static size_t run_stream(const uint8_t *data, size_t len, enum ofl_mc_proto proto,
                         const struct ofl_mc_limits *lim, struct ofl_kv *kv, int trusted,
                         struct outcome *out)
{
    uint8_t *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    struct ofl_mc_out reply = {.max = 1 << 16};
    size_t off = 0, n = 0;
    while (off < len && n < MAX_REQS) {
        struct ofl_mc_req r;
        ssize_t rc = ofl_mc_parse(buf + off, len - off, proto, lim, &r);
        proto = (enum ofl_mc_proto)r.proto;
        out[n] = (struct outcome){rc, r.cmd, r.opcode, r.fatal, r.len, r.key_len, r.value_len,
                                  r.nkeys};
        n++;
        if (rc == 0) {
            if (r.need == 0) abort();
            break;
        }
        if (rc > 0) {
            if ((size_t)rc > len - off || r.len != (size_t)rc) abort();
            check_views(buf + off, (size_t)rc, &r);
            if (kv) {
                int e = trusted ? ofl_kv_exec_trusted(kv, &r, &reply)
                                : ofl_kv_exec(kv, &r, &reply);
                if (e != 0 && e != 1 && e != -ENOBUFS) abort();
            }
            off += (size_t)rc;
        } else {
            if (!is_error(rc) || r.len == 0) abort();
            if (kv) {
                int e = ofl_kv_exec_error(&r, (int)rc, &reply);
                if (e != 0 && e != 1 && e != -ENOBUFS) abort();
            }
            if (r.fatal || r.len >= len - off) break;
            off += r.len;
        }
        reply.len = 0;
    }
    ofl_mc_out_free(&reply);
    free(buf);
    return n;
}

/* The same stream delivered as [0, cut) then the rest: the receiver parses what it
 * holds, and reparses from the start of an incomplete request once more arrives. */
static size_t run_split(const uint8_t *data, size_t len, size_t cut, enum ofl_mc_proto proto,
                        const struct ofl_mc_limits *lim, struct outcome *out)
{
    size_t start = 0, have = cut, n = 0;
    while (start < len && n < MAX_REQS) {
        uint8_t *piece = malloc(have - start ? have - start : 1);
        memcpy(piece, data + start, have - start);
        struct ofl_mc_req r;
        ssize_t rc = ofl_mc_parse(piece, have - start, proto, lim, &r);
        free(piece);
        if (rc == 0 && have < len) {   /* wait for the rest */
            have = len;
            continue;
        }
        if (have - start > 0) proto = (enum ofl_mc_proto)r.proto;
        out[n++] = (struct outcome){rc, r.cmd, r.opcode, r.fatal, r.len, r.key_len,
                                    r.value_len, r.nkeys};
        if (rc == 0) break;
        if (rc > 0) {
            start += (size_t)rc;
        } else {
            if (r.fatal || r.len >= len - start) break;
            start += r.len;
        }
        if (start > have) have = len;   /* a skipped span reached into the second piece */
    }
    return n;
}

static int same(const struct outcome *a, const struct outcome *b)
{
    /* A fatal error's span is "whatever is there": it differs between the pieces. */
    return a->rc == b->rc && a->cmd == b->cmd && a->opcode == b->opcode &&
           a->fatal == b->fatal && a->key_len == b->key_len && a->value_len == b->value_len &&
           a->nkeys == b->nkeys && (a->rc == 0 || a->fatal || a->len == b->len);
}

static void udp(const uint8_t *data, size_t len, const struct ofl_mc_limits *lim,
                struct ofl_kv *kv, int trusted, struct outcome *out)
{
    struct ofl_mc_udp_hdr h;
    int rc = ofl_mc_udp_parse(data, len, &h);
    if (rc != OFL_MC_UDP_HDR_LEN && rc != OFL_MC_ETRUNC && rc != OFL_MC_EUDP) abort();
    if (rc == OFL_MC_UDP_HDR_LEN)
        run_stream(data + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN, OFL_MC_ANY, lim, kv,
                   trusted, out);
}

static void responses(const uint8_t *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        struct ofl_mc_res res;
        size_t need = 0;
        ssize_t rc = ofl_mc_parse_response(data + off, len - off, &res, &need);
        if (rc == 0) {
            if (need == 0) abort();
            return;
        }
        if (rc < 0) {
            if (rc != OFL_MC_EMAGIC && rc != OFL_MC_EBADLEN) abort();
            return;
        }
        if ((size_t)rc > len - off) abort();
        if (res.extras_len + res.key_len + res.value_len + OFL_MC_HDR_LEN != (size_t)rc) abort();
        off += (size_t)rc;
    }
}

/* The injection check (bit 5): see the file comment. */
static void injection(const uint8_t *args, size_t n, uint8_t which)
{
    static const char *const cmds[] = {"set", "add", "replace", "append", "prepend", "cas", "ms"};
    const char *cmd = cmds[which % 7];
    int meta = which % 7 == 6;
    /* The fuzzed arguments as tokens (no newline: the line must end where we say). */
    char *line = malloc(n * 2 + 64), *out = line;
    out += sprintf(out, "%s", cmd);
    unsigned tok = 0;
    size_t i = 0;
    while (i < n || tok < (meta ? 1u : 3u)) {
        char t[64];
        size_t k = 0;
        while (i < n && args[i] == ' ') i++;
        while (i < n && args[i] != ' ' && k < sizeof t - 1) {
            if (args[i] != '\n') t[k++] = (char)args[i];
            i++;
        }
        if (k == 0 && i >= n) t[k++] = 'x';   /* fewer tokens than the length's place */
        if (k == 0) continue;
        *out++ = ' ';
        memcpy(out, t, k);
        out += k;
        tok++;
        if (tok == (meta ? 1u : 3u)) out += sprintf(out, " 13");
    }
    const char tail[] = "\r\ndelete victim\r\nget victim\r\n";
    size_t len = (size_t)(out - line);
    memcpy(out, tail, sizeof tail - 1);
    len += sizeof tail - 1;
    uint8_t *buf = malloc(len);
    memcpy(buf, line, len);
    free(line);
    size_t off = 0;
    int got_get = 0;
    enum ofl_mc_proto proto = OFL_MC_TEXT;
    while (off < len && !got_get) {
        struct ofl_mc_req r;
        ssize_t rc = ofl_mc_parse(buf + off, len - off, proto, NULL, &r);
        if (rc == 0 || (rc < 0 && r.fatal)) break;   /* the line was too long */
        if (rc > 0 && r.cmd == OFL_MC_CMD_DELETE) abort();   /* the block ran */
        if (rc > 0 && r.cmd == OFL_MC_CMD_GET) got_get = 1;
        off += rc > 0 ? (size_t)rc : r.len;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 200000) return 0;
    uint8_t mode = data[0] & 3;
    struct ofl_mc_limits lim = ofl_mc_default_limits();
    if (data[0] & 4) lim.value_max = 64;          /* small limits reach E2BIG / ELINE */
    if (data[0] & 8) lim.line_max = 48;
    int trusted = (data[0] & 16) != 0;
    size_t len = size - 2;
    const uint8_t *p = data + 2;
    if (data[0] & 32) {
        if (len <= 4096) injection(p, len, data[1]);
        return 0;
    }
    size_t cut = len ? data[1] % (len + 1) : 0;

    struct ofl_kv *kv = NULL;
    struct ofl_kv_config cfg = {.capacity = 64, .mem_bytes = 0, .value_max = lim.value_max,
                                .stripes = 2};
    if (ofl_kv_create(&kv, &cfg)) abort();
    struct outcome *whole = malloc(MAX_REQS * sizeof *whole);
    struct outcome *split = malloc(MAX_REQS * sizeof *split);
    if (mode == 2) {
        udp(p, len, &lim, kv, trusted, whole);
    } else {
        enum ofl_mc_proto proto = mode == 0 ? OFL_MC_BINARY : mode == 1 ? OFL_MC_TEXT
                                                                        : OFL_MC_ANY;
        size_t nw = run_stream(p, len, proto, &lim, kv, trusted, whole);
        size_t ns = run_split(p, len, cut, proto, &lim, split);
        if (nw != ns) abort();
        for (size_t i = 0; i < nw; i++)
            if (!same(&whole[i], &split[i])) abort();
    }
    responses(p, len);
    free(whole);
    free(split);
    ofl_kv_destroy(kv);
    return 0;
}
