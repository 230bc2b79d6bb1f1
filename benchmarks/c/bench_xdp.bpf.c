/* The XDP programs of `offlow bench xdp` (benchmarks/xdp.py): route lookups on the
 * packet's destination address, IPv4 and IPv6, each family in its own harness, timed
 * by the kernel with BPF_PROG_TEST_RUN in repeat mode (benchmarks/c/bench_xdp.c drives
 * them).
 *
 *   xdp_dir24, xdp_trie6: offlow's tables as every XDP program of offlow looks them up
 *              (runtime/lib/lpm's lpm_bpf.h): the DIR-24-8 (lpm4.h) in three array maps
 *              v4_dir, v4_tbl24, v4_tbl8, and the IPv6 multibit trie (lpm6.h) in three
 *              array maps v6_top, v6_node, v6_leaf, filled by the host from the tables
 *              offlow built (runtime/tools/xdp_tables.c);
 *   xdp_trie, xdp_trie_6: BPF_MAP_TYPE_LPM_TRIE holding the same routes;
 *   xdp_fib, xdp_fib_6: bpf_fib_lookup over the same routes in the kernel FIB of the
 *              driver's private network namespace (hop h = gateway 192.0.2.h, or
 *              2001:db8:ffff::h, see xdp_fib.c);
 *   xdp_none, xdp_none_6: the harness alone (no lookup): its cost is in every other row.
 *
 * Two harnesses run each lookup. Per packet (the programs above): repeat mode runs the
 * program on the same packet buffer again and again, so after each lookup the program
 * records the hop at the cursor's position (the host checks every answer) and writes
 * the next address of the `addrs` (`addrs6`) map into the packet's destination for the
 * next repetition: one repetition, one lookup. Batch (the same names ending in `_b`):
 * one repetition looks up OFL_BENCH_XDP_BATCH (B) consecutive addresses of the map in a
 * bounded loop, each written into the packet's destination first (bpf_fib_lookup reads
 * it from there; every row does the same work) and its hop recorded, the cursor moving
 * on by B: lookups per second as lookup benchmarks measure them, the program's entry
 * and exit paid once per B lookups. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "offlow/lpm_bpf.h"

#include "bench_xdp.h"

#define FIB_HOP_NET 0xC0000200u   /* 192.0.2.0: gateway 192.0.2.h is hop h */
/* 2001:db8:ffff::/112 (the top 32 bits of its last word: 0): gateway ...::h is hop h */
#define FIB6_HOP_W0 0x20010db8u
#define FIB6_HOP_W1 0xffff0000u

struct cursor {
    __u32 i;   /* the address looked up now */
    __u32 n;   /* addresses in `addrs` (batch programs: a multiple of B) */
};

struct trie_key {
    __u32 prefixlen;
    __u32 addr;   /* network order */
};

/* offlow's tables (max_entries: set by the host before loading, to the tables' sizes) */
OFL_LPM4_BPF_MAPS(v4);
OFL_LPM6_BPF_MAPS(v6);

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct trie_key);
    __type(value, __u16);
    __uint(max_entries, 1);
} trie SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, __u32);   /* network order */
    __uint(max_entries, 1);
} addrs SEC(".maps");

struct trie6_key {
    __u32 prefixlen;
    __u8 addr[16];   /* network order */
};

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct trie6_key);
    __type(value, __u16);
    __uint(max_entries, 1);
} trie6 SEC(".maps");

struct addr6 {
    __u8 b[16];   /* network order */
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct addr6);
    __uint(max_entries, 1);
} addrs6 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, __u32);
    __uint(max_entries, 1);
} hops SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __type(key, __u32);
    __type(value, struct cursor);
    __uint(max_entries, 1);
} cursor SEC(".maps");

/* offlow's IPv4 lookup, as generated programs make it; 0 = no route. */
static __always_inline __u32 dir24_lookup(__u32 addr)
{
    const struct ofl_lpm4 t = OFL_LPM4_BPF_TABLE(v4);
    return ofl_lpm4_lookup(&t, addr);
}

static __always_inline __u32 trie_lookup(__u32 addr)
{
    struct trie_key key = {.prefixlen = 32, .addr = bpf_htonl(addr)};
    __u16 *hop = bpf_map_lookup_elem(&trie, &key);
    return hop ? *hop : 0;
}

/* The route's gateway names the hop; no route (or any other answer): 0. The
 * neighbour lookup is skipped: a route lookup, as the other two. */
