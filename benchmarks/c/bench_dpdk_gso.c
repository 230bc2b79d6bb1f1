/* DPDK's side of `offlow bench lso`: DPDK 22.11's generic segmentation offload
 * (rte_gso_segment) on the same sends as offlow's segmentation (lso_bench.c), in one
 * process pinned to one core, repetitions taking turns.
 *
 * usage: bench_dpdk_gso rate SENDS MTU OFFLOAD MOVE REPS MIN_TIME CPU
 *        bench_dpdk_gso dump SENDS MTU OUT
 *   SENDS    a capture whose frames each carry a whole TCP/IPv4 or UDP/IPv4 send
 *            (rte_gso in DPDK 22.11 segments no IPv6)
 *   MTU      the link's IP MTU: gso_size is the headers plus the MSS offlow's cut uses
 *            (UDP: fragments of (mss + 8) rounded down to 8 bytes), so both cut the same
 *   OFFLOAD  1: no checksums (rte_gso leaves them to the NIC's offload, as offlow's
 *            offload mode does); 0: computed in software after rte_gso, as an
 *            application without checksum offload must (rte_ipv4_cksum per packet,
 *            rte_ipv4_udptcp_cksum_mbuf per TCP segment, the UDP datagram's checksum
 *            once before it is fragmented), beside offlow's compute mode
 *   MOVE     how offlow's side moves payloads: pio (copied into the device's packet
 *            buffers) or place (headers written in place before each payload in the
 *            send buffer: no copy, as rte_gso's indirect mbufs make none)
 *   rate     REPS repetitions per side, alternating; each as many passes over the sends
 *            as take MIN_TIME seconds (from a warm-up pass of each side)
 *   dump     rte_gso's packets of every send (checksums computed) into the pcap OUT
 * rte_gso's packets are two-mbuf chains (a copy of the headers, an indirect mbuf on the
 * input's payload); a pass frees them as a transmit would. Prints one JSON object.
 * EAL: --no-huge, --no-pci, --no-telemetry, --no-shconf, one lcore. */
/* rte_ipv4_udptcp_cksum_mbuf is experimental in 22.11 */
#define ALLOW_EXPERIMENTAL_API 1

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_version.h>

#include "lso_bench.h"

#define MAX_SEGS 1024

struct gso_send {
    struct rte_mbuf *m;
    uint16_t gso_size;
    uint16_t l2, l3, l4;
    int tcp;
};

struct gso_side {
    struct gso_send *s;
    uint32_t n;
    struct rte_gso_ctx ctx;
    int offload;
};

static void setup(struct gso_side *g, const struct lso_sends *s, uint32_t mtu, int offload)
{
    struct rte_mempool *in = rte_pktmbuf_pool_create("in", s->n + 1, 0, 0, UINT16_MAX,
                                                     (int)rte_socket_id());
    struct rte_mempool *direct = rte_pktmbuf_pool_create("direct", 8191, 256, 0,
                                                         RTE_MBUF_DEFAULT_BUF_SIZE,
                                                         (int)rte_socket_id());
    struct rte_mempool *indirect = rte_pktmbuf_pool_create("indirect", 8191, 256, 0, 0,
                                                           (int)rte_socket_id());
    if (!in || !direct || !indirect) {
        fprintf(stderr, "mempools: %s\n", rte_strerror(rte_errno));
        exit(1);
    }
    g->s = calloc(s->n, sizeof *g->s);
    g->offload = offload;
    g->ctx = (struct rte_gso_ctx){ .direct_pool = direct, .indirect_pool = indirect,
                                   .flag = 0,
                                   .gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO |
                                                RTE_ETH_TX_OFFLOAD_UDP_TSO };
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t hl, len;
        const uint8_t *f = s->frame[i];
        if (ofl_lso_split(f, s->len[i], &hl, &len) < 0 || ofl_get_be16(f + 12) != 0x0800) {
            fprintf(stderr, "send %u: not a TCP/IPv4 or UDP/IPv4 send\n", i);
            exit(1);
        }
        struct gso_send *x = &g->s[g->n++];
        x->l2 = 14;
        x->l3 = (uint16_t)((f[14] & 0x0F) * 4);
        x->tcp = f[14 + 9] == 6;
        x->l4 = (uint16_t)(hl - x->l2 - x->l3);
        uint32_t mss = ofl_lso_mss_for(f, hl, mtu);
        x->gso_size = (uint16_t)(x->tcp ? hl + mss : x->l2 + x->l3 + ((mss + 8) & ~7u));
        x->m = rte_pktmbuf_alloc(in);
        char *d = x->m ? rte_pktmbuf_append(x->m, (uint16_t)(hl + len)) : NULL;
        if (!d) {
            fprintf(stderr, "send %u: no mbuf\n", i);
            exit(1);
        }
        memcpy(d, f, hl + len);
        x->m->l2_len = x->l2;
        x->m->l3_len = x->l3;
        x->m->l4_len = x->l4;
    }
}

