/* Channels across the remote link (remote_chan.h). */
#include "remote_chan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/crc32c.h"

static struct part_item *item_new(uint32_t idx, bool bulk, const void *data, size_t len)
{
    struct part_item *it = calloc(1, sizeof *it);
    if (!it) return NULL;
    it->idx = idx;
    it->bulk = bulk;
    it->len = len;
    if (!(it->data = malloc(len ? len : 1))) {
        free(it);
        return NULL;
    }
    if (data && len) memcpy(it->data, data, len);
    return it;
}

void part_item_free(struct part_item *it)
{
    free(it->data);
    free(it);
}

static void up_push(struct part_chans *pc, struct part_item *it)
{
    pthread_mutex_lock(&pc->lock);
    if (pc->up_tail) pc->up_tail->next = it;
    else pc->up_head = it;
    pc->up_tail = it;
    pthread_mutex_unlock(&pc->lock);
}

static void failed(struct part_chans *pc, uint32_t idx, const char *what)
{
    if (pc->err[0]) return;
    const char *name = idx < pc->n ? ofl_chan_name(pc->region, pc->ch[idx].id) : NULL;
    snprintf(pc->err, sizeof pc->err, "channel `%s`: %s", name ? name : "?", what);
}

/* ---- the manager's handlers (its thread): queue what the local end sent ---- */

static int on_direct(void *ctx, struct ofl_chan_end *e, const void *msg, size_t len)
{
    (void)e;
    struct part_chan *c = ctx;
    struct part_item *it = item_new((uint32_t)(c - c->pc->ch), false, msg, len);
    if (!it) return -ENOMEM;   /* (closes the channel: its peer is told) */
    up_push(c->pc, it);
    return 0;
}

static void *on_bulk_begin(void *ctx, struct ofl_chan_end *e, size_t len)
{
    (void)ctx;
    (void)e;
    /* (too large for the link: NULL, the sender gets EMSGSIZE) */
    return len <= OFL_LINK_BULK_MAX ? malloc(len ? len : 1) : NULL;
}

static void on_bulk_done(void *ctx, struct ofl_chan_end *e, void *buf, size_t len, int status)
{
    (void)e;
    struct part_chan *c = ctx;
    struct part_item *it = status ? NULL : calloc(1, sizeof *it);
    if (!it) {   /* failed here (the local sender was told), or no memory */
        free(buf);
        return;
    }
    *it = (struct part_item){.idx = (uint32_t)(c - c->pc->ch), .bulk = true, .len = len,
                             .data = buf};
    up_push(c->pc, it);
}

static void on_bulk_sent(void *ctx, struct ofl_chan_end *e, const void *buf, size_t len,
                         int status)
{
    (void)e;
    (void)len;
    struct part_chan *c = ctx;
    /* (a local receiver's error is its own: it was told; not when the send never
     * reached it: its end closed, or this one did at the stop) */
    if (status == -EPIPE || status == -ECANCELED)
        __atomic_add_fetch(&c->pc->untaken, 1, __ATOMIC_RELAXED);
    free((void *)buf);
    __atomic_store_n(&c->sending, 0u, __ATOMIC_RELEASE);
}

int part_chans_start(struct part_chans *pc, struct ofl_link *link, void *region, int side,
                     const uint32_t *ids, uint32_t n, const volatile uint32_t *abort_flag)
{
    pc->link = link;
    pc->region = region;
    pc->side = side;
    pc->corrupt_at = UINT64_MAX;
    pthread_mutex_init(&pc->lock, NULL);
    if (n > PART_CHANS_MAX) {
        snprintf(pc->err, sizeof pc->err, "more than %d channels", PART_CHANS_MAX);
        return -ENOSPC;
    }
    const char *corrupt = getenv("OFFLOW_REMOTE_TEST_CORRUPT");
    if (corrupt && *corrupt) pc->corrupt_at = strtoull(corrupt, NULL, 10);
    const char *fail_post = getenv("OFFLOW_REMOTE_TEST_POST_FAIL");
    if (fail_post && *fail_post) pc->fail_post_at = strtoull(fail_post, NULL, 10);
    const char *hold = getenv("OFFLOW_REMOTE_TEST_HOLD");
    pc->hold = hold && *hold;
    /* tests: the end here takes no direct message from the local end, as a manager
     * too slow to take the device's answers before it stops */
    const char *hold_up = getenv("OFFLOW_REMOTE_TEST_HOLD_UP");
    ofl_chan_handler take = hold_up && *hold_up ? NULL : on_direct;
    pc->mgr = ofl_chan_mgr_start(1, abort_flag);
    if (!pc->mgr) {
        snprintf(pc->err, sizeof pc->err, "cannot start a channel manager");
        return -ENOMEM;
    }
    static const struct ofl_chan_bulk_handler bulk = {on_bulk_begin, on_bulk_done, on_bulk_sent};
    for (uint32_t i = 0; i < n; i++) {
        pc->ch[i] = (struct part_chan){.pc = pc, .id = ids[i]};
        int rc = ofl_chan_mgr_serve(pc->mgr, region, ids[i], side, take, &bulk, &pc->ch[i]);
        if (rc < 0) {
            snprintf(pc->err, sizeof pc->err, "cannot serve channel %u (%s)", ids[i],
                     strerror(-rc));
            return rc;
        }
        pc->n = i + 1;
    }
    return 0;
}

