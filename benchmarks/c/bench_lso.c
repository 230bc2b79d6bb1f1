/* offlow's side of `offlow bench lso` alone (no DPDK needed): the NIC element's
 * segmentation (lso_nic.c over lso.c) timed over a capture of sends, and one untimed
 * pass for instruction counts.
 *
 * usage: bench_lso rate SENDS MTU OFFLOAD MOVE REPS MIN_TIME CPU DMA_CPU
 *        bench_lso count SENDS MTU OFFLOAD MOVE
 *   SENDS    a capture whose frames each carry a whole send
 *   MTU      the link's IP MTU; every send gets the largest MSS it allows
 *   OFFLOAD  1: checksums left for offload; 0: computed
 *   MOVE     pio, dma (the copy engine thread on DMA_CPU) or place
 *   rate     REPS timed repetitions, each as many passes over the sends as take
 *            MIN_TIME seconds (from a warm-up pass), pinned to CPU
 *   count    one pass (run it under callgrind: each message kind's path is a
 *            function of its own, ofl_lso_ssm/bom/com/eom), packets per kind
 * Prints one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lso_bench.h"

static int move_of(const char *s)
{
    if (!strcmp(s, "pio")) return OFL_LSO_PIO;
    if (!strcmp(s, "dma")) return OFL_LSO_DMA;
    if (!strcmp(s, "place")) return OFL_LSO_PLACE;
    fprintf(stderr, "bench_lso: move %s: pio, dma or place\n", s);
    exit(2);
}

static void print_kinds(const uint64_t *k)
{
    printf("\"kinds\": [");
    for (int i = 0; i < 2 * OFL_LSO_KINDS; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)k[i]);
    printf("]");
}

int main(int argc, char **argv)
{
    if (argc < 6 || (strcmp(argv[1], "rate") && strcmp(argv[1], "count")) ||
        (!strcmp(argv[1], "rate") && argc != 10)) {
        fprintf(stderr, "usage: bench_lso rate|count SENDS MTU OFFLOAD MOVE "
                        "[REPS MIN_TIME CPU DMA_CPU]\n");
        return 2;
    }
    struct lso_sends s;
    lso_load(argv[2], &s);
    uint32_t mtu = (uint32_t)atoi(argv[3]);
    int offload = atoi(argv[4]), move = move_of(argv[5]);
    int rate = !strcmp(argv[1], "rate");
    int cpu = rate ? atoi(argv[8]) : -1, dma_cpu = rate ? atoi(argv[9]) : -1;
    lso_pin(cpu);
    struct lso_ours o;
    lso_ours_init(&o, &s, mtu, move, offload, dma_cpu);
    uint64_t kinds[2 * OFL_LSO_KINDS] = {0}, bytes = 0;
    double t0 = lso_now();
    uint64_t pkts = lso_ours_pass(&o, &bytes, kinds, NULL, NULL);
    double warm = lso_now() - t0;
    printf("{\"sends\": %u, \"packets\": %llu, \"bytes\": %llu, ", s.n,
           (unsigned long long)pkts, (unsigned long long)bytes);
    print_kinds(kinds);
    if (rate) {
        int reps = atoi(argv[6]);
        double min_time = atof(argv[7]);
        unsigned passes = warm > 0 ? (unsigned)(min_time / warm) + 1 : 1;
        printf(", \"passes\": %u, \"pps\": [", passes);
        for (int r = 0; r < reps; r++) {
            uint64_t b = 0, n = 0;
            double t = lso_now();
            for (unsigned k = 0; k < passes; k++) n += lso_ours_pass(&o, &b, NULL, NULL, NULL);
            double dt = lso_now() - t;
            printf("%s[%.6g, %.6g]", r ? ", " : "", (double)n / dt, (double)b * 8 / dt);
        }
        printf("]");
    }
    printf(", \"dma_bytes\": %llu, \"pio_bytes\": %llu, \"place_bytes\": %llu}\n",
           (unsigned long long)o.nic->dma_bytes, (unsigned long long)o.nic->pio_bytes,
           (unsigned long long)o.nic->place_bytes);
    lso_ours_fini(&o);
    return 0;
}
