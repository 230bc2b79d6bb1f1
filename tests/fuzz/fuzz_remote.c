/* libFuzzer target: the ring bridge's message parser (remote_bridge.h,
 * ofl_bridge_on_msg), what a peer over the network controls.
 *
 * The input is a sequence of messages, each [kind - 16][header bytes][data bytes, 2
 * little-endian][release][header][data], fed to a bridge carrying ring 0 in (from the
 * peer: 16 entries of 40 bytes, packet bytes from 16) and ring 1 out (to the peer, 30
 * entries sent). After each: the in ring never holds more than its size, every entry
 * committed has a len that fits it and the seq of its index, the out ring's credit
 * never passes what was sent; `release` entries are then consumed. A message applied
 * after the bridge failed is a bug too (the bridge refuses everything once bad). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/remote_bridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static _Alignas(64) uint8_t in_mem[8192], out_mem[8192];
    struct ofl_bridge b;
    ofl_bridge_init(&b, NULL, 8);
    if (ofl_ring_format(in_mem, sizeof in_mem, 16, 40, 4, 16) ||
        ofl_ring_format(out_mem, sizeof out_mem, 32, 64, 4, 0) ||
        ofl_bridge_add(&b, in_mem, sizeof in_mem, false) ||
        ofl_bridge_add(&b, out_mem, sizeof out_mem, true))
        abort();
    b.rings[1].sent = 30;
    struct ofl_ring cons;
    ofl_ring_attach(&cons, in_mem, sizeof in_mem);
    size_t at = 0;
    while (at + 5 <= size) {
        uint32_t kind = OFL_LINK_KIND_USER + data[at];
        size_t hlen = data[at + 1], dlen = data[at + 2] | (size_t)data[at + 3] << 8;
        uint8_t release = data[at + 4];
        at += 5;
        if (hlen > size - at) hlen = size - at;
        const uint8_t *hdr = data + at;
        at += hlen;
        if (dlen > size - at) dlen = size - at;
        uint8_t *body = malloc(dlen ? dlen : 1);   /* exact size: ASan sees overreads */
        if (!body) abort();
        memcpy(body, data + at, dlen);
        at += dlen;
        uint32_t tail_before = b.rings[0].ring.tail;
        uint64_t bad_before = b.bad;
        ofl_bridge_on_msg(&b, kind, hdr, hlen, body, dlen);
        free(body);
        struct ofl_ring *r = &b.rings[0].ring;
        if (bad_before && r->tail != tail_before) abort();   /* applied after a refusal */
        uint32_t ready = ofl_ring_ready(&cons);
        if (ready > cons.size) abort();
        for (uint32_t i = 0; i < ready; i++) {
            const struct ofl_entry_hdr *e = ofl_ring_peek(&cons, i);
            if (!e || !ofl_entry_len_ok(cons.entry_size, cons.data_off, e->len)) abort();
        }
        if (b.rings[1].sent - b.rings[1].credit > b.rings[1].sent) abort();
        if (b.rings[1].credit > 30) abort();
        uint32_t k = release < ready ? release : ready;
        if (k) ofl_ring_release(&cons, k);
    }
    ofl_bridge_free(&b);
    return 0;
}
