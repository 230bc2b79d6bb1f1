/* Header parsers and checksums on hand-built good and bad packets.
 *
 * Every truncation of every good packet is parsed from a heap buffer of exactly
 * that many bytes, so under ASan a read past `len` is caught. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/err.h"
#include "offlow/pkt.h"
#include "ref_csum.h"

/* ---- packet builders ------------------------------------------------------ */

/* Ethernet header with `ntags` VLAN tags (first 0x88A8 when two) before `et`. */
static uint32_t put_eth(uint8_t *b, int ntags, uint16_t et)
{
    static const uint8_t macs[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
    memcpy(b, macs, 12);
    uint32_t off = 12;
    for (int i = 0; i < ntags; i++) {
        ofl_put_be16(b + off, ntags == 2 && i == 0 ? OFL_ETHERTYPE_QINQ : OFL_ETHERTYPE_VLAN);
        ofl_put_be16(b + off + 2, (uint16_t)(100 + i));   /* TCI: VLAN id */
        off += 4;
    }
    ofl_put_be16(b + off, et);
    return off + 2;
}

/* IPv4 header (with `optwords` 32-bit option words) carrying `l4len` bytes. */
static uint32_t put_ipv4(uint8_t *b, uint8_t proto, uint32_t optwords, uint32_t l4len)
{
    uint32_t hl = 20 + optwords * 4;
    memset(b, 0, hl);
    b[0] = (uint8_t)(0x40 | (hl / 4));
    ofl_put_be16(b + 2, (uint16_t)(hl + l4len));
    ofl_put_be16(b + 4, 0x1234);
    b[8] = 64;
    b[9] = proto;
    ofl_put_be32(b + 12, 0x0A000001);
    ofl_put_be32(b + 16, 0xC0A80102);
    for (uint32_t i = 20; i < hl; i++) b[i] = 1;   /* NOP options */
    ofl_put_be16(b + 10, ofl_csum(b, hl));
    return hl;
}

static uint32_t put_udp(uint8_t *b, uint32_t paylen)
{
    ofl_put_be16(b, 5353);
    ofl_put_be16(b + 2, 53);
    ofl_put_be16(b + 4, (uint16_t)(8 + paylen));
    ofl_put_be16(b + 6, 0);
    for (uint32_t i = 0; i < paylen; i++) b[8 + i] = (uint8_t)i;
    return 8 + paylen;
}

static uint32_t put_tcp(uint8_t *b, uint32_t optwords, uint32_t paylen)
{
    uint32_t hl = 20 + optwords * 4;
    memset(b, 0, hl);
    ofl_put_be16(b, 40000);
    ofl_put_be16(b + 2, 443);
    b[12] = (uint8_t)((hl / 4) << 4);
    for (uint32_t i = 20; i < hl; i++) b[i] = 1;
    for (uint32_t i = 0; i < paylen; i++) b[hl + i] = (uint8_t)(i * 7);
    return hl + paylen;
}

/* IPv6 header; the payload length is filled by fix_ipv6. */
static uint32_t put_ipv6(uint8_t *b, uint8_t nh)
{
    memset(b, 0, 40);
    b[0] = 0x60;
    b[6] = nh;
    b[7] = 63;
    for (int i = 0; i < 16; i++) {
        b[8 + i] = (uint8_t)(0x20 + i);
        b[24 + i] = (uint8_t)(0x40 + i);
    }
    return 40;
}

static void fix_ipv6(uint8_t *ip6, uint32_t total_after)
{
    ofl_put_be16(ip6 + 4, (uint16_t)total_after);
}

/* An extension header of type-generic layout: next header, length in 8-byte
 * units minus one (or for AH 4-byte units minus two), zero body. */
static uint32_t put_ext(uint8_t *b, uint8_t type, uint8_t nh, uint32_t bytes)
{
    memset(b, 0, bytes);
    b[0] = nh;
    if (type == 51) b[1] = (uint8_t)(bytes / 4 - 2);
    else if (type != 44) b[1] = (uint8_t)(bytes / 8 - 1);
    return bytes;
}

/* A copy of `n` bytes on the heap, exactly `n` bytes long (ASan sees overreads). */
static uint8_t *exact(const uint8_t *p, uint32_t n)
{
    uint8_t *q = calloc(1, n ? n : 1);
    if (n) memcpy(q, p, n);
    return n ? q : q + 1;   /* zero bytes: a pointer one past a 1-byte block */
}

static void exact_free(uint8_t *q, uint32_t n)
{
    free(n ? q : q - 1);
}

/* The element chain: Ethernet, IPv4 (with checksum) or IPv6, then UDP/TCP. */
struct summary {
    uint16_t et;
    uint8_t proto;
    uint16_t sport, dport;
};

static int parse_all(const uint8_t *p, uint32_t len, struct summary *s)
{
    uint32_t l3;
    int rc = ofl_parse_eth(p, len, &s->et, &l3);
    if (rc < 0) return rc;
    uint32_t l4, end;
    uint8_t frag;
    if (s->et == OFL_ETHERTYPE_IPV4) {
        struct ofl_ipv4_info ip;
        if ((rc = ofl_parse_ipv4(p, len, l3, &ip)) < 0) return rc;
        if (!ofl_ipv4_csum_ok(p + l3, ip.hdr_len)) return OFL_ECSUM;
        l4 = l3 + ip.hdr_len;
        end = ip.end;
        frag = ip.frag;
        s->proto = ip.proto;
    } else if (s->et == OFL_ETHERTYPE_IPV6) {
        struct ofl_ipv6_info ip;
        if ((rc = ofl_parse_ipv6(p, len, l3, &ip)) < 0) return rc;
        l4 = ip.l4_off;
        end = ip.end;
        frag = ip.frag;
        s->proto = ip.proto;
    } else {
        return 0;
    }
    if (end > len) return -1;   /* the IP parsers promise an end within the frame */
    return ofl_parse_l4(p, end, l4, s->proto, frag, &s->sport, &s->dport);
}

/* Every proper prefix of a good packet fails with OFL_ETRUNC (none are padded). */
static void check_truncations(const char *what, const uint8_t *p, uint32_t len)
{
    int bad = 0;
    for (uint32_t n = 0; n < len; n++) {
        uint8_t *q = exact(p, n);
        struct summary s;
        int rc = parse_all(q, n, &s);
        if (rc != OFL_ETRUNC) {
            if (!bad) printf("  %s cut to %u bytes: %d (%s)\n", what, n, rc, ofl_strerror(rc));
            bad++;
        }
        exact_free(q, n);
    }
    CHECK(bad == 0, "%s: all %u truncations are OFL_ETRUNC", what, len);
}

/* ---- good packets ----------------------------------------------------------- */

static uint32_t build_v4(uint8_t *b, int ntags, uint8_t proto, uint32_t ipopt, uint32_t tcpopt)
{
    uint32_t l3 = put_eth(b, ntags, OFL_ETHERTYPE_IPV4);
    uint32_t l4len = proto == 17 ? 8 + 30 : 20 + tcpopt * 4 + 30;
    uint32_t hl = put_ipv4(b + l3, proto, ipopt, l4len);
    if (proto == 17) put_udp(b + l3 + hl, 30);
    else put_tcp(b + l3 + hl, tcpopt, 30);
    return l3 + hl + l4len;
}

static void test_good_ipv4(void)
{
    uint8_t b[256];
    for (int tags = 0; tags <= 2; tags++) {
        for (int proto = 6; proto <= 17; proto += 11) {
            for (uint32_t opt = 0; opt <= 10; opt += 5) {
                uint32_t len = build_v4(b, tags, (uint8_t)proto, opt, opt ? 3 : 0);
                struct summary s = {0};
                int rc = parse_all(b, len, &s);
                CHECK(rc == 0 && s.et == 0x0800 && s.proto == proto &&
                      s.sport == (proto == 17 ? 5353 : 40000) &&
                      s.dport == (proto == 17 ? 53 : 443),
                      "IPv4 %s, %d VLAN tags, %u option words parses (%d)",
                      proto == 17 ? "UDP" : "TCP", tags, opt, rc);
                char what[64];
                snprintf(what, sizeof what, "IPv4/%d tags/%d/%u opts", tags, proto, opt);
                check_truncations(what, b, len);
            }
        }
    }
    /* Fields and offsets. */
    uint32_t len = build_v4(b, 1, 17, 1, 0);
    uint16_t et;
    uint32_t l3;
    struct ofl_ipv4_info ip;
    CHECK(ofl_parse_eth(b, len, &et, &l3) == 0 && l3 == 18 && et == 0x0800, "VLAN l3_off 18");
    CHECK(ofl_parse_ipv4(b, len, l3, &ip) == 0 && ip.hdr_len == 24 && ip.ttl == 64 &&
          ip.proto == 17 && ip.src == 0x0A000001 && ip.dst == 0xC0A80102,
          "IPv4 fields in host order");
    /* Ethernet padding after the datagram is fine. */
    uint8_t pad[128] = {0};
    len = build_v4(pad, 0, 17, 0, 0);
    struct summary s;
    CHECK(parse_all(pad, len + 20, &s) == 0, "trailing Ethernet padding is accepted");
}

static uint32_t build_v6(uint8_t *b, int ntags, const uint8_t *exts, int next, uint8_t proto)
{
    uint32_t l3 = put_eth(b, ntags, OFL_ETHERTYPE_IPV6);
    uint32_t off = l3 + put_ipv6(b + l3, next ? exts[0] : proto);
    for (int i = 0; i < next; i++) {
        uint8_t nh = i + 1 < next ? exts[i + 1] : proto;
        uint32_t sz = exts[i] == 44 ? 8 : exts[i] == 51 ? 12 + 4 * (uint32_t)i : 8 + 8 * (uint32_t)i;
        off += put_ext(b + off, exts[i], nh, sz);
    }
    off += proto == 17 ? put_udp(b + off, 20) : put_tcp(b + off, 2, 20);
    fix_ipv6(b + l3, off - l3 - 40);
    return off;
}

static void test_good_ipv6(void)
{
    uint8_t b[512];
    static const uint8_t chains[][6] = {
        {0}, {0, 60}, {0, 43, 44, 60}, {51}, {60, 43, 44, 51, 60}, {44}, {0, 43, 60, 44, 51, 60},
    };
    static const int lens[] = {0, 2, 4, 1, 5, 1, 6};
    for (int c = 0; c < 7; c++) {
        for (int tags = 0; tags <= 2; tags += 2) {
            uint32_t len = build_v6(b, tags, chains[c], lens[c], c % 2 ? 6 : 17);
            struct summary s = {0};
            int rc = parse_all(b, len, &s);
            CHECK(rc == 0 && s.et == 0x86DD && s.proto == (c % 2 ? 6 : 17),
                  "IPv6 with %d extension headers, %d tags parses (%d)", lens[c], tags, rc);
            uint32_t l3 = tags ? 22 : 14;
            struct ofl_ipv6_info ip;
            ofl_parse_ipv6(b, len, l3, &ip);
            uint32_t l4len = c % 2 ? 28 + 20 : 8 + 20;
            CHECK(ip.l4_off == len - l4len && ip.hop_limit == 63 && ip.src[0] == 0x20 &&
                  ip.dst[15] == 0x4F, "IPv6 chain %d: l4_off %u, addresses", c, ip.l4_off);
            char what[64];
            snprintf(what, sizeof what, "IPv6 chain %d, %d tags", c, tags);
            check_truncations(what, b, len);
        }
    }
    /* No next header: the walk ends with protocol 59. */
    uint32_t l3 = put_eth(b, 0, OFL_ETHERTYPE_IPV6);
    put_ipv6(b + l3, 59);
    struct ofl_ipv6_info ip;
    CHECK(ofl_parse_ipv6(b, l3 + 40, l3, &ip) == 0 && ip.proto == 59 && ip.l4_off == l3 + 40,
          "IPv6 with no next header");
}

/* ---- bad packets -------------------------------------------------------------- */

static void expect(const char *what, uint8_t *b, uint32_t len, int want)
{
    uint8_t *q = exact(b, len);
    struct summary s;
    int rc = parse_all(q, len, &s);
    exact_free(q, len);
    CHECK(rc == want, "%s: %d (%s), want %s", what, rc, ofl_strerror(rc), ofl_strerror(want));
}

static void test_bad_eth(void)
{
    uint8_t b[64] = {0};
    uint32_t n = put_eth(b, 0, OFL_ETHERTYPE_VLAN);
    expect("VLAN tag cut after the ethertype", b, n, OFL_ETRUNC);
    expect("VLAN tag cut in the middle", b, n + 3, OFL_ETRUNC);
    n = put_eth(b, 2, OFL_ETHERTYPE_VLAN);   /* a third tag */
    expect("three VLAN tags", b, n + 30, OFL_EUNSUPP);
    n = put_eth(b, 0, 0x0806);
    uint16_t et = 0;
    uint32_t l3 = 0;
    CHECK(ofl_parse_eth(b, n + 28, &et, &l3) == 0 && et == 0x0806 && l3 == 14, "ARP is other");
    n = put_eth(b, 0, 0x0040);
    CHECK(ofl_parse_eth(b, n + 46, &et, &l3) == 0 && et == 0x0040, "802.3 length passes");
}

static void test_bad_ipv4(void)
{
    uint8_t b[256];
    uint32_t len = build_v4(b, 0, 17, 0, 0);
    uint8_t *ip = b + 14;
    uint8_t save[24];
    memcpy(save, ip, 24);
#define RESET() memcpy(ip, save, 24)
#define RESUM() (ofl_put_be16(ip + 10, 0), ofl_put_be16(ip + 10, ofl_csum(ip, 20)))
    ip[0] = 0x44; RESUM();
    expect("IHL 4", b, len, OFL_EBADHDR); RESET();
    ip[0] = 0x40; RESUM();
    expect("IHL 0", b, len, OFL_EBADHDR); RESET();
    ip[0] = 0x65; RESUM();
    expect("version 6 behind ethertype IPv4", b, len, OFL_EVERSION); RESET();
    ip[0] = 0x4F; RESUM();
    expect("IHL 15 beyond the frame", b, 14 + 40, OFL_ETRUNC); RESET();
    ofl_put_be16(ip + 2, 19); RESUM();
    expect("total length below the header", b, len, OFL_EBADHDR); RESET();
    ofl_put_be16(ip + 2, (uint16_t)(len - 14 + 1)); RESUM();
    expect("total length one past the frame", b, len, OFL_ETRUNC); RESET();
    ofl_put_be16(ip + 2, 0xFFFF); RESUM();
    expect("total length 65535", b, len, OFL_ETRUNC); RESET();
    ip[10] ^= 1;
    expect("bad header checksum", b, len, OFL_ECSUM); RESET();
    ip[9] = 6; RESUM();   /* a 38-byte transport "TCP" header: doff from UDP payload */
    ip[20 + 12] = 0x40;
    expect("TCP data offset 4", b, len, OFL_EBADHDR);
    ip[20 + 12] = 0xF0;
    expect("TCP data offset 15 beyond the packet", b, len, OFL_ELENGTH); RESET();
    ofl_put_be16(ip + 20 + 4, 7);
    expect("UDP length 7", b, len, OFL_EBADHDR); RESET();
    ofl_put_be16(ip + 2, 20 + 4); RESUM();
    expect("UDP header cut by the frame", b, 14 + 24, OFL_ETRUNC); RESET();
#undef RESET
#undef RESUM
    struct ofl_ipv4_info info;
    CHECK(ofl_parse_ipv4(b, len, len + 5, &info) == OFL_ETRUNC, "offset past the end");
    CHECK(ofl_parse_ipv4(b, len, 0xFFFFFFFFu, &info) == OFL_ETRUNC, "offset UINT32_MAX");
    uint16_t sp, dp;
    CHECK(ofl_parse_udp(b, len, 0xFFFFFFFCu, &sp, &dp) == OFL_ETRUNC, "UDP offset overflow");
    CHECK(ofl_parse_tcp(b, len, 0xFFFFFFF0u, &sp, &dp) == OFL_ETRUNC, "TCP offset overflow");
    CHECK(ofl_parse_tcp(b, 10, 0, &sp, &dp) == OFL_ETRUNC, "TCP 10 bytes");
}

/* The transport header is read within the IP payload, not the frame: Ethernet padding
 * after the IP packet holds no header; a UDP length or TCP data offset past the payload
 * is OFL_ELENGTH, except a first fragment's UDP length; later fragments hold no header. */
static void test_l4_in_ip_payload(void)
{
    uint8_t b[256];
    uint16_t sp, dp;
    struct ofl_ipv4_info v4;
    uint32_t len = build_v4(b, 0, 17, 0, 0);   /* 14 + 20 + 8 + 30, UDP length 38 */
    uint8_t *ip = b + 14;
    memset(b + len, 0, 10);   /* 10 bytes of Ethernet padding after the IP packet */
    CHECK(ofl_parse_ipv4(b, len + 10, 14, &v4) == 0 && v4.end == len &&
          v4.frag == OFL_FRAG_NONE, "IPv4 end before the padding: %u", v4.end);
    CHECK(ofl_parse_l4(b, v4.end, 34, 17, v4.frag, &sp, &dp) == 0 && sp == 5353 && dp == 53,
          "UDP within the payload");
    ofl_put_be16(ip + 20 + 4, 39);
    CHECK(ofl_parse_udp(b, len + 10, 34, &sp, &dp) == 0, "(the frame-bounded parser passes it)");
    CHECK(ofl_parse_l4(b, v4.end, 34, 17, OFL_FRAG_NONE, &sp, &dp) == OFL_ELENGTH,
          "UDP length one past the IP payload");
    ofl_put_be16(ip + 6, 0x2000);   /* more fragments, offset 0: a first fragment */
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, 20));
    CHECK(ofl_parse_ipv4(b, len, 14, &v4) == 0 && v4.frag == OFL_FRAG_FIRST, "first fragment");
    sp = dp = 0;
    CHECK(ofl_parse_l4(b, v4.end, 34, 17, v4.frag, &sp, &dp) == 0 && sp == 5353,
          "a first fragment's UDP length may cover the whole datagram");
    ofl_put_be16(ip + 6, 0x0004);   /* offset 32 bytes, the last fragment */
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, 20));
    ofl_put_be16(ip + 20 + 4, 3);   /* would be a bad UDP length, were it a header */
    CHECK(ofl_parse_ipv4(b, len, 14, &v4) == 0 && v4.frag == OFL_FRAG_LATER, "later fragment");
    sp = dp = 7;
    CHECK(ofl_parse_l4(b, v4.end, 34, 17, v4.frag, &sp, &dp) == 0 && sp == 0 && dp == 0,
          "a later fragment holds no transport header");
    /* UDP header half in the padding: the IP total length ends after 4 of its bytes. */
    len = build_v4(b, 0, 17, 0, 0);
    ofl_put_be16(ip + 2, 20 + 4);
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, 20));
    CHECK(ofl_parse_ipv4(b, len, 14, &v4) == 0 && v4.end == 14 + 24, "end at 38");
    CHECK(ofl_parse_l4(b, v4.end, 34, 17, v4.frag, &sp, &dp) == OFL_ETRUNC,
          "UDP header cut by the IP payload");
    /* TCP whose options run into the padding. */
    len = build_v4(b, 0, 6, 0, 1);   /* 24-byte TCP header */
    ofl_put_be16(ip + 2, 20 + 20);
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, 20));
    CHECK(ofl_parse_ipv4(b, len, 14, &v4) == 0, "TCP packet");
    CHECK(ofl_parse_l4(b, v4.end, 34, 6, v4.frag, &sp, &dp) == OFL_ELENGTH,
          "TCP options past the IP payload");
    CHECK(ofl_parse_l4(b, v4.end, v4.end + 1, 6, 0, &sp, &dp) == OFL_ETRUNC, "offset past end");
    CHECK(ofl_parse_l4(b, v4.end, 34, 1, 0, &sp, &dp) == 0 && sp == 0, "ICMP: no ports");
    /* IPv6: a fragment header with an offset ends the walk; M alone marks the first. */
    static const uint8_t fr[] = {44};
    len = build_v6(b, 0, fr, 1, 17);
    struct ofl_ipv6_info v6;
    CHECK(ofl_parse_ipv6(b, len, 14, &v6) == 0 && v6.frag == OFL_FRAG_NONE &&
          v6.end == len, "IPv6 fragment header, offset 0, no more: not a fragment");
    b[14 + 40 + 3] = 1;   /* M */
    CHECK(ofl_parse_ipv6(b, len, 14, &v6) == 0 && v6.frag == OFL_FRAG_FIRST, "IPv6 first");
    b[14 + 40 + 3] = 8;   /* offset 1 (8 bytes) */
    CHECK(ofl_parse_ipv6(b, len, 14, &v6) == 0 && v6.frag == OFL_FRAG_LATER &&
          v6.l4_off == 14 + 48 && v6.proto == 17, "IPv6 later fragment");
}

