/* The driver of `offlow bench xdp` (benchmarks/xdp.py): route lookups in the kernel's
 * XDP hook, IPv4 and IPv6, timed by the kernel with BPF_PROG_TEST_RUN in repeat mode,
 * for the programs of bench_xdp.bpf.c over the same routes and addresses:
 *
 *   "offlow dir24" / "offlow trie6": offlow's tables built by the runtime
 *                   (ofl_lpm4_build, ofl_lpm6_build) and copied into their array maps
 *                   as an xdp run copies them (runtime/tools/xdp_tables.c);
 *   "lpm trie":     the routes in a BPF_MAP_TYPE_LPM_TRIE map;
 *   "kernel fib":   the routes in the kernel FIB of this process's own network
 *                   namespace (xdp_fib.h), looked up with bpf_fib_lookup;
 *   "harness":      the same program without a lookup (its cost is in every row).
 *
 * Each in two modes: per packet (one repetition, one packet, one lookup) and batch
 * (one repetition, OFL_BENCH_XDP_BATCH lookups of consecutive addresses: lookups per
 * second as lookup benchmarks measure them; bench_xdp.bpf.c says how).
 *
 * usage: bench_xdp BPF_OBJECT ROUTES4 ROUTES6 PASSES REPS [6:]NAME=ADDRS...
 *   ROUTES4: IPv4 8-byte records (u32 address in host order, u16 hop, u8 length, u8 pad;
 *   little endian), ROUTES6: IPv6 20-byte records (16 address bytes in network order,
 *   u16 hop, u8 length, u8 pad), as benchmarks/common/routes.py writes them; ADDRS:
 *   u32 IPv4 addresses in host order, or with `6:` 16-byte IPv6 addresses. For every
 *   address file, program of its family and mode, REPS test runs of PASSES passes over
 *   the addresses each; every hop the last run recorded is checked against
 *   ofl_lpm4_lookup (ofl_lpm6_lookup; the harness's against 0), the hops map holding
 *   a value no lookup answers before each run, so an address a program skipped is a
 *   wrong answer too; a wrong one ends the run with exit status 1 naming it (3: the
 *   kernel refused a namespace, the programs or their maps). Prints one JSON object.
 *   The process moves into a network namespace of its own first: the routes vanish
 *   with it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <linux/ipv6.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "bench_xdp.h"
#include "tool_io.h"
#include "xdp_fib.h"
#include "xdp_tables.h"

#define NPROG 4
#define MAX_SETS 8
/* No hop a table holds (hops are 16 bits): what the hops map holds before a run. */
#define NO_ANSWER 0xFFFFFFFFu

/* Per mode (0: per packet, 1: batch) and family (0: IPv4, 1: IPv6): the programs, in
 * the order of enum which; their rows' names per family. */
static const char *prog_names[2][2][NPROG] = {
    {{"xdp_none", "xdp_dir24", "xdp_trie", "xdp_fib"},
     {"xdp_none_6", "xdp_trie6", "xdp_trie_6", "xdp_fib_6"}},
    {{"xdp_none_b", "xdp_dir24_b", "xdp_trie_b", "xdp_fib_b"},
     {"xdp_none_6b", "xdp_trie6_b", "xdp_trie_6b", "xdp_fib_6b"}}};
static const char *modes[2] = {"packet", "batch"};
static const char *labels[2][NPROG] = {
    {"harness", "offlow dir24", "lpm trie", "kernel fib"},
    {"harness", "offlow trie6", "lpm trie", "kernel fib"}};

struct trie_key {
    uint32_t prefixlen;
    uint32_t addr;   /* network order */
};

/* Exit status 3: the kernel refused what the benchmark needs (a namespace, the
 * programs, their maps), not a wrong answer or a bad argument. */
#define EXIT_REFUSED 3

