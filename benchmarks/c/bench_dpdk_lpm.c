/* The DPDK side of `offlow bench router`: DPDK 22.11's longest-prefix-match tables
 * built from the same routes and looked up with the same addresses as the offlow side
 * (bench_lpm.c), in one process pinned to one core.
 *
 *   IPv4: rte_lpm (DIR-24-8, 4-byte entries; rte_lpm_lookup_bulk) and rte_fib
 *         (DIR24_8 with 2-byte next hops; rte_fib_lookup_bulk with the scalar lookup,
 *         the one EAL's default SIMD width selects, and the AVX-512 one where the
 *         library and the CPU have it).
 *   IPv6: rte_lpm6 (rte_lpm6_lookup_bulk_func) and rte_fib6 (TRIE, 2- or 4-byte hops;
 *         scalar and AVX-512 lookups).
 * offlow's table of the same routes is built here too (linked with the runtime's lpm4.c
 * and lpm6.c, the same flags), and its scalar and batched lookups take turns with
 * DPDK's in every repetition, so that the ratios compare measurements taken side by
 * side (bench_lpm.c measures offlow in its own process as well).
 *
 * usage: bench_dpdk_lpm [-E] [-t LIMIT_S] [-x IMPL]... [-m MB] FAMILY ROUTES BUILD_REPS
 *            BUILD_BUDGET_S LOOKUP_REPS MIN_TIME_S CPU OUTDIR [NAME=ADDRS]...
 *   FAMILY  4 or 6
 *   ROUTES  packed routes: IPv4 8-byte records (u32 address in host order, u16 hop,
 *           u8 length, u8 pad; little endian), IPv6 20-byte records (16 address bytes
 *           in network order, u16 hop, u8 length, u8 pad)
 *   BUILD_REPS, BUILD_BUDGET_S  each table is built (created, every route added) up to
 *           BUILD_REPS times while its builds took less than BUILD_BUDGET_S in all (at
 *           least once); the last one is kept
 *   -t LIMIT_S  give up a build that runs longer (the table is then reported skipped
 *           with what was inserted; 0 = no limit)
 *   -x IMPL  do not build IMPL (rte_lpm, rte_fib, rte_lpm6, rte_fib6)
 *   -m MB   memory for the tables (default: sized from the routes)
 *   -E      put the tables in EAL's own --no-huge memory (4 KiB pages) instead of the
 *           heap on transparent huge pages (below)
 *   LOOKUP_REPS, MIN_TIME_S  timed repetitions per lookup and address file; a
 *           repetition is as many passes over the addresses as take MIN_TIME_S
 *           (calibrated on a warm-up pass). Repetitions interleave the lookups.
 *   CPU     the core the EAL main lcore (this thread) runs on
 *   NAME=ADDRS  addresses: IPv4 u32 host order (little endian), IPv6 16 bytes network
 *           order; their count a multiple of BURST
 *
 * Table sizes: rte_lpm and rte_fib get as many tbl8 groups as there are /24s holding
 * longer prefixes, rte_lpm6 as many as the 8-bit levels under its 24-bit table need,
 * rte_fib6 as many as its TRIE reserves while the routes go in (tbl8_reserve_fib6),
 * each 2% and 16 more; max_rules / max_routes: the routes, and 16. rte_fib and
 * rte_fib6 keep 2-byte next hops as offlow does, or 4 bytes where the tbl8 index
 * needs more than 15 bits. The tables get the routes' hops. The /0 route, which
 * rte_lpm and rte_lpm6 cannot hold, is not added to any DPDK table: its hop is rte_fib's
 * default next hop, and a miss of rte_lpm / rte_lpm6 reads as it (0, "no route",
 * without a /0 route), as the offlow tables answer. For every lookup and address file
 * an untimed pass writes OUTDIR/dpdk-hops-LOOKUP-NAME.u16 (u16 per address, that
 * mapping applied, blanks in LOOKUP as '_') for the comparison with offlow.
 *
 * EAL runs with --no-huge --no-pci --no-telemetry --no-shconf, one lcore, and
 * --force-max-simd-bitwidth=512 so that rte_fib / rte_fib6 may use their AVX-512
 * lookups (measured beside the scalar ones, which EAL's default width selects). EAL's
 * --no-huge memory is a memfd of 4 KiB pages; the tables go instead to an external
 * DPDK heap on anonymous memory advised to transparent huge pages (MADV_HUGEPAGE), as
 * the offlow tables advise theirs, so that neither side pays TLB misses the other does
 * not (DPDK normally runs on huge pages). Memory per table: the heap bytes its build
 * left allocated (tables, rules, RIB). Prints one JSON object. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_lcore.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_version.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "tool_io.h"
#include "lpm_bench.h"

#define MAX_IMPLS 10

static int socket = SOCKET_ID_ANY; /* where the tables are allocated */

