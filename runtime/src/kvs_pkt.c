/* memcached over UDP inside offlow packets (see kvs_pkt.h). */
#include "offlow/kvs_pkt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/gen.h"

/* Largest reply payload: one datagram of memcached's UDP size, frame header excluded. */
#define REPLY_MAX (OFL_MC_UDP_DGRAM_MAX - OFL_MC_UDP_HDR_LEN)

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
    *hash = ofl_kv_hash(req.key, req.key_len);
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

/* Room for the replies of one datagram: kvexec reserves a value's worth ahead
 * (VALUE_GUESS) before it knows the value, so a reply that fits REPLY_MAX may need
 * this much room while it is written; what does not fit is refused below. */
#define REPLY_ROOM 4096u

/* Run every request of the datagram at `p` (`len` bytes, frame header first) and
 * append the replies to `out`. Returns the request id, or -EINVAL (not a datagram
 * that can be run); *ran counts the requests run or answered with an error;
 * *overflow is set when a reply did not fit `out`, and *bad_req then holds the
 * request being answered (its protocol, opcode, opaque). `trusted`: run the
 * requests with ofl_kv_exec_trusted. */
static int run_datagram(struct ofl_kv *kv, const uint8_t *p, size_t len, int trusted,
                        struct ofl_mc_out *out, unsigned *ran, int *overflow,
                        struct ofl_mc_req *bad_req)
{
    struct ofl_mc_udp_hdr h;
    if (ofl_mc_udp_parse(p, len, &h) < 0) return -EINVAL;
    struct ofl_mc_limits lim = ofl_mc_default_limits();
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
                 : trusted ? ofl_kv_exec_trusted(kv, &req, out)
                           : ofl_kv_exec(kv, &req, out);
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

int ofl_kvs_reply(struct ofl_kv *kv, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  int from_cache)
{
    size_t len;
    const uint8_t *p = ofl_kvs_udp_payload(pkt, l4_off, &len);
    if (!p || l3_off + 20 > l4_off) return -EINVAL;
    /* Replies go to a buffer of their own: they overwrite the request's bytes. */
    uint8_t buf[REPLY_ROOM];
    struct ofl_mc_out out = {.buf = buf, .cap = sizeof buf, .max = sizeof buf};
    struct ofl_mc_req bad;
    int overflow;
    unsigned ran;
    int id = run_datagram(kv, p, len, from_cache, &out, &ran, &overflow, &bad);
    if (id < 0) return id;
    if (ran == 0) return OFL_KVS_NONE;   /* no request, or cut short: as memcached */
    if (overflow || out.len > REPLY_MAX) {
        /* Longer than one datagram: memcached's answer when it cannot build a reply. */
        if (!overflow) ofl_mc_parse(p + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN,
                                    OFL_MC_ANY, NULL, &bad);
        ssize_t n = bad.proto == OFL_MC_BINARY
                        ? ofl_mc_write_status(buf, sizeof buf, bad.opcode, bad.opaque,
                                              OFL_MC_ST_ENOMEM)
                        : ofl_mc_write_text_line(buf, sizeof buf,
                                                 "SERVER_ERROR out of memory writing get response");
        out.len = n > 0 ? (size_t)n : 0;
        out.expiring = 0;   /* the answer holds no value */
    }
    /* A datagram without an answer (quiet requests, noreply) still gets one, with no
     * payload: memcached's header-only datagram (seq 0, count 0), so a gateway waiting
     * for each request's reply hears of it. */
    size_t payload = OFL_MC_UDP_HDR_LEN + out.len;
    if ((size_t)l4_off + 8 + payload > pkt->cap) return -EMSGSIZE;
    uint8_t *d = pkt->data + l4_off + 8;
    ofl_mc_udp_write(d, (uint16_t)id, 0, out.len ? 1 : 0);
    if (out.len) memcpy(d + OFL_MC_UDP_HDR_LEN, buf, out.len);
    ofl_kvs_swap_addrs(pkt->data, l3_off, l4_off);
    ofl_kvs_set_lengths(pkt->data, l3_off, l4_off, payload);
    pkt->len = (uint32_t)(l4_off + 8 + payload);
    return out.expiring ? OFL_KVS_SEND_EXPIRING : OFL_KVS_SEND;
}

int ofl_kvs_open_opts(struct ofl_kv **t, const struct ofl_args *a, const char *name)
{
    struct ofl_kv_config cfg = {0, 0, 0, 0};
    const char *keys[3] = {"capacity", "mem", "value_max"};
    const char *dflt[3] = {"1000000", "0", "1400"};
    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        const char *s = ofl_args_get(a, name, keys[i], dflt[i]);
        char *end;
        v[i] = strtoull(s, &end, 10);
        if (end == s || *end) {
            fprintf(stderr, "offlow %s: store %s: %s=%s is not a number\n", a->device, name,
                    keys[i], s);
            return -EINVAL;
        }
    }
    cfg.capacity = v[0];
    cfg.mem_bytes = v[1];
    cfg.value_max = v[2] > OFL_MC_VALUE_MAX_DEFAULT ? OFL_MC_VALUE_MAX_DEFAULT : (uint32_t)v[2];
    int rc = ofl_kv_create(t, &cfg);
    if (rc < 0)
        fprintf(stderr, "offlow %s: store %s (capacity %llu): %s\n", a->device, name,
                (unsigned long long)cfg.capacity, ofl_strerror(rc));
    return rc;
}
