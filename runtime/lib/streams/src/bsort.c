/* BSort: a buffer of slack + 1 tuple frames; the smallest key goes out when full. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/streams.h"

struct bs_entry {
    int64_t key;
    uint64_t seq;   /* arrival order: ties go out first come first */
    uint64_t ts;
    uint32_t len;
    uint8_t data[OFL_TUPLE_FRAME_MAX];
};

struct ofl_bsort {
    uint32_t cap, n;    /* cap = slack + 1 */
    uint64_t seq;
    struct bs_entry out;
    struct bs_entry e[];
};

int ofl_bsort_open(struct ofl_bsort **b, uint32_t slack)
{
    if (slack > 4095)
        return -EINVAL;
    struct ofl_bsort *s = calloc(1, sizeof *s + (slack + 1u) * sizeof(struct bs_entry));
    if (!s)
        return -ENOMEM;
    s->cap = slack + 1u;
    *b = s;
    return 0;
}

void ofl_bsort_close(struct ofl_bsort *b)
{
    free(b);
}

int ofl_bsort_push(struct ofl_bsort *b, const uint8_t *data, uint32_t len, uint64_t ts,
                   int64_t key)
{
    if (len > OFL_TUPLE_FRAME_MAX)
        return -EMSGSIZE;
    if (b->n == b->cap)   /* the caller did not pop: make room as a pop would */
        return -ENOBUFS;
    struct bs_entry *e = &b->e[b->n++];
    e->key = key;
    e->seq = b->seq++;
    e->ts = ts;
    e->len = len;
    memcpy(e->data, data, len);
    return 0;
}

int ofl_bsort_pop(struct ofl_bsort *b, struct ofl_pkt *out)
{
    if (b->n < b->cap)
        return 0;
    uint32_t m = 0;
    for (uint32_t i = 1; i < b->n; i++)
        if (b->e[i].key < b->e[m].key || (b->e[i].key == b->e[m].key && b->e[i].seq < b->e[m].seq))
            m = i;
    b->out = b->e[m];
    b->e[m] = b->e[--b->n];
    memset(out, 0, sizeof *out);
    out->data = b->out.data;
    out->len = b->out.len;
    out->cap = OFL_TUPLE_FRAME_MAX;
    out->ts_ns = b->out.ts;
    return 1;
}
