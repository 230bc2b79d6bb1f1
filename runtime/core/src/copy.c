/* The copy engine: inline copies or a polling copy thread. */
#include "offlow/copy.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>

#include "offlow/ring.h"
#include "offlow/thread.h"
#include "offlow/ticks.h"

/* The header of an entry moving as `op` says (copy.h), `seq` the one it should
 * carry; returns it with its seq written (STAMP), and ORs into *miss something
 * nonzero when it fails a check (CHECK; `cap`: the packet area's bytes, UINT32_MAX
 * without a data_off). */
static inline struct ofl_entry_hdr seq_op(struct ofl_entry_hdr h, int op, uint32_t seq,
                                          uint32_t cap, uint32_t *miss)
{
    if (op == OFL_CE_SEQ_STAMP) h.seq = seq;
    else if (op == OFL_CE_SEQ_CHECK) *miss |= (h.seq ^ seq) | (uint32_t)(h.len > cap);
    return h;
}

/* 16 bytes as four 32-bit lanes (a GNU C vector: one SSE register on x86-64, the
 * compiler's best elsewhere); lane 0 is the entry's seq (ofl_entry_hdr, first). */
typedef uint32_t ofl_v4u __attribute__((vector_size(16)));

/* 16-byte entries without packet bytes, the common small descriptor: each moved as
 * one 16-byte value, its seq written into (STAMP) or checked from (CHECK) the value
 * in flight, so an entry is one load and one store; one loop per op so the compiler
 * sees each whole. */
static void copy16(uint8_t *dst, const uint8_t *src, size_t count, int op, uint32_t seq,
                   uint32_t *miss)
{
    _Static_assert(offsetof(struct ofl_entry_hdr, seq) == 0, "seq is lane 0");
    ofl_v4u v;
    uint32_t m = 0;
    if (op == OFL_CE_SEQ_STAMP) {
        for (size_t i = 0; i < count; i++, dst += 16, src += 16) {
            memcpy(&v, src, 16);
            v[0] = seq + (uint32_t)i;
            memcpy(dst, &v, 16);
        }
    } else if (op == OFL_CE_SEQ_CHECK) {
        for (size_t i = 0; i < count; i++, dst += 16, src += 16) {
            memcpy(&v, src, 16);
            m |= v[0] ^ (seq + (uint32_t)i);
            memcpy(dst, &v, 16);
        }
    } else {
        memcpy(dst, src, count * 16);
    }
    *miss |= m;
}

/* Copy `count` entries of `stride` bytes, each as far as it is used, its seq handled
 * as `op` says from `seq` on (*miss: see seq_op). The header is read once, so the
 * len in the copy is the len that sized it and the len checked. Returns the bytes
 * copied. */
static uint64_t copy_entries(uint8_t *dst, const uint8_t *src, size_t count, uint32_t stride,
                             uint32_t data_off, int op, uint32_t seq, uint32_t *miss)
{
    struct ofl_entry_hdr h;
    if (!data_off && stride == 16) {
        copy16(dst, src, count, op, seq, miss);
        return (uint64_t)count * 16;
    }
    if (!data_off) {
        /* Whole entries: one copy of the run, then the seqs in the copy. */
        memcpy(dst, src, count * stride);
        if (op != OFL_CE_SEQ_KEEP)
            for (size_t i = 0; i < count; i++, dst += stride) {
                memcpy(&h, dst, sizeof h);
                h = seq_op(h, op, seq + (uint32_t)i, UINT32_MAX, miss);
                memcpy(dst, &h, sizeof h);
            }
        return (uint64_t)count * stride;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++, dst += stride, src += stride) {
        memcpy(&h, src, sizeof h);
        uint32_t used = ofl_entry_used(stride, data_off, h.len);
        h = seq_op(h, op, seq + (uint32_t)i, stride - data_off, miss);
        memcpy(dst, &h, sizeof h);
        memcpy(dst + sizeof h, src + sizeof h, used - sizeof h);
        total += used;
    }
    return total;
}

/* Do every copy of `job`, record its bytes, mark it done. Returns the bytes. */
static uint64_t run_job(struct ofl_ce_job *job)
{
    uint64_t bytes = 0;
    uint32_t seq = job->seq, bad = 0;
    for (unsigned i = 0; i < job->nseg; i++) {
        const struct ofl_ce_seg *s = &job->seg[i];
        if (job->kind == OFL_CE_ENTRIES) {
            bytes += copy_entries(s->dst, s->src, s->len, job->stride, job->data_off,
                                  job->seq_op, seq, &bad);
            seq += (uint32_t)s->len;
        } else {
            memcpy(s->dst, s->src, s->len);
            bytes += s->len;
        }
    }
    job->bytes = bytes;
    job->bad = bad;
    __atomic_store_n(&job->done, 1u, __ATOMIC_RELEASE);
    return bytes;
}

/* A job the engine can run: known kind, 1..OFL_CE_MAX_SEGS segments, and for
 * entries a valid stride, data_off and seq_op. */
