/* The NIC cache of the key-value store (see kvcache.h and docs/kvs.md). */
#include "offlow/kvcache.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/gen.h"
#include "offlow/kvs_pkt.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"
#include "offlow/spin.h"

#define NIL UINT32_MAX
#define CACHE_CAS_BIT (1ull << 63)   /* CAS values the cache assigns (write-back SETs) */
#define REPLY_MAX (OFL_MC_UDP_DGRAM_MAX - OFL_MC_UDP_HDR_LEN)
/* In-flight write-back buckets (a write-back's request id is its bucket). */
#define WB_BUCKETS 4096u
/* A write-back packet: headers, frame header, binary SETQ (24 + 8 extras), key, value. */
#define WB_BUF (OFL_KVC_HDRS_MAX + OFL_MC_UDP_HDR_LEN + OFL_MC_HDR_LEN + 8 + OFL_KV_KEY_MAX + \
                OFL_KVC_VALUE_MAX)

enum { ST_FREE = 0, ST_PEND_FILL, ST_PEND_SET, ST_CLEAN, ST_DIRTY };
/* The request behind a pending-set reservation (how to read a header-only reply). */
enum { PEND_TEXT = 1, PEND_QUIET = 2 };

struct slot {
    uint64_t hash;
    uint64_t cas;
    uint64_t stamp;       /* LRU: the set's tick at the last use */
    uint32_t seq;         /* sequence of the current reservation (never 0) */
    uint32_t flags;
    uint32_t value_len;
    uint8_t state;
    uint8_t has_cas;      /* 0: filled from a text reply or a quiet SET: CAS unknown */
    uint8_t key_len;
    uint8_t ref;          /* CLOCK reference bit */
    uint8_t pend;         /* PEND_* of a pending-set entry */
};

struct set {
    _Alignas(64) atomic_uint lock;
    uint32_t hand;        /* CLOCK hand (way index) */
    uint64_t tick;        /* LRU clock */
};

struct ofl_kvc {
    struct set *sets;
    struct slot *slots;
    uint8_t *keys;        /* nslots x OFL_KV_KEY_MAX */
    uint8_t *values;      /* nslots x value_max */
    uint32_t nsets, ways, nslots, value_max;
    int policy, eviction;
    /* lookup side */
    _Alignas(64) _Atomic uint64_t cas_next;
    _Atomic uint64_t hits, misses, bypass, evictions, writebacks, invalidations, drops;
    _Atomic uint64_t refused, flushed;
    /* update side */
    _Alignas(64) _Atomic uint64_t fills, stale_fills, uncached, wb_errors;
    /* write-backs on their way to the store, by key-hash bucket (the bucket is the
     * write-back datagram's request id, which its reply carries back) */
    _Atomic uint32_t inflight[WB_BUCKETS];
    /* the headers of the first request seen: the template of the write-backs made
     * when the run stops (ofl_kvc_finish); tmpl_state 0 empty, 1 being written, 2 set */
    _Atomic int tmpl_state;
    uint32_t tmpl_l3, tmpl_l4;
    uint8_t tmpl[OFL_KVC_HDRS_MAX];
};

/* The in-flight bucket of a key hash. */
static uint32_t bucket_of(uint64_t hash)
{
    return (uint32_t)(hash >> 40) % WB_BUCKETS;
}

static inline void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- locks, sets, slots ------------------------------------------------------- */

static void lock(struct set *s) { ofl_spin_lock(&s->lock); }

static void unlock(struct set *s) { ofl_spin_unlock(&s->lock); }

static uint32_t set_of(const struct ofl_kvc *c, uint64_t hash)
{
    return (uint32_t)(((hash >> 32) * (uint64_t)c->nsets) >> 32);
}

static uint8_t *key_of(const struct ofl_kvc *c, uint32_t i)
{
    return c->keys + (size_t)i * OFL_KV_KEY_MAX;
}

static uint8_t *value_of(const struct ofl_kvc *c, uint32_t i)
{
    return c->values + (size_t)i * c->value_max;
}

static uint64_t ticket_of(const struct ofl_kvc *c, uint32_t i)
{
    return (uint64_t)i << 32 | c->slots[i].seq;
}

/* A new reservation of slot i: the tickets of the older ones stop matching. */
static void new_seq(struct slot *s)
{
    if (++s->seq == 0) s->seq = 1;
}

/* Slot of `key` in set `si` (locked), or NIL. */
static uint32_t find(const struct ofl_kvc *c, uint32_t si, const uint8_t *key, uint32_t klen,
                     uint64_t hash)
{
    uint32_t base = si * c->ways;
    for (uint32_t w = 0; w < c->ways; w++) {
        const struct slot *s = &c->slots[base + w];
        if (s->state != ST_FREE && s->hash == hash && s->key_len == klen &&
            !memcmp(key_of(c, base + w), key, klen))
            return base + w;
    }
    return NIL;
}

static void touch(struct ofl_kvc *c, uint32_t i)
{
    struct slot *s = &c->slots[i];
    s->stamp = ++c->sets[i / c->ways].tick;
    s->ref = 1;
}

/* The slot to (re)use in set `si` (locked): a free one, else LRU's or CLOCK's victim. */
static uint32_t victim(struct ofl_kvc *c, uint32_t si)
{
    uint32_t base = si * c->ways;
    for (uint32_t w = 0; w < c->ways; w++)
        if (c->slots[base + w].state == ST_FREE) return base + w;
    if (c->eviction == OFL_KVC_CLOCK) {
        struct set *st = &c->sets[si];
        for (uint32_t n = 0; n < 2 * c->ways; n++) {
            uint32_t i = base + st->hand;
            st->hand = st->hand + 1 == c->ways ? 0 : st->hand + 1;
            if (!c->slots[i].ref) return i;
            c->slots[i].ref = 0;
        }
        return base + st->hand;   /* not reached: the first pass cleared every bit */
    }
    uint32_t best = base;
    for (uint32_t w = 1; w < c->ways; w++)
        if (c->slots[base + w].stamp < c->slots[best].stamp) best = base + w;
    return best;
}

/* ---- packets ------------------------------------------------------------------ */

