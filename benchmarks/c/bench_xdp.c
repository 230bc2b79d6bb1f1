/* The driver of `offlow bench xdp` (benchmarks/xdp.py): IPv4 route lookups in the
 * kernel's XDP hook, timed by the kernel with BPF_PROG_TEST_RUN in repeat mode, for the
 * programs of bench_xdp.bpf.c over the same routes and addresses:
 *
 *   "offlow dir24": offlow's DIR-24-8 built by the runtime (ofl_lpm4_build), its
 *                   directory, tbl24 blocks and tbl8 groups copied into array maps;
 *   "lpm trie":     the routes in a BPF_MAP_TYPE_LPM_TRIE map;
 *   "kernel fib":   the routes in the kernel FIB of this process's own network
 *                   namespace (xdp_fib.h), looked up with bpf_fib_lookup;
 *   "harness":      the same program without a lookup (its cost is in every row).
 *
 * usage: bench_xdp BPF_OBJECT ROUTES PASSES REPS NAME=ADDRS...
 *   ROUTES: IPv4 8-byte records (u32 address in host order, u16 hop, u8 length, u8 pad;
 *   little endian), as benchmarks/common/routes.py writes them; ADDRS: u32 addresses in
 *   host order. For every address file and program, REPS test runs of PASSES passes
 *   over the addresses each (one repetition = one packet = one lookup); after each,
 *   every hop the program recorded is checked against ofl_lpm4_lookup, and a wrong
 *   one ends the run with exit status 1 naming it (3: the kernel refused a namespace,
 *   the programs or their maps). Prints one JSON object. The process
 *   moves into a network namespace of its own first: the routes vanish with it. */
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

#include "offlow/lpm4.h"
#include "tool_io.h"
#include "xdp_fib.h"

#define NPROG 4
#define MAX_SETS 8

static const char *prog_names[NPROG] = {"xdp_none", "xdp_dir24", "xdp_trie", "xdp_fib"};
static const char *labels[NPROG] = {"harness", "offlow dir24", "lpm trie", "kernel fib"};

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