static bool job_ok(const struct ofl_ce_job *job)
{
    if (job->nseg == 0 || job->nseg > OFL_CE_MAX_SEGS) return false;
    if (job->kind == OFL_CE_BYTES) return true;
    if (job->kind != OFL_CE_ENTRIES) return false;
    if (job->stride < 8 || job->stride % 8) return false;
    if (job->seq_op < OFL_CE_SEQ_KEEP || job->seq_op > OFL_CE_SEQ_CHECK) return false;
    return job->data_off == 0 ||
           (job->data_off >= 8 && job->data_off % 8 == 0 && job->data_off <= job->stride);
}

/* The engine thread: take jobs in order; when idle, spin a while, then yield, then
 * nap (wait.h). */
static void *engine_main(void *arg)
{
    struct ofl_ce *ce = arg;
    if (ce->cpu >= 0) ofl_pin_self(ce->cpu);
    uint32_t head = ce->q_head;
    uint64_t bytes = 0;
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    for (;;) {
        uint32_t tail = __atomic_load_n(&ce->q_tail, __ATOMIC_ACQUIRE);
        if (head != tail) {
            while (head != tail) {
                bytes += run_job(ce->q[head & (OFL_CE_QLEN - 1)]);
                head++;
                __atomic_store_n(&ce->q_head, head, __ATOMIC_RELEASE);
            }
            ofl_waiter_progress(&w);
            continue;
        }
        /* Stop only with an empty queue, so every queued job completes. */
        if (__atomic_load_n(&ce->stop, __ATOMIC_ACQUIRE)) {
            if (head == __atomic_load_n(&ce->q_tail, __ATOMIC_ACQUIRE)) break;
            continue;
        }
        ofl_wait(&w);   /* spin, yield, then nap: an idle engine costs no CPU */
    }
    ce->bytes += bytes;   /* read by the submitter after the join */
    return NULL;
}

int ofl_ce_start(struct ofl_ce *ce, int mode, int cpu)
{
    memset(ce, 0, sizeof *ce);
    if (mode != OFL_CE_INLINE && mode != OFL_CE_THREAD) return -EINVAL;
    ce->mode = mode;
    ce->cpu = cpu < 0 ? -1 : cpu;
    if (mode == OFL_CE_THREAD) {
        int rc = pthread_create(&ce->thread, NULL, engine_main, ce);
        if (rc) return -rc;
        ce->thread_live = true;
    }
    ce->started = true;
    return 0;
}

int ofl_ce_submit(struct ofl_ce *ce, struct ofl_ce_job *job)
{
    if (!ce->started || !job_ok(job)) return -EINVAL;
    job->done = 0;
    job->bytes = 0;
    job->bad = 0;
    ce->jobs++;
    if (ce->mode == OFL_CE_INLINE) {
        uint64_t t0 = ce->timed ? ofl_ticks() : 0;
        ce->bytes += run_job(job);
        if (ce->timed) ce->copy_ticks += ofl_ticks() - t0;
        return 0;
    }
    /* The engine thread is in this process and always drains; wait out a full queue. */
    uint32_t spins = 0;
    while (ce->q_tail - __atomic_load_n(&ce->q_head, __ATOMIC_ACQUIRE) >= OFL_CE_QLEN) {
        if (spins++ < OFL_WAIT_SPINS) ofl_cpu_relax();
        else sched_yield();
    }
    ce->q[ce->q_tail & (OFL_CE_QLEN - 1)] = job;
    __atomic_store_n(&ce->q_tail, ce->q_tail + 1, __ATOMIC_RELEASE);
    return 0;
}

uint64_t ofl_ce_entries_now(struct ofl_ce *ce, void *dst, const void *src, size_t n,
                            uint32_t stride, uint32_t data_off, int seq_op, uint32_t seq,
                            uint32_t *bad)
{
    uint64_t t0 = ce->timed ? ofl_ticks() : 0;
    uint64_t bytes = copy_entries(dst, src, n, stride, data_off, seq_op, seq, bad);
    if (ce->timed) ce->copy_ticks += ofl_ticks() - t0;
    ce->jobs++;
    ce->bytes += bytes;
    return bytes;
}

int ofl_ce_wait(struct ofl_ce *ce, struct ofl_ce_job *job, struct ofl_waiter *w)
{
    (void)ce;
    uint32_t spins = 0;
    while (!ofl_ce_done(job)) {
        if (w) {
            int rc = ofl_wait(w);
            if (rc < 0) return rc;
        } else if (spins++ < OFL_WAIT_SPINS) {
            ofl_cpu_relax();
        } else {
            sched_yield();
        }
    }
    return 0;
}

void ofl_ce_stop(struct ofl_ce *ce)
{
    if (ce->thread_live) {
        __atomic_store_n(&ce->stop, 1u, __ATOMIC_RELEASE);
        pthread_join(ce->thread, NULL);
        ce->thread_live = false;
    }
    ce->started = false;
}
