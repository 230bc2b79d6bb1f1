/* offlow bench gpu's driver: IPv4 lookups on the OpenCL device over pipelined batches
 * (runtime/lib/gpu), beside copying the same bytes alone through the same queues (the
 * interconnect's ceiling) and the same table's batched lookups on one host core.
 *
 *   bench_gpu ROUTES ADDRS CL_DIR BATCHES DEPTHS LOOKUPS
 *
 * ROUTES: 8-byte IPv4 routes (addr u32, hop u16, len u8, pad); ADDRS: u32 addresses
 * (host order); CL_DIR: runtime/lib/gpu/cl; BATCHES, DEPTHS: comma-separated lists;
 * LOOKUPS: at least this many lookups per point (whole batches). Prints JSON; every
 * answer of the device is checked against ofl_lpm4_lookup: a wrong one is exit 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gpu_lpm.h"
#include "offlow/lpm4.h"
#include "tool_io.h"

static const char *const KERNEL =
    "#include <offlow/cl/lpm4.h>\n"
    "__kernel void lookup(__global const uint *in, __global uchar *bytes,\n"
    "                     __global ushort *out, uint n, __global const ushort *dir,\n"
    "                     __global const ushort *tbl24, __global const ushort *tbl8) {\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n) return;\n"
    "    struct ofl_lpm4 t = { dir, tbl24, tbl8 };\n"
    "    out[i] = ofl_lpm4_lookup(&t, in[i]);\n"
    "    (void)bytes;\n"
    "}\n";

#define MAX_LIST 32

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, why);
    exit(1);
}

static unsigned parse_list(const char *s, unsigned *out, long hi)
{
    unsigned n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < MAX_LIST; t = strtok_r(NULL, ",", &save))
        out[n++] = (unsigned)tool_number("bench_gpu", t, 1, hi);
    free(copy);
    return n;
}

/* One point's figures: its total time, per-batch latency (submit to done) and wrong
 * answers. */
struct point {
    double s, lat_mean_us, lat_max_us;
    unsigned long wrong;
};

/* `nb` batches of `b` addresses from `addrs` (wrapping), `d` in flight; with the
 * lookup kernel, or copies alone (`copy`); answers checked against `want`. */