static __always_inline __u32 fib_lookup(struct xdp_md *ctx, const struct iphdr *ip)
{
    struct bpf_fib_lookup p = {
        .family = 2,   /* AF_INET */
        .tos = ip->tos,
        .l4_protocol = ip->protocol,
        .tot_len = bpf_ntohs(ip->tot_len),
        .ifindex = ctx->ingress_ifindex,
        .ipv4_src = ip->saddr,
        .ipv4_dst = ip->daddr,
    };
    long rc = bpf_fib_lookup(ctx, &p, sizeof p, BPF_FIB_LOOKUP_SKIP_NEIGH);
    if (rc != BPF_FIB_LKUP_RET_SUCCESS) return 0;
    __u32 gw = bpf_ntohl(p.ipv4_dst);
    return (gw & ~0xFFu) == FIB_HOP_NET ? gw & 0xFF : 0;
}

/* (DIR24: offlow's table, the DIR-24-8 for IPv4, the trie for IPv6) */
enum which { NONE, DIR24, TRIE, FIB };

/* A batch's cursor after the batch from position i (wrapping at n, a multiple of B). */
static __always_inline __u32 batch_next(__u32 i, __u32 n)
{
    return i + OFL_BENCH_XDP_BATCH < n ? i + OFL_BENCH_XDP_BATCH : 0;
}

/* The cursor (the map's one entry; NULL only if the map lookup fails). */
static __always_inline struct cursor *the_cursor(void)
{
    __u32 zero = 0;
    return bpf_map_lookup_elem(&cursor, &zero);
}

/* The hop at the cursor's position; the cursor moved on (wrapping): its new position. */
static __always_inline __u32 record(struct cursor *c, __u32 hop)
{
    __u32 i = c->i;
    __u32 *h = bpf_map_lookup_elem(&hops, &i);
    if (h) *h = hop;
    i = i + 1 < c->n ? i + 1 : 0;
    c->i = i;
    return i;
}

/* Lookup `w` of the packet's IPv4 destination (NONE: no lookup, hop 0). */
static __always_inline __u32 lookup4(struct xdp_md *ctx, const struct iphdr *ip, enum which w)
{
    if (w == DIR24) return dir24_lookup(bpf_ntohl(ip->daddr));
    if (w == TRIE) return trie_lookup(bpf_ntohl(ip->daddr));
    if (w == FIB) return fib_lookup(ctx, ip);
    return 0;
}

/* The IPv6 lookups, as their IPv4 namesakes above. */
static __always_inline __u32 trie6_lookup(const struct ipv6hdr *ip)
{
    struct trie6_key key = {.prefixlen = 128};
    __builtin_memcpy(key.addr, &ip->daddr, 16);
    __u16 *hop = bpf_map_lookup_elem(&trie6, &key);
    return hop ? *hop : 0;
}

static __always_inline __u32 fib6_lookup(struct xdp_md *ctx, const struct ipv6hdr *ip)
{
    struct bpf_fib_lookup p = {
        .family = 10,   /* AF_INET6 */
        .l4_protocol = ip->nexthdr,
        .tot_len = bpf_ntohs(ip->payload_len),
        .ifindex = ctx->ingress_ifindex,
    };
    __builtin_memcpy(p.ipv6_src, &ip->saddr, 16);
    __builtin_memcpy(p.ipv6_dst, &ip->daddr, 16);
    long rc = bpf_fib_lookup(ctx, &p, sizeof p, BPF_FIB_LOOKUP_SKIP_NEIGH);
    if (rc != BPF_FIB_LKUP_RET_SUCCESS) return 0;
    __u32 last = bpf_ntohl(p.ipv6_dst[3]);
    if (bpf_ntohl(p.ipv6_dst[0]) != FIB6_HOP_W0 || bpf_ntohl(p.ipv6_dst[1]) != FIB6_HOP_W1 ||
        p.ipv6_dst[2] || last > 0xFFFFu)
        return 0;
    return last;
}

/* Lookup `w` of the packet's IPv6 destination (NONE: no lookup, hop 0). */
static __always_inline __u32 lookup6(struct xdp_md *ctx, const struct ipv6hdr *ip,
                                     enum which w)
{
    if (w == DIR24) {
        const struct ofl_lpm6 t = OFL_LPM6_BPF_TABLE(v6);
        return ofl_lpm6_lookup(&t, (const __u8 *)&ip->daddr);
    }
    if (w == TRIE) return trie6_lookup(ip);
    if (w == FIB) return fib6_lookup(ctx, ip);
    return 0;
}

/* The packet's IP header of family `fam` (4 or 6), or NULL when it has none (not what
 * the driver sends). `fam` is a constant in every caller: each program inlines the
 * code of its own family only. */
static __always_inline void *ip_of(struct xdp_md *ctx, int fam)
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    char *ip = (char *)(eth + 1);
    __u32 len = fam == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);
    __u16 proto = fam == 4 ? ETH_P_IP : ETH_P_IPV6;
    if ((void *)(ip + len) > end || eth->h_proto != bpf_htons(proto)) return NULL;
    return ip;
}