/* Bytes allocated on every DPDK heap: the NUMA sockets' and ours. */
static size_t heap_bytes(void)
{
    size_t sum = 0;
    struct rte_malloc_socket_stats st;
    for (unsigned i = 0; i < rte_socket_count(); i++)
        if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
            sum += st.heap_allocsz_bytes;
    if (socket >= 0 && rte_malloc_heap_socket_is_external(socket) == 1 &&
        rte_malloc_get_socket_stats(socket, &st) == 0)
        sum += st.heap_allocsz_bytes;
    return sum;
}

#define HEAP "offlow_bench"
#define HUGE_PAGE ((size_t)2 << 20)

/* The socket of a DPDK heap of `bytes` on anonymous memory advised to transparent
 * huge pages (MADV_HUGEPAGE, as the offlow tables advise theirs): EAL's --no-huge
 * memory is a memfd of 4 KiB pages, which would charge every random lookup a TLB miss
 * that DPDK on its usual huge pages does not pay. -1 with a message on failure. */
static int thp_heap(size_t bytes)
{
    bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uint8_t *p = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return -1;
    }
    uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    (void)madvise(a, bytes, MADV_HUGEPAGE);
    if (rte_malloc_heap_create(HEAP) < 0 ||
        rte_malloc_heap_memory_add(HEAP, a, bytes, NULL, (unsigned)(bytes / HUGE_PAGE),
                                   HUGE_PAGE) < 0) {
        fprintf(stderr, "external heap: %s\n", rte_strerror(rte_errno));
        return -1;
    }
    return rte_malloc_heap_get_socket(HEAP);
}

/* ---- routes and table sizes ---------------------------------------------------------- */

static struct ofl_route4 *r4;
static struct ofl_route6 *r6;
static size_t nr;        /* routes in the file */
static uint16_t def_hop; /* hop of the (last) /0 route, 0 without one */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_key6(const void *a, const void *b)
{
    return memcmp(a, b, 17);
}

/* Distinct /24s holding a prefix longer than /24: the tbl8 groups of rte_lpm and of
 * rte_fib's DIR24_8. */
static size_t tbl8_groups4(void)
{
    uint32_t *k = malloc((nr + 1) * sizeof *k);
    size_t m = 0, d = 0;
    for (size_t i = 0; i < nr; i++)
        if (r4[i].len > 24) k[m++] = r4[i].addr >> 8;
    qsort(k, m, sizeof *k, cmp_u32);
    for (size_t i = 0; i < m; i++) d += i == 0 || k[i] != k[i - 1];
    free(k);
    return d;
}

/* Distinct (level, address bits above it) for levels 24, 32, ... below each prefix's
 * length: the 8-bit tables under rte_lpm6's and rte_fib6's 24-bit first table. */
static size_t tbl8_groups6(void)
{
    size_t cap = 0;
    for (size_t i = 0; i < nr; i++)
        if (r6[i].len > 24) cap += (size_t)(r6[i].len - 24 + 7) / 8;
    uint8_t(*k)[17] = malloc((cap + 1) * sizeof *k);
    size_t m = 0, d = 0;
    for (size_t i = 0; i < nr; i++)
        for (unsigned b = 24; b < r6[i].len; b += 8) {
            memset(k[m], 0, 17);
            k[m][0] = (uint8_t)b;
            memcpy(k[m] + 1, r6[i].addr, b / 8);
            m++;
        }
    qsort(k, m, sizeof *k, cmp_key6);
    for (size_t i = 0; i < m; i++) d += i == 0 || memcmp(k[i], k[i - 1], 17) != 0;
    free(k);
    return d;
}

/* A set of (16-byte address, length) keys with a value, open addressing. */
struct kset {
    uint8_t (*key)[17];
    uint16_t *val;
    uint8_t *used;
    size_t mask;
};