/* The UDP payload of `pkt`, or NULL when the headers do not fit (an IPv4 header of at
 * least 20 bytes before the UDP one). */
static const uint8_t *udp_payload(const struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                                  size_t *len)
{
    if (l4_off < l3_off || l4_off - l3_off < 20) return NULL;
    return ofl_kvs_udp_payload(pkt, l4_off, len);
}

/* Turn `pkt` into the reply datagram: frame header (request id `id`) and `n` bytes
 * of `body`, addresses and ports swapped, as ofl_kvs_reply does. The caller checked
 * that it fits pkt->cap. */
static void put_reply(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off, uint16_t id,
                      const uint8_t *body, size_t n)
{
    uint8_t *d = pkt->data;
    ofl_kvs_swap_addrs(d, l3_off, l4_off);
    uint8_t *p = d + l4_off + 8;
    ofl_mc_udp_write(p, id, 0, 1);
    if (n) memcpy(p + OFL_MC_UDP_HDR_LEN, body, n);
    ofl_kvs_set_lengths(d, l3_off, l4_off, OFL_MC_UDP_HDR_LEN + n);
    pkt->len = (uint32_t)(l4_off + 8 + OFL_MC_UDP_HDR_LEN + n);
}

static int reply_fits(const struct ofl_pkt *pkt, uint32_t l4_off, size_t n)
{
    return (size_t)l4_off + 8 + OFL_MC_UDP_HDR_LEN + n <= pkt->cap;
}

/* A write-back waiting to be emitted (built under the set lock, sent after it). */
struct wb {
    struct ofl_pkt pkt;
    uint64_t hash;
    int ready;
    uint8_t buf[WB_BUF];
};

/* Build into `wb` a binary SETQ (set, with the CAS we gave the item: dirty entries
 * always have one) or DELETEQ of slot i's item with the headers of `tmpl`
 * (l4_off + 8 <= OFL_KVC_HDRS_MAX, checked by the callers), its request id the
 * key's in-flight bucket. */
static void build_wb(struct ofl_kvc *c, struct wb *wb, uint32_t i, int set,
                     const uint8_t *tmpl, uint32_t l3_off, uint32_t l4_off)
{
    const struct slot *s = &c->slots[i];
    uint32_t hdrs = l4_off + 8;
    memcpy(wb->buf, tmpl, hdrs);
    ofl_mc_udp_write(wb->buf + hdrs, (uint16_t)bucket_of(s->hash), 0, 1);
    uint8_t extras[8];
    ofl_put_be32(extras, s->flags);
    ofl_put_be32(extras + 4, 0);
    size_t off = hdrs + OFL_MC_UDP_HDR_LEN;
    ssize_t n = ofl_mc_write_request(wb->buf + off, sizeof wb->buf - off,
                                     set ? OFL_MC_OP_SETQ : OFL_MC_OP_DELETEQ, 0,
                                     set ? s->cas : 0,
                                     set ? extras : NULL, set ? 8 : 0, key_of(c, i), s->key_len,
                                     set ? value_of(c, i) : NULL, set ? s->value_len : 0);
    if (n < 0) return;   /* not reached: WB_BUF holds the largest one */
    ofl_kvs_set_lengths(wb->buf, l3_off, l4_off, OFL_MC_UDP_HDR_LEN + (size_t)n);
    wb->pkt.data = wb->buf;
    wb->pkt.len = (uint32_t)(off + (size_t)n);
    wb->pkt.cap = (uint32_t)sizeof wb->buf;
    wb->pkt.ts_ns = 0;
    wb->hash = s->hash;
    wb->ready = 1;
}

static void send_wb(struct ofl_kvc *c, struct wb *wb, ofl_kvc_emit emit, void *arg)
{
    if (!wb->ready) return;
    wb->ready = 0;
    count(&c->writebacks);
    atomic_fetch_add_explicit(&c->inflight[bucket_of(wb->hash)], 1, memory_order_release);
    emit(arg, &wb->pkt, wb->hash);
}

/* Empty slot i (set locked); a dirty item is written back into `wb` first. */
static void drop_slot(struct ofl_kvc *c, uint32_t i, struct wb *wb, const uint8_t *tmpl,
                      uint32_t l3_off, uint32_t l4_off)
{
    struct slot *s = &c->slots[i];
    if (s->state == ST_DIRTY) build_wb(c, wb, i, 1, tmpl, l3_off, l4_off);
    s->state = ST_FREE;
    s->ref = 0;
    s->stamp = 0;
}

/* Make room for a new item of `hash` in set si (locked): returns the slot, now
 * free, after evicting its item (a dirty one is written back into `wb`). */
static uint32_t claim(struct ofl_kvc *c, uint32_t si, struct wb *wb, const uint8_t *tmpl,
                      uint32_t l3_off, uint32_t l4_off)
{
    uint32_t i = victim(c, si);
    if (c->slots[i].state != ST_FREE) {
        count(&c->evictions);
        drop_slot(c, i, wb, tmpl, l3_off, l4_off);
    }
    return i;
}

static void set_key(struct ofl_kvc *c, uint32_t i, const uint8_t *key, uint32_t klen,
                    uint64_t hash)
{
    struct slot *s = &c->slots[i];
    memcpy(key_of(c, i), key, klen);
    s->key_len = (uint8_t)klen;
    s->hash = hash;
}

/* Drop the entry of one key (writing it back first if dirty): the requests that
 * the cache does not serve go to the store, which must see the latest value. */
static void invalidate(struct ofl_kvc *c, const uint8_t *key, uint32_t klen,
                       const struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                       ofl_kvc_emit emit, void *arg, struct wb *wb)
{
    if (!klen || klen > OFL_KV_KEY_MAX) return;
    uint64_t hash = ofl_kv_hash(key, klen);
    uint32_t si = set_of(c, hash);
    lock(&c->sets[si]);
    uint32_t i = find(c, si, key, klen, hash);
    if (i != NIL) {
        count(&c->invalidations);
        drop_slot(c, i, wb, pkt->data, l3_off, l4_off);
    }
    unlock(&c->sets[si]);
    send_wb(c, wb, emit, arg);
}

