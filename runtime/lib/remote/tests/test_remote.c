/* Tests of runtime/lib/remote over UCX on 127.0.0.1 (both sides in this process, each
 * with its own UCX context, stepped in turn, closed at once on two threads): the
 * handshake proof (remote_auth.h); a link that comes up with the right secret, a peer
 * with a wrong one refused and nothing it sends delivered (remote_link.h); rings
 * carried both ways in order with their contents, lengths and close, under
 * backpressure; a bad message refused; a peer that goes away noticed
 * (remote_bridge.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "offlow/remote_auth.h"
#include "offlow/remote_bridge.h"
#include "offlow/remote_link.h"

#include <arpa/inet.h>
#include <ucp/api/ucp.h>

static const uint8_t SECRET[] = "correct horse battery staple";
static const uint8_t OTHER[] = "correct horse battery stable";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void test_auth(void)
{
    uint8_t n1[OFL_AUTH_NONCE], n2[OFL_AUTH_NONCE], mac[OFL_AUTH_MAC];
    CHECK(ofl_auth_nonce(n1) == 0 && ofl_auth_nonce(n2) == 0 && memcmp(n1, n2, sizeof n1),
          "two nonces differ");
    CHECK(ofl_auth_prove(SECRET, sizeof SECRET, OFL_AUTH_CLIENT, n1, mac) == 0, "prove");
    CHECK(ofl_auth_check(SECRET, sizeof SECRET, OFL_AUTH_CLIENT, n1, mac) == 0,
          "the proof checks");
    CHECK(ofl_auth_check(OTHER, sizeof OTHER, OFL_AUTH_CLIENT, n1, mac) == -EACCES,
          "another secret's check refuses it");
    CHECK(ofl_auth_check(SECRET, sizeof SECRET, OFL_AUTH_SERVER, n1, mac) == -EACCES,
          "the client's proof does not answer for the server");
    CHECK(ofl_auth_check(SECRET, sizeof SECRET, OFL_AUTH_CLIENT, n2, mac) == -EACCES,
          "a proof of one nonce does not answer another");
    CHECK(ofl_auth_prove(SECRET, 8, OFL_AUTH_CLIENT, n1, mac) == -EINVAL,
          "a secret under 16 bytes is refused");
}

/* A handler that records kinds (for links without a bridge). */
struct seen {
    int n;
    uint32_t kind;
};
static void record(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                   size_t len)
{
    (void)hdr, (void)hlen, (void)data, (void)len;
    struct seen *s = arg;
    s->n++;
    s->kind = kind;
}

/* Step both links until `a` reaches `sa` and `b` reaches `sb` (a generous bound). */
static bool until(struct ofl_link *a, enum ofl_link_state sa, struct ofl_link *b,
                  enum ofl_link_state sb)
{
    double end = now() + 30;
    while (now() < end) {
        enum ofl_link_state x = ofl_link_progress(a), y = ofl_link_progress(b);
        if (x == sa && y == sb) return true;
    }
    return false;
}

static void *close_link(void *l)
{
    ofl_link_close(l);
    return NULL;
}

/* Close `a` on a thread of its own while `b` closes here: a close flushes what its end
 * sent, which needs the other end stepped (closed one after the other, in one thread,
 * the first waits out its flush bound, a second, for nothing). */
static void close_both(struct ofl_link *a, struct ofl_link *b)
{
    pthread_t t;
    if (pthread_create(&t, NULL, close_link, a) != 0) {
        ofl_link_close(a);
        ofl_link_close(b);
        return;
    }
    ofl_link_close(b);
    pthread_join(t, NULL);
}

/* A handler that keeps what arrives: each message's kind, size and a checksum of its
 * bytes, in order. */
struct log {
    int n;
    uint32_t kind[8];
    size_t len[8];
    uint64_t sum[8];
};
static void keep(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                 size_t len)
{
    (void)hdr, (void)hlen;
    struct log *g = arg;
    if (g->n >= 8) return;
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++) sum = sum * 31 + ((const uint8_t *)data)[i];
    g->kind[g->n] = kind;
    g->len[g->n] = len;
    g->sum[g->n++] = sum;
}

/* Bulk messages (rendezvous) cross whole, and in order with the eager messages sent
 * around them: the one after a bulk message waits for its bytes. */
static void test_bulk_messages(void)
{
    struct log cli_got = {0}, srv_got = {0};
    struct ofl_link *srv = NULL, *cli = NULL;
    char err[256] = "";
    int rc = ofl_link_listen(&srv, "127.0.0.1", 0, SECRET, sizeof SECRET, keep, &srv_got, err,
                             sizeof err);
    CHECK(rc == 0, "listen (%s)", err);
    if (rc) return;
    rc = ofl_link_connect(&cli, "127.0.0.1", ofl_link_port(srv), SECRET, sizeof SECRET, keep,
                          &cli_got, err, sizeof err);
    CHECK(rc == 0 && until(cli, OFL_LINK_UP, srv, OFL_LINK_UP), "up (%s)", err);
    size_t sizes[2] = {3u << 20, 1000003};
    uint64_t want[2] = {0, 0};
    CHECK(ofl_link_send(cli, OFL_LINK_KIND_USER + 1, NULL, 0, "first", 5) == 0, "an eager one");
    for (int k = 0; k < 2; k++) {
        uint8_t *b = malloc(sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) b[i] = (uint8_t)(i * 7 + k + (i >> 13));
        for (size_t i = 0; i < sizes[k]; i++) want[k] = want[k] * 31 + b[i];
        uint32_t h = (uint32_t)k;
        CHECK(ofl_link_send_bulk(cli, OFL_LINK_KIND_USER + 2, &h, sizeof h, b, sizes[k]) == 0,
              "bulk %d sent", k);
        CHECK(ofl_link_send(cli, OFL_LINK_KIND_USER + 3, NULL, 0, "after", 5) == 0, "eager after");
    }
    double end = now() + 30;
    while (srv_got.n < 5 && now() < end) {
        ofl_link_progress(cli);
        ofl_link_progress(srv);
    }
    CHECK(srv_got.n == 5, "five messages arrived (%d)", srv_got.n);
    uint32_t kinds[5] = {1, 2, 3, 2, 3};
    for (int i = 0; i < 5 && i < srv_got.n; i++)
        CHECK(srv_got.kind[i] == OFL_LINK_KIND_USER + kinds[i], "message %d in order", i);
    CHECK(srv_got.len[1] == sizes[0] && srv_got.sum[1] == want[0] &&
          srv_got.len[3] == sizes[1] && srv_got.sum[3] == want[1],
          "every byte of both bulk messages");
    CHECK(ofl_link_bulk_in(srv) == 2, "two came by rendezvous (%llu)",
          (unsigned long long)ofl_link_bulk_in(srv));
    CHECK(ofl_link_send_bulk(cli, OFL_LINK_KIND_USER, NULL, 0, malloc(16),
                             OFL_LINK_BULK_MAX + 1) == -ENOTCONN, "a message too large is refused");
    close_both(cli, srv);
}

