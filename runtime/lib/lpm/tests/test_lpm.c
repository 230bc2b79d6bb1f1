/* Longest-prefix match: the IPv6 prefix parser, route lists and the next-hop rule,
 * DIR-24-8 (lpm4) and binary search on lengths (lpm6), each table checked against a
 * brute-force linear scan on random prefix sets: every prefix's first and last
 * address (and their neighbours) plus random addresses, batch == scalar, rebuilds.
 *
 * usage: test_lpm [--quick] [--tmp DIR] [--bgp FILE]
 *   --quick  smaller sets (for sanitizer builds)
 *   --bgp    instead, the full BGP table: route counts, build times, spot checks
 *            against brute force, batch == scalar, and a 20k-prefix slice checked
 *            against brute force on its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "offlow/gen.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/lpm_tables.h"
#include "offlow/simd.h"
#include "offlow/routes.h"
#include "offlow/synth.h"

static int quick;
static const char *tmp_dir = "/tmp";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- brute-force references ------------------------------------------------------ */

static uint32_t mask4(unsigned len)
{
    return len ? ~(uint32_t)0 << (32 - len) : 0;
}

/* Longest match by linear scan; of equal prefixes the later wins. */
static uint16_t brute4(const struct ofl_route4 *r, size_t n, uint32_t a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t m = mask4(r[i].len);
        if ((a & m) == (r[i].addr & m) && (int)r[i].len >= best) {
            best = r[i].len;
            hop = r[i].hop;
        }
    }
    return hop;
}

/* Whether the first `len` bits of a and b agree. */
static int match6(const uint8_t *a, const uint8_t *b, unsigned len)
{
    unsigned full = len / 8, rest = len % 8;
    if (memcmp(a, b, full)) return 0;
    return !rest || ((a[full] ^ b[full]) & (0xFF00u >> rest)) == 0;
}

static uint16_t brute6(const struct ofl_route6 *r, size_t n, const uint8_t *a)
{
    int best = -1;
    uint16_t hop = 0;
    for (size_t i = 0; i < n; i++)
        if ((int)r[i].len >= best && match6(a, r[i].addr, r[i].len)) {
            best = r[i].len;
            hop = r[i].hop;
        }
    return hop;
}

/* ---- the IPv6 prefix parser --------------------------------------------------------- */

static int parse6(const char *s, uint8_t a[16], uint8_t *len)
{
    uint32_t a4;
    memset(a, 0xEE, 16);
    return ofl_prefix_parse_line6(s, strlen(s), &a4, a, len);
}

static void hex16(const uint8_t *a, char *out)
{
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", a[i]);
}

static void test_parse6(void)
{
    static const struct {
        const char *text, *hex;
        unsigned len;
    } good[] = {
        {"2001:db8::/32", "20010db8000000000000000000000000", 32},
        {"::/0", "00000000000000000000000000000000", 0},
        {"::1/128", "00000000000000000000000000000001", 128},
        {"1:2:3:4:5:6:7:8/128", "00010002000300040005000600070008", 128},
        {"1:2:3:4:5:6:7::/128", "00010002000300040005000600070000", 128},
        {"::2:3:4:5:6:7:8/128", "00000002000300040005000600070008", 128},
        {"::ffff:10.1.2.3/128", "00000000000000000000ffff0a010203", 128},
        {"::ffff:10.1.2.3/104", "00000000000000000000ffff0a000000", 104},
        {"1::/16", "00010000000000000000000000000000", 16},
        {"2001:DB8:ABCD:12::1/32", "20010db8000000000000000000000000", 32},
        {"  fe80::1:2/65 65000 extra\r", "fe800000000000000000000000000000", 65},
        {"2001:db8:0:0:ffff::/67", "20010db800000000e000000000000000", 67},
        {"2001:db8:0:0:ffff::/68", "20010db800000000f000000000000000", 68},
        {"2001:db8:0:0:ffff::/69", "20010db800000000f800000000000000", 69},
        {"2001:db8::ff/127", "20010db80000000000000000000000fe", 127},
        {"2001:4:112::/48|x", "20010004011200000000000000000000", 48},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint8_t a[16], len = 0;
        char h[33];
        int rc = parse6(good[i].text, a, &len);
        hex16(a, h);
        CHECK(rc == OFL_PREFIX_V6 && !strcmp(h, good[i].hex) && len == good[i].len,
              "parse \"%s\": rc %d, %s/%u", good[i].text, rc, h, len);
    }
    static const char *bad[] = {
        "2001:db8::/129", "1::2::3/64", "12345::/16", "1:2:3:4:5:6:7:8:9/128",
        ":1::/8", "1:/8", "1:2:3:4:5:6:7/112", "::1.2.3/8", "::1.2.3.4.5/8",
        "1:2:3:4:5:6:7:1.2.3.4/128", "::256.1.1.1/128", ":::/8", "1:::2/8", "::g/8",
        "1::2:/8", "::/", "::/1x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t a[16], len;
        int rc = parse6(bad[i], a, &len);
        CHECK(rc == OFL_EBADHDR, "parse \"%s\" is garbage: %d", bad[i], rc);
    }
    uint8_t a[16], len;
    CHECK(parse6("2001:db8::1", a, &len) == OFL_EBADHDR, "an IPv6 address without a length "
          "is garbage, as ofl_prefix_parse_line says");
    uint32_t a4 = 0;
    CHECK(ofl_prefix_parse_line6("10.1.2.3/8", 10, &a4, a, &len) == OFL_PREFIX_V4 &&
          a4 == 0x0A000000 && len == 8, "IPv4 lines as ofl_prefix_parse_line");
    CHECK(ofl_prefix_parse_line6("# x", 3, &a4, a, &len) == OFL_PREFIX_BLANK, "comments");
    /* a part with a leading zero is octal to inet_aton, decimal to others: garbage */
    static const char *const zeros[] = {"015.0.0.0/8", "10.01.0.0/16", "1.2.3.00",
                                        "::ffff:10.0.0.010/128"};
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++)
        CHECK(ofl_prefix_parse_line6(zeros[i], strlen(zeros[i]), &a4, a, &len) == OFL_EBADHDR,
              "\"%s\" (a leading zero) is garbage", zeros[i]);
    CHECK(ofl_prefix_parse_line6("10.0.0.0/08", 11, &a4, a, &len) == OFL_PREFIX_V4 &&
          a4 == 0x0A000000 && len == 8, "a length with a leading zero is decimal");

    /* keep_v6: IPv6 prefixes kept, malformed ones garbage; without it only counted. */
    static const char text[] = "1.0.0.0/24\n2001:db8::/32\n1::2::3/64\n::/0\n# c\nx\n"
                               "2001:db8:1::/48";
    struct ofl_prefixes ps;
    ofl_prefixes_init(&ps);
    ofl_prefixes_feed(&ps, text, sizeof text - 1);
    ofl_prefixes_finish(&ps);
    CHECK(ps.n == 1 && ps.v6 == 4 && ps.bad == 1 && ps.blank == 1 && ps.lines == 7 &&
          ps.first_bad == 6,
          "without keep_v6: %zu v4, %llu v6, %llu bad", ps.n, (unsigned long long)ps.v6,
          (unsigned long long)ps.bad);
    ofl_prefixes_free(&ps);
    ofl_prefixes_init(&ps);
    ps.keep_v6 = 1;
    for (size_t i = 0; i < sizeof text - 1; i++) ofl_prefixes_feed(&ps, text + i, 1);
    ofl_prefixes_finish(&ps);
    CHECK(ps.n == 1 && ps.v6 == 3 && ps.bad == 2 && ps.blank == 1 && ps.lines == 7 &&
          ps.first_bad == 3 && ps.v6v[0].len == 32 && ps.v6v[1].len == 0 && ps.v6v[2].len == 48 &&
          ps.v6v[2].addr[5] == 1, "keep_v6, byte by byte: %zu v4, %llu v6, %llu bad", ps.n,
          (unsigned long long)ps.v6, (unsigned long long)ps.bad);
    ofl_prefixes_free(&ps);
}

/* ---- route lists and the hop rule ------------------------------------------------- */

static char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/test_lpm_%d_%s", tmp_dir, (int)getpid(), name);
    return p;
}

