/* Tests of the segmentation offload (lso.h): every packet of a cut send is read back
 * with the header parsers and the slow reference checksum, and must be what RFC 793 /
 * 791 / 8200 say a segment or fragment of that send is; PIO and an emulated DMA give
 * the same bytes; every malformed descriptor is refused for its reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/lso.h"
#include "offlow/pkt.h"
#include "ref_csum.h"

#define BUF (256u * 1024u)
#define FRAME 9100u

static uint8_t sendbuf[BUF];
static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* ---- templates and descriptors ------------------------------------------------------ */

struct shape {
    int v6, tcp, vlan, ip_opts, tcp_opts;
};

/* A header template of `s` into `h`; returns its length. Addresses and ports are fixed,
 * the TCP sequence number 0xFFFFF000 (so it wraps), flags ACK|PSH|FIN, IPv4 ID 0xFFFE. */
static uint32_t make_tmpl(uint8_t *h, const struct shape *s)
{
    uint32_t n = 0;
    static const uint8_t mac[12] = { 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2 };
    memcpy(h, mac, 12);
    n = 12;
    if (s->vlan) {
        ofl_put_be16(h + n, 0x8100);
        ofl_put_be16(h + n + 2, 42);
        n += 4;
    }
    ofl_put_be16(h + n, s->v6 ? 0x86DD : 0x0800);
    n += 2;
    uint8_t proto = s->tcp ? 6 : 17;
    if (s->v6) {
        memset(h + n, 0, 40);
        h[n] = 0x60;
        h[n + 6] = proto;
        h[n + 7] = 64;
        for (int i = 0; i < 16; i++) h[n + 8 + i] = (uint8_t)(0x20 + i), h[n + 24 + i] = (uint8_t)(0x40 + i);
        n += 40;
    } else {
        uint32_t hl = 20 + (s->ip_opts ? 8 : 0);
        memset(h + n, 0, hl);
        h[n] = (uint8_t)(0x40 | hl / 4);
        ofl_put_be16(h + n + 2, 9999);          /* wrong on purpose: the cut sets it */
        ofl_put_be16(h + n + 4, 0xFFFE);
        h[n + 8] = 64;
        h[n + 9] = proto;
        ofl_put_be32(h + n + 12, 0xC0000201);
        ofl_put_be32(h + n + 16, 0xC6336402);
        if (s->ip_opts) h[n + 20] = 1, h[n + 21] = 1, h[n + 22] = 1, h[n + 23] = 0; /* NOPs, EOL */
        n += hl;
    }
    if (s->tcp) {
        uint32_t hl = 20 + (s->tcp_opts ? 12 : 0);
        memset(h + n, 0, hl);
        ofl_put_be16(h + n, 40000);
        ofl_put_be16(h + n + 2, 443);
        ofl_put_be32(h + n + 4, 0xFFFFF000u);
        ofl_put_be32(h + n + 8, 12345);
        h[n + 12] = (uint8_t)(hl / 4 << 4);
        h[n + 13] = 0x10 | 0x08 | 0x01;        /* ACK PSH FIN */
        ofl_put_be16(h + n + 14, 512);
        if (s->tcp_opts) h[n + 20] = 1, h[n + 21] = 1, h[n + 22] = 8, h[n + 23] = 10;
        n += hl;
    } else {
        memset(h + n, 0, 8);
        ofl_put_be16(h + n, 5353);
        ofl_put_be16(h + n + 2, 443);
        n += 8;
    }
    return n;
}

/* A descriptor: fixed part, then the template. Returns its length. */
static uint32_t make_desc(uint8_t *d, uint32_t off, uint32_t len, uint16_t mss, uint16_t flags,
                          const uint8_t *tmpl, uint32_t tlen)
{
    struct ofl_lso_desc x = { .off = off, .len = len, .mss = mss, .flags = flags,
                              .hdr_len = (uint16_t)tlen, .frag_id = 0xA1B2C3D4u, .tag = 77 };
    memcpy(x.hdr, tmpl, tlen);
    memcpy(d, &x, OFL_LSO_DESC_FIXED + tlen);
    return OFL_LSO_DESC_FIXED + tlen;
}

/* ---- reading packets back -------------------------------------------------------------- */