static void test_handshake(void)
{
    char err[256] = "";
    struct seen srv_seen = {0}, cli_seen = {0};
    struct ofl_link *srv, *bad, *cli;
    int rc = ofl_link_listen(&srv, "127.0.0.1", 0, SECRET, sizeof SECRET, record, &srv_seen,
                             err, sizeof err);
    CHECK(rc == 0 && ofl_link_port(srv) != 0, "listen on a free port (%d %s)", rc, err);
    if (rc) return;
    uint16_t port = ofl_link_port(srv);
    rc = ofl_link_connect(&bad, "127.0.0.1", port, OTHER, sizeof OTHER, record, &cli_seen, err,
                          sizeof err);
    CHECK(rc == 0, "a client with another secret connects at the UCX level (%s)", err);
    CHECK(until(bad, OFL_LINK_FAILED, srv, OFL_LINK_WAITING), "it is refused");
    CHECK(ofl_link_refused(srv) == 1, "the refusal is counted (%llu)",
          (unsigned long long)ofl_link_refused(srv));
    CHECK(strstr(ofl_link_error(bad), "refused") != NULL, "its error says so: %s",
          ofl_link_error(bad));
    CHECK(ofl_link_send(bad, OFL_LINK_KIND_USER, NULL, 0, "x", 1) == -EPIPE,
          "it cannot send");
    ofl_link_close(bad);
    CHECK(srv_seen.n == 0, "nothing from it reached the server's handler");

    CHECK(ofl_link_connect(&bad, "127.0.0.1", port, (const uint8_t *)"short", 5, record,
                           &cli_seen, err, sizeof err) == -EINVAL && bad == NULL,
          "a client without a usable secret does not start: %s", err);

    rc = ofl_link_connect(&cli, "127.0.0.1", port, SECRET, sizeof SECRET, record, &cli_seen,
                          err, sizeof err);
    CHECK(rc == 0 && until(cli, OFL_LINK_UP, srv, OFL_LINK_UP),
          "with the secret both ends come up after a refusal");
    uint32_t v = 7;
    CHECK(ofl_link_send(cli, OFL_LINK_KIND_USER + 3, &v, 4, "hello", 5) == 0, "send");
    double end = now() + 30;
    while (srv_seen.n == 0 && now() < end) ofl_link_progress(srv);
    CHECK(srv_seen.n == 1 && srv_seen.kind == OFL_LINK_KIND_USER + 3,
          "the server's handler gets it (%d)", srv_seen.n);
    /* the client closes on a thread of its own while the server is stepped here (its
     * close flushes first, which needs the server stepped) */
    pthread_t t;
    bool threaded = pthread_create(&t, NULL, close_link, cli) == 0;
    if (!threaded) ofl_link_close(cli);
    end = now() + 30;
    while (ofl_link_progress(srv) != OFL_LINK_FAILED && now() < end) {
    }
    if (threaded) pthread_join(t, NULL);
    CHECK(ofl_link_progress(srv) == OFL_LINK_FAILED &&
              (strstr(ofl_link_error(srv), "lost") || strstr(ofl_link_error(srv), "answering")),
          "the server notices the peer gone: %s", ofl_link_error(srv));
    ofl_link_close(srv);
}

/* A ring in its own 64-byte aligned memory, like one in a window. */
static void *ring_mem(uint32_t size, uint32_t entry, uint32_t batch, uint32_t data_off,
                      size_t *len)
{
    *len = ofl_ring_mem_size(size, entry);
    void *m = aligned_alloc(64, *len);
    if (m) ofl_ring_format(m, *len, size, entry, batch, data_off);
    return m;
}

struct pair {
    struct ofl_link *srv, *cli;
    struct ofl_bridge bs, bc;
};

/* A bridged pair over loopback; `cli_send_fail`: the client's link loses that user
 * message (the test hook OFFLOW_REMOTE_TEST_SEND_FAIL; NULL: none). */