static void test_routes(void)
{
    uint8_t a6[16];
    uint8_t len;
    uint32_t a4;
    /* Values from Python: fnv1a(ip_network(p).network_address.packed + bytes([len])). */
    CHECK(ofl_route_hop4(0x01000000, 24, 16) == 5 && ofl_route_hop4(0x01000000, 24, 1000) == 877,
          "hop of 1.0.0.0/24: %u", ofl_route_hop4(0x01000000, 24, 16));
    CHECK(ofl_route_hop4(0x01020304, 0, 16) == 16 && ofl_route_hop4(0, 0, 1000) == 728,
          "hop of 0.0.0.0/0 (host bits ignored)");
    CHECK(ofl_route_hop4(0xFFFFFFFF, 32, 16) == 4 && ofl_route_hop4(0xFFFFFFFF, 32, 1000) == 380,
          "hop of 255.255.255.255/32");
    parse6("2001:db8::/32", a6, &len);
    CHECK(ofl_route_hop6(a6, 32, 16) == 6 && ofl_route_hop6(a6, 32, 1000) == 638,
          "hop of 2001:db8::/32: %u", ofl_route_hop6(a6, 32, 16));
    memset(a6, 0xFF, 16);
    CHECK(ofl_route_hop6(a6, 0, 16) == 16 && ofl_route_hop6(a6, 0, 1000) == 336, "hop of ::/0");
    parse6("2001:4:112::/48", a6, &len);
    CHECK(ofl_route_hop6(a6, 48, 16) == 16 && ofl_route_hop6(a6, 48, 1000) == 720,
          "hop of 2001:4:112::/48");
    CHECK(ofl_route_hop4(0, 8, 0) == 0 && ofl_route_hop4(0, 33, 16) == 0 &&
          ofl_route_hop4(0, 8, OFL_ROUTE_MAX_HOP + 1) == 0 && ofl_route_hop6(a6, 129, 16) == 0,
          "hop 0 for bad arguments");

    struct ofl_routes r;
    ofl_routes_init(&r);
    CHECK(ofl_routes_add4(&r, 0x0A0B0C0D, 33, 1) == -EINVAL &&
          ofl_routes_add4(&r, 0x0A0B0C0D, 8, 0) == -EINVAL &&
          ofl_routes_add4(&r, 0x0A0B0C0D, 8, OFL_ROUTE_MAX_HOP + 1) == -EINVAL &&
          ofl_routes_add6(&r, a6, 129, 1) == -EINVAL && ofl_routes_add6(&r, a6, 64, 0) == -EINVAL &&
          r.n4 == 0 && r.n6 == 0, "add: bad length or hop is -EINVAL");
    memset(a6, 0xFF, 16);
    CHECK(ofl_routes_add4(&r, 0x0A0B0C0D, 12, OFL_ROUTE_MAX_HOP) == 0 &&
          ofl_routes_add6(&r, a6, 13, 7) == 0 && r.v4[0].addr == 0x0A000000 &&
          r.v4[0].len == 12 && r.v4[0].hop == OFL_ROUTE_MAX_HOP && r.v6[0].addr[0] == 0xFF &&
          r.v6[0].addr[1] == 0xF8 && r.v6[0].addr[2] == 0 && r.v6[0].hop == 7,
          "add clears host bits");
    ofl_routes_free(&r);

    const char *path = tmp_path("routes.txt");
    FILE *f = fopen(path, "w");
    fputs("1.0.0.0/24\r\n2001:db8::/32\r\n10.0.0.0/8 x\n1::2::3/64\n\n# c\n1.0.0.0/24\n"
          "::/0\ngarbage", f);
    fclose(f);
    char err[256] = "";
    ofl_routes_init(&r);
    int rc = ofl_routes_load(&r, path, 0, err);
    CHECK(rc == 0 && r.n4 == 3 && r.n6 == 2 && r.bad == 2 && r.blank == 2 && r.lines == 9 &&
          r.first_bad == 4, "load: %d %s, %zu v4, %zu v6, %llu bad, the first on line %llu",
          rc, err, r.n4, r.n6, (unsigned long long)r.bad, (unsigned long long)r.first_bad);
    CHECK(r.n4 == 3 && r.v4[0].hop == 5 && r.v4[2].hop == 5 &&
          r.v4[1].hop == ofl_route_hop4(0x0A000000, 8, 16) && r.n6 == 2 && r.v6[0].hop == 6 &&
          r.v6[1].hop == 16, "load: hops by the rule, 16 ports by default");
    rc = ofl_routes_load(&r, path, 1000, err);
    CHECK(rc == 0 && r.n4 == 6 && r.n6 == 4 && r.lines == 18 && r.v4[3].hop == 877 &&
          r.bad == 4 && r.first_bad == 4, "load appends (1000 ports; the first file's "
          "first garbage line stays the first)");
    rc = ofl_routes_load(&r, path, OFL_ROUTE_MAX_HOP + 1, err);
    CHECK(rc == -EINVAL && r.n4 == 6, "load with too many ports: %d %s", rc, err);
    rc = ofl_routes_load(&r, tmp_path("missing.txt"), 16, err);
    CHECK(rc == -ENOENT && r.n4 == 6, "load a missing file: %d %s", rc, err);
    ofl_routes_free(&r);

    struct ofl_lpm4 *t4;
    struct ofl_lpm6 *t6;
    CHECK(ofl_lpm4_open_file(&t4, path, 0, err) == 0 && ofl_lpm4_lookup(t4, 0x01000042) == 5 &&
          ofl_lpm4_lookup(t4, 0x02000000) == 0, "lpm4_open_file: %s", err);
    parse6("2001:db8:1::/48", a6, &len);
    CHECK(ofl_lpm6_open_file(&t6, path, 0, err) == 0 && ofl_lpm6_lookup(t6, a6) == 6 &&
          (a6[0] = 0x30, ofl_lpm6_lookup(t6, a6) == 16), "lpm6_open_file: %s", err);
    ofl_lpm4_free(t4);
    ofl_lpm6_free(t6);
    CHECK(ofl_lpm4_open_file(&t4, tmp_path("missing.txt"), 0, err) == -ENOENT && !t4 &&
          ofl_lpm6_open_file(&t6, tmp_path("missing.txt"), 0, err) == -ENOENT && !t6,
          "open_file of a missing file");
    unlink(path);
    (void)a4;
}

/* ---- IPv4 ------------------------------------------------------------------------- */

struct set4 {
    struct ofl_route4 *v;
    size_t n;
};

static uint16_t rand_hop(struct ofl_rng *g)
{
    return (uint16_t)(1 + ofl_rng_below(g, OFL_ROUTE_MAX_HOP));
}

static void add4(struct set4 *s, uint32_t a, unsigned len, uint16_t hop)
{
    s->v[s->n].addr = a & mask4(len);
    s->v[s->n].len = (uint8_t)len;
    s->v[s->n++].hop = hop;
}

/* n random routes: nested and overlapping, /0, /32, /24-/25 boundaries, many prefixes
 * in a few /24s (shared tbl8 groups), duplicates with other hops. */
static struct set4 gen4(size_t n, uint64_t seed)
{
    struct ofl_rng g = {seed};
    struct set4 s = {malloc(n * sizeof *s.v), 0};
    uint32_t hot[4];
    for (int i = 0; i < 4; i++) hot[i] = (uint32_t)ofl_rng_next(&g) & 0xFFFFFF00u;
    while (s.n < n) {
        unsigned kind = (unsigned)ofl_rng_below(&g, 100);
        uint32_t a = (uint32_t)ofl_rng_next(&g);
        if (kind < 2) {
            add4(&s, a, 0, rand_hop(&g));
        } else if (kind < 30 || s.n == 0) {
            add4(&s, a, 1 + (unsigned)ofl_rng_below(&g, 32), rand_hop(&g));
        } else if (kind < 60) {
            const struct ofl_route4 *p = &s.v[ofl_rng_below(&g, s.n)];
            unsigned len = p->len + (unsigned)ofl_rng_below(&g, 13);
            if (len > 32) len = 32;
            add4(&s, p->addr | (a & ~mask4(p->len)), len, rand_hop(&g));
        } else if (kind < 72) {
            add4(&s, hot[ofl_rng_below(&g, 4)] | (a & 0xFF), 25 + (unsigned)ofl_rng_below(&g, 8),
                 rand_hop(&g));
        } else if (kind < 82) {
            const struct ofl_route4 *p = &s.v[ofl_rng_below(&g, s.n)];
            add4(&s, p->addr | (a & ~mask4(p->len)), 23 + (unsigned)ofl_rng_below(&g, 4),
                 rand_hop(&g));
        } else if (kind < 90) {
            add4(&s, ofl_rng_below(&g, 2) ? a : hot[ofl_rng_below(&g, 4)] | (a & 0xFF), 32,
                 rand_hop(&g));
        } else if (kind < 95) {
            const struct ofl_route4 *p = &s.v[ofl_rng_below(&g, s.n)];
            add4(&s, p->addr, p->len, rand_hop(&g));
        } else {
            add4(&s, a, 1 + (unsigned)ofl_rng_below(&g, 8), rand_hop(&g));
        }
    }
    return s;
}

/* Check `t` (built from the n routes r) against brute force on the first and last
 * address of the first `nb` routes and their neighbours plus `nrand` random addresses;
 * batch == scalar. Returns mismatches. */
static size_t check4(const struct ofl_lpm4 *t, const struct ofl_route4 *r, size_t n,
                     size_t nb, size_t nrand, uint64_t seed)
{
    size_t m = 4 * nb + nrand;
    uint32_t *a = malloc((m ? m : 1) * sizeof *a);
    uint16_t *h = malloc((m ? m : 1) * sizeof *h);
    struct ofl_rng g = {seed};
    size_t k = 0;
    for (size_t i = 0; i < nb; i++) {
        uint32_t first = r[i].addr & mask4(r[i].len), last = first | ~mask4(r[i].len);
        a[k++] = first;
        a[k++] = last;
        a[k++] = first - 1;
        a[k++] = last + 1;
    }
    for (size_t i = 0; i < nrand; i++) a[k++] = (uint32_t)ofl_rng_next(&g);
    ofl_lpm4_lookup_batch(t, a, h, (unsigned)m);
    size_t bad = 0;
    for (size_t i = 0; i < m; i++) {
        uint16_t want = brute4(r, n, a[i]), got = ofl_lpm4_lookup(t, a[i]);
        if ((got != want || h[i] != want) && bad++ < 5)
            printf("  %08x: scalar %u, batch %u, brute force %u\n", a[i], got, h[i], want);
    }
    free(a);
    free(h);
    return bad;
}