/* rte_gso on send x: the packets in out; their count (the input itself when it fits). */
static int segment(struct gso_side *g, struct gso_send *x, struct rte_mbuf **out)
{
    struct rte_mbuf *m = x->m;
    m->ol_flags = RTE_MBUF_F_TX_IPV4 | (x->tcp ? RTE_MBUF_F_TX_TCP_SEG : RTE_MBUF_F_TX_UDP_SEG);
    struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, x->l2);
    if (!g->offload && !x->tcp) {  /* the datagram's checksum, before it is fragmented */
        struct rte_udp_hdr *u = (struct rte_udp_hdr *)((uint8_t *)ip + x->l3);
        u->dgram_cksum = 0;
        u->dgram_cksum = rte_ipv4_udptcp_cksum(ip, u);
    }
    g->ctx.gso_size = x->gso_size;
    int n = rte_gso_segment(m, &g->ctx, out, MAX_SEGS);
    if (n < 0) {
        fprintf(stderr, "rte_gso_segment: %s\n", rte_strerror(-n));
        exit(1);
    }
    if (n == 0) {  /* fits one packet: it goes as it is */
        out[0] = m;
        n = 1;
    }
    if (!g->offload) {
        for (int k = 0; k < n; k++) {
            struct rte_ipv4_hdr *h = rte_pktmbuf_mtod_offset(out[k], struct rte_ipv4_hdr *,
                                                             x->l2);
            h->hdr_checksum = 0;
            h->hdr_checksum = rte_ipv4_cksum(h);
            if (x->tcp) {
                struct rte_tcp_hdr *t = (struct rte_tcp_hdr *)((uint8_t *)h + x->l3);
                t->cksum = 0;
                t->cksum = rte_ipv4_udptcp_cksum_mbuf(out[k], h, (uint16_t)(x->l2 + x->l3));
            }
        }
    }
    return n;
}

static uint64_t gso_pass(struct gso_side *g, uint64_t *bytes)
{
    struct rte_mbuf *out[MAX_SEGS];
    uint64_t pkts = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        int n = segment(g, &g->s[i], out);
        for (int k = 0; k < n; k++) *bytes += out[k]->pkt_len;
        pkts += (uint64_t)n;
        if (out[0] != g->s[i].m) rte_pktmbuf_free_bulk(out, (unsigned)n);
    }
    return pkts;
}

static void dump(struct gso_side *g, const char *path)
{
    pcap_t *p = pcap_open_dead(DLT_EN10MB, 262144);
    pcap_dumper_t *d = pcap_dump_open(p, path);
    if (!d) {
        fprintf(stderr, "%s: %s\n", path, pcap_geterr(p));
        exit(1);
    }
    static uint8_t buf[65536];
    struct rte_mbuf *out[MAX_SEGS];
    uint64_t pkts = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        int n = segment(g, &g->s[i], out);
        for (int k = 0; k < n; k++) {
            const void *b = rte_pktmbuf_read(out[k], 0, out[k]->pkt_len, buf);
            struct pcap_pkthdr h = { .caplen = out[k]->pkt_len, .len = out[k]->pkt_len };
            pcap_dump((u_char *)d, &h, b);
        }
        pkts += (uint64_t)n;
        if (out[0] != g->s[i].m) rte_pktmbuf_free_bulk(out, (unsigned)n);
    }
    pcap_dump_close(d);
    pcap_close(p);
    printf("{\"sends\": %u, \"packets\": %llu, \"version\": \"%s\"}\n", g->n,
           (unsigned long long)pkts, rte_version());
}

