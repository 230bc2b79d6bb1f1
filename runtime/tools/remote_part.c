/* What the two ends of a remote device's run share (remote_part.h). */
#include "remote_part.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/ring.h"

int part_bridge(struct part *p, const char *dirs, uint32_t nrings, bool device, char *err,
                size_t errlen)
{
    int rc = ofl_bridge_init(&p->bridge, p->link, 64);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the ring bridge: out of memory");
        return rc;
    }
    size_t off = OFL_WINDOW_HDR_SIZE;
    for (uint32_t i = 0; i < nrings; i++) {
        if (off + sizeof(struct ofl_ring_shm) > p->win.size) {
            snprintf(err, errlen, "ring %u lies beyond the window", i);
            return -EINVAL;
        }
        const struct ofl_ring_shm *s = ofl_window_at(&p->win, off);
        size_t len = ofl_ring_mem_size(s->size, s->entry_size);
        if (s->magic != OFL_RING_MAGIC || !len || len > p->win.size - off) {
            snprintf(err, errlen, "ring %u at offset %zu is not a ring", i, off);
            return -EINVAL;
        }
        if (dirs[i] != '-') {
            bool out = (dirs[i] == 'o') == device;
            rc = ofl_bridge_add(&p->bridge, ofl_window_at(&p->win, off), len, out);
            if (rc < 0) {
                snprintf(err, errlen, "cannot carry ring %u (%d)", i, rc);
                return rc;
            }
        }
        off += len;
    }
    p->bridging = true;
    return 0;
}

int part_chans(struct part *p, const uint32_t *ids, uint32_t n, int side, char *err,
               size_t errlen)
{
    if (!n) return 0;
    struct ofl_window_hdr *h = (void *)p->win.base;
    void *region = h->chan_off && h->chan_off < p->win.size ? ofl_window_at(&p->win, h->chan_off)
                                                           : NULL;
    for (uint32_t i = 0; i < n; i++)
        if (!region || !ofl_chan_name(region, ids[i])) {
            snprintf(err, errlen, "channel %u is not in the window", ids[i]);
            return -EINVAL;
        }
    int rc = part_chans_start(&p->chans, p->link, region, side, ids, n, &h->abort);
    p->chans_on = true;   /* (stopped with the part, started or not) */
    if (rc < 0) snprintf(err, errlen, "cannot carry the channels: %s", p->chans.err);
    return rc;
}

static struct part_flags read_flags(const struct part *p)
{
    const struct ofl_window_hdr *h = (const void *)p->win.base;
    return (struct part_flags){__atomic_load_n(&h->abort, __ATOMIC_ACQUIRE),
                               __atomic_load_n(&h->stop, __ATOMIC_ACQUIRE),
                               __atomic_load_n(&h->drained, __ATOMIC_ACQUIRE),
                               __atomic_load_n(&h->stats_req, __ATOMIC_ACQUIRE)};
}

int part_flags_send(struct part *p)
{
    if (!p->win.base) return 0;
    struct part_flags f = read_flags(p);
    if (!memcmp(&f, &p->sent, sizeof f)) return 0;
    int rc = ofl_link_send(p->link, PART_FLAGS, &f, sizeof f, NULL, 0);
    if (!rc) p->sent = f;
    return rc;
}

void part_flags_take(struct part *p, const struct part_flags *f, bool device)
{
    struct ofl_window_hdr *h = (void *)p->win.base;
    if (!h) return;
    /* what is raised here because it was raised there is not sent back */
    if (f->abort && !__atomic_load_n(&h->abort, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&h->abort, f->abort, __ATOMIC_RELEASE);
        p->sent.abort = f->abort;
    }
    if (f->stop && !__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&h->stop, f->stop, __ATOMIC_RELEASE);
        p->sent.stop = f->stop;
    }
    if (device && f->stats_req != p->got.stats_req) {
        __atomic_store_n(&h->stats_req, f->stats_req, __ATOMIC_RELEASE);
        p->sent.stats_req = f->stats_req;
    }
    if (!device && f->drained != p->got.drained) {
        uint32_t d = __atomic_add_fetch(&h->drained, f->drained - p->got.drained,
                                        __ATOMIC_ACQ_REL);
        p->sent.drained = d;
    }
    p->got = *f;
}

bool part_aborted(const struct part *p)
{
    const struct ofl_window_hdr *h = (const void *)p->win.base;
    return h && __atomic_load_n(&h->abort, __ATOMIC_ACQUIRE);
}

uint64_t part_undelivered(const struct part *p)
{
    return p->bridging ? ofl_bridge_undelivered(&p->bridge) : 0;
}

struct part_drops part_end(struct part *p, bool ended, bool consumers_gone)
{
    if (p->chans_on) {
        part_chans_drain(&p->chans);
        part_chans_stop(&p->chans);
        p->chans_on = false;
    }
    const struct part_chans *c = &p->chans;
    uint64_t untaken = p->bridging && (ended || consumers_gone)
                           ? ofl_bridge_untaken(&p->bridge, consumers_gone) : 0;
    return (struct part_drops){part_undelivered(p),
                               p->bridging ? ofl_bridge_unsent(&p->bridge) : 0,
                               c->dropped + c->peer_closed + c->stop_unhanded + c->untaken,
                               c->stop_unsent,
                               p->link ? ofl_link_lost_sends(p->link) : 0,
                               p->bridging ? p->bridge.dropped_in : 0,
                               untaken};
}

void part_idle(struct part *p, int moved)
{
    if (moved > 0) {
        p->idle = 0;
        return;
    }
    if (p->idle < UINT32_MAX) p->idle++;
    if (p->idle < 256) return;
    if (p->idle < 4096) {
        sched_yield();
        return;
    }
    /* naps from 20 us, growing with the idleness up to 1 ms (ofl_wait's longest): a
     * serve-device waiting for its next run held a fifth of a CPU with 20 us naps */
    uint64_t nap = 20000ull * (1 + (p->idle - 4096) / 1024);
    if (nap > 1000000ull) nap = 1000000ull;
    struct timespec ts = {0, (long)nap};
    nanosleep(&ts, NULL);
}

bool part_fd_gone(int fd)
{
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int n = poll(&pf, 1, 0);
    return n < 0 ? errno != EINTR : n > 0 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL));
}

uint8_t *part_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            uint8_t *more = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!more) break;
            buf = more;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            bool ok = !ferror(f);
            fclose(f);
            if (ok) {
                *len = n;
                return buf;
            }
            free(buf);
            return NULL;
        }
    }
    fclose(f);
    free(buf);
    return NULL;
}

size_t part_take_secret(uint8_t key[OFL_AUTH_SECRET_MAX])
{
    const char *secret = getenv("OFFLOW_REMOTE_SECRET");
    if (!secret) return 0;
    size_t n = strlen(secret) < OFL_AUTH_SECRET_MAX ? strlen(secret) : OFL_AUTH_SECRET_MAX;
    memcpy(key, secret, n);
    unsetenv("OFFLOW_REMOTE_SECRET");
    return n;
}

void part_on_stop(void (*fn)(int))
{
    struct sigaction sa = {.sa_handler = fn};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}