void part_chans_on_msg(struct part_chans *pc, uint32_t kind, const void *hdr, size_t hlen,
                       const void *data, size_t len)
{
    if (pc->err[0]) return;
    uint32_t idx = UINT32_MAX;
    if (hlen >= sizeof idx) memcpy(&idx, hdr, sizeof idx);
    if (idx >= pc->n) {
        snprintf(pc->err, sizeof pc->err, "a channel message for no channel (%u)", idx);
        return;
    }
    if (kind == PART_CHAN_MSG && (hlen != sizeof idx || len > OFL_CHAN_MSG_MAX)) {
        failed(pc, idx, "a direct message too long or with a bad header");
        return;
    }
    if (kind == PART_CHAN_BULK) {
        struct part_bulk_hdr h;
        if (hlen != sizeof h) {
            failed(pc, idx, "a bulk transfer with a bad header");
            return;
        }
        memcpy(&h, hdr, sizeof h);
        if (h.len != len) {
            failed(pc, idx, "a bulk transfer of another size than announced");
            return;
        }
        uint32_t crc = ofl_crc32c(0, data, len);
        if (crc != h.crc) {   /* never handed on: corrupted bytes are not good data */
            char what[160];
            snprintf(what, sizeof what, "a bulk transfer of %zu bytes arrived corrupted "
                     "(CRC32C %08x, the sender's %08x): not handed on", len, crc, h.crc);
            failed(pc, idx, what);
            return;
        }
        pc->bulk_in++;
        pc->bytes_in += len;
    } else {
        pc->msgs_in++;
    }
    struct part_item *it = item_new(idx, kind == PART_CHAN_BULK, data, len);
    if (!it) {
        failed(pc, idx, "no memory for what came");
        return;
    }
    struct part_chan *c = &pc->ch[idx];
    if (c->tail) c->tail->next = it;
    else c->head = it;
    c->tail = it;
}

/* Send one item taken here across the link. Returns 0 or -EPIPE. */
static int send_up(struct part_chans *pc, struct part_item *it)
{
    if (!it->bulk) {
        pc->msgs_out++;
        int rc = ofl_link_send(pc->link, PART_CHAN_MSG, &it->idx, sizeof it->idx, it->data,
                               it->len);
        part_item_free(it);
        return rc < 0 ? -EPIPE : 0;
    }
    struct part_bulk_hdr h = {it->idx, ofl_crc32c(0, it->data, it->len), it->len};
    if (pc->corrupt_at < it->len) {   /* tests: the bytes change after their CRC */
        it->data[pc->corrupt_at] ^= 0x5a;
        pc->corrupt_at = UINT64_MAX;
    }
    pc->bulk_out++;
    pc->bytes_out += it->len;
    int rc = ofl_link_send_bulk(pc->link, PART_CHAN_BULK, &h, sizeof h, it->data, it->len);
    free(it);   /* (its data is the link's now) */
    return rc < 0 ? -EPIPE : 0;
}

/* Hand the next item that came for channel `c` to its end here. Returns 1 when it
 * was handed on, 0 when the end is not ready for it yet. */
