/* Executing parsed memcached requests against the key-value store. */
#include "offlow/kvexec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for a text "VALUE <key> <flags> <bytes> <cas>\r\n" line around any key. */
#define TEXT_HDR_MAX (6 + OFL_MC_KEY_MAX + 3 * 21 + 2)
/* First guess at a value's size when reserving room for it. */
#define VALUE_GUESS 1024

int ofl_mc_out_reserve(struct ofl_mc_out *o, size_t n)
{
    if (o->cap - o->len >= n) return 0;
    if (n > o->max || o->len > o->max - n) return -ENOBUFS;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap - o->len < n) cap *= 2;
    if (cap > o->max) cap = o->max;
    uint8_t *b = realloc(o->buf, cap);
    if (!b) return -ENOMEM;
    o->buf = b;
    o->cap = cap;
    return 0;
}

void ofl_mc_out_free(struct ofl_mc_out *o)
{
    free(o->buf);
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

static int put_line(struct ofl_mc_out *o, const char *line)
{
    int rc = ofl_mc_out_reserve(o, strlen(line) + 2);
    return rc ? rc : append(o, ofl_mc_write_text_line(o->buf + o->len, o->cap - o->len, line));
}

static int put_status(struct ofl_mc_out *o, const struct ofl_mc_req *req, uint16_t status)
{
    int rc = ofl_mc_out_reserve(o, OFL_MC_HDR_LEN + 64);
    return rc ? rc : append(o, ofl_mc_write_status(o->buf + o->len, o->cap - o->len,
                                                   req->opcode, req->opaque, status));
}

static int put_bin(struct ofl_mc_out *o, const struct ofl_mc_req *req, uint16_t status,
                   uint64_t cas, const void *value, size_t value_len)
{
    int rc = ofl_mc_out_reserve(o, OFL_MC_HDR_LEN + value_len);
    return rc ? rc : append(o, ofl_mc_write_response(o->buf + o->len, o->cap - o->len,
                                                     req->opcode, status, req->opaque, cas,
                                                     NULL, 0, NULL, 0, value, value_len));
}

/* Copy key's value into `out` at `hdr` bytes past its end (room reserved as
 * needed). Returns 0 (meta filled), -ENOENT or a reserve error. */
static int fetch(struct ofl_kv *kv, const uint8_t *key, uint32_t key_len,
                 struct ofl_mc_out *out, size_t hdr, struct ofl_kv_meta *meta)
{
    uint64_t hash = ofl_kv_hash(key, key_len);
    size_t want = hdr + VALUE_GUESS;
    for (;;) {
        int rc = ofl_mc_out_reserve(out, want);
        if (rc) return rc;
        size_t room = out->cap - out->len - hdr;
        rc = ofl_kv_get(kv, key, key_len, hash, out->buf + out->len + hdr, room, meta);
        if (rc == 0 && meta->expires) out->expiring = 1;
        if (rc != -ENOBUFS) return rc;
        want = hdr + meta->value_len;   /* the value grew past the room: retry */
    }
}

static int bin_get(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    uint32_t klen = req->want_key ? req->key_len : 0;
    size_t hdr = OFL_MC_HDR_LEN + 4 + klen;
    struct ofl_kv_meta meta;
    int rc = fetch(kv, req->key, req->key_len, out, hdr, &meta);
    if (rc == -ENOENT) {
        if (req->quiet) return 0;
        if (!req->want_key) return put_status(out, req, OFL_MC_ST_NOT_FOUND);
        rc = ofl_mc_out_reserve(out, OFL_MC_HDR_LEN + klen);
        return rc ? rc : append(out, ofl_mc_write_response(
                                         out->buf + out->len, out->cap - out->len, req->opcode,
                                         OFL_MC_ST_NOT_FOUND, req->opaque, 0, NULL, 0, req->key,
                                         klen, NULL, 0));
    }
    if (rc) return rc;
    uint8_t *p = out->buf + out->len;
    ofl_mc_write_res_header(p, req->opcode, OFL_MC_ST_OK, 4, (uint16_t)klen,
                            4 + klen + meta.value_len, req->opaque, meta.cas);
    p[24] = (uint8_t)(meta.flags >> 24);
    p[25] = (uint8_t)(meta.flags >> 16);
    p[26] = (uint8_t)(meta.flags >> 8);
    p[27] = (uint8_t)meta.flags;
    if (klen) memcpy(p + 28, req->key, klen);
    out->len += hdr + meta.value_len;
    return 0;
}

static int text_get(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    const uint8_t *pos = req->keys, *end = req->keys + req->keys_len, *key;
    uint32_t key_len;
    while (ofl_mc_next_key(&pos, end, &key, &key_len)) {
        struct ofl_kv_meta meta;
        int rc = fetch(kv, key, key_len, out, TEXT_HDR_MAX, &meta);
        if (rc == -ENOENT) continue;
        if (rc) return rc;
        char tail[64];
        int n = req->cmd == OFL_MC_CMD_GETS
                    ? snprintf(tail, sizeof tail, " %" PRIu32 " %" PRIu32 " %" PRIu64 "\r\n",
                               meta.flags, meta.value_len, meta.cas)
                    : snprintf(tail, sizeof tail, " %" PRIu32 " %" PRIu32 "\r\n", meta.flags,
                               meta.value_len);
        uint8_t *p = out->buf + out->len;
        size_t hdr = 6 + key_len + (size_t)n;
        memmove(p + hdr, p + TEXT_HDR_MAX, meta.value_len);
        memcpy(p, "VALUE ", 6);
        memcpy(p + 6, key, key_len);
        memcpy(p + 6 + key_len, tail, (size_t)n);
        memcpy(p + hdr + meta.value_len, "\r\n", 2);   /* room: TEXT_HDR_MAX > hdr + 2 */
        out->len += hdr + meta.value_len + 2;
    }
    return put_line(out, "END");
}

static enum ofl_kv_mode mode_of(const struct ofl_mc_req *req)
{
    return req->cmd == OFL_MC_CMD_ADD       ? OFL_KV_ADD
           : req->cmd == OFL_MC_CMD_REPLACE ? OFL_KV_REPLACE
                                            : OFL_KV_SET;
}

static int store(struct ofl_kv *kv, const struct ofl_mc_req *req, enum ofl_kv_mode mode,
                 struct ofl_mc_out *out)
{
    uint64_t cas = 0;
    int rc = ofl_kv_store(kv, mode, req->key, req->key_len, ofl_kv_hash(req->key, req->key_len),
                          req->value, req->value_len, req->flags, req->exptime, req->cas, &cas);
    if (req->proto == OFL_MC_BINARY) {
        switch (rc) {
        case 0: return req->quiet ? 0 : put_bin(out, req, OFL_MC_ST_OK, cas, NULL, 0);
        case -EEXIST: return put_status(out, req, OFL_MC_ST_EXISTS);
        case -ENOENT: return put_status(out, req, OFL_MC_ST_NOT_FOUND);
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
    case -E2BIG: return put_line(out, "SERVER_ERROR object too large for cache");
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

int ofl_kv_exec(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    int bin = req->proto == OFL_MC_BINARY;
    switch (req->cmd) {
    case OFL_MC_CMD_GET:
    case OFL_MC_CMD_GETS: return bin ? bin_get(kv, req, out) : text_get(kv, req, out);
    case OFL_MC_CMD_SET:
    case OFL_MC_CMD_ADD:
    case OFL_MC_CMD_REPLACE:
    case OFL_MC_CMD_CAS: return store(kv, req, mode_of(req), out);
    case OFL_MC_CMD_DELETE: return del(kv, req, out);
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

int ofl_kv_exec_trusted(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out)
{
    if (req->cmd == OFL_MC_CMD_SET && req->cas) return store(kv, req, OFL_KV_SET_CAS, out);
    return ofl_kv_exec(kv, req, out);
}

int ofl_kv_exec_error(const struct ofl_mc_req *req, int err, struct ofl_mc_out *out)
{
    int rc = ofl_mc_out_reserve(out, 128);
    if (rc) return rc;
    rc = append(out, ofl_mc_write_error(out->buf + out->len, out->cap - out->len, req, err));
    return rc ? rc : req->fatal ? 1 : 0;
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
