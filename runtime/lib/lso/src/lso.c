/* Large send offload: descriptors checked, sends cut into packets by message kind. */
#include "offlow/lso.h"

#include <string.h>

#include "offlow/pkt.h"

#define TCP_FIN 0x01u
#define TCP_PSH 0x08u
#define IP4_MF 0x2000u
#define IP4_DF 0x4000u
#define IP6_FRAG_HDR 44u
#define FRAG6_LEN 8u

const char *ofl_lso_reason(int err)
{
    switch (err) {
    case OFL_LSO_EDESC: return "bad_desc";
    case OFL_LSO_ETEMPLATE: return "bad_template";
    case OFL_LSO_EBUFFER: return "beyond_buffer";
    case OFL_LSO_EMSS: return "bad_mss";
    case OFL_LSO_ELENGTH: return "too_long";
    default: return "?";
    }
}

const char *ofl_lso_kind_name(unsigned kind)
{
    static const char *const names[OFL_LSO_KINDS] = { "ssm", "bom", "com", "eom", "zero" };
    return kind < OFL_LSO_KINDS ? names[kind] : "?";
}

/* ---- sums ------------------------------------------------------------------------- */

/* Two 32-bit halves of a little-endian 64-bit word added to `s`: over the words of a
 * buffer this folds to the sum of its little-endian 16-bit words (2^16 = 1 mod 0xFFFF),
 * which byte-swapped is the sum of its big-endian words (RFC 1071, byte order). */
static inline uint64_t add64(uint64_t s, uint64_t w)
{
    return s + (w & 0xFFFFFFFFu) + (w >> 32);
}

static inline uint16_t fold_swap(uint64_t s)
{
    return __builtin_bswap16(ofl_csum_fold(s));
}

/* The bytes after the last whole 16-byte block: up to 15, summed as little-endian words
 * (a last odd byte is the low byte of its word). */
static uint64_t sum_tail(const uint8_t *p, uint32_t n)
{
    uint64_t s = 0;
    if (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        s = add64(s, w);
        p += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        s += w;
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        s += w;
        p += 2;
        n -= 2;
    }
    if (n) s += p[0];
    return s;
}

uint16_t ofl_lso_sum(const uint8_t *p, uint32_t n)
{
    uint64_t s0 = 0, s1 = 0;
    for (; n >= 16; p += 16, n -= 16) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        s0 = add64(s0, a);
        s1 = add64(s1, b);
    }
    return fold_swap(s0 + s1 + sum_tail(p, n));
}

uint16_t ofl_lso_copy_sum(uint8_t *dst, const uint8_t *p, uint32_t n)
{
    uint64_t s0 = 0, s1 = 0;
    for (; n >= 16; p += 16, dst += 16, n -= 16) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + 8, &b, 8);
        s0 = add64(s0, a);
        s1 = add64(s1, b);
    }
    memcpy(dst, p, n);
    return fold_swap(s0 + s1 + sum_tail(p, n));
}

/* ---- templates ----------------------------------------------------------------------- */

struct tmpl {
    uint16_t l3_off, l4_off, ip_hl, l4_hl;
    uint8_t v6, tcp, df;
};

/* The headers at `h` (`avail` bytes): Ethernet with up to two VLAN tags, IPv4 (options,
 * no fragment) or IPv6 (no extension header), TCP or UDP whole within `avail`. */
