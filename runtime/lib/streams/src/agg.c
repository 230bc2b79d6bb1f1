/* Aggregate: the open windows, each with its groups' accumulators in arrival order, and
 * the headers and ts of the last tuple taken in (the results' at a stream's end). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/streams.h"
#include "span.h"

#define AGG_MAX_OPEN 1024

struct agg_acc {
    int64_t group, count, min, max;
    __int128 sum;   /* (int64 values: no overflow for up to 2^63 of them) */
};

struct agg_win {
    int64_t w;          /* its index: it starts at w * advance */
    uint32_t n, next;   /* groups held; the next to give out once done */
    int used;
    struct agg_acc *acc;
};

struct ofl_agg {
    enum ofl_agg_fn fn;
    int64_t size, advance;
    uint32_t groups, nwin;
    struct agg_win *win;   /* nwin slots, window w in slot w mod nwin */
    struct agg_acc *mem;
    int seen;
    int64_t last;          /* the latest t */
    struct ofl_tuple_view kv;   /* the last tuple kept (ofl_agg_keep): its view, */
    uint64_t kts;               /* ts */
    uint8_t kept[OFL_TUPLE_FRAME_MAX];   /* and headers (kv.off bytes); kv.off 0: none */
    uint8_t out[OFL_TUPLE_FRAME_MAX];    /* the frame ofl_agg_drain gave last */
};

/* floor(a / b) for b > 0 */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Window w's start, w * advance: it fits int64 for every window ofl_agg_add opens. */
static int64_t start(const struct ofl_agg *a, int64_t w)
{
    return w * a->advance;
}

/* Whether window w is done at t: t at or past its end (its start + size, which may
 * lie beyond INT64_MAX: then no t ends it, only ofl_agg_drain). */
static int done_at(const struct ofl_agg *a, int64_t w, int64_t t)
{
    int64_t s = start(a, w);
    return s <= t && ofl_span(s, t) >= (uint64_t)a->size;
}

static uint32_t slot(const struct ofl_agg *a, int64_t w)
{
    int64_t m = w % (int64_t)a->nwin;
    return (uint32_t)(m < 0 ? m + a->nwin : m);
}

int ofl_agg_open(struct ofl_agg **out, enum ofl_agg_fn fn, int64_t size, int64_t advance,
                 uint32_t groups)
{
    if (size <= 0 || advance <= 0 || size / advance >= AGG_MAX_OPEN || !groups ||
        groups > 65536 || fn > OFL_AGG_MAX)
        return -EINVAL;
    struct ofl_agg *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->fn = fn;
    a->size = size;
    a->advance = advance;
    a->groups = groups;
    a->nwin = (uint32_t)(size / advance) + 2u;   /* windows holding one t, and one more */
    a->win = calloc(a->nwin, sizeof *a->win);
    a->mem = calloc((size_t)a->nwin * groups, sizeof *a->mem);
    if (!a->win || !a->mem) {
        ofl_agg_close(a);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < a->nwin; i++)
        a->win[i].acc = a->mem + (size_t)i * groups;
    *out = a;
    return 0;
}

void ofl_agg_close(struct ofl_agg *a)
{
    if (!a)
        return;
    free(a->win);
    free(a->mem);
    free(a);
}

static int64_t result(const struct ofl_agg *a, const struct agg_acc *c)
{
    switch (a->fn) {
    case OFL_AGG_COUNT: return c->count;
    case OFL_AGG_SUM:   /* beyond int64: the nearest int64 */
        return c->sum > INT64_MAX ? INT64_MAX : c->sum < INT64_MIN ? INT64_MIN
                                                                   : (int64_t)c->sum;
    case OFL_AGG_AVG: return (int64_t)(c->sum / c->count);   /* C rounds toward 0 */
    case OFL_AGG_MIN: return c->min;
    default: return c->max;
    }
}

uint32_t ofl_agg_write(uint8_t *buf, uint32_t cap, const uint8_t *tmpl,
                       const struct ofl_tuple_view *tv, const struct ofl_agg_out *o)
{
    int32_t v[6] = { (int32_t)o->group, (int32_t)o->count,
                     (int32_t)(uint32_t)o->value, (int32_t)(uint32_t)((uint64_t)o->value >> 32),
                     (int32_t)(uint32_t)o->start, (int32_t)(uint32_t)((uint64_t)o->start >> 32) };
    return ofl_tuple_write(buf, cap, tmpl, tv, v, 6u);
}

