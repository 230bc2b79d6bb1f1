/* The host side of an XDP program's crossing to segments on other devices
 * (offlow/codegen/xsk.py): the frames the program redirects to the AF_XDP socket
 * (xdp_xsk.h), each with its live fields in the XDP metadata in front of it, are
 * pushed into their queues' rings in the run's window by the generated `up`
 * function, where the consumer segment takes them as it takes the NIC's. One core of
 * its own (struct ofl_core of gen.h) drives the rings: its copy engine and waiter. */
#ifndef OFL_XDP_CROSS_H
#define OFL_XDP_CROSS_H

#include <stdint.h>

#include "offlow/gen.h"
#include "xdp_run.h"
#include "xdp_xsk.h"

struct ofl_xdp_cross {
    const struct ofl_xdp_desc *d;
    const struct ofl_args *a;  /* the run's options (for ofl_start_failf) */
    struct ofl_window win;
    struct ofl_xsk xsk;
    uint64_t taken;        /* frames taken from the socket */
    uint64_t bad_meta;     /* of them, frames whose metadata was no crossing's */
    uint64_t ts_ns;        /* the timestamp the frames taken now get */
};

/* Open the run's window (a->window) and the producer ends of the queues' rings in
 * it. Returns 0 or a negative errno (said: ofl_start_failf; `a` is kept for
 * ofl_xdp_cross_socket's). */
int ofl_xdp_cross_open(struct ofl_xdp_cross *x, const struct ofl_xdp_desc *d,
                       const struct ofl_args *a);

/* The window's abort word (for the lifeline), once open. */
volatile uint32_t *ofl_xdp_cross_abort(struct ofl_xdp_cross *x);

/* Open the AF_XDP socket on queue 0 of `ifname` with an RX ring of `ring` entries and
 * put it in the program's XSKMAP `map_fd`. Returns 0 or a negative errno (said:
 * ofl_start_failf). */
int ofl_xdp_cross_socket(struct ofl_xdp_cross *x, const char *ifname, uint32_t ring,
                         int map_fd);

/* Take every frame that has arrived, then ring the queues' doorbells. Returns how many
 * were taken, or the core's error (a ring that failed). */
int ofl_xdp_cross_poll(struct ofl_xdp_cross *x);

/* Take frames until `up` of them (what the program sent up so far) are taken or
 * counted as dropped by the kernel, waiting at most `wait_ns`; then ring the
 * doorbells. Returns 0, -ETIMEDOUT, or the core's error. */
int ofl_xdp_cross_drain(struct ofl_xdp_cross *x, uint64_t up, uint64_t wait_ns);

/* End the queues: closed (the consumers see their end), or on `failed` the run
 * aborted through the window. Returns 0 or a negative errno. */
int ofl_xdp_cross_end(struct ofl_xdp_cross *x, int failed);

/* The stats' "queues" and "instances" arrays of the core: each ring's producer side,
 * and each instance's packets pushed and dropped with why: the XDP side's reasons
 * (`xdp_why`: per crossing, desc->ncross_why counts, its counters in the program),
 * the socket's (a full AF_XDP ring, afxdp_full) and the metadata's (bad_meta), the
 * last two on the first queue's instance 0. */
void ofl_xdp_cross_report(struct ofl_xdp_cross *x, struct ofl_json *j, const uint64_t *xdp_why);

/* Free it all (the window unmapped; the socket closed). */
void ofl_xdp_cross_close(struct ofl_xdp_cross *x);

#endif
