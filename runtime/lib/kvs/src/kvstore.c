/* Fixed-capacity key-value store: striped spin locks, chained buckets, CLOCK eviction. */
#include "offlow/kvstore.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/hash.h"
#include "offlow/spin.h"

#define NIL UINT32_MAX
#define DEFAULT_STRIPES 64u
#define RELATIVE_MAX (60 * 60 * 24 * 30)   /* memcached: longer exptimes are Unix times */
#define BUMP_EVERY 60u                     /* memcached's ITEM_UPDATE_INTERVAL, seconds */
#define DIGITS_MAX 20u                     /* a 64-bit unsigned decimal */

/* Item marks (memcached's ITEM_FETCHED, ITEM_TOKEN_SENT, ITEM_STALE). */
enum { FETCHED = 1, TOKEN_SENT = 2, STALE = 4 };

struct item {
    struct item *next;    /* next item in the bucket chain */
    uint32_t slot;        /* index in the stripe's slot table (the CLOCK ring) */
    uint32_t value_len;
    uint64_t hash;
    uint64_t cas;
    uint32_t flags;
    uint32_t exp;         /* expiry on the store's clock (seconds), 0 = never */
    uint32_t atime;       /* stored or last bumped, on the store's clock */
    uint16_t key_len;
    uint8_t used;         /* CLOCK reference bit */
    uint8_t marks;        /* FETCHED, TOKEN_SENT, STALE */
    uint8_t data[];       /* key, then value */
};

/* Counters of a stripe (summed by ofl_kv_get_stats). */
struct counters {
    uint64_t gets, hits, stores, deletes, evictions, expired, total_items;
    uint64_t delete_misses, incr_hits, incr_misses, decr_hits, decr_misses;
    uint64_t cas_hits, cas_misses, cas_badval, touch_hits, touch_misses, flushed;
};

struct stripe {
    _Alignas(64) atomic_uint lock;
    uint32_t nslots, nitems, nfree, hand, mask;
    uint64_t bytes, mem_max;     /* mem_max 0: no byte limit */
    uint64_t cas_next;
    uint32_t flush_at;           /* items bumped before this time are gone once it has
                                    come (store clock; 0: no flush pending) */
    struct item **heads;         /* mask + 1 bucket chains (item pointers: one miss less) */
    struct item **slots;
    uint32_t *free_slots;        /* stack of free slot indices */
    struct counters n;
};

