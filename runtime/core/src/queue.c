/* Queue endpoints: ring + copy engine + local buffers. */
#include "offlow/queue.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* 64-byte aligned, zeroed buffer of `bytes` (rounded up). */
static uint8_t *alloc_buf(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    uint8_t *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n ? n : 64);
    return p;
}

/* The ring slots of n entries from ring index idx: one run (cnt[1] 0), or two
 * when the ring wraps. */
static void ring_runs(const struct ofl_ring *r, uint32_t idx, uint32_t n, uint8_t *at[2],
                      uint32_t cnt[2])
{
    uint32_t slot = idx & r->mask;
    cnt[0] = n < r->size - slot ? n : r->size - slot;
    cnt[1] = n - cnt[0];
    at[0] = r->entries + (size_t)slot * r->entry_size;
    at[1] = r->entries;
}

/* Describe copying n entries between the ring (starting at ring index `idx`) and
 * contiguous local memory: one run of entries, or two when the ring wraps. Each
 * entry is copied only as far as it is used (its len, the ring's data_off). Into the
 * ring, the copy writes each entry's seq (index + 1); out of it, it checks them. */
static void ring_job(struct ofl_ce_job *job, const struct ofl_ring *r, uint32_t idx, uint32_t n,
                     uint8_t *local, bool to_ring)
{
    uint8_t *ring_at[2];
    uint32_t cnt[2];
    ring_runs(r, idx, n, ring_at, cnt);
    job->kind = OFL_CE_ENTRIES;
    job->stride = r->entry_size;
    job->data_off = r->data_off;
    /* The producer's seq written and the consumer's checked as the entries move. */
    job->seq_op = to_ring ? OFL_CE_SEQ_STAMP : OFL_CE_SEQ_CHECK;
    job->seq = idx + 1;
    job->nseg = 0;
    for (int k = 0; k < 2; k++) {
        if (!cnt[k]) continue;
        struct ofl_ce_seg *s = &job->seg[job->nseg++];
        s->len = cnt[k];   /* entries */
        s->dst = to_ring ? (void *)ring_at[k] : (void *)local;
        s->src = to_ring ? (const void *)local : (const void *)ring_at[k];
        local += (size_t)cnt[k] * r->entry_size;
    }
}

/* The same copy done now, in this thread, with an INLINE engine (no job to describe,
 * submit and wait for). Returns the bytes; *bad nonzero when a checked entry failed. */
static uint64_t ring_copy_now(struct ofl_ce *ce, const struct ofl_ring *r, uint32_t idx,
                              uint32_t n, uint8_t *local, bool to_ring, uint32_t *bad)
{
    uint8_t *ring_at[2];
    uint32_t cnt[2];
    uint64_t bytes = 0;
    ring_runs(r, idx, n, ring_at, cnt);
    int op = to_ring ? OFL_CE_SEQ_STAMP : OFL_CE_SEQ_CHECK;
    for (int k = 0; k < 2 && cnt[k]; k++) {
        bytes += ofl_ce_entries_now(ce, to_ring ? ring_at[k] : local,
                                    to_ring ? local : ring_at[k], cnt[k], r->entry_size,
                                    r->data_off, op, idx + 1, bad);
        local += (size_t)cnt[k] * r->entry_size;
        idx += cnt[k];
    }
    return bytes;
}

/* Keep the first error of an endpoint (*slot: its sticky err field); returns it. */
static int sticky(int *slot, int err)
{
    if (!*slot) *slot = err;
    return *slot;
}

/* What both endpoints set up alike: `ring` attached to the ring memory, two batch
 * buffers, their copy jobs idle. Returns 0 or -errno; after -ENOMEM the caller
 * destroys its endpoint (a buffer may be allocated). */
static int end_attach(struct ofl_ring *ring, void *ring_mem, size_t len, uint8_t *buf[2],
                      struct ofl_ce_job job[2])
{
    int rc = ofl_ring_attach(ring, ring_mem, len);
    if (rc < 0) return rc;
    for (int k = 0; k < 2; k++) {
        buf[k] = alloc_buf((size_t)ring->batch * ring->entry_size);
        job[k].done = 1;
        if (!buf[k]) return -ENOMEM;
    }
    return 0;
}

/* ---- producer ---- */

int ofl_qout_init(struct ofl_qout *q, void *ring_mem, size_t len, struct ofl_ce *ce,
                  struct ofl_waiter *w)
{
    memset(q, 0, sizeof *q);
    if (!ce) return -EINVAL;
    q->ce = ce;
    q->w = w;
    int rc = end_attach(&q->ring, ring_mem, len, q->buf, q->job);
    q->entry_size = q->ring.entry_size;
    q->batch = q->ring.batch;
    if (rc == -ENOMEM) ofl_qout_destroy(q);
    return rc;
}

