/* libFuzzer target: the segmentation offload's descriptor and template parser, and the
 * cut of every descriptor it takes.
 *
 * Input: 2 bytes of link MTU, 2 of frame buffer size, 1 choosing how payloads move
 * (DMA, PIO, in place: that one only for descriptors that claim headroom, as the API
 * asks), then the descriptor (fixed part and template). The send buffer is 64 KiB + 100
 * bytes; every packet is built into a heap buffer of exactly the frame size or, in
 * place, within the send buffer (ASan catches a write past either), must fit the MTU,
 * and the packets together must carry the send. The
 * template parsers run on the raw descriptor bytes too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/lso.h"

#define SENDBUF (65536u + 100u)

static uint8_t sendbuf[SENDBUF];

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 5) return 0;
    uint32_t mtu = (uint32_t)(d[0] | d[1] << 8) % 9300u;
    uint32_t frame = (uint32_t)(d[2] | d[3] << 8) % 9400u;
    int mode = d[4] % 3;
    const uint8_t *desc = d + 5;
    uint32_t dlen = (uint32_t)(n - 5);
    uint32_t hl, len;
    if (ofl_lso_split(desc, dlen, &hl, &len) == 0 && (hl > dlen || len > dlen - hl)) abort();
    (void)ofl_lso_check_template(desc, dlen);
    (void)ofl_lso_mss_for(desc, dlen, mtu);
    struct ofl_lso_limits lim = { mtu, frame };
    struct ofl_lso_cut c;
    int rc = ofl_lso_begin(&c, desc, dlen, sendbuf, SENDBUF, &lim);
    if (rc < 0) {
        if (!strcmp(ofl_lso_reason(rc), "?")) abort();
        return 0;
    }
    if (c.npkts == 0 || c.payload < sendbuf || c.payload + c.len > sendbuf + SENDBUF) abort();
    if (mode == OFL_LSO_IN_PLACE && !(c.flags & OFL_LSO_HEADROOM)) mode = OFL_LSO_BY_PIO;
    uint8_t *out = malloc(frame ? frame : 1);
    uint32_t pkts = 0;
    uint64_t carried = 0;
    while (ofl_lso_left(&c)) {
        uint32_t fl = ofl_lso_next(&c, out, mode);
        if (fl == 0 || fl > frame || fl - c.l3_off > mtu || c.kind >= OFL_LSO_KINDS) abort();
        if (mode == OFL_LSO_IN_PLACE ? c.frame < sendbuf || c.frame + fl > sendbuf + SENDBUF
                                     : c.frame != out)
            abort();
        if (mode == OFL_LSO_BY_DMA) {
            if (c.slice_dst + c.slice_len != fl) abort();
            memcpy(out + c.slice_dst, c.slice_src, c.slice_len);
            ofl_lso_seal(&c, out, fl, c.kind);
        }
        carried += c.slice_len;
        pkts++;
    }
    /* the slices are the payload only (a UDP header comes from the template) */
    if (pkts != c.npkts || carried != c.len) abort();
    free(out);
    return 0;
}
