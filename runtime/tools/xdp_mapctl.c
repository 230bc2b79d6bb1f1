/* The control channel of a shared hash map on the xdp target (xdp_mapctl.h). */
#include "xdp_mapctl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>

#include "xdp_tables.h"

static void mc_counts(void *self, uint32_t *count, uint64_t *full)
{
    struct ofl_xdp_mapctl *s = self;
    uint8_t a[OFL_MAP_KEY_MAX], b[OFL_MAP_KEY_MAX];
    const void *prev = NULL;
    uint32_t n = 0;
    /* (a key deleted under the count restarts it: at most `entries` counted) */
    while (n < s->x->entries && bpf_map_get_next_key(s->fd, prev, n % 2 ? b : a) == 0) {
        prev = n % 2 ? b : a;
        n++;
    }
    uint64_t xdp_full = 0;
    if (s->obj) (void)ofl_xdp_map_full(s->obj, s->x, &xdp_full);
    *count = n;
    *full = xdp_full + *s->full;
}

static int mc_get(void *self, const void *key, void *value)
{
    struct ofl_xdp_mapctl *s = self;
    return bpf_map_lookup_elem(s->fd, key, value) < 0 ? -ENOENT : 0;
}

/* (the kernel's hash map, kernel/bpf/hashtab.c alloc_htab_elem: a new key with no room
 * left is E2BIG, preallocated (a free list empty) or not (the count at max_entries);
 * ENOMEM is an allocation that failed, the element's without preallocation or the
 * syscall's copy of the key and value: memory pressure, not a full map) */
int ofl_xdp_mapctl_set_error(int e, uint64_t *full)
{
    if (e == E2BIG) {
        (*full)++;
        return -ENOSPC;
    }
    return -e;
}

static int mc_set(void *self, const void *key, const void *value)
{
    struct ofl_xdp_mapctl *s = self;
    if (bpf_map_update_elem(s->fd, key, value, BPF_ANY) == 0) return 0;
    return ofl_xdp_mapctl_set_error(errno, s->full);
}

static int mc_del(void *self, const void *key)
{
    struct ofl_xdp_mapctl *s = self;
    return bpf_map_delete_elem(s->fd, key) < 0 ? -errno : 0;
}

/* The walk's key at position *at: BPF numbers no slots, so a position is a key's place
 * in a get_next_key walk. The walk goes on from the last key given when asked for the
 * next position (the usual walk), else starts again from the first key and skips. */
static int mc_next(void *self, uint32_t *at, void *key, void *value)
{
    struct ofl_xdp_mapctl *s = self;
    uint32_t ks = s->x->key_size;
    int go_on = s->walk_on && *at == s->walk_at + 1;
    uint64_t pos = go_on ? *at : 0, last = (uint64_t)*at + 2u * s->x->entries + 2u;
    const void *prev = go_on ? s->walk_key : NULL;
    uint8_t k[OFL_MAP_KEY_MAX];
    s->walk_on = 0;
    /* (a key deleted under the walk sends get_next_key back to the first: bounded) */
    for (; pos <= last; pos++) {
        if (bpf_map_get_next_key(s->fd, prev, k) < 0) return -ENOENT;
        memcpy(s->walk_key, k, ks);
        prev = s->walk_key;
        if (pos >= *at && bpf_map_lookup_elem(s->fd, k, value) == 0) {
            memcpy(key, k, ks);
            *at = (uint32_t)pos;
            s->walk_at = (uint32_t)pos;
            s->walk_on = 1;
            return 0;
        }
    }
    return -ENOENT;
}

int ofl_xdp_mapctl_open(struct ofl_xdp_mapctl *s, const struct ofl_xdp_map *x,
                        struct bpf_object *obj, uint64_t *full)
{
    memset(s, 0, sizeof *s);
    struct bpf_map *m = bpf_object__find_map_by_name(obj, x->map);
    if (!m) {
        fprintf(stderr, "offlow xdp: no map %s for the control of %s\n", x->map, x->name);
        return -ENOENT;
    }
    ofl_xdp_mapctl_init(s, x, bpf_map__fd(m), obj, full);
    return 0;
}

void ofl_xdp_mapctl_init(struct ofl_xdp_mapctl *s, const struct ofl_xdp_map *x, int fd,
                         struct bpf_object *obj, uint64_t *full)
{
    memset(s, 0, sizeof *s);
    s->x = x;
    s->obj = obj;
    s->fd = fd;
    s->full = full;
    s->ops = (struct ofl_map_ctl_ops){s, x->key_size, x->value_size, x->entries, x->layout,
                                      x->ctl_type, &s->updates, mc_counts, mc_get, mc_set,
                                      mc_del, mc_next};
    size_t cap = OFL_MAP_CTL_STAGE((size_t)x->key_size, (size_t)x->value_size);
    /* (larger keys or values than a map takes: refused by ofl_map_ctl_msg_out) */
    if (cap > sizeof s->stage_req) cap = sizeof s->stage_req;
    (void)ofl_ctl_stage_init(&s->stage, s->stage_req, s->stage_rep, cap);
}

/* A request (one message, or a staged one) on the map (ofl_ctl_fn). */
static void mc_run(void *ctx, const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                   struct ofl_ctl_reply *r)
{
    struct ofl_xdp_mapctl *s = ctx;
    ofl_map_ctl_msg_out(&s->ops, msg, len, out, r);
}

int ofl_xdp_mapctl_serve(void *ctx, struct ofl_chan_end *end, const void *msg, size_t len)
{
    struct ofl_xdp_mapctl *s = ctx;
    struct ofl_ctl_reply r;
    ofl_ctl_stage_msg(&s->stage, ofl_chan_peer_session(end), mc_run, s, msg, len, &r);
    return ofl_chan_post(end, r.b, r.n);
}
