/* Queue endpoints used by generated code: a ring in the window, a copy engine and
 * local buffers on each side.
 *
 * The producer fills entries in one of two local staging buffers (ofl_qout_slot);
 * ofl_qout_flush copies them into reserved ring slots with the copy engine and
 * commits them with one doorbell once the copy is done. With an INLINE engine that
 * is at once. With a THREAD engine the flush only starts the copy and returns: the
 * producer fills the other staging buffer meanwhile, and the copy is committed, in
 * order, by the next flush or slot call that finds it done or needs its buffer, and
 * always by ofl_qout_close. The consumer's ofl_qin_next copies ready entries out of
 * the ring into one of two local buffers and returns them; with a THREAD engine the
 * copy of the next batch runs while the caller works on this one. Both endpoints
 * expose the ring handle (`.ring`) for its counters and a sticky first error
 * (`.err`).
 *
 * On a ring with a data_off, only the used part of each entry crosses (header,
 * fields, then h.len packet bytes, rounded up to 8: ofl_entry_used()); the bytes of
 * a delivered entry past that are unspecified. */
#ifndef OFL_QUEUE_H
#define OFL_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "offlow/copy.h"
#include "offlow/ring.h"
#include "offlow/wait.h"

/* Returned by ofl_qin_next: the producer closed the ring and everything was consumed.
 * Negative (so it is never a count) and outside the errno range. */
#define OFL_Q_DONE (-4097)

/* Producer endpoint. At most one copy job per staging buffer is in flight; the
 * ring slots of jobs in flight follow the tail in submission order (oldest first)
 * and are published only when their job is done (ofl_ring_commit). */
struct ofl_qout {
    struct ofl_ring ring;        /* producer side handle: pushed, batches, full_waits, ... */
    struct ofl_ce *ce;
    struct ofl_waiter *w;
    uint8_t *buf[2];             /* staging buffers, batch entries each, 64-byte aligned */
    uint32_t entry_size, batch;
    int cur;                     /* the staging buffer being filled */
    uint32_t staged;             /* entries filled in buf[cur] */
    uint32_t reserved;           /* entries of the open reservation after those staged
                                  * (ofl_qout_reserve); 0: none */
    /* ofl_qout_next's entries: the rest of the staging buffer that ofl_qout_slot
     * reserved, from nx_base; nx is the next to hand out, nx == nx_end: none left (all
     * NULL: none reserved). Those before nx are staged: the next call other than
     * ofl_qout_next counts them into `staged` (so the per-entry path stores one
     * pointer). */
    uint8_t *nx, *nx_end, *nx_base;
    uint32_t fly[2];             /* entries of job[k] in flight (0: none) */
    uint32_t inflight;           /* fly[0] + fly[1]: ring slots reserved, not committed */
    int old;                     /* the oldest job in flight (when inflight > 0) */
    uint64_t bytes;              /* bytes copied into the ring (used parts of entries) */
    uint64_t dropped;            /* entries dropped on a full ring (drop_full) */
    uint64_t lost;               /* entries never delivered because the consumer broke
                                  * the ring (OFL_RING_EBROKEN): committed and not
                                  * released, in flight, or staged when it was found */
    int err;                     /* first error (sticky), 0 if none */
    bool closed;
    bool broken;                 /* the ring was found broken (its `lost` counted) */
    bool drop_full;              /* set by the caller after init: a flush that finds the
                                  * ring full drops the staged entries that do not fit
                                  * (counted in `dropped`) instead of waiting */
    bool fail_full;              /* set by the caller after init when the consumer runs
                                  * in the producer's own thread (co-scheduled
                                  * segments): a full ring can never drain while this
                                  * thread waits, so a flush that finds it full fails
                                  * with -EDEADLK instead of waiting */
    struct ofl_ce_job job[2];    /* job[k] copies (part of) buf[k] */
};

/* Attach a producer endpoint to formatted ring memory, using copy engine `ce` and
 * waiter `w` (both owned by the caller's core). Returns 0, -EINVAL, -ENOMEM. */
int ofl_qout_init(struct ofl_qout *q, void *ring_mem, size_t len, struct ofl_ce *ce,
                  struct ofl_waiter *w);