static unsigned passes_for(double t, double min_time)
{
    return t > 0 ? (unsigned)(min_time / t) + 1 : 1;
}

int main(int argc, char **argv)
{
    int rate = argc == 9 && !strcmp(argv[1], "rate");
    if (!rate && !(argc == 5 && !strcmp(argv[1], "dump"))) {
        fprintf(stderr, "usage: bench_dpdk_gso rate SENDS MTU OFFLOAD MOVE REPS MIN_TIME CPU\n"
                        "       bench_dpdk_gso dump SENDS MTU OUT\n");
        return 2;
    }
    struct lso_sends s;
    lso_load(argv[2], &s);
    uint32_t mtu = (uint32_t)atoi(argv[3]);
    int offload = rate ? atoi(argv[4]) : 0;
    char lcore[32], prefix[64];
    snprintf(lcore, sizeof lcore, "%d", rate ? atoi(argv[8]) : 0);
    snprintf(prefix, sizeof prefix, "offlow-bench-%d", (int)getpid());
    char *eal[] = {"bench_dpdk_gso", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
                   "--no-shconf", "--file-prefix", prefix, "-l", lcore, "--log-level=error",
                   NULL};
    if (rte_eal_init((int)(sizeof eal / sizeof eal[0]) - 1, eal) < 0) {
        fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    struct gso_side g;
    setup(&g, &s, mtu, offload);
    if (!rate) {
        dump(&g, argv[4]);
        rte_eal_cleanup();
        return 0;
    }
    struct lso_ours o;
    int move = !strcmp(argv[5], "place") ? OFL_LSO_PLACE : OFL_LSO_PIO;
    lso_ours_init(&o, &s, mtu, move, offload, -1);
    int reps = atoi(argv[6]);
    double min_time = atof(argv[7]);
    uint64_t b0 = 0, b1 = 0;
    double t = lso_now();
    uint64_t ours_pkts = lso_ours_pass(&o, &b0, NULL, NULL, NULL);
    unsigned po = passes_for(lso_now() - t, min_time);
    t = lso_now();
    uint64_t gso_pkts = gso_pass(&g, &b1);
    unsigned pg = passes_for(lso_now() - t, min_time);
    printf("{\"version\": \"%s\", \"sends\": %u, \"packets\": {\"offlow\": %llu, "
           "\"rte_gso\": %llu}, \"bytes\": {\"offlow\": %llu, \"rte_gso\": %llu}, "
           "\"passes\": {\"offlow\": %u, \"rte_gso\": %u}, \"reps\": [",
           rte_version(), g.n, (unsigned long long)ours_pkts, (unsigned long long)gso_pkts,
           (unsigned long long)b0, (unsigned long long)b1, po, pg);
    for (int r = 0; r < reps; r++) {
        uint64_t bo = 0, bg = 0, no = 0, ng = 0;
        double t0 = lso_now();
        for (unsigned k = 0; k < po; k++) no += lso_ours_pass(&o, &bo, NULL, NULL, NULL);
        double t1 = lso_now();
        for (unsigned k = 0; k < pg; k++) ng += gso_pass(&g, &bg);
        double t2 = lso_now();
        printf("%s{\"offlow\": [%.6g, %.6g], \"rte_gso\": [%.6g, %.6g]}", r ? ", " : "",
               (double)no / (t1 - t0), (double)bo * 8 / (t1 - t0), (double)ng / (t2 - t1),
               (double)bg * 8 / (t2 - t1));
    }
    printf("]}\n");
    lso_ours_fini(&o);
    rte_eal_cleanup();
    return 0;
}
