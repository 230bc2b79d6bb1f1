/* The send port: its window, the host side, and the device's descriptor source. */
#include "offlow/lso_port.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "offlow/err.h"

#define PORT_HDR_OFF ((uint64_t)OFL_WINDOW_HDR_SIZE)
#define DONE_ENTRY (8u + (uint32_t)sizeof(struct ofl_lso_done))

static uint64_t up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* A part [off, off + len) lies within a window of `size` bytes, after the header. */
static int part_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off >= PORT_HDR_OFF + sizeof(struct ofl_lso_port_hdr) && off % 64 == 0 &&
           len <= size && off <= size - len;
}

int ofl_lso_port_attach(struct ofl_lso_port *p, const char *path)
{
    memset(p, 0, sizeof *p);
    p->win.fd = -1;
    int rc = ofl_window_open(&p->win, path);
    if (rc < 0) return rc;
    uint64_t size = p->win.size;
    struct ofl_lso_port_hdr *h = ofl_window_at(&p->win, PORT_HDR_OFF);
    if (size < PORT_HDR_OFF + sizeof *h || h->magic != OFL_LSO_PORT_MAGIC ||
        h->version != OFL_LSO_PORT_VERSION || h->half < OFL_LSO_SEND_MAX ||
        !part_ok(h->desc_off, h->desc_len, size) || !part_ok(h->done_off, h->done_len, size) ||
        !part_ok(h->buf_off, 2ull * h->half, size)) {
        ofl_window_close(&p->win);
        return -EINVAL;
    }
    p->hdr = h;
    p->buf = ofl_window_at(&p->win, h->buf_off);
    p->buf_len = 2ull * h->half;
    return 0;
}

void ofl_lso_port_detach(struct ofl_lso_port *p)
{
    ofl_window_close(&p->win);
    p->hdr = NULL;
    p->buf = NULL;
}

/* ---- host ------------------------------------------------------------------------------ */

size_t ofl_lso_host_size(void)
{
    return sizeof(struct ofl_lso_host);
}

int ofl_lso_host_create(struct ofl_lso_host *h, const char *path, uint32_t half,
                        uint32_t entries)
{
    memset(h, 0, sizeof *h);
    h->p.win.fd = -1;
    h->nic_pidfd = -1;
    if (half < OFL_LSO_SEND_MAX || half > (1u << 30) || entries < 2 || entries > (1u << 16) ||
        (entries & (entries - 1)) || strlen(path) >= sizeof h->path)
        return -EINVAL;
    if (half < OFL_LSO_SEND_MAX + OFL_LSO_HEADROOM_BYTES)  /* the largest send fits a half */
        half = OFL_LSO_SEND_MAX + OFL_LSO_HEADROOM_BYTES;
    half = (uint32_t)up(half, 4096);
    uint64_t desc_len = ofl_ring_mem_size(entries, OFL_LSO_DESC_ENTRY);
    uint64_t done_len = ofl_ring_mem_size(2 * entries, DONE_ENTRY);
    uint64_t desc_off = PORT_HDR_OFF + 4096;
    uint64_t done_off = up(desc_off + desc_len, 4096);
    uint64_t buf_off = up(done_off + done_len, 4096);
    uint64_t size = buf_off + 2ull * half;
    h->posted = calloc(2 * entries, 1);
    h->kept = calloc(OFL_LSO_KEEP, sizeof *h->kept);
    if (!h->posted || !h->kept) {
        ofl_lso_host_destroy(h);
        return -ENOMEM;
    }
    int rc = ofl_window_create(&h->p.win, path, size);
    if (rc < 0) {
        ofl_lso_host_destroy(h);
        return rc;
    }
    snprintf(h->path, sizeof h->path, "%s", path);
    struct ofl_lso_port_hdr *ph = ofl_window_at(&h->p.win, PORT_HDR_OFF);
    ph->half = half;
    ph->desc_off = desc_off;
    ph->desc_len = desc_len;
    ph->done_off = done_off;
    ph->done_len = done_len;
    ph->buf_off = buf_off;
    ph->host_pid = (int32_t)getpid();
    rc = ofl_ring_format(ofl_window_at(&h->p.win, desc_off), desc_len, entries,
                         OFL_LSO_DESC_ENTRY, 1, 8);
    if (rc == 0)
        rc = ofl_ring_format(ofl_window_at(&h->p.win, done_off), done_len, 2 * entries,
                             DONE_ENTRY, 1, 0);
    if (rc == 0) rc = ofl_ring_attach(&h->desc, ofl_window_at(&h->p.win, desc_off), desc_len);
    if (rc == 0) rc = ofl_ring_attach(&h->done, ofl_window_at(&h->p.win, done_off), done_len);
    if (rc < 0) {
        ofl_lso_host_destroy(h);
        return rc;
    }
    ph->version = OFL_LSO_PORT_VERSION;
    __atomic_store_n(&ph->magic, OFL_LSO_PORT_MAGIC, __ATOMIC_RELEASE);
    h->p.hdr = ph;
    h->p.buf = ofl_window_at(&h->p.win, buf_off);
    h->p.buf_len = 2ull * half;
    h->cap = 2 * entries;
    return 0;
}

