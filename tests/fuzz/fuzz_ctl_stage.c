/* libFuzzer target: control messages through a channel's staging buffers
 * (offlow/ctl_stage.h: 'S', 'P', 'X', 'R') to a shared map whose entries may not fit
 * one message. The first byte chooses the key size (1..64) and the entries (1..4); then
 * a sequence of messages, each a length byte then that many bytes (cut to what is
 * left), a length byte of 255 instead saying that another client speaks from then on
 * (its first 'X' or 'R' must find nothing of the last one's, and the count of dropped
 * requests never goes down). Every reply must fit a message and carry a status of 0, a negative errno, or
 * (a reply kept for reads in parts) a positive length no longer than the buffers,
 * whose reads in parts then give exactly that many bytes; a refused message must
 * leave the map as it was (count, full, control updates); at the end a walk through
 * 'n' messages and kept replies must see each key the map holds once. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/ctl_stage.h"
#include "offlow/map_ctl.h"

#define VS 2u
#define CAP OFL_MAP_CTL_STAGE(64u, VS)

static void run(void *ctx, const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                struct ofl_ctl_reply *r)
{
    ofl_map_ctl_out(ctx, msg, len, out, r);
}

/* The reply's status, checked; a kept reply read back whole into `got` (cap bytes). */
static int32_t answer(struct ofl_ctl_stage *s, uint32_t peer, struct ofl_map *m,
                      const struct ofl_ctl_reply *r, uint8_t *got)
{
    int32_t st;
    if (r->n < 4 || r->n > OFL_CTL_MSG_MAX) abort();
    memcpy(&st, r->b, 4);
    if (st <= 0) return st;
    if (r->n != 4 || (uint32_t)st > CAP) abort();
    for (uint32_t at = 0; at < (uint32_t)st;) {
        uint8_t rd[5] = {'R'};
        struct ofl_ctl_reply p;
        memcpy(rd + 1, &at, 4);
        ofl_ctl_stage_msg(s, peer, run, m, rd, 5, &p);
        int32_t ps;
        memcpy(&ps, p.b, 4);
        if (ps != 0 || p.n <= 4 || p.n > OFL_CTL_MSG_MAX || at + (p.n - 4) > (uint32_t)st)
            abort();
        memcpy(got + at, p.b + 4, p.n - 4);
        at += (uint32_t)(p.n - 4);
    }
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    uint32_t ks = 1u + (data[0] & 63u), entries = 1u + ((data[0] >> 6) & 3u);
    struct ofl_map *m;
    if (ofl_map_open(&m, ks, VS, entries) != 0) abort();
    m->layout = "a:uint8_t;uint16_t";
    static uint8_t req[CAP], rep[CAP], got[CAP];
    struct ofl_ctl_stage s;
    if (ofl_ctl_stage_init(&s, req, rep, OFL_MAP_CTL_STAGE(ks, VS)) != 0) abort();
    uint32_t peer = 1;
    int fresh = 0;   /* no message yet from this client */
    uint64_t dropped = 0;
    for (size_t at = 1; at < size;) {
        size_t n = data[at++];
        if (n == 255) {
            peer += 2;
            fresh = 1;
            continue;
        }
        if (n > size - at) n = size - at;
        const uint8_t *msg = data + at;
        at += n;
        uint32_t count = m->count;
        uint64_t full = m->full, updates = m->ctl_updates;
        struct ofl_ctl_reply r;
        ofl_ctl_stage_msg(&s, peer, run, m, msg, n, &r);
        int32_t st = answer(&s, peer, m, &r, got);
        if (fresh && n && (msg[0] == 'X' || msg[0] == 'R') && st >= 0) abort();
        fresh = 0;
        if (ofl_ctl_stage_dropped(&s) < dropped) abort();
        dropped = ofl_ctl_stage_dropped(&s);
        if (st < 0 && (m->count != count || m->ctl_updates != updates ||
                       m->full != full + (st == -ENOSPC)))
            abort();
        if (st > 0 && n && msg[0] != 'n' && msg[0] != 'X') abort();   /* only these keep */
    }
    uint32_t seen = 0, slot = 0;
    for (;;) {
        uint8_t next[5] = {OFL_CTL_MAP_NEXT};
        memcpy(next + 1, &slot, 4);
        struct ofl_ctl_reply r;
        ofl_ctl_stage_msg(&s, peer, run, m, next, 5, &r);
        int32_t st = answer(&s, peer, m, &r, got);
        if (st < 0) break;
        const uint8_t *p = st > 0 ? got : r.b + 4;
        size_t len = st > 0 ? (size_t)st : r.n - 4;
        uint32_t k;
        memcpy(&k, p, 4);
        if (k < slot || len != 4 + ks + VS || !ofl_map_lookup(m, p + 4)) abort();
        seen++;
        slot = k + 1;
    }
    if (seen != m->count) abort();
    ofl_map_close(m);
    return 0;
}
