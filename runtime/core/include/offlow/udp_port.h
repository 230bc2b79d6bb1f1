/* A UDP socket as a packet port, so a program serves real clients (memcached's UDP
 * protocol, Floem's key-value store) on a socket the runner binds.
 *
 * Source: each datagram read from the socket becomes an Ethernet/IPv4/UDP frame
 * around its payload (ofl_udp_frame_build): elements see an ordinary UDP packet
 * from the client to the server.  Sink: the payload of each Ethernet/IPv4/UDP frame
 * goes to the frame's IPv4 destination and UDP destination port, so an element
 * that swaps addresses and ports has made a reply.  Source and sink use the same
 * socket, so replies leave from the server's port and clients accept them.
 *
 * Neither ever sleeps in the kernel: reads and sends are non-blocking (MSG_DONTWAIT),
 * batched with recvmmsg / sendmmsg; the core's spin-then-yield handles idling. */
#ifndef OFL_UDP_PORT_H
#define OFL_UDP_PORT_H

#include <stdint.h>

#include "offlow/pkt.h"
#include "offlow/src.h"

/* Bytes of headers around a payload: Ethernet, IPv4 without options, UDP. */
#define OFL_UDP_FRAME_HDRS (OFL_ETH_HLEN + OFL_IPV4_HLEN + OFL_UDP_HLEN)
/* Largest UDP payload over IPv4 (an IPv4 total length of 65535). */
#define OFL_UDP_MAX_PAYLOAD (65535u - OFL_IPV4_HLEN - OFL_UDP_HLEN)
/* Most datagrams one recvmmsg / sendmmsg call moves. */
#define OFL_UDP_BATCH_MAX 64u

/* ---- frames ----------------------------------------------------------------- */

/* Write the 42 header bytes at `frame` for a payload of `payload_len` bytes
 * (<= OFL_UDP_MAX_PAYLOAD) that the caller puts at frame + OFL_UDP_FRAME_HDRS:
 * Ethernet 02:00:00:00:00:02 -> 02:00:00:00:00:01 type 0x0800; IPv4 TTL 64,
 * protocol 17, id 0, no fragment flags, a valid header checksum, source `src`,
 * destination `dst`; UDP ports `sport` -> `dport`, checksum 0 (none).
 * Addresses and ports are in host order. */
void ofl_udp_frame_build(uint8_t *frame, uint32_t src, uint16_t sport, uint32_t dst,
                         uint16_t dport, uint32_t payload_len);

/* Where an Ethernet/IPv4/UDP frame is going, and its payload. */
struct ofl_udp_dgram {
    uint32_t dst;          /* IPv4 destination, host order */
    uint16_t dport;        /* UDP destination port, host order */
    uint32_t l3_off;       /* the IPv4 header */
    uint32_t payload_off;  /* payload: frame + payload_off ... */
    uint32_t payload_len;  /* ... this many bytes (UDP length - 8) */
};

/* Parse `frame` of `len` bytes with the bounds-checked parsers of pkt.h: Ethernet
 * (VLAN tags allowed) carrying IPv4 (OFL_EUNSUPP for another ethertype), protocol
 * 17 (OFL_EUNSUPP otherwise), not a fragment (OFL_EUNSUPP: its payload is not the
 * whole datagram), a UDP length within the IPv4 payload (OFL_ETRUNC); the parsers'
 * own errors otherwise.  Checksums are not checked: the kernel writes new headers.
 * Returns 0 and fills `*d`, or a negative OFL_E* reason. */
int ofl_udp_frame_parse(const uint8_t *frame, uint32_t len, struct ofl_udp_dgram *d);

/* Segment k of a segmented frame (p->seg, pkt.h): p's headers around bytes
 * [k * seg, (k + 1) * seg) of its UDP payload, IPv4 and UDP lengths and the IPv4
 * checksum set, written to `out` (`cap` bytes). Returns the segment's length, 0 when
 * there is no segment k, a negative OFL_E* when `p` is not IPv4/UDP
 * (ofl_udp_frame_parse), or -ENOSPC. Without p->seg the frame is its only segment. */