/* Take every completion that arrived: free its half's share, keep it for reap. */
static int drain(struct ofl_lso_host *h)
{
    uint32_t n = ofl_ring_ready(&h->done), i;
    for (i = 0; i < n; i++) {
        const uint8_t *e = ofl_ring_peek(&h->done, i);
        if (!e || h->posted_head == h->posted_tail) break;  /* a bad entry: not ours */
        struct ofl_lso_done d;
        memcpy(&d, e + 8, sizeof d);
        uint8_t half = h->posted[h->posted_head++ % h->cap];
        if (half < 2) h->busy[half]--;
        h->completed++;
        h->packets += d.packets;
        if (d.status) h->refused++;
        if (h->nkept < OFL_LSO_KEEP) h->kept[h->nkept++] = d;
        else h->forgotten++;
    }
    if (i) ofl_ring_release(&h->done, i);
    return i < n ? -EBADMSG : (int)i;
}

/* Wait for `ready(h)`, reaping completions, watching the device process and the FIFO's
 * broken mark (its device failed: -EPIPE at once), up to `timeout_ns` (0: for ever). */
static int wait_for(struct ofl_lso_host *h, int (*ready)(struct ofl_lso_host *),
                    uint64_t timeout_ns)
{
    uint64_t t0 = 0, next_check = 0;
    uint32_t spins = 0;
    for (;;) {
        int rc = drain(h);
        if (rc < 0) return rc;
        if (ofl_ring_broken(&h->desc)) return -EPIPE;   /* nothing posted is taken now */
        if (ready(h)) return 0;
        if (rc > 0) {
            spins = 0;
            continue;
        }
        h->waits++;
        if (spins++ < OFL_WAIT_SPINS) {
            ofl_cpu_relax();
            continue;
        }
        sched_yield();
        uint64_t now = ofl_now_ns();
        if (!t0) t0 = now, next_check = now;
        if (timeout_ns && now - t0 > timeout_ns) return -ETIMEDOUT;
        if (now >= next_check) {
            next_check = now + OFL_WAIT_CHECK_NS;
            pid_t nic = __atomic_load_n(&h->p.hdr->nic_pid, __ATOMIC_ACQUIRE);
            if (nic && !ofl_pid_alive(nic, &h->nic_pidfd)) {
                /* what it posted before it exited still counts */
                rc = drain(h);
                return rc >= 0 && ready(h) ? 0 : -EPIPE;
            }
        }
    }
}

static int room_to_post(struct ofl_lso_host *h)
{
    return h->posted_tail - h->posted_head < h->cap && ofl_ring_free(&h->desc) > 0;
}

static int other_half_free(struct ofl_lso_host *h)
{
    return h->busy[h->fill ^ 1u] == 0;
}

static int all_done(struct ofl_lso_host *h)
{
    return h->posted_head == h->posted_tail;
}

