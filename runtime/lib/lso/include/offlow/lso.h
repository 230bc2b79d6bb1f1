/* Large send offload: one send (a header template and up to 64 KB of payload) cut
 * into packets by the device, as the LSO core of the seed does it: TCP segmentation
 * (sequence numbers advanced, IPv4 IDs and lengths set, PSH/FIN only on the last) and
 * UDP fragmentation (IPv4 fragment offsets and MF; IPv6 fragment headers), IPv4 and
 * IPv6, checksums computed or left for the MAC's checksum offload.
 *
 * Each packet is one of four message kinds, each with its own path through the
 * header template, which is updated in place from packet to packet rather than
 * rebuilt: the first of several (BOM) sets the full-size lengths and clears PSH/FIN;
 * a continuation (COM) only advances the sequence number and IP ID (or the fragment
 * offset) and updates the IPv4 checksum incrementally; the last (EOM) also sets the
 * lengths of what remains and restores PSH/FIN; a send that fits one packet is a
 * single-segment message (SSM), and a send with no payload (a pure ACK, a FIN, an
 * empty datagram) passes through as one packet (ZERO, the SSM path).
 *
 * The descriptor is what the host posts (lso_port.h): where the payload lies in the
 * send buffer, its length, the MSS, flags and the header template. ofl_lso_begin
 * checks it against the send buffer and the link's MTU (a malformed one is refused
 * with a reason), then ofl_lso_next builds the packets one by one into buffers the
 * caller owns. The payload moves by PIO (the core copies it, checksumming on the
 * way), is left to the caller's DMA (ofl_lso_seal then finishes the checksum), or stays
 * where it is: the seed's template updated in place in the send buffer, each packet's
 * headers written right before its payload there (the host leaves headroom). */
#ifndef OFL_LSO_H
#define OFL_LSO_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/err.h"

#define OFL_LSO_HDR_MAX 128u      /* header template bytes at most */
#define OFL_LSO_SEND_MAX 65535u   /* payload bytes of one send at most */
#define OFL_LSO_DESC_FIXED 24u    /* descriptor bytes before the template */

/* Descriptor flags. */
#define OFL_LSO_CSUM_OFFLOAD 0x0001u /* leave checksums to the MAC: IPv4 header checksum
                                        0, TCP/UDP checksum the pseudo-header sum (not
                                        complemented) of the packet (UDP: of the whole
                                        datagram, in its first fragment), as Linux's
                                        CHECKSUM_PARTIAL and DPDK's Tx offload take them */
#define OFL_LSO_HEADROOM 0x0002u     /* the OFL_LSO_HEADROOM_BYTES bytes before the payload
                                        belong to the send too: the device may write each
                                        packet's headers in place, right before its
                                        payload, and hand the packet on from there */
#define OFL_LSO_FLAGS_KNOWN 0x0003u
#define OFL_LSO_HEADROOM_BYTES 192u  /* the largest header (with an IPv6 fragment header),
                                        rounded up to a cache line */

/* How ofl_lso_next moves a packet's payload. */
enum { OFL_LSO_BY_DMA = 0,    /* not at all: the caller's DMA does (then ofl_lso_seal) */
       OFL_LSO_BY_PIO = 1,    /* the core copies it into the caller's buffer */
       OFL_LSO_IN_PLACE = 2   /* it stays: the headers go before it in the send buffer
                                 (descriptors with OFL_LSO_HEADROOM only) */ };

/* A descriptor as the host writes it, little-endian; `hdr_len` bytes of header
 * template follow the fixed part (ofl_lso_begin reads only those). */
struct ofl_lso_desc {
    uint32_t off;        /* where the payload starts in the send buffer */
    uint32_t len;        /* payload bytes, 0..OFL_LSO_SEND_MAX */
    uint16_t mss;        /* TCP: payload bytes per segment; UDP: per fragment, as the
                            seed counts it (1472 at a 1500-byte MTU): every fragment
                            carries (mss + 8) rounded down to 8 bytes of the datagram */
    uint16_t flags;      /* OFL_LSO_* */
    uint16_t hdr_len;    /* template bytes: Ethernet (0-2 VLAN tags), IPv4 (options
                            allowed) or IPv6 (no extension headers), TCP (options
                            allowed) or UDP; the payload follows it in every packet */
    uint16_t rsvd;       /* 0 */
    uint32_t frag_id;    /* the Identification of IPv6 fragment headers (UDP/IPv6) */
    uint32_t tag;        /* the host's, returned in the completion */
    uint8_t hdr[OFL_LSO_HDR_MAX];
};

