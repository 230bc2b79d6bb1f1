/* libFuzzer target: control messages of a shared map (offlow/map_ctl.h: ofl_map_ctl).
 * The first byte chooses the key size (1..16) and the entries (1..8); then a sequence
 * of messages, each a length byte then that many bytes (cut to what is left), goes to
 * the map. Every reply must fit a direct message and start with a status of 0 or a
 * negative errno; a refused request must leave the map as it was (count, full, control
 * updates); an accepted set must make its key read back its value, an accepted delete
 * make it absent; and at the end a walk through 'n' messages must see each key the map
 * holds once. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/map_ctl.h"

static int32_t status(const struct ofl_ctl_reply *r)
{
    int32_t st;
    if (r->n < 4 || r->n > OFL_CTL_MSG_MAX) abort();
    memcpy(&st, r->b, 4);
    if (st > 0) abort();
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    uint32_t ks = 1u + (data[0] & 15u), entries = 1u + ((data[0] >> 4) & 7u);
    struct ofl_map *m;
    if (ofl_map_open(&m, ks, 2, entries) != 0) abort();
    m->layout = "a:uint8_t;uint16_t";
    for (size_t at = 1; at < size;) {
        size_t n = data[at++];
        if (n > size - at) n = size - at;
        const uint8_t *msg = data + at;
        at += n;
        uint32_t count = m->count;
        uint64_t full = m->full, updates = m->ctl_updates;
        struct ofl_ctl_reply r, back;
        ofl_map_ctl(m, msg, n, &r);
        int32_t st = status(&r);
        if (st < 0 && (m->count != count || m->ctl_updates != updates ||
                       m->full != full + (st == -ENOSPC)))
            abort();
        if (st == 0 && n && (msg[0] == OFL_CTL_SET || msg[0] == OFL_CTL_MAP_DEL)) {
            uint8_t get[1 + 16];
            get[0] = OFL_CTL_GET;
            memcpy(get + 1, msg + 1, ks);
            ofl_map_ctl(m, get, 1 + ks, &back);
            int32_t got = status(&back);
            if (msg[0] == OFL_CTL_SET && (got != 0 || memcmp(back.b + 4, msg + 1 + ks, 2)))
                abort();
            if (msg[0] == OFL_CTL_MAP_DEL && got != -ENOENT) abort();
        }
    }
    uint32_t seen = 0, slot = 0;
    for (;;) {
        uint8_t next[5] = {OFL_CTL_MAP_NEXT};
        memcpy(next + 1, &slot, 4);
        struct ofl_ctl_reply r;
        ofl_map_ctl(m, next, 5, &r);
        if (status(&r) < 0) break;
        uint32_t s;
        memcpy(&s, r.b + 4, 4);
        if (s < slot || r.n != 8 + ks + 2 || !ofl_map_lookup(m, r.b + 8)) abort();
        seen++;
        slot = s + 1;
    }
    if (seen != m->count) abort();
    ofl_map_close(m);
    return 0;
}