static void test_lpm4_cases(void)
{
    char err[256] = "";
    struct ofl_lpm4 *t;
    CHECK(ofl_lpm4_build(&t, NULL, 0, err) == 0 && ofl_lpm4_lookup(t, 0) == 0 &&
          ofl_lpm4_lookup(t, 0xFFFFFFFF) == 0 && t->groups == 0 && t->blocks == 1 &&
          ofl_lpm4_memory(t) < (1u << 20), "empty table: every lookup 0, one shared "
          "tbl24 block, %zu bytes", ofl_lpm4_memory(t));
    ofl_lpm4_free(t);
    ofl_lpm4_free(NULL);

    /* Nested prefixes down to a host route, inserted longest first. */
    struct ofl_route4 r[] = {
        {0x0A0102FF, 5, 32}, {0x0A010280, 4, 25}, {0x0A010200, 3, 24},
        {0x0A010000, 2, 16}, {0x0A000000, 1, 8},  {0x00000000, 9, 0},
        {0x0A010203, OFL_ROUTE_MAX_HOP, 31}, {0xC0A80001, 6, 16},  /* host bits set */
    };
    size_t n = sizeof r / sizeof r[0];
    CHECK(ofl_lpm4_build(&t, r, n, err) == 0, "build nested: %s", err);
    static const struct {
        uint32_t a;
        uint16_t hop;
    } want[] = {
        {0x0A0102FF, 5}, {0x0A0102FE, 4}, {0x0A010280, 4}, {0x0A01027F, 3}, {0x0A010200, 3},
        {0x0A010202, OFL_ROUTE_MAX_HOP}, {0x0A010203, OFL_ROUTE_MAX_HOP}, {0x0A010204, 3},
        {0x0A010300, 2}, {0x0A01FFFF, 2}, {0x0A020000, 1}, {0x0AFFFFFF, 1}, {0x0B000000, 9},
        {0x00000000, 9}, {0xFFFFFFFF, 9}, {0xC0A8FFFF, 6}, {0xC0A90000, 9},
    };
    size_t bad = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (ofl_lpm4_lookup(t, want[i].a) != want[i].hop && bad++ < 5)
            printf("  %08x: %u, want %u\n", want[i].a, ofl_lpm4_lookup(t, want[i].a),
                   want[i].hop);
    CHECK(bad == 0 && t->groups == 1, "nested: /32 > /31 > /25 > /24 > /16 > /8 > /0, "
          "%u tbl8 group", t->groups);
    CHECK(check4(t, r, n, n, 1000, 1) == 0, "nested against brute force");
    ofl_lpm4_free(t);

    /* Bad routes. */
    struct ofl_route4 b1 = {0, 1, 33}, b2 = {0, 0, 8}, b3 = {0, OFL_ROUTE_MAX_HOP + 1, 8};
    CHECK(ofl_lpm4_build(&t, &b1, 1, err) == -EINVAL && !t && err[0] &&
          ofl_lpm4_build(&t, &b2, 1, err) == -EINVAL && ofl_lpm4_build(&t, &b3, 1, err) == -EINVAL,
          "length 33, hop 0, hop 0x8000: -EINVAL (%s)", err);

    /* tbl8 groups: exactly 2^15 /24s with a /25 fit; one more does not. */
    size_t ng = OFL_LPM4_MAX_GROUPS + 1;
    struct ofl_route4 *g = malloc(ng * sizeof *g);
    for (size_t i = 0; i < ng; i++) g[i] = (struct ofl_route4){(uint32_t)i << 9, 1 + i % 7, 25};
    int rc = ofl_lpm4_build(&t, g, ng - 1, err);
    CHECK(rc == 0 && t->groups == OFL_LPM4_MAX_GROUPS &&
          ofl_lpm4_lookup(t, (uint32_t)(ng - 2) << 9 | 0x7F) == 1 + (ng - 2) % 7 &&
          ofl_lpm4_lookup(t, (uint32_t)(ng - 2) << 9 | 0x80) == 0,
          "2^15 tbl8 groups fit: %d %s", rc, err);
    ofl_lpm4_free(t);
    rc = ofl_lpm4_build(&t, g, ng, err);
    CHECK(rc == -ENOSPC && !t, "2^15 + 1 tbl8 groups: %d %s", rc, err);
    free(g);

    /* tbl24 blocks: /16s holding only prefixes up to /16 share one block per hop; a
     * /16 with a longer prefix gets its own, seeded with the /16's hop. */
    struct ofl_route4 sb[] = {
        {0x0A000000, 1, 8},  {0x0B000000, 2, 8},  {0x0C000000, 1, 8},
        {0x0A050000, 3, 16}, {0x0A058000, 4, 17}, {0x0B060700, 5, 24},
        {0x0B060780, 6, 25}, {0x0A070000, 2, 16}, {0x0C010000, 7, 17},
        {0x0C018000, 7, 17}, {0x0C020000, 7, 16},
    };
    n = sizeof sb / sizeof sb[0];
    err[0] = 0;
    rc = ofl_lpm4_build(&t, sb, n, err);
    /* Shared: hop 0 (unrouted), 1 (10/8, 12/8), 2 (11/8, 10.7/16), 7 (12.2/16, and
     * 12.1/16: its two /17s of hop 7 leave its own block uniform, so it is given up);
     * 10.5/16 would take 3 but has a /17. Own: 10.5/16 and 11.6/16. */
    CHECK(rc == 0 && t->blocks == 6 && t->groups == 1 &&
          t->dir[0x0A00] == t->dir[0x0C00] && t->dir[0x0A07] == t->dir[0x0B00] &&
          t->dir[0x0C01] == t->dir[0x0C02] && ofl_lpm4_lookup(t, 0x0C01FFFF) == 7 &&
          t->dir[0x0A05] != t->dir[0x0A04] && ofl_lpm4_lookup(t, 0x0A057FFF) == 3 &&
          ofl_lpm4_lookup(t, 0x0A058000) == 4 && ofl_lpm4_lookup(t, 0x0B06077F) == 5 &&
          ofl_lpm4_lookup(t, 0x0B060780) == 6 && ofl_lpm4_lookup(t, 0x0B060800) == 2 &&
          ofl_lpm4_lookup(t, 0x0D000000) == 0 && check4(t, sb, n, n, 2000, 7) == 0,
          "tbl24 blocks: %u (want 6: 4 shared, 2 own), %u group %s", rc ? 0 : t->blocks,
          rc ? 0 : t->groups, err);
    if (!rc) ofl_lpm4_free(t);

    /* Every /16 with its own block: 2^16 blocks, the most there can be. */
    size_t nb = OFL_LPM4_DIR_ENTRIES;
    g = malloc((nb + 1) * sizeof *g);
    g[0] = (struct ofl_route4){0, 9, 0};
    for (size_t i = 0; i < nb; i++) g[i + 1] = (struct ofl_route4){(uint32_t)i << 16, 1 + i % 5, 17};
    err[0] = 0;
    rc = ofl_lpm4_build(&t, g, nb + 1, err);
    bad = 0;
    for (size_t i = 0; rc == 0 && i < nb; i += 97) {
        uint32_t a = (uint32_t)i << 16;
        bad += ofl_lpm4_lookup(t, a | 0x7FFF) != 1 + i % 5 || ofl_lpm4_lookup(t, a | 0x8000) != 9;
    }
    CHECK(rc == 0 && t->blocks == OFL_LPM4_DIR_ENTRIES && bad == 0 &&
          check4(t, g, nb + 1, 64, 500, 8) == 0,
          "a /17 in every /16: %u blocks, %zu wrong %s", rc ? 0 : t->blocks, bad, err);
    if (!rc) ofl_lpm4_free(t);
    free(g);
}

/* ---- IPv6 ------------------------------------------------------------------------- */

struct set6 {
    struct ofl_route6 *v;
    size_t n;
};

static void rand16(struct ofl_rng *g, uint8_t *a)
{
    uint64_t x = ofl_rng_next(g), y = ofl_rng_next(g);
    memcpy(a, &x, 8);
    memcpy(a + 8, &y, 8);
}

/* a = p (first len bits) + r (the rest). */
static void splice6(uint8_t *a, const uint8_t *p, const uint8_t *r, unsigned len)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned keep = len > 8 * i ? len - 8 * i : 0;
        uint8_t m = keep >= 8 ? 0xFF : (uint8_t)(0xFF00u >> keep);
        a[i] = (uint8_t)((p[i] & m) | (r[i] & ~m));
    }
}

static void add6(struct set6 *s, const uint8_t *a, unsigned len, uint16_t hop)
{
    uint8_t z[16] = {0};
    splice6(s->v[s->n].addr, a, z, len);
    s->v[s->n].len = (uint8_t)len;
    s->v[s->n++].hop = hop;
}

/* n random routes around a few roots: nested chains, lengths 1..128 (both sides of
 * /64, so narrow and wide levels), /0, /128 host routes, duplicates. */
