/* Packet ports: the pcap source and sink, the synthetic source, size mixes and
 * prefix files, and source kinds a library adds (gen.h's struct ofl_src_kind).
 *   test_ports DATA_DIR TMP_DIR      run the tests (DATA_DIR holds the shared captures)
 *   test_ports classify FILE.pcap    print each packet's category (valid_ipv4, bad_l4, ...;
 *                                    see offlow/testing/malformed.py), using the
 *                                    parsers the way the header elements do, and on
 *                                    stderr how many records were cut short */
#include <errno.h>
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "check.h"
#include "offlow/err.h"
#include "offlow/gen.h"
#include "offlow/pcap_port.h"
#include "offlow/pkt.h"
#include "offlow/src.h"
#include "offlow/synth.h"

#define MTU 65600u   /* the captures hold a few packets above 9000 bytes */
#define BATCH 32u

static const char *data_dir, *tmp_dir;

static char *path_in(const char *dir, const char *name)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

/* ---- collecting a source's packets --------------------------------------------------- */

struct plist {
    size_t n, cap;
    uint8_t **data;
    uint32_t *len;
    uint64_t *ts;
};

static void plist_add(struct plist *l, const struct ofl_pkt *p)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->data = realloc(l->data, l->cap * sizeof *l->data);
        l->len = realloc(l->len, l->cap * sizeof *l->len);
        l->ts = realloc(l->ts, l->cap * sizeof *l->ts);
    }
    l->data[l->n] = malloc(p->len ? p->len : 1);
    if (p->len) memcpy(l->data[l->n], p->data, p->len);
    l->len[l->n] = p->len;
    l->ts[l->n++] = p->ts_ns;
}

static void plist_free(struct plist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->data[i]);
    free(l->data);
    free(l->len);
    free(l->ts);
    memset(l, 0, sizeof *l);
}

static int same_pkt(const struct plist *a, size_t i, const struct plist *b, size_t j)
{
    return a->len[i] == b->len[j] && !memcmp(a->data[i], b->data[j], a->len[i]);
}

/* Drain `s` into `l` (may be NULL); returns the last result (OFL_SRC_DONE when all
 * went well) and counts the calls that returned 0. */
static int drain(struct ofl_src *s, struct plist *l, uint64_t *zeros)
{
    static uint8_t bufs[BATCH * MTU];
    struct ofl_pkt pkts[BATCH];
    for (;;) {
        int rc = ofl_src_next(s, pkts, bufs, BATCH);
        if (rc < 0) return rc;
        if (rc == 0 && zeros) ++*zeros;
        for (int i = 0; i < rc; i++) {
            if (pkts[i].data != bufs + (size_t)i * s->o.mtu || pkts[i].cap != s->o.mtu ||
                pkts[i].len > pkts[i].cap)
                return -EFAULT;
            if (l) plist_add(l, &pkts[i]);
        }
    }
}

static struct ofl_src_opts opts(void)
{
    struct ofl_src_opts o;
    memset(&o, 0, sizeof o);
    o.loops = 1;
    o.nparts = 1;
    o.mtu = MTU;
    return o;
}

/* ---- pcap source ------------------------------------------------------------------------- */

static void test_pcap_read(const char *name, uint64_t want)
{
    char err[256] = "";
    struct ofl_src *s = NULL;
    struct ofl_src_opts o = opts();
    int rc = ofl_pcap_src_open(&s, path_in(data_dir, name), &o, err);
    CHECK(rc == 0, "open %s: %s", name, err);
    if (rc) return;
    struct plist l = {0};
    rc = drain(s, &l, NULL);
    int parsed = 0;
    for (size_t i = 0; i < l.n; i++) {
        uint16_t et;
        uint32_t l3;
        parsed += ofl_parse_eth(l.data[i], l.len[i], &et, &l3) == 0;
    }
    CHECK(rc == OFL_SRC_DONE && l.n == want && ofl_src_packets(s) == want &&
          ofl_pcap_src_file_packets(s) == want && ofl_src_dropped(s) == 0,
          "%s: %zu packets (want %llu), done", name, l.n, (unsigned long long)want);
    uint64_t bytes = 0;
    for (size_t i = 0; i < l.n; i++) bytes += l.len[i];
    CHECK(ofl_src_bytes(s) == bytes && parsed == (int)l.n, "%s: bytes counted, all Ethernet",
          name);
    CHECK(l.n > 1 && l.ts[0] > 1000000000ull * 1000000000ull && l.ts[1] >= l.ts[0],
          "%s: timestamps in ns since the epoch", name);
    CHECK(ofl_src_next(s, NULL, NULL, 4) == OFL_SRC_DONE, "%s: stays done", name);
    CHECK(!strcmp(ofl_src_kind(s), "pcap"), "kind pcap");
    ofl_src_close(s);
    plist_free(&l);
}

static int read_all(const char *path, struct ofl_src_opts *o, struct plist *l, char *err)
{
    struct ofl_src *s = NULL;
    int rc = ofl_pcap_src_open(&s, path, o, err);
    if (rc < 0) return rc;
    rc = drain(s, l, NULL);
    ofl_src_close(s);
    return rc == OFL_SRC_DONE ? 0 : rc;
}

