/* memcached protocol: zero-copy request parser and response writers. */
#include "offlow/mcproto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/pkt.h"

/* Big-endian 64-bit load and store (pkt.h has the 16- and 32-bit ones). */
static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)ofl_get_be32(p) << 32 | ofl_get_be32(p + 4);
}

static void wr64(uint8_t *p, uint64_t v)
{
    ofl_put_be32(p, (uint32_t)(v >> 32));
    ofl_put_be32(p + 4, (uint32_t)v);
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
    SHAPE_CONCAT,     /* key and any value, no extras: append, prepend */
    SHAPE_ARITH,      /* 20 bytes of extras (delta, initial, expiry), key */
    SHAPE_TOUCH,      /* 4 bytes of extras (expiry), key: touch, gat */
    SHAPE_FLUSH,      /* nothing, or 4 bytes of extras (delay) */
    SHAPE_STAT,       /* an optional key (the group) */
    SHAPE_EMPTY,      /* nothing: noop, version, quit */
};

/* Set the request's command and quiet / want_key for opcode `op`; its body shape. */
static enum shape classify(uint8_t op, struct ofl_mc_req *req)
{
    static const struct {
        uint8_t op, cmd, shape, quiet, want_key;
    } ops[] = {
        {OFL_MC_OP_GET, OFL_MC_CMD_GET, SHAPE_KEY, 0, 0},
        {OFL_MC_OP_GETQ, OFL_MC_CMD_GET, SHAPE_KEY, 1, 0},
        {OFL_MC_OP_GETK, OFL_MC_CMD_GET, SHAPE_KEY, 0, 1},
        {OFL_MC_OP_GETKQ, OFL_MC_CMD_GET, SHAPE_KEY, 1, 1},
        {OFL_MC_OP_DELETE, OFL_MC_CMD_DELETE, SHAPE_KEY, 0, 0},
        {OFL_MC_OP_DELETEQ, OFL_MC_CMD_DELETE, SHAPE_KEY, 1, 0},
        {OFL_MC_OP_SET, OFL_MC_CMD_SET, SHAPE_STORE, 0, 0},
        {OFL_MC_OP_SETQ, OFL_MC_CMD_SET, SHAPE_STORE, 1, 0},
        {OFL_MC_OP_ADD, OFL_MC_CMD_ADD, SHAPE_STORE, 0, 0},
        {OFL_MC_OP_ADDQ, OFL_MC_CMD_ADD, SHAPE_STORE, 1, 0},
        {OFL_MC_OP_REPLACE, OFL_MC_CMD_REPLACE, SHAPE_STORE, 0, 0},
        {OFL_MC_OP_REPLACEQ, OFL_MC_CMD_REPLACE, SHAPE_STORE, 1, 0},
        {OFL_MC_OP_APPEND, OFL_MC_CMD_APPEND, SHAPE_CONCAT, 0, 0},
        {OFL_MC_OP_APPENDQ, OFL_MC_CMD_APPEND, SHAPE_CONCAT, 1, 0},
        {OFL_MC_OP_PREPEND, OFL_MC_CMD_PREPEND, SHAPE_CONCAT, 0, 0},
        {OFL_MC_OP_PREPENDQ, OFL_MC_CMD_PREPEND, SHAPE_CONCAT, 1, 0},
        {OFL_MC_OP_INCREMENT, OFL_MC_CMD_INCR, SHAPE_ARITH, 0, 0},
        {OFL_MC_OP_INCREMENTQ, OFL_MC_CMD_INCR, SHAPE_ARITH, 1, 0},
        {OFL_MC_OP_DECREMENT, OFL_MC_CMD_DECR, SHAPE_ARITH, 0, 0},
        {OFL_MC_OP_DECREMENTQ, OFL_MC_CMD_DECR, SHAPE_ARITH, 1, 0},
        {OFL_MC_OP_TOUCH, OFL_MC_CMD_TOUCH, SHAPE_TOUCH, 0, 0},
        {OFL_MC_OP_GAT, OFL_MC_CMD_GAT, SHAPE_TOUCH, 0, 0},
        {OFL_MC_OP_GATQ, OFL_MC_CMD_GAT, SHAPE_TOUCH, 1, 0},
        {OFL_MC_OP_GATK, OFL_MC_CMD_GAT, SHAPE_TOUCH, 0, 1},
        {OFL_MC_OP_GATKQ, OFL_MC_CMD_GAT, SHAPE_TOUCH, 1, 1},
        {OFL_MC_OP_FLUSH, OFL_MC_CMD_FLUSH, SHAPE_FLUSH, 0, 0},
        {OFL_MC_OP_FLUSHQ, OFL_MC_CMD_FLUSH, SHAPE_FLUSH, 1, 0},
        {OFL_MC_OP_STAT, OFL_MC_CMD_STATS, SHAPE_STAT, 0, 0},
        {OFL_MC_OP_NOOP, OFL_MC_CMD_NOOP, SHAPE_EMPTY, 0, 0},
        {OFL_MC_OP_VERSION, OFL_MC_CMD_VERSION, SHAPE_EMPTY, 0, 0},
        {OFL_MC_OP_QUIT, OFL_MC_CMD_QUIT, SHAPE_EMPTY, 0, 0},
        {OFL_MC_OP_QUITQ, OFL_MC_CMD_QUIT, SHAPE_EMPTY, 1, 0},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (ops[i].op != op) continue;
        req->cmd = ops[i].cmd;
        req->quiet = ops[i].quiet;
        req->want_key = ops[i].want_key;
        return (enum shape)ops[i].shape;
    }
    return SHAPE_UNKNOWN;
}