/* Lookup `w` of the destination of `ip`, of family `fam` (NONE: no lookup, hop 0). */
static __always_inline __u32 lookup(struct xdp_md *ctx, void *ip, int fam, enum which w)
{
    return fam == 4 ? lookup4(ctx, ip, w) : lookup6(ctx, ip, w);
}

/* Address *k of the family's set (`addrs`, `addrs6`) written into the packet's
 * destination: 0, or -1 when the map has no entry *k. (A pointer: the caller's key
 * serves its own map lookups too, one stack slot.) */
static __always_inline int set_dst(void *ip, int fam, const __u32 *k)
{
    if (fam == 4) {
        __u32 *a = bpf_map_lookup_elem(&addrs, k);
        if (!a) return -1;
        ((struct iphdr *)ip)->daddr = *a;
        return 0;
    }
    struct addr6 *a = bpf_map_lookup_elem(&addrs6, k);
    if (!a) return -1;
    __builtin_memcpy(&((struct ipv6hdr *)ip)->daddr, a->b, 16);
    return 0;
}

/* One lookup: the hop recorded, the next address written into the packet. */
static __always_inline int harness(struct xdp_md *ctx, int fam, enum which w)
{
    void *ip = ip_of(ctx, fam);
    if (!ip) return XDP_PASS;
    struct cursor *c = the_cursor();
    if (!c) return XDP_ABORTED;
    __u32 i = record(c, lookup(ctx, ip, fam, w));
    set_dst(ip, fam, &i);   /* (no entry i: the packet keeps its address) */
    return XDP_DROP;
}

/* B lookups from the cursor's position on, each address written into the
 * packet; every hop recorded at its address's position; the cursor moved on by B. No
 * wrap inside the loop (the driver pads the address set to a multiple of B): a
 * position that may wrap to a known 0 at every lookup would give the verifier a path
 * per wrap point and lookup, more than it explores. */
static __always_inline int batch(struct xdp_md *ctx, int fam, enum which w)
{
    void *ip = ip_of(ctx, fam);
    if (!ip) return XDP_PASS;
    struct cursor *c = the_cursor();
    if (!c) return XDP_ABORTED;
    __u32 i = c->i;
    for (__u32 j = 0; j < OFL_BENCH_XDP_BATCH; j++) {
        __u32 k = i + j;
        if (set_dst(ip, fam, &k)) return XDP_ABORTED;
        __u32 hop = lookup(ctx, ip, fam, w);
        __u32 *h = bpf_map_lookup_elem(&hops, &k);
        if (h) *h = hop;
    }
    c->i = batch_next(i, c->n);
    return XDP_DROP;
}

SEC("xdp")
int xdp_none(struct xdp_md *ctx) { return harness(ctx, 4, NONE); }

SEC("xdp")
int xdp_dir24(struct xdp_md *ctx) { return harness(ctx, 4, DIR24); }

SEC("xdp")
int xdp_trie(struct xdp_md *ctx) { return harness(ctx, 4, TRIE); }

SEC("xdp")
int xdp_fib(struct xdp_md *ctx) { return harness(ctx, 4, FIB); }

SEC("xdp")
int xdp_none_b(struct xdp_md *ctx) { return batch(ctx, 4, NONE); }

SEC("xdp")
int xdp_dir24_b(struct xdp_md *ctx) { return batch(ctx, 4, DIR24); }

SEC("xdp")
int xdp_trie_b(struct xdp_md *ctx) { return batch(ctx, 4, TRIE); }

SEC("xdp")
int xdp_fib_b(struct xdp_md *ctx) { return batch(ctx, 4, FIB); }

SEC("xdp")
int xdp_none_6(struct xdp_md *ctx) { return harness(ctx, 6, NONE); }

SEC("xdp")
int xdp_trie6(struct xdp_md *ctx) { return harness(ctx, 6, DIR24); }

SEC("xdp")
int xdp_trie_6(struct xdp_md *ctx) { return harness(ctx, 6, TRIE); }

SEC("xdp")
int xdp_fib_6(struct xdp_md *ctx) { return harness(ctx, 6, FIB); }

SEC("xdp")
int xdp_none_6b(struct xdp_md *ctx) { return batch(ctx, 6, NONE); }

SEC("xdp")
int xdp_trie6_b(struct xdp_md *ctx) { return batch(ctx, 6, DIR24); }

SEC("xdp")
int xdp_trie_6b(struct xdp_md *ctx) { return batch(ctx, 6, TRIE); }

SEC("xdp")
int xdp_fib_6b(struct xdp_md *ctx) { return batch(ctx, 6, FIB); }

char LICENSE[] SEC("license") = "GPL";
