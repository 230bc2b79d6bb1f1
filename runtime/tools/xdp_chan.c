/* The channels of a segment on the xdp target (xdp_chan.h). */
#include "xdp_chan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <bpf/libbpf.h>

bool ofl_xdp_chans_any(const struct ofl_xdp_desc *d)
{
    for (const struct ofl_xdp_map *x = d->maps; x && x->name; x++)
        if (x->ctl_chan) return true;
    return d->chans && d->chans->name;
}

/* Serve the control channel of each shared hash map that has one. */
static int serve_maps(struct ofl_xdp_chans *s, struct bpf_object *obj)
{
    size_t n = 0;
    for (const struct ofl_xdp_map *x = s->d->maps; x && x->name; x++) n++;
    s->maps = calloc(n + 1, sizeof *s->maps);
    s->ctl_full = calloc(n + 1, sizeof *s->ctl_full);
    if (!s->maps || !s->ctl_full)
        return ofl_start_failf(s->a, "the xdp channels: out of memory"), -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct ofl_xdp_map *x = &s->d->maps[i];
        if (!x->ctl_chan) continue;
        int rc = ofl_xdp_mapctl_open(&s->maps[i], x, obj, &s->ctl_full[i]);
        if (rc == 0)
            rc = ofl_gen_serve(s->mgr, s->win, s->chan_off, x->ctl_chan, ofl_xdp_mapctl_serve,
                               &s->maps[i]);
        if (rc < 0) return rc;
    }
    return 0;
}

int ofl_xdp_chans_open(struct ofl_xdp_chans *s, const struct ofl_xdp_desc *d,
                       const struct ofl_args *a, struct ofl_window *win)
{
    memset(s, 0, sizeof *s);
    s->d = d;
    s->a = a;
    s->own.fd = -1;
    if (!ofl_xdp_chans_any(d)) return 0;
    size_t *ring_off = calloc(d->nrings + 1, sizeof *ring_off);
    if (!ring_off) return ofl_start_failf(a, "the xdp channels: out of memory"), -ENOMEM;
    size_t size = d->layout(ring_off, &s->chan_off);
    free(ring_off);
    if (win) {
        s->win = win;
        return 0;
    }
    int rc = ofl_proc_open(&s->own, a, size);
    if (rc == 0) s->win = &s->own;
    return rc;
}

/* The length of the mapping of array map `m` (its one value, page-rounded by mmap). */
static size_t map_len(const struct bpf_map *m)
{
    return (size_t)bpf_map__value_size(m) * bpf_map__max_entries(m);
}

int ofl_xdp_chans_start(struct ofl_xdp_chans *s, struct bpf_object *obj)
{
    if (!s->win) return 0;
    for (const struct ofl_xdp_array *x = s->d->arrays; x && x->name; x++) {
        if (!x->mem) continue;
        struct bpf_map *m = bpf_object__find_map_by_name(obj, x->map);
        void *p = m ? mmap(NULL, map_len(m), PROT_READ | PROT_WRITE, MAP_SHARED,
                           bpf_map__fd(m), 0) : MAP_FAILED;
        if (p == MAP_FAILED) {
            ofl_start_failf(s->a, "cannot map shared array %s for the channels: %s", x->name,
                            m ? strerror(errno) : "no such map");
            return m ? -errno : -ENOENT;
        }
        *x->mem = p;
    }
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)s->win->base;
    s->mgr = ofl_chan_mgr_start(1, &h->abort);
    if (!s->mgr)
        return ofl_start_failf(s->a, "cannot start the channel manager"), -ENOMEM;
    if (s->d->chan_mgr) *s->d->chan_mgr = s->mgr;
    for (const struct ofl_xdp_chan *c = s->d->chans; c && c->name; c++) {
        int rc = ofl_gen_serve(s->mgr, s->win, s->chan_off, c->name, c->handler,
                               s->d->chan_ctx);
        if (rc < 0) return rc;
    }
    return serve_maps(s, obj);
}

void ofl_xdp_chans_stop(struct ofl_xdp_chans *s)
{
    if (s->mgr) ofl_chan_mgr_stop(s->mgr);
    s->mgr = NULL;
    /* a request a client staged and never ran: dropped, counted (ctl_stage.h) */
    for (size_t i = 0; s->maps && s->d->maps && s->d->maps[i].name; i++)
        if (s->d->maps[i].ctl_chan) ofl_ctl_stage_end(&s->maps[i].stage);
    for (const struct ofl_xdp_array *x = s->d ? s->d->arrays : NULL; x && x->name; x++) {
        if (!x->mem || !*x->mem) continue;
        munmap(*x->mem, (size_t)x->n * x->size);
        *x->mem = NULL;
    }
}

void ofl_xdp_chans_close(struct ofl_xdp_chans *s)
{
    ofl_xdp_chans_stop(s);
    free(s->maps);
    free(s->ctl_full);
    s->maps = NULL;
    s->ctl_full = NULL;
    if (s->win == &s->own) ofl_window_close(&s->own);
    s->win = NULL;
}
