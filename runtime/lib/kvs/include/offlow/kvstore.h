/* A fixed-capacity key-value store: the host store of the key-value offload designs.
 *
 * Keys are 1..250 bytes, values 0..value_max bytes, each item carries 32 bits of
 * client flags, an expiry time and a 64-bit CAS version. The table is split into
 * `stripes` (a power of two) independent parts chosen by the key's hash: each has
 * its own spin lock, chained hash buckets, item slots, share of the capacity
 * (items and bytes) and CLOCK eviction hand. Thread safety is by these striped
 * locks: every operation takes exactly one stripe's lock, so threads that touch
 * different stripes never wait for each other. A lock waiter spins with a pause
 * hint and then yields the CPU (sched_yield); nothing sleeps in the kernel.
 * Values are copied in and out under the lock (no reference outlives a call).
 *
 * Eviction: when a stripe is full (its item slots or its byte budget), its CLOCK
 * hand sweeps the slots: an item used (read or written) since the hand last passed
 * gets a second chance, the first one that was not is evicted.
 *
 * CAS versions are unique per store and never 0: a stripe's counter times the
 * number of stripes plus the stripe's index.
 *
 * Expiry follows memcached: exptime 0 never expires, 1..30 days is relative to
 * now, larger values are absolute Unix times, negative values expire at once.
 * Expired items are dropped when a lookup finds them (or evicted as usual), and so
 * are items a flush (ofl_kv_flush) invalidated.
 *
 * Besides its value an item keeps what memcached's meta commands report: when it
 * was stored or last bumped (its access time is refreshed at most once a minute,
 * as memcached's), whether it was read since it was stored, and the marks of
 * memcached's stale-while-revalidate scheme (a client won the right to recompute
 * it; it was invalidated). Arithmetic (incr/decr) treats the value as an unsigned
 * decimal of at most 20 digits and rewrites it in place when the result is not
 * longer, padded with spaces, as memcached does.
 *
 * Errors are negative errno values: -ENOENT (no such key), -EEXIST (ADD of a
 * present key, or a CAS mismatch), -E2BIG (key or value over the limits),
 * -ENOMEM (allocation failed), -ENOBUFS (get: value longer than the buffer),
 * -EINVAL (arithmetic on a value that is not a number). */
#ifndef OFL_KVSTORE_H
#define OFL_KVSTORE_H

#include <stddef.h>
#include <stdint.h>

#define OFL_KV_KEY_MAX 250u

struct ofl_kv;

/* What ofl_kv_create() builds. */
struct ofl_kv_config {
    uint64_t capacity;   /* most items (>= stripes) */
    uint64_t mem_bytes;  /* most bytes of items (keys, values, item headers); 0: no limit */
    uint32_t value_max;  /* longest value */
    uint32_t stripes;    /* lock stripes, a power of two; 0: 64 (fewer for tiny tables) */
};

/* How ofl_kv_store() treats an existing or missing key. */
enum ofl_kv_mode {
    OFL_KV_SET,      /* store whether or not the key exists */
    OFL_KV_ADD,      /* store only if the key does not exist (else -EEXIST) */
    OFL_KV_REPLACE,  /* store only if the key exists (else -ENOENT) */
    OFL_KV_SET_CAS,  /* store whether or not the key exists, giving the item CAS cas_in
                        (nonzero) instead of a new one: for a writer that keeps its CAS
                        values apart from the store's, a cache in front of the store
                        writing back an item whose CAS it gave out (ofl_kvc: top bit
                        set, which the store's own values never have) */
    OFL_KV_APPEND,   /* the key must exist (else -ENOENT): the value is appended; the
                        item keeps its flags and expiry; longer than value_max: -E2BIG */
    OFL_KV_PREPEND,  /* the same, the value put in front */
    OFL_KV_CAS,      /* the key must exist (-ENOENT) with CAS cas_in (-EEXIST) */
};
/* Or'ed into OFL_KV_CAS: a cas_in older (lower) than the item's still stores, and
 * the item is marked stale, keeping its expiry (memcached's ms with I). */
#define OFL_KV_INVALIDATE 0x100

/* What a read does besides copying the value (NULL: a plain get). */
struct ofl_kv_read {
    uint8_t touch;          /* give the item a new expiry, exptime (touch, gat, mg T) */
    uint8_t no_bump;        /* leave its access time, read mark and CLOCK bit (mg u) */
    uint8_t vivify;         /* on a miss, create an empty item expiring at vivify_exptime,
                               and win (mg N) */
    uint8_t recache;        /* win if fewer than recache_s seconds of life are left (mg R) */
    uint8_t again;          /* a second look after -ENOBUFS: not counted, no side effect */
    int32_t exptime, vivify_exptime, recache_s;
};

/* What a read (or arithmetic) returns besides the value. */
struct ofl_kv_meta {
    uint32_t flags;
    uint32_t value_len;
    uint64_t cas;
    uint32_t expires;   /* 1: the item has an expiry time (0: it never expires) */
    int32_t ttl;        /* seconds of life left, -1: it never expires */
    uint32_t idle;      /* seconds since it was stored or last bumped (before this call) */
    uint8_t fetched;    /* it had been read before this call */
    uint8_t created;    /* this call created it (vivify, arithmetic's create) */
    uint8_t win;        /* this client won the right to recompute it (mg W) */
    uint8_t token_sent; /* another client won it before (mg Z) */
    uint8_t stale;      /* it was invalidated (mg X) */
};

