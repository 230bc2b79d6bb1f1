/* The AF_XDP socket of an XDP run's crossing to host segments (offlow/codegen/xsk.py):
 * libxdp's xsk API, copy mode (XDP_COPY: what every driver takes, veth included), one
 * socket on one receive queue of an interface, its frames in memory of its own
 * (umem). The XDP program redirects to it through its XSKMAP, where ofl_xsk_open puts
 * it; libxdp loads no program of its own. */
#ifndef OFL_XDP_XSK_H
#define OFL_XDP_XSK_H

#include <stddef.h>
#include <stdint.h>

#include <xdp/xsk.h>

struct ofl_xsk {
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct xsk_ring_prod fill;
    struct xsk_ring_cons comp, rx;
    uint8_t *area;             /* the umem: nframes frames of `frame` bytes */
    uint32_t frame, nframes;
};

/* Called for each frame taken: its bytes at `data`, `len` of them, with `room` bytes
 * of its umem frame in front of them (where the XDP metadata is). */
typedef void ofl_xsk_fn(void *arg, uint8_t *data, uint32_t len, uint32_t room);

/* Open a socket on receive queue `queue` of interface `ifname` with an RX ring of
 * `ring` entries (a power of 2) and twice as many umem frames of `frame` bytes, all
 * given to the kernel, and put it in XSKMAP `map_fd` at `queue`. Returns 0, or a
 * negative errno with a message in `err`. */
int ofl_xsk_open(struct ofl_xsk *s, const char *ifname, uint32_t queue, uint32_t frame,
                 uint32_t ring, int map_fd, char *err, size_t errlen);

/* Take up to `max` frames that arrived, each through `fn`, then give their umem frames
 * back to the kernel. Returns how many. */
unsigned ofl_xsk_take(struct ofl_xsk *s, unsigned max, ofl_xsk_fn *fn, void *arg);

/* Wait up to `ms` milliseconds for a frame to arrive: 1 when one has, 0 when none,
 * or a negative errno. */
int ofl_xsk_wait(struct ofl_xsk *s, int ms);

/* Frames the kernel could not give the socket (its RX ring full, or no free umem
 * frame): XDP_STATISTICS' rx_dropped plus rx_ring_full. */
uint64_t ofl_xsk_dropped(const struct ofl_xsk *s);

/* Close the socket and free its memory (nothing when it was not opened). */
void ofl_xsk_close(struct ofl_xsk *s);

#endif
