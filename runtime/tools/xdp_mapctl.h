/* The control channel of a shared hash map on the xdp target (offlow ctl RUN map NAME
 * ...): the messages of offlow/map_ctl.h answered on the channel manager's thread
 * through the BPF hash map's fd (bpf_map_lookup_elem, update_elem, delete_elem,
 * get_next_key). Each call on one element is atomic in the kernel; the program's XDP
 * side goes on reading and changing the map meanwhile (docs/control.md). */
#ifndef OFL_XDP_MAPCTL_H
#define OFL_XDP_MAPCTL_H

#include <stdint.h>

#include <bpf/libbpf.h>

#include "offlow/chan.h"
#include "offlow/ctl_stage.h"
#include "offlow/map.h"
#include "offlow/map_ctl.h"
#include "xdp_run.h"

/* One map's control state. */
struct ofl_xdp_mapctl {
    const struct ofl_xdp_map *x;
    struct bpf_object *obj;
    int fd;                     /* the hash map's */
    uint64_t updates;           /* sets and deletes through control */
    uint64_t *full;             /* sets refused through control: the map was full */
    uint32_t walk_at;           /* the position of the walk's last key given, */
    int walk_on;                /* when one is under way, and that key: */
    uint8_t walk_key[OFL_MAP_KEY_MAX];
    struct ofl_map_ctl_ops ops;
    /* requests and replies longer than one message (a key and value over
       OFL_MAP_CTL_KV_MAX bytes: ctl_stage.h) */
    struct ofl_ctl_stage stage;
    uint8_t stage_req[OFL_MAP_CTL_STAGE(OFL_MAP_KEY_MAX, OFL_MAP_CTL_VALUE_MAX)];
    uint8_t stage_rep[OFL_MAP_CTL_STAGE(OFL_MAP_KEY_MAX, OFL_MAP_CTL_VALUE_MAX)];
};

/* Prepare `s` for map `x` of the loaded `obj`, counting its refused sets in *full: 0,
 * or -ENOENT (printed) when `obj` has no such map. */
int ofl_xdp_mapctl_open(struct ofl_xdp_mapctl *s, const struct ofl_xdp_map *x,
                        struct bpf_object *obj, uint64_t *full);

/* Prepare `s` for map `x` whose BPF hash map is `fd` (open's, or one a test made with
 * bpf_map_create), counting its refused sets in *full; `obj`: the loaded object whose
 * per-CPU `full` counter of `x` adds to those, or NULL for none. */
void ofl_xdp_mapctl_init(struct ofl_xdp_mapctl *s, const struct ofl_xdp_map *x, int fd,
                         struct bpf_object *obj, uint64_t *full);

/* A set's answer for the errno `e` bpf_map_update_elem gave: -ENOSPC, counted in *full,
 * for E2BIG (the hash map has no room for a new key, preallocated or not); -ENOMEM for
 * ENOMEM (the kernel could not allocate memory for the update: the map is not full, and
 * nothing is counted); -e for any other. */
int ofl_xdp_mapctl_set_error(int e, uint64_t *full);

/* The channel manager's handler of channel ctl.NAME (ctx: the map's ofl_xdp_mapctl). */
int ofl_xdp_mapctl_serve(void *ctx, struct ofl_chan_end *end, const void *msg, size_t len);

#endif
