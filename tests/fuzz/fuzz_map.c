/* libFuzzer target: the shared hash map (offlow/map.h) driven by arbitrary bytes against
 * a plain array model. The first byte chooses the key size (1..16) and the number of
 * entries (1..16); then each 3-byte step is an operation (lookup, update, delete), a
 * key index into a space of 32 keys and a value byte. Every answer, the count, `full`
 * and a walk of the map must agree with the model. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/map.h"

#define SPACE 32u

static void key_of(uint8_t *k, uint32_t ksz, uint32_t i)
{
    memset(k, 0, ksz);
    k[0] = (uint8_t)i;          /* distinct in the first byte; the rest varies collisions */
    for (uint32_t b = 1; b < ksz; b++)
        k[b] = (uint8_t)(i * 31u + b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    uint32_t ksz = 1u + (data[0] & 15u), entries = 1u + (data[0] >> 4);
    struct ofl_map *m;
    if (ofl_map_open(&m, ksz, 8, entries) != 0)
        abort();
    int has[SPACE] = { 0 };
    uint64_t val[SPACE] = { 0 }, full = 0;
    uint32_t count = 0;
    uint8_t k[16];
    for (size_t p = 1; p + 3 <= size; p += 3) {
        uint32_t i = data[p + 1] % SPACE;
        uint64_t v = (uint64_t)data[p + 2] * 0x0101010101010101ull;
        key_of(k, ksz, i);
        switch (data[p] % 3) {
        case 0: {
            int rc = ofl_map_update(m, k, &v);
            if (has[i] || count < entries) {
                if (rc != 0) abort();
                count += !has[i];
                has[i] = 1;
                val[i] = v;
            } else {
                if (rc != -ENOSPC) abort();
                full++;
            }
            break;
        }
        case 1:
            if (ofl_map_delete(m, k) != (has[i] ? 0 : -ENOENT)) abort();
            count -= (uint32_t)has[i];
            has[i] = 0;
            break;
        default: {
            uint64_t *got = ofl_map_lookup(m, k);
            if (!!got != has[i] || (got && *got != val[i])) abort();
        }
        }
    }
    if (m->count != count || m->full != full) abort();
    uint32_t slot = 0, seen = 0;
    const void *kk, *vv;
    while (ofl_map_next(m, &slot, &kk, &vv)) {
        uint32_t i = ((const uint8_t *)kk)[0];
        if (i >= SPACE || !has[i] || memcmp(vv, &val[i], 8)) abort();
        seen++;
    }
    if (seen != count) abort();
    ofl_map_close(m);
    return 0;
}
