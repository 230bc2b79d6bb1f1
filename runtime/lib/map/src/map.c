/* The shared hash map of offlow/map.h: open addressing, linear probing, backward-shift
 * deletion. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gen.h"
#include "offlow/hash.h"
#include "offlow/map.h"
#include "offlow/stats.h"

static uint32_t home(const struct ofl_map *m, const uint8_t *key)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a, then fmix64 for the low bits */
    for (uint32_t k = 0; k < m->key_size; k++)
        h = (h ^ key[k]) * 0x100000001b3ull;
    return (uint32_t)ofl_fmix64(h) & m->mask;
}

static uint8_t *key_at(const struct ofl_map *m, uint32_t s)
{
    return m->keys + (size_t)s * m->key_size;
}

static uint8_t *value_at(const struct ofl_map *m, uint32_t s)
{
    return m->values + (size_t)s * m->value_size;
}

/* The slot holding `key`, or the empty slot where it would go. */
static uint32_t find(const struct ofl_map *m, const uint8_t *key)
{
    uint32_t s = home(m, key);
    while (m->used[s] && memcmp(key_at(m, s), key, m->key_size))
        s = (s + 1) & m->mask;
    return s;
}

int ofl_map_open(struct ofl_map **out, uint32_t key_size, uint32_t value_size, uint32_t entries)
{
    *out = NULL;
    if (!key_size || key_size > OFL_MAP_KEY_MAX || !value_size ||
        value_size > OFL_MAP_VALUE_MAX || !entries || entries > OFL_MAP_ENTRIES_MAX)
        return -EINVAL;
    uint32_t slots = 2;
    while (slots < 2 * entries)
        slots <<= 1;
    struct ofl_map *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (struct ofl_map){ .key_size = key_size, .value_size = value_size,
                           .entries = entries, .mask = slots - 1 };
    m->used = calloc(slots, 1);
    m->keys = calloc(slots, key_size);
    m->values = calloc(slots, value_size);
    if (!m->used || !m->keys || !m->values) {
        ofl_map_close(m);
        return -ENOMEM;
    }
    *out = m;
    return 0;
}

int ofl_map_open_named(struct ofl_map **m, uint32_t key_size, uint32_t value_size,
                       uint32_t entries, const struct ofl_args *a, const char *name)
{
    int rc = ofl_map_open(m, key_size, value_size, entries);
    if (rc < 0)
        ofl_start_failf(a, "map %s (%u B keys, %u B values, %u entries): %s",
                        name, key_size, value_size, entries, strerror(-rc));
    return rc;
}

void ofl_map_close(struct ofl_map *m)
{
    if (!m)
        return;
    free(m->used);
    free(m->keys);
    free(m->values);
    free(m);
}

void *ofl_map_lookup(struct ofl_map *m, const void *key)
{
    uint32_t s = find(m, key);
    return m->used[s] ? value_at(m, s) : NULL;
}

int ofl_map_update(struct ofl_map *m, const void *key, const void *value)
{
    uint32_t s = find(m, key);
    if (!m->used[s]) {
        if (m->count == m->entries) {
            m->full++;
            return -ENOSPC;
        }
        m->used[s] = 1;
        memcpy(key_at(m, s), key, m->key_size);
        m->count++;
    }
    memcpy(value_at(m, s), value, m->value_size);
    return 0;
}

int ofl_map_delete(struct ofl_map *m, const void *key)
{
    uint32_t hole = find(m, key);
    if (!m->used[hole])
        return -ENOENT;
    /* Shift back each later key of the run whose home is not between the hole and it. */
    for (uint32_t s = (hole + 1) & m->mask; m->used[s]; s = (s + 1) & m->mask) {
        uint32_t h = home(m, key_at(m, s));
        if (((s - h) & m->mask) >= ((s - hole) & m->mask)) {
            memcpy(key_at(m, hole), key_at(m, s), m->key_size);
            memcpy(value_at(m, hole), value_at(m, s), m->value_size);
            hole = s;
        }
    }
    m->used[hole] = 0;
    memset(value_at(m, hole), 0, m->value_size);
    m->count--;
    return 0;
}

int ofl_map_next(const struct ofl_map *m, uint32_t *slot, const void **key,
                 const void **value)
{
    for (uint32_t s = *slot; s <= m->mask; s++)
        if (m->used[s]) {
            *key = key_at(m, s);
            *value = value_at(m, s);
            *slot = s + 1;
            return 1;
        }
    *slot = m->mask + 1;
    return 0;
}

static void hex(char *out, const uint8_t *p, uint32_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (uint32_t k = 0; k < n; k++) {
        *out++ = digits[p[k] >> 4];
        *out++ = digits[p[k] & 15];
    }
    *out = 0;
}

void ofl_map_json(struct ofl_json *j, const char *name, uint32_t key_size,
                  uint32_t value_size, uint32_t entries, uint32_t count, uint64_t full,
                  bool contents, int (*next)(void *it, const void **key, const void **value),
                  void *it)
{
    char item[2 * OFL_MAP_KEY_MAX + 1 + 2 * OFL_MAP_VALUE_MAX + 1];
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "map");
    ofl_json_u64(j, "items", count);
    ofl_json_u64(j, "entries", entries);
    ofl_json_u64(j, "full", full);
    if (!contents) {
        ofl_json_end_obj(j);
        return;
    }
    ofl_json_begin_arr(j, "pairs");
    const void *k, *v;
    while (key_size <= OFL_MAP_KEY_MAX && value_size <= OFL_MAP_VALUE_MAX && next(it, &k, &v)) {
        hex(item, k, key_size);
        item[2 * key_size] = '=';
        hex(item + 2 * key_size + 1, v, value_size);
        ofl_json_str(j, NULL, item);
    }
    ofl_json_end_arr(j);
    ofl_json_end_obj(j);
}

struct own_it {
    const struct ofl_map *m;
    uint32_t slot;
};

static int own_next(void *it, const void **key, const void **value)
{
    struct own_it *o = it;
    return ofl_map_next(o->m, &o->slot, key, value);
}

void ofl_map_stats_json(struct ofl_json *j, const char *name, const struct ofl_map *m,
                        bool contents)
{
    struct own_it it = { m, 0 };
    ofl_map_json(j, name, m->key_size, m->value_size, m->entries, m->count, m->full,
                 contents, own_next, &it);
}
