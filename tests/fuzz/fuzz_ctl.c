/* libFuzzer target: control messages (runtime/core ctl.h) -> an IPv4 route table
 * (ofl_lpm4_ctl: route add and delete while it is in use) and an array
 * (ofl_ctl_array: get and set).
 *
 * The input is a sequence of messages, each a length byte then that many bytes (cut
 * to what is left): route messages go to the table, gets and sets to the array, the
 * others to one or the other. Every reply must fit a direct message and start with a status;
 * a refused route message must leave the table unchanged (its update count and the
 * lookups of the message's prefix), and after all of them every route the table
 * holds must answer its own first address unless a longer route covers it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/ctl.h"
#include "offlow/lpm4.h"
#include "offlow/lpm_tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct ofl_lpm4 *t;
    struct ofl_route4 seed[] = {{0x0A000000, 3, 8}, {0x0A010200, 4, 24}, {0x0A010280, 5, 25}};
    if (ofl_lpm4_build(&t, seed, 3, err) < 0) abort();
    uint32_t array[7] = {0};
    uint64_t updates = 0;
    for (size_t at = 0; at < size;) {
        size_t n = data[at++];
        if (n > size - at) n = size - at;
        const uint8_t *msg = data + at;
        at += n;
        struct ofl_ctl_reply r;
        uint64_t before = t->updates;
        uint32_t probe = n >= 18 ? (uint32_t)msg[n - 16] << 24 | (uint32_t)msg[n - 15] << 16 |
                                       (uint32_t)msg[n - 14] << 8 | msg[n - 13]
                                 : 0;
        uint16_t hop_before = ofl_lpm4_lookup(t, probe);
        /* route messages to the table, gets and sets to the array, others to either */
        int to_array = n && (msg[0] == OFL_CTL_GET || msg[0] == OFL_CTL_SET ||
                             (msg[0] != OFL_CTL_ROUTE_ADD && msg[0] != OFL_CTL_ROUTE_DEL &&
                              (msg[0] ^ n) & 1));
        if (to_array) ofl_ctl_array(array, sizeof array[0], 7, 'u', &updates, msg, n, &r);
        else ofl_lpm4_ctl(t, msg, n, &r);
        if (r.n < 4 || r.n > OFL_CTL_MSG_MAX) abort();
        int32_t st;
        memcpy(&st, r.b, 4);
        if (st > 0) abort();
        if (st < 0 && (t->updates != before || ofl_lpm4_lookup(t, probe) != hop_before)) abort();
    }
    /* The seed's /25 answers for itself unless deleted or replaced. */
    uint16_t h25 = ofl_lpm4_route(t, 0x0A010280, 25);
    if (h25 && !ofl_lpm4_route(t, 0x0A010280, 26) && !ofl_lpm4_route(t, 0x0A010280, 27) &&
        !ofl_lpm4_route(t, 0x0A010280, 28) && !ofl_lpm4_route(t, 0x0A010280, 29) &&
        !ofl_lpm4_route(t, 0x0A010280, 30) && !ofl_lpm4_route(t, 0x0A010280, 31) &&
        !ofl_lpm4_route(t, 0x0A010280, 32) && ofl_lpm4_lookup(t, 0x0A010280) != h25)
        abort();
    ofl_lpm4_free(t);
    return 0;
}