static int connect_pair_failing(struct pair *p, const char *cli_send_fail)
{
    char err[256] = "";
    memset(p, 0, sizeof *p);
    ofl_bridge_init(&p->bs, NULL, 16);
    ofl_bridge_init(&p->bc, NULL, 16);
    if (ofl_link_listen(&p->srv, "127.0.0.1", 0, SECRET, sizeof SECRET, ofl_bridge_on_msg,
                        &p->bs, err, sizeof err))
        return -1;
    if (cli_send_fail) setenv("OFFLOW_REMOTE_TEST_SEND_FAIL", cli_send_fail, 1);
    int rc = ofl_link_connect(&p->cli, "127.0.0.1", ofl_link_port(p->srv), SECRET,
                              sizeof SECRET, ofl_bridge_on_msg, &p->bc, err, sizeof err);
    unsetenv("OFFLOW_REMOTE_TEST_SEND_FAIL");
    if (rc) return -1;
    p->bs.link = p->srv;
    p->bc.link = p->cli;
    /* generous: a loaded machine may pause this process (test_silent_peer sets less) */
    ofl_link_set_silence(p->srv, 10000);
    ofl_link_set_silence(p->cli, 10000);
    return until(p->cli, OFL_LINK_UP, p->srv, OFL_LINK_UP) ? 0 : -1;
}

static int connect_pair(struct pair *p)
{
    return connect_pair_failing(p, NULL);
}

static void close_pair(struct pair *p)
{
    close_both(p->cli, p->srv);
    ofl_bridge_free(&p->bs);
    ofl_bridge_free(&p->bc);
}

/* Host ring A (host -> device) and ring B (device -> host), each a pair of rings of the
 * same layout, one per side; the device copies what A brings into B. */
static void test_rings(void)
{
    enum { N = 20000, SIZE = 64, ENTRY = 96, DOFF = 16 };
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(SIZE, ENTRY, 8, DOFF, &len), *a_dev = ring_mem(SIZE, ENTRY, 8, DOFF, &len);
    void *b_dev = ring_mem(SIZE, ENTRY, 8, DOFF, &len), *b_host = ring_mem(SIZE, ENTRY, 8, DOFF, &len);
    CHECK(ofl_bridge_add(&p.bc, a_host, len, true) == 0 && ofl_bridge_add(&p.bs, a_dev, len, false) == 0 &&
          ofl_bridge_add(&p.bc, b_host, len, false) == 0 && ofl_bridge_add(&p.bs, b_dev, len, true) == 0,
          "both sides carry rings A and B");
    struct ofl_ring prod, dev_in, dev_out, cons;
    ofl_ring_attach(&prod, a_host, len);
    ofl_ring_attach(&dev_in, a_dev, len);
    ofl_ring_attach(&dev_out, b_dev, len);
    ofl_ring_attach(&cons, b_host, len);
    uint32_t pushed = 0, got = 0, bad = 0, full_seen = 0, most = 0;
    double end = now() + 120;
    while (!ofl_ring_finished(&cons) && now() < end) {
        uint32_t f = ofl_ring_free(&prod);   /* the host's producer */
        if (!f) full_seen++;
        if (pushed - got > most) most = pushed - got;
        uint32_t k = 0;
        for (; k < f && pushed + k < N && k < 5; k++) {
            uint8_t *e = ofl_ring_slot(&prod, k);
            uint32_t i = pushed + k, plen = i % (ENTRY - DOFF + 1);
            ((struct ofl_entry_hdr *)e)->len = (uint16_t)plen;
            memcpy(e + 8, &i, 4);
            memset(e + DOFF, (int)(i & 0xff), plen);
        }
        if (k) ofl_ring_commit(&prod, k);
        pushed += k;
        if (pushed == N && !prod.shm->closed) ofl_ring_close(&prod);
        /* the device: A in, B out */
        uint32_t r = ofl_ring_ready(&dev_in), w = ofl_ring_free(&dev_out);
        uint32_t m = r < w ? r : w;
        for (uint32_t i = 0; i < m; i++)
            memcpy(ofl_ring_slot(&dev_out, i), ofl_ring_peek(&dev_in, i), ENTRY);
        if (m) {
            ofl_ring_commit(&dev_out, m);
            ofl_ring_release(&dev_in, m);
        }
        if (ofl_ring_finished(&dev_in) && !dev_out.shm->closed) ofl_ring_close(&dev_out);
        /* the host's consumer: every entry in order, with its bytes; it takes nothing
         * until the producer found every ring on the way full */
        uint32_t c = full_seen ? ofl_ring_ready(&cons) : 0;
        for (uint32_t i = 0; i < c; i++) {
            const uint8_t *e = ofl_ring_peek(&cons, i);
            uint32_t idx, plen = e ? ((const struct ofl_entry_hdr *)e)->len : 0;
            if (!e) { bad++; continue; }
            memcpy(&idx, e + 8, 4);
            bool ok = idx == got + i && plen == idx % (ENTRY - DOFF + 1);
            for (uint32_t j = 0; ok && j < plen; j++) ok = e[DOFF + j] == (idx & 0xff);
            if (!ok) bad++;
        }
        if (c) ofl_ring_release(&cons, c);
        got += c;
        if (ofl_bridge_poll(&p.bc) < 0 || ofl_bridge_poll(&p.bs) < 0) break;
    }
    CHECK(got == N && bad == 0, "%u of %u entries came back through both rings, %u wrong", got,
          N, bad);
    CHECK(ofl_ring_finished(&cons), "the close crossed both ways after the last entry");
    CHECK(full_seen > 0 && most <= 4 * SIZE,
          "the producer met backpressure from the far consumer: at most %u entries on "
          "the way (4 rings of %u)", most, SIZE);
    CHECK(p.bc.msgs_out < N, "entries went in batches (%llu messages)",
          (unsigned long long)p.bc.msgs_out);
    CHECK(p.bc.bad == 0 && p.bs.bad == 0, "no bad message");
    close_pair(&p);
    free(a_host), free(a_dev), free(b_dev), free(b_host);
}

