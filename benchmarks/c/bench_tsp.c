/* offlow bench tsp's driver: 2-opt climbs on one core, with no manager around them.
 *
 *   bench_tsp TSPLIB_FILE PLAIN_CLIMBS FAST_CLIMBS SEED
 *
 * "plain": the textbook climb the issue sized the targets with: from the same random
 * tour (offlow/tsp_climb.h's Fisher-Yates and seeds), scan every pair of edges, apply
 * the best improving 2-opt move, until none improves (best improvement, O(n^2) per
 * move). "fast": ofl_tsp_climb (neighbour lists, don't-look bits) called in a loop:
 * the ceiling of offlow's climbers on this core. Prints JSON: the seconds and the best
 * length of each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/tsp.h"
#include "offlow/tsp_climb.h"
#include "tool_io.h"

static int64_t plain_climb(const struct ofl_tsp *t, uint64_t seed, uint32_t *tour)
{
    const uint32_t n = t->n;
    const int32_t *d = t->dist;
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++) tour[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(ofl_tsp_splitmix(&s) % (i + 1)), x = tour[i];
        tour[i] = tour[j];
        tour[j] = x;
    }
    for (;;) {
        int32_t best = 0;
        uint32_t bi = 0, bj = 0;
        for (uint32_t i = 0; i + 2 < n; i++) {
            uint32_t a = tour[i], b = tour[i + 1];
            for (uint32_t j = i + 2; j < n && !(i == 0 && j == n - 1); j++) {
                uint32_t c = tour[j], e = tour[(j + 1) % n];
                int32_t gain = d[a * n + b] + d[c * n + e] - d[a * n + c] - d[b * n + e];
                if (gain > best) {
                    best = gain;
                    bi = i;
                    bj = j;
                }
            }
        }
        if (best == 0) break;
        for (uint32_t i = bi + 1, j = bj; i < j; i++, j--) {
            uint32_t x = tour[i];
            tour[i] = tour[j];
            tour[j] = x;
        }
    }
    return ofl_tsp_length(t, tour);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_tsp TSPLIB_FILE PLAIN_CLIMBS FAST_CLIMBS SEED\n");
        return 2;
    }
    long plain = tool_number("bench_tsp", argv[2], 0, 1L << 30);
    long fast = tool_number("bench_tsp", argv[3], 0, 1L << 30);
    uint64_t seed = (uint64_t)tool_number("bench_tsp", argv[4], 0, 1L << 62);
    size_t len;
    char *text = tool_read(argv[1], &len), err[256];
    double *xy;
    uint32_t n;
    struct ofl_tsp t;
    if (ofl_tsplib_parse(text, len, &xy, &n, err, sizeof err) < 0) {
        fprintf(stderr, "bench_tsp: %s: %s\n", argv[1], err);
        return 1;
    }
    if (ofl_tsp_init(&t, xy, n) < 0) {
        fprintf(stderr, "bench_tsp: out of memory\n");
        return 1;
    }
    uint32_t *tour = malloc(n * sizeof *tour);
    int64_t plain_best = INT64_MAX;
    double t0 = tool_now_s();
    for (long i = 0; i < plain; i++) {
        int64_t l = plain_climb(&t, seed + (uint64_t)i, tour);
        plain_best = l < plain_best ? l : plain_best;
    }
    double plain_s = tool_now_s() - t0;
    t0 = tool_now_s();
    int64_t fast_best = fast ? ofl_tsp_climbs(&t, seed, (uint32_t)fast, tour, NULL) : 0;
    double fast_s = tool_now_s() - t0;
    printf("{\"cities\": %u, \"plain_climbs\": %ld, \"plain_s\": %.6f, \"plain_best\": %lld, "
           "\"fast_climbs\": %ld, \"fast_s\": %.6f, \"fast_best\": %lld}\n", n, plain, plain_s,
           (long long)plain_best, fast, fast_s, (long long)fast_best);
    free(tour);
    free(text);
    free(xy);
    ofl_tsp_free(&t);
    return 0;
}