static void kset_init(struct kset *s, size_t n)
{
    size_t c = 64;
    while (c < 2 * n) c *= 2;
    s->key = calloc(c, sizeof *s->key);
    s->val = calloc(c, sizeof *s->val);
    s->used = calloc(c, 1);
    s->mask = c - 1;
}

static void kset_free(struct kset *s)
{
    free(s->key);
    free(s->val);
    free(s->used);
}

/* Slot of `a` masked to `len` bits, found or free. */
static size_t kset_slot(const struct kset *s, const uint8_t a[16], unsigned len, uint8_t k[17])
{
    memset(k, 0, 17);
    for (unsigned i = 0; i < 16 && 8 * i < len; i++)
        k[i] = len >= 8 * i + 8 ? a[i] : (uint8_t)(a[i] & (0xFF00u >> (len - 8 * i)));
    k[16] = (uint8_t)len;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 17; i++) h = (h ^ k[i]) * 1099511628211ull;
    size_t i = (size_t)(h ^ h >> 29) & s->mask;
    while (s->used[i] && memcmp(s->key[i], k, 17)) i = (i + 1) & s->mask;
    return i;
}

static int kset_get(const struct kset *s, const uint8_t a[16], unsigned len, uint16_t *v)
{
    uint8_t k[17];
    size_t i = kset_slot(s, a, len, k);
    if (s->used[i] && v) *v = s->val[i];
    return s->used[i];
}

static void kset_put(struct kset *s, const uint8_t a[16], unsigned len, uint16_t v)
{
    uint8_t k[17];
    size_t i = kset_slot(s, a, len, k);
    memcpy(s->key[i], k, 17);
    s->val[i] = v;
    s->used[i] = 1;
}

/* The tbl8 groups rte_fib6's TRIE reserves when the routes are added in order: it
 * reserves, for a route longer than /24 with no route of its byte-aligned length or
 * longer under it yet, one group per byte between its closest covering route (at
 * least /24) and itself, unless that covering route has the same hop (trie_modify in
 * DPDK 22.11), and refuses a route once the reservations reach num_tbl8. More than
 * the groups it ends up using (tbl8_groups6), often several times more. */
static size_t tbl8_reserve_fib6(void)
{
    struct kset routes, cover;
    kset_init(&routes, nr);
    size_t ncov = 0;
    for (size_t i = 0; i < nr; i++) ncov += r6[i].len >= 24 ? (size_t)(r6[i].len - 24) / 8 + 1 : 0;
    kset_init(&cover, ncov);
    size_t rsvd = 0;
    for (size_t i = 0; i < nr; i++) {
        const uint8_t *a = r6[i].addr;
        unsigned len = r6[i].len;
        if (len == 0) continue;
        unsigned diff = 0;
        if (len > 24 && !kset_get(&cover, a, len & ~7u, NULL)) {
            unsigned pd = 24;
            for (unsigned d = (len & ~7u) - 1; d > 24; d--)
                if (kset_get(&routes, a, d, NULL)) {
                    pd = d;
                    break;
                }
            diff = ((len + 7) / 8) - ((pd + 7) / 8);
        }
        if (kset_get(&routes, a, len, NULL)) {
            kset_put(&routes, a, len, r6[i].hop);
            continue;
        }
        kset_put(&routes, a, len, r6[i].hop);
        for (unsigned k = 24; k <= len; k += 8) kset_put(&cover, a, k, 0);
        uint16_t ph = 0;
        int parent = 0;
        for (int d = (int)len - 1; d >= 1 && !parent; d--) parent = kset_get(&routes, a, (unsigned)d, &ph);
        if (parent && ph == r6[i].hop) continue;
        rsvd += diff;
    }
    kset_free(&routes);
    kset_free(&cover);
    return rsvd + 1;
}

/* ---- the implementations ------------------------------------------------------------- */

struct impl {
    const char *name;      /* the table: rte_lpm, rte_fib, rte_lpm6, rte_fib6 */
    void *tbl;
    int skip;              /* -x */
    double build_s[LPM_MAX_REPS];
    int nbuild;
    size_t memory;         /* heap bytes the last build holds */
    size_t tbl8;           /* tbl8 groups configured */
    size_t inserted;       /* routes added by the last build */
    unsigned nh_bytes;     /* bytes of a next hop in the tables */
    char error[256];       /* why it has no table */
};

static struct impl impls[MAX_IMPLS];
static int nimpl;
static int fib_avx512 = -1, fib6_avx512 = -1; /* AVX-512 lookup selectable: 1 / 0 */