/* The pseudo-header sum (not folded) of an IP packet at `ip` for `len` L4 bytes. */
static uint32_t pseudo(const uint8_t *ip, int v6, uint8_t proto, uint32_t len)
{
    uint32_t s = proto + len;
    const uint8_t *a = ip + (v6 ? 8 : 12);
    for (int i = 0; i < (v6 ? 32 : 8); i += 2) s += (uint32_t)(a[i] << 8 | a[i + 1]);
    return s;
}

/* ~ref_csum over pseudo header + bytes: 0 when the checksum in them is right. */
static uint16_t l4_check(const uint8_t *ip, int v6, uint8_t proto, const uint8_t *l4, uint32_t n)
{
    uint8_t *tmp = malloc(n + 40);
    uint32_t ps = pseudo(ip, v6, proto, n);
    while (ps >> 16) ps = (ps & 0xFFFF) + (ps >> 16);
    tmp[0] = (uint8_t)(ps >> 8);
    tmp[1] = (uint8_t)ps;
    memcpy(tmp + 2, l4, n);
    uint16_t r = ref_csum(tmp, n + 2);
    free(tmp);
    return r;
}

static uint16_t fold(uint32_t s)
{
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

struct got {
    uint8_t stream[BUF];   /* the payload (TCP) or datagram (UDP) rebuilt */
    uint32_t bytes, pkts, bad;
    uint8_t kinds[4096];
};

/* Check every packet of one send; `pio` 0 moves the payload like a DMA: memcpy of the
 * slice, then ofl_lso_seal. Returns failures (also printed). */
static uint8_t original[BUF];

static int cut_and_check(const struct shape *s, uint32_t len, uint16_t mss, uint16_t flags,
                         uint32_t mtu, int mode, struct got *g)
{
    uint8_t tmpl[128], desc[256];
    uint32_t tl = make_tmpl(tmpl, s);
    uint32_t off = OFL_LSO_HEADROOM_BYTES + rnd() % 1000;
    for (uint32_t i = 0; i < len; i++) original[i] = sendbuf[off + i] = (uint8_t)rnd();
    if (mode == OFL_LSO_IN_PLACE) flags |= OFL_LSO_HEADROOM;
    uint32_t dl = make_desc(desc, off, len, mss, flags, tmpl, tl);
    struct ofl_lso_limits lim = { .mtu = mtu, .frame_max = FRAME };
    struct ofl_lso_cut c;
    int rc = ofl_lso_begin(&c, desc, dl, sendbuf, BUF, &lim);
    memset(g, 0, sizeof *g);
    if (rc) { printf("begin: %s\n", ofl_lso_reason(rc)); return 1; }
    int bad = 0, offload = flags & OFL_LSO_CSUM_OFFLOAD;
    static uint8_t buf[FRAME];
    uint8_t *out = buf;
    uint32_t fl, want_seq = 0xFFFFF000u, last_off = 0;
    while ((fl = ofl_lso_next(&c, buf, mode)) > 0) {
        unsigned k = c.kind, idx = g->pkts;
        g->kinds[idx < 4096 ? idx : 4095] = (uint8_t)k;
        out = c.frame;
        if (mode == OFL_LSO_IN_PLACE &&
            (out < sendbuf + off - OFL_LSO_HEADROOM_BYTES || out + fl > sendbuf + off + len)) {
            bad++; printf("in place: outside the send's room\n"); break;
        }
        if (mode != OFL_LSO_IN_PLACE && out != buf) { bad++; break; }
        if (mode == OFL_LSO_BY_DMA) {
            memcpy(out + c.slice_dst, c.slice_src, c.slice_len);
            ofl_lso_seal(&c, out, fl, k);
        }
        int last = ofl_lso_left(&c) == 0;
        uint16_t et;
        uint32_t l3;
        if (ofl_parse_eth(out, fl, &et, &l3) || l3 != (s->vlan ? 18u : 14u)) { bad++; break; }
        const uint8_t *ip = out + l3;
        uint32_t l4, end;
        uint8_t proto, frag = 0;
        uint32_t frag_off = 0, more = 0;
        if (s->v6) {
            struct ofl_ipv6_info v;
            if (ofl_parse_ipv6(out, fl, l3, &v)) { bad++; printf("ipv6 parse\n"); break; }
            l4 = v.l4_off; end = v.end; proto = v.proto; frag = v.frag;
            if (ip[6] == 44) {
                const uint8_t *fh = ip + 40;
                frag_off = ofl_get_be16(fh + 2) & ~7u;
                more = fh[3] & 1;
                if (fh[0] != 17 || ofl_get_be32(fh + 4) != 0xA1B2C3D4u) bad++;
            }
        } else {
            struct ofl_ipv4_info v;
            if (ofl_parse_ipv4(out, fl, l3, &v)) { bad++; printf("ipv4 parse\n"); break; }
            l4 = l3 + v.hdr_len; end = v.end; proto = v.proto; frag = v.frag;
            uint16_t fw = ofl_get_be16(ip + 6);
            frag_off = (fw & 0x1FFFu) * 8u;
            more = (fw & 0x2000u) != 0;
            uint16_t id = ofl_get_be16(ip + 4);
            uint16_t want_id = s->tcp ? (uint16_t)(0xFFFE + idx) : 0xFFFE;
            if (id != want_id) { bad++; printf("ip id %u want %u\n", id, want_id); }
            uint16_t ipc = ofl_get_be16(ip + 10);
            if (offload ? ipc != 0 : ref_csum(ip, v.hdr_len) != 0) { bad++; printf("ip csum\n"); }
        }
        if (end != fl) { bad++; printf("ip length %u, frame %u\n", end, fl); }
        if (fl - l3 > mtu) { bad++; printf("packet over the mtu\n"); }
        (void)frag;
        if (s->tcp) {
            const uint8_t *t = out + l4;
            uint32_t thl = (uint32_t)(t[12] >> 4) * 4, n = end - l4 - thl;
            if (ofl_get_be32(t + 4) != want_seq) { bad++; printf("seq\n"); }
            want_seq += n;
            uint8_t fin_psh = t[13] & 0x09;
            if (fin_psh != (last ? 0x09 : 0) || !(t[13] & 0x10)) { bad++; printf("flags %x\n", t[13]); }
            if (offload) {
                if (ofl_get_be16(t + 16) != fold(pseudo(ip, s->v6, 6, end - l4))) {
                    bad++; printf("tcp pseudo sum\n");
                }
            } else if (l4_check(ip, s->v6, 6, t, end - l4)) { bad++; printf("tcp csum\n"); }
            if (n > mss) bad++;
            memcpy(g->stream + g->bytes, t + thl, n);
            g->bytes += n;
        } else {
            if (c.npkts > 1) {  /* fragments: offsets follow, MF on all but the last */
                if (frag_off != last_off || more != (uint32_t)!last) {
                    bad++; printf("fragment %u offset %u want %u more %u\n", idx, frag_off, last_off, more);
                }
                uint32_t data = end - l4;
                if (!last && data % 8) bad++;
                memcpy(g->stream + frag_off, out + l4, data);
                last_off = frag_off + data;
                g->bytes = last_off;
            } else {
                if (proto != 17 || more || frag_off) bad++;
                memcpy(g->stream, out + l4, end - l4);
                g->bytes = end - l4;
            }
        }
        g->pkts++;
    }
    if (!s->tcp) {  /* the datagram rebuilt: length and checksum */
        const uint8_t *u = g->stream;
        uint8_t ipb[64];
        memcpy(ipb, tmpl + (s->vlan ? 18 : 14), 40);
        if (ofl_get_be16(u + 4) != 8 + len || g->bytes != 8 + len) { bad++; printf("udp length\n"); }
        if (offload) {
            if (ofl_get_be16(u + 6) != fold(pseudo(ipb, s->v6, 17, 8 + len))) { bad++; printf("udp pseudo\n"); }
        } else if (l4_check(ipb, s->v6, 17, u, 8 + len)) { bad++; printf("udp csum\n"); }
        if (memcmp(u + 8, original, len)) { bad++; printf("datagram bytes\n"); }
    } else if (g->bytes != len || memcmp(g->stream, original, len)) {
        bad++; printf("stream bytes\n");
    }
    g->bad = (uint32_t)bad;
    return bad;
}

static void test_sums(void)
{
    static uint8_t a[600], b[600];
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
        uint32_t n = rnd() % 300, al = rnd() % 8;
        for (uint32_t i = 0; i < n; i++) a[al + i] = (uint8_t)rnd();
        uint16_t want = (uint16_t)~ref_csum(a + al, n);
        uint16_t s1 = ofl_lso_sum(a + al, n);
        uint16_t s2 = ofl_lso_copy_sum(b + (t % 8), a + al, n);
        /* 0 and 0xFFFF are the same one's-complement number */
        if ((s1 != want && !(s1 + want == 0xFFFF && (s1 == 0 || want == 0))) || s2 != s1 ||
            memcmp(b + (t % 8), a + al, n))
            bad++;
    }
    CHECK(!bad, "ofl_lso_sum and copy_sum agree with the reference over 2000 random buffers");
}

