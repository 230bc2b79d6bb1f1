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
 * MODE bulk SIZE COUNT DIR: a bulk channel across the link as a remote device's run
 * carries it (runtime/tools/remote_chan.h): the client is the host (a user thread on
 * side A of a channel in a region of its own, the link's end serving side B), the
 * server the device (its end serving side A, a user thread on side B). DIR up: the
 * host sends COUNT transfers of SIZE bytes, the device answers with a direct message
 * once it has them all; down: the host sends a direct message, the device sends
 * COUNT transfers. The client times from its first call to its last; the receiving
 * user checks each transfer's size and its first and last bytes (its number), and the
 * CRC32C is checked on every hop as in a run.
 *
 * Each side prints one JSON line at its end, or "error: ..." and exits 3. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
#include "remote_chan.h"

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

/* The bulk mode's user of the channel (its own thread: its calls block). */
struct user {
    struct ofl_chan_end e;
    bool host, send;          /* side A (the host) / the sender of the transfers */
    size_t size;
    unsigned long count, done, bad;
    double t0, t1;
    int rc;
    volatile int finished;
};

#define USER_NS 60000000000ull   /* each call's timeout: generous on a loaded machine */

static void *user_main(void *arg)
{
    struct user *u = arg;
    uint8_t *buf = malloc(u->size ? u->size : 1);
    uint64_t word = 0;
    int rc = buf ? 0 : -ENOMEM;
    if (buf) memset(buf, 0x5a, u->size);
    u->t0 = now();
    if (!rc && u->host && !u->send)        /* the receiving host asks for the transfers */
        rc = ofl_chan_send(&u->e, &word, sizeof word, USER_NS);
    else if (!rc && !u->host && u->send)   /* the sending device waits for the ask */
        rc = ofl_chan_recv(&u->e, &word, sizeof word, USER_NS) < 0 ? -EPROTO : 0;
    for (unsigned long i = 0; !rc && i < u->count; i++) {
        uint8_t mark = (uint8_t)(i * 37 + 1);
        if (u->send) {
            buf[0] = buf[u->size - 1] = mark;
            rc = ofl_chan_bulk_send(&u->e, buf, u->size, USER_NS);
        } else {
            rc = ofl_chan_bulk_recv(&u->e, buf, u->size, USER_NS);
            if (!rc && (buf[0] != mark || buf[u->size - 1] != mark)) u->bad++;
        }
        if (!rc) u->done++;
    }
    if (!rc && u->host && u->send) {       /* the device says it has them all */
        int n = ofl_chan_recv(&u->e, &word, sizeof word, USER_NS);
        rc = n < 0 ? n : 0;
    } else if (!rc && !u->host && !u->send) {
        word = u->done;
        rc = ofl_chan_send(&u->e, &word, sizeof word, USER_NS);
    }
    u->t1 = now();
    u->rc = rc;
    free(buf);
    __atomic_store_n(&u->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void on_chan(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                    size_t len)
{
    struct part_chans *pc = arg;
    if (pc->mgr) part_chans_on_msg(pc, kind, hdr, hlen, data, len);
}

static int bulk_side(struct ofl_link *l, struct part_chans *pc, bool serve, size_t size,
                     unsigned long count, bool up)
{
    size_t rsize = ofl_chan_region_size(1);
    void *region = aligned_alloc(4096, rsize);
    int id = region && !ofl_chan_region_format(region, rsize, 1) ? ofl_chan_create(region, "bulk")
                                                                : -ENOMEM;
    if (id < 0 || !size) {
        printf("error: cannot make the channel region (or a size of 0)\n");
        return 2;
    }
    if (serve) printf("port %u\n", ofl_link_port(l));
    fflush(stdout);
    enum ofl_link_state st;
    while ((st = ofl_link_progress(l)) == OFL_LINK_WAITING) {
    }
    uint32_t ids[1] = {(uint32_t)id};
    static struct user u;
    u = (struct user){.host = !serve, .send = up != serve, .size = size, .count = count};
    pthread_t t;
    if (st != OFL_LINK_UP ||
        part_chans_start(pc, l, region, serve ? OFL_CHAN_A : OFL_CHAN_B, ids, 1, NULL) < 0 ||
        ofl_chan_open(&u.e, region, ids[0], serve ? OFL_CHAN_B : OFL_CHAN_A, NULL) < 0 ||
        pthread_create(&t, NULL, user_main, &u)) {
        printf("error: cannot start: %s%s\n", ofl_link_error(l), pc->err);
        return 3;
    }
    int status = 0;
    while (!__atomic_load_n(&u.finished, __ATOMIC_ACQUIRE)) {
        int moved = ofl_link_progress(l) == OFL_LINK_FAILED ? -1 : part_chans_poll(pc);
        if (moved == 0) sched_yield();   /* (the user's and the manager's threads need the CPUs) */
        if (moved < 0) {
            printf("error: %s%s; %lu transfers done\n", ofl_link_error(l), pc->err, u.done);
            status = 3;
            ofl_chan_close(&u.e);   /* (the user's call ends with EPIPE) */
            break;
        }
    }
    pthread_join(t, NULL);
    for (int i = 0; !status && i < 1000; i++) {   /* what the last call left to send */
        ofl_link_progress(l);
        part_chans_poll(pc);
    }
    if (!status && u.rc) {
        printf("error: %s; %lu transfers done\n", strerror(-u.rc), u.done);
        status = 3;
    } else if (!status) {
        printf("{\"transfers\": %lu, \"bad\": %lu, \"secs\": %.9f, \"bulk_in\": %llu, "
               "\"bulk_out\": %llu}\n", u.done, u.bad, u.t1 - u.t0,
               (unsigned long long)pc->bulk_in, (unsigned long long)pc->bulk_out);
    }
    ofl_chan_close(&u.e);
    part_chans_stop(pc);
    return status;
}

int main(int argc, char **argv)
{
    bool serve = argc > 1 && !strcmp(argv[1], "serve");
    int m = serve ? 4 : 5;   /* argv[m]: the mode */
    bool ring = argc > m && !strcmp(argv[m], "ring"), rtt = argc > m && !strcmp(argv[m], "rtt");
    bool bulk = argc > m && !strcmp(argv[m], "bulk");
    if (argc < 2 || (!serve && strcmp(argv[1], "client")) || !(ring || rtt || bulk) ||
        argc != m + (ring ? 5 : 4) ||
        (bulk && strcmp(argv[m + 3], "up") && strcmp(argv[m + 3], "down"))) {
        fprintf(stderr, "usage: bench_remote serve ADDR SECRET_FILE ring|rtt|bulk ARGS | client "
                        "ADDR PORT SECRET_FILE ring|rtt|bulk ARGS (see its source)\n");
        return 2;
    }
    uint8_t secret[OFL_AUTH_SECRET_MAX];
    size_t slen = read_secret(argv[serve ? 3 : 4], secret, sizeof secret);
    unsigned long a1 = strtoul(argv[m + 1], NULL, 10), a2 = strtoul(argv[m + 2], NULL, 10),
                  a3 = strtoul(argv[m + 3], NULL, 10);
    struct ofl_bridge b;
    static struct ping p;
    static struct part_chans pc;
    ofl_link_handler fn = ring ? ofl_bridge_on_msg : bulk ? on_chan : on_ping;
    void *arg = ring ? (void *)&b : bulk ? (void *)&pc : (void *)&p;
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
                 : bulk ? bulk_side(l, &pc, serve, a1, a2, !strcmp(argv[m + 3], "up"))
                        : rtt_side(l, &p, serve, a1, a2, a3);
    ofl_link_close(l);
    if (ring) ofl_bridge_free(&b);
    return status;
}
