/* pcap files as packet ports (libpcap): an in-memory replaying source and a sink. */
#include "offlow/pcap_port.h"

#include <errno.h>
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- source ------------------------------------------------------------------ */

/* One packet of the capture, in the source's data block. */
struct pcap_rec {
    uint64_t off;
    uint64_t ts_ns;
    uint32_t len;
};

struct pcap_src {
    struct ofl_src base;
    uint8_t *data;            /* this core's packets, back to back */
    struct pcap_rec *recs;
    size_t nrec;
    uint64_t file_pkts;       /* records in the file */
    uint32_t longest;         /* this core's longest frame, those longer than the mtu too */
    uint64_t oversize;        /* this core's packets longer than the mtu (per pass) */
    uint64_t cut;             /* this core's records cut short by the snap length (per
                                 pass): caplen < len, never delivered */
    size_t pos;               /* next record of the current pass */
    uint64_t pass;            /* passes finished */
    int in_pass;              /* the current pass has started (its drops are counted) */
    uint64_t ts_min, ts_max;  /* over the file's records (advance_ts: a pass's span) */
};

static int pcap_next_batch(struct ofl_src *base, struct ofl_pkt *pkts, uint8_t *bufs,
                           uint32_t n)
{
    struct pcap_src *s = (struct pcap_src *)base;
    const struct ofl_src_opts *o = &base->o;
    int forever = o->duration_ns > 0;
    uint32_t k = 0;
    while (k < n) {
        if (!s->in_pass) {
            if (!forever && s->pass >= o->loops) break;
            s->in_pass = 1;
            base->dropped += s->oversize;
            base->cut += s->cut;
            /* Nothing to replay: a timed run would spin for ever. */
            if (s->nrec == 0 && forever) break;
        }
        if (s->pos == s->nrec) {
            s->pos = 0;
            s->in_pass = 0;
            s->pass++;
            if (s->nrec == 0 && forever) break;
            continue;
        }
        const struct pcap_rec *r = &s->recs[s->pos++];
        uint8_t *buf = bufs + (size_t)k * o->mtu;
        if (r->len) memcpy(buf, s->data + r->off, r->len);
        pkts[k].data = buf;
        pkts[k].len = r->len;
        pkts[k].cap = o->mtu;
        pkts[k].ts_ns = r->ts_ns + (o->advance_ts ? s->pass * (s->ts_max - s->ts_min + 1) : 0);
        k++;
    }
    return k ? (int)k : OFL_SRC_DONE;
}

static void pcap_src_free(struct ofl_src *base)
{
    struct pcap_src *s = (struct pcap_src *)base;
    free(s->data);
    free(s->recs);
    free(s);
}

static const struct ofl_src_ops pcap_src_ops = {
    .kind = "pcap",
    .next = pcap_next_batch,
    .close = pcap_src_free,
};

/* Grow `*buf` (of `*cap` elements of `size` bytes) to hold at least `need`. */
static int grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = realloc(*buf, c * size);
    if (!p) return -ENOMEM;
    *buf = p;
    *cap = c;
    return 0;
}

/* Ethernet header put in front of raw IP packets: zero addresses, the ethertype
 * of the IP version (0 when the version is neither 4 nor 6). */
static void raw_eth_header(uint8_t *eth, const uint8_t *ip, uint32_t iplen)
{
    memset(eth, 0, OFL_ETH_HLEN);
    uint8_t v = iplen ? ip[0] >> 4 : 0;
    uint16_t et = v == 4 ? OFL_ETHERTYPE_IPV4 : v == 6 ? OFL_ETHERTYPE_IPV6 : 0;
    ofl_put_be16(eth + 12, et);
}

/* Read every record of `p` into `s`; returns 0 or a negative errno with `errbuf`. A
 * record libpcap cannot read (the file cut short, a bogus length) ends the reading:
 * the records before it are kept, as tcpdump and tshark process them, and the
 * source's error says where the capture broke off. */
