/* The AF_XDP socket of an XDP run's crossing (xdp_xsk.h). */
#include "xdp_xsk.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/if_xdp.h>

int ofl_xsk_open(struct ofl_xsk *s, const char *ifname, uint32_t queue, uint32_t frame,
                 uint32_t ring, int map_fd, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!ring || (ring & (ring - 1))) {
        snprintf(err, errlen, "an AF_XDP ring of %u entries: it takes a power of 2", ring);
        return -EINVAL;
    }
    s->frame = frame;
    s->nframes = 2 * ring;
    size_t size = (size_t)s->nframes * frame;
    s->area = aligned_alloc((size_t)sysconf(_SC_PAGESIZE), size);
    if (!s->area) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    struct xsk_umem_config uc = { .fill_size = s->nframes, .comp_size = 4,
                                  .frame_size = frame, .frame_headroom = 0 };
    int rc = xsk_umem__create(&s->umem, s->area, size, &s->fill, &s->comp, &uc);
    if (rc < 0) {
        snprintf(err, errlen, "cannot make the AF_XDP socket's memory: %s", strerror(-rc));
        s->umem = NULL;
        return rc;
    }
    struct xsk_socket_config sc = { .rx_size = ring, .tx_size = 0,
                                    .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
                                    .bind_flags = XDP_COPY };
    rc = xsk_socket__create(&s->xsk, ifname, queue, s->umem, &s->rx, NULL, &sc);
    if (rc < 0) {
        snprintf(err, errlen, "cannot open an AF_XDP socket on %s queue %u: %s", ifname, queue,
                 strerror(-rc));
        s->xsk = NULL;
        return rc;
    }
    uint32_t at = 0;
    if (xsk_ring_prod__reserve(&s->fill, s->nframes, &at) != s->nframes) {
        snprintf(err, errlen, "the AF_XDP fill ring takes fewer than %u frames", s->nframes);
        return -ENOSPC;
    }
    for (uint32_t i = 0; i < s->nframes; i++)
        *xsk_ring_prod__fill_addr(&s->fill, at + i) = (uint64_t)i * frame;
    xsk_ring_prod__submit(&s->fill, s->nframes);
    int fd = xsk_socket__fd(s->xsk);
    if (bpf_map_update_elem(map_fd, &queue, &fd, BPF_ANY) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot put the AF_XDP socket in the program's XSKMAP: %s",
                 strerror(-rc));
        return rc;
    }
    return 0;
}

unsigned ofl_xsk_take(struct ofl_xsk *s, unsigned max, ofl_xsk_fn *fn, void *arg)
{
    uint32_t at = 0, back = 0;
    unsigned n = xsk_ring_cons__peek(&s->rx, max, &at);
    if (!n) return 0;
    /* (room for every frame taken: the fill ring holds all of them) */
    while (xsk_ring_prod__reserve(&s->fill, n, &back) != n) {}
    for (unsigned i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, at + i);
        uint64_t addr = xsk_umem__extract_addr(d->addr) + xsk_umem__extract_offset(d->addr);
        uint32_t room = (uint32_t)(addr % s->frame);
        fn(arg, s->area + addr, d->len, room);
        *xsk_ring_prod__fill_addr(&s->fill, back + i) = addr - room;
    }
    xsk_ring_cons__release(&s->rx, n);
    xsk_ring_prod__submit(&s->fill, n);
    return n;
}

int ofl_xsk_wait(struct ofl_xsk *s, int ms)
{
    struct pollfd p = { .fd = xsk_socket__fd(s->xsk), .events = POLLIN };
    int rc = poll(&p, 1, ms);
    return rc < 0 ? -errno : rc > 0;
}

uint64_t ofl_xsk_dropped(const struct ofl_xsk *s)
{
    struct xdp_statistics st;
    socklen_t len = sizeof st;
    memset(&st, 0, sizeof st);
    if (!s->xsk || getsockopt(xsk_socket__fd(s->xsk), SOL_XDP, XDP_STATISTICS, &st, &len) < 0)
        return 0;
    return st.rx_dropped + st.rx_ring_full;
}

void ofl_xsk_close(struct ofl_xsk *s)
{
    if (s->xsk) xsk_socket__delete(s->xsk);
    if (s->umem) xsk_umem__delete(s->umem);
    free(s->area);
    memset(s, 0, sizeof *s);
}
