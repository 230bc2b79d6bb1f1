/* Tuple frames: finding the values in a frame, writing a frame of new values. */
#include "offlow/tuple.h"

#include "offlow/pkt.h"

int ofl_tuple_parse(const uint8_t *p, uint32_t len, struct ofl_tuple_view *t)
{
    uint16_t et, sport, dport;
    struct ofl_ipv4_info ip;
    if (ofl_parse_eth(p, len, &et, &t->l3_off) < 0 || et != 0x0800 ||
        ofl_parse_ipv4(p, len, t->l3_off, &ip) < 0 || ip.proto != 17 ||
        ip.frag != OFL_FRAG_NONE)
        return OFL_TUPLE_ENOTUDP;
    t->l4_off = t->l3_off + ip.hdr_len;
    if (ofl_parse_l4(p, ip.end, t->l4_off, 17, OFL_FRAG_NONE, &sport, &dport) < 0)
        return OFL_TUPLE_ENOTUDP;
    uint32_t bytes = (uint32_t)ofl_get_be16(p + t->l4_off + 4) - 8u;
    if (!bytes || bytes % 4u || bytes / 4u > OFL_TUPLE_MAX)
        return OFL_TUPLE_ESIZE;
    t->off = t->l4_off + 8u;
    t->n = bytes / 4u;
    t->end = t->off + bytes;
    t->sport = sport;
    t->dport = dport;
    return 0;
}

void ofl_tuple_values(const uint8_t *p, const struct ofl_tuple_view *t, int32_t *v)
{
    for (uint32_t k = 0; k < t->n; k++)
        v[k] = ofl_tuple_v(p, t, k + 1u);
}

uint32_t ofl_tuple_write(uint8_t *buf, uint32_t cap, const uint8_t *tmpl,
                         const struct ofl_tuple_view *tv, const int32_t *v, uint32_t n)
{
    uint32_t len = tv->off + 4u * n;
    if (!n || n > OFL_TUPLE_MAX || len > cap)
        return 0;
    int32_t vals[OFL_TUPLE_MAX];
    memcpy(vals, v, 4u * n);   /* v may lie in buf's payload */
    if (buf != tmpl)
        memcpy(buf, tmpl, tv->off);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)vals[k];
        uint8_t *q = buf + tv->off + 4u * k;
        q[0] = (uint8_t)x; q[1] = (uint8_t)(x >> 8); q[2] = (uint8_t)(x >> 16);
        q[3] = (uint8_t)(x >> 24);
    }
    uint8_t *ip = buf + tv->l3_off;
    ofl_put_be16(ip + 2, (uint16_t)(len - tv->l3_off));
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, tv->l4_off - tv->l3_off));
    ofl_put_be16(buf + tv->l4_off + 4, (uint16_t)(len - tv->l4_off));
    ofl_put_be16(buf + tv->l4_off + 6, 0);
    return len;
}
