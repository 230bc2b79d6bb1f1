/* The route set of an IPv4 table (lpm4_rules.h). */
#include "lpm4_rules.h"

#include <errno.h>
#include <stdlib.h>

/* A route as one word: bit 63 set (never 0 or 1), the prefix in bits 16..55 (address,
 * length), the hop in the low 16 bits. */
static uint64_t key_of(uint32_t addr, uint8_t len)
{
    return (uint64_t)1 << 63 | (uint64_t)addr << 24 | (uint64_t)len << 16;
}

/* The first slot of `key`: every bit of the prefix mixed into the low bits (a route
 * file's prefixes share their low address bits). */
static size_t home(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    key *= 0xC4CEB9FE1A85EC53ull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

struct ofl_lpm4_rules *ofl_lpm4_rules_new(size_t n)
{
    struct ofl_lpm4_rules *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cap = 64;
    while (s->cap < 2 * n + 2) s->cap *= 2;
    s->slot = calloc(s->cap, sizeof *s->slot);
    if (!s->slot) {
        free(s);
        return NULL;
    }
    return s;
}

void ofl_lpm4_rules_free(struct ofl_lpm4_rules *s)
{
    if (!s) return;
    free(s->slot);
    free(s);
}

/* The slot of `key` (its prefix part), or of the empty slot that ends its probe. */
static size_t find(const struct ofl_lpm4_rules *s, uint64_t key)
{
    for (size_t i = home(key, s->cap);; i = (i + 1) & (s->cap - 1))
        if (s->slot[i] == 0 || (s->slot[i] > 1 && (s->slot[i] & ~0xFFFFull) == key)) return i;
}

int ofl_lpm4_rules_reserve(struct ofl_lpm4_rules *s)
{
    /* At most half the slots used or deleted, so a probe always ends. */
    if (2 * (s->used + s->dead + 1) <= s->cap) return 0;
    size_t cap = s->cap;
    while (2 * (s->used + 1) > cap / 2) cap *= 2;
    uint64_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return -ENOMEM;
    struct ofl_lpm4_rules n = {slot, cap, 0, 0};
    for (size_t i = 0; i < s->cap; i++)
        if (s->slot[i] > 1) n.slot[find(&n, s->slot[i] & ~0xFFFFull)] = s->slot[i];
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
    s->dead = 0;
    return 0;
}

void ofl_lpm4_rules_put(struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len, uint16_t hop)
{
    uint64_t key = key_of(addr, len);
    size_t i = find(s, key);
    if (s->slot[i] == 0) s->used++;
    s->slot[i] = key | hop;
}

uint16_t ofl_lpm4_rules_get(const struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len)
{
    return (uint16_t)(s->slot[find(s, key_of(addr, len))] & 0xFFFF);
}

void ofl_lpm4_rules_del(struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len)
{
    size_t i = find(s, key_of(addr, len));
    if (s->slot[i] == 0) return;
    s->slot[i] = 1;
    s->used--;
    s->dead++;
}