/* Arithmetic (ofl_kv_arith). */
struct ofl_kv_arith {
    uint8_t incr;           /* 1: add delta (wrapping at 2^64); 0: subtract (down to 0) */
    uint8_t create;         /* on a miss, store `initial` expiring at exptime */
    uint64_t delta, initial;
    uint64_t cas_in;        /* nonzero: the item's CAS must be this (else -EEXIST) */
    int32_t exptime;
};

/* Counters, summed over the stripes (memcached's names where they exist). */
struct ofl_kv_stats {
    uint64_t items, bytes, capacity, mem_bytes;
    uint64_t gets, hits, stores, deletes, evictions, expired;
    uint64_t total_items;      /* items linked since start */
    uint64_t delete_misses, incr_hits, incr_misses, decr_hits, decr_misses;
    uint64_t cas_hits, cas_misses, cas_badval, touch_hits, touch_misses;
    uint64_t flushes;          /* flushes asked for */
    uint64_t flushed;          /* items they removed */
};

/* Build a store as `cfg` says. Returns 0 and sets *out, or -EINVAL (capacity 0,
 * stripes not a power of two, a byte budget per stripe smaller than the largest
 * item) or -ENOMEM. */
int ofl_kv_create(struct ofl_kv **out, const struct ofl_kv_config *cfg);

/* Free the store and all its items (no call may be in flight). */
void ofl_kv_destroy(struct ofl_kv *kv);

/* The 64-bit hash of a key that every other call takes (callers that steer by key
 * compute it once and pass it along). */
uint64_t ofl_kv_hash(const void *key, size_t len);

/* Which stripe a hash belongs to (0..stripes-1). */
uint32_t ofl_kv_stripe(const struct ofl_kv *kv, uint64_t hash);

/* Look a key up. Found: fills *meta, copies the value to `dst` if it holds
 * meta->value_len bytes and returns 0, else returns -ENOBUFS (meta filled, nothing
 * copied). Returns -ENOENT if the key is absent or expired. */
int ofl_kv_get(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash, void *dst,
               size_t cap, struct ofl_kv_meta *meta);

/* ofl_kv_get doing what `opt` says too (touch, no bump, vivify, recache; NULL: none);
 * `dst` NULL copies nothing and returns 0 when found. A touch, vivify or recache
 * happens even when the value does not fit (-ENOBUFS): call again with no options
 * to fetch it. */
int ofl_kv_read(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash, void *dst,
                size_t cap, const struct ofl_kv_read *opt, struct ofl_kv_meta *meta);

/* Increment or decrement the key's value as `a` says. Returns 0 with the new value
 * in *value and *meta filled (its new CAS, expiry...), -ENOENT (absent and not
 * created), -EEXIST (CAS mismatch), -EINVAL (the value is not a number), -ENOMEM. */
int ofl_kv_arith(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                 const struct ofl_kv_arith *a, uint64_t *value, struct ofl_kv_meta *meta);

/* memcached's md with I: mark the item stale instead of deleting it (a new CAS, its
 * won mark cleared, a new expiry if `touch`). cas_in nonzero must match. Returns 0
 * (*cas_out set when not NULL), -ENOENT or -EEXIST. */
int ofl_kv_invalidate(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                      uint64_t cas_in, int touch, int32_t exptime, uint64_t *cas_out);

/* Invalidate every item: now (delay <= 0: they are freed at once), or once `delay`
 * (an expiry as in a store: seconds, or an absolute Unix time) has passed, every item
 * stored or bumped before then. */
void ofl_kv_flush(struct ofl_kv *kv, int32_t delay);

/* Zero the counters (memcached's "stats reset"); items, bytes and the limits stay. */
void ofl_kv_reset_stats(struct ofl_kv *kv);

/* Store a value. cas_in != 0: the key must exist (-ENOENT) with this CAS (-EEXIST),
 * whatever the mode (but OFL_KV_SET_CAS, where it is the item's new CAS; 0 there is
 * -EINVAL); an ADD with a CAS is a CAS (as memcached's binary ADD). Then ADD fails
 * with -EEXIST if the key exists, REPLACE, APPEND and PREPEND with -ENOENT if it
 * does not. On success returns 0 and sets *cas_out (if not NULL) to the item's new
 * CAS. Evicts as needed; -E2BIG if the key or value (an appended one: the whole) is
 * too long, -ENOMEM if memory ran out (a replaced item is then gone too). `mode`
 * may carry OFL_KV_INVALIDATE. */
int ofl_kv_store(struct ofl_kv *kv, unsigned mode, const void *key, size_t key_len,
                 uint64_t hash, const void *value, size_t value_len, uint32_t flags,
                 int32_t exptime, uint64_t cas_in, uint64_t *cas_out);

/* Delete a key: 0, -ENOENT (absent), or -EEXIST (cas_in != 0 and it differs). */
int ofl_kv_delete(struct ofl_kv *kv, const void *key, size_t key_len, uint64_t hash,
                  uint64_t cas_in);

/* Sum the stripes' counters into *st (each stripe read under its lock). */
void ofl_kv_get_stats(struct ofl_kv *kv, struct ofl_kv_stats *st);

#endif
