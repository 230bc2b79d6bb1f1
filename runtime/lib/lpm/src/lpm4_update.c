/* Incremental updates of an IPv4 table while lookups run (lpm4.h says why every
 * lookup sees the table before or after each update). The updating thread is the only
 * writer; every entry a lookup may read is written with one atomic store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpm4_rules.h"
#include "offlow/lpm4.h"

/* Store an entry that lookups may be reading; release: what it points to is filled. */
static void publish(uint16_t *p, uint16_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static uint32_t mask(uint8_t len)
{
    return len ? ~(uint32_t)0 << (32 - len) : 0;
}

/* A rewrite: entries whose depth is in [lo, hi] take `hop` at depth `dep`. */
struct rewrite {
    uint8_t lo, hi, dep;
    uint16_t hop;
};

static int applies(const struct rewrite *w, uint8_t dep)
{
    return dep >= w->lo && dep <= w->hi;
}

/* Rewrite tbl8 entries [at, at + n). */
static void rewrite8(struct ofl_lpm4 *t, size_t at, size_t n, const struct rewrite *w)
{
    for (size_t i = at; i < at + n; i++) {
        if (!applies(w, t->dep8[i])) continue;
        t->dep8[i] = w->dep;
        if (t->tbl8[i] != w->hop) publish(&t->tbl8[i], w->hop);
    }
}

/* Rewrite tbl24 entries [at, at + n) of an own block; an entry that is a group: its
 * whole group. */
static void rewrite24(struct ofl_lpm4 *t, size_t at, size_t n, const struct rewrite *w)
{
    for (size_t i = at; i < at + n; i++) {
        uint16_t e = t->tbl24[i];
        if (e & OFL_LPM4_GROUP) {
            rewrite8(t, (size_t)(e & ~OFL_LPM4_GROUP) * 256, 256, w);
            continue;
        }
        if (!applies(w, t->dep24[i])) continue;
        t->dep24[i] = w->dep;
        if (e != w->hop) publish(&t->tbl24[i], w->hop);
    }
}

/* The shared block of `hop` (made when there is none: the caller checked the room). */
static uint16_t shared_block(struct ofl_lpm4 *t, uint16_t hop)
{
    if (t->shared[hop] < 0) {
        uint32_t b = t->blocks;
        for (size_t i = 0; i < OFL_LPM4_BLOCK; i++) t->tbl24[(size_t)b * OFL_LPM4_BLOCK + i] = hop;
        t->shared[hop] = (int32_t)b;
        t->blocks++;
    }
    return (uint16_t)t->shared[hop];
}

/* Rewrite /16 `d` whole (a prefix of length <= 16). */
static void rewrite16(struct ofl_lpm4 *t, uint32_t d, const struct rewrite *w)
{
    if (t->own[d] >= 0) {
        rewrite24(t, (size_t)t->own[d] * OFL_LPM4_BLOCK, OFL_LPM4_BLOCK, w);
        return;
    }
    if (!applies(w, t->dep16[d])) return;
    t->dep16[d] = w->dep;
    publish(&t->dir[d], shared_block(t, w->hop));
}

/* The own block of /16 `d`, made when it shares one (copy on write: filled with the
 * /16's hop and depth, then published; the caller checked the room). */
static size_t own_block(struct ofl_lpm4 *t, uint32_t d)
{
    if (t->own[d] < 0) {
        uint32_t b = t->blocks;
        uint16_t hop = t->tbl24[(size_t)t->dir[d] * OFL_LPM4_BLOCK];
        for (size_t i = 0; i < OFL_LPM4_BLOCK; i++) {
            t->tbl24[(size_t)b * OFL_LPM4_BLOCK + i] = hop;
            t->dep24[(size_t)b * OFL_LPM4_BLOCK + i] = t->dep16[d];
        }
        t->blocks++;
        t->own[d] = (int32_t)b;
        publish(&t->dir[d], (uint16_t)b);
    }
    return (size_t)t->own[d] * OFL_LPM4_BLOCK;
}

/* The tbl8 group of tbl24 entry `at`, made when it has none (copy on write, as
 * own_block; the caller checked the room). */
static size_t own_group(struct ofl_lpm4 *t, size_t at)
{
    uint16_t e = t->tbl24[at];
    if (!(e & OFL_LPM4_GROUP)) {
        uint32_t g = t->groups;
        for (size_t i = 0; i < 256; i++) {
            t->tbl8[(size_t)g * 256 + i] = e;
            t->dep8[(size_t)g * 256 + i] = t->dep24[at];
        }
        t->groups++;
        e = (uint16_t)(OFL_LPM4_GROUP | g);
        publish(&t->tbl24[at], e);
    }
    return (size_t)(e & ~OFL_LPM4_GROUP) * 256;
}

/* Blocks and groups that rewriting prefix a/len with `w` needs and has not got; -ENOSPC
 * (with the message) when they do not fit. */
static int room(const struct ofl_lpm4 *t, uint32_t a, uint8_t len, const struct rewrite *w,
                char *errbuf)
{
    uint32_t blocks = 0, groups = 0, d = a >> 16;
    if (len <= 16) {
        for (uint32_t i = 0; i < (1u << (16 - len)) && !blocks; i++)
            blocks = t->own[d + i] < 0 && applies(w, t->dep16[d + i]) && t->shared[w->hop] < 0;
    } else {
        blocks = t->own[d] < 0;
        groups = len > 24 &&
                 (blocks || !(t->tbl24[(size_t)t->own[d] * OFL_LPM4_BLOCK + (a >> 8 & 0xFF)] &
                              OFL_LPM4_GROUP));
    }
    if (t->blocks + blocks > OFL_LPM4_DIR_ENTRIES) {
        snprintf(errbuf, 256, "out of tbl24 blocks (%u in use)", t->blocks);
        return -ENOSPC;
    }
    if (t->groups + groups > OFL_LPM4_MAX_GROUPS) {
        snprintf(errbuf, 256, "out of tbl8 groups (%u in use)", t->groups);
        return -ENOSPC;
    }
    return 0;
}

/* Rewrite the range of prefix a/len (checked for room). */
static void rewrite(struct ofl_lpm4 *t, uint32_t a, uint8_t len, const struct rewrite *w)
{
    if (len <= 16) {
        for (uint32_t i = 0; i < (1u << (16 - len)); i++) rewrite16(t, (a >> 16) + i, w);
        return;
    }
    size_t at = own_block(t, a >> 16) + (a >> 8 & 0xFF);
    if (len <= 24) {
        rewrite24(t, at, (size_t)1 << (24 - len), w);
        return;
    }
    rewrite8(t, own_group(t, at) + (a & 0xFF), (size_t)1 << (32 - len), w);
}

/* Make the route set from the routes the table was built from (the first update
 * does); -ENOMEM when it cannot. */
static int rules_ready(struct ofl_lpm4 *t)
{
    if (t->rules) return 0;
    t->rules = ofl_lpm4_rules_new(t->routes);
    if (!t->rules) return -ENOMEM;
    for (size_t i = 0; i < t->routes; i++) {   /* in order: of equal prefixes the last wins */
        const struct ofl_route4 *r = &t->given[i];
        ofl_lpm4_rules_put(t->rules, r->addr & mask(r->len), r->len, r->hop);
    }
    free(t->given);
    t->given = NULL;
    return 0;
}

/* -EINVAL with the message when len or hop is out of range, -ENOMEM when the route
 * set cannot be made. */
static int check(struct ofl_lpm4 *t, uint8_t len, uint16_t hop, char *errbuf)
{
    if (rules_ready(t) < 0) {
        snprintf(errbuf, 256, "out of memory for the table's route set");
        return -ENOMEM;
    }
    if (len > 32) {
        snprintf(errbuf, 256, "prefix length %u: IPv4 takes 0..32", len);
        return -EINVAL;
    }
    if (hop < 1 || hop > OFL_ROUTE_MAX_HOP) {
        snprintf(errbuf, 256, "next hop %u: want 1..%u", hop, OFL_ROUTE_MAX_HOP);
        return -EINVAL;
    }
    return 0;
}

int ofl_lpm4_add(struct ofl_lpm4 *t, uint32_t addr, uint8_t len, uint16_t hop, char *errbuf)
{
    int rc = check(t, len, hop, errbuf);
    if (rc < 0) return rc;
    uint32_t a = addr & mask(len);
    struct rewrite w = {0, (uint8_t)(len + 1), (uint8_t)(len + 1), hop};
    if ((rc = room(t, a, len, &w, errbuf)) < 0) return rc;
    if (ofl_lpm4_rules_reserve(t->rules) < 0) {
        snprintf(errbuf, 256, "out of memory for the table's route set");
        return -ENOMEM;
    }
    ofl_lpm4_rules_put(t->rules, a, len, hop);
    rewrite(t, a, len, &w);
    t->updates++;
    return 0;
}

int ofl_lpm4_del(struct ofl_lpm4 *t, uint32_t addr, uint8_t len, char *errbuf)
{
    int rc = check(t, len, 1, errbuf);
    if (rc < 0) return rc;
    uint32_t a = addr & mask(len);
    if (!ofl_lpm4_rules_get(t->rules, a, len)) {
        snprintf(errbuf, 256, "no route %u.%u.%u.%u/%u", a >> 24, a >> 16 & 0xFF,
                 a >> 8 & 0xFF, a & 0xFF, len);
        return -ENOENT;
    }
    /* What the prefix leaves: the longest shorter route that contains it. */
    struct rewrite w = {(uint8_t)(len + 1), (uint8_t)(len + 1), 0, 0};
    for (int l = len - 1; l >= 0 && !w.hop; l--) {
        w.hop = ofl_lpm4_rules_get(t->rules, a & mask((uint8_t)l), (uint8_t)l);
        w.dep = w.hop ? (uint8_t)(l + 1) : 0;
    }
    if ((rc = room(t, a, len, &w, errbuf)) < 0) return rc;
    rewrite(t, a, len, &w);
    ofl_lpm4_rules_del(t->rules, a, len);
    t->updates++;
    return 0;
}

uint16_t ofl_lpm4_route(struct ofl_lpm4 *t, uint32_t addr, uint8_t len)
{
    if (len > 32 || rules_ready(t) < 0) return 0;
    return ofl_lpm4_rules_get(t->rules, addr & mask(len), len);
}

size_t ofl_lpm4_count(struct ofl_lpm4 *t)
{
    return rules_ready(t) < 0 ? 0 : t->rules->used;
}