struct ofl_kv {
    struct stripe *stripes;
    uint32_t nstripes, value_max;
    uint64_t capacity, mem_bytes;
    int64_t unix_offset;         /* Unix time minus the store's clock, at creation */
    atomic_uint_fast64_t flushes;
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

/* Has a flush invalidated `it`? */
static int flushed(const struct stripe *s, const struct item *it, uint32_t now)
{
    return s->flush_at && now >= s->flush_at && it->atime < s->flush_at;
}

/* The item holding `key`, or NULL; an expired or flushed item found on the way is
 * dropped. */
static struct item *find(struct stripe *s, const void *key, size_t key_len, uint64_t hash)
{
    for (struct item *it = s->heads[bucket_of(s, hash)]; it; it = it->next) {
        if (it->hash != hash || it->key_len != key_len || memcmp(it->data, key, key_len))
            continue;
        uint32_t now = now_s();
        if ((it->exp && now >= it->exp) || flushed(s, it, now)) {
            if (it->exp && now >= it->exp) s->n.expired++;
            else s->n.flushed++;
            free(unlink_item(s, it));
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
        s->n.evictions++;
        return 0;
    }
    return -ENOMEM;
}

static int over_budget(const struct stripe *s, uint64_t extra)
{
    return s->mem_max && s->bytes + extra > s->mem_max;
}

/* Put `it` (built, not linked) in the table in place of `cur` (NULL: a new key).
 * Stripe locked. Returns the item it replaced (to free once unlocked), or sets *rc
 * to -ENOMEM when nothing can be evicted for it. */
static struct item *link_item(struct stripe *s, struct item *it, struct item *cur, int *rc)
{
    uint64_t size = item_bytes(it);
    *rc = 0;
    s->n.total_items++;
    if (cur) {   /* take the old item's slot and chain position */
        struct item **link = &s->heads[bucket_of(s, it->hash)];
        while (*link != cur) link = &(*link)->next;
        *link = it;
        it->next = cur->next;
        it->slot = cur->slot;
        s->slots[it->slot] = it;
        s->bytes += size - item_bytes(cur);
        while (over_budget(s, 0) && evict_one(s, it->slot) == 0) {}
        return cur;
    }
    while ((s->nitems == s->nslots || over_budget(s, size)) && evict_one(s, NIL) == 0) {}
    if (s->nitems == s->nslots) {   /* cannot happen with nslots >= 1 */
        *rc = -ENOMEM;
        return NULL;
    }
    it->slot = s->free_slots[--s->nfree];
    struct item **head = &s->heads[bucket_of(s, it->hash)];
    it->next = *head;
    *head = it;
    s->slots[it->slot] = it;
    s->nitems++;
    s->bytes += size;
    return NULL;
}

/* A new item (not linked): key, `n` bytes of value from the parts a (na) and b (nb). */
static struct item *new_item(const void *key, size_t key_len, uint64_t hash, const void *a,
                             size_t na, const void *b, size_t nb)
{
    struct item *it = malloc(sizeof *it + key_len + na + nb);
    if (!it) return NULL;
    memset(it, 0, sizeof *it);
    it->value_len = (uint32_t)(na + nb);
    it->hash = hash;
    it->key_len = (uint16_t)key_len;
    it->used = 1;
    it->atime = now_s();
    memcpy(it->data, key, key_len);
    if (na) memcpy(it->data + key_len, a, na);
    if (nb) memcpy(it->data + key_len + na, b, nb);
    return it;
}

static uint64_t next_cas(struct ofl_kv *kv, struct stripe *s)
{
    return s->cas_next++ * kv->nstripes + (uint64_t)(s - kv->stripes);
}

/* Fill *meta from `it` (stripe locked) as of time `now`. */
static void describe(const struct item *it, uint32_t now, struct ofl_kv_meta *meta)
{
    meta->flags = it->flags;
    meta->value_len = it->value_len;
    meta->cas = it->cas;
    meta->expires = it->exp != 0;
    meta->ttl = it->exp == 0 ? -1 : it->exp > now ? (int32_t)(it->exp - now) : 0;
    meta->idle = now > it->atime ? now - it->atime : 0;
    meta->fetched = (it->marks & FETCHED) != 0;
    meta->token_sent = (it->marks & TOKEN_SENT) != 0;
    meta->stale = (it->marks & STALE) != 0;
}

/* Bump `it` for a read: its CLOCK bit, read mark, and its access time once a minute. */
static void bump(struct item *it, uint32_t now)
{
    it->used = 1;
    it->marks |= FETCHED;
    if (now >= it->atime + BUMP_EVERY) it->atime = now;
}

int ofl_kv_read(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash, void *dst,
                size_t cap, const struct ofl_kv_read *opt, struct ofl_kv_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX) return -ENOENT;
    struct stripe *s = stripe_of(kv, hash);
    struct item *made = NULL;
    int gone = 0;
    if (opt && opt->vivify) {   /* built before locking, used only on a miss */
        made = new_item(key, key_len, hash, NULL, 0, NULL, 0);
        if (!made) return -ENOMEM;
        made->exp = expiry(kv, opt->vivify_exptime, &gone);
    }
    int again = opt && opt->again;
    lock(s);
    if (!again && opt && opt->touch) s->n.touch_hits++;   /* taken back below on a miss */
    else if (!again) s->n.gets++;
    struct item *it = find(s, key, key_len, hash);
    uint32_t now = now_s();
    if (!it && made && !gone) {
        int rc;
        made->cas = next_cas(kv, s);
        link_item(s, made, NULL, &rc);
        if (rc == 0) {
            it = made;
            made = NULL;
            meta->created = meta->win = 1;
            it->marks |= TOKEN_SENT;
        }
    }
    if (!it) {
        if (opt && opt->touch && !again) {
            s->n.touch_hits--;
            s->n.touch_misses++;
        }
        unlock(s);
        free(made);
        return -ENOENT;
    }
    if (!again && !(opt && opt->touch)) s->n.hits++;
    describe(it, now, meta);
    if (meta->created) meta->fetched = 0;
    if (opt && opt->touch) {
        int expired_now;
        it->exp = expiry(kv, opt->exptime, &expired_now);
        if (expired_now) it->exp = now;   /* gone for the next reader */
    }
    if (!meta->created) {
        if (opt && opt->recache && !meta->token_sent && it->exp &&
            it->exp < now + (uint32_t)(opt->recache_s > 0 ? opt->recache_s : 0))
            meta->win = 1;
        if (meta->stale && !meta->token_sent) meta->win = 1;
        if (meta->win) it->marks |= TOKEN_SENT;
    }
    if (!(opt && (opt->no_bump || again))) bump(it, now);
    int rc = 0;
    if (dst) {
        if (it->value_len <= cap) memcpy(dst, it->data + it->key_len, it->value_len);
        else rc = -ENOBUFS;
    }
    unlock(s);
    free(made);
    return rc;
}

int ofl_kv_get(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash, void *dst,
               size_t cap, struct ofl_kv_meta *meta)
{
    return ofl_kv_read(kv, key, key_len, hash, dst, cap, NULL, meta);
}

int ofl_kv_store(struct ofl_kv *kv, unsigned mode_bits, const void *key, size_t key_len,
                 uint64_t hash, const void *value, size_t value_len, uint32_t flags,
                 int32_t exptime, uint64_t cas_in, uint64_t *cas_out)
{
    enum ofl_kv_mode mode = (enum ofl_kv_mode)(mode_bits & 0xff);
    int stale_ok = (mode_bits & OFL_KV_INVALIDATE) != 0;
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX || value_len > kv->value_max) return -E2BIG;
    int given = mode == OFL_KV_SET_CAS;
    if (given && !cas_in) return -EINVAL;
    int concat = mode == OFL_KV_APPEND || mode == OFL_KV_PREPEND;
    int compare = cas_in && !given;   /* any other mode with a CAS is a CAS */
    /* Build the item before locking: the copy and the allocation stay outside (an
     * append is built under the lock: it needs the old value). */
    struct item *it = NULL;
    int gone = 0;
    if (!concat) {
        it = new_item(key, key_len, hash, value, value_len, NULL, 0);
        if (!it) return -ENOMEM;
        it->flags = flags;
        it->exp = expiry(kv, exptime, &gone);
    }
    struct stripe *s = stripe_of(kv, hash);
    struct item *old = NULL;
    int rc = 0, marked_stale = 0;
    lock(s);
    s->n.stores++;
    struct item *cur = find(s, key, key_len, hash);
    if (compare && !cur) {
        rc = -ENOENT;
        s->n.cas_misses++;
    } else if (compare && cur->cas != cas_in) {
        if (stale_ok && mode == OFL_KV_CAS && cas_in < cur->cas) {
            marked_stale = 1;
            s->n.cas_hits++;
        } else {
            rc = -EEXIST;
            s->n.cas_badval++;
        }
    } else if (mode == OFL_KV_ADD && cur && !compare) {
        rc = -EEXIST;
    } else if ((mode == OFL_KV_REPLACE || concat) && !cur) {
        rc = -ENOENT;
    } else if (compare) {
        s->n.cas_hits++;
    }
    if (!rc && concat && (uint64_t)cur->value_len + value_len > kv->value_max) rc = -E2BIG;
    if (!rc && concat) {
        const uint8_t *old_v = cur->data + cur->key_len;
        it = mode == OFL_KV_APPEND
                 ? new_item(key, key_len, hash, old_v, cur->value_len, value, value_len)
                 : new_item(key, key_len, hash, value, value_len, old_v, cur->value_len);
        if (!it) rc = -ENOMEM;
        else {
            it->flags = cur->flags;
            it->exp = cur->exp;
        }
    }
    if (rc) {
        unlock(s);
        free(it);
        return rc;
    }
    it->cas = given ? cas_in : next_cas(kv, s);
    if (cas_out) *cas_out = it->cas;
    if (marked_stale) {   /* memcached keeps the expiry and marks of the item it replaces */
        it->exp = cur->exp;
        it->marks = (uint8_t)(STALE | (cur->marks & TOKEN_SENT));
        gone = 0;
    }
    if (gone) {   /* expired on arrival: the store only removes the old value */
        if (cur) old = unlink_item(s, cur);
        unlock(s);
        free(old);
        free(it);
        return 0;
    }
    old = link_item(s, it, cur, &rc);
    unlock(s);
    free(old);
    if (rc) free(it);
    return rc;
}