static struct set6 gen6(size_t n, uint64_t seed)
{
    struct ofl_rng g = {seed};
    struct set6 s = {malloc(n * sizeof *s.v), 0};
    uint8_t a[16], b[16];
    while (s.n < n) {
        unsigned kind = (unsigned)ofl_rng_below(&g, 100);
        rand16(&g, a);
        if (kind < 2) {
            add6(&s, a, 0, rand_hop(&g));
        } else if (kind < 15 || s.n == 0) {
            a[0] = (uint8_t)(0x20 | (a[0] & 1));   /* a few roots share the first bits */
            add6(&s, a, 8 + (unsigned)ofl_rng_below(&g, 41), rand_hop(&g));
        } else if (kind < 65) {
            const struct ofl_route6 *p = &s.v[ofl_rng_below(&g, s.n)];
            unsigned len = p->len + 1 + (unsigned)ofl_rng_below(&g, 24);
            splice6(b, p->addr, a, p->len);
            add6(&s, b, len > 128 ? 128 : len, rand_hop(&g));
        } else if (kind < 75) {
            const struct ofl_route6 *p = &s.v[ofl_rng_below(&g, s.n)];
            splice6(b, p->addr, a, p->len);
            add6(&s, b, 62 + (unsigned)ofl_rng_below(&g, 5), rand_hop(&g));
        } else if (kind < 85) {
            const struct ofl_route6 *p = &s.v[ofl_rng_below(&g, s.n)];
            splice6(b, p->addr, a, p->len);
            add6(&s, b, 128, rand_hop(&g));
        } else if (kind < 92) {
            const struct ofl_route6 *p = &s.v[ofl_rng_below(&g, s.n)];
            add6(&s, p->addr, p->len, rand_hop(&g));
        } else {
            add6(&s, a, 1 + (unsigned)ofl_rng_below(&g, 128), rand_hop(&g));
        }
    }
    return s;
}

/* a += d (d = +1 or -1), 128-bit big-endian, wrapping. */
static void step6(uint8_t *a, int d)
{
    for (int i = 15; i >= 0; i--) {
        a[i] = (uint8_t)(a[i] + d);
        if (d > 0 ? a[i] != 0 : a[i] != 0xFF) break;
    }
}

/* As check4: first and last address of every route and their neighbours, random
 * addresses inside random routes and anywhere. Returns mismatches. */
static unsigned said_lacks;   /* paths this CPU lacks, said once */
static unsigned paths_run[3];  /* trie batches checked on each path (enum ofl_simd) */

static size_t check6(const struct ofl_lpm6 *t, const struct ofl_route6 *r, size_t n,
                     size_t nb, size_t nrand, uint64_t seed)
{
    size_t m = 4 * nb + nrand;
    uint8_t *a = malloc((m ? m : 1) * 16);
    uint16_t *h = malloc((m ? m : 1) * sizeof *h);
    struct ofl_rng g = {seed};
    uint8_t ones[16], x[16];
    memset(ones, 0xFF, 16);
    size_t k = 0;
    for (size_t i = 0; i < nb; i++) {
        memcpy(a + 16 * k++, r[i].addr, 16);
        splice6(a + 16 * k++, r[i].addr, ones, r[i].len);
        memcpy(a + 16 * k, r[i].addr, 16);
        step6(a + 16 * k++, -1);
        splice6(a + 16 * k, r[i].addr, ones, r[i].len);
        step6(a + 16 * k++, +1);
    }
    for (size_t i = 0; i < nrand; i++) {
        rand16(&g, x);
        const struct ofl_route6 *p = n ? &r[ofl_rng_below(&g, n)] : NULL;
        if (p && i % 4) splice6(a + 16 * k++, p->addr, x, p->len);
        else memcpy(a + 16 * k++, x, 16);
    }
    uint16_t *hb = malloc((m ? m : 1) * sizeof *hb);
    ofl_lpm6_lookup_batch_bsl(t, a, hb, (unsigned)m);
    size_t bad = 0;
    for (size_t i = 0; i < m; i++) {
        uint16_t want = brute6(r, n, a + 16 * i), got = ofl_lpm6_lookup(t, a + 16 * i);
        uint16_t bsl = ofl_lpm6_lookup_bsl(t, a + 16 * i);
        if ((got != want || bsl != want || hb[i] != want) && bad++ < 5) {
            char hx[33];
            hex16(a + 16 * i, hx);
            printf("  %s: trie %u, hash levels %u (batch %u), brute force %u\n", hx, got, bsl,
                   hb[i], want);
        }
    }
    /* The trie's batch on every path this CPU has (the table's path set as if built
     * under OFFLOW_SIMD=...); a path it lacks is said, not run. */
    struct ofl_lpm6 *w = (struct ofl_lpm6 *)t;
    int was = w->trie.simd;
    for (int p = OFL_SIMD_SCALAR; p <= OFL_SIMD_AVX512; p++) {
        if (p > (int)ofl_simd_cpu()) {
            if (!said_lacks++)
                printf("  lpm6 batch %s: skipped: CPU lacks %s\n", ofl_simd_name((enum ofl_simd)p),
                       ofl_simd_name((enum ofl_simd)p));
            continue;
        }
        w->trie.simd = p;
        ofl_lpm6_lookup_batch(t, a, h, (unsigned)m);
        paths_run[p]++;
        for (size_t i = 0; i < m; i++) {
            uint16_t want = brute6(r, n, a + 16 * i);
            if (h[i] != want && bad++ < 5) {
                char hx[33];
                hex16(a + 16 * i, hx);
                printf("  %s: trie batch (%s) %u, brute force %u\n", hx,
                       ofl_simd_name((enum ofl_simd)p), h[i], want);
            }
        }
    }
    w->trie.simd = was;
    free(a);
    free(h);
    free(hb);
    return bad;
}

/* The trie's edges (lpm6.h): no routes, the /0 alone, /128s (the deepest walk, the last
 * stride reading past the address), prefixes ending on each stride boundary and one bit
 * either side, both sides of /64, nested chains, a child slot inside a run of equal
 * leaves, and equal prefixes (the later wins, host bits ignored); each checked against
 * brute force by check6 (trie scalar and every batch path, and the hash levels). */
static void test_lpm6_trie_cases(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    struct ofl_route6 r[160];
    uint8_t a[16], z[16] = {0};
    struct ofl_rng g = {77};

    CHECK(ofl_lpm6_build(&t, NULL, 0, err) == 0 && t->trie.nnodes == 0 &&
          t->trie.nleaves == 0 && check6(t, NULL, 0, 0, 300, 1) == 0, "trie: no routes");
    ofl_lpm6_free(t);

    struct set6 s = {r, 0};
    rand16(&g, a);
    add6(&s, a, 0, 9);
    memcpy(s.v[0].addr, a, 16);   /* a /0 with host bits set: they are ignored */
    CHECK(ofl_lpm6_build(&t, r, 1, err) == 0 && t->trie.nnodes == 0 &&
          check6(t, r, 1, 1, 300, 2) == 0 && ofl_lpm6_lookup(t, z) == 9,
          "trie: the /0 alone answers every address");
    ofl_lpm6_free(t);

    s.n = 0;
    rand16(&g, a);
    add6(&s, a, 128, 5);
    CHECK(ofl_lpm6_build(&t, r, 1, err) == 0 && t->trie.depth == 19 &&
          check6(t, r, 1, 1, 300, 3) == 0 && ofl_lpm6_lookup(t, a) == 5,
          "trie: a /128 alone, %u nodes deep (19: 112 bits past the top in 6-bit strides)",
          t ? t->trie.depth : 0);
    ofl_lpm6_free(t);

    /* Every stride boundary (16, 22, .., 124) and 128, and one bit either side, nested
     * on one address; then the same lengths on addresses of their own (siblings). */
    s.n = 0;
    rand16(&g, a);
    add6(&s, a, 0, 1);
    for (unsigned b = OFL_LPM6_TOP_BITS; b <= 128; b += OFL_LPM6_STRIDE) {
        for (unsigned d = 0; d < 3; d++) {
            unsigned len = b + d - 1;
            if (len <= 128) add6(&s, a, len, (uint16_t)(2 + s.n % 300));
        }
        if (b + OFL_LPM6_STRIDE > 128 && b != 128) b = 128 - OFL_LPM6_STRIDE;
    }
    add6(&s, a, 63, 400);
    add6(&s, a, 64, 401);
    add6(&s, a, 65, 402);
    size_t chain = s.n;
    for (size_t i = 1; i < chain; i++) {
        uint8_t x[16];
        rand16(&g, x);
        splice6(x, a, x, s.v[i].len / 2);   /* near the chain, off its path */
        add6(&s, x, s.v[i].len, (uint16_t)(500 + i));
    }
    CHECK(ofl_lpm6_build(&t, r, s.n, err) == 0 && check6(t, r, s.n, s.n, 3000, 4) == 0,
          "trie: %zu prefixes on every stride boundary and either side, nested and apart",
          s.n);
    ofl_lpm6_free(t);

    /* One node (bits 16..21 of 2001:0d00::/22 and its neighbours): slots 4 and 6 own
     * /22s with hop 1 and 2 under a /16 of hop 1, slot 5 a child (a /30 below it): the
     * leaves 0..4 and 7..63 have the same hop around the child and the other run. */
    static const struct { const char *p; uint16_t hop; } one[] = {
        {"2001::/16", 1}, {"2001:1000::/22", 1}, {"2001:1400::/22", 1},
        {"2001:1400::/30", 3}, {"2001:1800::/22", 2}, {"2001:1400::/128", 4},
        {"2001:1400::/64", 6}, {"2001:17fc::/30", 7},
        /* equal prefixes: the later wins, host bits ignored */
        {"2001:2000::/20", 8}, {"2001:2fff::/20", 10},
    };
    s.n = 0;
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        uint8_t len;
        if (parse6(one[i].p, a, &len) != OFL_PREFIX_V6) CHECK(0, "parse %s", one[i].p);
        add6(&s, a, len, one[i].hop);
    }
    uint8_t q[16], qlen;
    parse6("2001:2fff::1/128", q, &qlen);
    memcpy(s.v[s.n - 1].addr, q, 16);   /* the later /20 given with host bits set */
    parse6("2001:2abc::1/128", q, &qlen);
    CHECK(ofl_lpm6_build(&t, r, s.n, err) == 0 && check6(t, r, s.n, s.n, 3000, 5) == 0 &&
          ofl_lpm6_lookup(t, q) == 10,
          "trie: a child slot inside a run of equal leaves, nested /30 /64 /128, a later "
          "equal prefix wins");
    ofl_lpm6_free(t);

    /* The path comes from OFFLOW_SIMD when the table is built (capped by the CPU). */
    struct set6 rs = gen6(quick ? 300 : 2000, 91);
    for (int p = OFL_SIMD_SCALAR; p <= OFL_SIMD_AVX512; p++) {
        const char *name = ofl_simd_name((enum ofl_simd)p);
        if (p > (int)ofl_simd_cpu()) {
            printf("  OFFLOW_SIMD=%s: skipped: CPU lacks %s\n", name, name);
            continue;
        }
        setenv("OFFLOW_SIMD", name, 1);
        int rc = ofl_lpm6_build(&t, rs.v, rs.n, err);
        CHECK(rc == 0 && t->trie.simd == p && check6(t, rs.v, rs.n, rs.n, 3000, 92) == 0,
              "trie built under OFFLOW_SIMD=%s takes that path and matches brute force", name);
        if (rc == 0) ofl_lpm6_free(t);
    }
    unsetenv("OFFLOW_SIMD");
    free(rs.v);
}