static void test_pcap_round_trip(void)
{
    char err[256] = "";
    struct ofl_src_opts o = opts();
    struct plist in = {0}, out = {0};
    CHECK(read_all(path_in(data_dir, "tls_ciphers.pcap"), &o, &in, err) == 0, "read tls");
    const char *tmp = path_in(tmp_dir, "round.pcap");
    struct ofl_pcap_sink *k = NULL;
    CHECK(ofl_pcap_sink_open(&k, tmp, 65535, err) == 0, "sink open: %s", err);
    for (size_t i = 0; i < in.n; i++) {
        struct ofl_pkt p = {in.data[i], in.len[i], in.len[i], in.ts[i], 0};
        ofl_pcap_sink_write(k, &p);
    }
    CHECK(ofl_pcap_sink_packets(k) == in.n, "sink counted %llu",
          (unsigned long long)ofl_pcap_sink_packets(k));
    CHECK(ofl_pcap_sink_close(k) == 0, "sink closed without error");
    CHECK(read_all(tmp, &o, &out, err) == 0, "read back: %s", err);
    int same = out.n == in.n;
    for (size_t i = 0; same && i < in.n; i++)
        same = same_pkt(&in, i, &out, i) && in.ts[i] == out.ts[i];
    CHECK(same, "round trip is byte-exact with equal timestamps (%zu packets)", out.n);
    int whole_us = in.n > 0 && in.ts[in.n - 1] > 1000000000ull * 1000000000ull;
    for (size_t i = 0; i < in.n; i++)
        whole_us &= in.ts[i] % 1000 == 0;
    CHECK(whole_us, "a microsecond capture reads as nanoseconds since the epoch");

    /* Nanoseconds survive: the sink writes nanosecond records (magic 0xa1b23c4d). */
    CHECK(ofl_pcap_sink_open(&k, tmp, 65535, err) == 0, "sink open: %s", err);
    for (size_t i = 0; i < in.n; i++) {
        struct ofl_pkt p = {in.data[i], in.len[i], in.len[i], in.ts[i] + 1 + i % 999, 0};
        ofl_pcap_sink_write(k, &p);
    }
    CHECK(ofl_pcap_sink_close(k) == 0, "sink closed without error");
    uint32_t magic = 0;
    FILE *mf = fopen(tmp, "rb");
    CHECK(mf && fread(&magic, 4, 1, mf) == 1 && magic == 0xa1b23c4du,
          "a nanosecond capture (magic %08x)", magic);
    if (mf) fclose(mf);
    plist_free(&out);
    CHECK(read_all(tmp, &o, &out, err) == 0, "read back: %s", err);
    same = out.n == in.n;
    for (size_t i = 0; same && i < in.n; i++)
        same = same_pkt(&in, i, &out, i) && out.ts[i] == in.ts[i] + 1 + i % 999;
    CHECK(same, "every timestamp back to the nanosecond (%zu packets)", out.n);

    /* A snaplen cuts packets. */
    CHECK(ofl_pcap_sink_open(&k, tmp, 60, err) == 0, "sink snaplen 60");
    for (size_t i = 0; i < in.n; i++) {
        struct ofl_pkt p = {in.data[i], in.len[i], in.len[i], in.ts[i], 0};
        ofl_pcap_sink_write(k, &p);
    }
    ofl_pcap_sink_close(k);
    /* libpcap reads each record as the first 60 bytes, the frame's length kept */
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_t *pc = pcap_open_offline(tmp, perr);
    CHECK(pc != NULL, "libpcap opens the snapped capture: %s", perr);
    struct pcap_pkthdr *h;
    const u_char *bytes;
    size_t n = 0, longer = 0;
    int cut = pc != NULL;
    while (cut && pcap_next_ex(pc, &h, &bytes) == 1 && n < in.n) {
        cut = h->len == in.len[n] && h->caplen == (in.len[n] < 60 ? in.len[n] : 60) &&
              !memcmp(bytes, in.data[n], h->caplen);
        longer += in.len[n++] > 60;
    }
    if (pc) pcap_close(pc);
    CHECK(cut && n == in.n && longer > 0, "snaplen 60 keeps the first 60 bytes");
    /* the source never delivers a record cut short: it counts it, each pass */
    plist_free(&out);
    o.loops = 2;
    struct ofl_src *s = NULL;
    CHECK(ofl_pcap_src_open(&s, tmp, &o, err) == 0, "open the snapped capture: %s", err);
    int whole = s && drain(s, &out, NULL) == OFL_SRC_DONE && out.n == 2 * (in.n - longer) &&
                ofl_src_cut(s) == 2 * longer && ofl_src_dropped(s) == 0;
    for (size_t i = 0, j = 0; whole && i < 2 * in.n; i++) {
        if (in.len[i % in.n] > 60) continue;
        whole = same_pkt(&in, i % in.n, &out, j++);
    }
    CHECK(whole, "a snapped capture: %zu records whole, %llu cut short (2 passes)", out.n,
          s ? (unsigned long long)ofl_src_cut(s) : 0ull);
    ofl_src_close(s);
    o.loops = 1;
    plist_free(&in);
    plist_free(&out);

    CHECK(ofl_pcap_sink_open(&k, "/nonexistent-dir/x.pcap", 100, err) < 0 && err[0],
          "sink in a missing directory fails: %s", err);
}

