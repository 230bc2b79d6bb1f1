/* Packets and bounds-checked header parsing.
 *
 * Every parser takes the frame `p` of `len` bytes (and, above Ethernet, the
 * offset `off` of its header), never reads at or past `p + len`, and returns 0
 * or a negative reason from err.h:
 *   OFL_ETRUNC    the frame is shorter than the headers (or their length fields) say
 *   OFL_EBADHDR   a field has an impossible value (IHL < 5, TCP data offset < 5, ...)
 *   OFL_EVERSION  the IP version nibble is not the expected one
 *   OFL_EUNSUPP   something the parser does not handle (three VLAN tags, ...)
 *   OFL_ELENGTH   a length field runs past the IP packet that holds it
 * Multi-byte results are in host byte order. Outputs are written only on success.
 *
 * Checksums: ofl_csum() returns the value to store in a checksum field (written
 * big-endian, like every field); a header that carries a correct checksum sums to
 * ofl_csum() == 0. Updates of a single 16-bit word are incremental (RFC 1624). */
#ifndef OFL_PKT_H
#define OFL_PKT_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/err.h"

/* A packet in a buffer owned by someone else (a source's buffers, a queue entry). */
struct ofl_pkt {
    uint8_t *data;   /* first byte of the Ethernet frame */
    uint32_t len;    /* bytes of frame in `data` */
    uint32_t cap;    /* bytes available at `data` (>= len) */
    uint64_t ts_ns;  /* capture time, ns since the epoch (sources set it) */
    uint32_t seg;    /* UDP segmentation (as UDP GSO): a sink sends a UDP payload longer
                        than this as datagrams of `seg` bytes, the last shorter; 0: one
                        datagram. Set by an element for the sink of its own segment: a
                        queue does not carry it. */
};

#define OFL_ETH_HLEN 14u
#define OFL_ETHERTYPE_IPV4 0x0800u
#define OFL_ETHERTYPE_IPV6 0x86DDu
#define OFL_ETHERTYPE_VLAN 0x8100u   /* 802.1Q */
#define OFL_ETHERTYPE_QINQ 0x88A8u   /* 802.1ad service tag */
#define OFL_ETHERTYPE_QINQ_OLD 0x9100u
#define OFL_IPV4_HLEN 20u
#define OFL_IPV6_HLEN 40u
#define OFL_UDP_HLEN 8u
#define OFL_TCP_HLEN 20u
/* Most IPv6 extension headers ofl_parse_ipv6 walks before giving up (OFL_EUNSUPP). */
#define OFL_IPV6_MAX_EXT 8u

/* Big-endian 16/32-bit loads and stores (any alignment). */
static inline uint16_t ofl_get_be16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t ofl_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void ofl_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void ofl_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ---- checksums ------------------------------------------------------------ */

/* Add `len` bytes at `data`, as big-endian 16-bit words (an odd last byte is
 * padded with zero), to the unfolded one's-complement sum `sum`; returns the new
 * sum. Chain calls for pseudo-headers; an odd length is only allowed last. */
uint64_t ofl_csum_add(uint64_t sum, const void *data, size_t len);

/* Fold a sum from ofl_csum_add to 16 bits (end-around carry), not complemented. */
static inline uint16_t ofl_csum_fold(uint64_t sum)
{
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)sum;
}

/* Internet checksum (RFC 1071) of `len` bytes: the value to store in the
 * checksum field (host order; store it big-endian). Over data that already holds
 * a correct checksum it returns 0. */
static inline uint16_t ofl_csum(const void *data, size_t len)
{
    return (uint16_t)~ofl_csum_fold(ofl_csum_add(0, data, len));
}

/* 1 if the IPv4 header `hdr` of `hdr_len` bytes (from ofl_parse_ipv4) has a
 * correct header checksum, else 0 (also 0 for hdr_len < 20, over 60 (IHL is 4 bits)
 * or not a multiple of 4). */
