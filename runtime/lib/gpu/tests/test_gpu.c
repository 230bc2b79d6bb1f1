/* The gpu library (gpu.h) on whatever OpenCL device is here (PoCL in CI): a kernel
 * over N-deep pipelined batches gives every packet's result, in order; the packet
 * bytes come back when asked; the slots' states and the library's errors.
 * Usage: test_gpu DEPTH_MAX (the planner's limit, which must be the library's). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/gpu.h"

/* out[i] = in[i] * 3 + table[in[i] % 16]; each packet's bytes incremented. */
static const char *const KERNEL =
    "__kernel void k(__global const uint *in, __global uchar *bytes, __global uint *out,\n"
    "                uint n, __global const uint *table) {\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n) return;\n"
    "    out[i] = in[i] * 3u + table[in[i] % 16u];\n"
    "    for (uint k = 0; k < 4; k++) bytes[4 * i + k] += 1;\n"
    "}\n";

enum { BATCH = 64, DEPTH = 3, BATCHES = 11 };

static struct ofl_gpu_spec spec(void)
{
    return (struct ofl_gpu_spec){.source = KERNEL, .kernel = "k", .batch = BATCH,
                                 .depth = DEPTH, .in_rec = 4, .out_rec = 4,
                                 .bytes_cap = 4 * BATCH, .bytes_cross = 1};
}

static void test_errors(unsigned depth_max)
{
    char err[OFL_GPU_ERRLEN];
    struct ofl_gpu *g = NULL;
    CHECK(OFL_GPU_MAX_DEPTH == depth_max, "the library's depth limit %u is the planner's %u",
          OFL_GPU_MAX_DEPTH, depth_max);
    struct ofl_gpu_spec s = spec();
    s.depth = OFL_GPU_MAX_DEPTH + 1;
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL && !g && strstr(err, "depth"),
          "a depth over the limit: -EINVAL (%s)", err);
    s = spec();
    s.batch = 0;
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL, "batch 0: -EINVAL");
    s = spec();
    s.source = "__kernel void k(__global uint *x) { x[0] = undeclared; }";
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL && strstr(err, "refused the kernel") &&
              strstr(err, "undeclared"),
          "a kernel that does not build: -EINVAL with the compiler's log");
    /* twelve warnings before the error: the error fits the message, the warnings go */
    s.source = "__kernel void k(__global uint *x) {\n"
               "    x[1] = x[2] && 4; x[1] = x[3] && 4; x[1] = x[4] && 4; x[1] = x[5] && 4;\n"
               "    x[1] = x[6] && 4; x[1] = x[7] && 4; x[1] = x[8] && 4; x[1] = x[9] && 4;\n"
               "    x[1] = x[2] && 5; x[1] = x[3] && 5; x[1] = x[4] && 5; x[1] = x[5] && 5;\n"
               "    x[0] = undeclared_after_warnings;\n}\n";
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL && strstr(err, "undeclared_after_warnings") &&
              !strstr(err, "warning:"),
          "the log's errors, less its warnings: %s", err);
    const char *was = getenv("OFFLOW_OPENCL_DEVICE");
    char *kept = was ? strdup(was) : NULL;  /* (gpu_check.sh asks for a GPU) */
    setenv("OFFLOW_OPENCL_DEVICE", "tpu", 1);
    s = spec();
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL && strstr(err, "OFFLOW_OPENCL_DEVICE=tpu"),
          "an unknown device kind: %s", err);
    if (kept) setenv("OFFLOW_OPENCL_DEVICE", kept, 1);
    else unsetenv("OFFLOW_OPENCL_DEVICE");
    free(kept);
    s = spec();
    s.bytes_cross = 0;
    CHECK(ofl_gpu_open(&g, &s, err) == 0, "packet bytes kept on the host: %s", err);
    if (g) {
        CHECK(ofl_gpu_submit(g, 0, 1, 4) == -EINVAL, "so none may be submitted");
        ofl_gpu_close(g);
        g = NULL;
    }
    s = spec();
    s.kernel = "nope";
    CHECK(ofl_gpu_open(&g, &s, err) == -EINVAL && strstr(err, "no kernel `nope`"),
          "a kernel name that is not there: %s", err);
}

/* Wait for slot k's batch, whose packets are numbered from *next: count its wrong
 * results and bytes. */
