/* Channel glue for generated programs: the region in the window, managers by name.
 * Its own object file, so programs without channels do not link the channel code. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/chan.h"
#include "offlow/err.h"
#include "offlow/gen.h"

int ofl_gen_channels(struct ofl_window *w, size_t off, unsigned n, const char *const *names)
{
    size_t size = ofl_chan_region_size(n);
    void *region = ofl_window_at(w, off);
    int rc = ofl_chan_region_format(region, size, n);
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        rc = ofl_chan_create(region, names[i]);
        if (rc > 0) rc = 0;   /* an id: hosts find channels by name */
    }
    if (rc < 0) return rc;
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    h->chan_off = off;
    h->chan_size = size;
    return 0;
}

int ofl_gen_serve(struct ofl_chan_mgr *m, struct ofl_window *w, size_t off, const char *name,
                  ofl_chan_handler handler, void *ctx)
{
    void *region = ofl_window_at(w, off);
    int id = ofl_chan_lookup(region, name);
    int rc = id < 0 ? id : ofl_chan_mgr_serve(m, region, (uint32_t)id, OFL_CHAN_B, handler, NULL, ctx);
    if (rc < 0) fprintf(stderr, "offlow: cannot serve channel %s: %s\n", name, ofl_strerror(rc));
    return rc;
}

/* Open side `side` of channel "table.<name>" of the window's region. */
static int open_table_channel(struct ofl_chan_end *e, struct ofl_window *w, size_t off,
                              const char *name, int side)
{
    char chan[OFL_CHAN_NAME_MAX + 1];
    if (snprintf(chan, sizeof chan, "table.%s", name) >= (int)sizeof chan) return -ENAMETOOLONG;
    void *region = ofl_window_at(w, off);
    int id = ofl_chan_lookup(region, chan);
    if (id < 0) return id;
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w->base;
    return ofl_chan_open(e, region, (uint32_t)id, side, &h->abort);
}

/* Whether a transfer's error `rc` only says that the other end stopped (it closed the
 * channel, its process ended, the run was aborted, it gave up the bulk transfer): its
 * own failure is the run's error (said there, or its death by the runner), not this. */
static bool peer_failed(int rc)
{
    return rc == -EPIPE || rc == -ECANCELED || rc == -ECONNABORTED;
}

/* Waits of the table transfer: the host reads and parses its file first. */
#define TABLE_WAIT_NS (600ull * 1000000000ull)

/* Send a packed table: the sizes of the blob and of the keys its packing asked of the
 * table's options (one direct message), then each in bulk. */
static int send_blob(struct ofl_chan_end *e, const struct ofl_args *a, const char *name,
                     const void *blob, size_t len)
{
    char keys[OFL_OPT_ASKED_MAX];
    uint64_t size[2] = { len, ofl_args_asked(a, name, keys, sizeof keys) };
    int rc = ofl_chan_send(e, size, sizeof size, TABLE_WAIT_NS);
    if (rc == 0 && len) rc = ofl_chan_bulk_send(e, blob, len, TABLE_WAIT_NS);
    if (rc == 0 && size[1]) rc = ofl_chan_bulk_send(e, keys, (size_t)size[1], TABLE_WAIT_NS);
    return rc;
}

/* Receive what send_blob sent: the blob (malloc'ed into *blob, `*len` bytes; the
 * caller frees it, also on error), and the sender's keys, each then asked here. */
static int recv_blob(struct ofl_chan_end *e, const struct ofl_args *a, const char *name,
                     void **blob, uint64_t *len)
{
    char keys[OFL_OPT_ASKED_MAX];
    uint64_t size[2] = { 0, 0 };
    int rc = ofl_chan_recv(e, size, sizeof size, TABLE_WAIT_NS);
    if (rc >= 0 && rc != (int)sizeof size) rc = -EPROTO;
    if (rc >= 0 && size[0] > ((uint64_t)1 << 36)) rc = -EMSGSIZE;  /* 64 GiB: not a table */
    if (rc >= 0 && size[1] > sizeof keys) rc = -EMSGSIZE;
    if (rc >= 0 && !(*blob = malloc(size[0] ? (size_t)size[0] : 1))) rc = -ENOMEM;
    if (rc >= 0 && size[0]) rc = ofl_chan_bulk_recv(e, *blob, (size_t)size[0], TABLE_WAIT_NS);
    if (rc >= 0 && size[1]) rc = ofl_chan_bulk_recv(e, keys, (size_t)size[1], TABLE_WAIT_NS);
    if (rc >= 0 && size[1] && keys[size[1] - 1]) rc = -EPROTO;   /* keys end with a NUL */
    for (size_t off = 0; rc >= 0 && off < size[1]; off += strlen(keys + off) + 1)
        (void)ofl_args_get(a, name, keys + off, NULL);   /* read there: asked here too */
    *len = size[0];
    return rc;
}

int ofl_table_send(struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_pack_fn pack, const struct ofl_args *a)
{
    struct ofl_chan_end e;
    int rc = open_table_channel(&e, w, chan_off, name, OFL_CHAN_A);
    if (rc < 0) {
        ofl_start_failf(a, "table %s: no channel to send it: %s", name, ofl_strerror(rc));
        return rc;
    }
    void *blob = NULL;
    size_t len = 0;
    rc = pack(&blob, &len, a, name);   /* says its own errors */
    if (rc == 0) {
        rc = send_blob(&e, a, name, blob, len);
        if (rc < 0 && !peer_failed(rc))
            ofl_start_failf(a, "table %s: sending %zu bytes to the device: %s", name, len,
                            ofl_strerror(rc));
    }
    free(blob);
    ofl_chan_close(&e);   /* a device still waiting learns that nothing comes */
    return rc;
}

int ofl_table_recv(void *t, struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_blob_fn open, const struct ofl_args *a)
{
    struct ofl_chan_end e;
    uint64_t size = 0;
    void *blob = NULL;
    int rc = open_table_channel(&e, w, chan_off, name, OFL_CHAN_B);
    if (rc < 0) {
        ofl_start_failf(a, "table %s: no channel to receive it: %s", name, ofl_strerror(rc));
        return rc;
    }
    rc = recv_blob(&e, a, name, &blob, &size);
    ofl_chan_close(&e);
    if (rc < 0) {
        if (!peer_failed(rc))
            ofl_start_failf(a, "table %s: receiving it from the host: %s", name,
                            ofl_strerror(rc));
        free(blob);
        return rc;
    }
    rc = open(t, blob, (size_t)size, a, name);   /* says its own errors */
    free(blob);
    return rc;
}