static struct point run(struct ofl_gpu *g, const uint32_t *addrs, const uint16_t *want,
                        size_t naddrs, unsigned b, unsigned d, unsigned nb, int copy)
{
    struct point p = {0};
    double sent[OFL_GPU_MAX_DEPTH] = {0}, lat = 0;
    size_t at[OFL_GPU_MAX_DEPTH] = {0};
    unsigned next = 0, done = 0;
    double t0 = tool_now_s();
    while (done < nb) {
        unsigned k = next % d;
        struct ofl_gpu_slot *sl = ofl_gpu_slot(g, k);
        if (next < nb && !sl->busy) {
            size_t off = ((size_t)next * b) % naddrs;
            uint32_t *in = sl->in;
            for (unsigned i = 0; i < b; i++) in[i] = addrs[(off + i) % naddrs];
            at[k] = off;
            sent[k] = tool_now_s();
            int rc = copy ? ofl_gpu_submit_copy(g, k, b, 0) : ofl_gpu_submit(g, k, b, 0);
            if (rc < 0) die("submit", ofl_gpu_error(g));
            next++;
            continue;
        }
        unsigned old = done % d;
        if (ofl_gpu_poll(g, old, 1) != 1) die("poll", ofl_gpu_error(g));
        double l = tool_now_s() - sent[old];
        lat += l;
        if (l * 1e6 > p.lat_max_us) p.lat_max_us = l * 1e6;
        if (!copy) {
            const uint16_t *o = ofl_gpu_slot(g, old)->out;
            for (unsigned i = 0; i < b; i++) p.wrong += o[i] != want[(at[old] + i) % naddrs];
        }
        done++;
    }
    p.s = tool_now_s() - t0;
    p.lat_mean_us = lat / nb * 1e6;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: bench_gpu ROUTES ADDRS CL_DIR BATCHES DEPTHS LOOKUPS\n");
        return 2;
    }
    unsigned batches[MAX_LIST], depths[MAX_LIST];
    unsigned nbatch = parse_list(argv[4], batches, 1 << 20);
    unsigned ndepth = parse_list(argv[5], depths, OFL_GPU_MAX_DEPTH);
    long lookups = tool_number("bench_gpu", argv[6], 1, 1L << 32);
    size_t rlen, alen;
    uint8_t *raw = tool_read(argv[1], &rlen);
    uint32_t *addrs = tool_read(argv[2], &alen);
    if (rlen % 8 || alen % 4 || alen == 0) die(argv[1], "not routes and addresses");
    size_t n = rlen / 8, naddrs = alen / 4;
    struct ofl_route4 *r = calloc(n + 1, sizeof *r);
    if (!r) die("routes", "out of memory");
    for (size_t i = 0; i < n; i++) {
        memcpy(&r[i].addr, raw + 8 * i, 4);
        memcpy(&r[i].hop, raw + 8 * i + 4, 2);
        r[i].len = raw[8 * i + 6];
    }
    free(raw);
    char err[OFL_GPU_ERRLEN] = "";
    struct ofl_lpm4 *t;
    if (ofl_lpm4_build(&t, r, n, err) < 0) die("table", err);
    free(r);
    uint16_t *want = malloc(naddrs * sizeof *want);
    if (!want) die("answers", "out of memory");
    for (size_t i = 0; i < naddrs; i++) want[i] = ofl_lpm4_lookup(t, addrs[i]);

    unsigned bmax = 1, dmax = 1;
    for (unsigned i = 0; i < nbatch; i++) bmax = batches[i] > bmax ? batches[i] : bmax;
    for (unsigned i = 0; i < ndepth; i++) dmax = depths[i] > dmax ? depths[i] : dmax;
    char opts[1024];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -I%s", argv[3]);
    struct ofl_gpu_spec spec = {.source = KERNEL, .options = opts, .kernel = "lookup",
                                .batch = bmax, .depth = dmax, .in_rec = 4, .out_rec = 2};
    struct ofl_gpu *g;
    double t0 = tool_now_s();
    if (ofl_gpu_open(&g, &spec, err) < 0) die("OpenCL", err);
    if (ofl_gpu_lpm4_upload(g, OFL_GPU_ARG_TABLES, t) < 0) die("table", ofl_gpu_error(g));
    double setup = tool_now_s() - t0;

    printf("{\"device\": \"%s\", \"routes\": %zu, \"addresses\": %zu, \"setup_s\": %.3f, "
           "\"table_bytes\": %zu, \"points\": [", ofl_gpu_device(g), n, naddrs, setup,
           ofl_lpm4_memory(t));
    unsigned long wrong = 0;
    for (unsigned i = 0; i < nbatch; i++) {
        unsigned b = batches[i];
        unsigned nb = (unsigned)((lookups + b - 1) / b);
        if (nb < 2 * dmax) nb = 2 * dmax;
        /* the same table's batched lookups on this core, over the same addresses */
        uint16_t *hops = malloc((size_t)b * sizeof *hops);
        uint32_t *chunk = malloc((size_t)b * sizeof *chunk);
        if (!hops || !chunk) die("host", "out of memory");
        double h0 = tool_now_s();
        for (unsigned k = 0; k < nb; k++) {
            size_t off = ((size_t)k * b) % naddrs;
            for (unsigned j = 0; j < b; j++) chunk[j] = addrs[(off + j) % naddrs];
            ofl_lpm4_lookup_batch(t, chunk, hops, b);
        }
        double host_s = tool_now_s() - h0;
        free(hops);
        free(chunk);
        for (unsigned j = 0; j < ndepth; j++) {
            unsigned d = depths[j];
            struct point k = run(g, addrs, want, naddrs, b, d, nb, 0);
            struct point c = run(g, addrs, want, naddrs, b, d, nb, 1);
            wrong += k.wrong;
            printf("%s{\"batch\": %u, \"depth\": %u, \"lookups\": %llu, \"gpu_s\": %.6f, "
                   "\"lat_us\": %.1f, \"lat_max_us\": %.1f, \"copy_s\": %.6f, "
                   "\"copy_lat_us\": %.1f, \"host_s\": %.6f, \"wrong\": %lu}",
                   i || j ? ", " : "", b, d, (unsigned long long)nb * b, k.s, k.lat_mean_us,
                   k.lat_max_us, c.s, c.lat_mean_us, host_s, k.wrong);
            fflush(stdout);
        }
    }
    printf("]}\n");
    ofl_gpu_close(g);
    ofl_lpm4_free(t);
    free(want);
    free(addrs);
    if (wrong) fprintf(stderr, "bench_gpu: %lu wrong answers from the device\n", wrong);
    return wrong ? 1 : 0;
}
