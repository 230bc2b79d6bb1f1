/* memcached over UDP inside offlow packets (see kvs_pkt.h). */
#include "offlow/kvs_pkt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/err.h"

const uint8_t *ofl_kvs_udp_payload(const struct ofl_pkt *pkt, uint32_t l4_off, size_t *len)
{
    if (pkt->len > pkt->cap || l4_off > pkt->len || pkt->len - l4_off < 8) return NULL;
    uint32_t ulen = ofl_get_be16(pkt->data + l4_off + 4);
    if (ulen < 8 || ulen > pkt->len - l4_off) return NULL;
    *len = ulen - 8;
    return pkt->data + l4_off + 8;
}

int ofl_kvs_key_hash(const struct ofl_pkt *pkt, uint32_t l4_off, uint64_t *hash)
{
    size_t len;
    const uint8_t *p = ofl_kvs_udp_payload(pkt, l4_off, &len);
    struct ofl_mc_udp_hdr h;
    if (!p || ofl_mc_udp_parse(p, len, &h) < 0) return -EINVAL;
    struct ofl_mc_req req;
    if (ofl_mc_parse(p + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN, OFL_MC_ANY, NULL,
                     &req) <= 0 || !req.key_len)
        return -EINVAL;
    uint8_t key[OFL_MC_KEY_MAX];   /* a meta command's base64 key: the key it names */
    size_t klen = req.key_b64 ? ofl_mc_key_decode(req.key, req.key_len, key) : 0;
    *hash = klen ? ofl_kv_hash(key, klen) : ofl_kv_hash(req.key, req.key_len);
    return 0;
}

/* The store's hash of one key (a meta command's base64 key decoded first). */
static uint64_t key_hash_of(const uint8_t *key, size_t len, int b64)
{
    uint8_t raw[OFL_MC_KEY_MAX];
    size_t n = b64 ? ofl_mc_key_decode(key, len, raw) : 0;
    return n ? ofl_kv_hash(raw, n) : ofl_kv_hash(key, len);
}

int ofl_kvs_keys_span(const struct ofl_pkt *pkt, uint32_t l4_off, uint32_t steer,
                      const uint8_t *shard_of, uint32_t instances)
{
    size_t len;
    const uint8_t *p = ofl_kvs_udp_payload(pkt, l4_off, &len);
    struct ofl_mc_udp_hdr h;
    if (!p || !instances || ofl_mc_udp_parse(p, len, &h) < 0) return -EINVAL;
    const uint8_t home = shard_of[steer % instances];
    enum ofl_mc_proto proto = OFL_MC_ANY;
    for (size_t off = OFL_MC_UDP_HDR_LEN; off < len;) {
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(p + off, len - off, proto, NULL, &req);
        proto = (enum ofl_mc_proto)req.proto;
        if (r == 0 || (r < 0 && req.fatal)) break;   /* where the store stops too */
        if (r < 0) {   /* the store answers it with an error and goes on after it */
            off = req.len < len - off ? off + req.len : len;
            continue;
        }
        /* the first request's first key is the one steered by (ofl_kvs_key_hash) */
        int steered = off == OFL_MC_UDP_HDR_LEN;
        off += (size_t)r;
        const uint8_t *pos = req.keys, *key = req.key;
        uint32_t klen = req.key_len;
        int many = req.nkeys > 1 && req.keys;
        if (many && !ofl_mc_next_key(&pos, req.keys + req.keys_len, &key, &klen)) continue;
        while (klen) {
            if (!steered) {
                uint32_t h32 = (uint32_t)(key_hash_of(key, klen, req.key_b64) >> 32);
                if (shard_of[h32 % instances] != home) return 1;
            }
            steered = 0;
            if (!many || !ofl_mc_next_key(&pos, req.keys + req.keys_len, &key, &klen)) break;
        }
    }
    return 0;
}

/* memcached's error for one request that would need several shards. */
static ssize_t refusal(uint8_t *out, size_t cap, const struct ofl_mc_req *req)
{
    if (req->proto == OFL_MC_BINARY)
        return ofl_mc_write_status(out, cap, req->opcode, req->opaque, OFL_MC_ST_ETMPFAIL);
    return ofl_mc_write_text_line(out, cap, "SERVER_ERROR multi-key request spans shards; "
                                            "use TCP or one key per request");
}

