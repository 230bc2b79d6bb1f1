/* libFuzzer target: prefix text (IPv4 and IPv6, keep_v6) -> route lists -> the
 * DIR-24-8 and binary-search-on-lengths tables -> lookups.
 *
 * The text is read in two pieces split where its first byte says and whole; both
 * readings must agree, every IPv6 prefix must be canonical (host bits zero, length
 * <= 128). Routes get hops by the file rule for 1..256 ports (second byte). Both
 * tables are built and every route's first and last address (and their neighbours)
 * must give the brute-force answer, scalar and batched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/simd.h"
#include "offlow/routes.h"
#include "offlow/synth.h"

/* Routes checked address by address (brute force is quadratic). */
#define MAX_CHECKED 64

static void read_text(struct ofl_prefixes *ps, const char *text, size_t size, size_t cut)
{
    ofl_prefixes_init(ps);
    ps->keep_v6 = 1;
    if (ofl_prefixes_feed(ps, text, cut) || ofl_prefixes_feed(ps, text + cut, size - cut) ||
        ofl_prefixes_finish(ps))
        abort();
    if (ps->lines != ps->n + ps->v6 + ps->blank + ps->bad) abort();
}

static uint32_t mask4(unsigned len)
{
    return len ? ~(uint32_t)0 << (32 - len) : 0;
}

static uint16_t brute4(const struct ofl_routes *r, uint32_t a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < r->n4; i++)
        if ((a & mask4(r->v4[i].len)) == r->v4[i].addr && (int)r->v4[i].len >= best) {
            best = r->v4[i].len;
            hop = r->v4[i].hop;
        }
    return hop;
}

static int match6(const uint8_t *a, const uint8_t *p, unsigned len)
{
    for (unsigned b = 0; b < len; b++)
        if (((a[b / 8] ^ p[b / 8]) >> (7 - b % 8)) & 1) return 0;
    return 1;
}

static uint16_t brute6(const struct ofl_routes *r, const uint8_t *a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < r->n6; i++)
        if ((int)r->v6[i].len >= best && match6(a, r->v6[i].addr, r->v6[i].len)) {
            best = r->v6[i].len;
            hop = r->v6[i].hop;
        }
    return hop;
}

static void check_v4(const struct ofl_routes *r)
{
    struct ofl_lpm4 *t;
    char err[256];
    if (ofl_lpm4_build(&t, r->v4, r->n4, err) < 0) abort();   /* < 2^15 groups here */
    size_t n = r->n4 < MAX_CHECKED ? r->n4 : MAX_CHECKED, k = 0;
    uint32_t a[4 * MAX_CHECKED];
    uint16_t h[4 * MAX_CHECKED];
    for (size_t i = 0; i < n; i++) {
        uint32_t first = r->v4[i].addr, last = first | ~mask4(r->v4[i].len);
        a[k++] = first;
        a[k++] = last;
        a[k++] = first - 1;
        a[k++] = last + 1;
    }
    ofl_lpm4_lookup_batch(t, a, h, (unsigned)k);
    for (size_t i = 0; i < k; i++) {
        uint16_t want = brute4(r, a[i]);
        if (ofl_lpm4_lookup(t, a[i]) != want || h[i] != want) abort();
    }
    ofl_lpm4_free(t);
}

static void check_v6(const struct ofl_routes *r)
{
    struct ofl_lpm6 *t;
    char err[256];
    if (ofl_lpm6_build(&t, r->v6, r->n6, err) < 0) abort();
    size_t n = r->n6 < MAX_CHECKED ? r->n6 : MAX_CHECKED, k = 0;
    static uint8_t a[4 * MAX_CHECKED][16];
    uint16_t h[4 * MAX_CHECKED];
    for (size_t i = 0; i < n; i++) {
        const struct ofl_route6 *p = &r->v6[i];
        uint8_t last[16];
        for (unsigned b = 0; b < 16; b++) {
            unsigned keep = p->len > 8 * b ? p->len - 8 * b : 0;
            last[b] = keep >= 8 ? p->addr[b] : (uint8_t)(p->addr[b] | (0xFFu >> keep));
        }
        memcpy(a[k++], p->addr, 16);
        memcpy(a[k++], last, 16);
        /* first - 1 and last + 1 */
        memcpy(a[k], p->addr, 16);
        for (int b = 15; b >= 0 && a[k][b]-- == 0; b--) continue;
        k++;
        memcpy(a[k], last, 16);
        for (int b = 15; b >= 0 && ++a[k][b] == 0; b--) continue;
        k++;
    }
    /* The trie (scalar, and its batch on every path this CPU has) and the hash levels
     * the gpu target reads. */
    for (int path = OFL_SIMD_SCALAR; path <= (int)ofl_simd_cpu(); path++) {
        t->trie.simd = path;
        ofl_lpm6_lookup_batch(t, a[0], h, (unsigned)k);
        for (size_t i = 0; i < k; i++)
            if (h[i] != brute6(r, a[i])) abort();
    }
    for (size_t i = 0; i < k; i++) {
        uint16_t want = brute6(r, a[i]);
        if (ofl_lpm6_lookup(t, a[i]) != want || ofl_lpm6_lookup_bsl(t, a[i]) != want) abort();
    }
    ofl_lpm6_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t cut = size ? data[0] % (size + 1) : 0;
    unsigned nports = size > 1 ? 1u + data[1] : OFL_ROUTE_DEFAULT_PORTS;
    struct ofl_prefixes a, b;
    read_text(&a, text, size, cut);
    read_text(&b, text, size, size);
    if (a.n != b.n || a.v6 != b.v6 || a.bad != b.bad || a.blank != b.blank) abort();
    if (a.v6 && memcmp(a.v6v, b.v6v, a.v6 * sizeof *a.v6v)) abort();
    for (size_t i = 0; i < a.v6; i++) {
        const struct ofl_prefix6 *p = &a.v6v[i];
        if (p->len > 128) abort();
        for (unsigned bit = p->len; bit < 128; bit++)
            if ((p->addr[bit / 8] >> (7 - bit % 8)) & 1) abort();
    }

    struct ofl_routes r;
    ofl_routes_init(&r);
    for (size_t i = 0; i < a.n; i++)
        if (ofl_routes_add4(&r, a.v[i].addr, a.v[i].len,
                            ofl_route_hop4(a.v[i].addr, a.v[i].len, nports)) < 0)
            abort();
    for (size_t i = 0; i < a.v6; i++)
        if (ofl_routes_add6(&r, a.v6v[i].addr, a.v6v[i].len,
                            ofl_route_hop6(a.v6v[i].addr, a.v6v[i].len, nports)) < 0)
            abort();
    ofl_prefixes_free(&a);
    ofl_prefixes_free(&b);
    if (r.n4) check_v4(&r);
    check_v6(&r);
    ofl_routes_free(&r);

    /* The whole input as one line. */
    uint32_t a4;
    uint8_t a6[16], len;
    int rc = ofl_prefix_parse_line6(text, size, &a4, a6, &len);
    if (rc == OFL_PREFIX_V6 && len > 128) abort();
    if (rc == OFL_PREFIX_V4 && len > 32) abort();
    return 0;
}
