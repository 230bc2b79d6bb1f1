/* libFuzzer target: the NIC cache of the key-value store (kvcache.c), both sides.
 *
 * The first input byte picks the policy (bit 0: write-back), the eviction (bit 1:
 * CLOCK) and whether silent requests get header-only replies (bit 2). The rest is a
 * list of records [kind][len][len bytes]:
 *   kind & 3 == 0  the bytes are a UDP payload (memcached datagram): a request
 *   kind & 3 == 1  the store runs the oldest request in flight and the cache's update
 *                  side sees the reply (the bytes are ignored)
 *   kind & 3 == 2  the bytes are a UDP payload given to the update side as the reply
 *                  to the oldest request in flight (or, with kind bit 2, to a ticket
 *                  made of kind's high bits; with kind bit 3, to a write-back)
 *   kind & 3 == 3  the bytes are a whole frame given to the lookup side with l3/l4
 *                  offsets taken from kind's high bits
 * Each packet lives in a heap buffer of exactly its capacity, so ASan sees any access
 * past it. Checked: the return values are within the API's ranges, write-backs' replies
 * are dropped, a hit leaves a packet within its capacity. At the end everything in
 * flight is delivered and the cache flushed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/kvcache.h"
#include "offlow/kvs_pkt.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"

#define L3 14u
#define L4 34u
#define QN 16

struct flight {
    struct ofl_pkt pkt;
    uint64_t ticket;
};

struct fz {
    struct ofl_kvc *c;
    struct ofl_kv *kv;
    struct ofl_kvs store;   /* kv as a program's table (no TCP) */
    struct flight q[QN];
    int head, n;
    int header_only;
};

/* A frame around a UDP payload, in a heap buffer of `slack` more bytes. */
static struct ofl_pkt frame(const uint8_t *payload, size_t n, size_t slack)
{
    size_t len = L4 + 8 + n, cap = len + slack;
    uint8_t *d = malloc(cap);
    memset(d, 0, L4 + 8);
    d[12] = 0x08;
    d[L3] = 0x45;
    d[L3 + 8] = 64;
    d[L3 + 9] = 17;
    ofl_put_be16(d + L3 + 2, (uint16_t)(20 + 8 + n));
    ofl_put_be16(d + L4, 40000);
    ofl_put_be16(d + L4 + 2, 11211);
    ofl_put_be16(d + L4 + 4, (uint16_t)(8 + n));
    if (n) memcpy(d + L4 + 8, payload, n);
    return (struct ofl_pkt){d, (uint32_t)len, (uint32_t)cap, 0, 0};
}

static void push(struct fz *f, struct ofl_pkt pkt, uint64_t ticket)
{
    if (f->n == QN) {   /* full: the oldest is lost on the way (a drop) */
        free(f->q[f->head].pkt.data);
        f->head = (f->head + 1) % QN;
        f->n--;
    }
    struct flight *e = &f->q[(f->head + f->n++) % QN];
    e->pkt = pkt;
    e->ticket = ticket;
}

static void emit(void *arg, struct ofl_pkt *pkt, uint64_t hash)
{
    (void)hash;
    struct fz *f = arg;
    uint8_t *d = malloc(2048);
    if (pkt->len > 2048) abort();
    memcpy(d, pkt->data, pkt->len);
    push(f, (struct ofl_pkt){d, pkt->len, 2048, 0, 0}, OFL_KVC_INTERNAL);
}

static void request(struct fz *f, struct ofl_pkt pkt, uint32_t l3, uint32_t l4)
{
    uint64_t t = 12345;
    int rc = ofl_kvc_request(f->c, &pkt, l3, l4, &t, emit, f);
    if (pkt.len > pkt.cap) abort();
    if (rc == OFL_KVC_MISS && l3 == L3 && l4 == L4) {
        push(f, pkt, t);
        return;
    }
    if (rc != OFL_KVC_HIT && rc != OFL_KVC_MISS && rc >= 0) abort();
    if (rc != OFL_KVC_MISS && t != 0) abort();
    free(pkt.data);
}

static void deliver(struct fz *f)
{
    if (!f->n) return;
    struct flight e = f->q[f->head];
    f->head = (f->head + 1) % QN;
    f->n--;
    int rc = ofl_kvs_reply(&f->store, &e.pkt, L3, L4, e.ticket == OFL_KVC_INTERNAL);
    if (rc == OFL_KVS_NONE && f->header_only) {
        ofl_put_be16(e.pkt.data + L4 + 4, 16);
        e.pkt.len = L4 + 16;
        rc = 0;
    }
    if (ofl_kvs_sends(rc)) {
        int r = ofl_kvc_reply(f->c, &e.pkt, L3, L4, rc == OFL_KVS_SEND_EXPIRING, e.ticket);
        if (r != (e.ticket == OFL_KVC_INTERNAL)) abort();
    }
    free(e.pkt.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct fz f;
    memset(&f, 0, sizeof f);
    struct ofl_kvc_config cfg = {8, 2, 32,
                                 data[0] & 1 ? OFL_KVC_WRITE_BACK : OFL_KVC_WRITE_THROUGH,
                                 data[0] & 2 ? OFL_KVC_CLOCK : OFL_KVC_LRU};
    struct ofl_kv_config kcfg = {64, 0, 1400, 0};
    if (ofl_kvc_create(&f.c, &cfg) || ofl_kv_create(&f.kv, &kcfg)) abort();
    f.store.kv = f.kv;
    f.store.value_max = kcfg.value_max;
    f.header_only = data[0] >> 2 & 1;
    size_t i = 1;
    while (i + 2 <= size) {
        uint8_t kind = data[i], len = data[i + 1];
        i += 2;
        size_t n = len < size - i ? len : size - i;
        const uint8_t *b = data + i;
        i += n;
        switch (kind & 3) {
        case 0: request(&f, frame(b, n, kind >> 2), L3, L4); break;
        case 1: deliver(&f); break;
        case 2: {
            struct ofl_pkt p = frame(b, n, 0);
            uint64_t t = kind & 8   ? OFL_KVC_INTERNAL
                         : kind & 4 ? ((uint64_t)(kind >> 6) << 32 | (kind >> 4 & 3))
                         : f.n      ? f.q[f.head].ticket
                                    : 0;
            int r = ofl_kvc_reply(f.c, &p, L3, L4, kind >> 7 & 1, t);
            if (r != (t == OFL_KVC_INTERNAL)) abort();
            free(p.data);
            break;
        }
        default: {
            uint8_t *d = malloc(n ? n : 1);
            if (n) memcpy(d, b, n);
            request(&f, (struct ofl_pkt){d, (uint32_t)n, (uint32_t)n, 0, 0}, (kind >> 2) & 31,
                    (uint32_t)(kind >> 7) * 20 + ((kind >> 2) & 31) + 20);
            break;
        }
        }
    }
    while (f.n) deliver(&f);
    struct ofl_pkt tmpl = frame(NULL, 0, 0);
    if (ofl_kvc_flush(f.c, emit, &f, &tmpl, L3, L4) < 0) abort();
    free(tmpl.data);
    while (f.n) deliver(&f);
    ofl_kvc_destroy(f.c);
    ofl_kv_destroy(f.kv);
    return 0;
}