static void test_bad_ipv6(void)
{
    uint8_t b[512];
    static const uint8_t ch[] = {0, 43, 60};
    uint32_t len = build_v6(b, 0, ch, 3, 17);
    uint8_t *ip = b + 14;
    struct ofl_ipv6_info info;
    ip[0] = 0x40;
    expect("version 4 behind ethertype IPv6", b, len, OFL_EVERSION);
    ip[0] = 0x60;
    ofl_put_be16(ip + 4, (uint16_t)(len - 14 - 40 + 1));
    expect("payload length one past the frame", b, len, OFL_ETRUNC);
    /* The extension headers run past the payload length (the frame is longer). */
    ofl_put_be16(ip + 4, 8 + 16);
    expect("extension chain past the payload length", b, len, OFL_ETRUNC);
    ofl_put_be16(ip + 4, (uint16_t)(len - 14 - 40));
    ip[40 + 1] = 200;   /* hop-by-hop says 1608 bytes */
    expect("extension header longer than the packet", b, len, OFL_ETRUNC);
    ip[40 + 1] = 0;
    ip[40] = 0;         /* hop-by-hop again after the first */
    expect("hop-by-hop not first", b, len, OFL_EBADHDR);

    /* Nine destination-options headers: past the limit. */
    uint32_t off = 14 + put_ipv6(ip, 60);
    for (int i = 0; i < 9; i++) off += put_ext(b + off, 60, i == 8 ? 17 : 60, 8);
    off += put_udp(b + off, 4);
    fix_ipv6(ip, off - 14 - 40);
    CHECK(ofl_parse_ipv6(b, off, 14, &info) == OFL_EUNSUPP, "nine extension headers");
    /* Eight are fine. */
    off = 14 + put_ipv6(ip, 60);
    for (int i = 0; i < 8; i++) off += put_ext(b + off, 60, i == 7 ? 17 : 60, 8);
    off += put_udp(b + off, 4);
    fix_ipv6(ip, off - 14 - 40);
    CHECK(ofl_parse_ipv6(b, off, 14, &info) == 0 && info.proto == 17 &&
          info.l4_off == 14 + 40 + 64, "eight extension headers");
    CHECK(ofl_parse_ipv6(b, off, off, &info) == OFL_ETRUNC, "IPv6 offset at the end");
}

