/* Fixed-capacity key-value store: striped spin locks, chained buckets, CLOCK eviction. */
#include "offlow/kvstore.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/hash.h"
#include "offlow/spin.h"

#define NIL UINT32_MAX
#define DEFAULT_STRIPES 64u
#define RELATIVE_MAX (60 * 60 * 24 * 30)   /* memcached: longer exptimes are Unix times */

struct item {
    struct item *next;    /* next item in the bucket chain */
    uint32_t slot;        /* index in the stripe's slot table (the CLOCK ring) */
    uint32_t value_len;
    uint64_t hash;
    uint64_t cas;
    uint32_t flags;
    uint32_t exp;         /* expiry on the store's clock (seconds), 0 = never */
    uint16_t key_len;
    uint8_t used;         /* CLOCK reference bit */
    uint8_t data[];       /* key, then value */
};

struct stripe {
    _Alignas(64) atomic_uint lock;
    uint32_t nslots, nitems, nfree, hand, mask;
    uint64_t bytes, mem_max;     /* mem_max 0: no byte limit */
    uint64_t cas_next;
    struct item **heads;         /* mask + 1 bucket chains (item pointers: one miss less) */
    struct item **slots;
    uint32_t *free_slots;        /* stack of free slot indices */
    uint64_t gets, hits, stores, deletes, evictions, expired;
};

struct ofl_kv {
    struct stripe *stripes;
    uint32_t nstripes, value_max;
    uint64_t capacity, mem_bytes;
    int64_t unix_offset;         /* Unix time minus the store's clock, at creation */
};

/* ---- locks and clock ------------------------------------------------------------ */

static void lock(struct stripe *s) { ofl_spin_lock(&s->lock); }

static void unlock(struct stripe *s) { ofl_spin_unlock(&s->lock); }

/* The store's clock in seconds, >= 1 so that exp 0 can mean "never". */
static uint32_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)ts.tv_sec + 1;
}

/* exptime -> expiry on the store's clock; 0 never; *gone set if already expired. */
static uint32_t expiry(const struct ofl_kv *kv, int32_t exptime, int *gone)
{
    *gone = 0;
    if (exptime == 0) return 0;
    if (exptime < 0) {
        *gone = 1;
        return 0;
    }
    int64_t now = now_s();
    int64_t at = exptime <= RELATIVE_MAX ? now + exptime : (int64_t)exptime - kv->unix_offset;
    if (at <= now) {
        *gone = 1;
        return 0;
    }
    return at > UINT32_MAX ? UINT32_MAX : (uint32_t)at;
}

/* ---- hash ----------------------------------------------------------------------- */

uint64_t ofl_kv_hash(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (len * 0x100000001b3ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w *= 0x87c37b91114253d5ull;
        w = w << 31 | w >> 33;
        h ^= w * 0x4cf5ad432745937full;
        h = (h << 27 | h >> 37) * 5 + 0x52dce729;
        p += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < len; i++) tail |= (uint64_t)p[i] << (8 * i);
    h ^= ofl_fmix64(tail ^ 0x2545f4914f6cdd1dull);
    return ofl_fmix64(h);
}

uint32_t ofl_kv_stripe(const struct ofl_kv *kv, uint64_t hash)
{
    return (uint32_t)(hash & (kv->nstripes - 1));
}

static struct stripe *stripe_of(struct ofl_kv *kv, uint64_t hash)
{
    return &kv->stripes[hash & (kv->nstripes - 1)];
}

static uint32_t bucket_of(const struct stripe *s, uint64_t hash)
{
    return (uint32_t)(hash >> 32) & s->mask;
}

static uint64_t item_bytes(const struct item *it)
{
    return sizeof *it + it->key_len + it->value_len;
}

/* ---- create / destroy ----------------------------------------------------------- */

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 1;
    while (p < n && p < (1u << 31)) p <<= 1;
    return p;
}

static int stripe_init(struct stripe *s, uint32_t nslots, uint64_t mem_max)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->lock, 0);
    s->nslots = nslots;
    s->nfree = nslots;
    s->mem_max = mem_max;
    s->cas_next = 1;
    uint32_t nb = pow2_at_least(nslots);
    s->mask = nb - 1;
    s->heads = calloc(nb, sizeof *s->heads);
    s->slots = calloc(nslots, sizeof *s->slots);
    s->free_slots = malloc((size_t)nslots * sizeof *s->free_slots);
    if (!s->heads || !s->slots || !s->free_slots) return -ENOMEM;
    for (uint32_t i = 0; i < nslots; i++) s->free_slots[i] = nslots - 1 - i;
    return 0;
}

