/* IPv6 tables opened for updates: rebuild off to the side, one atomic swap, and the old
 * table freed once every lookup that could read it has left (lpm6.h, ofl_lpm6_live).
 *
 * Why a rebuild and not an incremental update: binary search on prefix lengths keeps,
 * for every prefix, markers on the levels its search passes and in every entry the
 * best matching prefix computed over all shorter routes; the search trees depend on
 * which lengths exist in each /32. One new prefix can add a level, re-shape the trees
 * of every /32 and change the markers and precomputed answers of many entries, so no
 * sequence of single-word stores takes the structure from before to after with every
 * intermediate state answering as one of the two. A new table, built from the updated
 * route set and published with one pointer store, does: a lookup reads the pointer
 * once per batch (ofl_lpm6_enter) and searches one table, before or after. Updates
 * are batched (ofl_lpm6_update): n updates cost one build.
 *
 * Reclamation (RCU-style, with two counted places instead of per-core epochs, so a
 * lookup needs no core id; the price: two atomic adds on a shared line per batch):
 * see struct ofl_lpm6_live. Lookups never wait; the updating
 * thread waits, after the swap, for the lookups still counted in the old place: each
 * ends within its batch. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpm6_live.h"

#define SPINS_BEFORE_YIELD 1024

/* Order of routes: by address, then length. */
static int cmp_route(const struct ofl_route6 *a, const struct ofl_route6 *b)
{
    int c = memcmp(a->addr, b->addr, 16);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Index of route r in the sorted routes (or where it would go); *hit: it is there. */
static size_t find_route(const struct ofl_route6 *v, size_t n, const struct ofl_route6 *r,
                         int *hit)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_route(&v[mid], r) < 0) lo = mid + 1;
        else hi = mid;
    }
    *hit = lo < n && cmp_route(&v[lo], r) == 0;
    return lo;
}

/* A route and where it was given (sorting by both keeps the order of equal ones). */
struct given {
    struct ofl_route6 r;
    size_t pos;
};

static int cmp_given(const void *a, const void *b)
{
    const struct given *x = a, *y = b;
    int c = cmp_route(&x->r, &y->r);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Clear the host bits of route r. */
static void clear_host(struct ofl_route6 *r)
{
    for (unsigned b = 0; b < 16; b++) {
        int keep = (int)r->len - 8 * (int)b;
        r->addr[b] &= keep >= 8 ? 0xFF : keep <= 0 ? 0 : (uint8_t)(0xFF00 >> keep);
    }
}

/* The routes r[0..n) with host bits cleared, sorted, distinct (of equal prefixes the
 * last wins): a malloc'ed array of *out routes. */
static struct ofl_route6 *route_set(const struct ofl_route6 *r, size_t n, size_t *out)
{
    struct given *g = malloc((n + 1) * sizeof *g);
    struct ofl_route6 *v = malloc((n + 1) * sizeof *v);
    if (!g || !v) {
        free(g);
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        g[i].r = r[i];
        g[i].pos = i;
        clear_host(&g[i].r);
    }
    qsort(g, n, sizeof *g, cmp_given);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && cmp_route(&v[k - 1], &g[i].r) == 0) v[k - 1] = g[i].r;
        else v[k++] = g[i].r;
    }
    free(g);
    *out = k;
    return v;
}