static void test_lpm6_cases(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    uint8_t a[16] = {0}, len;
    CHECK(ofl_lpm6_build(&t, NULL, 0, err) == 0 && t->nlv == 0 && ofl_lpm6_lookup(t, a) == 0,
          "empty table: lookups 0");
    ofl_lpm6_lookup_batch(t, a, (uint16_t[1]){7}, 1);
    ofl_lpm6_free(t);
    ofl_lpm6_free(NULL);

    static const struct {
        const char *p;
        uint16_t hop;
    } routes[] = {
        {"2001:db8::1:0:0:1/128", 7}, {"2001:db8::1:0:0:0/80", 6}, {"2001:db8::/65", 5},
        {"2001:db8::/64", 4}, {"2001:db8::/48", 3}, {"2001:db8::/32", 2}, {"::/0", 1},
        {"2001:db8:ffff::/48", OFL_ROUTE_MAX_HOP},
    };
    struct ofl_route6 r[8];
    for (size_t i = 0; i < 8; i++) {
        parse6(routes[i].p, r[i].addr, &r[i].len);
        r[i].hop = routes[i].hop;
    }
    r[1].addr[15] = 0x55;   /* host bits are ignored */
    CHECK(ofl_lpm6_build(&t, r, 8, err) == 0, "build nested: %s", err);
    static const struct {
        const char *a;
        uint16_t hop;
    } want[] = {
        {"2001:db8::1:0:0:1/128", 7}, {"2001:db8::1:0:0:2/128", 6}, {"2001:db8::1:ffff:0:0/128", 6},
        {"2001:db8::2:0:0:0/128", 5}, {"2001:db8::7fff:ffff:ffff:ffff/128", 5},
        {"2001:db8::8000:0:0:0/128", 4}, {"2001:db8:0:1::/128", 3}, {"2001:db8:1::/128", 2},
        {"2001:db9::/128", 1}, {"::/128", 1}, {"2001:db8:ffff:1::/128", OFL_ROUTE_MAX_HOP},
    };
    size_t bad = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        parse6(want[i].a, a, &len);
        if (ofl_lpm6_lookup(t, a) != want[i].hop && bad++ < 5)
            printf("  %s: %u, want %u\n", want[i].a, ofl_lpm6_lookup(t, a), want[i].hop);
    }
    CHECK(bad == 0 && t->nlv == 6 && t->def == 1, "nested: /128 > /80 > /65 > /64 > /48 > "
          "/32 > /0, %u levels, depth %u, %zu markers", t->nlv, t->depth, t->markers);
    CHECK(check6(t, r, 8, 8, 1000, 3) == 0, "nested against brute force");
    ofl_lpm6_free(t);

    /* Every length 1..128 along one address, each a level. */
    struct ofl_route6 chain[128];
    struct ofl_rng g = {77};
    rand16(&g, a);
    for (unsigned l = 1; l <= 128; l++) {
        splice6(chain[l - 1].addr, a, (uint8_t[16]){0}, l);
        chain[l - 1].len = (uint8_t)l;
        chain[l - 1].hop = (uint16_t)(l * 100);
    }
    CHECK(ofl_lpm6_build(&t, chain, 128, err) == 0 && t->nlv == 128 && t->depth == 8 &&
          check6(t, chain, 128, 128, 2000, 4) == 0, "a chain of all 128 lengths: %u levels, depth "
          "%u", t ? t->nlv : 0, t ? t->depth : 0);
    ofl_lpm6_free(t);
    /* Only odd lengths, reversed: markers must carry the bmp across absent lengths. */
    struct ofl_route6 odd[64];
    for (unsigned i = 0; i < 64; i++) odd[i] = chain[126 - 2 * i];
    CHECK(ofl_lpm6_build(&t, odd, 64, err) == 0 && check6(t, odd, 64, 64, 2000, 5) == 0,
          "odd lengths, longest first");
    ofl_lpm6_free(t);

    /* Around the front (dir1 /16, dir2 /24, dir3 /32): routes of lengths 8..48
     * packed into a few /16s and /32s, so that dir2 blocks, painted /17../24, /32s
     * covered by /25../31 and many distinct per-/32 length sets (trees) meet, all
     * against brute force. */
    struct ofl_route6 *dense = malloc(3000 * sizeof *dense);
    uint8_t base[16];
    rand16(&g, base);
    for (unsigned i = 0; i < 3000; i++) {
        uint8_t x[16];
        rand16(&g, x);
        x[0] = base[0];
        x[1] = (uint8_t)(base[1] + ofl_rng_below(&g, 3));      /* 3 /16s */
        x[2] = base[2];
        x[3] = (uint8_t)(base[3] + ofl_rng_below(&g, 40));     /* 40 /32s each */
        memcpy(dense[i].addr, x, 16);
        dense[i].len = (uint8_t)(8 + ofl_rng_below(&g, 41));
        dense[i].hop = (uint16_t)(1 + ofl_rng_below(&g, OFL_ROUTE_MAX_HOP));
    }
    CHECK(ofl_lpm6_build(&t, dense, 3000, err) == 0 && check6(t, dense, 3000, 3000, 5000, 6) == 0,
          "dense around /16 and /32: %u trees, %u blocks", t ? t->ntrees : 0, t ? t->nblocks : 0);
    ofl_lpm6_free(t);
    free(dense);

    struct ofl_route6 b1 = {{0}, 1, 129}, b2 = {{0}, 0, 8};
    CHECK(ofl_lpm6_build(&t, &b1, 1, err) == -EINVAL && !t && ofl_lpm6_build(&t, &b2, 1, err) == -EINVAL,
          "length 129, hop 0: -EINVAL (%s)", err);
}

/* Whether some bucket of the packed level l is full, so that probes there go on to
 * the next bucket. */
static int has_full_bucket(const struct ofl_lpm6_level *l)
{
    for (uint64_t i = 0; i <= l->mask; i++)
        if (l->p[OFL_LPM6_PSLOTS * i + OFL_LPM6_PSLOTS - 1] != 0) return 1;
    return 0;
}

/* dir3 and the root level: /32s covered by /25../31 prefixes beside their own routes
 * and longer ones; buckets that fill up (lookups that go on to the next bucket); every
 * tree rooted at tree 1's root level; many /32s. */