/* Call fn(c, key, klen, arg) for every key of every request of the datagram `d`
 * (frame header excluded), walked as ofl_kv_exec_udp walks it (a meta command's
 * base64 key decoded); stops early when fn returns nonzero, and returns that. */
static int each_key(struct ofl_kvc *c, const uint8_t *d, size_t dlen,
                    int (*fn)(struct ofl_kvc *c, const uint8_t *key, uint32_t klen, void *arg),
                    void *arg)
{
    struct ofl_mc_limits lim = ofl_mc_default_limits();
    enum ofl_mc_proto proto = OFL_MC_ANY;
    size_t off = 0;
    while (off < dlen) {
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(d + off, dlen - off, proto, &lim, &req);
        proto = (enum ofl_mc_proto)req.proto;
        if (r == 0) break;
        if (r < 0) {
            if (req.fatal) break;
            off = req.len < dlen - off ? off + req.len : dlen;
            continue;
        }
        int rc = 0;
        int multi = req.proto == OFL_MC_TEXT &&
                    (req.cmd == OFL_MC_CMD_GET || req.cmd == OFL_MC_CMD_GETS ||
                     req.cmd == OFL_MC_CMD_GAT || req.cmd == OFL_MC_CMD_GATS);
        if (multi) {
            const uint8_t *pos = req.keys, *end = req.keys + req.keys_len, *key;
            uint32_t klen;
            while (!rc && ofl_mc_next_key(&pos, end, &key, &klen)) rc = fn(c, key, klen, arg);
        } else if (req.key_len && req.key_b64) {
            uint8_t key[OFL_MC_KEY_MAX];
            size_t klen = ofl_mc_key_decode(req.key, req.key_len, key);
            if (klen) rc = fn(c, key, (uint32_t)klen, arg);
        } else if (req.key_len) {
            rc = fn(c, req.key, req.key_len, arg);
        }
        if (rc) return rc;
        off += (size_t)r;
    }
    return 0;
}

/* What invalidate_one needs besides the key. */
struct inv {
    const struct ofl_pkt *pkt;
    uint32_t l3_off, l4_off;
    ofl_kvc_emit emit;
    void *arg;
    struct wb *wb;
};

static int invalidate_one(struct ofl_kvc *c, const uint8_t *key, uint32_t klen, void *arg)
{
    const struct inv *v = arg;
    invalidate(c, key, klen, v->pkt, v->l3_off, v->l4_off, v->emit, v->arg, v->wb);
    return 0;
}

/* Every key of every request of the datagram `d` is dropped from the cache (dirty
 * ones written back first). */
static void invalidate_all(struct ofl_kvc *c, const uint8_t *d, size_t dlen,
                           const struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                           ofl_kvc_emit emit, void *arg, struct wb *wb)
{
    struct inv v = {pkt, l3_off, l4_off, emit, arg, wb};
    each_key(c, d, dlen, invalidate_one, &v);
}

/* The key the datagram is steered by (its first request's, as KeyHash hashes it;
 * none when that request has no key). */
struct first_key {
    const uint8_t *key;
    uint32_t klen;
};

/* A key other than the steering key whose write-back has not come back from the
 * store: the request, steered to the first key's host core, could pass it there
 * (the steering key's own write-backs go ahead of it on its core). */
static int passes_write_back(struct ofl_kvc *c, const uint8_t *key, uint32_t klen, void *arg)
{
    const struct first_key *f = arg;
    if (f->key && klen == f->klen && !memcmp(key, f->key, klen)) return 0;
    uint32_t b = bucket_of(ofl_kv_hash(key, klen));
    return atomic_load_explicit(&c->inflight[b], memory_order_acquire) != 0;
}

/* Answer the datagram with memcached's temporary-failure reply (binary ETMPFAIL for
 * its first request, text SERVER_ERROR): a multi-key request that names a key being
 * written back, refused rather than run ahead of the write-back. */
static void refuse(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off, uint16_t id,
                   const uint8_t *d, size_t dlen)
{
    struct ofl_mc_req req;
    ofl_mc_parse(d, dlen, OFL_MC_ANY, NULL, &req);
    uint8_t out[128];
    ssize_t n = req.proto == OFL_MC_BINARY
                    ? ofl_mc_write_status(out, sizeof out, req.opcode, req.opaque,
                                          OFL_MC_ST_ETMPFAIL)
                    : ofl_mc_write_text_line(out, sizeof out, OFL_KVC_BUSY_TEXT);
    put_reply(pkt, l3_off, l4_off, id, out, n > 0 ? (size_t)n : 0);
}

/* Keep the headers of the first request as the template of the write-backs made when
 * the run stops. */