/* The item a delete (or an invalidation) of `key` acts on (stripe locked): NULL and
 * *rc -ENOENT when absent, -EEXIST when cas_in is nonzero and not its CAS (both
 * counted as delete misses). */
static struct item *find_to_delete(struct stripe *s, const void *key, size_t key_len,
                                   uint64_t hash, uint64_t cas_in, int *rc)
{
    struct item *cur = find(s, key, key_len, hash);
    *rc = !cur ? -ENOENT : cas_in && cur->cas != cas_in ? -EEXIST : 0;
    if (*rc) s->n.delete_misses++;
    return *rc ? NULL : cur;
}

int ofl_kv_delete(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                  uint64_t cas_in)
{
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX) return -ENOENT;
    struct stripe *s = stripe_of(kv, hash);
    int rc;
    lock(s);
    struct item *it = find_to_delete(s, key, key_len, hash, cas_in, &rc);
    if (it) {
        unlink_item(s, it);
        s->n.deletes++;
    }
    unlock(s);
    free(it);
    return rc;
}

int ofl_kv_invalidate(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                      uint64_t cas_in, int touch, int32_t exptime, uint64_t *cas_out)
{
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX) return -ENOENT;
    struct stripe *s = stripe_of(kv, hash);
    int rc;
    lock(s);
    struct item *cur = find_to_delete(s, key, key_len, hash, cas_in, &rc);
    if (cur) {
        int gone;
        if (touch) cur->exp = expiry(kv, exptime, &gone);
        if (touch && gone) cur->exp = now_s();
        cur->marks = (uint8_t)((cur->marks | STALE) & ~TOKEN_SENT);
        cur->cas = next_cas(kv, s);
        if (cas_out) *cas_out = cur->cas;
    }
    unlock(s);
    return rc;
}