int ofl_kvs_refuse_span(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off)
{
    size_t len;
    const uint8_t *p = ofl_kvs_udp_payload(pkt, l4_off, &len);
    struct ofl_mc_udp_hdr h;
    if (!p || l3_off + 20 > l4_off || ofl_mc_udp_parse(p, len, &h) < 0) return -EINVAL;
    uint8_t buf[2048];
    size_t n = 0, first = 0;
    enum ofl_mc_proto proto = OFL_MC_ANY;
    for (size_t off = OFL_MC_UDP_HDR_LEN; off < len;) {
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(p + off, len - off, proto, NULL, &req);
        proto = (enum ofl_mc_proto)req.proto;
        if (r == 0 || (r < 0 && req.fatal)) break;   /* (as the store and the walk) */
        ssize_t w = refusal(buf + n, sizeof buf - n, &req);
        if (w < 0) break;
        n += (size_t)w;
        first = first ? first : n;
        off = r > 0 ? off + (size_t)r : req.len < len - off ? off + req.len : len;
    }
    if (!first) return -EINVAL;
    int rc = ofl_kvs_frame(pkt, l3_off, l4_off, h.request_id, buf, n);
    if (rc == -EMSGSIZE && n > first)   /* more than the packet holds: the first alone */
        rc = ofl_kvs_frame(pkt, l3_off, l4_off, h.request_id, buf, first);
    if (rc < 0) return rc;
    ofl_kvs_swap_addrs(pkt->data, l3_off, l4_off);
    return 0;
}

void ofl_kvs_set_lengths(uint8_t *frame, uint32_t l3_off, uint32_t l4_off, size_t payload)
{
    uint8_t *ip = frame + l3_off, *udp = frame + l4_off;
    ofl_put_be16(udp + 4, (uint16_t)(8 + payload));
    ofl_put_be16(udp + 6, 0);
    ofl_put_be16(ip + 2, (uint16_t)(l4_off - l3_off + 8 + payload));
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, l4_off - l3_off));
}

void ofl_kvs_swap_addrs(uint8_t *frame, uint32_t l3_off, uint32_t l4_off)
{
    uint8_t tmp[6];
    memcpy(tmp, frame, 6);
    memmove(frame, frame + 6, 6);
    memcpy(frame + 6, tmp, 6);
    uint8_t *ip = frame + l3_off, *udp = frame + l4_off;
    memcpy(tmp, ip + 12, 4);
    memmove(ip + 12, ip + 16, 4);
    memcpy(ip + 16, tmp, 4);
    memcpy(tmp, udp, 2);
    memmove(udp, udp + 2, 2);
    memcpy(udp + 2, tmp, 2);
    ip[8] = 64;
}

/* Largest payload of one reply datagram, and what is left of it after the frame header. */
#define DGRAM_MAX OFL_MC_UDP_DGRAM_MAX
#define DGRAM_PAYLOAD (OFL_MC_UDP_DGRAM_MAX - OFL_MC_UDP_HDR_LEN)
/* The reply buffer on the stack (longer replies move to the heap: ofl_mc_out's
 * borrowed buffer); no reply is longer than a packet (65,507 bytes of UDP payload). */
#define REPLY_STACK 2048u
#define REPLY_ROOM 65536u

/* Run every request of the datagram at `p` (`len` bytes, frame header first) and
 * append the replies to `out`. Returns the request id, or -EINVAL (not a datagram
 * that can be run); *ran counts the requests run or answered with an error;
 * *overflow is set when a reply did not fit `out`, and *bad_req then holds the
 * request being answered (its protocol, opcode, opaque). `trusted`: run the
 * requests with ofl_kv_exec_trusted. */
static int run_datagram(struct ofl_kvs *t, const uint8_t *p, size_t len, int trusted,
                        struct ofl_mc_out *out, unsigned *ran, int *overflow,
                        struct ofl_mc_req *bad_req)
{
    struct ofl_mc_udp_hdr h;
    if (ofl_mc_udp_parse(p, len, &h) < 0) return -EINVAL;
    struct ofl_mc_limits lim = ofl_mc_default_limits();
    lim.value_max = t->value_max;
    size_t off = OFL_MC_UDP_HDR_LEN;
    enum ofl_mc_proto proto = OFL_MC_ANY;
    *overflow = 0;
    *ran = 0;
    while (off < len) {   /* as ofl_kv_exec_udp, but a reply that does not fit is known */
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(p + off, len - off, proto, &lim, &req);
        proto = (enum ofl_mc_proto)req.proto;
        if (r == 0) break;   /* the datagram ends inside a request: nothing for it */
        size_t before = out->len;
        ++*ran;
        int rc = r < 0     ? ofl_kv_exec_error(&req, (int)r, out)
                 : trusted ? ofl_kv_exec_trusted(t->kv, &req, out)
                           : ofl_kv_exec_env(t->kv, &req, out, &t->env);
        if (rc < 0) {
            out->len = before;
            *overflow = 1;
            *bad_req = req;
            break;
        }
        if (r < 0) off = req.len < len - off ? off + req.len : len;
        else off += (size_t)r;
        if (req.fatal || rc == 1) break;   /* quit means nothing more on UDP */
    }
    return h.request_id;
}

