/* The device's side of the send port: sends cut by PIO or DMA, completions posted. */
#include "offlow/lso_nic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offlow/err.h"

#define DONE_ENTRY (8u + (uint32_t)sizeof(struct ofl_lso_done))
/* Room for an Ethernet header with two VLAN tags before the IP packet. */
#define L2_MAX 22u

int ofl_lso_nic_open(struct ofl_lso_nic **out, const struct ofl_lso_nic_opts *o, char *errbuf)
{
    *out = NULL;
    if (!o->path || !o->path[0]) {
        snprintf(errbuf, 256, "needs path= (the send port's file)");
        return -EINVAL;
    }
    if (o->mtu < 68 || o->mtu > 9216 || o->move < OFL_LSO_PIO || o->move > OFL_LSO_PLACE) {
        snprintf(errbuf, 256, "mtu=%u: the link's IP MTU is 68..9216", o->mtu);
        return -EINVAL;
    }
    struct ofl_lso_nic *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    int rc = ofl_lso_port_attach(&n->p, o->path);
    if (rc < 0) {
        snprintf(errbuf, 256, "%s: %s", o->path,
                 rc == -EINVAL ? "not a send port" : ofl_strerror(rc));
        free(n);
        return rc;
    }
    rc = ofl_ring_attach(&n->done, ofl_window_at(&n->p.win, n->p.hdr->done_off),
                         n->p.hdr->done_len);
    if (rc == 0 && n->done.entry_size != DONE_ENTRY) rc = -EINVAL;
    if (rc < 0) {
        snprintf(errbuf, 256, "%s: its completion FIFO is damaged", o->path);
        ofl_lso_port_detach(&n->p);
        free(n);
        return rc;
    }
    n->lim.mtu = o->mtu;
    n->frame_cap = (o->mtu + L2_MAX + 63) / 64 * 64;
    n->lim.frame_max = n->frame_cap;
    n->move = o->move;
    n->dma_min = o->dma_min;
    n->bufs = aligned_alloc(64, 2ull * OFL_LSO_CHUNK * n->frame_cap);
    if (!n->bufs) {
        ofl_lso_nic_close(n);
        return -ENOMEM;
    }
    for (int k = 0; k < 2; k++) n->ch[k].buf = n->bufs + (size_t)k * OFL_LSO_CHUNK * n->frame_cap;
    if (o->move == OFL_LSO_DMA || o->move == OFL_LSO_AUTO) {
        rc = ofl_ce_start(&n->ce, OFL_CE_THREAD, o->dma_cpu);
        if (rc < 0) {
            snprintf(errbuf, 256, "cannot start the copy engine: %s", ofl_strerror(rc));
            ofl_lso_nic_close(n);
            return rc;
        }
    }
    __atomic_store_n(&n->p.hdr->nic_pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    *out = n;
    return 0;
}

void ofl_lso_nic_close(struct ofl_lso_nic *n)
{
    if (!n) return;
    ofl_ce_stop(&n->ce);
    ofl_lso_port_detach(&n->p);
    free(n->bufs);
    free(n);
}

/* Post the completion of the send in n->cut (its tag) with `status`. */
static void complete(struct ofl_lso_nic *n, int status, uint32_t packets, uint32_t len)
{
    if (ofl_ring_free(&n->done) == 0) {  /* a host that posts beyond its own bound */
        n->done_lost++;
        return;
    }
    uint8_t *slot = ofl_ring_slot(&n->done, 0);
    struct ofl_lso_done d = { .status = status, .tag = n->cut.tag, .packets = packets,
                              .len = len };
    memcpy(slot + 8, &d, sizeof d);
    ofl_ring_commit(&n->done, 1);
}

int ofl_lso_nic_begin(struct ofl_lso_nic *n, const uint8_t *desc, uint32_t dlen,
                      uint32_t frame_max)
{
    if (n->active) complete(n, 0, n->cut.next, n->cut.len);  /* not drained: what it made */
    struct ofl_lso_limits lim = { n->lim.mtu, frame_max < n->frame_cap ? frame_max
                                                                       : n->frame_cap };
    n->sends++;
    n->cur = 0;
    for (int k = 0; k < 2; k++) n->ch[k].n = n->ch[k].i = 0;
    int rc = ofl_lso_begin(&n->cut, desc, dlen, n->p.buf, n->p.buf_len, &lim);
    if (rc < 0) {
        n->refused++;
        n->active = 0;
        complete(n, rc, 0, 0);
        return rc;
    }
    n->active = 1;
    return 0;
}

/* Build the chunk's packets: headers by the core, payloads by the core (PIO) or handed
 * to the engine in one job (DMA). */
static int fill(struct ofl_lso_nic *n, struct ofl_lso_chunk *c)
{
    c->n = c->i = 0;
    c->ready = 0;
    c->job.kind = OFL_CE_BYTES;
    c->job.nseg = 0;
    int pio = n->move == OFL_LSO_PIO || (n->move == OFL_LSO_AUTO && n->cut.unit < n->dma_min);
    while (c->n < OFL_LSO_CHUNK && ofl_lso_left(&n->cut)) {
        uint8_t *out = c->buf + (size_t)c->n * n->frame_cap;
        c->len[c->n] = ofl_lso_next(&n->cut, out, pio ? OFL_LSO_BY_PIO : OFL_LSO_BY_DMA);
        c->kind[c->n] = n->cut.kind;
        c->dma[c->n] = (uint8_t)!pio;
        if (pio) {
            n->pio_bytes += n->cut.slice_len;
        } else if (n->cut.slice_len) {
            c->job.seg[c->job.nseg++] = (struct ofl_ce_seg){
                out + n->cut.slice_dst, n->cut.slice_src, n->cut.slice_len };
            n->dma_bytes += n->cut.slice_len;
        }
        c->n++;
    }
    if (!c->job.nseg) return 0;
    n->dma_jobs++;
    return ofl_ce_submit(&n->ce, &c->job);
}

/* The chunk's payloads have landed: wait for the engine, then the checksums. */
static int land(struct ofl_lso_nic *n, struct ofl_lso_chunk *c)
{
    if (c->job.nseg) {
        int rc = ofl_ce_wait(&n->ce, &c->job, NULL);
        if (rc < 0) return rc;
    }
    for (uint32_t k = 0; k < c->n; k++)
        if (c->dma[k])
            ofl_lso_seal(&n->cut, c->buf + (size_t)k * n->frame_cap, c->len[k], c->kind[k]);
    c->ready = 1;
    return 0;
}

int ofl_lso_nic_next(struct ofl_lso_nic *n, struct ofl_pkt *out, unsigned *kind)
{
    if (!n->active) return 0;
    if (n->move == OFL_LSO_PIO || n->move == OFL_LSO_PLACE) {  /* one packet at a time */
        if (!ofl_lso_left(&n->cut)) {
            n->active = 0;
            complete(n, 0, n->cut.npkts, n->cut.len);
            return 0;
        }
        int place = n->move == OFL_LSO_PLACE && (n->cut.flags & OFL_LSO_HEADROOM);
        uint32_t len = ofl_lso_next(&n->cut, n->bufs, place ? OFL_LSO_IN_PLACE : OFL_LSO_BY_PIO);
        *out = (struct ofl_pkt){ .data = n->cut.frame, .len = len,
                                 .cap = place ? len : n->frame_cap, .ts_ns = 0 };
        *kind = n->cut.kind;
        if (place) n->place_bytes += n->cut.slice_len;
        else n->pio_bytes += n->cut.slice_len;
        n->packets++;
        n->bytes += len;
        return 1;
    }
    for (;;) {
        struct ofl_lso_chunk *c = &n->ch[n->cur], *o = &n->ch[n->cur ^ 1u];
        if (c->i < c->n) {
            if (!c->ready) {
                int rc = land(n, c);
                /* the next chunk's payloads move while this one's packets go out */
                if (rc == 0 && o->i == o->n && ofl_lso_left(&n->cut)) rc = fill(n, o);
                if (rc < 0) return rc;
            }
            uint32_t k = c->i++;
            *out = (struct ofl_pkt){ .data = c->buf + (size_t)k * n->frame_cap,
                                     .len = c->len[k], .cap = n->frame_cap, .ts_ns = 0 };
            *kind = c->kind[k];
            n->packets++;
            n->bytes += c->len[k];
            return 1;
        }
        c->n = c->i = 0;
        if (o->i < o->n) {
            n->cur ^= 1u;
            continue;
        }
        if (ofl_lso_left(&n->cut)) {
            int rc = fill(n, c);
            if (rc < 0) return rc;
            continue;
        }
        n->active = 0;
        complete(n, 0, n->cut.npkts, n->cut.len);
        return 0;
    }
}