/* Reserve up to `want` (>= 1) staging entries for the caller to fill: returns the
 * first, with *got (1..want) entries contiguous from there (stride entry_size,
 * 8-aligned); fewer than `want` when the staging buffer has fewer left (call again
 * for the rest, after ofl_qout_produce). The caller writes each entry's h.len and
 * h.flags and its fields (not h.seq: the queue's), then says how many it filled with
 * ofl_qout_produce before any other call on `q`. Flushes first when `batch` entries
 * are staged, and commits done copies as ofl_qout_slot does. NULL on error (*got 0,
 * q->err says which; want 0 or a closed endpoint is -EINVAL). The fast way to send
 * many entries: the per-entry work is the caller's loop over its own cursor. */
void *ofl_qout_reserve(struct ofl_qout *q, uint32_t want, uint32_t *got);

/* Stage the first n entries of the last reservation (n <= its *got; 0 gives them all
 * back) and close it; they go to the ring at the next flush. Returns 0, -EINVAL (n
 * past the reservation, which stages none and is kept in q->err) or q's earlier
 * error. */
int ofl_qout_produce(struct ofl_qout *q, uint32_t n);

/* Next staging entry (entry_size bytes, 8-aligned, its header zeroed; the caller
 * sets h.len and the fields before the next call on `q`; with a data_off, h.len
 * sizes the copy and a len past entry_size - data_off is clamped, and rejected by
 * the consumer). Reserves the rest of the staging buffer and stages its first entry:
 * ofl_qout_next takes the others without a call. Flushes first when `batch` entries
 * are staged; at the start of a staging buffer commits the copies found done and
 * waits for that buffer's own copy if it is still running. NULL on error (q->err
 * says which). */
void *ofl_qout_slot(struct ofl_qout *q);

/* As ofl_qout_slot, inline: the next entry of the rest of the staging buffer that
 * ofl_qout_slot reserved, when one is left (no call, no check: the reservation is
 * only open while the endpoint is good; one pointer loaded, compared and stored, and
 * the header zeroed), else ofl_qout_slot. What generated enqueue code calls per
 * packet. */
static inline void *ofl_qout_next(struct ofl_qout *q)
{
    uint8_t *e = q->nx;
    if (e == q->nx_end) return ofl_qout_slot(q);
    q->nx = e + q->entry_size;
    memset(e, 0, sizeof(struct ofl_entry_hdr));   /* seq: the copy into the ring writes it */
    return e;
}

/* Commit the copies in flight that are done (oldest first), then copy the staged
 * entries into ring slots reserved after those still in flight, waiting for space
 * (backpressure; each wait episode counts in ring.full_waits; copies in flight are
 * completed and committed first, as the consumer cannot free their slots before).
 * With drop_full, no waiting: once the copies in flight are committed, the staged
 * entries that find no room are dropped and counted in `dropped` (not in pushed).
 * With fail_full, a ring found full (nothing of ours in flight) is -EDEADLK.
 * One doorbell per ring commit. INLINE engine: the entries are committed on return.
 * THREAD engine: the last copy may still be running on return; its entries are
 * committed by a later flush/slot/close, and the next staging buffer is filled
 * meanwhile. Returns 0 or a negative error (-EPIPE, -ECANCELED, ...), also kept
 * in q->err. A ring its consumer marked broken (a corrupt entry: ofl_ring_break) is
 * OFL_RING_EBROKEN, at the flush's start or instead of waiting for room; the entries
 * not delivered are counted in `lost`. */
int ofl_qout_flush(struct ofl_qout *q);

/* Flush, wait for every copy in flight and commit it, then mark the ring finished
 * (ofl_ring_close_first: from then on a consumer that fails counts what it leaves in
 * the ring). Returns 0 or a negative error; on error nothing is left in flight (copies
 * are waited for, not committed) and the ring is not marked finished. A ring its
 * consumer broke first, even at the same moment as this close, is OFL_RING_EBROKEN
 * with the entries not delivered counted in `lost`, as ofl_qout_flush counts them. */
int ofl_qout_close(struct ofl_qout *q);