/* ---- checksums ------------------------------------------------------------------ */

static void test_csum(void)
{
    static const uint8_t hdr[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                    0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    uint8_t h[20];
    memcpy(h, hdr, 20);
    CHECK(ofl_csum(h, 20) == 0 && ofl_ipv4_csum_ok(h, 20), "known header verifies");
    h[10] = h[11] = 0;
    CHECK(ofl_csum(h, 20) == 0xb861, "known header checksum 0xb861: %#x", ofl_csum(h, 20));
    CHECK(!ofl_ipv4_csum_ok(h, 20), "zeroed checksum fails");
    CHECK(!ofl_ipv4_csum_ok(hdr, 19) && !ofl_ipv4_csum_ok(hdr, 16), "bad header lengths fail");
    /* with options, up to IHL 15 (60 bytes): the same verdict as the Internet checksum */
    uint8_t opt[64];
    for (uint32_t n = 20; n <= 64; n += 4) {
        for (uint32_t k = 0; k < n; k++) opt[k] = (uint8_t)(k * 37u + n);
        opt[10] = opt[11] = 0;
        ofl_put_be16(opt + 10, ofl_csum(opt, n));
        CHECK(ofl_ipv4_csum_ok(opt, n) == (n <= 60), "%u-byte header: %s", n,
              n <= 60 ? "its checksum verifies" : "longer than IHL allows: refused");
        opt[n - 1] ^= 1;
        CHECK(!ofl_ipv4_csum_ok(opt, n), "%u-byte header with a bit flipped fails", n);
    }

    uint8_t buf[1503];
    uint64_t x = 12345;
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
        size_t n = (size_t)(t % 1503);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = t % 5 == 0 ? 0xFF : (uint8_t)(x >> 56);
        }
        uint8_t *q = exact(buf, (uint32_t)n);
        if (ofl_csum(q, n) != ref_csum(buf, n)) bad++;
        exact_free(q, (uint32_t)n);
    }
    CHECK(bad == 0, "ofl_csum matches the reference on 2000 buffers (%d bad)", bad);
    uint64_t sum = ofl_csum_add(0, buf, 40);
    sum = ofl_csum_add(sum, buf + 40, 101);
    uint16_t chained = (uint16_t)~ofl_csum_fold(sum);
    CHECK(chained == ref_csum(buf, 141), "chained sums");
}