static void test_pcap_loops_parts(void)
{
    char err[256] = "";
    const char *quic = path_in(data_dir, "quic.pcap");
    struct ofl_src_opts o = opts();
    struct plist one = {0};
    read_all(quic, &o, &one, err);
    size_t n = one.n;

    o.loops = 3;
    struct plist three = {0};
    CHECK(read_all(quic, &o, &three, err) == 0 && three.n == 3 * n, "loops 3: %zu of %zu",
          three.n, 3 * n);
    int same = 1;
    for (size_t i = 0; i < three.n; i++) same &= same_pkt(&three, i, &one, i % n);
    CHECK(same, "each pass replays the capture in order");
    plist_free(&three);

    o.loops = 0;
    struct plist zero = {0};
    CHECK(read_all(quic, &o, &zero, err) == 0 && zero.n == n, "loops 0 is one pass");
    plist_free(&zero);

    for (uint32_t np = 1; np <= 4; np++) {
        size_t total = 0;
        int ok = 1;
        for (uint32_t part = 0; part < np; part++) {
            o = opts();
            o.loops = 2;
            o.part = part;
            o.nparts = np;
            struct plist l = {0};
            struct ofl_src *s = NULL;
            ofl_pcap_src_open(&s, quic, &o, err);
            drain(s, &l, NULL);
            size_t own = ofl_pcap_src_own_packets(s);
            ofl_src_close(s);
            ok &= own == (n - part + np - 1) / np && l.n == 2 * own;
            for (size_t i = 0; i < l.n; i++)
                ok &= same_pkt(&l, i, &one, part + (i % own) * np);
            total += l.n;
            plist_free(&l);
        }
        CHECK(ok && total == 2 * n, "%u parts x 2 loops: every packet once per pass (%zu)", np,
              total);
    }
    o = opts();
    o.part = 2;
    o.nparts = 2;
    struct ofl_src *s = NULL;
    CHECK(ofl_pcap_src_open(&s, quic, &o, err) == -EINVAL && err[0], "part >= nparts: %s", err);
    o = opts();
    o.mtu = 0;
    CHECK(ofl_pcap_src_open(&s, quic, &o, err) == -EINVAL, "mtu 0 refused");
    o = opts();
    o.rate_pps = -1;
    CHECK(ofl_pcap_src_open(&s, quic, &o, err) == -EINVAL, "negative rate refused");
    plist_free(&one);
}

static void test_pcap_mtu(void)
{
    char err[256] = "";
    const char *tls = path_in(data_dir, "tls_ciphers.pcap");
    struct ofl_src_opts o = opts();
    struct plist all = {0}, small = {0};
    read_all(tls, &o, &all, err);
    size_t big = 0;
    for (size_t i = 0; i < all.n; i++) big += all.len[i] > 200;
    o.mtu = 200;
    o.loops = 2;
    struct ofl_src *s = NULL;
    ofl_pcap_src_open(&s, tls, &o, err);
    drain(s, &small, NULL);
    CHECK(big > 0 && ofl_src_dropped(s) == 2 * big && small.n == 2 * (all.n - big),
          "mtu 200: %llu dropped (%zu per pass), %zu delivered",
          (unsigned long long)ofl_src_dropped(s), big, small.n);
    int within = 1;
    for (size_t i = 0; i < small.n; i++) within &= small.len[i] <= 200;
    CHECK(within, "delivered packets fit the mtu");
    ofl_src_close(s);
    plist_free(&all);
    plist_free(&small);
}

static void test_pcap_rate_duration(void)
{
    char err[256] = "";
    const char *quic = path_in(data_dir, "quic.pcap");
    struct ofl_src_opts o = opts();
    o.rate_pps = 50000;
    o.loops = 2;
    struct ofl_src *s = NULL;
    ofl_pcap_src_open(&s, quic, &o, err);
    uint64_t zeros = 0;
    struct plist l = {0};
    int rc = drain(s, &l, &zeros);
    CHECK(rc == OFL_SRC_DONE && l.n == 2 * ofl_pcap_src_file_packets(s) && zeros > 0,
          "rate 50000/s: all %zu packets, %llu calls paced to 0", l.n,
          (unsigned long long)zeros);
    ofl_src_close(s);
    plist_free(&l);

    o = opts();
    o.duration_ns = 30000000;   /* 30 ms, replaying */
    o.loops = 1;
    ofl_pcap_src_open(&s, quic, &o, err);
    rc = drain(s, &l, NULL);
    CHECK(rc == OFL_SRC_DONE && l.n > 0, "duration 30 ms: done after %zu",
          l.n);
    ofl_src_close(s);
    plist_free(&l);

    /* A timed run with nothing to replay for this core ends at once. */
    const char *one = path_in(tmp_dir, "one.pcap");
    struct ofl_pcap_sink *k = NULL;
    ofl_pcap_sink_open(&k, one, 65535, err);
    uint8_t frame[60] = {0};
    struct ofl_pkt p = {frame, 60, 60, 5, 0};
    ofl_pcap_sink_write(k, &p);
    ofl_pcap_sink_close(k);
    o = opts();
    o.duration_ns = 5000000000ull;
    o.part = 1;
    o.nparts = 2;
    ofl_pcap_src_open(&s, one, &o, err);
    uint64_t t0 = ofl_src_clock_ns();
    rc = drain(s, &l, NULL);
    CHECK(rc == OFL_SRC_DONE && l.n == 0 && ofl_src_clock_ns() - t0 < 1000000000ull,
          "timed run with no packets for this core ends at once");
    ofl_src_close(s);
}