static int parse_tmpl(const uint8_t *h, uint32_t avail, struct tmpl *t)
{
    uint16_t et;
    uint32_t l3;
    if (ofl_parse_eth(h, avail, &et, &l3) < 0) return OFL_LSO_ETEMPLATE;
    uint8_t proto;
    memset(t, 0, sizeof *t);
    if (et == OFL_ETHERTYPE_IPV4) {
        if (avail - l3 < OFL_IPV4_HLEN || h[l3] >> 4 != 4) return OFL_LSO_ETEMPLATE;
        uint32_t hl = (uint32_t)(h[l3] & 0x0F) * 4u;
        uint16_t frag = ofl_get_be16(h + l3 + 6);
        if (hl < OFL_IPV4_HLEN || hl > avail - l3 || (frag & (IP4_MF | 0x1FFFu)))
            return OFL_LSO_ETEMPLATE;
        t->ip_hl = (uint16_t)hl;
        t->df = (frag & IP4_DF) != 0;
        proto = h[l3 + 9];
    } else if (et == OFL_ETHERTYPE_IPV6) {
        if (avail - l3 < OFL_IPV6_HLEN || h[l3] >> 4 != 6) return OFL_LSO_ETEMPLATE;
        t->ip_hl = OFL_IPV6_HLEN;
        t->v6 = 1;
        proto = h[l3 + 6];
    } else {
        return OFL_LSO_ETEMPLATE;
    }
    uint32_t l4 = l3 + t->ip_hl;
    if (proto == 6) {
        if (avail - l4 < OFL_TCP_HLEN) return OFL_LSO_ETEMPLATE;
        uint32_t thl = (uint32_t)(h[l4 + 12] >> 4) * 4u;
        if (thl < OFL_TCP_HLEN || thl > avail - l4) return OFL_LSO_ETEMPLATE;
        t->l4_hl = (uint16_t)thl;
        t->tcp = 1;
    } else if (proto == 17) {
        if (avail - l4 < OFL_UDP_HLEN) return OFL_LSO_ETEMPLATE;
        t->l4_hl = OFL_UDP_HLEN;
    } else {
        return OFL_LSO_ETEMPLATE;
    }
    t->l3_off = (uint16_t)l3;
    t->l4_off = (uint16_t)l4;
    return 0;
}

int ofl_lso_split(const uint8_t *frame, uint32_t flen, uint32_t *hdr_len, uint32_t *len)
{
    struct tmpl t;
    if (parse_tmpl(frame, flen, &t) < 0) return OFL_LSO_ETEMPLATE;
    uint32_t hl = (uint32_t)t.l4_off + t.l4_hl;
    if (hl > OFL_LSO_HDR_MAX) return OFL_LSO_ETEMPLATE;
    /* the IP packet's end: its length field, within the frame, past the headers */
    uint32_t end = t.v6 ? t.l3_off + OFL_IPV6_HLEN + (uint32_t)ofl_get_be16(frame + t.l3_off + 4)
                        : t.l3_off + (uint32_t)ofl_get_be16(frame + t.l3_off + 2);
    if (end > flen || end < hl) return OFL_LSO_ETEMPLATE;
    *hdr_len = hl;
    *len = end - hl;
    return 0;
}

int ofl_lso_check_template(const uint8_t *tmpl, uint32_t len)
{
    struct tmpl t;
    if (len > OFL_LSO_HDR_MAX || parse_tmpl(tmpl, len, &t) < 0 ||
        (uint32_t)t.l4_off + t.l4_hl != len)
        return OFL_LSO_ETEMPLATE;
    return 0;
}

/* Datagram bytes per UDP fragment for `mss`: (mss + 8) rounded down to 8. */
static inline uint32_t udp_unit(uint32_t mss)
{
    return (mss + OFL_UDP_HLEN) & ~7u;
}

uint32_t ofl_lso_mss_for(const uint8_t *tmpl, uint32_t hdr_len, uint32_t mtu)
{
    struct tmpl t;
    if (ofl_lso_check_template(tmpl, hdr_len) < 0) return 0;
    parse_tmpl(tmpl, hdr_len, &t);
    uint32_t room = t.ip_hl + (t.tcp ? t.l4_hl : (t.v6 ? FRAG6_LEN : 0u));
    if (mtu <= room) return 0;
    if (t.tcp) return mtu - room > 0xFFFFu ? 0xFFFFu : mtu - room;
    uint32_t unit = (mtu - room) & ~7u;
    if (unit <= OFL_UDP_HLEN) return 0;
    return unit - OFL_UDP_HLEN > 0xFFF8u ? 0xFFF8u : unit - OFL_UDP_HLEN;
}

/* ---- starting a send ------------------------------------------------------------------ */

