/* memcached protocol: zero-copy request parser and response writers. */
#include "offlow/mcproto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "offlow/err.h"

/* Most tokens a text command other than get/gets can have (cas: 7). */
#define TEXT_TOKENS_MAX 8

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) << 32 | rd32(p + 4);
}

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)(v >> 32));
    wr32(p + 4, (uint32_t)v);
}

struct ofl_mc_limits ofl_mc_default_limits(void)
{
    return (struct ofl_mc_limits){OFL_MC_VALUE_MAX_DEFAULT, OFL_MC_LINE_MAX_DEFAULT};
}

static ssize_t fail(struct ofl_mc_req *req, int err, size_t span, int fatal)
{
    req->len = span;
    req->fatal = (uint8_t)fatal;
    return err;
}

/* ---- binary requests ------------------------------------------------------------ */

/* What an opcode's body may hold. */
enum shape {
    SHAPE_UNKNOWN,
    SHAPE_KEY,        /* key only: get family, delete */
    SHAPE_STORE,      /* 8 bytes of extras (flags, expiry), key, any value */
    SHAPE_EMPTY,      /* nothing: noop, version, quit */
};

static enum shape classify(uint8_t op, struct ofl_mc_req *req)
{
    switch (op) {
    case OFL_MC_OP_GETKQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_GETK: req->want_key = 1; req->cmd = OFL_MC_CMD_GET; return SHAPE_KEY;
    case OFL_MC_OP_GETQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_GET: req->cmd = OFL_MC_CMD_GET; return SHAPE_KEY;
    case OFL_MC_OP_DELETEQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_DELETE: req->cmd = OFL_MC_CMD_DELETE; return SHAPE_KEY;
    case OFL_MC_OP_SETQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_SET: req->cmd = OFL_MC_CMD_SET; return SHAPE_STORE;
    case OFL_MC_OP_ADDQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_ADD: req->cmd = OFL_MC_CMD_ADD; return SHAPE_STORE;
    case OFL_MC_OP_REPLACEQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_REPLACE: req->cmd = OFL_MC_CMD_REPLACE; return SHAPE_STORE;
    case OFL_MC_OP_QUITQ: req->quiet = 1; /* fall through */
    case OFL_MC_OP_QUIT: req->cmd = OFL_MC_CMD_QUIT; return SHAPE_EMPTY;
    case OFL_MC_OP_NOOP: req->cmd = OFL_MC_CMD_NOOP; return SHAPE_EMPTY;
    case OFL_MC_OP_VERSION: req->cmd = OFL_MC_CMD_VERSION; return SHAPE_EMPTY;
    default: return SHAPE_UNKNOWN;
    }
}

static ssize_t parse_binary(const uint8_t *buf, size_t len, const struct ofl_mc_limits *lim,
                            struct ofl_mc_req *req)
{
    req->proto = OFL_MC_BINARY;
    if (buf[0] != OFL_MC_REQ_MAGIC) return fail(req, OFL_MC_EMAGIC, len, 1);
    if (len < OFL_MC_HDR_LEN) {
        req->need = OFL_MC_HDR_LEN - len;
        return 0;
    }
    uint8_t op = buf[1];
    uint32_t key_len = rd16(buf + 2), ext_len = buf[4], body = rd32(buf + 8);
    req->opcode = op;
    req->opaque = rd32(buf + 12);
    req->cas = rd64(buf + 16);
    size_t span = OFL_MC_HDR_LEN + (size_t)body;
    enum shape shape = classify(op, req);
    if (shape == SHAPE_UNKNOWN) {
        req->quiet = 0;
        return fail(req, OFL_MC_EUNKNOWN, span, 0);
    }
    if (ext_len + key_len > body) return fail(req, OFL_MC_EBADLEN, span, 1);
    if (key_len > OFL_MC_KEY_MAX) return fail(req, OFL_MC_EKEY, span, 1);
    uint32_t value_len = body - ext_len - key_len;
    int ok;
    switch (shape) {
    case SHAPE_KEY: ok = ext_len == 0 && key_len > 0 && value_len == 0; break;
    case SHAPE_STORE: ok = ext_len == 8 && key_len > 0; break;
    default: ok = ext_len == 0 && key_len == 0 && value_len == 0; break;
    }
    if (!ok) return fail(req, OFL_MC_EINVAL, span, 1);
    if (shape == SHAPE_STORE && value_len > lim->value_max)
        return fail(req, OFL_MC_E2BIG, span, 0);
    if (len < span) {
        req->need = span - len;
        return 0;
    }
    const uint8_t *p = buf + OFL_MC_HDR_LEN;
    req->extras = p;
    req->extras_len = ext_len;
    req->key = p + ext_len;
    req->key_len = key_len;
    req->nkeys = key_len ? 1 : 0;
    req->value = p + ext_len + key_len;
    req->value_len = value_len;
    if (shape == SHAPE_STORE) {
        req->flags = rd32(p);
        req->exptime = (int32_t)rd32(p + 4);
    }
    req->len = span;
    return (ssize_t)span;
}