/* Does a body of extras / key / value lengths fit the shape (memcached's checks)? */
static int shape_ok(enum shape shape, uint32_t ext, uint32_t key, uint32_t value)
{
    switch (shape) {
    case SHAPE_KEY: return ext == 0 && key > 0 && value == 0;
    case SHAPE_STORE: return ext == 8 && key > 0;
    case SHAPE_CONCAT: return ext == 0 && key > 0;
    case SHAPE_ARITH: return ext == 20 && key > 0 && value == 0;
    case SHAPE_TOUCH: return ext == 4 && key > 0 && value == 0;
    case SHAPE_FLUSH: return (ext == 0 || ext == 4) && key == 0 && value == 0;
    case SHAPE_STAT: return ext == 0 && value == 0;
    default: return ext == 0 && key == 0 && value == 0;
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
    uint32_t key_len = ofl_get_be16(buf + 2), ext_len = buf[4], body = ofl_get_be32(buf + 8);
    req->opcode = op;
    req->opaque = ofl_get_be32(buf + 12);
    req->cas = rd64(buf + 16);
    size_t span = OFL_MC_HDR_LEN + (size_t)body;
    /* memcached's order: lengths, then the key, then the opcode */
    if (ext_len + key_len > body) return fail(req, OFL_MC_EBADLEN, span, 1);
    if (key_len > OFL_MC_KEY_MAX) return fail(req, OFL_MC_EKEY, span, 1);
    enum shape shape = classify(op, req);
    if (shape == SHAPE_UNKNOWN) return fail(req, OFL_MC_EUNKNOWN, span, 0);
    uint32_t value_len = body - ext_len - key_len;
    if (!shape_ok(shape, ext_len, key_len, value_len)) return fail(req, OFL_MC_EINVAL, span, 1);
    if ((shape == SHAPE_STORE || shape == SHAPE_CONCAT) && value_len > lim->value_max)
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
    switch (shape) {
    case SHAPE_STORE:
        req->flags = ofl_get_be32(p);
        req->exptime = (int32_t)ofl_get_be32(p + 4);
        break;
    case SHAPE_ARITH:
        req->delta = rd64(p);
        req->initial = rd64(p + 8);
        req->exptime = (int32_t)ofl_get_be32(p + 16);
        break;
    case SHAPE_TOUCH:
        req->exptime = (int32_t)ofl_get_be32(p);
        break;
    case SHAPE_FLUSH:
        req->exptime = ext_len ? (int32_t)ofl_get_be32(p) : 0;
        break;
    case SHAPE_STAT:
        req->args = req->key;
        req->args_len = key_len;
        req->nkeys = 0;
        break;
    default:
        break;
    }
    req->len = span;
    return (ssize_t)span;
}

/* ---- text requests -------------------------------------------------------------- */

/* Most tokens looked at in a command line (memcached's MAX_TOKENS less its end
 * marker); get and gat walk their keys without this limit. */
#define TEXT_TOKENS_MAX 23
/* memcached's MFLAG_MAX_OPT_LENGTH, counted as real tokens: more is an error. */
#define META_TOKENS_MAX 19

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
static int parse_uint(const uint8_t *p, uint32_t n, uint64_t max, uint64_t *out)
{
    uint32_t i = 0;
    if (n && p[0] == '+') i = 1;
    if (i == n) return -1;
    uint64_t v = 0;
    for (; i < n; i++) {
        uint8_t c = p[i];
        if (c < '0' || c > '9') return -1;
        if (v > (max - (uint64_t)(c - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(c - '0');
    }
    *out = v;
    return 0;
}

static int tok_uint(const struct tok *t, uint64_t max, uint64_t *out)
{
    return parse_uint(t->p, t->n, max, out);
}

/* A signed decimal; values beyond int32 are clamped (memcached accepts them). */
static int parse_int(const uint8_t *p, uint32_t n, int32_t *out)
{
    int neg = 0;
    if (n && p[0] == '-') {
        neg = 1;
        p++;
        n--;
        if (n && p[0] == '+') return -1;
    }
    uint64_t v;
    if (parse_uint(p, n, UINT64_MAX, &v)) return -1;
    if (neg) *out = v >= (uint64_t)INT32_MAX + 1 ? INT32_MIN : -(int32_t)v;
    else *out = v > INT32_MAX ? INT32_MAX : (int32_t)v;
    return 0;
}

static int tok_int(const struct tok *t, int32_t *out)
{
    return parse_int(t->p, t->n, out);
}

/* A text error: its reply line (NULL: the error code's own) and span. */
static ssize_t text_fail(struct ofl_mc_req *req, int err, const char *msg, size_t span)
{
    req->errmsg = msg;
    return fail(req, err, span, 0);
}

static const char BAD_FORMAT[] = "CLIENT_ERROR bad command line format";

/* get, gets, gat, gats: `first` is the index of the first key token (gat: 2). */
static ssize_t text_get(const struct tok *t, unsigned nt, const uint8_t *end,
                        struct ofl_mc_req *req, size_t line_len)
{
    int touch = tok_is(&t[0], "gat") || tok_is(&t[0], "gats");
    req->cmd = tok_is(&t[0], "gets")   ? OFL_MC_CMD_GETS
               : tok_is(&t[0], "gat")  ? OFL_MC_CMD_GAT
               : tok_is(&t[0], "gats") ? OFL_MC_CMD_GATS
                                       : OFL_MC_CMD_GET;
    if (nt < 2) return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    if (touch && tok_int(&t[1], &req->exptime))
        return text_fail(req, OFL_MC_EINVAL, "CLIENT_ERROR invalid exptime argument", line_len);
    const uint8_t *pos = touch ? t[1].p + t[1].n : t[0].p + t[0].n, *key;
    uint32_t key_len, n = 0;
    req->keys = pos;
    while (ofl_mc_next_key(&pos, end, &key, &key_len)) {
        if (n == 0) {
            req->key = key;
            req->key_len = key_len;
            req->keys = key;
        }
        if (key_len > OFL_MC_KEY_MAX) return text_fail(req, OFL_MC_EKEY, NULL, line_len);
        n++;
    }
    req->keys_len = (uint32_t)(end - req->keys);
    req->nkeys = n;   /* gat of no key: memcached answers END */
    req->len = line_len;
    return (ssize_t)line_len;
}

/* A storage command's data block: `bytes` long at buf + line_len, then "\r\n". */
static ssize_t data_block(const uint8_t *buf, size_t len, uint64_t bytes,
                          const struct ofl_mc_limits *lim, struct ofl_mc_req *req,
                          size_t line_len)
{
    size_t span = line_len + (size_t)bytes + 2;
    if (bytes > lim->value_max) return text_fail(req, OFL_MC_E2BIG, NULL, span);
    if (len < span) {
        req->need = span - len;
        return 0;
    }
    const uint8_t *data = buf + line_len;
    if (data[bytes] != '\r' || data[bytes + 1] != '\n')
        return text_fail(req, OFL_MC_ECHUNK, NULL, span);
    req->value = data;
    req->value_len = (uint32_t)bytes;
    req->len = span;
    return (ssize_t)span;
}

/* The length a storage line announces in token `t` (0 .. INT32_MAX - 2, as memcached
 * reads it), or -1 when it cannot be read. */
static int64_t data_len(const struct tok *t)
{
    uint64_t v;
    return tok_uint(t, INT32_MAX - 2, &v) ? -1 : (int64_t)v;
}

static ssize_t text_store(const uint8_t *buf, size_t len, const struct ofl_mc_limits *lim,
                          const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                          size_t line_len)
{
    static const struct {
        const char *name;
        uint8_t cmd;
    } cmds[] = {{"set", OFL_MC_CMD_SET},         {"add", OFL_MC_CMD_ADD},
                {"replace", OFL_MC_CMD_REPLACE}, {"append", OFL_MC_CMD_APPEND},
                {"prepend", OFL_MC_CMD_PREPEND}, {"cas", OFL_MC_CMD_CAS}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (tok_is(&t[0], cmds[i].name)) req->cmd = cmds[i].cmd;
    int is_cas = req->cmd == OFL_MC_CMD_CAS;
    unsigned base = is_cas ? 6 : 5;   /* command, key, flags, exptime, bytes[, cas] */
    /* Whatever else is wrong, a readable length means a data block follows: skip it. */
    int64_t bytes = nt >= 5 ? data_len(&t[4]) : -1;
    size_t span = bytes >= 0 ? line_len + (size_t)bytes + 2 : line_len;
    if (nt != base && nt != base + 1) return text_fail(req, OFL_MC_EUNKNOWN, NULL, span);
    req->quiet = tok_is(&t[nt - 1], "noreply");
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    if (t[1].n > OFL_MC_KEY_MAX) return text_fail(req, OFL_MC_EKEY, NULL, span);
    uint64_t flags, cas = 0;
    int32_t exptime;
    if (tok_uint(&t[2], UINT32_MAX, &flags) || tok_int(&t[3], &exptime) || bytes < 0 ||
        (is_cas && tok_uint(&t[5], UINT64_MAX, &cas)))
        return text_fail(req, OFL_MC_EINVAL, NULL, span);
    req->flags = (uint32_t)flags;
    req->exptime = exptime;
    req->cas = cas;
    return data_block(buf, len, (uint64_t)bytes, lim, req, line_len);
}

static ssize_t text_delete(const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                           size_t line_len)
{
    req->cmd = OFL_MC_CMD_DELETE;
    if (nt < 2 || nt > 4) return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    /* "delete <key> [0] [noreply]": the 0 is a legacy hold time; memcached checks
     * the arguments before the key */
    if (nt > 2) {
        int zero = tok_is(&t[2], "0");
        req->quiet = tok_is(&t[nt - 1], "noreply");
        if (!((nt == 3 && (zero || req->quiet)) || (nt == 4 && zero && req->quiet)))
            return text_fail(req, OFL_MC_EINVAL,
                             "CLIENT_ERROR bad command line format.  "
                             "Usage: delete <key> [noreply]", line_len);
    }
    if (t[1].n > OFL_MC_KEY_MAX) return text_fail(req, OFL_MC_EKEY, NULL, line_len);
    req->len = line_len;
    return (ssize_t)line_len;
}

/* incr, decr, touch: "<cmd> <key> <number> [noreply]". */
static ssize_t text_keyed(const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                          size_t line_len)
{
    int touch = tok_is(&t[0], "touch");
    req->cmd = touch ? OFL_MC_CMD_TOUCH : tok_is(&t[0], "incr") ? OFL_MC_CMD_INCR
                                                                : OFL_MC_CMD_DECR;
    if (nt != 3 && nt != 4) return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    req->quiet = tok_is(&t[nt - 1], "noreply");
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    if (t[1].n > OFL_MC_KEY_MAX) return text_fail(req, OFL_MC_EKEY, NULL, line_len);
    if (touch ? tok_int(&t[2], &req->exptime) : tok_uint(&t[2], UINT64_MAX, &req->delta))
        return text_fail(req, OFL_MC_EINVAL,
                         touch ? "CLIENT_ERROR invalid exptime argument"
                               : "CLIENT_ERROR invalid numeric delta argument", line_len);
    req->len = line_len;
    return (ssize_t)line_len;
}

/* flush_all [delay] [noreply], verbosity <level> [noreply]. */
static ssize_t text_admin(const struct tok *t, unsigned nt, struct ofl_mc_req *req,
                          size_t line_len)
{
    int flush = tok_is(&t[0], "flush_all");
    req->cmd = flush ? OFL_MC_CMD_FLUSH : OFL_MC_CMD_VERBOSITY;
    if (flush ? nt > 3 : nt != 2 && nt != 3)
        return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    req->quiet = nt > 1 && tok_is(&t[nt - 1], "noreply");
    uint64_t level;
    if (flush && nt != (req->quiet ? 2u : 1u) && tok_int(&t[1], &req->exptime))
        return text_fail(req, OFL_MC_EINVAL, "CLIENT_ERROR invalid exptime argument",
                         line_len);
    if (!flush && tok_uint(&t[1], UINT32_MAX, &level))
        return text_fail(req, OFL_MC_EINVAL, NULL, line_len);
    req->len = line_len;
    return (ssize_t)line_len;
}

/* ---- meta commands ---- */

/* What a meta command's flags said, besides the request fields they set. */
struct meta_flags {
    const char *err;   /* the last error seen (NULL: none) */
    int stop;          /* a duplicate or unknown flag: memcached stops at once */
};

/* memcached's flag pre-parse (1.6.18): each token's first letter is a flag, given
 * once; N, T, R take a signed number, F an unsigned one, C, D, J a 64-bit one, M one
 * letter; b decodes the key. Errors other than a duplicate or unknown flag are
 * remembered and the walk goes on (the last one is reported). */
static void meta_flags(const struct tok *t, unsigned from, unsigned nt, struct ofl_mc_req *req,
                       struct meta_flags *mf)
{
    mf->err = NULL;
    mf->stop = 0;
    for (unsigned i = from; i < nt; i++) {
        uint8_t c = t[i].p[0];
        const uint8_t *arg = t[i].p + 1;
        uint32_t an = t[i].n - 1;
        int known = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (c >= 127 || (known && (req->mflags & OFL_MC_MF(c)))) {
            mf->err = "CLIENT_ERROR duplicate flag";
            mf->stop = 1;
            return;
        }
        uint64_t u;
        switch (c) {
        case 'b': {
            uint8_t tmp[OFL_MC_KEY_MAX];
            if (ofl_mc_key_decode(req->key, req->key_len, tmp) == 0)
                mf->err = "CLIENT_ERROR error decoding key";
            req->key_b64 = 1;
            break;
        }
        case 'N':
        case 'T':
        case 'R': {
            int32_t v;
            if (parse_int(arg, an, &v)) {
                mf->err = "CLIENT_ERROR bad token in command line format";
                break;
            }
            if (c == 'N') req->ttl_vivify = v;
            else if (c == 'T') req->exptime = v;
            else req->recache = v;
            break;
        }
        case 'F':
            if (parse_uint(arg, an, UINT32_MAX, &u)) mf->err = mf->err ? mf->err : BAD_FORMAT;
            else req->flags = (uint32_t)u;
            break;
        case 'C':
            if (parse_uint(arg, an, UINT64_MAX, &req->cas))
                mf->err = "CLIENT_ERROR bad token in command line format";
            break;
        case 'D':
            if (parse_uint(arg, an, UINT64_MAX, &req->delta))
                mf->err = "CLIENT_ERROR invalid numeric delta value";
            break;
        case 'J':
            if (parse_uint(arg, an, UINT64_MAX, &req->initial))
                mf->err = "CLIENT_ERROR invalid numeric initial value";
            break;
        case 'M':
            if (an != 1) mf->err = "CLIENT_ERROR incorrect length for M token";
            else req->mode = arg[0];
            break;
        case 'l': case 'O': case 'P': case 'L': case 'k': case 's': case 't': case 'c':
        case 'f': case 'v': case 'h': case 'u': case 'q': case 'I':
            break;
        default:
            mf->err = "CLIENT_ERROR invalid flag";
            mf->stop = 1;
            return;
        }
        req->mflags |= OFL_MC_MF(c);
    }
}

/* The O token (opaque) of a meta command's flags, if it is longer than allowed. */
static int opaque_too_long(const struct tok *t, unsigned from, unsigned nt)
{
    for (unsigned i = from; i < nt; i++)
        if (t[i].p[0] == 'O' && t[i].n > OFL_MC_OPAQUE_MAX) return 1;
    return 0;
}

static ssize_t text_meta(const uint8_t *buf, size_t len, const struct ofl_mc_limits *lim,
                         const struct tok *t, unsigned nt, const uint8_t *end,
                         struct ofl_mc_req *req, size_t line_len)
{
    uint8_t which = t[0].p[1];
    req->cmd = which == 'g' ? OFL_MC_CMD_MG : which == 's' ? OFL_MC_CMD_MS
               : which == 'd' ? OFL_MC_CMD_MD : OFL_MC_CMD_MA;
    int set = req->cmd == OFL_MC_CMD_MS;
    if (nt < 2) return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    int64_t bytes = set && nt >= 3 ? data_len(&t[2]) : -1;
    size_t span = bytes >= 0 ? line_len + (size_t)bytes + 2 : line_len;
    req->key = t[1].p;
    req->key_len = t[1].n;
    req->nkeys = 1;
    if (t[1].n > OFL_MC_KEY_MAX) return text_fail(req, OFL_MC_EKEY, BAD_FORMAT, span);
    if (set && nt == 2) return text_fail(req, OFL_MC_EINVAL, BAD_FORMAT, line_len);
    if (nt > META_TOKENS_MAX)
        return text_fail(req, OFL_MC_EINVAL,
                         req->cmd == OFL_MC_CMD_MG ? "CLIENT_ERROR options flags are too long"
                                                   : "CLIENT_ERROR options flags too long",
                         span);
    if (set && bytes < 0) return text_fail(req, OFL_MC_EINVAL, BAD_FORMAT, line_len);
    unsigned from = set ? 3 : 2;
    req->delta = 1;   /* ma: by one unless D says otherwise */
    struct meta_flags mf;
    meta_flags(t, from, nt, req, &mf);
    if (mf.err) {
        int plain = req->cmd == OFL_MC_CMD_MG || set;
        return text_fail(req, OFL_MC_EINVAL,
                         plain ? mf.err : "CLIENT_ERROR invalid or duplicate flag", span);
    }
    if (opaque_too_long(t, from, nt))
        return text_fail(req, OFL_MC_EINVAL, "CLIENT_ERROR opaque token too long", span);
    if (req->mode && set && !strchr("EAPRS", req->mode))
        return text_fail(req, OFL_MC_EINVAL, "CLIENT_ERROR invalid mode for ms M token", span);
    if (req->mode && req->cmd == OFL_MC_CMD_MA && !strchr("ID+-", req->mode))
        return text_fail(req, OFL_MC_EINVAL, "CLIENT_ERROR invalid mode for ma M token", span);
    if (nt > from) {
        req->args = t[from].p;
        req->args_len = (uint32_t)(end - t[from].p);
    }
    if (!set) {
        req->quiet = (req->mflags & OFL_MC_MF('q')) != 0;
        req->len = line_len;
        return (ssize_t)line_len;
    }
    ssize_t r = data_block(buf, len, (uint64_t)bytes, lim, req, line_len);
    req->quiet = r > 0 && (req->mflags & OFL_MC_MF('q'));   /* errors are answered */
    return r;
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
    if (nt == 0) return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
    const struct tok *c = &t[0];
    if (tok_is(c, "get") || tok_is(c, "gets") || tok_is(c, "gat") || tok_is(c, "gats"))
        return text_get(t, nt, end, req, line_len);
    if (tok_is(c, "set") || tok_is(c, "add") || tok_is(c, "replace") || tok_is(c, "cas") ||
        tok_is(c, "append") || tok_is(c, "prepend"))
        return text_store(buf, len, lim, t, nt, req, line_len);
    if (tok_is(c, "delete")) return text_delete(t, nt, req, line_len);
    if (tok_is(c, "incr") || tok_is(c, "decr") || tok_is(c, "touch"))
        return text_keyed(t, nt, req, line_len);
    if (tok_is(c, "flush_all") || tok_is(c, "verbosity")) return text_admin(t, nt, req, line_len);
    if (tok_is(c, "mg") || tok_is(c, "ms") || tok_is(c, "md") || tok_is(c, "ma"))
        return text_meta(buf, len, lim, t, nt, end, req, line_len);
    static const struct {
        const char *name;
        uint8_t cmd;
    } plain[] = {{"version", OFL_MC_CMD_VERSION}, {"quit", OFL_MC_CMD_QUIT},
                 {"mn", OFL_MC_CMD_MN},           {"stats", OFL_MC_CMD_STATS},
                 {"shutdown", OFL_MC_CMD_SHUTDOWN}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        if (!tok_is(c, plain[i].name)) continue;
        req->cmd = plain[i].cmd;
        if (nt > 1) {
            req->args = t[1].p;
            req->args_len = (uint32_t)(end - t[1].p);
        }
        req->len = line_len;
        return (ssize_t)line_len;
    }
    return text_fail(req, OFL_MC_EUNKNOWN, NULL, line_len);
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

/* ---- base64 keys (meta flag b) --------------------------------------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The 6-bit value of a base64 character; '=' is 0 (padding); -1 outside the alphabet. */
static int b64_value(uint8_t c)
{
    if (c == '=') return 0;
    const char *at = c ? strchr(B64, c) : NULL;
    return at ? (int)(at - B64) : -1;
}

size_t ofl_mc_key_decode(const uint8_t *in, size_t len, uint8_t *out)
{
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += b64_value(in[i]) >= 0;
    if (count == 0 || count % 4 || count / 4 * 3 > OFL_MC_KEY_MAX) return 0;
    size_t n = 0, got = 0;
    int pad = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(in[i]);
        if (v < 0) continue;
        pad += in[i] == '=';
        acc = acc << 6 | (uint32_t)v;
        if (++got < 4) continue;
        out[n++] = (uint8_t)(acc >> 16);
        out[n++] = (uint8_t)(acc >> 8);
        out[n++] = (uint8_t)acc;
        got = 0;
        acc = 0;
        if (pad) {   /* padding ends the key: one or two bytes fewer */
            if (pad > 2) return 0;
            return n - (size_t)pad;
        }
    }
    return n;
}

size_t ofl_mc_key_encode(const uint8_t *in, size_t len, uint8_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t b = (uint32_t)in[i] << 16;
        if (i + 1 < len) b |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len) b |= in[i + 2];
        out[n++] = (uint8_t)B64[b >> 18 & 63];
        out[n++] = (uint8_t)B64[b >> 12 & 63];
        out[n++] = i + 1 < len ? (uint8_t)B64[b >> 6 & 63] : '=';
        out[n++] = i + 2 < len ? (uint8_t)B64[b & 63] : '=';
    }
    return n;
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
    uint32_t key_len = ofl_get_be16(buf + 2), ext_len = buf[4], body = ofl_get_be32(buf + 8);
    if (ext_len + key_len > body) return OFL_MC_EBADLEN;
    size_t span = OFL_MC_HDR_LEN + (size_t)body;
    if (len < span) {
        if (need) *need = span - len;
        return 0;
    }
    res->opcode = buf[1];
    res->status = ofl_get_be16(buf + 6);
    res->opaque = ofl_get_be32(buf + 12);
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
    h->request_id = ofl_get_be16(buf);
    h->seq = ofl_get_be16(buf + 2);
    h->count = ofl_get_be16(buf + 4);
    h->reserved = ofl_get_be16(buf + 6);
    if (h->count != 1) return OFL_MC_EUDP;
    return OFL_MC_UDP_HDR_LEN;
}

void ofl_mc_udp_write(uint8_t *out, uint16_t request_id, uint16_t seq, uint16_t count)
{
    ofl_put_be16(out, request_id);
    ofl_put_be16(out + 2, seq);
    ofl_put_be16(out + 4, count);
    ofl_put_be16(out + 6, 0);
}

/* ---- binary writers ------------------------------------------------------------- */

static void put_header(uint8_t *out, uint8_t magic, uint8_t opcode, uint16_t status,
                       uint8_t ext_len, uint16_t key_len, uint32_t body, uint32_t opaque,
                       uint64_t cas)
{
    out[0] = magic;
    out[1] = opcode;
    ofl_put_be16(out + 2, key_len);
    out[4] = ext_len;
    out[5] = 0;
    ofl_put_be16(out + 6, status);
    ofl_put_be32(out + 8, body);
    ofl_put_be32(out + 12, opaque);
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
    case OFL_MC_ST_DELTA_BADVAL: return "Non-numeric server-side value for incr or decr";
    case OFL_MC_ST_UNKNOWN_COMMAND: return "Unknown command";
    case OFL_MC_ST_ENOMEM: return "Out of memory";
    case OFL_MC_ST_ETMPFAIL: return "Temporary failure";
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
    if (req->errmsg) return ofl_mc_write_text_line(out, cap, req->errmsg);
    switch (err) {
    case OFL_MC_EUNKNOWN: return ofl_mc_write_text_line(out, cap, "ERROR");
    case OFL_MC_EKEY:
    case OFL_MC_EINVAL: return ofl_mc_write_text_line(out, cap, BAD_FORMAT);
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

const char *ofl_mc_strerror(int err)
{
    switch (err) {
    case OFL_MC_EMAGIC: return "memcached: bad magic byte";
    case OFL_MC_EUNKNOWN: return "memcached: unknown command";
    case OFL_MC_EINVAL: return "memcached: invalid arguments";
    case OFL_MC_EKEY: return "memcached: key longer than 250 bytes";
    case OFL_MC_E2BIG: return "memcached: value too large";
    case OFL_MC_EBADLEN: return "memcached: extras and key longer than the body";
    case OFL_MC_ECHUNK: return "memcached: data block not terminated by CRLF";
    case OFL_MC_ELINE: return "memcached: command line too long";
    case OFL_MC_ETRUNC: return "memcached: datagram ends inside a request";
    case OFL_MC_EUDP: return "memcached: multi-datagram UDP request";
    default: return ofl_strerror(err);
    }
}