static inline uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* The IPv4 header checksum of the working header, or 0 when offloaded. */
static void ip4_csum(struct ofl_lso_cut *c)
{
    uint8_t *ip = c->hdr + c->l3_off;
    ip[10] = ip[11] = 0;
    if (!(c->flags & OFL_LSO_CSUM_OFFLOAD)) ofl_put_be16(ip + 10, ofl_csum(ip, c->ip_hl));
}

/* Word `at` of the working IPv4 header becomes `v`: its checksum follows (RFC 1624). */
static void ip4_update(struct ofl_lso_cut *c, uint32_t at, uint16_t v)
{
    uint8_t *ip = c->hdr + c->l3_off;
    uint16_t old = ofl_get_be16(ip + at);
    ofl_put_be16(ip + at, v);
    if (!(c->flags & OFL_LSO_CSUM_OFFLOAD))
        ofl_put_be16(ip + 10, ofl_csum_update16(ofl_get_be16(ip + 10), old, v));
}

/* The IP packet of the working header is `iplen` bytes (IPv6: its payload length). */
static void set_ip_len(struct ofl_lso_cut *c, uint32_t iplen)
{
    uint8_t *ip = c->hdr + c->l3_off;
    if (c->v6) ofl_put_be16(ip + 4, (uint16_t)(iplen - OFL_IPV6_HLEN));
    else ofl_put_be16(ip + 2, (uint16_t)iplen);
}

int ofl_lso_begin(struct ofl_lso_cut *c, const uint8_t *desc, uint32_t dlen, uint8_t *buf,
                  uint64_t buf_len, const struct ofl_lso_limits *lim)
{
    memset(c, 0, offsetof(struct ofl_lso_cut, hdr));
    if (dlen < OFL_LSO_DESC_FIXED) return OFL_LSO_EDESC;
    uint32_t off = get_le32(desc), len = get_le32(desc + 4);
    uint16_t mss = get_le16(desc + 8), flags = get_le16(desc + 10);
    uint16_t hlen = get_le16(desc + 12), rsvd = get_le16(desc + 14);
    c->frag_id = get_le32(desc + 16);
    c->tag = get_le32(desc + 20);
    if (hlen > OFL_LSO_HDR_MAX || dlen - OFL_LSO_DESC_FIXED < hlen || rsvd ||
        (flags & ~OFL_LSO_FLAGS_KNOWN))
        return OFL_LSO_EDESC;
    const uint8_t *h = desc + OFL_LSO_DESC_FIXED;
    struct tmpl t;
    if (parse_tmpl(h, hlen, &t) < 0 || (uint32_t)t.l4_off + t.l4_hl != hlen)
        return OFL_LSO_ETEMPLATE;
    if ((uint64_t)off + len > buf_len ||
        ((flags & OFL_LSO_HEADROOM) && off < OFL_LSO_HEADROOM_BYTES))
        return OFL_LSO_EBUFFER;
    if (t.tcp ? len > OFL_LSO_SEND_MAX
              : OFL_UDP_HLEN + len > 0xFFFFu - (t.v6 ? 0u : t.ip_hl))
        return OFL_LSO_ELENGTH;
    if (!mss) return OFL_LSO_EMSS;
    uint32_t unit = t.tcp ? mss : udp_unit(mss);
    uint32_t biggest = t.ip_hl + (t.tcp ? t.l4_hl + unit : (t.v6 ? FRAG6_LEN : 0u) + unit);
    if (biggest > lim->mtu || t.l3_off + biggest > lim->frame_max) return OFL_LSO_EMSS;
    uint32_t data = t.tcp ? len : OFL_UDP_HLEN + len;   /* bytes cut into units */
    uint32_t n = data <= unit ? 1u : (data + unit - 1) / unit;
    if (!t.tcp && n > 1 && t.df) return OFL_LSO_ETEMPLATE;

    c->payload = buf + off;
    c->len = len;
    c->unit = unit;
    c->npkts = n;
    c->mss = mss;
    c->flags = flags;
    c->l3_off = t.l3_off;
    c->l4_off = t.l4_off;
    c->hdr_len = hlen;
    c->ip_hl = t.ip_hl;
    c->l4_hl = t.l4_hl;
    c->v6 = t.v6;
    c->tcp = t.tcp;
    c->frag = !t.tcp && n > 1;
    c->udp_off = t.l4_off;
    memcpy(c->hdr, h, hlen);
    const uint8_t *ip = c->hdr + t.l3_off;
    uint64_t ph = t.v6 ? ofl_csum_add(0, ip + 8, 32) : ofl_csum_add(0, ip + 12, 8);
    c->ph = ph + (t.tcp ? 6u : 17u);
    if (t.tcp) {
        const uint8_t *tcp = c->hdr + t.l4_off;
        c->seq = ofl_get_be32(tcp + 4);
        c->tcp_flags = tcp[13];
    } else {
        if (c->frag && t.v6) {  /* a fragment header between the IPv6 and UDP headers */
            uint8_t *fh = c->hdr + t.l4_off;
            memmove(fh + FRAG6_LEN, fh, OFL_UDP_HLEN);
            fh[0] = 17;
            fh[1] = 0;
            ofl_put_be16(fh + 2, 0);
            ofl_put_be32(fh + 4, c->frag_id);
            c->hdr[t.l3_off + 6] = IP6_FRAG_HDR;
            c->udp_off = (uint16_t)(t.l4_off + FRAG6_LEN);
        }
        uint8_t *udp = c->hdr + c->udp_off;
        ofl_put_be16(udp + 4, (uint16_t)(OFL_UDP_HLEN + len));
        ofl_put_be16(udp + 6, 0);
        if (flags & OFL_LSO_CSUM_OFFLOAD)
            ofl_put_be16(udp + 6, ofl_csum_fold(c->ph + OFL_UDP_HLEN + len));
    }
    if (!t.v6) c->ip_id = ofl_get_be16(ip + 4);
    return 0;
}