/* The next result of the oldest window done at t (all: of the oldest window open). */
static int next(struct ofl_agg *a, int64_t t, int all, struct ofl_agg_out *o)
{
    struct agg_win *done = NULL;
    for (uint32_t i = 0; i < a->nwin; i++) {
        struct agg_win *x = &a->win[i];
        if (x->used && (all || done_at(a, x->w, t)) && (!done || x->w < done->w))
            done = x;
    }
    if (!done)
        return 0;
    const struct agg_acc *c = &done->acc[done->next++];
    o->start = start(a, done->w);
    o->group = c->group;
    o->count = c->count;
    o->value = result(a, c);
    if (done->next == done->n)
        done->used = 0;
    return 1;
}

int ofl_agg_next(struct ofl_agg *a, int64_t t, struct ofl_agg_out *o)
{
    return next(a, t, 0, o);
}

static struct agg_acc *find(struct agg_win *x, int64_t group)
{
    for (uint32_t i = 0; i < x->n; i++)
        if (x->acc[i].group == group)
            return &x->acc[i];
    return NULL;
}

/* The first window holding t: the least w with w*adv > t - size and w*adv >= INT64_MIN
 * (above hi = floor(t / adv) when t falls in the gap between windows). */
static int64_t lowest(const struct ofl_agg *a, int64_t t)
{
    int64_t hi = floor_div(t, a->advance), first = INT64_MIN / a->advance;   /* (ceil) */
    if (hi < first)   /* t's windows all start below INT64_MIN */
        return hi + 1;
    uint64_t into = ofl_span(start(a, hi), t);   /* t's offset in window hi, < advance */
    if (into >= (uint64_t)a->size)
        return hi + 1;
    /* windows hi - k for k <= (size - 1 - into) / adv hold t; at most 1024 of them */
    uint64_t back = ((uint64_t)a->size - 1u - into) / (uint64_t)a->advance;
    return ofl_span(first, hi) < back ? first : hi - (int64_t)back;
}

int ofl_agg_add(struct ofl_agg *a, int64_t t, int64_t group, int64_t value)
{
    /* the windows holding t: w*adv <= t < w*adv + size, of those that start at or
     * above INT64_MIN (their start is a result's int64) */
    if (a->seen && t < a->last)
        return -ERANGE;
    int64_t hi = floor_div(t, a->advance), lo = lowest(a, t);
    uint64_t n = lo <= hi ? ofl_span(lo, hi) + 1u : 0;   /* (w++ past hi could overflow) */
    for (uint64_t k = 0; k < n; k++) {
        int64_t w = lo + (int64_t)k;
        struct agg_win *x = &a->win[slot(a, w)];
        if (x->used && x->w == w && x->n == a->groups && !find(x, group))
            return -ENOSPC;
    }
    a->seen = 1;
    a->last = t;
    for (uint64_t k = 0; k < n; k++) {
        int64_t w = lo + (int64_t)k;
        struct agg_win *x = &a->win[slot(a, w)];
        if (!x->used || x->w != w) {   /* a slot's old window is done by now (t ordered) */
            x->used = 1;
            x->w = w;
            x->n = x->next = 0;
        }
        struct agg_acc *c = find(x, group);
        if (!c) {
            c = &x->acc[x->n++];
            *c = (struct agg_acc){ .group = group, .min = value, .max = value };
        }
        c->count++;
        c->sum += value;
        if (value < c->min) c->min = value;
        if (value > c->max) c->max = value;
    }
    return 0;
}

void ofl_agg_keep(struct ofl_agg *a, const uint8_t *data, const struct ofl_tuple_view *tv,
                  uint64_t ts)
{
    if (tv->off > sizeof a->kept)   /* no parsed tuple frame is that long */
        return;
    memcpy(a->kept, data, tv->off);
    a->kv = *tv;
    a->kts = ts;
}

int ofl_agg_drain(struct ofl_agg *a, struct ofl_pkt *out)
{
    struct ofl_agg_out o;
    while (next(a, 0, 1, &o)) {   /* every window still open, oldest first */
        uint32_t len = a->kv.off ? ofl_agg_write(a->out, sizeof a->out, a->kept, &a->kv, &o)
                                 : 0;
        if (!len)   /* nothing kept to make it with (the caller kept no tuple) */
            continue;
        memset(out, 0, sizeof *out);
        out->data = a->out;
        out->len = len;
        out->cap = sizeof a->out;
        out->ts_ns = a->kts;
        return 1;
    }
    return 0;
}