/* The 20-byte header's check (words in the CPU's byte order) against the reference
 * on random headers: half of them given a correct checksum, some stored as 0xFFFF
 * (the other zero), bytes biased to 0xFF and 0x00 so that the sums carry and fold
 * to every edge. */
static void test_csum_ok_20(void)
{
    uint8_t h[20];
    uint64_t x = 99, n = 0, bad = 0, valid = 0, neg_zero = 0;
    for (int t = 0; t < 400000; t++) {
        for (int i = 0; i < 20; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(x >> 56);
            h[i] = t % 4 == 1 ? 0xFF : t % 4 == 2 ? (r & 1 ? 0xFF : 0x00) : (uint8_t)r;
        }
        if (t % 4 == 0) {  /* checksum 0xFFFF: the identification made to fit it */
            h[4] = h[5] = 0;
            h[10] = h[11] = 0xFF;
            ofl_put_be16(h + 4, ref_csum(h, 20));
            neg_zero++;
        } else if (t % 2 == 0) {
            h[10] = h[11] = 0;
            ofl_put_be16(h + 10, ref_csum(h, 20));
        }
        int want = ref_csum(h, 20) == 0;
        bad += ofl_ipv4_csum_ok(h, 20) != want;
        valid += (uint64_t)want;
        n++;
    }
    memset(h, 0, sizeof h);
    bad += ofl_ipv4_csum_ok(h, 20) != (ref_csum(h, 20) == 0);  /* sum 0: not valid */
    memset(h, 0xFF, sizeof h);
    bad += ofl_ipv4_csum_ok(h, 20) != (ref_csum(h, 20) == 0);
    CHECK(bad == 0 && valid > n / 3 && neg_zero > 0,
          "20-byte header check equals the reference on %llu headers (%llu differ, %llu "
          "valid, %llu stored as 0xFFFF)", (unsigned long long)n, (unsigned long long)bad,
          (unsigned long long)valid, (unsigned long long)neg_zero);
}