static int load(struct pcap_src *s, pcap_t *p, int raw, const char *path, char *errbuf)
{
    const struct ofl_src_opts *o = &s->base.o;
    size_t data_cap = 0, rec_cap = 0, used = 0;
    struct pcap_pkthdr *h;
    const u_char *bytes;
    int rc;
    s->ts_min = UINT64_MAX;
    while ((rc = pcap_next_ex(p, &h, &bytes)) == 1) {
        /* Opened with nanosecond precision: tv_usec holds nanoseconds. */
        uint64_t ts = (uint64_t)h->ts.tv_sec * 1000000000ull + (uint64_t)h->ts.tv_usec;
        if (ts < s->ts_min) s->ts_min = ts;
        if (ts > s->ts_max) s->ts_max = ts;
        uint64_t idx = s->file_pkts++;
        if (idx % o->nparts != o->part) continue;
        /* The frame's end is not in the file: running the rest as if whole would
         * forward it cut short, so it is counted and never delivered. */
        if (h->caplen < h->len) {
            s->cut++;
            continue;
        }
        uint32_t extra = raw ? OFL_ETH_HLEN : 0;
        uint64_t len = (uint64_t)h->caplen + extra;
        if (len > s->longest) s->longest = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
        if (len > o->mtu) {
            s->oversize++;
            continue;
        }
        /* +1: the block exists even when every packet is empty. */
        if (grow((void **)&s->data, &data_cap, used + len + 1, 1) < 0 ||
            grow((void **)&s->recs, &rec_cap, s->nrec + 1, sizeof *s->recs) < 0) {
            snprintf(errbuf, 256, "%s: out of memory reading the capture", path);
            return -ENOMEM;
        }
        if (raw) raw_eth_header(s->data + used, bytes, h->caplen);
        if (h->caplen) memcpy(s->data + used + extra, bytes, h->caplen);
        struct pcap_rec *r = &s->recs[s->nrec++];
        r->off = used;
        r->len = (uint32_t)len;
        r->ts_ns = ts;
        used += len;
    }
    if (rc == PCAP_ERROR)
        snprintf(s->base.error, sizeof s->base.error,
                 "%s is cut short or damaged after %llu packets (%.120s); only those were read",
                 path, (unsigned long long)s->file_pkts, pcap_geterr(p));
    return 0;
}

