/* BSort: a buffer of slack + 1 tuple frames in slots, and a binary heap of their keys
 * (key, then arrival) that finds the smallest in O(log slack). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/streams.h"

struct bs_frame {
    uint64_t ts;
    uint32_t len;
    uint8_t data[OFL_TUPLE_FRAME_MAX];
};

struct bs_key {
    int64_t key;
    uint64_t seq;    /* arrival order: ties go out first come first */
    uint32_t slot;
};

struct ofl_bsort {
    uint32_t cap, n;       /* cap = slack + 1 */
    uint64_t seq;
    uint32_t out_slot;     /* the slot popped last: free again at the next push */
    int has_out;
    struct bs_key *heap;   /* n entries */
    uint32_t *free;        /* cap - n free slots (a stack) */
    struct bs_frame *frames;
};

int ofl_bsort_open(struct ofl_bsort **b, uint32_t slack)
{
    if (slack > 4095)
        return -EINVAL;
    struct ofl_bsort *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cap = slack + 1u;
    s->heap = calloc(s->cap, sizeof *s->heap);
    s->free = calloc(s->cap, sizeof *s->free);
    s->frames = calloc(s->cap, sizeof *s->frames);
    if (!s->heap || !s->free || !s->frames) {
        ofl_bsort_close(s);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < s->cap; i++)
        s->free[i] = s->cap - 1u - i;
    *b = s;
    return 0;
}

void ofl_bsort_close(struct ofl_bsort *b)
{
    if (!b)
        return;
    free(b->heap);
    free(b->free);
    free(b->frames);
    free(b);
}

static int before(const struct bs_key *x, const struct bs_key *y)
{
    return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

int ofl_bsort_push(struct ofl_bsort *b, const uint8_t *data, uint32_t len, uint64_t ts,
                   int64_t key)
{
    if (len > OFL_TUPLE_FRAME_MAX)
        return -EMSGSIZE;
    if (b->has_out) {   /* the frame popped last has been taken by now */
        b->free[b->cap - b->n - 1u] = b->out_slot;
        b->has_out = 0;
    }
    if (b->n == b->cap)   /* the caller did not pop */
        return -ENOBUFS;
    uint32_t slot = b->free[b->cap - b->n - 1u];
    b->frames[slot].ts = ts;
    b->frames[slot].len = len;
    memcpy(b->frames[slot].data, data, len);
    struct bs_key k = { key, b->seq++, slot };
    uint32_t i = b->n++;
    while (i && before(&k, &b->heap[(i - 1u) / 2u])) {   /* sift up */
        b->heap[i] = b->heap[(i - 1u) / 2u];
        i = (i - 1u) / 2u;
    }
    b->heap[i] = k;
    return 0;
}

/* Takes the smallest held tuple out into `out` (b->n > 0). */
static int take(struct ofl_bsort *b, struct ofl_pkt *out)
{
    uint32_t slot = b->heap[0].slot;
    struct bs_key last = b->heap[--b->n];
    uint32_t i = 0;
    for (;;) {   /* sift the last entry down from the root */
        uint32_t c = 2u * i + 1u;
        if (c >= b->n)
            break;
        if (c + 1u < b->n && before(&b->heap[c + 1u], &b->heap[c]))
            c++;
        if (!before(&b->heap[c], &last))
            break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (b->n)
        b->heap[i] = last;
    b->out_slot = slot;
    b->has_out = 1;
    memset(out, 0, sizeof *out);
    out->data = b->frames[slot].data;
    out->len = b->frames[slot].len;
    out->cap = OFL_TUPLE_FRAME_MAX;
    out->ts_ns = b->frames[slot].ts;
    return 1;
}

int ofl_bsort_pop(struct ofl_bsort *b, struct ofl_pkt *out)
{
    return b->n < b->cap ? 0 : take(b, out);
}

int ofl_bsort_drain(struct ofl_bsort *b, struct ofl_pkt *out)
{
    if (!b->n)
        return 0;
    if (b->has_out) {   /* the frame drained last has been taken by now */
        b->free[b->cap - b->n - 1u] = b->out_slot;
        b->has_out = 0;
    }
    return take(b, out);
}
