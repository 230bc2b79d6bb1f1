/* The ring bridge (remote_bridge.h). */
#include "offlow/remote_bridge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_ENTRIES = OFL_LINK_KIND_USER, KIND_CREDIT = OFL_LINK_KIND_USER + 1 };

struct entries_hdr {
    uint32_t id, n, closed, first;   /* first: the ring index of the first entry */
};
struct credit_hdr {
    uint32_t id, head;
};

static void bad(struct ofl_bridge *b, const char *fmt, ...)
{
    b->bad++;
    if (b->err[0]) return;   /* the first reason stays */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
}

static void take_entries(struct ofl_bridge *b, const struct entries_hdr *h, const uint8_t *d,
                         size_t len)
{
    struct ofl_bridge_ring *br = h->id < b->n ? &b->rings[h->id] : NULL;
    if (!br || br->out || br->closed) {
        bad(b, "entries for ring %u, which does not come from the peer", h->id);
        return;
    }
    struct ofl_ring *r = &br->ring;
    if (ofl_ring_broken(r)) {   /* its consumer failed: nobody will take them */
        b->dropped_in += h->n;
        b->msgs_in++;
        return;
    }
    if ((uint64_t)h->n * r->entry_size != len || h->first != r->tail) {
        bad(b, "ring %u: %u entries in %zu bytes from index %u (expected %u-byte entries "
            "from %u)", h->id, h->n, len, h->first, r->entry_size, r->tail);
        return;
    }
    /* ofl_ring_free refreshes its view of the consumer's head only below a batch
     * free; a message may bring more than the stale view shows: look again first */
    if (h->n > ofl_ring_free(r)) r->head = __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
    if (h->n > ofl_ring_free(r)) {
        bad(b, "ring %u: %u entries beyond the credit given", h->id, h->n);
        return;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        struct ofl_entry_hdr e;   /* copied: UCX's buffer need not be aligned */
        memcpy(&e, d + (size_t)i * r->entry_size, sizeof e);
        if (!ofl_entry_len_ok(r->entry_size, r->data_off, e.len)) {
            bad(b, "ring %u: entry %u says %u bytes, beyond its %u-byte entry", h->id,
                h->first + i, e.len, r->entry_size);
            return;
        }
    }
    for (uint32_t i = 0; i < h->n; i++)
        memcpy(ofl_ring_slot(r, i), d + (size_t)i * r->entry_size, r->entry_size);
    if (h->n) ofl_ring_commit(r, h->n);
    b->entries_in += h->n;
    b->msgs_in++;
    if (h->closed) {
        ofl_ring_close(r);
        br->closed = true;
    }
}

static void take_credit(struct ofl_bridge *b, const struct credit_hdr *h)
{
    struct ofl_bridge_ring *br = h->id < b->n ? &b->rings[h->id] : NULL;
    if (!br || !br->out) {
        bad(b, "credit for ring %u, which does not go to the peer", h->id);
        return;
    }
    /* the head moves forward, never past what was sent */
    if (h->head - br->credit > br->sent - br->credit) {
        bad(b, "ring %u: credit to index %u, beyond the %u entries sent", h->id, h->head,
            br->sent);
        return;
    }
    br->credit = h->head;
}

void ofl_bridge_on_msg(void *arg, uint32_t kind, const void *hdr, size_t hlen,
                       const void *data, size_t len)
{
    struct ofl_bridge *b = arg;
    if (b->bad) {   /* failed: nothing more is applied */
        b->bad++;
        return;
    }
    if (kind == KIND_ENTRIES && hlen == sizeof(struct entries_hdr)) {
        struct entries_hdr h;
        memcpy(&h, hdr, sizeof h);
        take_entries(b, &h, data, len);
    } else if (kind == KIND_CREDIT && hlen == sizeof(struct credit_hdr) && len == 0) {
        struct credit_hdr h;
        memcpy(&h, hdr, sizeof h);
        take_credit(b, &h);
    } else {
        bad(b, "a message of kind %u with a %zu-byte header", kind, hlen);
    }
}

int ofl_bridge_init(struct ofl_bridge *b, struct ofl_link *link, uint32_t max_batch)
{
    memset(b, 0, sizeof *b);
    b->link = link;
    b->max_batch = max_batch ? max_batch : 1;
    return 0;
}

int ofl_bridge_add(struct ofl_bridge *b, void *mem, size_t len, bool out)
{
    if (b->n == OFL_BRIDGE_MAX_RINGS) return -ENOSPC;
    struct ofl_bridge_ring *br = &b->rings[b->n];
    memset(br, 0, sizeof *br);
    int rc = ofl_ring_attach(&br->ring, mem, len);
    if (rc) return rc;
    br->out = out;
    br->credited = br->ring.head;
    b->n++;
    return 0;
}