static _Noreturn void die_status(const char *what, int rc, int status)
{
    fprintf(stderr, "bench_xdp: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
    exit(status);
}

static _Noreturn void die(const char *what, int rc)
{
    die_status(what, rc, 1);
}

/* The mmap of array map `m` (BPF_F_MMAPABLE): entries at a stride of the value size
 * rounded up to 8. */
static void *map_mem(struct bpf_map *m)
{
    size_t stride = (bpf_map__value_size(m) + 7u) & ~7u;
    size_t len = stride * bpf_map__max_entries(m);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
    if (p == MAP_FAILED) die(bpf_map__name(m), -errno);
    return p;
}

static struct bpf_map *map_of(struct bpf_object *o, const char *name)
{
    struct bpf_map *m = bpf_object__find_map_by_name(o, name);
    if (!m) die(name, -ENOENT);
    return m;
}

static void set_entries(struct bpf_object *o, const char *name, size_t n)
{
    int rc = bpf_map__set_max_entries(map_of(o, name), n ? (uint32_t)n : 1);
    if (rc < 0) die(name, rc);
}

static void load_trie(struct bpf_object *o, const struct ofl_route4 *r, size_t n)
{
    int fd = bpf_map__fd(map_of(o, "trie"));
    for (size_t i = 0; i < n; i++) {
        uint32_t mask = r[i].len ? 0xFFFFFFFFu << (32 - r[i].len) : 0;
        struct trie_key k = {r[i].len, htonl(r[i].addr & mask)};
        uint16_t hop = r[i].hop;
        int rc = bpf_map_update_elem(fd, &k, &hop, BPF_ANY);
        if (rc < 0) die("filling the LPM trie map", rc);
    }
}

struct trie6_key {
    uint32_t prefixlen;
    uint8_t addr[16];   /* network order */
};

static void load_trie6(struct bpf_object *o, const struct ofl_route6 *r, size_t n)
{
    int fd = bpf_map__fd(map_of(o, "trie6"));
    for (size_t i = 0; i < n; i++) {
        struct trie6_key k = {r[i].len, {0}};
        memcpy(k.addr, r[i].addr, 16);   /* (host bits already 0) */
        uint16_t hop = r[i].hop;
        int rc = bpf_map_update_elem(fd, &k, &hop, BPF_ANY);
        if (rc < 0) die("filling the IPv6 LPM trie map", rc);
    }
}

/* The packet every repetition of family `v6` starts from: destination `a0`. */
static size_t make_packet(uint8_t *pkt, size_t cap, int v6, const uint8_t *a0)
{
    memset(pkt, 0, cap);
    struct ethhdr *eth = (struct ethhdr *)pkt;
    if (v6) {
        eth->h_proto = htons(ETH_P_IPV6);
        struct ipv6hdr *ip = (struct ipv6hdr *)(eth + 1);
        ip->version = 6;
        ip->nexthdr = 17;
        ip->hop_limit = 64;
        ip->payload_len = htons(8);
        ip->saddr.s6_addr[0] = 0x20;   /* 2001:db8::1 */
        ip->saddr.s6_addr[1] = 0x01;
        ip->saddr.s6_addr[2] = 0x0d;
        ip->saddr.s6_addr[3] = 0xb8;
        ip->saddr.s6_addr[15] = 1;
        memcpy(&ip->daddr, a0, 16);
        return sizeof *eth + sizeof *ip + 8;
    }
    eth->h_proto = htons(ETH_P_IP);
    struct iphdr *ip = (struct iphdr *)(eth + 1);
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = 17;
    ip->tot_len = htons(64 - sizeof *eth);
    ip->saddr = htonl(0xC6120001u);   /* 198.18.0.1 */
    uint32_t a;
    memcpy(&a, a0, 4);
    ip->daddr = htonl(a);
    return 64;
}

struct result {
    double ns_kernel;   /* the kernel's ns per lookup (per repetition / lookups in one),
                         * median of the reps */
    double ns_min, ns_max;
    double ns_call;     /* the median run's whole system call / repetitions: the kernel's
                         * time plus a fixed cost per call (switching the XDP
                         * dispatcher to the program and back: milliseconds) */
    uint64_t checked, wrong;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The tables the answers are checked against. */
struct tables {
    const struct ofl_lpm4 *t4;
    const struct ofl_lpm6 *t6;
};

/* Report the first wrong answer of program `label` for address k of set `a` (`want`:
 * what offlow's lookup answers, or the harness's 0). */
static void say_wrong(const char *label, int v6, const uint8_t *a, uint32_t k, uint32_t got,
                      uint32_t want)
{
    char text[64];
    if (v6) {
        inet_ntop(AF_INET6, a + 16 * (size_t)k, text, sizeof text);
    } else {
        uint32_t x;
        memcpy(&x, a + 4 * (size_t)k, 4);
        x = htonl(x);
        inet_ntop(AF_INET, &x, text, sizeof text);
    }
    if (got == NO_ANSWER)
        fprintf(stderr, "bench_xdp: %s: %s -> no hop recorded, offlow's lookup says %u\n",
                label, text, want);
    else
        fprintf(stderr, "bench_xdp: %s: %s -> hop %u, offlow's lookup says %u\n", label,
                text, got, want);
}

/* The positions a run of mode `batch` goes through for n addresses: n, or for a batch
 * run n rounded up to whole batches (the addrs map holds the first addresses again
 * after the n-th: the batch programs never wrap inside a batch). */
static uint32_t positions(int batch, uint32_t n)
{
    uint32_t b = batch ? OFL_BENCH_XDP_BATCH : 1;
    return (n + b - 1) / b * b;
}

/* REPS test runs of program `p` of family `v6` in mode `batch` over the n addresses
 * `a` (already in the addrs or addrs6 map), PASSES passes each over its positions;
 * then every hop the last run recorded checked (the harness's: 0). */
static struct result run_prog(struct bpf_object *o, int batch, int v6, int p, int ifindex,
                              const struct tables *t, const uint8_t *a, uint32_t n,
                              uint32_t passes, int reps, uint32_t *hops)
{
    const char *name = prog_names[batch][v6][p];
    int fd = bpf_program__fd(bpf_object__find_program_by_name(o, name));
    int cur = bpf_map__fd(map_of(o, "cursor"));
    uint32_t per_rep = batch ? OFL_BENCH_XDP_BATCH : 1, m = positions(batch, n);
    uint32_t repeat = m / per_rep * passes;
    double ns[64], wall[64];
    for (int r = 0; r < reps; r++) {
        uint32_t zero = 0, c[2] = {0, m};
        int rc = bpf_map_update_elem(cur, &zero, c, BPF_ANY);
        if (rc < 0) die("cursor", rc);
        for (uint32_t i = 0; i < m; i++) hops[2 * i] = NO_ANSWER;   /* (a stride of 8) */
        _Alignas(4) uint8_t pkt[128], out[128];
        size_t len = make_packet(pkt, sizeof pkt, v6, a);
        struct xdp_md md = {.data_end = (uint32_t)len, .ingress_ifindex = (uint32_t)ifindex};
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = (uint32_t)len,
                    .data_out = out, .data_size_out = sizeof out, .ctx_in = &md,
                    .ctx_size_in = sizeof md, .repeat = repeat);
        double t0 = tool_now_s();
        rc = bpf_prog_test_run_opts(fd, &opts);
        wall[r] = (tool_now_s() - t0) * 1e9 / ((double)repeat * per_rep);
        if (rc < 0) die("BPF_PROG_TEST_RUN", rc);
        if (opts.retval != 1) {   /* XDP_DROP: the program parsed the packet */
            fprintf(stderr, "bench_xdp: %s returned %u, not XDP_DROP\n", name, opts.retval);
            exit(1);
        }
        ns[r] = (double)opts.duration / per_rep;
    }
    struct result res = {0};
    double sorted[64];
    memcpy(sorted, ns, sizeof(double) * (size_t)reps);
    qsort(sorted, (size_t)reps, sizeof(double), cmp_double);
    res.ns_kernel = sorted[reps / 2];
    res.ns_min = sorted[0];
    res.ns_max = sorted[reps - 1];
    for (int r = 0; r < reps; r++)
        if (ns[r] == res.ns_kernel) res.ns_call = wall[r];
    for (uint32_t k = 0; k < m; k++) {
        uint32_t i = k % n;   /* (past n: the first addresses again) */
        uint16_t want;
        if (p == 0) {
            want = 0;   /* the harness records 0 for every address it went through */
        } else if (v6) {
            want = ofl_lpm6_lookup(t->t6, a + 16 * (size_t)i);
        } else {
            uint32_t x;
            memcpy(&x, a + 4 * (size_t)i, 4);
            want = ofl_lpm4_lookup(t->t4, x);
        }
        uint32_t got = hops[2 * k];   /* u32 values at a stride of 8 */
        res.checked++;
        if (got != want && res.wrong++ == 0) {
            char label[64];
            snprintf(label, sizeof label, "%s%s", labels[v6][p], batch ? " batch" : "");
            say_wrong(label, v6, a, i, got, want);
        }
    }
    return res;
}

/* The routes of a ROUTES4 (v6 = 0) or ROUTES6 file; exits on a bad one. */
static void *read_routes(const char *path, int v6, size_t *n)
{
    size_t len, rec = v6 ? 20 : 8;
    uint8_t *raw = tool_read(path, &len);
    if (len % rec) {
        fprintf(stderr, "bench_xdp: %s: not a list of %zu-byte routes\n", path, rec);
        exit(2);
    }
    *n = len / rec;
    void *out = v6 ? calloc(*n + 1, sizeof(struct ofl_route6))
                   : calloc(*n + 1, sizeof(struct ofl_route4));
    if (!out) die("routes", -ENOMEM);
    for (size_t i = 0; i < *n; i++) {
        const uint8_t *x = raw + rec * i;
        if (v6) {
            struct ofl_route6 *r = (struct ofl_route6 *)out + i;
            memcpy(r->addr, x, 16);
            memcpy(&r->hop, x + 16, 2);
            r->len = x[18];
        } else {
            struct ofl_route4 *r = (struct ofl_route4 *)out + i;
            memcpy(&r->addr, x, 4);
            memcpy(&r->hop, x + 4, 2);
            r->len = x[6];
        }
    }
    free(raw);
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: bench_xdp BPF_OBJECT ROUTES4 ROUTES6 PASSES REPS "
                        "[6:]NAME=ADDRS...\n");
        return 2;
    }
    uint32_t passes = (uint32_t)tool_number("bench_xdp", argv[4], 1, 1000);
    int reps = (int)tool_number("bench_xdp", argv[5], 1, 63);
    int nsets = argc - 6;
    if (nsets > MAX_SETS) {
        fprintf(stderr, "bench_xdp: at most %d address files\n", MAX_SETS);
        return 2;
    }
    const char *names[MAX_SETS];
    uint8_t *addrs[MAX_SETS];
    int fam[MAX_SETS];
    uint32_t counts[MAX_SETS], most[2] = {1, 1};
    for (int s = 0; s < nsets; s++) {
        char *arg = argv[6 + s], *eq = strchr(arg, '=');
        fam[s] = strncmp(arg, "6:", 2) == 0;
        if (!eq) {
            fprintf(stderr, "bench_xdp: not [6:]NAME=ADDRS: %s\n", arg);
            return 2;
        }
        *eq = 0;
        names[s] = arg + 2 * fam[s];
        size_t len, size = fam[s] ? 16 : 4;
        addrs[s] = tool_read(eq + 1, &len);
        if (len < size || len % size ||
            len / size > (UINT32_MAX - OFL_BENCH_XDP_BATCH) / passes) {
            fprintf(stderr, "bench_xdp: %s: not a list of IPv%d addresses\n", eq + 1,
                    fam[s] ? 6 : 4);
            return 2;
        }
        counts[s] = (uint32_t)(len / size);
        uint32_t m = positions(1, counts[s]);   /* (a batch run's: the most) */
        if (m > most[fam[s]]) most[fam[s]] = m;
    }

    size_t n, n6;
    struct ofl_route4 *r = read_routes(argv[2], 0, &n);
    struct ofl_route6 *r6 = read_routes(argv[3], 1, &n6);
    char err[256] = "";
    double t0 = tool_now_s();
    struct ofl_lpm4 *t;
    if (ofl_lpm4_build(&t, r, n, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    double build_s = tool_now_s() - t0;
    t0 = tool_now_s();
    struct ofl_lpm6 *t6;
    if (ofl_lpm6_build(&t6, r6, n6, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    double build6_s = tool_now_s() - t0;

    int ifindex = ofl_xdp_fib_netns(err);
    if (ifindex < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return EXIT_REFUSED;
    }

    libbpf_set_print(NULL);
    struct bpf_object *o = bpf_object__open_file(argv[1], NULL);
    if (!o) die(argv[1], -errno);
    int rc = ofl_xdp_lpm4_size(o, "v4", t);
    if (rc == 0) rc = ofl_xdp_lpm6_size(o, "v6", &t6->trie);
    if (rc < 0) die("sizing offlow's maps", rc);
    set_entries(o, "trie", n);
    set_entries(o, "trie6", n6);
    set_entries(o, "addrs", most[0]);
    set_entries(o, "addrs6", most[1]);
    set_entries(o, "hops", most[0] > most[1] ? most[0] : most[1]);
    rc = bpf_object__load(o);
    if (rc < 0) die_status("the kernel refused to load the XDP programs and maps", rc,
                           EXIT_REFUSED);

    /* per family, per program: the time to load the routes into the kernel */
    double load_s[2][NPROG] = {{0}};
    t0 = tool_now_s();
    if (ofl_xdp_lpm4_fill(o, "v4", t) < 0) die("filling offlow's IPv4 maps", -EIO);
    load_s[0][1] = tool_now_s() - t0;
    t0 = tool_now_s();
    if (ofl_xdp_lpm6_fill(o, "v6", &t6->trie) < 0) die("filling offlow's IPv6 maps", -EIO);
    load_s[1][1] = tool_now_s() - t0;
    t0 = tool_now_s();
    load_trie(o, r, n);
    load_s[0][2] = tool_now_s() - t0;
    t0 = tool_now_s();
    load_trie6(o, r6, n6);
    load_s[1][2] = tool_now_s() - t0;
    t0 = tool_now_s();
    if (ofl_xdp_fib_add(r, n, ifindex, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    load_s[0][3] = tool_now_s() - t0;
    t0 = tool_now_s();
    if (ofl_xdp_fib6_add(r6, n6, ifindex, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    load_s[1][3] = tool_now_s() - t0;

    uint8_t *amem[2] = {map_mem(map_of(o, "addrs")), map_mem(map_of(o, "addrs6"))};
    uint32_t *hmem = map_mem(map_of(o, "hops"));
    printf("{\"batch\": %d, \"routes\": %zu, \"blocks\": %u, \"groups\": %u, "
           "\"dir24_bytes\": %zu, \"build_s\": %.6g, \"routes6\": %zu, \"nodes6\": %zu, "
           "\"leaves6\": %zu, \"depth6\": %u, \"trie6_bytes\": %zu, \"build6_s\": %.6g, "
           "\"passes\": %u, \"reps\": %d, \"programs\": [",
           OFL_BENCH_XDP_BATCH, n, t->blocks, t->groups, ofl_lpm4_memory(t), build_s, n6,
           t6->trie.nnodes, t6->trie.nleaves, t6->trie.depth,
           ofl_lpm6_trie_memory(&t6->trie), build6_s, passes, reps);
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < NPROG; p++)
            printf("%s{\"family\": %d, \"name\": \"%s\", \"load_s\": %.6g}", f || p ? ", " : "",
                   f ? 6 : 4, labels[f][p], load_s[f][p]);
    printf("], \"runs\": [");
    uint64_t wrong = 0;
    const struct tables tabs = {t, t6};
    for (int s = 0; s < nsets; s++) {
        int v6 = fam[s];
        for (uint32_t k = 0; k < positions(1, counts[s]); k++) {
            uint32_t i = k % counts[s];   /* (past the last: the first ones again) */
            if (v6) {
                memcpy(amem[1] + 16 * (size_t)k, addrs[s] + 16 * (size_t)i, 16);
            } else {   /* (u32 values at a stride of 8, network order) */
                uint32_t x;
                memcpy(&x, addrs[s] + 4 * (size_t)i, 4);
                x = htonl(x);
                memcpy(amem[0] + 8 * (size_t)k, &x, 4);
            }
        }
        for (int b = 0; b < 2; b++)
            for (int p = 0; p < NPROG; p++) {
                struct result x = run_prog(o, b, v6, p, ifindex, &tabs, addrs[s], counts[s],
                                           passes, reps, hmem);
                wrong += x.wrong;
                printf("%s{\"family\": %d, \"addresses\": \"%s\", \"n\": %u, "
                       "\"mode\": \"%s\", \"program\": \"%s\", \"ns\": %.6g, "
                       "\"ns_min\": %.6g, \"ns_max\": %.6g, \"ns_call\": %.6g, "
                       "\"checked\": %llu, \"wrong\": %llu}",
                       s || b || p ? ", " : "", v6 ? 6 : 4, names[s], counts[s], modes[b],
                       labels[v6][p], x.ns_kernel, x.ns_min, x.ns_max, x.ns_call,
                       (unsigned long long)x.checked, (unsigned long long)x.wrong);
            }
    }
    printf("]}\n");
    bpf_object__close(o);
    ofl_lpm4_free(t);
    ofl_lpm6_free(t6);
    free(r);
    free(r6);
    for (int s = 0; s < nsets; s++) free(addrs[s]);
    return wrong ? 1 : 0;
}