/* Copy the first `n` bytes of `from` to `to`. */
static void copy_prefix(const char *from, const char *to, long n)
{
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    for (long i = 0; i < n; i++) {
        int c = fgetc(f);
        if (c == EOF) break;
        fputc(c, g);
    }
    fclose(f);
    fclose(g);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static long file_size(FILE *f)
{
    struct stat st;
    return fstat(fileno(f), &st) == 0 ? (long)st.st_size : -1;
}

/* Records of the (little-endian) capture file `path` that it holds whole, walking
 * their headers; *boundary: the file ends where a record does. */
static uint64_t whole_records(const char *path, int *boundary)
{
    FILE *f = fopen(path, "rb");
    uint8_t h[24];
    uint64_t n = 0;
    *boundary = 0;
    if (fread(h, 1, 24, f) != 24) {
        fclose(f);
        return 0;
    }
    for (;;) {
        size_t got = fread(h, 1, 16, f);
        if (got == 0) *boundary = 1;
        if (got != 16) break;
        uint32_t caplen = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 |
                          (uint32_t)h[11] << 24;
        if (fseek(f, caplen, SEEK_CUR) != 0 || ftell(f) > file_size(f)) break;
        n++;
    }
    fclose(f);
    return n;
}

/* A sink's file is a capture at every moment: the header at open, then only whole
 * records (before the close writes the rest). */
static void test_pcap_sink_whole_records(void)
{
    char err[256] = "";
    const char *path = path_in(tmp_dir, "whole.pcap");
    struct ofl_pcap_sink *k = NULL;
    CHECK(ofl_pcap_sink_open(&k, path, 65535, err) == 0, "sink open: %s", err);
    if (!k) return;
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 24, "the header is on disk at open (%lld bytes)",
          (long long)st.st_size);
    static uint8_t frame[1499];
    int whole = 1, grew = 0;
    for (int i = 0; i < 1000; i++) {
        frame[0] = (uint8_t)i;
        struct ofl_pkt p = {.data = frame, .len = (uint32_t)(60 + i % 1439),
                            .cap = sizeof frame, .ts_ns = (uint64_t)i};
        ofl_pcap_sink_write(k, &p);
        int boundary = 0;
        FILE *f = fopen(path, "rb");
        fseek(f, 0, SEEK_END);
        grew += ftell(f) > 24;
        fclose(f);
        whole_records(path, &boundary);
        whole &= boundary;
    }
    CHECK(whole && grew, "after each of 1000 writes (%d with records on disk) the file ends "
          "on a record boundary", grew);
    CHECK(ofl_pcap_sink_close(k) == 0, "close");
    int boundary = 0;
    CHECK(whole_records(path, &boundary) == 1000 && boundary, "all 1000 records after close");
}

static void test_pcap_bad_files(void)
{
    char err[256];
    struct ofl_src *s = NULL;
    struct ofl_src_opts o = opts();
    err[0] = 0;
    CHECK(ofl_pcap_src_open(&s, path_in(tmp_dir, "missing.pcap"), &o, err) == -ENOENT &&
          strstr(err, "missing.pcap"), "missing file: %s", err);
    const char *bad = path_in(tmp_dir, "bad.pcap");
    write_file(bad, "", 0);
    err[0] = 0;
    CHECK(ofl_pcap_src_open(&s, bad, &o, err) == -EINVAL && err[0], "empty file: %s", err);
    write_file(bad, "this is not a capture file at all, just text\n", 45);
    err[0] = 0;
    CHECK(ofl_pcap_src_open(&s, bad, &o, err) == -EINVAL && err[0], "text file: %s", err);
    err[0] = 0;
    CHECK(ofl_pcap_src_open(&s, tmp_dir, &o, err) < 0 && err[0], "a directory: %s", err);

    /* Every cut of a capture: a cut in the file header is not a capture; any other
     * cut delivers the records before it (as tcpdump and tshark read them), and a cut
     * inside a record is said by ofl_src_error; never a crash. */
    const char *quic = path_in(data_dir, "quic.pcap");
    int wrong = 0, said = 0;
    long cuts[] = {0, 10, 23, 24, 30, 39, 40, 41, 100, 500, 1000, 5000, 20000, 36000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        copy_prefix(quic, bad, cuts[i]);
        int boundary = 0;
        uint64_t whole = whole_records(bad, &boundary);
        err[0] = 0;
        int rc = ofl_pcap_src_open(&s, bad, &o, err);
        if (cuts[i] < 24) {
            wrong += rc != -EINVAL || !err[0];
            continue;
        }
        struct plist l = {0};
        if (rc < 0 || drain(s, &l, NULL) != OFL_SRC_DONE || l.n != whole) {
            wrong++;
        } else {
            const char *e = ofl_src_error(s);
            wrong += boundary ? e != NULL : !e || !strstr(e, "cut short or damaged");
            said += e != NULL;
            if (cuts[i] == 1000) printf("  cut at 1000: %zu packets, %s\n", l.n, e ? e : "-");
        }
        plist_free(&l);
        if (rc == 0) ofl_src_close(s);
    }
    CHECK(wrong == 0 && said >= 9, "truncated captures: the packets before each cut, and "
          "the cut said (%d times), %d wrong", said, wrong);

    /* A record claiming a huge length: nothing before it, and it is said. */
    uint8_t f[24 + 16 + 4];
    copy_prefix(quic, bad, 24);
    FILE *fp = fopen(bad, "rb");
    size_t got = fread(f, 1, 24, fp);
    fclose(fp);
    memset(f + 24, 0, 20);
    uint32_t huge = 0x7FFFFFF0;
    memcpy(f + 24 + 8, &huge, 4);
    memcpy(f + 24 + 12, &huge, 4);
    write_file(bad, f, sizeof f);
    err[0] = 0;
    CHECK(got == 24 && ofl_pcap_src_open(&s, bad, &o, err) == 0 && ofl_src_error(s) &&
              drain(s, NULL, NULL) == OFL_SRC_DONE && ofl_src_packets(s) == 0,
          "record of 2 GB: %s", s && ofl_src_error(s) ? ofl_src_error(s) : err);
    if (s) ofl_src_close(s);
    s = NULL;

    /* Unsupported and raw link types. */
    pcap_t *dead = pcap_open_dead(DLT_LINUX_SLL, 65535);
    pcap_dumper_t *d = pcap_dump_open(dead, bad);
    struct pcap_pkthdr h = {{0, 0}, 20, 20};
    uint8_t pkt[64] = {0x45};
    pcap_dump((u_char *)d, &h, pkt);
    pcap_dump_close(d);
    pcap_close(dead);
    err[0] = 0;
    CHECK(ofl_pcap_src_open(&s, bad, &o, err) == -EPROTONOSUPPORT && strstr(err, "LINUX_SLL"),
          "Linux cooked capture refused: %s", err);

    dead = pcap_open_dead(DLT_RAW, 65535);
    d = pcap_dump_open(dead, bad);
    pcap_dump((u_char *)d, &h, pkt);
    pkt[0] = 0x60;
    h.caplen = h.len = 40;
    pcap_dump((u_char *)d, &h, pkt);
    pcap_dump_close(d);
    pcap_close(dead);
    struct plist l = {0};
    CHECK(read_all(bad, &o, &l, err) == 0 && l.n == 2 && l.len[0] == 34 && l.len[1] == 54 &&
          ofl_get_be16(l.data[0] + 12) == 0x0800 && ofl_get_be16(l.data[1] + 12) == 0x86DD &&
          l.data[0][14] == 0x45, "raw IP gets an Ethernet header");
    plist_free(&l);
}