/* A message the rules refuse fails the bridge and is not applied. */
static void test_bad_message(void)
{
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(8, 64, 1, 0, &len), *a_dev = ring_mem(8, 64, 1, 0, &len);
    ofl_bridge_add(&p.bc, a_host, len, true);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    uint32_t hdr[4] = {0, 9, 0, 0};   /* 9 entries: beyond the 8 the ring holds */
    uint8_t body[9 * 64] = {0};
    CHECK(ofl_link_send(p.cli, OFL_LINK_KIND_USER, hdr, sizeof hdr, body, sizeof body) == 0,
          "a peer sends more entries than the credit");
    int rc = 0;
    double end = now() + 30;
    while (rc == 0 && now() < end) rc = ofl_bridge_poll(&p.bs);
    struct ofl_ring dev;
    ofl_ring_attach(&dev, a_dev, len);
    CHECK(rc == -EBADMSG && strstr(p.bs.err, "beyond the credit") && ofl_ring_ready(&dev) == 0,
          "refused, nothing committed: %s", p.bs.err);
    close_pair(&p);
    free(a_host), free(a_dev);
}

/* An entry of a local ring whose len is past its entry (a producer that wrote it
 * wrong) stops the bridge that would send it, which breaks the ring there (its
 * producer stops instead of waiting for room), before anything of it is sent. */
static void test_bad_len_out(void)
{
    enum { ENTRY = 64, DOFF = 16 };
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(8, ENTRY, 1, DOFF, &len), *a_dev = ring_mem(8, ENTRY, 1, DOFF, &len);
    ofl_bridge_add(&p.bc, a_host, len, true);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    struct ofl_ring prod, dev;
    ofl_ring_attach(&prod, a_host, len);
    ofl_ring_attach(&dev, a_dev, len);
    ((struct ofl_entry_hdr *)ofl_ring_slot(&prod, 0))->len = ENTRY - DOFF;       /* fits */
    ((struct ofl_entry_hdr *)ofl_ring_slot(&prod, 1))->len = ENTRY - DOFF + 1;   /* does not */
    ofl_ring_commit(&prod, 2);
    int rc = ofl_bridge_poll(&p.bc);
    CHECK(rc == -EBADMSG && strstr(p.bc.err, "entry 1 says 49 bytes"),
          "the sending bridge stops on it: %d, %s", rc, p.bc.err);
    CHECK(ofl_ring_broken(&prod), "and breaks the ring for its producer");
    for (int k = 0; k < 50; k++) (void)ofl_bridge_poll(&p.bs);
    CHECK(ofl_ring_ready(&dev) == 0 && p.bs.entries_in == 0, "nothing of it crossed");
    close_pair(&p);
    free(a_host), free(a_dev);
}

/* The client's link fails (its second message lost: the test hook) while it carries
 * ring A (a local producer's) and ring B (a local consumer's): the bridge breaks both,
 * A as its consumer (the producer stops instead of waiting for room), B as its
 * producer (the consumer takes the 3 entries that came, then stops); an entry
 * committed after it is never sent (A's producer counts it), those handed to the link
 * are the bridge's. */
