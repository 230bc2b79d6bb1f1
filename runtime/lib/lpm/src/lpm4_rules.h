/* The route set of an IPv4 table (lpm4.h), for its updates: which prefixes it holds
 * and their hops, to find what a deleted prefix leaves behind. An open-addressing
 * hash set of 64-bit words, each a whole route: only the updating thread touches it. */
#ifndef OFL_LPM4_RULES_H
#define OFL_LPM4_RULES_H

#include <stddef.h>
#include <stdint.h>

struct ofl_lpm4_rules {
    uint64_t *slot;   /* 0: empty, 1: deleted, else a route (rule_word) */
    size_t cap;       /* a power of two */
    size_t used;      /* routes */
    size_t dead;      /* deleted slots */
};

/* An empty set with room for `n` routes; NULL when out of memory. */
struct ofl_lpm4_rules *ofl_lpm4_rules_new(size_t n);

/* Free a set (NULL is fine). */
void ofl_lpm4_rules_free(struct ofl_lpm4_rules *s);

/* Make room for one more route, so that the next ofl_lpm4_rules_put cannot fail.
 * Returns 0 or -ENOMEM (the set unchanged). */
int ofl_lpm4_rules_reserve(struct ofl_lpm4_rules *s);

/* Set the hop of prefix addr/len (addr masked, len 0..32, hop >= 1). Needs room
 * (ofl_lpm4_rules_reserve). */
void ofl_lpm4_rules_put(struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len, uint16_t hop);

/* The hop of prefix addr/len (addr masked), 0 when absent. */
uint16_t ofl_lpm4_rules_get(const struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len);

/* Remove prefix addr/len (addr masked); nothing when absent. */
void ofl_lpm4_rules_del(struct ofl_lpm4_rules *s, uint32_t addr, uint8_t len);

#endif