/* ---- sink from several threads ---------------------------------------------------------- */

struct writer {
    struct ofl_pcap_sink *k;
    int id;
};

static void *write_many(void *arg)
{
    struct writer *w = arg;
    uint8_t frame[100];
    for (int i = 0; i < 1000; i++) {
        memset(frame, w->id, sizeof frame);
        ofl_put_be32(frame, (uint32_t)i);
        struct ofl_pkt p = {frame, 60 + (uint32_t)(i % 40), 100, (uint64_t)i * 1000, 0};
        ofl_pcap_sink_write(w->k, &p);
    }
    return NULL;
}

static void test_sink_threads(void)
{
    char err[256] = "";
    const char *path = path_in(tmp_dir, "threads.pcap");
    struct ofl_pcap_sink *k = NULL;
    ofl_pcap_sink_open(&k, path, 65535, err);
    pthread_t t[4];
    struct writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i].k = k;
        w[i].id = i + 1;
        pthread_create(&t[i], NULL, write_many, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(ofl_pcap_sink_packets(k) == 4000, "4 threads wrote 4000");
    ofl_pcap_sink_close(k);
    struct plist l = {0};
    struct ofl_src_opts o = opts();
    int rc = read_all(path, &o, &l, err);
    int per[5] = {0}, intact = 1;
    for (size_t i = 0; i < l.n; i++) {
        uint8_t id = l.data[i][l.len[i] - 1];
        intact &= id >= 1 && id <= 4 && l.len[i] >= 60;
        if (id >= 1 && id <= 4) per[id]++;
    }
    CHECK(rc == 0 && l.n == 4000 && intact && per[1] == 1000 && per[4] == 1000,
          "records are whole and none is lost");
    plist_free(&l);
}

/* ---- synthetic source ----------------------------------------------------------------- */

static int synth_all(const char *sizes, const char *prefixes, struct ofl_src_opts *o,
                     struct plist *l, char *err)
{
    struct ofl_synth_opts so = {sizes, prefixes};
    struct ofl_src *s = NULL;
    int rc = ofl_synth_src_open(&s, &so, o, err);
    if (rc < 0) return rc;
    rc = drain(s, l, NULL);
    ofl_src_close(s);
    return rc == OFL_SRC_DONE ? 0 : rc;
}

/* 1 if the frame is Ethernet/IPv4/UDP with correct lengths and checksums. */
static int valid_udp(const uint8_t *p, uint32_t len)
{
    uint16_t et, sp, dp;
    uint32_t l3;
    struct ofl_ipv4_info ip;
    if (ofl_parse_eth(p, len, &et, &l3) || et != 0x0800) return 0;
    if (ofl_parse_ipv4(p, len, l3, &ip) || !ofl_ipv4_csum_ok(p + l3, ip.hdr_len)) return 0;
    if (ip.proto != 17 || ofl_parse_udp(p, len, l3 + ip.hdr_len, &sp, &dp)) return 0;
    if (ofl_get_be16(p + l3 + 2) != len - l3) return 0;
    const uint8_t *u = p + l3 + ip.hdr_len;
    uint32_t ulen = ofl_get_be16(u + 4);
    if (ulen != len - l3 - ip.hdr_len || ofl_get_be16(u + 6) == 0) return 0;
    uint64_t sum = ofl_csum_add(0, p + l3 + 12, 8) + 17 + ulen;
    sum = ofl_csum_add(sum, u, ulen);
    return ofl_csum_fold(sum) == 0xFFFF;
}

