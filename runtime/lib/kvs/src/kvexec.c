/* Executing parsed memcached requests against the key-value store. */
#include "offlow/kvexec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "offlow/pkt.h"

/* Room for a text "VALUE <key> <flags> <bytes> <cas>\r\n" line around a key of `n`
 * bytes, and the CRLF after the value. */
#define TEXT_HDR(n) (6 + (size_t)(n) + 3 * 21 + 2 + 2)
/* Room for any meta reply line: status, every flag with its number, the key twice
 * over (base64), the opaque. */
#define META_LINE_MAX (3 * OFL_MC_KEY_MAX + 24 * 24)
/* First guess at a value's size when reserving room for it. */
#define VALUE_GUESS 1024
/* What binary incr's expiry says about a miss: fail instead of creating. */
#define ARITH_NO_CREATE ((int32_t)0xffffffff)

int ofl_mc_out_reserve(struct ofl_mc_out *o, size_t n)
{
    if (o->cap - o->len >= n) return 0;
    if (n > o->max || o->len > o->max - n) return -ENOBUFS;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap - o->len < n) cap *= 2;
    if (cap > o->max) cap = o->max;
    uint8_t *b = o->borrowed ? malloc(cap) : realloc(o->buf, cap);
    if (!b) return -ENOMEM;
    if (o->borrowed && o->len) memcpy(b, o->buf, o->len);
    o->borrowed = 0;
    o->buf = b;
    o->cap = cap;
    return 0;
}

/* Reserve `n` bytes, or what the reply may still hold when that is less: for a guess
 * at a size (the writer that follows checks the room and says -ENOSPC), so that a
 * reply within the limit is never refused because the guess was not. */
static int reserve_upto(struct ofl_mc_out *o, size_t n)
{
    size_t left = o->max > o->len ? o->max - o->len : 0;
    return ofl_mc_out_reserve(o, n < left ? n : left);
}

void ofl_mc_out_free(struct ofl_mc_out *o)
{
    if (!o->borrowed) free(o->buf);
    size_t max = o->max;
    memset(o, 0, sizeof *o);
    o->max = max;
}

static int append(struct ofl_mc_out *o, ssize_t n)
{
    if (n < 0) return (int)n;
    o->len += (size_t)n;
    return 0;
}

