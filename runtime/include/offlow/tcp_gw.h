/* A TCP gateway in front of a memcached server that speaks UDP: memcached over
 * TCP for a program that serves memcached datagrams (examples/kvs.py under
 * `offlow run --udp`), so TCP clients work unchanged.
 *
 * Each TCP connection's byte stream is cut into complete requests with the
 * memcached parser (ofl_mc_parse, mcproto.h; the connection's protocol is decided
 * by its first byte, as memcached does). Each request goes out as one UDP
 * datagram (8-byte frame header: a request id the gateway allocates, seq 0,
 * count 1) from the gateway's own UDP socket to the server; the reply's
 * datagrams (count > 1: reassembled in seq order; a header-only datagram: an
 * empty reply) are matched by request id and their payloads written back to the
 * connection. One request per connection is in flight at a time, so replies
 * come back in request order; many connections give parallelism.
 *
 * The gateway answers some requests itself, with memcached's replies
 * (ofl_mc_write_error): requests the parser rejects (a fatal error closes the
 * connection after the reply), requests longer than one datagram can carry
 * (binary E2BIG / text "SERVER_ERROR object too large for cache", the rest of
 * the request skipped as it arrives), text lines longer than that ("CLIENT_ERROR
 * line too long", then close) and quit (binary QUIT answered, then close).
 *
 * Bounded: at most max_conns connections (more are accepted and closed at once,
 * counted), an input buffer of 2 x max_request per connection, one reply per
 * connection at a time (no new request is forwarded while a connection has
 * 64 KiB of replies unread: a slow reader holds only itself up), a reply of at
 * most reply_max bytes (larger: the connection is closed, counted). A reply that
 * does not come within timeout_ms closes its connection (counted); a late
 * datagram for it is counted as stray. One thread, blocking epoll: an I/O
 * gateway, not a hand-off between cores. */
#ifndef OFL_TCP_GW_H
#define OFL_TCP_GW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "offlow/mcproto.h"

/* Largest request payload by default: memcached's 1400-byte datagram less the
 * frame header. */
#define OFL_TCP_GW_REQUEST_MAX (OFL_MC_UDP_DGRAM_MAX - OFL_MC_UDP_HDR_LEN)
/* Most connections one gateway can hold (one request id each, 16-bit ids). */
#define OFL_TCP_GW_CONNS_LIMIT 60000u

/* ---- cutting a stream into requests (pure, no state) ------------------------- */

/* What to do with the front of a connection's input. */
enum ofl_tcp_gw_act {
    OFL_GW_NEED = 0,     /* an incomplete request: wait for more bytes */
    OFL_GW_FORWARD = 1,  /* the first `len` bytes are one request: send it */
    OFL_GW_ANSWER = 2,   /* answer here (ofl_tcp_gw_answer), drop `len` bytes of the
                            buffer and `skip` more as they arrive; close after if `close` */
};

/* The decision of ofl_tcp_gw_cut. */
struct ofl_tcp_gw_cut {
    int act;                 /* enum ofl_tcp_gw_act */
    size_t len;              /* FORWARD, ANSWER: bytes of the buffer the request spans */
    size_t skip;             /* ANSWER: bytes of the request not received yet */
    int err;                 /* ANSWER: the OFL_MC_E* error answered, 0 for quit */
    int close;               /* ANSWER: close the connection after the reply */
    struct ofl_mc_req req;   /* the parser's result (views into the buffer) */
};

/* Decide what the `len` bytes at `buf` start with, parsed as `proto` (BINARY or
 * TEXT; ANY decides from the first byte) with values and text lines limited so a
 * request fits `max_request` bytes. A complete request of at most max_request
 * bytes is FORWARD; quit is ANSWER (err 0, close); a parse error is ANSWER with
 * the parser's error, span and fatality; a storage request longer than
 * max_request (complete, or announced by its header or command line) is ANSWER
 * with OFL_MC_E2BIG, its unreceived bytes in `skip`; a text line longer than
 * max_request is OFL_MC_ELINE (fatal). Returns c->act. */
int ofl_tcp_gw_cut(const uint8_t *buf, size_t len, enum ofl_mc_proto proto,
                   size_t max_request, struct ofl_tcp_gw_cut *c);

/* Write the gateway's own reply for an ANSWER decision to `out` (memcached's error
 * reply in the request's protocol, or a binary QUIT's response; nothing for text
 * quit, noreply, or a bad magic byte). Returns the bytes written or -ENOSPC
 * (128 bytes always suffice). */
ssize_t ofl_tcp_gw_answer(const struct ofl_tcp_gw_cut *c, uint8_t *out, size_t cap);

/* ---- reassembling a reply ----------------------------------------------------- */

