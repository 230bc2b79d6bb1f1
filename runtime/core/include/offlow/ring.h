/* Descriptor ring in shared memory: one producer, one consumer.
 *
 * Layout of the ring memory (all in the window):
 *   line 0: header (magic, size, entry_size, batch, closed flag, data_off, broken flag)
 *   line 1: producer index (tail), written only by the producer
 *   line 2: consumer index (head), written only by the consumer
 *   then `size` entries of `entry_size` bytes.
 * Indices are free-running 32-bit counters; entry i lives at slot i & (size - 1).
 * Each entry starts with struct ofl_entry_hdr; its `seq` is the ownership flag: the
 * producer writes i + 1 (low 32 bits) at commit and the consumer checks it.
 *
 * struct ofl_ring is the process-local handle of one side. The producer owns `tail`
 * and caches the consumer's head; the consumer owns `head` and caches the producer's
 * tail. A cached index is refreshed only when the cached view cannot satisfy a
 * batch (fewer than `batch` free / ready), so the shared lines move rarely.
 *
 * Entries that carry packet bytes have them at a fixed offset `data_off` (after the
 * header and the fields), `len` of them: only the first ofl_entry_used() bytes of
 * such an entry mean anything and are copied. data_off 0: fixed-size entries,
 * always used whole.
 *
 * A ring its consumer finds corrupt (an entry with a wrong seq or len: a device that
 * wrote it wrong, a damaged window) is marked broken in the shared header
 * (ofl_ring_break): the consumer takes nothing more from it and the producer, which
 * would otherwise wait for ever for room, fails instead (ofl_qout: OFL_RING_EBROKEN).
 * A consumer that fails for another reason marks its rings broken the same way, and a
 * producer that fails marks its own (by the producer): its consumer takes what was
 * published and then fails with OFL_RING_EBROKEN instead of waiting for more.
 *
 * The same shared word says which end left first, and so who counts the entries
 * published and never taken when the consumer stops early: the producer when the
 * consumer broke the ring first, else (the producer broke it or closed it first:
 * ofl_ring_close_first) the consumer. One compare-and-swap on the word decides, so an
 * end that leaves at the same moment as the other cannot count them twice or not at
 * all. */
#ifndef OFL_RING_H
#define OFL_RING_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OFL_RING_MAGIC 0x31474e494c464f00ull /* "\0OFLING1" little-endian */
/* Doorbells a producer holds back at most (ofl_ring_set_delay). */
#define OFL_RING_HELD 64
#define OFL_CACHE_LINE 64
/* What a producer's calls return once the consumer marked the ring broken. Negative,
 * outside the errno range and apart from the other sentinels (OFL_Q_DONE -4097,
 * OFL_SRC_DONE -4098). */
#define OFL_RING_EBROKEN (-4099)

/* The header of every entry. */
struct ofl_entry_hdr {
    uint32_t seq;     /* index + 1 (low 32 bits), written by the producer at commit */
    uint16_t len;     /* packet length (or payload length) */
    uint16_t flags;
};

/* The shared part of a ring (at the start of its memory). */
struct ofl_ring_shm {
    _Alignas(OFL_CACHE_LINE) uint64_t magic;
    uint32_t size;          /* entries, a power of two >= 2 */
    uint32_t entry_size;    /* bytes per entry, a multiple of 8 >= 8 */
    uint32_t batch;         /* entries per doorbell the producer aims for, 1..size */
    uint32_t closed;        /* set (release) by the producer after its last commit */
    uint32_t data_off;      /* bytes before the packet data in an entry; 0 = none */
    uint32_t broken;        /* 0, or which end left first: who broke it
                             * (OFL_RING_BROKEN_BY_*: the consumer on a corrupt entry
                             * or its own failure, the producer on its failure), or
                             * OFL_RING_CLOSED_FIRST (its producer closed it before
                             * either: not broken); set once by a compare-and-swap,
                             * never cleared (ofl_ring_break_by) */
    _Alignas(OFL_CACHE_LINE) uint32_t tail;   /* producer index: entries published */
    _Alignas(OFL_CACHE_LINE) uint32_t head;   /* consumer index: entries released */
    _Alignas(OFL_CACHE_LINE) uint8_t entries[];
};

/* One side's handle on a ring. Counters are per side: the producer counts pushed,
 * batches (doorbells), full_waits and samples occupancy at each commit; the
 * consumer counts popped and samples occupancy at each ofl_ring_ready(). */
struct ofl_ring {
    struct ofl_ring_shm *shm;
    uint8_t *entries;
    uint32_t size, mask, entry_size, batch;
    uint32_t data_off;    /* bytes before the packet data in an entry; 0 = none */
    uint32_t tail;        /* producer: own index; consumer: cached producer index */
    uint32_t head;        /* consumer: own index; producer: cached consumer index */
    int err;              /* consumer: -EBADMSG after ofl_ring_peek found a bad seq */
    uint64_t pushed, popped, batches, full_waits;
    uint64_t occupancy_sum, occupancy_max, samples;
    /* Producer, profile-scaled emulation of a link's latency (ofl_ring_set_delay):
     * each doorbell reaches the consumer delay_ns after its commit. held_tail[] and
     * held_due[] are a FIFO of the doorbells committed and not yet published. */
    uint64_t delay_ns;            /* 0: every doorbell is published at its commit */
    uint32_t held_tail[OFL_RING_HELD];
    uint64_t held_due[OFL_RING_HELD];
    uint32_t held_first, held_n;
};

