/* The XDP programs of `offlow bench xdp` (benchmarks/xdp.py): three IPv4 route lookups
 * on the packet's destination address, in the same harness, timed by the kernel with
 * BPF_PROG_TEST_RUN in repeat mode (benchmarks/c/bench_xdp.c drives them).
 *
 *   xdp_dir24: offlow's DIR-24-8 (runtime/lib/lpm/lpm4.h) in three array maps filled by
 *              the host from the table offlow built: the /16 directory, the tbl24
 *              blocks (one 256-entry block per map value) and the tbl8 groups;
 *   xdp_trie:  BPF_MAP_TYPE_LPM_TRIE holding the same routes;
 *   xdp_fib:   bpf_fib_lookup over the same routes in the kernel FIB of the driver's
 *              private network namespace (hop h = gateway 192.0.2.h, see xdp_fib.c);
 *   xdp_none:  the harness alone (no lookup): its cost is in every other row.
 *
 * The harness: repeat mode runs the program on the same packet buffer again and
 * again, so after each lookup the program records the hop at the cursor's position
 * (the host checks every answer) and writes the next address of the `addrs` map into
 * the packet's destination for the next repetition. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define LPM4_GROUP 0x8000u   /* OFL_LPM4_GROUP */
#define LPM4_BLOCK 256u      /* OFL_LPM4_BLOCK: entries per tbl24 block and tbl8 group */
#define FIB_HOP_NET 0xC0000200u   /* 192.0.2.0: gateway 192.0.2.h is hop h */

struct cursor {
    __u32 i;   /* the address looked up now */
    __u32 n;   /* addresses in `addrs` */
};

struct block {
    __u16 e[LPM4_BLOCK];
};

struct trie_key {
    __u32 prefixlen;
    __u32 addr;   /* network order */
};

/* (max_entries: set by the host before loading, to the table's size) */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, __u16);
    __uint(max_entries, 65536);
} dir SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct block);
    __uint(max_entries, 1);
} tbl24 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct block);
    __uint(max_entries, 1);
} tbl8 SEC(".maps");

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

/* lpm4.h's ofl_lpm4_lookup over the maps; 0 = no route. */
static __always_inline __u32 dir24_lookup(__u32 addr)
{
    __u32 k = addr >> 16;
    __u16 *b = bpf_map_lookup_elem(&dir, &k);
    if (!b) return 0;
    k = *b;
    struct block *blk = bpf_map_lookup_elem(&tbl24, &k);
    if (!blk) return 0;
    __u16 e = blk->e[addr >> 8 & 0xFF];
    if (!(e & LPM4_GROUP)) return e;
    k = e & ~LPM4_GROUP;
    struct block *grp = bpf_map_lookup_elem(&tbl8, &k);
    return grp ? grp->e[addr & 0xFF] : 0;
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

enum which { NONE, DIR24, TRIE, FIB };

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
    __u32 i = c->i;
    __u32 *h = bpf_map_lookup_elem(&hops, &i);
    if (h) *h = hop;
    i = i + 1 < c->n ? i + 1 : 0;
    c->i = i;
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

char LICENSE[] SEC("license") = "GPL";