static void keep_template(struct ofl_kvc *c, const struct ofl_pkt *pkt, uint32_t l3_off,
                          uint32_t l4_off)
{
    int empty = 0;
    if (atomic_load_explicit(&c->tmpl_state, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong(&c->tmpl_state, &empty, 1))
        return;
    memcpy(c->tmpl, pkt->data, (size_t)l4_off + 8);
    c->tmpl_l3 = l3_off;
    c->tmpl_l4 = l4_off;
    atomic_store_explicit(&c->tmpl_state, 2, memory_order_release);
}

/* ---- lookup side ------------------------------------------------------------------ */

static int cacheable(const struct ofl_kvc *c, const struct ofl_mc_req *req)
{
    if (!req->key_len || req->key_len > OFL_KV_KEY_MAX) return 0;
    switch (req->cmd) {
    case OFL_MC_CMD_GET: return req->nkeys == 1;
    case OFL_MC_CMD_SET:
        return req->cas == 0 && req->exptime == 0 && req->value_len <= c->value_max;
    case OFL_MC_CMD_DELETE: return req->cas == 0;
    default: return 0;
    }
}

/* The reply to a GET hit of slot i into `out` (REPLY_MAX bytes). */
static ssize_t write_hit(const struct ofl_kvc *c, uint32_t i, const struct ofl_mc_req *req,
                         uint8_t *out)
{
    const struct slot *s = &c->slots[i];
    if (req->proto == OFL_MC_TEXT) {
        ssize_t n = ofl_mc_write_text_value(out, REPLY_MAX, key_of(c, i), s->key_len, s->flags,
                                            value_of(c, i), s->value_len, 0, 0);
        if (n < 0) return n;
        ssize_t m = ofl_mc_write_text_line(out + n, REPLY_MAX - (size_t)n, "END");
        return m < 0 ? m : n + m;
    }
    uint8_t extras[4];
    ofl_put_be32(extras, s->flags);
    return ofl_mc_write_response(out, REPLY_MAX, req->opcode, OFL_MC_ST_OK, req->opaque, s->cas,
                                 extras, 4, req->want_key ? key_of(c, i) : NULL,
                                 req->want_key ? s->key_len : 0, value_of(c, i), s->value_len);
}

static int do_get(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  uint16_t id, const struct ofl_mc_req *req, uint64_t *ticket,
                  ofl_kvc_emit emit, void *arg, struct wb *wb)
{
    uint64_t hash = ofl_kv_hash(req->key, req->key_len);
    uint32_t si = set_of(c, hash);
    struct set *st = &c->sets[si];
    uint8_t out[REPLY_MAX];
    lock(st);
    uint32_t i = find(c, si, req->key, req->key_len, hash);
    struct slot *s = i == NIL ? NULL : &c->slots[i];
    if (s && (s->state == ST_CLEAN || s->state == ST_DIRTY) &&
        (req->proto == OFL_MC_TEXT || s->has_cas)) {
        ssize_t n = write_hit(c, i, req, out);
        if (n >= 0 && reply_fits(pkt, l4_off, (size_t)n)) {
            touch(c, i);
            unlock(st);
            count(&c->hits);
            put_reply(pkt, l3_off, l4_off, id, out, (size_t)n);
            return OFL_KVC_HIT;
        }
        /* The packet cannot hold the reply: let the store answer. */
        count(&c->invalidations);
        drop_slot(c, i, wb, pkt->data, l3_off, l4_off);
        unlock(st);
        send_wb(c, wb, emit, arg);
        count(&c->bypass);
        return OFL_KVC_MISS;
    }
    if (s && s->state == ST_PEND_SET) {   /* the SET's reply makes it valid */
        unlock(st);
        count(&c->misses);
        return OFL_KVC_MISS;
    }
    if (!s) {
        i = claim(c, si, wb, pkt->data, l3_off, l4_off);
        s = &c->slots[i];
        set_key(c, i, req->key, req->key_len, hash);
        s->state = ST_FREE;
    }
    if (s->state != ST_PEND_FILL) {   /* new, or valid without a CAS for a binary GET */
        new_seq(s);
        s->state = ST_PEND_FILL;
        s->has_cas = 0;
        touch(c, i);
    }
    *ticket = ticket_of(c, i);
    unlock(st);
    send_wb(c, wb, emit, arg);
    count(&c->misses);
    return OFL_KVC_MISS;
}

/* The STORED / DELETED reply of a write-back SET or DELETE into `out`. */
static size_t write_ack(const struct ofl_mc_req *req, uint8_t *out, uint64_t cas)
{
    if (req->quiet) return 0;   /* SETQ/DELETEQ, noreply: a header-only datagram */
    int del = req->cmd == OFL_MC_CMD_DELETE;
    ssize_t n = req->proto == OFL_MC_TEXT
                    ? ofl_mc_write_text_line(out, REPLY_MAX, del ? "DELETED" : "STORED")
                    : ofl_mc_write_response(out, REPLY_MAX, req->opcode, OFL_MC_ST_OK,
                                            req->opaque, cas, NULL, 0, NULL, 0, NULL, 0);
    return n < 0 ? 0 : (size_t)n;
}

static int do_set(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  uint16_t id, const struct ofl_mc_req *req, uint64_t *ticket,
                  ofl_kvc_emit emit, void *arg, struct wb *wb)
{
    uint8_t out[OFL_MC_HDR_LEN + 16];
    int back = c->policy == OFL_KVC_WRITE_BACK;
    uint64_t cas = 0;
    size_t n = 0;
    if (back) {
        cas = CACHE_CAS_BIT | atomic_fetch_add_explicit(&c->cas_next, 1, memory_order_relaxed);
        n = write_ack(req, out, cas);
        if (!reply_fits(pkt, l4_off, n)) {   /* cannot answer: let the store do it */
            invalidate(c, req->key, req->key_len, pkt, l3_off, l4_off, emit, arg, wb);
            count(&c->bypass);
            return OFL_KVC_MISS;
        }
    }
    uint64_t hash = ofl_kv_hash(req->key, req->key_len);
    uint32_t si = set_of(c, hash);
    struct set *st = &c->sets[si];
    lock(st);
    uint32_t i = find(c, si, req->key, req->key_len, hash);
    if (i == NIL) {
        i = claim(c, si, wb, pkt->data, l3_off, l4_off);
        set_key(c, i, req->key, req->key_len, hash);
    }
    struct slot *s = &c->slots[i];
    new_seq(s);
    if (req->value_len) memcpy(value_of(c, i), req->value, req->value_len);
    s->value_len = req->value_len;
    s->flags = req->flags;
    touch(c, i);
    if (back) {
        s->state = ST_DIRTY;
        s->cas = cas;
        s->has_cas = 1;
        unlock(st);
        send_wb(c, wb, emit, arg);
        count(&c->hits);
        put_reply(pkt, l3_off, l4_off, id, out, n);
        return OFL_KVC_HIT;
    }
    s->state = ST_PEND_SET;
    s->has_cas = 0;
    s->pend = (uint8_t)((req->proto == OFL_MC_TEXT ? PEND_TEXT : 0) |
                        (req->quiet ? PEND_QUIET : 0));
    *ticket = ticket_of(c, i);
    unlock(st);
    send_wb(c, wb, emit, arg);
    count(&c->misses);
    return OFL_KVC_MISS;
}

static int do_delete(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                     uint16_t id, const struct ofl_mc_req *req, ofl_kvc_emit emit, void *arg,
                     struct wb *wb)
{
    uint8_t out[OFL_MC_HDR_LEN + 16];
    size_t n = write_ack(req, out, 0);
    uint64_t hash = ofl_kv_hash(req->key, req->key_len);
    uint32_t si = set_of(c, hash);
    struct set *st = &c->sets[si];
    lock(st);
    uint32_t i = find(c, si, req->key, req->key_len, hash);
    int hit = 0;
    if (i != NIL) {
        count(&c->invalidations);
        if (c->slots[i].state == ST_DIRTY && reply_fits(pkt, l4_off, n)) {
            /* The cache answers; the store may hold an older copy: delete it too. */
            build_wb(c, wb, i, 0, pkt->data, l3_off, l4_off);
            c->slots[i].state = ST_FREE;
            c->slots[i].ref = 0;
            c->slots[i].stamp = 0;
            hit = 1;
        } else {
            drop_slot(c, i, wb, pkt->data, l3_off, l4_off);
        }
    }
    unlock(st);
    send_wb(c, wb, emit, arg);
    if (!hit) {
        count(&c->misses);
        return OFL_KVC_MISS;
    }
    count(&c->hits);
    put_reply(pkt, l3_off, l4_off, id, out, n);
    return OFL_KVC_HIT;
}

int ofl_kvc_request(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                    uint64_t *ticket, ofl_kvc_emit emit, void *arg)
{
    *ticket = 0;
    size_t len;
    const uint8_t *p = udp_payload(pkt, l3_off, l4_off, &len);
    if (!p || (c->policy == OFL_KVC_WRITE_BACK &&
               (!emit || (size_t)l4_off + 8 > OFL_KVC_HDRS_MAX))) {
        count(&c->drops);
        return p && emit ? -EMSGSIZE : -EINVAL;
    }
    if (c->policy == OFL_KVC_WRITE_BACK) keep_template(c, pkt, l3_off, l4_off);
    struct ofl_mc_udp_hdr h;
    if (ofl_mc_udp_parse(p, len, &h) < 0) {   /* the store drops it */
        count(&c->bypass);
        return OFL_KVC_MISS;
    }
    const uint8_t *d = p + OFL_MC_UDP_HDR_LEN;
    size_t dlen = len - OFL_MC_UDP_HDR_LEN;
    struct ofl_mc_limits lim = ofl_mc_default_limits();
    struct ofl_mc_req req;
    ssize_t r = ofl_mc_parse(d, dlen, OFL_MC_ANY, &lim, &req);
    struct wb wb;
    wb.ready = 0;
    if (r > 0 && (size_t)r == dlen && cacheable(c, &req)) {
        switch (req.cmd) {
        case OFL_MC_CMD_GET:
            return do_get(c, pkt, l3_off, l4_off, h.request_id, &req, ticket, emit, arg, &wb);
        case OFL_MC_CMD_SET:
            return do_set(c, pkt, l3_off, l4_off, h.request_id, &req, ticket, emit, arg, &wb);
        default:
            return do_delete(c, pkt, l3_off, l4_off, h.request_id, &req, emit, arg, &wb);
        }
    }
    invalidate_all(c, d, dlen, pkt, l3_off, l4_off, emit, arg, &wb);
    if (c->policy == OFL_KVC_WRITE_BACK) {
        struct first_key f = {NULL, 0};
        uint8_t fk[OFL_MC_KEY_MAX];
        if (r > 0 && req.key_len) {
            f.key = req.key;
            f.klen = req.key_len;
            if (req.key_b64) {
                f.klen = (uint32_t)ofl_mc_key_decode(req.key, req.key_len, fk);
                f.key = fk;
            }
        }
        if (each_key(c, d, dlen, passes_write_back, &f) &&
            reply_fits(pkt, l4_off, sizeof OFL_KVC_BUSY_TEXT + OFL_MC_HDR_LEN + 24)) {
            refuse(pkt, l3_off, l4_off, h.request_id, d, dlen);
            count(&c->refused);
            return OFL_KVC_HIT;
        }
    }
    count(&c->bypass);
    /* a stats request alone: its answer comes back with the cache's counters added */
    if (r > 0 && (size_t)r == dlen && req.cmd == OFL_MC_CMD_STATS && req.args_len == 0)
        *ticket = OFL_KVC_STATS;
    return OFL_KVC_MISS;
}

/* ---- update side ------------------------------------------------------------------ */

/* Parse a decimal number at b[*i] (1..20 digits, no overflow). */
static int parse_u(const uint8_t *b, size_t n, size_t *i, uint64_t *v)
{
    size_t j = *i;
    uint64_t x = 0;
    while (j < n && b[j] >= '0' && b[j] <= '9' && j - *i < 20) {
        uint64_t d = (uint64_t)(b[j] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
        j++;
    }
    if (j == *i) return -1;
    *i = j;
    *v = x;
    return 0;
}

/* A text reply to "get <key>": 1 and the value's views for exactly
 * "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n", 0 for "END\r\n", -1 else. */
static int parse_text_value(const uint8_t *b, size_t n, const uint8_t *key, uint32_t klen,
                            uint32_t *flags, const uint8_t **val, size_t *vlen)
{
    if (n == 5 && !memcmp(b, "END\r\n", 5)) return 0;
    if (n < 6 || memcmp(b, "VALUE ", 6)) return -1;
    size_t i = 6;
    if (n - i < (size_t)klen + 1 || memcmp(b + i, key, klen) || b[i + klen] != ' ') return -1;
    i += (size_t)klen + 1;
    uint64_t f, l;
    if (parse_u(b, n, &i, &f) || f > UINT32_MAX || i >= n || b[i] != ' ') return -1;
    i++;
    if (parse_u(b, n, &i, &l) || l > n) return -1;
    if (n - i < 2 || b[i] != '\r' || b[i + 1] != '\n') return -1;
    i += 2;
    if (n - i != l + 7 || memcmp(b + i + l, "\r\nEND\r\n", 7)) return -1;
    *flags = (uint32_t)f;
    *val = b + i;
    *vlen = (size_t)l;
    return 1;
}

static void release(struct slot *s)
{
    s->state = ST_FREE;
    s->ref = 0;
    s->stamp = 0;
}

static void fill(struct ofl_kvc *c, uint32_t i, const uint8_t *val, size_t vlen, uint32_t flags,
                 uint64_t cas)
{
    struct slot *s = &c->slots[i];
    if (vlen) memcpy(value_of(c, i), val, vlen);
    s->value_len = (uint32_t)vlen;
    s->flags = flags;
    s->cas = cas;
    s->has_cas = cas != 0;
    s->state = ST_CLEAN;
    count(&c->fills);
}

static int is_get_op(uint8_t op)
{
    return op == OFL_MC_OP_GET || op == OFL_MC_OP_GETQ || op == OFL_MC_OP_GETK ||
           op == OFL_MC_OP_GETKQ;
}

/* The store's reply `b` (n bytes, frame header excluded) to the GET(s) of pending
 * slot i (locked); `filled`: the slot was already filled by this reservation (two
 * GETs shared it): only a CAS it lacked is taken. */
static void on_get_reply(struct ofl_kvc *c, uint32_t i, const uint8_t *b, size_t n, int filled)
{
    struct slot *s = &c->slots[i];
    if (n && b[0] == OFL_MC_RES_MAGIC) {
        struct ofl_mc_res res;
        ssize_t r = ofl_mc_parse_response(b, n, &res, NULL);
        int ok = r > 0 && (size_t)r == n && is_get_op(res.opcode) &&
                 res.status == OFL_MC_ST_OK && res.extras_len == 4 &&
                 res.value_len <= c->value_max &&
                 (!res.key_len ||
                  (res.key_len == s->key_len && !memcmp(res.key, key_of(c, i), s->key_len)));
        if (filled) {
            if (ok && !s->has_cas && res.cas && res.value_len == s->value_len &&
                !memcmp(res.value, value_of(c, i), s->value_len)) {
                s->cas = res.cas;
                s->has_cas = 1;
            }
        } else if (ok) {
            fill(c, i, res.value, res.value_len, ofl_get_be32(res.extras), res.cas);
        } else {
            release(s);
        }
        return;
    }
    if (filled) return;
    uint32_t flags;
    const uint8_t *val;
    size_t vlen;
    if (n && parse_text_value(b, n, key_of(c, i), s->key_len, &flags, &val, &vlen) == 1 &&
        vlen <= c->value_max)
        fill(c, i, val, vlen, flags, 0);
    else
        release(s);   /* a miss (NOT_FOUND, END, a quiet GET's empty reply) or junk */
}

/* The store's reply to the SET of pending-set slot i (locked). */
static void on_set_reply(struct ofl_kvc *c, uint32_t i, const uint8_t *b, size_t n)
{
    struct slot *s = &c->slots[i];
    if (n == 0) {
        /* SETQ succeeded; a text noreply SET says nothing either way. */
        if (s->pend & PEND_TEXT) {
            release(s);
        } else {
            s->state = ST_CLEAN;
            s->has_cas = 0;
            count(&c->fills);
        }
        return;
    }
    if (b[0] == OFL_MC_RES_MAGIC) {
        struct ofl_mc_res res;
        ssize_t r = ofl_mc_parse_response(b, n, &res, NULL);
        if (r > 0 && (size_t)r == n && res.status == OFL_MC_ST_OK &&
            (res.opcode == OFL_MC_OP_SET || res.opcode == OFL_MC_OP_SETQ)) {
            s->state = ST_CLEAN;
            s->cas = res.cas;
            s->has_cas = res.cas != 0;
            count(&c->fills);
        } else {
            release(s);
        }
        return;
    }
    if (n == 8 && !memcmp(b, "STORED\r\n", 8)) {
        s->state = ST_CLEAN;
        s->has_cas = 0;
        count(&c->fills);
    } else {
        release(s);
    }
}

/* Replies to write-backs: count the errors (deleting a key the store lacks is fine). */
static void on_wb_reply(struct ofl_kvc *c, uint16_t rid, const uint8_t *b, size_t n)
{
    _Atomic uint32_t *f = &c->inflight[rid % WB_BUCKETS];
    uint32_t v = atomic_load_explicit(f, memory_order_relaxed);
    while (v && !atomic_compare_exchange_weak_explicit(f, &v, v - 1, memory_order_release,
                                                       memory_order_relaxed)) {}
    size_t off = 0;
    while (off < n) {
        struct ofl_mc_res res;
        ssize_t r = ofl_mc_parse_response(b + off, n - off, &res, NULL);
        if (r <= 0) {
            count(&c->wb_errors);
            return;
        }
        int del = res.opcode == OFL_MC_OP_DELETE || res.opcode == OFL_MC_OP_DELETEQ;
        if (res.status != OFL_MC_ST_OK && !(del && res.status == OFL_MC_ST_NOT_FOUND))
            count(&c->wb_errors);
        off += (size_t)r;
    }
}

/* The cache's counters, as `stats` lines (text) or binary STAT responses, written to
 * `out` (at least 2 KB); `tmpl`: the binary answer's terminator (opcode, opaque).
 * Returns the bytes written. */
static size_t stats_lines(const struct ofl_kvc *c, int binary, const uint8_t *tmpl,
                          uint8_t *out, size_t cap)
{
    struct ofl_kvc_stats st;
    ofl_kvc_stats(c, &st);
    const struct {
        const char *name;
        uint64_t v;
    } nums[] = {{"nic_cache_hits", st.hits},         {"nic_cache_misses", st.misses},
                {"nic_cache_evictions", st.evictions}, {"nic_cache_writebacks", st.writebacks},
                {"nic_cache_fills", st.fills},         {"nic_cache_bypass", st.bypass}};
    size_t n = 0;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        char v[24];
        int vl = snprintf(v, sizeof v, "%llu", (unsigned long long)nums[i].v);
        ssize_t k = binary ? ofl_mc_write_response(out + n, cap - n, OFL_MC_OP_STAT, 0,
                                                   ofl_get_be32(tmpl + 12), 0, NULL, 0,
                                                   nums[i].name, strlen(nums[i].name), v,
                                                   (size_t)vl)
                           : snprintf((char *)out + n, cap - n, "STAT %s %s\r\n",
                                      nums[i].name, v);
        if (k < 0 || (size_t)k >= cap - n) break;
        n += (size_t)k;
    }
    return n;
}

/* The store's answer to a stats request, with the cache's counters added before its
 * end (text END, binary the empty STAT), framed again; left as it is when it does not
 * fit the packet or does not end as a stats answer does. */
static void add_stats(const struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off,
                      uint32_t l4_off, const uint8_t *p, size_t len)
{
    enum { ROOM = 65536 + 4096 };   /* the largest answer, and the counters' lines */
    uint8_t *body = malloc(ROOM);   /* rare (stats): off the stack of every reply */
    if (!body) return;
    size_t n = ofl_kvs_unframe(p, len, body, 65536);
    const uint8_t *end = n >= 24 ? body + n - 24 : NULL;
    int binary = end && end[0] == OFL_MC_RES_MAGIC && end[1] == OFL_MC_OP_STAT &&
                 !(end[2] | end[3]) && !(end[8] | end[9] | end[10] | end[11]);
    int text = n >= 5 && !memcmp(body + n - 5, "END\r\n", 5);
    if (!binary && !text) {
        free(body);
        return;
    }
    size_t tail = binary ? 24 : 5;
    uint8_t last[24];
    memcpy(last, body + n - tail, tail);
    size_t k = stats_lines(c, binary, last, body + n - tail, ROOM - (n - tail) - tail);
    memcpy(body + n - tail + k, last, tail);
    /* (the request id is read before the packet is written over; a frame that does not
     * fit writes nothing: the store's answer stays) */
    ofl_kvs_frame(pkt, l3_off, l4_off, ofl_get_be16(p), body, n + k);
    free(body);
}

int ofl_kvc_reply(struct ofl_kvc *c, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  int expiring, uint64_t ticket)
{
    size_t len = 0;
    const uint8_t *p = udp_payload(pkt, l3_off, l4_off, &len);
    /* A reply of several datagrams (the store's, ofl_kvs_reply) came through a queue,
     * which does not carry its segmentation: set it again for the sink. It holds a
     * value too long to cache. */
    int multi = p && len >= OFL_MC_UDP_HDR_LEN && ofl_get_be16(p + 4) > 1;
    if (multi) pkt->seg = OFL_MC_UDP_DGRAM_MAX;
    if (ticket == OFL_KVC_STATS) {
        if (p && len > OFL_MC_UDP_HDR_LEN) add_stats(c, pkt, l3_off, l4_off, p, len);
        return 0;
    }
    if (ticket == 0) return 0;
    int bad = !p || len < OFL_MC_UDP_HDR_LEN || (multi && ticket != OFL_KVC_INTERNAL);
    const uint8_t *b = bad ? NULL : p + OFL_MC_UDP_HDR_LEN;
    size_t n = bad ? 0 : len - OFL_MC_UDP_HDR_LEN;
    if (ticket == OFL_KVC_INTERNAL) {
        if (bad)
            count(&c->wb_errors);
        else
            on_wb_reply(c, ofl_get_be16(p), b, n);
        return 1;
    }
    uint32_t i = (uint32_t)(ticket >> 32), seq = (uint32_t)ticket;
    if (i >= c->nslots) return 0;
    struct set *st = &c->sets[i / c->ways];
    lock(st);
    struct slot *s = &c->slots[i];
    if (s->seq != seq) {
        count(&c->stale_fills);
    } else if (expiring && (s->state == ST_PEND_FILL || s->state == ST_CLEAN)) {
        release(s);
        count(&c->uncached);
    } else if (s->state == ST_PEND_FILL) {
        if (bad)
            release(s);
        else
            on_get_reply(c, i, b, n, 0);
    } else if (s->state == ST_PEND_SET) {
        if (bad)
            release(s);
        else
            on_set_reply(c, i, b, n);
    } else if (s->state == ST_CLEAN && !bad) {
        on_get_reply(c, i, b, n, 1);
    }
    unlock(st);
    return 0;
}

/* ---- setup, flush, stats ---------------------------------------------------------- */

int ofl_kvc_create(struct ofl_kvc **out, const struct ofl_kvc_config *cfg)
{
    *out = NULL;
    if (!cfg->ways || cfg->ways > OFL_KVC_WAYS_MAX || cfg->entries < cfg->ways ||
        cfg->entries > OFL_KVC_ENTRIES_MAX || cfg->value_max > OFL_KVC_VALUE_MAX ||
        (cfg->policy != OFL_KVC_WRITE_THROUGH && cfg->policy != OFL_KVC_WRITE_BACK) ||
        (cfg->eviction != OFL_KVC_LRU && cfg->eviction != OFL_KVC_CLOCK))
        return -EINVAL;
    struct ofl_kvc *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->ways = cfg->ways;
    c->nsets = cfg->entries / cfg->ways;
    c->nslots = c->nsets * c->ways;
    c->value_max = cfg->value_max;
    c->policy = cfg->policy;
    c->eviction = cfg->eviction;
    c->sets = aligned_alloc(64, sizeof *c->sets * c->nsets);
    c->slots = calloc(c->nslots, sizeof *c->slots);
    c->keys = malloc((size_t)c->nslots * OFL_KV_KEY_MAX);
    c->values = malloc((size_t)c->nslots * (c->value_max ? c->value_max : 1));
    if (!c->sets || !c->slots || !c->keys || !c->values) {
        ofl_kvc_destroy(c);
        return -ENOMEM;
    }
    for (uint32_t s = 0; s < c->nsets; s++) {
        atomic_init(&c->sets[s].lock, 0);
        c->sets[s].hand = 0;
        c->sets[s].tick = 0;
    }
    for (uint32_t i = 0; i < c->nslots; i++) c->slots[i].seq = 1;
    atomic_init(&c->cas_next, 1);
    *out = c;
    return 0;
}

void ofl_kvc_destroy(struct ofl_kvc *c)
{
    if (!c) return;
    free(c->sets);
    free(c->slots);
    free(c->keys);
    free(c->values);
    free(c);
}

int ofl_kvc_open_opts(struct ofl_kvc **t, const struct ofl_args *a, const char *name)
{
    struct ofl_kvc_config cfg;
    const char *keys[3] = {"entries", "ways", "value_max"};
    const char *dflt[3] = {"4096", "8", "256"};
    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        const char *s = ofl_args_get(a, name, keys[i], dflt[i]);
        char *end;
        errno = 0;
        v[i] = strtoull(s, &end, 10);
        if (end == s || *end || *s == '-' || errno || v[i] > UINT32_MAX) {
            ofl_start_failf(a, "cache %s: %s=%s is not a number", name, keys[i], s);
            return -EINVAL;
        }
    }
    const char *pol = ofl_args_get(a, name, "policy", "write_through");
    const char *ev = ofl_args_get(a, name, "eviction", "lru");
    cfg.entries = (uint32_t)v[0];
    cfg.ways = (uint32_t)v[1];
    cfg.value_max = (uint32_t)v[2];
    cfg.policy = !strcmp(pol, "write_through") ? OFL_KVC_WRITE_THROUGH
                 : !strcmp(pol, "write_back")  ? OFL_KVC_WRITE_BACK
                                               : 0;
    cfg.eviction = !strcmp(ev, "lru") ? OFL_KVC_LRU : !strcmp(ev, "clock") ? OFL_KVC_CLOCK : 0;
    if (!cfg.policy) {
        ofl_start_failf(a, "cache %s: policy=%s (write_through or write_back)", name, pol);
        return -EINVAL;
    }
    if (!cfg.eviction) {
        ofl_start_failf(a, "cache %s: eviction=%s (lru or clock)", name, ev);
        return -EINVAL;
    }
    if (!cfg.ways || cfg.ways > OFL_KVC_WAYS_MAX || cfg.entries < cfg.ways ||
        cfg.entries > OFL_KVC_ENTRIES_MAX || cfg.value_max > OFL_KVC_VALUE_MAX) {
        ofl_start_failf(a, "cache %s: entries=%u ways=%u value_max=%u (need 1 <= ways <= %u, "
                        "ways <= entries <= 2^30, value_max <= %u)",
                        name, cfg.entries, cfg.ways, cfg.value_max, OFL_KVC_WAYS_MAX,
                        OFL_KVC_VALUE_MAX);
        return -EINVAL;
    }
    int rc = ofl_kvc_create(t, &cfg);
    if (rc < 0)
        ofl_start_failf(a, "cache %s (%u entries): %s", name, cfg.entries,
                        ofl_strerror(rc));
    return rc;
}

