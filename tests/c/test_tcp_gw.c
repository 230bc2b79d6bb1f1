/* The TCP gateway's framing (tcp_gw.h): cutting a stream into requests (forward,
 * wait, answer here: parse errors, quit, requests longer than a datagram) at every
 * byte offset, the replies it writes itself, and reply reassembly (in order, out
 * of order, header-only, duplicates, bad counts, too large).
 *   test_tcp_gw      run the tests; prints its checks and "N failure(s)" */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/mcproto.h"
#include "offlow/tcp_gw.h"

#define MAXREQ 1392u

/* `s` in a buffer of its own exact size, so ASan sees a read past its end. */
static uint8_t *dup_exact(const void *s, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    if (n) memcpy(b, s, n);
    return b;
}

static int cut(const void *s, size_t n, enum ofl_mc_proto proto, struct ofl_tcp_gw_cut *c)
{
    uint8_t *b = dup_exact(s, n);
    int act = ofl_tcp_gw_cut(b, n, proto, MAXREQ, c);
    free(b);
    return act;
}

static size_t bin(uint8_t *out, uint8_t op, const char *key, size_t vlen, uint32_t opaque)
{
    static uint8_t value[70000];
    uint8_t extras[8] = {0};
    int store = op == OFL_MC_OP_SET || op == 0x11;
    ssize_t n = ofl_mc_write_request(out, 80000, op, opaque, 0, store ? extras : NULL,
                                     store ? 8 : 0, key, strlen(key), value, vlen);
    return n < 0 ? 0 : (size_t)n;
}

static void test_forward_every_prefix(void)
{
    static const char *reqs[] = {"get a b c\r\n", "set k 1 2 5\r\nhello\r\n", "delete k\r\n",
                                 "version\r\n", "gets k\n"};
    int bad = 0;
    for (size_t r = 0; r < sizeof reqs / sizeof *reqs; r++) {
        size_t n = strlen(reqs[r]);
        for (size_t i = 0; i < n; i++) {
            struct ofl_tcp_gw_cut c;
            if (cut(reqs[r], i, OFL_MC_TEXT, &c) != OFL_GW_NEED) bad++;
        }
        struct ofl_tcp_gw_cut c;
        if (cut(reqs[r], n, OFL_MC_TEXT, &c) != OFL_GW_FORWARD || c.len != n) bad++;
    }
    uint8_t b[2000];
    size_t n = bin(b, OFL_MC_OP_SET, "key", 300, 7);
    for (size_t i = 0; i < n; i++) {
        struct ofl_tcp_gw_cut c;
        if (cut(b, i, i ? OFL_MC_BINARY : OFL_MC_ANY, &c) != OFL_GW_NEED) bad++;
    }
    struct ofl_tcp_gw_cut c;
    CHECK(bad == 0 && cut(b, n, OFL_MC_ANY, &c) == OFL_GW_FORWARD && c.len == n,
          "every prefix of a request waits, the whole one is forwarded");
    /* two pipelined requests: only the first is cut */
    uint8_t two[64];
    memcpy(two, "get x\r\nget y\r\n", 14);
    CHECK(cut(two, 14, OFL_MC_TEXT, &c) == OFL_GW_FORWARD && c.len == 7,
          "pipelined requests are cut one at a time");
}

static void test_quit(void)
{
    struct ofl_tcp_gw_cut c;
    uint8_t b[64], out[128];
    CHECK(cut("quit\r\n", 6, OFL_MC_TEXT, &c) == OFL_GW_ANSWER && c.close && c.len == 6 &&
              ofl_tcp_gw_answer(&c, out, sizeof out) == 0,
          "text quit: closed here, nothing said");
    size_t n = bin(b, OFL_MC_OP_QUIT, "", 0, 0x1234);
    ssize_t w;
    struct ofl_mc_res res;
    CHECK(cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.close &&
              (w = ofl_tcp_gw_answer(&c, out, sizeof out)) == 24 &&
              ofl_mc_parse_response(out, (size_t)w, &res, NULL) == 24 && res.opcode == 7 &&
              res.status == 0 && res.opaque == 0x1234,
          "binary QUIT: answered (status 0, opaque echoed), then closed");
    n = bin(b, OFL_MC_OP_QUITQ, "", 0, 1);
    CHECK(cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.close &&
              ofl_tcp_gw_answer(&c, out, sizeof out) == 0,
          "binary QUITQ: closed silently");
}