static void test_lpm6_tables(void)
{
    char err[256] = "";
    struct ofl_lpm6 *t;
    uint8_t a[16], len;
    static const struct {
        const char *p;
        uint16_t hop;
    } r6[] = {
        {"2001:d00::/24", 1},     {"2001:db8::/29", 2},     {"2001:db9::/32", 3},
        {"2001:db9:1::/48", 4},   {"2001:dba:5::/48", 5},   {"2001:d01::/32", 6},
        {"2001:dbc::/31", 7},     {"2001:dbd:0:1::/64", 8}, {"2001:e00::/25", 9},
        {"2001:e00:100::/40", 10},
    };
    struct ofl_route6 r[10];
    size_t n = sizeof r6 / sizeof r6[0];
    for (size_t i = 0; i < n; i++) {
        parse6(r6[i].p, r[i].addr, &len);
        r[i].len = (uint8_t)len;
        r[i].hop = r6[i].hop;
    }
    static const struct {
        const char *a;
        uint16_t hop;
    } want[] = {
        {"2001:db8::1/128", 2},      {"2001:db9::1/128", 3},    {"2001:db9:1::1/128", 4},
        {"2001:db9:2::1/128", 3},    {"2001:dba:5::1/128", 5},  {"2001:dba:6::1/128", 2},
        {"2001:d02::1/128", 1},      {"2001:d01::1/128", 6},    {"2001:dbd::1/128", 7},
        {"2001:dbd:0:1::1/128", 8},  {"2001:dbe::1/128", 2},    {"2001:dc0::1/128", 1},
        {"2001:e00:1ff::1/128", 10}, {"2001:e00:200::1/128", 9},  {"2001:e7f:ffff::1/128", 9},
        {"2001:e80::1/128", 0},      {"2002::1/128", 0},
    };
    int rc = ofl_lpm6_build(&t, r, n, err);
    size_t bad = 0;
    for (size_t i = 0; rc == 0 && i < sizeof want / sizeof want[0]; i++) {
        parse6(want[i].a, a, &len);
        uint16_t h;
        ofl_lpm6_lookup_batch(t, a, &h, 1);
        if ((ofl_lpm6_lookup(t, a) != want[i].hop || h != want[i].hop) && bad++ < 5)
            printf("  %s: scalar %u, batch %u, want %u\n", want[i].a, ofl_lpm6_lookup(t, a), h,
                   want[i].hop);
    }
    CHECK(rc == 0 && bad == 0 && check6(t, r, n, n, 3000, 11) == 0,
          "/25../32 over dir3 blocks and longer routes: %zu dir3 blocks %s", rc ? 0 : t->nblocks3,
          err);
    if (!rc) ofl_lpm6_free(t);

    /* 19,600 random /48s in one /32 (and the /32 itself): the /48 level is every
     * tree's root, and 4,096 buckets 60% full: some of them fill up. (Random keys:
     * evenly spaced ones would spread evenly over the buckets.) */
    size_t nb = 19600;
    struct ofl_route6 *many = calloc(nb + 1, sizeof *many);
    uint8_t *seen = calloc(1 << 21, 1);   /* 2^24 bits */
    struct ofl_rng g = {99};
    parse6("2001:db8::/32", many[0].addr, &len);
    many[0].len = 32;
    many[0].hop = 7;
    seen[0] = 1;   /* 2001:db8::/48 stays without a route of its own */
    for (size_t i = 1; i <= nb; i++) {
        uint32_t k;
        do k = (uint32_t)ofl_rng_below(&g, 1 << 16);
        while (seen[k >> 3] >> (k & 7) & 1);
        seen[k >> 3] |= (uint8_t)(1 << (k & 7));
        memcpy(many[i].addr, many[0].addr, 16);
        many[i].addr[4] = (uint8_t)(k >> 8);
        many[i].addr[5] = (uint8_t)k;
        many[i].len = 48;
        many[i].hop = (uint16_t)(8 + i % 1000);
    }
    rc = ofl_lpm6_build(&t, many, nb + 1, err);
    bad = 0;
    int full = 0, roots = 1;
    if (rc == 0) {
        for (size_t i = 0; i <= nb; i++) {
            uint8_t x[16];
            memcpy(x, many[i].addr, 16);
            if (i) memset(x + 6, 0xFF, 10);   /* the /48's last address */
            /* else: 2001:db8::/48, without a route of its own */
            bad += ofl_lpm6_lookup(t, x) != many[i].hop;
            uint16_t h;
            ofl_lpm6_lookup_batch(t, x, &h, 1);
            bad += h != many[i].hop;
        }
        full = t->first >= 0 && t->lv[t->first].len == 48 && t->lv[t->first].packed &&
               has_full_bucket(&t->lv[t->first]);
        for (unsigned k = 1; k <= t->ntrees; k++)
            roots &= t->node[t->tree[k]].lv == (uint32_t)t->first;
    }
    CHECK(rc == 0 && bad == 0 && full && roots, "19,600 /48s in one /32: %zu wrong, a full "
          "bucket at the /48 level %d, every tree rooted there %d", bad, full, roots);
    if (!rc) ofl_lpm6_free(t);

    /* 30,000 random /32 routes under 2a00::/8, and a /48 in each tenth. */
    size_t n32 = 30000, n48 = n32 / 10;
    struct ofl_route6 *r32 = calloc(n32 + n48, sizeof *r32);
    uint32_t *k32 = malloc(n32 * sizeof *k32);
    memset(seen, 0, 1 << 21);
    for (size_t i = 0; i < n32; i++) {
        uint32_t k;
        do k = (uint32_t)ofl_rng_below(&g, 1 << 24);
        while (seen[k >> 3] >> (k & 7) & 1);
        seen[k >> 3] |= (uint8_t)(1 << (k & 7));
        k32[i] = k;
    }
    for (size_t i = 0; i < n32 + n48; i++) {
        uint32_t k = k32[i < n32 ? i : (i - n32) * 10];
        r32[i].addr[0] = 0x2a;
        r32[i].addr[1] = (uint8_t)(k >> 16);
        r32[i].addr[2] = (uint8_t)(k >> 8);
        r32[i].addr[3] = (uint8_t)k;
        r32[i].len = i < n32 ? 32 : 48;
        if (i >= n32) r32[i].addr[5] = 1;
        r32[i].hop = (uint16_t)(1 + i % 2000);
    }
    rc = ofl_lpm6_build(&t, r32, n32 + n48, err);
    bad = 0;
    if (rc == 0) {
        for (size_t i = 0; i < n32 + n48; i++) {
            uint8_t x[16];
            memcpy(x, r32[i].addr, 16);
            memset(x + (i < n32 ? 4 : 6), 0xFF, i < n32 ? 12 : 10);
            bad += ofl_lpm6_lookup(t, x) != r32[i].hop;
            uint16_t h;
            ofl_lpm6_lookup_batch(t, x, &h, 1);
            bad += h != r32[i].hop;
        }
    }
    CHECK(rc == 0 && bad == 0, "30,000 /32s and 3,000 /48s: %zu wrong, %zu dir3 blocks", bad,
          rc ? 0 : t->nblocks3);
    if (!rc) ofl_lpm6_free(t);
    free(r32);
    free(k32);
    free(many);
    free(seen);
}

/* ---- random route sets, both families ------------------------------------------- */

/* A family's table behind void pointers, for the steps its random-set tests share. */
struct family {
    size_t route_size;
    int (*build)(void **t, const void *r, size_t n, char *err);
    void (*free)(void *t);
    /* check4 / check6 over the first nb of n routes */
    size_t (*check)(const void *t, const void *r, size_t n, size_t nb, size_t nrand,
                    uint64_t seed);
    /* Route i's own address: answered as brute force over the first n routes? */
    int (*agrees)(const void *t, const void *r, size_t n, size_t i);
};

static int build4(void **t, const void *r, size_t n, char *err)
{
    struct ofl_lpm4 *x = NULL;
    int rc = ofl_lpm4_build(&x, r, n, err);
    *t = x;
    return rc;
}

static size_t check4v(const void *t, const void *r, size_t n, size_t nb, size_t nrand,
                      uint64_t seed)
{
    return check4(t, r, n, nb, nrand, seed);
}

static int agrees4(const void *t, const void *r, size_t n, size_t i)
{
    const struct ofl_route4 *v = r;
    return ofl_lpm4_lookup(t, v[i].addr) == brute4(v, n, v[i].addr);
}

static void free4(void *t)
{
    ofl_lpm4_free(t);
}

static int build6(void **t, const void *r, size_t n, char *err)
{
    struct ofl_lpm6 *x = NULL;
    int rc = ofl_lpm6_build(&x, r, n, err);
    *t = x;
    return rc;
}

static size_t check6v(const void *t, const void *r, size_t n, size_t nb, size_t nrand,
                      uint64_t seed)
{
    return check6(t, r, n, nb, nrand, seed);
}

static int agrees6(const void *t, const void *r, size_t n, size_t i)
{
    const struct ofl_route6 *v = r;
    return ofl_lpm6_lookup(t, v[i].addr) == brute6(v, n, v[i].addr);
}

static void free6(void *t)
{
    ofl_lpm6_free(t);
}

_Static_assert(sizeof(struct ofl_route4) <= 64 && sizeof(struct ofl_route6) <= 64,
               "rebuilds swaps routes through 64 bytes");

static const struct family fam4 = {sizeof(struct ofl_route4), build4, free4, check4v, agrees4};
static const struct family fam6 = {sizeof(struct ofl_route6), build6, free6, check6v, agrees6};

/* The random-set steps after the first build: the n routes at `v` shuffled (answers
 * follow the new order of equal prefixes), then rebuilt without the second half
 * (prefix removal: those routes' addresses are answered by the first half alone). */