/* memcached's safe_strtoull on an item's value: optional leading spaces and sign,
 * digits, then the end or a space; no overflow, no negative number. */
static int value_number(const uint8_t *v, uint32_t n, uint64_t *out)
{
    uint32_t i = 0;
    while (i < n && (v[i] == ' ' || (v[i] >= '\t' && v[i] <= '\r'))) i++;
    int neg = 0;
    if (i < n && (v[i] == '+' || v[i] == '-')) neg = v[i++] == '-';
    uint32_t digits = i;
    uint64_t x = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(v[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;   /* ERANGE */
        x = x * 10 + d;
    }
    if (i == digits) return -1;
    if (i < n && !(v[i] == ' ' || (v[i] >= '\t' && v[i] <= '\r'))) return -1;
    /* strtoull negates; memcached refuses a '-' once the result looks negative */
    if (neg) x = (uint64_t)0 - x;
    if (neg && (int64_t)x < 0) return -1;
    *out = x;
    return 0;
}

int ofl_kv_arith(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                 const struct ofl_kv_arith *a, uint64_t *value, struct ofl_kv_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    if (key_len == 0 || key_len > OFL_KV_KEY_MAX) return -ENOENT;
    char digits[DIGITS_MAX + 1];
    /* Built before locking for a miss that creates, and for a result that grows. */
    int n0 = snprintf(digits, sizeof digits, "%llu", (unsigned long long)a->initial);
    struct item *made = NULL;
    int gone = 0;
    if (a->create) {
        made = new_item(key, key_len, hash, digits, (size_t)n0, NULL, 0);
        if (!made) return -ENOMEM;
        made->exp = expiry(kv, a->exptime, &gone);
    }
    struct stripe *s = stripe_of(kv, hash);
    lock(s);
    struct item *cur = find(s, key, key_len, hash), *old = NULL, *grown = NULL;
    uint32_t now = now_s();
    int rc = 0;
    if (!cur) {
        if (made) {
            made->cas = next_cas(kv, s);
            *value = a->initial;
            describe(made, now, meta);
            meta->created = 1;
            if (!gone) link_item(s, made, NULL, &rc);
            if (!rc && !gone) made = NULL;
            rc = rc ? rc : 0;
        } else {
            rc = -ENOENT;
            if (a->incr) s->n.incr_misses++;
            else s->n.decr_misses++;
        }
    } else if (a->cas_in && cur->cas != a->cas_in) {
        rc = -EEXIST;
    } else if (cur->value_len == 0 ||
               value_number(cur->data + cur->key_len, cur->value_len, value) < 0) {
        rc = -EINVAL;
    } else {
        *value = a->incr ? *value + a->delta : *value > a->delta ? *value - a->delta : 0;
        if (a->incr) s->n.incr_hits++;
        else s->n.decr_hits++;
        int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)*value);
        if ((uint32_t)n <= cur->value_len) {   /* in place, padded with spaces */
            uint8_t *v = cur->data + cur->key_len;
            memcpy(v, digits, (size_t)n);
            memset(v + n, ' ', cur->value_len - (uint32_t)n);
            cur->cas = next_cas(kv, s);
            describe(cur, now, meta);
        } else {
            /* A longer number: a new item, allocated under the lock (rare: a carry
             * into a new digit). */
            grown = new_item(key, key_len, hash, digits, (size_t)n, NULL, 0);
            if (!grown) {
                rc = -ENOMEM;
            } else {
                grown->flags = cur->flags;
                grown->exp = cur->exp;
                grown->cas = next_cas(kv, s);
                old = link_item(s, grown, cur, &rc);
                describe(grown, now, meta);
            }
        }
    }
    unlock(s);
    free(old);
    free(made);
    return rc;
}