/* Copy the built table into the dir, tbl24 and tbl8 maps (mmapped). */
static void load_dir24(struct bpf_object *o, const struct ofl_lpm4 *t)
{
    uint64_t *dir = map_mem(map_of(o, "dir"));   /* u16 values at a stride of 8 */
    for (uint32_t i = 0; i < OFL_LPM4_DIR_ENTRIES; i++) dir[i] = t->dir[i];
    void *tbl24 = map_mem(map_of(o, "tbl24")), *tbl8 = map_mem(map_of(o, "tbl8"));
    memcpy(tbl24, t->tbl24, (size_t)t->blocks * OFL_LPM4_BLOCK * 2);
    memcpy(tbl8, t->tbl8, (size_t)t->groups * OFL_LPM4_BLOCK * 2);
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

struct result {
    double ns_kernel;   /* the kernel's ns per repetition, median of the reps */
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

/* REPS test runs of `prog` over the n addresses (already in the addrs map), PASSES
 * passes each; then every recorded hop checked (not for the harness). */
static struct result run_prog(struct bpf_object *o, int p, int ifindex,
                              const struct ofl_lpm4 *t, const uint32_t *a, uint32_t n,
                              uint32_t passes, int reps, const uint32_t *hops)
{
    int fd = bpf_program__fd(bpf_object__find_program_by_name(o, prog_names[p]));
    int cur = bpf_map__fd(map_of(o, "cursor"));
    double ns[64], wall[64];
    for (int r = 0; r < reps; r++) {
        uint32_t zero = 0, c[2] = {0, n};
        int rc = bpf_map_update_elem(cur, &zero, c, BPF_ANY);
        if (rc < 0) die("cursor", rc);
        _Alignas(4) uint8_t pkt[64] = {0}, out[64];
        struct ethhdr *eth = (struct ethhdr *)pkt;
        eth->h_proto = htons(ETH_P_IP);
        struct iphdr *ip = (struct iphdr *)(eth + 1);
        ip->version = 4;
        ip->ihl = 5;
        ip->ttl = 64;
        ip->protocol = 17;
        ip->tot_len = htons(sizeof pkt - sizeof *eth);
        ip->saddr = htonl(0xC6120001u);   /* 198.18.0.1 */
        ip->daddr = htonl(a[0]);
        struct xdp_md md = {.data_end = sizeof pkt, .ingress_ifindex = (uint32_t)ifindex};
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof pkt,
                    .data_out = out, .data_size_out = sizeof out, .ctx_in = &md,
                    .ctx_size_in = sizeof md, .repeat = n * passes);
        double t0 = tool_now_s();
        rc = bpf_prog_test_run_opts(fd, &opts);
        wall[r] = (tool_now_s() - t0) * 1e9 / ((double)n * passes);
        if (rc < 0) die("BPF_PROG_TEST_RUN", rc);
        if (opts.retval != 1) {   /* XDP_DROP: the program parsed the packet */
            fprintf(stderr, "bench_xdp: %s returned %u, not XDP_DROP\n", prog_names[p],
                    opts.retval);
            exit(1);
        }
        ns[r] = opts.duration;
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
    if (p == 0) return res;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t want = ofl_lpm4_lookup(t, a[i]);
        uint32_t got = hops[2 * i];   /* u32 values at a stride of 8 */
        res.checked++;
        if (got != want && res.wrong++ == 0)
            fprintf(stderr, "bench_xdp: %s: %u.%u.%u.%u -> hop %u, offlow's lookup says %u\n",
                    labels[p], a[i] >> 24, a[i] >> 16 & 0xFF, a[i] >> 8 & 0xFF, a[i] & 0xFF,
                    got, want);
    }
    return res;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: bench_xdp BPF_OBJECT ROUTES PASSES REPS NAME=ADDRS...\n");
        return 2;
    }
    uint32_t passes = (uint32_t)tool_number("bench_xdp", argv[3], 1, 1000);
    int reps = (int)tool_number("bench_xdp", argv[4], 1, 63);
    int nsets = argc - 5;
    if (nsets > MAX_SETS) {
        fprintf(stderr, "bench_xdp: at most %d address files\n", MAX_SETS);
        return 2;
    }
    const char *names[MAX_SETS];
    uint32_t *addrs[MAX_SETS];
    uint32_t counts[MAX_SETS], most = 1;
    for (int s = 0; s < nsets; s++) {
        char *eq = strchr(argv[5 + s], '=');
        if (!eq) {
            fprintf(stderr, "bench_xdp: not NAME=ADDRS: %s\n", argv[5 + s]);
            return 2;
        }
        *eq = 0;
        names[s] = argv[5 + s];
        size_t len;
        addrs[s] = tool_read(eq + 1, &len);
        if (len < 4 || len % 4 || len / 4 > UINT32_MAX / passes) {
            fprintf(stderr, "bench_xdp: %s: not a list of IPv4 addresses\n", eq + 1);
            return 2;
        }
        counts[s] = (uint32_t)(len / 4);
        if (counts[s] > most) most = counts[s];
    }

    size_t rlen;
    uint8_t *raw = tool_read(argv[2], &rlen);
    if (rlen % 8) {
        fprintf(stderr, "bench_xdp: %s: not a list of 8-byte routes\n", argv[2]);
        return 2;
    }
    size_t n = rlen / 8;
    struct ofl_route4 *r = calloc(n + 1, sizeof *r);
    if (!r) die("routes", -ENOMEM);
    for (size_t i = 0; i < n; i++) {
        memcpy(&r[i].addr, raw + 8 * i, 4);
        memcpy(&r[i].hop, raw + 8 * i + 4, 2);
        r[i].len = raw[8 * i + 6];
    }
    free(raw);

    char err[256] = "";
    double t0 = tool_now_s();
    struct ofl_lpm4 *t;
    if (ofl_lpm4_build(&t, r, n, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    double build_s = tool_now_s() - t0;

    int ifindex = ofl_xdp_fib_netns(err);
    if (ifindex < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return EXIT_REFUSED;
    }

    libbpf_set_print(NULL);
    struct bpf_object *o = bpf_object__open_file(argv[1], NULL);
    if (!o) die(argv[1], -errno);
    set_entries(o, "tbl24", t->blocks);
    set_entries(o, "tbl8", t->groups);
    set_entries(o, "trie", n);
    set_entries(o, "addrs", most);
    set_entries(o, "hops", most);
    int rc = bpf_object__load(o);
    if (rc < 0) die_status("the kernel refused to load the XDP programs and maps", rc,
                           EXIT_REFUSED);

    double load_s[NPROG] = {0};
    t0 = tool_now_s();
    load_dir24(o, t);
    load_s[1] = tool_now_s() - t0;
    t0 = tool_now_s();
    load_trie(o, r, n);
    load_s[2] = tool_now_s() - t0;
    t0 = tool_now_s();
    if (ofl_xdp_fib_add(r, n, ifindex, err) < 0) {
        fprintf(stderr, "bench_xdp: %s\n", err);
        return 1;
    }
    load_s[3] = tool_now_s() - t0;

    uint32_t *amem = map_mem(map_of(o, "addrs")), *hmem = map_mem(map_of(o, "hops"));
    printf("{\"routes\": %zu, \"blocks\": %u, \"groups\": %u, \"dir24_bytes\": %zu, "
           "\"build_s\": %.6g, \"passes\": %u, \"reps\": %d, \"programs\": [",
           n, t->blocks, t->groups, ofl_lpm4_memory(t), build_s, passes, reps);
    for (int p = 0; p < NPROG; p++)
        printf("%s{\"name\": \"%s\", \"load_s\": %.6g}", p ? ", " : "", labels[p], load_s[p]);
    printf("], \"runs\": [");
    uint64_t wrong = 0;
    for (int s = 0; s < nsets; s++) {
        for (uint32_t i = 0; i < counts[s]; i++) amem[2 * i] = htonl(addrs[s][i]);
        for (int p = 0; p < NPROG; p++) {
            struct result x = run_prog(o, p, ifindex, t, addrs[s], counts[s], passes, reps,
                                       hmem);
            wrong += x.wrong;
            printf("%s{\"addresses\": \"%s\", \"n\": %u, \"program\": \"%s\", "
                   "\"ns\": %.6g, \"ns_min\": %.6g, \"ns_max\": %.6g, \"ns_call\": %.6g, "
                   "\"checked\": %llu, \"wrong\": %llu}",
                   s || p ? ", " : "", names[s], counts[s], labels[p], x.ns_kernel, x.ns_min,
                   x.ns_max, x.ns_call, (unsigned long long)x.checked,
                   (unsigned long long)x.wrong);
        }
    }
    printf("]}\n");
    bpf_object__close(o);
    ofl_lpm4_free(t);
    free(r);
    for (int s = 0; s < nsets; s++) free(addrs[s]);
    return wrong ? 1 : 0;
}