int ofl_lpm6_open_live(struct ofl_lpm6 **t, const struct ofl_route6 *r, size_t n,
                       char *errbuf)
{
    *t = NULL;
    for (size_t i = 0; i < n; i++)
        if (r[i].len > 128 || r[i].hop < 1 || r[i].hop > OFL_ROUTE_MAX_HOP) {
            snprintf(errbuf, 256, "route %zu: length %u, hop %u: want 0..128, 1..%u", i,
                     r[i].len, r[i].hop, (unsigned)OFL_ROUTE_MAX_HOP);
            return -EINVAL;
        }
    struct ofl_lpm6 *h = calloc(1, sizeof *h);
    struct ofl_lpm6_live *l = calloc(1, sizeof *l);
    size_t k = 0;
    struct ofl_route6 *v = h && l ? route_set(r, n, &k) : NULL;
    if (!v) {
        free(h);
        free(l);
        snprintf(errbuf, 256, "out of memory for an IPv6 table of %zu routes", n);
        return -ENOMEM;
    }
    l->routes = v;
    l->nroutes = l->cap = k;
    h->live = l;
    int rc = ofl_lpm6_build(&l->cur[0], v, k, errbuf);
    if (rc < 0) {
        ofl_lpm6_free(h);
        return rc;
    }
    h->first = -1;
    *t = h;
    return 0;
}

void ofl_lpm6_live_free(struct ofl_lpm6_live *l)
{
    if (!l) return;
    ofl_lpm6_free(l->cur[0]);
    ofl_lpm6_free(l->cur[1]);
    free(l->routes);
    free(l->staged);
    free(l);
}

size_t ofl_lpm6_live_memory(const struct ofl_lpm6_live *l)
{
    return sizeof *l + l->cap * sizeof *l->routes + ofl_lpm6_memory(l->cur[l->idx]);
}

const struct ofl_lpm6 *ofl_lpm6_enter(const struct ofl_lpm6 *t, unsigned *slot)
{
    struct ofl_lpm6_live *l = t->live;
    if (!l) {
        *slot = 0;
        return t;
    }
    for (;;) {
        unsigned i = __atomic_load_n(&l->idx, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&l->in[i], 1, __ATOMIC_SEQ_CST);
        /* Counted in before any later swap: the updater waits for us to leave. */
        if (__atomic_load_n(&l->idx, __ATOMIC_SEQ_CST) == i) {
            *slot = i;
            return __atomic_load_n(&l->cur[i], __ATOMIC_ACQUIRE);
        }
        __atomic_fetch_add(&l->out[i], 1, __ATOMIC_RELEASE);
    }
}

void ofl_lpm6_leave(const struct ofl_lpm6 *t, unsigned slot)
{
    if (t->live) __atomic_fetch_add(&t->live->out[slot], 1, __ATOMIC_RELEASE);
}

uint64_t ofl_lpm6_entered(const struct ofl_lpm6 *t)
{
    const struct ofl_lpm6_live *l = t->live;
    if (!l) return 0;
    return __atomic_load_n(&l->in[0], __ATOMIC_RELAXED) +
           __atomic_load_n(&l->in[1], __ATOMIC_RELAXED);
}

uint16_t ofl_lpm6_lookup_live(const struct ofl_lpm6 *t, const uint8_t addr[16])
{
    unsigned slot;
    uint16_t hop = ofl_lpm6_lookup(ofl_lpm6_enter(t, &slot), addr);
    ofl_lpm6_leave(t, slot);
    return hop;
}

size_t ofl_lpm6_count(const struct ofl_lpm6 *t)
{
    return t->live ? t->live->nroutes : t->prefixes + (t->def != 0);
}

/* Publish table `next` and free the one it replaces once no lookup is in it. */
static void swap_in(struct ofl_lpm6_live *l, struct ofl_lpm6 *next)
{
    unsigned old = l->idx, now = old ^ 1;
    __atomic_store_n(&l->cur[now], next, __ATOMIC_RELEASE);
    __atomic_store_n(&l->idx, now, __ATOMIC_SEQ_CST);
    /* Every lookup counted in `old` before the swap ends within its batch; one counted
     * after it sees `now` when it checks and leaves `old` at once. out <= in at every
     * moment, and in only grows: reading out, then in, equal, means nobody was inside
     * when out was read. */
    uint64_t spins = 0;
    for (;;) {
        uint64_t o = __atomic_load_n(&l->out[old], __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&l->in[old], __ATOMIC_SEQ_CST) == o) break;
        if (++spins % SPINS_BEFORE_YIELD == 0) sched_yield();
    }
    l->waits += spins != 0;
    struct ofl_lpm6 *was = l->cur[old];
    __atomic_store_n(&l->cur[old], NULL, __ATOMIC_RELEASE);
    ofl_lpm6_free(was);
}

