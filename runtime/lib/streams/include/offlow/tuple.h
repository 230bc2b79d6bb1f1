/* Tuple streams (Aurora's (ts, v1..vn), the active-NIC seed's stream operators): a tuple
 * is a packet, an Ethernet/IPv4/UDP frame whose UDP payload is v1..vn, each a 32-bit
 * signed integer, little-endian (n = payload bytes / 4, 1..OFL_TUPLE_MAX); its ts is the
 * packet's timestamp (pkt->ts_ns: a capture record's time, a datagram's arrival). An
 * attribute is 0 for ts, k for v_k. See docs/streams.md. */
#ifndef OFFLOW_TUPLE_H
#define OFFLOW_TUPLE_H

#include <stdint.h>
#include <string.h>

#define OFL_TUPLE_MAX 128u           /* values per tuple (a join's output holds two of 64) */
#define OFL_TUPLE_FRAME_MAX 1024u    /* Ethernet + two tags + IPv4 with options + UDP + values */

/* Where a tuple lies in its frame. */
struct ofl_tuple_view {
    uint32_t l3_off;   /* the IPv4 header */
    uint32_t l4_off;   /* the UDP header */
    uint32_t off;      /* v1 */
    uint32_t n;        /* values */
    uint32_t end;      /* off + 4 * n: the frame's used bytes (padding excluded) */
    uint16_t sport, dport;
};

/* Why a frame is no tuple (negative, as ofl_tuple_parse returns them). */
enum {
    OFL_TUPLE_ENOTUDP = -1,   /* not Ethernet/IPv4/UDP, a fragment, or a header cut short */
    OFL_TUPLE_ESIZE = -2,     /* UDP payload empty, not a multiple of 4, over OFL_TUPLE_MAX
                                 values or past the frame */
};

/* Finds the tuple in the frame `p` of `len` bytes: 0 and `*t` set, else OFL_TUPLE_E*.
 * Never reads past `len`. */
int ofl_tuple_parse(const uint8_t *p, uint32_t len, struct ofl_tuple_view *t);

/* v_k of a parsed tuple, 1 <= k <= t->n (the caller checks). */
static inline int32_t ofl_tuple_v(const uint8_t *p, const struct ofl_tuple_view *t, uint32_t k)
{
    const uint8_t *q = p + t->off + 4u * (k - 1u);
    return (int32_t)((uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                     (uint32_t)q[3] << 24);
}

/* Attribute `a` of a parsed tuple whose ts is `ts`: ts for 0, else v_a (a <= t->n). */
static inline int64_t ofl_tuple_attr(const uint8_t *p, const struct ofl_tuple_view *t,
                                     uint64_t ts, uint32_t a)
{
    return a ? (int64_t)ofl_tuple_v(p, t, a) : (int64_t)ts;
}

/* Copies the n values of a parsed tuple into `v` (at least t->n entries). */
void ofl_tuple_values(const uint8_t *p, const struct ofl_tuple_view *t, int32_t *v);

/* Writes into `buf` (`cap` bytes) a tuple frame with the headers of `tmpl` (a parsed
 * tuple frame, `tv` its view; `buf` may be `tmpl` itself) and the values `v[0..n)`:
 * the IPv4 total length and checksum and the UDP length are set, the UDP checksum is 0
 * (none). Returns the frame's length, or 0 when n is 0 or over OFL_TUPLE_MAX or the
 * frame would not fit in `cap`. */
uint32_t ofl_tuple_write(uint8_t *buf, uint32_t cap, const uint8_t *tmpl,
                         const struct ofl_tuple_view *tv, const int32_t *v, uint32_t n);

#endif
