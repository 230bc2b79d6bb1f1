/* A shared hash map (the DSL's SharedMap): fixed key and value sizes, at most `entries`
 * keys, open addressing with linear probing and backward-shift deletion (no
 * tombstones). One core uses it (no locks). An update that would hold more than
 * `entries` keys is refused and counted `full`. Iteration goes in slot order, the
 * same for the same sequence of calls; the table report sorts by key. */
#ifndef OFL_MAP_H
#define OFL_MAP_H

#include <stdbool.h>
#include <stdint.h>

struct ofl_args;
struct ofl_json;

/* The largest key and value (bytes) and the most entries a map may hold (the BPF hash
 * map takes keys and values this large; offlow/dsl/values.py checks the same). */
#define OFL_MAP_KEY_MAX 256u
#define OFL_MAP_VALUE_MAX 256u
#define OFL_MAP_ENTRIES_MAX (1u << 24)

struct ofl_map {
    uint32_t key_size, value_size, entries;
    uint32_t mask;      /* slots - 1; slots a power of two >= 2 * entries */
    uint32_t count;     /* keys held */
    uint64_t full;      /* updates refused: the map held `entries` keys */
    uint8_t *used;      /* per slot: 1 when it holds a key */
    uint8_t *keys;      /* slots x key_size */
    uint8_t *values;    /* slots x value_size, zeroed at open */
    /* Control (offlow/map_ctl.h): the layout text the ctl client reads, the changes made
     * through control messages, and the mailbox that hands one request at a time from
     * the channel manager to the core that owns the map. */
    const char *layout;
    char ctl_type;      /* the value's: 'u' unsigned, 'i' signed, 'r' a record */
    uint64_t ctl_updates;
    uint32_t box_state, box_owner_gone, box_len, box_reply_len;
    const uint8_t *box_msg;   /* the request: box_copy, or a longer one (a staged
                                 request, the caller's until the reply) */
    void *box_out;            /* where a long reply goes (struct ofl_ctl_out), or NULL */
    uint8_t box_copy[56], box_reply[56];   /* OFL_CTL_MSG_MAX */
};

/* Open an empty map: -EINVAL for sizes or `entries` out of range, -ENOMEM. */
int ofl_map_open(struct ofl_map **m, uint32_t key_size, uint32_t value_size, uint32_t entries);
/* ofl_map_open for a table object of a generated program: a refusal said naming the
 * map `name` (ofl_start_failf). */
int ofl_map_open_named(struct ofl_map **m, uint32_t key_size, uint32_t value_size,
                       uint32_t entries, const struct ofl_args *a, const char *name);
/* Free the map (NULL does nothing). */
void ofl_map_close(struct ofl_map *m);
/* The value stored under `key` (key_size bytes), or NULL. */
void *ofl_map_lookup(struct ofl_map *m, const void *key);
/* Store `value` under `key`: 0, or -ENOSPC (counted `full`) when the key is new and the
 * map holds `entries` keys already. */
int ofl_map_update(struct ofl_map *m, const void *key, const void *value);
/* Remove `key`: 0, or -ENOENT when it is not there. */
int ofl_map_delete(struct ofl_map *m, const void *key);
/* Iterate: start with *slot = 0; each call gives the next key and value and returns 1,
 * or returns 0 past the last. */
int ofl_map_next(const struct ofl_map *m, uint32_t *slot, const void **key,
                 const void **value);
/* The map's report in the stats file: an object `name` with kind "map", items (keys
 * held), entries (its capacity), full and, when `contents`, pairs, each
 * "KEYHEX=VALUEHEX" (the bytes in memory order). Without `contents` (a live read of
 * the counters only: live.h's OFL_LIVE_TABLES unset) there is no "pairs" member. */
void ofl_map_stats_json(struct ofl_json *j, const char *name, const struct ofl_map *m,
                        bool contents);
/* The same for a map whose keys and values another holder gives (the xdp target's BPF
 * hash map read through its fd): `next` yields them as ofl_map_next does (not called
 * without `contents`; NULL then allowed). */
void ofl_map_json(struct ofl_json *j, const char *name, uint32_t key_size,
                  uint32_t value_size, uint32_t entries, uint32_t count, uint64_t full,
                  bool contents, int (*next)(void *it, const void **key, const void **value),
                  void *it);

#endif