/* Send what the local producer published and the remote ring has room for. */
static int send_out(struct ofl_bridge *b, uint32_t id)
{
    struct ofl_bridge_ring *br = &b->rings[id];
    struct ofl_ring *r = &br->ring;
    if (br->closed) return 0;
    bool finished = ofl_ring_finished(r);   /* before ready: nothing commits after it */
    uint32_t n = ofl_ring_ready(r);
    uint32_t room = r->size - (br->sent - br->credit);
    if (n > room) n = room;
    if (n > b->max_batch) n = b->max_batch;
    /* a batch never wraps (one that would is sent as two): its entries are one run of
     * the ring's memory, which the link copies once (no copy into a buffer first) */
    uint32_t to_end = r->size - (r->head & r->mask);
    if (n > to_end) n = to_end;
    for (uint32_t i = 0; i < n; i++) {
        const struct ofl_entry_hdr *e = ofl_ring_peek(r, i);
        if (!e) {
            bad(b, "ring %u: entry %u has a bad seq", id, r->head + i);
            return -EBADMSG;
        }
        /* a len past the entry is as corrupt here as at a local consumer: the ring
         * breaks here, for its producer, not at the far end (which refuses it) */
        if (!ofl_entry_len_ok(r->entry_size, r->data_off, e->len)) {
            ofl_ring_break(r);
            bad(b, "ring %u: entry %u says %u bytes, beyond its %u-byte entry", id,
                r->head + i, e->len, r->entry_size);
            return -EBADMSG;
        }
    }
    bool last = finished && n == r->tail - r->head;
    if (!n && !last) return 0;
    struct entries_hdr h = {.id = id, .n = n, .closed = last, .first = br->sent};
    const uint8_t *run = r->entries + (size_t)(r->head & r->mask) * r->entry_size;
    int rc = ofl_link_send(b->link, KIND_ENTRIES, &h, sizeof h, run, (size_t)n * r->entry_size);
    if (rc) return rc;
    ofl_ring_release(r, n);
    br->sent += n;
    br->closed = last;
    b->entries_out += n;
    b->msgs_out++;
    return (int)n;
}

/* Give the remote producer the room the local consumer made: once it is a quarter of
 * the ring, or the consumer has taken everything that came (so a producer waiting for
 * room always gets it: the consumer then has nothing left to take). */
static int send_credit(struct ofl_bridge *b, uint32_t id)
{
    struct ofl_bridge_ring *br = &b->rings[id];
    uint32_t head = __atomic_load_n(&br->ring.shm->head, __ATOMIC_ACQUIRE);
    if (head == br->credited) return 0;
    if (head - br->credited < br->ring.size / 4 && head != br->ring.tail) return 0;
    struct credit_hdr h = {.id = id, .head = head};
    int rc = ofl_link_send(b->link, KIND_CREDIT, &h, sizeof h, NULL, 0);
    if (!rc) br->credited = head;
    return rc;
}

int ofl_bridge_credit_all(struct ofl_bridge *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        struct ofl_bridge_ring *br = &b->rings[i];
        if (br->out) continue;
        uint32_t head = __atomic_load_n(&br->ring.shm->head, __ATOMIC_ACQUIRE);
        if (head == br->credited) continue;
        struct credit_hdr h = {.id = i, .head = head};
        int rc = ofl_link_send(b->link, KIND_CREDIT, &h, sizeof h, NULL, 0);
        if (rc) return rc;
        br->credited = head;
    }
    return 0;
}

uint64_t ofl_bridge_unsent(const struct ofl_bridge *b)
{
    uint64_t n = 0;
    for (uint32_t i = 0; !b->broken && i < b->n; i++) {
        const struct ofl_bridge_ring *br = &b->rings[i];
        if (br->out) n += __atomic_load_n(&br->ring.shm->tail, __ATOMIC_ACQUIRE) - br->sent;
    }
    return n;
}

uint64_t ofl_bridge_undelivered(const struct ofl_bridge *b)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const struct ofl_bridge_ring *br = &b->rings[i];
        if (!br->out) continue;
        /* who counts what was published and never sent: the ring's first mark */
        uint32_t upto = ofl_ring_broken_by(&br->ring) == OFL_RING_BROKEN_BY_CONSUMER
                            ? br->sent : __atomic_load_n(&br->ring.shm->tail, __ATOMIC_ACQUIRE);
        n += upto - br->credit;
    }
    return n;
}

uint64_t ofl_bridge_untaken(struct ofl_bridge *b, bool consumers_gone)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        struct ofl_bridge_ring *br = &b->rings[i];
        if (br->out) continue;
        struct ofl_ring *r = &br->ring;
        uint32_t before = ofl_ring_broken_by(r);
        ofl_ring_break_by(r, OFL_RING_BROKEN_BY_PRODUCER);
        /* (the consumer's head is final once it broke the ring, or once it is gone) */
        if (before == OFL_RING_BROKEN_BY_CONSUMER || (consumers_gone && !before))
            n += r->tail - __atomic_load_n(&r->shm->head, __ATOMIC_ACQUIRE);
    }
    return n;
}

void ofl_bridge_break(struct ofl_bridge *b)
{
    if (b->broken) return;
    b->broken = true;
    for (uint32_t i = 0; i < b->n; i++) {
        struct ofl_bridge_ring *br = &b->rings[i];
        if (br->out) ofl_ring_break(&br->ring);
        else if (!br->closed) ofl_ring_break_by(&br->ring, OFL_RING_BROKEN_BY_PRODUCER);
    }
}

/* ofl_bridge_poll's failure `rc`, after breaking the rings. */
static int failed(struct ofl_bridge *b, int rc)
{
    ofl_bridge_break(b);
    return rc;
}

int ofl_bridge_poll(struct ofl_bridge *b)
{
    if (ofl_link_progress(b->link) == OFL_LINK_FAILED) return failed(b, -EPIPE);
    if (b->bad) return failed(b, -EBADMSG);
    int moved = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        int rc = b->rings[i].out ? send_out(b, i) : send_credit(b, i);
        if (rc < 0) return failed(b, b->bad ? -EBADMSG : -EPIPE);
        moved += rc;
    }
    return moved;
}

bool ofl_bridge_done(const struct ofl_bridge *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        const struct ofl_bridge_ring *r = &b->rings[i];
        if (!r->closed || (r->out && r->credit != r->sent)) return false;
    }
    return true;
}

void ofl_bridge_free(struct ofl_bridge *b)
{
    (void)b;   /* (nothing held now: a batch goes from the ring's memory) */
}
