/* Bounds-checked header parsers and the Internet checksum. No libc: this file is also
 * compiled into every XDP program (offlow/bpf.h), where its functions are inlined. */
#include "offlow/pkt.h"

uint64_t ofl_csum_add(uint64_t sum, const void *data, size_t len)
{
    const uint8_t *p = data;
    /* Big-endian 32-bit words: 2^16 == 1 (mod 0xFFFF), so their sum folds to the
     * same one's-complement sum as the 16-bit words would. */
    while (len >= 4) {
        uint32_t w;
        __builtin_memcpy(&w, p, 4);
        sum += __builtin_bswap32(w);
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        sum += ofl_get_be16(p);
        p += 2;
        len -= 2;
    }
    if (len) sum += (uint32_t)p[0] << 8;
    return sum;
}

int ofl_parse_ipv6(const uint8_t *p, uint32_t len, uint32_t off, struct ofl_ipv6_info *ip)
{
    if (off > len || len - off < OFL_IPV6_HLEN) return OFL_ETRUNC;
    const uint8_t *h = p + off;
    if (h[0] >> 4 != 6) return OFL_EVERSION;
    uint32_t plen = ofl_get_be16(h + 4);
    if (plen > len - off - OFL_IPV6_HLEN) return OFL_ETRUNC;
    /* Extension headers must lie within the declared payload, not the padding. */
    uint32_t end = off + OFL_IPV6_HLEN + plen;
    uint32_t cur = off + OFL_IPV6_HLEN;
    uint8_t nh = h[6], frag = OFL_FRAG_NONE;
    for (uint32_t n = 0;; n++) {
        uint32_t hl;
        if (nh == 0 || nh == 43 || nh == 44 || nh == 60 || nh == 51) {
            if (n == OFL_IPV6_MAX_EXT) return OFL_EUNSUPP;
            if (nh == 0 && n != 0) return OFL_EBADHDR;
            if (end - cur < 8) return OFL_ETRUNC;   /* every one is >= 8 bytes */
            if (nh == 44) hl = 8;
            else if (nh == 51) hl = ((uint32_t)p[cur + 1] + 2) * 4;
            else hl = ((uint32_t)p[cur + 1] + 1) * 8;
            if (hl > end - cur) return OFL_ETRUNC;
            uint16_t fo = nh == 44 ? ofl_get_be16(p + cur + 2) : 0;  /* offset << 3 | M */
            nh = p[cur];
            cur += hl;
            if (fo >> 3) {   /* a later fragment: payload follows, not headers */
                frag = OFL_FRAG_LATER;
                break;
            }
            if (fo & 1) frag = OFL_FRAG_FIRST;
            continue;
        }
        break;
    }
    ip->l4_off = cur;
    ip->end = end;
    ip->frag = frag;
    ip->proto = nh;
    ip->hop_limit = h[7];
    __builtin_memcpy(ip->src, h + 8, 16);
    __builtin_memcpy(ip->dst, h + 24, 16);
    return 0;
}

int ofl_parse_udp(const uint8_t *p, uint32_t len, uint32_t off, uint16_t *sport,
                  uint16_t *dport)
{
    if (off > len || len - off < OFL_UDP_HLEN) return OFL_ETRUNC;
    const uint8_t *u = p + off;
    if (ofl_get_be16(u + 4) < OFL_UDP_HLEN) return OFL_EBADHDR;
    *sport = ofl_get_be16(u);
    *dport = ofl_get_be16(u + 2);
    return 0;
}

int ofl_parse_tcp(const uint8_t *p, uint32_t len, uint32_t off, uint16_t *sport,
                  uint16_t *dport)
{
    if (off > len || len - off < OFL_TCP_HLEN) return OFL_ETRUNC;
    const uint8_t *t = p + off;
    uint32_t hl = (uint32_t)(t[12] >> 4) * 4;
    if (hl < OFL_TCP_HLEN) return OFL_EBADHDR;
    if (hl > len - off) return OFL_ETRUNC;
    *sport = ofl_get_be16(t);
    *dport = ofl_get_be16(t + 2);
    return 0;
}

int ofl_parse_l4(const uint8_t *p, uint32_t end, uint32_t off, uint8_t proto, uint8_t frag,
                 uint16_t *sport, uint16_t *dport)
{
    if (frag == OFL_FRAG_LATER || (proto != 17 && proto != 6)) {
        *sport = *dport = 0;
        return 0;
    }
    if (off > end) return OFL_ETRUNC;
    const uint8_t *h = p + off;
    uint32_t room = end - off;
    if (proto == 17) {
        if (room < OFL_UDP_HLEN) return OFL_ETRUNC;
        uint32_t ulen = ofl_get_be16(h + 4);
        if (ulen < OFL_UDP_HLEN) return OFL_EBADHDR;
        /* A first fragment's UDP length covers the whole datagram. */
        if (ulen > room && frag != OFL_FRAG_FIRST) return OFL_ELENGTH;
    } else {
        if (room < OFL_TCP_HLEN) return OFL_ETRUNC;
        uint32_t hl = (uint32_t)(h[12] >> 4) * 4;
        if (hl < OFL_TCP_HLEN) return OFL_EBADHDR;
        if (hl > room) return OFL_ELENGTH;
    }
    *sport = ofl_get_be16(h);
    *dport = ofl_get_be16(h + 2);
    return 0;
}