static void rebuilds(const struct family *f, void *v, size_t n, uint64_t seed)
{
    char err[256] = "";
    uint8_t *b = v, tmp[64];
    size_t sz = f->route_size;
    struct ofl_rng g = {seed};
    for (size_t i = n; i > 1; i--) {
        size_t j = ofl_rng_below(&g, i);
        memcpy(tmp, b + (i - 1) * sz, sz);
        memcpy(b + (i - 1) * sz, b + j * sz, sz);
        memcpy(b + j * sz, tmp, sz);
    }
    void *t;
    int rc = f->build(&t, v, n, err);
    size_t bad = rc ? 1 : f->check(t, v, n, n, 1000, seed + 7);
    CHECK(rc == 0 && bad == 0, "  shuffled: %zu mismatches %s", bad, err);
    if (!rc) f->free(t);

    rc = f->build(&t, v, n / 2, err);
    bad = rc ? 1 : f->check(t, v, n / 2, n / 2, 1000, seed + 9);
    size_t gone = 0;
    if (!rc)
        for (size_t i = n / 2; i < n; i++) gone += !f->agrees(t, v, n / 2, i);
    CHECK(rc == 0 && bad == 0 && gone == 0, "  rebuilt from the first %zu: %zu + %zu "
          "mismatches %s", n / 2, bad, gone, err);
    if (!rc) f->free(t);
}

static void test_lpm4_random(void)
{
    char err[256] = "";
    size_t sizes[] = {1, 10, 200, 3000};
    int nsizes = quick ? 3 : 4;
    for (int si = 0; si < nsizes; si++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct set4 s = gen4(sizes[si], seed * 100 + sizes[si]);
            struct ofl_lpm4 *t;
            int rc = ofl_lpm4_build(&t, s.v, s.n, err);
            size_t bad = rc ? 1 : check4(t, s.v, s.n, s.n, 5000, seed);
            CHECK(rc == 0 && bad == 0, "random set of %zu (seed %llu, %u groups): %zu "
                  "mismatches %s", s.n, (unsigned long long)seed, rc ? 0 : t->groups, bad,
                  rc ? err : "");
            if (!rc) ofl_lpm4_free(t);
            rebuilds(&fam4, s.v, s.n, seed);
            free(s.v);
        }
    }

    /* Batch sizes around the group size. */
    struct set4 s = gen4(500, 42);
    struct ofl_lpm4 *t;
    ofl_lpm4_build(&t, s.v, s.n, err);
    unsigned ns[] = {0, 1, 31, 32, 33, 64, 100, 1000};
    uint32_t a[1000];
    uint16_t h[1001];
    struct ofl_rng g = {5};
    size_t bad = 0;
    for (size_t i = 0; i < 1000; i++)
        a[i] = i % 2 ? (uint32_t)ofl_rng_next(&g) : s.v[i % s.n].addr | (i & 3);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        h[ns[k]] = 0xABCD;
        ofl_lpm4_lookup_batch(t, a, h, ns[k]);
        for (unsigned i = 0; i < ns[k]; i++) bad += h[i] != ofl_lpm4_lookup(t, a[i]);
        bad += h[ns[k]] != 0xABCD;
    }
    CHECK(bad == 0, "batch == scalar for batches of 0..1000, nothing written past n");
    ofl_lpm4_free(t);
    free(s.v);
}

static void test_lpm6_random(void)
{
    char err[256] = "";
    size_t sizes[] = {1, 10, 200, 3000};
    int nsizes = quick ? 3 : 4;
    for (int si = 0; si < nsizes; si++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct set6 s = gen6(sizes[si], seed * 1000 + sizes[si]);
            struct ofl_lpm6 *t;
            int rc = ofl_lpm6_build(&t, s.v, s.n, err);
            size_t bad = rc ? 1 : check6(t, s.v, s.n, s.n, 5000, seed);
            CHECK(rc == 0 && bad == 0, "random set of %zu (seed %llu; %u levels, %zu prefixes, "
                  "%zu markers): %zu mismatches %s", s.n, (unsigned long long)seed,
                  rc ? 0 : t->nlv, rc ? 0 : t->prefixes, rc ? 0 : t->markers, bad,
                  rc ? err : "");
            if (!rc) ofl_lpm6_free(t);
            rebuilds(&fam6, s.v, s.n, seed);
            free(s.v);
        }
    }
    struct set6 s = gen6(500, 43);
    struct ofl_lpm6 *t;
    ofl_lpm6_build(&t, s.v, s.n, err);
    unsigned ns[] = {0, 1, 15, 16, 17, 100, 1000};
    uint8_t *a = malloc(1000 * 16);
    uint16_t h[1001];
    struct ofl_rng g = {6};
    for (size_t i = 0; i < 1000; i++) {
        rand16(&g, a + 16 * i);
        if (i % 2) splice6(a + 16 * i, s.v[i % s.n].addr, a + 16 * i, s.v[i % s.n].len);
    }
    size_t bad = 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        h[ns[k]] = 0xABCD;
        ofl_lpm6_lookup_batch(t, a, h, ns[k]);
        for (unsigned i = 0; i < ns[k]; i++) bad += h[i] != ofl_lpm6_lookup(t, a + 16 * i);
        bad += h[ns[k]] != 0xABCD;
    }
    CHECK(bad == 0, "batch == scalar for batches of 0..1000, nothing written past n");
    ofl_lpm6_free(t);
    free(s.v);
    free(a);
}

/* ---- the BGP table ------------------------------------------------------------------ */

static void test_bgp(const char *path)
{
    char err[256] = "";
    struct ofl_routes r;
    ofl_routes_init(&r);
    double t0 = now_s();
    int rc = ofl_routes_load(&r, path, 0, err);
    double t1 = now_s();
    CHECK(rc == 0 && r.n4 == 901899 && r.n6 == 160147 && r.bad == 0,
          "BGP table: %zu IPv4 and %zu IPv6 routes, %llu garbage lines, read in %.3f s %s",
          r.n4, r.n6, (unsigned long long)r.bad, t1 - t0, err);
    if (rc) return;

    struct ofl_lpm4 *t4 = NULL;
    struct ofl_lpm6 *t6 = NULL;
    t0 = now_s();
    rc = ofl_lpm4_build(&t4, r.v4, r.n4, err);
    t1 = now_s();
    CHECK(rc == 0, "build DIR-24-8 of %zu routes: %.3f s, %.1f MiB, %u tbl8 groups %s", r.n4,
          t1 - t0, rc ? 0 : ofl_lpm4_memory(t4) / 1048576.0, rc ? 0 : t4->groups, err);
    t0 = now_s();
    int rc6 = ofl_lpm6_build(&t6, r.v6, r.n6, err);
    t1 = now_s();
    CHECK(rc6 == 0, "build IPv6 table of %zu routes: %.3f s, %.1f MiB, %u levels, depth %u, "
          "%zu prefixes, %zu markers %s", r.n6, t1 - t0,
          rc6 ? 0 : ofl_lpm6_memory(t6) / 1048576.0, rc6 ? 0 : t6->nlv, rc6 ? 0 : t6->depth,
          rc6 ? 0 : t6->prefixes, rc6 ? 0 : t6->markers, err);
    if (rc6 == 0)
        printf("  of which the trie: %.1f MiB, %zu nodes, %zu leaves, depth %u\n",
               ofl_lpm6_trie_memory(&t6->trie) / 1048576.0, t6->trie.nnodes, t6->trie.nleaves,
               t6->trie.depth);
    if (rc || rc6) goto out;

    /* Spot checks of the full tables against brute force over every route. */
    struct ofl_rng g = {2024};
    size_t spots = quick ? 60 : 600, bad4 = 0, bad6 = 0;
    for (size_t i = 0; i < spots; i++) {
        const struct ofl_route4 *p = &r.v4[ofl_rng_below(&g, r.n4)];
        uint32_t a = i % 3 == 0 ? (uint32_t)ofl_rng_next(&g)
                                : p->addr | ((uint32_t)ofl_rng_next(&g) & ~mask4(p->len));
        bad4 += ofl_lpm4_lookup(t4, a) != brute4(r.v4, r.n4, a);
        const struct ofl_route6 *q = &r.v6[ofl_rng_below(&g, r.n6)];
        uint8_t x[16];
        rand16(&g, x);
        if (i % 3) splice6(x, q->addr, x, q->len);
        bad6 += ofl_lpm6_lookup(t6, x) != brute6(r.v6, r.n6, x);
    }
    CHECK(bad4 == 0 && bad6 == 0, "full tables, %zu spot checks each against brute force: "
          "%zu + %zu mismatches", spots, bad4, bad6);

    /* Batch == scalar on many addresses, and their speed (printed, not judged). */
    size_t m = quick ? 100000 : 4000000;
    uint32_t *a4 = malloc(m * sizeof *a4);
    uint8_t *a6 = malloc(m * 16);
    uint16_t *h = malloc(m * sizeof *h);
    for (size_t i = 0; i < m; i++) {
        const struct ofl_route4 *p = &r.v4[ofl_rng_below(&g, r.n4)];
        a4[i] = p->addr | ((uint32_t)ofl_rng_next(&g) & ~mask4(p->len));
        const struct ofl_route6 *q = &r.v6[ofl_rng_below(&g, r.n6)];
        rand16(&g, a6 + 16 * i);
        splice6(a6 + 16 * i, q->addr, a6 + 16 * i, q->len);
    }
    t0 = now_s();
    ofl_lpm4_lookup_batch(t4, a4, h, (unsigned)m);
    t1 = now_s();
    size_t bad = 0;
    uint64_t sum = 0;
    double t2 = now_s();
    for (size_t i = 0; i < m; i++) sum += ofl_lpm4_lookup(t4, a4[i]);
    double t3 = now_s();
    for (size_t i = 0; i < m; i++) bad += h[i] != ofl_lpm4_lookup(t4, a4[i]);
    CHECK(bad == 0, "IPv4 batch == scalar on %zu addresses in random prefixes; batch %.1f, "
          "scalar %.1f Mlookups/s (sum %llu)", m, m / (t1 - t0) / 1e6, m / (t3 - t2) / 1e6,
          (unsigned long long)sum);
    t0 = now_s();
    ofl_lpm6_lookup_batch(t6, a6, h, (unsigned)m);
    t1 = now_s();
    bad = 0;
    sum = 0;
    t2 = now_s();
    for (size_t i = 0; i < m; i++) sum += ofl_lpm6_lookup(t6, a6 + 16 * i);
    t3 = now_s();
    for (size_t i = 0; i < m; i++) bad += h[i] != ofl_lpm6_lookup(t6, a6 + 16 * i);
    CHECK(bad == 0, "IPv6 batch == scalar on %zu addresses in random prefixes; batch %.1f, "
          "scalar %.1f Mlookups/s (sum %llu)", m, m / (t1 - t0) / 1e6, m / (t3 - t2) / 1e6,
          (unsigned long long)sum);
    free(a4);
    free(a6);
    free(h);

    /* A random 20k-prefix slice of each family, built on its own, checked in full. */
    size_t ns = quick ? 2000 : 20000;
    struct ofl_route4 *s4 = malloc(ns * sizeof *s4);
    struct ofl_route6 *s6 = malloc(ns * sizeof *s6);
    for (size_t i = 0; i < ns; i++) {
        s4[i] = r.v4[ofl_rng_below(&g, r.n4)];
        s6[i] = r.v6[ofl_rng_below(&g, r.n6)];
    }
    ofl_lpm4_free(t4);
    ofl_lpm6_free(t6);
    t4 = NULL;
    t6 = NULL;
    rc = ofl_lpm4_build(&t4, s4, ns, err);
    size_t nb = quick ? 200 : 1000;
    bad4 = rc ? 1 : check4(t4, s4, ns, nb, 2000, 11);   /* boundaries of nb routes */
    CHECK(rc == 0 && bad4 == 0, "IPv4 slice of %zu: %zu mismatches", ns, bad4);
    rc6 = ofl_lpm6_build(&t6, s6, ns, err);
    bad6 = rc6 ? 1 : check6(t6, s6, ns, nb, 2000, 12);
    CHECK(rc6 == 0 && bad6 == 0, "IPv6 slice of %zu: %zu mismatches", ns, bad6);
    free(s4);
    free(s6);
out:
    ofl_lpm4_free(t4);
    ofl_lpm6_free(t6);
    ofl_routes_free(&r);
}