/* Check update `op` (index i of the batch); 0 or -EINVAL with the reason. */
static int check_op(const struct ofl_lpm6_op *op, size_t i, char *errbuf)
{
    struct ofl_route6 r = {.len = op->len};
    memcpy(r.addr, op->addr, 16);
    if (op->len > 128) {
        snprintf(errbuf, 256, "prefix length %u: IPv6 takes 0..128 (update %zu)", op->len, i);
        return -EINVAL;
    }
    clear_host(&r);
    if (memcmp(r.addr, op->addr, 16) != 0) {
        snprintf(errbuf, 256, "the address has bits set past /%u (update %zu)", op->len, i);
        return -EINVAL;
    }
    if (op->hop > OFL_ROUTE_MAX_HOP) {
        snprintf(errbuf, 256, "next hop %u: want 1..%u (update %zu)", op->hop,
                 (unsigned)OFL_ROUTE_MAX_HOP, i);
        return -EINVAL;
    }
    return 0;
}

/* Apply ops to the sorted set v (room for n + nops routes); -ENOENT on a delete of a
 * route it lacks. */
static int apply_ops(struct ofl_route6 *v, size_t *n, const struct ofl_lpm6_op *ops,
                     size_t nops, char *errbuf)
{
    for (size_t i = 0; i < nops; i++) {
        int rc = check_op(&ops[i], i, errbuf);
        if (rc < 0) return rc;
        struct ofl_route6 r = {.hop = ops[i].hop, .len = ops[i].len};
        memcpy(r.addr, ops[i].addr, 16);
        int hit;
        size_t at = find_route(v, *n, &r, &hit);
        if (ops[i].hop && hit) {
            v[at].hop = r.hop;
        } else if (ops[i].hop) {
            memmove(&v[at + 1], &v[at], (*n - at) * sizeof *v);
            v[at] = r;
            ++*n;
        } else if (hit) {
            memmove(&v[at], &v[at + 1], (*n - at - 1) * sizeof *v);
            --*n;
        } else {
            char a[INET6_ADDRSTRLEN] = "?";
            inet_ntop(AF_INET6, r.addr, a, sizeof a);
            snprintf(errbuf, 256, "no route %s/%u%s", a, r.len, nops > 1 ? " (in the batch)" : "");
            return -ENOENT;
        }
    }
    return 0;
}

int ofl_lpm6_update(struct ofl_lpm6 *t, const struct ofl_lpm6_op *ops, size_t n,
                    char *errbuf)
{
    struct ofl_lpm6_live *l = t->live;
    if (!l) {
        snprintf(errbuf, 256, "this IPv6 table was not opened for updates");
        return -EOPNOTSUPP;
    }
    /* The new route set beside the old one: a refusal leaves the old untouched. */
    size_t cap = l->nroutes + n, k = l->nroutes;
    struct ofl_route6 *v = malloc((cap + 1) * sizeof *v);
    if (!v) {
        snprintf(errbuf, 256, "out of memory for %zu routes", cap);
        return -ENOMEM;
    }
    memcpy(v, l->routes, l->nroutes * sizeof *v);
    struct ofl_lpm6 *next = NULL;
    uint64_t began = ofl_lpm6_entered(t);
    int rc = apply_ops(v, &k, ops, n, errbuf);
    if (rc == 0) rc = ofl_lpm6_build(&next, v, k, errbuf);
    if (rc < 0) {
        free(v);
        return rc;
    }
    l->during += ofl_lpm6_entered(t) - began;
    swap_in(l, next);
    free(l->routes);
    l->routes = v;
    l->nroutes = k;
    l->cap = cap;
    l->updates += n;
    l->rebuilds++;
    return 0;
}