static void destroy(struct impl *im)
{
    if (!im->tbl) return;
    if (!strcmp(im->name, "rte_lpm")) rte_lpm_free(im->tbl);
    else if (!strcmp(im->name, "rte_fib")) rte_fib_free(im->tbl);
    else if (!strcmp(im->name, "rte_lpm6")) rte_lpm6_free(im->tbl);
    else rte_fib6_free(im->tbl);
    im->tbl = NULL;
}

/* Create the table and add every route but /0 (timed by the caller). Returns 0, or -1
 * with im->error set (a failure, or the time limit). */
static int build_once(struct impl *im, int rep, double limit)
{
    char name[32];
    snprintf(name, sizeof name, "b%s%d", im->name + 4, rep);
    uint32_t tbl8 = (uint32_t)im->tbl8;
    uint32_t rules = (uint32_t)(nr + 16);
    double t0 = tool_now_s();
    int rc = 0;
    im->inserted = 0;
    if (!strcmp(im->name, "rte_lpm")) {
        struct rte_lpm_config c = {.max_rules = rules, .number_tbl8s = tbl8, .flags = 0};
        im->nh_bytes = 4;
        im->tbl = rte_lpm_create(name, socket, &c);
    } else if (!strcmp(im->name, "rte_fib")) {
        struct rte_fib_conf c = {.type = RTE_FIB_DIR24_8, .default_nh = def_hop,
                                 .max_routes = (int)rules};
        /* 2-byte next hops as offlow's, unless the tbl8 groups need more bits. */
        c.dir24_8.nh_sz = tbl8 <= 0x7FFF ? RTE_FIB_DIR24_8_2B : RTE_FIB_DIR24_8_4B;
        im->nh_bytes = tbl8 <= 0x7FFF ? 2 : 4;
        c.dir24_8.num_tbl8 = tbl8;
        im->tbl = rte_fib_create(name, socket, &c);
    } else if (!strcmp(im->name, "rte_lpm6")) {
        struct rte_lpm6_config c = {.max_rules = rules, .number_tbl8s = tbl8, .flags = 0};
        im->nh_bytes = 4;
        im->tbl = rte_lpm6_create(name, socket, &c);
    } else {
        struct rte_fib6_conf c = {.type = RTE_FIB6_TRIE, .default_nh = def_hop,
                                  .max_routes = (int)rules};
        c.trie.nh_sz = tbl8 <= 0x7FFF ? RTE_FIB6_TRIE_2B : RTE_FIB6_TRIE_4B;
        im->nh_bytes = tbl8 <= 0x7FFF ? 2 : 4;
        c.trie.num_tbl8 = tbl8;
        im->tbl = rte_fib6_create(name, socket, &c);
    }
    if (!im->tbl) {
        snprintf(im->error, sizeof im->error, "%s_create failed: %s", im->name,
                 rte_strerror(rte_errno));
        return -1;
    }
    for (size_t i = 0; i < nr; i++) {
        if (r4) {
            if (r4[i].len == 0) continue;
            if (!strcmp(im->name, "rte_lpm"))
                rc = rte_lpm_add(im->tbl, r4[i].addr, r4[i].len, r4[i].hop);
            else rc = rte_fib_add(im->tbl, r4[i].addr, r4[i].len, r4[i].hop);
        } else {
            if (r6[i].len == 0) continue;
            if (!strcmp(im->name, "rte_lpm6"))
                rc = rte_lpm6_add(im->tbl, r6[i].addr, r6[i].len, r6[i].hop);
            else rc = rte_fib6_add(im->tbl, r6[i].addr, r6[i].len, r6[i].hop);
        }
        if (rc < 0) {
            snprintf(im->error, sizeof im->error, "%s_add failed on route %zu: %s", im->name,
                     i, strerror(-rc));
            destroy(im);
            return -1;
        }
        im->inserted++;
        if (limit > 0 && (i & 1023) == 1023 && tool_now_s() - t0 > limit) {
            snprintf(im->error, sizeof im->error,
                     "gave up after %.1f s: %zu of %zu prefixes inserted (limit %g s)",
                     tool_now_s() - t0, im->inserted, nr, limit);
            destroy(im);
            return -1;
        }
    }
    return 0;
}

/* ---- lookups ---------------------------------------------------------------------------- */