static void test_synth(void)
{
    char err[256] = "";
    struct ofl_src_opts o = opts();
    o.count = 3000;
    o.seed = 7;
    struct plist a = {0}, b = {0}, c = {0};
    CHECK(synth_all("imix", NULL, &o, &a, err) == 0 && a.n == 3000, "3000 packets: %s", err);
    synth_all("imix", NULL, &o, &b, err);
    int same = a.n == b.n;
    for (size_t i = 0; same && i < a.n; i++) same = same_pkt(&a, i, &b, i) && a.ts[i] == b.ts[i];
    CHECK(same, "the same seed gives the same packets");
    o.seed = 8;
    synth_all("imix", NULL, &o, &c, err);
    size_t differ = 0;
    for (size_t i = 0; i < a.n && i < c.n; i++) differ += !same_pkt(&a, i, &c, i);
    CHECK(differ > 2900, "another seed gives other packets (%zu differ)", differ);
    plist_free(&b);
    plist_free(&c);

    int valid = 1;
    size_t n64 = 0, n576 = 0, n1500 = 0;
    for (size_t i = 0; i < a.n; i++) {
        valid &= valid_udp(a.data[i], a.len[i]);
        n64 += a.len[i] == 64;
        n576 += a.len[i] == 576;
        n1500 += a.len[i] == 1500;
        valid &= ofl_get_be32(a.data[i] + 42 + 4) == i && a.ts[i] == i * 1000;
    }
    CHECK(valid, "every packet is valid Ethernet/IPv4/UDP with sequence number and time");
    CHECK(n64 + n576 + n1500 == a.n && n64 > 1600 && n64 < 1900 && n576 > 850 && n576 < 1150 &&
          n1500 > 150 && n1500 < 350, "imix 7:4:1: %zu/%zu/%zu", n64, n576, n1500);

    /* Parts and loops: part p's packets are packets p, p+n, ... of each pass. */
    for (uint32_t np = 1; np <= 3; np++) {
        size_t total = 0;
        int ok = 1;
        for (uint32_t part = 0; part < np; part++) {
            o.seed = 7;
            o.loops = 2;
            o.part = part;
            o.nparts = np;
            struct plist l = {0};
            synth_all("imix", NULL, &o, &l, err);
            size_t own = (3000 - part + np - 1) / np;
            ok &= l.n == 2 * own;
            for (size_t i = 0; ok && i < l.n; i++) {
                size_t j = part + (i % own) * np, pass = i / own;
                /* Headers equal packet j of the single-core run (but the UDP
                 * checksum); the sequence number carries the pass. */
                ok &= l.len[i] == a.len[j] && !memcmp(l.data[i], a.data[j], 40) &&
                      ofl_get_be32(l.data[i] + 46) == pass * 3000 + j && valid_udp(l.data[i], l.len[i]);
            }
            total += l.n;
            plist_free(&l);
        }
        CHECK(ok && total == 6000, "synth %u parts x 2 loops: %zu packets", np, total);
    }
    plist_free(&a);

    o = opts();
    o.count = 0;
    struct plist l = {0};
    CHECK(synth_all("64", NULL, &o, &l, err) == 0 && l.n == 0, "count 0: no packets");
    o.duration_ns = 20000000;
    CHECK(synth_all("64", NULL, &o, &l, err) == 0 && l.n > 100, "count 0, 20 ms: %zu", l.n);
    plist_free(&l);

    o = opts();
    o.count = 100;
    o.mtu = 1000;
    err[0] = 0;
    CHECK(synth_all("64,1500", NULL, &o, &l, err) == -EINVAL && strstr(err, "mtu"),
          "sizes above the mtu are refused: %s", err);
    o.mtu = MTU;
    CHECK(synth_all("60,100:3", NULL, &o, &l, err) == 0 && l.n == 100, "explicit mix");
    plist_free(&l);
}

static void test_size_mix(void)
{
    char err[256];
    struct ofl_size_mix m;
    CHECK(ofl_size_mix_parse(&m, "imix", err) == 0 && m.n == 3 && m.size[1] == 576 &&
          m.cum[2] == 12, "imix");
    CHECK(ofl_size_mix_parse(&m, "64,128,1500", err) == 0 && m.n == 3 && m.cum[2] == 3,
          "equal weights");
    CHECK(ofl_size_mix_parse(&m, "64:7,576:4,1500:1", err) == 0 && m.cum[0] == 7, "weights");
    CHECK(ofl_size_mix_parse(&m, NULL, err) == 0 && m.n == 1 && m.size[0] == 64, "default");
    static const char *bad[] = {"abc", "10", "64:0", "64,", ",64", "64;128", "64:", "64:7:1",
                                "99999999999999", "70000", "64 ,128", "-64", "64:2000000"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = ofl_size_mix_parse(&m, bad[i], err);
        refused += rc == -EINVAL && err[0];
        if (rc != -EINVAL) printf("  accepted \"%s\"\n", bad[i]);
    }
    CHECK(refused == (int)(sizeof bad / sizeof bad[0]), "bad mixes refused with a message");
    char many[512] = "64";
    for (int i = 0; i < 32; i++) strcat(many, ",64");
    CHECK(ofl_size_mix_parse(&m, many, err) == -EINVAL, "33 sizes refused: %s", err);
}

static const char PREFIX_TEXT[] =
    "1.0.0.0/24\n"
    "  10.1.0.0/16 65000 some other columns\n"
    "192.168.1.77/24,foo\n"
    "8.8.8.8\n"
    "0.0.0.0/0\n"
    "2001:db8::/32\n"
    "::/0\n"
    "# a comment\n"
    "\n"
    "\r\n"
    "garbage\n"
    "1.2.3/24\n"
    "1.2.3.4/33\n"
    "256.1.1.1/8\n"
    "1.2.3.4.5/8\n"
    "1.2.3.4/\n"
    "1.2.3.4/24x\n"
    "1..3.4/8\n"
    "0001.2.3.4/8\n"
    "2001:db8::\n"
    "172.16.0.0/12|tail";   /* no final newline */

