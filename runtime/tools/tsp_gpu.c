/* The gpu climber of the TSP case study (offlow tsp --device gpu, offlow bench tsp):
 * climbs on the OpenCL device through runtime/lib/gpu, one work-item per job of climbs.
 *
 *   tsp_gpu TSPLIB_FILE KERNEL_FILE INCLUDES CLIMBS PER_ITEM BATCH DEPTH SEED
 *
 * This process is the manager: it builds the instance (distances, neighbour lists)
 * from the file and copies them into device buffers (the gpu's interconnect), then
 * hands out jobs of PER_ITEM climbs (seeds SEED, SEED+1, ...) in batches of BATCH
 * work-items over DEPTH slots in flight (copy in, kernel, copy out on three queues)
 * and collects the slots in order: the slots are its circular result queue. It
 * prints JSON: the device, the best tour (the first of equal lengths, in seed order),
 * its length and seed, and the seconds from the first submit to the last result.
 * KERNEL_FILE is runtime/lib/tsp/cl/tsp_climbs.cl; INCLUDES its -I options. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gpu.h"
#include "offlow/tsp.h"
#include "tool_io.h"

struct job {
    uint64_t seed;
    uint32_t count, pad;
};

static void die(const char *what, const char *why)
{
    fprintf(stderr, "tsp_gpu: %s: %s\n", what, why);
    exit(1);
}

/* Fill slot `sl` with up to `batch` jobs from climb `next` of `climbs`; returns the
 * climbs it covers. */
static uint64_t fill(struct ofl_gpu_slot *sl, unsigned batch, uint64_t next, uint64_t climbs,
                     unsigned per, uint64_t seed, unsigned *n)
{
    struct job *jobs = sl->in;
    uint64_t start = next;
    for (*n = 0; *n < batch && next < climbs; (*n)++) {
        uint32_t count = climbs - next < per ? (uint32_t)(climbs - next) : per;
        jobs[*n] = (struct job){seed + next, count, 0};
        next += count;
    }
    return next - start;
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: tsp_gpu TSPLIB_FILE KERNEL_FILE INCLUDES CLIMBS PER_ITEM "
                        "BATCH DEPTH SEED\n");
        return 2;
    }
    uint64_t climbs = (uint64_t)tool_number("tsp_gpu", argv[4], 1, 1L << 40);
    unsigned per = (unsigned)tool_number("tsp_gpu", argv[5], 1, 1 << 20);
    unsigned batch = (unsigned)tool_number("tsp_gpu", argv[6], 1, 1 << 20);
    unsigned depth = (unsigned)tool_number("tsp_gpu", argv[7], 1, OFL_GPU_MAX_DEPTH);
    uint64_t seed = (uint64_t)tool_number("tsp_gpu", argv[8], 0, 1L << 62);
    size_t len, klen;
    char *text = tool_read(argv[1], &len), *kernel = tool_read(argv[2], &klen);
    char err[OFL_GPU_ERRLEN] = "";
    double *xy;
    uint32_t n;
    if (ofl_tsplib_parse(text, len, &xy, &n, err, sizeof err) < 0) die(argv[1], err);
    free(text);
    struct ofl_tsp t;
    if (ofl_tsp_init(&t, xy, n) < 0) die(argv[1], "cannot build the instance");
    free(xy);
    char *src = malloc(klen + 1), opts[2048];
    if (!src) die("kernel", "out of memory");
    memcpy(src, kernel, klen);
    src[klen] = '\0';
    free(kernel);
    snprintf(opts, sizeof opts, "%s -DOFL_TSP_N=%u -DOFL_TSP_K=%u", argv[3], n, t.k);
    size_t out_rec = 16 + 4 * (size_t)n;
    struct ofl_gpu_spec spec = {.source = src, .options = opts, .kernel = "ofl_tsp_climbs",
                                .batch = batch, .depth = depth, .in_rec = sizeof(struct job),
                                .out_rec = out_rec};
    struct ofl_gpu *g;
    double t0 = tool_now_s();
    if (ofl_gpu_open(&g, &spec, err) < 0) die("OpenCL", err);
    if (ofl_gpu_table(g, OFL_GPU_ARG_TABLES, t.dist, (size_t)n * n * sizeof *t.dist) < 0 ||
        ofl_gpu_table(g, OFL_GPU_ARG_TABLES + 1, t.nbr, (size_t)n * t.k * sizeof *t.nbr) < 0)
        die("tables", ofl_gpu_error(g));
    double setup = tool_now_s() - t0;

    uint32_t *best = malloc(n * sizeof *best);
    if (!best) die("tour", "out of memory");
    int64_t best_len = INT64_MAX;
    uint64_t best_seed = 0, next = 0;
    unsigned inflight = 0, head = 0, batches = 0;
    t0 = tool_now_s();
    while (next < climbs || inflight > 0) {
        while (next < climbs && inflight < depth) {
            unsigned k = (head + inflight) % depth, items;
            next += fill(ofl_gpu_slot(g, k), batch, next, climbs, per, seed, &items);
            if (ofl_gpu_submit(g, k, items, 0) < 0) die("submit", ofl_gpu_error(g));
            inflight++;
            batches++;
        }
        if (ofl_gpu_poll(g, head, 1) != 1) die("poll", ofl_gpu_error(g));
        struct ofl_gpu_slot *sl = ofl_gpu_slot(g, head);
        for (unsigned i = 0; i < sl->n; i++) {
            const uint8_t *r = (const uint8_t *)sl->out + i * out_rec;
            int64_t l;
            memcpy(&l, r, 8);
            if (l < best_len) {
                best_len = l;
                memcpy(&best_seed, r + 8, 8);
                memcpy(best, r + 16, n * sizeof *best);
            }
        }
        head = (head + 1) % depth;
        inflight--;
    }
    double secs = tool_now_s() - t0;
    printf("{\"device\": \"%s\", \"cities\": %u, \"climbs\": %llu, \"per_item\": %u, "
           "\"batch\": %u, \"depth\": %u, \"batches\": %u, \"setup_s\": %.4f, "
           "\"seconds\": %.6f, \"length\": %lld, \"seed\": %llu, \"tour\": [",
           ofl_gpu_device(g), n, (unsigned long long)climbs, per, batch, depth, batches,
           setup, secs, (long long)best_len, (unsigned long long)best_seed);
    for (uint32_t i = 0; i < n; i++) printf("%s%u", i ? ", " : "", best[i]);
    printf("]}\n");
    ofl_gpu_close(g);
    ofl_tsp_free(&t);
    free(best);
    free(src);
    return 0;
}