/* offlow's tables, built in this process too, so that their lookups take turns with
 * DPDK's in the same repetitions (the ratios then compare like with like). */
static struct ofl_lpm4 *o4;
static struct ofl_lpm6 *o6;

enum kind { OFL, DPDK };

/* One timed lookup: a table and the lookup function it uses. */
struct lookup {
    const char *name;
    enum kind kind;
    enum lpm_ofl_kind ofl; /* OFL: which of offlow's lookups */
    struct impl *im;       /* DPDK: its table */
    int fib_type;          /* rte_fib / rte_fib6: the lookup type to select, else -1 */
    double mlps[LPM_MAX_FILES][LPM_MAX_REPS];
    unsigned passes[LPM_MAX_FILES];
};

static struct lookup lookups[MAX_IMPLS];
static int nlook;

/* One pass of a DPDK lookup over n addresses, LPM_BURST per call, the answers summed
 * (offlow's: lpm_ofl_pass). Each table has its own loop, the call inlined where the
 * library allows; the loops are not inlined into the timing loop. */
__attribute__((noinline)) static uint64_t pass_lpm(void *t, const void *a, size_t n)
{
    const uint32_t *ip = a;
    uint32_t out[LPM_BURST];
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        rte_lpm_lookup_bulk((const struct rte_lpm *)t, ip + i, out, LPM_BURST);
        for (unsigned j = 0; j < LPM_BURST; j++) s += out[j];
    }
    return s;
}

__attribute__((noinline)) static uint64_t pass_fib(void *t, const void *a, size_t n)
{
    uint32_t *ip = (uint32_t *)a;
    uint64_t out[LPM_BURST];
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        rte_fib_lookup_bulk(t, ip + i, out, LPM_BURST);
        for (unsigned j = 0; j < LPM_BURST; j++) s += out[j];
    }
    return s;
}

__attribute__((noinline)) static uint64_t pass_lpm6(void *t, const void *a, size_t n)
{
    uint8_t(*ip)[16] = (uint8_t(*)[16])a;
    int32_t out[LPM_BURST];
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        rte_lpm6_lookup_bulk_func(t, ip + i, out, LPM_BURST);
        for (unsigned j = 0; j < LPM_BURST; j++) s += (uint32_t)out[j];
    }
    return s;
}

__attribute__((noinline)) static uint64_t pass_fib6(void *t, const void *a, size_t n)
{
    uint8_t(*ip)[16] = (uint8_t(*)[16])a;
    uint64_t out[LPM_BURST];
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += LPM_BURST) {
        rte_fib6_lookup_bulk(t, ip + i, out, LPM_BURST);
        for (unsigned j = 0; j < LPM_BURST; j++) s += out[j];
    }
    return s;
}

static void select_lookup(struct lookup *l)
{
    if (l->fib_type < 0) return;
    if (!strcmp(l->im->name, "rte_fib")) rte_fib_select_lookup(l->im->tbl, l->fib_type);
    else rte_fib6_select_lookup(l->im->tbl, l->fib_type);
}

static uint64_t one_pass(struct lookup *l, const void *a, size_t n)
{
    if (l->kind != DPDK) return lpm_ofl_pass(o4, o6, a, n, l->ofl);
    const char *t = l->im->name;
    if (!strcmp(t, "rte_lpm")) return pass_lpm(l->im->tbl, a, n);
    if (!strcmp(t, "rte_fib")) return pass_fib(l->im->tbl, a, n);
    if (!strcmp(t, "rte_lpm6")) return pass_lpm6(l->im->tbl, a, n);
    return pass_fib6(l->im->tbl, a, n);
}

