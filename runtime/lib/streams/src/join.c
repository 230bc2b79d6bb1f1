/* Join: each side's tuples within the window, in arrival order (a ring per side). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/streams.h"
#include "span.h"

struct join_tup {
    int64_t t, key;
    uint32_t n;
    int32_t v[OFL_TUPLE_MAX];
};

struct join_side {
    uint32_t head, count;
    struct join_tup *e;
};

struct ofl_join {
    int64_t size;
    uint32_t cap;
    struct join_side side[2];
    struct join_tup cur;   /* the tuple begun */
    unsigned cur_side;
    int seen[2];
    int64_t last[2];       /* each side's latest t */
    uint32_t scan;         /* the next of the other side's tuples to try */
};

int ofl_join_open(struct ofl_join **out, int64_t size, uint32_t cap)
{
    if (size < 0 || !cap || cap > 65536)
        return -EINVAL;
    struct ofl_join *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->size = size;
    j->cap = cap;
    for (int s = 0; s < 2; s++)
        if (!(j->side[s].e = calloc(cap, sizeof(struct join_tup)))) {
            ofl_join_close(j);
            return -ENOMEM;
        }
    *out = j;
    return 0;
}

void ofl_join_close(struct ofl_join *j)
{
    if (!j)
        return;
    free(j->side[0].e);
    free(j->side[1].e);
    free(j);
}

static struct join_tup *at(const struct ofl_join *j, const struct join_side *s, uint32_t i)
{
    return &s->e[(s->head + i) % j->cap];
}

int ofl_join_begin(struct ofl_join *j, unsigned side, int64_t t, int64_t key,
                   const int32_t *v, uint32_t n)
{
    side &= 1u;
    if (j->seen[side] && t < j->last[side])
        return -ERANGE;
    j->seen[side] = 1;
    j->last[side] = t;
    struct join_side *o = &j->side[!side];
    /* later tuples of this side have t' >= t: the other side's tuples before t - size
     * can join none of them */
    while (o->count && ofl_before(at(j, o, 0)->t, t, j->size)) {
        o->head = (o->head + 1) % j->cap;
        o->count--;
    }
    j->cur_side = side;
    j->cur.t = t;
    j->cur.key = key;
    j->cur.n = n > OFL_TUPLE_MAX ? OFL_TUPLE_MAX : n;
    memcpy(j->cur.v, v, 4u * j->cur.n);
    j->scan = 0;
    return 0;
}

int ofl_join_next(struct ofl_join *j, int32_t *out, uint32_t *n)
{
    const struct join_side *o = &j->side[!j->cur_side];
    while (j->scan < o->count) {
        const struct join_tup *x = at(j, o, j->scan++);
        if (x->key != j->cur.key || !ofl_within(x->t, j->cur.t, j->size))
            continue;
        if (x->n + j->cur.n > OFL_TUPLE_MAX)
            continue;
        const struct join_tup *l = j->cur_side ? x : &j->cur, *r = j->cur_side ? &j->cur : x;
        memcpy(out, l->v, 4u * l->n);
        memcpy(out + l->n, r->v, 4u * r->n);
        *n = l->n + r->n;
        return 1;
    }
    return 0;
}

int ofl_join_add(struct ofl_join *j)
{
    struct join_side *s = &j->side[j->cur_side];
    if (s->count == j->cap)
        return -ENOSPC;
    *at(j, s, s->count++) = j->cur;
    return 0;
}