int ofl_pcap_src_open(struct ofl_src **out, const char *path, const struct ofl_src_opts *o,
                      char *errbuf)
{
    *out = NULL;
    char name[64];
    snprintf(name, sizeof name, "pcap %s", path);
    struct pcap_src *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(errbuf, 256, "out of memory");
        return -ENOMEM;
    }
    int rc = ofl_src_init(&s->base, &pcap_src_ops, o, name, errbuf);
    if (rc < 0) {
        free(s);
        return rc;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        snprintf(errbuf, 256, "cannot open %s: %s", path, strerror(errno));
        free(s);
        return rc;
    }
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, perr);
    if (!p) {
        snprintf(errbuf, 256, "%s is not a readable capture: %.160s", path, perr);
        fclose(f);   /* libpcap leaves the FILE open when it fails */
        free(s);
        return -EINVAL;
    }
    int dlt = pcap_datalink(p), raw = 0;
    if (dlt == DLT_RAW || dlt == DLT_IPV4 || dlt == DLT_IPV6) {
        raw = 1;
    } else if (dlt != DLT_EN10MB) {
        const char *dn = pcap_datalink_val_to_name(dlt);
        snprintf(errbuf, 256, "%s: link type %d (%s) is not supported; use Ethernet or raw IP",
                 path, dlt, dn ? dn : "unknown");
        pcap_close(p);
        free(s);
        return -EPROTONOSUPPORT;
    }
    rc = load(s, p, raw, path, errbuf);
    pcap_close(p);
    if (rc < 0) {
        pcap_src_free(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

uint64_t ofl_pcap_src_file_packets(const struct ofl_src *s)
{
    return s->ops == &pcap_src_ops ? ((const struct pcap_src *)s)->file_pkts : 0;
}

uint64_t ofl_pcap_src_own_packets(const struct ofl_src *s)
{
    return s->ops == &pcap_src_ops ? ((const struct pcap_src *)s)->nrec : 0;
}

uint32_t ofl_pcap_src_longest(const struct ofl_src *s)
{
    return s->ops == &pcap_src_ops ? ((const struct pcap_src *)s)->longest : 0;
}

/* ---- sink ------------------------------------------------------------------------ */

/* Bytes of records a sink buffers: more than the largest record (16 + 65535), so a
 * record always fits once the buffer is written out (see ofl_pcap_sink_write). */
#define SINK_BUF (256u * 1024u)
_Static_assert(SINK_BUF > 16u + 65535u, "a whole record fits the sink's buffer");

struct ofl_pcap_sink {
    pthread_mutex_t lock;
    pcap_t *dead;
    pcap_dumper_t *dump;
    FILE *f;                  /* the file under `dump`, buffered by `buf` */
    char *buf;                /* SINK_BUF bytes (glibc ignores a size without one) */
    uint32_t snaplen;
    size_t buffered;          /* bytes of records in f's buffer */
    uint64_t packets;
};

int ofl_pcap_sink_open(struct ofl_pcap_sink **out, const char *path, uint32_t snaplen,
                       char *errbuf)
{
    *out = NULL;
    struct ofl_pcap_sink *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(errbuf, 256, "out of memory");
        return -ENOMEM;
    }
    s->snaplen = snaplen ? snaplen : 65535;
    /* nanosecond records (magic 0xa1b23c4d): a packet's ts_ns is kept whole */
    s->dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, (int)s->snaplen,
                                                   PCAP_TSTAMP_PRECISION_NANO);
    if (!s->dead) {
        snprintf(errbuf, 256, "out of memory");
        free(s);
        return -ENOMEM;
    }
    s->buf = malloc(SINK_BUF);
    s->f = s->buf ? fopen(path, "wb") : NULL;
    if (s->f && setvbuf(s->f, s->buf, _IOFBF, SINK_BUF) != 0) {
        fclose(s->f);
        s->f = NULL;
        errno = ENOMEM;
    }
    if (!s->f) {
        int rc = s->buf ? -errno : -ENOMEM;
        snprintf(errbuf, 256, "%s: %s", path, strerror(-rc));
        free(s->buf);
        pcap_close(s->dead);
        free(s);
        return rc;
    }
    errno = 0;
    s->dump = pcap_dump_fopen(s->dead, s->f);
    /* The file header on disk at once: a process killed before its first records
     * still leaves a capture (an empty one). */
    if (!s->dump || fflush(s->f) != 0) {
        int rc = errno ? -errno : -EIO;
        snprintf(errbuf, 256, "%s: %s", path, s->dump ? strerror(errno) : pcap_geterr(s->dead));
        if (s->dump) pcap_dump_close(s->dump);
        else fclose(s->f);
        free(s->buf);
        pcap_close(s->dead);
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

void ofl_pcap_sink_write(struct ofl_pcap_sink *s, const struct ofl_pkt *p)
{
    struct pcap_pkthdr h;
    memset(&h, 0, sizeof h);
    h.ts.tv_sec = (time_t)(p->ts_ns / 1000000000ull);
    h.ts.tv_usec = (suseconds_t)(p->ts_ns % 1000000000ull);   /* nanoseconds here */
    h.len = p->len;
    h.caplen = p->len < s->snaplen ? p->len : s->snaplen;
    size_t rec = 16 + h.caplen;   /* in the file: a 16-byte record header, the bytes */
    pthread_mutex_lock(&s->lock);
    /* Written out before a record would straddle the buffer's end: every write()
     * ends on a record boundary, so a process killed at any time leaves whole
     * records (unless the kill lands inside that write). */
    if (s->buffered + rec > SINK_BUF) {
        fflush(s->f);
        s->buffered = 0;
    }
    s->buffered += rec;
    pcap_dump((u_char *)s->dump, &h, p->data);
    __atomic_store_n(&s->packets, s->packets + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->lock);
}

uint64_t ofl_pcap_sink_packets(const struct ofl_pcap_sink *s)
{
    return __atomic_load_n(&s->packets, __ATOMIC_RELAXED);
}

int ofl_pcap_sink_close(struct ofl_pcap_sink *s)
{
    if (!s) return 0;
    int rc = 0;
    if (pcap_dump_flush(s->dump) < 0 || ferror(pcap_dump_file(s->dump))) rc = -EIO;
    pcap_dump_close(s->dump);
    free(s->buf);   /* after the close: the FILE used it to the end */
    pcap_close(s->dead);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return rc;
}