/* The stats ofl_lpm4_stats_json (ofl_lpm6_stats_json when `t6`) writes for `t`: the
 * text, malloc'ed. */
static char *stats_text(const struct ofl_lpm4 *t4, const struct ofl_lpm6 *t6)
{
    char *text = NULL;
    size_t len = 0;
    struct ofl_json j = { .f = open_memstream(&text, &len) };
    ofl_json_begin_obj(&j, NULL);
    if (t6) ofl_lpm6_stats_json(&j, "r", t6);
    else ofl_lpm4_stats_json(&j, "r", t4);
    ofl_json_end_obj(&j);
    fclose(j.f);
    return text;
}

/* A table's prefix file lines that are not prefixes: counted with the first's number,
 * kept by a table built from the file or from the blob the host packed of it (the
 * path from the options), said in its stats; nothing said for a clean file. */
static void test_table_file(void)
{
    const char *path = tmp_path("garbage.txt"), *clean = tmp_path("clean.txt");
    FILE *f = fopen(path, "w");
    fputs("10.0.0.0/8 1\nbogus line\n2001:db8::/32\n# c\nalso bogus\n", f);
    fclose(f);
    f = fopen(clean, "w");
    fputs("10.0.0.0/8\n2001:db8::/32\n", f);
    fclose(f);
    char opt[600], copt[600];
    snprintf(opt, sizeof opt, "r.path=%s", path);
    snprintf(copt, sizeof copt, "c.path=%s", clean);
    char *argv[] = {"t", "--window", "w", "--opt", opt, "--opt", copt, NULL};
    struct ofl_args a;
    CHECK(ofl_args_parse(&a, 7, argv, "nic") == 0, "options parsed");
    struct ofl_lpm4 *t4 = NULL, *b4 = NULL, *c4 = NULL;
    struct ofl_lpm6 *t6 = NULL, *b6 = NULL;
    CHECK(ofl_lpm4_open_opts(&t4, &a, "r") == 0 && ofl_lpm6_open_opts(&t6, &a, "r") == 0 &&
          ofl_lpm4_open_opts(&c4, &a, "c") == 0, "opened from the files");
    void *blob4 = NULL, *blob6 = NULL;
    size_t len4 = 0, len6 = 0;
    CHECK(ofl_lpm4_pack(&blob4, &len4, &a, "r") == 0 &&
          ofl_lpm6_pack(&blob6, &len6, &a, "r") == 0 &&
          ofl_lpm4_open_blob(&b4, blob4, len4, &a, "r") == 0 &&
          ofl_lpm6_open_blob(&b6, blob6, len6, &a, "r") == 0, "packed and built from the blobs");
    const struct ofl_routes_file *fs[] = {t4 ? &t4->file : NULL, t6 ? &t6->file : NULL,
                                          b4 ? &b4->file : NULL, b6 ? &b6->file : NULL};
    for (int i = 0; i < 4; i++)
        CHECK(fs[i] && fs[i]->path && !strcmp(fs[i]->path, path) && fs[i]->lines == 5 &&
                  fs[i]->bad == 2 && fs[i]->first_bad == 2,
              "table %d: 2 of 5 lines not prefixes, the first line 2", i);
    static const uint8_t in_db8[16] = {0x20, 0x01, 0x0d, 0xb8};
    CHECK(b4 && b4->routes == 1 && b6 && ofl_lpm6_lookup(b6, in_db8) != 0,
          "the blobs' routes after the counts");
    CHECK(c4 && c4->file.lines == 2 && c4->file.bad == 0 && c4->file.first_bad == 0,
          "a clean file: no garbage");
    char want[1024];
    snprintf(want, sizeof want, "{\"r\":{\"kind\":\"lpm\",\"path\":\"%s\",\"lines\":5,"
             "\"not_prefixes\":2,\"first_not_prefix\":2}}", path);
    char *s4 = b4 ? stats_text(b4, NULL) : NULL, *s6 = t6 ? stats_text(NULL, t6) : NULL;
    char *sc = c4 ? stats_text(c4, NULL) : NULL;
    CHECK(s4 && s6 && !strcmp(s4, want) && !strcmp(s6, want), "stats: %s", s4 ? s4 : "");
    CHECK(sc && !strcmp(sc, "{}"), "a clean file's table says nothing: %s", sc ? sc : "");
    struct ofl_lpm4 *short4 = NULL;
    CHECK(ofl_lpm4_open_blob(&short4, blob4, 16, &a, "r") == -EINVAL && !short4,
          "a blob shorter than the counts is refused");
    free(s4);
    free(s6);
    free(sc);
    free(blob4);
    free(blob6);
    ofl_lpm4_free(t4);
    ofl_lpm4_free(b4);
    ofl_lpm4_free(c4);
    ofl_lpm6_free(t6);
    ofl_lpm6_free(b6);
    unlink(path);
    unlink(clean);
}

int main(int argc, char **argv)
{
    const char *bgp = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--tmp") && i + 1 < argc) tmp_dir = argv[++i];
        else if (!strcmp(argv[i], "--bgp") && i + 1 < argc) bgp = argv[++i];
        else {
            fprintf(stderr, "usage: test_lpm [--quick] [--tmp DIR] [--bgp FILE]\n");
            return 2;
        }
    }
    if (bgp) {
        test_bgp(bgp);
        return CHECK_DONE();
    }
    test_parse6();
    test_routes();
    test_table_file();
    test_lpm4_cases();
    test_lpm4_random();
    test_lpm6_cases();
    test_lpm6_trie_cases();
    test_lpm6_tables();
    test_lpm6_random();
    printf("lpm6 trie batch checks per path: scalar %u, avx2 %u, avx512 %u (CPU: %s)\n",
           paths_run[0], paths_run[1], paths_run[2], ofl_simd_name(ofl_simd_cpu()));
    for (int p = OFL_SIMD_SCALAR; p <= (int)ofl_simd_cpu(); p++)
        CHECK(paths_run[p] > 0, "the lpm6 batch ran on path %s", ofl_simd_name((enum ofl_simd)p));
    return CHECK_DONE();
}
