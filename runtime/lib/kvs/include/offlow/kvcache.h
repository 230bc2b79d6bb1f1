/* The NIC cache of the key-value store (Floem's caching construct, issue 5).
 *
 * A set-associative cache of memcached items that runs on the NIC in front of the
 * host store (kvstore.h). The compiler puts two elements around the queue to the
 * host: the lookup side (ofl_kvc_request) before it, which answers hits in place
 * and lets misses go on to the store, and the update side (ofl_kvc_reply) after the
 * store's reply comes back, which fills the cache. Packets are Ethernet/IPv4/UDP
 * frames holding one memcached datagram (8-byte frame header, then requests), as in
 * kvs_pkt.h; `l3_off` and `l4_off` are the offsets of the IPv4 and UDP headers.
 *
 * Entries: key (<= 250 bytes), value (<= value_max), flags, CAS and a state:
 *   pending-fill  a GET missed; the store's reply to it fills the entry
 *   pending-set   write-through: a SET went on to the store with this value; its
 *                 reply makes the entry valid (or drops it on an error)
 *   valid-clean   a copy of the store's item
 *   valid-dirty   write-back: newer than the store; written back (binary SETQ) when
 *                 evicted, flushed, or touched by a request the cache cannot serve
 * `entries / ways` sets chosen by the key hash, `ways` entries per set, LRU or
 * CLOCK eviction inside a set. A miss gets a ticket, (slot << 32) | sequence, that
 * travels with the request and its reply: the reply side finds the slot without the
 * key and fills it only if the slot still holds that same reservation (a SET or a
 * DELETE in between replaced or removed it: a stale fill, ignored).
 *
 * Write-back and requests of several keys: a request is steered to the host core of
 * its first key, and a write-back to the core of its own key, so a request could
 * reach the store before the write-back of another of its keys. Each write-back is
 * counted in flight (by key-hash bucket: its datagram's request id, which the
 * store's reply carries back to the update side) until its reply comes; a request
 * naming a key other than its first whose bucket has a write-back in flight is not
 * sent on but answered with memcached's temporary failure (text OFL_KVC_BUSY_TEXT,
 * binary ETMPFAIL): a retry after the write-back's reply runs correctly.
 *
 * Thread safety: one spin lock per set (bounded spin with a pause hint, then
 * sched_yield; nothing sleeps); the lookup side and the update side may run on
 * different threads at the same time. Each call takes one set lock at a time and
 * never calls `emit` with a lock held. Requests of one key must reach the lookup
 * side in order (one lookup thread per key) and travel to the store and back in
 * FIFO order, write-backs of that key included (steering by key hash does that). */
#ifndef OFL_KVCACHE_H
#define OFL_KVCACHE_H

#include <stdint.h>

#include "offlow/pkt.h"
#include "offlow/stats.h"

struct ofl_args;

/* The NIC cache. */
struct ofl_kvc;

/* Largest value_max: a hit's reply (text header, key, value) must fit one datagram. */
#define OFL_KVC_VALUE_MAX 1024u
/* Most ways per set. */
#define OFL_KVC_WAYS_MAX 64u
/* Most entries in all. */
#define OFL_KVC_ENTRIES_MAX (1u << 30)
/* Largest l4_off + 8 (headers before the memcached datagram) of a packet that may
 * need a write-back built from it (write-back policy); deeper packets are dropped. */
#define OFL_KVC_HDRS_MAX 256u

enum { OFL_KVC_WRITE_THROUGH = 1, OFL_KVC_WRITE_BACK = 2 };  /* policy */
enum { OFL_KVC_LRU = 1, OFL_KVC_CLOCK = 2 };                 /* eviction within a set */

/* What ofl_kvc_create() builds. value_max must not exceed the store's. */
struct ofl_kvc_config {
    uint32_t entries;    /* entries in all (>= ways; rounded down to a multiple of ways) */
    uint32_t ways;       /* entries per set, 1..OFL_KVC_WAYS_MAX */
    uint32_t value_max;  /* longest cached value, 0..OFL_KVC_VALUE_MAX */
    int policy;          /* OFL_KVC_WRITE_THROUGH or OFL_KVC_WRITE_BACK */
    int eviction;        /* OFL_KVC_LRU or OFL_KVC_CLOCK */
};

/* Build an empty cache. Returns 0 and sets *out, or -EINVAL for a bad configuration
 * or -ENOMEM (*out NULL). */
int ofl_kvc_create(struct ofl_kvc **out, const struct ofl_kvc_config *cfg);

/* Free the cache (no call in flight; dirty entries are lost: flush first). */
void ofl_kvc_destroy(struct ofl_kvc *c);

/* Table open function for generated programs: the cache named `name` from options
 * NAME.entries (default 4096), NAME.ways (8), NAME.value_max (256), NAME.policy
 * (write_through | write_back, default write_through), NAME.eviction (lru | clock,
 * default lru). Says why (ofl_start_failf) and returns -EINVAL for a bad value. */
