/* libFuzzer target: the tuple frame parser and writer (tuple.h) on arbitrary bytes.
 *
 * The input is the frame (an exactly sized heap copy, so ASan catches a read past
 * `len`). A frame that parses must have its tuple inside it; its values written back
 * through ofl_tuple_write, in place and into a buffer, with the first byte of the
 * input choosing how many, must parse again to the same values, with a valid IPv4
 * header checksum. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/pkt.h"
#include "offlow/tuple.h"

static void rewrite(uint8_t *frame, uint32_t cap, const uint8_t *tmpl,
                    const struct ofl_tuple_view *tv, const int32_t *v, uint32_t n)
{
    uint32_t len = ofl_tuple_write(frame, cap, tmpl, tv, v, n);
    if (!n || n > OFL_TUPLE_MAX || tv->off + 4u * n > cap) {
        if (len) abort();
        return;
    }
    struct ofl_tuple_view again;
    if (len != tv->off + 4u * n || ofl_tuple_parse(frame, len, &again) != 0) abort();
    if (again.n != n || again.off != tv->off) abort();
    for (uint32_t k = 0; k < n; k++)
        if (ofl_tuple_v(frame, &again, k + 1u) != v[k]) abort();
    if (!ofl_ipv4_csum_ok(frame + tv->l3_off, tv->l4_off - tv->l3_off)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    struct ofl_tuple_view tv;
    int rc = ofl_tuple_parse(data, (uint32_t)size, &tv);
    if (rc != 0) {
        if (rc != OFL_TUPLE_ENOTUDP && rc != OFL_TUPLE_ESIZE) abort();
        return 0;
    }
    if (!tv.n || tv.n > OFL_TUPLE_MAX || tv.end != tv.off + 4u * tv.n || tv.end > size ||
        tv.l4_off + 8u != tv.off || tv.l3_off + 20u > tv.l4_off)
        abort();
    int32_t v[OFL_TUPLE_MAX];
    ofl_tuple_values(data, &tv, v);
    uint32_t n = (uint32_t)(data[0] % (OFL_TUPLE_MAX + 2u));   /* 0 and one too many too */
    for (uint32_t k = tv.n; k < n && k < OFL_TUPLE_MAX; k++)
        v[k] = (int32_t)(k * 2654435761u);
    uint8_t *copy = malloc(size);
    uint8_t *buf = malloc(OFL_TUPLE_FRAME_MAX);
    if (!copy || !buf) abort();
    memcpy(copy, data, size);
    rewrite(copy, (uint32_t)size, copy, &tv, v, n);          /* in place, within the frame */
    rewrite(buf, OFL_TUPLE_FRAME_MAX, data, &tv, v, n);      /* a new frame */
    free(copy);
    free(buf);
    return 0;
}