/* ---- the packets ---------------------------------------------------------------------- */

/* Where packet headers of `hl` bytes go for a packet whose payload starts at payload
 * byte `pos`: `out`, or in place just before that payload in the send buffer. */
static inline uint8_t *frame_at(struct ofl_lso_cut *c, uint8_t *out, uint32_t pos, uint32_t hl,
                                int mode)
{
    out = mode == OFL_LSO_IN_PLACE ? c->payload + pos - hl : out;
    c->frame = out;
    return out;
}

/* Move the next `n` payload bytes of the send, from `pos`, to `at` in `out`: copied by
 * the core (summed on the way when `sum` is not NULL), recorded for the caller's DMA, or
 * already there (in place: summed when asked). */
static void payload(struct ofl_lso_cut *c, uint8_t *out, uint32_t at, uint32_t pos, uint32_t n,
                    int mode, uint16_t *sum)
{
    c->slice_src = c->payload + pos;
    c->slice_dst = at;
    c->slice_len = n;
    c->moved = (uint8_t)mode;
    if (mode == OFL_LSO_BY_DMA) return;
    if (mode == OFL_LSO_IN_PLACE) {
        if (sum) *sum = ofl_lso_sum(c->slice_src, n);
        return;
    }
    if (sum) *sum = ofl_lso_copy_sum(out + at, c->slice_src, n);
    else memcpy(out + at, c->slice_src, n);
}

/* The transport checksum of the packet in `out` (`seglen` bytes from l4_off) whose
 * payload sums to `paysum`: in compute mode over its header and payload, in offload
 * mode the pseudo-header sum. */
static void l4_csum(const struct ofl_lso_cut *c, uint8_t *out, uint32_t seglen, uint16_t paysum)
{
    uint8_t *l4 = out + c->l4_off;
    uint8_t *field = l4 + (c->tcp ? 16 : 6);
    if (c->flags & OFL_LSO_CSUM_OFFLOAD) {
        ofl_put_be16(field, ofl_csum_fold(c->ph + seglen));
        return;
    }
    field[0] = field[1] = 0;
    uint16_t s = (uint16_t)~ofl_csum_fold(c->ph + seglen + ofl_lso_sum(l4, c->l4_hl) + paysum);
    ofl_put_be16(field, !c->tcp && s == 0 ? 0xFFFF : s);
}