int ofl_kvc_open_opts(struct ofl_kvc **t, const struct ofl_args *a, const char *name);

/* Ticket of the cache's own traffic (write-backs). */
#define OFL_KVC_INTERNAL UINT64_MAX
/* Ticket of a stats request: its answer gets the cache's counters (nic_cache_hits,
 * misses, evictions, writebacks, fills, bypass) added before its end. */
#define OFL_KVC_STATS (UINT64_MAX - 1)

/* Sends one packet the cache generates (a write-back: binary SETQ or DELETEQ) to
 * the store, ahead of the current request, steered by `key_hash` (ofl_kv_hash of
 * its key, what KeyHash computes). Its reply carries ticket OFL_KVC_INTERNAL. The
 * callee copies the packet (it lives on the caller's stack). A SETQ carries the CAS
 * the cache gave the item (clients may hold it): the store must run made packets
 * as a trusted writer's (ofl_kvs_reply's from_cache), which keeps that CAS; run as
 * a client's, the SETQ would compare it and fail (counted in wb_errors). */
typedef void (*ofl_kvc_emit)(void *arg, struct ofl_pkt *pkt, uint64_t key_hash);

enum { OFL_KVC_HIT = 0, OFL_KVC_MISS = 1 };

/* Lookup side: one request packet. Returns OFL_KVC_HIT: `pkt` was rewritten into
 * the reply for the client (addresses swapped as ofl_kvs_reply does); OFL_KVC_MISS:
 * send `pkt` (unchanged) on to the store, and *ticket says what the update side
 * does with its reply (0: nothing); a negative errno: drop it (counted in drops).
 * Write-backs it needs (dirty victims, dirty keys of requests it cannot serve) go
 * out through emit(arg, ...) before it returns; `emit` may be NULL only with the
 * write-through policy (write-back without one: -EINVAL). */
int ofl_kvc_request(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                    uint64_t *ticket, ofl_kvc_emit emit, void *arg);

/* Update side: the store's reply to a request that missed, with the ticket the
 * lookup side gave it. Fills or releases the reservation; `expiring` nonzero (the
 * store said the reply holds an item with an expiry time, OFL_KVS_SEND_EXPIRING)
 * releases it unfilled, so that the cache never serves an item past its expiry
 * (counted in uncached). Returns 0: send the reply
 * to the client; 1: drop it (the reply to a write-back, ticket OFL_KVC_INTERNAL;
 * an error status in it is counted in wb_errors). Accepts header-only replies (a
 * quiet request's). */
int ofl_kvc_reply(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  int expiring, uint64_t ticket);

/* Write back every dirty entry (binary SETQ through `emit`, each built with the
 * headers of `tmpl`: its addresses and offsets) and mark it clean. For the end of
 * a run and tests; the lookup side must be idle. Returns how many were written, or
 * -EMSGSIZE if `tmpl`'s headers are deeper than OFL_KVC_HDRS_MAX. */
int ofl_kvc_flush(struct ofl_kvc *c, ofl_kvc_emit emit, void *arg, const struct ofl_pkt *tmpl,
                  uint32_t l3_off, uint32_t l4_off);

/* Write-back policy, when the lookup side is done (the run stops): write back every
 * dirty entry through `emit`, built with the headers of the first request the cache
 * saw, so that the store holds them after the run. Returns how many (counted in
 * flushed; 0 for write-through or before any request). */
int ofl_kvc_finish(struct ofl_kvc *c, ofl_kvc_emit emit, void *arg);

/* What a multi-key request that would pass a write-back is answered (text; binary:
 * status ETMPFAIL). */
#define OFL_KVC_BUSY_TEXT "SERVER_ERROR a key of this request is being written back; retry"

/* The counters for the stats file: an object `name` (ofl_kvc_stats, and the
 * write-backs still on their way to the store). */
void ofl_kvc_stats_json(struct ofl_json *j, const char *name, const struct ofl_kvc *c);

/* Counters. hits: requests the cache answered (GET hits, write-back SET and DELETE);
 * misses: cacheable requests sent on to the store; bypass: requests it cannot
 * serve, sent on with ticket 0; fills: replies that made an entry valid (GET fills,
 * write-through SET confirmations); stale_fills: replies whose reservation was
 * gone; uncached: GET replies not kept because their item expires; evictions:
 * entries evicted for room; writebacks: SETQ/DELETEQ emitted;
 * wb_errors: error replies to them; invalidations: entries dropped by DELETEs and
 * by requests the cache cannot serve; drops: requests refused (negative return);
 * refused: multi-key requests answered OFL_KVC_BUSY_TEXT; flushed: entries written
 * back by ofl_kvc_finish. */
struct ofl_kvc_stats {
    uint64_t hits, misses, fills, stale_fills, uncached, bypass, evictions, writebacks,
        wb_errors, invalidations, drops, refused, flushed;
};

/* Read the counters (relaxed atomic loads; exact when the cache is idle). */
void ofl_kvc_stats(const struct ofl_kvc *c, struct ofl_kvc_stats *s);

#endif