static void test_errors(void)
{
    struct ofl_tcp_gw_cut c;
    uint8_t out[128];
    ssize_t w;
    CHECK(cut("bogus\r\nget a\r\n", 14, OFL_MC_TEXT, &c) == OFL_GW_ANSWER && !c.close &&
              c.len == 7 && (w = ofl_tcp_gw_answer(&c, out, sizeof out)) == 7 &&
              !memcmp(out, "ERROR\r\n", 7),
          "unknown text command: ERROR, only its line consumed");
    uint8_t magic[24];
    memset(magic, 0x42, sizeof magic);
    CHECK(cut(magic, sizeof magic, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.close &&
              ofl_tcp_gw_answer(&c, out, sizeof out) == 0,
          "bad magic on a binary connection: closed without a reply");
    uint8_t b[80000];
    size_t n = bin(b, 0x5F, "", 0, 9);
    memcpy(b + n, "zz", 2);
    b[11] = 2;   /* body of 2 bytes */
    CHECK(cut(b, n + 2, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && !c.close && c.len == 26 &&
              (w = ofl_tcp_gw_answer(&c, out, sizeof out)) > 0 &&
              ofl_mc_parse_response(out, (size_t)w, &(struct ofl_mc_res){0}, NULL) == w,
          "unknown opcode: UNKNOWN_COMMAND, its body skipped");
    n = bin(b, 0x5F, "", 0, 9);
    b[8] = 0, b[9] = 1, b[10] = 0, b[11] = 0;   /* body of 65536 bytes, none received */
    CHECK(cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.len == 24 && c.skip == 65536,
          "an error's unreceived body is skipped as it arrives");
    char line[2000];
    memset(line, 'a', sizeof line);
    CHECK(cut(line, MAXREQ, OFL_MC_TEXT, &c) == OFL_GW_ANSWER && c.close &&
              c.err == OFL_MC_ELINE && (w = ofl_tcp_gw_answer(&c, out, sizeof out)) > 0 &&
              !memcmp(out, "CLIENT_ERROR line too long\r\n", (size_t)w),
          "a text line longer than a datagram: CLIENT_ERROR line too long, close");
    CHECK(cut(line, MAXREQ - 1, OFL_MC_TEXT, &c) == OFL_GW_NEED,
          "a line one byte shorter still waits for its end");
}

static void test_too_large(void)
{
    struct ofl_tcp_gw_cut c;
    uint8_t out[128];
    static uint8_t b[80000];
    struct ofl_mc_res res;
    ssize_t w;
    /* binary: announced by the header, body not received */
    size_t n = bin(b, OFL_MC_OP_SET, "big", 1500, 77);
    CHECK(cut(b, 30, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && !c.close && c.len == 30 &&
              c.skip == n - 30 && c.err == OFL_MC_E2BIG &&
              (w = ofl_tcp_gw_answer(&c, out, sizeof out)) > 0 &&
              ofl_mc_parse_response(out, (size_t)w, &res, NULL) == w &&
              res.status == OFL_MC_ST_E2BIG && res.opaque == 77,
          "binary SET longer than a datagram: E2BIG at its header, the rest skipped");
    /* binary: a value under max_request but the whole over it (long key) */
    char key[251];
    memset(key, 'k', 250);
    key[250] = 0;
    n = bin(b, OFL_MC_OP_SET, key, MAXREQ - 100, 78);
    CHECK(n > MAXREQ && cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.len == n &&
              c.skip == 0 && c.err == OFL_MC_E2BIG,
          "binary SET whose key pushes it past a datagram: E2BIG");
    n = bin(b, OFL_MC_OP_SET, "k", MAXREQ - 33, 79);
    CHECK(n == MAXREQ && cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_FORWARD,
          "binary SET of exactly max_request bytes is forwarded");
    n = bin(b, 0x11, "big", 70000, 80);   /* SETQ over the parser's value limit */
    CHECK(cut(b, n, OFL_MC_BINARY, &c) == OFL_GW_ANSWER && c.err == OFL_MC_E2BIG &&
              c.len == n && ofl_tcp_gw_answer(&c, out, sizeof out) > 0,
          "quiet binary SETQ too large: still answered E2BIG (as memcached)");
    /* text: announced by the command line */
    const char *hdr = "set big 0 0 1500\r\n";
    size_t hl = strlen(hdr);
    CHECK(cut(hdr, hl, OFL_MC_TEXT, &c) == OFL_GW_ANSWER && c.len == hl && c.skip == 1502 &&
              (w = ofl_tcp_gw_answer(&c, out, sizeof out)) > 0 &&
              !memcmp(out, "SERVER_ERROR object too large for cache\r\n", (size_t)w),
          "text set longer than a datagram: SERVER_ERROR object too large for cache");
    hdr = "set big 0 0 1500 noreply\r\n";
    hl = strlen(hdr);
    CHECK(cut(hdr, hl, OFL_MC_TEXT, &c) == OFL_GW_ANSWER && c.skip == 1502 &&
              ofl_tcp_gw_answer(&c, out, sizeof out) == 0,
          "text noreply set too large: skipped silently (as memcached)");
}

/* A reply datagram: frame header and `n` payload bytes of `fill`. */
static size_t dgram(uint8_t *d, uint16_t rid, uint16_t seq, uint16_t count, uint8_t fill,
                    size_t n)
{
    ofl_mc_udp_write(d, rid, seq, count);
    memset(d + 8, fill, n);
    return 8 + n;
}

static void test_reasm(void)
{
    struct ofl_tcp_gw_reasm r;
    uint8_t d[2000], out[8000];
    ofl_tcp_gw_reasm_init(&r, 1 << 20);
    size_t n = dgram(d, 1, 0, 1, 'a', 100);
    CHECK(ofl_tcp_gw_reasm_add(&r, d, n) == 1 && ofl_tcp_gw_reasm_len(&r) == 100,
          "a single datagram is a whole reply");
    ofl_tcp_gw_reasm_reset(&r);
    n = dgram(d, 1, 0, 0, 0, 0);
    CHECK(ofl_tcp_gw_reasm_add(&r, d, n) == 1 && ofl_tcp_gw_reasm_len(&r) == 0,
          "a header-only datagram (count 0) is an empty reply");
    ofl_tcp_gw_reasm_reset(&r);
    int ok = 1;
    const uint16_t order[3] = {2, 0, 1};
    for (int i = 0; i < 3; i++) {
        n = dgram(d, 5, order[i], 3, (uint8_t)('x' + order[i]), 1000u + order[i]);
        int rc = ofl_tcp_gw_reasm_add(&r, d, n);
        if (rc != (i == 2)) ok = 0;
        if (i == 0) {
            if (ofl_tcp_gw_reasm_add(&r, d, n) != -EPROTO) ok = 0;   /* duplicate */
            size_t m = dgram(d, 5, 1, 4, 'q', 10);
            if (ofl_tcp_gw_reasm_add(&r, d, m) != -EPROTO) ok = 0;   /* count changed */
            m = dgram(d, 5, 3, 3, 'q', 10);
            if (ofl_tcp_gw_reasm_add(&r, d, m) != -EPROTO) ok = 0;   /* seq >= count */
            if (ofl_tcp_gw_reasm_add(&r, d, 5) != -EPROTO) ok = 0;   /* short */
        }
    }
    size_t len = ofl_tcp_gw_reasm_len(&r);
    ofl_tcp_gw_reasm_copy(&r, out);
    int inorder = len == 3003 && out[0] == 'x' && out[999] == 'x' && out[1000] == 'y' &&
                  out[2000] == 'y' && out[2001] == 'z' && out[3002] == 'z';
    CHECK(ok && inorder, "three datagrams out of order: reassembled in seq order; "
                         "duplicates, changed counts, bad seqs and short ones refused");
    ofl_tcp_gw_reasm_reset(&r);
    ofl_tcp_gw_reasm_init(&r, 1500);
    n = dgram(d, 1, 0, 2, 'a', 1000);
    int a = ofl_tcp_gw_reasm_add(&r, d, n);
    n = dgram(d, 1, 1, 2, 'b', 1000);
    CHECK(a == 0 && ofl_tcp_gw_reasm_add(&r, d, n) == -E2BIG, "a reply past its limit: E2BIG");
    ofl_tcp_gw_reasm_reset(&r);
    n = dgram(d, 1, 0, 60000, 'a', 10);
    CHECK(ofl_tcp_gw_reasm_add(&r, d, n) == -E2BIG && r.part == NULL,
          "an absurd count is refused before anything is allocated for it");
    ofl_tcp_gw_reasm_reset(&r);
}

int main(void)
{
    test_forward_every_prefix();
    test_quit();
    test_errors();
    test_too_large();
    test_reasm();
    return CHECK_DONE();
}