/* Bytes of ring memory for `size` entries of `entry_size` bytes, header included,
 * rounded up to a multiple of 64 (0 if that overflows). */
size_t ofl_ring_mem_size(uint32_t size, uint32_t entry_size);

/* Initialize ring memory `mem` (64-byte aligned, `len` bytes): size a power of two
 * >= 2, entry_size a multiple of 8 >= 8, 1 <= batch <= size, len >= mem_size,
 * data_off 0 (fixed-size entries) or a multiple of 8 with 8 <= data_off <= entry_size
 * (packet bytes start there; h.len of them). Returns 0 or -EINVAL. */
int ofl_ring_format(void *mem, size_t len, uint32_t size, uint32_t entry_size,
                    uint32_t batch, uint32_t data_off);

/* Attach handle `r` to formatted ring memory; checks magic, geometry and `len`.
 * Returns 0 or -EINVAL. Counters start at 0. */
int ofl_ring_attach(struct ofl_ring *r, void *mem, size_t len);

/* Bytes of an entry that carry something, for an entry whose header says `len`:
 * entry_size when data_off is 0, else data_off + len rounded up to 8, at most
 * entry_size (a len too large for the entry is clamped). */
static inline uint32_t ofl_entry_used(uint32_t entry_size, uint32_t data_off, uint32_t len)
{
    if (!data_off) return entry_size;
    uint64_t u = ((uint64_t)data_off + len + 7) & ~(uint64_t)7;
    return u < entry_size ? (uint32_t)u : entry_size;
}

/* True when `len` fits the entry's packet area (always true with data_off 0);
 * a consumer treats an entry that fails this as corrupt. */
static inline bool ofl_entry_len_ok(uint32_t entry_size, uint32_t data_off, uint32_t len)
{
    return !data_off || len <= entry_size - data_off;
}

/* Which end left a ring first: the value of its shared `broken` word (the first mark
 * stays). Broken by its consumer or its producer, or closed by its producer before
 * either broke it (ofl_ring_close_first; the ring is not broken then). */
#define OFL_RING_BROKEN_BY_CONSUMER 1u
#define OFL_RING_BROKEN_BY_PRODUCER 2u
#define OFL_RING_CLOSED_FIRST 3u

/* Mark the ring broken by `who` (OFL_RING_BROKEN_BY_*, or OFL_RING_CLOSED_FIRST)
 * unless it is already marked: the first mark stays. Returns the mark now, `who` when
 * this call set it: one atomic step, so two ends marking at once learn the same
 * first. */