/* Copy the working header's first `n` bytes to `out`. */
static inline void put_hdr(const struct ofl_lso_cut *c, uint8_t *out, uint32_t n)
{
    memcpy(out, c->hdr, n);
}

/* TCP: the working header with the segment's lengths and checksum into `out`, then
 * `n` payload bytes from `pos`. */
static uint32_t tcp_packet(struct ofl_lso_cut *c, uint8_t *out, uint32_t pos, uint32_t n, int mode)
{
    out = frame_at(c, out, pos, c->hdr_len, mode);
    put_hdr(c, out, c->hdr_len);
    uint16_t sum = 0;
    int csum = mode != OFL_LSO_BY_DMA && !(c->flags & OFL_LSO_CSUM_OFFLOAD);
    payload(c, out, c->hdr_len, pos, n, mode, csum ? &sum : NULL);
    if (mode != OFL_LSO_BY_DMA || (c->flags & OFL_LSO_CSUM_OFFLOAD))
        l4_csum(c, out, c->l4_hl + n, sum);
    return c->hdr_len + n;
}

/* UDP fragment: the working header up to the UDP header (with it: the first fragment),
 * then `n` datagram bytes from payload byte `pos`. */
static uint32_t udp_fragment(struct ofl_lso_cut *c, uint8_t *out, uint32_t hl, uint32_t pos,
                             uint32_t n, int mode)
{
    out = frame_at(c, out, pos, hl, mode);
    put_hdr(c, out, hl);
    payload(c, out, hl, pos, n, mode, NULL);
    return hl + n;
}

/* Fragment offset (8-byte units) and MF of the working header's IPv4 header or IPv6
 * fragment header, for a fragment starting `dpos` bytes into the datagram. */
static void set_frag(struct ofl_lso_cut *c, uint32_t dpos, int more)
{
    if (c->v6) {
        ofl_put_be16(c->hdr + c->l4_off + 2, (uint16_t)(dpos | (more ? 1u : 0u)));
    } else {
        ip4_update(c, 6, (uint16_t)(dpos / 8 | (more ? IP4_MF : 0u)));
    }
}

__attribute__((noinline)) uint32_t ofl_lso_ssm(struct ofl_lso_cut *c, uint8_t *out, int mode)
{
    uint32_t len;
    c->kind = c->len ? OFL_LSO_SSM : OFL_LSO_ZERO;
    set_ip_len(c, c->ip_hl + c->l4_hl + c->len);
    if (!c->v6) ip4_csum(c);
    if (c->tcp) {
        len = tcp_packet(c, out, 0, c->len, mode);
    } else {
        out = frame_at(c, out, 0, c->hdr_len, mode);
        put_hdr(c, out, c->hdr_len);
        uint16_t sum = 0;
        int csum = mode != OFL_LSO_BY_DMA && !(c->flags & OFL_LSO_CSUM_OFFLOAD);
        payload(c, out, c->hdr_len, 0, c->len, mode, csum ? &sum : NULL);
        if (csum) l4_csum(c, out, OFL_UDP_HLEN + c->len, sum);
        len = c->hdr_len + c->len;
    }
    c->next++;
    return len;
}