/* The answers for every address, "no route" read as the /0 hop. */
static void answers(struct lookup *l, const void *a, size_t n, uint16_t *hops)
{
    if (l->kind != DPDK) {
        lpm_ofl_answers(o4, o6, a, n, l->ofl, hops);
        return;
    }
    const char *t = l->im->name;
    select_lookup(l);
    for (size_t i = 0; i < n; i += LPM_BURST) {
        if (!strcmp(t, "rte_lpm")) {
            uint32_t out[LPM_BURST];
            rte_lpm_lookup_bulk((const struct rte_lpm *)l->im->tbl, (const uint32_t *)a + i,
                                out, LPM_BURST);
            for (unsigned j = 0; j < LPM_BURST; j++)
                hops[i + j] = out[j] & RTE_LPM_LOOKUP_SUCCESS ? (uint16_t)(out[j] & 0xFFFFFF)
                                                              : def_hop;
        } else if (!strcmp(t, "rte_fib")) {
            uint64_t out[LPM_BURST];
            rte_fib_lookup_bulk(l->im->tbl, (uint32_t *)a + i, out, LPM_BURST);
            for (unsigned j = 0; j < LPM_BURST; j++) hops[i + j] = (uint16_t)out[j];
        } else if (!strcmp(t, "rte_lpm6")) {
            int32_t out[LPM_BURST];
            rte_lpm6_lookup_bulk_func(l->im->tbl, (uint8_t(*)[16])a + i, out, LPM_BURST);
            for (unsigned j = 0; j < LPM_BURST; j++)
                hops[i + j] = out[j] < 0 ? def_hop : (uint16_t)out[j];
        } else {
            uint64_t out[LPM_BURST];
            rte_fib6_lookup_bulk(l->im->tbl, (uint8_t(*)[16])a + i, out, LPM_BURST);
            for (unsigned j = 0; j < LPM_BURST; j++) hops[i + j] = (uint16_t)out[j];
        }
    }
}