/* Publish the descriptor in slot 0 of the FIFO (`dlen` bytes), sent from `half`. */
static void post(struct ofl_lso_host *h, uint8_t *slot, uint32_t dlen, uint8_t half)
{
    struct ofl_entry_hdr eh = { .seq = 0, .len = (uint16_t)dlen, .flags = 0 };
    memcpy(slot, &eh, sizeof eh);
    h->posted[h->posted_tail++ % h->cap] = half;
    if (half < 2) h->busy[half]++;
    ofl_ring_commit(&h->desc, 1);
}

int ofl_lso_host_send(struct ofl_lso_host *h, const struct ofl_lso_send *s, uint64_t timeout_ns)
{
    if (!s->mss || s->len > OFL_LSO_SEND_MAX || ofl_lso_check_template(s->tmpl, s->tlen) < 0)
        return -EINVAL;
    uint32_t half = h->p.hdr->half;
    uint32_t need = OFL_LSO_HEADROOM_BYTES + s->len;  /* room for headers in place too */
    if (need > half) return -EMSGSIZE;
    int rc = wait_for(h, room_to_post, timeout_ns);
    if (rc < 0) return rc;
    if (h->fill_off + need > half) {  /* this half is full: the other, once it is free */
        rc = wait_for(h, other_half_free, timeout_ns);
        if (rc < 0) return rc;
        h->fill ^= 1u;
        h->fill_off = 0;
    }
    uint32_t off = h->fill * half + h->fill_off + OFL_LSO_HEADROOM_BYTES;
    memcpy(h->p.buf + off, s->payload, s->len);
    h->fill_off += (uint32_t)up(need, 64);
    if (h->fill_off > half) h->fill_off = half;
    uint8_t *slot = ofl_ring_slot(&h->desc, 0);
    struct ofl_lso_desc d = { .off = off, .len = s->len, .mss = s->mss,
                              .flags = (uint16_t)(s->flags | OFL_LSO_HEADROOM),
                              .hdr_len = (uint16_t)s->tlen, .frag_id = s->frag_id,
                              .tag = s->tag };
    memcpy(d.hdr, s->tmpl, s->tlen);
    memcpy(slot + 8, &d, OFL_LSO_DESC_FIXED + s->tlen);
    post(h, slot, OFL_LSO_DESC_FIXED + s->tlen, (uint8_t)h->fill);
    h->sends++;
    h->bytes += s->len;
    return 0;
}

int ofl_lso_host_post_raw(struct ofl_lso_host *h, const void *desc, uint32_t dlen,
                          uint64_t timeout_ns)
{
    if (dlen > sizeof(struct ofl_lso_desc)) return -EMSGSIZE;
    int rc = wait_for(h, room_to_post, timeout_ns);
    if (rc < 0) return rc;
    uint8_t *slot = ofl_ring_slot(&h->desc, 0);
    memcpy(slot + 8, desc, dlen);
    post(h, slot, dlen, 2);
    h->sends++;
    return 0;
}

uint32_t ofl_lso_host_reap(struct ofl_lso_host *h, struct ofl_lso_done *out, uint32_t max)
{
    drain(h);
    uint32_t n = h->nkept < max ? h->nkept : max;
    memcpy(out, h->kept, n * sizeof *out);
    memmove(h->kept, h->kept + n, (h->nkept - n) * sizeof *out);
    h->nkept -= n;
    return n;
}

int ofl_lso_host_finish(struct ofl_lso_host *h, uint64_t timeout_ns)
{
    ofl_ring_close(&h->desc);
    return wait_for(h, all_done, timeout_ns);
}

void ofl_lso_host_destroy(struct ofl_lso_host *h)
{
    if (h->p.win.fd >= 0 || h->p.win.base) {
        ofl_window_close(&h->p.win);
        if (h->path[0]) unlink(h->path);
    }
    if (h->nic_pidfd >= 0) close(h->nic_pidfd);
    h->nic_pidfd = -1;
    free(h->posted);
    free(h->kept);
    h->posted = NULL;
    h->kept = NULL;
    h->path[0] = '\0';
}