static int hand_on(struct part_chans *pc, struct part_chan *c)
{
    struct part_item *it = c->head;
    if (!it || pc->hold || __atomic_load_n(&c->sending, __ATOMIC_ACQUIRE)) return 0;
    if (ofl_chan_mgr_peer_closed(pc->mgr, pc->region, c->id, pc->side) == 1) {
        /* the end here closed: nothing more is handed to it (a post would only be
         * withdrawn again); each is counted once, here */
        c->head = it->next;
        if (!c->head) c->tail = NULL;
        pc->peer_closed++;
        part_item_free(it);
        return 1;
    }
    int rc;
    if (it->bulk) {
        if (!ofl_chan_mgr_post_done(pc->mgr, pc->region, c->id, pc->side)) return 0;
        __atomic_store_n(&c->sending, 1u, __ATOMIC_RELEASE);
        rc = ofl_chan_mgr_bulk_send(pc->mgr, pc->region, c->id, pc->side, it->data, it->len);
        if (rc < 0) __atomic_store_n(&c->sending, 0u, __ATOMIC_RELEASE);
        else it->data = NULL;   /* (on_bulk_sent frees it) */
    } else {
        bool fake = pc->posts + 1 == pc->fail_post_at;   /* tests: as if the end had closed */
        rc = fake ? -EPIPE
                  : ofl_chan_mgr_post(pc->mgr, pc->region, c->id, pc->side, it->data, it->len);
        if (rc != -EBUSY && rc != -ENOBUFS) pc->posts++;
    }
    if (rc == -EBUSY || rc == -ENOBUFS) return 0;
    c->head = it->next;
    if (!c->head) c->tail = NULL;
    if (rc < 0) {   /* the end here cannot take it: counted, and the channels' error */
        char what[160];
        pc->dropped++;
        snprintf(what, sizeof what, "%s of %zu bytes could not be handed on (%s): dropped",
                 it->bulk ? "a bulk transfer" : "a direct message", it->len, strerror(-rc));
        failed(pc, (uint32_t)(c - pc->ch), what);
    }
    part_item_free(it);
    return 1;
}

int part_chans_poll(struct part_chans *pc)
{
    if (pc->err[0]) return -EBADMSG;
    pthread_mutex_lock(&pc->lock);
    struct part_item *it = pc->up_head;
    pc->up_head = pc->up_tail = NULL;
    pthread_mutex_unlock(&pc->lock);
    int moved = 0;
    while (it) {
        struct part_item *next = it->next;
        if (send_up(pc, it) < 0) {
            for (it = next; it; it = next) {
                next = it->next;
                part_item_free(it);
            }
            return -EPIPE;
        }
        moved++;
        it = next;
    }
    for (uint32_t i = 0; i < pc->n; i++) moved += hand_on(pc, &pc->ch[i]);
    return moved;
}

bool part_chans_peers_up(struct part_chans *pc)
{
    for (uint32_t i = 0; i < pc->n; i++)
        if (ofl_chan_mgr_peer_state(pc->mgr, pc->region, pc->ch[i].id, pc->side) != 1)
            return false;
    return true;
}

void part_chans_drain(struct part_chans *pc)
{
    /* 200 polls in a row that moved nothing, 100 us apart (a loaded machine may not
     * run the manager's thread for milliseconds); 0.5 s at most */
    for (int idle = 0, i = 0; idle < 200 && i < 5000; i++) {
        int moved = part_chans_poll(pc);
        if (moved < 0) return;
        idle = moved ? 0 : idle + 1;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

void part_chans_stop(struct part_chans *pc)
{
    /* (a running send's buffer: on_bulk_sent); a message handed on here that the
     * end here never took is withdrawn, at its peer's close or at this stop: counted */
    struct ofl_chan_stats st;
    if (pc->mgr) ofl_chan_mgr_stop_sum(pc->mgr, &st);
    if (pc->mgr) pc->untaken += st.withdrawn;
    pc->mgr = NULL;
    for (uint32_t i = 0; i < pc->n; i++) {
        while (pc->ch[i].head) {
            struct part_item *it = pc->ch[i].head;
            pc->ch[i].head = it->next;
            part_item_free(it);
            pc->stop_unhanded++;
        }
        pc->ch[i].tail = NULL;
    }
    for (struct part_item *it = pc->up_head, *next; it; it = next) {
        next = it->next;
        part_item_free(it);
        pc->stop_unsent++;
    }
    pc->up_head = pc->up_tail = NULL;
    pthread_mutex_destroy(&pc->lock);
}
