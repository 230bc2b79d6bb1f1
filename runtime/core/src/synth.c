/* Synthetic traffic: size mixes, prefix files, the generator source. */
#include "offlow/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- frame-size mix ------------------------------------------------------------ */

int ofl_size_mix_parse(struct ofl_size_mix *m, const char *spec, char *errbuf)
{
    memset(m, 0, sizeof *m);
    if (!spec || !*spec) spec = "64";
    if (!strcmp(spec, "imix")) spec = "64:7,576:4,1500:1";
    const char *p = spec;
    uint64_t total = 0;
    for (;;) {
        uint64_t v[2] = {0, 1};
        for (int f = 0; f < 2; f++) {
            if (*p < '0' || *p > '9') goto bad;
            uint64_t x = 0;
            while (*p >= '0' && *p <= '9') {
                x = x * 10 + (uint64_t)(*p++ - '0');
                if (x > 100000000) goto bad;
            }
            v[f] = x;
            if (f == 0 && *p == ':') p++;
            else break;
        }
        if (v[0] < OFL_SYNTH_MIN_SIZE || v[0] > OFL_SYNTH_MAX_SIZE) {
            snprintf(errbuf, 256, "frame size %llu in \"%s\" is not within %u..%u",
                     (unsigned long long)v[0], spec, OFL_SYNTH_MIN_SIZE, OFL_SYNTH_MAX_SIZE);
            return -EINVAL;
        }
        if (v[1] < 1 || v[1] > 1000000) {
            snprintf(errbuf, 256, "weight %llu in \"%s\" is not within 1..1000000",
                     (unsigned long long)v[1], spec);
            return -EINVAL;
        }
        if (m->n == OFL_SIZE_MIX_MAX) {
            snprintf(errbuf, 256, "more than %d sizes in \"%s\"", OFL_SIZE_MIX_MAX, spec);
            return -EINVAL;
        }
        total += v[1];
        m->size[m->n] = (uint32_t)v[0];
        m->cum[m->n++] = total;
        if (*p == 0) return 0;
        if (*p++ != ',') goto bad;
    }
bad:
    snprintf(errbuf, 256, "bad size mix \"%s\" at offset %zu: want \"imix\" or "
             "SIZE[:WEIGHT],... such as \"64:7,576:4,1500:1\"", spec, (size_t)(p - spec));
    memset(m, 0, sizeof *m);
    return -EINVAL;
}

uint32_t ofl_size_mix_pick(const struct ofl_size_mix *m, struct ofl_rng *r)
{
    if (m->n <= 1) return m->n ? m->size[0] : OFL_SYNTH_MIN_SIZE;
    uint64_t x = ofl_rng_below(r, m->cum[m->n - 1]);
    uint32_t i = 0;
    while (x >= m->cum[i]) i++;
    return m->size[i];
}