static void test_link_failure_breaks_rings(void)
{
    enum { ENTRY = 64 };
    struct pair p;
    CHECK(connect_pair_failing(&p, "2") == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(8, ENTRY, 1, 0, &len), *a_dev = ring_mem(8, ENTRY, 1, 0, &len);
    void *b_dev = ring_mem(8, ENTRY, 1, 0, &len), *b_host = ring_mem(8, ENTRY, 1, 0, &len);
    ofl_bridge_add(&p.bc, a_host, len, true);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    ofl_bridge_add(&p.bc, b_host, len, false);
    ofl_bridge_add(&p.bs, b_dev, len, true);
    struct ofl_ring prod, dev_in, dev_out, cons;
    ofl_ring_attach(&prod, a_host, len);
    ofl_ring_attach(&dev_in, a_dev, len);
    ofl_ring_attach(&dev_out, b_dev, len);
    ofl_ring_attach(&cons, b_host, len);
    ofl_ring_commit(&prod, 4);
    CHECK(ofl_bridge_poll(&p.bc) == 4, "the client's first message carries 4 entries");
    ofl_ring_commit(&dev_out, 3);
    double end = now() + 30;
    while ((ofl_ring_ready(&dev_in) < 4 || ofl_ring_ready(&cons) < 3) && now() < end) {
        (void)ofl_bridge_poll(&p.bs);
        (void)ofl_bridge_poll(&p.bc);
    }
    CHECK(ofl_ring_ready(&dev_in) == 4 && ofl_ring_ready(&cons) == 3,
          "4 entries crossed one way, 3 the other");
    CHECK(!ofl_ring_broken(&prod) && !ofl_ring_broken(&cons), "nothing broken yet");
    ofl_ring_commit(&prod, 2);
    int rc = 0;
    end = now() + 30;
    while (rc >= 0 && now() < end) rc = ofl_bridge_poll(&p.bc);   /* its 2nd message lost */
    CHECK(rc == -EPIPE, "the link fails: %d", rc);
    CHECK(ofl_ring_broken_by(&prod) == OFL_RING_BROKEN_BY_CONSUMER,
          "ring A broken for its producer (%u)", ofl_ring_broken_by(&prod));
    CHECK(ofl_ring_broken_by(&cons) == OFL_RING_BROKEN_BY_PRODUCER && ofl_ring_ready(&cons) == 3,
          "ring B broken for its consumer, the 3 that came still there to take (%u, %u)",
          ofl_ring_broken_by(&cons), ofl_ring_ready(&cons));
    CHECK(p.bc.rings[0].sent == 6 && p.bc.rings[0].credit == 0,
          "the 6 handed to the link are the bridge's to count (part_undelivered): %u, %u",
          p.bc.rings[0].sent, p.bc.rings[0].credit);
    ofl_ring_commit(&prod, 1);
    CHECK(ofl_bridge_poll(&p.bc) == -EPIPE &&
              __atomic_load_n(&prod.shm->head, __ATOMIC_ACQUIRE) == 6,
          "one committed after it is never sent: its producer counts it");
    close_pair(&p);
    free(a_host), free(a_dev), free(b_dev), free(b_host);
}

/* At the run's end each entry is counted once: the device's consumer took 1 of the 6
 * that came (below a quarter of the ring: no credit yet), then failed; its last credit
 * goes anyway (ofl_bridge_credit_all), the 5 it never took are the bridge's to count
 * (ofl_bridge_untaken), and of the 3 its producer published, the 2 never sent are
 * ofl_bridge_unsent's. A ring nobody broke is marked broken by the bridge, its
 * consumer's to count (queue.h), unless that consumer is gone. */
static void test_end_counts(void)
{
    enum { ENTRY = 64 };
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(8, ENTRY, 1, 0, &len), *a_dev = ring_mem(8, ENTRY, 1, 0, &len);
    void *b_dev = ring_mem(8, ENTRY, 1, 0, &len), *b_host = ring_mem(8, ENTRY, 1, 0, &len);
    void *c_host = ring_mem(8, ENTRY, 1, 0, &len), *c_dev = ring_mem(8, ENTRY, 1, 0, &len);
    ofl_bridge_add(&p.bc, a_host, len, true);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    ofl_bridge_add(&p.bc, b_host, len, false);
    ofl_bridge_add(&p.bs, b_dev, len, true);
    ofl_bridge_add(&p.bc, c_host, len, true);
    ofl_bridge_add(&p.bs, c_dev, len, false);
    struct ofl_ring prod, dev_in, dev_out, prod_c, dev_c;
    ofl_ring_attach(&prod, a_host, len);
    ofl_ring_attach(&dev_in, a_dev, len);
    ofl_ring_attach(&dev_out, b_dev, len);
    ofl_ring_attach(&prod_c, c_host, len);
    ofl_ring_attach(&dev_c, c_dev, len);
    ofl_ring_commit(&prod, 6);
    ofl_ring_commit(&prod_c, 2);
    double end = now() + 30;
    while ((ofl_ring_ready(&dev_in) < 6 || ofl_ring_ready(&dev_c) < 2) && now() < end) {
        (void)ofl_bridge_poll(&p.bc);
        (void)ofl_bridge_poll(&p.bs);
    }
    CHECK(ofl_ring_ready(&dev_in) == 6 && ofl_ring_ready(&dev_c) == 2, "6 and 2 crossed");
    ofl_ring_release(&dev_in, 1);
    ofl_ring_break(&dev_in);   /* the device's consumer failed */
    ofl_ring_commit(&dev_out, 1);
    for (int k = 0; k < 20; k++) (void)ofl_bridge_poll(&p.bs), (void)ofl_bridge_poll(&p.bc);
    ofl_ring_commit(&dev_out, 2);
    CHECK(p.bc.rings[0].credit == 0, "1 taken of 8 is not credited by a poll");
    CHECK(ofl_bridge_credit_all(&p.bs) == 0, "the last credit goes");
    end = now() + 30;
    while (p.bc.rings[0].credit != 1 && now() < end) (void)ofl_bridge_poll(&p.bc);
    CHECK(p.bc.rings[0].credit == 1, "it says the 1 taken: %u", p.bc.rings[0].credit);
    CHECK(ofl_bridge_unsent(&p.bs) == 2, "2 published there never sent: %llu",
          (unsigned long long)ofl_bridge_unsent(&p.bs));
    CHECK(ofl_bridge_untaken(&p.bs, false) == 5, "5 came and were never taken");
    CHECK(ofl_ring_broken_by(&dev_c) == OFL_RING_BROKEN_BY_PRODUCER,
          "ring C, nobody's broken yet, is marked by the bridge: its consumer counts");
    CHECK(ofl_bridge_untaken(&p.bs, true) == 5,
          "once marked, C is its consumer's to count even when it is gone");
    close_pair(&p);
    free(a_host), free(a_dev), free(b_dev), free(b_host), free(c_host), free(c_dev);
}

/* What the far end never took is counted once, whichever end left first: ring A (its
 * producer still running) holds 4 sent and 2 published and unsent: all 6 are the
 * bridge's while nobody marked it; once the bridge breaks it, only the 4 sent, and a
 * commit after the break (the producer had found the ring whole just before) is its
 * producer's, as are the 2 (tail - head: queue.h), not the bridge's. Ring C's producer
 * broke it first, after 2 sent and 3 published: the bridge's break leaves that mark,
 * and all 5 are the bridge's (its producer counted only what it never published). */
static void test_undelivered_by_first_mark(void)
{
    enum { ENTRY = 64 };
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_host = ring_mem(8, ENTRY, 1, 0, &len), *a_dev = ring_mem(8, ENTRY, 1, 0, &len);
    void *c_host = ring_mem(8, ENTRY, 1, 0, &len), *c_dev = ring_mem(8, ENTRY, 1, 0, &len);
    ofl_bridge_add(&p.bc, a_host, len, true);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    ofl_bridge_add(&p.bc, c_host, len, true);
    ofl_bridge_add(&p.bs, c_dev, len, false);
    struct ofl_ring prod_a, prod_c;
    ofl_ring_attach(&prod_a, a_host, len);
    ofl_ring_attach(&prod_c, c_host, len);
    ofl_ring_commit(&prod_a, 4);
    ofl_ring_commit(&prod_c, 2);
    CHECK(ofl_bridge_poll(&p.bc) == 6, "4 and 2 sent");
    ofl_ring_commit(&prod_a, 2);
    ofl_ring_commit(&prod_c, 3);
    CHECK(ofl_bridge_undelivered(&p.bc) == 11, "unmarked: every entry published is the "
          "bridge's: %llu", (unsigned long long)ofl_bridge_undelivered(&p.bc));
    CHECK(ofl_ring_break_by(&prod_c, OFL_RING_BROKEN_BY_PRODUCER) == OFL_RING_BROKEN_BY_PRODUCER,
          "C's producer breaks it first");
    ofl_bridge_break(&p.bc);
    CHECK(ofl_ring_broken_by(&prod_a) == OFL_RING_BROKEN_BY_CONSUMER &&
              ofl_ring_broken_by(&prod_c) == OFL_RING_BROKEN_BY_PRODUCER,
          "the bridge's mark stands on A, the producer's on C");
    ofl_ring_commit(&prod_a, 1);   /* a commit racing the break */
    CHECK(ofl_bridge_undelivered(&p.bc) == 4 + 5, "A's 4 sent and C's 5 published: %llu",
          (unsigned long long)ofl_bridge_undelivered(&p.bc));
    CHECK(__atomic_load_n(&prod_a.shm->tail, __ATOMIC_ACQUIRE) -
                  __atomic_load_n(&prod_a.shm->head, __ATOMIC_ACQUIRE) == 3,
          "A's 3 never sent are its producer's (tail - head)");
    close_pair(&p);
    free(a_host), free(a_dev), free(c_host), free(c_dev);
}

/* Entries that arrive for a ring its local consumer broke (it failed) are not committed
 * there, counted in dropped_in; the bridge goes on (not a bad message). */
static void test_entries_for_a_broken_ring(void)
{
    enum { ENTRY = 64 };
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *b_dev = ring_mem(8, ENTRY, 1, 0, &len), *b_host = ring_mem(8, ENTRY, 1, 0, &len);
    ofl_bridge_add(&p.bc, b_host, len, false);
    ofl_bridge_add(&p.bs, b_dev, len, true);
    struct ofl_ring dev_out, cons;
    ofl_ring_attach(&dev_out, b_dev, len);
    ofl_ring_attach(&cons, b_host, len);
    ofl_ring_break(&cons);   /* the host's consumer failed */
    ofl_ring_commit(&dev_out, 3);
    int rc = 0;
    double end = now() + 30;
    while (rc >= 0 && p.bc.dropped_in < 3 && now() < end) {
        (void)ofl_bridge_poll(&p.bs);
        rc = ofl_bridge_poll(&p.bc);
    }
    CHECK(rc >= 0 && p.bc.bad == 0, "the bridge goes on: %d %s", rc, p.bc.err);
    CHECK(p.bc.dropped_in == 3 && __atomic_load_n(&cons.shm->tail, __ATOMIC_ACQUIRE) == 0,
          "the 3 entries counted, none committed (%llu)", (unsigned long long)p.bc.dropped_in);
    close_pair(&p);
    free(b_dev), free(b_host);
}

/* Entries within the credit are taken even when the ring handle's cached view of the
 * consumer's head is stale: the ring refreshes it only below one doorbell batch free,
 * and a message may bring more than what the cache shows free. */
static void test_stale_head(void)
{
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    size_t len;
    void *a_dev = ring_mem(64, 64, 4, 0, &len);
    ofl_bridge_add(&p.bs, a_dev, len, false);
    struct ofl_ring dev;
    ofl_ring_attach(&dev, a_dev, len);
    static uint8_t body[64 * 64];
    uint32_t first[4] = {0, 56, 0, 0}, second[4] = {0, 16, 0, 56};
    CHECK(ofl_link_send(p.cli, OFL_LINK_KIND_USER, first, sizeof first, body, 56 * 64) == 0,
          "the peer sends 56 entries");
    double end = now() + 30;
    while (ofl_ring_ready(&dev) < 56 && now() < end) ofl_bridge_poll(&p.bs);
    ofl_ring_release(&dev, ofl_ring_ready(&dev));   /* the consumer takes them all */
    CHECK(ofl_link_send(p.cli, OFL_LINK_KIND_USER, second, sizeof second, body, 16 * 64) == 0,
          "then 16 more: within the ring's 64 now free, beyond the 8 a stale cache shows");
    int rc = 0;
    end = now() + 30;
    while (rc >= 0 && ofl_ring_ready(&dev) < 16 && now() < end) rc = ofl_bridge_poll(&p.bs);
    CHECK(rc >= 0 && ofl_ring_ready(&dev) == 16 && p.bs.bad == 0, "taken (%s)", p.bs.err);
    close_pair(&p);
    free(a_dev);
}

/* An idle link beats both ways; a peer that stops answering (alive, connected,
 * silent) fails the link. (No check that an answering peer stays up for a time: that
 * would be a timing assertion on a loaded machine.) */
static void test_silent_peer(void)
{
    struct pair p;
    CHECK(connect_pair(&p) == 0, "a bridged pair comes up");
    double end = now() + 30;   /* the limit set by connect_pair: beats every 1.25 s */
    while ((ofl_link_beats(p.cli) < 2 || ofl_link_beats(p.srv) < 2) && now() < end) {
        ofl_link_progress(p.cli);
        ofl_link_progress(p.srv);
    }
    CHECK(ofl_link_beats(p.cli) >= 2 && ofl_link_beats(p.srv) >= 2,
          "an idle link beats both ways (%llu, %llu)", (unsigned long long)ofl_link_beats(p.cli),
          (unsigned long long)ofl_link_beats(p.srv));
    ofl_link_set_silence(p.cli, 200);
    end = now() + 30;   /* the server is no longer stepped: silent */
    while (ofl_link_progress(p.cli) == OFL_LINK_UP && now() < end) {
    }
    CHECK(ofl_link_progress(p.cli) == OFL_LINK_FAILED &&
              strstr(ofl_link_error(p.cli), "stopped answering"),
          "the client notices the silent peer: %s", ofl_link_error(p.cli));
    CHECK(ofl_bridge_poll(&p.bc) == -EPIPE, "its bridge says so");
    close_pair(&p);
}

static ucs_status_t ignore(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    (void)arg, (void)hdr, (void)hlen, (void)data, (void)len, (void)param;
    return UCS_OK;
}

/* A peer that connects (UCX) but never proves the secret is refused once the limit
 * passes, freeing its slot: a proper client then comes up. */
static void test_unproven_peer(void)
{
    char err[256] = "";
    struct seen seen = {0};
    struct ofl_link *srv, *cli;
    if (ofl_link_listen(&srv, "127.0.0.1", 0, SECRET, sizeof SECRET, record, &seen, err,
                        sizeof err)) {
        CHECK(0, "listen: %s", err);
        return;
    }
    ofl_link_set_silence(srv, 200);
    /* the silent peer: plain UCX, an endpoint to the port, no handshake */
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_config_t *config;
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_ep_h ep;
    ucp_config_read(NULL, NULL, &config);
    ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_worker_create(ctx, &wp, &w);
    for (uint32_t k = 1; k < OFL_LINK_KIND_USER; k++) {   /* it takes the challenge */
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB,
            .id = k, .cb = ignore};
        ucp_worker_set_am_recv_handler(w, &hp);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ofl_link_port(srv))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ucp_ep_params_t ep_p = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (const struct sockaddr *)&sa, .addrlen = sizeof sa},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    CHECK(ucp_ep_create(w, &ep_p, &ep) == UCS_OK, "a plain UCX endpoint connects");
    double end = now() + 30;
    while (ofl_link_refused(srv) == 0 && now() < end) {
        ucp_worker_progress(w);
        ofl_link_progress(srv);
    }
    CHECK(ofl_link_refused(srv) == 1 && ofl_link_progress(srv) == OFL_LINK_WAITING,
          "the server refuses it after the limit and waits on");
    ofl_link_set_silence(srv, 10000);
    int rc = ofl_link_connect(&cli, "127.0.0.1", ofl_link_port(srv), SECRET, sizeof SECRET,
                              record, &seen, err, sizeof err);
    CHECK(rc == 0 && until(cli, OFL_LINK_UP, srv, OFL_LINK_UP), "then a client comes up");
    CHECK(seen.n == 0, "nothing reached a handler");
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &cp);
    if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(w);
        ucp_request_free(r);
    }
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    if (!rc) {
        close_both(cli, srv);
    } else {
        ofl_link_close(srv);
    }
}