static void check_prefix_set(const struct ofl_prefixes *ps, const char *what)
{
    CHECK(ps->n == 6 && ps->v6 == 2 && ps->blank == 3 && ps->bad == 10 && ps->lines == 21,
          "%s: %zu v4, %llu v6, %llu blank, %llu bad, %llu lines", what, ps->n,
          (unsigned long long)ps->v6, (unsigned long long)ps->blank,
          (unsigned long long)ps->bad, (unsigned long long)ps->lines);
    CHECK(ps->n == 6 && ps->v[0].addr == 0x01000000 && ps->v[0].len == 24 &&
          ps->v[1].addr == 0x0A010000 && ps->v[2].addr == 0xC0A80100 && ps->v[2].len == 24 &&
          ps->v[3].addr == 0x08080808 && ps->v[3].len == 32 && ps->v[4].len == 0 &&
          ps->v[5].addr == 0xAC100000 && ps->v[5].len == 12, "%s: values, host bits cleared",
          what);
}

static void test_prefixes(void)
{
    char err[256] = "";
    struct ofl_prefixes ps;
    ofl_prefixes_init(&ps);
    ofl_prefixes_feed(&ps, PREFIX_TEXT, sizeof PREFIX_TEXT - 1);
    ofl_prefixes_finish(&ps);
    check_prefix_set(&ps, "text at once");
    ofl_prefixes_free(&ps);

    /* Fed one byte at a time: lines span feeds. */
    ofl_prefixes_init(&ps);
    for (size_t i = 0; i < sizeof PREFIX_TEXT - 1; i++) ofl_prefixes_feed(&ps, PREFIX_TEXT + i, 1);
    ofl_prefixes_finish(&ps);
    check_prefix_set(&ps, "byte by byte");
    ofl_prefixes_free(&ps);

    const char *txt = path_in(tmp_dir, "prefixes.txt"), *gz = path_in(tmp_dir, "prefixes.gz");
    write_file(txt, PREFIX_TEXT, sizeof PREFIX_TEXT - 1);
    ofl_prefixes_init(&ps);
    CHECK(ofl_prefixes_load(&ps, txt, err) == 0, "load text: %s", err);
    check_prefix_set(&ps, "text file");
    ofl_prefixes_free(&ps);
    gzFile g = gzopen(gz, "wb");
    gzwrite(g, PREFIX_TEXT, sizeof PREFIX_TEXT - 1);
    gzclose(g);
    ofl_prefixes_init(&ps);
    CHECK(ofl_prefixes_load(&ps, gz, err) == 0, "load gz: %s", err);
    check_prefix_set(&ps, "gz file");
    ofl_prefixes_free(&ps);

    /* A long line is garbage, the next one still counts. */
    char *longl = malloc(5000);
    memset(longl, ' ', 5000);
    memcpy(longl + 4000, "1.2.3.0/24\n5.6.7.0/24\n", 22);
    ofl_prefixes_init(&ps);
    ofl_prefixes_feed(&ps, longl, 4022);
    ofl_prefixes_finish(&ps);
    CHECK(ps.n == 1 && ps.bad == 1 && ps.v[0].addr == 0x05060700, "overlong line is garbage");
    ofl_prefixes_free(&ps);
    free(longl);

    /* A cut gzip stream is a read error. */
    FILE *f = fopen(gz, "rb");
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(gz, buf, n / 2);
    ofl_prefixes_init(&ps);
    err[0] = 0;
    int rc = ofl_prefixes_load(&ps, gz, err);
    CHECK(rc == -EIO && err[0], "truncated gz: %d %s", rc, err);
    ofl_prefixes_free(&ps);
    ofl_prefixes_init(&ps);
    CHECK(ofl_prefixes_load(&ps, path_in(tmp_dir, "nope.txt"), err) == -ENOENT, "missing: %s",
          err);
    ofl_prefixes_free(&ps);

    /* Synthetic destinations fall in the file's prefixes. */
    write_file(txt, "10.1.0.0/16\n8.8.8.8 x\nbad\n192.168.1.0/24\n", 41);
    struct ofl_src_opts o = opts();
    o.count = 2000;
    struct plist l = {0};
    CHECK(synth_all("64", txt, &o, &l, err) == 0 && l.n == 2000, "synth with prefixes: %s", err);
    ofl_prefixes_init(&ps);
    ofl_prefixes_load(&ps, txt, err);
    int inside = 1, hit8888 = 0;
    for (size_t i = 0; i < l.n; i++) {
        uint32_t dst = ofl_get_be32(l.data[i] + 30), ok = 0;
        for (size_t k = 0; k < ps.n; k++) {
            uint32_t mask = ps.v[k].len ? ~0u << (32 - ps.v[k].len) : 0;
            ok |= (dst & mask) == ps.v[k].addr;
        }
        inside &= ok;
        hit8888 += dst == 0x08080808;
    }
    CHECK(ps.n == 3 && inside && hit8888 > 500, "destinations inside the prefixes (%d to the /32)", hit8888);
    ofl_prefixes_free(&ps);
    plist_free(&l);
    write_file(txt, "garbage\n::/0\n", 13);
    err[0] = 0;
    CHECK(synth_all("64", txt, &o, &l, err) == -EINVAL && strstr(err, "no IPv4"),
          "a file without IPv4 prefixes is refused: %s", err);
}

