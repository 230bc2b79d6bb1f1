/* Source and sink kind "afpacket" through libpcap's live capture (offlow/live_port.h). */
#include "offlow/live_port.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* An activated, non-blocking handle on `iface`; NULL with the reason in `errbuf`. */
static pcap_t *live_open(const char *iface, int snaplen, char *errbuf)
{
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_create(iface, perr);
    if (!p) {
        snprintf(errbuf, 256, "interface %.64s: %.160s", iface, perr);
        return NULL;
    }
    pcap_set_snaplen(p, snaplen);
    pcap_set_promisc(p, 1);
    pcap_set_immediate_mode(p, 1);
    pcap_set_buffer_size(p, 8 << 20);
    int rc = pcap_activate(p);
    if (rc < 0) {  /* PCAP_ERROR_NO_SUCH_DEVICE, _PERM_DENIED, ... */
        snprintf(errbuf, 256, "interface %.64s: %.160s", iface,
                 rc == PCAP_ERROR ? pcap_geterr(p) : pcap_statustostr(rc));
        pcap_close(p);
        return NULL;
    }
    if (pcap_setnonblock(p, 1, perr) < 0) {
        snprintf(errbuf, 256, "interface %.64s: %.160s", iface, perr);
        pcap_close(p);
        return NULL;
    }
    return p;
}

/* ---- source ------------------------------------------------------------------------ */

struct live_src {
    struct ofl_src s;
    pcap_t *p;
};

struct fill {
    struct live_src *l;
    struct ofl_pkt *pkts;
    uint8_t *bufs;
    uint32_t k;
};

static void take(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
    struct fill *f = (struct fill *)user;
    struct ofl_src *s = &f->l->s;
    if (h->caplen < h->len || h->len > s->o.mtu) {  /* cut short by the snap length */
        s->dropped++;
        return;
    }
    uint8_t *dst = f->bufs + (size_t)f->k * s->o.mtu;
    memcpy(dst, bytes, h->len);
    f->pkts[f->k++] = (struct ofl_pkt){ dst, h->len, s->o.mtu,
                                        (uint64_t)h->ts.tv_sec * 1000000000ull
                                            + (uint64_t)h->ts.tv_usec * 1000ull, 0 };
}

static int live_next(struct ofl_src *s, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    struct live_src *l = (struct live_src *)s;
    struct fill f = { l, pkts, bufs, 0 };
    int rc = pcap_dispatch(l->p, (int)n, take, (u_char *)&f);
    if (rc == PCAP_ERROR) {
        snprintf(s->error, sizeof s->error, "%.200s", pcap_geterr(l->p));
        return -EIO;
    }
    /* Idle: read what the kernel dropped (a syscall, so only then). */
    struct pcap_stat st;
    if (f.k == 0 && pcap_stats(l->p, &st) == 0) s->missed = st.ps_drop;
    return (int)f.k;
}

static void live_close(struct ofl_src *s)
{
    pcap_close(((struct live_src *)s)->p);
    free(s);
}

static const struct ofl_src_ops live_src_ops = { "afpacket", live_next, live_close };

int ofl_live_src_open(struct ofl_src **s, const char *iface, const struct ofl_src_opts *o,
                      char *errbuf)
{
    struct live_src *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    int rc = ofl_src_init(&l->s, &live_src_ops, o, iface, errbuf);
    if (rc < 0) goto fail;
    rc = -ENODEV;
    /* One byte more than the mtu: a longer frame shows as cut, and is counted. */
    if (!(l->p = live_open(iface, (int)l->s.o.mtu + 1, errbuf))) goto fail;
    if (pcap_setdirection(l->p, PCAP_D_IN) < 0) {
        snprintf(errbuf, 256, "interface %.64s: %.160s", iface, pcap_geterr(l->p));
        goto fail;
    }
    if (l->s.o.nparts > 1) {
        /* the group id: this process and the interface (other runs have theirs) */
        int id = (int)((unsigned)getpid() & 0xffff);
        int arg = id | (PACKET_FANOUT_HASH << 16);
        if (setsockopt(pcap_fileno(l->p), SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) < 0) {
            snprintf(errbuf, 256, "interface %.64s: cannot spread over %u cores: %s", iface,
                     l->s.o.nparts, strerror(errno));
            rc = -errno;
            goto fail;
        }
    }
    *s = &l->s;
    return 0;
fail:
    if (l->p) pcap_close(l->p);
    free(l);
    return rc;
}

/* ---- sink -------------------------------------------------------------------------- */

struct live_sink {
    struct ofl_port_sink k;
    pcap_t *p;
    uint64_t dropped;  /* atomically: the cores share the socket */
};

static void sink_write(struct ofl_port_sink *k, unsigned core, const struct ofl_pkt *p)
{
    (void)core;
    struct live_sink *l = (struct live_sink *)k;
    if (pcap_inject(l->p, p->data, p->len) != (int)p->len)
        __atomic_fetch_add(&l->dropped, 1, __ATOMIC_RELAXED);
}

static void sink_flush(struct ofl_port_sink *k, unsigned core)
{
    (void)k, (void)core;
}

static uint64_t sink_dropped(const struct ofl_port_sink *k)
{
    return __atomic_load_n(&((const struct live_sink *)k)->dropped, __ATOMIC_RELAXED);
}

static void sink_close(struct ofl_port_sink *k)
{
    pcap_close(((struct live_sink *)k)->p);
    free(k);
}

static const struct ofl_port_sink_ops live_sink_ops = { sink_write, sink_flush, sink_dropped,
                                                        sink_close, NULL };

int ofl_live_sink_open(struct ofl_port_sink **k, const char *iface, unsigned ncores,
                       char *errbuf)
{
    (void)ncores;
    struct live_sink *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    if (!(l->p = live_open(iface, 64, errbuf))) {
        free(l);
        return -ENODEV;
    }
    l->k.ops = &live_sink_ops;
    *k = &l->k;
    return 0;
}
