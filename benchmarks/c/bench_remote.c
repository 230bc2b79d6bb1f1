/* `offlow bench remote`'s driver (benchmarks/remote.py): the remote target's transport
 * (runtime/lib/remote) between two processes, each run by the bench in a network
 * namespace of its own.
 *
 *   bench_remote serve ADDR SECRET_FILE MODE ARGS...       (prints "port P" first)
 *   bench_remote client ADDR PORT SECRET_FILE MODE ARGS...
 *
 * MODE ring N ENTRY BATCH RING: the client produces N entries of ENTRY bytes into a
 * ring of RING entries that a bridge (remote_bridge.h) carries, BATCH entries a message
 * at most, to the server's ring, whose consumer checks every entry (its index, its len
 * and its first and last payload byte). The client times from its first commit until
 * the far consumer released the last entry (the bridge is done).
 *
 * MODE rtt ITERS SIZE WARM: the client sends a message of SIZE bytes over the link
 * (remote_link.h), the server sends it back, WARM times unmeasured then ITERS times
 * timed; the client checks each answer (its number and bytes).
 *
 * Each side prints one JSON line at its end, or "error: ..." and exits 3. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/remote_auth.h"
#include "offlow/remote_bridge.h"
#include "offlow/remote_link.h"
#include "offlow/ring.h"

#define DATA_OFF 16               /* entry: header, its index (8 bytes), then payload */
#define KIND_PING (OFL_LINK_KIND_USER + 1)
#define MAX_MSG (1u << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t read_secret(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* The ring mode's side. Returns the exit status. */
static int ring_side(struct ofl_link *l, struct ofl_bridge *b, bool serve, unsigned long n,
                     uint32_t entry, uint32_t batch, uint32_t size)
{
    size_t len = ofl_ring_mem_size(size, entry);
    void *mem = aligned_alloc(64, (len + 63) & ~(size_t)63);
    if (!mem || ofl_ring_format(mem, len, size, entry, batch, DATA_OFF) ||
        ofl_bridge_add(b, mem, len, !serve)) {
        printf("error: bad ring geometry (%u entries of %u bytes, batch %u)\n", size, entry,
               batch);
        free(mem);
        return 2;
    }
    struct ofl_ring r;
    ofl_ring_attach(&r, mem, len);
    if (serve) printf("port %u\n", ofl_link_port(l));
    fflush(stdout);
    uint32_t plen = entry - DATA_OFF;
    unsigned long done = 0, bad = 0;
    double t0 = 0, t1 = 0;
    int status = 0;
    while (!(serve ? ofl_ring_finished(&r) : ofl_bridge_done(b))) {
        if (ofl_bridge_poll(b) < 0) {
            printf("error: %s%s; %lu entries %s\n", ofl_link_error(l), b->err, done,
                   serve ? "received" : "sent");
            status = 3;
            break;
        }
        if (serve) {
            uint32_t k = ofl_ring_ready(&r);
            for (uint32_t i = 0; i < k; i++) {
                const uint8_t *e = ofl_ring_peek(&r, i);
                uint64_t v;
                if (!e) {
                    bad++;
                    continue;
                }
                memcpy(&v, e + 8, 8);
                uint8_t want = (uint8_t)(v & 0xff);
                if (v != done + i || ((const struct ofl_entry_hdr *)e)->len != plen ||
                    (plen && (e[DATA_OFF] != want || e[entry - 1] != want)))
                    bad++;
            }
            if (k) ofl_ring_release(&r, k);
            done += k;
        } else if (ofl_link_progress(l) == OFL_LINK_UP) {
            if (t0 == 0) t0 = now();
            uint32_t f = ofl_ring_free(&r), k = 0;
            for (; k < f && done + k < n; k++) {
                uint8_t *e = ofl_ring_slot(&r, k);
                uint64_t v = done + k;
                ((struct ofl_entry_hdr *)e)->len = (uint16_t)plen;
                memcpy(e + 8, &v, 8);
                memset(e + DATA_OFF, (int)(v & 0xff), plen);
            }
            if (k) ofl_ring_commit(&r, k);
            done += k;
            if (done == n && !r.shm->closed) ofl_ring_close(&r);
        }
    }
    t1 = now();
    if (!status && serve) {
        ofl_bridge_poll(b);   /* the last credit: the sender then knows all arrived */
        printf("{\"received\": %lu, \"bad\": %lu, \"msgs_in\": %llu}\n", done, bad,
               (unsigned long long)b->msgs_in);
    } else if (!status) {
        printf("{\"sent\": %lu, \"secs\": %.9f, \"msgs_out\": %llu}\n", done, t1 - t0,
               (unsigned long long)b->msgs_out);
    }
    free(mem);
    return status;
}

/* The rtt mode's received message (the handler may not send: the loop answers). */
struct ping {
    bool got;
    uint64_t num;
    size_t len;
    uint8_t data[MAX_MSG];
};