static void test_bgp_table(void)
{
    char err[256] = "";
    struct ofl_prefixes ps;
    ofl_prefixes_init(&ps);
    int rc = ofl_prefixes_load(&ps, path_in(data_dir, "bgp-full-table.txt.gz"), err);
    CHECK(rc == 0 && ps.n == 901899 && ps.v6 == 160147 && ps.bad == 0,
          "BGP table: %zu IPv4, %llu IPv6, %llu bad (%s)", ps.n, (unsigned long long)ps.v6,
          (unsigned long long)ps.bad, err);
    ofl_prefixes_free(&ps);
}

/* ---- classify mode ------------------------------------------------------------------------- */

static const char *category(const struct ofl_pkt *p)
{
    uint16_t et, sp, dp;
    uint32_t l3, l4, end;
    uint8_t proto, frag;
    if (ofl_parse_eth(p->data, p->len, &et, &l3) < 0) return "bad_eth";
    if (et == OFL_ETHERTYPE_IPV4) {
        struct ofl_ipv4_info ip;
        if (ofl_parse_ipv4(p->data, p->len, l3, &ip) < 0 ||
            !ofl_ipv4_csum_ok(p->data + l3, ip.hdr_len))
            return "bad_ipv4";
        l4 = l3 + ip.hdr_len;
        end = ip.end;
        proto = ip.proto;
        frag = ip.frag;
    } else if (et == OFL_ETHERTYPE_IPV6) {
        struct ofl_ipv6_info ip;
        if (ofl_parse_ipv6(p->data, p->len, l3, &ip) < 0) return "bad_ipv6";
        l4 = ip.l4_off;
        end = ip.end;
        proto = ip.proto;
        frag = ip.frag;
    } else {
        return "other";
    }
    if (ofl_parse_l4(p->data, end, l4, proto, frag, &sp, &dp) < 0) return "bad_l4";
    return et == OFL_ETHERTYPE_IPV4 ? "valid_ipv4" : "valid_ipv6";
}

/* One category per packet, one packet per line. */
static int classify(const char *path)
{
    char err[256] = "";
    struct ofl_src_opts o = opts();
    struct ofl_src *s = NULL;
    int rc = ofl_pcap_src_open(&s, path, &o, err);
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    uint8_t *bufs = malloc(o.mtu);
    struct ofl_pkt p;
    /* Each packet alone in an exactly sized heap block: ASan sees any overread. */
    while (ofl_src_next(s, &p, bufs, 1) == 1) {
        uint8_t *copy = malloc(p.len ? p.len : 1);
        if (p.len) memcpy(copy, p.data, p.len);
        p.data = copy;
        printf("%s\n", category(&p));
        free(copy);
    }
    /* records cut by the snap length are never delivered: counted, said on stderr */
    fprintf(stderr, "cut short: %llu\n", (unsigned long long)ofl_src_cut(s));
    free(bufs);
    ofl_src_close(s);
    return 0;
}

/* A source kind "fake", as a library adds one: it says it was asked, with the common
 * options the core read. */
static int fake_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                     const struct ofl_src_opts *o, char *errbuf)
{
    (void)a;
    *s = NULL;
    snprintf(errbuf, 256, "fake %s part %u of %u, loops %llu", name, (unsigned)o->part,
             (unsigned)o->nparts, (unsigned long long)o->loops);
    return -EDOM;
}

/* ofl_source_open hands a kind it does not know itself to the program's libraries'
 * kinds (a->src_kinds), and refuses one that no library adds. */
static void test_source_kinds(void)
{
    const struct ofl_src_kind kinds[] = { { "fake", fake_open, NULL }, { NULL, NULL, NULL } };
    char *argv[] = { "test", "--window", "/none", "--opt", "rx.kind=fake", "--opt",
                     "rx.loops=3", "--opt", "tx.kind=other", NULL };
    struct ofl_args a;
    struct ofl_src *s = NULL;
    CHECK(ofl_args_parse(&a, 9, argv, "nic") == 0, "options parsed");
    CHECK(ofl_source_open(&s, &a, "rx", 1, 2, 2048) == -EINVAL && !s,
          "kind fake without the library's kinds: refused");
    a.src_kinds = kinds;
    CHECK(ofl_source_open(&s, &a, "rx", 1, 2, 2048) == -EDOM && !s,
          "kind fake: the library's open function runs");
    CHECK(ofl_source_open(&s, &a, "tx", 0, 1, 2048) == -EINVAL && !s,
          "kind other, which no library adds: refused");
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "classify")) return classify(argv[2]);
    if (argc != 3) {
        fprintf(stderr, "usage: test_ports DATA_DIR TMP_DIR | test_ports classify FILE\n");
        return 2;
    }
    data_dir = argv[1];
    tmp_dir = argv[2];
    test_pcap_read("tls_ciphers.pcap", 1095);
    test_pcap_read("quic.pcap", 130);
    test_pcap_round_trip();
    test_pcap_loops_parts();
    test_pcap_mtu();
    test_pcap_rate_duration();
    test_pcap_bad_files();
    test_pcap_sink_whole_records();
    test_sink_threads();
    test_synth();
    test_size_mix();
    test_prefixes();
    test_bgp_table();
    test_source_kinds();
    return CHECK_DONE();
}
