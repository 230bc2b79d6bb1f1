/* The payload of an IPv4/UDP datagram, for elements that rewrite it whole (the crypto
 * elements): where it is, and setting its new length in the headers. */
#ifndef OFL_UDP4_PAYLOAD_H
#define OFL_UDP4_PAYLOAD_H

#include <stdint.h>

#include "offlow/pkt.h"

/* Set the datagram's payload length to `n` bytes: the IPv4 total length and header
 * checksum, the UDP length, and the UDP checksum to 0 (none, which IPv4 allows: the
 * payload changed). `l3_off`/`l4_off`: the IPv4 and UDP headers' offsets in `d`. The
 * caller has checked that the datagram fits 65,535 bytes. */
static inline void ofl_udp4_set_payload_len(uint8_t *d, uint32_t l3_off, uint32_t l4_off,
                                            uint32_t n)
{
    uint8_t *ip = d + l3_off, *udp = d + l4_off;
    uint32_t hl = (uint32_t)(ip[0] & 15u) * 4u;
    ofl_put_be16(ip + 2, (uint16_t)(l4_off - l3_off + 8u + n));
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, hl));
    ofl_put_be16(udp + 4, (uint16_t)(8u + n));
    ofl_put_be16(udp + 6, 0);
}

#endif