int ofl_kvc_flush(struct ofl_kvc *c, ofl_kvc_emit emit, void *arg, const struct ofl_pkt *tmpl,
                  uint32_t l3_off, uint32_t l4_off)
{
    if ((size_t)l4_off + 8 > OFL_KVC_HDRS_MAX || (size_t)l4_off + 8 > tmpl->len ||
        l4_off < l3_off || l4_off - l3_off < 20)
        return -EMSGSIZE;
    struct wb wb;
    wb.ready = 0;
    int n = 0;
    for (uint32_t i = 0; i < c->nslots; i++) {
        struct set *st = &c->sets[i / c->ways];
        lock(st);
        struct slot *s = &c->slots[i];
        if (s->state == ST_DIRTY) {
            build_wb(c, &wb, i, 1, tmpl->data, l3_off, l4_off);
            s->state = ST_CLEAN;   /* the store keeps our CAS (ofl_kv_exec_trusted) */
            n++;
        }
        unlock(st);
        send_wb(c, &wb, emit, arg);
    }
    return n;
}

int ofl_kvc_finish(struct ofl_kvc *c, ofl_kvc_emit emit, void *arg)
{
    if (c->policy != OFL_KVC_WRITE_BACK ||
        atomic_load_explicit(&c->tmpl_state, memory_order_acquire) != 2)
        return 0;   /* write-through, or no request yet: nothing is dirty */
    struct ofl_pkt tmpl = {c->tmpl, c->tmpl_l4 + 8, OFL_KVC_HDRS_MAX, 0, 0};
    int n = ofl_kvc_flush(c, emit, arg, &tmpl, c->tmpl_l3, c->tmpl_l4);
    if (n > 0) atomic_fetch_add_explicit(&c->flushed, (uint64_t)n, memory_order_relaxed);
    return n;
}