/* Datagrams a reply of `n` bytes takes (the frame header alone for 0). */
static size_t dgrams_of(size_t n)
{
    return n ? (n + DGRAM_PAYLOAD - 1) / DGRAM_PAYLOAD : 1;
}

int ofl_kvs_reply(struct ofl_kvs *t, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  int from_cache)
{
    size_t len;
    const uint8_t *p = ofl_kvs_udp_payload(pkt, l4_off, &len);
    if (!p || l3_off + 20 > l4_off || (size_t)l4_off + 8 + OFL_MC_UDP_HDR_LEN > pkt->cap)
        return -EINVAL;
    /* The room for the reply: the packet's payload less a frame header per datagram
     * (replies go to a buffer of their own: they overwrite the request's bytes). */
    size_t room = pkt->cap > (size_t)l4_off + 8 ? pkt->cap - l4_off - 8 : 0;
    if (room > REPLY_ROOM) room = REPLY_ROOM;
    size_t max = room - OFL_MC_UDP_HDR_LEN * dgrams_of(room);
    uint8_t buf[REPLY_STACK];
    struct ofl_mc_out out = {.buf = buf, .cap = sizeof buf < max ? sizeof buf : max, .max = max,
                             .borrowed = 1};
    struct ofl_mc_req bad;
    memset(&bad, 0, sizeof bad);
    int overflow;
    unsigned ran;
    int id = run_datagram(t, p, len, from_cache, &out, &ran, &overflow, &bad);
    if (id < 0 || ran == 0) {   /* not a datagram, or no request / cut short: as memcached */
        ofl_mc_out_free(&out);
        return id < 0 ? id : OFL_KVS_NONE;
    }
    if (overflow) {
        /* Longer than the packet: memcached's answer when it cannot build a reply. */
        ofl_mc_out_free(&out);
        ssize_t n = bad.proto == OFL_MC_BINARY
                        ? ofl_mc_write_status(buf, sizeof buf, bad.opcode, bad.opaque,
                                              OFL_MC_ST_ENOMEM)
                        : ofl_mc_write_text_line(buf, sizeof buf,
                                                 "SERVER_ERROR out of memory writing get response");
        out = (struct ofl_mc_out){.buf = buf, .len = n > 0 ? (size_t)n : 0, .borrowed = 1};
    }
    int rc = ofl_kvs_frame(pkt, l3_off, l4_off, (uint16_t)id, out.buf, out.len);
    int expiring = out.expiring;
    ofl_mc_out_free(&out);
    if (rc < 0) return rc;
    ofl_kvs_swap_addrs(pkt->data, l3_off, l4_off);
    return expiring ? OFL_KVS_SEND_EXPIRING : OFL_KVS_SEND;
}

int ofl_kvs_frame(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off, uint16_t id,
                  const uint8_t *body, size_t len)
{
    /* No answer at all (quiet requests, noreply) is still a datagram, with no payload:
     * memcached's header-only datagram (seq 0, count 0), so a client waiting for each
     * request's reply hears of it. */
    size_t n = len ? dgrams_of(len) : 1;
    size_t payload = OFL_MC_UDP_HDR_LEN * n + len;
    if ((size_t)l4_off + 8 + payload > pkt->cap || n > UINT16_MAX) return -EMSGSIZE;
    uint8_t *d = pkt->data + l4_off + 8;
    for (size_t i = 0; i < n; i++) {
        size_t at = i * DGRAM_PAYLOAD, part = len - at < DGRAM_PAYLOAD ? len - at : DGRAM_PAYLOAD;
        ofl_mc_udp_write(d, id, (uint16_t)i, len ? (uint16_t)n : 0);
        if (len) memmove(d + OFL_MC_UDP_HDR_LEN, body + at, part);
        d += OFL_MC_UDP_HDR_LEN + (len ? part : 0);
    }
    ofl_kvs_set_lengths(pkt->data, l3_off, l4_off, payload);
    pkt->len = (uint32_t)(l4_off + 8 + payload);
    pkt->seg = n > 1 ? DGRAM_MAX : 0;
    return 0;
}

size_t ofl_kvs_unframe(const uint8_t *payload, size_t len, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t at = 0; at < len; at += DGRAM_MAX) {
        size_t dg = len - at < DGRAM_MAX ? len - at : DGRAM_MAX;
        if (dg <= OFL_MC_UDP_HDR_LEN) continue;
        size_t part = dg - OFL_MC_UDP_HDR_LEN;
        if (part > cap - n) part = cap - n;
        memcpy(out + n, payload + at + OFL_MC_UDP_HDR_LEN, part);
        n += part;
    }
    return n;
}