/* The datagrams of one reply, kept until all have come. */
struct ofl_tcp_gw_reasm {
    uint16_t count;          /* datagrams announced (0 until the first one) */
    uint16_t got;            /* datagrams received */
    size_t bytes;            /* payload bytes received */
    size_t max;              /* largest reply accepted (payload bytes) */
    uint8_t **part;          /* payload of datagram seq (NULL: not yet) */
    uint32_t *plen;
};

/* An empty reassembler for replies of at most `max` payload bytes. */
void ofl_tcp_gw_reasm_init(struct ofl_tcp_gw_reasm *r, size_t max);

/* Add one reply datagram (`len` bytes, frame header included; its request id is
 * the caller's business). Count 0 or 1 is a whole reply (0: memcached's
 * header-only datagram for a request without an answer) when seq is 0. Returns 1
 * when the reply is complete (ofl_tcp_gw_reasm_copy, then _reset), 0 when more
 * datagrams are due, -EPROTO for a datagram that does not fit the reply (short,
 * seq >= count, a count that changed, a duplicate: ignored, the reply goes on),
 * -E2BIG when the reply grows past `max`, -ENOMEM. */
int ofl_tcp_gw_reasm_add(struct ofl_tcp_gw_reasm *r, const uint8_t *dgram, size_t len);

/* Payload bytes of the complete reply. */
size_t ofl_tcp_gw_reasm_len(const struct ofl_tcp_gw_reasm *r);

/* Copy the complete reply's payloads in seq order to `out` (room for
 * ofl_tcp_gw_reasm_len bytes). */
void ofl_tcp_gw_reasm_copy(const struct ofl_tcp_gw_reasm *r, uint8_t *out);

/* Forget the datagrams kept (memory freed); ready for the next reply. */
void ofl_tcp_gw_reasm_reset(struct ofl_tcp_gw_reasm *r);

/* ---- the gateway ------------------------------------------------------------- */

/* What a gateway is given. */
struct ofl_tcp_gw_config {
    int listen_fd;           /* a listening TCP socket (made non-blocking; not closed) */
    uint32_t server_addr;    /* the UDP server, IPv4 host order (127.0.0.1) */
    uint16_t server_port;
    uint32_t max_conns;      /* 0: 4096; at most OFL_TCP_GW_CONNS_LIMIT */
    uint32_t max_request;    /* 0: OFL_TCP_GW_REQUEST_MAX; at least 64 */
    uint32_t timeout_ms;     /* 0: 5000 */
    uint32_t reply_max;      /* 0: 2 MiB */
};

/* Counters (read after ofl_tcp_gw_run returned, or from its thread). */
struct ofl_tcp_gw_stats {
    uint64_t accepted;       /* connections accepted */
    uint64_t refused;        /* accepted over max_conns (or no memory) and closed */
    uint64_t closed;         /* connections closed, for any reason */
    uint64_t conn_errors;    /* of those: a read or write error (reset by the peer) */
    uint64_t requests;       /* requests forwarded as datagrams */
    uint64_t replies;        /* replies written back (one per forwarded request) */
    uint64_t multi;          /* of those: reassembled from several datagrams */
    uint64_t answered;       /* requests the gateway answered itself */
    uint64_t too_large;      /* of those: longer than one datagram can carry */
    uint64_t timeouts;       /* replies that did not come in time (connection closed) */
    uint64_t reply_too_large;/* replies over reply_max (connection closed) */
    uint64_t stray;          /* datagrams for no request in flight (late, unknown id) */
    uint64_t bad_dgrams;     /* datagrams whose frame header did not fit the reply */
    uint64_t send_errors;    /* datagrams the kernel refused (connection closed) */
};

struct ofl_tcp_gw;

/* Create a gateway: its UDP socket (connected to the server), its epoll set, its
 * connection table. Returns 0 and sets `*gw` (NULL on failure), or a negative errno
 * with a message in `errbuf` (256 bytes): -EINVAL for bad settings or a listen_fd that
 * is not a listening TCP socket, -ENOMEM, or a socket error. */
int ofl_tcp_gw_create(struct ofl_tcp_gw **gw, const struct ofl_tcp_gw_config *cfg,
                      char *errbuf);

/* Serve until `stop_fd` becomes readable (a signalfd, a pipe, an eventfd; -1:
 * never). Returns 0, or a negative errno when epoll itself fails. */
int ofl_tcp_gw_run(struct ofl_tcp_gw *gw, int stop_fd);

/* The counters so far, and the connections open now. */
void ofl_tcp_gw_get_stats(const struct ofl_tcp_gw *gw, struct ofl_tcp_gw_stats *s,
                          uint32_t *open_conns);

/* Close every connection and the UDP socket, free the gateway (NULL is fine). */
void ofl_tcp_gw_destroy(struct ofl_tcp_gw *gw);

#endif