/* Ring slots free after the tail and the slots reserved by copies in flight. The
 * consumer index is refreshed when fewer than `want` look free (the ring's own
 * refresh rule does not see the reserved slots). */
static uint32_t qout_room(struct ofl_qout *q, uint32_t want)
{
    struct ofl_ring *r = &q->ring;
    uint32_t room = r->size - (r->tail + q->inflight - r->head);
    if (room < want) {
        if (r->held_n) ofl_ring_publish_due(r);  /* held doorbells: the consumer needs them */
        r->head = __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
        room = r->size - (r->tail + q->inflight - r->head);
    }
    return room;
}

/* Complete the oldest copy in flight: wait for it, count its bytes, publish its
 * slots (they are the next ones after the tail) with one doorbell. */
static void qout_complete(struct ofl_qout *q)
{
    int k = q->old;
    /* The engine is in this process and always finishes: no liveness checks, so a
     * peer that exits after closing its rings cannot fail a copy. */
    (void)ofl_ce_wait(q->ce, &q->job[k], NULL);
    q->bytes += q->job[k].bytes;
    ofl_ring_publish(&q->ring, q->fly[k]);   /* the copy wrote the seqs */
    q->inflight -= q->fly[k];
    q->fly[k] = 0;
    q->old = 1 - k;   /* the other job, if one is in flight, is the oldest now */
}

/* Commit the copies in flight that are done, oldest first (in order: stop at the
 * first one still running). */
static void qout_reap(struct ofl_qout *q)
{
    while (q->inflight && ofl_ce_done(&q->job[q->old])) qout_complete(q);
}

/* Wait for every copy in flight without committing it (after an error, or when
 * the endpoint goes away). */
static void qout_abandon(struct ofl_qout *q)
{
    for (int k = 0; k < 2; k++) {
        if (q->fly[k] && q->ce) (void)ofl_ce_wait(q->ce, &q->job[k], NULL);
        q->fly[k] = 0;
    }
    q->inflight = 0;
}

/* Start copying n staged entries of buf[cur], from entry `off`, into the ring slots
 * after those in flight. An INLINE engine has copied them on return: commit now. */
static int qout_submit(struct ofl_qout *q, uint32_t off, uint32_t n)
{
    int k = q->cur;
    struct ofl_ring *r = &q->ring;
    if (q->ce->mode == OFL_CE_INLINE && q->ce->started && !q->inflight) {
        /* Copied on return: publish at once (nothing of ours is in flight before it).
         * A stopped engine takes the job path, which refuses it (-EINVAL). */
        uint32_t bad = 0;   /* (a stamp checks nothing) */
        q->bytes += ring_copy_now(q->ce, r, r->tail, n, q->buf[k] + (size_t)off * q->entry_size,
                                  true, &bad);
        ofl_ring_publish(r, n);
        return 0;
    }
    ring_job(&q->job[k], r, r->tail + q->inflight, n,
             q->buf[k] + (size_t)off * q->entry_size, true);
    int rc = ofl_ce_submit(q->ce, &q->job[k]);
    if (rc < 0) return rc;
    if (!q->inflight) q->old = k;
    q->fly[k] = n;
    q->inflight += n;
    if (q->ce->mode != OFL_CE_THREAD) qout_complete(q);
    return 0;
}

/* Entries ofl_qout_next handed out from ofl_qout_slot's reservation so far. */
static uint32_t qout_next_taken(const struct ofl_qout *q)
{
    return q->nx_base ? (uint32_t)((size_t)(q->nx - q->nx_base) / q->entry_size) : 0;
}

/* End ofl_qout_slot's reservation: the entries ofl_qout_next handed out are staged,
 * the rest given back. Every call but ofl_qout_next starts with it. */
static void qout_settle(struct ofl_qout *q)
{
    q->staged += qout_next_taken(q);
    q->nx = q->nx_end = q->nx_base = NULL;
}

/* When the consumer marked the ring broken: every entry not delivered is lost (those
 * committed and not released, those in flight, those staged: the first `sent` of
 * which a flush already submitted); they are counted in `lost` and the endpoint fails
 * with OFL_RING_EBROKEN. Returns that, or 0. */
static int qout_broken(struct ofl_qout *q, uint32_t sent)
{
    struct ofl_ring *r = &q->ring;
    if (q->broken) return q->err;
    if (!ofl_ring_broken(r)) return 0;
    q->broken = true;
    uint32_t head = __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
    q->lost += (uint32_t)(r->tail - head) + q->inflight + q->staged - sent;
    qout_abandon(q);
    q->staged = 0;
    return sticky(&q->err, OFL_RING_EBROKEN);
}