/* After the producer stopped on an error (another one than the ring's: an abort, a
 * dead peer): whether its consumer broke the ring, and if so the entries not delivered
 * counted in `lost` (once; ofl_qout_flush and _close count them when they find it). */
bool ofl_qout_lost(struct ofl_qout *q);

/* The producer failed (its core's error, whatever it was): mark the ring broken by
 * the producer, so that its consumer takes what was published and then stops
 * (OFL_RING_EBROKEN) instead of waiting for more; the entries never published (held
 * doorbells, in flight, staged) are counted in `lost`. A ring its consumer broke
 * first is counted as ofl_qout_lost counts it; a closed endpoint does nothing (its
 * consumer counts what it leaves). Once per endpoint; later calls do nothing. */
void ofl_qout_break(struct ofl_qout *q);

/* Move the entries staged in `src` (not flushed) to the end of `dst`'s staging, in
 * order, as if they had been made there: an ordered core group's master takes its
 * workers' outputs this way, slice after slice. Both endpoints belong to the caller
 * while it runs (the workers wait for the next batch) and to rings of the same queue
 * (same entry layout). Returns 0, -EINVAL (not the same layout) or dst's error; src
 * is left empty either way. */
int ofl_qout_take(struct ofl_qout *dst, struct ofl_qout *src);

/* Entries not yet committed to the ring: staged plus in flight. */
unsigned ofl_qout_pending(const struct ofl_qout *q);

/* Free the endpoint's memory (not the ring, engine or waiter), after waiting for
 * any copy in flight (not committed). */
void ofl_qout_destroy(struct ofl_qout *q);

/* State of one of the consumer's local buffers. */
enum { OFL_QB_EMPTY = 0, OFL_QB_COPYING, OFL_QB_READY, OFL_QB_HELD };

/* Consumer endpoint. */
struct ofl_qin {
    struct ofl_ring ring;        /* consumer side handle: popped, occupancy samples */
    struct ofl_ce *ce;
    struct ofl_waiter *w;
    uint8_t *buf[2];             /* batch entries each, 64-byte aligned */
    uint32_t n[2];               /* entries in buf[k] */
    int state[2];                /* OFL_QB_* */
    uint32_t entry_size, batch;
    int err;                     /* first error (sticky), 0 if none */
    unsigned prod, inst;         /* which ring of its queue: the producer core and the
                                  * instance (for messages; ofl_prog_open sets them) */
    bool broken;                 /* ofl_qin_break was called */
    uint32_t lost;               /* entries published and never taken from a ring its
                                  * producer broke or closed before this end broke it
                                  * (ofl_qin_break counts them) */
    struct ofl_ce_job job[2];
};

/* Attach a consumer endpoint to formatted ring memory. Returns 0, -EINVAL, -ENOMEM. */
int ofl_qin_init(struct ofl_qin *q, void *ring_mem, size_t len, struct ofl_ce *ce,
                 struct ofl_waiter *w);

/* Next entries: > 0: that many, contiguous in local memory at *entries with stride
 * entry_size, valid (and writable) until the next call; 0: nothing now;
 * OFL_Q_DONE: producer closed and all consumed; OFL_RING_EBROKEN: the producer
 * failed and broke the ring (ofl_qout_break), all it published consumed; < 0 other:
 * error (-EBADMSG corrupt entry: bad seq, or h.len > entry_size - data_off, after
 * which the ring is marked broken for its producer; -EPIPE peer died while waiting for
 * a copy, ...), also kept in q->err. */
int ofl_qin_next(struct ofl_qin *q, const uint8_t **entries);

/* The consumer failed (its core's error, whatever it was): mark the ring broken, so
 * that its producer stops (OFL_RING_EBROKEN, what it still held counted lost) instead
 * of waiting for room that will never come. A ring its producer broke or closed first
 * (the first mark on the ring, one compare-and-swap: ofl_ring_break_by): the entries it
 * published and this end never took are counted in q->lost. Once per endpoint; later
 * calls do nothing. */
void ofl_qin_break(struct ofl_qin *q);

/* Free the endpoint's memory (waits for an in-flight copy first). */
void ofl_qin_destroy(struct ofl_qin *q);

#endif