/* The message kinds (the seed's), and a send with no payload. */
enum { OFL_LSO_SSM = 0, OFL_LSO_BOM = 1, OFL_LSO_COM = 2, OFL_LSO_EOM = 3, OFL_LSO_ZERO = 4,
       OFL_LSO_KINDS = 5 };

/* Why a descriptor is refused: negative, in the range err.h reserves for them
 * (OFL_ERR_LSO_FIRST down to OFL_ERR_LSO_LAST), EDESC down to ELENGTH. */
enum ofl_lso_err {
    OFL_LSO_EDESC = -5301,      /* shorter than its fixed part or its template, a template
                                   over OFL_LSO_HDR_MAX, unknown flags or reserved bits */
    OFL_LSO_ETEMPLATE = -5302,  /* the template is cut short, or is not Ethernet + IPv4/IPv6
                                   + TCP/UDP (extension headers, a fragment, bytes after
                                   the transport header, DF on a datagram to fragment) */
    OFL_LSO_EBUFFER = -5303,    /* the payload runs past the send buffer (or its headroom
                                   before the buffer's start) */
    OFL_LSO_EMSS = -5304,       /* MSS 0, or a packet of MSS bytes over the MTU */
    OFL_LSO_ELENGTH = -5305,    /* longer than the protocol allows: a TCP send over
                                   OFL_LSO_SEND_MAX, a UDP datagram over 65,535 bytes */
};
_Static_assert(OFL_ERR_IN(OFL_LSO_EDESC, LSO) && OFL_ERR_IN(OFL_LSO_ELENGTH, LSO),
               "a segmentation offload refusal outside its range (err.h)");

/* The name of a refusal reason ("bad_desc", "bad_template", "beyond_buffer", "bad_mss",
 * "too_long"; the element's drop reasons), "?" for anything else. */
const char *ofl_lso_reason(int err);

/* The name of a message kind ("ssm", "bom", "com", "eom", "zero"). */
const char *ofl_lso_kind_name(unsigned kind);

/* What the link takes: `mtu`, the largest IP packet (the seed's "packet size": 512,
 * 1024, 1500); `frame_max`, the largest frame a packet buffer holds (Ethernet header
 * included). */
struct ofl_lso_limits {
    uint32_t mtu;
    uint32_t frame_max;
};

/* One send being cut. Filled by ofl_lso_begin; advanced by ofl_lso_next. */
struct ofl_lso_cut {
    uint8_t *payload;        /* the payload in the send buffer */
    uint32_t len;            /* its bytes */
    uint32_t unit;           /* payload bytes per packet: TCP the MSS; UDP the datagram
                                bytes per fragment (a multiple of 8) */
    uint32_t npkts, next;    /* packets of the send; the next one ofl_lso_next builds */
    uint32_t tag, frag_id;
    uint16_t mss, flags;
    uint16_t l3_off, l4_off; /* in the template */
    uint16_t hdr_len;        /* template bytes */
    uint16_t udp_off;        /* UDP: where its header is in the working header */
    uint16_t ip_hl;          /* IPv4 header length or 40 */
    uint16_t l4_hl;          /* TCP header length with options, or 8 */
    uint8_t v6, tcp;         /* IPv6; TCP (else UDP) */
    uint8_t frag;            /* UDP cut into fragments */
    uint8_t kind;            /* the kind of the packet ofl_lso_next built last */
    uint8_t tcp_flags;       /* the template's TCP flags */
    uint8_t moved;           /* how the last packet's payload moved (OFL_LSO_BY_*) */
    uint16_t ip_id;          /* IPv4: the next packet's Identification */
    uint32_t seq;            /* TCP: the next packet's sequence number */
    uint64_t ph;             /* pseudo-header sum of the addresses and the protocol */
    /* the last packet's payload: `slice_len` bytes from `slice_src` to `slice_dst` bytes
       into the packet (what a DMA moves when ofl_lso_next did not), and the packet's first
       byte (the caller's buffer, or in place in the send buffer) */
    const uint8_t *slice_src;
    uint8_t *frame;
    uint32_t slice_dst, slice_len;
    uint8_t hdr[OFL_LSO_HDR_MAX + 8]; /* the working header: the template, updated in place
                                         (+8: an IPv6 fragment header) */
};