/* ---- device: the descriptor source ------------------------------------------------------ */

struct lso_src {
    struct ofl_src base;
    struct ofl_lso_port p;
    struct ofl_ring desc;
    int host_pidfd;
    uint64_t next_check;
};

static int lso_src_next(struct ofl_src *base, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    struct lso_src *s = (struct lso_src *)base;
    uint32_t ready = ofl_ring_ready(&s->desc);
    if (ready == 0) {
        if (ofl_ring_finished(&s->desc)) return OFL_SRC_DONE;
        uint64_t now = ofl_now_ns();
        if (now >= s->next_check) {  /* a host that died without finishing */
            s->next_check = now + OFL_WAIT_CHECK_NS;
            pid_t host = s->p.hdr->host_pid;
            if (!ofl_pid_alive(host, &s->host_pidfd)) {
                if (ofl_ring_ready(&s->desc)) return 0;
                return ofl_ring_finished(&s->desc) ? OFL_SRC_DONE : -EPIPE;
            }
        }
        return 0;
    }
    if (ready > n) ready = n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint32_t got = 0, i;
    for (i = 0; i < ready; i++) {
        const uint8_t *e = ofl_ring_peek(&s->desc, i);
        if (!e) break;
        uint32_t len = ((const struct ofl_entry_hdr *)(const void *)e)->len;
        if (!ofl_entry_len_ok(s->desc.entry_size, s->desc.data_off, len)) {
            /* as corrupt as a wrong seq (it was cut to the entry and sent on): the ring
             * breaks, for its producer, as ofl_ring_peek breaks it */
            ofl_ring_break(&s->desc);
            break;
        }
        if (len > base->o.mtu) {  /* no room for it in a packet buffer: counted */
            base->dropped++;
            continue;
        }
        uint8_t *buf = bufs + (size_t)got * base->o.mtu;
        memcpy(buf, e + 8, len);
        pkts[got++] = (struct ofl_pkt){ .data = buf, .len = len, .cap = base->o.mtu,
                                        .ts_ns = now };
    }
    ofl_ring_release(&s->desc, i);
    if (i < ready && !got) return -EBADMSG;  /* an entry the host did not publish */
    return (int)got;
}

static void lso_src_close(struct ofl_src *base)
{
    struct lso_src *s = (struct lso_src *)base;
    ofl_lso_port_detach(&s->p);
    if (s->host_pidfd >= 0) close(s->host_pidfd);
    free(s);
}

static const struct ofl_src_ops lso_src_ops = { "lso", lso_src_next, lso_src_close };

int ofl_lso_src_open(struct ofl_src **out, const char *path, const struct ofl_src_opts *o,
                     char *errbuf)
{
    *out = NULL;
    if (o->nparts > 1) {
        snprintf(errbuf, 256, "a send port is read by one core, not %u", o->nparts);
        return -EINVAL;
    }
    struct lso_src *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    char name[64];
    snprintf(name, sizeof name, "lso:%.59s", path);
    int rc = ofl_src_init(&s->base, &lso_src_ops, o, name, errbuf);
    if (rc == 0) {
        rc = ofl_lso_port_attach(&s->p, path);
        if (rc < 0)
            snprintf(errbuf, 256, "%s: %s", path,
                     rc == -EINVAL ? "not a send port" : ofl_strerror(rc));
    }
    if (rc == 0) {
        rc = ofl_ring_attach(&s->desc, ofl_window_at(&s->p.win, s->p.hdr->desc_off),
                             s->p.hdr->desc_len);
        if (rc == 0 && s->desc.entry_size != OFL_LSO_DESC_ENTRY) rc = -EINVAL;
        if (rc < 0) {
            snprintf(errbuf, 256, "%s: its descriptor FIFO is damaged", path);
            ofl_lso_port_detach(&s->p);
        }
    }
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->host_pidfd = -1;
    __atomic_store_n(&s->p.hdr->nic_pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    *out = &s->base;
    return 0;
}
