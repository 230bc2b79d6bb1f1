/* The datagrams of one memcached UDP reply joined into its bytes (a client's side of
 * the UDP frame header, mcproto.h): each datagram carries the request id, its
 * sequence number and the count of datagrams; they may arrive in any order. Used by
 * the TCP front of a remote store (kvs_front.c). */
#ifndef OFL_MCJOIN_H
#define OFL_MCJOIN_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/kvexec.h"

#define OFL_MCJOIN_PARTS 64u     /* datagrams of one reply, at most */
#define OFL_MCJOIN_PART 2048u    /* bytes of one datagram, its frame header included */

/* One reply being joined. */
struct ofl_mcjoin {
    uint16_t rid;                /* the request id answered */
    unsigned total, got;         /* datagrams announced, datagrams in */
    uint16_t plen[OFL_MCJOIN_PARTS];   /* payload bytes + 1 of each datagram in (0: not in) */
    uint8_t part[OFL_MCJOIN_PARTS][OFL_MCJOIN_PART];
};

/* Start joining the reply to request `rid`. */
void ofl_mcjoin_start(struct ofl_mcjoin *j, uint16_t rid);

/* Take datagram `d` of `len` bytes. Returns 1 when the reply is whole (a count of 0,
 * an answer with nothing in it, is whole at once), 0 when more datagrams are to come,
 * or -1 when it is not part of this reply (another request id, a short or too long
 * datagram, a count that differs from the first one's or above OFL_MCJOIN_PARTS, a
 * sequence number not below the count); nothing is taken then. */
int ofl_mcjoin_take(struct ofl_mcjoin *j, const uint8_t *d, size_t len);

/* Append the whole reply's payloads, in sequence order, to `out`. Returns 0 or
 * ofl_mc_out_reserve's error. */
int ofl_mcjoin_out(const struct ofl_mcjoin *j, struct ofl_mc_out *out);

#endif
