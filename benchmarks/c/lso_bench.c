/* What both programs of `offlow bench lso` share: see lso_bench.h. */
#include "lso_bench.h"

#include <errno.h>
#include <pcap/pcap.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "offlow/err.h"
#include "offlow/thread.h"

double lso_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void lso_pin(int cpu)
{
    if (cpu >= 0) ofl_pin_self(cpu);
}

void lso_load(const char *path, struct lso_sends *s)
{
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(path, err);
    if (!p) {
        fprintf(stderr, "%s: %s\n", path, err);
        exit(1);
    }
    uint32_t cap = 64;
    s->n = 0;
    s->frame = malloc(cap * sizeof *s->frame);
    s->len = malloc(cap * sizeof *s->len);
    struct pcap_pkthdr *h;
    const u_char *d;
    int rc;
    while ((rc = pcap_next_ex(p, &h, &d)) == 1) {
        if (s->n == cap) {
            cap *= 2;
            s->frame = realloc(s->frame, cap * sizeof *s->frame);
            s->len = realloc(s->len, cap * sizeof *s->len);
        }
        s->frame[s->n] = malloc(h->caplen);
        memcpy(s->frame[s->n], d, h->caplen);
        s->len[s->n++] = h->caplen;
    }
    pcap_close(p);
    if (rc != PCAP_ERROR_BREAK || s->n == 0) {
        fprintf(stderr, "%s: no sends read\n", path);
        exit(1);
    }
}

void lso_ours_init(struct lso_ours *o, const struct lso_sends *s, uint32_t mtu, int move,
                   int offload, int dma_cpu)
{
    memset(o, 0, sizeof *o);
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->n; i++)
        total += (OFL_LSO_HEADROOM_BYTES + s->len[i] + 63) / 64 * 64;
    uint64_t half = total / 2 + OFL_LSO_SEND_MAX;
    snprintf(o->path, sizeof o->path, "/dev/shm/offlow-bench-lso-%d", (int)getpid());
    unlink(o->path);
    int rc = ofl_lso_host_create(&o->host, o->path, (uint32_t)half, 2);
    if (rc < 0) {
        fprintf(stderr, "send port: %s\n", ofl_strerror(rc));
        exit(1);
    }
    char errbuf[256] = "";
    struct ofl_lso_nic_opts no = { .path = o->path, .mtu = mtu, .move = move,
                                   .dma_min = 0, .dma_cpu = dma_cpu };
    rc = ofl_lso_nic_open(&o->nic, &no, errbuf);
    if (rc < 0) {
        fprintf(stderr, "device side: %s\n", errbuf);
        exit(1);
    }
    o->desc = calloc(s->n, sizeof *o->desc);
    o->dlen = calloc(s->n, sizeof *o->dlen);
    uint64_t off = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t hl, len;
        if (ofl_lso_split(s->frame[i], s->len[i], &hl, &len) < 0) {
            fprintf(stderr, "send %u is not one (lso.h's template rules)\n", i);
            exit(1);
        }
        struct ofl_lso_desc *d = &o->desc[o->n];
        off += OFL_LSO_HEADROOM_BYTES;  /* as the host leaves it */
        d->off = (uint32_t)off;
        d->len = len;
        d->mss = (uint16_t)ofl_lso_mss_for(s->frame[i], hl, mtu);
        d->flags = (uint16_t)((offload ? OFL_LSO_CSUM_OFFLOAD : 0) | OFL_LSO_HEADROOM);
        d->hdr_len = (uint16_t)hl;
        d->frag_id = i;
        d->tag = i;
        memcpy(d->hdr, s->frame[i], hl);
        memcpy(o->host.p.buf + off, s->frame[i] + hl, len);
        o->dlen[o->n++] = OFL_LSO_DESC_FIXED + hl;
        off += (len + 63) / 64 * 64;
    }
}

uint64_t lso_ours_pass(struct lso_ours *o, uint64_t *bytes, uint64_t *kinds,
                       void (*out)(void *arg, const uint8_t *p, uint32_t len), void *arg)
{
    uint64_t pkts = 0, b = 0;
    for (uint32_t i = 0; i < o->n; i++) {
        if (ofl_lso_nic_begin(o->nic, (const uint8_t *)&o->desc[i], o->dlen[i], 65535) < 0) {
            fprintf(stderr, "send %u refused\n", i);
            exit(1);
        }
        struct ofl_pkt p;
        unsigned kind;
        while (ofl_lso_nic_next(o->nic, &p, &kind) > 0) {
            pkts++;
            b += p.len;
            if (kinds) kinds[(o->nic->cut.tcp ? 0u : OFL_LSO_KINDS) + kind]++;
            if (out) out(arg, p.data, p.len);
        }
    }
    /* no host posted these descriptors: release their completions unread */
    ofl_ring_release(&o->host.done, ofl_ring_ready(&o->host.done));
    *bytes += b;
    return pkts;
}

void lso_ours_fini(struct lso_ours *o)
{
    ofl_lso_nic_close(o->nic);
    ofl_lso_host_destroy(&o->host);
    free(o->desc);
    free(o->dlen);
}
