/* libFuzzer target: a memcached datagram's keys against a store sharded over devices
 * (kvs_pkt.h: ofl_kvs_keys_span, ofl_kvs_refuse_span).
 *
 * The first input byte is the steering hash's low byte, the rest the UDP payload of
 * an Ethernet/IPv4/UDP frame (an exactly sized heap copy, the frame's room after it
 * on the heap too, so ASan sees any over-read). Every answer must be -EINVAL, 0 or 1;
 * one shard (or one instance) never spans; relabelling the shards changes nothing;
 * the refusal, when given, is framed with the request's id within the room. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/kvs_pkt.h"
#include "offlow/mcproto.h"

#define L3 14u
#define L4 34u
#define ROOM 2048u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size - 1 > ROOM - L4 - 8) return 0;
    size_t plen = size - 1, len = L4 + 8 + plen;
    uint8_t *frame = calloc(1, ROOM);
    if (!frame) return 0;
    frame[12] = 0x08;
    frame[L3] = 0x45;
    frame[L3 + 9] = 17;
    memcpy(frame + L4 + 8, data + 1, plen);
    ofl_kvs_set_lengths(frame, L3, L4, plen);
    struct ofl_pkt pkt = {.data = frame, .len = (uint32_t)len, .cap = ROOM};
    static const uint8_t two[4] = {0, 1, 0, 1}, swapped[4] = {1, 0, 1, 0}, one[4] = {0};
    uint32_t steer = data[0];
    int a = ofl_kvs_keys_span(&pkt, L4, steer, two, 4);
    int b = ofl_kvs_keys_span(&pkt, L4, steer, swapped, 4);
    int c = ofl_kvs_keys_span(&pkt, L4, steer, one, 4);
    int d = ofl_kvs_keys_span(&pkt, L4, steer, two, 1);
    if (a < -EINVAL || a > 1 || (a < 0 && a != -EINVAL)) abort();
    if (a != b) abort();                       /* which shard is called 0 does not matter */
    if (c > 0 || d > 0) abort();               /* one shard, one instance: nothing spans */
    if ((a < 0) != (c < 0)) abort();
    if (ofl_kvs_refuse_span(&pkt, L3, L4) == 0) {
        if (pkt.len > pkt.cap || pkt.len < L4 + 8 + OFL_MC_UDP_HDR_LEN) abort();
        const uint8_t *u = frame + L4 + 8;
        unsigned rid = (unsigned)(data[1] << 8 | data[2]);   /* (a datagram: 8 bytes or more) */
        if ((unsigned)(u[0] << 8 | u[1]) != rid || u[2] || u[3] || !(u[4] | u[5])) abort();
    }
    free(frame);
    return 0;
}