/* ---- two processes (tests/test_remote_c.py runs them in two network namespaces) ---- */

static size_t read_secret(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* serve ADDR SECRET_FILE N: take N entries of one ring from the peer, check each, print
 * "port P" first and "got N" at the end. client ADDR PORT SECRET_FILE N: send them
 * (N 0: forever), printing "up" once connected; a failure prints the link's error and
 * the entries sent so far, and exits 3. */
static int two_process(int argc, char **argv)
{
    enum { SIZE = 256, ENTRY = 64 };
    bool serve = !strcmp(argv[1], "serve");
    if (argc != (serve ? 5 : 6)) return 2;
    uint8_t secret[OFL_AUTH_SECRET_MAX];
    size_t slen = read_secret(argv[serve ? 3 : 4], secret, sizeof secret);
    unsigned long n = strtoul(argv[serve ? 4 : 5], NULL, 10);
    struct ofl_bridge b;
    struct ofl_link *l;
    char err[256] = "";
    ofl_bridge_init(&b, NULL, 32);
    int rc = serve ? ofl_link_listen(&l, argv[2], 0, secret, slen, ofl_bridge_on_msg, &b, err,
                                     sizeof err)
                   : ofl_link_connect(&l, argv[2], (uint16_t)atoi(argv[3]), secret, slen,
                                      ofl_bridge_on_msg, &b, err, sizeof err);
    if (rc) {
        printf("error: %s\n", err);
        return 3;
    }
    b.link = l;
    ofl_link_set_silence(l, 5000);   /* generous on a loaded machine; a kill resets TCP */
    size_t len;
    void *mem = ring_mem(SIZE, ENTRY, 16, 0, &len);
    ofl_bridge_add(&b, mem, len, !serve);
    struct ofl_ring r;
    ofl_ring_attach(&r, mem, len);
    if (serve) printf("port %u\n", ofl_link_port(l));
    fflush(stdout);
    unsigned long done = 0;
    bool said_up = false;
    int status = 0;
    while (!(serve ? ofl_ring_finished(&r) : ofl_bridge_done(&b))) {
        int moved = ofl_bridge_poll(&b);
        if (moved < 0) {
            printf("error: %s%s; %lu entries %s\n", ofl_link_error(l), b.err, done,
                   serve ? "received" : "sent");
            status = 3;
            break;
        }
        if (!said_up && ofl_link_progress(l) == OFL_LINK_UP) {
            said_up = true;
            if (!serve) printf("up\n");
            fflush(stdout);
        }
        if (serve) {
            uint32_t k = ofl_ring_ready(&r);
            for (uint32_t i = 0; i < k; i++) {
                const uint8_t *e = ofl_ring_peek(&r, i);
                uint64_t v;
                memcpy(&v, e + 8, 8);
                if (v != done + i) {
                    printf("error: entry %lu says %llu\n", done + i, (unsigned long long)v);
                    return 4;
                }
            }
            ofl_ring_release(&r, k);
            done += k;
        } else if (said_up) {
            uint32_t f = ofl_ring_free(&r);
            uint32_t k = 0;
            for (; k < f && (n == 0 || done + k < n); k++) {
                uint64_t v = done + k;
                memcpy((uint8_t *)ofl_ring_slot(&r, k) + 8, &v, 8);
            }
            if (k) ofl_ring_commit(&r, k);
            done += k;
            if (n && done == n && !r.shm->closed) ofl_ring_close(&r);
        }
    }
    if (!status && serve) {   /* the last credit: the sender then knows all arrived */
        ofl_bridge_poll(&b);
        printf("got %lu\n", done);
    } else if (!status) {
        printf("sent %lu\n", done);
    }
    ofl_link_close(l);
    ofl_bridge_free(&b);
    free(mem);
    return status;
}

/* A message the device sends right after its welcome, arriving in the same progress
 * call as the welcome, reaches the client's handler (it was dropped as
 * unauthenticated: the client checked the welcome only after the call). */
static void test_message_after_welcome(void)
{
    char err[256] = "";
    struct seen srv_seen = {0}, cli_seen = {0};
    struct ofl_link *srv, *cli;
    if (ofl_link_listen(&srv, "127.0.0.1", 0, SECRET, sizeof SECRET, record, &srv_seen, err,
                        sizeof err) ||
        ofl_link_connect(&cli, "127.0.0.1", ofl_link_port(srv), SECRET, sizeof SECRET, record,
                         &cli_seen, err, sizeof err)) {
        CHECK(0, "listen and connect: %s", err);
        return;
    }
    /* step the server until it is up (it sent its welcome), the client only before */
    double end = now() + 30;
    while (ofl_link_progress(srv) != OFL_LINK_UP && now() < end) ofl_link_progress(cli);
    CHECK(ofl_link_progress(srv) == OFL_LINK_UP, "the server is up");
    CHECK(ofl_link_send(srv, OFL_LINK_KIND_USER + 1, NULL, 0, "ready", 5) == 0,
          "it sends at once");
    for (int i = 0; i < 100; i++) ofl_link_progress(srv);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);   /* both are in the client's socket: one progress call takes them */
    CHECK(ofl_link_progress(cli) == OFL_LINK_UP, "the client comes up");
    end = now() + 30;
    while (cli_seen.n == 0 && now() < end) ofl_link_progress(cli);
    CHECK(cli_seen.n == 1 && cli_seen.kind == OFL_LINK_KIND_USER + 1 &&
              ofl_link_unauth_drops(cli) == 0,
          "the message after the welcome is delivered, none dropped (%d, %llu dropped)",
          cli_seen.n, (unsigned long long)ofl_link_unauth_drops(cli));
    close_both(cli, srv);
}

