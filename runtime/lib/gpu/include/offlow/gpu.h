/* The host side of the gpu target: an OpenCL device running one generated kernel over
 * batches of packets, N batches in flight (Knapp's N-deep buffers).
 *
 * Each of the `depth` slots holds one batch: pinned host buffers (OpenCL buffers made
 * with CL_MEM_ALLOC_HOST_PTR and mapped once) for the per-packet input records, the
 * packet bytes (when the kernel uses them) and the output records, and device buffers
 * of the same sizes. A submitted slot goes through three command queues, each waiting
 * on the event of the one before: copy in (queue `in`), the kernel (queue `run`), copy
 * out (queue `out`); so while one batch runs, the next one's copy in and the previous
 * one's copy out can proceed. The caller fills a free slot, submits it, and later polls
 * it; it takes slots in order, so batches complete in the order they were submitted.
 *
 * The kernel's arguments: 0 the input records, 1 the packet bytes, 2 the output
 * records, 3 the packet count (uint); from 4, the buffers of the tables it reads
 * (ofl_gpu_table). One thread drives a struct ofl_gpu; its functions are not
 * thread-safe. Errors are negative errno values with a message in the caller's
 * errbuf (OFL_GPU_ERRLEN bytes) or, for the calls without one, in g->err. */
#ifndef OFL_GPU_H
#define OFL_GPU_H

#include <stddef.h>
#include <stdint.h>

#define OFL_GPU_ERRLEN 512u
#define OFL_GPU_MAX_DEPTH 8u
#define OFL_GPU_MAX_TABLES 32u
/* The first kernel argument of the tables' buffers. */
#define OFL_GPU_ARG_TABLES 4u

/* What to run and how: the kernel's OpenCL C, its build options (-I...), its name,
 * the batch and pipeline geometry and the per-packet record sizes. */
struct ofl_gpu_spec {
    const char *source;     /* OpenCL C of the kernel */
    const char *options;    /* clBuildProgram options (may be NULL) */
    const char *kernel;     /* the kernel's name */
    unsigned batch;         /* most packets in one batch (1..2^20) */
    unsigned depth;         /* batches in flight (1..OFL_GPU_MAX_DEPTH) */
    size_t in_rec;          /* bytes of one input record (> 0) */
    size_t out_rec;         /* bytes of one output record (> 0) */
    size_t bytes_cap;       /* bytes of packet data a slot holds (0: none) */
    int bytes_cross;        /* the packet bytes go to the device and come back (the kernel
                               reads and may write them); 0: `bytes` is host memory only
                               (the device gets no buffer for them) */
};

/* One batch's buffers (read `in`, `bytes`, `out` and `n`; the rest is the library's). */
struct ofl_gpu_slot {
    void *in;               /* batch * in_rec bytes, pinned: fill before submitting */
    uint8_t *bytes;         /* bytes_cap bytes, pinned (NULL when bytes_cap is 0) */
    void *out;              /* batch * out_rec bytes, pinned: read once done */
    unsigned n;             /* packets of the batch submitted */
    int busy;               /* submitted and not yet seen done */
    void *priv_;            /* OpenCL objects (buffers, events) */
};

struct ofl_gpu;

/* Pick an OpenCL device (OFFLOW_OPENCL_DEVICE: "gpu" needs a GPU, "cpu" takes a CPU
 * device; unset: the first GPU of any platform, else the first device), build the
 * kernel and allocate every slot. Returns 0 and sets `*g`, or a negative errno with the
 * reason (the compiler's log for a kernel that does not build) in `errbuf`: -ENODEV
 * without a device, -EINVAL for a bad spec or a kernel that does not build, -ENOMEM. */
int ofl_gpu_open(struct ofl_gpu **g, const struct ofl_gpu_spec *spec, char *errbuf);

/* Free everything (NULL is fine); waits for the batches in flight. */
void ofl_gpu_close(struct ofl_gpu *g);

/* "PLATFORM: DEVICE" of the device it runs on. */
const char *ofl_gpu_device(const struct ofl_gpu *g);

/* The reason of the last error of a call without errbuf. */
const char *ofl_gpu_error(const struct ofl_gpu *g);

/* Copy `len` bytes at `data` into a read-only device buffer, kernel argument `arg`
 * (>= OFL_GPU_ARG_TABLES); an empty table gets a buffer of 8 zero bytes. 0, -EINVAL
 * (arg out of range), -ENOMEM or -EIO (the OpenCL error in ofl_gpu_error). */
int ofl_gpu_table(struct ofl_gpu *g, unsigned arg, const void *data, size_t len);

/* Slot k (0..depth-1). */
struct ofl_gpu_slot *ofl_gpu_slot(struct ofl_gpu *g, unsigned k);

/* Start slot k's batch of n packets (1..batch) whose packet data takes `nbytes` of its
 * bytes buffer: copy in, kernel, copy out, on the three queues (flushed, not waited
 * for). 0, -EBUSY (the slot is in flight), -EINVAL, or -EIO. */
int ofl_gpu_submit(struct ofl_gpu *g, unsigned k, unsigned n, size_t nbytes);

/* Whether slot k's batch is done: 1 (its output records are in `out`; the slot is free
 * again), 0 (still in flight; `wait` = 1 blocks until it is done), -EINVAL (not
 * submitted) or -EIO (the device failed it). */
int ofl_gpu_poll(struct ofl_gpu *g, unsigned k, int wait);

/* As ofl_gpu_submit without the kernel: slot k's input records and bytes copied to the
 * device and its output records and bytes copied back (their old contents), on the same
 * queues. What copying a batch's bytes alone allows: the interconnect's ceiling
 * (offlow bench gpu). Poll it as a batch. */
int ofl_gpu_submit_copy(struct ofl_gpu *g, unsigned k, unsigned n, size_t nbytes);

#endif
