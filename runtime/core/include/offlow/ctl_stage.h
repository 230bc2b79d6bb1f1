/* Control requests and replies longer than one message (ctl.h: 'S', 'P', 'X', 'R'):
 * the serving side's staging buffer of one control channel. A request is staged in
 * parts, in order, and runs whole only once all of it is there, so the table sees it
 * as one request (a set: one update); a reply too long for one message is kept whole
 * and read back in parts. Messages of other letters run at once, as they always did.
 * One client at a time: a channel's side A has one owner.
 *
 * What is staged and kept belongs to the client that sent it: each message comes with
 * the session of its sender (chan.h's ofl_chan_peer_session: a new client, or the
 * same process opening the channel again, is another). A message from another session
 * first drops what the last one left: a request it staged and never ran (its client
 * died or closed half-way: counted in `dropped`, the run's control drops) and a reply
 * it did not read. So a request staged by a client that died is never run by the
 * next one's 'X', and nothing of it is left once another client speaks; a request
 * still staged when the process stops is dropped and counted by ofl_ctl_stage_end. */
#ifndef OFL_CTL_STAGE_H
#define OFL_CTL_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/ctl.h"

/* What runs a request (one message, or a staged one of any length) on a table; a
 * reply too long for one message goes to `out` (ofl_ctl_ok_out). */
typedef void (*ofl_ctl_fn)(void *ctx, const uint8_t *msg, size_t len,
                           struct ofl_ctl_out *out, struct ofl_ctl_reply *r);

/* One channel's staging state (the caller's memory; fields are ctl_stage.c's). */
struct ofl_ctl_stage {
    uint8_t *req;     /* the request being staged (cap bytes) */
    uint8_t *rep;     /* the reply kept (cap bytes) */
    uint32_t cap;
    uint32_t want;    /* the staged request's bytes; 0: none begun */
    uint32_t have;    /* its bytes staged so far */
    uint32_t kept;    /* the kept reply's bytes; 0: none */
    uint32_t peer;    /* the session of the client whose messages came last */
    uint64_t dropped; /* staged requests dropped unrun: their client went away
                         (written by the serving thread, read by others: atomic) */
};

/* Give `s` the buffers `req` and `rep` of `cap` bytes each (the longest request or
 * reply payload the table has: ctl.h's OFL_CTL_ARRAY_STAGE, map_ctl.h's
 * OFL_MAP_CTL_STAGE). Returns 0, or -EMSGSIZE when cap exceeds OFL_CTL_STAGE_MAX. */
int ofl_ctl_stage_init(struct ofl_ctl_stage *s, uint8_t *req, uint8_t *rep, size_t cap);

/* Answer message `msg` (`len` bytes) from the client of session `peer`
 * (ofl_chan_peer_session of the end it came on): 'S', 'P', 'X' and 'R' here, any other
 * by `fn(ctx, ...)`. Each gets one reply in `r`; a malformed or out-of-order part drops
 * the staged request (one error reply, the table unchanged). A `peer` other than the
 * last message's first drops what that client staged (counted) and kept. */
void ofl_ctl_stage_msg(struct ofl_ctl_stage *s, uint32_t peer, ofl_ctl_fn fn, void *ctx,
                       const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

/* The process stops serving the channel: a request still staged is dropped and
 * counted (its client never ran it). Call it once no message is being answered. */
void ofl_ctl_stage_end(struct ofl_ctl_stage *s);

/* Staged requests dropped so far because their client went away (or the process
 * stopped first); any thread may read it while the channel is served. */
uint64_t ofl_ctl_stage_dropped(const struct ofl_ctl_stage *s);

#endif
