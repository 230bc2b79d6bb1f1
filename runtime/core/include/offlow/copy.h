/* The copy engine: the emulated device's DMA engine.
 *
 * A job is a list of up to OFL_CE_MAX_SEGS segments. An OFL_CE_BYTES job copies
 * `len` bytes per segment. An OFL_CE_ENTRIES job copies, per segment, a run of `len`
 * ring entries laid out with stride `stride` on both sides, each only as far as it
 * is used (ofl_entry_used() of its header's len and the job's data_off; the whole
 * stride when data_off is 0). In INLINE mode
 * the copy happens in ofl_ce_submit (the right choice when there are fewer cores
 * than threads); in THREAD mode a polling thread of its own copies, overlapping
 * with the submitter's work. One engine has one submitting thread (each core owns
 * its engine). */
#ifndef OFL_COPY_H
#define OFL_COPY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offlow/wait.h"

enum { OFL_CE_INLINE = 0, OFL_CE_THREAD = 1 };

/* Job kinds. */
enum { OFL_CE_BYTES = 0, OFL_CE_ENTRIES = 1 };

/* What an entries job does with each entry's seq (struct ofl_entry_hdr) as it copies
 * entry i of the job (counted across its segments): KEEP copies it as it is; STAMP
 * writes job.seq + i into the destination's header (the producer's ownership flag,
 * fused into its copy into the ring); CHECK copies it and sets job.bad nonzero when
 * some entry's seq is not job.seq + i or its len is past the packet area (the
 * consumer's check, fused into its copy out of the ring: what is checked is what
 * was copied; one test per job, wherever the bad entry is). */
enum { OFL_CE_SEQ_KEEP = 0, OFL_CE_SEQ_STAMP = 1, OFL_CE_SEQ_CHECK = 2 };

#define OFL_CE_MAX_SEGS 8
/* Jobs that can be queued on a THREAD engine (a power of two). */
#define OFL_CE_QLEN 64

/* One contiguous copy: `len` bytes (OFL_CE_BYTES) or `len` entries (OFL_CE_ENTRIES). */
struct ofl_ce_seg {
    void *dst;
    const void *src;
    size_t len;
};

/* A copy job, owned by the submitter; it must stay alive until done. A zeroed job
 * is an OFL_CE_BYTES job. */
struct ofl_ce_job {
    int kind;                 /* OFL_CE_BYTES or OFL_CE_ENTRIES */
    struct ofl_ce_seg seg[OFL_CE_MAX_SEGS];
    unsigned nseg;
    uint32_t stride;          /* ENTRIES: entry size, a multiple of 8 >= 8 */
    uint32_t data_off;        /* ENTRIES: 0 (entries copied whole) or where the packet
                                 bytes start, 8 <= data_off <= stride, a multiple of 8 */
    int seq_op;               /* ENTRIES: OFL_CE_SEQ_KEEP (0), _STAMP or _CHECK */
    uint32_t seq;             /* ENTRIES, STAMP / CHECK: the first entry's seq */
    uint32_t bad;             /* CHECK: nonzero when an entry failed it; valid once done */
    uint64_t bytes;           /* bytes the job copied; valid once it is done */
    volatile uint32_t done;   /* set (release) by the engine when every segment is copied */
};

/* An engine. Zero-initialized or stopped engines reject submissions. */
struct ofl_ce {
    int mode;                 /* OFL_CE_INLINE or OFL_CE_THREAD */
    int cpu;                  /* CPU the engine thread is pinned to, -1 = any */
    bool started;
    bool thread_live;
    pthread_t thread;
    uint64_t jobs;            /* submitted so far (submitter side) */
    uint64_t bytes;           /* copied so far: INLINE counts at each submit, THREAD
                                 when the engine stops (read it after ofl_ce_stop) */
    bool timed;               /* count copy_ticks (set by its core in profile-scaled
                                 runs, whose turns are timed) */
    uint64_t copy_ticks;      /* timed: ofl_ticks() spent copying in the submitter's
                                 thread (INLINE submits and ofl_ce_entries_now) */
    /* THREAD mode: SPSC job queue, submitter -> engine thread */
    struct ofl_ce_job *q[OFL_CE_QLEN];
    _Alignas(64) uint32_t q_tail;   /* written by the submitter */
    _Alignas(64) uint32_t q_head;   /* written by the engine thread */
    _Alignas(64) uint32_t stop;     /* set by ofl_ce_stop */
};

/* Start engine `ce` in `mode`; a THREAD engine's thread is pinned to `cpu`
 * (modulo the CPU count) unless cpu is -1. Returns 0, -EINVAL (bad mode) or a
 * negative errno from pthread_create. */
int ofl_ce_start(struct ofl_ce *ce, int mode, int cpu);

/* Queue `job` (1..OFL_CE_MAX_SEGS segments; its `done`, `bytes` and `bad` are cleared
 * here). INLINE: copies now and marks it done. THREAD: hands it to the engine thread
 * (yielding while the job queue is full). Returns 0 or -EINVAL (bad kind, segment
 * count, stride, data_off or seq_op; engine not started). */
int ofl_ce_submit(struct ofl_ce *ce, struct ofl_ce_job *job);

/* Copy `n` entries from `src` to `dst` now, in the calling thread, as an INLINE
 * engine runs an entries job of one segment (stride, data_off, seq_op and seq as a
 * job's; ORs into *bad what job.bad would get), counted in the engine's jobs and
 * bytes: for a caller that would submit to an INLINE engine and wait at once (the
 * queue's per-batch copies), without a job. Returns the bytes copied. */
uint64_t ofl_ce_entries_now(struct ofl_ce *ce, void *dst, const void *src, size_t n,
                            uint32_t stride, uint32_t data_off, int seq_op, uint32_t seq,
                            uint32_t *bad);

/* True when `job` has completed (acquire: its copies are visible). */
static inline bool ofl_ce_done(const struct ofl_ce_job *job)
{
    return __atomic_load_n(&job->done, __ATOMIC_ACQUIRE) != 0;
}

/* Wait until `job` is done, waiting through `w` (may be NULL: plain spin/yield)
 * so a dead peer or an abort still ends the wait. Returns 0 or ofl_wait's error. */
int ofl_ce_wait(struct ofl_ce *ce, struct ofl_ce_job *job, struct ofl_waiter *w);

/* Stop the engine (joins its thread after the queued jobs are done). Idempotent. */
void ofl_ce_stop(struct ofl_ce *ce);

#endif
