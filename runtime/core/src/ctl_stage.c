/* Control requests and replies longer than one message (offlow/ctl_stage.h). */
#include "offlow/ctl_stage.h"

#include <errno.h>
#include <string.h>

int ofl_ctl_stage_init(struct ofl_ctl_stage *s, uint8_t *req, uint8_t *rep, size_t cap)
{
    if (cap > OFL_CTL_STAGE_MAX) return -EMSGSIZE;
    *s = (struct ofl_ctl_stage){req, rep, (uint32_t)cap, 0, 0, 0, 0, 0};
    return 0;
}

/* The u32 after the letter of a message of exactly `want` bytes (or at least, when
 * `more`), or fail. */
static int word(const uint8_t *msg, size_t len, size_t want, int more, uint32_t *x,
                struct ofl_ctl_reply *r)
{
    if (more ? len < want : len != want) {
        ofl_ctl_fail(r, -EINVAL, "'%c' of %zu bytes: want %s%zu", msg[0], len,
                     more ? "more than " : "", more ? want - 1 : want);
        return -EINVAL;
    }
    memcpy(x, msg + 1, 4);
    return 0;
}

static void begin(struct ofl_ctl_stage *s, const uint8_t *msg, size_t len,
                  struct ofl_ctl_reply *r)
{
    uint32_t total;
    s->want = s->have = 0;   /* any request staged before is dropped */
    if (word(msg, len, 5, 0, &total, r) < 0) return;
    if (total == 0 || total > s->cap) {
        ofl_ctl_fail(r, -EMSGSIZE, "a request of %u bytes: this table's take 1..%u", total,
                     s->cap);
        return;
    }
    s->want = total;
    ofl_ctl_ok(r, NULL, 0);
}

static void part(struct ofl_ctl_stage *s, const uint8_t *msg, size_t len,
                 struct ofl_ctl_reply *r)
{
    uint32_t at;
    if (word(msg, len, 6, 1, &at, r) < 0) {
        s->want = 0;
        return;
    }
    size_t n = len - 5;
    if (s->want == 0) {
        ofl_ctl_fail(r, -EINVAL, "a part with no request begun ('S')");
        return;
    }
    if (at != s->have || n > s->want - s->have) {
        ofl_ctl_fail(r, -EINVAL, "a part of %zu at %u: %u of %u staged", n, at, s->have,
                     s->want);
        s->want = 0;
        return;
    }
    memcpy(s->req + at, msg + 5, n);
    s->have += (uint32_t)n;
    ofl_ctl_ok(r, NULL, 0);
}

static void read_back(const struct ofl_ctl_stage *s, const uint8_t *msg, size_t len,
                      struct ofl_ctl_reply *r)
{
    uint32_t at;
    if (word(msg, len, 5, 0, &at, r) < 0) return;
    if (s->kept == 0) {
        ofl_ctl_fail(r, -ENOENT, "no reply is kept to read");
        return;
    }
    if (at >= s->kept) {
        ofl_ctl_fail(r, -ERANGE, "offset %u: the reply has %u bytes", at, s->kept);
        return;
    }
    ofl_ctl_ok(r, s->rep + at, s->kept - at);   /* (cut to what one reply holds) */
}

/* Run `msg` on the table; keep a reply too long for one message. */
static void run(struct ofl_ctl_stage *s, ofl_ctl_fn fn, void *ctx, const uint8_t *msg,
                size_t len, struct ofl_ctl_reply *r)
{
    struct ofl_ctl_out out = {s->rep, s->cap, 0};
    s->kept = 0;
    fn(ctx, msg, len, &out, r);
    int32_t st;
    memcpy(&st, r->b, 4);
    if (st > 0) s->kept = (uint32_t)out.n;
}

/* Drop a request staged and not run, counting it. */
static void drop_staged(struct ofl_ctl_stage *s)
{
    if (s->want)
        __atomic_store_n(&s->dropped, s->dropped + 1, __ATOMIC_RELAXED);
    s->want = s->have = 0;
}

void ofl_ctl_stage_end(struct ofl_ctl_stage *s)
{
    drop_staged(s);
    s->kept = 0;
}

uint64_t ofl_ctl_stage_dropped(const struct ofl_ctl_stage *s)
{
    return __atomic_load_n(&s->dropped, __ATOMIC_RELAXED);
}

void ofl_ctl_stage_msg(struct ofl_ctl_stage *s, uint32_t peer, ofl_ctl_fn fn, void *ctx,
                       const uint8_t *msg, size_t len, struct ofl_ctl_reply *r)
{
    if (peer != s->peer) {   /* another client: what the last one left goes */
        ofl_ctl_stage_end(s);
        s->peer = peer;
    }
    switch (len ? msg[0] : 0) {
    case OFL_CTL_STAGE_BEGIN:
        begin(s, msg, len, r);
        return;
    case OFL_CTL_STAGE_PART:
        part(s, msg, len, r);
        return;
    case OFL_CTL_READ:
        read_back(s, msg, len, r);
        return;
    case OFL_CTL_STAGE_RUN:
        if (len != 1 || s->want == 0 || s->have != s->want) {
            if (len != 1) ofl_ctl_fail(r, -EINVAL, "'X' of %zu bytes: want 1", len);
            else if (s->want == 0) ofl_ctl_fail(r, -EINVAL, "no request staged ('S', 'P')");
            else ofl_ctl_fail(r, -EINVAL, "%u of the request's %u bytes staged", s->have,
                              s->want);
            s->want = 0;
            return;
        }
        s->want = 0;   /* it runs once */
        run(s, fn, ctx, s->req, s->have, r);
        return;
    default:
        run(s, fn, ctx, msg, len, r);
    }
}