/* Check descriptor `desc` (`dlen` bytes: the fixed part, then its template) against the
 * send buffer `buf` of `buf_len` bytes and the link `lim`, and start cutting it into
 * `c`. UDP in compute mode sums the whole datagram here when it must be fragmented
 * (its checksum goes in the first fragment). Returns 0 or an OFL_LSO_E* reason (then
 * c->tag is the descriptor's when its fixed part was there, else 0). */
int ofl_lso_begin(struct ofl_lso_cut *c, const uint8_t *desc, uint32_t dlen, uint8_t *buf,
                  uint64_t buf_len, const struct ofl_lso_limits *lim);

/* Packets ofl_lso_next has still to build. */
static inline uint32_t ofl_lso_left(const struct ofl_lso_cut *c)
{
    return c->npkts - c->next;
}

/* Build the next packet of the send by its kind's path, moving its payload by `mode`:
 * OFL_LSO_BY_PIO, into `out` (lim.frame_max bytes), the payload copied from the send
 * buffer with its checksum (the packet is complete); OFL_LSO_BY_DMA, into `out` without
 * the payload, left for the caller to move (c->slice_*), then ofl_lso_seal;
 * OFL_LSO_IN_PLACE (a descriptor with OFL_LSO_HEADROOM), in the send buffer itself:
 * the headers are written right before the payload, over bytes of packets already
 * built (so each packet must be done with before the next is built), `out` unused.
 * Sets c->kind and c->frame (where the packet starts). Returns the frame's length; 0
 * when no packet is left. */
uint32_t ofl_lso_next(struct ofl_lso_cut *c, uint8_t *out, int mode);

/* The kinds' paths, which ofl_lso_next calls (public so that instruction counts can be
 * taken per kind): each writes packet c->next and returns its length. */
uint32_t ofl_lso_ssm(struct ofl_lso_cut *c, uint8_t *out, int mode);
uint32_t ofl_lso_bom(struct ofl_lso_cut *c, uint8_t *out, int mode);
uint32_t ofl_lso_com(struct ofl_lso_cut *c, uint8_t *out, int mode);
uint32_t ofl_lso_eom(struct ofl_lso_cut *c, uint8_t *out, int mode);

/* Finish a packet whose payload the caller moved (ofl_lso_next by DMA): its
 * transport checksum, in compute mode, over the payload now in `out`. `len` is what
 * ofl_lso_next returned for it; `kind` its c->kind. */
void ofl_lso_seal(const struct ofl_lso_cut *c, uint8_t *out, uint32_t len, unsigned kind);

/* The host's side: split a frame carrying a whole send (template, then payload, as a
 * TSO/GSO capture holds it) at the end of its transport header. Sets *hdr_len and
 * *len (the payload up to the IP packet's end: Ethernet padding is not payload).
 * Returns 0 or OFL_LSO_ETEMPLATE (the same template rules as ofl_lso_begin). */
int ofl_lso_split(const uint8_t *frame, uint32_t flen, uint32_t *hdr_len, uint32_t *len);

/* 0 when `len` bytes at `tmpl` are a header template ofl_lso_begin takes (Ethernet,
 * IPv4/IPv6, TCP/UDP, nothing after), else OFL_LSO_ETEMPLATE (the host's own check). */
int ofl_lso_check_template(const uint8_t *tmpl, uint32_t len);

/* The largest MSS a template allows at IP MTU `mtu` (TCP: mtu less the IP and TCP
 * headers; UDP: the largest whose fragments fit, IPv6 fragment header included), or 0
 * when none fits or the template is not one (ofl_lso_split's rules). */
uint32_t ofl_lso_mss_for(const uint8_t *tmpl, uint32_t hdr_len, uint32_t mtu);

/* One's-complement sum of `n` bytes at `p` as big-endian 16-bit words (an odd last
 * byte padded), folded to 16 bits and not complemented; the copy variant also copies
 * them to `dst`. (The Internet checksum's inner loop, a word of 8 bytes at a time.) */
uint16_t ofl_lso_sum(const uint8_t *p, uint32_t n);
uint16_t ofl_lso_copy_sum(uint8_t *dst, const uint8_t *p, uint32_t n);

#endif
