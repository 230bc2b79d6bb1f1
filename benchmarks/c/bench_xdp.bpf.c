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
 * The harness: repeat mode runs the program on the same packet buffer again and
 * again, so after each lookup the program records the hop at the cursor's position
 * (the host checks every answer) and writes the next address of the `addrs` (`addrs6`)
 * map into the packet's destination for the next repetition. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "offlow/lpm_bpf.h"

#define FIB_HOP_NET 0xC0000200u   /* 192.0.2.0: gateway 192.0.2.h is hop h */
/* 2001:db8:ffff::/112 (the top 32 bits of its last word: 0): gateway ...::h is hop h */
#define FIB6_HOP_W0 0x20010db8u
#define FIB6_HOP_W1 0xffff0000u

struct cursor {
    __u32 i;   /* the address looked up now */
    __u32 n;   /* addresses in `addrs` */
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

static __always_inline int harness(struct xdp_md *ctx, enum which w)
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    __u32 zero = 0;
    struct cursor *c = bpf_map_lookup_elem(&cursor, &zero);
    if (!c) return XDP_ABORTED;
    __u32 addr = bpf_ntohl(ip->daddr), hop = 0;
    if (w == DIR24) hop = dir24_lookup(addr);
    else if (w == TRIE) hop = trie_lookup(addr);
    else if (w == FIB) hop = fib_lookup(ctx, ip);
    __u32 i = record(c, hop);
    __u32 *next = bpf_map_lookup_elem(&addrs, &i);
    if (next) ip->daddr = *next;
    return XDP_DROP;
}

SEC("xdp")
int xdp_none(struct xdp_md *ctx) { return harness(ctx, NONE); }

SEC("xdp")
int xdp_dir24(struct xdp_md *ctx) { return harness(ctx, DIR24); }

SEC("xdp")
int xdp_trie(struct xdp_md *ctx) { return harness(ctx, TRIE); }

SEC("xdp")
int xdp_fib(struct xdp_md *ctx) { return harness(ctx, FIB); }

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

static __always_inline int harness6(struct xdp_md *ctx, enum which w)
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct ipv6hdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6)) return XDP_PASS;
    __u32 zero = 0;
    struct cursor *c = bpf_map_lookup_elem(&cursor, &zero);
    if (!c) return XDP_ABORTED;
    __u32 hop = 0;
    if (w == DIR24) {
        const struct ofl_lpm6 t = OFL_LPM6_BPF_TABLE(v6);
        hop = ofl_lpm6_lookup(&t, (const __u8 *)&ip->daddr);
    } else if (w == TRIE) {
        hop = trie6_lookup(ip);
    } else if (w == FIB) {
        hop = fib6_lookup(ctx, ip);
    }
    __u32 i = record(c, hop);
    struct addr6 *next = bpf_map_lookup_elem(&addrs6, &i);
    if (next) __builtin_memcpy(&ip->daddr, next->b, 16);
    return XDP_DROP;
}

SEC("xdp")
int xdp_none_6(struct xdp_md *ctx) { return harness6(ctx, NONE); }

SEC("xdp")
int xdp_trie6(struct xdp_md *ctx) { return harness6(ctx, DIR24); }

SEC("xdp")
int xdp_trie_6(struct xdp_md *ctx) { return harness6(ctx, TRIE); }

SEC("xdp")
int xdp_fib_6(struct xdp_md *ctx) { return harness6(ctx, FIB); }

char LICENSE[] SEC("license") = "GPL";