static void stripe_fini(struct stripe *s)
{
    if (s->slots)
        for (uint32_t i = 0; i < s->nslots; i++) free(s->slots[i]);
    free(s->heads);
    free(s->slots);
    free(s->free_slots);
}

void ofl_kv_destroy(struct ofl_kv *kv)
{
    if (!kv) return;
    if (kv->stripes)
        for (uint32_t i = 0; i < kv->nstripes; i++) stripe_fini(&kv->stripes[i]);
    free(kv->stripes);
    free(kv);
}

int ofl_kv_create(struct ofl_kv **out, const struct ofl_kv_config *cfg)
{
    *out = NULL;
    uint32_t n = cfg->stripes;
    if (n == 0) {
        n = DEFAULT_STRIPES;
        while (n > 1 && cfg->capacity < (uint64_t)n * 16) n >>= 1;
    }
    if (cfg->capacity == 0 || (n & (n - 1)) || cfg->capacity < n ||
        cfg->capacity / n >= NIL)
        return -EINVAL;
    uint64_t mem_max = cfg->mem_bytes / n;
    if (cfg->mem_bytes && mem_max < sizeof(struct item) + OFL_KV_KEY_MAX + cfg->value_max)
        return -EINVAL;
    struct ofl_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return -ENOMEM;
    kv->nstripes = n;
    kv->value_max = cfg->value_max;
    kv->capacity = cfg->capacity;
    kv->mem_bytes = cfg->mem_bytes;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    kv->unix_offset = (int64_t)rt.tv_sec - now_s();
    kv->stripes = aligned_alloc(_Alignof(struct stripe), (size_t)n * sizeof(struct stripe));
    if (!kv->stripes) {
        free(kv);
        return -ENOMEM;
    }
    memset(kv->stripes, 0, (size_t)n * sizeof(struct stripe));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slots = (uint32_t)(cfg->capacity / n + (i < cfg->capacity % n));
        if (stripe_init(&kv->stripes[i], slots, mem_max)) {
            ofl_kv_destroy(kv);
            return -ENOMEM;
        }
    }
    *out = kv;
    return 0;
}

/* ---- table operations (stripe locked) ------------------------------------------- */

/* Detach `it` from its chain and the slot table (the caller frees it). */
static struct item *unlink_item(struct stripe *s, struct item *it)
{
    struct item **link = &s->heads[bucket_of(s, it->hash)];
    while (*link != it) link = &(*link)->next;
    *link = it->next;
    s->slots[it->slot] = NULL;
    s->free_slots[s->nfree++] = it->slot;
    s->nitems--;
    s->bytes -= item_bytes(it);
    return it;
}

/* The item holding `key`, or NULL; an expired item found on the way is dropped. */
static struct item *find(struct stripe *s, const void *key, size_t key_len, uint64_t hash)
{
    for (struct item *it = s->heads[bucket_of(s, hash)]; it; it = it->next) {
        if (it->hash != hash || it->key_len != key_len || memcmp(it->data, key, key_len))
            continue;
        if (it->exp && now_s() >= it->exp) {
            free(unlink_item(s, it));
            s->expired++;
            return NULL;
        }
        return it;
    }
    return NULL;
}

/* Evict one item by CLOCK, never the one in slot `keep`. Returns 0 or -ENOMEM
 * (nothing left to evict). */
static int evict_one(struct stripe *s, uint32_t keep)
{
    for (uint64_t step = 0; step < 2ull * s->nslots + 1; step++) {
        uint32_t i = s->hand;
        s->hand = i + 1 == s->nslots ? 0 : i + 1;
        struct item *it = s->slots[i];
        if (!it || i == keep) continue;
        if (it->used) {
            it->used = 0;
            continue;
        }
        free(unlink_item(s, it));
        s->evictions++;
        return 0;
    }
    return -ENOMEM;
}

static int over_budget(const struct stripe *s, uint64_t extra)
{
    return s->mem_max && s->bytes + extra > s->mem_max;
}

/* ---- public operations ---------------------------------------------------------- */

int ofl_kv_get(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash, void *dst,
               size_t cap, struct ofl_kv_meta *meta)
{
    struct stripe *s = stripe_of(kv, hash);
    lock(s);
    s->gets++;
    struct item *it = key_len && key_len <= OFL_KV_KEY_MAX ? find(s, key, key_len, hash) : NULL;
    if (!it) {
        unlock(s);
        return -ENOENT;
    }
    s->hits++;
    it->used = 1;
    meta->flags = it->flags;
    meta->value_len = it->value_len;
    meta->cas = it->cas;
    meta->expires = it->exp != 0;
    int rc = -ENOBUFS;
    if (it->value_len <= cap) {
        memcpy(dst, it->data + it->key_len, it->value_len);
        rc = 0;
    }
    unlock(s);
    return rc;
}