/* RFC 1624 for any word: a random 16-bit word of a random header changed to a random
 * value (0x0000 and 0xFFFF often), the checksum updated, then compared with a full
 * recomputation. */
static void test_csum_update_any_word(void)
{
    uint8_t h[20];
    uint64_t x = 7, bad = 0, n = 0;
    for (int t = 0; t < 300000; t++) {
        for (int i = 0; i < 20; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            h[i] = t % 3 == 0 ? 0xFF : (uint8_t)(x >> 56);
        }
        h[10] = h[11] = 0;
        ofl_put_be16(h + 10, ofl_csum(h, 20));
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned w = (unsigned)(x >> 60) % 10;
        if (w == 5) w = 4;  /* not the checksum itself */
        uint16_t old = ofl_get_be16(h + 2 * w);
        uint16_t new_ = t % 5 == 0 ? 0xFFFF : t % 5 == 1 ? 0 : (uint16_t)(x >> 20);
        ofl_put_be16(h + 2 * w, new_);
        uint16_t got = ofl_csum_update16(ofl_get_be16(h + 10), old, new_);
        h[10] = h[11] = 0;
        uint16_t want = ofl_csum(h, 20);
        /* either zero is right where the sum is all ones (RFC 1624 section 3) */
        bad += got != want && !(got == 0xFFFF && want == 0) && !(got == 0 && want == 0xFFFF);
        n++;
    }
    CHECK(bad == 0, "RFC 1624 update of any word equals recomputation in %llu cases (%llu "
          "differ)", (unsigned long long)n, (unsigned long long)bad);
}