static void test_cuts(void)
{
    static struct got g, h;
    struct shape shapes[] = {
        { 0, 1, 0, 0, 0 }, { 0, 1, 1, 1, 1 }, { 1, 1, 0, 0, 1 }, { 1, 1, 1, 0, 0 },
        { 0, 0, 0, 0, 0 }, { 0, 0, 1, 1, 0 }, { 1, 0, 0, 0, 0 }, { 1, 0, 1, 0, 0 },
    };
    const char *names[] = { "tcp4", "tcp4 vlan opts", "tcp6 opts", "tcp6 vlan", "udp4",
                            "udp4 vlan opts", "udp6", "udp6 vlan" };
    uint32_t mtus[] = { 512, 1024, 1500, 9000 };
    for (unsigned si = 0; si < 8; si++) {
        const struct shape *s = &shapes[si];
        int bad = 0, diff = 0, cases = 0;
        for (unsigned mi = 0; mi < 4; mi++) {
            uint8_t tmpl[128];
            uint32_t tl = make_tmpl(tmpl, s);
            uint16_t mss = (uint16_t)ofl_lso_mss_for(tmpl, tl, mtus[mi]);
            uint32_t lens[] = { 0, 1, 7, mss - 9u, mss - 8u, mss, mss + 1u, 2u * mss,
                                3u * mss + 5, 65000, s->tcp ? 65535u : (s->v6 ? 65527u : 65507u - (s->ip_opts ? 8u : 0u)),
                                rnd() % 60000 };
            for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                for (int fl = 0; fl < 2; fl++) {
                    uint16_t flags = fl ? OFL_LSO_CSUM_OFFLOAD : 0;
                    bad += cut_and_check(s, lens[li], mss, flags, mtus[mi], OFL_LSO_BY_PIO, &g) != 0;
                    bad += cut_and_check(s, lens[li], mss, flags, mtus[mi], OFL_LSO_BY_DMA, &h) != 0;
                    if (g.pkts != h.pkts || g.bytes != h.bytes) diff++;
                    bad += cut_and_check(s, lens[li], mss, flags, mtus[mi], OFL_LSO_IN_PLACE, &h) != 0;
                    if (g.pkts != h.pkts || g.bytes != h.bytes) diff++;
                    cases += 3;
                    /* kinds: one packet is SSM (ZERO when empty); else BOM COM.. EOM */
                    uint32_t n = g.pkts;
                    uint32_t data = s->tcp ? lens[li] : 8 + lens[li];
                    uint32_t unit = s->tcp ? mss : (mss + 8u) & ~7u;
                    uint32_t want = data <= unit ? 1 : (data + unit - 1) / unit;
                    if (n != want) { bad++; printf("%s len %u: %u packets, want %u\n", names[si], lens[li], n, want); }
                    for (uint32_t k = 0; k < n && k < 4096; k++) {
                        unsigned wk = n == 1 ? (lens[li] ? OFL_LSO_SSM : OFL_LSO_ZERO)
                                    : k == 0 ? OFL_LSO_BOM : k + 1 == n ? OFL_LSO_EOM : OFL_LSO_COM;
                        if (g.kinds[k] != wk) { bad++; break; }
                    }
                }
            }
        }
        CHECK(!bad && !diff, "%s: %d sends (MTU 512..9000, 0..64 KB, compute and offload, PIO, DMA, in "
              "place) read back right", names[si], cases);
    }
}