__attribute__((noinline)) uint32_t ofl_lso_bom(struct ofl_lso_cut *c, uint8_t *out, int mode)
{
    uint32_t len;
    c->kind = OFL_LSO_BOM;
    if (c->tcp) {
        set_ip_len(c, c->ip_hl + c->l4_hl + c->unit);
        c->hdr[c->l4_off + 13] = (uint8_t)(c->tcp_flags & ~(TCP_PSH | TCP_FIN));
        if (!c->v6) ip4_csum(c);
        len = tcp_packet(c, out, 0, c->unit, mode);
        c->seq += c->unit;
        c->ip_id++;
    } else {
        uint8_t *udp = c->hdr + c->udp_off;
        if (!(c->flags & OFL_LSO_CSUM_OFFLOAD)) {  /* the whole datagram's checksum */
            uint16_t sum = ofl_lso_sum(c->payload, c->len);
            udp[6] = udp[7] = 0;
            uint16_t s = (uint16_t)~ofl_csum_fold(c->ph + OFL_UDP_HLEN + c->len +
                                                   ofl_lso_sum(udp, OFL_UDP_HLEN) + sum);
            ofl_put_be16(udp + 6, s ? s : 0xFFFF);
        }
        set_ip_len(c, c->ip_hl + (c->v6 ? FRAG6_LEN : 0u) + c->unit);
        if (c->v6) set_frag(c, 0, 1);
        else {
            ofl_put_be16(c->hdr + c->l3_off + 6, IP4_MF);
            ip4_csum(c);
        }
        len = udp_fragment(c, out, c->udp_off + OFL_UDP_HLEN, 0, c->unit - OFL_UDP_HLEN, mode);
    }
    c->next++;
    return len;
}

__attribute__((noinline)) uint32_t ofl_lso_com(struct ofl_lso_cut *c, uint8_t *out, int mode)
{
    uint32_t len;
    c->kind = OFL_LSO_COM;
    if (c->tcp) {
        ofl_put_be32(c->hdr + c->l4_off + 4, c->seq);
        if (!c->v6) ip4_update(c, 4, c->ip_id);
        len = tcp_packet(c, out, c->next * c->unit, c->unit, mode);
        c->seq += c->unit;
        c->ip_id++;
    } else {
        uint32_t dpos = c->next * c->unit;
        set_frag(c, dpos, 1);
        len = udp_fragment(c, out, c->udp_off, dpos - OFL_UDP_HLEN, c->unit, mode);
    }
    c->next++;
    return len;
}

__attribute__((noinline)) uint32_t ofl_lso_eom(struct ofl_lso_cut *c, uint8_t *out, int mode)
{
    uint32_t len;
    c->kind = OFL_LSO_EOM;
    if (c->tcp) {
        uint32_t pos = c->next * c->unit, n = c->len - pos;
        uint8_t *tcp = c->hdr + c->l4_off;
        ofl_put_be32(tcp + 4, c->seq);
        tcp[13] = c->tcp_flags;
        set_ip_len(c, c->ip_hl + c->l4_hl + n);
        if (!c->v6) {
            ofl_put_be16(c->hdr + c->l3_off + 4, c->ip_id);
            ip4_csum(c);
        }
        len = tcp_packet(c, out, pos, n, mode);
        c->seq += n;
        c->ip_id++;
    } else {
        uint32_t dpos = c->next * c->unit, n = OFL_UDP_HLEN + c->len - dpos;
        set_ip_len(c, c->ip_hl + (c->v6 ? FRAG6_LEN : 0u) + n);
        if (c->v6) set_frag(c, dpos, 0);
        else {
            ofl_put_be16(c->hdr + c->l3_off + 6, (uint16_t)(dpos / 8));
            ip4_csum(c);
        }
        len = udp_fragment(c, out, c->udp_off, dpos - OFL_UDP_HLEN, n, mode);
    }
    c->next++;
    return len;
}

uint32_t ofl_lso_next(struct ofl_lso_cut *c, uint8_t *out, int mode)
{
    if (c->next >= c->npkts) return 0;
    if (c->npkts == 1) return ofl_lso_ssm(c, out, mode);
    if (c->next == 0) return ofl_lso_bom(c, out, mode);
    if (c->next + 1 == c->npkts) return ofl_lso_eom(c, out, mode);
    return ofl_lso_com(c, out, mode);
}

void ofl_lso_seal(const struct ofl_lso_cut *c, uint8_t *out, uint32_t len, unsigned kind)
{
    if (c->flags & OFL_LSO_CSUM_OFFLOAD) return;
    if (!c->tcp && kind != OFL_LSO_SSM && kind != OFL_LSO_ZERO) return;  /* fragments: in BOM */
    uint32_t seglen = len - c->l4_off;
    l4_csum(c, out, seglen, ofl_lso_sum(out + c->l4_off + c->l4_hl, seglen - c->l4_hl));
}