bool ofl_qout_lost(struct ofl_qout *q)
{
    qout_settle(q);
    return qout_broken(q, 0) < 0;
}

void ofl_qout_break(struct ofl_qout *q)
{
    qout_settle(q);
    /* Closed: everything was published, and its consumer counts what it leaves. */
    if (q->closed) return;
    if (q->broken || qout_broken(q, 0) < 0) return;   /* its consumer broke it first */
    struct ofl_ring *r = &q->ring;
    if (ofl_ring_break_by(r, OFL_RING_BROKEN_BY_PRODUCER) != OFL_RING_BROKEN_BY_PRODUCER) {
        (void)qout_broken(q, 0);   /* the consumer's mark came between: counted as that */
        return;
    }
    q->broken = true;
    /* What was published its consumer still takes; the rest never will be. */
    uint32_t published = __atomic_load_n(&r->shm->tail, __ATOMIC_ACQUIRE);
    q->lost += (uint32_t)(r->tail - published) + q->inflight + q->staged;
    qout_abandon(q);
    q->staged = 0;
}

void *ofl_qout_reserve(struct ofl_qout *q, uint32_t want, uint32_t *got)
{
    qout_settle(q);
    *got = 0;
    q->reserved = 0;
    if (q->err) return NULL;
    if (q->closed || want == 0) {
        sticky(&q->err, -EINVAL);
        return NULL;
    }
    if (q->staged == q->batch && ofl_qout_flush(q) < 0) return NULL;
    if (q->staged == 0) {
        /* A fresh staging buffer: publish what is done; its own copy must be. */
        qout_reap(q);
        while (q->fly[q->cur]) qout_complete(q);
    }
    uint32_t room = q->batch - q->staged;
    q->reserved = want < room ? want : room;
    *got = q->reserved;
    return q->buf[q->cur] + (size_t)q->staged * q->entry_size;
}

int ofl_qout_produce(struct ofl_qout *q, uint32_t n)
{
    qout_settle(q);
    if (q->err) return q->err;
    if (n > q->reserved) {
        q->reserved = 0;
        return sticky(&q->err, -EINVAL);
    }
    q->staged += n;
    q->reserved = 0;
    return 0;
}

void *ofl_qout_slot(struct ofl_qout *q)
{
    /* Reserve the rest of the staging buffer: ofl_qout_next hands out the others. */
    uint32_t got;
    uint8_t *e = ofl_qout_reserve(q, q->batch, &got);
    if (!e) return NULL;
    q->reserved = 0;
    q->nx_base = q->nx = e;
    q->nx_end = e + (size_t)got * q->entry_size;
    return ofl_qout_next(q);   /* got >= 1: taken from the reservation */
}

int ofl_qout_flush(struct ofl_qout *q)
{
    qout_settle(q);
    q->reserved = 0;   /* a flush ends the open reservation */
    if (q->err) return q->err;
    if (qout_broken(q, 0) < 0) return q->err;
    qout_reap(q);
    struct ofl_ring *r = &q->ring;
    uint32_t off = 0, spins = 0;
    bool waiting = false;
    while (off < q->staged) {
        uint32_t rem = q->staged - off;
        uint32_t room = qout_room(q, rem);
        if (q->fly[q->cur] || (room < rem && q->inflight)) {
            /* This buffer's job is busy with an earlier part, or the ring is short:
             * publish the copies in flight first (the consumer cannot free their
             * slots before), then copy the rest as space comes. */
            qout_complete(q);
            continue;
        }
        if (room == 0 && qout_broken(q, off) < 0) return q->err;   /* it will never drain */
        if (room == 0 && q->drop_full) {
            /* Non-blocking enqueue: what does not fit now is dropped. */
            q->dropped += rem;
            break;
        }
        if (room == 0 && q->fail_full) return sticky(&q->err, -EDEADLK);
        if (room == 0) {
            /* Backpressure: the consumer is behind. One full_wait per episode. */
            if (!waiting) r->full_waits++;
            waiting = true;
            if (q->w && q->w->assist && q->w->assist(q->w->assist_arg))
                continue;   /* segments sharing this thread moved packets: look again */
            if (q->w) {
                int rc = ofl_wait(q->w);
                if (rc == -EPIPE) {
                    /* A peer process is gone (this ring's consumer, or one whose end
                     * ends the run): the ring will never drain. Marked broken on its
                     * consumer's behalf, so that this end counts what the ring holds
                     * and what was not sent (the first mark decides: a consumer still
                     * up then takes nothing more and counts nothing, as after a break
                     * of its own); the error the secondary one (the cause is the
                     * peer's, reported where it is), not a failure of this core's. */
                    ofl_ring_break_by(r, OFL_RING_BROKEN_BY_CONSUMER);
                    return qout_broken(q, off);
                }
                if (rc < 0) return sticky(&q->err, rc);
            } else if (spins++ < OFL_WAIT_SPINS) {
                ofl_cpu_relax();
            } else {
                sched_yield();
            }
            continue;
        }
        if (waiting && q->w) ofl_waiter_progress(q->w);
        waiting = false;
        spins = 0;
        uint32_t n = rem < room ? rem : room;
        int rc = qout_submit(q, off, n);
        if (rc < 0) return sticky(&q->err, rc);
        off += n;
    }
    /* Double buffering: fill the other buffer while this one's copy runs. */
    if (q->staged && q->fly[q->cur]) q->cur = 1 - q->cur;
    q->staged = 0;
    return 0;
}