int ofl_lpm6_add(struct ofl_lpm6 *t, const uint8_t addr[16], uint8_t len, uint16_t hop,
                 char *errbuf)
{
    struct ofl_lpm6_op op = {.hop = hop, .len = len};
    memcpy(op.addr, addr, 16);
    if (hop == 0) {
        snprintf(errbuf, 256, "next hop 0: want 1..%u", (unsigned)OFL_ROUTE_MAX_HOP);
        return -EINVAL;
    }
    return ofl_lpm6_update(t, &op, 1, errbuf);
}

int ofl_lpm6_del(struct ofl_lpm6 *t, const uint8_t addr[16], uint8_t len, char *errbuf)
{
    struct ofl_lpm6_op op = {.len = len};
    memcpy(op.addr, addr, 16);
    return ofl_lpm6_update(t, &op, 1, errbuf);
}

void ofl_lpm6_unstage(struct ofl_lpm6 *t)
{
    if (!t->live) return;
    t->live->nstaged = 0;
    t->live->refused_at = 0;
}

void ofl_lpm6_refuse(struct ofl_lpm6 *t)
{
    struct ofl_lpm6_live *l = t->live;
    if (!l || l->refused_at) return;
    l->refused_at = l->nstaged + 1;
    l->nstaged = 0;
}

int ofl_lpm6_stage(struct ofl_lpm6 *t, const struct ofl_lpm6_op *op, int add, char *errbuf)
{
    struct ofl_lpm6_live *l = t->live;
    if (!l) {
        snprintf(errbuf, 256, "this IPv6 table was not opened for updates");
        return -EOPNOTSUPP;
    }
    size_t i = l->nstaged + (l->refused_at ? 1 : 0);
    if (l->refused_at) {
        snprintf(errbuf, 256, "the batch was refused at update %zu: begin a new one",
                 l->refused_at - 1);
        return -EINVAL;
    }
    int rc = check_op(op, i, errbuf);
    if (rc == 0 && add == (op->hop == 0)) {
        if (add)
            snprintf(errbuf, 256, "next hop 0: want 1..%u (update %zu)",
                     (unsigned)OFL_ROUTE_MAX_HOP, i);
        else
            snprintf(errbuf, 256, "a delete has no next hop (update %zu)", i);
        rc = -EINVAL;
    }
    if (rc == 0 && l->nstaged == OFL_LPM6_STAGE_MAX) {
        snprintf(errbuf, 256, "a batch holds at most %u updates (update %zu)",
                 OFL_LPM6_STAGE_MAX, i);
        rc = -ENOSPC;
    }
    if (rc == 0 && l->nstaged == l->staged_cap) {
        size_t cap = l->staged_cap ? 2 * l->staged_cap : 256;
        struct ofl_lpm6_op *v = realloc(l->staged, cap * sizeof *v);
        if (!v) {
            snprintf(errbuf, 256, "out of memory for a batch of %zu updates", cap);
            rc = -ENOMEM;
        } else {
            l->staged = v;
            l->staged_cap = cap;
        }
    }
    if (rc < 0) {
        l->refused_at = i + 1;
        l->nstaged = 0;
        return rc;
    }
    l->staged[l->nstaged++] = *op;
    return 0;
}

int ofl_lpm6_commit(struct ofl_lpm6 *t, size_t *applied, char *errbuf)
{
    struct ofl_lpm6_live *l = t->live;
    *applied = 0;
    if (!l) {
        snprintf(errbuf, 256, "this IPv6 table was not opened for updates");
        return -EOPNOTSUPP;
    }
    int rc = 0;
    if (l->refused_at) {
        snprintf(errbuf, 256, "the batch was refused at update %zu: nothing applied",
                 l->refused_at - 1);
        rc = -EINVAL;
    } else if (l->nstaged) {
        rc = ofl_lpm6_update(t, l->staged, l->nstaged, errbuf);
    }
    if (rc == 0) *applied = l->nstaged;
    ofl_lpm6_unstage(t);
    return rc;
}