static void take(struct ofl_gpu *g, unsigned k, const uint32_t *table, unsigned *next,
                 unsigned *bad, unsigned *bad_bytes)
{
    struct ofl_gpu_slot *sl = ofl_gpu_slot(g, k);
    CHECK(ofl_gpu_poll(g, k, 1) == 1, "the batch of packets %u.. back", *next);
    const uint32_t *o = sl->out;
    for (unsigned i = 0; i < sl->n; i++) {
        uint32_t x = *next + i;
        *bad += o[i] != x * 3u + table[x % 16u];
        for (unsigned j = 0; j < 4; j++)
            *bad_bytes += sl->bytes[4 * i + j] != (uint8_t)(x + j + 1);
    }
    *next += sl->n;
}

static void test_pipeline(void)
{
    char err[OFL_GPU_ERRLEN];
    struct ofl_gpu *g = NULL;
    struct ofl_gpu_spec s = spec();
    int rc = ofl_gpu_open(&g, &s, err);
    CHECK(rc == 0, "open: %s", rc ? err : ofl_gpu_device(g));
    if (rc) return;
    uint32_t table[16];
    for (unsigned i = 0; i < 16; i++) table[i] = 1000u * i;
    CHECK(ofl_gpu_table(g, OFL_GPU_ARG_TABLES, table, sizeof table) == 0, "the table copied");
    CHECK(ofl_gpu_table(g, 1, table, sizeof table) == -EINVAL, "argument 1 is not a table's");
    CHECK(ofl_gpu_poll(g, 0, 0) == -EINVAL, "a slot not in flight cannot be polled");
    /* batches of odd sizes, round robin over the slots, taking the oldest when all
     * are out: every result, in order */
    unsigned sizes[BATCHES], next = 0, taken = 0, bad = 0, bad_bytes = 0, busy_seen = 0;
    for (unsigned b = 0; b < BATCHES; b++) {
        unsigned k = b % DEPTH;
        struct ofl_gpu_slot *sl = ofl_gpu_slot(g, k);
        if (sl->busy) {
            busy_seen += ofl_gpu_submit(g, k, 1, 0) == -EBUSY;
            take(g, k, table, &next, &bad, &bad_bytes);
            taken++;
        }
        sizes[b] = 1 + (b * 29u) % BATCH;
        uint32_t *in = sl->in;
        unsigned first = next;
        for (unsigned t = taken; t < b; t++) first += sizes[t];
        for (unsigned i = 0; i < sizes[b]; i++) {
            in[i] = first + i;
            for (unsigned j = 0; j < 4; j++) sl->bytes[4 * i + j] = (uint8_t)(first + i + j);
        }
        CHECK(ofl_gpu_submit(g, k, sizes[b], 4 * sizes[b]) == 0, "batch %u of %u submitted", b,
              sizes[b]);
    }
    for (; taken < BATCHES; taken++) take(g, taken % DEPTH, table, &next, &bad, &bad_bytes);
    unsigned total = 0;
    for (unsigned b = 0; b < BATCHES; b++) total += sizes[b];
    CHECK(next == total && bad == 0 && bad_bytes == 0,
          "%u packets in %u batches, %u in flight: %u wrong results, %u wrong bytes", total,
          BATCHES, DEPTH, bad, bad_bytes);
    CHECK(busy_seen > 0, "a slot in flight cannot be submitted again (-EBUSY)");
    CHECK(ofl_gpu_submit(g, 0, BATCH + 1, 0) == -EINVAL, "more than a batch: -EINVAL");
    /* a copy alone: the records and bytes go to the device and come back unchanged */
    struct ofl_gpu_slot *sl = ofl_gpu_slot(g, 0);
    for (unsigned i = 0; i < 4 * BATCH; i++) sl->bytes[i] = (uint8_t)(i * 7);
    CHECK(ofl_gpu_submit_copy(g, 0, BATCH, 4 * BATCH) == 0 && ofl_gpu_poll(g, 0, 1) == 1,
          "a copy through the device");
    unsigned changed = 0;
    for (unsigned i = 0; i < 4 * BATCH; i++) changed += sl->bytes[i] != (uint8_t)(i * 7);
    CHECK(changed == 0, "its bytes came back as they went (%u changed)", changed);
    /* the last submission left in flight: close waits for it */
    CHECK(ofl_gpu_submit(g, 0, 5, 20) == 0, "a batch left in flight");
    ofl_gpu_close(g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_gpu DEPTH_MAX\n");
        return 2;
    }
    test_errors((unsigned)atoi(argv[1]));
    test_pipeline();
    return CHECK_DONE();
}