int ofl_qout_close(struct ofl_qout *q)
{
    if (q->closed) return q->err;
    int rc = ofl_qout_flush(q);
    if (rc < 0) {
        qout_abandon(q);
        return rc;
    }
    while (q->inflight) qout_complete(q);
    /* One atomic mark decides, against a consumer breaking the ring now, who counts
     * what is left in it: the consumer once closed first, else this end. */
    if (ofl_ring_close_first(&q->ring) != OFL_RING_CLOSED_FIRST) {
        (void)qout_broken(q, 0);   /* (counted once: a second call returns q->err) */
        return sticky(&q->err, OFL_RING_EBROKEN);
    }
    q->closed = true;
    return 0;
}

int ofl_qout_take(struct ofl_qout *dst, struct ofl_qout *src)
{
    qout_settle(src);
    qout_settle(dst);
    const uint8_t *b = src->buf[src->cur];
    uint32_t n = src->staged;
    src->staged = 0;
    src->reserved = 0;
    if (dst->entry_size != src->entry_size || dst->ring.data_off != src->ring.data_off) {
        dst->reserved = 0;   /* no entry handed out after an error */
        return sticky(&dst->err, -EINVAL);
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = b + (size_t)i * src->entry_size;
        const struct ofl_entry_hdr *h = (const struct ofl_entry_hdr *)e;
        uint8_t *d = ofl_qout_next(dst);
        if (!d) return dst->err;
        memcpy(d, e, ofl_entry_used(src->entry_size, src->ring.data_off, h->len));
    }
    return 0;
}

unsigned ofl_qout_pending(const struct ofl_qout *q)
{
    return q->staged + qout_next_taken(q) + q->inflight;
}

void ofl_qout_destroy(struct ofl_qout *q)
{
    /* A copy may still be running: the engine must not write into freed memory. */
    qout_abandon(q);
    for (int k = 0; k < 2; k++) {
        free(q->buf[k]);
        q->buf[k] = NULL;
    }
    q->staged = 0;
    q->reserved = 0;
    q->nx = q->nx_end = q->nx_base = NULL;
}

/* ---- consumer ---- */

int ofl_qin_init(struct ofl_qin *q, void *ring_mem, size_t len, struct ofl_ce *ce,
                 struct ofl_waiter *w)
{
    memset(q, 0, sizeof *q);
    if (!ce) return -EINVAL;
    q->ce = ce;
    q->w = w;
    int rc = end_attach(&q->ring, ring_mem, len, q->buf, q->job);
    q->entry_size = q->ring.entry_size;
    q->batch = q->ring.batch;
    if (rc == -ENOMEM) ofl_qin_destroy(q);
    return rc;
}

/* Start copying up to a batch of ready entries into empty buffer b. Returns the
 * number of entries (0: none ready) or a negative error. Ring slots stay owned by
 * the consumer until qin_finish releases them. */
static int qin_kick(struct ofl_qin *q, int b)
{
    uint32_t avail = ofl_ring_ready(&q->ring);
    if (!avail) return 0;
    uint32_t n = avail < q->batch ? avail : q->batch;
    ring_job(&q->job[b], &q->ring, q->ring.head, n, q->buf[b], false);
    int rc = ofl_ce_submit(q->ce, &q->job[b]);
    if (rc < 0) return rc;
    q->n[b] = n;
    q->state[b] = OFL_QB_COPYING;
    return (int)n;
}

