/* The payload of an IPv4/UDP datagram, for elements that rewrite it whole (the crypto
 * elements): where it is, and giving it a new length. */
#ifndef OFL_UDP4_PAYLOAD_H
#define OFL_UDP4_PAYLOAD_H

#include <stdint.h>

#include "offlow/pkt.h"

/* The UDP payload of `pkt` (IP header at `l3_off`, UDP header at `l4_off`, the IP packet
 * ending at `l4_end`, as CheckIPv4 and ParseL4 recorded them): its offset in *off and
 * its length (by the UDP length field) in *len. Returns 0, or -1 when the packet is not
 * IPv4, or the header or the payload it claims does not fit the packet. */
static inline int ofl_udp4_payload(const struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                                   uint32_t l4_end, uint32_t *off, uint32_t *len)
{
    uint32_t end = l4_end < pkt->len ? l4_end : pkt->len;
    if (l3_off >= end || pkt->data[l3_off] >> 4 != 4 || l4_off + 8u > end)
        return -1;
    uint32_t ulen = ofl_get_be16(pkt->data + l4_off + 4);
    if (ulen < 8u || l4_off + ulen > end)
        return -1;
    *off = l4_off + 8u;
    *len = ulen - 8u;
    return 0;
}

/* The room for a new payload at `off`: up to `max` bytes of frame (the program's mtu,
 * the buffer's cap, whichever is smaller) and an IPv4 total length of 65,535. */
static inline uint32_t ofl_udp4_room(const struct ofl_pkt *pkt, uint32_t l3_off, uint32_t off,
                                     uint32_t max)
{
    uint32_t frame = pkt->cap < max ? pkt->cap : max;
    uint32_t ip = 65535u + l3_off;
    uint32_t end = frame < ip ? frame : ip;
    return end > off ? end - off : 0;
}

/* Give the datagram a payload of `n` bytes (already written at l4_off + 8): the IPv4
 * total length and header checksum, the UDP length, the UDP checksum 0 (none, which
 * IPv4 allows), and the frame's length (what followed the IP packet is gone). The
 * caller has checked that n fits ofl_udp4_room. */
static inline void ofl_udp4_set_payload_len(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                                            uint32_t n)
{
    uint8_t *ip = pkt->data + l3_off, *udp = pkt->data + l4_off;
    uint32_t hl = (uint32_t)(ip[0] & 15u) * 4u;
    ofl_put_be16(ip + 2, (uint16_t)(l4_off - l3_off + 8u + n));
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, hl));
    ofl_put_be16(udp + 4, (uint16_t)(8u + n));
    ofl_put_be16(udp + 6, 0);
    pkt->len = l4_off + 8u + n;
}

#endif
