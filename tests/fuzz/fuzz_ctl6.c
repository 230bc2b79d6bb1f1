/* libFuzzer target: control messages (runtime/core ctl.h) -> an IPv6 route table opened
 * for updates (ofl_lpm6_ctl: route add and delete, each a rebuild and a swap; batches:
 * begin, staged adds and deletes, commit).
 *
 * The input is a sequence of messages, each a length byte then that many bytes (cut
 * to what is left). Every reply must fit a direct message and start with a status; a
 * refused message must leave the table unchanged (its update and route counts and the
 * lookup of the message's address); an accepted add of a /128 must answer its hop
 * there, an accepted delete must leave one route fewer; begin and staged updates change
 * nothing; an accepted commit adds what it says it applied to the update count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/ctl.h"
#include "offlow/lpm6.h"
#include "offlow/lpm_tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct ofl_lpm6 *t;
    struct ofl_route6 seed[] = {{{0x20, 0x01, 0x0d, 0xb8}, 3, 32},
                                {{0x20, 0x01, 0x0d, 0xb8, 0, 1}, 4, 48},
                                {{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 5, 128}};
    if (ofl_lpm6_open_live(&t, seed, 3, err) < 0) abort();
    for (size_t at = 0; at < size;) {
        size_t n = data[at++];
        if (n > size - at) n = size - at;
        const uint8_t *msg = data + at;
        at += n;
        struct ofl_ctl_reply r;
        uint64_t before = t->live->updates;
        size_t routes = ofl_lpm6_count(t);
        uint8_t probe[16] = {0};
        if (n >= 18) memcpy(probe, msg + n - 16, 16);
        uint16_t hop_before = ofl_lpm6_lookup(t, probe);
        ofl_lpm6_ctl(t, msg, n, &r);
        if (r.n < 4 || r.n > OFL_CTL_MSG_MAX) abort();
        int32_t st;
        memcpy(&st, r.b, 4);
        if (st > 0) abort();
        if (st < 0 && (t->live->updates != before || ofl_lpm6_count(t) != routes ||
                       ofl_lpm6_lookup(t, probe) != hop_before))
            abort();
        if (st == 0 && n == 20 && msg[0] == OFL_CTL_ROUTE_ADD && msg[1] == 128) {
            uint16_t hop;
            memcpy(&hop, msg + 2, 2);
            if (ofl_lpm6_lookup(t, probe) != hop) abort();
        }
        if (st == 0 && n == 18 && msg[0] == OFL_CTL_ROUTE_DEL && ofl_lpm6_count(t) != routes - 1)
            abort();
        int stages = n > 0 && (msg[0] == OFL_CTL_BATCH_BEGIN || msg[0] == OFL_CTL_STAGE_ADD ||
                               msg[0] == OFL_CTL_STAGE_DEL);
        if (stages && (t->live->updates != before || ofl_lpm6_count(t) != routes ||
                       ofl_lpm6_lookup(t, probe) != hop_before))
            abort();
        if (st == 0 && n == 1 && msg[0] == OFL_CTL_BATCH_COMMIT) {
            uint64_t applied;
            memcpy(&applied, r.b + 4, 8);
            if (r.n != 12 || t->live->updates != before + applied) abort();
        }
    }
    ofl_lpm6_free(t);
    return 0;
}