/* ---- text requests -------------------------------------------------------------- */

struct tok {
    const uint8_t *p;
    uint32_t n;
};

static int tok_is(const struct tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->n == n && memcmp(t->p, s, n) == 0;
}

/* Split [p, end) at spaces (runs of spaces count as one) into at most `max` tokens;
 * the count is returned (max + 1 if there are more). */
static unsigned tokenize(const uint8_t *p, const uint8_t *end, struct tok *t, unsigned max)
{
    unsigned n = 0;
    while (p < end) {
        while (p < end && *p == ' ') p++;
        if (p == end) break;
        const uint8_t *s = p;
        while (p < end && *p != ' ') p++;
        if (n == max) return max + 1;
        t[n].p = s;
        t[n].n = (uint32_t)(p - s);
        n++;
    }
    return n;
}

/* An unsigned decimal (an optional '+', then digits) no larger than `max`. */
static int parse_uint(const struct tok *t, uint64_t max, uint64_t *out)
{
    uint32_t i = 0;
    if (t->n && t->p[0] == '+') i = 1;
    if (i == t->n) return -1;
    uint64_t v = 0;
    for (; i < t->n; i++) {
        uint8_t c = t->p[i];
        if (c < '0' || c > '9') return -1;
        if (v > (max - (uint64_t)(c - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(c - '0');
    }
    *out = v;
    return 0;
}

/* A signed decimal; values beyond int32 are clamped (memcached accepts them). */
static int parse_exptime(const struct tok *t, int32_t *out)
{
    struct tok u = *t;
    int neg = 0;
    if (u.n && u.p[0] == '-') {
        neg = 1;
        u.p++;
        u.n--;
        if (u.n && u.p[0] == '+') return -1;
    }
    uint64_t v;
    if (parse_uint(&u, UINT64_MAX, &v)) return -1;
    if (neg) *out = v >= (uint64_t)INT32_MAX + 1 ? INT32_MIN : -(int32_t)v;
    else *out = v > INT32_MAX ? INT32_MAX : (int32_t)v;
    return 0;
}

static ssize_t text_get(const struct tok *cmd, const uint8_t *end, struct ofl_mc_req *req,
                        size_t line_len)
{
    req->cmd = tok_is(cmd, "gets") ? OFL_MC_CMD_GETS : OFL_MC_CMD_GET;
    const uint8_t *pos = cmd->p + cmd->n, *key;
    uint32_t key_len, n = 0;
    while (ofl_mc_next_key(&pos, end, &key, &key_len)) {
        if (n == 0) {
            req->key = key;
            req->key_len = key_len;
            req->keys = key;
        }
        if (key_len > OFL_MC_KEY_MAX) return fail(req, OFL_MC_EKEY, line_len, 0);
        n++;
    }
    if (n == 0) return fail(req, OFL_MC_EUNKNOWN, line_len, 0);
    req->keys_len = (uint32_t)(end - req->keys);
    req->nkeys = n;
    req->len = line_len;
    return (ssize_t)line_len;
}

static ssize_t text_store(const uint8_t *buf, size_t len, const struct ofl_mc_limits *lim,
                          const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                          size_t line_len)
{
    int is_cas = tok_is(&t[0], "cas");
    unsigned base = is_cas ? 6 : 5;   /* command, key, flags, exptime, bytes[, cas] */
    req->cmd = is_cas ? OFL_MC_CMD_CAS
               : tok_is(&t[0], "set") ? OFL_MC_CMD_SET
               : tok_is(&t[0], "add") ? OFL_MC_CMD_ADD
                                       : OFL_MC_CMD_REPLACE;
    if (nt != base && nt != base + 1) return fail(req, OFL_MC_EUNKNOWN, line_len, 0);
    req->quiet = nt == base + 1 && tok_is(&t[base], "noreply");
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    if (t[1].n > OFL_MC_KEY_MAX) return fail(req, OFL_MC_EKEY, line_len, 0);
    uint64_t flags, bytes, cas = 0;
    int32_t exptime;
    if (parse_uint(&t[2], UINT32_MAX, &flags) || parse_exptime(&t[3], &exptime) ||
        parse_uint(&t[4], INT32_MAX - 2, &bytes) || (is_cas && parse_uint(&t[5], UINT64_MAX, &cas)))
        return fail(req, OFL_MC_EINVAL, line_len, 0);
    req->flags = (uint32_t)flags;
    req->exptime = exptime;
    req->cas = cas;
    size_t span = line_len + (size_t)bytes + 2;
    if (bytes > lim->value_max) return fail(req, OFL_MC_E2BIG, span, 0);
    if (len < span) {
        req->need = span - len;
        return 0;
    }
    const uint8_t *data = buf + line_len;
    if (data[bytes] != '\r' || data[bytes + 1] != '\n') return fail(req, OFL_MC_ECHUNK, span, 0);
    req->value = data;
    req->value_len = (uint32_t)bytes;
    req->len = span;
    return (ssize_t)span;
}

static ssize_t text_delete(const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                           size_t line_len)
{
    req->cmd = OFL_MC_CMD_DELETE;
    if (nt < 2 || nt > 4) return fail(req, OFL_MC_EUNKNOWN, line_len, 0);
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    if (t[1].n > OFL_MC_KEY_MAX) return fail(req, OFL_MC_EKEY, line_len, 0);
    /* "delete <key> [0] [noreply]": the 0 is a legacy hold time. */
    int zero = nt > 2 && tok_is(&t[2], "0");
    req->quiet = tok_is(&t[nt - 1], "noreply") && nt > 2;
    int ok = nt == 2 || (nt == 3 && (zero || req->quiet)) || (nt == 4 && zero && req->quiet);
    if (!ok) return fail(req, OFL_MC_EINVAL, line_len, 0);
    req->len = line_len;
    return (ssize_t)line_len;
}

static ssize_t parse_text(const uint8_t *buf, size_t len, const struct ofl_mc_limits *lim,
                          struct ofl_mc_req *req)
{
    req->proto = OFL_MC_TEXT;
    size_t scan = len < lim->line_max ? len : lim->line_max;
    const uint8_t *nl = memchr(buf, '\n', scan);
    if (!nl) {
        if (len >= lim->line_max) return fail(req, OFL_MC_ELINE, len, 1);
        req->need = 1;
        return 0;
    }
    size_t line_len = (size_t)(nl - buf) + 1;
    const uint8_t *end = nl;
    if (end > buf && end[-1] == '\r') end--;
    struct tok t[TEXT_TOKENS_MAX];
    unsigned nt = tokenize(buf, end, t, TEXT_TOKENS_MAX);
    if (nt == 0) return fail(req, OFL_MC_EUNKNOWN, line_len, 0);
    if (tok_is(&t[0], "get") || tok_is(&t[0], "gets")) return text_get(&t[0], end, req, line_len);
    if (tok_is(&t[0], "set") || tok_is(&t[0], "add") || tok_is(&t[0], "replace") ||
        tok_is(&t[0], "cas"))
        return text_store(buf, len, lim, t, nt, req, line_len);
    if (tok_is(&t[0], "delete")) return text_delete(t, nt, req, line_len);
    if (tok_is(&t[0], "version") || tok_is(&t[0], "quit")) {
        req->cmd = tok_is(&t[0], "quit") ? OFL_MC_CMD_QUIT : OFL_MC_CMD_VERSION;
        req->len = line_len;
        return (ssize_t)line_len;
    }
    return fail(req, OFL_MC_EUNKNOWN, line_len, 0);
}

ssize_t ofl_mc_parse(const uint8_t *buf, size_t len, enum ofl_mc_proto proto,
                     const struct ofl_mc_limits *lim, struct ofl_mc_req *req)
{
    struct ofl_mc_limits def = ofl_mc_default_limits();
    memset(req, 0, sizeof *req);
    if (!lim) lim = &def;
    if (len == 0) {
        req->proto = (uint8_t)proto;
        req->need = proto == OFL_MC_TEXT ? 1 : proto == OFL_MC_BINARY ? OFL_MC_HDR_LEN : 1;
        return 0;
    }
    if (proto == OFL_MC_ANY) proto = buf[0] == OFL_MC_REQ_MAGIC ? OFL_MC_BINARY : OFL_MC_TEXT;
    return proto == OFL_MC_BINARY ? parse_binary(buf, len, lim, req)
                                  : parse_text(buf, len, lim, req);
}

int ofl_mc_next_key(const uint8_t **pos, const uint8_t *end, const uint8_t **key,
                    uint32_t *key_len)
{
    const uint8_t *p = *pos;
    while (p < end && *p == ' ') p++;
    if (p == end) {
        *pos = p;
        return 0;
    }
    const uint8_t *s = p;
    while (p < end && *p != ' ') p++;
    *key = s;
    *key_len = (uint32_t)(p - s);
    *pos = p;
    return 1;
}

/* ---- binary responses (client side) --------------------------------------------- */

ssize_t ofl_mc_parse_response(const uint8_t *buf, size_t len, struct ofl_mc_res *res,
                              size_t *need)
{
    memset(res, 0, sizeof *res);
    if (len >= 1 && buf[0] != OFL_MC_RES_MAGIC) return OFL_MC_EMAGIC;
    if (len < OFL_MC_HDR_LEN) {
        if (need) *need = OFL_MC_HDR_LEN - len;
        return 0;
    }
    uint32_t key_len = rd16(buf + 2), ext_len = buf[4], body = rd32(buf + 8);
    if (ext_len + key_len > body) return OFL_MC_EBADLEN;
    size_t span = OFL_MC_HDR_LEN + (size_t)body;
    if (len < span) {
        if (need) *need = span - len;
        return 0;
    }
    res->opcode = buf[1];
    res->status = rd16(buf + 6);
    res->opaque = rd32(buf + 12);
    res->cas = rd64(buf + 16);
    res->extras = buf + OFL_MC_HDR_LEN;
    res->extras_len = ext_len;
    res->key = res->extras + ext_len;
    res->key_len = key_len;
    res->value = res->key + key_len;
    res->value_len = body - ext_len - key_len;
    res->len = span;
    return (ssize_t)span;
}

/* ---- UDP frame header ----------------------------------------------------------- */

int ofl_mc_udp_parse(const uint8_t *buf, size_t len, struct ofl_mc_udp_hdr *h)
{
    if (len < OFL_MC_UDP_HDR_LEN) return OFL_MC_ETRUNC;
    h->request_id = rd16(buf);
    h->seq = rd16(buf + 2);
    h->count = rd16(buf + 4);
    h->reserved = rd16(buf + 6);
    if (h->count != 1) return OFL_MC_EUDP;
    return OFL_MC_UDP_HDR_LEN;
}

void ofl_mc_udp_write(uint8_t *out, uint16_t request_id, uint16_t seq, uint16_t count)
{
    wr16(out, request_id);
    wr16(out + 2, seq);
    wr16(out + 4, count);
    wr16(out + 6, 0);
}

/* ---- binary writers ------------------------------------------------------------- */

static void put_header(uint8_t *out, uint8_t magic, uint8_t opcode, uint16_t status,
                       uint8_t ext_len, uint16_t key_len, uint32_t body, uint32_t opaque,
                       uint64_t cas)
{
    out[0] = magic;
    out[1] = opcode;
    wr16(out + 2, key_len);
    out[4] = ext_len;
    out[5] = 0;
    wr16(out + 6, status);
    wr32(out + 8, body);
    wr32(out + 12, opaque);
    wr64(out + 16, cas);
}

static ssize_t put_message(uint8_t *out, size_t cap, uint8_t magic, uint8_t opcode,
                           uint16_t status, uint32_t opaque, uint64_t cas, const void *extras,
                           uint8_t ext_len, const void *key, size_t key_len, const void *value,
                           size_t value_len)
{
    if (key_len > UINT16_MAX || value_len > UINT32_MAX - ext_len - key_len) return -EINVAL;
    size_t body = ext_len + key_len + value_len;
    if (cap < OFL_MC_HDR_LEN || cap - OFL_MC_HDR_LEN < body) return -ENOSPC;
    put_header(out, magic, opcode, status, ext_len, (uint16_t)key_len, (uint32_t)body, opaque,
               cas);
    uint8_t *p = out + OFL_MC_HDR_LEN;
    if (ext_len) memcpy(p, extras, ext_len);
    if (key_len) memcpy(p + ext_len, key, key_len);
    if (value_len) memcpy(p + ext_len + key_len, value, value_len);
    return (ssize_t)(OFL_MC_HDR_LEN + body);
}

ssize_t ofl_mc_write_request(uint8_t *out, size_t cap, uint8_t opcode, uint32_t opaque,
                             uint64_t cas, const void *extras, uint8_t extras_len,
                             const void *key, size_t key_len, const void *value,
                             size_t value_len)
{
    return put_message(out, cap, OFL_MC_REQ_MAGIC, opcode, 0, opaque, cas, extras, extras_len,
                       key, key_len, value, value_len);
}

void ofl_mc_write_res_header(uint8_t *out, uint8_t opcode, uint16_t status,
                             uint8_t extras_len, uint16_t key_len, uint32_t body_len,
                             uint32_t opaque, uint64_t cas)
{
    put_header(out, OFL_MC_RES_MAGIC, opcode, status, extras_len, key_len, body_len, opaque,
               cas);
}

ssize_t ofl_mc_write_response(uint8_t *out, size_t cap, uint8_t opcode, uint16_t status,
                              uint32_t opaque, uint64_t cas, const void *extras,
                              uint8_t extras_len, const void *key, size_t key_len,
                              const void *value, size_t value_len)
{
    return put_message(out, cap, OFL_MC_RES_MAGIC, opcode, status, opaque, cas, extras,
                       extras_len, key, key_len, value, value_len);
}

const char *ofl_mc_status_text(uint16_t status)
{
    switch (status) {
    case OFL_MC_ST_OK: return "";
    case OFL_MC_ST_NOT_FOUND: return "Not found";
    case OFL_MC_ST_EXISTS: return "Data exists for key.";
    case OFL_MC_ST_E2BIG: return "Too large.";
    case OFL_MC_ST_EINVAL: return "Invalid arguments";
    case OFL_MC_ST_NOT_STORED: return "Not stored.";
    case OFL_MC_ST_UNKNOWN_COMMAND: return "Unknown command";
    case OFL_MC_ST_ENOMEM: return "Out of memory";
    default: return "Unknown error";
    }
}

ssize_t ofl_mc_write_status(uint8_t *out, size_t cap, uint8_t opcode, uint32_t opaque,
                            uint16_t status)
{
    const char *text = ofl_mc_status_text(status);
    return ofl_mc_write_response(out, cap, opcode, status, opaque, 0, NULL, 0, NULL, 0, text,
                                 strlen(text));
}

/* ---- text writers --------------------------------------------------------------- */

ssize_t ofl_mc_write_text_value(uint8_t *out, size_t cap, const void *key, size_t key_len,
                                uint32_t flags, const void *value, size_t value_len,
                                int with_cas, uint64_t cas)
{
    /* "VALUE " key " " flags " " bytes [" " cas] "\r\n" data "\r\n" */
    char tail[64];
    int n = with_cas ? snprintf(tail, sizeof tail, " %" PRIu32 " %zu %" PRIu64 "\r\n", flags,
                                value_len, cas)
                     : snprintf(tail, sizeof tail, " %" PRIu32 " %zu\r\n", flags, value_len);
    if (n < 0 || (size_t)n >= sizeof tail) return -EINVAL;
    size_t need = 6 + key_len + (size_t)n + value_len + 2;
    if (need < value_len || cap < need) return -ENOSPC;
    uint8_t *p = out;
    memcpy(p, "VALUE ", 6);
    p += 6;
    memcpy(p, key, key_len);
    p += key_len;
    memcpy(p, tail, (size_t)n);
    p += n;
    if (value_len) memcpy(p, value, value_len);
    p += value_len;
    memcpy(p, "\r\n", 2);
    return (ssize_t)need;
}

ssize_t ofl_mc_write_text_line(uint8_t *out, size_t cap, const char *line)
{
    size_t n = strlen(line);
    if (cap < n + 2) return -ENOSPC;
    memcpy(out, line, n);
    memcpy(out + n, "\r\n", 2);
    return (ssize_t)(n + 2);
}

static ssize_t text_error(uint8_t *out, size_t cap, const struct ofl_mc_req *req, int err)
{
    if (req->quiet) return 0;   /* memcached: noreply silences errors too */
    switch (err) {
    case OFL_MC_EUNKNOWN: return ofl_mc_write_text_line(out, cap, "ERROR");
    case OFL_MC_EKEY: return ofl_mc_write_text_line(out, cap, "CLIENT_ERROR bad command line format");
    case OFL_MC_EINVAL:
        if (req->cmd == OFL_MC_CMD_DELETE)
            return ofl_mc_write_text_line(
                out, cap, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
        return ofl_mc_write_text_line(out, cap, "CLIENT_ERROR bad command line format");
    case OFL_MC_E2BIG: return ofl_mc_write_text_line(out, cap, "SERVER_ERROR object too large for cache");
    case OFL_MC_ECHUNK: return ofl_mc_write_text_line(out, cap, "CLIENT_ERROR bad data chunk");
    case OFL_MC_ELINE: return ofl_mc_write_text_line(out, cap, "CLIENT_ERROR line too long");
    default: return ofl_mc_write_text_line(out, cap, "ERROR");
    }
}

ssize_t ofl_mc_write_error(uint8_t *out, size_t cap, const struct ofl_mc_req *req, int err)
{
    if (req->proto == OFL_MC_TEXT) return text_error(out, cap, req, err);
    uint16_t status;
    switch (err) {
    case OFL_MC_EMAGIC: return 0;
    case OFL_MC_EUNKNOWN: status = OFL_MC_ST_UNKNOWN_COMMAND; break;
    case OFL_MC_EBADLEN: status = OFL_MC_ST_UNKNOWN_COMMAND; break;  /* as memcached */
    case OFL_MC_E2BIG: status = OFL_MC_ST_E2BIG; break;
    default: status = OFL_MC_ST_EINVAL; break;
    }
    return ofl_mc_write_status(out, cap, req->opcode, req->opaque, status);
}