/* RFC 1624: every TTL (1..255) with every identification value, so the
 * checksum takes every value including the 0x0000 result; compared with a full
 * recomputation. */
static void test_dec_ttl(void)
{
    uint8_t h[20] = {0x45, 0x00, 0x00, 0x54, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01,
                     0x00, 0x00, 0x0a, 0x00, 0x00, 0x01, 0xc0, 0xa8, 0x01, 0x02};
    uint64_t mismatch = 0, invalid = 0, zero_results = 0, ffff_results = 0, n = 0;
    for (unsigned ttl = 1; ttl <= 255; ttl++) {
        for (unsigned id = 0; id <= 0xFFFF; id++) {
            h[8] = (uint8_t)ttl;
            ofl_put_be16(h + 4, (uint16_t)id);
            h[10] = h[11] = 0;
            ofl_put_be16(h + 10, ofl_csum(h, 20));
            ofl_ipv4_dec_ttl(h);
            uint16_t got = ofl_get_be16(h + 10);
            h[10] = h[11] = 0;
            uint16_t want = ofl_csum(h, 20);
            ofl_put_be16(h + 10, got);
            mismatch += got != want || h[8] != (uint8_t)(ttl - 1);
            invalid += !ofl_ipv4_csum_ok(h, 20);
            zero_results += got == 0;
            ffff_results += got == 0xFFFF;
            n++;
        }
    }
    CHECK(mismatch == 0 && invalid == 0,
          "RFC 1624 update equals recomputation in %llu cases (%llu differ, %llu invalid)",
          (unsigned long long)n, (unsigned long long)mismatch, (unsigned long long)invalid);
    CHECK(zero_results > 0, "0x0000 results covered: %llu", (unsigned long long)zero_results);
    CHECK(ffff_results == 0, "0xFFFF never results from a computed checksum");

    /* A header whose checksum is stored as 0xFFFF (the other zero) stays valid. */
    uint64_t neg_zero = 0, neg_bad = 0;
    for (unsigned ttl = 1; ttl <= 255; ttl++) {
        for (unsigned id = 0; id <= 0xFFFF; id++) {
            h[8] = (uint8_t)ttl;
            ofl_put_be16(h + 4, (uint16_t)id);
            h[10] = h[11] = 0;
            if (ofl_csum(h, 20) != 0) continue;
            h[10] = h[11] = 0xFF;
            if (!ofl_ipv4_csum_ok(h, 20)) neg_bad++;
            ofl_ipv4_dec_ttl(h);
            neg_bad += !ofl_ipv4_csum_ok(h, 20);
            neg_zero++;
        }
    }
    CHECK(neg_zero > 0 && neg_bad == 0, "checksum stored as 0xFFFF: %llu headers, %llu bad",
          (unsigned long long)neg_zero, (unsigned long long)neg_bad);

    /* TTL 0 wraps with a valid checksum (elements drop TTL <= 1 before). */
    h[8] = 0;
    h[10] = h[11] = 0;
    ofl_put_be16(h + 10, ofl_csum(h, 20));
    ofl_ipv4_dec_ttl(h);
    CHECK(h[8] == 255 && ofl_ipv4_csum_ok(h, 20), "TTL 0 wraps to 255, checksum valid");
    /* With options the update is the same. */
    uint8_t b[128];
    uint32_t len = build_v4(b, 0, 6, 3, 0);
    ofl_ipv4_dec_ttl(b + 14);
    struct ofl_ipv4_info ip;
    CHECK(ofl_parse_ipv4(b, len, 14, &ip) == 0 && ip.ttl == 63 &&
          ofl_ipv4_csum_ok(b + 14, ip.hdr_len), "TTL decrement with IP options");
}

int main(void)
{
    test_good_ipv4();
    test_good_ipv6();
    test_bad_eth();
    test_bad_ipv4();
    test_bad_ipv6();
    test_l4_in_ip_payload();
    test_csum();
    test_csum_ok_20();
    test_csum_update_any_word();
    test_dec_ttl();
    return CHECK_DONE();
}