int ofl_udp_frame_segment(const struct ofl_pkt *p, uint32_t k, uint8_t *out, uint32_t cap);

/* ---- source ---------------------------------------------------------------- */

/* Open a source reading datagrams from the bound IPv4 UDP socket `fd` (not closed by
 * the source; several sources may share it, the kernel hands each datagram to one
 * reader). Each ofl_src_next call makes one non-blocking recvmmsg of up to min(n,
 * OFL_UDP_BATCH_MAX) datagrams and returns the frames (client -> the socket's address;
 * ts_ns: CLOCK_REALTIME when read), or 0 when none is pending. A datagram longer than
 * mtu - OFL_UDP_FRAME_HDRS is dropped and counted (ofl_src_dropped). The source never
 * finishes by itself: it returns OFL_SRC_DONE after duration_ns (src.h), or once a stop
 * signal is pending (stop.h; looked at when the socket is idle and every 64 reads);
 * `loops`, `count` and `part` do not apply (`rate` paces the reads as usual). Returns 0
 * and sets `*s` (NULL on failure), or a negative errno with a message in `errbuf` (256
 * bytes): -EBADF / -ENOTSOCK for a bad fd, -EPROTOTYPE when it is not a datagram
 * socket, -EAFNOSUPPORT when not IPv4, -EINVAL for an mtu below 42 bytes or bad common
 * options, -ENOMEM. */
int ofl_udp_src_open(struct ofl_src **s, int fd, const struct ofl_src_opts *o, char *errbuf);

/* ---- sink ------------------------------------------------------------------- */

/* A sink sending on a UDP socket, with one batch per slot (per core). */
struct ofl_udp_sink;

/* Open a sink sending on the IPv4 UDP socket `fd` (not closed by the sink) for `nslots`
 * writers (>= 1; slot k is used by one thread at a time). Returns 0 and sets `*s` (NULL
 * on failure), or a negative errno with a message in `errbuf` (256 bytes): as
 * ofl_udp_src_open for a bad fd, -EINVAL for nslots 0, -ENOMEM. */
int ofl_udp_sink_open(struct ofl_udp_sink **s, int fd, unsigned nslots, char *errbuf);

/* Queue the payload of frame `p` (copied: `p` may be reused at once) on slot
 * `slot`'s batch, for its IPv4 destination and UDP destination port; with p->seg
 * set, a longer payload goes as datagrams of p->seg bytes (the last shorter), at
 * most OFL_UDP_BATCH_MAX of them.  A frame that ofl_udp_frame_parse rejects (or
 * that needs more datagrams) is dropped and counted, never sent; so is one
 * addressed to the sink's own socket (its port at its address, at 0.0.0.0, or at
 * 127.0.0.0/8 when it is bound to every address): the source reading that socket
 * would take it in again as a new packet with fresh headers, so a forwarding
 * program would loop it for ever (ofl_udp_sink_to_self counts them).  A full batch
 * is flushed first. */
void ofl_udp_sink_write(struct ofl_udp_sink *s, unsigned slot, const struct ofl_pkt *p);

/* Send slot `slot`'s batch with sendmmsg (non-blocking).  While the kernel has no
 * room (EAGAIN, ENOBUFS) it yields and retries a bounded number of times; a
 * datagram the kernel refuses (or still has no room for) is counted as a send
 * error and skipped.  Returns the number of datagrams sent. */
unsigned ofl_udp_sink_flush(struct ofl_udp_sink *s, unsigned slot);

/* Counters over all slots (read them when no slot is being written): datagrams
 * sent, frames dropped because they are not IPv4/UDP (or came with a slot out of
 * range), frames refused because they were addressed to the sink's own socket,
 * datagrams the kernel refused. */
uint64_t ofl_udp_sink_sent(const struct ofl_udp_sink *s);
uint64_t ofl_udp_sink_dropped(const struct ofl_udp_sink *s);
uint64_t ofl_udp_sink_to_self(const struct ofl_udp_sink *s);
uint64_t ofl_udp_sink_send_errors(const struct ofl_udp_sink *s);

/* Flush every slot and free the sink (NULL is fine); the socket stays open. */
void ofl_udp_sink_close(struct ofl_udp_sink *s);

#endif