static inline int ofl_ipv4_csum_ok(const uint8_t *hdr, uint32_t hdr_len)
{
    if (hdr_len == OFL_IPV4_HLEN) {
        /* The usual header, no options: five words in the CPU's own byte order. The
         * one's-complement sum of byte-swapped words is the sum times 2^8 (mod
         * 0xFFFF), so it folds to 0xFFFF exactly when the big-endian sum does. */
        uint32_t w[5];
        __builtin_memcpy(w, hdr, sizeof w);
        uint64_t s = (uint64_t)w[0] + w[1] + w[2] + w[3] + w[4];
        return ofl_csum_fold(s) == 0xFFFF;
    }
    if (hdr_len < OFL_IPV4_HLEN || hdr_len > 60u || (hdr_len & 3)) return 0;
    uint64_t sum = 0;
    /* a constant bound too (for the BPF verifier), but no steps past the header */
    for (uint32_t k = 0; k < 60u && k < hdr_len; k += 4) sum += ofl_get_be32(hdr + k);
    return ofl_csum_fold(sum) == 0xFFFF;
}

/* RFC 1624 eqn. 3: the checksum `hc` (host order) after a 16-bit word of the
 * covered data changes from `old` to `new_`: HC' = ~(~HC + ~m + m'). */
static inline uint16_t ofl_csum_update16(uint16_t hc, uint16_t old, uint16_t new_)
{
    uint32_t s = (uint32_t)(uint16_t)~hc + (uint16_t)~old + new_;
    /* three 16-bit words: two folds end every carry (s < 3 * 2^16, then <= 0xFFFF + 2) */
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)~s;
}

/* Decrement the TTL of the IPv4 header at `iphdr` (at least 20 bytes, already
 * parsed) and update its checksum incrementally. The caller drops TTL <= 1 first;
 * a TTL of 0 wraps to 255 with a still-correct checksum. */
static inline void ofl_ipv4_dec_ttl(uint8_t *iphdr)
{
    uint16_t old = ofl_get_be16(iphdr + 8);           /* TTL << 8 | protocol */
    uint16_t new_ = (uint16_t)(old - 0x100);
    uint16_t hc = ofl_get_be16(iphdr + 10);
    ofl_put_be16(iphdr + 8, new_);
    ofl_put_be16(iphdr + 10, ofl_csum_update16(hc, old, new_));
}

/* ---- parsers ----------------------------------------------------------------- */

/* Ethernet II with zero, one or two VLAN tags (802.1Q 0x8100, 802.1ad 0x88A8 or
 * 0x9100). Sets `*ethertype` (host order; values < 0x0600 are 802.3 lengths,
 * returned as they are) and `*l3_off`, the offset of the network header.
 * OFL_ETRUNC: shorter than the header and its tags; OFL_EUNSUPP: a third tag.
 * Inline: it runs per packet in element bodies (ParseEth). */
static inline int ofl_parse_eth(const uint8_t *p, uint32_t len, uint16_t *ethertype,
                                uint32_t *l3_off)
{
    if (len < OFL_ETH_HLEN) return OFL_ETRUNC;
    uint16_t et = ofl_get_be16(p + 12);
    uint32_t off = OFL_ETH_HLEN;
    for (int tags = 0; et == OFL_ETHERTYPE_VLAN || et == OFL_ETHERTYPE_QINQ ||
                       et == OFL_ETHERTYPE_QINQ_OLD; tags++) {
        if (tags == 2) return OFL_EUNSUPP;
        /* A tag is 2 bytes of TCI then the next ethertype. */
        if (len - off < 4) return OFL_ETRUNC;
        et = ofl_get_be16(p + off + 2);
        off += 4;
    }
    *ethertype = et;
    *l3_off = off;
    return 0;
}

/* Whether an IP packet is a fragment: not one, the first (offset 0, more to come:
 * it starts with the transport header) or a later one (no transport header). */
enum { OFL_FRAG_NONE = 0, OFL_FRAG_FIRST = 1, OFL_FRAG_LATER = 2 };

/* What ofl_parse_ipv4 found. */
struct ofl_ipv4_info {
    uint32_t hdr_len;   /* IHL * 4; the transport header is at off + hdr_len */
    uint32_t end;       /* off + total length: the IP packet's end (then padding) */
    uint8_t proto;
    uint8_t ttl;
    uint8_t frag;       /* OFL_FRAG_* */
    uint32_t src, dst;  /* host order */
};

