/* The offlow side of `offlow bench router`: the IPv4 DIR-24-8 table (lpm4.h) and the
 * IPv6 table (lpm6.h: a Poptrie walked by the lookups, built beside the hash levels
 * the gpu target reads), built from packed routes and looked
 * up with the addresses the DPDK side (bench_dpdk_lpm.c) gets, in one process pinned
 * to one core.
 *
 * usage: bench_lpm dump PREFIXES NPORTS OUTDIR
 *   reads a prefix file with the runtime's reader (ofl_routes_load: hops by the file
 *   rule) and writes OUTDIR/routes4.bin and routes6.bin in the packed format below;
 *   prints {"v4": N, "v6": N, "bad": N, "load_s": S, "simd": LEVEL}, LEVEL the path of
 *   batched IPv4 lookups in this process (ofl_simd_level: the CPU and OFFLOW_SIMD), as
 *   in any program that builds a table here (the router's vector elements).
 *
 * usage: bench_lpm FAMILY ROUTES BUILD_REPS BUILD_BUDGET_S LOOKUP_REPS MIN_TIME_S CPU
 *            OUTDIR [NAME=ADDRS]...
 *   the arguments of bench_dpdk_lpm (see there): ROUTES holds IPv4 8-byte records (u32
 *   address in host order, u16 hop, u8 length, u8 pad; little endian) or IPv6 20-byte
 *   records (16 address bytes, network order, u16 hop, u8 length, u8 pad). The table is
 *   built up to BUILD_REPS times while under BUILD_BUDGET_S in all; then, for every
 *   address file, an untimed pass writes OUTDIR/hops-LOOKUP-NAME.u16 and LOOKUP_REPS
 *   timed repetitions (each MIN_TIME_S worth of passes, calibrated on a warm-up pass)
 *   measure the two lookups, interleaved:
 *     "offlow scalar":  ofl_lpm4_lookup / ofl_lpm6_lookup, one address after the other
 *     "offlow batched": ofl_lpm4_lookup_batch_at(OFL_SIMD_SCALAR) / ofl_lpm6_lookup_batch
 *                       (latency hiding)
 *     "offlow vector":  IPv4 only, ofl_lpm4_lookup_batch on the path the table chose
 *                       (AVX-512 or AVX2 gathers where the CPU has them, capped by
 *                       OFFLOW_SIMD; the JSON's "simd" names it)
 *   both called per BURST addresses, whose answers are summed (as the DPDK side does).
 * Prints one JSON object. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/routes.h"
#include "offlow/simd.h"
#include "tool_io.h"
#include "lpm_bench.h"

#define NLOOK 3

static int dump(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_lpm dump PREFIXES NPORTS OUTDIR\n");
        return 2;
    }
    char err[256] = "";
    struct ofl_routes r;
    ofl_routes_init(&r);
    double t0 = tool_now_s();
    if (ofl_routes_load(&r, argv[2], (unsigned)strtoul(argv[3], NULL, 10), err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t = tool_now_s() - t0;
    uint8_t *b4 = calloc(r.n4 + 1, 8), *b6 = calloc(r.n6 + 1, 20);
    for (size_t i = 0; i < r.n4; i++) {
        memcpy(b4 + 8 * i, &r.v4[i].addr, 4);
        memcpy(b4 + 8 * i + 4, &r.v4[i].hop, 2);
        b4[8 * i + 6] = r.v4[i].len;
    }
    for (size_t i = 0; i < r.n6; i++) {
        memcpy(b6 + 20 * i, r.v6[i].addr, 16);
        memcpy(b6 + 20 * i + 16, &r.v6[i].hop, 2);
        b6[20 * i + 18] = r.v6[i].len;
    }
    tool_write(argv[4], "routes4.bin", b4, 8 * r.n4);
    tool_write(argv[4], "routes6.bin", b6, 20 * r.n6);
    printf("{\"v4\": %zu, \"v6\": %zu, \"bad\": %llu, \"load_s\": %.6g, \"simd\": \"%s\"}\n",
           r.n4, r.n6, (unsigned long long)r.bad, t, ofl_simd_name(ofl_simd_level()));
    ofl_routes_free(&r);
    free(b4);
    free(b6);
    return 0;
}

/* ---- lookups ------------------------------------------------------------------------ */

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "dump")) return dump(argc, argv);
    if (argc < 9) {
        fprintf(stderr, "usage: bench_lpm FAMILY ROUTES BUILD_REPS BUILD_BUDGET_S "
                        "LOOKUP_REPS MIN_TIME_S CPU OUTDIR [NAME=ADDRS]...\n"
                        "       bench_lpm dump PREFIXES NPORTS OUTDIR\n");
        return 2;
    }
    int family = atoi(argv[1]);
    int build_reps = atoi(argv[3]), lookup_reps = atoi(argv[5]);
    double build_budget = atof(argv[4]), min_time = atof(argv[6]);
    int cpu = atoi(argv[7]);
    const char *outdir = argv[8];
    int nfiles = argc - 9;
    if ((family != 4 && family != 6) || build_reps < 1 || build_reps > LPM_MAX_REPS ||
        lookup_reps < 1 || lookup_reps > LPM_MAX_REPS || nfiles > LPM_MAX_FILES) {
        fprintf(stderr, "bench_lpm: bad arguments\n");
        return 2;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        return 1;
    }

    struct ofl_route4 *r4;
    struct ofl_route6 *r6;
    size_t nr;
    uint16_t def_hop;
    lpm_read_routes(argv[2], family, &r4, &r6, &nr, &def_hop);

    /* Builds: repeated while under the budget, the last one kept. */
    struct ofl_lpm4 *o4 = NULL;
    struct ofl_lpm6 *o6 = NULL;
    char err[256] = "";
    double build_s[LPM_MAX_REPS], total = 0;
    int nbuild = 0;
    for (int rep = 0; rep < build_reps && (rep == 0 || total < build_budget); rep++) {
        ofl_lpm4_free(o4);
        ofl_lpm6_free(o6);
        o4 = NULL;
        o6 = NULL;
        double t0 = tool_now_s();
        int rc = family == 4 ? ofl_lpm4_build(&o4, r4, nr, err) : ofl_lpm6_build(&o6, r6, nr, err);
        double t = tool_now_s() - t0;
        if (rc < 0) {
            fprintf(stderr, "build failed: %s\n", err);
            return 1;
        }
        build_s[nbuild++] = t;
        total += t;
    }
    size_t memory = family == 4 ? ofl_lpm4_memory(o4) : ofl_lpm6_memory(o6);
    /* IPv6: the trie's share of the build, timed on its own (the hash levels, which the
     * gpu target reads, are built beside it). */
    double trie_s = 0;
    if (o6) {
        struct ofl_lpm6_trie tr;
        double t0 = tool_now_s();
        int rc = ofl_lpm6_trie_build(&tr, r6, nr);
        trie_s = tool_now_s() - t0;
        if (rc < 0) {
            fprintf(stderr, "trie build failed: %d\n", rc);
            return 1;
        }
        ofl_lpm6_trie_free(&tr);
    }

    char *fname[LPM_MAX_FILES];
    size_t naddr[LPM_MAX_FILES];
    unsigned passes[LPM_MAX_FILES][NLOOK];
    int nlook = lpm_ofl_kinds(family);
    double mlps[LPM_MAX_FILES][NLOOK][LPM_MAX_REPS];
    for (int f = 0; f < nfiles; f++) {
        void *a = lpm_read_addrs(argv[9 + f], family, "bench_lpm", &fname[f], &naddr[f]);
        uint16_t *hops = malloc(naddr[f] * sizeof *hops);
        for (int l = 0; l < nlook; l++) {
            lpm_ofl_answers(o4, o6, a, naddr[f], (enum lpm_ofl_kind)l, hops);
            lpm_write_hops(outdir, "hops", lpm_ofl_name((enum lpm_ofl_kind)l), fname[f], hops,
                           naddr[f]);
        }
        free(hops);
        for (int l = 0; l < nlook; l++) {
            double t0 = tool_now_s();
            sink += lpm_ofl_pass(o4, o6, a, naddr[f], (enum lpm_ofl_kind)l);
            passes[f][l] = lpm_passes(tool_now_s() - t0, min_time);
        }
        for (int rep = 0; rep < lookup_reps; rep++)
            for (int l = 0; l < nlook; l++) {
                double t0 = tool_now_s();
                for (unsigned p = 0; p < passes[f][l]; p++)
                    sink += lpm_ofl_pass(o4, o6, a, naddr[f], (enum lpm_ofl_kind)l);
                double t = tool_now_s() - t0;
                mlps[f][l][rep] = (double)passes[f][l] * (double)naddr[f] / t / 1e6;
            }
        free(a);
    }

    printf("{\"side\": \"offlow\", \"family\": %d, \"routes\": %zu, \"burst\": %d, "
           "\"cpu\": %d, \"simd\": \"%s\", \"anon_huge_kb\": %ld, \"build_reps\": %d, "
           "\"build_budget_s\": %g, "
           "\"builds\": [{\"name\": \"offlow %s\", \"build_s\": ",
           family, nr, LPM_BURST, cpu, ofl_simd_name(o4 ? o4->simd : OFL_SIMD_SCALAR),
           lpm_anon_huge_kb(), build_reps, build_budget,
           family == 4 ? "lpm4" : "lpm6");
    lpm_print_list(build_s, nbuild);
    printf(", \"memory\": %zu, \"routes\": %zu", memory, nr);
    if (family == 4) printf(", \"tbl8_groups\": %u, \"tbl24_blocks\": %u", o4->groups, o4->blocks);
    else printf(", \"levels\": %u, \"depth\": %u, \"markers\": %zu, \"dir3_blocks\": %zu, "
                "\"trie_build_s\": %g, \"trie_memory\": %zu, \"trie_nodes\": %zu, "
                "\"trie_depth\": %u, \"simd\": \"%s\", \"simd_cpu\": \"%s\"",
                o6->nlv, o6->depth, o6->markers, o6->nblocks3, trie_s,
                ofl_lpm6_trie_memory(&o6->trie), o6->trie.nnodes, o6->trie.depth,
                ofl_simd_name((enum ofl_simd)o6->trie.simd), ofl_simd_name(ofl_simd_cpu()));
    printf("}], \"files\": [");
    for (int f = 0; f < nfiles; f++) printf("%s\"%s\"", f ? ", " : "", fname[f]);
    printf("], \"addresses\": [");
    for (int f = 0; f < nfiles; f++) printf("%s%zu", f ? ", " : "", naddr[f]);
    printf("], \"lookups\": [");
    for (int l = 0; l < nlook; l++) {
        printf("%s{\"name\": \"%s\", \"table\": \"offlow %s\", \"mlps\": {", l ? ", " : "",
               lpm_ofl_name((enum lpm_ofl_kind)l), family == 4 ? "lpm4" : "lpm6");
        for (int f = 0; f < nfiles; f++) {
            printf("%s\"%s\": ", f ? ", " : "", fname[f]);
            lpm_print_list(mlps[f][l], lookup_reps);
        }
        printf("}, \"passes\": {");
        for (int f = 0; f < nfiles; f++)
            printf("%s\"%s\": %u", f ? ", " : "", fname[f], passes[f][l]);
        printf("}}");
    }
    printf("]}\n");
    ofl_lpm4_free(o4);
    ofl_lpm6_free(o6);
    free(r4);
    free(r6);
    return 0;
}
