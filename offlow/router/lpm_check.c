/* The C side of `offlow router check`: build the IPv4 and IPv6 tables from a prefix
 * file and look up the given addresses with the scalar and the batched lookups.
 *
 * usage: lpm_check PREFIXES NPORTS ADDRS4 ADDRS6 OUTDIR
 *   ADDRS4: uint32 addresses (host order, native endianness), back to back
 *   ADDRS6: 16-byte addresses (network order), back to back
 * Writes OUTDIR/hops4_scalar, hops4_batch, hops6_scalar, hops6_batch (uint16 each,
 * native endianness, one per address) and prints one JSON object on stdout: route
 * counts, build times, table memory and lookup rates. Exits 1 with a message on
 * stderr on any error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/routes.h"
#include "tool_io.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: lpm_check PREFIXES NPORTS ADDRS4 ADDRS6 OUTDIR\n");
        return 1;
    }
    char err[256] = "";
    struct ofl_routes r;
    ofl_routes_init(&r);
    double t0 = tool_now_s();
    if (ofl_routes_load(&r, argv[1], (unsigned)strtoul(argv[2], NULL, 10), err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t_load = tool_now_s() - t0;
    struct ofl_lpm4 *t4;
    struct ofl_lpm6 *t6;
    t0 = tool_now_s();
    if (ofl_lpm4_build(&t4, r.v4, r.n4, err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t_b4 = tool_now_s() - t0;
    t0 = tool_now_s();
    if (ofl_lpm6_build(&t6, r.v6, r.n6, err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t_b6 = tool_now_s() - t0;

    size_t len4, len6;
    uint32_t *a4 = tool_read(argv[3], &len4);
    uint8_t *a6 = tool_read(argv[4], &len6);
    size_t n4 = len4 / 4, n6 = len6 / 16;
    uint16_t *s4 = malloc((n4 + 1) * 2), *b4 = malloc((n4 + 1) * 2);
    uint16_t *s6 = malloc((n6 + 1) * 2), *b6 = malloc((n6 + 1) * 2);
    if (!s4 || !b4 || !s6 || !b6) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    t0 = tool_now_s();
    for (size_t i = 0; i < n4; i++) s4[i] = ofl_lpm4_lookup(t4, a4[i]);
    double t_s4 = tool_now_s() - t0;
    t0 = tool_now_s();
    for (size_t i = 0; i < n4; i += 1u << 20)
        ofl_lpm4_lookup_batch(t4, a4 + i, b4 + i, (unsigned)(n4 - i < 1u << 20 ? n4 - i : 1u << 20));
    double t_l4 = tool_now_s() - t0;
    t0 = tool_now_s();
    for (size_t i = 0; i < n6; i++) s6[i] = ofl_lpm6_lookup(t6, a6 + 16 * i);
    double t_s6 = tool_now_s() - t0;
    t0 = tool_now_s();
    for (size_t i = 0; i < n6; i += 1u << 20)
        ofl_lpm6_lookup_batch(t6, a6 + 16 * i, b6 + i,
                              (unsigned)(n6 - i < 1u << 20 ? n6 - i : 1u << 20));
    double t_l6 = tool_now_s() - t0;
    /* The hash levels the gpu target reads, walked on the CPU (batched) */
    uint16_t *h6 = malloc((n6 + 1) * 2);
    if (!h6) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n6; i += 1u << 20)
        ofl_lpm6_lookup_batch_bsl(t6, a6 + 16 * i, h6 + i,
                                  (unsigned)(n6 - i < 1u << 20 ? n6 - i : 1u << 20));
    tool_write(argv[5], "hops4_scalar", s4, n4 * sizeof *s4);
    tool_write(argv[5], "hops4_batch", b4, n4 * sizeof *b4);
    tool_write(argv[5], "hops6_scalar", s6, n6 * sizeof *s6);
    tool_write(argv[5], "hops6_batch", b6, n6 * sizeof *b6);
    tool_write(argv[5], "hops6_levels", h6, n6 * sizeof *h6);
    free(h6);
#define RATE(n, t) ((t) > 0 ? (double)(n) / (t) / 1e6 : 0.0)
    printf("{\"routes4\": %zu, \"routes6\": %zu, \"lines\": %llu, \"garbage\": %llu, "
           "\"load_s\": %.6f, \"build4_s\": %.6f, \"build6_s\": %.6f, "
           "\"memory4\": %zu, \"memory6\": %zu, \"tbl8_groups\": %u, \"levels6\": %u, "
           "\"depth6\": %u, \"prefixes6\": %zu, \"markers6\": %zu, "
           "\"trie6_memory\": %zu, \"trie6_nodes\": %zu, \"trie6_depth\": %u, "
           "\"addresses4\": %zu, \"addresses6\": %zu, "
           "\"scalar4_mlps\": %.2f, \"batch4_mlps\": %.2f, "
           "\"scalar6_mlps\": %.2f, \"batch6_mlps\": %.2f}\n",
           r.n4, r.n6, (unsigned long long)r.lines, (unsigned long long)r.bad, t_load, t_b4,
           t_b6, ofl_lpm4_memory(t4), ofl_lpm6_memory(t6), t4->groups, t6->nlv, t6->depth,
           t6->prefixes, t6->markers, ofl_lpm6_trie_memory(&t6->trie), t6->trie.nnodes,
           t6->trie.depth, n4, n6, RATE(n4, t_s4), RATE(n4, t_l4), RATE(n6, t_s6),
           RATE(n6, t_l6));
    free(a4);
    free(a6);
    free(s4);
    free(b4);
    free(s6);
    free(b6);
    ofl_lpm4_free(t4);
    ofl_lpm6_free(t6);
    ofl_routes_free(&r);
    return 0;
}