static int put_bytes(struct ofl_mc_out *o, const void *p, size_t n)
{
    int rc = ofl_mc_out_reserve(o, n);
    if (rc) return rc;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

static int put_line(struct ofl_mc_out *o, const char *line)
{
    int rc = ofl_mc_out_reserve(o, strlen(line) + 2);
    return rc ? rc : append(o, ofl_mc_write_text_line(o->buf + o->len, o->cap - o->len, line));
}

static int put_linef(struct ofl_mc_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int put_linef(struct ofl_mc_out *o, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= sizeof line ? -EINVAL : put_line(o, line);
}

static int put_status(struct ofl_mc_out *o, const struct ofl_mc_req *req, uint16_t status)
{
    int rc = reserve_upto(o, OFL_MC_HDR_LEN + 64);
    return rc ? rc : append(o, ofl_mc_write_status(o->buf + o->len, o->cap - o->len,
                                                   req->opcode, req->opaque, status));
}

static int put_msg(struct ofl_mc_out *o, const struct ofl_mc_req *req, uint16_t status,
                   uint64_t cas, const void *extras, uint8_t extras_len, const void *key,
                   size_t key_len, const void *value, size_t value_len)
{
    int rc = ofl_mc_out_reserve(o, OFL_MC_HDR_LEN + extras_len + key_len + value_len);
    return rc ? rc : append(o, ofl_mc_write_response(o->buf + o->len, o->cap - o->len,
                                                     req->opcode, status, req->opaque, cas,
                                                     extras, extras_len, key, key_len, value,
                                                     value_len));
}

static int put_bin(struct ofl_mc_out *o, const struct ofl_mc_req *req, uint16_t status,
                   uint64_t cas, const void *value, size_t value_len)
{
    return put_msg(o, req, status, cas, NULL, 0, NULL, 0, value, value_len);
}

/* The key a request names: its own bytes, or a meta command's base64 key decoded
 * into `buf`. Returns its length (0: it does not decode). */
static uint32_t key_of(const struct ofl_mc_req *req, const uint8_t *key, uint32_t len,
                       uint8_t *buf, const uint8_t **out)
{
    if (!req->key_b64) {
        *out = key;
        return len;
    }
    *out = buf;
    return (uint32_t)ofl_mc_key_decode(key, len, buf);
}

/* ---- reads ------------------------------------------------------------------------ */

/* Copy key's value into `out` at `hdr` bytes past its end (room reserved as needed),
 * doing what `opt` says. Returns 0 (meta filled), -ENOENT or a reserve error. */
static int fetch(struct ofl_kv *kv, const uint8_t *key, uint32_t key_len,
                 const struct ofl_kv_read *opt, struct ofl_mc_out *out, size_t hdr,
                 struct ofl_kv_meta *meta)
{
    uint64_t hash = ofl_kv_hash(key, key_len);
    static const struct ofl_kv_read again = {.again = 1};
    int rc = reserve_upto(out, hdr + VALUE_GUESS);   /* a guess first, then the size */
    for (;;) {
        if (rc) return rc;
        if (out->cap - out->len < hdr) return -ENOBUFS;
        size_t room = out->cap - out->len - hdr;
        rc = ofl_kv_read(kv, key, key_len, hash, out->buf + out->len + hdr, room, opt, meta);
        if (rc == 0 && meta->expires) out->expiring = 1;
        if (rc != -ENOBUFS) return rc;
        opt = &again;   /* its work is done: fetch the value that grew past the room */
        rc = ofl_mc_out_reserve(out, hdr + meta->value_len);
    }
}

/* Binary GET, GETK, GAT, GATK, TOUCH (and their quiet forms). */
static int bin_get(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    int touch = req->cmd == OFL_MC_CMD_TOUCH || req->cmd == OFL_MC_CMD_GAT;
    int value = req->cmd != OFL_MC_CMD_TOUCH;
    struct ofl_kv_read opt = {.touch = (uint8_t)touch, .exptime = req->exptime};
    uint32_t klen = req->want_key ? req->key_len : 0;
    size_t hdr = OFL_MC_HDR_LEN + 4 + klen;
    struct ofl_kv_meta meta;
    int rc = value ? fetch(kv, req->key, req->key_len, &opt, out, hdr, &meta)
                   : ofl_kv_read(kv, req->key, req->key_len,
                                 ofl_kv_hash(req->key, req->key_len), NULL, 0, &opt, &meta);
    if (rc == -ENOENT) {
        if (req->quiet) return 0;
        if (!req->want_key) return put_status(out, req, OFL_MC_ST_NOT_FOUND);
        return put_msg(out, req, OFL_MC_ST_NOT_FOUND, 0, NULL, 0, req->key, klen, NULL, 0);
    }
    if (rc) return rc;
    uint8_t flags[4];
    ofl_put_be32(flags, meta.flags);
    if (!value) return put_msg(out, req, OFL_MC_ST_OK, meta.cas, flags, 4, NULL, 0, NULL, 0);
    uint8_t *p = out->buf + out->len;
    ofl_mc_write_res_header(p, req->opcode, OFL_MC_ST_OK, 4, (uint16_t)klen,
                            4 + klen + meta.value_len, req->opaque, meta.cas);
    memcpy(p + 24, flags, 4);
    if (klen) memcpy(p + 28, req->key, klen);
    out->len += hdr + meta.value_len;
    return 0;
}

/* Text get, gets, gat, gats: a VALUE block per key found, then END. */
static int text_get(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    int cas = req->cmd == OFL_MC_CMD_GETS || req->cmd == OFL_MC_CMD_GATS;
    int touch = req->cmd == OFL_MC_CMD_GAT || req->cmd == OFL_MC_CMD_GATS;
    struct ofl_kv_read opt = {.touch = (uint8_t)touch, .exptime = req->exptime};
    const uint8_t *pos = req->keys, *end = req->keys + req->keys_len, *key;
    uint32_t key_len;
    while (ofl_mc_next_key(&pos, end, &key, &key_len)) {
        struct ofl_kv_meta meta;
        size_t room = TEXT_HDR(key_len);
        int rc = fetch(kv, key, key_len, touch ? &opt : NULL, out, room, &meta);
        if (rc == -ENOENT) continue;
        if (rc) return rc;
        char tail[64];
        int n = cas ? snprintf(tail, sizeof tail, " %" PRIu32 " %" PRIu32 " %" PRIu64 "\r\n",
                               meta.flags, meta.value_len, meta.cas)
                    : snprintf(tail, sizeof tail, " %" PRIu32 " %" PRIu32 "\r\n", meta.flags,
                               meta.value_len);
        uint8_t *p = out->buf + out->len;
        size_t hdr = 6 + key_len + (size_t)n;
        memmove(p + hdr, p + room, meta.value_len);
        memcpy(p, "VALUE ", 6);
        memcpy(p + 6, key, key_len);
        memcpy(p + 6 + key_len, tail, (size_t)n);
        memcpy(p + hdr + meta.value_len, "\r\n", 2);   /* room >= hdr + 2 */
        out->len += hdr + meta.value_len + 2;
    }
    return put_line(out, "END");
}

static int text_touch(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    struct ofl_kv_read opt = {.touch = 1, .exptime = req->exptime};
    struct ofl_kv_meta meta;
    int rc = ofl_kv_read(kv, req->key, req->key_len, ofl_kv_hash(req->key, req->key_len), NULL,
                         0, &opt, &meta);
    if (req->quiet) return 0;
    return put_line(out, rc == 0 ? "TOUCHED" : "NOT_FOUND");
}

/* ---- writes ----------------------------------------------------------------------- */

static unsigned mode_of(const struct ofl_mc_req *req)
{
    switch (req->cmd) {
    case OFL_MC_CMD_ADD: return OFL_KV_ADD;
    case OFL_MC_CMD_REPLACE: return OFL_KV_REPLACE;
    case OFL_MC_CMD_APPEND: return OFL_KV_APPEND;
    case OFL_MC_CMD_PREPEND: return OFL_KV_PREPEND;
    case OFL_MC_CMD_CAS: return OFL_KV_CAS;
    default: return OFL_KV_SET;
    }
}

static int store(struct ofl_kv *kv, const struct ofl_mc_req *req, unsigned mode,
                 struct ofl_mc_out *out)
{
    uint64_t cas = 0;
    int rc = ofl_kv_store(kv, mode, req->key, req->key_len, ofl_kv_hash(req->key, req->key_len),
                          req->value, req->value_len, req->flags, req->exptime, req->cas, &cas);
    int concat = req->cmd == OFL_MC_CMD_APPEND || req->cmd == OFL_MC_CMD_PREPEND;
    if (req->proto == OFL_MC_BINARY) {
        if (concat && (rc == -ENOENT || rc == -E2BIG)) rc = -ENOSPC;   /* NOT_STORED */
        switch (rc) {
        case 0: return req->quiet ? 0 : put_bin(out, req, OFL_MC_ST_OK, cas, NULL, 0);
        case -EEXIST: return put_status(out, req, OFL_MC_ST_EXISTS);
        case -ENOENT: return put_status(out, req, OFL_MC_ST_NOT_FOUND);
        case -ENOSPC: return put_status(out, req, OFL_MC_ST_NOT_STORED);
        case -E2BIG: return put_status(out, req, OFL_MC_ST_E2BIG);
        default: return put_status(out, req, OFL_MC_ST_ENOMEM);
        }
    }
    if (req->quiet) return 0;
    int is_cas = req->cmd == OFL_MC_CMD_CAS;
    switch (rc) {
    case 0: return put_line(out, "STORED");
    case -EEXIST: return put_line(out, is_cas ? "EXISTS" : "NOT_STORED");
    case -ENOENT: return put_line(out, is_cas ? "NOT_FOUND" : "NOT_STORED");
    case -E2BIG:
        return put_line(out, concat ? "NOT_STORED" : "SERVER_ERROR object too large for cache");
    default: return put_line(out, "SERVER_ERROR out of memory storing object");
    }
}

static int del(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    int bin = req->proto == OFL_MC_BINARY;
    int rc = ofl_kv_delete(kv, req->key, req->key_len, ofl_kv_hash(req->key, req->key_len),
                           bin ? req->cas : 0);
    if (!bin) return req->quiet ? 0 : put_line(out, rc == 0 ? "DELETED" : "NOT_FOUND");
    switch (rc) {
    case 0: return req->quiet ? 0 : put_bin(out, req, OFL_MC_ST_OK, 0, NULL, 0);
    case -EEXIST: return put_status(out, req, OFL_MC_ST_EXISTS);
    default: return put_status(out, req, OFL_MC_ST_NOT_FOUND);
    }
}

static int arith(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    int bin = req->proto == OFL_MC_BINARY;
    struct ofl_kv_arith a = {
        .incr = req->cmd == OFL_MC_CMD_INCR, .delta = req->delta, .initial = req->initial,
        .create = bin && req->exptime != ARITH_NO_CREATE, .exptime = req->exptime,
        .cas_in = bin ? req->cas : 0};
    uint64_t value;
    struct ofl_kv_meta meta;
    int rc = ofl_kv_arith(kv, req->key, req->key_len, ofl_kv_hash(req->key, req->key_len), &a,
                          &value, &meta);
    if (bin) {
        uint8_t v[8];
        for (int i = 0; i < 8; i++) v[i] = (uint8_t)(value >> (56 - 8 * i));
        switch (rc) {
        case 0: return req->quiet ? 0 : put_bin(out, req, OFL_MC_ST_OK, meta.cas, v, 8);
        case -ENOENT: return put_status(out, req, OFL_MC_ST_NOT_FOUND);
        case -EEXIST: return put_status(out, req, OFL_MC_ST_EXISTS);
        case -EINVAL: return put_status(out, req, OFL_MC_ST_DELTA_BADVAL);
        default: return put_status(out, req, OFL_MC_ST_ENOMEM);
        }
    }
    if (req->quiet) return 0;
    switch (rc) {
    case 0: return put_linef(out, "%" PRIu64, value);
    case -ENOENT: return put_line(out, "NOT_FOUND");
    case -EINVAL:
        return put_line(out, "CLIENT_ERROR cannot increment or decrement non-numeric value");
    default: return put_line(out, "SERVER_ERROR out of memory");
    }
}

static int flush(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    ofl_kv_flush(kv, req->exptime);
    if (req->quiet) return 0;
    return req->proto == OFL_MC_BINARY ? put_bin(out, req, OFL_MC_ST_OK, 0, NULL, 0)
                                       : put_line(out, "OK");
}

/* ---- stats ------------------------------------------------------------------------ */

static int stat_str(struct ofl_mc_out *o, const struct ofl_mc_req *req, const char *name,
                    const char *value)
{
    if (req->proto == OFL_MC_BINARY)
        return put_msg(o, req, OFL_MC_ST_OK, 0, NULL, 0, name, strlen(name), value,
                       strlen(value));
    return put_linef(o, "STAT %s %s", name, value);
}

static int stat_u64(struct ofl_mc_out *o, const struct ofl_mc_req *req, const char *name,
                    uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    return stat_str(o, req, name, s);
}

/* The end of a stats answer: END, or binary's empty STAT. */
static int stats_end(struct ofl_mc_out *o, const struct ofl_mc_req *req)
{
    return req->proto == OFL_MC_BINARY ? put_bin(o, req, OFL_MC_ST_OK, 0, NULL, 0)
                                       : put_line(o, "END");
}

uint64_t ofl_kv_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

static int stats_general(struct ofl_kv *kv, const struct ofl_mc_req *req,
                         struct ofl_mc_out *o, const struct ofl_kv_env *env,
                         const struct ofl_kv_server_stats *sv)
{
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char user[32], sys[32];
    snprintf(user, sizeof user, "%ld.%06ld", (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
    snprintf(sys, sizeof sys, "%ld.%06ld", (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
    uint64_t up = env && env->started_s ? ofl_kv_now_s() - env->started_s : 0;
    const struct {
        const char *name;
        uint64_t v;
    } nums[] = {
        {"max_connections", sv->max_conns},
        {"curr_connections", sv->curr_conns},
        {"total_connections", sv->total_conns},
        {"rejected_connections", sv->rejected_conns},
        {"cmd_get", st.gets},
        {"cmd_set", st.stores},
        {"cmd_flush", st.flushes},
        {"cmd_touch", st.touch_hits + st.touch_misses},
        {"get_hits", st.hits},
        {"get_misses", st.gets - st.hits},
        {"get_expired", st.expired},
        {"get_flushed", st.flushed},
        {"delete_misses", st.delete_misses},
        {"delete_hits", st.deletes},
        {"incr_misses", st.incr_misses},
        {"incr_hits", st.incr_hits},
        {"decr_misses", st.decr_misses},
        {"decr_hits", st.decr_hits},
        {"cas_misses", st.cas_misses},
        {"cas_hits", st.cas_hits},
        {"cas_badval", st.cas_badval},
        {"touch_hits", st.touch_hits},
        {"touch_misses", st.touch_misses},
        {"bytes_read", sv->bytes_read},
        {"bytes_written", sv->bytes_written},
        {"limit_maxbytes", st.mem_bytes},
        {"threads", sv->threads},
        {"bytes", st.bytes},
        {"curr_items", st.items},
        {"total_items", st.total_items},
        {"evictions", st.evictions},
    };
    int rc = stat_u64(o, req, "pid", (uint64_t)getpid());
    if (!rc) rc = stat_u64(o, req, "uptime", up);
    if (!rc) rc = stat_u64(o, req, "time", (uint64_t)time(NULL));
    if (!rc) rc = stat_str(o, req, "version", OFL_KVS_VERSION);
    if (!rc) rc = stat_u64(o, req, "pointer_size", 8 * sizeof(void *));
    if (!rc) rc = stat_str(o, req, "rusage_user", user);
    if (!rc) rc = stat_str(o, req, "rusage_system", sys);
    for (size_t i = 0; i < sizeof nums / sizeof nums[0] && !rc; i++)
        rc = stat_u64(o, req, nums[i].name, nums[i].v);
    return rc ? rc : stats_end(o, req);
}

static int stats_settings(struct ofl_kv *kv, const struct ofl_mc_req *req,
                          struct ofl_mc_out *o, const struct ofl_kv_server_stats *sv)
{
    struct ofl_kv_stats st;
    ofl_kv_get_stats(kv, &st);
    int rc = stat_u64(o, req, "maxbytes", st.mem_bytes);
    if (!rc) rc = stat_u64(o, req, "maxconns", sv->max_conns);
    if (!rc) rc = stat_u64(o, req, "tcpport", sv->tcp_port);
    if (!rc) rc = stat_u64(o, req, "udpport", sv->udp_port);
    if (!rc) rc = stat_str(o, req, "evictions", "on");
    if (!rc) rc = stat_u64(o, req, "num_threads", sv->threads);
    if (!rc) rc = stat_str(o, req, "cas_enabled", "yes");
    if (!rc) rc = stat_str(o, req, "binding_protocol", "auto-negotiate");
    if (!rc) rc = stat_u64(o, req, "item_size_max", sv->value_max);
    return rc ? rc : stats_end(o, req);
}

static int stats(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out,
                 const struct ofl_kv_env *env)
{
    struct ofl_kv_server_stats sv;
    memset(&sv, 0, sizeof sv);
    if (env && env->server_stats) env->server_stats(env->arg, &sv);
    const uint8_t *p = req->args, *end = p ? p + req->args_len : NULL, *word = NULL;
    uint32_t n = 0;
    ofl_mc_next_key(&p, end, &word, &n);
    int bin = req->proto == OFL_MC_BINARY;
    if (n == 0) return stats_general(kv, req, out, env, &sv);
    if (n == 5 && memcmp(word, "reset", 5) == 0) {
        ofl_kv_reset_stats(kv);
        return bin ? stats_end(out, req) : put_line(out, "RESET");
    }
    if (n == 8 && memcmp(word, "settings", 8) == 0) return stats_settings(kv, req, out, &sv);
    /* slabs, items, sizes, conns, detail...: not kept here */
    return bin ? put_status(out, req, OFL_MC_ST_NOT_FOUND) : put_line(out, "ERROR");
}

/* ---- meta commands ---------------------------------------------------------------- */

/* A meta reply line being built. */
struct line {
    char s[META_LINE_MAX];
    size_t n;
};

static void add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, sizeof l->s - l->n, fmt, ap);
    va_end(ap);
    if (k > 0) l->n += (size_t)k < sizeof l->s - l->n ? (size_t)k : sizeof l->s - l->n - 1;
}

static void add_bytes(struct line *l, const uint8_t *p, size_t n)
{
    if (n > sizeof l->s - l->n - 1) n = sizeof l->s - l->n - 1;
    memcpy(l->s + l->n, p, n);
    l->n += n;
    l->s[l->n] = 0;
}

/* " k<key>", base64 with " b" when the request's key was (memcached's META_KEY). */
static void add_key(struct line *l, const struct ofl_mc_req *req, const uint8_t *key,
                    uint32_t len)
{
    add(l, " k");
    if (!req->key_b64) {
        add_bytes(l, key, len);
        return;
    }
    uint8_t enc[4 * (OFL_MC_KEY_MAX / 3 + 1)];
    add_bytes(l, enc, ofl_mc_key_encode(key, len, enc));
    add(l, " b");
}

/* The flag tokens of a meta request, walked in order. */
struct flags_walk {
    const uint8_t *pos, *end;
};

static int next_flag(struct flags_walk *w, const uint8_t **tok, uint32_t *n)
{
    return ofl_mc_next_key(&w->pos, w->end, tok, n);
}

static struct flags_walk walk(const struct ofl_mc_req *req)
{
    return (struct flags_walk){req->args, req->args ? req->args + req->args_len : NULL};
}

/* The answer flags every meta reply carries when asked: O (the opaque token) and k. */
static void add_common(struct line *l, const struct ofl_mc_req *req, const uint8_t *key,
                       uint32_t klen)
{
    struct flags_walk w = walk(req);
    const uint8_t *t;
    uint32_t n;
    while (next_flag(&w, &t, &n)) {
        if (t[0] == 'O') {
            add(l, " ");
            add_bytes(l, t, n);
        } else if (t[0] == 'k') {
            add_key(l, req, key, klen);
        }
    }
}

static int put_meta_line(struct ofl_mc_out *out, struct line *l)
{
    add(l, "\r\n");
    return put_bytes(out, l->s, l->n);
}

/* The TTL a T flag sets, as mg's t reports it after: -1 for none, else seconds. */
static int32_t ttl_after(int32_t exptime)
{
    if (exptime == 0) return -1;
    if (exptime < 0) return 0;
    if (exptime <= 60 * 60 * 24 * 30) return exptime;
    int64_t left = (int64_t)exptime - (int64_t)time(NULL);
    return left > 0 ? (int32_t)left : 0;
}

static int meta_get(struct ofl_kv *kv, const struct ofl_mc_req *req, const uint8_t *key,
                    uint32_t klen, struct ofl_mc_out *out)
{
    uint64_t f = req->mflags;
    struct ofl_kv_read opt = {
        .touch = (f & OFL_MC_MF('T')) != 0, .exptime = req->exptime,
        .no_bump = (f & OFL_MC_MF('u')) != 0, .vivify = (f & OFL_MC_MF('N')) != 0,
        .vivify_exptime = req->ttl_vivify, .recache = (f & OFL_MC_MF('R')) != 0,
        .recache_s = req->recache};
    int want_value = (f & OFL_MC_MF('v')) != 0;
    struct ofl_kv_meta meta;
    size_t at = out->len;
    /* room for the line: a number per flag, the key (base64 is longer), the tokens */
    size_t line_room = 32 + 24 * (size_t)req->args_len + 2 * (size_t)klen + 8;
    if (line_room > META_LINE_MAX) line_room = META_LINE_MAX;
    int rc = want_value ? fetch(kv, key, klen, &opt, out, line_room, &meta)
                        : ofl_kv_read(kv, key, klen, ofl_kv_hash(key, klen), NULL, 0, &opt,
                                      &meta);
    struct line l = {.n = 0};
    if (rc == -ENOENT) {
        if (req->quiet) return 0;
        add(&l, "EN");
        add_common(&l, req, key, klen);
        return put_meta_line(out, &l);
    }
    if (rc) return rc;
    if (want_value) add(&l, "VA %" PRIu32, meta.value_len);
    else add(&l, "HD");
    int32_t ttl = meta.ttl;
    struct flags_walk w = walk(req);
    const uint8_t *t;
    uint32_t n;
    while (next_flag(&w, &t, &n)) {
        switch (t[0]) {
        case 'T': ttl = ttl_after(req->exptime); break;   /* a t after it sees the new one */
        case 's': add(&l, " s%" PRIu32, meta.value_len); break;
        case 't': add(&l, " t%" PRId32, ttl); break;
        case 'c': add(&l, " c%" PRIu64, meta.cas); break;
        case 'f': add(&l, " f%" PRIu32, meta.flags); break;
        case 'l': add(&l, " l%" PRIu32, meta.idle); break;
        case 'h': add(&l, " h%d", meta.fetched ? 1 : 0); break;
        case 'O': add(&l, " "); add_bytes(&l, t, n); break;
        case 'k': add_key(&l, req, key, klen); break;
        default: break;
        }
    }
    if (meta.token_sent && !meta.created) add(&l, " Z");
    if (meta.stale) add(&l, " X");
    if (meta.win) add(&l, " W");
    add(&l, "\r\n");
    if (!want_value) return put_bytes(out, l.s, l.n);
    /* the value sits line_room past `at`: put the line before it, CRLF after */
    uint8_t *p = out->buf + at;
    if (l.n + 2 > line_room) return -ENOBUFS;   /* cannot happen: the room is the bound */
    memmove(p + l.n, p + line_room, meta.value_len);
    memcpy(p, l.s, l.n);
    memcpy(p + l.n + meta.value_len, "\r\n", 2);
    out->len = at + l.n + meta.value_len + 2;
    return 0;
}

static int meta_set(struct ofl_kv *kv, const struct ofl_mc_req *req, const uint8_t *key,
                    uint32_t klen, struct ofl_mc_out *out)
{
    uint64_t f = req->mflags;
    int has_cas = (f & OFL_MC_MF('C')) != 0;
    unsigned mode;
    switch (req->mode) {
    case 'E': mode = OFL_KV_ADD; break;
    case 'A': mode = OFL_KV_APPEND; break;
    case 'P': mode = OFL_KV_PREPEND; break;
    case 'R': mode = has_cas ? OFL_KV_CAS : OFL_KV_REPLACE; break;
    default: mode = has_cas ? OFL_KV_CAS : OFL_KV_SET; break;
    }
    if (mode == OFL_KV_CAS && (f & OFL_MC_MF('I'))) mode |= OFL_KV_INVALIDATE;
    uint64_t cas_in = has_cas && req->mode != 'E' ? req->cas : 0, cas = 0;
    int rc = ofl_kv_store(kv, mode, key, klen, ofl_kv_hash(key, klen), req->value,
                          req->value_len, req->flags, req->exptime, cas_in, &cas);
    int concat = req->mode == 'A' || req->mode == 'P';
    if (rc == -E2BIG && !concat)
        return put_line(out, "SERVER_ERROR object too large for cache");
    if (rc == -ENOMEM) return put_line(out, "SERVER_ERROR out of memory storing object");
    if (rc == 0 && req->quiet) return 0;
    struct line l = {.n = 0};
    int cas_cmd = (mode & 0xff) == OFL_KV_CAS;
    add(&l, "%s", rc == 0                  ? "HD"
                  : rc == -EEXIST          ? (cas_cmd || concat ? "EX" : "NS")
                  : rc == -ENOENT && cas_cmd ? "NF"
                                           : "NS");
    struct flags_walk w = walk(req);
    const uint8_t *t;
    uint32_t n;
    while (next_flag(&w, &t, &n)) {
        if (t[0] == 'O') {
            add(&l, " ");
            add_bytes(&l, t, n);
        } else if (t[0] == 'k') {
            add_key(&l, req, key, klen);
        } else if (t[0] == 'c') {
            add(&l, " c%" PRIu64, cas);
        }
    }
    return put_meta_line(out, &l);
}

static int meta_delete(struct ofl_kv *kv, const struct ofl_mc_req *req, const uint8_t *key,
                       uint32_t klen, struct ofl_mc_out *out)
{
    uint64_t f = req->mflags, cas_in = (f & OFL_MC_MF('C')) ? req->cas : 0;
    uint64_t hash = ofl_kv_hash(key, klen);
    int rc = (f & OFL_MC_MF('I'))
                 ? ofl_kv_invalidate(kv, key, klen, hash, cas_in, (f & OFL_MC_MF('T')) != 0,
                                     req->exptime, NULL)
                 : ofl_kv_delete(kv, key, klen, hash, cas_in);
    if (rc == 0 && req->quiet) return 0;
    struct line l = {.n = 0};
    add(&l, "%s", rc == 0 ? "HD" : rc == -EEXIST ? "EX" : "NF");
    add_common(&l, req, key, klen);
    return put_meta_line(out, &l);
}

static int meta_arith(struct ofl_kv *kv, const struct ofl_mc_req *req, const uint8_t *key,
                      uint32_t klen, struct ofl_mc_out *out)
{
    uint64_t f = req->mflags;
    struct ofl_kv_arith a = {
        .incr = !(req->mode == 'D' || req->mode == '-'), .delta = req->delta,
        .initial = req->initial, .create = (f & OFL_MC_MF('N')) != 0,
        .exptime = req->ttl_vivify, .cas_in = (f & OFL_MC_MF('C')) ? req->cas : 0};
    uint64_t value = 0;
    struct ofl_kv_meta meta;
    uint64_t hash = ofl_kv_hash(key, klen);
    int rc = ofl_kv_arith(kv, key, klen, hash, &a, &value, &meta);
    if (rc == -EINVAL)
        return put_line(out, "CLIENT_ERROR cannot increment or decrement non-numeric value");
    if (rc == -ENOMEM) return put_line(out, "SERVER_ERROR out of memory");
    struct line l = {.n = 0};
    if (rc) {
        add(&l, "%s", rc == -EEXIST ? "EX" : "NF");
        add_common(&l, req, key, klen);
        return put_meta_line(out, &l);
    }
    if (f & OFL_MC_MF('T')) {   /* a new TTL for the item, after the arithmetic */
        struct ofl_kv_read opt = {.touch = 1, .exptime = req->exptime, .no_bump = 1};
        struct ofl_kv_meta m2;
        ofl_kv_read(kv, key, klen, hash, NULL, 0, &opt, &m2);
    }
    if (req->quiet) return 0;
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%" PRIu64, value);
    int want_value = (f & OFL_MC_MF('v')) != 0;
    if (want_value) add(&l, "VA %d", nd);
    else add(&l, "HD");
    int32_t ttl = meta.ttl;
    struct flags_walk w = walk(req);
    const uint8_t *t;
    uint32_t n;
    while (next_flag(&w, &t, &n)) {
        switch (t[0]) {
        case 'c': add(&l, " c%" PRIu64, meta.cas); break;
        case 't': add(&l, " t%" PRId32, ttl); break;
        case 'T': ttl = ttl_after(req->exptime); break;
        case 'N': if (meta.created) ttl = ttl_after(req->ttl_vivify); break;
        case 'O': add(&l, " "); add_bytes(&l, t, n); break;
        case 'k': add_key(&l, req, key, klen); break;
        default: break;
        }
    }
    if (want_value) add(&l, "\r\n%s", digits);
    return put_meta_line(out, &l);
}

static int meta(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    uint8_t buf[OFL_MC_KEY_MAX];
    const uint8_t *key;
    uint32_t klen = key_of(req, req->key, req->key_len, buf, &key);
    if (klen == 0)   /* checked by the parser; here for safety */
        return put_line(out, "CLIENT_ERROR error decoding key");
    switch (req->cmd) {
    case OFL_MC_CMD_MG: return meta_get(kv, req, key, klen, out);
    case OFL_MC_CMD_MS: return meta_set(kv, req, key, klen, out);
    case OFL_MC_CMD_MD: return meta_delete(kv, req, key, klen, out);
    default: return meta_arith(kv, req, key, klen, out);
    }
}

/* ---- dispatch --------------------------------------------------------------------- */

int ofl_kv_exec_env(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out,
                    const struct ofl_kv_env *env)
{
    int bin = req->proto == OFL_MC_BINARY;
    switch (req->cmd) {
    case OFL_MC_CMD_GET:
    case OFL_MC_CMD_GETS: return bin ? bin_get(kv, req, out) : text_get(kv, req, out);
    case OFL_MC_CMD_GAT:
    case OFL_MC_CMD_GATS: return bin ? bin_get(kv, req, out) : text_get(kv, req, out);
    case OFL_MC_CMD_TOUCH: return bin ? bin_get(kv, req, out) : text_touch(kv, req, out);
    case OFL_MC_CMD_SET:
    case OFL_MC_CMD_ADD:
    case OFL_MC_CMD_REPLACE:
    case OFL_MC_CMD_APPEND:
    case OFL_MC_CMD_PREPEND:
    case OFL_MC_CMD_CAS: return store(kv, req, mode_of(req), out);
    case OFL_MC_CMD_DELETE: return del(kv, req, out);
    case OFL_MC_CMD_INCR:
    case OFL_MC_CMD_DECR: return arith(kv, req, out);
    case OFL_MC_CMD_FLUSH: return flush(kv, req, out);
    case OFL_MC_CMD_STATS: return stats(kv, req, out, env);
    case OFL_MC_CMD_VERBOSITY: return req->quiet ? 0 : put_line(out, "OK");
    case OFL_MC_CMD_SHUTDOWN: return put_line(out, "ERROR: shutdown not enabled");
    case OFL_MC_CMD_MG:
    case OFL_MC_CMD_MS:
    case OFL_MC_CMD_MD:
    case OFL_MC_CMD_MA: return meta(kv, req, out);
    case OFL_MC_CMD_MN: return put_line(out, "MN");
    case OFL_MC_CMD_NOOP: return put_bin(out, req, OFL_MC_ST_OK, 0, NULL, 0);
    case OFL_MC_CMD_VERSION:
        return bin ? put_bin(out, req, OFL_MC_ST_OK, 0, OFL_KVS_VERSION, strlen(OFL_KVS_VERSION))
                   : put_line(out, "VERSION " OFL_KVS_VERSION);
    case OFL_MC_CMD_QUIT: {
        int rc = bin && !req->quiet ? put_bin(out, req, OFL_MC_ST_OK, 0, NULL, 0) : 0;
        return rc ? rc : 1;
    }
    default: return ofl_kv_exec_error(req, OFL_MC_EUNKNOWN, out);
    }
}

int ofl_kv_exec(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    return ofl_kv_exec_env(kv, req, out, NULL);
}

int ofl_kv_exec_trusted(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    if (req->cmd == OFL_MC_CMD_SET && req->cas) return store(kv, req, OFL_KV_SET_CAS, out);
    return ofl_kv_exec(kv, req, out);
}

int ofl_kv_exec_error(const struct ofl_mc_req *req, int err, struct ofl_mc_out *out)
{
    int rc = reserve_upto(out, 128);
    if (rc) return rc;
    rc = append(out, ofl_mc_write_error(out->buf + out->len, out->cap - out->len, req, err));
    return rc ? rc : req->fatal ? 1 : 0;
}

int ofl_kv_exec_oom(const struct ofl_mc_req *req, int storing, struct ofl_mc_out *out)
{
    if (req->proto == OFL_MC_BINARY) return put_status(out, req, OFL_MC_ST_ENOMEM);
    if (req->quiet) return 0;
    int get = req->cmd == OFL_MC_CMD_GET || req->cmd == OFL_MC_CMD_GETS ||
              req->cmd == OFL_MC_CMD_GAT || req->cmd == OFL_MC_CMD_GATS;
    return put_line(out, storing ? "SERVER_ERROR out of memory storing object"
                         : get   ? "SERVER_ERROR out of memory writing get response"
                                 : "SERVER_ERROR out of memory");
}

int ofl_kv_exec_udp(struct ofl_kv *kv, const uint8_t *dgram, size_t len,
                    const struct ofl_mc_limits *lim, struct ofl_mc_out *out,
                    struct ofl_kv_udp_counts *c)
{
    struct ofl_mc_udp_hdr h;
    if (ofl_mc_udp_parse(dgram, len, &h) < 0) {
        c->dropped++;
        return -EINVAL;
    }
    size_t off = OFL_MC_UDP_HDR_LEN;
    enum ofl_mc_proto proto = OFL_MC_ANY;
    while (off < len) {
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(dgram + off, len - off, proto, lim, &req);
        proto = (enum ofl_mc_proto)req.proto;
        if (r == 0) {   /* the datagram ends inside a request */
            c->dropped++;
            break;
        }
        int rc;
        if (r < 0) {
            c->parse_errors++;
            rc = ofl_kv_exec_error(&req, (int)r, out);
            off = req.len < len - off ? off + req.len : len;
        } else {
            c->requests++;
            rc = ofl_kv_exec(kv, &req, out);
            off += (size_t)r;
        }
        if (rc < 0 || req.fatal) break;   /* quit means nothing on UDP */
    }
    return h.request_id;
}
