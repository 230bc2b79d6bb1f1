/* The ring bridge: carries descriptor rings between a window here and a window of the
 * same layout on the other side of a link (remote_link.h), so the processes on each
 * side use their rings as on one machine (docs/remote.md).
 *
 * For a ring whose producer is on this side ("out"), the bridge is the local ring's
 * consumer: it checks each entry's seq, sends the entries in batches (one message per
 * batch, as a doorbell, straight from the ring's memory: a batch never wraps) and
 * releases them. For a ring whose consumer is here ("in"), it is the local ring's
 * producer: it commits what arrives, and sends the consumer's head back as credit once
 * a quarter of the ring is free again or the consumer has taken all that came. The sender never has more entries in flight than the remote ring
 * holds, so backpressure crosses the link and a message always fits. A producer's
 * close crosses after its last entry. A message that breaks these rules (an unknown
 * ring, a bad size, more entries than credit, a len beyond the entry) is not applied:
 * it is counted in `bad` and fails the bridge: from then on no message is applied.
 * A bridge that fails (a bad message, or its link failed) breaks its local rings
 * (ofl_bridge_break). Entries that arrive for a ring its local consumer broke are not
 * committed: they are counted in `dropped_in` (never credited back, so the far side
 * counts them as not taken too).
 *
 * Single-threaded, on the link's thread. */
#ifndef OFL_REMOTE_BRIDGE_H
#define OFL_REMOTE_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "offlow/remote_link.h"
#include "offlow/ring.h"

#define OFL_BRIDGE_MAX_RINGS 256

/* One carried ring. */
struct ofl_bridge_ring {
    struct ofl_ring ring;     /* this side's handle (consumer when out, producer when in) */
    bool out;                 /* producer here, consumer there */
    bool closed;              /* out: the close was sent; in: it arrived */
    uint32_t sent;            /* out: entries sent */
    uint32_t credit;          /* out: the remote consumer's head */
    uint32_t credited;        /* in: the head last sent back */
};

/* The rings carried over one link. */
struct ofl_bridge {
    struct ofl_link *link;
    struct ofl_bridge_ring rings[OFL_BRIDGE_MAX_RINGS];
    uint32_t n;               /* rings[0..n): ring id i is rings[i] on both sides */
    uint32_t max_batch;       /* entries per message at most */
    uint64_t msgs_out, msgs_in, entries_out, entries_in, bad;
    uint64_t dropped_in;      /* entries that came for a ring its consumer broke */
    bool broken;              /* ofl_bridge_break ran: its rings are broken */
    char err[160];            /* why it failed */
};

/* The link's handler for the bridge's messages (pass the bridge as its `arg`). */
void ofl_bridge_on_msg(void *arg, uint32_t kind, const void *hdr, size_t hlen,
                       const void *data, size_t len);

/* Start a bridge over `link` sending at most `max_batch` (>= 1) entries a message.
 * Returns 0 or -ENOMEM. */
int ofl_bridge_init(struct ofl_bridge *b, struct ofl_link *link, uint32_t max_batch);

/* Carry the ring in `mem` (`len` bytes, formatted: ring.h) as the next ring id; `out`:
 * its producer is on this side. Both sides add the same rings in the same order.
 * Returns 0, -ENOSPC (too many rings) or ofl_ring_attach's -EINVAL. */
int ofl_bridge_add(struct ofl_bridge *b, void *mem, size_t len, bool out);

/* Move what can be moved now (sends, credit). Returns the entries moved (>= 0), or
 * -EPIPE when the link failed and -EBADMSG on a bad message or entry (b->err says
 * which); either way the bridge's rings are broken then (ofl_bridge_break). */
int ofl_bridge_poll(struct ofl_bridge *b);

/* Break every ring the bridge carries, once: an out ring as its consumer (its local
 * producer stops instead of waiting for room and counts what the bridge never sent as
 * lost: queue.h), an in ring not closed yet as its producer (its local consumer takes
 * what was committed, then stops with OFL_RING_EBROKEN). */
void ofl_bridge_break(struct ofl_bridge *b);

/* Send every ring's credit that moved since last sent, whatever its size: at the run's
 * end, once the local consumers are gone, so that the far side knows exactly what was
 * taken here (a credit is otherwise held back below a quarter of the ring). Returns 0
 * or -EPIPE. */
int ofl_bridge_credit_all(struct ofl_bridge *b);

/* At the run's end: the entries published here, in rings whose producer is here, that
 * the bridge never sent (0 for a ring the bridge broke: its producer counts them as
 * lost, queue.h). */
uint64_t ofl_bridge_unsent(const struct ofl_bridge *b);

/* At the run's end: the entries published here, in rings whose producer is here, that
 * the far consumer was never seen to take (no credit came back for them). Sent or not,
 * unless the ring was broken on its consumer's side first (by the bridge, or by its
 * producer on the consumer's behalf): then only those sent, as its producer counts the
 * rest as lost (queue.h). Its producer publishes nothing more once it broke or closed the
 * ring first, so those counts are final; a ring nobody marked may still take a commit
 * after this count, counted by neither end: break the bridge first (ofl_bridge_break). */
uint64_t ofl_bridge_undelivered(const struct ofl_bridge *b);

/* At the run's end (an aborted run, or the local consumers' process has ended): the
 * entries committed here, in rings from the peer, that the local consumer never took
 * and does not count itself. Each such ring is marked broken by its producer first
 * (the first mark stays), so that a consumer still running takes what was committed,
 * stops, and counts the rest as lost itself (queue.h). Counted here: a ring its
 * consumer broke first (it takes nothing more and counts nothing), and, when
 * `consumers_gone`, a ring nobody had broken (its consumer ended without breaking it).
 * Call it once; the bridge applies no entries for these rings afterwards (they go to
 * `dropped_in`). */
uint64_t ofl_bridge_untaken(struct ofl_bridge *b, bool consumers_gone);

/* True when every out ring's producer closed it and the far consumer released every
 * entry sent, and every in ring's close arrived. */
bool ofl_bridge_done(const struct ofl_bridge *b);

/* Free what the bridge holds (nothing now; not the link). */
void ofl_bridge_free(struct ofl_bridge *b);

#endif