void ofl_kvc_stats_json(struct ofl_json *j, const char *name, const struct ofl_kvc *c)
{
    struct ofl_kvc_stats s;
    ofl_kvc_stats(c, &s);
    uint64_t inflight = 0;
    for (uint32_t i = 0; i < WB_BUCKETS; i++)
        inflight += atomic_load_explicit(&c->inflight[i], memory_order_relaxed);
    const struct {
        const char *key;
        uint64_t v;
    } nums[] = {
        {"hits", s.hits},           {"misses", s.misses},
        {"bypass", s.bypass},       {"fills", s.fills},
        {"stale_fills", s.stale_fills}, {"uncached", s.uncached},
        {"evictions", s.evictions}, {"writebacks", s.writebacks},
        {"wb_errors", s.wb_errors}, {"written_back_at_stop", s.flushed},
        {"wb_in_flight_at_stop", inflight}, {"refused_multi_key", s.refused},
        {"invalidations", s.invalidations}, {"drops", s.drops},
    };
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "nic_cache"); /* what the counters are (offlow/metrics.py) */
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) ofl_json_u64(j, nums[i].key, nums[i].v);
    ofl_json_end_obj(j);
}

void ofl_kvc_stats(const struct ofl_kvc *c, struct ofl_kvc_stats *s)
{
#define LD(f) s->f = atomic_load_explicit(&c->f, memory_order_relaxed)
    LD(hits);
    LD(misses);
    LD(fills);
    LD(stale_fills);
    LD(uncached);
    LD(bypass);
    LD(evictions);
    LD(writebacks);
    LD(wb_errors);
    LD(invalidations);
    LD(drops);
    LD(refused);
    LD(flushed);
#undef LD
}