static void on_ping(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                    size_t len)
{
    struct ping *p = arg;
    if (kind != KIND_PING || hlen != 8 || len > MAX_MSG) return;
    memcpy(&p->num, hdr, 8);
    memcpy(p->data, data, len);
    p->len = len;
    p->got = true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Wait for the next message; false when the link failed. */
static bool wait_ping(struct ofl_link *l, struct ping *p)
{
    while (!p->got)
        if (ofl_link_progress(l) == OFL_LINK_FAILED) return false;
    p->got = false;
    return true;
}

static int rtt_side(struct ofl_link *l, struct ping *p, bool serve, unsigned long iters,
                    size_t size, unsigned long warm)
{
    if (serve) printf("port %u\n", ofl_link_port(l));
    fflush(stdout);
    unsigned long total = iters + warm, k = 0, bad = 0;
    uint64_t *ns = serve ? NULL : calloc(iters ? iters : 1, sizeof *ns);
    uint8_t *msg = calloc(size ? size : 1, 1);
    int status = 0;
    if ((!serve && !ns) || !msg) {
        printf("error: out of memory\n");
        status = 2;
    }
    for (enum ofl_link_state st; !status && !serve && (st = ofl_link_progress(l)) != OFL_LINK_UP;)
        if (st == OFL_LINK_FAILED) status = 3;
    for (; !status && k < total; k++) {
        if (serve) {
            if (!wait_ping(l, p) ||
                ofl_link_send(l, KIND_PING, &p->num, 8, p->data, p->len) < 0)
                status = 3;
            continue;
        }
        memset(msg, (int)(k & 0xff), size);
        uint64_t num = k;
        double t0 = now();
        if (ofl_link_send(l, KIND_PING, &num, 8, msg, size) < 0 || !wait_ping(l, p)) {
            status = 3;
            break;
        }
        double t1 = now();
        if (p->num != k || p->len != size || (size && (p->data[0] != msg[0] ||
                                                       p->data[size - 1] != msg[0])))
            bad++;
        if (k >= warm) ns[k - warm] = (uint64_t)((t1 - t0) * 1e9);
    }
    if (status == 3) {
        printf("error: %s; %lu messages %s\n", ofl_link_error(l), k,
               serve ? "answered" : "sent");
    } else if (!status && serve) {
        printf("{\"answered\": %lu}\n", k);
    } else if (!status) {
        qsort(ns, iters, sizeof *ns, cmp_u64);
        double sum = 0;
        for (unsigned long i = 0; i < iters; i++) sum += (double)ns[i];
        printf("{\"answered\": %lu, \"bad\": %lu, \"rtt_p50_ns\": %llu, \"rtt_p99_ns\": %llu, "
               "\"rtt_avg_ns\": %.1f}\n", k, bad,
               (unsigned long long)(iters ? ns[iters / 2] : 0),
               (unsigned long long)(iters ? ns[iters * 99 / 100] : 0),
               iters ? sum / (double)iters : 0.0);
    }
    free(ns);
    free(msg);
    return status;
}

int main(int argc, char **argv)
{
    bool serve = argc > 1 && !strcmp(argv[1], "serve");
    int m = serve ? 4 : 5;   /* argv[m]: the mode */
    bool ring = argc > m && !strcmp(argv[m], "ring"), rtt = argc > m && !strcmp(argv[m], "rtt");
    if (argc < 2 || (!serve && strcmp(argv[1], "client")) || !(ring || rtt) ||
        argc != m + (ring ? 5 : 4)) {
        fprintf(stderr, "usage: bench_remote serve ADDR SECRET_FILE ring|rtt ARGS | client "
                        "ADDR PORT SECRET_FILE ring|rtt ARGS (see its source)\n");
        return 2;
    }
    uint8_t secret[OFL_AUTH_SECRET_MAX];
    size_t slen = read_secret(argv[serve ? 3 : 4], secret, sizeof secret);
    unsigned long a1 = strtoul(argv[m + 1], NULL, 10), a2 = strtoul(argv[m + 2], NULL, 10),
                  a3 = strtoul(argv[m + 3], NULL, 10);
    struct ofl_bridge b;
    static struct ping p;
    ofl_link_handler fn = ring ? ofl_bridge_on_msg : on_ping;
    void *arg = ring ? (void *)&b : (void *)&p;
    if (ring && ofl_bridge_init(&b, NULL, (uint32_t)a3)) return 2;
    struct ofl_link *l;
    char err[256] = "";
    int rc = serve ? ofl_link_listen(&l, argv[2], 0, secret, slen, fn, arg, err, sizeof err)
                   : ofl_link_connect(&l, argv[2], (uint16_t)atoi(argv[3]), secret, slen, fn,
                                      arg, err, sizeof err);
    if (rc) {
        printf("error: %s\n", err);
        return 3;
    }
    b.link = l;
    ofl_link_set_silence(l, 5000);   /* generous on a loaded machine; a kill resets TCP */
    int status = ring ? ring_side(l, &b, serve, a1, (uint32_t)a2, (uint32_t)a3,
                                  (uint32_t)strtoul(argv[m + 4], NULL, 10))
                      : rtt_side(l, &p, serve, a1, a2, a3);
    ofl_link_close(l);
    if (ring) ofl_bridge_free(&b);
    return status;
}