static inline uint32_t ofl_ring_break_by(struct ofl_ring *r, uint32_t who)
{
    uint32_t first = 0;
    if (__atomic_compare_exchange_n(&r->shm->broken, &first, who, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return who;
    return first;
}

/* Mark the ring broken by its consumer (on finding a corrupt entry, or on failing for
 * another reason): it delivers nothing more, and its producer stops instead of
 * waiting for room. Returns the first mark (ofl_ring_break_by). */
static inline uint32_t ofl_ring_break(struct ofl_ring *r)
{
    return ofl_ring_break_by(r, OFL_RING_BROKEN_BY_CONSUMER);
}

/* Whether the ring was marked broken (either side may ask; one load of the header's
 * line, which nothing else writes while the ring runs). A ring closed first is not. */
static inline bool ofl_ring_broken(const struct ofl_ring *r)
{
    uint32_t first = __atomic_load_n(&r->shm->broken, __ATOMIC_ACQUIRE);
    return first == OFL_RING_BROKEN_BY_CONSUMER || first == OFL_RING_BROKEN_BY_PRODUCER;
}

/* Who marked the ring broken (OFL_RING_BROKEN_BY_*), OFL_RING_CLOSED_FIRST when its
 * producer closed it first, 0 if nobody yet. */
static inline uint32_t ofl_ring_broken_by(const struct ofl_ring *r)
{
    return __atomic_load_n(&r->shm->broken, __ATOMIC_ACQUIRE);
}

/* ---- producer ---- */

/* Hold each doorbell of producer handle `r` back from the consumer for `ns`
 * nanoseconds (0: none), as a link with that latency would (the consumer sees a
 * batch's entries only then). The producer must then give the held doorbells their
 * turn: ofl_ring_free, ofl_ring_commit and ofl_ring_close publish the due ones, and
 * a producer that may go idle calls ofl_ring_publish_due. At most OFL_RING_HELD are
 * held: a commit past them first waits for the oldest. */
void ofl_ring_set_delay(struct ofl_ring *r, uint64_t ns);

/* Publish the held doorbells whose time has come (one store of the tail). Returns
 * how many are still held. */
unsigned ofl_ring_publish_due(struct ofl_ring *r);

/* Hold the doorbell of the entries committed up to r->tail (ofl_ring_commit of a
 * ring with a delay). */
void ofl_ring_hold(struct ofl_ring *r);

/* Entries that can be filled now (refreshes the consumer index when fewer than a
 * batch look free). */
static inline uint32_t ofl_ring_free(struct ofl_ring *r)
{
    uint32_t f = r->size - (r->tail - r->head);
    if (f < r->batch) {
        if (r->held_n) ofl_ring_publish_due(r);  /* the consumer cannot free them before */
        r->head = __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
        f = r->size - (r->tail - r->head);
    }
    return f;
}

/* The i-th free slot after the tail (i < ofl_ring_free()). */
static inline void *ofl_ring_slot(struct ofl_ring *r, uint32_t i)
{
    return r->entries + (size_t)((r->tail + i) & r->mask) * r->entry_size;
}

/* Publish the next n filled slots whose seq is already written (a copy into the ring
 * that stamped them: OFL_CE_SEQ_STAMP): one doorbell, a store-release of the tail (with
 * a delay, held until its time: ofl_ring_set_delay), and the producer's counters. */
static inline void ofl_ring_publish(struct ofl_ring *r, uint32_t n)
{
    r->tail += n;
    if (r->delay_ns) ofl_ring_hold(r);
    else __atomic_store_n(&r->shm->tail, r->tail, __ATOMIC_RELEASE);
    uint64_t occ = r->tail - r->head;   /* upper bound: the cached head may be stale */
    r->pushed += n;
    r->batches++;
    r->samples++;
    r->occupancy_sum += occ;
    if (occ > r->occupancy_max) r->occupancy_max = occ;
}

/* Publish the next n filled slots: write their seq, then ofl_ring_publish. */
static inline void ofl_ring_commit(struct ofl_ring *r, uint32_t n)
{
    /* Locals: the seq stores may alias the handle's own uint32_t fields. */
    uint8_t *entries = r->entries;
    uint32_t tail = r->tail, mask = r->mask, es = r->entry_size;
    for (uint32_t i = 0; i < n; i++)
        ((struct ofl_entry_hdr *)(entries + (size_t)((tail + i) & mask) * es))->seq = tail + i + 1;
    ofl_ring_publish(r, n);
}

/* The producer is finished: no commits after this. Publishes the held doorbells
 * first, waiting for their time. */
void ofl_ring_close(struct ofl_ring *r);

/* ofl_ring_close for a producer whose consumer counts what it leaves in the ring when
 * it stops early (ofl_qin_break): the held doorbells published, the ring is marked
 * OFL_RING_CLOSED_FIRST and closed, unless its consumer broke it first: then it is
 * left as it is (not closed) and the entries published and not taken are the
 * producer's to count. Returns the first mark: OFL_RING_CLOSED_FIRST (closed), or who
 * broke it (OFL_RING_BROKEN_BY_*). */
uint32_t ofl_ring_close_first(struct ofl_ring *r);

/* ---- consumer ---- */

/* Entries published and not yet released (refreshes the producer index when fewer
 * than a batch are known). Samples occupancy. */
static inline uint32_t ofl_ring_ready(struct ofl_ring *r)
{
    uint32_t n = r->tail - r->head;
    if (n < r->batch) {
        r->tail = __atomic_load_n(&r->shm->tail, __ATOMIC_ACQUIRE);
        n = r->tail - r->head;
    }
    r->samples++;
    r->occupancy_sum += n;
    if (n > r->occupancy_max) r->occupancy_max = n;
    return n;
}

/* Check the seq of the i-th ready entry (i < ofl_ring_ready()).
 * Returns 0 or -EBADMSG. */
static inline int ofl_ring_check(const struct ofl_ring *r, uint32_t i)
{
    const struct ofl_entry_hdr *h =
        (const struct ofl_entry_hdr *)(r->entries +
                                       (size_t)((r->head + i) & r->mask) * r->entry_size);
    return h->seq == r->head + i + 1 ? 0 : -EBADMSG;
}

/* The i-th ready entry (i < ofl_ring_ready()), after checking its seq: NULL,
 * r->err = -EBADMSG and the ring marked broken (ofl_ring_break) when the seq is wrong. */
static inline const void *ofl_ring_peek(struct ofl_ring *r, uint32_t i)
{
    if (ofl_ring_check(r, i) < 0) {
        r->err = -EBADMSG;
        ofl_ring_break(r);
        return NULL;
    }
    return r->entries + (size_t)((r->head + i) & r->mask) * r->entry_size;
}

/* Give the next n ready entries back to the producer (store-release of the head). */
static inline void ofl_ring_release(struct ofl_ring *r, uint32_t n)
{
    r->head += n;
    __atomic_store_n(&r->shm->head, r->head, __ATOMIC_RELEASE);
    r->popped += n;
}

/* True when the producer closed the ring and every entry was released. */
bool ofl_ring_finished(struct ofl_ring *r);

#endif
