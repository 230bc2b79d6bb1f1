/* Tests of the shared hash map (offlow/map.h): sizes refused at open, `full` counted at
 * the limit, deletes that shift a probe run back, and a long random sequence of
 * lookups, updates and deletes over a small key space checked call by call against a
 * plain array model (the same keys and values, and iteration finding each key once). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "offlow/map.h"

/* A 13-byte key, as a packed 5-tuple. */
struct key13 {
    uint8_t b[13];
};

static struct key13 key_of(uint32_t i)
{
    struct key13 k;
    memset(&k, 0, sizeof k);
    memcpy(k.b, &i, sizeof i);
    k.b[12] = (uint8_t)(i * 7u);
    return k;
}

/* The model: keys present, their values. */
#define SPACE 64u
struct model {
    int has[SPACE];
    uint64_t v[SPACE];
    uint32_t count;
    uint64_t full;
};

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int matches(struct ofl_map *m, const struct model *md)
{
    for (uint32_t i = 0; i < SPACE; i++) {
        struct key13 k = key_of(i);
        uint64_t *v = ofl_map_lookup(m, &k);
        if (!!v != md->has[i] || (v && *v != md->v[i]))
            return 0;
    }
    uint32_t slot = 0, seen = 0;
    const void *k, *v;
    while (ofl_map_next(m, &slot, &k, &v)) {
        uint32_t i;
        memcpy(&i, k, sizeof i);
        if (i >= SPACE || !md->has[i] || memcmp(v, &md->v[i], 8))
            return 0;
        seen++;
    }
    return seen == md->count && m->count == md->count && m->full == md->full;
}

static void random_sequence(uint32_t entries, uint64_t seed)
{
    struct ofl_map *m;
    CHECK(ofl_map_open(&m, sizeof(struct key13), 8, entries) == 0, "open %u entries", entries);
    struct model md;
    memset(&md, 0, sizeof md);
    int ok = 1;
    for (int n = 0; n < 20000 && ok; n++) {
        uint64_t r = rng(&seed);
        uint32_t i = (uint32_t)(r % SPACE);
        struct key13 k = key_of(i);
        uint64_t val = r >> 8;
        switch ((r >> 6) % 3) {
        case 0: {
            int rc = ofl_map_update(m, &k, &val);
            int want = md.has[i] || md.count < entries ? 0 : -ENOSPC;
            ok = rc == want;
            if (!want) {
                md.count += !md.has[i];
                md.has[i] = 1;
                md.v[i] = val;
            } else {
                md.full++;
            }
            break;
        }
        case 1:
            ok = ofl_map_delete(m, &k) == (md.has[i] ? 0 : -ENOENT);
            md.count -= md.has[i];
            md.has[i] = 0;
            break;
        default: {
            uint64_t *v = ofl_map_lookup(m, &k);
            ok = !!v == md.has[i] && (!v || *v == md.v[i]);
        }
        }
        if (ok && n % 97 == 0)
            ok = matches(m, &md);
    }
    CHECK(ok && matches(m, &md), "20000 random calls over %u keys, %u entries: as the model "
          "(%u held, %llu full)", SPACE, entries, md.count, (unsigned long long)md.full);
    ofl_map_close(m);
}

int main(void)
{
    struct ofl_map *m = (struct ofl_map *)1;
    CHECK(ofl_map_open(&m, 0, 8, 4) == -EINVAL && !m, "a 0-byte key refused");
    CHECK(ofl_map_open(&m, OFL_MAP_KEY_MAX + 1, 8, 4) == -EINVAL, "a key too long refused");
    CHECK(ofl_map_open(&m, 4, OFL_MAP_VALUE_MAX + 1, 4) == -EINVAL, "a value too long refused");
    CHECK(ofl_map_open(&m, sizeof(struct key13), 33, 4) == 0, "a 33-byte value (a record)");
    {
        struct key13 k = key_of(3);
        uint8_t rec[33], got[33];
        for (unsigned i = 0; i < sizeof rec; i++) rec[i] = (uint8_t)(0xa0 + i);
        CHECK(ofl_map_update(m, &k, rec) == 0, "a record stored");
        const uint8_t *v = ofl_map_lookup(m, &k);
        CHECK(v && memcpy(got, v, sizeof got) && memcmp(got, rec, sizeof rec) == 0,
              "the record's 33 bytes read back whole");
        ofl_map_close(m);
    }
    CHECK(ofl_map_open(&m, 4, 8, 0) == -EINVAL, "0 entries refused");
    CHECK(ofl_map_open(&m, 4, 8, OFL_MAP_ENTRIES_MAX + 1) == -EINVAL, "too many entries refused");

    CHECK(ofl_map_open(&m, sizeof(struct key13), 8, 4) == 0, "open 4 entries");
    for (uint32_t i = 0; i < 6; i++) {
        struct key13 k = key_of(i);
        uint64_t v = 100 + i;
        CHECK(ofl_map_update(m, &k, &v) == (i < 4 ? 0 : -ENOSPC), "update key %u", i);
    }
    struct key13 k0 = key_of(0), k5 = key_of(5);
    uint64_t v = 7;
    CHECK(m->full == 2 && m->count == 4, "two refused, counted full: %llu",
          (unsigned long long)m->full);
    CHECK(ofl_map_update(m, &k0, &v) == 0 && *(uint64_t *)ofl_map_lookup(m, &k0) == 7,
          "a held key updated when full");
    CHECK(ofl_map_delete(m, &k0) == 0 && ofl_map_lookup(m, &k0) == NULL, "deleted");
    CHECK(ofl_map_delete(m, &k0) == -ENOENT, "deleted twice: -ENOENT");
    CHECK(ofl_map_update(m, &k5, &v) == 0 && m->full == 2, "room again after a delete");
    ofl_map_close(m);
    ofl_map_close(NULL);

    /* Colliding keys: a 1-entry map has 2 slots, so every pair of keys shares a run. */
    for (uint64_t seed = 1; seed <= 8; seed++)
        random_sequence(seed == 1 ? 1 : seed == 2 ? 2 : seed * 7, seed * 0x9E3779B97F4A7C15ull);
    random_sequence(SPACE, 12345);
    return CHECK_DONE();
}
