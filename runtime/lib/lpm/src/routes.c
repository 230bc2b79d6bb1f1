/* Route lists and the next-hop rule. */
#include "offlow/routes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/synth.h"

void ofl_routes_init(struct ofl_routes *r)
{
    memset(r, 0, sizeof *r);
}

void ofl_routes_free(struct ofl_routes *r)
{
    free(r->v4);
    free(r->v6);
    memset(r, 0, sizeof *r);
}

static uint32_t fnv1a(uint32_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

#define FNV_BASIS 2166136261u

uint16_t ofl_route_hop4(uint32_t addr, uint8_t len, unsigned nports)
{
    if (nports < 1 || nports > OFL_ROUTE_MAX_HOP || len > 32) return 0;
    if (len < 32) addr &= len ? ~(uint32_t)0 << (32 - len) : 0;
    uint8_t b[5] = {(uint8_t)(addr >> 24), (uint8_t)(addr >> 16), (uint8_t)(addr >> 8),
                    (uint8_t)addr, len};
    return (uint16_t)(fnv1a(FNV_BASIS, b, sizeof b) % nports + 1);
}

/* Clear the host bits of a 16-byte address for length `len` (<= 128). */
static void mask6(uint8_t a[16], unsigned len)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned keep = len > 8 * i ? len - 8 * i : 0;
        if (keep < 8) a[i] &= (uint8_t)(0xFF00u >> keep);
    }
}

uint16_t ofl_route_hop6(const uint8_t addr[16], uint8_t len, unsigned nports)
{
    if (nports < 1 || nports > OFL_ROUTE_MAX_HOP || len > 128) return 0;
    uint8_t b[17];
    memcpy(b, addr, 16);
    mask6(b, len);
    b[16] = len;
    return (uint16_t)(fnv1a(FNV_BASIS, b, sizeof b) % nports + 1);
}

/* Make room for `need` entries of `size` bytes in array `*v` of `*cap` entries. */
static int grow(void *v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *p = realloc(*(void **)v, c * size);
    if (!p) return -ENOMEM;
    *(void **)v = p;
    *cap = c;
    return 0;
}

int ofl_routes_add4(struct ofl_routes *r, uint32_t addr, uint8_t len, uint16_t hop)
{
    if (len > 32 || hop < 1 || hop > OFL_ROUTE_MAX_HOP) return -EINVAL;
    if (grow(&r->v4, &r->cap4, r->n4 + 1, sizeof *r->v4) < 0) return -ENOMEM;
    struct ofl_route4 *e = &r->v4[r->n4++];
    e->addr = len == 32 ? addr : len ? addr & ~(uint32_t)0 << (32 - len) : 0;
    e->len = len;
    e->hop = hop;
    return 0;
}

int ofl_routes_add6(struct ofl_routes *r, const uint8_t addr[16], uint8_t len, uint16_t hop)
{
    if (len > 128 || hop < 1 || hop > OFL_ROUTE_MAX_HOP) return -EINVAL;
    if (grow(&r->v6, &r->cap6, r->n6 + 1, sizeof *r->v6) < 0) return -ENOMEM;
    struct ofl_route6 *e = &r->v6[r->n6++];
    memcpy(e->addr, addr, 16);
    mask6(e->addr, len);
    e->len = len;
    e->hop = hop;
    return 0;
}

int ofl_routes_load(struct ofl_routes *r, const char *path, unsigned nports, char *errbuf)
{
    if (nports == 0) nports = OFL_ROUTE_DEFAULT_PORTS;
    if (nports > OFL_ROUTE_MAX_HOP) {
        snprintf(errbuf, 256, "%u ports: at most %u next hops fit the tables", nports,
                 OFL_ROUTE_MAX_HOP);
        return -EINVAL;
    }
    struct ofl_prefixes ps;
    ofl_prefixes_init(&ps);
    ps.keep_v6 = 1;
    int rc = ofl_prefixes_load(&ps, path, errbuf);
    if (rc == 0 && (grow(&r->v4, &r->cap4, r->n4 + ps.n, sizeof *r->v4) < 0 ||
                    grow(&r->v6, &r->cap6, r->n6 + ps.v6, sizeof *r->v6) < 0)) {
        snprintf(errbuf, 256, "out of memory for the routes of %s", path);
        rc = -ENOMEM;
    }
    if (rc == 0) {
        for (size_t i = 0; i < ps.n; i++) {
            struct ofl_route4 *e = &r->v4[r->n4++];
            e->addr = ps.v[i].addr;
            e->len = ps.v[i].len;
            e->hop = ofl_route_hop4(e->addr, e->len, nports);
        }
        for (size_t i = 0; i < ps.v6; i++) {
            struct ofl_route6 *e = &r->v6[r->n6++];
            memcpy(e->addr, ps.v6v[i].addr, 16);
            e->len = ps.v6v[i].len;
            e->hop = ofl_route_hop6(e->addr, e->len, nports);
        }
        r->lines += ps.lines;
        r->blank += ps.blank;
        if (!r->bad) r->first_bad = ps.first_bad;
        r->bad += ps.bad;
    }
    ofl_prefixes_free(&ps);
    return rc;
}
