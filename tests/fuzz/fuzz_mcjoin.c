/* libFuzzer target: joining a memcached UDP reply's datagrams (mcjoin.h).
 *
 * The input is a request id (2 bytes) and then datagrams, each as a 2-byte length and
 * its bytes (an exactly sized heap copy each, so ASan catches a read past its end).
 * A model kept here holds the payload of each datagram taken, by its sequence number
 * (the last one taken wins). Once the reply is whole, the joined bytes must be the
 * model's payloads in sequence order; a datagram refused must not change them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/mcjoin.h"
#include "offlow/mcproto.h"

static struct ofl_mcjoin j;                                  /* (large: not on the stack) */
static uint8_t model[OFL_MCJOIN_PARTS][OFL_MCJOIN_PART];
static size_t model_len[OFL_MCJOIN_PARTS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    ofl_mcjoin_start(&j, (uint16_t)(data[0] << 8 | data[1]));
    memset(model_len, 0, sizeof model_len);
    size_t at = 2;
    unsigned count = 0;
    int done = 0;
    while (at + 2 <= size && !done) {
        size_t len = (size_t)data[at] << 8 | data[at + 1];
        at += 2;
        if (len > size - at) len = size - at;
        uint8_t *d = malloc(len ? len : 1);
        if (!d) return 0;
        memcpy(d, data + at, len);
        at += len;
        int rc = ofl_mcjoin_take(&j, d, len);
        if (rc < -1 || rc > 1) abort();
        if (rc >= 0) {
            if (len < OFL_MC_UDP_HDR_LEN || len > OFL_MCJOIN_PART) abort();
            if ((d[0] << 8 | d[1]) != (data[0] << 8 | data[1])) abort();   /* its id */
            count = (unsigned)(d[4] << 8 | d[5]);
            if (count) {
                unsigned seq = (unsigned)(d[2] << 8 | d[3]);
                if (seq >= count) abort();
                memcpy(model[seq], d + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN);
                model_len[seq] = len - OFL_MC_UDP_HDR_LEN + 1;
            }
        }
        done = rc == 1;
        free(d);
    }
    if (!done) return 0;
    struct ofl_mc_out out = {.max = 1u << 20};
    if (ofl_mcjoin_out(&j, &out)) abort();
    size_t off = 0;
    for (unsigned i = 0; i < count; i++) {
        if (!model_len[i]) abort();   /* whole: every datagram is in */
        size_t m = model_len[i] - 1;
        if (off + m > out.len || (m && memcmp(out.buf + off, model[i], m))) abort();
        off += m;
    }
    if (off != out.len) abort();
    ofl_mc_out_free(&out);
    return 0;
}