/* ---- prefix files ------------------------------------------------------------------ */

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int is_sep(char c)
{
    return is_blank(c) || c == ',' || c == ';' || c == '|';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Decimal number of 1..`maxdig` digits at t[*i] (before `n`), at most `max`. */
static int dec(const char *t, size_t n, size_t *i, int maxdig, unsigned max, unsigned *out)
{
    unsigned v = 0;
    int d = 0;
    while (*i < n && is_digit(t[*i])) {
        if (++d > maxdig) return -1;
        v = v * 10 + (unsigned)(t[(*i)++] - '0');
    }
    if (d == 0 || v > max) return -1;
    *out = v;
    return 0;
}

/* One IPv4 part, 0..255: 1-3 digits without a leading zero ("015" is 13 to inet_aton,
 * which reads it as octal, and 15 to others: refused, as Python's ipaddress does). */
static int octet(const char *t, size_t n, size_t *i, unsigned *out)
{
    size_t start = *i;
    if (dec(t, n, i, 3, 255, out) < 0) return -1;
    return *i - start > 1 && t[start] == '0' ? -1 : 0;
}

/* "h:h::h/len" with hex digits, ':' and '.' (embedded IPv4) and a length 0..128. */
static int is_v6_token(const char *t, size_t n)
{
    size_t i = 0;
    int colons = 0;
    while (i < n && (is_hex(t[i]) || t[i] == ':' || t[i] == '.')) colons += t[i++] == ':';
    if (colons < 2 || i == n || t[i] != '/') return 0;
    i++;
    unsigned len;
    return dec(t, n, &i, 3, 128, &len) == 0 && i == n;
}

static unsigned hex_val(char c)
{
    return is_digit(c) ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

/* "A.B.C.D" exactly filling t[k..n) (each part an octet()). */
static int dotted_quad(const char *t, size_t n, size_t k, uint32_t *out)
{
    uint32_t a = 0;
    for (int o = 0; o < 4; o++) {
        unsigned v;
        if (o && (k == n || t[k++] != '.')) return -1;
        if (octet(t, n, &k, &v) < 0) return -1;
        a = a << 8 | v;
    }
    if (k != n) return -1;
    *out = a;
    return 0;
}

/* An IPv6 address (RFC 4291 text form) exactly filling t[0..n), into `out`. */
static int v6_address(const char *t, size_t n, uint8_t out[16])
{
    uint16_t g[8];
    int ng = 0, gap = -1;
    size_t i = 0;
    if (n >= 2 && t[0] == ':' && t[1] == ':') {
        gap = 0;
        i = 2;
    }
    while (i < n) {
        size_t s = i;
        unsigned v = 0;
        while (i < n && is_hex(t[i]) && i - s < 5) v = v * 16 + hex_val(t[i++]);
        if (i < n && t[i] == '.') {
            /* The last 32 bits as a dotted quad. */
            uint32_t a;
            if (ng > 6 || dotted_quad(t, n, s, &a) < 0) return -1;
            g[ng++] = (uint16_t)(a >> 16);
            g[ng++] = (uint16_t)a;
            i = n;
            break;
        }
        if (i == s || i - s > 4 || ng == 8) return -1;
        g[ng++] = (uint16_t)v;
        if (i == n) break;
        if (t[i++] != ':' || i == n) return -1;
        if (t[i] == ':') {
            if (gap >= 0) return -1;
            gap = ng;
            i++;
        }
    }
    if (gap < 0 ? ng != 8 : ng > 7) return -1;
    int fill = 8 - ng, k = 0;
    for (int j = 0; j < ng; j++) {
        if (j == gap)
            for (int z = 0; z < fill; z++, k++) out[2 * k] = out[2 * k + 1] = 0;
        out[2 * k] = (uint8_t)(g[j] >> 8);
        out[2 * k + 1] = (uint8_t)g[j];
        k++;
    }
    if (gap == ng)
        for (; k < 8; k++) out[2 * k] = out[2 * k + 1] = 0;
    return 0;
}

/* "ADDR6/LEN" exactly filling t[0..n), host bits cleared. */
static int v6_prefix(const char *t, size_t n, uint8_t addr6[16], uint8_t *plen)
{
    const char *slash = memchr(t, '/', n);
    if (!slash) return -1;
    size_t k = (size_t)(slash - t) + 1;
    unsigned l;
    if (dec(t, n, &k, 3, 128, &l) < 0 || k != n) return -1;
    if (v6_address(t, (size_t)(slash - t), addr6) < 0) return -1;
    for (unsigned b = 0; b < 16; b++) {
        unsigned keep = l > 8 * b ? l - 8 * b : 0;
        if (keep < 8) addr6[b] &= (uint8_t)(0xFF00u >> keep);
    }
    *plen = (uint8_t)l;
    return 0;
}

/* One line; `addr6` NULL: IPv6 prefixes are only recognised, not parsed. */
static int parse_line(const char *line, size_t len, uint32_t *addr, uint8_t *addr6,
                      uint8_t *plen)
{
    size_t i = 0;
    while (i < len && is_blank(line[i])) i++;
    if (i == len || line[i] == '#') return OFL_PREFIX_BLANK;
    const char *t = line + i;
    size_t n = 0;
    while (i + n < len && !is_sep(t[n])) n++;

    size_t k = 0;
    uint32_t a = 0;
    for (int o = 0; o < 4; o++) {
        unsigned v;
        if (o && (k == n || t[k++] != '.')) goto not_v4;
        if (octet(t, n, &k, &v) < 0) goto not_v4;
        a = a << 8 | v;
    }
    unsigned l = 32;
    if (k < n) {
        if (t[k++] != '/' || dec(t, n, &k, 2, 32, &l) < 0 || k != n) goto not_v4;
    }
    *addr = l ? a & ~(uint32_t)0 << (32 - l) : 0;
    *plen = (uint8_t)l;
    return OFL_PREFIX_V4;
not_v4:
    if (!is_v6_token(t, n)) return OFL_EBADHDR;
    if (addr6 && v6_prefix(t, n, addr6, plen) < 0) return OFL_EBADHDR;
    return OFL_PREFIX_V6;
}

int ofl_prefix_parse_line(const char *line, size_t len, uint32_t *addr, uint8_t *plen)
{
    return parse_line(line, len, addr, NULL, plen);
}

int ofl_prefix_parse_line6(const char *line, size_t len, uint32_t *addr, uint8_t addr6[16],
                           uint8_t *plen)
{
    return parse_line(line, len, addr, addr6, plen);
}

void ofl_prefixes_init(struct ofl_prefixes *ps)
{
    memset(ps, 0, sizeof *ps);
}

/* Count and keep one complete line. */
static int add_line(struct ofl_prefixes *ps, const char *line, size_t len, int too_long)
{
    ps->lines++;
    uint32_t a;
    uint8_t l, a6[16];
    int rc = too_long ? OFL_EBADHDR : parse_line(line, len, &a, ps->keep_v6 ? a6 : NULL, &l);
    if (rc == OFL_PREFIX_V6 && ps->keep_v6) {
        if (ps->v6 == ps->cap6) {
            size_t c = ps->cap6 ? ps->cap6 * 2 : 1024;
            struct ofl_prefix6 *v = realloc(ps->v6v, c * sizeof *v);
            if (!v) return -ENOMEM;
            ps->v6v = v;
            ps->cap6 = c;
        }
        memcpy(ps->v6v[ps->v6].addr, a6, 16);
        ps->v6v[ps->v6++].len = l;
    } else if (rc == OFL_PREFIX_V6) ps->v6++;
    else if (rc == OFL_PREFIX_BLANK) ps->blank++;
    else if (rc < 0) {
        if (ps->bad++ == 0) ps->first_bad = ps->lines;
    } else {
        if (ps->n == ps->cap) {
            size_t c = ps->cap ? ps->cap * 2 : 1024;
            struct ofl_prefix4 *v = realloc(ps->v, c * sizeof *v);
            if (!v) return -ENOMEM;
            ps->v = v;
            ps->cap = c;
        }
        ps->v[ps->n].addr = a;
        ps->v[ps->n++].len = l;
    }
    return 0;
}

/* Append `len` bytes to the unfinished line (marking it too long if it overflows). */
static void keep_part(struct ofl_prefixes *ps, const char *s, size_t len)
{
    if (ps->part_long || len > sizeof ps->part - ps->part_len) {
        ps->part_long = 1;
        return;
    }
    memcpy(ps->part + ps->part_len, s, len);
    ps->part_len += len;
}

int ofl_prefixes_feed(struct ofl_prefixes *ps, const char *text, size_t len)
{
    while (len) {
        const char *nl = memchr(text, '\n', len);
        size_t n = nl ? (size_t)(nl - text) : len;
        if (!nl) {
            keep_part(ps, text, n);
            return 0;
        }
        int rc;
        if (ps->part_len || ps->part_long) {
            keep_part(ps, text, n);
            rc = add_line(ps, ps->part, ps->part_len, ps->part_long);
            ps->part_len = 0;
            ps->part_long = 0;
        } else {
            rc = add_line(ps, text, n, n > OFL_PREFIX_LINE_MAX);
        }
        if (rc < 0) return rc;
        text += n + 1;
        len -= n + 1;
    }
    return 0;
}

int ofl_prefixes_finish(struct ofl_prefixes *ps)
{
    if (!ps->part_len && !ps->part_long) return 0;
    int rc = add_line(ps, ps->part, ps->part_len, ps->part_long);
    ps->part_len = 0;
    ps->part_long = 0;
    return rc;
}

int ofl_prefixes_load(struct ofl_prefixes *ps, const char *path, char *errbuf)
{
    errno = 0;
    /* gzopen reads uncompressed files as they are. */
    gzFile f = gzopen(path, "rb");
    if (!f) {
        int e = errno ? errno : ENOMEM;
        snprintf(errbuf, 256, "cannot open prefix file %s: %s", path, strerror(e));
        return -e;
    }
    char buf[65536];
    int n, rc = 0;
    while ((n = gzread(f, buf, sizeof buf)) > 0) {
        rc = ofl_prefixes_feed(ps, buf, (size_t)n);
        if (rc < 0) break;
    }
    int zerr = Z_OK;
    const char *msg = gzerror(f, &zerr);
    if (rc == 0 && (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))) {
        /* (zlib's message starts with the path: said once) */
        size_t pl = strlen(path);
        if (zerr != Z_ERRNO && !strncmp(msg, path, pl) && !strncmp(msg + pl, ": ", 2))
            msg += pl + 2;
        snprintf(errbuf, 256, "cannot read prefix file %s: %s", path,
                 zerr == Z_ERRNO ? strerror(errno) : msg);
        rc = -EIO;
    }
    gzclose(f);
    if (rc == 0) rc = ofl_prefixes_finish(ps);
    if (rc == -ENOMEM) snprintf(errbuf, 256, "out of memory reading prefix file %s", path);
    return rc;
}

void ofl_prefixes_free(struct ofl_prefixes *ps)
{
    free(ps->v);
    free(ps->v6v);
    ps->v = NULL;
    ps->v6v = NULL;
    ps->n = ps->cap = ps->cap6 = 0;
    if (ps->keep_v6) ps->v6 = 0;   /* it indexes v6v */
}

/* ---- the source ---------------------------------------------------------------------- */

struct synth_src {
    struct ofl_src base;
    struct ofl_size_mix mix;
    struct ofl_prefixes px;
    uint64_t own;        /* packets of this core per pass (UINT64_MAX: endless) */
    uint64_t k;          /* this core's next packet in the pass */
    uint64_t pass;       /* passes finished */
    uint64_t seed_mix;   /* the seed, mixed */
};

/* A bijective 64-bit mixer (splitmix64's output function). */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Write packet j (sequence number q) into `buf`; returns its length. */
static uint32_t synth_packet(const struct synth_src *s, uint8_t *buf, uint64_t j, uint64_t q)
{
    /* Mixing j keeps the streams of neighbouring packets from overlapping. */
    struct ofl_rng r = {mix64(s->seed_mix + mix64(j))};
    uint32_t size = ofl_size_mix_pick(&s->mix, &r);
    uint32_t src = 0x0A000000u | (uint32_t)(ofl_rng_next(&r) & 0xFFFFFF), dst;
    uint64_t x = ofl_rng_next(&r);
    if (s->px.n) {
        const struct ofl_prefix4 *p = &s->px.v[ofl_rng_below(&r, s->px.n)];
        uint32_t host = p->len >= 32 ? 0 : (uint32_t)(0xFFFFFFFFull >> p->len);
        dst = p->addr | ((uint32_t)x & host);
    } else {
        dst = (uint32_t)x;
    }
    uint64_t y = ofl_rng_next(&r);
    uint16_t sport = (uint16_t)(1024 + ofl_rng_below(&r, 64512));
    uint16_t rnd = (uint16_t)(1024 + (y >> 32) % 64512);
    unsigned pick = (unsigned)(y & 7);
    uint16_t dport = pick < 2 ? 443 : pick == 2 ? 53 : pick == 3 ? 80 : rnd;

    static const uint8_t eth[14] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00};
    memcpy(buf, eth, sizeof eth);
    uint8_t *ip = buf + OFL_ETH_HLEN;
    uint8_t *udp = ip + OFL_IPV4_HLEN;
    uint8_t *pay = udp + OFL_UDP_HLEN;
    uint32_t paylen = size - OFL_SYNTH_MIN_SIZE;
    uint16_t ulen = (uint16_t)(paylen + OFL_UDP_HLEN);
    memset(ip, 0, OFL_IPV4_HLEN + OFL_UDP_HLEN);
    memset(pay, 0, paylen);
    ip[0] = 0x45;
    ofl_put_be16(ip + 2, (uint16_t)(size - OFL_ETH_HLEN));
    ofl_put_be16(ip + 4, (uint16_t)j);
    ip[8] = 64;
    ip[9] = 17;
    ofl_put_be32(ip + 12, src);
    ofl_put_be32(ip + 16, dst);
    ofl_put_be16(ip + 10, ofl_csum(ip, OFL_IPV4_HLEN));
    ofl_put_be16(udp, sport);
    ofl_put_be16(udp + 2, dport);
    ofl_put_be16(udp + 4, ulen);
    uint32_t stamped = paylen >= 8 ? 8 : 0;
    if (stamped) {
        ofl_put_be32(pay, (uint32_t)(q >> 32));
        ofl_put_be32(pay + 4, (uint32_t)q);
    }
    /* The rest of the payload is zero and adds nothing to the sum. */
    uint64_t sum = (uint64_t)(src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) +
                   17 + ulen;
    sum = ofl_csum_add(sum, udp, OFL_UDP_HLEN + stamped);
    uint16_t c = (uint16_t)~ofl_csum_fold(sum);
    ofl_put_be16(udp + 6, c ? c : 0xFFFF);   /* 0 would mean "no checksum" */
    return size;
}