/* Wait for buffer b's copy, check its entries' seq and len, release the ring slots. */
static int qin_finish(struct ofl_qin *q, int b)
{
    /* The engine is in this process and always finishes (see qout_complete). */
    int rc = ofl_ce_wait(q->ce, &q->job[b], NULL);
    if (rc < 0) return rc;
    /* The copy checked every entry's seq and len (OFL_CE_SEQ_CHECK) in the header it
     * copied, before the slots go back: what we deliver is what the producer
     * committed, and the producer cannot overwrite it meanwhile. The len checked is
     * the len that sized the copy; one past the entry's packet area was clamped there
     * and is an error. One branch per batch, wherever a bad entry falls in it. */
    if (q->job[b].bad) {
        ofl_ring_break(&q->ring);   /* the producer must not wait for room any more */
        return -EBADMSG;
    }
    ofl_ring_release(&q->ring, q->n[b]);
    q->state[b] = OFL_QB_READY;
    return 0;
}

/* ofl_qin_next when no entry is ready: OFL_Q_DONE when the producer closed the ring,
 * OFL_RING_EBROKEN when it broke it (it failed: nothing more will come), else 0. */
static int qin_none(struct ofl_qin *q)
{
    if (ofl_ring_finished(&q->ring)) return OFL_Q_DONE;
    if (ofl_ring_broken_by(&q->ring) == OFL_RING_BROKEN_BY_PRODUCER)
        return sticky(&q->err, OFL_RING_EBROKEN);
    return 0;
}

void ofl_qin_break(struct ofl_qin *q)
{
    struct ofl_ring *r = &q->ring;
    if (q->broken) return;
    q->broken = true;
    /* The first mark decides who counts (one compare-and-swap, against a producer that
     * closes or breaks the ring now): this end broke it first (here, or on a corrupt
     * entry): its producer counts. */
    if (ofl_ring_break(r) == OFL_RING_BROKEN_BY_CONSUMER) return;
    /* The producer broke or closed it first and publishes nothing more: what it
     * published and this end never took is lost, counted here (the producer counted
     * the rest). */
    uint32_t tail = __atomic_load_n(&r->shm->tail, __ATOMIC_ACQUIRE);
    q->lost += tail - r->head;
}

/* ofl_qin_next with an INLINE engine: copy up to a batch of ready entries into
 * buf[0] now, checked as they move, and release their slots. */
static int qin_next_now(struct ofl_qin *q, const uint8_t **entries)
{
    uint32_t n = ofl_ring_ready(&q->ring);
    if (!n) return qin_none(q);
    if (n > q->batch) n = q->batch;
    uint32_t bad = 0;
    ring_copy_now(q->ce, &q->ring, q->ring.head, n, q->buf[0], false, &bad);
    if (bad) {   /* see qin_finish */
        ofl_ring_break(&q->ring);
        return sticky(&q->err, -EBADMSG);
    }
    ofl_ring_release(&q->ring, n);
    *entries = q->buf[0];
    return (int)n;
}

int ofl_qin_next(struct ofl_qin *q, const uint8_t **entries)
{
    if (q->err) return q->err;
    if (q->ce->mode == OFL_CE_INLINE && q->ce->started) return qin_next_now(q, entries);
    int ready = -1;
    for (int k = 0; k < 2; k++) {
        if (q->state[k] == OFL_QB_HELD) q->state[k] = OFL_QB_EMPTY;
        if (q->state[k] == OFL_QB_COPYING) {
            int rc = qin_finish(q, k);
            if (rc < 0) return sticky(&q->err, rc);
        }
        if (q->state[k] == OFL_QB_READY) ready = k;
    }
    if (ready < 0) {
        /* Nothing prefetched: copy now (both buffers are empty here). */
        int rc = qin_kick(q, 0);
        if (rc < 0) return sticky(&q->err, rc);
        if (rc == 0) return qin_none(q);
        rc = qin_finish(q, 0);
        if (rc < 0) return sticky(&q->err, rc);
        ready = 0;
    }
    /* Double buffering (a THREAD engine: an INLINE one took qin_next_now): start the
     * next batch's copy before handing this one out. */
    int rc = qin_kick(q, 1 - ready);
    if (rc < 0) return sticky(&q->err, rc);
    q->state[ready] = OFL_QB_HELD;
    *entries = q->buf[ready];
    return (int)q->n[ready];
}

void ofl_qin_destroy(struct ofl_qin *q)
{
    for (int k = 0; k < 2; k++) {
        if (q->ce && q->state[k] == OFL_QB_COPYING) ofl_ce_wait(q->ce, &q->job[k], NULL);
        free(q->buf[k]);
        q->buf[k] = NULL;
        q->state[k] = OFL_QB_EMPTY;
    }
}