/* The IPv4 header at `off`: version 4 (else OFL_EVERSION), IHL >= 5 (OFL_EBADHDR),
 * header within `len` (OFL_ETRUNC), total length >= header length (OFL_EBADHDR)
 * and <= len - off (OFL_ETRUNC; longer frames are Ethernet padding). Fragments and
 * options are accepted; the checksum is not checked (ofl_ipv4_csum_ok). Inline: it
 * runs per packet in element bodies (CheckIPv4). */
static inline int ofl_parse_ipv4(const uint8_t *p, uint32_t len, uint32_t off,
                                 struct ofl_ipv4_info *ip)
{
    if (off > len || len - off < OFL_IPV4_HLEN) return OFL_ETRUNC;
    const uint8_t *h = p + off;
    uint32_t avail = len - off;
    if (h[0] >> 4 != 4) return OFL_EVERSION;
    uint32_t hl = (uint32_t)(h[0] & 0x0F) * 4;
    if (hl < OFL_IPV4_HLEN) return OFL_EBADHDR;
    if (hl > avail) return OFL_ETRUNC;
    uint32_t tot = ofl_get_be16(h + 2);
    if (tot < hl) return OFL_EBADHDR;
    if (tot > avail) return OFL_ETRUNC;
    uint16_t fl = ofl_get_be16(h + 6);   /* flags (MF: 0x2000) and fragment offset */
    ip->hdr_len = hl;
    ip->end = off + tot;
    ip->frag = (fl & 0x1FFF) ? OFL_FRAG_LATER : (fl & 0x2000) ? OFL_FRAG_FIRST : OFL_FRAG_NONE;
    ip->ttl = h[8];
    ip->proto = h[9];
    ip->src = ofl_get_be32(h + 12);
    ip->dst = ofl_get_be32(h + 16);
    return 0;
}

/* What ofl_parse_ipv6 found. */
struct ofl_ipv6_info {
    uint32_t l4_off;     /* offset of the header after the extension headers */
    uint32_t end;        /* off + 40 + payload length: the IP packet's end */
    uint8_t proto;       /* its protocol: the last Next Header value */
    uint8_t hop_limit;
    uint8_t frag;        /* OFL_FRAG_* (from a fragment header) */
    uint8_t src[16], dst[16];
};

/* The IPv6 header at `off`: version 6 (OFL_EVERSION), payload within `len`
 * (OFL_ETRUNC), then the extension headers hop-by-hop (0, only first), routing
 * (43), fragment (44), destination options (60) and AH (51), each within the
 * payload (OFL_ETRUNC); hop-by-hop elsewhere is OFL_EBADHDR, more than
 * OFL_IPV6_MAX_EXT headers OFL_EUNSUPP. Any other Next Header ends the walk, and so
 * does the fragment header of a later fragment (what follows it is payload). */
int ofl_parse_ipv6(const uint8_t *p, uint32_t len, uint32_t off, struct ofl_ipv6_info *ip);

/* The UDP header at `off`: 8 bytes within `len` (OFL_ETRUNC), length field >= 8
 * (OFL_EBADHDR; it is not compared with `len`, so first fragments pass).
 * Sets the ports (host order). */
int ofl_parse_udp(const uint8_t *p, uint32_t len, uint32_t off, uint16_t *sport,
                  uint16_t *dport);

/* The TCP header at `off`: 20 bytes within `len` (OFL_ETRUNC), data offset >= 5
 * (OFL_EBADHDR) and the whole header with options within `len` (OFL_ETRUNC).
 * Sets the ports (host order). */
int ofl_parse_tcp(const uint8_t *p, uint32_t len, uint32_t off, uint16_t *sport,
                  uint16_t *dport);

/* The transport header of protocol `proto` at `off` of an IP packet that ends at
 * `end` (ofl_ipv4_info/ofl_ipv6_info's, at most the frame's length) and is fragment
 * `frag`: UDP (17) and TCP (6) headers within the IP payload (OFL_ETRUNC), a UDP
 * length >= 8 and a TCP data offset >= 5 (OFL_EBADHDR), a UDP length within the
 * payload unless the packet is a first fragment and a TCP header with its options
 * within it (OFL_ELENGTH). Sets the ports (host order); 0 for other protocols and
 * later fragments (which hold no transport header). */
int ofl_parse_l4(const uint8_t *p, uint32_t end, uint32_t off, uint8_t proto, uint8_t frag,
                 uint16_t *sport, uint16_t *dport);

#endif