int ofl_kv_store(struct ofl_kv *kv, enum ofl_kv_mode mode, const void *key, size_t key_len,
                 uint64_t hash, const void *value, size_t value_len, uint32_t flags,
                 int32_t exptime, uint64_t cas_in, uint64_t *cas_out)
{
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX || value_len > kv->value_max) return -E2BIG;
    int given = mode == OFL_KV_SET_CAS;
    if (given && !cas_in) return -EINVAL;
    /* Build the item before locking: the copy and the allocation stay outside. */
    struct item *it = malloc(sizeof *it + key_len + value_len);
    if (!it) return -ENOMEM;
    it->next = NULL;
    it->value_len = (uint32_t)value_len;
    it->hash = hash;
    it->flags = flags;
    it->key_len = (uint16_t)key_len;
    it->used = 1;
    memcpy(it->data, key, key_len);
    if (value_len) memcpy(it->data + key_len, value, value_len);
    int gone;
    it->exp = expiry(kv, exptime, &gone);

    struct stripe *s = stripe_of(kv, hash);
    struct item *old = NULL;
    int rc = 0;
    lock(s);
    struct item *cur = find(s, key, key_len, hash);
    if (cas_in && !given && !cur) rc = -ENOENT;
    else if (cas_in && !given && cur->cas != cas_in) rc = -EEXIST;
    else if (mode == OFL_KV_ADD && cur) rc = -EEXIST;
    else if (mode == OFL_KV_REPLACE && !cur) rc = -ENOENT;
    if (rc) {
        unlock(s);
        free(it);
        return rc;
    }
    it->cas = given ? cas_in : s->cas_next++ * kv->nstripes + (uint64_t)(s - kv->stripes);
    s->stores++;
    if (cas_out) *cas_out = it->cas;
    if (gone) {   /* expired on arrival: the store only removes the old value */
        if (cur) old = unlink_item(s, cur);
        unlock(s);
        free(old);
        free(it);
        return 0;
    }
    uint64_t size = item_bytes(it);
    if (cur) {   /* take the old item's slot and chain position */
        old = cur;
        struct item **link = &s->heads[bucket_of(s, hash)];
        while (*link != old) link = &(*link)->next;
        *link = it;
        it->next = old->next;
        it->slot = old->slot;
        s->slots[it->slot] = it;
        s->bytes += size - item_bytes(old);
        while (over_budget(s, 0) && evict_one(s, it->slot) == 0) {}
    } else {
        while ((s->nitems == s->nslots || over_budget(s, size)) && evict_one(s, NIL) == 0) {}
        if (s->nitems == s->nslots) {   /* cannot happen with nslots >= 1 */
            unlock(s);
            free(it);
            return -ENOMEM;
        }
        it->slot = s->free_slots[--s->nfree];
        struct item **head = &s->heads[bucket_of(s, hash)];
        it->next = *head;
        *head = it;
        s->slots[it->slot] = it;
        s->nitems++;
        s->bytes += size;
    }
    unlock(s);
    free(old);
    return 0;
}

int ofl_kv_delete(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                  uint64_t cas_in)
{
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX) return -ENOENT;
    struct stripe *s = stripe_of(kv, hash);
    lock(s);
    struct item *cur = find(s, key, key_len, hash);
    int rc = 0;
    struct item *it = NULL;
    if (!cur) rc = -ENOENT;
    else if (cas_in && cur->cas != cas_in) rc = -EEXIST;
    else {
        it = unlink_item(s, cur);
        s->deletes++;
    }
    unlock(s);
    free(it);
    return rc;
}

void ofl_kv_get_stats(struct ofl_kv *kv, struct ofl_kv_stats *st)
{
    memset(st, 0, sizeof *st);
    st->capacity = kv->capacity;
    st->mem_bytes = kv->mem_bytes;
    for (uint32_t n = 0; n < kv->nstripes; n++) {
        struct stripe *s = &kv->stripes[n];
        lock(s);
        st->items += s->nitems;
        st->bytes += s->bytes;
        st->gets += s->gets;
        st->hits += s->hits;
        st->stores += s->stores;
        st->deletes += s->deletes;
        st->evictions += s->evictions;
        st->expired += s->expired;
        unlock(s);
    }
}