void ofl_kv_flush(struct ofl_kv *kv, int32_t delay)
{
    atomic_fetch_add_explicit(&kv->flushes, 1, memory_order_relaxed);
    int gone;
    uint32_t at = delay > 0 ? expiry(kv, delay, &gone) : 0;
    for (uint32_t n = 0; n < kv->nstripes; n++) {
        struct stripe *s = &kv->stripes[n];
        lock(s);
        if (at) {
            s->flush_at = at;
            unlock(s);
            continue;
        }
        s->flush_at = 0;
        for (uint32_t i = 0; i < s->nslots; i++) {
            struct item *it = s->slots[i];
            if (!it) continue;
            free(unlink_item(s, it));
            s->n.flushed++;
        }
        unlock(s);
    }
}

void ofl_kv_reset_stats(struct ofl_kv *kv)
{
    atomic_store_explicit(&kv->flushes, 0, memory_order_relaxed);
    for (uint32_t n = 0; n < kv->nstripes; n++) {
        struct stripe *s = &kv->stripes[n];
        lock(s);
        memset(&s->n, 0, sizeof s->n);
        unlock(s);
    }
}

void ofl_kv_get_stats(struct ofl_kv *kv, struct ofl_kv_stats *st)
{
    memset(st, 0, sizeof *st);
    st->capacity = kv->capacity;
    st->mem_bytes = kv->mem_bytes;
    st->flushes = atomic_load_explicit(&kv->flushes, memory_order_relaxed);
    for (uint32_t n = 0; n < kv->nstripes; n++) {
        struct stripe *s = &kv->stripes[n];
        lock(s);
        st->items += s->nitems;
        st->bytes += s->bytes;
        const struct counters *c = &s->n;
        st->gets += c->gets;
        st->hits += c->hits;
        st->stores += c->stores;
        st->deletes += c->deletes;
        st->evictions += c->evictions;
        st->expired += c->expired;
        st->total_items += c->total_items;
        st->delete_misses += c->delete_misses;
        st->incr_hits += c->incr_hits;
        st->incr_misses += c->incr_misses;
        st->decr_hits += c->decr_hits;
        st->decr_misses += c->decr_misses;
        st->cas_hits += c->cas_hits;
        st->cas_misses += c->cas_misses;
        st->cas_badval += c->cas_badval;
        st->touch_hits += c->touch_hits;
        st->touch_misses += c->touch_misses;
        st->flushed += c->flushed;
        unlock(s);
    }
}