static void test_pio_dma_and_in_place_give_the_same_bytes(void)
{
    uint8_t tmpl[128], desc[256];
    struct shape shapes[2] = { { 0, 1, 0, 0, 1 }, { 1, 0, 1, 0, 0 } };
    int same = 1;
    for (int si = 0; si < 2; si++) {
        uint32_t tl = make_tmpl(tmpl, &shapes[si]);
        for (uint32_t i = 0; i < 20000; i++) sendbuf[200 + i] = (uint8_t)rnd();
        uint32_t dl = make_desc(desc, 200, 20000, 1200, OFL_LSO_HEADROOM, tmpl, tl);
        struct ofl_lso_limits lim = { 1500, FRAME };
        struct ofl_lso_cut a, b, p;
        static uint8_t x[FRAME], y[FRAME], z[FRAME], keep[BUF];
        memcpy(keep, sendbuf, 20400);
        same &= ofl_lso_begin(&a, desc, dl, keep, BUF, &lim) == 0 &&
                ofl_lso_begin(&b, desc, dl, keep, BUF, &lim) == 0 &&
                ofl_lso_begin(&p, desc, dl, sendbuf, BUF, &lim) == 0;
        uint32_t la, lb, lp;
        while (same && (la = ofl_lso_next(&a, x, OFL_LSO_BY_PIO)) > 0) {
            memset(y, 0xEE, sizeof y);
            lb = ofl_lso_next(&b, y, OFL_LSO_BY_DMA);
            memcpy(y + b.slice_dst, b.slice_src, b.slice_len);
            ofl_lso_seal(&b, y, lb, b.kind);
            lp = ofl_lso_next(&p, z, OFL_LSO_IN_PLACE);
            same = la == lb && la == lp && !memcmp(x, y, la) && !memcmp(x, p.frame, la);
        }
    }
    CHECK(same, "PIO, DMA + seal and in place build byte-identical packets (TCP/IPv4, "
          "fragments of UDP/IPv6)");
}