static int synth_next(struct ofl_src *base, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    struct synth_src *s = (struct synth_src *)base;
    const struct ofl_src_opts *o = &base->o;
    int forever = o->duration_ns > 0;
    uint32_t i = 0;
    if (s->own == 0) return OFL_SRC_DONE;
    while (i < n) {
        if (s->k == s->own) {
            s->k = 0;
            s->pass++;
        }
        if (!forever && s->pass >= o->loops) break;
        uint64_t j = o->part + s->k * o->nparts;
        uint64_t q = s->own == UINT64_MAX ? j : s->pass * o->count + j;
        uint8_t *buf = bufs + (size_t)i * o->mtu;
        pkts[i].data = buf;
        pkts[i].len = synth_packet(s, buf, j, q);
        pkts[i].cap = o->mtu;
        pkts[i].ts_ns = q * 1000;
        s->k++;
        i++;
    }
    return i ? (int)i : OFL_SRC_DONE;
}

static void synth_free(struct ofl_src *base)
{
    struct synth_src *s = (struct synth_src *)base;
    ofl_prefixes_free(&s->px);
    free(s);
}

static const struct ofl_src_ops synth_ops = {
    .kind = "synth",
    .next = synth_next,
    .close = synth_free,
};

int ofl_synth_src_open(struct ofl_src **out, const struct ofl_synth_opts *so,
                       const struct ofl_src_opts *o, char *errbuf)
{
    *out = NULL;
    struct synth_src *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(errbuf, 256, "out of memory");
        return -ENOMEM;
    }
    ofl_prefixes_init(&s->px);
    int rc = ofl_src_init(&s->base, &synth_ops, o, "synth", errbuf);
    if (rc == 0) rc = ofl_size_mix_parse(&s->mix, so ? so->sizes : NULL, errbuf);
    for (uint32_t i = 0; rc == 0 && i < s->mix.n; i++) {
        if (s->mix.size[i] > s->base.o.mtu) {
            snprintf(errbuf, 256, "frame size %u is larger than the mtu %u", s->mix.size[i],
                     s->base.o.mtu);
            rc = -EINVAL;
        }
    }
    if (rc == 0 && so && so->prefixes && *so->prefixes) {
        rc = ofl_prefixes_load(&s->px, so->prefixes, errbuf);
        if (rc == 0 && s->px.n == 0) {
            snprintf(errbuf, 256, "prefix file %s has no IPv4 prefix (%llu lines, %llu IPv6, "
                     "%llu garbage)", so->prefixes, (unsigned long long)s->px.lines,
                     (unsigned long long)s->px.v6, (unsigned long long)s->px.bad);
            rc = -EINVAL;
        }
    }
    if (rc < 0) {
        synth_free(&s->base);
        return rc;
    }
    const struct ofl_src_opts *so2 = &s->base.o;
    if (so2->count == 0) s->own = so2->duration_ns > 0 ? UINT64_MAX : 0;
    else s->own = so2->count > so2->part ? (so2->count - so2->part - 1) / so2->nparts + 1 : 0;
    s->seed_mix = mix64(so2->seed ^ 0x6F666C6F77ull);
    *out = &s->base;
    return 0;
}

static const struct synth_src *as_synth(const struct ofl_src *s)
{
    return s->ops == &synth_ops ? (const struct synth_src *)s : NULL;
}

uint64_t ofl_synth_src_prefixes(const struct ofl_src *s)
{
    return as_synth(s) ? as_synth(s)->px.n : 0;
}

uint64_t ofl_synth_src_prefixes_v6(const struct ofl_src *s)
{
    return as_synth(s) ? as_synth(s)->px.v6 : 0;
}

uint64_t ofl_synth_src_prefixes_bad(const struct ofl_src *s)
{
    return as_synth(s) ? as_synth(s)->px.bad : 0;
}
