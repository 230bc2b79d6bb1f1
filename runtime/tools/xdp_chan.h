/* The channels a segment on the xdp target serves. XDP has no channel of its own: the
 * handlers (the same generated C as the NIC's) run in the xdp process, on the host
 * CPU, on a channel manager thread beside the run. The shared arrays they name are
 * the program's BPF array maps (BPF_F_MMAPABLE), mapped into this process through
 * their map fds: a handler reads what XDP has written so far and its writes reach the
 * program at once. Each aligned entry is read and written whole (the handler's
 * atomics, XDP's atomic ORs), but the array is no snapshot: XDP goes on updating it
 * while a handler runs. Each shared hash map's control channel (ctl.NAME) is served
 * here too, through the map's fd (xdp_mapctl.h). */
#ifndef OFL_XDP_CHAN_H
#define OFL_XDP_CHAN_H

#include <stdbool.h>

#include <bpf/libbpf.h>

#include "offlow/gen.h"
#include "xdp_mapctl.h"
#include "xdp_run.h"

/* The channels of one run. */
struct ofl_xdp_chans {
    const struct ofl_xdp_desc *d;
    const struct ofl_args *a;  /* the run's options (for ofl_start_failf) */
    struct ofl_window own;     /* the window, when this run opened it (no crossing) */
    struct ofl_window *win;    /* the window the channels are in, or NULL: none served */
    size_t chan_off;           /* the channel region's offset in it */
    struct ofl_chan_mgr *mgr;  /* the manager, once started */
    struct ofl_xdp_mapctl *maps;  /* per shared hash map: its control (xdp_mapctl.h) */
    uint64_t *ctl_full;        /* per shared hash map: sets refused through control */
};

/* True when `d` serves channels (a handler's, or a shared hash map's control). */
bool ofl_xdp_chans_any(const struct ofl_xdp_desc *d);

/* Prepare the channels of `d`: in window `win` (the crossing's), or, when NULL, in
 * the run's window opened here (--window). Nothing is done when `d` serves none.
 * 0 or a negative errno (said: ofl_start_failf; `a` is kept for ofl_xdp_chans_start's);
 * close with ofl_xdp_chans_close in any case. */
int ofl_xdp_chans_open(struct ofl_xdp_chans *s, const struct ofl_xdp_desc *d,
                       const struct ofl_args *a, struct ofl_window *win);

/* Map every shared array a handler names from its map in the loaded `obj`, then
 * serve the channels: the handlers' and each shared hash map's control channel.
 * 0 or a negative errno (said: ofl_start_failf, but ofl_gen_serve's and the map
 * control's own failures, which print theirs). */
int ofl_xdp_chans_start(struct ofl_xdp_chans *s, struct bpf_object *obj);

/* Stop serving (the manager's handlers end first; a request still staged on a map's
 * control channel is dropped and counted) and unmap the arrays; the maps' control
 * counts (ctl_full, each stage's dropped) stay until ofl_xdp_chans_close. */
void ofl_xdp_chans_stop(struct ofl_xdp_chans *s);

/* Stop, free the maps' control and close the window if it is this run's own. */
void ofl_xdp_chans_close(struct ofl_xdp_chans *s);

#endif