static int refuse(const uint8_t *desc, uint32_t dl, uint64_t buflen, uint32_t mtu, uint32_t frame)
{
    struct ofl_lso_limits lim = { mtu, frame };
    struct ofl_lso_cut c;
    return ofl_lso_begin(&c, desc, dl, sendbuf, buflen, &lim);
}

static void test_refusals(void)
{
    uint8_t tmpl[128], d[512];
    struct shape tcp4 = { 0, 1, 0, 0, 0 }, udp4 = { 0, 0, 0, 0, 0 }, udp6 = { 1, 0, 0, 0, 0 };
    uint32_t tl = make_tmpl(tmpl, &tcp4);
    uint32_t dl = make_desc(d, 0, 3000, 1460, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == 0, "a good descriptor is taken");
    int all = 1;
    for (uint32_t n = 0; n < OFL_LSO_DESC_FIXED; n++) all &= refuse(d, n, BUF, 1500, FRAME) == OFL_LSO_EDESC;
    CHECK(all, "a descriptor cut inside its fixed part: bad_desc");
    all = 1;
    for (uint32_t n = OFL_LSO_DESC_FIXED; n < dl; n++) all &= refuse(d, n, BUF, 1500, FRAME) == OFL_LSO_EDESC;
    CHECK(all, "a descriptor cut inside its template: bad_desc");
    all = 1;
    for (uint32_t n = 0; n < tl; n++) {   /* the template itself cut short (hdr_len says so) */
        uint32_t l = make_desc(d, 0, 3000, 1460, 0, tmpl, n);
        all &= refuse(d, l, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE;
    }
    CHECK(all, "every truncated template (%u lengths): bad_template", tl);
    dl = make_desc(d, 0, 3000, 1460, 0, tmpl, tl);
    d[12] = 129; d[13] = 0;
    CHECK(refuse(d, 600, BUF, 1500, FRAME) == OFL_LSO_EDESC, "hdr_len above 128: bad_desc");
    dl = make_desc(d, 0, 3000, 1460, 0x8000, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EDESC, "unknown flags: bad_desc");
    dl = make_desc(d, 0, 3000, 1460, 0, tmpl, tl);
    d[14] = 1;
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EDESC, "reserved bits: bad_desc");

    uint8_t t2[140];
    memcpy(t2, tmpl, tl);
    t2[tl] = 0xAB;
    dl = make_desc(d, 0, 3000, 1460, 0, t2, tl + 1);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "a byte after the TCP header: bad_template");
    memcpy(t2, tmpl, tl); ofl_put_be16(t2 + 12, 0x0806);
    dl = make_desc(d, 0, 3000, 1460, 0, t2, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "ARP: bad_template");
    memcpy(t2, tmpl, tl); t2[14 + 9] = 1;
    dl = make_desc(d, 0, 3000, 1460, 0, t2, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "ICMP: bad_template");
    memcpy(t2, tmpl, tl); t2[14 + 6] = 0x20;
    dl = make_desc(d, 0, 3000, 1460, 0, t2, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "an IPv4 fragment (MF): bad_template");
    memcpy(t2, tmpl, tl); t2[14 + 20 + 12] = 0x40;
    dl = make_desc(d, 0, 3000, 1460, 0, t2, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "TCP data offset 4: bad_template");
    uint32_t ul = make_tmpl(t2, &udp6);
    t2[14 + 6] = 0;   /* hop-by-hop: an extension header */
    dl = make_desc(d, 0, 3000, 1448, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "an IPv6 extension header: bad_template");
    ul = make_tmpl(t2, &udp4);
    t2[14 + 6] = 0x40;   /* DF */
    dl = make_desc(d, 0, 3000, 1472, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ETEMPLATE, "DF on a datagram to fragment: bad_template");
    dl = make_desc(d, 0, 1000, 1472, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == 0, "DF on a datagram that fits one packet: taken");

    dl = make_desc(d, 1000, 3000, 1460, 0, tmpl, tl);
    CHECK(refuse(d, dl, 3999, 1500, FRAME) == OFL_LSO_EBUFFER && refuse(d, dl, 4000, 1500, FRAME) == 0,
          "payload one byte past the send buffer: beyond_buffer (exactly to its end: taken)");
    dl = make_desc(d, OFL_LSO_HEADROOM_BYTES - 1, 100, 1460, OFL_LSO_HEADROOM, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EBUFFER,
          "headroom claimed before the buffer's start: beyond_buffer");
    dl = make_desc(d, 0xFFFFFFF0u, 0x20, 1460, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EBUFFER, "off + len wrapping 32 bits: beyond_buffer");
    dl = make_desc(d, 0, 3000, 0, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EMSS, "MSS 0: bad_mss");
    dl = make_desc(d, 0, 0, 0, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EMSS, "MSS 0 on an empty send: bad_mss");
    dl = make_desc(d, 0, 3000, 1461, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EMSS, "MSS one above the MTU's: bad_mss");
    dl = make_desc(d, 0, 3000, 1460, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, 1513) == OFL_LSO_EMSS, "a packet longer than the frame buffer: bad_mss");
    ul = make_tmpl(t2, &udp4);
    dl = make_desc(d, 0, 3000, 1473, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == 0, "UDP MSS 1473 rounds down to 1480-byte fragments: taken");
    dl = make_desc(d, 0, 3000, 1480, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EMSS, "UDP MSS 1480 (1488-byte fragments): bad_mss");
    ul = make_tmpl(t2, &udp6);
    dl = make_desc(d, 0, 3000, 1448, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_EMSS, "UDP/IPv6 MSS 1448 (no room for the fragment header): bad_mss");
    dl = make_desc(d, 0, 65536, 1460, 0, tmpl, tl);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ELENGTH, "a TCP send of 65,536 bytes: too_long");
    ul = make_tmpl(t2, &udp4);
    dl = make_desc(d, 0, 65508, 1472, 0, t2, ul);
    CHECK(refuse(d, dl, BUF, 1500, FRAME) == OFL_LSO_ELENGTH, "a UDP/IPv4 datagram over 65,535 bytes: too_long");
    CHECK(!strcmp(ofl_lso_reason(OFL_LSO_EMSS), "bad_mss") && !strcmp(ofl_lso_reason(0), "?"),
          "reasons have names");
    int apart = 1;  /* the refusals' range (err.h) is apart from the others' */
    for (int e = OFL_ERR_PKT_FIRST; e >= OFL_ERR_MC_LAST; e--)
        apart &= !strcmp(ofl_lso_reason(e), "?");
    CHECK(apart, "no code in the packet parsers', the core's or memcached's ranges is a refusal");
}

static void test_split(void)
{
    uint8_t f[3000];
    struct shape s = { 1, 1, 1, 0, 1 };
    uint32_t tl = make_tmpl(f, &s), hl = 0, len = 0;
    ofl_put_be16(f + 18 + 4, (uint16_t)(tl - 18 - 40 + 1000));
    int rc = ofl_lso_split(f, tl + 1000 + 6, &hl, &len);   /* 6 bytes of padding */
    CHECK(rc == 0 && hl == tl && len == 1000, "split: template %u, payload 1000 (padding left out)", tl);
    CHECK(ofl_lso_split(f, tl + 999, &hl, &len) == OFL_LSO_ETEMPLATE, "split: an IP length past the frame");
    CHECK(ofl_lso_mss_for(f, tl, 1500) == 1500 - 40 - 32, "mss_for TCP/IPv6 with options: 1428");
}

int main(void)
{
    test_sums();
    test_cuts();
    test_pio_dma_and_in_place_give_the_same_bytes();
    test_refusals();
    test_split();
    return CHECK_DONE();
}