/* A message UCX took and could not deliver (the test hook: the 2nd user message) fails
 * the link, counted, instead of leaving a hole in what the peer receives. */
static void test_lost_send(void)
{
    char err[256] = "";
    struct seen srv_seen = {0}, cli_seen = {0};
    struct ofl_link *srv, *cli;
    int rc = ofl_link_listen(&srv, "127.0.0.1", 0, SECRET, sizeof SECRET, record, &srv_seen,
                             err, sizeof err);
    setenv("OFFLOW_REMOTE_TEST_SEND_FAIL", "2", 1);   /* (read when the link is made) */
    if (!rc) rc = ofl_link_connect(&cli, "127.0.0.1", ofl_link_port(srv), SECRET,
                                   sizeof SECRET, record, &cli_seen, err, sizeof err);
    unsetenv("OFFLOW_REMOTE_TEST_SEND_FAIL");
    if (rc) {
        CHECK(0, "listen and connect: %s", err);
        return;
    }
    ofl_link_set_silence(srv, 10000);
    ofl_link_set_silence(cli, 10000);
    CHECK(until(cli, OFL_LINK_UP, srv, OFL_LINK_UP), "both come up");
    CHECK(ofl_link_send(cli, OFL_LINK_KIND_USER, NULL, 0, "one", 3) == 0, "the first goes");
    ofl_link_send(cli, OFL_LINK_KIND_USER, NULL, 0, "two", 3);   /* lost */
    CHECK(ofl_link_progress(cli) == OFL_LINK_FAILED && ofl_link_lost_sends(cli) == 1 &&
              strstr(ofl_link_error(cli), "a message to the peer was lost"),
          "the lost message fails the link, counted (%llu): %s",
          (unsigned long long)ofl_link_lost_sends(cli), ofl_link_error(cli));
    CHECK(ofl_link_send(cli, OFL_LINK_KIND_USER, NULL, 0, "three", 5) == -EPIPE,
          "nothing is sent after it");
    double end = now() + 30;
    while (srv_seen.n == 0 && now() < end) ofl_link_progress(srv);
    CHECK(srv_seen.n == 1 && ofl_link_lost_sends(srv) == 0, "the peer got the first only (%d)",
          srv_seen.n);
    close_both(cli, srv);
}

int main(int argc, char **argv)
{
    if (argc > 1) return two_process(argc, argv);
    test_auth();
    test_handshake();
    test_bulk_messages();
    test_rings();
    test_bad_message();
    test_link_failure_breaks_rings();
    test_entries_for_a_broken_ring();
    test_end_counts();
    test_undelivered_by_first_mark();
    test_bad_len_out();
    test_stale_head();
    test_silent_peer();
    test_unproven_peer();
    test_message_after_welcome();
    test_lost_send();
    return CHECK_DONE();
}