/* Build offlow's table of the routes (exits on failure). */
static void build_offlow(void)
{
    char err[256] = "";
    int rc = r4 ? ofl_lpm4_build(&o4, r4, nr, err) : ofl_lpm6_build(&o6, r6, nr, err);
    if (rc < 0) {
        fprintf(stderr, "offlow build failed: %s\n", err);
        exit(1);
    }
}

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    double limit = 0;
    long mem_mb = 0;
    const char *skips[MAX_IMPLS];
    int nskip = 0, opt, eal_heap = 0;
    while ((opt = getopt(argc, argv, "+t:x:m:E")) != -1) {
        if (opt == 'E') eal_heap = 1;
        else if (opt == 't') limit = atof(optarg);
        else if (opt == 'x' && nskip < MAX_IMPLS) skips[nskip++] = optarg;
        else if (opt == 'm') mem_mb = atol(optarg);
        else return 2;
    }
    argc -= optind;
    argv += optind;
    if (argc < 8) {
        fprintf(stderr, "usage: bench_dpdk_lpm [-t LIMIT_S] [-x IMPL]... [-m MB] FAMILY "
                        "ROUTES BUILD_REPS BUILD_BUDGET_S LOOKUP_REPS MIN_TIME_S CPU OUTDIR "
                        "[NAME=ADDRS]...\n");
        return 2;
    }
    int family = atoi(argv[0]);
    int build_reps = atoi(argv[2]), lookup_reps = atoi(argv[4]);
    double build_budget = atof(argv[3]), min_time = atof(argv[5]);
    int cpu = atoi(argv[6]);
    const char *outdir = argv[7];
    int nfiles = argc - 8;
    if ((family != 4 && family != 6) || build_reps < 1 || build_reps > LPM_MAX_REPS ||
        lookup_reps < 1 || lookup_reps > LPM_MAX_REPS || nfiles > LPM_MAX_FILES) {
        fprintf(stderr, "bench_dpdk_lpm: bad arguments\n");
        return 2;
    }

    lpm_read_routes(argv[1], family, &r4, &r6, &nr, &def_hop);
    /* tbl8 groups: what each table needs, 2% and 16 to spare. */
    size_t groups = family == 4 ? tbl8_groups4() : tbl8_groups6();
    size_t fib6_groups = family == 6 ? tbl8_reserve_fib6() : 0;

    /* Memory for the tables (one family's two at once): tbl24s, tbl8 groups, rules,
     * RIB nodes, with room to spare. */
    if (mem_mb <= 0) {
        double b = family == 4 ? 64e6 + 32e6 + groups * (1024.0 + 1024.0) + nr * (8.0 + 450.0)
                               : 2 * 64e6 + (groups + fib6_groups) * 1024.0 + nr * (100.0 + 600.0);
        mem_mb = 64 + (long)(1.25 * b / (1 << 20));
    }
    /* EAL: no huge pages, no PCI, no telemetry, no shared files, one lcore: CPU. */
    char mem[32], lcore[32], prefix[64];
    snprintf(mem, sizeof mem, "%ld", eal_heap ? mem_mb + 128 : 128);
    snprintf(lcore, sizeof lcore, "%d", cpu);
    snprintf(prefix, sizeof prefix, "offlow-bench-%d", (int)getpid());
    char *eal[] = {"bench_dpdk_lpm", "--no-huge", "-m", mem, "--no-pci", "--no-telemetry",
                   "--no-shconf", "--file-prefix", prefix, "-l", lcore,
                   "--log-level=error", "--force-max-simd-bitwidth=512", NULL};
    int eal_argc = (int)(sizeof eal / sizeof eal[0]) - 1;
    if (rte_eal_init(eal_argc, eal) < 0) {
        fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
        return 3;
    }
    if (!eal_heap && (socket = thp_heap((size_t)mem_mb << 20)) < 0) return 3;

    const char *names4[] = {"rte_lpm", "rte_fib"}, *names6[] = {"rte_lpm6", "rte_fib6"};
    for (int i = 0; i < 2; i++) {
        struct impl *im = &impls[nimpl++];
        im->name = family == 4 ? names4[i] : names6[i];
        im->tbl8 = !strcmp(im->name, "rte_fib6") ? fib6_groups : groups;
        im->tbl8 += im->tbl8 / 50 + 16;
        for (int s = 0; s < nskip; s++) im->skip |= !strcmp(skips[s], im->name);
    }

    /* Builds: repeated while under the budget, the last one kept. */
    for (int i = 0; i < nimpl; i++) {
        struct impl *im = &impls[i];
        if (im->skip) continue;
        double total = 0;
        for (int rep = 0; rep < build_reps && (rep == 0 || total < build_budget); rep++) {
            destroy(im);
            size_t h0 = heap_bytes();
            double t0 = tool_now_s();
            if (build_once(im, rep, limit) < 0) break;
            double t = tool_now_s() - t0;
            im->memory = heap_bytes() - h0;
            im->build_s[im->nbuild++] = t;
            total += t;
        }
        if (!im->tbl) im->nbuild = 0;
    }

    /* Lookups: offlow's (lpm_ofl_kinds; only when there are addresses), then one per DPDK table and
     * lookup function. */
    if (nfiles > 0) {
        build_offlow();
        for (int k = 0; k < lpm_ofl_kinds(family); k++)
            lookups[nlook++] = (struct lookup){.name = lpm_ofl_name((enum lpm_ofl_kind)k),
                                               .kind = OFL, .ofl = (enum lpm_ofl_kind)k,
                                               .fib_type = -1};
    }
    for (int i = 0; i < nimpl; i++) {
        struct impl *im = &impls[i];
        if (!im->tbl) continue;
        int is_fib = !strcmp(im->name, "rte_fib"), is_fib6 = !strcmp(im->name, "rte_fib6");
        if (is_fib || is_fib6) {
            lookups[nlook++] = (struct lookup){.name = im->name, .kind = DPDK, .im = im,
                                               .fib_type = is_fib ? RTE_FIB_LOOKUP_DIR24_8_SCALAR_MACRO
                                                                  : RTE_FIB6_LOOKUP_TRIE_SCALAR};
            int vec = is_fib ? RTE_FIB_LOOKUP_DIR24_8_VECTOR_AVX512
                             : RTE_FIB6_LOOKUP_TRIE_VECTOR_AVX512;
            int ok = is_fib ? rte_fib_select_lookup(im->tbl, vec) == 0
                            : rte_fib6_select_lookup(im->tbl, vec) == 0;
            if (is_fib) fib_avx512 = ok;
            else fib6_avx512 = ok;
            if (ok)
                lookups[nlook++] = (struct lookup){
                    .name = is_fib ? "rte_fib avx512" : "rte_fib6 avx512", .kind = DPDK,
                    .im = im, .fib_type = vec};
        } else {
            lookups[nlook++] = (struct lookup){.name = im->name, .kind = DPDK, .im = im,
                                               .fib_type = -1};
        }
    }

    char *fname[LPM_MAX_FILES];
    void *addrs[LPM_MAX_FILES];
    size_t naddr[LPM_MAX_FILES];
    for (int f = 0; f < nfiles; f++) {
        addrs[f] = lpm_read_addrs(argv[8 + f], family, "bench_dpdk_lpm", &fname[f], &naddr[f]);
        /* Untimed answers, for the comparison with offlow. */
        uint16_t *hops = malloc(naddr[f] * sizeof *hops);
        for (int l = 0; l < nlook; l++) {
            answers(&lookups[l], addrs[f], naddr[f], hops);
            lpm_write_hops(outdir, "dpdk-hops", lookups[l].name, fname[f], hops, naddr[f]);
        }
        free(hops);
        /* Warm-up and calibration: passes per repetition. */
        for (int l = 0; l < nlook; l++) {
            select_lookup(&lookups[l]);
            double t0 = tool_now_s();
            sink += one_pass(&lookups[l], addrs[f], naddr[f]);
            lookups[l].passes[f] = lpm_passes(tool_now_s() - t0, min_time);
        }
        /* Timed repetitions, the lookups interleaved. */
        for (int rep = 0; rep < lookup_reps; rep++)
            for (int l = 0; l < nlook; l++) {
                struct lookup *lk = &lookups[l];
                select_lookup(lk);
                double t0 = tool_now_s();
                for (unsigned p = 0; p < lk->passes[f]; p++)
                    sink += one_pass(lk, addrs[f], naddr[f]);
                double t = tool_now_s() - t0;
                lk->mlps[f][rep] = (double)lk->passes[f] * (double)naddr[f] / t / 1e6;
            }
    }

    /* Report. */
    printf("{\"side\": \"dpdk\", \"version\": \"%s\", \"family\": %d, \"routes\": %zu, "
           "\"default_hop\": %u, \"tbl8_groups_needed\": %zu, \"fib6_tbl8_reserved\": %zu, \"burst\": %d, \"cpu\": %d, "
           "\"heap_mb\": %ld, \"heap\": \"%s\", \"anon_huge_kb\": %ld, \"build_reps\": %d, "
           "\"build_budget_s\": %g, \"build_limit_s\": %g, \"avx512\": %s, \"simd\": \"%s\", "
           "\"builds\": [",
           rte_version(), family, nr, def_hop, groups, fib6_groups, LPM_BURST, cpu, mem_mb,
           eal_heap ? "EAL --no-huge memory (4 KiB pages)" : "external heap on transparent huge pages",
           lpm_anon_huge_kb(),
           build_reps, build_budget, limit,
           (family == 4 ? fib_avx512 : fib6_avx512) > 0 ? "true" : "false",
           ofl_simd_name(o4 ? o4->simd : OFL_SIMD_SCALAR));
    for (int i = 0; i < nimpl; i++) {
        struct impl *im = &impls[i];
        printf("%s{\"name\": \"%s\", \"build_s\": ", i ? ", " : "", im->name);
        lpm_print_list(im->build_s, im->nbuild);
        printf(", \"memory\": %zu, \"tbl8_groups\": %u, \"max_rules\": %zu, \"routes\": %zu, "
               "\"next_hop_bytes\": %u",
               im->tbl ? im->memory : 0, (unsigned)im->tbl8, nr + 16,
               im->inserted, im->nh_bytes);
        if (im->skip) printf(", \"skipped\": \"not built (asked)\"");
        else if (!im->tbl) printf(", \"skipped\": \"%s\"", im->error);
        printf("}");
    }
    printf("], \"files\": [");
    for (int f = 0; f < nfiles; f++) printf("%s\"%s\"", f ? ", " : "", fname[f]);
    printf("], \"addresses\": [");
    for (int f = 0; f < nfiles; f++) printf("%s%zu", f ? ", " : "", naddr[f]);
    printf("], \"lookups\": [");
    for (int l = 0; l < nlook; l++) {
        struct lookup *lk = &lookups[l];
        printf("%s{\"name\": \"%s\", \"table\": \"%s\", \"mlps\": {", l ? ", " : "", lk->name,
               lk->kind != DPDK ? (r4 ? "offlow lpm4" : "offlow lpm6") : lk->im->name);
        for (int f = 0; f < nfiles; f++) {
            printf("%s\"%s\": ", f ? ", " : "", fname[f]);
            lpm_print_list(lk->mlps[f], lookup_reps);
        }
        printf("}, \"passes\": {");
        for (int f = 0; f < nfiles; f++)
            printf("%s\"%s\": %u", f ? ", " : "", fname[f], lk->passes[f]);
        printf("}}");
    }
    printf("]}\n");
    for (int i = 0; i < nimpl; i++) destroy(&impls[i]);
    ofl_lpm4_free(o4);
    ofl_lpm6_free(o6);
    rte_eal_cleanup();
    return 0;
}
