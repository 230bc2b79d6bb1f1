/* Resample: left tuples waiting for the right stream to pass their window, and the right
 * tuples some waiting or later left tuple may still see. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/streams.h"
#include "span.h"

struct rs_left {
    int64_t t;
    uint64_t ts;
    uint32_t len;
    struct ofl_tuple_view tv;
    uint8_t data[OFL_TUPLE_FRAME_MAX];
};

struct rs_right {
    int64_t t, value;
};

struct ofl_resample {
    int64_t size;
    uint32_t cap;
    uint32_t lhead, lcount, rhead, rcount;
    int have_left, have_right;
    int64_t left_max, right_max;
    struct rs_left *left;
    struct rs_right *right;
    uint8_t out[OFL_TUPLE_FRAME_MAX];
};

int ofl_resample_open(struct ofl_resample **out, int64_t size, uint32_t cap)
{
    if (size < 0 || !cap || cap > 65536)
        return -EINVAL;
    struct ofl_resample *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->size = size;
    r->cap = cap;
    r->left = calloc(cap, sizeof *r->left);
    r->right = calloc(cap, sizeof *r->right);
    if (!r->left || !r->right) {
        ofl_resample_close(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void ofl_resample_close(struct ofl_resample *r)
{
    if (!r)
        return;
    free(r->left);
    free(r->right);
    free(r);
}

/* Forgets the right tuples no waiting or later left tuple can see. */
static void forget(struct ofl_resample *r)
{
    if (!r->have_left)
        return;
    int64_t low = r->lcount ? r->left[r->lhead].t : r->left_max;
    while (r->rcount && ofl_before(r->right[r->rhead].t, low, r->size)) {
        r->rhead = (r->rhead + 1) % r->cap;
        r->rcount--;
    }
}

int ofl_resample_left(struct ofl_resample *r, const uint8_t *data, uint32_t len,
                      const struct ofl_tuple_view *tv, uint64_t ts, int64_t t)
{
    if (len > OFL_TUPLE_FRAME_MAX || tv->n > OFL_TUPLE_MAX - 2u)
        return -EMSGSIZE;
    if (r->have_left && t < r->left_max)
        return -ERANGE;
    if (r->lcount == r->cap)
        return -ENOSPC;
    struct rs_left *l = &r->left[(r->lhead + r->lcount++) % r->cap];
    l->t = t;
    l->ts = ts;
    l->len = len;
    l->tv = *tv;
    memcpy(l->data, data, len);
    r->have_left = 1;
    r->left_max = t;
    forget(r);
    return 0;
}

int ofl_resample_right(struct ofl_resample *r, int64_t t, int64_t value)
{
    if (r->have_right && t < r->right_max)
        return -ERANGE;
    forget(r);
    if (r->rcount == r->cap)
        return -ENOSPC;
    r->right[(r->rhead + r->rcount++) % r->cap] = (struct rs_right){ t, value };
    r->have_right = 1;
    r->right_max = t;
    return 0;
}

/* The next left tuple done (all: every one waiting) that has a right one near. */
static int next(struct ofl_resample *r, struct ofl_pkt *out, int all)
{
    while (r->lcount && r->have_right &&
           (all || ofl_before(r->left[r->lhead].t, r->right_max, r->size))) {
        const struct rs_left *l = &r->left[r->lhead];
        int64_t count = 0;
        __int128 sum = 0;   /* (int64 values: no overflow for up to 2^63 of them) */
        for (uint32_t i = 0; i < r->rcount; i++) {
            const struct rs_right *x = &r->right[(r->rhead + i) % r->cap];
            if (ofl_within(x->t, l->t, r->size)) {
                count++;
                sum += x->value;
            }
        }
        int32_t v[OFL_TUPLE_MAX];
        uint32_t n = l->tv.n;
        ofl_tuple_values(l->data, &l->tv, v);
        v[n] = (int32_t)count;
        v[n + 1] = count ? (int32_t)(sum / count) : 0;
        uint32_t len = count ? ofl_tuple_write(r->out, sizeof r->out, l->data, &l->tv, v, n + 2)
                             : 0;
        uint64_t ts = l->ts;
        r->lhead = (r->lhead + 1) % r->cap;
        r->lcount--;
        forget(r);
        if (!len)   /* no right tuple near it */
            continue;
        memset(out, 0, sizeof *out);
        out->data = r->out;
        out->len = len;
        out->cap = sizeof r->out;
        out->ts_ns = ts;
        return 1;
    }
    return 0;
}

int ofl_resample_next(struct ofl_resample *r, struct ofl_pkt *out)
{
    return next(r, out, 0);
}

int ofl_resample_drain(struct ofl_resample *r, struct ofl_pkt *out)
{
    return next(r, out, 1);
}
